//! A host's memory system for packet-level I/O studies (`host::net`, `devices::nic`):
//! each cache-line access is *priced* by where the line is, not simulated as a message.
//!
//! Per package an LLC holding buffers at buffer granularity with line counts, in two LRU
//! shares: the DDIO share (`llc_bytes × ddio_ways / llc_ways`) that local device writes
//! allocate into, and the rest that CPU stores and fills use. DRAM per node is a FIFO
//! server at its bandwidth with byte counters. Node n is package n's memory.
//!
//! The packages and the I/O hubs of a dual-hub platform are the vertices of an uncore
//! graph (`uncore`): every interconnect link direction is a FIFO server with its byte
//! counter, and traffic takes the fabric's route between two vertices (shortest by link
//! weight), reserving every link on it. A device is attached at a vertex — its
//! package's root, or an I/O hub — and its accesses cross the route from there to the
//! memory's home package; a core's miss to another package's memory crosses the route
//! between the packages. `MemSys::new` builds the two-socket shorthand (one link between
//! each pair of packages), `MemSys::with_uncore` a platform's graph. Counters per link and
//! direction, and the part a per-package monitor (Intel PCM) sees, are data
//! (`link_counters`, `pcm_ports`).
//!
//! Background STREAM cores (`add_stream`, see `arbitration`) are steady agents on those
//! servers: the measured workload's accesses get the share a round-robin arbiter leaves
//! them, so they slow and wait longer as the streams load a link.
//!
//! Rules (docs/hardware.md §1): a device write to memory of the package whose root the
//! device hangs under allocates in that package's DDIO share (evicting its oldest buffers
//! to DRAM as write-backs) and invalidates other packages' copies; any other device
//! write (another package's memory, or a device behind an I/O hub, which has no LLC)
//! goes to DRAM and invalidates cached copies; a device read of a line in an LLC is
//! served from it without eviction, local or remote. A dirty line an LLC evicts is
//! written back to its home node's DRAM, across the route from the evicting package when
//! the home is another (`cpu_write_home` names a store's home; `cpu_write` is a store to
//! the writer's own node). A device read of a buffer that is not in its home's LLC but
//! dirty in another package's (a core there filled it) is a snoop: under home snoop the
//! home reads memory first (the directory, below), then the owner's LLC answers across
//! the route to the device — no new constant, the DRAM and LLC latencies and the
//! crossings. A clean copy in another LLC is not snooped: the home's memory is current.
//! (A core's load of such a dirty line is still priced as a read of its home's memory.)
//!
//! **Snoop mode, per platform (`MemSysParams::snoop`, the platform's `home_snoop`).**
//! *Home snoop with an in-memory directory* (`Snoop::HomeDirectory`): Broadwell-EP's
//! home agent, in its default home-snoop mode with the directory kept in DRAM, reads
//! memory for every request that arrives from elsewhere — a speculative read that also
//! looks up and updates the directory — even when the line turns out to be cached. So a
//! remote device write costs a DRAM read and a write, a remote device read of a cached
//! line one DRAM read, which it also waits for (the LLC supplies the data, but the home
//! agent completes the request only once the directory state has come back from memory),
//! and a snoop of a line dirty in another LLC starts with that memory read (above). Why:
//! it is the documented behaviour of Intel's directory-assisted home snoop (Xeon E5 v4
//! uncore), and it is the one mechanism that explains docs/hardware.md §1's remote memory
//! bandwidth relations (≈ 3 × throughput on receive, ≈ 1 × on transmit) without a
//! constant of its own. It applies to every request that reaches the home over the
//! interconnect, an I/O hub's included.
//!
//! *Source snoop* (`Snoop::Source`, QPI 1.0 on Nehalem-EP, whose I/O hub is a caching
//! agent that broadcasts its snoops to the peer caches): there is no directory, so the
//! home reads DRAM only for data no cache supplies. A device write arriving from
//! elsewhere costs the DRAM write alone; a device read of a line cached in the home's
//! LLC is answered from it (no DRAM read, no wait for one); a line dirty in another LLC
//! is answered by that owner, the request crossing straight to it. Crossings, link
//! occupancy and write-backs are the same in both modes.
//!
//! Multi-hop crossings are cut-through: a link starts forwarding when the first line
//! arrives and finishes no earlier than one line after the last one arrived, so a route
//! of two links costs their latencies and the slower link's serialization, not both
//! serializations (QPI forwards per flit; the lines of a packet are separate requests).

use std::collections::VecDeque;

use crate::pcie;
use crate::time::Time;
use lru::Lru;

mod arbitration;
mod lru;
mod uncore;
pub use arbitration::{StreamAgent, StreamRates};
pub use uncore::{Hop, LinkCount, PcmPort, Uncore, UncoreLink};
#[cfg(test)]
mod fifo_lru_tests;
pub mod ownership;
mod pollution;

/// Bytes of a cache line.
pub const LINE: u64 = 64;

/// A server at a bandwidth, reserved per packet for its bytes. Packet models reserve
/// it out of time order (a completion written after a payload read is priced before the
/// next packet's request), so it keeps its busy intervals and places each reservation
/// in the first gap at or after its arrival: a later packet does not queue behind an
/// earlier packet's future work, and the server never serves two at once.
#[derive(Clone, Debug)]
pub struct Fifo {
    /// Disjoint busy intervals (start, end), sorted, merged when they touch. A deque
    /// because most reservations land at or near the back and forgetting pops the
    /// front; binary search finds the rest.
    busy: VecDeque<(Time, Time)>,
    ps_per_kib: u64,
    gbps: f64,
    /// End of the latest forgotten interval: nothing is placed before it, so a
    /// reservation arriving more than `HORIZON` out of order waits (pessimistic) instead
    /// of overbooking the server.
    forgotten: Time,
    /// No reservation arrives before this time (`forget_before`).
    floor: Time,
    /// Reservations that arrived before `floor` anyway (a caller's promise broken).
    late: u64,
    /// Bytes served since the last reset of the counters.
    pub bytes: u64,
}

/// Busy intervals ending this long before an arrival are forgotten; a reservation arriving
/// before the last forgotten one's end starts after it (`Fifo::forgotten`), so the
/// server is never overbooked, only pessimistic that far out of order. A backlogged
/// core reserves at its own time, ahead of the event time: 12 memcached instances of
/// `ioctopus.colocation` reach > 1 ms apart (at 1 ms the port carried 140 Gb/s of a 100).
const HORIZON: Time = Time::from_us(20000);
/// Gaps shorter than this are not kept (the smallest packet on the fastest link takes
/// longer).
const SLIVER: Time = Time::from_ps(1000);

