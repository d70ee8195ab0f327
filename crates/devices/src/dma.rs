//! A DMA requester as PCIe sees it: posted writes of at most MPS bytes, read requests of
//! at most MRRS bytes with a bounded number outstanding (tags), no request crossing a
//! 4 KiB boundary. Written once and used by every device model (GPU copy engine, NTB DMA
//! engine, NIC, NVMe): only the parameters differ.
//!
//! A `DmaJob` is a simulation component. Work comes as *operations* of `op_bytes` each
//! (one DMA request a driver posts: a 4 KiB page, a 128 MiB copy), with at most
//! `ops_in_flight` under way; each is split into TLPs. Timing and bytes travel together:
//! a write's bytes land in the fabric when its TLP lands in simulated time, a read's bytes
//! are taken from the fabric when its last completion arrives, a copy writes what it read.

use fabric::{Access, Fault, Request, Requester};
use sim::component::{Component, Sim};
use sim::net::{ComponentId, Delivery, Event, Issue};
use sim::stats::Histogram;
use sim::timed::TimedFabric;
use sim::timers::Timers;
use sim::{pcie, Time};
use std::collections::VecDeque;

/// How a requester issues DMA.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DmaSpec {
    /// Max payload of a posted write (bytes).
    pub mps: u32,
    /// Max read request size (bytes).
    pub mrrs: u32,
    /// Read requests in flight at most (tags).
    pub max_reads: u32,
    /// Pacing of posted writes: picoseconds per KiB on the wire (the requester's own link,
    /// or its engine if slower).
    pub issue_ps_per_kib: u64,
}

impl DmaSpec {
    /// The flow model's view of a job of `ops_in_flight` × `op_bytes` doing `op` at these
    /// bus addresses (`None`: as many operations as it takes, over a buffer taken to fit
    /// the IOTLB): the same cutting, tags and pace, so that the closed form and
    /// [`DmaJob`] answer the same question. A copy is described by its reads.
    pub fn stream(&self, op: Op, op_bytes: u64, ops_in_flight: Option<u64>) -> sim::flow::Stream {
        let (write, addr) = match op {
            Op::Write { dst } => (true, dst),
            Op::Read { src } | Op::Copy { src, .. } => (false, src),
        };
        let ops_in_flight = ops_in_flight.map(|n| n.max(1));
        sim::flow::Stream {
            write,
            op_bytes,
            ops_in_flight,
            max_payload: if write { self.mps } else { self.mrrs },
            tags: (!write).then_some(self.max_reads),
            issue_ps_per_kib: self.issue_ps_per_kib,
            data_path: None,
            addr64: addr >= 1 << 32,
            region_bytes: ops_in_flight.map_or(0, |n| op_bytes.saturating_mul(n)),
        }
    }
}

/// What to move.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// Posted writes to bus address `dst` (data comes from the device itself).
    Write { dst: u64 },
    /// Reads at bus address `src` into the device.
    Read { src: u64 },
    /// Read `src`, write what arrives to `dst` (a DMA engine copying between two places).
    Copy { src: u64, dst: u64 },
}

/// The bytes a device writes (for `Op::Write`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Payload {
    /// `pattern_byte(seed, offset)` for the byte at `offset` in the buffer.
    Pattern(u8),
    /// These bytes, repeated over the buffer.
    Bytes(Vec<u8>),
}

/// A deterministic byte pattern that differs between offsets and seeds, so a write that
/// lands in the wrong place shows as wrong bytes.
pub fn pattern_byte(seed: u8, offset: u64) -> u8 {
    pattern_word(seed, offset / 8).to_le_bytes()[(offset % 8) as usize]
}

/// Eight pattern bytes at once (the word at byte offset `8 × word`), so that filling a
/// TLP's payload costs a multiply per 8 bytes.
fn pattern_word(seed: u8, word: u64) -> u64 {
    let salt = (seed as u64 + 1).wrapping_mul(0xD6E8_FEB8_6659_FD93);
    let x = word.wrapping_add(salt).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x ^ (x >> 32)
}

