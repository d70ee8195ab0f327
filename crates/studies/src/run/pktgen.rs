//! A pktgen workload of `nudma run` that shares its host with another packet-granular
//! model (a TCP_STREAM, memcached, a ping-pong, a `pagerank` victim) runs as a component
//! of their world (`host::net::pktgen::Generator`): its descriptor and packet reads, its
//! completions and its frames take the same PCIe links, port, DDIO share, LLC, DRAM and
//! interconnect as the others, in time order. Alone it runs its own loop (`run::net`).

use fabric::Topology;
use host::net::pktgen::Generator;

use super::beside::Beside;
use super::packet::Group;
use super::spec::{Kind, Measure, Workload};

/// Each pktgen workload as a group of one (its host is both ends); none must run in a
/// world.
pub(super) fn groups(workloads: &[Workload]) -> Vec<Group<'_>> {
    workloads
        .iter()
        .enumerate()
        .filter_map(|(i, w)| match &w.kind {
            Kind::Pktgen { host, .. } => Some(Group {
                members: vec![i],
                server: host,
                client: host,
                together: false,
            }),
            _ => None,
        })
        .collect()
}

/// The pktgen workload `w` as a component measuring `m`, its host loaded with the run's
/// CPU streams there; and its PF.
pub(super) fn build(
    topo: &Topology,
    w: &Workload,
    m: Measure,
    beside: &mut Beside,
) -> Result<(Generator, usize), String> {
    let (h, spec, pf) = super::net::pktgen_parts(topo, &w.kind, m, beside)?;
    Ok((Generator::new(h, spec)?, pf))
}
