//! The flow-level model: closed-form estimates over the same timed routes the TLP-level
//! network runs, for sweeps and as an independent check of the simulation.
//!
//! Zero-load latency is the sum of a route's serializations, propagations and delays (a
//! memory latency matrix's delay included, once per round trip). A stream's rate is the
//! smallest of its bottlenecks, each counted over one period of the stream's TLPs exactly
//! as the packet model cuts them (operations into TLPs of at most MPS or MRRS that never
//! cross a 4 KiB page, reads into completions of at most the RCB, a splitting root's
//! sub-reads): each wire's busy time (its TLPs' framed bytes plus the ACK/UpdateFC DLLPs
//! that the opposite direction's TLPs charge to it — DLLPs travel against the data, as on
//! a real link), each pacer, the requester's issue pace, each credit loop (credits ×
//! payload ÷ loop time), the requester's tags over the round trip, a splitting root's tags
//! and re-issue gap, the sink, and the operations allowed in flight over an operation's
//! time. What the flow model leaves out by design is queueing between streams: several
//! streams on one wire each see the wire alone here, while the packet model interleaves
//! them.

use crate::net::{coherent_bytes, Hop, Net};
use crate::pcie::{self, serialize, DLLP_PER_TLP};
use crate::time::Time;
use std::collections::BTreeMap;

/// Why a stream runs at the rate it does.
#[derive(Clone, Debug, PartialEq)]
pub struct FlowEstimate {
    pub gbps: f64,
    pub bottleneck: String,
}

/// A single stream of DMA operations as a requester runs them (`devices::DmaJob`):
/// operations of `op_bytes` at page-aligned buffer slots, at most `ops_in_flight` under
/// way (`None`: as many as it takes), each cut into TLPs of at most `max_payload` bytes
/// (MPS for writes, MRRS for reads) that never cross a 4 KiB page; reads with at most
/// `tags` requests outstanding (`None`: no window of their own); writes issued no faster
/// than `issue_ps_per_kib` (0: no pace of their own); and either no faster than the
/// device's own data path behind its DMA engine, `data_path` (ps per KiB of payload and
/// what it is: a NIC's line, an NVMe's media), when it has one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stream {
    pub write: bool,
    pub op_bytes: u64,
    pub ops_in_flight: Option<u64>,
    pub max_payload: u32,
    pub tags: Option<u32>,
    pub issue_ps_per_kib: u64,
    pub data_path: Option<(u64, &'static str)>,
    /// Whether addresses need a 4-DW request header (above 4 GiB).
    pub addr64: bool,
    /// Bytes of buffer the stream cycles over (for the IOTLB's reach); 0 when it fits any.
    pub region_bytes: u64,
}

impl Stream {
    /// Back-to-back posted writes of `payload` bytes each, as many in flight as it takes.
    pub fn writes(payload: u32, addr64: bool) -> Stream {
        Stream {
            write: true,
            op_bytes: payload.max(1) as u64,
            ops_in_flight: None,
            max_payload: payload.max(1),
            tags: None,
            issue_ps_per_kib: 0,
            data_path: None,
            addr64,
            region_bytes: 0,
        }
    }

    /// Reads of `size` bytes each with `tags` outstanding.
    pub fn reads(size: u32, tags: u32, addr64: bool) -> Stream {
        Stream {
            write: false,
            op_bytes: size.max(1) as u64,
            ops_in_flight: None,
            max_payload: size.max(1),
            tags: Some(tags),
            issue_ps_per_kib: 0,
            data_path: None,
            addr64,
            region_bytes: 0,
        }
    }

    /// One period of the stream's TLPs (write payloads or read request sizes) with the
    /// page each starts in: enough operations for the page pattern to repeat.
    fn period(&self) -> Vec<(u32, u64)> {
        let op = self.op_bytes.max(1);
        let slots = self.ops_in_flight.unwrap_or(u64::MAX).max(1);
        let ops = (4096 / gcd(op, 4096)).clamp(1, 64).min(slots);
        let limit = self.max_payload.max(1) as u64;
        let mut v = Vec::new();
        for k in 0..ops {
            let base = (k % slots) * op;
            let mut done = 0;
            while done < op {
                let addr = base + done;
                let n = (op - done).min(limit).min(4096 - (addr & 0xfff));
                v.push((n as u32, addr >> 12));
                done += n;
            }
        }
        v
    }

