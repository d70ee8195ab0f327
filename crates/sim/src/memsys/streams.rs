//! Background STREAM cores on a memory system: adding them (as cores, or as a number of
//! misses in flight) and solving the arbitration they leave the measured workload
//! (`arbitration`).

use super::arbitration::{self, StreamAgent, StreamRates};
use super::{Fifo, MemSys, LINE};

impl MemSys {
    /// Adds `cores` background STREAM cores on `cpu_socket` streaming through `node`'s
    /// memory (`write`: read for ownership and write back), each keeping its line-fill
    /// buffers full, and re-solves the arbitration: from now on this memory system's own
    /// accesses get what is left to them (`arbitration`).
    pub fn add_streams(
        &mut self,
        cpu_socket: u32,
        node: u32,
        write: bool,
        cores: u32,
    ) -> Result<(), String> {
        let misses = self.p.line_fill_buffers.max(1);
        self.add_agents(cpu_socket, node, write, vec![misses; cores as usize])
    }

    /// Adds a background stream that keeps `misses` line misses in flight from
    /// `cpu_socket` through `node`'s memory, as the fewest cores that can (each at most
    /// its line-fill buffers; the misses shared evenly), and re-solves the arbitration.
    /// Returns the indices of its cores among `streams()`.
    pub fn add_stream_misses(
        &mut self,
        cpu_socket: u32,
        node: u32,
        write: bool,
        misses: u32,
    ) -> Result<std::ops::Range<usize>, String> {
        let lfb = self.p.line_fill_buffers.max(1);
        let cores = misses.div_ceil(lfb).max(1);
        let per_core = (0..cores)
            .map(|i| misses / cores + u32::from(i < misses % cores))
            .collect();
        let first = self.streams.len();
        self.add_agents(cpu_socket, node, write, per_core)?;
        Ok(first..self.streams.len())
    }

    fn add_agents(
        &mut self,
        cpu_socket: u32,
        node: u32,
        write: bool,
        misses: Vec<u32>,
    ) -> Result<(), String> {
        let n = self.p.sockets;
        if cpu_socket >= n || node >= n {
            return Err(format!(
                "a stream on socket {cpu_socket} against node {node}: the host has {n} sockets"
            ));
        }
        self.streams
            .extend(misses.into_iter().map(|misses| StreamAgent {
                cpu_socket,
                node,
                write,
                misses,
            }));
        self.arbitrate();
        Ok(())
    }

    /// The background streams, one per core.
    pub fn streams(&self) -> &[StreamAgent] {
        &self.streams
    }

    /// The streams' solved rates and what they leave per server.
    pub fn stream_rates(&self) -> &StreamRates {
        &self.rates
    }

    /// Indices (DRAM servers first, then link directions) of the link servers on the
    /// route from vertex `from` to `to`.
    fn route_servers(&self, from: u32, to: u32) -> Vec<usize> {
        self.uncore
            .route(from, to)
            .iter()
            .map(|h| self.dram.len() + h.server())
            .collect()
    }

