//! What each part of a fabric becomes in the `Net`, built once with the timed fabric:
//! link and cable wires with their credits, each host's interconnect wires, memory
//! sinks, latency and bandwidth matrices, read splitters and IOTLB, the NTB translation
//! cost and the BAR sinks. A missing parameter is an error that names it.

use fabric::{
    CableEnd, Fabric, Host, HostId, McRoutes, NodeKind, NtbId, Path, PcieNodeId, Platform, Topology,
};
use rustc_hash::FxHashMap;

use super::{ns, PlatformTiming, RouteCache, TimedFabric, TimingError, NONE};
use crate::net::{coherent_bytes, Net};
use crate::pcie::{self, serialize};
use crate::time::Time;

impl TimedFabric {
    pub fn new(fabric: Fabric, seed: u64) -> Result<TimedFabric, TimingError> {
        let topo = &fabric.topo;
        let mut net = Net::new(seed);
        // The order resources are added in is their ids: keep it (wires, cables, each
        // host's interconnect, memory and IOMMU, then BARs).
        let platform = platform_timings(topo, &mut net)?;
        let link_wires = link_wires(topo, &mut net, &platform);
        let cable_wires = cable_wires(topo, &mut net, &platform);
        let hosts = host_resources(topo, &mut net, &platform)?;
        let ntb_translate = ntb_translate(topo)?;
        let bar_sinks = bar_sinks(topo, &mut net)?;
        Ok(TimedFabric {
            fabric,
            ntb_translate,
            net,
            platform,
            link_wires,
            cable_wires,
            ic_wires: hosts.ic_wires,
            ram_sinks: hosts.ram_sinks,
            mem_delay: hosts.mem_delay,
            mem_pacers: hosts.mem_pacers,
            bar_sinks,
            splitters: hosts.splitters,
            iotlbs: hosts.iotlbs,
            cache: RouteCache::default(),
            dedup: FxHashMap::default(),
            path: Path::with_capacity(64),
            cpu_streams_made: 0,
            hop_scratch: Vec::new(),
            mc_scratch: McRoutes::default(),
        })
    }
}

/// Each platform's timing table, and the network-wide parameters they must agree on
/// (the credit-update latency and the completion timeout), set on `net`.
fn platform_timings(topo: &Topology, net: &mut Net) -> Result<Vec<PlatformTiming>, TimingError> {
    let platform: Vec<PlatformTiming> = topo
        .platforms
        .iter()
        .map(|p| {
            p.timing.clone().ok_or_else(|| {
                TimingError(format!(
                    "platform `{0}` has no timing table (the timing layer needs `[platform.{0}.timing]`)",
                    p.name
                ))
            })
        })
        .collect::<Result<_, _>>()?;
    // The network has one credit-update latency: the platforms must agree on it.
    if let Some((a, b)) = platform
        .iter()
        .zip(&topo.platforms)
        .find_map(|(t, p)| (t.fc_update_ns != platform[0].fc_update_ns).then_some(p))
        .map(|p| (&topo.platforms[0].name, &p.name))
    {
        return Err(TimingError(format!(
            "platforms `{a}` and `{b}` differ in `fc_update_ns`; one network has one credit-update latency"
        )));
    }
    if let Some(t) = platform.first() {
        net.set_fc_extra(ns(t.fc_update_ns));
    }
    // Likewise one completion timeout (requesters of every host wait as long).
    if let Some((a, b)) = platform
        .iter()
        .zip(&topo.platforms)
        .find_map(|(t, p)| {
            (t.completion_timeout_ns != platform[0].completion_timeout_ns).then_some(p)
        })
        .map(|p| (&topo.platforms[0].name, &p.name))
    {
        return Err(TimingError(format!(
            "platforms `{a}` and `{b}` differ in `completion_timeout_ns`; one network has one completion timeout"
        )));
    }
    if let Some(t) = platform.first() {
        net.set_completion_timeout(ns(t.completion_timeout_ns));
    }
    Ok(platform)
}

/// Credits a wire's receiver advertises: a switch chip's port buffers.
fn credits_of(topo: &Topology, n: PcieNodeId) -> [u16; 3] {
    match topo.node(n).kind {
        NodeKind::Switch { chip, .. } => topo.chip(chip).credits,
        _ => [0; 3],
    }
}

