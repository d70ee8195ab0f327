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
//!
//! This file holds the memory system's state and prices its accesses by those rules;
//! beside it: `fifo` (the bandwidth server every DRAM node and link direction is),
//! `streams` (adding background STREAM cores and solving their arbitration) and
//! `counters` (DRAM and link byte counters, and PCM's view of them).

use crate::time::Time;
use lru::Lru;

mod arbitration;
mod counters;
mod fifo;
mod lru;
mod streams;
mod uncore;
pub use arbitration::{StreamAgent, StreamRates};
pub use fifo::Fifo;
pub use uncore::{Hop, LinkCount, PcmPort, Uncore, UncoreLink};
#[cfg(test)]
mod fifo_lru_tests;
pub mod ownership;
mod pollution;

/// Bytes of a cache line.
pub const LINE: u64 = 64;

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

    pub fn params(&self) -> &MemSysParams {
        &self.p
    }

    /// The uncore graph this memory system's traffic crosses.
    pub fn uncore(&self) -> &Uncore {
        &self.uncore
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
}