    /// Pages the stream's buffer spans.
    fn region_pages(&self) -> u64 {
        self.region_bytes.div_ceil(4096)
    }
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

fn ps(t: Time) -> f64 {
    t.as_ps() as f64
}

/// Splits `bytes` into pieces of at most `size`, as the packet model does.
fn pieces(bytes: u32, size: u32) -> impl Iterator<Item = u32> {
    let size = size.max(1);
    let n = bytes.div_ceil(size).max(1);
    (0..n).map(move |i| (bytes - i * size).min(size))
}

/// The tightest bound found so far.
struct Best(FlowEstimate);

impl Best {
    fn new() -> Best {
        Best(FlowEstimate {
            gbps: f64::INFINITY,
            bottleneck: "nothing".into(),
        })
    }
    /// `bytes` moved per `busy_ps` by the mechanism `why` (evaluated only when tighter).
    fn offer(&mut self, bytes: f64, busy_ps: f64, why: impl FnOnce() -> String) {
        if busy_ps <= 0.0 {
            return;
        }
        let g = bytes / busy_ps * 1000.0;
        if g < self.0.gbps {
            self.0 = FlowEstimate {
                gbps: g,
                bottleneck: why(),
            };
        }
    }
}

/// Busy time per wire over one period, with what filled it.
#[derive(Default)]
struct WireLoad {
    busy_ps: f64,
    payload: f64,
    tlps: u64,
}

/// Credit-holding time on one wire and class over one period.
#[derive(Default)]
struct CreditLoad {
    loop_ps: f64,
    bytes: f64,
    tlps: u64,
}

/// What the first splitting root's tags are held for over one period.
struct SplitLoad {
    splitter: u32,
    pieces: u64,
    rtt_ps: f64,
}

/// One period of a stream, resource by resource.
#[derive(Default)]
struct Load {
    /// Payload bytes the period moves.
    total: f64,
    wires: BTreeMap<u32, WireLoad>,
    credit_loops: BTreeMap<(u32, usize), CreditLoad>,
    pacers: BTreeMap<u32, f64>,
    sink: Option<u32>,
    sink_ps: f64,
    issue_ps: f64,
    /// Round trips of the period's read requests, one after the other.
    rtt_ps: f64,
    split: Option<SplitLoad>,
}

impl Load {
    /// A TLP of `payload` bytes taking `busy` ps on wire `w`; on a PCIe link its ACK and
    /// UpdateFC DLLPs take their share of the opposite direction.
    fn charge(&mut self, net: &Net, w: u32, busy: f64, payload: u32) {
        let l = self.wires.entry(w).or_default();
        l.busy_ps += busy;
        l.payload += payload as f64;
        l.tlps += 1;
        let wire = net.wire(w);
        if wire.pcie {
            let d = ps(serialize(DLLP_PER_TLP, net.wire(wire.reverse).ps_per_kib));
            self.wires.entry(wire.reverse).or_default().busy_ps += d;
        }
    }

    /// A credit of `key` (wire, class) held for `loop_ps` by a TLP of `payload` bytes,
    /// where the receiver advertises a finite number.
    fn credit(&mut self, net: &Net, key: (u32, usize), loop_ps: f64, payload: u32) {
        if net.wire(key.0).credit_cap[key.1] == 0 {
            return;
        }
        let c = self.credit_loops.entry(key).or_default();
        c.loop_ps += loop_ps;
        c.bytes += payload as f64;
        c.tlps += 1;
    }
}

impl Net {
    /// Serialization of one TLP on wire `w` as the packet model charges it.
    fn tlp_ps(&self, w: u32, payload: u32, completion: bool, request: bool, addr64: bool) -> f64 {
        let w = self.wire(w);
        let bytes = if w.pcie {
            pcie::wire_bytes(payload, completion, addr64)
        } else if request {
            coherent_bytes(0)
        } else {
            coherent_bytes(payload)
        };
        ps(serialize(bytes, w.ps_per_kib))
    }

