//! The probe of `ioctopus.qpi_congestion`: single-core TCP receive and a UDP ping-pong on
//! the server while pairs of STREAM cores (one reading, one writing) load the memory of
//! the other node from the workload's socket. The streams are steady background agents
//! of the server's memory system (`sim::memsys::arbitration`): they take their share of
//! the other node's DRAM and of both interconnect directions, and the workload's own
//! accesses crossing those servers get what a round-robin arbiter leaves them.

use std::collections::BTreeMap;

use host::net::{stream, udp, NetHost};
use serde_json::json;

use super::setup::stream_client;
use super::{server_pf, STREAM_WARMUP, STREAM_WINDOW, WORKLOAD_SOCKET};
use crate::harness::RunError;
use crate::probe::{Fields, ProbeCx};

/// Ping-pong round trips before and in the window (the rings wrap twice first; the
/// model is deterministic, so every steady-state round trip takes the same time).
const UDP_WARMUP: u32 = 2100;
const UDP_ROUND_TRIPS: u32 = 1000;

fn number<T: std::str::FromStr>(cx: &ProbeCx, key: &str) -> Result<T, RunError> {
    let v = cx.arg(key)?;
    v.parse()
        .map_err(|_| cx.error(format!("{key} = `{v}` is not a whole number")))
}

/// The server of a config with `pairs` STREAM pairs on its workload's socket against
/// `mem_node`; the other cores of the socket must hold them.
fn loaded_server(cx: &ProbeCx, pairs: u32, mem_node: u32) -> Result<(NetHost, usize), RunError> {
    let (mut h, pf) = server_pf(cx, &cx.arg("server")?, &cx.arg("nic")?)?;
    let topo = &cx.tf.fabric.topo;
    let host = topo
        .host_by_name(&cx.arg("server")?)
        .expect("server_pf found it");
    let cores = topo.platform_of(host).cores_per_package;
    if 1 + 2 * pairs > cores {
        return Err(cx.error(format!(
            "stream_pairs = {pairs}: {} STREAM cores and the workload's need more than the socket's {cores} cores",
            2 * pairs
        )));
    }
    for write in [false, true] {
        h.mem
            .add_streams(WORKLOAD_SOCKET, mem_node, write, pairs)
            .map_err(|e| cx.error(e))?;
    }
    Ok((h, pf))
}

/// `qpi_congestion`: args `server`, `client`, `nic`, `mode`, `netdev_pf` (as
/// `tcp_stream`), `msg_bytes` (TCP), `udp_bytes`, `stream_mem_node`; swept
/// `stream_pairs`. The STREAM cores run on the workload's socket.
pub fn qpi_congestion(cx: &mut ProbeCx) -> Result<Fields, RunError> {
    let pairs = cx.need_swept("stream_pairs")? as u32;
    let msg: u64 = number(cx, "msg_bytes")?;
    let udp_bytes: u64 = number(cx, "udp_bytes")?;
    let mem_node: u32 = number(cx, "stream_mem_node")?;
    let nic = cx.arg("nic")?;

    // TCP receive, as ioctopus.tcp_rx_1core.
    let (mut server, pf) = loaded_server(cx, pairs, mem_node)?;
    let mut cl =
        stream_client(&cx.tf.fabric.topo, &cx.arg("client")?, &nic).map_err(|e| cx.error(e))?;
    let spec = stream::StreamSpec {
        msg_bytes: msg,
        mtu: 1500,
        warmup: STREAM_WARMUP,
        window: STREAM_WINDOW,
    };
    let rx = stream::run(&mut cl, &mut server, spec).map_err(|e| cx.error(e))?;
    let rates = server.mem.stream_rates().clone();
    let stream_gbps = rates.stream_gbps(server.mem.streams());

    // The UDP ping-pong on fresh hosts with the same streams; coalescing off
    // (REFERENCE.md §1: off for latency tests).
    let (mut server, _) = loaded_server(cx, pairs, mem_node)?;
    let mut cl =
        stream_client(&cx.tf.fabric.topo, &cx.arg("client")?, &nic).map_err(|e| cx.error(e))?;
    for h in [&mut server, &mut cl] {
        h.nic.params.coalesce = sim::Time::ZERO;
        h.nic.params.coalesce_frames = 1;
    }
    let pp = udp::ping_pong(
        &mut cl,
        &mut server,
        udp::UdpSpec {
            msg_bytes: udp_bytes,
            mtu: 1500,
            warmup: UDP_WARMUP,
            round_trips: UDP_ROUND_TRIPS,
        },
    )
    .map_err(|e| cx.error(e))?;

    cx.set_counters(json!({
        "pf": pf,
        "stream_gbps": stream_gbps,
        "server_share_gbps": rates.share_gbps,
        "server_stream_load_gbps": rates.load_gbps,
        "udp_cqe_misses_per_round_trip": pp.cqe_misses,
        "rx_cpu_util": rx.receiver_util,
    }));
    Ok(BTreeMap::from([
        ("rx_gbps".to_string(), json!(rx.throughput_gbps)),
        ("udp_latency_us".to_string(), json!(pp.latency_us)),
        ("stream_gbps".to_string(), json!(stream_gbps)),
    ]))
}
