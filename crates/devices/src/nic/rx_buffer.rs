//! The port's receive buffer under link-level flow control (IEEE 802.3x PAUSE).
//!
//! A frame waits in the NIC's port buffer from its arrival until its DMA into host memory
//! is through. When the host absorbs frames more slowly than the wire brings them (the
//! interconnect or a memory controller loaded by other agents), the buffer fills and the
//! NIC pauses its link partner: the next frame is sent only once enough earlier ones have
//! left. Without this bound a receive's DMA writes would queue in the memory system
//! without limit, milliseconds ahead of the cores that read them.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use sim::Time;

/// The receive buffer of one port: the frames in it, each with the time it came in and the
/// time it leaves (its DMA write is visible in memory), soonest to leave first. Frames of
/// different PFs drain at their own links' pace, so one does not wait behind another's.
#[derive(Clone, Debug)]
pub struct RxBuffer {
    capacity: u64,
    /// (leaves, came in, bytes).
    held: BinaryHeap<Reverse<(Time, Time, u64)>>,
    /// Frames that found the buffer full, and the time they waited in all.
    pub paused_frames: u64,
    pub paused: Time,
}

impl RxBuffer {
    /// A buffer of `capacity` bytes (the NIC model's `nic_rx_buffer_bytes`).
    pub fn new(capacity: u64) -> RxBuffer {
        RxBuffer {
            capacity,
            held: BinaryHeap::new(),
            paused_frames: 0,
            paused: Time::ZERO,
        }
    }

    /// When a frame of `bytes` reaching the port at `at` is in the buffer: at `at`, or,
    /// if the buffer is full then, once enough of the frames in it have left (the link
    /// partner was paused until then). A frame larger than the buffer waits for it to
    /// empty.
    ///
    /// Models book frames out of time order (a burst at once, another model's later): a
    /// frame already booked to come in after `at` came in behind this one on the wire, so
    /// it does not count against it.
    pub fn admit(&mut self, at: Time, bytes: u64) -> Time {
        while self
            .held
            .peek()
            .is_some_and(|Reverse((leave, _, _))| *leave <= at)
        {
            self.held.pop();
        }
        let present = || self.held.iter().filter(|Reverse((_, came, _))| *came <= at);
        let occupancy: u64 = present().map(|Reverse((_, _, b))| b).sum();
        if occupancy + bytes <= self.capacity {
            return at;
        }
        let mut leaving: Vec<(Time, u64)> = present().map(|Reverse((l, _, b))| (*l, *b)).collect();
        leaving.sort_unstable();
        let mut left = occupancy;
        let mut t = at;
        for (leave, b) in leaving {
            if left + bytes <= self.capacity {
                break;
            }
            left -= b;
            t = leave;
        }
        self.paused_frames += 1;
        self.paused += t - at;
        t
    }

    /// The frame of `bytes` admitted at `came` stays until `leave`.
    pub fn hold(&mut self, came: Time, leave: Time, bytes: u64) {
        self.held.push(Reverse((leave.max(came), came, bytes)));
    }

    /// Zeroes the pause counters (the start of a measurement window).
    pub fn reset_counters(&mut self) {
        self.paused_frames = 0;
        self.paused = Time::ZERO;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_buffer_admits_the_next_frame_when_the_oldest_leaves() {
        let mut b = RxBuffer::new(3000);
        let us = Time::from_us;
        assert_eq!(b.admit(us(0), 1500), us(0));
        b.hold(us(0), us(10), 1500);
        assert_eq!(b.admit(us(1), 1500), us(1));
        b.hold(us(1), us(20), 1500);
        // Full: the third waits for the first to leave at 10 µs.
        assert_eq!(b.admit(us(2), 1500), us(10));
        b.hold(us(10), us(30), 1500);
        assert_eq!((b.paused_frames, b.paused), (1, us(8)));
        // Once the host keeps up, frames pass straight in.
        assert_eq!(b.admit(us(40), 1500), us(40));
    }

    #[test]
    fn a_frame_that_drains_sooner_frees_its_room_sooner() {
        let mut b = RxBuffer::new(3000);
        let us = Time::from_us;
        assert_eq!(b.admit(us(0), 1500), us(0));
        b.hold(us(0), us(50), 1500); // behind a slow link
        assert_eq!(b.admit(us(1), 1500), us(1));
        b.hold(us(1), us(5), 1500); // another PF's, through first
        assert_eq!(b.admit(us(2), 1500), us(5));
    }

    #[test]
    fn frames_booked_to_come_in_later_do_not_hold_back_an_earlier_one() {
        let mut b = RxBuffer::new(3000);
        let us = Time::from_us;
        // A burst booked at once: its frames come in at 10 and 11 µs and fill the buffer.
        b.hold(us(10), us(40), 1500);
        b.hold(us(11), us(41), 1500);
        // A frame of another flow, booked afterwards, reaches the port at 2 µs: ahead of
        // them on the wire, it finds the buffer empty.
        assert_eq!(b.admit(us(2), 1500), us(2));
        // At 12 µs both are in: the next waits for the first to leave.
        assert_eq!(b.admit(us(12), 1500), us(40));
    }
}