/// Appends the pattern bytes of `[offset, offset + n)` to `out`.
pub(crate) fn extend_pattern(out: &mut Vec<u8>, seed: u8, offset: u64, n: u64) {
    let end = offset + n;
    let mut at = offset;
    while at < end && !at.is_multiple_of(8) {
        out.push(pattern_byte(seed, at));
        at += 1;
    }
    while at + 8 <= end {
        out.extend_from_slice(&pattern_word(seed, at / 8).to_le_bytes());
        at += 8;
    }
    while at < end {
        out.push(pattern_byte(seed, at));
        at += 1;
    }
}

/// The route of every 4 KiB page of a buffer, as the requester addresses it.
#[derive(Clone, Debug)]
pub struct PageRoutes {
    base: u64,
    /// The buffer's first address (its first page may start before it).
    addr: u64,
    requester: Requester,
    access: Access,
    /// Per page: the timed route, and the address at the target of the page's first byte
    /// (a RAM node offset or a BAR offset); `UNPLANNED` until a lazy plan's page is used.
    routes: Vec<(u32, u64)>,
    /// The requester's ID in IOTLB keys.
    rid: u64,
    /// log2 of the IOMMU's page size for these mappings (12, or 21 with super pages).
    page_shift: u32,
}

const UNPLANNED: u32 = u32::MAX;

impl PageRoutes {
    /// Routes every page of `[addr, addr + bytes)` for `access` by `requester`.
    pub fn plan(
        tf: &mut TimedFabric,
        requester: Requester,
        addr: u64,
        bytes: u64,
        access: Access,
    ) -> Result<PageRoutes, Fault> {
        let mut p = PageRoutes::lazy(tf, requester, addr, bytes, access)?;
        for page in 1..p.routes.len() {
            p.plan_page(tf, page)?;
        }
        Ok(p)
    }

    /// Routes the first page of `[addr, addr + bytes)` now and each other page when a
    /// request first needs it (`ensure`): a large buffer touched at random pays only for
    /// the pages it touches.
    pub fn lazy(
        tf: &mut TimedFabric,
        requester: Requester,
        addr: u64,
        bytes: u64,
        access: Access,
    ) -> Result<PageRoutes, Fault> {
        let base = addr & !0xfff;
        let end = addr + bytes.max(1);
        let pages = (end - base).div_ceil(4096) as usize;
        let rid = tf.fabric.requester_rid(requester).0 as u64;
        let host = tf.fabric.topo.host(tf.fabric.requester_host(requester));
        let page_shift = if host.iommu_superpages { 21 } else { 12 };
        let mut p = PageRoutes {
            base,
            addr,
            requester,
            access,
            routes: vec![(UNPLANNED, 0); pages],
            rid,
            page_shift,
        };
        p.plan_page(tf, 0)?;
        Ok(p)
    }

    fn plan_page(&mut self, tf: &mut TimedFabric, page: usize) -> Result<(), Fault> {
        let start = self.base + ((page as u64) << 12);
        let at = start.max(self.addr);
        let req = Request {
            requester: self.requester,
            addr: at,
            len: 1,
            access: self.access,
        };
        let (route, target) = tf.route(&req)?;
        let at_target = sim::timed::sink_address(&target);
        self.routes[page] = (route, at_target - (at - start));
        Ok(())
    }

    /// Routes the page holding `addr` if a lazy plan has not yet.
    pub(crate) fn ensure(&mut self, tf: &mut TimedFabric, addr: u64) -> Result<(), Fault> {
        let page = ((addr - self.base) >> 12) as usize;
        match self.routes[page].0 {
            UNPLANNED => self.plan_page(tf, page),
            _ => Ok(()),
        }
    }

    /// What a request of `bytes` at `addr` needs to be injected (its page planned).
    #[inline]
    pub(crate) fn issue(&self, owner: ComponentId, addr: u64, bytes: u32, flow: u32) -> Issue {
        let (route, page_target) = self.routes[((addr - self.base) >> 12) as usize];
        debug_assert!(
            route != UNPLANNED,
            "a lazily planned page used before `ensure`"
        );
        Issue {
            addr64: addr >= 1 << 32,
            iotlb_key: (self.rid << 48) | (addr >> self.page_shift),
            ..Issue::new(route, owner, flow, bytes, page_target + (addr & 0xfff))
        }
    }
}

