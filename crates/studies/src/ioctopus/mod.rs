//! Probes of the IOctopus study (EXPERIMENTS.md `ioctopus.*`, REFERENCE.md §1) over the
//! packet-granular stack (`host::net`), the NIC (`devices::nic`) and the octoNIC driver
//! side (`systems::ioctopus`). A config picks hardware and placement only: the NIC's
//! steering mode (`standard` or `octonic`) and, for a standard NIC, the PF whose netdev
//! the workload uses; the workload runs on one core of socket 0 with its memory on node 0.

mod colocation;
pub mod ioctosg;
pub mod migration;
pub mod setup;

pub use colocation::colocation;

use std::collections::BTreeMap;

use devices::nic::SteeringMode;
use host::net::{multicore, stream, NetHost};
use serde_json::json;
use sim::Time;

use crate::harness::RunError;
use crate::probe::{Fields, ProbeCx};
use setup::MTU;

/// Multi-core: every core's connection must have cycled its 1,024-slot receive ring
/// several times (≈ 0.7 ms per ring at 100 Gb/s over 28 cores) before the window, so the
/// DDIO share holds its steady-state mix; metrics change < 1 % with a window twice as long.
const MULTICORE_WARMUP: Time = Time::from_us(2000);
const MULTICORE_WINDOW: Time = Time::from_us(2000);

/// The NIC's steering mode a config names: `standard`, `octonic` or `linux_multipf`.
fn steering_mode(cx: &ProbeCx) -> Result<SteeringMode, RunError> {
    match cx.arg("mode")?.as_str() {
        "standard" => Ok(SteeringMode::Standard),
        "octonic" => Ok(SteeringMode::OctoNic),
        "linux_multipf" => Ok(SteeringMode::LinuxMultiPf),
        other => Err(cx.error(format!(
            "mode = `{other}`: use \"standard\", \"octonic\" or \"linux_multipf\""
        ))),
    }
}

/// The bulk-transfer client of a config (`setup::stream_client`).
fn client(cx: &ProbeCx, name: &str, nic: &str) -> Result<NetHost, RunError> {
    setup::stream_client(&cx.tf.fabric.topo, name, nic).map_err(|e| cx.error(e))
}

/// One netperf TCP_STREAM per server core on every core of every socket, `direction`
/// rx or tx, 64 KiB messages. Each core's queue is on the PF the config names for that
/// core's socket: `local` the PF of its own socket, `remote` the other socket's, the
/// octoNIC the steering's choice (the local one).
pub fn tcp_multicore(cx: &mut ProbeCx) -> Result<Fields, RunError> {
    let rx = cx.choice("direction", "rx", "tx")?;
    let nic = cx.arg("nic")?;
    let placement = cx.arg("placement")?;
    let mode = steering_mode(cx)?;
    let topo = &cx.tf.fabric.topo;
    let sname = cx.arg("server")?;
    let host = topo
        .host_by_name(&sname)
        .ok_or_else(|| cx.error(format!("no host `{sname}`")))?;
    let cores = topo.platform_of(host).cores_per_package;
    let mut server = NetHost::new(topo, host, &nic, 0, 0, 0).map_err(|e| cx.error(e))?;
    let sockets: Vec<u32> = server.nic.pfs.iter().map(|p| p.socket).collect();
    let local = match placement.as_str() {
        "local" => true,
        "remote" => false,
        other => return Err(cx.error(format!("placement `{other}`: expected `local` or `remote`"))),
    };
    // The standard NIC's netdev a core uses: its socket's PF (local) or the other's.
    let netdev = |socket: u32| -> usize {
        let own = sockets.iter().position(|&s| s == socket).unwrap_or(0);
        if local || sockets.len() < 2 {
            own
        } else {
            (own + 1) % sockets.len()
        }
    };
    let pf_of = |socket: u32| systems::ioctopus::tx_pf(mode, netdev(socket), socket, &sockets);
    let mut client =
        setup::stream_client(topo, &cx.arg("client")?, &nic).map_err(|e| cx.error(e))?;
    let spec = stream::StreamSpec {
        msg_bytes: 65536,
        mtu: MTU,
        warmup: MULTICORE_WARMUP,
        window: MULTICORE_WINDOW,
    };
    let r = multicore::run(&mut server, &mut client, rx, cores, pf_of, spec)
        .map_err(|e| cx.error(e))?;
    let mem = if rx {
        r.receiver_mem_gbps
    } else {
        r.sender_mem_gbps
    };
    cx.set_counters(json!({
        "connections": cores * sockets.len() as u32,
        "frames": r.frames,
        "out_of_order": r.out_of_order,
        "events": r.events,
        "server_cpu_util": if rx { r.receiver_util } else { r.sender_util },
    }));
    Ok(BTreeMap::from([
        ("throughput_gbps".to_string(), json!(r.throughput_gbps)),
        ("mem_bw_gbps".to_string(), json!(mem)),
    ]))
}
