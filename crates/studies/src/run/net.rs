//! The network workloads of `nudma run`: netperf (TCP_STREAM, TCP_RR; STREAM antagonists
//! beside it; its receiver migrating to the other socket), pktgen, memcached under
//! memaslap and a sockperf UDP ping-pong on the packet-granular host stack (`host::net`),
//! each host set up as the IOctopus probes set theirs up (`ioctopus::setup`: the NIC's
//! steering picks the PF).
//!
//! A network workload runs on its own model of its hosts — their memory systems priced
//! per packet by `sim::memsys`, their NICs' PCIe links and port — not on the TLP-level
//! fabric the other workloads share. The run's `cpu_stream`s on its hosts load those
//! memory systems (`run::beside`); no other workload contends with it, and it does not
//! meet the scenario's `[[fault]]`s. Its window is the scenario's `[measure]` table; TCP_RR, which
//! counts transactions, runs as many as fit in it at its steady-state round trip.

use devices::nic::frame::{IFG, PREAMBLE};
use devices::nic::Nic;
use devices::nic::{CoalesceMode, SteeringMode};
use fabric::Topology;
use host::net::memcached::{self, MemcachedSpec};
use host::net::migration::{MigrationSpec, Move, RxQueue};
use host::net::stream::StreamSpec;
use host::net::{pktgen, rr, udp, NetHost};
use serde_json::{json, Map};
use sim::memsys::MemSys;
use sim::Time;

use super::beside::Beside;
use super::bound;
use super::packet::NetOutcome;
use super::packet::{checked_counters, choice, metrics, placement};
use super::spec::{Antagonists, Kind, Measure, Migration, NetEnds, NetTest};
use super::tcp_stream::{Part, Stream};
use crate::ioctopus::migration as team;
use crate::ioctopus::setup::{self, MTU, RR_WARMUP};

/// The server side of a workload of `ends`: the host set up with its queue on the PF the
/// NIC's steering gives, the process's socket, that PF.
fn net_server(
    topo: &Topology,
    ends: &NetEnds,
    beside: &mut Beside,
) -> Result<(NetHost, u32, usize), String> {
    let (socket, node) = placement(topo, &ends.server, ends.cpu_node, ends.mem_node)?;
    let choice = choice(ends.nic_mode, ends.netdev_pf);
    let (mut h, pf) = setup::server(topo, &ends.server, &ends.nic, choice, socket, node)?;
    beside.load(topo, &ends.server, &mut h.mem)?;
    Ok((h, socket, pf))
}

/// What a workload's client host is.
#[derive(Clone, Copy)]
enum Client {
    /// A bulk-transfer client (`setup::stream_client`: LRO on).
    Bulk,
    /// A latency test's: no LRO (one message at a time), its core and memory on its
    /// NIC's first PF's socket, or the other one when `away`.
    Latency { away: bool },
}

/// The client host `name`, its memory system loaded with the run's streams on it.
fn client(
    topo: &Topology,
    name: &str,
    nic: &str,
    kind: Client,
    beside: &mut Beside,
) -> Result<NetHost, String> {
    let mut h = match kind {
        Client::Bulk => setup::stream_client(topo, name, nic)?,
        Client::Latency { away } => {
            let s = setup::nic_socket(topo, name, nic, away)?;
            setup::host(topo, name, nic, 0, s, s)?
        }
    };
    beside.load(topo, name, &mut h.mem)?;
    Ok(h)
}

