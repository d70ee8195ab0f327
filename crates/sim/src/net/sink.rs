//! Sinks (DRAM or device memory: bandwidth, latency, completions at the read completion
//! boundary), the LLC in front of a DRAM sink (DDIO), and writes that owners and
//! watchers hear of.

use super::tlp::{Delivery, Ev, Kind, Tlp};
use super::TimerKey;
use super::{ComponentId, Net, NONE};
use crate::pcie;
use crate::pcie::serialize;
use crate::time::Time;
use std::collections::VecDeque;

/// Where TLPs end: a memory controller or a device's memory.
#[derive(Clone, Debug)]
pub struct Sink {
    pub name: String,
    /// Service time per KiB (bandwidth).
    pub ps_per_kib: u64,
    pub read_latency: Time,
    pub write_latency: Time,
    /// Read completion boundary: completions carry at most this much.
    pub rcb: u32,
    pub(super) free_at: Time,
    pub bytes_read: u64,
    pub bytes_written: u64,
    /// The LLC in front of DRAM, for DDIO and DMA reads that hit.
    pub llc: Option<Llc>,
    /// The component told of every write landing here (a device's registers); NONE: none.
    pub(super) owner: ComponentId,
    /// One-shot watches on byte ranges (`Net::watch`): a core spinning on a cached line
    /// learns of the write that invalidates it. Few at a time, so a plain list.
    pub(super) watches: Vec<Watch>,
}

/// A range of a sink someone waits on: (offset, end, component, its timer).
#[derive(Clone, Copy, Debug)]
pub(super) struct Watch {
    pub(super) start: u64,
    pub(super) end: u64,
    pub(super) component: ComponentId,
    pub(super) key: TimerKey,
}

/// The part of an LLC that DMA sees: lines DDIO allocated (limited to the DDIO ways) or
/// that are otherwise cached. FIFO replacement stands in for LRU.
#[derive(Clone, Debug)]
pub struct Llc {
    pub capacity_lines: usize,
    pub latency: Time,
    pub(super) lines: rustc_hash::FxHashSet<u64>,
    pub(super) order: VecDeque<u64>,
    /// Lines a workload left here before time started (a core wrote them, or a device
    /// through DDIO), beside the DDIO lines above.
    pub(super) warm: Option<Region>,
    /// Lines of this node's memory that another package's LLC holds modified: a read
    /// of one waits for the home to snoop it there (`remote_snoop`); a write takes it back.
    pub(super) remote: Option<Region>,
    pub(super) remote_snoop: Time,
    pub dma_read_hits: u64,
    pub dma_read_misses: u64,
    pub ddio_allocs: u64,
    pub writebacks: u64,
    pub invalidations: u64,
}

/// A run of lines `[lo, hi)` but those taken out since: a warmed buffer, however large,
/// in constant space.
#[derive(Clone, Debug, Default)]
pub(super) struct Region {
    lo: u64,
    hi: u64,
    gone: rustc_hash::FxHashSet<u64>,
}

impl Region {
    /// The last `capacity` lines of `[offset, offset + bytes)` (what stays of a buffer
    /// written in order through a cache of that many lines).
    fn last_of(offset: u64, bytes: u64, capacity: u64) -> Region {
        let hi = (offset + bytes).div_ceil(64);
        Region {
            lo: (offset / 64).max(hi.saturating_sub(capacity)),
            hi,
            gone: Default::default(),
        }
    }

    fn contains(&self, line: u64) -> bool {
        (self.lo..self.hi).contains(&line) && !self.gone.contains(&line)
    }

    fn remove(&mut self, line: u64) -> bool {
        self.contains(line) && self.gone.insert(line)
    }
}

impl Llc {
    pub fn new(capacity_bytes: u64, latency: Time) -> Llc {
        Llc {
            capacity_lines: (capacity_bytes / 64) as usize,
            latency,
            lines: Default::default(),
            order: VecDeque::new(),
            warm: None,
            remote: None,
            remote_snoop: Time::ZERO,
            dma_read_hits: 0,
            dma_read_misses: 0,
            ddio_allocs: 0,
            writebacks: 0,
            invalidations: 0,
        }
    }

