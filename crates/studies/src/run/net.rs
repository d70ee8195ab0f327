//! The network workloads of `nudma run`: netperf (TCP_STREAM, TCP_RR) and pktgen on the
//! packet-granular host stack (`host::net`), each host set up as the IOctopus probes set
//! theirs up (`ioctopus::setup`: the NIC's steering picks the PF).
//!
//! A network workload runs on its own model of its hosts — their memory systems priced
//! per packet by `sim::memsys`, their NICs' PCIe links and port — not on the TLP-level
//! fabric the other workloads share: it neither contends with them nor meets the
//! scenario's `[[fault]]`s. Its window is the scenario's `[measure]` table; TCP_RR, which
//! counts transactions, runs as many as fit in it at its steady-state round trip.

use devices::nic::{CoalesceMode, FiveTuple, SteeringMode};
use fabric::Topology;
use host::net::stream::{self, Lane, StreamSpec};
use host::net::{pktgen, rr, NetHost};
use serde_json::{json, Map, Value};

use super::spec::{Kind, Measure, NetTest, NicMode};
use crate::ioctopus::setup::{self, NicChoice, FLOW, MTU, RR_WARMUP};

/// What a network workload measured: its metrics (the catalog's names) and counters.
#[derive(Clone, Debug)]
pub struct NetOutcome {
    pub metrics: Map<String, Value>,
    pub counters: Value,
}