    /// Time for one TLP of `payload` bytes to travel `hops` at zero load, to the moment
    /// its sink has it (latency of the sink excluded); an IOMMU on the way misses when
    /// `iotlb_miss`.
    fn one_way(
        &self,
        hops: &[Hop],
        payload: u32,
        completion: bool,
        addr64: bool,
        iotlb_miss: bool,
    ) -> Time {
        let mut t = Time::ZERO;
        for h in hops {
            t += match *h {
                Hop::Iommu(i) => self.iotlb_cost(i, iotlb_miss),
                _ => self.zero_load_hop(h, payload, completion, addr64),
            };
        }
        t
    }

    /// What one hop charges a lone TLP of `payload` bytes (0: a read request) at zero
    /// load: a wire its serialization and propagation, a delay its time, an IOMMU an
    /// IOTLB hit; a root's splitter, a pacer and the sink nothing here.
    pub fn zero_load_hop(&self, h: &Hop, payload: u32, completion: bool, addr64: bool) -> Time {
        let request = !completion && payload == 0;
        match *h {
            Hop::Wire(w) => {
                Time::from_ps(self.tlp_ps(w, payload, completion, request, addr64) as u64)
                    + self.wire(w).latency
            }
            Hop::Delay(d) | Hop::MemoryDelay(d) => d,
            Hop::Iommu(i) => self.iotlb_cost(i, false),
            Hop::RootSplit(_) | Hop::Pace(_) | Hop::Sink(..) => Time::ZERO,
        }
    }

    fn iotlb_cost(&self, i: u32, miss: bool) -> Time {
        let (hit, miss_t, _) = self.iotlb_shape(i);
        if miss {
            miss_t
        } else {
            hit
        }
    }

    /// Zero-load latency of a posted write of `payload` bytes until it is visible, with a
    /// 4-DW header when `addr64` (the address is above 4 GiB), else 3 DW.
    pub fn zero_load_write(&self, route: u32, payload: u32, addr64: bool) -> Time {
        let hops = self.route_hops(route);
        let sink = match hops.last() {
            Some(Hop::Sink(s, ddio)) => self.sink_write_latency(*s, *ddio),
            _ => Time::ZERO,
        };
        self.one_way(hops, payload, false, addr64, false) + sink
    }

    /// Zero-load round trip of a read of `bytes`, its request with a 4-DW header when
    /// `addr64`; completions always carry 3 DW.
    pub fn zero_load_read(&self, route: u32, bytes: u32, addr64: bool) -> Time {
        self.read_rtt(route, bytes, addr64, false)
    }

    /// Round trip of one read of `bytes` alone: request out, memory, first completion
    /// back, the rest of its completions behind it on the slowest wire back.
    fn read_rtt(&self, route: u32, bytes: u32, addr64: bool, iotlb_miss: bool) -> Time {
        let hops = self.route_hops(route);
        let (sink_lat, rcb) = match hops.last() {
            Some(Hop::Sink(s, _)) => (self.sink(*s).read_latency, self.sink(*s).rcb),
            _ => (Time::ZERO, 64),
        };
        let back = self.route_hops(self.reverse_route(route));
        let cpl = bytes.min(rcb).max(1);
        let train = serialize(pcie::wire_bytes(cpl, true, addr64), self.slowest(back)).as_ps()
            * (bytes.div_ceil(cpl) as u64).saturating_sub(1);
        self.one_way(hops, 0, false, addr64, iotlb_miss)
            + sink_lat
            + self.one_way(back, cpl, true, addr64, false)
            + Time::from_ps(train)
    }

    /// Steady rate of back-to-back posted writes of `payload` bytes, with a 4-DW header
    /// when `addr64`.
    pub fn flow_write(&self, route: u32, payload: u32, addr64: bool) -> FlowEstimate {
        self.flow(route, &Stream::writes(payload, addr64))
    }