/// The largest request from `addr` within `limit` bytes, not crossing 4 KiB.
#[inline]
pub(crate) fn chunk(addr: u64, left: u64, limit: u32) -> u32 {
    let to_page = 4096 - (addr & 0xfff);
    left.min(limit as u64).min(to_page) as u32
}

/// When a DMA job started and ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DmaOutcome {
    pub start: Time,
    /// When half of the bytes had arrived (for a steady-state rate over the second half).
    pub mid: Time,
    pub end: Time,
    pub bytes: u64,
}

impl DmaOutcome {
    pub fn gbps(&self) -> f64 {
        self.bytes as f64 / (self.end - self.start).as_ps().max(1) as f64 * 1000.0
    }

    /// Rate over the second half of the transfer (GB/s).
    pub fn steady_gbps(&self) -> f64 {
        (self.bytes - self.bytes / 2) as f64 / (self.end - self.mid).as_ps().max(1) as f64 * 1000.0
    }
}

/// What a job has done since its statistics were last reset.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DmaStats {
    /// Bytes that completed (landed, or arrived for reads; written for copies).
    pub bytes: u64,
    pub ops: u64,
    /// Latency of completed operations (first TLP issued to last byte done).
    pub op_latency: Histogram,
    /// Accesses that faulted: the writes dropped and the reads answered with all-ones
    /// below, and any other fault the fabric logged when bytes moved.
    pub faults: u64,
    /// Posted writes dropped: at a dead link on the way (the network's hop), or refused
    /// by the fabric's route when they landed (a host crashed under them). The bytes are
    /// not stored and not counted in `bytes`; the requester could not have known.
    pub writes_dropped: u64,
    /// Reads completed as Unsupported Request — at a dead link on the way, by the
    /// completion timeout when their completions were lost, or because the fabric's
    /// route faulted when the data came back: the requester got all-ones, as a driver
    /// checking for `0xFF…` sees, and those bytes are not counted in `bytes`.
    pub ur_completions: u64,
}

/// How many operations to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ops {
    Count(u64),
    /// Until stopped (a workload measured over a window).
    Endless,
}

/// A DMA requester running operations through the timed fabric.
pub struct DmaJob {
    requester: Requester,
    spec: DmaSpec,
    op: Op,
    op_bytes: u64,
    ops: Ops,
    ops_in_flight: u64,
    /// Buffer slots: operation k uses slot k mod slots, `op_bytes` each.
    slots: u64,
    payload: Payload,
    reads: Option<PageRoutes>,
    writes: Option<PageRoutes>,
    /// Next byte position (op index × op_bytes + offset) to request / to write.
    read_next: u64,
    write_next: u64,
    reads_outstanding: u32,
    /// For a copy: read data waiting to be written, as (position, bytes, bytes written).
    pending: VecDeque<(u64, Vec<u8>, usize)>,
    /// Spent data buffers, reused so that steady state does not allocate.
    pool: Vec<Vec<u8>>,
    /// Writes in flight, by sequence number from `write_seq_base`: (position, data).
    in_flight: VecDeque<Option<(u64, Vec<u8>)>>,
    write_seq_base: u32,
    /// Operations under way, from `op_base`: (first issue, bytes done).
    under_way: VecDeque<(Time, u64)>,
    op_base: u64,
    ops_done: u64,
    stopped: bool,
    pacing: bool,
    /// The device's own data path behind the engine (a NIC's line, an NVMe's media), in
    /// ps per KiB of payload, read or written (0: none): no request starts before the
    /// path has moved the previous one's bytes.
    data_ps_per_kib: u64,
    /// When the data path may take the next request, and whether a timer waits for it.
    data_free: Time,
    read_waiting: bool,
    /// When each retired operation left the window, oldest first: operation k may start
    /// only once operation k − `ops_in_flight` has, so that is when it entered the device's
    /// queue (its latency counts from there, the wait for the link or the path included).
    retired_at: VecDeque<Time>,
    scratch: Vec<u8>,
    /// Kept read data (position → bytes) when capturing.
    capture: Option<Vec<u8>>,
    /// Reads under way that a delivery already said failed (few: a split read's part).
    failed_reads: Vec<(u64, u64)>,
    stats: DmaStats,
    total_done: u64,
    start: Time,
    mid: Time,
    end: Time,
    timers: Timers<DmaTimer>,
}

