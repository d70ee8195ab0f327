//! What every experiment needs: load a built-in scenario (with host IOMMU choices), map a
//! buffer for a requester through the host layer's DMA API (NTB window, requester-ID entry,
//! identity IOMMU mappings; the GPU probes borrow and map through SmartIO instead, see
//! `smartio::program`), and time
//! DMA jobs and single writes on the timed fabric — with a steady-state window for large
//! transfers.

use devices::{DmaJob, DmaOutcome, DmaSpec, Op};
use fabric::{builtin, Endpoint, Fabric, HostId, Requester};
use host::{DmaDirection, Hosts, PhysAddr};
use sim::timed::{ns, TimedFabric};
use sim::{pcie, Time};

/// An experiment could not run: bad scenario, a fault, a missing parameter.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct RunError(pub String);

impl RunError {
    pub fn from<E: std::fmt::Display>(what: &str) -> impl Fn(E) -> RunError + '_ {
        move |e| RunError(format!("{what}: {e}"))
    }
}

/// Transfers larger than this are simulated up to it and extended at the steady-state
/// rate of its second half (a converged window stands in for the whole transfer).
pub const DMA_WINDOW: u64 = 8 << 20;

/// Loads a built-in scenario, setting the IOMMU of the named hosts.
pub fn load(name: &str, iommu: &[(&str, bool)]) -> Result<TimedFabric, RunError> {
    let mut s = builtin::load_builtin(name)
        .ok_or_else(|| RunError(format!("no built-in scenario `{name}`")))?
        .map_err(RunError::from(name))?;
    for (h, on) in iommu {
        let id = s
            .topology
            .host_by_name(h)
            .ok_or_else(|| RunError(format!("{name}: no host `{h}`")))?;
        s.topology.hosts[id.index()].iommu = *on;
    }
    let f = Fabric::from_scenario(s).map_err(RunError::from(name))?;
    TimedFabric::new(f, 1).map_err(RunError::from(name))
}

/// Loads a scenario text (built-in includes resolve) into a timed fabric.
pub fn load_source(src: &fabric::scenario::Source) -> Result<TimedFabric, RunError> {
    let s = builtin::load_source(src.clone()).map_err(RunError::from(&src.name))?;
    timed(s, &src.name)
}

/// A loaded scenario's timed fabric (seed 1); errors name `what`.
pub fn timed(s: fabric::scenario::Scenario, what: &str) -> Result<TimedFabric, RunError> {
    let f = Fabric::from_scenario(s).map_err(RunError::from(what))?;
    TimedFabric::new(f, 1).map_err(RunError::from(what))
}

/// Resolves an endpoint name to a requester.
pub fn requester(tf: &TimedFabric, name: &str) -> Result<Requester, RunError> {
    match tf.fabric.resolve(name).map_err(RunError::from(name))? {
        Endpoint::Node(n) | Endpoint::Bar { node: n, .. } => Ok(Requester::Function(n)),
        Endpoint::Cpu { host, package } => Ok(Requester::Cpu { host, package }),
        Endpoint::Ram { .. } => Err(RunError(format!("{name}: RAM is not a requester"))),
    }
}

/// Makes `bytes` at `target` (+`offset`) reachable by `who` and returns the bus address
/// `who` uses, through the host layer's DMA API (identity IOMMU policy): an NTB window
/// and requester-ID entry when the target is in another host, IOMMU mappings wherever an
/// IOMMU is on. The mapping stays for the fabric's life.
pub fn map_buffer(
    tf: &mut TimedFabric,
    who: Requester,
    target: &str,
    offset: u64,
    bytes: u64,
) -> Result<u64, RunError> {
    let (host, addr) = tf
        .fabric
        .resolve_address(target, offset)
        .map_err(RunError::from(target))?;
    let m = Hosts::with(&mut tf.fabric, |h, f| {
        h.dma_map_single(
            f,
            who,
            PhysAddr { host, addr },
            bytes.max(1),
            DmaDirection::Bidirectional,
        )
    })
    .map_err(RunError::from(target))?;
    Ok(m.addr.0)
}

