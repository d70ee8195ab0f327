//! pcie-bench's DMA micro-benchmarks (Neugebauer et al., "Understanding PCIe performance
//! for end host networking", SIGCOMM 2018) as a program on a device's DMA engine, so that
//! any device of a scenario can run them as pcie-bench runs on an NFP6000:
//!
//! - `LAT_DMA_RD`: one read of `bytes` at a time, each timed from its command to the
//!   engine's completion; `LAT_DMA_WRRD`: a write command of `bytes`, once it is done a
//!   read command of the same address, timed together.
//! - `BW_DMA_RD`, `BW_DMA_WR`, `BW_DMA_RW`: pcie-bench's 95 workers each keep one
//!   command under way, bounded by the engine (its tags for reads, its issue pace); RW
//!   alternates a read and a write.
//!
//! A write command is done at the device when its last TLP has left (posted writes are
//! not answered); its bytes land in the fabric when each TLP lands.
//!
//! Transfer `k` goes to a unit of the host window: units are `bytes` rounded up to a
//! cache line, walked in order (`Seq`) or drawn at random (`Rand`, a seeded generator),
//! plus the host offset. Every TLP goes through the timed fabric, and bytes move: a read
//! takes the window's bytes when its last completion is back, a write stores its pattern
//! when it lands.

use fabric::{Access, Fault, Requester};
use sim::component::Component;
use sim::net::{ComponentId, Delivery, Event};
use sim::stats::Histogram;
use sim::timed::TimedFabric;
use sim::timers::Timers;
use sim::{pcie, Time};

use crate::dma::{chunk, extend_pattern, pattern_byte, DmaSpec, PageRoutes};

/// Which pcie-bench test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Test {
    LatRd,
    LatWrRd,
    BwRd,
    BwWr,
    BwRw,
}

impl Test {
    pub fn is_latency(self) -> bool {
        matches!(self, Test::LatRd | Test::LatWrRd)
    }
}

/// How transfers walk the window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pattern {
    Seq,
    Rand,
}

/// One benchmark run's shape, as pcie-bench's command line gives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BenchSpec {
    pub test: Test,
    /// Transfer size (pcie-bench's SZ).
    pub bytes: u32,
    /// Host buffer window the transfers cycle through (WinSZ).
    pub window: u64,
    pub pattern: Pattern,
    /// Offset of every transfer from its unit's start (HO).
    pub host_offset: u32,
    /// The random pattern's seed.
    pub seed: u64,
}

impl BenchSpec {
    /// The window's unit: a transfer and its offset, rounded up to a cache line.
    pub fn unit(&self) -> u64 {
        (self.bytes as u64 + self.host_offset as u64).div_ceil(64) * 64
    }

    /// Units in the window (at least one).
    pub fn units(&self) -> u64 {
        (self.window / self.unit()).max(1)
    }

    /// Offset in the window of the transfer that draws `draw` (a sequence number for
    /// `Seq`, a random number for `Rand`).
    fn offset_of(&self, draw: u64) -> u64 {
        (draw % self.units()) * self.unit() + self.host_offset as u64
    }

    /// Whether a transfer at window offset `off` would cross a 4 KiB page, which
    /// pcie-bench never asks its engine for: it draws again.
    fn crosses_page(&self, off: u64) -> bool {
        4096 - (off & 0xfff) < self.bytes as u64
    }

    /// Bytes of the host buffer the transfers touch.
    pub fn span(&self) -> u64 {
        self.units() * self.unit()
    }
}

/// The window offsets of successive transfers, as pcie-bench precomputes them: `Seq`
/// walks the units in order, `Rand` draws them from a seeded generator; a draw whose
/// transfer would cross a 4 KiB page is skipped.
#[derive(Clone, Debug)]
struct Offsets {
    spec: BenchSpec,
    draws: u64,
}

impl Offsets {
    fn next(&mut self) -> u64 {
        // A unit that crosses a page is found within the units of one page.
        for _ in 0..=4096 / 64 {
            let n = self.draws;
            self.draws += 1;
            let draw = match self.spec.pattern {
                Pattern::Seq => n,
                Pattern::Rand => splitmix64(self.spec.seed.wrapping_add(n)),
            };
            let off = self.spec.offset_of(draw);
            if !self.spec.crosses_page(off) {
                return off;
            }
        }
        // Every unit crosses a page (the workload's reader refuses such shapes).
        self.spec.host_offset as u64
    }
}