/// The (up, down) wires of each node's link to its parent (`NONE` for a node without
/// one), with the credits each direction's receiver advertises.
fn link_wires(topo: &Topology, net: &mut Net, platform: &[PlatformTiming]) -> Vec<[u32; 2]> {
    let timing_of_host = |h: HostId| &platform[topo.host(h).platform as usize];
    let mut link_wires = vec![[NONE; 2]; topo.nodes.len()];
    for (i, n) in topo.nodes.iter().enumerate() {
        if let Some(l) = n.link {
            let pt = timing_of_host(n.host);
            let lat = pt.pcie_link_ns + if l.cable { pt.cable_ns } else { 0.0 };
            let (up, down) = net.add_link(
                &format!("link {}", topo.node_label(PcieNodeId::from_index(i))),
                pcie::ps_per_kib(l.gen, l.width),
                ns(lat),
                [0; 3],
                true,
            );
            link_wires[i] = [up, down];
        }
    }
    for (i, n) in topo.nodes.iter().enumerate() {
        if let (Some(p), [up, down]) = (n.parent, link_wires[i]) {
            if up != NONE {
                net.set_credits(up, credits_of(topo, p));
                net.set_credits(down, credits_of(topo, PcieNodeId::from_index(i)));
            }
        }
    }
    link_wires
}

/// The two wires of each cable (end 0 to end 1, end 1 to end 0), with the credits of
/// the chip at each receiving end.
fn cable_wires(topo: &Topology, net: &mut Net, platform: &[PlatformTiming]) -> Vec<[u32; 2]> {
    let timing_of_host = |h: HostId| &platform[topo.host(h).platform as usize];
    let end_credits = |e: CableEnd| match e {
        CableEnd::Ntb(x) => credits_of(topo, topo.ntbs[x.index()].chip_node),
        CableEnd::ClusterSwitch(c) => topo.chip(topo.cluster_switches[c.index()].chip).credits,
    };
    let mut cable_wires = Vec::new();
    for c in &topo.cables {
        let name = format!(
            "cable {}-{}",
            topo.cable_end_label(c.ends[0]),
            topo.cable_end_label(c.ends[1])
        );
        // A cable's own propagation, else the platform's at its first NTB end.
        let host_end = c.ends.iter().find_map(|e| match *e {
            CableEnd::Ntb(x) => Some(topo.ntbs[x.index()].host),
            CableEnd::ClusterSwitch(_) => None,
        });
        let pt = timing_of_host(host_end.unwrap_or(HostId(0)));
        let (a, b) = net.add_link(
            &name,
            pcie::ps_per_kib(c.link.gen, c.link.width),
            ns(pt.pcie_link_ns + c.cable_ns.unwrap_or(pt.cable_ns)),
            [0; 3],
            true,
        );
        net.set_credits(a, end_credits(c.ends[1]));
        net.set_credits(b, end_credits(c.ends[0]));
        cable_wires.push([a, b]);
    }
    cable_wires
}

/// What each host's package side becomes: per host, indexed by host.
struct HostResources {
    ic_wires: Vec<Vec<[u32; 2]>>,
    ram_sinks: Vec<Vec<u32>>,
    mem_delay: Vec<Option<Vec<Vec<Time>>>>,
    mem_pacers: Vec<Option<Vec<Vec<u32>>>>,
    /// Per node (`NONE` but for root complexes that split peer reads).
    splitters: Vec<u32>,
    iotlbs: Vec<u32>,
}

/// Each host's interconnect wires, memory sinks and matrices, root complexes' read
/// splitters and IOTLB, host by host.
fn host_resources(
    topo: &Topology,
    net: &mut Net,
    platform: &[PlatformTiming],
) -> Result<HostResources, TimingError> {
    let mut r = HostResources {
        ic_wires: Vec::new(),
        ram_sinks: Vec::new(),
        mem_delay: Vec::new(),
        mem_pacers: Vec::new(),
        splitters: vec![NONE; topo.nodes.len()],
        iotlbs: Vec::new(),
    };
    for h in topo.hosts.iter() {
        let p = &topo.platforms[h.platform as usize];
        let pt = &platform[h.platform as usize];
        let wires = interconnect_wires(net, h, p, pt);
        let (dram, delay) = match &p.latency_ns {
            Some(m) => {
                let (dram, delay) = matrix_latency(net, p, &wires, m)?;
                (dram, Some(delay))
            }
            None => (vec![ns(pt.dram_latency_ns); p.numa_nodes() as usize], None),
        };
        r.mem_delay.push(delay);
        r.mem_pacers.push(memory_pacers(net, h, p));
        r.ic_wires.push(wires);
        r.ram_sinks.push(ram_sinks(net, h, p, pt, &dram));
        for &rc in &h.roots {
            if let Some(split) = p.root_read_split_bytes {
                r.splitters[rc.index()] = net.add_splitter(
                    &topo.node_label(rc),
                    split,
                    pt.rc_p2p_read_tags,
                    ns(pt.rc_p2p_read_gap_ns),
                );
            }
        }
        r.iotlbs.push(net.add_iotlb(
            pt.iotlb_entries as usize,
            ns(pt.iotlb_hit_ns),
            ns(pt.iotlb_miss_ns),
        ));
    }
    Ok(r)
}