impl Fifo {
    pub fn new(gbps: f64) -> Fifo {
        Fifo {
            busy: VecDeque::new(),
            ps_per_kib: pcie::ps_per_kib_at(gbps),
            gbps,
            forgotten: Time::ZERO,
            floor: Time::ZERO,
            late: 0,
            bytes: 0,
        }
    }

    /// The caller's promise that no reservation arrives before `t` from now on (its
    /// simulation's time): the intervals that end a sliver or more before it can no
    /// longer shape a placement or a merge, so they are dropped. This keeps the list as
    /// short as the reservations are out of order, not `HORIZON` long.
    pub fn forget_before(&mut self, t: Time) {
        self.floor = self.floor.max(t);
        while let Some(&(_, e)) = self.busy.front() {
            if e + SLIVER >= t {
                break;
            }
            self.busy.pop_front();
            self.forgotten = self.forgotten.max(e);
        }
    }

    /// Reservations that arrived before a time promised by `forget_before`.
    pub fn late(&self) -> u64 {
        self.late
    }

    /// The server's full bandwidth, GB/s.
    pub fn gbps(&self) -> f64 {
        self.gbps
    }

    /// Serves this server's own requests at `share_gbps` from now on: the part of the
    /// bandwidth an arbiter leaves them beside background agents (`arbitration`).
    pub fn set_share(&mut self, share_gbps: f64) {
        self.ps_per_kib = pcie::ps_per_kib_at(share_gbps.min(self.gbps));
    }

    /// How much longer `bytes` take at the share left to this server's own requests than
    /// at its full bandwidth: the turns they wait for the background agents.
    pub fn wait(&self, bytes: u64) -> Time {
        let full = pcie::ps_per_kib_at(self.gbps);
        Time::from_ps((bytes * self.ps_per_kib.saturating_sub(full)).div_ceil(1024))
    }

    /// How long `bytes` occupy the server (at the share left to its own requests).
    pub fn duration(&self, bytes: u64) -> Time {
        Time::from_ps((bytes * self.ps_per_kib).div_ceil(1024))
    }

    /// Reserves the server for `bytes` arriving at `at`; when they are through.
    pub fn reserve(&mut self, at: Time, bytes: u64) -> Time {
        let dur = self.duration(bytes);
        self.bytes += bytes;
        self.late += u64::from(at < self.floor);
        let (t, i) = self.first_gap(at.max(self.forgotten), dur);
        let mut start = t;
        let mut end = t + dur;
        // Merge with neighbours closer than SLIVER: a gap too short for any packet would
        // only lengthen every later search. The new interval replaces busy[lo..hi].
        let mut hi = self.walk_to(i, |&(s, _)| s <= start);
        let mut lo = hi;
        if lo > 0 && self.busy[lo - 1].1 + SLIVER >= start {
            lo -= 1;
            start = self.busy[lo].0;
        }
        while let Some(&(s, e)) = self.busy.get(hi) {
            if s > end + SLIVER {
                break;
            }
            end = end.max(e);
            hi += 1;
        }
        match hi - lo {
            0 => self.busy.insert(lo, (start, end)),
            n => {
                self.busy[lo] = (start, end);
                if n > 1 {
                    self.busy.drain(lo + 1..hi);
                }
            }
        }
        while let Some(&(s, e)) = self.busy.front() {
            if e + HORIZON >= at || s == start {
                break;
            }
            self.busy.pop_front();
            self.forgotten = self.forgotten.max(e);
        }
        t + dur
    }

    /// Where a reservation of `dur` arriving at `t` starts: after the interval under way
    /// at `t`, in the first gap that holds it; and the index where the search stopped.
    fn first_gap(&self, mut t: Time, dur: Time) -> (Time, usize) {
        let under_way = self.starting_by(t);
        if under_way > 0 {
            t = t.max(self.busy[under_way - 1].1);
        }
        let mut i = self.walk_to(under_way, |&(s, _)| s < t);
        while let Some(&(s, e)) = self.busy.get(i) {
            if s >= t + dur {
                break;
            }
            t = e;
            i += 1;
            while self.busy.get(i).is_some_and(|&(s, _)| s < t) {
                i += 1;
            }
        }
        (t, i)
    }

    /// How many intervals from the front satisfy `before` (true on a prefix), walking
    /// from `hint`: the searches of one reservation end a step or two apart, so only the
    /// first needs the gallop of `count_from_back`.
    fn walk_to(&self, hint: usize, before: impl Fn(&(Time, Time)) -> bool) -> usize {
        let mut i = hint.min(self.busy.len());
        while i > 0 && !before(&self.busy[i - 1]) {
            i -= 1;
        }
        while self.busy.get(i).is_some_and(&before) {
            i += 1;
        }
        i
    }

    /// How many intervals start at or before `t`.
    fn starting_by(&self, t: Time) -> usize {
        self.count_from_back(|&(s, _)| s <= t)
    }

    /// How many intervals from the front satisfy `before` (true on a prefix), searched
    /// from the back: most reservations land after the last interval's start (one
    /// probe) or a few intervals before it (galloping back, then bisecting).
    fn count_from_back(&self, before: impl Fn(&(Time, Time)) -> bool) -> usize {
        let n = self.busy.len();
        let (mut lo, mut hi) = (0, n);
        let mut step = 1;
        while step <= n {
            if before(&self.busy[n - step]) {
                lo = n - step + 1;
                break;
            }
            hi = n - step;
            step *= 2;
        }
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if before(&self.busy[mid]) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }
}

/// The memory system's parameters, from a platform (`[platform.X]` and its timing).
#[derive(Clone, Debug)]
pub struct MemSysParams {
    /// Packages, each with its LLC and DRAM node.
    pub sockets: u32,
    pub llc_bytes: u64,
    pub llc_ways: u32,
    pub ddio_ways: u32,
    pub llc_latency: Time,
    pub dram_latency: Time,
    /// One crossing of the socket interconnect (`MemSys::new`'s links; a platform's graph,
    /// `MemSys::with_uncore`, carries its own per link).
    pub interconnect_latency: Time,
    pub dram_gbps: f64,
    /// Per direction, all links between two sockets together (`MemSys::new`'s links).
    pub interconnect_gbps: f64,
    /// Line misses one core keeps in flight while streaming (a copy).
    pub line_fill_buffers: u32,
    /// How a home agent learns who holds a line (see the module text).
    pub snoop: Snoop,
}