/// A device's DMA behaviour from its `timing` table and its link.
pub fn device_spec(tf: &TimedFabric, who: Requester, mps: u32) -> Result<DmaSpec, RunError> {
    let n = match who {
        Requester::Function(n) => n,
        // A core's loads and stores reach a device as MMIO of the platform's shape.
        Requester::Cpu { host, .. } => {
            let pt = tf.timing_of(host);
            return Ok(DmaSpec {
                mps: pt.cpu_mmio_write_bytes,
                mrrs: pt.cpu_mmio_read_bytes,
                max_reads: pt.cpu_mmio_reads,
                issue_ps_per_kib: 1,
            });
        }
    };
    let topo = &tf.fabric.topo;
    let node = topo.node(n);
    let get = |k: &str| device_param(tf, who, k);
    let link = node
        .link
        .or_else(|| node.parent.and_then(|p| topo.node(p).link))
        .ok_or_else(|| RunError("requester without a link".into()))?;
    Ok(DmaSpec {
        mps,
        mrrs: get("dma_mrrs_bytes")? as u32,
        max_reads: get("dma_max_reads")? as u32,
        issue_ps_per_kib: pcie::ps_per_kib(link.gen, link.width),
    })
}

/// The device's own data path behind its DMA engine, as its model states it: what it can
/// produce for the writes it posts and take in for the reads it makes — a NIC's or an
/// RNIC's port in either direction, an NVMe's media reads (the data it writes to the host)
/// and media writes (what it reads). `None` for a device without one (a GPU, an NTB's
/// engine): its DMA is bounded by PCIe alone. As ps per KiB of payload, and what it is.
pub fn data_path(tf: &TimedFabric, who: Requester, write: bool) -> Option<(u64, &'static str)> {
    let get = |k: &str| device_param(tf, who, k).ok();
    let (gbps, what) = if let Some(g) = get("nic_line_gbps") {
        (g, "line rate")
    } else if let Some(g) = get("rnic_port_gbps") {
        (g, "port rate")
    } else if write {
        (get("nvme_read_gbps")?, "media read rate")
    } else {
        (get("nvme_write_gbps")?, "media write rate")
    };
    Some((pcie::ps_per_kib_at(gbps), what))
}

/// Maps `bytes` at `target` (+`offset`) for `who` and returns the bus address with the
/// DMA behaviour `who` uses for it (its tags and request size, the MPS in force between
/// its host and the target's).
pub fn dma_to(
    tf: &mut TimedFabric,
    who: Requester,
    target: &str,
    offset: u64,
    bytes: u64,
) -> Result<(u64, DmaSpec), RunError> {
    let bus = map_buffer(tf, who, target, offset, bytes)?;
    let (target_host, _) = tf
        .fabric
        .resolve_address(target, offset)
        .map_err(RunError::from(target))?;
    let mps = mps_between(tf, tf.fabric.requester_host(who), target_host);
    Ok((bus, device_spec(tf, who, mps)?))
}

/// A timing parameter of a requester's device or adapter.
pub fn device_param(tf: &TimedFabric, who: Requester, key: &str) -> Result<f64, RunError> {
    let Requester::Function(n) = who else {
        return Err(RunError(format!("a CPU has no `{key}`")));
    };
    let topo = &tf.fabric.topo;
    match topo.node(n).kind {
        fabric::NodeKind::Function { device, .. } => {
            topo.devices[device.index()].timing.get(key).copied()
        }
        fabric::NodeKind::NtbFunction { ntb } => topo.ntbs[ntb.index()]
            .adapter
            .timing
            .iter()
            .find(|(x, _)| x == key)
            .map(|x| x.1),
        _ => None,
    }
    .ok_or_else(|| {
        RunError(format!(
            "{} has no timing parameter `{key}`",
            topo.node_label(n)
        ))
    })
}

