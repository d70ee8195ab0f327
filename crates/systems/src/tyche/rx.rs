//! A channel's receive ring as the host meets it: the NIC's moderated interrupt, the
//! poll that drains the ring, and which core does the receive work.
//!
//! myri10ge (Linux 2.6.32, in-tree) gives each NIC one slice (`myri10ge_max_slices = 1`):
//! one receive ring and one MSI-X vector. Its interrupt handler (`myri10ge_intr`) only
//! schedules NAPI on the interrupted core; the poll (`myri10ge_poll` →
//! `myri10ge_clean_rx_done` → `netif_receive_skb`) hands each frame to the protocol
//! registered for its ethertype in that core's receive softirq — 2.6.32 predates
//! receive packet steering (2.6.35), so nothing moves the work elsewhere — and re-arms
//! the interrupt (`irq_claim`) once the ring is empty. The firmware delays an interrupt
//! by `myri10ge_intr_coal_delay` (75 µs by default): the device model's
//! `nic_coalesce_ns`, applied by `devices::nic::Coalescer` (the timer starts at the first
//! frame after the re-arm: an assumption, as for the other NIC models; myri10ge's
//! firmware is closed).
//!
//! Where Tyche's per-frame work runs is not in the sources this project found (the
//! papers' full text was not available; their abstracts name "storage-specific packet
//! processing" and one network thread per NIC), so both readings are modelled beside
//! the model without interrupts (`RxPath`).

use devices::nic::{CoalesceMode, Coalescer, Coalescing, NicParams};
use sim::Time;

/// Which context takes a channel's received frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum RxPath {
    /// No interrupts and no wake-ups: the channel's network thread sees a frame as soon
    /// as it lands and hands requests on at once (the model before `tyche::wake`). The
    /// default: the interrupt paths also move the other Tyche experiments (4 KiB requests
    /// by 12–30 % without moderation, from the per-request interrupts and wake-ups), and
    /// not every such move has been traced.
    #[default]
    Polling,
    /// The channel's network thread (on the channel's node): the interrupt's handler
    /// wakes it, it takes the frames and hands requests to the work queue on the
    /// channel's node.
    NetworkThread,
    /// The NIC's receive softirq on the interrupted core (the NIC's node) runs Tyche's
    /// packet handler for every frame and queues finished requests to the work queue:
    /// with the NUMA extension (`Place::NicLocal`) on a core of the channel's node
    /// (`queue_work_on`), without it on the interrupted core itself — 2.6.32's
    /// `queue_work` puts the work on the calling CPU's thread of a per-CPU work queue.
    Softirq,
}

impl RxPath {
    /// Whether the NIC's interrupts and the threads' wake-ups are modelled.
    pub fn interrupts(self) -> bool {
        self != RxPath::Polling
    }

    pub fn parse(s: &str) -> Result<RxPath, String> {
        match s {
            "polling" => Ok(RxPath::Polling),
            "network_thread" => Ok(RxPath::NetworkThread),
            "softirq" => Ok(RxPath::Softirq),
            other => Err(format!(
                "rx_path `{other}`: use \"polling\", \"network_thread\" or \"softirq\""
            )),
        }
    }
}

/// The driver's moderation when a run names none: static, the device model's
/// `nic_coalesce_ns` (myri10ge's `myri10ge_intr_coal_delay`; myri10ge has no adaptive
/// moderation).
pub const COALESCING: CoalesceMode = CoalesceMode::Static;

/// The moderation a channel's NIC applies under `mode`: the device model's delay and
/// frame count when static.
pub fn coalescing(mode: CoalesceMode, params: &NicParams) -> Coalescing {
    Coalescing {
        mode,
        ..Coalescing::of(params)
    }
}

/// What a receive-ring entry carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Entry {
    /// Request `.0`'s request message (at the target).
    Request(u32),
    /// Data frame `.1` of request `.0`.
    Frame(u32, u32),
    /// Request `.0`'s write-completion message (at the initiator).
    Done(u32),
}