/// The packages of a process's core (`cpu_node`) and memory (`mem_node`) on host `name`:
/// the packet model keeps one memory node per socket.
fn placement(
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

fn choice(mode: NicMode, netdev_pf: usize) -> NicChoice {
    NicChoice {
        mode: match mode {
            NicMode::Standard => SteeringMode::Standard,
            NicMode::Octonic => SteeringMode::OctoNic,
            NicMode::LinuxMultiPf => SteeringMode::LinuxMultiPf,
        },
        netdev_pf,
    }
}

/// Runs a network workload over the window `m`.
pub fn run(topo: &Topology, kind: &Kind, m: Measure) -> Result<NetOutcome, String> {
    match kind {
        Kind::Netperf {
            test,
            msg_bytes,
            connections,
            server,
            client,
            nic,
            client_nic,
            cpu_node,
            mem_node,
            nic_mode,
            netdev_pf,
            coalescing,
        } => {
            let (socket, node) = placement(topo, server, *cpu_node, *mem_node)?;
            let choice = choice(*nic_mode, *netdev_pf);
            let (mut srv, pf) = setup::server(topo, server, nic, choice, socket, node)?;
            match test {
                NetTest::TcpStream { server_receives } => {
                    let mut cli = setup::stream_client(topo, client, client_nic)?;
                    if let Some(mode) = coalescing {
                        srv.coalescing.mode = *mode;
                        cli.coalescing.mode = *mode;
                    }
                    let net = Stream {
                        server: srv,
                        client: cli,
                        choice,
                        socket,
                        server_receives: *server_receives,
                    };
                    net.run(topo, server, *cpu_node, *msg_bytes, *connections, pf, m)
                }
                NetTest::TcpRr => {
                    let s = setup::nic_socket(topo, client, client_nic, false)?;
                    let cli = setup::host(topo, client, client_nic, 0, s, s)?;
                    tcp_rr(
                        srv,
                        cli,
                        *msg_bytes,
                        coalescing.unwrap_or(CoalesceMode::Off),
                        pf,
                        m,
                    )
                }
            }
        }
        Kind::Pktgen {
            host,
            nic,
            cpu_node,
            mem_node,
            pkt_bytes,
            nic_mode,
            netdev_pf,
        } => {
            let (socket, node) = placement(topo, host, *cpu_node, *mem_node)?;
            let choice = choice(*nic_mode, *netdev_pf);
            let (mut h, pf) = setup::server(topo, host, nic, choice, socket, node)?;
            let r = pktgen::run(
                &mut h,
                pktgen::PktgenSpec {
                    pkt_bytes: *pkt_bytes,
                    warmup: m.warmup,
                    window: m.duration,
                    fragments: Vec::new(),
                },
            )?;
            Ok(NetOutcome {
                metrics: metrics(&[
                    ("mpps", r.mpps),
                    ("throughput_gbps", r.throughput_gbps),
                    ("mem_bw_gbps", r.mem_gbps),
                    ("cpu_util", r.cpu_util),
                ]),
                counters: json!({
                    "pf": pf,
                    "packets": r.packets,
                    "cqe_misses_per_packet": r.cqe_misses_per_packet,
                }),
            })
        }
        other => Err(format!("`{}` is not a network workload", other.name())),
    }
}

fn metrics(fields: &[(&str, f64)]) -> Map<String, Value> {
    fields
        .iter()
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect()
}

/// A TCP_STREAM's two hosts, set up.
struct Stream {
    server: NetHost,
    client: NetHost,
    choice: NicChoice,
    socket: u32,
    server_receives: bool,
}

impl Stream {
    /// `connections` connections, each on a server core of its own on `cpu_node`, its
    /// flow steered as the NIC steers it.
    #[allow(clippy::too_many_arguments)]
    fn run(
        mut self,
        topo: &Topology,
        server: &str,
        cpu_node: u32,
        msg_bytes: u64,
        connections: u32,
        pf: usize,
        m: Measure,
    ) -> Result<NetOutcome, String> {
        let h = topo.host_by_name(server).expect("set up");
        let p = topo.platform_of(h);
        let cores = p.cores_per_package / p.nodes_per_package.max(1);
        if connections > cores {
            return Err(format!(
                "connections {connections}: node {cpu_node} of host `{server}` has {cores} cores \
                 (one connection per core)"
            ));
        }
        let sockets = setup::pf_sockets(&self.server);
        let lanes: Vec<(Lane, Lane)> = (0..connections)
            .map(|i| {
                let flow = FiveTuple {
                    src_port: FLOW.src_port + i as u16,
                    ..FLOW
                };
                let s = Lane {
                    core: self.server.core.clone(),
                    pf: setup::flow_pf(self.choice, flow, self.socket, &sockets),
                    node: self.server.node,
                };
                let c = Lane::of(&self.client);
                if self.server_receives {
                    (c, s)
                } else {
                    (s, c)
                }
            })
            .collect();
        let spec = StreamSpec {
            msg_bytes,
            mtu: MTU,
            warmup: m.warmup,
            window: m.duration,
        };
        let rx = self.server_receives;
        let r = if rx {
            stream::run_lanes(&mut self.client, &mut self.server, spec, lanes)
        } else {
            stream::run_lanes(&mut self.server, &mut self.client, spec, lanes)
        }?;
        let (util, mem, client_util) = if rx {
            (r.receiver_util, r.receiver_mem_gbps, r.sender_util)
        } else {
            (r.sender_util, r.sender_mem_gbps, r.receiver_util)
        };
        Ok(NetOutcome {
            metrics: metrics(&[
                ("throughput_gbps", r.throughput_gbps),
                ("mem_bw_gbps", mem),
                ("cpu_util", util),
            ]),
            counters: json!({
                "pf": pf,
                "connections": connections,
                "tso_sends": r.tso_sends,
                "frames": r.frames,
                "out_of_order": r.out_of_order,
                "bytes_delivered": r.bytes_delivered,
                "events": r.events,
                "receiver_interrupts": r.receiver_interrupts,
                "client_cpu_util": client_util,
            }),
        })
    }
}

/// TCP_RR with `coalescing` on both sides (off unless the workload says otherwise:
/// REFERENCE.md §1 runs latency tests without it): a pilot run gives the steady-state
/// round trip, then the warm-up (at least the rings' wrap, `RR_WARMUP`) and the window
/// are as many transactions as fit in `m`.
fn tcp_rr(
    mut server: NetHost,
    mut client: NetHost,
    msg_bytes: u64,
    coalescing: CoalesceMode,
    pf: usize,
    m: Measure,
) -> Result<NetOutcome, String> {
    server.coalescing.mode = coalescing;
    client.coalescing.mode = coalescing;
    let spec = |warmup, transactions| rr::RrSpec {
        msg_bytes,
        mtu: MTU,
        warmup,
        transactions,
    };
    let pilot = rr::run(&mut client.clone(), &mut server.clone(), spec(RR_WARMUP, 1))?;
    let round_trip_ns = pilot.latency_us * 1e3;
    let fit = |t: sim::Time| (t.as_ns_f64() / round_trip_ns).round() as u32;
    let warmup = fit(m.warmup).max(RR_WARMUP);
    let transactions = fit(m.duration).max(1);
    let r = rr::run(&mut client, &mut server, spec(warmup, transactions))?;
    Ok(NetOutcome {
        metrics: metrics(&[("latency_us", r.latency_us), ("p99_us", r.p99_us)]),
        counters: json!({
            "pf": pf,
            "transactions": transactions,
            "transactions_per_s": r.transactions_per_s,
            "cqe_misses_per_transaction": r.cqe_misses,
            "frames_per_message": r.frames_per_message,
            "server_interrupts_per_s": r.server_interrupts_per_s,
        }),
    })
}