/// Loads `h`'s memory system with STREAM antagonists (as `ioctopus::qpi`): `a.pairs`
/// pairs of cores of `socket`, one reading and one writing, against node `a.node`; the
/// socket's other cores must hold them beside the workload's `busy` cores. Returns the
/// bytes the antagonists move (reads and write-backs), GB/s.
fn load(
    topo: &Topology,
    h: &mut NetHost,
    host: &str,
    socket: u32,
    busy: u32,
    a: Antagonists,
) -> Result<f64, String> {
    let id = topo.host_by_name(host).expect("set up");
    let cores = topo.platform_of(id).cores_per_package;
    if busy + 2 * a.pairs > cores {
        return Err(format!(
            "stream_pairs {}: {} STREAM cores and the workload's {busy} need more than socket \
             {socket}'s {cores} cores of host `{host}`",
            a.pairs,
            2 * a.pairs
        ));
    }
    let (_, node) =
        placement(topo, host, 0, a.node).map_err(|e| format!("stream_node {}: {e}", a.node))?;
    for write in [false, true] {
        h.mem.add_streams(socket, node, write, a.pairs)?;
    }
    Ok(h.mem.stream_rates().stream_gbps(h.mem.streams()))
}

/// Runs a network workload over the window `m`; `seed` draws memcached's keys and mix;
/// `beside` loads its hosts with the run's streams.
pub fn run(
    topo: &Topology,
    kind: &Kind,
    m: Measure,
    seed: u64,
    beside: &mut Beside,
) -> Result<NetOutcome, String> {
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
            streams,
            migration,
            client_remote,
        } => {
            let (socket, node) = placement(topo, server, *cpu_node, *mem_node)?;
            let choice = choice(*nic_mode, *netdev_pf);
            let (mut srv, pf) = setup::server(topo, server, nic, choice, socket, node)?;
            beside.load(topo, server, &mut srv.mem)?;
            let stream_gbyte_s = match streams {
                Some(a) => Some(load(topo, &mut srv, server, socket, *connections, *a)?),
                None => None,
            };
            let mut out = match test {
                NetTest::TcpStream { .. } if migration.is_some() => {
                    let mv = migration.expect("checked");
                    // The team driver steers the flow: the server starts on the netdev's PF.
                    srv.pf = *netdev_pf;
                    let cli = self::client(topo, client, client_nic, Client::Bulk, beside)?;
                    migrate(srv, cli, choice.mode, *msg_bytes, socket, node, mv, m)
                }
                NetTest::TcpStream { server_receives } => {
                    let mut cli = self::client(topo, client, client_nic, Client::Bulk, beside)?;
                    if let Some(mode) = coalescing {
                        srv.coalescing.mode = *mode;
                        cli.coalescing.mode = *mode;
                    }
                    let net = Stream {
                        server: srv,
                        client: cli,
                        server_receives: *server_receives,
                    };
                    let part = Part {
                        cpu_node: *cpu_node,
                        connections: *connections,
                        socket,
                        node,
                        choice,
                        pf,
                    };
                    net.run(topo, server, &[part], *msg_bytes, m)
                        .map(|mut outs| outs.remove(0))
                }
                NetTest::TcpRr => {
                    let latency = Client::Latency {
                        away: *client_remote,
                    };
                    let cli = self::client(topo, client, client_nic, latency, beside)?;
                    let coalescing = coalescing.unwrap_or(CoalesceMode::Off);
                    let (mut out, srv, secs) = tcp_rr(srv, cli, *msg_bytes, coalescing, pf, m)?;
                    add_bound(&mut out, topo, kind, (&srv.mem, &srv.nic), secs);
                    Ok(out)
                }
            }?;
            if let Some(g) = stream_gbyte_s {
                out.metrics.insert("stream_gbyte_s".into(), json!(g));
            }
            Ok(out)
        }
        Kind::Memcached {
            ends,
            key_bytes,
            value_bytes,
            set_ratio,
            clients,
            keys,
            seed: own_seed,
            instances: _,
        } => {
            let (mut srv, _, pf) = net_server(topo, ends, beside)?;
            let mut cli = client(topo, &ends.client, &ends.client_nic, Client::Bulk, beside)?;
            let spec = MemcachedSpec {
                key_bytes: *key_bytes,
                value_bytes: *value_bytes,
                set_ratio: *set_ratio,
                clients: *clients,
                keys: *keys,
                mtu: MTU,
                warmup: m.warmup,
                window: m.duration,
                seed: own_seed.unwrap_or(seed),
            };
            let r = memcached::run(&mut srv, &mut cli, spec)?;
            let counters = checked_counters(&r, pf)?;
            let mut out = NetOutcome {
                metrics: metrics(&[
                    ("kops", r.kops),
                    ("mem_bw_gbit_s", r.mem_gbps),
                    ("throughput_gbit_s", r.value_gbps),
                ]),
                counters,
            };
            let secs = m.duration.as_secs_f64();
            add_bound(&mut out, topo, kind, (&srv.mem, &srv.nic), secs);
            Ok(out)
        }
        Kind::UdpPingPong {
            ends,
            msg_bytes,
            streams,
        } => {
            let (mut srv, socket, pf) = net_server(topo, ends, beside)?;
            let stream_gbyte_s = match streams {
                Some(a) => Some(load(topo, &mut srv, &ends.server, socket, 1, *a)?),
                None => None,
            };
            let cli = client(
                topo,
                &ends.client,
                &ends.client_nic,
                Client::Latency { away: false },
                beside,
            )?;
            let (mut out, srv, secs) = udp_pingpong(srv, cli, *msg_bytes, pf, m)?;
            add_bound(&mut out, topo, kind, (&srv.mem, &srv.nic), secs);
            if let Some(g) = stream_gbyte_s {
                out.metrics.insert("stream_gbyte_s".into(), json!(g));
            }
            Ok(out)
        }
        Kind::Pktgen { .. } => {
            let (mut h, spec, pf) = pktgen_parts(topo, kind, m, beside)?;
            let mut out = pktgen_outcome(&pktgen::run(&mut h, spec)?, pf);
            add_bound(
                &mut out,
                topo,
                kind,
                (&h.mem, &h.nic),
                m.duration.as_secs_f64(),
            );
            Ok(out)
        }
        other => Err(format!("`{}` is not a network workload", other.name())),
    }
}