/// One side's receive ring of a channel.
#[derive(Clone, Debug)]
pub struct RxRing {
    pub coalesce: Coalescer,
    pub mode: Coalescing,
    /// When the poll that is draining the ring has taken everything it found: an entry
    /// visible earlier is taken by that poll, a later one finds the interrupt re-armed.
    pub poll_done: Time,
    /// Whether the interrupt is armed (false from its firing until the poll re-arms it).
    armed: bool,
    /// Entries the armed interrupt has not yet signalled, in order of visibility.
    pending: Vec<Entry>,
    /// Bumped at each interrupt: a moderation timer armed before it is stale.
    pub gen: u64,
}

/// What the ring does with an entry that became visible.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Visible {
    /// The running poll takes it now.
    Poll,
    /// It waits for the interrupt; `Some(t)`: raise it at t (the caller schedules it).
    Wait(Option<Time>),
}

impl RxRing {
    pub fn new(mode: Coalescing) -> RxRing {
        RxRing {
            coalesce: Coalescer::default(),
            mode,
            poll_done: Time::ZERO,
            armed: true,
            pending: Vec::new(),
            gen: 0,
        }
    }

    /// Entry `e` is visible at `t`.
    pub fn visible(&mut self, t: Time, e: Entry) -> Visible {
        if t < self.poll_done {
            return Visible::Poll;
        }
        if !self.armed {
            // The poll found the ring empty at `poll_done` and re-armed the interrupt.
            self.coalesce.rearm(self.poll_done, &self.mode, 0, 0);
            self.armed = true;
        }
        self.pending.push(e);
        Visible::Wait(self.coalesce.completion(t, &self.mode))
    }

    /// The interrupt of generation `gen` fires: the entries it signals, in order (none
    /// when a later interrupt already took them).
    pub fn fire(&mut self, gen: u64) -> Vec<Entry> {
        if gen != self.gen || self.pending.is_empty() {
            return Vec::new();
        }
        self.gen += 1;
        self.armed = false;
        self.coalesce.clear();
        std::mem::take(&mut self.pending)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use devices::nic::Moderation;

    fn ring(us: u64, frames: u32) -> RxRing {
        RxRing::new(Coalescing {
            mode: CoalesceMode::Static,
            fixed: Moderation {
                usecs: Time::from_us(us),
                frames,
            },
        })
    }

    #[test]
    fn a_burst_waits_for_one_interrupt_and_a_running_poll_takes_later_frames() {
        let mut r = ring(75, 1024);
        let t0 = Time::from_us(10);
        assert_eq!(
            r.visible(t0, Entry::Frame(0, 0)),
            Visible::Wait(Some(t0 + Time::from_us(75)))
        );
        for k in 1..5 {
            let t = t0 + Time::from_us(5 * k as u64);
            assert_eq!(r.visible(t, Entry::Frame(0, k)), Visible::Wait(None));
        }
        let gen = r.gen;
        let got = r.fire(gen);
        assert_eq!(got.len(), 5, "one interrupt signals the whole burst");
        assert_eq!(got[4], Entry::Frame(0, 4));
        assert!(r.fire(gen).is_empty(), "a stale timer signals nothing");
        r.poll_done = Time::from_us(100);
        assert_eq!(r.visible(Time::from_us(99), Entry::Done(1)), Visible::Poll);
        // After the poll the interrupt is armed again and the timer restarts.
        let t = Time::from_us(120);
        assert_eq!(
            r.visible(t, Entry::Done(2)),
            Visible::Wait(Some(t + Time::from_us(75)))
        );
    }

    #[test]
    fn without_moderation_every_frame_interrupts_at_once() {
        let mut r = RxRing::new(Coalescing {
            mode: CoalesceMode::Off,
            fixed: Moderation {
                usecs: Time::from_us(75),
                frames: 1024,
            },
        });
        let t = Time::from_us(3);
        assert_eq!(r.visible(t, Entry::Request(7)), Visible::Wait(Some(t)));
        assert_eq!(r.fire(r.gen), vec![Entry::Request(7)]);
        assert_eq!(RxPath::parse("softirq"), Ok(RxPath::Softirq));
        assert!(RxPath::parse("napi").unwrap_err().contains("softirq"));
    }
}
