//! `ioctopus.colocation`: the PageRank victim (8 threads per socket) beside 6 I/O
//! instances per socket on the remaining cores — memcached servers or netperf TCP
//! receivers — all on one server's memory system.
//!
//! Windows: the I/O model warms up alone, the victim joins `VICTIM_WARMUP` before the
//! window (its LLC share turns over in ≈ 1 ms), and both are measured over the same
//! window. The victim's solo rate depends only on the server's memory system, so it is
//! simulated once per memory system and victim (`solo_rate`), not once per point.

use std::collections::BTreeMap;
use std::sync::Mutex;

use host::net::memcached::{self, MemcachedSpec};
use host::net::multicore;
use host::net::stream::{Lane, StreamSpec};
use host::net::NetHost;
use host::victim::{self, PageRank, PageRankSpec, GAP_PAGERANK};
use serde_json::{json, Value};
use sim::memsys::MemSys;
use sim::Time;

use super::{client, setup};
use crate::harness::RunError;
use crate::probe::{Fields, ProbeCx};

/// I/O instances per socket (REFERENCE.md §1's 14 cores less the victim's 8).
const IO_PER_SOCKET: u32 = 6;
/// memslap connections per memcached instance, as in `ioctopus.memcached`.
const CLIENTS: u32 = 14;
const VALUE_BYTES: u64 = 256 * 1024;
/// memslap's default mix (assumption: memaslap's default get/set proportion 9:1; the
/// catalog names no mix for this experiment).
const SET_RATIO: f64 = 0.1;
/// netperf's message size, as in `ioctopus.tcp_multicore`.
const NETPERF_MSG: u64 = 65536;
/// memcached: the I/O warms up until its 168 requests in flight (≈ 42 MiB, ≈ 3.5 ms of
/// the port) have turned over several times and the items' lines have cycled through the
/// LLC; the window holds ≈ 3,000 replies at line rate.
const MEMCACHED_WARMUP: Time = Time::from_us(6000);
const MEMCACHED_WINDOW: Time = Time::from_us(4000);
/// netperf: as `ioctopus.tcp_multicore` (every ring wraps before the window), with a
/// longer window for the victim's count.
const NETPERF_WARMUP: Time = Time::from_us(2000);
const NETPERF_WINDOW: Time = Time::from_us(2000);
/// The victim joins this long before the window: its 16 threads read ≈ 1 G random lines
/// per second, turning over both LLCs (2 × 35 MB) in well under 1 ms.
const VICTIM_WARMUP: Time = Time::from_us(1000);

/// Which I/O runs beside the victim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Io {
    Memcached,
    Netperf,
}

/// What one co-located run measured.
struct IoRun {
    /// Application bytes moved over the window, Gb/s (both directions for memcached).
    gbps: f64,
    /// The same split by direction on the server's port: sent, received.
    tx_gbps: f64,
    rx_gbps: f64,
    counters: Value,
}

