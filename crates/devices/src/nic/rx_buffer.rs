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

/// The receive buffer of one port: the frames in it, each with the time it leaves (its
/// DMA write is visible in memory), soonest first. Frames of different PFs drain at their
/// own links' pace, so one does not wait behind another's.
#[derive(Clone, Debug)]
pub struct RxBuffer {
    capacity: u64,
    held: BinaryHeap<Reverse<(Time, u64)>>,
    occupancy: u64,
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
            occupancy: 0,
            paused_frames: 0,
            paused: Time::ZERO,
        }
    }

    /// When a frame of `bytes` reaching the port at `at` is in the buffer: at `at`, or,
    /// if the buffer is full then, once enough earlier frames have left (the link
    /// partner was paused until then). A frame larger than the buffer waits for it to
    /// empty.
    pub fn admit(&mut self, at: Time, bytes: u64) -> Time {
        while let Some(&Reverse((leave, b))) = self.held.peek() {
            if leave > at {
                break;
            }
            self.held.pop();
            self.occupancy -= b;
        }
        let mut t = at;
        while self.occupancy + bytes > self.capacity {
            let Some(Reverse((leave, b))) = self.held.pop() else {
                break;
            };
            self.occupancy -= b;
            t = leave;
        }
        if t > at {
            self.paused_frames += 1;
            self.paused += t - at;
        }
        t
    }

    /// The admitted frame of `bytes` stays until `leave`.
    pub fn hold(&mut self, leave: Time, bytes: u64) {
        self.held.push(Reverse((leave, bytes)));
        self.occupancy += bytes;
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
        b.hold(us(10), 1500);
        assert_eq!(b.admit(us(1), 1500), us(1));
        b.hold(us(20), 1500);
        // Full: the third waits for the first to leave at 10 µs.
        assert_eq!(b.admit(us(2), 1500), us(10));
        b.hold(us(30), 1500);
        assert_eq!((b.paused_frames, b.paused), (1, us(8)));
        // Once the host keeps up, frames pass straight in.
        assert_eq!(b.admit(us(40), 1500), us(40));
    }

    #[test]
    fn a_frame_that_drains_sooner_frees_its_room_sooner() {
        let mut b = RxBuffer::new(3000);
        let us = Time::from_us;
        assert_eq!(b.admit(us(0), 1500), us(0));
        b.hold(us(50), 1500); // behind a slow link
        assert_eq!(b.admit(us(1), 1500), us(1));
        b.hold(us(5), 1500); // another PF's, through first
        assert_eq!(b.admit(us(2), 1500), us(5));
    }
}