/// What a job's timer means.
#[derive(Clone, Copy, Debug)]
enum DmaTimer {
    /// The pacing gap before the next write has passed.
    NextWrite,
    /// The data path may take the next read.
    NextRead,
}

impl DmaJob {
    /// Plans a job of one operation of `bytes`: routes every page it touches.
    pub fn new(
        tf: &mut TimedFabric,
        requester: Requester,
        spec: DmaSpec,
        op: Op,
        bytes: u64,
    ) -> Result<DmaJob, Fault> {
        DmaJob::ops(tf, requester, spec, op, bytes, Ops::Count(1), 1)
    }

    /// Plans a job of `ops` operations of `op_bytes`, at most `in_flight` under way, over a
    /// buffer of `in_flight` slots of `op_bytes` at the op's addresses.
    pub fn ops(
        tf: &mut TimedFabric,
        requester: Requester,
        spec: DmaSpec,
        op: Op,
        op_bytes: u64,
        ops: Ops,
        in_flight: u64,
    ) -> Result<DmaJob, Fault> {
        let in_flight = in_flight.max(1);
        let region = op_bytes * in_flight;
        let (reads, writes) = match op {
            Op::Write { dst } => (
                None,
                Some(PageRoutes::plan(tf, requester, dst, region, Access::Write)?),
            ),
            Op::Read { src } => (
                Some(PageRoutes::plan(tf, requester, src, region, Access::Read)?),
                None,
            ),
            Op::Copy { src, dst } => (
                Some(PageRoutes::plan(tf, requester, src, region, Access::Read)?),
                Some(PageRoutes::plan(tf, requester, dst, region, Access::Write)?),
            ),
        };
        Ok(DmaJob {
            requester,
            spec,
            op,
            op_bytes,
            ops,
            ops_in_flight: in_flight,
            slots: in_flight,
            payload: Payload::Pattern(0),
            reads,
            writes,
            read_next: 0,
            write_next: 0,
            reads_outstanding: 0,
            pending: VecDeque::new(),
            pool: Vec::new(),
            in_flight: VecDeque::new(),
            write_seq_base: 0,
            under_way: VecDeque::new(),
            op_base: 0,
            ops_done: 0,
            stopped: false,
            pacing: false,
            data_ps_per_kib: 0,
            data_free: Time::ZERO,
            read_waiting: false,
            retired_at: VecDeque::new(),
            scratch: Vec::new(),
            capture: None,
            failed_reads: Vec::new(),
            stats: DmaStats::default(),
            total_done: 0,
            start: Time::ZERO,
            mid: Time::ZERO,
            end: Time::ZERO,
            timers: Timers::new(),
        })
    }

    /// Sets the bytes a write job writes.
    pub fn with_payload(mut self, p: Payload) -> DmaJob {
        self.payload = p;
        self
    }

    /// Bounds the job by the device's own data path behind its DMA engine (a NIC's line
    /// rate, an NVMe's media rate), `ps_per_kib` of payload whatever the direction.
    pub fn with_data_pace(mut self, ps_per_kib: u64) -> DmaJob {
        self.data_ps_per_kib = ps_per_kib;
        self
    }

    /// Keeps the bytes a read job reads (buffer offset → byte), for checks.
    pub fn capturing(mut self) -> DmaJob {
        self.capture = Some(vec![0; (self.op_bytes * self.slots) as usize]);
        self
    }

    pub fn captured(&self) -> Option<&[u8]> {
        self.capture.as_deref()
    }

    pub fn stats(&self) -> &DmaStats {
        &self.stats
    }

