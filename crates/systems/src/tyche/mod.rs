//! Tyche, a network-storage protocol over raw Ethernet, with its NUMA extension
//! (docs/hardware.md §3), on top of the host layer's cores and the devices layer's NIC.
//!
//! An initiator exposes a block device whose requests travel to a target's ramdisk over
//! one or more NICs ("multi-NIC bundling"). A request is one small frame; its data
//! travels in 4 or 8 KiB jumbo frames that the sender places at an offset the receiver
//! chose in a pre-allocated buffer (a slot of the channel). One network thread per NIC
//! receives; the target completes requests through a work queue; the initiator copies
//! read data from its slot into the request's pages.
//!
//! A **channel** is one NIC pair with its slots, rings and threads. Where a side keeps a
//! channel's memory and threads (`Place`) and how the initiator picks a channel for a
//! request (`Scheduler`) are set per side, so the NUMA extension (memory, rings and
//! threads on the NIC's node; the request goes to a channel on the node of its pages,
//! the one that has carried the fewest kilobytes) and the round-robin baseline combine
//! freely. `Scheduler::NumaSpill` is an extension the paper lacks: a request leaves its
//! node only when the model predicts it finishes sooner there (`sched`).
//!
//! Which context takes received frames is a choice (`rx::RxPath`): by default the
//! network threads see a frame as soon as it lands and nobody sleeps (`Polling`); on the
//! interrupt paths the NIC raises a moderated interrupt (`rx`, `devices::nic`'s
//! coalescer) on a core of its node, whose NAPI poll either wakes the channel's network
//! thread (`NetworkThread`) or runs Tyche's handler itself (`Softirq`, queueing
//! completions on that core unless the NUMA extension pins them to the channel's
//! node), and a sleeping work-queue or application thread runs again only when woken
//! (`wake`); across nodes the wake-up's IPI and cache lines cross the processor link.
//!
//! Every DMA and CPU copy is priced by the host's memory system through `mem`, so
//! traffic that crosses nodes shows on the interconnect's counters. Bytes are real:
//! blocks move from the ramdisk through the target's slot, the frames and the
//! initiator's slot into the application's buffer, and every block read or written is
//! compared (`TycheResult::mismatches`). Frame granular: no event per cache line.

pub mod app;
pub mod host;
pub mod mem;
mod protocol;
pub mod rx;
pub mod sched;
mod store;
pub mod wake;

use std::collections::BTreeMap;

use devices::nic::CoalesceMode;
use sim::Time;

pub use app::{App, AppKind, BufferPlacement};
pub use host::TycheHost;
pub use protocol::run;
pub use rx::RxPath;
pub use sched::Scheduler;

/// Read from or write to the target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Read,
    Write,
}

impl Op {
    pub fn parse(s: &str) -> Result<Op, String> {
        match s {
            "read" => Ok(Op::Read),
            "write" => Ok(Op::Write),
            _ => Err(format!("op `{s}`: use \"read\" or \"write\"")),
        }
    }
}

/// Where one side keeps a channel's slots, rings and threads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    /// On the node of the channel's NIC (Tyche's NUMA extension).
    NicLocal,
    /// All on one node, whatever the NIC (no affinity: where the module was loaded).
    Node(u32),
}

/// What the target does with a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TargetIo {
    /// Reads and writes a ramdisk holding real bytes.
    Ramdisk,
    /// Completes at once without doing I/O (tyche.nics_node0): read data is whatever the
    /// slot holds.
    NoOp,
}

/// One run of Tyche between two hosts.
#[derive(Clone, Debug)]
pub struct TycheSpec {
    pub op: Op,
    /// Bytes of one block request.
    pub req_bytes: u64,
    /// Data bytes of one jumbo frame (4 or 8 KiB).
    pub frame_bytes: u64,
    pub app: App,
    /// Channels in use: the first `channels` NICs of each host, paired in order.
    pub channels: usize,
    pub initiator: Place,
    pub target: Place,
    pub scheduler: Scheduler,
    pub target_io: TargetIo,
    /// Which context takes received frames, and the NICs' interrupt moderation (`rx`).
    pub rx: RxPath,
    pub coalescing: CoalesceMode,
    pub warmup: Time,
    pub window: Time,
}

