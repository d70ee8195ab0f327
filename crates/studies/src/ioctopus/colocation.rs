//! `ioctopus.colocation`: the PageRank victim (8 threads per socket) beside 6 memcached
//! instances per socket on the remaining cores, all on one server's memory system.

use std::collections::BTreeMap;

use host::net::memcached::{self, MemcachedSpec};
use host::net::stream::Lane;
use host::net::NetHost;
use host::victim::{self, PageRank, GAP_PAGERANK};
use serde_json::json;
use sim::Time;

use super::client;
use crate::harness::RunError;
use crate::probes::{Fields, ProbeCx};

/// I/O instances per socket (REFERENCE.md §1's 14 cores less the victim's 8).
const IO_PER_SOCKET: u32 = 6;
/// memslap connections per memcached instance, as in `ioctopus.memcached`.
const CLIENTS: u32 = 14;
const VALUE_BYTES: u64 = 256 * 1024;
/// memslap's default mix (assumption: memaslap's default get/set proportion 9:1; the
/// catalog names no mix for this experiment).
const SET_RATIO: f64 = 0.1;
/// Short steady-state windows: 12 instances and 16 victim threads are costly to
/// simulate. The warm-up turns the LLC over (≈ 20 MB/s·ms of item traffic per socket).
const WARMUP: Time = Time::from_us(15000);
const WINDOW: Time = Time::from_us(10000);

/// PageRank beside memcached instances on every other core, `placement` local/remote and
/// `mode` standard/octonic as in `tcp_multicore`.
pub fn colocation(cx: &mut ProbeCx) -> Result<Fields, RunError> {
    let io = cx.arg("io")?;
    if io != "memcached" {
        return Err(cx.error(format!(
            "io `{io}`: only `memcached` is modelled (netperf needs a co-located workload hook in `host::net::stream`)"
        )));
    }
    let nic = cx.arg("nic")?;
    let local = match cx.arg("placement")?.as_str() {
        "local" => true,
        "remote" => false,
        other => return Err(cx.error(format!("placement `{other}`: expected `local` or `remote`"))),
    };
    let mode = super::steering_mode(cx)?;
    let topo = &cx.tf.fabric.topo;
    let sname = cx.arg("server")?;
    let host = topo
        .host_by_name(&sname)
        .ok_or_else(|| cx.error(format!("no host `{sname}`")))?;
    let cores = topo.platform_of(host).cores_per_package;
    if cores < GAP_PAGERANK.threads_per_socket + IO_PER_SOCKET {
        return Err(cx.error(format!(
            "`{sname}` has {cores} cores per socket: fewer than the victim's {} and {IO_PER_SOCKET} I/O instances",
            GAP_PAGERANK.threads_per_socket
        )));
    }
    let mut server = NetHost::new(topo, host, &nic, 0, 0, 0).map_err(|e| cx.error(e))?;
    let sockets: Vec<u32> = server.nic.pfs.iter().map(|p| p.socket).collect();
    let netdev = |socket: u32| -> usize {
        let own = sockets.iter().position(|&s| s == socket).unwrap_or(0);
        if local || sockets.len() < 2 {
            own
        } else {
            (own + 1) % sockets.len()
        }
    };
    let n_sockets = server.mem.params().sockets;
    let mut lanes = Vec::new();
    for socket in 0..n_sockets {
        for _ in 0..IO_PER_SOCKET {
            let mut core = server.core.clone();
            core.socket = socket;
            lanes.push(Lane {
                core,
                pf: systems::ioctopus::tx_pf(mode, netdev(socket), socket, &sockets),
                node: socket,
            });
        }
    }
    let mut client = client(cx, &cx.arg("client")?, &nic)?;
    let spec = MemcachedSpec {
        key_bytes: 256,
        value_bytes: VALUE_BYTES,
        set_ratio: SET_RATIO,
        clients: CLIENTS,
        keys: memcached::MEMSLAP_KEYS,
        mtu: 1500,
        warmup: WARMUP,
        window: WINDOW,
        seed: 11,
    };
    let victim_spec = GAP_PAGERANK;
    let mut solo_mem = server.mem.clone();
    let mut v = PageRank::new(victim_spec, n_sockets).map_err(|e| cx.error(e))?;
    let solo = victim::solo(&mut solo_mem, &mut v, WARMUP, WINDOW);
    let mut v = PageRank::new(victim_spec, n_sockets).map_err(|e| cx.error(e))?;
    let r = memcached::run_with(&mut server, &mut client, spec, lanes, Some(&mut v))
        .map_err(|e| cx.error(e))?;
    let shared = v.edges_per_s(WINDOW);
    if shared <= 0.0 || r.values_corrupt + r.values_stale > 0 {
        return Err(cx.error(format!(
            "victim made no progress ({shared} edges/s) or {} GET replies were wrong",
            r.values_corrupt + r.values_stale
        )));
    }
    cx.set_counters(json!({
        "instances": IO_PER_SOCKET * n_sockets,
        "kops": r.kops,
        "server_mem_gbps": r.mem_gbps,
        "interconnect_gbps": r.interconnect_gbps,
        "io_cpu_util": r.server_util,
        "victim_edges_per_s": shared,
        "victim_solo_edges_per_s": solo,
        "events": r.events,
    }));
    Ok(BTreeMap::from([
        ("pagerank_slowdown".to_string(), json!(solo / shared)),
        ("io_throughput_gbps".to_string(), json!(r.value_gbps)),
    ]))
}
