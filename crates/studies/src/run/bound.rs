//! What bounds each workload of `nudma run`: the busiest resource on its own path over the
//! window — the links and memory its DMA or misses cross, its device's data path, the
//! interconnect and DRAM its packets' lines cross in the host's memory system, its NIC's
//! or RNIC's link, port and units, its cores — when it is near full (`NEAR_FULL`);
//! otherwise the workload waits on latency with what it keeps under way.
//!
//! TLP-level workloads (`dma`, `ntb_copy`, `cpu_stream`, fio, pcie-bench, GPU ping-pong)
//! read their links' and memories' bytes from the fabric's counters of the window
//! (`TlpPath`). The packet-level network workloads (TCP_STREAM, TCP_RR, UDP ping-pong,
//! pktgen, memcached) read their server's packet model (`net_resources`): the memory
//! system's (`sim::memsys`) bytes on each interconnect direction and DRAM node plus the
//! load the run's STREAM cores put on them (`MemSys::stream_rates`, solved for the whole
//! run), their NIC's link and port from what they moved, and their cores' busy fraction.
//! One-sided RDMA reads the server's memory system the same way and each RNIC's counters
//! (`rdma_resources`); PageRank and `nvme_share` build their lists where they run.

use devices::nic::{tlp_wire_bytes, Nic};
use devices::rnic::Rnic;
use fabric::{Access, Request, Requester};
use serde_json::{json, Map, Value};
use sim::memsys::{Fifo, MemSys};
use sim::net::{Counters, Hop, Net};
use sim::timed::TimedFabric;

use super::packet::NetOutcome;

/// A resource this busy bounds what uses it. Assumption: a FIFO server at 90 % of its rate
/// already makes its users queue for most of their time (an M/D/1 queue's wait is 4.5
/// services there), while the measured rates of a resource at its limit land between 0.9
/// and 1.0 of it (headers, DLLPs and idle gaps the counters do not carry); below it a
/// workload is not held back by one resource but by its round trips.
pub const NEAR_FULL: f64 = 0.9;

/// How a workload's cores are named among its resources.
const CORES: &str = "cores (";

/// One resource on a workload's path and its utilisation over the window (0..1).
#[derive(Clone, Debug, PartialEq)]
pub struct Resource {
    pub name: String,
    pub util: f64,
}

/// Adds `bound` and `bound_util` to `metrics`: the busiest of `resources` when it is at
/// least `NEAR_FULL`, else `latency` (what the workload keeps under way; `None`: nothing,
/// it is idle) and a null utilisation. Gives the resources as `counters.json` lists them.
pub fn insert(
    metrics: &mut Map<String, Value>,
    resources: &[Resource],
    latency: Option<&str>,
) -> Value {
    let busiest_of = |cores: bool| {
        resources
            .iter()
            .filter(|r| r.util.is_finite() && r.name.starts_with(CORES) == cores)
            .max_by(|a, b| a.util.total_cmp(&b.util))
    };
    // Cores' busy time includes their stalls on memory and links: when one of those is
    // full too, it is what holds them (and the workload) back.
    let busiest = match (busiest_of(false), busiest_of(true)) {
        (Some(r), _) if r.util >= NEAR_FULL => Some(r),
        (r, None) => r,
        (None, c) => c,
        (Some(r), Some(c)) => Some(if c.util > r.util { c } else { r }),
    };
    let (name, util) = match (busiest, latency) {
        (Some(r), _) if r.util >= NEAR_FULL => (r.name.clone(), json!(round3(r.util))),
        (_, Some(l)) => (format!("latency: {l}"), Value::Null),
        (_, None) => ("idle".to_string(), Value::Null),
    };
    metrics.insert("bound".into(), json!(name));
    metrics.insert("bound_util".into(), util);
    json!(resources
        .iter()
        .map(|r| json!({ "name": r.name, "util": round4(r.util) }))
        .collect::<Vec<_>>())
}

fn round3(x: f64) -> f64 {
    (x * 1e3).round() / 1e3
}

fn round4(x: f64) -> f64 {
    (x * 1e4).round() / 1e4
}

