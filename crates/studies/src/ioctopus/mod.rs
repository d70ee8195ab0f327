//! Probes of the IOctopus study (EXPERIMENTS.md `ioctopus.*`, REFERENCE.md §1) over the
//! packet-granular stack (`host::net`), the NIC (`devices::nic`) and the octoNIC driver
//! side (`systems::ioctopus`). A config picks hardware and placement only: the NIC's
//! steering mode (`standard` or `octonic`) and, for a standard NIC, the PF whose netdev
//! the workload uses; the workload runs on one core of socket 0 with its memory on node 0.

use std::collections::BTreeMap;

use devices::nic::{FiveTuple, Steering, SteeringMode};
use host::net::{pktgen, stream, NetHost};
use serde_json::json;
use sim::Time;

use crate::harness::RunError;
use crate::probes::{Fields, ProbeCx};

/// Socket (and memory node) of the measured workload.
const WORKLOAD_SOCKET: u32 = 0;
/// The netperf data connection (client → server port 12865's data port).
const FLOW: FiveTuple = FiveTuple {
    src_ip: 0x0a00_0002,
    dst_ip: 0x0a00_0001,
    src_port: 40000,
    dst_port: 50000,
    proto: 6,
};

/// Steady-state windows (the model is deterministic; these were checked to give the
/// same metrics to within 1 % as windows twice as long).
const STREAM_WARMUP: Time = Time::from_us(3000);
const STREAM_WINDOW: Time = Time::from_us(10000);
const PKTGEN_WARMUP: Time = Time::from_us(3000);
const PKTGEN_WINDOW: Time = Time::from_us(5000);

/// The server side of a config: which PF its workload's queue is on.
fn server_pf(cx: &ProbeCx, server: &str, nic: &str) -> Result<(NetHost, usize), RunError> {
    let octonic = cx.choice("mode", "octonic", "standard")?;
    let netdev_pf: usize = cx
        .arg("netdev_pf")?
        .parse()
        .map_err(|_| cx.error("netdev_pf must be a PF index (0, 1, …)"))?;
    let topo = &cx.tf.fabric.topo;
    let host = topo
        .host_by_name(server)
        .ok_or_else(|| cx.error(format!("no host `{server}`")))?;
    let probe = NetHost::new(topo, host, nic, 0, WORKLOAD_SOCKET, WORKLOAD_SOCKET)
        .map_err(|e| cx.error(e))?;
    let sockets: Vec<u32> = probe.nic.pfs.iter().map(|p| p.socket).collect();
    if netdev_pf >= sockets.len() {
        return Err(cx.error(format!(
            "netdev_pf {netdev_pf}: `{server}.{nic}` has {} PF(s)",
            sockets.len()
        )));
    }
    let mode = if octonic {
        SteeringMode::OctoNic
    } else {
        SteeringMode::Standard
    };
    // Receive: the driver's steering rules for the flow; transmit: the team driver's
    // choice. Both name the same PF for a thread that stays on its core.
    let mut steering = Steering::new(mode, sockets.len() as u8, 1);
    let rx_pf =
        systems::ioctopus::steer_flow(&mut steering, FLOW, WORKLOAD_SOCKET, 0, netdev_pf, &sockets);
    let (pf, _) = steering.steer(&FLOW, netdev_pf as u8);
    debug_assert_eq!(pf as usize, rx_pf);
    let tx_pf = systems::ioctopus::tx_pf(mode, netdev_pf, WORKLOAD_SOCKET, &sockets);
    debug_assert_eq!(tx_pf, rx_pf);
    let h = NetHost::new(topo, host, nic, rx_pf, WORKLOAD_SOCKET, WORKLOAD_SOCKET)
        .map_err(|e| cx.error(e))?;
    Ok((h, rx_pf))
}

/// The client: its NIC's first PF, a core and memory on its socket 0, hardware LRO on
/// (REFERENCE.md §1's client is a stock R730 with a ConnectX-4, whose receive is not what
/// the single-core server experiments measure).
fn client(cx: &ProbeCx, client: &str, nic: &str) -> Result<NetHost, RunError> {
    let topo = &cx.tf.fabric.topo;
    let host = topo
        .host_by_name(client)
        .ok_or_else(|| cx.error(format!("no host `{client}`")))?;
    let mut h = NetHost::new(topo, host, nic, 0, 0, 0).map_err(|e| cx.error(e))?;
    h.lro = true;
    Ok(h)
}

/// netperf TCP_STREAM, `direction` rx (the server receives) or tx, `msg_bytes` swept.
pub fn tcp_stream(cx: &mut ProbeCx) -> Result<Fields, RunError> {
    let msg = cx.need_swept("msg_bytes")?;
    let rx = cx.choice("direction", "rx", "tx")?;
    let nic = cx.arg("nic")?;
    let (mut server, pf) = server_pf(cx, &cx.arg("server")?, &nic)?;
    let mut client = client(cx, &cx.arg("client")?, &nic)?;
    let spec = stream::StreamSpec {
        msg_bytes: msg,
        mtu: 1500,
        warmup: STREAM_WARMUP,
        window: STREAM_WINDOW,
    };
    let r = if rx {
        stream::run(&mut client, &mut server, spec)
    } else {
        stream::run(&mut server, &mut client, spec)
    }
    .map_err(|e| cx.error(e))?;
    let (util, mem) = if rx {
        (r.receiver_util, r.receiver_mem_gbps)
    } else {
        (r.sender_util, r.sender_mem_gbps)
    };
    cx.set_counters(json!({
        "pf": pf,
        "tso_sends": r.tso_sends,
        "frames": r.frames,
        "out_of_order": r.out_of_order,
        "bytes_delivered": r.bytes_delivered,
        "events": r.events,
        "client_cpu_util": if rx { r.sender_util } else { r.receiver_util },
    }));
    Ok(BTreeMap::from([
        ("throughput_gbps".to_string(), json!(r.throughput_gbps)),
        ("mem_bw_gbps".to_string(), json!(mem)),
        ("cpu_util".to_string(), json!(util)),
    ]))
}

/// pktgen on one server core, `pkt_bytes` swept.
pub fn pktgen(cx: &mut ProbeCx) -> Result<Fields, RunError> {
    let pkt = cx.need_swept("pkt_bytes")?;
    let nic = cx.arg("nic")?;
    let (mut server, pf) = server_pf(cx, &cx.arg("server")?, &nic)?;
    let r = pktgen::run(
        &mut server,
        pktgen::PktgenSpec {
            pkt_bytes: pkt,
            warmup: PKTGEN_WARMUP,
            window: PKTGEN_WINDOW,
        },
    )
    .map_err(|e| cx.error(e))?;
    cx.set_counters(json!({
        "pf": pf,
        "packets": r.packets,
        "cqe_misses_per_packet": r.cqe_misses_per_packet,
        "cpu_util": r.cpu_util,
    }));
    Ok(BTreeMap::from([
        ("mpps".to_string(), json!(r.mpps)),
        ("throughput_gbps".to_string(), json!(r.throughput_gbps)),
        ("mem_bw_gbps".to_string(), json!(r.mem_gbps)),
    ]))
}