/// Largest request Tyche takes (it splits larger block requests), and so a slot's size.
pub const MAX_REQ_BYTES: u64 = 512 << 10;

impl TycheSpec {
    /// A located complaint about a parameter out of range.
    pub fn check(&self) -> Result<(), String> {
        if self.req_bytes == 0
            || !self.req_bytes.is_multiple_of(4096)
            || self.req_bytes > MAX_REQ_BYTES
        {
            return Err(format!(
                "req_bytes {}: must be a whole number of 4 KiB blocks, at most {} KiB",
                self.req_bytes,
                MAX_REQ_BYTES >> 10
            ));
        }
        if self.frame_bytes != 4096 && self.frame_bytes != 8192 {
            return Err(format!(
                "frame_bytes {}: Tyche's data frames carry 4096 or 8192 bytes",
                self.frame_bytes
            ));
        }
        if self.channels == 0 {
            return Err("channels: at least one NIC".into());
        }
        if self.window == Time::ZERO {
            return Err("the measurement window is empty".into());
        }
        self.app.check()
    }
}

/// What a run measured over its window (and, for checks, over the whole run).
#[derive(Clone, Debug, Default)]
pub struct TycheResult {
    /// Application bytes completed per second over the window, GB/s (10^9 B/s).
    pub throughput_gbps: f64,
    /// Requests completed in the window and in the whole run.
    pub requests: u64,
    pub requests_total: u64,
    /// Data frames received (both directions, both sides) in the window and in the
    /// whole run: one engine event each, the simulation's unit of work.
    pub frames: u64,
    pub frames_total: u64,
    /// Initiator interconnect traffic per link and direction over the window, GB/s.
    pub qpi_gbps: BTreeMap<String, f64>,
    /// Fraction of the initiator's QPI data traffic on the processor–processor link, as
    /// PCM sees it (the hub–hub link invisible); `None` without any traffic.
    pub qpi0_share: Option<f64>,
    /// Bytes the initiator's and target's interconnects carried over the window.
    pub interconnect_bytes: [u64; 2],
    /// Blocks whose bytes arrived wrong (must be 0) and blocks compared.
    pub mismatches: u64,
    pub verified: u64,
    /// Kilobytes each channel carried (whole run).
    pub channel_kb: Vec<u64>,
    /// Requests sent to a channel off their pages' node (whole run).
    pub off_node_requests: u64,
    /// Bytes the NICs wrote into memory off their own node, and all they wrote (both
    /// hosts, over the window, line-rounded).
    pub nic_rx_off_node_bytes: u64,
    pub nic_rx_bytes: u64,
    /// Line-rounded bytes DMA put on the interconnect by the model's own account, per
    /// host (initiator, target) over the window, to compare with the memory system's
    /// counters.
    pub dma_cross_bytes: [u64; 2],
    /// Engine events handled.
    pub events: u64,
    /// Interrupts taken for a sleeping network thread, and wake-ups of any thread on
    /// another core (both hosts, window).
    pub interrupts: u64,
    pub wakeups: u64,
    /// Of those wake-ups, the IPIs that crossed between packages.
    pub cross_wakeups: u64,
    /// Bytes the control path (interrupt handlers' and wake-ups' line transfers, the
    /// completing core's read of the request) put on the interconnect, per host
    /// (initiator, target) over the window: with `dma_cross_bytes`, all of it.
    pub control_cross_bytes: [u64; 2],
    /// The busiest core's share of the window, per host (initiator, target): where a
    /// core, not a link, is what limits throughput.
    pub busiest_core: [f64; 2],
    /// Cores' worth of busy time over the window per node, per host (initiator,
    /// target). Memory stalls count as busy, so a saturated node may be waiting on its
    /// memory rather than computing.
    pub cores_busy: [Vec<f64>; 2],
}