    /// Starts counting afresh (the end of a warm-up).
    pub fn reset_stats(&mut self) {
        self.stats = DmaStats::default();
    }

    /// Issues no new operation; those under way complete.
    pub fn stop(&mut self) {
        self.stopped = true;
    }

    pub fn outcome(&self) -> DmaOutcome {
        DmaOutcome {
            start: self.start,
            mid: self.mid,
            end: self.end,
            bytes: self.total_bytes(),
        }
    }

    fn total_bytes(&self) -> u64 {
        match self.ops {
            Ops::Count(n) => n * self.op_bytes,
            Ops::Endless => u64::MAX,
        }
    }

    /// Runs the job alone on the network from `at` until it is done.
    pub fn run(self, tf: &mut TimedFabric, at: Time) -> (DmaOutcome, DmaStats) {
        let job = self.run_alone(tf, at);
        (job.outcome(), job.stats)
    }

    /// Runs the job alone from `at` until it is done and gives it back (its statistics,
    /// captured bytes).
    pub fn run_alone(self, tf: &mut TimedFabric, at: Time) -> DmaJob {
        let mut sim = Sim::new();
        let id = sim.add(self);
        tf.net.wake_at(at, id);
        sim.run_until_finished(tf);
        sim.take::<DmaJob>(id).expect("added above")
    }

    /// Bus address of byte position `pos` from `base`.
    fn addr(&self, base: u64, pos: u64) -> u64 {
        let op = pos / self.op_bytes;
        base + (op % self.slots) * self.op_bytes + pos % self.op_bytes
    }

    fn buffer_offset(&self, pos: u64) -> u64 {
        (pos / self.op_bytes % self.slots) * self.op_bytes + pos % self.op_bytes
    }

    fn end_pos(&self) -> u64 {
        match self.ops {
            Ops::Count(n) => n * self.op_bytes,
            Ops::Endless => u64::MAX,
        }
    }

    /// Whether the operation holding `pos` may start (the in-flight limit, a stop).
    fn may_touch(&mut self, pos: u64, now: Time) -> bool {
        if pos >= self.end_pos() {
            return false;
        }
        let op = pos / self.op_bytes;
        let started = self.op_base + self.under_way.len() as u64;
        if op < started {
            return true;
        }
        if self.stopped || op - self.op_base >= self.ops_in_flight {
            return false;
        }
        let admitted = match op < self.ops_in_flight {
            true => self.start.min(now),
            false => self.retired_at.pop_front().unwrap_or(now),
        };
        self.under_way.push_back((admitted, 0));
        true
    }

    fn issue_reads(&mut self, tf: &mut TimedFabric, me: ComponentId) {
        let (Op::Read { src } | Op::Copy { src, .. }) = self.op else {
            return;
        };
        let now = tf.net.now();
        while self.reads_outstanding < self.spec.max_reads {
            if self.data_free > now {
                if !self.read_waiting {
                    self.read_waiting = true;
                    let at = self.data_free;
                    self.timers.at(&mut tf.net, at, me, DmaTimer::NextRead);
                }
                return;
            }
            if !self.may_touch(self.read_next, now) {
                return;
            }
            let addr = self.addr(src, self.read_next);
            let left = self.op_bytes - self.read_next % self.op_bytes;
            let n = chunk(addr, left, self.spec.mrrs);
            if self.data_ps_per_kib > 0 {
                self.data_free = now + pcie::serialize(n, self.data_ps_per_kib);
            }
            let routes = self.reads.as_ref().expect("read job has read routes");
            tf.net
                .send_read(routes.issue(me, addr, n, 0), self.read_next);
            self.read_next += n as u64;
            self.reads_outstanding += 1;
        }
    }