/// SplitMix64's output function: a well-mixed 64-bit value from a counter, so the k-th
/// random unit needs no state and replays exactly.
fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A device's DMA engine as a benchmark sees it, beyond what PCIe fixes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Engine {
    /// TLP sizes and tags: writes of at most `mps`, reads of at most `mrrs`, `max_reads`
    /// in flight.
    pub dma: DmaSpec,
    /// Least time between two read requests the engine issues.
    pub read_gap: Time,
    /// Least time between the starts of two write commands.
    pub write_gap: Time,
    /// Least time between two write TLPs.
    pub write_tlp_gap: Time,
    /// A read command's time before its first request leaves (the descriptor taken in).
    pub read_command: Time,
    /// A read command's time after its last completion arrived, with the store, before
    /// the command is done; its tags stay held until then (the engine frees a read's
    /// slot when the read is done, not when its data is back).
    pub read_complete: Time,
    /// A write command's: the engine streams the data out as it issues the TLPs and
    /// signals the command done this long after its last TLP left.
    pub write_command: Time,
    /// Storing a read's data into the device's own memory, per KiB (whole, before the
    /// command completes).
    pub store_ps_per_kib: u64,
}

impl Engine {
    /// An engine that adds nothing to PCIe: no pace but the link's, no command time.
    pub fn ideal(dma: DmaSpec) -> Engine {
        Engine {
            dma,
            read_gap: Time::ZERO,
            write_gap: Time::ZERO,
            write_tlp_gap: Time::ZERO,
            read_command: Time::ZERO,
            read_complete: Time::ZERO,
            write_command: Time::ZERO,
            store_ps_per_kib: 0,
        }
    }

    fn store(&self, bytes: u32) -> Time {
        pcie::serialize(bytes, self.store_ps_per_kib)
    }
}

/// What a benchmark measured since its statistics were last reset.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BenchStats {
    /// Transfers completed, and their bytes (RW: both directions).
    pub transfers: u64,
    pub bytes: u64,
    /// Per transfer, command to completion (WRRD: the write's command to the read's end).
    pub latency: Histogram,
    /// Transfers that faulted (a read answered with all-ones, a write refused).
    pub faults: u64,
}

/// A transfer under way: its index, kind and bytes still to come.
#[derive(Clone, Copy, Debug)]
struct Transfer {
    k: u64,
    /// Its window offset.
    at: u64,
    write: bool,
    /// When its command was given, and when its next phase may issue.
    start: Time,
    ready: Time,
    /// Read requests it has issued (the tags it holds until it is done).
    requests: u32,
    /// Bytes not yet issued, not yet done.
    to_issue: u32,
    to_finish: u32,
    faulted: bool,
}

#[derive(Clone, Copy, Debug)]
enum BenchTimer {
    /// The engine may issue its next TLP.
    Issue,
    /// A transfer's completion reaches the benchmark (after the engine's own time).
    Done(u32),
    /// A write command is done at the device.
    Written(u32),
}

/// The benchmark program: a simulation component on the timed fabric.
pub struct PcieBench {
    requester: Requester,
    engine: Engine,
    spec: BenchSpec,
    base: u64,
    reads: PageRoutes,
    writes: PageRoutes,
    /// Transfers under way, by slot; a slot is reused once its transfer is done.
    slots: Vec<Option<Transfer>>,
    /// Slots holding a transfer.
    under_way: usize,
    next_k: u64,
    offsets: Offsets,
    reads_outstanding: u32,
    /// When the read and the write engine may issue next (the device's two DMA queues,
    /// from PCIe and to PCIe, are separate engines).
    read_free: Time,
    write_free: Time,
    /// When the write command under way issued its first TLP.
    write_started: Time,
    /// The issue timer's time, while one is set.
    wake: Option<Time>,
    stopped: bool,
    stats: BenchStats,
    scratch: Vec<u8>,
    /// Writes on their way, by sequence number: (bus address, pattern seed).
    writes_in_flight: rustc_hash::FxHashMap<u32, (u64, u8)>,
    write_seq: u32,
    timers: Timers<BenchTimer>,
}

/// Most transfers a bandwidth test keeps under way: pcie-bench's worker threads, each
/// waiting for its one command (ME0's contexts 1–7 and eleven more MEs × 8 contexts,
/// pcie-bench/pciebench-nfp me/pcie_dma.c `dma_bw_worker`).
const WORKERS: usize = 95;