/// The two wires (a to b, b to a) of each of `h`'s interconnect links.
fn interconnect_wires(net: &mut Net, h: &Host, p: &Platform, pt: &PlatformTiming) -> Vec<[u32; 2]> {
    let mut wires = Vec::new();
    for l in &p.interconnect {
        // Parallel links (`count`) add bandwidth.
        let gbps = l.gbps(pt.interconnect_gbps);
        let lat = l.latency_ns.unwrap_or(pt.interconnect_latency_ns);
        let (a, b) = net.add_link(
            &format!("{} {}-{}", h.name, p.vertex_name(l.a), p.vertex_name(l.b)),
            pcie::ps_per_kib_at(gbps),
            ns(lat),
            [0; 3],
            false,
        );
        wires.push([a, b]);
    }
    wires
}

/// With a bandwidth matrix, the pacer of CPU streams from node i against node j,
/// `[i][j]`.
fn memory_pacers(net: &mut Net, h: &Host, p: &Platform) -> Option<Vec<Vec<u32>>> {
    p.bandwidth_gbps.as_ref().map(|bw| {
        bw.iter()
            .enumerate()
            .map(|(i, row)| {
                row.iter()
                    .enumerate()
                    .map(|(j, &gbps)| {
                        net.add_pacer(&format!("{} cores node{i} from node{j}", h.name), gbps)
                    })
                    .collect()
            })
            .collect()
    })
}

/// Each memory node's sink, at latency `dram[n]`, with the LLC share DDIO writes into.
fn ram_sinks(
    net: &mut Net,
    h: &Host,
    p: &Platform,
    pt: &PlatformTiming,
    dram: &[Time],
) -> Vec<u32> {
    (0..p.numa_nodes())
        .map(|n| {
            // A memory-only node (HBM, CXL, GPU memory) has its own bandwidth
            // when the platform states one.
            let mem = p.memory_node(n);
            let gbps = mem
                .and_then(|m| m.gbps.as_ref())
                .map_or(pt.dram_gbps, |g| g.0);
            let sink = net.add_sink(
                &format!("{} DRAM node{n}", h.name),
                gbps,
                dram[n as usize],
                dram[n as usize],
                // The root's completions, capped by the host's MPS.
                pt.read_completion_bytes.min(h.mps),
            );
            // Writes that bypass DDIO land in DRAM; DDIO writes and read hits
            // are the LLC's (docs/hardware.md §1, DDIO). The package's DDIO ways
            // are shared by its CPU nodes; memory-only nodes get none, so
            // their writes land in their memory (assumption: nothing documents
            // DDIO into HBM, CXL or GPU memory).
            if mem.is_none() {
                let ddio_bytes = p.llc_bytes * p.ddio_ways as u64
                    / p.llc_ways as u64
                    / p.nodes_per_package as u64;
                net.set_llc(sink, ddio_bytes, ns(pt.llc_latency_ns));
            }
            sink
        })
        .collect()
}

/// Each adapter's NTB translation cost, resolved once; an adapter without one is an
/// error, not a free crossing.
fn ntb_translate(topo: &Topology) -> Result<Vec<Time>, TimingError> {
    topo.ntbs
        .iter()
        .enumerate()
        .map(|(id, n)| {
            n.adapter
                .timing_value("ntb_translate_ns")
                .map(ns)
                .ok_or_else(|| {
                    TimingError(format!(
                        "adapter `{}` (on {}) has no timing parameter `ntb_translate_ns`",
                        n.adapter.name,
                        topo.cable_end_label(CableEnd::Ntb(NtbId::from_index(id)))
                    ))
                })
        })
        .collect()
}