/// A TLP-level workload's path: the link directions its data crosses, the memories it
/// ends in, its device's own data path and what it keeps under way.
#[derive(Clone, Debug, Default)]
pub struct TlpPath {
    /// Wire ids, each the direction the data travels (a read's completions come back on
    /// the reverse of its request's wires).
    pub wires: Vec<u32>,
    pub sinks: Vec<u32>,
    /// Pacers (a memory path's bandwidth between a CPU node and a memory node).
    pub pacers: Vec<u32>,
    /// The device's data path (its name and rate, GB/s): a NIC's line, an NVMe's media.
    pub data: Option<(String, f64)>,
    /// What it keeps under way, for a latency bound ("8 outstanding"); `None` when it
    /// runs nothing (idle).
    pub under_way: Option<String>,
}

impl TlpPath {
    /// Adds the hops of `who`'s access at `addr` (`write`: it carries the data out).
    pub fn add_access(&mut self, tf: &mut TimedFabric, who: Requester, addr: u64, write: bool) {
        let req = Request {
            requester: who,
            addr,
            len: 64,
            access: if write { Access::Write } else { Access::Read },
        };
        // A route that faults has no resources to name: the workload's faults say it.
        if let Ok((route, _)) = tf.route(&req) {
            self.add_route(&tf.net, route, write);
        }
    }

    /// Adds the hops of timed route `route` (`write`: the data travels its way; else it
    /// comes back on the reverse of each wire).
    pub fn add_route(&mut self, net: &Net, route: u32, write: bool) {
        let push = |v: &mut Vec<u32>, x: u32| {
            if !v.contains(&x) {
                v.push(x);
            }
        };
        for &h in net.route_hops(route) {
            match h {
                Hop::Wire(w) => push(&mut self.wires, if write { w } else { net.wire(w).reverse }),
                Hop::Sink(s, _) => push(&mut self.sinks, s),
                Hop::Pace(p) => push(&mut self.pacers, p),
                _ => {}
            }
        }
    }

    /// Each resource's utilisation over the window (`counted`, `secs` long; `paced`, each
    /// pacer's bytes when it started); `bytes` the workload moved in it (its data path's).
    pub fn resources(
        &self,
        net: &Net,
        counted: &Counters,
        paced: &[(u32, u64)],
        secs: f64,
        bytes: u64,
    ) -> Vec<Resource> {
        let mut out = Vec::new();
        for &p in &self.pacers {
            let pacer = net.pacer(p);
            let before = paced.iter().find(|c| c.0 == p).map_or(0, |c| c.1);
            out.push(Resource {
                name: pacer.name.clone(),
                util: pacer.bytes.saturating_sub(before) as f64
                    / secs
                    / (gbyte_s(pacer.ps_per_kib) * 1e9),
            });
        }
        for &w in &self.wires {
            let wire = net.wire(w);
            let b = counted
                .wires
                .iter()
                .find(|c| c.0 == wire.name)
                .map_or(0, |c| c.1);
            out.push(Resource {
                name: wire.name.clone(),
                util: b as f64 / secs / (wire.gbytes_per_s() * 1e9),
            });
        }
        for &s in &self.sinks {
            let sink = net.sink(s);
            let b = counted
                .sinks
                .iter()
                .find(|c| c.0 == sink.name)
                .map_or(0, |c| c.1 + c.2);
            out.push(Resource {
                name: sink.name.clone(),
                util: b as f64 / secs / (gbyte_s(sink.ps_per_kib) * 1e9),
            });
        }
        if let Some((name, gbyte_s)) = &self.data {
            out.push(Resource {
                name: name.clone(),
                util: bytes as f64 / secs / (gbyte_s * 1e9),
            });
        }
        out
    }
}

/// A rate given as ps per KiB, in GB/s.
pub fn gbyte_s(ps_per_kib: u64) -> f64 {
    1024.0 * 1000.0 / ps_per_kib.max(1) as f64
}

/// What the TLP-level fabric counted over a window, for `TlpPath::bound`.
pub struct Window<'a> {
    pub net: &'a Net,
    pub counted: &'a Counters,
    /// Each pacer's bytes when the window started.
    pub paced: &'a [(u32, u64)],
    pub secs: f64,
}