    /// Issues one posted write (of the next chunk) and schedules the next by pacing.
    fn issue_write(&mut self, tf: &mut TimedFabric, me: ComponentId) {
        let (Op::Write { dst } | Op::Copy { dst, .. }) = self.op else {
            return;
        };
        let now = tf.net.now();
        let is_copy = matches!(self.op, Op::Copy { .. });
        let (pos, limit) = match is_copy {
            true => match self.pending.front() {
                Some((pos, data, done)) => (*pos + *done as u64, (data.len() - done) as u64),
                None => {
                    self.pacing = false;
                    return;
                }
            },
            false if self.may_touch(self.write_next, now) => (
                self.write_next,
                self.op_bytes - self.write_next % self.op_bytes,
            ),
            _ => {
                self.pacing = false;
                return;
            }
        };
        let addr = self.addr(dst, pos);
        let n = chunk(addr, limit, self.spec.mps);
        let mut data = self.pool.pop().unwrap_or_default();
        data.clear();
        match self.op {
            Op::Copy { .. } => {
                let front = self.pending.front_mut().expect("checked");
                data.extend_from_slice(&front.1[front.2..front.2 + n as usize]);
                front.2 += n as usize;
                if front.2 == front.1.len() {
                    let (_, spent, _) = self.pending.pop_front().expect("checked");
                    self.pool.push(spent);
                }
            }
            _ => {
                self.write_next += n as u64;
                let off = self.buffer_offset(pos);
                match &self.payload {
                    Payload::Pattern(seed) => extend_pattern(&mut data, *seed, off, n as u64),
                    Payload::Bytes(b) if b.is_empty() => data.resize(n as usize, 0),
                    Payload::Bytes(b) => {
                        data.extend((0..n as u64).map(|i| b[((off + i) % b.len() as u64) as usize]))
                    }
                }
            }
        }
        let seq = self
            .write_seq_base
            .wrapping_add(self.in_flight.len() as u32);
        let mut issue = self
            .writes
            .as_ref()
            .expect("write job has write routes")
            .issue(me, addr, n, seq);
        issue.data = data
            .iter()
            .take(8)
            .enumerate()
            .fold(0u64, |acc, (i, b)| acc | (*b as u64) << (8 * i));
        self.in_flight.push_back(Some((pos, data)));
        tf.net.send_write(issue);
        self.pacing = true;
        let gap = pcie::serialize(
            pcie::wire_bytes(n, false, addr >= 1 << 32),
            self.spec.issue_ps_per_kib,
        )
        .max(pcie::serialize(n, self.data_ps_per_kib));
        self.timers
            .at(&mut tf.net, now + gap, me, DmaTimer::NextWrite);
    }

    /// `bytes` of the operation holding `pos` are done.
    fn progress(&mut self, now: Time, pos: u64, bytes: u64, delivered: u64) {
        self.stats.bytes += delivered;
        self.total_done += bytes;
        let total = self.total_bytes();
        if self.mid == Time::ZERO && self.total_done >= total / 2 {
            self.mid = now;
        }
        let op = pos / self.op_bytes;
        let Some(slot) = self.under_way.get_mut((op - self.op_base) as usize) else {
            return;
        };
        slot.1 += bytes;
        if slot.1 >= self.op_bytes {
            self.stats.ops += 1;
            self.stats.op_latency.record(now - slot.0);
            self.ops_done += 1;
            // Retire completed operations from the front, in order.
            while self
                .under_way
                .front()
                .is_some_and(|&(_, done)| done >= self.op_bytes)
            {
                self.under_way.pop_front();
                self.op_base += 1;
                self.retired_at.push_back(now);
            }
        }
        if self.total_done >= total {
            self.end = now;
        }
    }

    fn wrote(&mut self, tf: &mut TimedFabric, me: ComponentId, seq: u32, bytes: u32) {
        let idx = seq.wrapping_sub(self.write_seq_base) as usize;
        let Some((pos, data)) = self.in_flight.get_mut(idx).and_then(Option::take) else {
            return;
        };
        while self.in_flight.front().is_some_and(Option::is_none) {
            self.in_flight.pop_front();
            self.write_seq_base = self.write_seq_base.wrapping_add(1);
        }
        let (Op::Write { dst } | Op::Copy { dst, .. }) = self.op else {
            return;
        };
        let addr = self.addr(dst, pos);
        // Dropped at a dead link on the way (seen at the hop, when the TLP would have
        // crossed it): nothing lands. Otherwise the bytes land through the fabric's
        // route now, which refuses them if the target died since (a crashed host).
        let landed = tf.net.delivery_failure().is_none()
            && tf.fabric.store(self.requester, addr, &data).is_ok();
        if !landed {
            self.stats.faults += 1;
            self.stats.writes_dropped += 1;
        }
        self.pool.push(data);
        let delivered = if landed { bytes as u64 } else { 0 };
        self.progress(tf.net.now(), pos, bytes as u64, delivered);
        if !self.pacing {
            self.issue_write(tf, me);
            // A copy's reads wait for nothing but tags; a write job's next op may start.
            self.issue_reads(tf, me);
        }
    }