/// A pktgen workload's host (its queue on the PF the NIC's steering gives its socket,
/// loaded with the run's streams), what it sends over `m`, and that PF.
pub(super) fn pktgen_parts(
    topo: &Topology,
    kind: &Kind,
    m: Measure,
    beside: &mut Beside,
) -> Result<(NetHost, pktgen::PktgenSpec, usize), String> {
    let Kind::Pktgen {
        host,
        nic,
        cpu_node,
        mem_node,
        pkt_bytes,
        nic_mode,
        netdev_pf,
        fragment_nodes,
        ioctosg,
    } = kind
    else {
        unreachable!("a pktgen workload")
    };
    let (socket, node) = placement(topo, host, *cpu_node, *mem_node)?;
    let choice = choice(*nic_mode, *netdev_pf);
    let (mut h, pf) = setup::server(topo, host, nic, choice, socket, node)?;
    beside.load(topo, host, &mut h.mem)?;
    let sockets = setup::pf_sockets(&h);
    let fragments = fragment_nodes
        .iter()
        .map(|&n| {
            let (_, page) =
                placement(topo, host, *cpu_node, n).map_err(|e| format!("fragment_nodes: {e}"))?;
            let pf = systems::ioctopus::fragment_pf(choice.mode, *ioctosg, pf, page, &sockets);
            Ok(pktgen::Fragment { node: page, pf })
        })
        .collect::<Result<Vec<_>, String>>()?;
    let spec = pktgen::PktgenSpec {
        pkt_bytes: *pkt_bytes,
        warmup: m.warmup,
        window: m.duration,
        fragments,
    };
    Ok((h, spec, pf))
}

/// A pktgen row: the catalog's metrics, and its counters.
pub(super) fn pktgen_outcome(r: &pktgen::PktgenResult, pf: usize) -> NetOutcome {
    NetOutcome {
        metrics: metrics(&[
            ("mpps", r.mpps),
            ("throughput_gbit_s", r.throughput_gbps),
            ("mem_bw_gbit_s", r.mem_gbps),
            ("cpu_util", r.cpu_util),
            ("interconnect_gbit_s", r.interconnect_gbps),
        ]),
        counters: json!({
            "pf": pf,
            "packets": r.packets,
            "cqe_misses_per_packet": r.cqe_misses_per_packet,
        }),
    }
}