impl TlpPath {
    /// Adds the bound of the workload on this path to its `metrics` (`insert`), from what
    /// it moved (`throughput_gbyte_s`) and `w`; gives its resources.
    pub fn bound(&self, metrics: &mut Map<String, Value>, w: &Window) -> Value {
        // pcie-bench gives Gb/s as its tables do.
        let moved = metrics
            .get("throughput_gbyte_s")
            .and_then(Value::as_f64)
            .or_else(|| {
                metrics
                    .get("bw_gbit_s")
                    .and_then(Value::as_f64)
                    .map(|g| g / 8.0)
            })
            .unwrap_or(0.0);
        let bytes = (moved * w.secs * 1e9) as u64;
        let r = self.resources(w.net, w.counted, w.paced, w.secs, bytes);
        insert(metrics, &r, self.under_way.as_deref())
    }
}

/// A packet-level workload's path in its server's packet model: TCP_STREAM, TCP_RR, UDP
/// ping-pong, pktgen, memcached.
pub struct NetPath<'a> {
    pub host: &'a str,
    pub nic: &'a str,
    pub pf: usize,
    /// Packages of its cores and of its memory.
    pub socket: u32,
    pub node: u32,
    /// The server receives: the NIC writes into memory and the cores read it.
    pub receives: bool,
    /// Its cores' busy fraction (`None`: the model does not count it).
    pub cpu_util: Option<f64>,
    /// Its payload over the window, GB/s.
    pub payload_gbyte_s: f64,
    /// What its frames take of the port (headers, preamble and gap included where the
    /// model counts them), GB/s.
    pub port_gbyte_s: f64,
}

/// The window's load of host `host`'s interconnect directions on `routes` (package to
/// package) and of its DRAM node `node` in `mem`: the bytes `mem` counted in the window
/// plus the load of the run's STREAM cores there (`MemSys::stream_rates`). A server's sum
/// is capped at its rate: the streams' load is solved once for the run and the
/// workload's bytes are measured, so where they meet at the limit the two can add up to a
/// few per cent past it.
pub fn mem_resources(
    mem: &MemSys,
    host: &str,
    routes: &[(u32, u32)],
    node: u32,
    secs: f64,
) -> Vec<Resource> {
    let mut out = Vec::new();
    let rates = mem.stream_rates();
    let drams = mem.params().sockets as usize;
    let load = |server: usize| rates.load_gbps.get(server).copied().unwrap_or(0.0);
    let uncore = mem.uncore();
    let counts = mem.link_counters();
    let mut servers: Vec<usize> = Vec::new();
    for &(from, to) in routes {
        for h in uncore.route(from, to) {
            if !servers.contains(&h.server()) {
                servers.push(h.server());
            }
        }
    }
    for s in servers {
        let (Some(c), Some(link)) = (counts.get(s), uncore.links.get(s / 2)) else {
            continue;
        };
        let gbyte_s = c.bytes as f64 / secs / 1e9 + load(drams + s);
        out.push(Resource {
            name: format!("{host} interconnect {}", c.name),
            util: (gbyte_s / link.gbps).min(1.0),
        });
    }
    if (node as usize) < drams {
        let d = mem.dram(node);
        let dram = (d.read + d.write) as f64 / secs / 1e9 + load(node as usize);
        out.push(Resource {
            name: format!("{host} DRAM node {node}"),
            util: (dram / mem.params().dram_gbps).min(1.0),
        });
    }
    out
}

/// A device's PCIe link direction `link` carrying `payload_gbyte_s` in TLPs of at most
/// `max` bytes (`completion`: read completions). From the payload, since the link's FIFO
/// counts from the start of the run, warm-up included.
pub fn link_resource(
    name: String,
    link: &Fifo,
    payload_gbyte_s: f64,
    max: u32,
    completion: bool,
) -> Resource {
    // Per second, as whole bytes: the TLP count rounds per transfer, not per byte.
    let wire = tlp_wire_bytes((payload_gbyte_s * 1e9) as u64, max, completion);
    Resource {
        name,
        util: wire as f64 / 1e9 / link.gbps(),
    }
}