    pub fn contains(&self, line: u64) -> bool {
        self.lines.contains(&line) || self.warm.as_ref().is_some_and(|w| w.contains(line))
    }

    fn held_remotely(&self, line: u64) -> bool {
        self.remote.as_ref().is_some_and(|r| r.contains(line))
    }

    /// A write takes a line back from the package that held it.
    fn take_back(&mut self, line: u64) {
        if let Some(r) = self.remote.as_mut() {
            r.remove(line);
        }
    }

    /// Allocates a line; returns how many lines were evicted (written back to DRAM).
    pub(super) fn allocate(&mut self, line: u64) -> u64 {
        if self.capacity_lines == 0 || !self.lines.insert(line) {
            return 0;
        }
        self.order.push_back(line);
        self.ddio_allocs += 1;
        let mut evicted = 0;
        while self.lines.len() > self.capacity_lines {
            match self.order.pop_front() {
                Some(old) if self.lines.remove(&old) => evicted += 1,
                Some(_) => {}
                None => break,
            }
        }
        self.writebacks += evicted;
        evicted
    }

    pub(super) fn invalidate(&mut self, line: u64) {
        let warm = self.warm.as_mut().is_some_and(|w| w.remove(line));
        if self.lines.remove(&line) || warm {
            self.invalidations += 1;
        }
    }

    /// Evicts the oldest DDIO line (a CPU fill took its way); true if there was one.
    pub(super) fn evict_oldest(&mut self) -> bool {
        while let Some(old) = self.order.pop_front() {
            if self.lines.remove(&old) {
                self.writebacks += 1;
                return true;
            }
        }
        false
    }
}

impl Net {
    pub fn add_sink(
        &mut self,
        name: &str,
        gbps: f64,
        read_latency: Time,
        write_latency: Time,
        rcb: u32,
    ) -> u32 {
        self.sinks.push(Sink {
            name: name.to_string(),
            ps_per_kib: pcie::ps_per_kib_at(gbps),
            read_latency,
            write_latency,
            rcb: rcb.max(1),
            free_at: Time::ZERO,
            bytes_read: 0,
            bytes_written: 0,
            llc: None,
            owner: NONE,
            watches: Vec::new(),
        });
        self.sinks.len() as u32 - 1
    }

    /// Puts an LLC with `capacity_bytes` of DMA-visible lines in front of a sink.
    pub fn set_llc(&mut self, sink: u32, capacity_bytes: u64, latency: Time) {
        self.sinks[sink as usize].llc = Some(Llc::new(capacity_bytes, latency));
    }

    /// Leaves the last `capacity` lines of `[offset, offset + bytes)` of a sink in its
    /// LLC (a core of the home package wrote them, or a device through DDIO), before
    /// time starts.
    pub fn cache_lines(&mut self, sink: u32, offset: u64, bytes: u64, capacity: u64) {
        self.uncache_lines(sink, offset, bytes);
        if let Some(llc) = self.sinks[sink as usize].llc.as_mut() {
            llc.warm = Some(Region::last_of(offset, bytes, capacity));
        }
    }

    /// Marks the last `capacity` lines of `[offset, offset + bytes)` as held modified by
    /// another package's LLC, which a read reaches after `snoop` beyond the home's DRAM.
    pub fn cache_lines_remote(
        &mut self,
        sink: u32,
        offset: u64,
        bytes: u64,
        capacity: u64,
        snoop: Time,
    ) {
        self.uncache_lines(sink, offset, bytes);
        if let Some(llc) = self.sinks[sink as usize].llc.as_mut() {
            llc.remote_snoop = snoop;
            llc.remote = Some(Region::last_of(offset, bytes, capacity));
        }
    }

