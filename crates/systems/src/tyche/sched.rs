//! How the initiator picks a channel for a request (docs/hardware.md §3), and the spill
//! policy this model adds.

use sim::Time;

/// The initiator's channel scheduler.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheduler {
    /// The next channel in turn, ignoring where the request's pages are.
    RoundRobin,
    /// A channel on the node holding the request's pages (any channel when that node has
    /// none), among them the one that has carried the fewest kilobytes.
    Numa,
    /// As `Numa`, but a request goes to the other node's least-loaded channel when the
    /// queueing estimate says it finishes sooner there, crossing cost included.
    NumaSpill,
}

impl Scheduler {
    pub fn name(&self) -> &'static str {
        match self {
            Scheduler::RoundRobin => "round_robin",
            Scheduler::Numa => "numa",
            Scheduler::NumaSpill => "numa_spill",
        }
    }
}

/// The channels' state the scheduler reads.
#[derive(Clone, Debug)]
pub struct Channels {
    /// Each channel's NIC node at the initiator.
    pub node: Vec<u32>,
    /// Kilobytes each channel has carried (assigned requests, whole run).
    pub carried_kb: Vec<u64>,
    /// Bytes assigned to each channel and not yet completed.
    pub backlog: Vec<u64>,
    next: usize,
    /// A channel's line rate, bytes per ps (the drain rate of its backlog).
    line_bytes_per_ps: f64,
    /// The interconnect's rate per direction, bytes per ps, and one crossing.
    cross_bytes_per_ps: f64,
    cross_latency: Time,
}

impl Channels {
    pub fn new(node: Vec<u32>, line_gbps: f64, cross_gbps: f64, cross_latency: Time) -> Channels {
        let n = node.len();
        Channels {
            node,
            carried_kb: vec![0; n],
            backlog: vec![0; n],
            next: 0,
            line_bytes_per_ps: line_gbps / 1000.0,
            cross_bytes_per_ps: cross_gbps / 1000.0,
            cross_latency,
        }
    }

    /// The least-carried channel on `node`, if it has any.
    fn fairest_on(&self, node: u32) -> Option<usize> {
        (0..self.node.len())
            .filter(|&c| self.node[c] == node)
            .min_by_key(|&c| (self.carried_kb[c], c))
    }

    /// When a request of `bytes` would finish on `c`: its backlog and itself drained at
    /// line rate, plus, off the pages' node, the data crossing the interconnect once
    /// and two crossings' latency (a queueing estimate, not a simulation).
    fn estimate_ps(&self, c: usize, bytes: u64, cross: bool) -> f64 {
        let mut t = (self.backlog[c] + bytes) as f64 / self.line_bytes_per_ps;
        if cross {
            t += bytes as f64 / self.cross_bytes_per_ps + 2.0 * self.cross_latency.as_ps() as f64;
        }
        t
    }

    /// Picks the channel for a request of `bytes` whose pages are on `page_node`, and
    /// books it.
    pub fn pick(&mut self, s: Scheduler, page_node: u32, bytes: u64) -> usize {
        let n = self.node.len();
        let c = match s {
            Scheduler::RoundRobin => {
                let c = self.next % n;
                self.next = (c + 1) % n;
                c
            }
            Scheduler::Numa => self
                .fairest_on(page_node)
                .unwrap_or_else(|| self.fairest_all()),
            Scheduler::NumaSpill => match self.fairest_on(page_node) {
                None => self.fairest_all(),
                Some(local) => {
                    let remote = (0..n)
                        .filter(|&c| self.node[c] != page_node)
                        .min_by_key(|&c| (self.backlog[c], c));
                    match remote {
                        Some(r)
                            if self.estimate_ps(r, bytes, true)
                                < self.estimate_ps(local, bytes, false) =>
                        {
                            r
                        }
                        _ => local,
                    }
                }
            },
        };
        self.carried_kb[c] += bytes.div_ceil(1024);
        self.backlog[c] += bytes;
        c
    }

    fn fairest_all(&self) -> usize {
        (0..self.node.len())
            .min_by_key(|&c| (self.carried_kb[c], c))
            .expect("at least one channel")
    }

    /// A request of `bytes` on `c` completed.
    pub fn done(&mut self, c: usize, bytes: u64) {
        self.backlog[c] -= bytes;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chans() -> Channels {
        Channels::new(vec![0, 0, 0, 1, 1, 1], 1.25, 12.0, Time::from_ns(50))
    }

    #[test]
    fn numa_keeps_requests_on_their_node_and_balances_kilobytes() {
        let mut c = chans();
        // Mixed sizes on node 0: each goes to the node-0 channel that carried least.
        for (i, kb) in [128u64, 4, 4, 64, 512, 4, 128, 4, 4]
            .iter()
            .cycle()
            .take(300)
            .enumerate()
        {
            let ch = c.pick(Scheduler::Numa, 0, kb * 1024);
            assert!(ch < 3, "request {i} left node 0 for channel {ch}");
        }
        let kb = &c.carried_kb[..3];
        let (lo, hi) = (kb.iter().min().unwrap(), kb.iter().max().unwrap());
        assert!(
            hi - lo <= 512,
            "carried kilobytes {kb:?} differ by more than one request"
        );
        assert_eq!(c.carried_kb[3..], [0, 0, 0]);
    }

    #[test]
    fn round_robin_ignores_the_pages_node() {
        let mut c = chans();
        let picks: Vec<usize> = (0..6)
            .map(|_| c.pick(Scheduler::RoundRobin, 0, 4096))
            .collect();
        assert_eq!(picks, [0, 1, 2, 3, 4, 5]);
    }

    #[test]
    fn spill_leaves_the_node_only_when_its_channels_are_backed_up() {
        let mut c = chans();
        // Idle: stays local.
        assert!(c.pick(Scheduler::NumaSpill, 0, 128 << 10) < 3);
        // Node 0's channels hold 1 MiB each, node 1's nothing: the crossing costs far
        // less than waiting behind 1 MiB at 1.25 GB/s.
        let mut c = chans();
        for ch in 0..3 {
            c.backlog[ch] = 1 << 20;
        }
        assert!(c.pick(Scheduler::NumaSpill, 0, 128 << 10) >= 3);
        // Equal backlogs everywhere: the crossing makes the remote estimate worse.
        let mut c = chans();
        c.backlog = vec![1 << 20; 6];
        assert!(c.pick(Scheduler::NumaSpill, 0, 128 << 10) < 3);
    }
}
