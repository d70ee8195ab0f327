//! `ioctopus.ioctosg` (an extension, not in EXPERIMENTS.md): IOctoSG, which the IOctopus
//! paper proposed and did not build. pktgen on one core of socket 0 sends packets of two
//! equal fragments, the first on node 0 and the second on the node `pages` names (a
//! header in the socket's own memory and a page-cache page elsewhere, as sendfile sends);
//! each fragment is written by a core of its own node, so it sits in that socket's LLC.
//! The queue is the octoNIC's local PF; with the hint each fragment is read through the
//! PF local to its page (`systems::ioctopus::fragment_pf`).

use std::collections::BTreeMap;

use devices::nic::SteeringMode;
use host::net::pktgen::{self, Fragment, PktgenSpec};
use host::net::NetHost;
use serde_json::json;
use sim::Time;

use crate::harness::RunError;
use crate::probe::{Fields, ProbeCx};

/// The sending core's socket and the node of the packet's first fragment.
const CORE_SOCKET: u32 = 0;
/// The ring fills at the rate difference when a link binds (≈ 0.3 Mpps at 1500 B):
/// ≈ 3.4 ms for 1,024 entries; metrics change < 1 % with a window twice as long.
const WARMUP: Time = Time::from_us(5000);
const WINDOW: Time = Time::from_us(5000);

pub fn pktgen_fragments(cx: &mut ProbeCx) -> Result<Fields, RunError> {
    let pkt = cx.need_swept("pkt_bytes")?;
    let nic = cx.arg("nic")?;
    let hint = cx.choice("ioctosg", "on", "off")?;
    let span = cx.choice("pages", "span", "local")?;
    let server = cx.arg("server")?;
    let topo = &cx.tf.fabric.topo;
    let host = topo
        .host_by_name(&server)
        .ok_or_else(|| cx.error(format!("no host `{server}`")))?;
    let probe =
        NetHost::new(topo, host, &nic, 0, CORE_SOCKET, CORE_SOCKET).map_err(|e| cx.error(e))?;
    let sockets: Vec<u32> = probe.nic.pfs.iter().map(|p| p.socket).collect();
    if sockets.len() < 2 || probe.mem.params().sockets < 2 {
        return Err(cx.error(format!(
            "`{server}.{nic}` needs two PFs on a two-socket host to span nodes"
        )));
    }
    let mode = SteeringMode::OctoNic;
    let queue_pf = systems::ioctopus::tx_pf(mode, 0, CORE_SOCKET, &sockets);
    let far = if span {
        (CORE_SOCKET + 1) % 2
    } else {
        CORE_SOCKET
    };
    let fragments = [CORE_SOCKET, far]
        .into_iter()
        .map(|node| Fragment {
            node,
            pf: systems::ioctopus::fragment_pf(mode, hint, queue_pf, node, &sockets),
        })
        .collect::<Vec<_>>();
    let pfs: Vec<usize> = fragments.iter().map(|f| f.pf).collect();
    let mut h = NetHost::new(topo, host, &nic, queue_pf, CORE_SOCKET, CORE_SOCKET)
        .map_err(|e| cx.error(e))?;
    let r = pktgen::run(
        &mut h,
        PktgenSpec {
            pkt_bytes: pkt,
            warmup: WARMUP,
            window: WINDOW,
            fragments,
        },
    )
    .map_err(|e| cx.error(e))?;
    cx.set_counters(json!({
        "queue_pf": queue_pf,
        "fragment_pfs": pfs,
        "packets": r.packets,
        "cpu_util": r.cpu_util,
    }));
    Ok(BTreeMap::from([
        ("mpps".to_string(), json!(r.mpps)),
        ("mem_bw_gbps".to_string(), json!(r.mem_gbps)),
        ("interconnect_gbps".to_string(), json!(r.interconnect_gbps)),
    ]))
}
