//! The scheduler moving a stream's receiving thread to another socket, and the driver
//! interface the stack calls when the flow's consuming CPU changes (Linux's
//! `ndo_rx_flow_steer`, the ARFS callback). The NIC-side policy — which PF and queue a
//! frame of the flow enters, when a rule changes, which PF a transmit goes through — is
//! the driver's ([`FlowDriver`], implemented by `systems::ioctopus`); the stack only
//! moves the thread, asks, and reports.

use sim::Time;

use super::rxq::Ring;
use super::stream::{self, StreamResult, StreamSpec};
use super::NetHost;

/// A receive queue: its index on every PF (one queue per core) and the node of its
/// ring and buffers (the queue's core's node, as the driver allocates them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RxQueue {
    pub index: u16,
    pub node: u32,
}

/// The driver of the NIC for one flow, as the stack sees it.
pub trait FlowDriver {
    /// `ndo_rx_flow_steer`: the flow is now consumed on a core of `socket`, reading
    /// `queue`; the driver may change its rules later (from a worker).
    fn rx_flow_steer(&mut self, t: Time, socket: u32, queue: RxQueue);
    /// When the driver next has work (a rule update, an idle rule to expire).
    fn next_work(&self) -> Option<Time>;
    /// Runs the work due at `t`.
    fn work(&mut self, t: Time);
    /// A frame of the flow reaches the NIC at `t`: the PF and queue index it enters.
    fn rx_steer(&mut self, t: Time) -> (usize, u16);
    /// A transmit of the flow posted at `t` from a core on `socket`, leaving the queue at
    /// `done`: the PF it goes through.
    fn tx_pf(&mut self, t: Time, socket: u32, done: Time) -> usize;
}

/// The scheduler moves the receiving thread at `at` to a core of `to_socket` whose
/// receive queue is `to_queue`.
#[derive(Clone, Copy, Debug)]
pub struct Move {
    pub at: Time,
    pub to_socket: u32,
    pub to_queue: RxQueue,
}

/// A TCP stream whose receiver migrates, with each PF's received bytes sampled.
#[derive(Clone, Copy, Debug)]
pub struct MigrationSpec {
    pub stream: StreamSpec,
    pub mv: Move,
    /// The queue the receiving thread reads before the move.
    pub from_queue: RxQueue,
    /// Sampling period of the per-PF receive counters (from time zero).
    pub sample: Time,
}

/// What a migrating stream measured.
#[derive(Clone, Debug, Default)]
pub struct MigrationResult {
    pub stream: StreamResult,
    /// Payload bytes each PF wrote to memory in each sample period: `[pf][sample]`.
    pub pf_rx_bytes: Vec<Vec<u64>>,
    /// Segments TCP received ahead of a hole (held in its out-of-order queue).
    pub reordered: u64,
    /// Payload bytes sent and neither read, unread, held out of order nor in a ring at
    /// the end (the model has no drop point; this checks the lanes lose nothing).
    pub lost: u64,
    /// Most frames each lane's ring held at once (old queue, new queue): a 1,024-entry
    /// ring of one frame per descriptor would have dropped above that.
    pub ring_peak: Vec<u64>,
    /// ARFS callbacks the stack made.
    pub callbacks: u64,
}

/// Runs a TCP stream from `tx` to `rx` whose receiving thread the scheduler moves per
/// `spec.mv`, with the receive NIC's rules in `driver`.
pub fn run(
    tx: &mut NetHost,
    rx: &mut NetHost,
    spec: MigrationSpec,
    driver: &mut dyn FlowDriver,
) -> Result<MigrationResult, String> {
    if spec.sample == Time::ZERO {
        return Err("the sampling period must be > 0".into());
    }
    if spec.mv.to_socket as usize >= rx.mem.params().sockets as usize {
        return Err(format!(
            "the thread cannot move to socket {}: the host has {}",
            spec.mv.to_socket,
            rx.mem.params().sockets
        ));
    }
    for q in [spec.from_queue, spec.mv.to_queue] {
        if q.node >= rx.mem.params().sockets {
            return Err(format!(
                "receive queue {}'s ring cannot be on node {}: the host has {}",
                q.index,
                q.node,
                rx.mem.params().sockets
            ));
        }
    }
    if spec.mv.to_queue.index == spec.from_queue.index {
        return Err("the new core's queue must differ from the old core's".into());
    }
    if rx.lro {
        return Err("a migrating receiver cannot use hardware LRO (its aggregates are not steered per frame)".into());
    }
    let pfs = rx.nic.pfs.len();
    stream::run_migrating(tx, rx, spec, Migrating::new(spec, driver, pfs))
}

/// The migration side of a running stream: the move, the driver, what it observed.
pub(crate) struct Migrating<'a> {
    pub spec: MigrationSpec,
    pub driver: &'a mut dyn FlowDriver,
    /// The queue the receiving thread reads now, and the last one the driver was told.
    pub consumer: RxQueue,
    told: u16,
    /// When the driver is next woken (its pending `Driver` event).
    pub driver_at: Option<Time>,
    pf_rx_bytes: Vec<Vec<u64>>,
    pub callbacks: u64,
}

/// What the stream observed of its receive side, for [`MigrationResult`].
pub(crate) struct Observed {
    pub reordered: u64,
    pub lost: u64,
    pub ring_peak: Vec<u64>,
}

impl<'a> Migrating<'a> {
    pub fn new(spec: MigrationSpec, driver: &'a mut dyn FlowDriver, pfs: usize) -> Self {
        Migrating {
            spec,
            driver,
            consumer: spec.from_queue,
            told: spec.from_queue.index,
            driver_at: None,
            pf_rx_bytes: vec![Vec::new(); pfs],
            callbacks: 0,
        }
    }

    /// The receive rings of the flow: the old core's queue's and the new one's.
    pub fn rings(&self) -> Vec<Ring> {
        [self.spec.from_queue, self.spec.mv.to_queue]
            .map(|q| Ring::on(q.node, q.index))
            .to_vec()
    }

    /// Counts `bytes` of payload written by receive PF `pf` at `at` into its sample.
    pub fn sample(&mut self, at: Time, pf: usize, bytes: u64) {
        let i = (at.as_ps() / self.spec.sample.as_ps()) as usize;
        let v = &mut self.pf_rx_bytes[pf];
        if v.len() <= i {
            v.resize(i + 1, 0);
        }
        v[i] += bytes;
    }

    /// The stack met a segment of the flow on queue `queue` while the thread reads
    /// another: it tells the driver where the flow is consumed now (once per change).
    pub fn met(&mut self, t: Time, socket: u32, queue: u16) {
        if queue != self.consumer.index && self.told != self.consumer.index {
            self.told = self.consumer.index;
            self.callbacks += 1;
            self.driver.rx_flow_steer(t, socket, self.consumer);
        }
    }

    pub fn result(self, stream: StreamResult, o: Observed) -> MigrationResult {
        let run = self.spec.stream.warmup + self.spec.stream.window;
        let samples = run.as_ps().div_ceil(self.spec.sample.as_ps()) as usize;
        let mut pf_rx_bytes = self.pf_rx_bytes;
        for v in &mut pf_rx_bytes {
            v.resize(samples, 0);
        }
        MigrationResult {
            stream,
            pf_rx_bytes,
            reordered: o.reordered,
            lost: o.lost,
            ring_peak: o.ring_peak,
            callbacks: self.callbacks,
        }
    }
}
