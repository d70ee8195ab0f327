//! Arbitration on the memory system's servers (DRAM per node, each interconnect link
//! direction) between the measured workload and background STREAM cores.
//!
//! **Assumption (round robin between requesters):** the home agent's trackers and the
//! interconnect's link-layer credits are handed out per requesting agent in turn — each
//! core (through its caching agent) and the I/O hub are separate requesters — rather than
//! in order of arrival. Intel documents per-agent tracker and credit pools for QPI/UPI
//! and the home agent but not the arbitration policy between them; round robin is the
//! simplest fair policy and the one that lets a light requester keep a fixed share of a
//! saturated link. So a backlogged requester beside `n` backlogged streams gets one line
//! per round of `n + 1`, and never less than the max-min fair share of the server.
//!
//! The streams are steady agents: each core keeps its misses in flight (STREAM cores
//! keep their line-fill buffers full), so it asks for `misses × 64 B` per zero-load
//! miss latency, limited by the max-min fair share of every server it crosses
//! (progressive filling over all servers). A reading core uses its node's DRAM and, when
//! remote, the link directions of the route from its memory to it; a writing core also
//! writes each line back (read for ownership, then write-back), so it uses DRAM twice
//! and the route back too. Their rates are solved without the measured workload, which is small beside them (one core's
//! receive against up to twelve streaming cores). The measured workload then gets, per
//! server, what a round-robin arbiter leaves one more backlogged requester: its
//! reservations are served at that share, so each line of it takes `64 B ÷ share` — one
//! line time on an idle server, up to `n + 1` of them beside `n` saturating streams.
//! That is both the bandwidth squeeze and the queueing delay that grows with load.

/// Background cores streaming against one node (STREAM): one core per agent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamAgent {
    /// Socket the core runs on.
    pub cpu_socket: u32,
    /// Node whose memory it streams through.
    pub node: u32,
    /// Writes (read for ownership, then the line written back) rather than reads.
    pub write: bool,
    /// Line misses the core keeps in flight (its line-fill buffers when it streams flat
    /// out): its demand is that many lines per zero-load miss latency.
    pub misses: u32,
}

/// The solved arbitration: the streams' rates and, per server, their load and the share
/// left to the measured workload.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StreamRates {
    /// Lines per second × 64 B of each agent's misses, GB/s (a writer moves twice that).
    pub agent_gbps: Vec<f64>,
    /// Per server (DRAM nodes, then each interconnect link's directions, `a → b` first),
    /// GB/s of the streams' traffic on it.
    pub load_gbps: Vec<f64>,
    /// Per server, GB/s left to the measured workload.
    pub share_gbps: Vec<f64>,
}

impl StreamRates {
    /// Bytes the streams move per second (reads and write-backs), GB/s.
    pub fn stream_gbps(&self, agents: &[StreamAgent]) -> f64 {
        agents
            .iter()
            .zip(&self.agent_gbps)
            .map(|(a, r)| if a.write { 2.0 * r } else { *r })
            .fold(0.0, |t, x| t + x)
    }
}

/// Servers an agent uses and how many bytes per byte of its misses: DRAM `node` (server
/// `node`), then the link servers of the route from its memory to its core (`to_cpu`)
/// and, for a writer, of the route back (`to_mem`).
pub(super) fn usage(a: &StreamAgent, to_cpu: &[usize], to_mem: &[usize]) -> Vec<(usize, f64)> {
    let dram = a.node as usize;
    let mut u = vec![(dram, if a.write { 2.0 } else { 1.0 })];
    u.extend(to_cpu.iter().map(|&s| (s, 1.0)));
    if a.write {
        u.extend(to_mem.iter().map(|&s| (s, 1.0)));
    }
    u
}