/// The memory sink of each node with BARs (`NONE` for the others); a node with BARs
/// but no BAR timing is an error naming it.
fn bar_sinks(topo: &Topology, net: &mut Net) -> Result<Vec<u32>, TimingError> {
    let mut bar_sinks = vec![NONE; topo.nodes.len()];
    for (i, n) in topo.nodes.iter().enumerate() {
        if n.bars.is_empty() {
            continue;
        }
        let bar = match n.kind {
            NodeKind::Function { device, .. } => topo.devices[device.index()].timed.bar,
            // An NTB function's own registers (its window BAR leads elsewhere).
            NodeKind::NtbFunction { ntb } => {
                let a = &topo.ntbs[ntb.index()].adapter;
                match (
                    a.timing_value("bar_gbps"),
                    a.timing_value("bar_latency_ns"),
                    a.timing_value("bar_rcb_bytes"),
                ) {
                    (Some(gbps), Some(latency_ns), Some(rcb)) => Some(fabric::BarTiming {
                        gbps,
                        latency_ns,
                        rcb_bytes: rcb as u32,
                    }),
                    _ => None,
                }
            }
            _ => None,
        };
        let bar = bar.ok_or_else(|| {
            TimingError(format!(
                "{} has BARs but no timing parameters `bar_gbps`, `bar_latency_ns`, `bar_rcb_bytes`",
                topo.node_label(PcieNodeId::from_index(i))
            ))
        })?;
        bar_sinks[i] = net.add_sink(
            &format!("{} memory", topo.node_label(PcieNodeId::from_index(i))),
            bar.gbps,
            ns(bar.latency_ns),
            ns(bar.latency_ns.min(50.0)),
            bar.rcb_bytes,
        );
    }
    Ok(bar_sinks)
}

/// What the wires of `host`'s interconnect path from node `i`'s package to node `j`'s
/// take at zero load for one line read (the request there, the 64 B line back), and
/// how many links it crosses.
fn line_wire_time(net: &Net, p: &Platform, wires: &[[u32; 2]], i: u32, j: u32) -> (Time, usize) {
    let (from, to) = (p.package_of_node(i), p.package_of_node(j));
    if from == to {
        return (Time::ZERO, 0);
    }
    let path = p.uncore_path(from, to);
    let t = path
        .iter()
        .map(|hop| {
            let l = &p.interconnect[hop.link as usize];
            let dir = usize::from(l.a != hop.from);
            let (go, back) = (
                net.wire(wires[hop.link as usize][dir]),
                net.wire(wires[hop.link as usize][1 - dir]),
            );
            serialize(coherent_bytes(0), go.ps_per_kib)
                + go.latency
                + serialize(coherent_bytes(64), back.ps_per_kib)
                + back.latency
        })
        .fold(Time::ZERO, |a, b| a + b);
    (t, path.len())
}

/// Splits a latency matrix into each node's DRAM sink latency and the `MemoryDelay` of
/// each (CPU node, memory node) pair, so that a line read's zero-load latency is the
/// entry exactly. The sink takes the smallest remainder of its column (the local entry
/// on any machine where local is fastest: LLC and DDIO hits then pay no delay). An entry
/// below what its interconnect wires alone take is an error naming the pair: the matrix
/// and the link latencies contradict each other, and running anyway would not honour
/// the matrix.
fn matrix_latency(
    net: &Net,
    p: &Platform,
    wires: &[[u32; 2]],
    m: &[Vec<f64>],
) -> Result<(Vec<Time>, Vec<Vec<Time>>), TimingError> {
    // Rows: CPU nodes; columns: every node.
    let (rows, n) = (p.cpu_nodes() as usize, p.numa_nodes() as usize);
    let mut dram_part = vec![vec![Time::ZERO; n]; rows];
    for (i, row) in m.iter().enumerate() {
        for (j, &entry_ns) in row.iter().enumerate() {
            let (wire, links) = line_wire_time(net, p, wires, i as u32, j as u32);
            let entry = ns(entry_ns);
            if entry < wire {
                return Err(TimingError(format!(
                    "platform `{}`: memory.latency_ns[{i}][{j}] = {entry_ns} ns (CPU node {i}, memory node {j}) is below the {:.1} ns its {links} interconnect link crossing(s) take at zero load for a 64 B line (the links' latency_ns or interconnect_latency_ns, and serialization); raise the entry or lower those latencies",
                    p.name,
                    wire.as_ns_f64()
                )));
            }
            dram_part[i][j] = entry - wire;
        }
    }
    let dram: Vec<Time> = (0..n)
        .map(|j| {
            (0..rows)
                .map(|i| dram_part[i][j])
                .min()
                .unwrap_or(Time::ZERO)
        })
        .collect();
    let delay = dram_part
        .iter()
        .map(|row| row.iter().zip(&dram).map(|(&d, &s)| d - s).collect())
        .collect();
    Ok((dram, delay))
}
