//! A memory system's byte counters: DRAM per node, every direction of every uncore link,
//! and what a per-package uncore monitor (Intel PCM) sees of them.

use super::{DramCounters, Hop, LinkCount, MemSys, PcmPort};

impl MemSys {
    /// DRAM bytes read and written at `node` since the last reset.
    pub fn dram(&self, node: u32) -> DramCounters {
        self.counters[node as usize]
    }

    /// All DRAM bytes (reads and writes, every node) since the last reset.
    pub fn dram_total(&self) -> u64 {
        self.counters.iter().map(|c| c.read + c.write).sum()
    }

    /// Bytes that left vertex `socket` on any interconnect link since the last reset.
    pub fn interconnect_bytes(&self, socket: u32) -> u64 {
        self.link_counters()
            .iter()
            .filter(|c| c.from == socket)
            .map(|c| c.bytes)
            .sum()
    }

    /// Bytes that crossed from vertex `from` straight to `to` since the last reset (all
    /// links joining them); `None` when no link does.
    pub fn link_bytes(&self, from: u32, to: u32) -> Option<u64> {
        let c: Vec<_> = self
            .link_counters()
            .into_iter()
            .filter(|c| c.from == from && c.to == to)
            .collect();
        (!c.is_empty()).then(|| c.iter().map(|c| c.bytes).sum())
    }

    /// Every direction of every link with its bytes since the last reset, in link order
    /// (`a → b` before `b → a`), named by the platform's vertex names.
    pub fn link_counters(&self) -> Vec<LinkCount> {
        (0..self.links.len())
            .map(|i| {
                let hop = Hop {
                    link: (i / 2) as u32,
                    dir: (i % 2) as u8,
                };
                let (from, to) = self.uncore.ends(hop);
                LinkCount {
                    from,
                    to,
                    name: format!(
                        "{}→{}",
                        self.uncore.names[from as usize], self.uncore.names[to as usize]
                    ),
                    bytes: self.links[i].bytes,
                }
            })
            .collect()
    }

    /// What a per-package uncore monitor sees (Intel PCM's QPI traffic per port): for
    /// each package, each of its links — to an I/O hub or to another package — with the
    /// bytes that came in and went out on it. A link between two I/O hubs has no package
    /// port, so it is not in the view.
    pub fn pcm_ports(&self) -> Vec<PcmPort> {
        let c = self.link_counters();
        let mut ports = Vec::new();
        for package in 0..self.uncore.packages {
            for (i, l) in self.uncore.links.iter().enumerate() {
                let (peer, out, inc) = if l.a == package {
                    (l.b, &c[2 * i], &c[2 * i + 1])
                } else if l.b == package {
                    (l.a, &c[2 * i + 1], &c[2 * i])
                } else {
                    continue;
                };
                ports.push(PcmPort {
                    package,
                    peer,
                    peer_is_ioh: peer >= self.uncore.packages,
                    incoming: inc.bytes,
                    outgoing: out.bytes,
                });
            }
        }
        ports
    }

    /// Starts a new measurement window (contents and queues stay).
    pub fn reset_counters(&mut self) {
        self.counters
            .iter_mut()
            .for_each(|c| *c = DramCounters::default());
        self.links.iter_mut().for_each(|f| f.bytes = 0);
        self.dram.iter_mut().for_each(|f| f.bytes = 0);
    }
}
