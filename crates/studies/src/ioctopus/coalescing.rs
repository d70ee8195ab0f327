//! `ioctopus.coalescing` (an extension, not in EXPERIMENTS.md): the driver's interrupt
//! moderation (issue 11: MSI-X with adaptive coalescing, and off) on the IOctopus R730
//! pair, both hosts set alike: off (an interrupt per completion), static (the NIC model's
//! rx-usecs / rx-frames) or adaptive (the kernel's DIM, `devices::nic::coalesce`). A lone
//! request-response pays the moderation timer on each receive; a bulk receive pays an
//! interrupt per completion without it.

use std::collections::BTreeMap;

use devices::nic::{CoalesceMode, SteeringMode};
use host::net::{rr, stream, NetHost};
use serde_json::json;

use super::setup::{self, NicChoice, MTU, RR_WARMUP};
use super::{RR_TRANSACTIONS, STREAM_WARMUP, STREAM_WINDOW, WORKLOAD_SOCKET};
use crate::harness::RunError;
use crate::probe::{Fields, ProbeCx};

/// The netdev of PF 0, local to the workload's socket (tcp_rr's `ll`).
const LOCAL: NicChoice = NicChoice {
    mode: SteeringMode::Standard,
    netdev_pf: 0,
};

/// TCP_RR at 64 B and 16 KiB and a 64 KiB TCP receive on one server core, each with
/// both hosts' moderation `coalescing`.
pub fn coalescing(cx: &mut ProbeCx) -> Result<Fields, RunError> {
    let mode = CoalesceMode::parse(&cx.arg("coalescing")?).map_err(|e| cx.error(e))?;
    let nic = cx.arg("nic")?;
    let (sname, cname) = (cx.arg("server")?, cx.arg("client")?);
    let topo = &cx.tf.fabric.topo;
    let server = || {
        setup::server(topo, &sname, &nic, LOCAL, WORKLOAD_SOCKET, WORKLOAD_SOCKET).map(
            |(mut h, _)| {
                h.coalescing.mode = mode;
                h
            },
        )
    };
    let rr_at = |msg_bytes: u64| -> Result<rr::RrResult, String> {
        let socket = setup::nic_socket(topo, &cname, &nic, false)?;
        let mut client = setup::host(topo, &cname, &nic, 0, socket, socket)?;
        client.coalescing.mode = mode;
        let spec = rr::RrSpec {
            msg_bytes,
            mtu: MTU,
            warmup: RR_WARMUP,
            transactions: RR_TRANSACTIONS,
        };
        rr::run(&mut client, &mut server()?, spec)
    };
    let small = rr_at(64).map_err(|e| cx.error(e))?;
    let large = rr_at(16384).map_err(|e| cx.error(e))?;
    let bulk = (|| -> Result<stream::StreamResult, String> {
        let mut client: NetHost = setup::stream_client(topo, &cname, &nic)?;
        client.coalescing.mode = mode;
        let spec = stream::StreamSpec {
            msg_bytes: 65536,
            mtu: MTU,
            warmup: STREAM_WARMUP,
            window: STREAM_WINDOW,
        };
        stream::run(&mut client, &mut server()?, spec)
    })()
    .map_err(|e| cx.error(e))?;
    let window = STREAM_WINDOW.as_secs_f64();
    cx.set_counters(json!({
        "rr_64_transactions_per_s": small.transactions_per_s,
        "rr_16k_server_interrupts_per_s": large.server_interrupts_per_s,
        "rx_frames": bulk.frames,
        "rx_interrupts": bulk.receiver_interrupts,
        "rx_client_cpu_util": bulk.sender_util,
    }));
    Ok(BTreeMap::from([
        ("rr_64_latency_us".to_string(), json!(small.latency_us)),
        ("rr_16k_latency_us".to_string(), json!(large.latency_us)),
        (
            "rr_64_irqs_per_s".to_string(),
            json!(small.server_interrupts_per_s),
        ),
        ("rx_gbps".to_string(), json!(bulk.throughput_gbps)),
        ("rx_cpu_util".to_string(), json!(bulk.receiver_util)),
        (
            "rx_irqs_per_s".to_string(),
            json!(bulk.receiver_interrupts as f64 / window),
        ),
    ]))
}