    fn read_arrived(
        &mut self,
        tf: &mut TimedFabric,
        me: ComponentId,
        pos: u64,
        bytes: u32,
        last: bool,
    ) {
        // A read that any part of failed completes as UR (all-ones), whatever data came.
        let failed = tf.net.delivery_failure().is_some();
        if failed && !last {
            match self.failed_reads.iter_mut().find(|r| r.0 == pos) {
                Some(r) => r.1 += bytes as u64,
                None => self.failed_reads.push((pos, bytes as u64)),
            }
        }
        let src = match self.op {
            Op::Read { src } | Op::Copy { src, .. } => src,
            Op::Write { .. } => return,
        };
        let addr = self.addr(src, pos);
        let n = chunk(addr, self.op_bytes - pos % self.op_bytes, self.spec.mrrs) as usize;
        let mut buf = std::mem::take(&mut self.scratch);
        // Bytes of this read's deliveries that said they failed (not counted as read).
        let earlier = match self.failed_reads.iter().position(|r| r.0 == pos) {
            Some(i) if last => Some(self.failed_reads.swap_remove(i).1),
            _ => None,
        };
        let ur = last && {
            buf.clear();
            buf.resize(n, 0);
            // The bytes are taken through the fabric's route when the data is back; a
            // failed read gives all-ones without touching it.
            failed || earlier.is_some() || tf.fabric.load(self.requester, addr, &mut buf).is_err()
        };
        if ur {
            buf.fill(0xFF);
            self.stats.faults += 1;
            self.stats.ur_completions += 1;
        }
        if matches!(self.op, Op::Read { .. }) {
            // Data that came back counts as it comes; a failure's bytes never do, and a
            // read that ends as UR gives back what its data had counted.
            let delivered = if failed { 0 } else { bytes as u64 };
            self.progress(tf.net.now(), pos, bytes as u64, delivered);
            if ur {
                let not_counted = earlier.unwrap_or(0) + if failed { bytes as u64 } else { 0 };
                let counted = (n as u64).saturating_sub(not_counted);
                self.stats.bytes = self.stats.bytes.saturating_sub(counted);
            }
        }
        if !last {
            self.scratch = buf;
            return;
        }
        self.reads_outstanding -= 1;
        if let Some(c) = self.capture.as_mut() {
            let off =
                ((pos / self.op_bytes % self.slots) * self.op_bytes + pos % self.op_bytes) as usize;
            c[off..off + n].copy_from_slice(&buf);
        }
        // A copy engine writes what its read returned: after a UR that is all-ones,
        // counted in `ur_completions` (the driver's check), never passed off as data.
        if let Op::Copy { .. } = self.op {
            let mut data = self.pool.pop().unwrap_or_default();
            data.clear();
            data.extend_from_slice(&buf);
            self.pending.push_back((pos, data, 0));
            if !self.pacing {
                self.issue_write(tf, me);
            }
        }
        self.scratch = buf;
        self.issue_reads(tf, me);
    }
}