/// Max-min fair rates by progressive filling: every unfrozen agent's rate rises together
/// until it reaches its demand or a server it uses is full.
pub(super) fn max_min(caps: &[f64], demands: &[f64], uses: &[Vec<(usize, f64)>]) -> Vec<f64> {
    const EPS: f64 = 1e-9;
    let mut rate = vec![0.0; demands.len()];
    let mut active: Vec<bool> = demands.iter().map(|&d| d > EPS).collect();
    while active.iter().any(|&a| a) {
        let mut used = vec![0.0; caps.len()];
        let mut weight = vec![0.0; caps.len()];
        for (i, u) in uses.iter().enumerate() {
            for &(s, k) in u {
                used[s] += k * rate[i];
                if active[i] {
                    weight[s] += k;
                }
            }
        }
        let mut step = f64::INFINITY;
        for i in (0..rate.len()).filter(|&i| active[i]) {
            step = step.min(demands[i] - rate[i]);
        }
        for s in 0..caps.len() {
            if weight[s] > 0.0 {
                step = step.min(((caps[s] - used[s]) / weight[s]).max(0.0));
            }
        }
        for i in 0..rate.len() {
            if active[i] {
                rate[i] += step;
                for &(s, k) in &uses[i] {
                    used[s] += k * step;
                }
            }
        }
        for i in 0..rate.len() {
            if !active[i] {
                continue;
            }
            let full = uses[i]
                .iter()
                .any(|&(s, _)| caps[s] - used[s] <= EPS * caps[s].max(1.0));
            if full || demands[i] - rate[i] <= EPS {
                active[i] = false;
            }
        }
    }
    rate
}

/// What a round-robin arbiter gives one more backlogged requester on a server of `cap`
/// beside agents loading it with `loads`: the water level `l` with
/// `Σ min(load, l) + l = cap` (everything left when the loads are light).
pub(super) fn residual_share(cap: f64, loads: &[f64]) -> f64 {
    let mut x: Vec<f64> = loads.iter().copied().filter(|&l| l > 0.0).collect();
    x.sort_by(f64::total_cmp);
    let mut left = cap;
    for (k, &l) in x.iter().enumerate() {
        let level = left / (x.len() - k + 1) as f64;
        if level <= l {
            return level;
        }
        left -= l;
    }
    left.max(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_saturated_server_leaves_one_more_requester_an_equal_turn() {
        // Twelve streams asking for more than 38.4 / 12 each: each gets 3.2, a thirteenth
        // backlogged requester one turn in thirteen.
        let uses = vec![vec![(0, 1.0)]; 12];
        let r = max_min(&[38.4], &[4.57; 12], &uses);
        assert!(r.iter().all(|&x| (x - 3.2).abs() < 1e-6), "{r:?}");
        let share = residual_share(38.4, &r);
        assert!((share - 38.4 / 13.0).abs() < 1e-6, "{share}");
    }

    #[test]
    fn light_streams_leave_the_rest_of_the_server() {
        let share = residual_share(38.4, &[4.0, 4.0]);
        assert!((share - 30.4).abs() < 1e-9);
        assert_eq!(residual_share(60.0, &[]), 60.0);
        // One heavy and one light: the light one keeps its rate, the heavy one and the
        // newcomer split the rest.
        let share = residual_share(10.0, &[1.0, 20.0]);
        assert!((share - 4.5).abs() < 1e-9, "{share}");
    }

    #[test]
    fn a_writer_is_limited_by_the_busiest_server_it_crosses() {
        // Remote writer: DRAM twice, both directions once. A direction already full
        // of readers holds it to its fair share there, and it does not take more
        // elsewhere.
        let w = StreamAgent {
            cpu_socket: 0,
            node: 1,
            write: true,
            misses: 10,
        };
        let r = StreamAgent {
            cpu_socket: 0,
            node: 1,
            write: false,
            misses: 10,
        };
        let agents = [w, r, r, r];
        // DRAM 0, DRAM 1, link 0→1, link 1→0: node 1 → socket 0 is server 3.
        let uses: Vec<_> = agents.iter().map(|a| usage(a, &[3], &[2])).collect();
        let caps = [60.0, 60.0, 38.4, 38.4];
        let rate = max_min(&caps, &[20.0; 4], &uses);
        for x in &rate {
            assert!((x - 9.6).abs() < 1e-6, "{rate:?}");
        }
    }
}