    /// Drops the lines of `[offset, offset + bytes)` from every cache (a thrashed cache),
    /// and forgets any buffer warmed before.
    pub fn uncache_lines(&mut self, sink: u32, offset: u64, bytes: u64) {
        if let Some(llc) = self.sinks[sink as usize].llc.as_mut() {
            let range = offset / 64..(offset + bytes).div_ceil(64);
            llc.lines.retain(|l| !range.contains(l));
            llc.warm = None;
            llc.remote = None;
        }
    }

    pub fn sink(&self, sink: u32) -> &Sink {
        &self.sinks[sink as usize]
    }

    pub fn sink_mut(&mut self, sink: u32) -> &mut Sink {
        &mut self.sinks[sink as usize]
    }

    /// Tells `component` (its timer `key`, once) when a write lands on any byte of
    /// `[offset, offset + bytes)` of `sink` — what a core spinning on a line in its own
    /// cache sees: nothing until a write invalidates the line. The caller then reads the
    /// line (the miss) as any poll does. Components set it with `Timers::on_write`.
    pub(crate) fn watch(
        &mut self,
        sink: u32,
        offset: u64,
        bytes: u64,
        component: ComponentId,
        key: TimerKey,
    ) {
        self.sinks[sink as usize].watches.push(Watch {
            start: offset,
            end: offset.saturating_add(bytes),
            component,
            key,
        });
    }

    pub fn set_sink_owner(&mut self, sink: u32, component: ComponentId) {
        self.sinks[sink as usize].owner = component;
    }

    /// Latency of a write landing in a sink: the LLC's for a DDIO write, else the sink's.
    pub fn sink_write_latency(&self, s: u32, ddio: bool) -> Time {
        let sink = &self.sinks[s as usize];
        match (&sink.llc, ddio) {
            (Some(l), true) if l.capacity_lines > 0 => l.latency,
            _ => sink.write_latency,
        }
    }

    /// A CPU line fill evicted a DDIO line at sink `s`'s LLC: it is written back to DRAM
    /// (taking DRAM time). True if there was a line to evict.
    pub fn evict_ddio_line(&mut self, s: u32) -> bool {
        let now = self.now();
        let sink = &mut self.sinks[s as usize];
        let Some(llc) = sink.llc.as_mut() else {
            return false;
        };
        if !llc.evict_oldest() {
            return false;
        }
        sink.free_at = now.max(sink.free_at) + serialize(64, sink.ps_per_kib);
        true
    }