/// A platform's coherence protocol as it prices device accesses (see the module text).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Snoop {
    /// Home snoop with the directory in DRAM: the home reads memory for every request
    /// from another vertex, cached or not.
    HomeDirectory,
    /// Source snoop: the requester snoops the caches itself; the home reads memory only
    /// for data no cache supplies.
    Source,
}

/// DRAM traffic of one node, in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DramCounters {
    pub read: u64,
    pub write: u64,
}

/// A two-level picture of one host's memory: LLC shares per package, DRAM and
/// interconnect-link servers over the uncore graph. Node n is package n's memory.
#[derive(Clone, Debug)]
pub struct MemSys {
    p: MemSysParams,
    uncore: Uncore,
    ddio: Vec<Lru>,
    cpu: Vec<Lru>,
    dram: Vec<Fifo>,
    counters: Vec<DramCounters>,
    /// `links[hop.server()]`: each direction of each link of `uncore`.
    links: Vec<Fifo>,
    /// Background STREAM cores and the arbitration solved for them.
    streams: Vec<StreamAgent>,
    rates: StreamRates,
    /// Dirty lines evicted by the last LLC insertion, per home node (reused).
    evicted: Vec<u64>,
    /// Buffers dirty in an LLC away from their home (a device read snoops them there).
    off_home: ownership::OffHome,
}

fn lines(bytes: u64) -> u64 {
    bytes.div_ceil(LINE).max(1)
}

impl MemSys {
    /// `p.sockets` packages, each pair joined by one link of `p.interconnect_gbps` per
    /// direction and `p.interconnect_latency`.
    pub fn new(p: MemSysParams) -> MemSys {
        let uncore = Uncore::mesh(p.sockets, p.interconnect_gbps, p.interconnect_latency);
        MemSys::build(p, uncore)
    }

    /// Over a platform's uncore graph (`Uncore::of_platform`): packages and I/O hubs,
    /// each link at its own bandwidth and latency. An error when the graph's packages are
    /// not `p.sockets`.
    pub fn with_uncore(p: MemSysParams, uncore: Uncore) -> Result<MemSys, String> {
        if uncore.packages != p.sockets {
            return Err(format!(
                "an uncore graph of {} packages for a memory system of {} sockets",
                uncore.packages, p.sockets
            ));
        }
        Ok(MemSys::build(p, uncore))
    }

    /// A fresh memory system (empty caches, idle servers, no streams) with this one's
    /// parameters and uncore graph but `ddio_ways` of DDIO (0: none).
    pub fn with_ddio_ways(&self, ddio_ways: u32) -> MemSys {
        let mut p = self.p.clone();
        p.ddio_ways = ddio_ways;
        MemSys::build(p, self.uncore.clone())
    }

    fn build(p: MemSysParams, uncore: Uncore) -> MemSys {
        let n = p.sockets as usize;
        let llc_lines = p.llc_bytes / LINE;
        let ddio_lines = llc_lines * p.ddio_ways as u64 / p.llc_ways.max(1) as u64;
        let lru = Lru::new;
        MemSys {
            ddio: (0..n).map(|_| lru(ddio_lines)).collect(),
            cpu: (0..n).map(|_| lru(llc_lines - ddio_lines)).collect(),
            dram: (0..n).map(|_| Fifo::new(p.dram_gbps)).collect(),
            counters: vec![DramCounters::default(); n],
            links: uncore
                .links
                .iter()
                .flat_map(|l| [Fifo::new(l.gbps), Fifo::new(l.gbps)])
                .collect(),
            streams: Vec::new(),
            rates: StreamRates::default(),
            evicted: vec![0; n],
            off_home: ownership::OffHome::default(),
            uncore,
            p,
        }
    }

    /// Adds `cores` background STREAM cores on `cpu_socket` streaming through `node`'s
    /// memory (`write`: read for ownership and write back), each keeping its line-fill
    /// buffers full, and re-solves the arbitration: from now on this memory system's own
    /// accesses get what is left to them (`arbitration`).
    pub fn add_streams(
        &mut self,
        cpu_socket: u32,
        node: u32,
        write: bool,
        cores: u32,
    ) -> Result<(), String> {
        let misses = self.p.line_fill_buffers.max(1);
        self.add_agents(cpu_socket, node, write, vec![misses; cores as usize])
    }

    /// Adds a background stream that keeps `misses` line misses in flight from
    /// `cpu_socket` through `node`'s memory, as the fewest cores that can (each at most
    /// its line-fill buffers; the misses shared evenly), and re-solves the arbitration.
    /// Returns the indices of its cores among `streams()`.
    pub fn add_stream_misses(
        &mut self,
        cpu_socket: u32,
        node: u32,
        write: bool,
        misses: u32,
    ) -> Result<std::ops::Range<usize>, String> {
        let lfb = self.p.line_fill_buffers.max(1);
        let cores = misses.div_ceil(lfb).max(1);
        let per_core = (0..cores)
            .map(|i| misses / cores + u32::from(i < misses % cores))
            .collect();
        let first = self.streams.len();
        self.add_agents(cpu_socket, node, write, per_core)?;
        Ok(first..self.streams.len())
    }

    fn add_agents(
        &mut self,
        cpu_socket: u32,
        node: u32,
        write: bool,
        misses: Vec<u32>,
    ) -> Result<(), String> {
        let n = self.p.sockets;
        if cpu_socket >= n || node >= n {
            return Err(format!(
                "a stream on socket {cpu_socket} against node {node}: the host has {n} sockets"
            ));
        }
        self.streams
            .extend(misses.into_iter().map(|misses| StreamAgent {
                cpu_socket,
                node,
                write,
                misses,
            }));
        self.arbitrate();
        Ok(())
    }

    /// The background streams, one per core.
    pub fn streams(&self) -> &[StreamAgent] {
        &self.streams
    }

    /// The streams' solved rates and what they leave per server.
    pub fn stream_rates(&self) -> &StreamRates {
        &self.rates
    }

    /// Indices (DRAM servers first, then link directions) of the link servers on the
    /// route from vertex `from` to `to`.
    fn route_servers(&self, from: u32, to: u32) -> Vec<usize> {
        self.uncore
            .route(from, to)
            .iter()
            .map(|h| self.dram.len() + h.server())
            .collect()
    }

