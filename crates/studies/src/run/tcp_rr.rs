//! A TCP_RR workload of `nudma run` that shares a host with another packet-granular model
//! (a TCP_STREAM, memcached, an RDMA benchmark, a `pagerank` victim) runs as a component
//! of their world (`host::net::rr::Transactions`): its requests and responses take the
//! same port, PCIe links, DDIO share, LLC, DRAM and interconnect as the others, in time
//! order. Its transactions run back to back from the run's start; those that start in the
//! `[measure]` window and end within it are measured. Alone, or with `stream_pairs`, it
//! runs on its own model (`run::net`), whose window is as many transactions as fit.

use fabric::Topology;
use host::net::rr::Transactions;

use super::beside::Beside;
use super::packet::{Group, NetOutcome};
use super::spec::{Kind, Measure, NetEnds, NetTest, Workload};
use crate::ioctopus::setup::MTU;

/// Each TCP_RR workload that can run in a world (no antagonists of its own), as a group of
/// one; none must (alone it runs on its own model).
pub(super) fn groups(workloads: &[Workload]) -> Vec<Group<'_>> {
    workloads
        .iter()
        .enumerate()
        .filter_map(|(i, w)| match &w.kind {
            Kind::Netperf {
                test: NetTest::TcpRr,
                server,
                client,
                streams: None,
                ..
            } => Some(Group {
                members: vec![i],
                server,
                client,
                together: false,
            }),
            _ => None,
        })
        .collect()
}

/// The TCP_RR workload `w` as a component measuring `m`, its hosts loaded with the run's
/// CPU streams there; and the server's PF.
pub(super) fn build(
    topo: &Topology,
    w: &Workload,
    m: Measure,
    beside: &mut Beside,
) -> Result<(Transactions, usize), String> {
    let Kind::Netperf {
        test: NetTest::TcpRr,
        msg_bytes,
        server,
        client,
        nic,
        client_nic,
        cpu_node,
        mem_node,
        nic_mode,
        netdev_pf,
        coalescing,
        client_remote,
        ..
    } = &w.kind
    else {
        unreachable!("TCP_RR groups hold TCP_RR workloads")
    };
    let ends = NetEnds {
        server: server.clone(),
        client: client.clone(),
        nic: nic.clone(),
        client_nic: client_nic.clone(),
        cpu_node: *cpu_node,
        mem_node: *mem_node,
        nic_mode: *nic_mode,
        netdev_pf: *netdev_pf,
    };
    let coalescing = coalescing.unwrap_or(devices::nic::CoalesceMode::Off);
    let (srv, cli, pf) = super::net::rr_ends(topo, &ends, *client_remote, coalescing, beside)?;
    let t = Transactions::new(cli, srv, *msg_bytes, MTU, m.warmup, m.duration)?;
    Ok((t, pf))
}

/// The row of a TCP_RR that ran in a world.
pub(super) fn outcome(t: &Transactions, pf: usize) -> Result<NetOutcome, String> {
    let r = t.result()?;
    Ok(super::net::rr_outcome(&r, pf, t.measured()))
}