    /// Steady rate of reads of `size` bytes with `tags` outstanding, requests with a 4-DW
    /// header when `addr64`; completions of min(`size`, RCB) bytes.
    pub fn flow_read(&self, route: u32, size: u32, tags: u32, addr64: bool) -> FlowEstimate {
        self.flow(route, &Stream::reads(size, tags, addr64))
    }

    /// Steady rate of `stream` on `route` (its request direction) and what bounds it.
    pub fn flow(&self, route: u32, s: &Stream) -> FlowEstimate {
        let period = s.period();
        let load = self.period_load(route, s, &period);
        let pipe = self.pipe_bound(s, &period, &load);
        self.window_bound(route, s, &period, &load, pipe)
    }

    /// What one period of the stream puts on every resource of its way out and back.
    fn period_load(&self, route: u32, s: &Stream, period: &[(u32, u64)]) -> Load {
        let fwd = self.route_hops(route);
        let back = self.route_hops(self.reverse_route(route));
        // A cyclic walk over more pages than the IOTLB holds misses on every new page
        // (FIFO replacement); otherwise, once warm, it always hits. Such a walk leaves the
        // period's pages for new ones each time round, so the period's first TLP starts a
        // new page too (a period inside one page — 512 B reads — misses once, not never).
        let thrash = fwd.iter().any(|h| match *h {
            Hop::Iommu(i) => s.region_pages() > self.iotlb_shape(i).2 as u64,
            _ => false,
        });
        let (sink, rcb) = match fwd.last() {
            Some(Hop::Sink(x, _)) => (Some(*x), self.sink(*x).rcb),
            _ => (None, 64),
        };
        let mut l = Load {
            total: period.iter().map(|&(n, _)| n as f64).sum(),
            sink,
            ..Load::default()
        };
        for (k, &(n, page)) in period.iter().enumerate() {
            let miss = thrash && (k == 0 || page != period[k - 1].1);
            // The request (a write with its data, or a read request) down the route; for
            // a read, a splitting root turns it into sub-reads from there on.
            let mut pieces_now = vec![n];
            for (i, h) in fwd.iter().enumerate() {
                match *h {
                    Hop::Wire(w) => {
                        let class = if s.write { 0 } else { 1 };
                        for &p in &pieces_now {
                            let data = if s.write { p } else { 0 };
                            let busy = self.tlp_ps(w, data, false, !s.write, s.addr64);
                            l.charge(self, w, busy, p);
                            let tail = self.credit_tail(fwd, i, miss);
                            l.credit(self, (w, class), busy + ps(tail), p);
                        }
                    }
                    Hop::Pace(pc) => {
                        let rate = self.pacer(pc).ps_per_kib;
                        for &p in &pieces_now {
                            *l.pacers.entry(pc).or_default() += ps(serialize(p, rate));
                        }
                    }
                    Hop::RootSplit(sp) if !s.write => {
                        let (split, _, _) = self.splitter_shape(sp);
                        pieces_now = pieces_now.iter().flat_map(|&p| pieces(p, split)).collect();
                        // The first splitting root's tags: what each sub-read holds one for.
                        let first = l.split.get_or_insert(SplitLoad {
                            splitter: sp,
                            pieces: 0,
                            rtt_ps: 0.0,
                        });
                        if first.splitter == sp {
                            for &p in &pieces_now {
                                first.pieces += 1;
                                // Out from the root to the sink, and back from the
                                // sink to the root: the reverse route mirrors the
                                // forward one hop for hop (without the sink), so the
                                // root's own hop is back[len - 1 - i] and the way back
                                // to it is what lies before.
                                first.rtt_ps +=
                                    ps(self.one_way(&fwd[i + 1..], 0, false, s.addr64, false))
                                        + sink.map_or(0.0, |x| ps(self.sink(x).read_latency))
                                        + ps(self.one_way(
                                            &back[..back.len() - 1 - i],
                                            p.min(rcb),
                                            true,
                                            s.addr64,
                                            false,
                                        ));
                            }
                        }
                    }
                    _ => {}
                }
            }
            if let Some(x) = sink {
                let rate = self.sink(x).ps_per_kib;
                if rate > 0 {
                    l.sink_ps += pieces_now
                        .iter()
                        .map(|&p| ps(serialize(p, rate)))
                        .sum::<f64>();
                }
            }
            if s.write {
                if s.issue_ps_per_kib > 0 {
                    let bytes = pcie::wire_bytes(n, false, s.addr64);
                    l.issue_ps += ps(serialize(bytes, s.issue_ps_per_kib));
                }
                continue;
            }
            // Completions: each piece comes back in RCB-sized completions over the whole
            // way back (a root forwards what its sub-reads return).
            for (j, h) in back.iter().enumerate() {
                let Hop::Wire(w) = *h else { continue };
                for &p in &pieces_now {
                    for c in pieces(p, rcb) {
                        let busy = self.tlp_ps(w, c, true, false, s.addr64);
                        l.charge(self, w, busy, c);
                        let tail = self.credit_tail(back, j, false);
                        l.credit(self, (w, 2), busy + ps(tail), c);
                    }
                }
            }
            l.rtt_ps += ps(self.read_rtt(route, n, s.addr64, miss));
        }
        l
    }