    fn arbitrate(&mut self) {
        let caps: Vec<f64> = self
            .dram
            .iter()
            .chain(&self.links)
            .map(Fifo::gbps)
            .collect();
        let uses: Vec<_> = self
            .streams
            .iter()
            .map(|a| {
                arbitration::usage(
                    a,
                    &self.route_servers(a.node, a.cpu_socket),
                    &self.route_servers(a.cpu_socket, a.node),
                )
            })
            .collect();
        // A core's own limit: its misses in flight over the zero-load miss latency
        // (bytes per ns = GB/s).
        let demands: Vec<f64> = self
            .streams
            .iter()
            .map(|a| {
                let lat = self.p.dram_latency + self.round_trip(a.cpu_socket, a.node);
                (a.misses as u64 * LINE) as f64 / (lat.as_ps() as f64 / 1000.0)
            })
            .collect();
        let rate = arbitration::max_min(&caps, &demands, &uses);
        let mut per_server: Vec<Vec<f64>> = vec![Vec::new(); caps.len()];
        for (i, u) in uses.iter().enumerate() {
            for &(s, k) in u {
                per_server[s].push(k * rate[i]);
            }
        }
        let share: Vec<f64> = caps
            .iter()
            .zip(&per_server)
            .map(|(&c, l)| arbitration::residual_share(c, l))
            .collect();
        let servers = self.dram.iter_mut().chain(self.links.iter_mut());
        for (f, &sh) in servers.zip(&share) {
            f.set_share(sh);
        }
        self.rates = StreamRates {
            agent_gbps: rate,
            load_gbps: per_server.iter().map(|l| l.iter().sum()).collect(),
            share_gbps: share,
        };
    }

    pub fn params(&self) -> &MemSysParams {
        &self.p
    }

    /// DRAM bytes read and written at `node` since the last reset.
    pub fn dram(&self, node: u32) -> DramCounters {
        self.counters[node as usize]
    }

    /// All DRAM bytes (reads and writes, every node) since the last reset.
    pub fn dram_total(&self) -> u64 {
        self.counters.iter().map(|c| c.read + c.write).sum()
    }

    /// The uncore graph this memory system's traffic crosses.
    pub fn uncore(&self) -> &Uncore {
        &self.uncore
    }

    /// Bytes that left vertex `socket` on any interconnect link since the last reset.
    pub fn interconnect_bytes(&self, socket: u32) -> u64 {
        self.link_counters()
            .iter()
            .filter(|c| c.from == socket)
            .map(|c| c.bytes)
            .sum()
    }

    /// Bytes that crossed from vertex `from` straight to `to` since the last reset (all
    /// links joining them); `None` when no link does.
    pub fn link_bytes(&self, from: u32, to: u32) -> Option<u64> {
        let c: Vec<_> = self
            .link_counters()
            .into_iter()
            .filter(|c| c.from == from && c.to == to)
            .collect();
        (!c.is_empty()).then(|| c.iter().map(|c| c.bytes).sum())
    }

    /// Every direction of every link with its bytes since the last reset, in link order
    /// (`a → b` before `b → a`), named by the platform's vertex names.
    pub fn link_counters(&self) -> Vec<LinkCount> {
        (0..self.links.len())
            .map(|i| {
                let hop = Hop {
                    link: (i / 2) as u32,
                    dir: (i % 2) as u8,
                };
                let (from, to) = self.uncore.ends(hop);
                LinkCount {
                    from,
                    to,
                    name: format!(
                        "{}→{}",
                        self.uncore.names[from as usize], self.uncore.names[to as usize]
                    ),
                    bytes: self.links[i].bytes,
                }
            })
            .collect()
    }

    /// What a per-package uncore monitor sees (Intel PCM's QPI traffic per port): for
    /// each package, each of its links — to an I/O hub or to another package — with the
    /// bytes that came in and went out on it. A link between two I/O hubs has no package
    /// port, so it is not in the view.
    pub fn pcm_ports(&self) -> Vec<PcmPort> {
        let c = self.link_counters();
        let mut ports = Vec::new();
        for package in 0..self.uncore.packages {
            for (i, l) in self.uncore.links.iter().enumerate() {
                let (peer, out, inc) = if l.a == package {
                    (l.b, &c[2 * i], &c[2 * i + 1])
                } else if l.b == package {
                    (l.a, &c[2 * i + 1], &c[2 * i])
                } else {
                    continue;
                };
                ports.push(PcmPort {
                    package,
                    peer,
                    peer_is_ioh: peer >= self.uncore.packages,
                    incoming: inc.bytes,
                    outgoing: out.bytes,
                });
            }
        }
        ports
    }

    /// Starts a new measurement window (contents and queues stay).
    pub fn reset_counters(&mut self) {
        self.counters
            .iter_mut()
            .for_each(|c| *c = DramCounters::default());
        self.links.iter_mut().for_each(|f| f.bytes = 0);
        self.dram.iter_mut().for_each(|f| f.bytes = 0);
    }

    /// The caller's promise that none of this memory system's accesses start before `t`
    /// from now on (`Fifo::forget_before`): a simulation passes its time before each
    /// event, so its servers keep only the intervals later accesses can meet.
    pub fn forget_before(&mut self, t: Time) {
        self.dram.iter_mut().for_each(|f| f.forget_before(t));
        self.links.iter_mut().for_each(|f| f.forget_before(t));
    }

    /// Accesses that started before a time promised by `forget_before`.
    pub fn late(&self) -> u64 {
        self.dram.iter().chain(&self.links).map(Fifo::late).sum()
    }

    /// Whether `buf` is in `socket`'s LLC (either share).
    pub fn cached(&self, socket: u32, buf: u64) -> bool {
        let s = socket as usize;
        self.ddio[s].contains(buf) || self.cpu[s].contains(buf)
    }

    fn dram_read(&mut self, at: Time, node: u32, bytes: u64) -> Time {
        self.counters[node as usize].read += bytes;
        self.dram[node as usize].reserve(at, bytes)
    }

    fn dram_write(&mut self, at: Time, node: u32, bytes: u64) -> Time {
        self.counters[node as usize].write += bytes;
        self.dram[node as usize].reserve(at, bytes)
    }

    fn invalidate(&mut self, buf: u64) {
        for s in 0..self.ddio.len() {
            self.ddio[s].remove(buf);
            self.cpu[s].remove(buf);
        }
    }

    /// Write-backs of the dirty lines the last insertion evicted from `socket`'s LLC
    /// (`evicted`): each goes to its home node's DRAM, across the route from `socket`
    /// when the home is another node. When every home's DRAM has taken them (`at` when
    /// there are none).
    fn write_back(&mut self, at: Time, socket: u32) -> Time {
        let mut done = at;
        for home in 0..self.evicted.len() {
            let lines = std::mem::take(&mut self.evicted[home]);
            if lines == 0 {
                continue;
            }
            let home = home as u32;
            let arrive = if home == socket {
                at
            } else {
                self.cross(at, socket, home, lines * LINE)
            };
            done = done.max(self.dram_write(arrive, home, lines * LINE));
        }
        done
    }