impl Component<TimedFabric> for DmaJob {
    fn notify(&mut self, tf: &mut TimedFabric, me: ComponentId, event: Event) {
        match event {
            Event::Timer(key) => match self.timers.take(key) {
                DmaTimer::NextWrite => self.issue_write(tf, me),
                DmaTimer::NextRead => {
                    self.read_waiting = false;
                    self.issue_reads(tf, me);
                }
            },
            Event::Wake => {
                self.start = tf.net.now();
                if self.total_bytes() == 0 {
                    self.end = self.start;
                }
                match self.op {
                    Op::Write { .. } => self.issue_write(tf, me),
                    Op::Read { .. } | Op::Copy { .. } => self.issue_reads(tf, me),
                }
            }
            Event::Delivery(Delivery::WriteDone { flow, bytes }) => self.wrote(tf, me, flow, bytes),
            Event::Delivery(Delivery::ReadData {
                tag, bytes, last, ..
            }) => self.read_arrived(tf, me, tag, bytes, last),
            Event::Delivery(Delivery::Mmio { .. } | Delivery::ReadServed { .. }) => {}
        }
    }

    fn finished(&self) -> bool {
        match self.ops {
            Ops::Count(n) => self.ops_done >= n,
            Ops::Endless => self.stopped && self.under_way.is_empty(),
        }
    }
}

/// A small posted write of `data` until it lands (a doorbell, a flag, a counter): its
/// bytes land in the fabric at that moment.
pub fn timed_write(
    tf: &mut TimedFabric,
    requester: Requester,
    dst: u64,
    data: &[u8],
) -> Result<Time, Fault> {
    let spec = single_spec();
    let job = DmaJob::new(tf, requester, spec, Op::Write { dst }, data.len() as u64)?
        .with_payload(Payload::Bytes(data.to_vec()));
    let (o, s) = job.run(tf, Time::ZERO);
    fault_if_any(tf, s.faults)?;
    Ok(o.end - o.start)
}

/// A small read until its data is back (a poll): the bytes as they are when they are read.
pub fn timed_read(
    tf: &mut TimedFabric,
    requester: Requester,
    src: u64,
    len: u32,
) -> Result<(Vec<u8>, Time), Fault> {
    let spec = single_spec();
    let job = DmaJob::new(tf, requester, spec, Op::Read { src }, len as u64)?
        .capturing()
        .run_alone(tf, Time::ZERO);
    fault_if_any(tf, job.stats.faults)?;
    let o = job.outcome();
    Ok((job.captured().unwrap_or_default().to_vec(), o.end - o.start))
}

fn single_spec() -> DmaSpec {
    DmaSpec {
        mps: 4096,
        mrrs: 4096,
        max_reads: 1,
        issue_ps_per_kib: 1,
    }
}

fn fault_if_any(tf: &TimedFabric, faults: u64) -> Result<(), Fault> {
    match (faults, tf.fabric.faults().last()) {
        (0, _) => Ok(()),
        (_, Some(f)) => Err(*f),
        (_, None) => Ok(()),
    }
}

/// Time of one small access on an idle network: a posted write (of a pattern) until it
/// lands, or a read until its data is back.
pub fn single_access(
    tf: &mut TimedFabric,
    requester: Requester,
    op: Op,
    bytes: u32,
) -> Result<Time, Fault> {
    match op {
        Op::Write { dst } => {
            let data: Vec<u8> = (0..bytes as u64).map(|i| pattern_byte(0, i)).collect();
            timed_write(tf, requester, dst, &data)
        }
        Op::Read { src } => timed_read(tf, requester, src, bytes).map(|(_, t)| t),
        Op::Copy { .. } => {
            let job = DmaJob::new(tf, requester, single_spec(), op, bytes as u64)?;
            let (o, _) = job.run(tf, Time::ZERO);
            Ok(o.end - o.start)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pattern_filled_by_words_is_the_pattern_byte_by_byte() {
        for (off, n) in [(0, 64), (3, 61), (4093, 300), (7, 1), (8, 8)] {
            let mut v = Vec::new();
            extend_pattern(&mut v, 5, off, n);
            let want: Vec<u8> = (off..off + n).map(|i| pattern_byte(5, i)).collect();
            assert_eq!(v, want, "{off} {n}");
        }
        assert_ne!(pattern_byte(1, 0), pattern_byte(2, 0), "seeds differ");
        let distinct: std::collections::BTreeSet<u8> =
            (0..256).map(|i| pattern_byte(0, i)).collect();
        assert!(distinct.len() > 128, "offsets differ");
    }
}