/// Round trips of `round_trip_ns` that fit in `m`: warm-up (at least the rings' wrap,
/// `RR_WARMUP`) and window.
fn fit(round_trip_ns: f64, m: Measure) -> (u32, u32) {
    let n = |t: Time| (t.as_ns_f64() / round_trip_ns).round() as u32;
    (n(m.warmup).max(RR_WARMUP), n(m.duration).max(1))
}

/// sockperf's UDP ping-pong, coalescing off on both sides (docs/hardware.md §1: off for
/// latency tests), as many round trips as fit in `m` (a pilot gives the round trip). The
/// model has no variance source, so it reports the mean alone (its p99 would equal it).
/// Gives the server as the run left it and the seconds its counters cover (the whole run:
/// this model does not restart them at the window).
fn udp_pingpong(
    mut server: NetHost,
    mut client: NetHost,
    msg_bytes: u64,
    pf: usize,
    m: Measure,
) -> Result<(NetOutcome, NetHost, f64), String> {
    setup::coalescing_off(&mut server);
    setup::coalescing_off(&mut client);
    let spec = |warmup, round_trips| udp::UdpSpec {
        msg_bytes,
        mtu: MTU,
        warmup,
        round_trips,
    };
    let pilot = udp::ping_pong(&mut client.clone(), &mut server.clone(), spec(RR_WARMUP, 1))?;
    // sockperf's latency is half the round trip.
    let (warmup, round_trips) = fit(2.0 * pilot.latency_us * 1e3, m);
    let r = udp::ping_pong(&mut client, &mut server, spec(warmup, round_trips))?;
    let secs = f64::from(warmup + round_trips) * 2.0 * r.latency_us * 1e-6;
    Ok((udp_outcome(&r, pf, round_trips), server, secs))
}

/// A UDP ping-pong's row: sockperf's latency, and its counters.
pub(super) fn udp_outcome(r: &udp::UdpResult, pf: usize, round_trips: u32) -> NetOutcome {
    NetOutcome {
        metrics: metrics(&[("latency_us", r.latency_us)]),
        counters: json!({
            "pf": pf,
            "round_trips": round_trips,
            "cqe_misses_per_round_trip": r.cqe_misses,
        }),
    }
}

/// TCP_STREAM rx whose receiving process the scheduler moves from `socket` to the next
/// socket at `mv.at`, under the team driver of `mode` (`ioctopus::migration`): one
/// receive queue per core, its ring on its core's node.
#[allow(clippy::too_many_arguments)]
fn migrate(
    mut server: NetHost,
    mut client: NetHost,
    mode: SteeringMode,
    msg_bytes: u64,
    socket: u32,
    node: u32,
    mv: Migration,
    m: Measure,
) -> Result<NetOutcome, String> {
    let sockets = server.mem.params().sockets;
    if sockets < 2 {
        return Err("migrate_at_ms: the host has one socket, none to move to".into());
    }
    let to = (socket + 1) % sockets;
    let spec = MigrationSpec {
        stream: StreamSpec {
            msg_bytes,
            mtu: MTU,
            warmup: m.warmup,
            window: m.duration,
        },
        mv: Move {
            at: mv.at,
            to_socket: to,
            to_queue: RxQueue { index: 1, node: to },
        },
        from_queue: RxQueue { index: 0, node },
        sample: mv.sample,
    };
    let t = team::run_spec(&mut client, &mut server, mode, spec)?;
    let r = &t.result;
    let secs = mv.sample.as_secs_f64();
    let gbit_s = |bytes: &[u64]| -> Vec<f64> {
        bytes.iter().map(|&b| b as f64 * 8.0 / secs / 1e9).collect()
    };
    let mut out = Map::new();
    out.insert("throughput_gbit_s".into(), json!(r.stream.throughput_gbps));
    // Mean Gb/s over every PF's samples within a window of whole samples.
    let mean = |(from, to): (Time, Time)| {
        let (a, b) = (
            (from.as_ps() / mv.sample.as_ps()) as usize,
            (to.as_ps() / mv.sample.as_ps()) as usize,
        );
        let bytes: u64 = r
            .pf_rx_bytes
            .iter()
            .map(|v| v[a.min(v.len())..b.min(v.len())].iter().sum::<u64>())
            .sum();
        bytes as f64 * 8.0 / (to - from).as_secs_f64() / 1e9
    };
    if let Some(w) = mv.before {
        out.insert("before_gbit_s".into(), json!(mean(w)));
    }
    if let Some(w) = mv.after {
        out.insert("after_gbit_s".into(), json!(mean(w)));
    }
    for (pf, bytes) in r.pf_rx_bytes.iter().enumerate() {
        out.insert(format!("pf{pf}_gbit_s"), json!(gbit_s(bytes)));
    }
    let n = r.pf_rx_bytes.first().map_or(0, Vec::len);
    let t_ms: Vec<f64> = (0..n)
        .map(|i| mv.sample.as_us_f64() * i as f64 / 1e3)
        .collect();
    out.insert("t_ms".into(), json!(t_ms));
    out.insert("reordered".into(), json!(r.reordered));
    out.insert("lost".into(), json!(r.lost));
    Ok(NetOutcome {
        metrics: out,
        counters: json!({
            "to_socket": to,
            "rule_updates": t.driver.rule_updates,
            "arfs_callbacks": r.callbacks,
            "tx_per_pf": t.driver.tx_per_pf,
            "ring_peak": r.ring_peak,
            "bytes_delivered": r.stream.bytes_delivered,
            "events": r.stream.events,
        }),
    })
}