/// The MPS in force between two hosts (the smaller one).
pub fn mps_between(tf: &TimedFabric, a: HostId, b: HostId) -> u32 {
    tf.fabric.topo.host(a).mps.min(tf.fabric.topo.host(b).mps)
}

/// A fault of an access as an error, in the fabric's words.
pub fn fault_error(tf: &TimedFabric, f: fabric::Fault) -> RunError {
    RunError(fabric::describe::fault_text(&tf.fabric.topo, &f))
}

/// Time for a small posted write (a doorbell, a flag, a counter) to become visible:
/// from when it leaves the requester until it lands.
pub fn one_way(tf: &mut TimedFabric, who: Requester, bus: u64) -> Result<Time, RunError> {
    devices::single_access(tf, who, Op::Write { dst: bus }, 4).map_err(|f| fault_error(tf, f))
}

/// Round trip of a small read (a poll).
pub fn read_rtt(tf: &mut TimedFabric, who: Requester, bus: u64) -> Result<Time, RunError> {
    devices::single_access(tf, who, Op::Read { src: bus }, 4).map_err(|f| fault_error(tf, f))
}

/// Duration of a DMA job of `bytes`, simulated up to `DMA_WINDOW` and extended at the
/// steady-state rate of the window's second half beyond it.
pub fn dma_time(
    tf: &mut TimedFabric,
    who: Requester,
    spec: DmaSpec,
    op: Op,
    bytes: u64,
) -> Result<Time, RunError> {
    let sim_bytes = bytes.min(DMA_WINDOW);
    let job = DmaJob::new(tf, who, spec, op, sim_bytes).map_err(|f| fault_error(tf, f))?;
    let (o, stats): (DmaOutcome, _) = job.run(tf, Time::ZERO);
    if stats.faults > 0 {
        let f = tf
            .fabric
            .faults()
            .last()
            .expect("a counted fault is logged");
        return Err(RunError(format!(
            "{} of the DMA's accesses faulted: {}",
            stats.faults,
            fabric::describe::fault_text(&tf.fabric.topo, f)
        )));
    }
    let mut t = o.end - o.start;
    if bytes > sim_bytes {
        let rest = (bytes - sim_bytes) as f64 / o.steady_gbps();
        t += ns(rest);
    }
    Ok(t)
}

/// GB/s (10^9 bytes per second) of `bytes` in `t`.
pub fn gbps(bytes: u64, t: Time) -> f64 {
    bytes as f64 / t.as_ps().max(1) as f64 * 1000.0
}

/// Powers of two from `lo` to `hi` bytes.
pub fn sizes(lo: u64, hi: u64) -> Vec<u64> {
    let mut v = Vec::new();
    let mut s = lo;
    while s <= hi {
        v.push(s);
        s *= 2;
    }
    v
}

/// The hardware counters of a timed fabric as JSON, for a transfer of `bytes` of which
/// the first `DMA_WINDOW` were simulated (the counters cover what was simulated, including
/// doorbells, flags and polls around it).
pub fn counters_json(tf: &TimedFabric, bytes: u64) -> serde_json::Value {
    let c = tf.net.counters();
    serde_json::json!({
        "simulated_bytes": bytes.min(DMA_WINDOW),
        "memory": c.sinks.iter().map(|(name, read, written)| serde_json::json!({
            "name": name, "read_bytes": read, "written_bytes": written,
        })).collect::<Vec<_>>(),
        "links": c.wires.iter().map(|(name, bytes, payload, tlps)| serde_json::json!({
            "name": name, "wire_bytes": bytes, "payload_bytes": payload, "packets": tlps,
        })).collect::<Vec<_>>(),
        "llc": c.llc.iter().map(|(name, hits, misses, allocs, writebacks, invalidations)| serde_json::json!({
            "name": name, "dma_read_hits": hits, "dma_read_misses": misses,
            "ddio_allocations": allocs, "writebacks": writebacks, "invalidations": invalidations,
        })).collect::<Vec<_>>(),
        "iotlb": { "hits": c.iotlb_hits, "misses": c.iotlb_misses },
    })
}