impl PcieBench {
    /// Plans a benchmark by `requester` over the host buffer at bus address `base` (the
    /// window and its offset must be mapped for both directions).
    pub fn new(
        tf: &mut TimedFabric,
        requester: Requester,
        engine: Engine,
        spec: BenchSpec,
        base: u64,
    ) -> Result<PcieBench, Fault> {
        let span = spec.span() + spec.unit();
        Ok(PcieBench {
            requester,
            engine,
            spec,
            base,
            reads: PageRoutes::lazy(tf, requester, base, span, Access::Read)?,
            writes: PageRoutes::lazy(tf, requester, base, span, Access::Write)?,
            slots: Vec::new(),
            under_way: 0,
            next_k: 0,
            offsets: Offsets { spec, draws: 0 },
            reads_outstanding: 0,
            read_free: Time::ZERO,
            write_free: Time::ZERO,
            write_started: Time::ZERO,
            wake: None,
            stopped: false,
            stats: BenchStats::default(),
            scratch: Vec::new(),
            writes_in_flight: Default::default(),
            write_seq: 0,
            timers: Timers::new(),
        })
    }

    pub fn stats(&self) -> &BenchStats {
        &self.stats
    }

    /// Whether it is BW_DMA_RW (its bytes are both directions').
    pub fn is_read_write(&self) -> bool {
        self.spec.test == Test::BwRw
    }

    pub fn reset_stats(&mut self) {
        self.stats = BenchStats::default();
    }

    /// Gives no new command; those under way complete.
    pub fn stop(&mut self) {
        self.stopped = true;
    }

    /// Starts commands while the test allows more under way.
    fn start_commands(&mut self, now: Time) {
        let limit = if self.spec.test.is_latency() {
            1
        } else {
            WORKERS
        };
        while !self.stopped && self.under_way < limit {
            let k = self.next_k;
            self.next_k += 1;
            let write = match self.spec.test {
                Test::LatRd | Test::BwRd => false,
                Test::LatWrRd | Test::BwWr => true,
                Test::BwRw => k % 2 == 1,
            };
            let t = Transfer {
                k,
                at: self.offsets.next(),
                write,
                ready: if write {
                    now
                } else {
                    now + self.engine.read_command
                },
                requests: 0,
                start: now,
                to_issue: self.spec.bytes,
                to_finish: self.spec.bytes,
                faulted: false,
            };
            match self.slots.iter().position(Option::is_none) {
                Some(i) => self.slots[i] = Some(t),
                None => self.slots.push(Some(t)),
            }
            self.under_way += 1;
        }
    }

    /// Issues TLPs of the oldest transfers that can go, each engine at its own pace.
    fn issue(&mut self, tf: &mut TimedFabric, me: ComponentId) {
        loop {
            let now = tf.net.now();
            let tags_left = self.reads_outstanding < self.engine.dma.max_reads;
            // Neither engine free, and a wake-up already due no later than either frees:
            // nothing issues now, and no slot could ask for an earlier wake-up (each
            // waits at least for its engine). Most deliveries end here.
            let engines_free = if tags_left {
                self.write_free.min(self.read_free)
            } else {
                self.write_free
            };
            if engines_free > now && self.wake.is_some_and(|w| w <= engines_free) {
                return;
            }
            let mut later: Option<Time> = None;
            let mut next = None;
            for (i, t) in self.slots.iter().enumerate() {
                let Some(t) = t.filter(|t| t.to_issue > 0 && (t.write || tags_left)) else {
                    continue;
                };
                let free = if t.write {
                    self.write_free
                } else {
                    self.read_free
                }
                .max(t.ready);
                if free > now {
                    later = Some(later.map_or(free, |l: Time| l.min(free)));
                } else if next.is_none_or(|(_, k)| t.k < k) {
                    next = Some((i, t.k));
                }
            }
            let Some((slot, _)) = next else {
                if let Some(at) = later.filter(|&at| self.wake.is_none_or(|w| at < w)) {
                    self.wake = Some(at);
                    self.timers.at(&mut tf.net, at, me, BenchTimer::Issue);
                }
                return;
            };
            self.issue_one(tf, me, slot, now);
        }
    }