    /// Zero-load latency from vertex `a` to `b` and back.
    fn round_trip(&self, a: u32, b: u32) -> Time {
        self.uncore.latency(a, b) + self.uncore.latency(b, a)
    }

    /// `bytes`, all at vertex `from` at `at`, cross every link of the route to `to`
    /// (cut-through, see the module text); when the last byte is at `to`.
    fn cross(&mut self, at: Time, from: u32, to: u32, bytes: u64) -> Time {
        let (mut head, mut tail) = (at, at);
        for i in 0..self.uncore.route(from, to).len() {
            let hop = self.uncore.route(from, to)[i];
            let latency = self.uncore.links[hop.link as usize].latency;
            let f = &mut self.links[hop.server()];
            let end = f.reserve(head, bytes);
            let start = end - f.duration(bytes);
            // The last line cannot leave before it has arrived.
            let end = end.max(tail + f.duration(LINE));
            head = start + latency;
            tail = end + latency;
        }
        tail
    }

    /// The route's links from `from` to `to` carry `bytes` whose latency the caller has
    /// already counted up to `at`: when they are through the links' queues.
    fn occupy(&mut self, at: Time, from: u32, to: u32, bytes: u64) -> Time {
        let latency = self.uncore.latency(from, to);
        self.cross(at, from, to, bytes) - latency
    }

    /// The per-direction waits of one line on the links from `from` to `to` behind
    /// background streams (`Fifo::wait`).
    fn route_wait(&self, from: u32, to: u32) -> Time {
        self.uncore
            .route(from, to)
            .iter()
            .fold(Time::ZERO, |t, h| t + self.links[h.server()].wait(LINE))
    }

    /// A device attached at uncore vertex `attach` (its package's root, or an I/O hub)
    /// writes `bytes` of buffer `buf` in `node`, arriving at the root at `at`; when the
    /// write is globally visible.
    pub fn device_write(&mut self, at: Time, attach: u32, node: u32, buf: u64, bytes: u64) -> Time {
        let bytes_l = lines(bytes) * LINE;
        self.off_home.device_write(buf);
        if attach == node && self.p.ddio_ways > 0 {
            // DDIO: allocate in the local share; every other cached copy is stale.
            self.invalidate(buf);
            let ddio = &mut self.ddio[node as usize];
            ddio.insert_absent(buf, lines(bytes), true, node, &mut self.evicted);
            self.write_back(at, node);
            return at + self.p.llc_latency;
        }
        let arrive = self.cross(at, attach, node, bytes_l);
        self.invalidate(buf);
        if attach != node && self.p.snoop == Snoop::HomeDirectory {
            // Home snoop: the remote request's speculative read (see the module text).
            self.dram_read(arrive, node, bytes_l);
        }
        // Landed once DRAM has taken it, as the TLP network's DRAM sink charges it.
        self.dram_write(arrive, node, bytes_l) + self.p.dram_latency
    }

    /// A device attached at uncore vertex `attach` reads `bytes` of `buf` in `node` from
    /// `at`; when the data is back at the device's root.
    pub fn device_read(&mut self, at: Time, attach: u32, node: u32, buf: u64, bytes: u64) -> Time {
        let bytes_l = lines(bytes) * LINE;
        let remote = attach != node;
        let hops = self.round_trip(attach, node);
        let cached = self.cached(node, buf);
        if let Some(owner) = self.off_home.owner(buf) {
            if !cached && self.cached(owner, buf) {
                return self.snoop_read(at, attach, node, owner, bytes_l);
            }
        }
        let mut ready = if cached {
            at + hops + self.p.llc_latency
        } else {
            Time::ZERO
        };
        if !cached || (remote && self.p.snoop == Snoop::HomeDirectory) {
            // A miss reads DRAM; under home snoop a remote request reads it even for a
            // cached line: the data comes from the LLC, but the home agent answers only
            // once its memory read has returned the directory state, so the read waits.
            let served = self.dram_read(at, node, bytes_l) + self.p.dram_latency + hops;
            ready = ready.max(served);
        }
        if remote {
            let back = self.occupy(ready, node, attach, bytes_l);
            ready = ready.max(back);
        }
        ready
    }

    /// A device at `attach` reads `bytes_l` of a buffer homed on `node` that `owner`'s LLC
    /// holds dirty. Home snoop: the home reads memory (the directory, see the module
    /// text), which sends it to snoop `owner`. Source snoop: the request's snoop goes
    /// straight to `owner`. The owner's LLC supplies the lines (keeping its dirty copy: a
    /// read-current snapshot, as `ownership` assumes) across the route to the device.
    /// When the data is back at the device's root.
    fn snoop_read(&mut self, at: Time, attach: u32, node: u32, owner: u32, bytes_l: u64) -> Time {
        let snoop_sent = match self.p.snoop {
            Snoop::HomeDirectory => {
                let directory = self.dram_read(at, node, bytes_l)
                    + self.p.dram_latency
                    + self.uncore.latency(attach, node);
                directory + self.uncore.latency(node, owner)
            }
            Snoop::Source => at + self.uncore.latency(attach, owner),
        };
        self.cross(snoop_sent + self.p.llc_latency, owner, attach, bytes_l)
    }

    /// What a core on `socket` pays reading `bytes` of `buf` in `node` at `at`, beyond the
    /// cycles of the work itself: a `dependent` read (a completion entry, a descriptor)
    /// pays a line's full latency; a stream of independent line reads (a copy) overlaps
    /// its misses over the line-fill buffers and is bounded by DRAM's bandwidth. The
    /// lines are in the core's LLC afterwards.
    pub fn cpu_read(
        &mut self,
        at: Time,
        socket: u32,
        node: u32,
        buf: u64,
        bytes: u64,
        dependent: bool,
    ) -> Time {
        let n = lines(bytes);
        let s = socket as usize;
        if self.ddio[s].touch(buf) {
            return if dependent {
                self.p.llc_latency
            } else {
                Time::ZERO
            };
        }
        if self.cpu[s].touch(buf) {
            return if dependent {
                self.p.llc_latency
            } else {
                Time::ZERO
            };
        }
        self.off_home.refilled(socket, buf);
        let latency = self.p.dram_latency + self.round_trip(socket, node);
        let mut served = self.dram_read(at, node, n * LINE);
        if socket != node {
            served = served.max(self.occupy(at, node, socket, n * LINE));
        }
        // A dependent miss also waits its turns behind background streams on the
        // servers it crosses (none without them).
        let wait = self.dram[node as usize].wait(LINE) + self.route_wait(node, socket);
        // Neither share holds it: both touches missed.
        self.cpu[s].insert_absent(buf, n, false, node, &mut self.evicted);
        self.write_back(at, socket);
        let stall = if dependent {
            latency + wait
        } else {
            Time::from_ps(latency.as_ps() * n.div_ceil(self.p.line_fill_buffers.max(1) as u64))
        };
        let bw = served.as_ps().saturating_sub(at.as_ps());
        stall.max(Time::from_ps(bw))
    }