/// TCP_RR with `coalescing` on both sides (off unless the workload says otherwise:
/// docs/hardware.md §1 runs latency tests without it): a pilot run gives the steady-state
/// round trip, then the warm-up (at least the rings' wrap, `RR_WARMUP`) and the window
/// are as many transactions as fit in `m`. Gives the server as the run left it and the
/// seconds its counters cover (the whole run, as `udp_pingpong`'s).
fn tcp_rr(
    mut server: NetHost,
    mut client: NetHost,
    msg_bytes: u64,
    coalescing: CoalesceMode,
    pf: usize,
    m: Measure,
) -> Result<(NetOutcome, NetHost, f64), String> {
    server.coalescing.mode = coalescing;
    client.coalescing.mode = coalescing;
    let spec = |warmup, transactions| rr::RrSpec {
        msg_bytes,
        mtu: MTU,
        warmup,
        transactions,
    };
    let pilot = rr::run(&mut client.clone(), &mut server.clone(), spec(RR_WARMUP, 1))?;
    let (warmup, transactions) = fit(pilot.latency_us * 1e3, m);
    let r = rr::run(&mut client, &mut server, spec(warmup, transactions))?;
    let secs = f64::from(warmup + transactions) * r.latency_us * 1e-6;
    Ok((rr_outcome(&r, pf, transactions), server, secs))
}

/// A TCP_RR's row: the catalog's metrics, and its counters.
pub(super) fn rr_outcome(r: &rr::RrResult, pf: usize, transactions: u32) -> NetOutcome {
    NetOutcome {
        metrics: metrics(&[
            ("latency_us", r.latency_us),
            ("p99_us", r.p99_us),
            ("server_irqs_per_s", r.server_interrupts_per_s),
        ]),
        counters: json!({
            "pf": pf,
            "transactions": transactions,
            "transactions_per_s": r.transactions_per_s,
            "cqe_misses_per_transaction": r.cqe_misses,
            "frames_per_message": r.frames_per_message,
            "server_interrupts_per_s": r.server_interrupts_per_s,
        }),
    }
}