    /// The tightest of the wires, credit loops, pacers, the sink, the requester's issue
    /// pace and a splitting root: what the way allows whatever the requester's windows.
    fn pipe_bound(&self, s: &Stream, period: &[(u32, u64)], l: &Load) -> FlowEstimate {
        let mut best = Best::new();
        let total = l.total;
        for (w, wl) in &l.wires {
            if wl.tlps == 0 {
                continue;
            }
            let wire = self.wire(*w);
            best.offer(total, wl.busy_ps, || {
                format!(
                    "{} at {:.0} B per TLP",
                    wire.name,
                    wl.payload / wl.tlps as f64
                )
            });
        }
        for ((w, class), cl) in &l.credit_loops {
            let wire = self.wire(*w);
            let c = wire.credit_cap[*class];
            best.offer(c as f64 * cl.bytes, cl.loop_ps, || {
                format!(
                    "{c} credits on {} over a {:.0} ns loop",
                    wire.name,
                    cl.loop_ps / cl.tlps as f64 / 1000.0
                )
            });
        }
        for (p, busy) in &l.pacers {
            let pc = self.pacer(*p);
            best.offer(total, *busy, || {
                format!("{} at {} B per TLP", pc.name, period[0].0)
            });
        }
        if let Some(x) = l.sink {
            let name = &self.sink(x).name;
            best.offer(total, l.sink_ps, || {
                format!("{name} at {} B per access", period[0].0)
            });
        }
        if s.write {
            best.offer(total, l.issue_ps, || {
                format!("the requester's issue pace at {} B per TLP", period[0].0)
            });
        }
        if let Some((pace, what)) = s.data_path.filter(|d| d.0 > 0) {
            best.offer(total, total * pace as f64 / 1024.0, || {
                format!(
                    "the device's {what} ({:.2} GB/s)",
                    1024.0 * 1000.0 / pace as f64
                )
            });
        }
        if let Some(sl) = &l.split {
            let (split, rtags, gap) = self.splitter_shape(sl.splitter);
            let n = sl.pieces.max(1) as f64;
            best.offer(rtags as f64 * total, sl.rtt_ps, || {
                format!(
                    "root re-issues reads as {split} B with {rtags} tags over a {:.0} ns round trip",
                    sl.rtt_ps / n / 1000.0
                )
            });
            if gap > Time::ZERO {
                best.offer(total, sl.pieces as f64 * ps(gap), || {
                    format!(
                        "root re-issues reads as {split} B at most one per {:.1} ns",
                        ps(gap) / 1000.0
                    )
                });
            }
        }
        best.0
    }

