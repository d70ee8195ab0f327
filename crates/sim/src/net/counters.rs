//! Counters a hardware engineer would read: bytes and TLPs per wire, per sink, the
//! IOTLBs' and LLCs'.

use super::wire::Wire;
use super::Net;

/// Counters a hardware engineer would read.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Counters {
    /// (wire name, bytes on the wire incl. overhead, payload bytes, TLPs).
    pub wires: Vec<(String, u64, u64, u64)>,
    /// (sink name, bytes read, bytes written).
    pub sinks: Vec<(String, u64, u64)>,
    pub iotlb_hits: u64,
    pub iotlb_misses: u64,
    /// (sink name, DMA read LLC hits, misses, DDIO allocations, write-backs, invalidations)
    pub llc: Vec<(String, u64, u64, u64, u64, u64)>,
}

impl Net {
    /// The counters, with each wire's bytes as committed to it (a FIFO wire commits a
    /// TLP's bytes when it queues it, ahead of the clock).
    pub fn counters(&self) -> Counters {
        self.counters_with(|w| (w.bytes, w.payload_bytes))
    }

    /// The counters, with each wire's bytes as serialized by now (the backlog still queued
    /// at a transmitter left out, payload prorated): what a window of a saturated link
    /// reads, never above its rate. TLP counts stay as committed.
    pub fn counters_sent(&self) -> Counters {
        let now = self.now();
        self.counters_with(|w| w.sent_by(now))
    }

    pub(super) fn counters_with(&self, bytes: impl Fn(&Wire) -> (u64, u64)) -> Counters {
        Counters {
            wires: self
                .wires
                .iter()
                .filter(|w| w.tlps > 0)
                .map(|w| {
                    let (b, payload) = bytes(w);
                    (w.name.clone(), b, payload, w.tlps)
                })
                .collect(),
            sinks: self
                .sinks
                .iter()
                .filter(|s| s.bytes_read + s.bytes_written > 0)
                .map(|s| (s.name.clone(), s.bytes_read, s.bytes_written))
                .collect(),
            iotlb_hits: self.iotlbs.iter().map(|t| t.hits).sum(),
            iotlb_misses: self.iotlbs.iter().map(|t| t.misses).sum(),
            llc: self
                .sinks
                .iter()
                .filter_map(|s| {
                    s.llc.as_ref().map(|l| {
                        (
                            s.name.clone(),
                            l.dma_read_hits,
                            l.dma_read_misses,
                            l.ddio_allocs,
                            l.writebacks,
                            l.invalidations,
                        )
                    })
                })
                .filter(|x| x.1 + x.2 + x.3 + x.5 > 0)
                .collect(),
        }
    }
}