/// The ends of a TCP_RR between `server` and `client` as `run` sets them up: the server's
/// view with its queue on the PF the NIC's steering gives its socket, the client's (a
/// latency host: no LRO, on its NIC's socket or the other when `away`), both with
/// `coalescing` and loaded with the run's streams; and that PF.
pub(super) fn latency_ends(
    topo: &Topology,
    ends: &NetEnds,
    away: bool,
    coalescing: CoalesceMode,
    beside: &mut Beside,
) -> Result<(NetHost, NetHost, usize), String> {
    let (mut server, _, pf) = net_server(topo, ends, beside)?;
    let kind = Client::Latency { away };
    let mut client = self::client(topo, &ends.client, &ends.client_nic, kind, beside)?;
    server.coalescing.mode = coalescing;
    client.coalescing.mode = coalescing;
    Ok((server, client, pf))
}

/// Adds the bound of the packet-level workload `kind` (TCP_RR, UDP ping-pong, pktgen,
/// memcached; its outcome `o`) over `secs`: `server` is its server's memory system and
/// NIC as the run left them, their counters covering `secs`. A workload whose server
/// placement does not resolve (it ran, so it does) gets none.
pub(super) fn add_bound(
    o: &mut NetOutcome,
    topo: &Topology,
    kind: &Kind,
    server: (&MemSys, &Nic),
    secs: f64,
) {
    let num = |k: &str| o.metrics.get(k).and_then(|v| v.as_f64()).unwrap_or(0.0);
    let count = |k: &str| o.counters.get(k).and_then(|v| v.as_f64()).unwrap_or(0.0);
    let (host, nic, cpu_node, mem_node) = match kind {
        Kind::Netperf {
            server,
            nic,
            cpu_node,
            mem_node,
            ..
        } => (server, nic, *cpu_node, *mem_node),
        Kind::Memcached { ends, .. } | Kind::UdpPingPong { ends, .. } => {
            (&ends.server, &ends.nic, ends.cpu_node, ends.mem_node)
        }
        Kind::Pktgen {
            host,
            nic,
            cpu_node,
            mem_node,
            ..
        } => (host, nic, *cpu_node, *mem_node),
        _ => return,
    };
    let Ok((socket, node)) = placement(topo, host, cpu_node, mem_node) else {
        return;
    };
    let one = "1 request in flight".to_string();
    // What each kind moves, whether the server receives it, its cores' busy fraction
    // where the model counts it, and what it keeps under way.
    let (payload, port, receives, cpu_util, latency) = match kind {
        Kind::Netperf { msg_bytes, .. } => {
            // Requests in, responses out, one message each way per transaction.
            let g = *msg_bytes as f64 * count("transactions_per_s") / 1e9;
            (g, g, true, None, one)
        }
        Kind::UdpPingPong { msg_bytes, .. } => {
            // sockperf's latency is half the round trip.
            let per_s = 1e6 / (2.0 * num("latency_us")).max(f64::MIN_POSITIVE);
            let g = *msg_bytes as f64 * per_s / 1e9;
            (g, g, true, None, one)
        }
        Kind::Pktgen { .. } => {
            // Frames leave with their preamble and the gap after them.
            let g = num("throughput_gbit_s") / 8.0;
            let framing = num("mpps") * 1e6 * f64::from(PREAMBLE + IFG) / 1e9;
            let reads = server.1.params.max_reads;
            let latency = format!("{reads} NIC reads in flight");
            (g, g + framing, false, Some(num("cpu_util")), latency)
        }
        Kind::Memcached {
            clients, instances, ..
        } => {
            // Mostly GETs: values leave the server.
            let g = num("throughput_gbit_s") / 8.0;
            let util = o
                .counters
                .get("instance_cpu_util")
                .or_else(|| o.counters.get("server_cpu_util"))
                .and_then(|v| v.as_f64());
            let n = u64::from(*clients) * u64::from((*instances).max(1));
            (g, g, false, util, format!("{n} requests in flight"))
        }
        _ => return,
    };
    let p = bound::NetPath {
        host,
        nic,
        pf: count("pf") as usize,
        socket,
        node,
        receives,
        cpu_util,
        payload_gbyte_s: payload,
        port_gbyte_s: port,
    };
    bound::add_net(o, server, &p, secs, &latency);
}