    /// A core on `socket` writes `bytes` of `buf` homed on its own node (`cpu_write_home`
    /// with `node` = `socket`).
    pub fn cpu_write(&mut self, at: Time, socket: u32, buf: u64, bytes: u64) -> Time {
        self.cpu_write_home(at, socket, socket, buf, bytes)
    }

    /// A core on `socket` writes `bytes` of `buf` homed on `node`: the lines are allocated
    /// in its LLC, dirty (a copy's destination, a descriptor); when they are evicted their
    /// write-back goes to `node`'s DRAM across the links from `socket`. What the core waits beyond
    /// the work itself (the caller's): nothing while the lines fit, but a line allocated
    /// by evicting a dirty one waits for that write-back, so stores over an LLC full of
    /// dirty buffers go no faster than DRAM takes the write-backs. Without that, cores
    /// filling socket buffers (28 senders × 6 MiB) queued milliseconds of write-backs on
    /// DRAM in a moment, and every DMA read behind them waited that long.
    pub fn cpu_write_home(
        &mut self,
        at: Time,
        socket: u32,
        node: u32,
        buf: u64,
        bytes: u64,
    ) -> Time {
        self.off_home.store(socket, node, buf);
        for o in 0..self.ddio.len() {
            if o != socket as usize {
                self.ddio[o].remove(buf);
                self.cpu[o].remove(buf);
            }
        }
        let s = socket as usize;
        if self.ddio[s].touch(buf) {
            return Time::ZERO;
        }
        self.cpu[s].insert(buf, lines(bytes), true, node, &mut self.evicted);
        let taken = self.write_back(at, socket);
        Time::from_ps(taken.as_ps().saturating_sub(at.as_ps()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reservation_beyond_the_horizon_waits_rather_than_overbooks() {
        // 1 GB/s: 1000 bytes take 1 µs. Book [0, 1 µs), then one far in the future so the
        // first is forgotten, then one arriving at 0 again.
        let mut f = Fifo::new(1.0);
        let first = f.reserve(Time::ZERO, 1000);
        let far = HORIZON + Time::from_us(10);
        f.reserve(far, 1000);
        let late = f.reserve(Time::ZERO, 1000);
        // It may not be served during [0, first): that time is already sold.
        assert!(
            late >= first + Time::from_us(1),
            "{late:?} overlaps {first:?}"
        );
        // Within the horizon the gap before a future booking is still used.
        let mut g = Fifo::new(1.0);
        g.reserve(Time::from_us(100), 1000);
        assert_eq!(g.reserve(Time::ZERO, 1000), Time::from_us(1));
    }

    /// A Broadwell-like two-socket memory system, shared with the submodules' tests.
    pub(super) fn ms() -> MemSys {
        MemSys::new(MemSysParams {
            sockets: 2,
            llc_bytes: 35 << 20,
            llc_ways: 20,
            ddio_ways: 2,
            llc_latency: Time::from_ns(20),
            dram_latency: Time::from_ns(90),
            interconnect_latency: Time::from_ns(25),
            dram_gbps: 60.0,
            interconnect_gbps: 38.4,
            line_fill_buffers: 10,
            snoop: Snoop::HomeDirectory,
        })
    }

    #[test]
    fn a_server_fills_gaps_but_never_serves_two_at_once() {
        let mut f = Fifo::new(1.0); // 1 B/ns
        let late = f.reserve(Time::from_ns(1000), 100);
        assert_eq!(late, Time::from_ns(1100));
        // An earlier arrival fits in the gap before it…
        assert_eq!(f.reserve(Time::ZERO, 100), Time::from_ns(100));
        // …one that does not fit goes after it.
        assert_eq!(f.reserve(Time::from_ns(950), 100), Time::from_ns(1200));
        assert_eq!(f.bytes, 300);
    }

    #[test]
    fn local_device_write_is_an_llc_hit_and_remote_one_a_miss() {
        let mut m = ms();
        m.device_write(Time::ZERO, 0, 0, 1, 1500);
        assert_eq!(m.cpu_read(Time::ZERO, 0, 0, 1, 1500, false), Time::ZERO);
        assert_eq!(m.dram_total(), 0, "DDIO: no DRAM traffic");
        m.device_write(Time::ZERO, 1, 0, 2, 1536);
        let stall = m.cpu_read(Time::ZERO, 0, 0, 2, 1536, false);
        assert!(
            stall >= Time::from_ns(90 * 3),
            "24 lines over 10 LFBs: 3 latencies, got {stall:?}"
        );
        // Remote write: read + write by the home agent, then the copy's read.
        assert_eq!(
            m.dram(0),
            DramCounters {
                read: 2 * 1536,
                write: 1536
            }
        );
    }

    #[test]
    fn remote_device_read_of_a_cached_line_costs_one_dram_read_and_no_eviction() {
        let mut m = ms();
        m.cpu_write(Time::ZERO, 0, 7, 4096);
        m.device_read(Time::ZERO, 1, 0, 7, 4096);
        assert_eq!(
            m.dram(0),
            DramCounters {
                read: 4096,
                write: 0
            }
        );
        assert!(m.cached(0, 7));
        m.device_read(Time::ZERO, 0, 0, 7, 4096);
        assert_eq!(
            m.dram(0).read,
            4096,
            "a local device read of a cached line is an LLC hit"
        );
    }

    #[test]
    fn remote_device_read_of_a_cached_line_waits_for_the_home_dram_read() {
        let mut m = ms();
        m.cpu_write(Time::ZERO, 0, 7, 64);
        m.cpu_write(Time::ZERO, 0, 8, 64);
        let local = m.device_read(Time::ZERO, 0, 0, 7, 64);
        assert_eq!(local, Time::from_ns(20), "local: an LLC hit");
        let remote = m.device_read(Time::ZERO, 1, 0, 8, 64);
        assert!(m.cached(0, 8), "served from the LLC, not evicted");
        // Two crossings and the home agent's DRAM read (90 ns), not its LLC (20 ns).
        assert!(
            remote >= Time::from_ns(2 * 25 + 90),
            "remote read of a home-cached line: {remote:?}"
        );
        let uncached = m.device_read(Time::from_us(10), 1, 0, 9, 64) - Time::from_us(10);
        assert_eq!(
            remote, uncached,
            "cached or not, the home answers after DRAM"
        );
    }

    /// `ms()` under source snoop (Nehalem-EP's QPI): no directory read at the home.
    fn source_snoop() -> MemSys {
        let mut p = ms().params().clone();
        p.snoop = Snoop::Source;
        MemSys::new(p)
    }

    #[test]
    fn under_source_snoop_a_remote_device_write_costs_only_the_dram_write() {
        let (mut home, mut source) = (ms(), source_snoop());
        let h = home.device_write(Time::ZERO, 1, 0, 2, 1536);
        let s = source.device_write(Time::ZERO, 1, 0, 2, 1536);
        assert_eq!(
            home.dram(0),
            DramCounters {
                read: 1536,
                write: 1536
            }
        );
        assert_eq!(
            source.dram(0),
            DramCounters {
                read: 0,
                write: 1536
            }
        );
        // Home snoop's DRAM serves the speculative read before it takes the write.
        assert!(s < h, "{s:?} vs {h:?}");
        assert_eq!(
            source.link_bytes(1, 0),
            Some(1536),
            "the data still crosses"
        );
    }

    #[test]
    fn under_source_snoop_a_remote_read_of_a_home_cached_line_is_answered_by_the_llc() {
        let mut m = source_snoop();
        m.cpu_write(Time::ZERO, 0, 8, 64);
        let remote = m.device_read(Time::ZERO, 1, 0, 8, 64);
        assert_eq!(m.dram(0).read, 0, "no directory read");
        assert!(m.cached(0, 8));
        // Two crossings and the LLC (20 ns), no DRAM (90 ns).
        assert!(remote < Time::from_ns(2 * 25 + 90), "{remote:?}");
        assert!(remote >= Time::from_ns(2 * 25 + 20), "{remote:?}");
        let uncached = m.device_read(Time::from_us(10), 1, 0, 9, 64) - Time::from_us(10);
        assert_eq!(m.dram(0).read, 64, "a miss still reads the home's memory");
        assert!(uncached > remote, "{uncached:?} vs {remote:?}");
        let mut h = ms();
        h.cpu_write(Time::ZERO, 0, 8, 64);
        assert!(
            h.device_read(Time::ZERO, 1, 0, 8, 64) > remote,
            "home snoop waits for DRAM"
        );
    }

    #[test]
    fn under_source_snoop_a_line_dirty_in_the_other_llc_is_answered_by_its_owner() {
        let (mut home, mut source) = (ms(), source_snoop());
        home.cpu_write_home(Time::ZERO, 1, 0, 7, 64);
        source.cpu_write_home(Time::ZERO, 1, 0, 7, 64);
        let at = Time::from_us(1);
        let h = home.device_read(at, 0, 0, 7, 64) - at;
        let s = source.device_read(at, 0, 0, 7, 64) - at;
        assert_eq!(source.dram(0).read, 0, "no read of the home's memory");
        assert_eq!(
            source.link_bytes(1, 0),
            Some(64),
            "the owner's line crossed"
        );
        // The snoop to the owner and back (2 × 25) and its LLC (20), not the home's DRAM.
        assert!(
            s >= Time::from_ns(2 * 25 + 20) && s < Time::from_ns(90),
            "{s:?}"
        );
        assert!(h >= s + Time::from_ns(90), "{h:?} vs {s:?}");
    }

    #[test]
    fn ddio_share_evicts_oldest_buffers_as_write_backs() {
        let mut m = ms();
        let share = (35u64 << 20) * 2 / 20;
        let n = share / 4096 + 10;
        for b in 0..n {
            m.device_write(Time::ZERO, 0, 0, b, 4096);
        }
        assert_eq!(
            m.dram(0).write,
            10 * 4096,
            "the ten oldest buffers were written back"
        );
        assert!(!m.cached(0, 0) && m.cached(0, n - 1));
    }

    #[test]
    fn streams_squeeze_the_link_they_load_and_nothing_else() {
        let mut quiet = ms();
        let mut loaded = ms();
        // Six pairs of STREAM cores on socket 0 against node 1: twelve requesters on the
        // direction 1 → 0 (their fills), each held to 38.4 / 12 GB/s there.
        loaded.add_streams(0, 1, false, 6).unwrap();
        loaded.add_streams(0, 1, true, 6).unwrap();
        let r = loaded.stream_rates();
        assert!(
            r.agent_gbps.iter().all(|&x| (x - 3.2).abs() < 1e-6),
            "{r:?}"
        );
        // A device on socket 1 writing node 0 crosses 1 → 0 and gets one turn in 13:
        // its 1,536 B take 520 ns instead of 40.
        let q = quiet.device_write(Time::ZERO, 1, 0, 9, 1536);
        let l = loaded.device_write(Time::ZERO, 1, 0, 9, 1536);
        let extra = (l - q).as_ps() as f64 / 1000.0;
        assert!((extra - 480.0).abs() < 1.0, "extra {extra} ns");
        // Nothing that stays off the streams' servers changes: a DDIO write on socket 0
        // and a core's miss to its own node 0.
        assert_eq!(
            quiet.device_write(Time::ZERO, 0, 0, 10, 1536),
            loaded.device_write(Time::ZERO, 0, 0, 10, 1536)
        );
        assert_eq!(
            quiet.cpu_read(Time::ZERO, 0, 0, 11, 64, true),
            loaded.cpu_read(Time::ZERO, 0, 0, 11, 64, true)
        );
        // A core's dependent miss to node 1 waits its turn on DRAM 1 and the link.
        let q = quiet.cpu_read(Time::ZERO, 0, 1, 12, 64, true);
        let l = loaded.cpu_read(Time::ZERO, 0, 1, 12, 64, true);
        assert!(l > q, "{l:?} vs {q:?}");
    }

    #[test]
    fn stores_over_an_llc_full_of_dirty_buffers_wait_for_their_write_backs() {
        let mut m = ms();
        // The CPU share (18 of 20 ways of 35 MiB) fills without a stall…
        let share = (35u64 << 20) * 18 / 20;
        let n = share / 65536;
        for b in 0..n {
            assert_eq!(m.cpu_write(Time::ZERO, 0, 100 + b, 65536), Time::ZERO);
        }
        assert_eq!(m.dram_total(), 0);
        // …then every 64 KiB written evicts 64 KiB of dirty lines: writing 64 more
        // buffers at once takes as long as DRAM needs for their write-backs (60 GB/s).
        let mut last = Time::ZERO;
        for b in 0..64 {
            last = last.max(m.cpu_write(Time::ZERO, 0, 1_000_000 + b, 65536));
        }
        assert_eq!(m.dram(0).write, 64 * 65536);
        let ns = last.as_ns_f64();
        let dram_ns = 64.0 * 65536.0 / 60.0;
        assert!(
            (ns - dram_ns).abs() < 0.01 * dram_ns,
            "{ns:.0} vs {dram_ns:.0} ns"
        );
    }

    #[test]
    fn a_remote_cores_dirty_lines_are_written_back_to_their_home_across_the_link() {
        let mut m = ms();
        // Socket 0 writes 4 KiB homed on node 1 and 4 KiB homed on node 0…
        m.cpu_write_home(Time::ZERO, 0, 1, 7, 4096);
        m.cpu_write_home(Time::ZERO, 0, 0, 8, 4096);
        assert_eq!(m.dram_total(), 0, "dirty lines stay in the LLC");
        // …then streams clean node-0 lines through its LLC until both are evicted.
        let share = (35u64 << 20) * 18 / 20;
        for b in 0..share / 65536 + 1 {
            m.cpu_read(Time::ZERO, 0, 0, 100 + b, 65536, false);
        }
        assert!(!m.cached(0, 7) && !m.cached(0, 8));
        assert_eq!(m.dram(1).write, 4096, "node 1's lines went home");
        assert_eq!(m.dram(0).write, 4096, "node 0's stayed local");
        assert_eq!(m.link_bytes(0, 1), Some(4096), "and crossed toward node 1");
        assert_eq!(m.link_bytes(1, 0), Some(0));
    }

    #[test]
    fn a_device_read_of_a_line_dirty_in_the_other_llc_snoops_it_across_the_link() {
        let mut m = ms();
        // A node-1 core fills a line homed on node 0: dirty in package 1's LLC.
        m.cpu_write_home(Time::ZERO, 1, 0, 7, 64);
        assert_eq!(m.link_bytes(1, 0), Some(0), "nothing crossed yet");
        let at = Time::from_us(1);
        let snooped = m.device_read(at, 0, 0, 7, 64) - at;
        assert_eq!(m.link_bytes(1, 0), Some(64), "the line crossed once, 1 → 0");
        assert_eq!(m.link_bytes(0, 1), Some(0));
        assert_eq!(m.dram(1), DramCounters::default(), "not the owner's memory");
        assert_eq!(m.dram(0).read, 64, "the home's directory read");
        assert!(m.cached(1, 7), "the owner keeps its dirty copy");
        // The home's memory (90 ns), the snoop there and back (2 × 25), the owner's LLC.
        assert!(snooped >= Time::from_ns(90 + 2 * 25 + 20), "{snooped:?}");
        m.cpu_write(Time::ZERO, 0, 8, 64);
        let local_hit = m.device_read(at, 0, 0, 8, 64) - at;
        assert!(snooped > local_hit, "{snooped:?} vs {local_hit:?}");
        // A device write replaces the line: the next read is the home's again.
        m.device_write(at, 0, 0, 7, 64);
        m.reset_counters();
        m.device_read(Time::from_us(2), 0, 0, 7, 64);
        assert_eq!(m.link_bytes(1, 0), Some(0));
    }

    #[test]
    fn a_device_read_of_a_line_clean_in_the_other_llc_is_served_by_the_home() {
        let mut m = ms();
        // A node-1 core reads a node-0 line: a clean copy in package 1's LLC.
        m.cpu_read(Time::ZERO, 1, 0, 7, 64, true);
        assert!(m.cached(1, 7));
        m.reset_counters();
        let at = Time::from_us(1);
        let clean = m.device_read(at, 0, 0, 7, 64) - at;
        assert_eq!(m.link_bytes(1, 0), Some(0), "no snoop crossed");
        assert_eq!(m.dram(0).read, 64, "served by the home's memory");
        let fresh = m.device_read(Time::from_us(2), 0, 0, 9, 64) - Time::from_us(2);
        assert_eq!(clean, fresh, "as a line no LLC holds");
    }

    #[test]
    fn a_ddio_write_invalidates_the_other_packages_copy() {
        let mut m = ms();
        // A node-1 core reads a node-0 buffer, then the node-0 device rewrites it (a
        // receive ring wrapping): the core's next read must fetch the new data.
        m.cpu_read(Time::ZERO, 1, 0, 7, 1536, false);
        m.device_write(Time::ZERO, 0, 0, 7, 1536);
        assert!(m.cached(0, 7) && !m.cached(1, 7));
        m.reset_counters();
        let stall = m.cpu_read(Time::from_us(1), 1, 0, 7, 1536, false);
        assert!(stall > Time::ZERO);
        assert_eq!(
            m.link_bytes(0, 1),
            Some(1536),
            "the new lines crossed to package 1"
        );
    }

    #[test]
    fn a_stream_of_misses_is_the_fewest_cores_that_keep_them_in_flight() {
        // ms(): 10 line-fill buffers per core.
        let mut m = ms();
        let cores = m.add_stream_misses(0, 1, true, 25).unwrap();
        assert_eq!(cores, 0..3);
        let misses: Vec<u32> = m.streams().iter().map(|a| a.misses).collect();
        assert_eq!(misses, [9, 8, 8]);
        // One core's worth of misses is one STREAM core: the same rates either way.
        let (mut a, mut b) = (ms(), ms());
        a.add_streams(0, 1, false, 2).unwrap();
        b.add_stream_misses(0, 1, false, 10).unwrap();
        b.add_stream_misses(0, 1, false, 10).unwrap();
        assert_eq!(a.stream_rates(), b.stream_rates());
        // Fewer misses in flight ask for less: a 2-miss core takes a fifth of a full one
        // on an idle system.
        let mut c = ms();
        c.add_stream_misses(0, 1, false, 2).unwrap();
        let full = a.stream_rates().agent_gbps[0];
        let light = c.stream_rates().agent_gbps[0];
        assert!((light * 5.0 - full).abs() < 1e-9, "{light} vs {full}");
    }

    #[test]
    fn a_stream_on_a_missing_socket_is_refused() {
        let e = ms().add_streams(0, 2, false, 1).unwrap_err();
        assert!(e.contains("node 2") && e.contains("2 sockets"), "{e}");
    }
}
