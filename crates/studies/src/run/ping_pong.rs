//! A TCP_RR or UDP ping-pong workload of `nudma run` that shares a host with another
//! packet-granular model (a TCP_STREAM, memcached, an RDMA benchmark, a `pagerank` victim)
//! runs as a component of their world (`host::net::round_trip`): its requests and
//! responses take the same port, PCIe links, DDIO share, LLC, DRAM and interconnect as
//! the others, in time order. Its round trips run back to back from the run's start; those
//! that start in the `[measure]` window and end within it are measured. Alone, or with
//! `stream_pairs`, it runs on its own model (`run::net`), whose window is as many round
//! trips as fit.

use devices::nic::CoalesceMode;
use fabric::Topology;
use host::net::rr::Transactions;
use host::net::udp::PingPongs;
use host::net::world::NetWorld;
use host::net::world::Shared;
use sim::component::Sim;

use super::beside::Beside;
use super::packet::{Group, NetOutcome};
use super::spec::{Kind, Measure, NetEnds, NetTest, Workload};
use crate::ioctopus::setup::MTU;

/// Each TCP_RR and UDP ping-pong workload that can run in a world (no antagonists of its
/// own), as a group of one; none must (alone it runs on its own model).
pub(super) fn groups(workloads: &[Workload]) -> Vec<Group<'_>> {
    workloads
        .iter()
        .enumerate()
        .filter_map(|(i, w)| {
            let (server, client) = match &w.kind {
                Kind::Netperf {
                    test: NetTest::TcpRr,
                    server,
                    client,
                    streams: None,
                    ..
                } => (server, client),
                Kind::UdpPingPong {
                    ends,
                    streams: None,
                    ..
                } => (&ends.server, &ends.client),
                _ => return None,
            };
            Some(Group {
                members: vec![i],
                server,
                client,
                together: false,
            })
        })
        .collect()
}

/// A ping-pong of a world: its component and the server's PF.
pub(super) enum PingPong {
    Tcp(Box<Transactions>),
    Udp(Box<PingPongs>),
}

/// The workload `w` (a member of `groups`) as a component measuring `m`, its hosts
/// loaded with the run's CPU streams there; and the server's PF.
pub(super) fn build(
    topo: &Topology,
    w: &Workload,
    m: Measure,
    beside: &mut Beside,
) -> Result<(PingPong, usize), String> {
    match &w.kind {
        Kind::Netperf {
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
        } => {
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
            let coalescing = coalescing.unwrap_or(CoalesceMode::Off);
            let (srv, cli, pf) =
                super::net::latency_ends(topo, &ends, *client_remote, coalescing, beside)?;
            let t = Transactions::new(cli, srv, *msg_bytes, MTU, m.warmup, m.duration)?;
            Ok((PingPong::Tcp(Box::new(t)), pf))
        }
        Kind::UdpPingPong {
            ends, msg_bytes, ..
        } => {
            // sockperf's latency test: coalescing off on both sides.
            let (srv, cli, pf) =
                super::net::latency_ends(topo, ends, false, CoalesceMode::Off, beside)?;
            let p = PingPongs::new(cli, srv, *msg_bytes, MTU, m.warmup, m.duration)?;
            Ok((PingPong::Udp(Box::new(p)), pf))
        }
        _ => unreachable!("ping-pong groups hold TCP_RR and UDP ping-pong workloads"),
    }
}

impl PingPong {
    /// Adds it to `sim` and starts it in `w`: its id, and where its server is in `w`.
    pub(super) fn start<'b>(
        self,
        sim: &mut Sim<NetWorld<'b>>,
        w: &mut NetWorld<'b>,
    ) -> Result<(sim::net::ComponentId, Shared), String> {
        match self {
            PingPong::Tcp(t) => {
                let id = sim.add(*t);
                let at = sim
                    .with(w, id, |t: &mut Transactions, w| {
                        t.start(w, id).map(|()| t.server())
                    })
                    .expect("a component")?;
                Ok((id, at))
            }
            PingPong::Udp(p) => {
                let id = sim.add(*p);
                let at = sim
                    .with(w, id, |p: &mut PingPongs, w| {
                        p.start(w, id).map(|()| p.server())
                    })
                    .expect("a component")?;
                Ok((id, at))
            }
        }
    }
}

/// The row of the ping-pong `id` of `sim` that ran in a world, and where its server is
/// in the world.
pub(super) fn outcome(
    sim: &Sim<NetWorld<'_>>,
    id: sim::net::ComponentId,
    pf: usize,
) -> (Result<NetOutcome, String>, Shared) {
    if let Some(t) = sim.get::<Transactions>(id) {
        let o = t
            .result()
            .map(|r| super::net::rr_outcome(&r, pf, t.measured()));
        return (o, t.server());
    }
    let p: &PingPongs = sim.get(id).expect("a ping-pong component");
    let o = p
        .result()
        .map(|r| super::net::udp_outcome(&r, pf, p.measured()));
    (o, p.server())
}
