//! A connection's receive side as NAPI meets it: one ring per hardware queue the flow
//! enters (one, or the old and the new core's queue across a thread migration), each on
//! its core's node with its completions written in order, and the segments waiting for
//! NAPI in order of visibility across rings.

use std::collections::VecDeque;

use devices::nic::{Coalescer, Coalescing};
use sim::Time;

use super::{buf, NetHost, CQE_BYTES, RING};

/// A segment waiting in a receive queue: when its completion is visible, sequence,
/// payload, ring slot (its buffer identity, unique across rings), its ring and the node
/// its buffers are on.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Seg {
    pub visible: Time,
    pub seq: u64,
    pub len: u64,
    pub slot: u64,
    pub ring: usize,
    pub node: u32,
}

/// One hardware receive queue's ring of a connection.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Ring {
    pub node: u32,
    /// The queue's index on every PF (one queue per core).
    pub index: u16,
    /// Frames written so far (the next slot, modulo the ring).
    pub slot: u64,
    last_visible: Time,
    /// Frames the NIC has written and NAPI not yet consumed, and the most at once.
    outstanding: u64,
    pub peak: u64,
}

impl Ring {
    pub fn on(node: u32, index: u16) -> Ring {
        Ring {
            node,
            index,
            ..Ring::default()
        }
    }
}

#[derive(Default)]
pub(crate) struct RxQueue {
    pub rings: Vec<Ring>,
    /// In order of visibility (across rings, the order NAPI meets them).
    pub pending: VecDeque<Seg>,
    pub coalesce: Coalescer,
    pub gen: u64,
    pub napi: bool,
    /// Frames and bytes the NIC has written into the queue (the driver's counters DIM
    /// samples).
    packets: u64,
    bytes: u64,
}

impl RxQueue {
    /// One ring on `node`.
    pub fn on(node: u32) -> RxQueue {
        RxQueue {
            rings: vec![Ring::on(node, 0)],
            ..RxQueue::default()
        }
    }

    /// A frame's DMA and CQE write by PF `pf` of `h`'s NIC into ring `ring`, arriving at
    /// `at`: when its CQE is visible (a queue writes its completions in order), its slot,
    /// and when the port's receive buffer took it (later than `at` when the buffer was
    /// full: the sender was paused until then). Buffers are reposted as NAPI consumes them, so a ring never runs dry (without
    /// congestion control a drop would stall the stream; the peak fill is kept instead).
    pub fn receive(
        &mut self,
        h: &mut NetHost,
        pf: usize,
        ring: usize,
        ns: u64,
        at: Time,
        bytes: u64,
    ) -> (Time, u64, Time) {
        self.packets += 1;
        self.bytes += bytes;
        let r = &mut self.rings[ring];
        r.outstanding += 1;
        r.peak = r.peak.max(r.outstanding);
        let slot = ring as u64 * RING + r.slot % RING;
        r.slot += 1;
        let admitted = h.nic.rx_buffer.admit(at, bytes);
        let pf = &mut h.nic.pfs[pf];
        // The completion entry follows the frame's TLPs on the link (posted writes stay
        // in order), so it is never visible before its frame and the link never idles
        // for the frame's trip into memory.
        let (data, entry) = (ns + buf::RX_DATA + (slot << 6), ns + buf::RX_CQE + slot);
        let cqe = pf.dma_write_then(admitted, &mut h.mem, r.node, data, bytes, entry, CQE_BYTES);
        h.nic.rx_buffer.hold(admitted, cqe, bytes);
        r.last_visible = r.last_visible.max(cqe);
        (r.last_visible, slot, admitted)
    }

    /// Queues `seg` for NAPI in order of visibility (at the back when there is one ring).
    pub fn push(&mut self, seg: Seg) {
        let at = self
            .pending
            .iter()
            .rposition(|s| s.visible <= seg.visible)
            .map_or(0, |i| i + 1);
        self.pending.insert(at, seg);
    }

    /// NAPI completed at `at` and re-arms the queue's interrupt under `c`: one event for
    /// the moderation (and DIM's sample, when adaptive).
    pub fn rearm(&mut self, at: Time, c: &Coalescing) {
        self.napi = false;
        self.gen += 1;
        self.coalesce.rearm(at, c, self.packets, self.bytes);
    }

    /// NAPI takes the next segment if its completion is visible at `t`.
    pub fn pop_visible(&mut self, t: Time) -> Option<Seg> {
        let seg = *self.pending.front().filter(|s| s.visible <= t)?;
        self.pending.pop_front();
        self.rings[seg.ring].outstanding -= 1;
        Some(seg)
    }
}