    /// The requester's own windows on top of the pipe: its read tags and the operations
    /// it keeps under way, whichever holds fewer requests in flight.
    fn window_bound(
        &self,
        route: u32,
        s: &Stream,
        period: &[(u32, u64)],
        l: &Load,
        pipe: FlowEstimate,
    ) -> FlowEstimate {
        let mut best = Best(pipe.clone());
        let rtt_avg = l.rtt_ps / period.len() as f64;
        let per_op = s.op_bytes.div_ceil(period[0].0.max(1) as u64).max(1) as f64;
        // The read tags bind unless the operations in flight hold fewer requests.
        let tags = s.tags.filter(|&t| {
            !s.write
                && s.ops_in_flight
                    .is_none_or(|n| (t as f64) < n as f64 * per_op)
        });
        if let Some(tags) = tags {
            // The tags' time over the period, averaged: a request that misses the IOTLB
            // holds its tag longer while the others go on. (With very few tags the pipe
            // idles during such a miss, which this average does not see: the packet
            // model runs a few per cent slower there.)
            best.offer(l.total, l.rtt_ps / tags as f64, || {
                format!(
                    "{tags} outstanding reads of {} B over a {:.0} ns round trip",
                    period[0].0,
                    rtt_avg / 1000.0
                )
            });
        }
        let Some(ops_in_flight) = s.ops_in_flight.filter(|_| pipe.gbps.is_finite()) else {
            return best.0;
        };
        // One operation alone: its last TLP leaves when the pipe (and, within the
        // operation, the tags) let it, then takes its own latency.
        let mut op_tlps = Vec::new();
        let mut acc = 0u64;
        for &(n, _) in period {
            op_tlps.push(n);
            acc += n as u64;
            if acc >= s.op_bytes {
                break;
            }
        }
        let last = *op_tlps.last().expect("an operation has a TLP");
        let before: f64 = op_tlps[..op_tlps.len() - 1].iter().map(|&n| n as f64).sum();
        let mut ahead = before / pipe.gbps * 1000.0;
        let last_lat = if s.write {
            ps(self.zero_load_write(route, last, s.addr64))
        } else {
            // Tag-limited: the last request waits for whole waves of round trips, then
            // for its place in the last wave's train through the pipe.
            let t = s.tags.unwrap_or(u32::MAX).max(1) as usize;
            let waves = ((op_tlps.len() - 1) / t) as f64;
            let place = ((op_tlps.len() - 1) % t) as f64;
            let req = before / (op_tlps.len() - 1).max(1) as f64;
            ahead = ahead.max(waves * rtt_avg + place * req / pipe.gbps * 1000.0);
            ps(self.read_rtt(route, last, s.addr64, false))
        };
        let op_ps = ahead + last_lat;
        best.offer(ops_in_flight as f64 * s.op_bytes as f64, op_ps, || {
            format!(
                "{ops_in_flight} operation(s) of {} B in flight over a {:.0} ns operation",
                s.op_bytes,
                op_ps / 1000.0
            )
        });
        best.0
    }

    /// What a credit taken at hop `i` of `hops` waits for after its TLP's serialization:
    /// the wire's propagation, the delays up to the next wire (or the route's end), and
    /// the UpdateFC's way back.
    fn credit_tail(&self, hops: &[Hop], i: usize, iotlb_miss: bool) -> Time {
        let Hop::Wire(w) = hops[i] else {
            return Time::ZERO;
        };
        let lat = self.wire(w).latency;
        let mut t = lat + lat + self.fc_extra();
        for nh in &hops[i + 1..] {
            match *nh {
                Hop::Delay(d) | Hop::MemoryDelay(d) => t += d,
                Hop::Iommu(x) => t += self.iotlb_cost(x, iotlb_miss),
                _ => break,
            }
        }
        t
    }

    fn slowest(&self, hops: &[Hop]) -> u64 {
        hops.iter()
            .filter_map(|h| match h {
                Hop::Wire(w) => Some(self.wire(*w).ps_per_kib),
                _ => None,
            })
            .max()
            .unwrap_or(1)
    }
}
