//! CPU accesses to memory on the timed fabric: the latency of one line read, the cache
//! state a workload starts from, and CPU memory streams (`sim::cpu_stream`).

use fabric::HostId;

use super::{ns, CacheState, TimedFabric, TimingError};
use crate::cpu_stream::{CpuStream, StreamOp, StreamSpec};
use crate::net::Hop;
use crate::time::Time;

impl TimedFabric {
    /// Latency of a CPU core of `package` reading one cache line at `offset` in NUMA node
    /// `node`'s RAM: an LLC hit when a local DMA (DDIO) or earlier access left the line in
    /// the node's LLC, otherwise DRAM — the platform's latency matrix when it has one, else
    /// local DRAM plus the interconnect hops between the package and the memory's.
    pub fn cpu_line_read(&self, host: HostId, package: u32, node: u32, offset: u64) -> Time {
        let topo = &self.fabric.topo;
        let p = topo.platform_of(host);
        let pt = self.timing_of(host);
        let sink = self.ram_sinks[host.index()][node as usize];
        let home = p.package_of_node(node);
        let cached = self
            .net
            .sink(sink)
            .llc
            .as_ref()
            .is_some_and(|l| l.contains(offset / 64));
        if cached && home == package {
            return ns(pt.llc_latency_ns);
        }
        if let Some(m) = &p.latency_ns {
            let cpu_node = package * p.nodes_per_package;
            return ns(m[cpu_node as usize][node as usize]);
        }
        let ic = self.uncore_crossing(host, package, home);
        ns(pt.dram_latency_ns) + ic + ic
    }

    /// Leaves the lines of `[offset, offset + bytes)` of NUMA node `node`'s RAM of `host`
    /// as `state` says, before a workload starts (pcie-bench's cache states): a buffer
    /// larger than the cache that took it keeps its last lines there.
    pub fn prepare_cache(
        &mut self,
        host: HostId,
        node: u32,
        offset: u64,
        bytes: u64,
        state: CacheState,
    ) {
        let sink = self.ram_sinks[host.index()][node as usize];
        let platform = self.fabric.topo.platform_of(host);
        let home = platform.package_of_node(node);
        let llc_lines = platform.llc_bytes / 64;
        match state {
            CacheState::Cold => self.net.uncache_lines(sink, offset, bytes),
            CacheState::Cached { package } if package == home => {
                self.net.cache_lines(sink, offset, bytes, llc_lines)
            }
            CacheState::Cached { package } => {
                // Home snoop: the home learns from its directory that another package
                // owns the line and fetches it there: a round trip between them.
                let one_way = self.uncore_crossing(host, home, package);
                let snoop = one_way + one_way;
                self.net
                    .cache_lines_remote(sink, offset, bytes, llc_lines, snoop)
            }
            CacheState::Ddio => {
                let ddio_lines = self
                    .net
                    .sink(sink)
                    .llc
                    .as_ref()
                    .map_or(0, |l| l.capacity_lines);
                self.net.cache_lines(sink, offset, bytes, ddio_lines as u64)
            }
        }
    }

    /// One crossing from package `a` to `b` at zero load: the interconnect hops' latency.
    fn uncore_crossing(&self, host: HostId, a: u32, b: u32) -> Time {
        let p = self.fabric.topo.platform_of(host);
        let pt = self.timing_of(host);
        let ns_sum: f64 = self
            .fabric
            .topo
            .uncore_path(host, a, b)
            .iter()
            .map(|h| {
                p.interconnect[h.link as usize]
                    .latency_ns
                    .unwrap_or(pt.interconnect_latency_ns)
            })
            .sum();
        ns(ns_sum)
    }

    /// A CPU memory stream (a component, not started): cores on NUMA node `cpu_node` of `host`
    /// keeping `outstanding` line misses in flight against node `mem_node`'s DRAM, over
    /// the interconnect when the nodes sit on different packages. Their line fills press
    /// on the DDIO lines of the cores' package LLC. See `sim::cpu_stream`.
    pub fn cpu_stream(
        &mut self,
        host: HostId,
        cpu_node: u32,
        mem_node: u32,
        op: StreamOp,
        outstanding: u32,
    ) -> Result<CpuStream, TimingError> {
        let topo = &self.fabric.topo;
        let h = topo.host(host);
        let p = topo.platform_of(host);
        let nodes = p.numa_nodes();
        if cpu_node >= p.cpu_nodes() || mem_node >= nodes {
            return Err(TimingError(format!(
                "host {} has NUMA nodes 0..{nodes}, CPUs on nodes 0..{}; a CPU stream asked for cores on node {cpu_node} and memory on node {mem_node}",
                h.name,
                p.cpu_nodes()
            )));
        }
        if outstanding == 0 {
            return Err(TimingError(
                "a CPU stream needs at least one outstanding miss".into(),
            ));
        }
        let (from, to) = (p.package_of_node(cpu_node), p.package_of_node(mem_node));
        let (i, j) = (cpu_node as usize, mem_node as usize);
        let mut hops: Vec<Hop> = self.mem_pacers[host.index()]
            .as_ref()
            .map(|pacers| Hop::Pace(pacers[i][j]))
            .into_iter()
            .collect();
        hops.extend(
            p.uncore_path(from, to)
                .iter()
                .map(|u| Hop::Wire(self.ic_wire(host, u))),
        );
        if let Some(d) = self.mem_delay[host.index()].as_ref().map(|d| d[i][j]) {
            if d > Time::ZERO {
                hops.push(Hop::MemoryDelay(d));
            }
        }
        let sink = self.ram_sinks[host.index()][mem_node as usize];
        hops.push(Hop::Sink(sink, false));
        let route = self.net.add_route(hops);
        // A fill lands in any way; one in llc_ways / ddio_ways lands in a DDIO way.
        let fills_per_eviction = p.llc_ways.checked_div(p.ddio_ways).map_or(0, |k| k.max(1));
        // Spread streams over the node so their lines never alias.
        let n = self.cpu_streams_made;
        self.cpu_streams_made += 1;
        let span = 1u64 << 30;
        let name = format!(
            "{} cores node{cpu_node} {} node{mem_node}",
            h.name,
            match op {
                StreamOp::Read => "read",
                StreamOp::Write => "write",
            }
        );
        Ok(CpuStream::new(StreamSpec {
            name,
            route,
            op,
            outstanding,
            base: (1u64 << 40) + n * span,
            span,
            fill_llc: Some(self.ram_sinks[host.index()][cpu_node as usize]),
            fills_per_eviction,
        }))
    }
}