    pub(super) fn arrive_at_sink(&mut self, t: u32, s: u32, ddio: bool) {
        let tlp = self.tlps[t as usize];
        let now = self.now();
        let class = Self::class_of(tlp.kind);
        self.release_credit(tlp.held, class, tlp.count);
        let sink = &mut self.sinks[s as usize];
        // What the LLC absorbs or serves, and what reaches DRAM.
        let lines = tlp.target / 64..=(tlp.target + tlp.payload.max(1) as u64 - 1) / 64;
        let llc = if tlp.cpu {
            // CPU misses and write-backs: DRAM, never the DDIO ways.
            None
        } else {
            sink.llc.as_mut()
        };
        let (dram_bytes, latency) = match (tlp.kind, llc) {
            (Kind::Write, Some(llc)) if ddio => {
                // A line already cached is written in place; others take a DDIO way.
                let evicted: u64 = lines
                    .map(|l| {
                        llc.take_back(l);
                        if llc.contains(l) {
                            0
                        } else {
                            llc.allocate(l)
                        }
                    })
                    .sum();
                (evicted * 64, llc.latency)
            }
            (Kind::Write, Some(llc)) => {
                lines.for_each(|l| {
                    llc.invalidate(l);
                    llc.take_back(l);
                });
                (tlp.payload as u64, sink.write_latency)
            }
            (Kind::Read, Some(llc)) => {
                let n = lines.clone().count() as u64;
                if lines.clone().all(|l| llc.contains(l)) {
                    llc.dma_read_hits += n;
                    (0, llc.latency)
                } else if llc.remote.is_some() && lines.clone().any(|l| llc.held_remotely(l)) {
                    // The home reads its directory, then snoops the owner for the data.
                    llc.dma_read_misses += n;
                    (tlp.payload as u64, sink.read_latency + llc.remote_snoop)
                } else {
                    llc.dma_read_misses += n;
                    (tlp.payload as u64, sink.read_latency)
                }
            }
            (Kind::Write, None) => (tlp.payload as u64, sink.write_latency),
            _ => (tlp.payload as u64, sink.read_latency),
        };
        let (start, service) = if dram_bytes > 0 {
            let start = now.max(sink.free_at);
            let service = serialize(dram_bytes as u32, sink.ps_per_kib);
            // A train's last TLP is served after the others, and not before it came.
            let last = dram_bytes * tlp.last_payload() as u64 / tlp.payload.max(1) as u64;
            let tail = serialize(last as u32, sink.ps_per_kib);
            let end = (start + service).max(now + tlp.spread + tail);
            sink.free_at = end;
            (start, end - start)
        } else {
            (now + tlp.spread, Time::ZERO)
        };
        match tlp.kind {
            Kind::Write => {
                sink.bytes_written += tlp.payload as u64;
                let at = start + service + latency;
                let owner = sink.owner;
                if owner != NONE {
                    let mmio = Delivery::Mmio {
                        sink: s,
                        offset: tlp.target,
                        bytes: tlp.payload.min(u16::MAX as u32) as u16,
                        data: tlp.data,
                    };
                    self.engine
                        .schedule_at(at, Ev::Deliver(owner, mmio))
                        .expect("future");
                }
                if !sink.watches.is_empty() {
                    let (lo, hi) = (tlp.target, tlp.target + tlp.payload as u64);
                    let mut k = 0;
                    while k < sink.watches.len() {
                        let w = sink.watches[k];
                        if w.start < hi && lo < w.end {
                            sink.watches.swap_remove(k);
                            self.engine
                                .schedule_at(at, Ev::Timer(w.component, w.key))
                                .expect("future");
                        } else {
                            k += 1;
                        }
                    }
                }
                let done = Delivery::WriteDone {
                    flow: tlp.flow,
                    bytes: tlp.payload,
                };
                self.engine
                    .schedule_at(at, Ev::Deliver(tlp.owner, done))
                    .expect("future");
                self.free_tlps.push(t);
            }
            Kind::Read => {
                sink.bytes_read += tlp.payload as u64;
                let ready = start + latency;
                let rcb = sink.rcb;
                let r = self.reads[tlp.req as usize];
                if tlp.sample {
                    let d = Delivery::ReadServed {
                        flow: r.flow,
                        tag: r.tag,
                    };
                    self.engine
                        .schedule_at(ready, Ev::Deliver(r.owner, d))
                        .expect("future");
                }
                let rev = self.routes[tlp.route as usize].reverse;
                // Completions leave at the read completion boundary; the first wire spaces them.
                let mut left = tlp.payload;
                let mut first = true;
                while left > 0 {
                    let n = left.min(rcb);
                    left -= n;
                    let c = Tlp {
                        kind: Kind::Completion,
                        payload: n,
                        wire_bytes: pcie::wire_bytes(n, true, r.addr64),
                        route: rev,
                        pos: 0,
                        stop: if r.parent != NONE {
                            r.rejoin - 1
                        } else {
                            u16::MAX
                        },
                        held: NONE,
                        owner: tlp.owner,
                        data: 0,
                        cpu: tlp.cpu,
                        sample: false,
                        req: tlp.req,
                        parent: NONE,
                        flow: tlp.flow,
                        iotlb_key: 0,
                        target: tlp.target,
                        ur: false,
                        count: 1,
                        unit: n,
                        unit_wire: pcie::wire_bytes(n, true, r.addr64),
                        spread: Time::ZERO,
                    };
                    let id = if first {
                        first = false;
                        self.tlps[t as usize] = c;
                        t
                    } else {
                        self.alloc_tlp(c)
                    };
                    self.engine.schedule_at(ready, Ev::Hop(id)).expect("future");
                }
            }
            Kind::Completion => {
                unreachable!("completions travel reverse routes, which have no sink")
            }
        }
    }
}