    /// Issues the next TLP of the transfer in `slot`.
    fn issue_one(&mut self, tf: &mut TimedFabric, me: ComponentId, slot: usize, now: Time) {
        let t = self.slots[slot].expect("chosen");
        let offset = self.spec.bytes - t.to_issue;
        let addr = self.base + t.at + offset as u64;
        let limit = if t.write {
            self.engine.dma.mps
        } else {
            self.engine.dma.mrrs
        };
        let n = chunk(addr, t.to_issue as u64, limit);
        let routes = if t.write {
            &mut self.writes
        } else {
            &mut self.reads
        };
        if routes.ensure(tf, addr).is_err() {
            // No route to this page (unmapped, no window): the transfer fails whole, as
            // the engine's DMA command would, without a TLP.
            if let Some(t) = self.slots[slot].as_mut() {
                (t.to_issue, t.to_finish, t.faulted) = (0, 0, true);
            }
            let timer = if t.write {
                BenchTimer::Written(slot as u32)
            } else {
                BenchTimer::Done(slot as u32)
            };
            self.timers.at(&mut tf.net, now, me, timer);
            return;
        }
        if t.write {
            if offset == 0 {
                self.write_started = now;
            }
            let seq = self.write_seq;
            self.write_seq = seq.wrapping_add(1);
            self.writes_in_flight.insert(seq, (addr, t.k as u8));
            let mut issue = self.writes.issue(me, addr, n, seq);
            issue.data = u64::from(pattern_byte(t.k as u8, offset as u64));
            tf.net.send_write(issue);
            let wire = pcie::wire_bytes(n, false, addr >= 1 << 32);
            let wire = pcie::serialize(wire, self.engine.dma.issue_ps_per_kib);
            self.write_free = now + self.engine.write_tlp_gap.max(wire);
            if n == t.to_issue {
                // The last TLP is on the wire: the command is done at the device, and
                // the engine takes the next no sooner than its per-command pace allows.
                let at = now + wire + self.engine.write_command;
                self.timers
                    .at(&mut tf.net, at, me, BenchTimer::Written(slot as u32));
                self.write_free = self
                    .write_free
                    .max(self.write_started + self.engine.write_gap);
            }
        } else {
            let tag = (slot as u64) << 48 | (offset as u64) << 16 | n as u64;
            tf.net
                .send_read(self.reads.issue(me, addr, n, slot as u32), tag);
            self.reads_outstanding += 1;
            if let Some(t) = self.slots[slot].as_mut() {
                t.requests += 1;
            }
            self.read_free = now + self.engine.read_gap;
        }
        if let Some(t) = self.slots[slot].as_mut() {
            t.to_issue -= n;
        }
    }

    /// `n` bytes of the read in `slot` are back (`faulted`: answered with all-ones).
    fn progress(
        &mut self,
        tf: &mut TimedFabric,
        me: ComponentId,
        slot: usize,
        n: u32,
        faulted: bool,
    ) {
        let Some(t) = self.slots[slot].as_mut() else {
            return;
        };
        t.to_finish = t.to_finish.saturating_sub(n);
        t.faulted |= faulted;
        if t.to_finish == 0 {
            let at = tf.net.now() + self.engine.read_complete + self.engine.store(self.spec.bytes);
            self.timers
                .at(&mut tf.net, at, me, BenchTimer::Done(slot as u32));
        }
    }

    /// The write command in `slot` is done at the device: WRRD's read of the same bytes
    /// follows; otherwise the transfer is done.
    fn written(&mut self, tf: &mut TimedFabric, me: ComponentId, slot: usize) {
        let Some(t) = self.slots[slot].as_mut() else {
            return;
        };
        if self.spec.test == Test::LatWrRd {
            t.write = false;
            t.ready = tf.net.now() + self.engine.read_command;
            t.to_issue = self.spec.bytes;
            t.to_finish = self.spec.bytes;
            self.issue(tf, me);
        } else {
            self.finish(tf, me, slot);
        }
    }

    fn finish(&mut self, tf: &mut TimedFabric, me: ComponentId, slot: usize) {
        let Some(t) = self.slots[slot].take() else {
            return;
        };
        self.under_way -= 1;
        let now = tf.net.now();
        self.reads_outstanding -= t.requests;
        self.stats.transfers += 1;
        if t.faulted {
            self.stats.faults += 1;
        } else {
            self.stats.bytes += self.spec.bytes as u64;
        }
        self.stats.latency.record(now - t.start);
        self.start_commands(now);
        self.issue(tf, me);
    }