/// PageRank beside I/O instances on every other core, `io` memcached or netperf,
/// `placement` local/remote and `mode` standard/octonic as in `tcp_multicore`.
pub fn colocation(cx: &mut ProbeCx) -> Result<Fields, RunError> {
    let io = match cx.arg("io")?.as_str() {
        "memcached" => Io::Memcached,
        "netperf" => Io::Netperf,
        other => return Err(cx.error(format!("io `{other}`: expected `memcached` or `netperf`"))),
    };
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
    let sockets = setup::pf_sockets(&server);
    // The standard NIC's netdev an instance uses: its socket's PF (local) or the other's.
    let netdev = |socket: u32| -> usize {
        let own = sockets.iter().position(|&s| s == socket).unwrap_or(0);
        if local || sockets.len() < 2 {
            own
        } else {
            (own + 1) % sockets.len()
        }
    };
    let pf_of = |socket: u32| systems::ioctopus::tx_pf(mode, netdev(socket), socket, &sockets);
    let mut client = client(cx, &cx.arg("client")?, &nic)?;
    let n_sockets = server.mem.params().sockets;
    let (warmup, window) = match io {
        Io::Memcached => (MEMCACHED_WARMUP, MEMCACHED_WINDOW),
        Io::Netperf => (NETPERF_WARMUP, NETPERF_WINDOW),
    };
    let solo = solo_rate(&server.mem, GAP_PAGERANK, window).map_err(|e| cx.error(e))?;
    let mut v = PageRank::new(GAP_PAGERANK, n_sockets).map_err(|e| cx.error(e))?;
    v.start_at(warmup.saturating_sub(VICTIM_WARMUP));
    let run = match io {
        Io::Memcached => {
            let mut lanes = Vec::new();
            for socket in 0..n_sockets {
                for _ in 0..IO_PER_SOCKET {
                    let mut core = server.core.clone();
                    core.socket = socket;
                    lanes.push(Lane {
                        core,
                        pf: pf_of(socket),
                        node: socket,
                    });
                }
            }
            let spec = MemcachedSpec {
                key_bytes: 256,
                value_bytes: VALUE_BYTES,
                set_ratio: SET_RATIO,
                clients: CLIENTS,
                keys: memcached::MEMSLAP_KEYS,
                mtu: setup::MTU,
                warmup,
                window,
                seed: 11,
            };
            let r = memcached::run_with(&mut server, &mut client, spec, lanes, Some(&mut v))
                .map_err(|e| cx.error(e))?;
            if r.values_corrupt + r.values_stale > 0 {
                return Err(cx.error(format!(
                    "{} of {} GET replies were not the bytes a SET stored ({} stale)",
                    r.values_corrupt + r.values_stale,
                    r.values_checked,
                    r.values_stale
                )));
            }
            let per = |n: u64| (n * VALUE_BYTES) as f64 * 8.0 / window.as_secs_f64() / 1e9;
            IoRun {
                gbps: r.value_gbps,
                tx_gbps: per(r.gets),
                rx_gbps: per(r.sets),
                counters: json!({
                    "kops": r.kops,
                    "server_mem_gbps": r.mem_gbps,
                    "interconnect_gbps": r.interconnect_gbps,
                    "io_cpu_util": r.server_util,
                    "values_checked": r.values_checked,
                    "events": r.events,
                }),
            }
        }
        Io::Netperf => {
            let spec = StreamSpec {
                msg_bytes: NETPERF_MSG,
                mtu: setup::MTU,
                warmup,
                window,
            };
            let r = multicore::run_with(
                &mut server,
                &mut client,
                true,
                IO_PER_SOCKET,
                pf_of,
                spec,
                Some(&mut v),
            )
            .map_err(|e| cx.error(e))?;
            if r.out_of_order > 0 {
                return Err(cx.error(format!(
                    "{} segments arrived out of order or twice",
                    r.out_of_order
                )));
            }
            IoRun {
                gbps: r.throughput_gbps,
                tx_gbps: 0.0,
                rx_gbps: r.throughput_gbps,
                counters: json!({
                    "server_mem_gbps": r.receiver_mem_gbps,
                    "io_cpu_util": r.receiver_util,
                    "bytes_delivered": r.bytes_delivered,
                    "events": r.events,
                }),
            }
        }
    };
    // Each direction of the port carries at most its line rate (a reply straddling the
    // window's start adds < 1 %): more is a model fault, not a result.
    let line = server.nic.params.line_gbps * 8.0;
    if run.tx_gbps.max(run.rx_gbps) > line * 1.01 {
        return Err(cx.error(format!(
            "the I/O moved {:.1} Gb/s out and {:.1} Gb/s in on a {line} Gb/s port",
            run.tx_gbps, run.rx_gbps
        )));
    }
    let shared = v.edges_per_s(window);
    if shared <= 0.0 {
        return Err(cx.error(format!(
            "the victim made no progress beside the I/O ({shared} edges/s)"
        )));
    }
    let mut counters = run.counters;
    let extra = json!({
        "instances": IO_PER_SOCKET * n_sockets,
        "io_tx_gbps": run.tx_gbps,
        "io_rx_gbps": run.rx_gbps,
        "line_gbps": line,
        "victim_edges_per_s": shared,
        "victim_solo_edges_per_s": solo,
    });
    if let (Some(c), Some(e)) = (counters.as_object_mut(), extra.as_object()) {
        c.extend(e.clone());
    }
    cx.set_counters(counters);
    Ok(BTreeMap::from([
        ("pagerank_slowdown".to_string(), json!(solo / shared)),
        ("io_throughput_gbps".to_string(), json!(run.gbps)),
    ]))
}

/// The victim alone on a copy of `mem`: its edge rate over `window` after
/// `VICTIM_WARMUP`. Memoised per memory system, victim and window (the configs of one
/// experiment share them; deterministic, so a memo changes no result).
fn solo_rate(mem: &MemSys, spec: PageRankSpec, window: Time) -> Result<f64, String> {
    static SOLO: Mutex<BTreeMap<String, f64>> = Mutex::new(BTreeMap::new());
    let key = format!("{:?} {spec:?} {window:?}", mem.params());
    if let Some(&r) = SOLO.lock().map_err(|e| e.to_string())?.get(&key) {
        return Ok(r);
    }
    let mut m = mem.clone();
    let mut v = PageRank::new(spec, mem.params().sockets)?;
    let r = victim::solo(&mut m, &mut v, VICTIM_WARMUP, window);
    SOLO.lock().map_err(|e| e.to_string())?.insert(key, r);
    Ok(r)
}
