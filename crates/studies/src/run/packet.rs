//! What the packet-granular network workloads of `nudma run` share: their outcome, where
//! a process's core and memory are, the NIC steering a config picks, and how workloads
//! that run as one model are grouped.

use devices::nic::SteeringMode;
use fabric::Topology;
use host::net::memcached;
use serde_json::{json, Map, Value};

use super::spec::{Kind, NicMode, Workload};
use crate::ioctopus::setup::NicChoice;

/// What a network workload measured: its metrics (the catalog's names) and counters.
#[derive(Clone, Debug)]
pub struct NetOutcome {
    pub metrics: Map<String, Value>,
    pub counters: Value,
}

/// The packages of a process's core (`cpu_node`) and memory (`mem_node`) on host `name`:
/// the packet model keeps one memory node per socket.
pub(super) fn placement(
    topo: &Topology,
    name: &str,
    cpu_node: u32,
    mem_node: u32,
) -> Result<(u32, u32), String> {
    let h = topo
        .host_by_name(name)
        .ok_or_else(|| format!("no host `{name}`"))?;
    let p = topo.platform_of(h);
    if cpu_node >= p.cpu_nodes() {
        return Err(format!(
            "cpu_node {cpu_node}: host `{name}` has CPU nodes 0 .. {}",
            p.cpu_nodes() - 1
        ));
    }
    if mem_node >= p.numa_nodes() {
        return Err(format!(
            "mem_node {mem_node}: host `{name}` has NUMA nodes 0 .. {}",
            p.numa_nodes() - 1
        ));
    }
    if p.memory_node(mem_node).is_some() {
        return Err(format!(
            "mem_node {mem_node} of host `{name}` is a memory-only node: a network workload's \
             memory is on a CPU node (the packet model keeps one memory node per socket)"
        ));
    }
    Ok((p.package_of_node(cpu_node), p.package_of_node(mem_node)))
}

pub(super) fn choice(mode: NicMode, netdev_pf: usize) -> NicChoice {
    NicChoice {
        mode: match mode {
            NicMode::Standard => SteeringMode::Standard,
            NicMode::Octonic => SteeringMode::OctoNic,
            NicMode::LinuxMultiPf => SteeringMode::LinuxMultiPf,
        },
        netdev_pf,
    }
}

pub(super) fn metrics(fields: &[(&str, f64)]) -> Map<String, Value> {
    fields
        .iter()
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect()
}

/// The counters of a memcached run served from `pf`, or an error if any GET reply was not
/// the bytes a SET stored (every reply is checked whole).
pub(super) fn checked_counters(r: &memcached::MemcachedResult, pf: usize) -> Result<Value, String> {
    if r.values_corrupt > 0 || r.values_stale > 0 {
        return Err(format!(
            "{} of {} GET replies were not the bytes a SET stored ({} stale)",
            r.values_corrupt + r.values_stale,
            r.values_checked,
            r.values_stale
        ));
    }
    Ok(json!({
        "pf": pf,
        "gets": r.gets,
        "sets": r.sets,
        "value_gbit_s": r.value_gbps,
        "interconnect_gbit_s": r.interconnect_gbps,
        "server_cpu_util": r.server_util,
        "values_checked": r.values_checked,
        "events": r.events,
    }))
}

/// The workloads (indices, in file order) grouped by the key `shared` gives them (those
/// it gives none left out), each group in file order.
pub(super) fn group_by<'w, K: PartialEq>(
    workloads: &'w [Workload],
    shared: impl Fn(&'w Kind) -> Option<K>,
) -> Vec<Vec<usize>> {
    let mut groups: Vec<(K, Vec<usize>)> = Vec::new();
    for (i, w) in workloads.iter().enumerate() {
        let Some(key) = shared(&w.kind) else { continue };
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, g)) => g.push(i),
            None => groups.push((key, vec![i])),
        }
    }
    groups.into_iter().map(|(_, g)| g).collect()
}

/// Workloads that can run as one model: their indices in file order, the hosts they run
/// between, and whether they must run as one (they would otherwise run alone).
pub(super) struct Group<'w> {
    pub members: Vec<usize>,
    pub server: &'w str,
    pub client: &'w str,
    pub together: bool,
}