    fn arbitrate(&mut self) {
        let caps: Vec<f64> = self
            .dram
            .iter()
            .chain(&self.links)
            .map(Fifo::gbps)
            .collect();
        let uses: Vec<_> = self
            .streams
            .iter()
            .map(|a| {
                arbitration::usage(
                    a,
                    &self.route_servers(a.node, a.cpu_socket),
                    &self.route_servers(a.cpu_socket, a.node),
                )
            })
            .collect();
        // A core's own limit: its misses in flight over the zero-load miss latency
        // (bytes per ns = GB/s).
        let demands: Vec<f64> = self
            .streams
            .iter()
            .map(|a| {
                let lat = self.p.dram_latency + self.round_trip(a.cpu_socket, a.node);
                (a.misses as u64 * LINE) as f64 / (lat.as_ps() as f64 / 1000.0)
            })
            .collect();
        let rate = arbitration::max_min(&caps, &demands, &uses);
        let mut per_server: Vec<Vec<f64>> = vec![Vec::new(); caps.len()];
        for (i, u) in uses.iter().enumerate() {
            for &(s, k) in u {
                per_server[s].push(k * rate[i]);
            }
        }
        let share: Vec<f64> = caps
            .iter()
            .zip(&per_server)
            .map(|(&c, l)| arbitration::residual_share(c, l))
            .collect();
        let servers = self.dram.iter_mut().chain(self.links.iter_mut());
        for (f, &sh) in servers.zip(&share) {
            f.set_share(sh);
        }
        self.rates = StreamRates {
            agent_gbps: rate,
            load_gbps: per_server.iter().map(|l| l.iter().sum()).collect(),
            share_gbps: share,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::ms;
    use crate::time::Time;

    #[test]
    fn streams_squeeze_the_link_they_load_and_nothing_else() {
        let mut quiet = ms();
        let mut loaded = ms();
        // Six pairs of STREAM cores on socket 0 against node 1: twelve requesters on the
        // direction 1 → 0 (their fills), each held to 38.4 / 12 GB/s there.
        loaded.add_streams(0, 1, false, 6).unwrap();
        loaded.add_streams(0, 1, true, 6).unwrap();
        let r = loaded.stream_rates();
        assert!(
            r.agent_gbps.iter().all(|&x| (x - 3.2).abs() < 1e-6),
            "{r:?}"
        );
        // A device on socket 1 writing node 0 crosses 1 → 0 and gets one turn in 13:
        // its 1,536 B take 520 ns instead of 40.
        let q = quiet.device_write(Time::ZERO, 1, 0, 9, 1536);
        let l = loaded.device_write(Time::ZERO, 1, 0, 9, 1536);
        let extra = (l - q).as_ps() as f64 / 1000.0;
        assert!((extra - 480.0).abs() < 1.0, "extra {extra} ns");
        // Nothing that stays off the streams' servers changes: a DDIO write on socket 0
        // and a core's miss to its own node 0.
        assert_eq!(
            quiet.device_write(Time::ZERO, 0, 0, 10, 1536),
            loaded.device_write(Time::ZERO, 0, 0, 10, 1536)
        );
        assert_eq!(
            quiet.cpu_read(Time::ZERO, 0, 0, 11, 64, true),
            loaded.cpu_read(Time::ZERO, 0, 0, 11, 64, true)
        );
        // A core's dependent miss to node 1 waits its turn on DRAM 1 and the link.
        let q = quiet.cpu_read(Time::ZERO, 0, 1, 12, 64, true);
        let l = loaded.cpu_read(Time::ZERO, 0, 1, 12, 64, true);
        assert!(l > q, "{l:?} vs {q:?}");
    }

    #[test]
    fn a_stream_of_misses_is_the_fewest_cores_that_keep_them_in_flight() {
        // ms(): 10 line-fill buffers per core.
        let mut m = ms();
        let cores = m.add_stream_misses(0, 1, true, 25).unwrap();
        assert_eq!(cores, 0..3);
        let misses: Vec<u32> = m.streams().iter().map(|a| a.misses).collect();
        assert_eq!(misses, [9, 8, 8]);
        // One core's worth of misses is one STREAM core: the same rates either way.
        let (mut a, mut b) = (ms(), ms());
        a.add_streams(0, 1, false, 2).unwrap();
        b.add_stream_misses(0, 1, false, 10).unwrap();
        b.add_stream_misses(0, 1, false, 10).unwrap();
        assert_eq!(a.stream_rates(), b.stream_rates());
        // Fewer misses in flight ask for less: a 2-miss core takes a fifth of a full one
        // on an idle system.
        let mut c = ms();
        c.add_stream_misses(0, 1, false, 2).unwrap();
        let full = a.stream_rates().agent_gbps[0];
        let light = c.stream_rates().agent_gbps[0];
        assert!((light * 5.0 - full).abs() < 1e-9, "{light} vs {full}");
    }

    #[test]
    fn a_stream_on_a_missing_socket_is_refused() {
        let e = ms().add_streams(0, 2, false, 1).unwrap_err();
        assert!(e.contains("node 2") && e.contains("2 sockets"), "{e}");
    }
}
