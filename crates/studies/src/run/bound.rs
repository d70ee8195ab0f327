//! What bounds each workload of `nudma run`: the busiest resource on its own path over the
//! window — the links and memory its DMA or misses cross, its device's data path, the
//! interconnect and DRAM its packets' lines cross in the host's memory system, its cores —
//! when it is near full (`NEAR_FULL`); otherwise the workload waits on latency with what it
//! keeps under way.
//!
//! TLP-level workloads (`dma`, `ntb_copy`, `cpu_stream`, fio) read their links' and
//! memories' bytes from the fabric's counters of the window. A TCP_STREAM reads the
//! packet model's memory system (`sim::memsys`): the window's bytes of its own accesses on
//! each interconnect direction and DRAM node plus the load the run's STREAM cores put on
//! them (`MemSys::stream_rates`, solved for the whole run), its NIC's link and port from
//! the window's delivered bytes, and its cores' busy fraction.

use devices::nic::{tlp_wire_bytes, Nic};
use fabric::{Access, Request, Requester};
use serde_json::{json, Map, Value};
use sim::memsys::MemSys;
use sim::net::{Counters, Hop, Net};
use sim::timed::TimedFabric;

/// A resource this busy bounds what uses it. Assumption: a FIFO server at 90 % of its rate
/// already makes its users queue for most of their time (an M/D/1 queue's wait is 4.5
/// services there), while the measured rates of a resource at its limit land between 0.9
/// and 1.0 of it (headers, DLLPs and idle gaps the counters do not carry); below it a
/// workload is not held back by one resource but by its round trips.
pub const NEAR_FULL: f64 = 0.9;

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
    let busiest = resources
        .iter()
        .filter(|r| r.util.is_finite())
        .max_by(|a, b| a.util.total_cmp(&b.util));
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
        let moved = metrics
            .get("throughput_gbyte_s")
            .and_then(Value::as_f64)
            .unwrap_or(0.0);
        let bytes = (moved * w.secs * 1e9) as u64;
        let r = self.resources(w.net, w.counted, w.paced, w.secs, bytes);
        insert(metrics, &r, self.under_way.as_deref())
    }
}

/// A TCP_STREAM part's path in its server's packet model.
pub struct NetPath<'a> {
    pub host: &'a str,
    pub nic: &'a str,
    pub pf: usize,
    /// Packages of its cores and of its memory.
    pub socket: u32,
    pub node: u32,
    /// The server receives: the NIC writes into memory and the cores read it.
    pub receives: bool,
    /// Its cores' busy fraction and its payload over the window, GB/s.
    pub cpu_util: f64,
    pub payload_gbyte_s: f64,
}

/// The resources of `p` over a window of `secs`: each interconnect direction between its
/// NIC and its memory and between its memory and its cores, its memory's DRAM (the
/// workload's bytes in the window plus the run's STREAM cores' load), its PF's link in the
/// data's direction, the port, its cores. A memory server's sum is capped at its rate: the
/// streams' load is solved once for the run and the workload's bytes are measured, so
/// where they meet at the limit the two can add up to a few per cent past it.
pub fn net_resources(mem: &MemSys, nic: &Nic, p: &NetPath, secs: f64) -> Vec<Resource> {
    let mut out = Vec::new();
    let rates = mem.stream_rates();
    let drams = mem.params().sockets as usize;
    let load = |server: usize| rates.load_gbps.get(server).copied().unwrap_or(0.0);
    let Some(pf) = nic.pfs.get(p.pf) else {
        return out;
    };
    let (nic_from, nic_to) = match p.receives {
        true => (pf.attach, p.node),
        false => (p.node, pf.attach),
    };
    let (core_from, core_to) = match p.receives {
        true => (p.node, p.socket),
        false => (p.socket, p.node),
    };
    let uncore = mem.uncore();
    let counts = mem.link_counters();
    let mut servers: Vec<usize> = Vec::new();
    for (from, to) in [
        (nic_from, nic_to),
        (core_from, core_to),
        (core_to, core_from),
    ] {
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
            name: format!("{} interconnect {}", p.host, c.name),
            util: (gbyte_s / link.gbps).min(1.0),
        });
    }
    let d = mem.dram(p.node);
    let dram = (d.read + d.write) as f64 / secs / 1e9 + load(p.node as usize);
    out.push(Resource {
        name: format!("{} DRAM node {}", p.host, p.node),
        util: (dram / mem.params().dram_gbps).min(1.0),
    });
    // The link's bytes from the window's payload in TLPs of the link's size (its FIFO
    // counts from the start of the run, warm-up included).
    let payload = (p.payload_gbyte_s * secs * 1e9) as u64;
    let (link, wire_bytes, arrow) = match p.receives {
        true => (&pf.up, tlp_wire_bytes(payload, pf.mps, false), "↑"),
        false => (&pf.down, tlp_wire_bytes(payload, pf.rcb, true), "↓"),
    };
    out.push(Resource {
        name: format!("{}.{} pf{} link {arrow}", p.host, p.nic, p.pf),
        util: wire_bytes as f64 / secs / 1e9 / link.gbps(),
    });
    out.push(Resource {
        name: format!("{}.{} port", p.host, p.nic),
        util: p.payload_gbyte_s / nic.params.line_gbps,
    });
    out.push(Resource {
        name: format!("cores (cpu_util {})", round3(p.cpu_util)),
        util: p.cpu_util,
    });
    out
}
