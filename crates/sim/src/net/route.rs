//! Routes and their reverses, and the hops that only shape time on the way: pacers
//! (a bandwidth limit without a wire) and IOTLBs (an IOMMU's translation cache).

use super::{Hop, Net};
use crate::pcie;
use crate::time::Time;

#[derive(Clone, Debug)]
pub(super) struct Route {
    pub(super) hops: Vec<Hop>,
    /// The reverse route (completions), without the sink.
    pub(super) reverse: u32,
}

/// A bandwidth limit without a place of its own (a CPU node's share of a memory node):
/// TLPs pass in FIFO order, each taking its bytes' time at the rate; one that finds it
/// free passes at once, so it shapes rate, not zero-load latency.
#[derive(Clone, Debug)]
pub struct Pacer {
    pub name: String,
    pub ps_per_kib: u64,
    pub(super) free_at: Time,
    pub bytes: u64,
}

/// An IOMMU's translation cache.
#[derive(Clone, Debug)]
pub struct Iotlb {
    pub hit: Time,
    pub miss: Time,
    /// Cached translations in FIFO order (a ring), and the same keys as a set so that a
    /// lookup per TLP does not scan a large IOTLB.
    pub(super) entries: Vec<u64>,
    pub(super) present: rustc_hash::FxHashSet<u64>,
    pub(super) next: usize,
    pub hits: u64,
    pub misses: u64,
}

impl Net {
    /// Registers a route (request direction, ending in a sink) and its reverse.
    pub fn add_route(&mut self, hops: Vec<Hop>) -> u32 {
        let id = self.routes.len() as u32;
        let mut rev: Vec<Hop> = hops
            .iter()
            .rev()
            .filter(|h| !matches!(h, Hop::Sink(..)))
            .map(|h| match *h {
                Hop::Wire(w) => Hop::Wire(self.wires[w as usize].reverse),
                // Zero delays keep the reverse route aligned hop for hop (split reads
                // rejoin it by index).
                Hop::RootSplit(_) | Hop::Iommu(_) | Hop::MemoryDelay(_) | Hop::Pace(_) => {
                    Hop::Delay(Time::ZERO)
                }
                other => other,
            })
            .collect();
        rev.shrink_to_fit();
        self.routes.push(Route {
            hops,
            reverse: id + 1,
        });
        self.routes.push(Route {
            hops: rev,
            reverse: id,
        });
        id
    }

    pub fn reverse_route(&self, route: u32) -> u32 {
        self.routes[route as usize].reverse
    }

    pub fn route_hops(&self, route: u32) -> &[Hop] {
        &self.routes[route as usize].hops
    }

    /// Adds a pacer of `gbps` (see `Hop::Pace`).
    pub fn add_pacer(&mut self, name: &str, gbps: f64) -> u32 {
        self.pacers.push(Pacer {
            name: name.to_string(),
            ps_per_kib: pcie::ps_per_kib_at(gbps),
            free_at: Time::ZERO,
            bytes: 0,
        });
        self.pacers.len() as u32 - 1
    }

    pub fn pacer(&self, p: u32) -> &Pacer {
        &self.pacers[p as usize]
    }

    pub fn add_iotlb(&mut self, entries: usize, hit: Time, miss: Time) -> u32 {
        self.iotlbs.push(Iotlb {
            hit,
            miss,
            entries: vec![u64::MAX; entries.max(1)],
            present: Default::default(),
            next: 0,
            hits: 0,
            misses: 0,
        });
        self.iotlbs.len() as u32 - 1
    }

    pub fn iotlb_hit(&self, i: u32) -> Time {
        self.iotlbs[i as usize].hit
    }

    /// An IOTLB's hit and miss costs and its entries.
    pub fn iotlb_shape(&self, i: u32) -> (Time, Time, usize) {
        let t = &self.iotlbs[i as usize];
        (t.hit, t.miss, t.entries.len())
    }
}
