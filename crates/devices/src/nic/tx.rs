//! The NIC's read engine as PCIe sees it: every DMA read is cut into requests of at most
//! the function's read request size (MRRS), and a request goes out only when one of the
//! function's tags is free — docs/hardware.md §5: "the number of reads in flight is bounded
//! by the requester's tags; throughput of reads ≈ min(link, bytes in flight / RTT)". A
//! send is its descriptor read (none when the driver posts it by PIO: `SendRequests`),
//! then its payload's reads (`Nic::fetch_send`).
//!
//! Requests of MRRS size also book DRAM and the link's completions in pieces a few
//! hundred ns long, not one block per send, so the eager, gap-filling FIFO servers of the
//! packet models (`sim::memsys::Fifo`) place them close to their own time.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use sim::memsys::MemSys;
use sim::Time;

use super::Nic;

/// A function's read tags: each tag is busy from its request until the request's last
/// completion is in the device, so no more than `limit` reads are ever in flight.
#[derive(Clone, Debug)]
pub struct ReadTags {
    limit: usize,
    /// When each tag in use frees, earliest first (at most `limit` of them).
    busy: BinaryHeap<Reverse<Time>>,
}

impl ReadTags {
    pub fn new(limit: u32) -> ReadTags {
        ReadTags {
            limit: limit.max(1) as usize,
            busy: BinaryHeap::new(),
        }
    }

    /// Reads the function may have in flight.
    pub fn limit(&self) -> u32 {
        self.limit as u32
    }

    /// A request ready at `at` takes the tag that frees first: when it may go out. The
    /// caller hands the tag back with `release` once it knows the request's end.
    pub fn acquire(&mut self, at: Time) -> Time {
        if self.busy.len() < self.limit {
            return at;
        }
        let Reverse(free) = self.busy.pop().expect("limit ≥ 1 tags are in use");
        at.max(free)
    }

    /// The request holding the tag just acquired completes at `end`.
    pub fn release(&mut self, end: Time) {
        self.busy.push(Reverse(end));
    }
}

/// A buffer in host memory a DMA touches: its node, identity (`sim::memsys`) and bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostBuf {
    pub node: u32,
    pub buf: u64,
    pub bytes: u64,
}

/// How a send's request (its descriptor) reaches the NIC: a property of the driver.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SendRequests {
    /// The driver writes the descriptor into a ring in host memory and rings a doorbell;
    /// the NIC DMA-reads it (mlx5, ixgbe, …).
    #[default]
    DescriptorRead,
    /// The driver writes the request itself into the NIC's SRAM by PIO (myri10ge's
    /// `myri10ge_submit_req`): the doorbell carries the descriptor, so the NIC reads only
    /// the payload. The caller prices the PIO's crossing to the NIC.
    Pio,
}

impl Nic {
    /// A send rung at `doorbell` on PF `pf`: after the NIC's pipeline latency it reads the
    /// descriptor `desc` through `pf` (unless the driver posts requests by PIO:
    /// `SendRequests::Pio`), then every payload fragment through the PF named with it
    /// (all at once, each bounded by its PF's tags). When the last payload byte is in the
    /// NIC, ready for the port.
    pub fn fetch_send(
        &mut self,
        doorbell: Time,
        ms: &mut MemSys,
        pf: usize,
        desc: HostBuf,
        payload: &[(usize, HostBuf)],
    ) -> Time {
        let start = doorbell + self.params.latency;
        let desc_in = match self.send_requests {
            SendRequests::DescriptorRead => {
                self.pfs[pf].dma_read(start, ms, desc.node, desc.buf, desc.bytes)
            }
            SendRequests::Pio => start,
        };
        payload.iter().fold(desc_in, |done, &(f, b)| {
            done.max(self.pfs[f].dma_read(desc_in, ms, b.node, b.buf, b.bytes))
        })
    }
}