/// The resources of `p` over a window of `secs`: each interconnect direction between its
/// NIC and its memory and between its memory and its cores, its memory's DRAM
/// (`mem_resources`), its PF's link in the data's direction, the port, its cores.
pub fn net_resources(mem: &MemSys, nic: &Nic, p: &NetPath, secs: f64) -> Vec<Resource> {
    let Some(pf) = nic.pfs.get(p.pf) else {
        return Vec::new();
    };
    let (nic_from, nic_to) = match p.receives {
        true => (pf.attach, p.node),
        false => (p.node, pf.attach),
    };
    let (core_from, core_to) = match p.receives {
        true => (p.node, p.socket),
        false => (p.socket, p.node),
    };
    let routes = [
        (nic_from, nic_to),
        (core_from, core_to),
        (core_to, core_from),
    ];
    let mut out = mem_resources(mem, p.host, &routes, p.node, secs);
    let name = format!("{}.{} pf{} link", p.host, p.nic, p.pf);
    out.push(match p.receives {
        true => link_resource(
            format!("{name} ↑"),
            &pf.up,
            p.payload_gbyte_s,
            pf.mps,
            false,
        ),
        false => link_resource(
            format!("{name} ↓"),
            &pf.down,
            p.payload_gbyte_s,
            pf.rcb,
            true,
        ),
    });
    out.push(Resource {
        name: format!("{}.{} port", p.host, p.nic),
        util: p.port_gbyte_s / nic.params.line_gbps,
    });
    if let Some(u) = p.cpu_util {
        out.push(Resource {
            name: format!("{CORES}cpu_util {})", round3(u)),
            util: u,
        });
    }
    out
}

/// Adds the bound of `p` (`net_resources` over `secs`, else `latency`) to outcome `o`'s
/// metrics and its resources to its counters.
pub fn add_net(
    o: &mut NetOutcome,
    (mem, nic): (&MemSys, &Nic),
    p: &NetPath,
    secs: f64,
    latency: &str,
) {
    let resources = net_resources(mem, nic, p, secs);
    o.counters["resources"] = insert(&mut o.metrics, &resources, Some(latency));
}

/// One RNIC of a one-sided RDMA workload: its host's and its own name, and whether the
/// data comes in to it (the RNIC writes it into its host's memory) or leaves.
pub struct RdmaEnd<'a> {
    pub host: &'a str,
    pub name: &'a str,
    pub rnic: &'a Rnic,
    pub data_in: bool,
}

/// The resources of a one-sided RDMA workload moving `payload_gbyte_s` over `secs`: on
/// the server (`mem`, its region on `node`) the interconnect between its RNIC and the
/// region in the data's direction and the region's DRAM (`mem_resources`); on each RNIC
/// of `ends` its PCIe link in the data's direction, what its port sent in the window
/// (packet headers included) and its transmit, receive and response units' busy time.
pub fn rdma_resources(
    mem: &MemSys,
    node: u32,
    ends: &[RdmaEnd],
    payload_gbyte_s: f64,
    secs: f64,
) -> Vec<Resource> {
    let mut out = Vec::new();
    if let Some(server) = ends.last() {
        let attach = server.rnic.pf.attach;
        let route = match server.data_in {
            true => (attach, node),
            false => (node, attach),
        };
        out = mem_resources(mem, server.host, &[route], node, secs);
    }
    for e in ends {
        let (pf, who) = (&e.rnic.pf, format!("{}.{}", e.host, e.name));
        out.push(match e.data_in {
            true => link_resource(
                format!("{who} link ↑"),
                &pf.up,
                payload_gbyte_s,
                pf.mps,
                false,
            ),
            false => link_resource(
                format!("{who} link ↓"),
                &pf.down,
                payload_gbyte_s,
                pf.rcb,
                true,
            ),
        });
        // The port counts what it books, and an open loop books it ahead of time: past
        // the window's end when it is behind, so a full port can count above its rate.
        out.push(Resource {
            name: format!("{who} port"),
            util: (e.rnic.port.bytes as f64 / secs / 1e9 / e.rnic.params.port_gbps).min(1.0),
        });
        // A unit counts its tasks' time when it takes them, so it books ahead as the port.
        for (unit, u) in [
            ("tx", &e.rnic.tx),
            ("rx", &e.rnic.rx),
            ("resp", &e.rnic.resp),
        ] {
            out.push(Resource {
                name: format!("{who} {unit} unit"),
                util: (u.busy.as_secs_f64() / secs).min(1.0),
            });
        }
    }
    out
}