    /// A write TLP landed (or was dropped): its bytes go into the fabric now.
    fn wrote(&mut self, tf: &mut TimedFabric, seq: u32, bytes: u32) {
        let Some((addr, seed)) = self.writes_in_flight.remove(&seq) else {
            return;
        };
        let offset = self.offset_in_unit(addr);
        let mut data = std::mem::take(&mut self.scratch);
        data.clear();
        extend_pattern(&mut data, seed, offset, bytes as u64);
        let landed = tf.net.delivery_failure().is_none()
            && tf.fabric.store(self.requester, addr, &data).is_ok();
        self.scratch = data;
        if !landed {
            self.stats.faults += 1;
        }
    }

    /// Where `addr` falls in its transfer (the pattern's offset).
    fn offset_in_unit(&self, addr: u64) -> u64 {
        (addr - self.base) % self.spec.unit() - self.spec.host_offset as u64
    }

    fn read_arrived(
        &mut self,
        tf: &mut TimedFabric,
        me: ComponentId,
        tag: u64,
        bytes: u32,
        last: bool,
    ) {
        let slot = (tag >> 48) as usize;
        let offset = (tag >> 16) as u32;
        let request = (tag & 0xFFFF) as usize;
        let failed = tf.net.delivery_failure().is_some();
        let Some(t) = self.slots[slot] else {
            return;
        };
        let mut ur = failed;
        if last {
            // The request's bytes are taken through the fabric's route as its data is back.
            let addr = (self.base + t.at) + offset as u64;
            let mut buf = std::mem::take(&mut self.scratch);
            buf.clear();
            buf.resize(request, 0);
            ur |= tf.fabric.load(self.requester, addr, &mut buf).is_err();
            self.scratch = buf;
        }
        self.progress(tf, me, slot, bytes, ur);
        if last {
            self.issue(tf, me);
        }
    }
}

impl Component<TimedFabric> for PcieBench {
    fn notify(&mut self, tf: &mut TimedFabric, me: ComponentId, event: Event) {
        match event {
            Event::Wake => {
                self.start_commands(tf.net.now());
                self.issue(tf, me);
            }
            Event::Timer(key) => match self.timers.take(key) {
                BenchTimer::Issue => {
                    if self.wake == Some(tf.net.now()) {
                        self.wake = None;
                    }
                    self.issue(tf, me);
                }
                BenchTimer::Done(slot) => self.finish(tf, me, slot as usize),
                BenchTimer::Written(slot) => self.written(tf, me, slot as usize),
            },
            Event::Delivery(Delivery::WriteDone { flow, bytes }) => self.wrote(tf, flow, bytes),
            Event::Delivery(Delivery::ReadData {
                tag, bytes, last, ..
            }) => self.read_arrived(tf, me, tag, bytes, last),
            Event::Delivery(Delivery::Mmio { .. } | Delivery::ReadServed { .. }) => {}
        }
    }

    fn finished(&self) -> bool {
        self.stopped && self.under_way == 0 && self.writes_in_flight.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(pattern: Pattern, bytes: u32, window: u64, host_offset: u32) -> BenchSpec {
        BenchSpec {
            test: Test::BwRd,
            bytes,
            window,
            pattern,
            host_offset,
            seed: 7,
        }
    }

    fn offsets(s: BenchSpec, n: usize) -> Vec<u64> {
        let mut o = Offsets { spec: s, draws: 0 };
        (0..n).map(|_| o.next()).collect()
    }

    #[test]
    fn seq_walks_the_units_in_order_with_the_host_offset() {
        let s = spec(Pattern::Seq, 100, 1024, 4);
        // Units of 104 B rounded up to 128 B: 8 in a 1 KiB window.
        assert_eq!(offsets(s, 9), vec![4, 132, 260, 388, 516, 644, 772, 900, 4]);
    }

    #[test]
    fn no_transfer_crosses_a_page_and_random_units_replay_from_their_seed() {
        for pattern in [Pattern::Seq, Pattern::Rand] {
            let s = spec(pattern, 1520, 64 << 10, 0);
            let o = offsets(s, 1000);
            assert!(o.iter().all(|&a| (a & 0xfff) + 1520 <= 4096), "{pattern:?}");
            assert_eq!(o, offsets(s, 1000));
        }
        let a = offsets(spec(Pattern::Rand, 64, 1 << 20, 0), 4096);
        let distinct: std::collections::BTreeSet<_> = a.iter().collect();
        // Random over 16384 units: most of 4096 draws are different units.
        assert!(distinct.len() > 3500, "{}", distinct.len());
        assert_ne!(a, offsets(spec(Pattern::Seq, 64, 1 << 20, 0), 4096));
    }
}
