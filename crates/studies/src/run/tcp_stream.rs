//! netperf TCP_STREAM workloads of `nudma run` on the packet-granular stack
//! (`host::net::stream`): one workload's connections, each on a server core of its own,
//! or those of several workloads that share their hosts.
//!
//! TCP_STREAM workloads of one file with the same server, client, NICs, direction,
//! message size, NIC mode and coalescing (and no antagonists or migration) run as one
//! model: their connections are lanes of one run, so they share the server's memory
//! system (LLC, DDIO share, DRAM, interconnect), the NICs' PCIe links and the port, and
//! each workload's row reports its own connections. `mem_bw_gbit_s` is the server's DRAM
//! traffic, which they share; their counters name the workloads they ran with.

use devices::nic::{FiveTuple, Nic};
use fabric::{DeviceId, HostId, Topology};
use host::net::stream::{self, Lane, Side, StreamResult, StreamSpec, Streams};
use host::net::world::NetWorld;
use host::net::NetHost;
use serde_json::json;
use sim::component::Sim;
use sim::memsys::MemSys;

use super::beside::Beside;
use super::bound;
use super::packet::{metrics, placement, Group, NetOutcome};
use super::spec::{Kind, Measure, NetTest, NicMode, Workload};
use super::victim::Victim;
use crate::ioctopus::setup::{self, NicChoice, FLOW, MTU};

/// One workload's connections in a run.
pub(super) struct Part {
    pub cpu_node: u32,
    pub connections: u32,
    /// Packages of its cores and of its memory.
    pub socket: u32,
    pub node: u32,
    pub choice: NicChoice,
    /// The PF its first flow is steered to (for its counters).
    pub pf: usize,
}

/// A TCP_STREAM's two hosts, set up.
pub(super) struct Stream {
    pub server: NetHost,
    pub client: NetHost,
    pub server_receives: bool,
}

impl Stream {
    /// Every part's connections together, its flows steered as the NIC steers them; one
    /// outcome per part.
    pub fn run(
        self,
        topo: &Topology,
        server: &str,
        parts: &[Part],
        msg_bytes: u64,
        m: Measure,
    ) -> Result<Vec<NetOutcome>, String> {
        let server_receives = self.server_receives;
        let ends = (self.server.host, self.server.device);
        let streams = self.build(topo, server, parts, msg_bytes, m, None)?;
        let mut world = NetWorld::new(1);
        let mut sim = Sim::new();
        let id = sim.add(streams);
        sim.with(&mut world, id, |s: &mut Streams, w| s.start(w, id))
            .expect("the streams are a component")?;
        world.run_through(&mut sim, m.warmup + m.duration);
        let s: &Streams = sim.get(id).expect("the streams are a component");
        let r = s.result(&world);
        let mut outs = outcomes(server_receives, &r, parts, m);
        let at = s.at(server_side(server_receives));
        let server = (world.mem(at), world.nic(at));
        add_bounds(&mut outs, topo, ends, server, parts, server_receives, m);
        Ok(outs)
    }

    /// The streams of every part's connections, their flows steered as the NIC steers
    /// them, as one component of a `NetWorld` (`victim`: the server's, for the core check).
    pub fn build(
        self,
        topo: &Topology,
        server: &str,
        parts: &[Part],
        msg_bytes: u64,
        m: Measure,
        victim: Option<&Victim>,
    ) -> Result<Streams, String> {
        check_cores(topo, server, parts, victim)?;
        let sockets = setup::pf_sockets(&self.server);
        let mut lanes = Vec::new();
        for part in parts {
            for _ in 0..part.connections {
                let flow = FiveTuple {
                    src_port: FLOW.src_port + lanes.len() as u16,
                    ..FLOW
                };
                let mut core = self.server.core.clone();
                core.socket = part.socket;
                let s = Lane {
                    core,
                    pf: setup::flow_pf(part.choice, flow, part.socket, &sockets),
                    node: part.node,
                };
                let c = Lane::of(&self.client);
                lanes.push(if self.server_receives { (c, s) } else { (s, c) });
            }
        }
        let spec = StreamSpec {
            msg_bytes,
            mtu: MTU,
            warmup: m.warmup,
            window: m.duration,
        };
        if self.server_receives {
            Streams::new(self.client, self.server, spec, lanes)
        } else {
            Streams::new(self.server, self.client, spec, lanes)
        }
    }
}

/// One outcome per part of the streams' result `r` (the parts' connections in order).
pub(super) fn outcomes(
    server_receives: bool,
    r: &StreamResult,
    parts: &[Part],
    m: Measure,
) -> Vec<NetOutcome> {
    let mut first = 0;
    parts
        .iter()
        .map(|part| {
            let n = part.connections as usize;
            let out = outcome(server_receives, r, first..first + n, part, m);
            first += n;
            out
        })
        .collect()
}

/// The outcome of the connections `conns` of `r`, which are `part`'s.
fn outcome(
    rx: bool,
    r: &StreamResult,
    conns: std::ops::Range<usize>,
    part: &Part,
    m: Measure,
) -> NetOutcome {
    let cs = &r.connections[conns];
    let n = cs.len() as f64;
    let mean = |f: &dyn Fn(&stream::ConnStats) -> f64| cs.iter().map(f).sum::<f64>() / n;
    let (util, client_util) = if rx {
        (mean(&|c| c.receiver_util), mean(&|c| c.sender_util))
    } else {
        (mean(&|c| c.sender_util), mean(&|c| c.receiver_util))
    };
    let mem = if rx {
        r.receiver_mem_gbps
    } else {
        r.sender_mem_gbps
    };
    let delivered: u64 = cs.iter().map(|c| c.delivered_window).sum();
    let secs = m.duration.as_secs_f64();
    let mut fields = vec![
        ("throughput_gbit_s", delivered as f64 * 8.0 / secs / 1e9),
        ("mem_bw_gbit_s", mem),
        ("cpu_util", util),
    ];
    if rx {
        let irqs: u64 = cs.iter().map(|c| c.receiver_interrupts).sum();
        fields.push(("server_irqs_per_s", irqs as f64 / secs));
    }
    NetOutcome {
        metrics: metrics(&fields),
        counters: json!({
            "pf": part.pf,
            "connections": part.connections,
            "tso_sends": r.tso_sends,
            "frames": r.frames,
            "out_of_order": r.out_of_order,
            "bytes_delivered": r.bytes_delivered,
            "events": r.events,
            "receiver_interrupts": r.receiver_interrupts,
            "receiver_nic_pauses": r.receiver_pauses,
            "receiver_nic_paused_us": r.receiver_paused_us,
            "client_cpu_util": client_util,
        }),
    }
}

/// Adds each part's bound (`bound::net_resources`) to its outcome: `ends` are the server
/// host and its NIC, `server` their memory system and NIC after the run.
fn add_bounds(
    outs: &mut [NetOutcome],
    topo: &Topology,
    ends: (HostId, DeviceId),
    server: (&MemSys, &Nic),
    parts: &[Part],
    receives: bool,
    m: Measure,
) {
    let secs = m.duration.as_secs_f64();
    let host = &topo.host(ends.0).name;
    let nic = &topo.devices[ends.1.index()].name;
    for (o, part) in outs.iter_mut().zip(parts) {
        let num = |k: &str| o.metrics.get(k).and_then(|v| v.as_f64()).unwrap_or(0.0);
        let payload_gbyte_s = num("throughput_gbit_s") / 8.0;
        let p = bound::NetPath {
            host,
            nic,
            pf: part.pf,
            socket: part.socket,
            node: part.node,
            receives,
            cpu_util: Some(num("cpu_util")),
            payload_gbyte_s,
            port_gbyte_s: payload_gbyte_s,
        };
        let n = part.connections;
        let latency = format!("{n} connection{}", if n == 1 { "" } else { "s" });
        bound::add_net(o, server, &p, secs, &latency);
    }
}

/// One connection per core: the parts' connections on each node, and a victim's threads
/// there, fit its cores.
fn check_cores(
    topo: &Topology,
    server: &str,
    parts: &[Part],
    victim: Option<&Victim>,
) -> Result<(), String> {
    let h = topo.host_by_name(server).expect("set up");
    let p = topo.platform_of(h);
    let cores = p.cores_per_package / p.nodes_per_package.max(1);
    let victims = victim.map_or(0, |v| v.threads_per_socket() / p.nodes_per_package.max(1));
    for part in parts {
        let node = part.cpu_node;
        let on_node: u32 = parts
            .iter()
            .filter(|q| q.cpu_node == node)
            .map(|q| q.connections)
            .sum();
        if on_node + victims > cores {
            if victims > 0 {
                return Err(format!(
                    "{on_node} connections and the victim's {victims} threads on node {node} \
                     of host `{server}`, which has {cores} cores (one per core)"
                ));
            }
            return Err(if parts.len() == 1 {
                format!(
                    "connections {on_node}: node {node} of host `{server}` has {cores} cores \
                     (one connection per core)"
                )
            } else {
                format!(
                    "the TCP_STREAM workloads run together have {on_node} connections on node \
                     {node} of host `{server}`, which has {cores} cores (one connection per core)"
                )
            });
        }
    }
    Ok(())
}

/// What TCP_STREAM workloads must share to run as one model.
#[derive(PartialEq)]
struct Shared<'a> {
    server: &'a str,
    client: &'a str,
    nic: &'a str,
    client_nic: &'a str,
    server_receives: bool,
    msg_bytes: u64,
    nic_mode: NicMode,
    coalescing: Option<devices::nic::CoalesceMode>,
}

fn shared(kind: &Kind) -> Option<Shared<'_>> {
    match kind {
        Kind::Netperf {
            test: NetTest::TcpStream { server_receives },
            msg_bytes,
            server,
            client,
            nic,
            client_nic,
            nic_mode,
            coalescing,
            streams: None,
            migration: None,
            connections,
            ..
        } if *connections > 0 => Some(Shared {
            server,
            client,
            nic,
            client_nic,
            server_receives: *server_receives,
            msg_bytes: *msg_bytes,
            nic_mode: *nic_mode,
            coalescing: *coalescing,
        }),
        _ => None,
    }
}

/// The TCP_STREAM workloads of `workloads` that can run as one model, by what they share;
/// two or more must.
pub(super) fn groups(workloads: &[Workload]) -> Vec<Group<'_>> {
    super::packet::group_by(workloads, shared)
        .into_iter()
        .map(|members| {
            let key = shared(&workloads[members[0]].kind).expect("grouped");
            Group {
                together: members.len() > 1,
                members,
                server: key.server,
                client: key.client,
            }
        })
        .collect()
}

/// The side of a stream the server is on.
pub(super) fn server_side(server_receives: bool) -> Side {
    if server_receives {
        Side::Receiver
    } else {
        Side::Sender
    }
}

/// What a group's rows need of its set-up once its streams have run.
pub(super) struct Rows {
    parts: Vec<Part>,
    server_receives: bool,
    /// The server host and its NIC.
    ends: (HostId, DeviceId),
}

impl Rows {
    /// The side of the streams the group's server is on.
    pub fn server(&self) -> Side {
        server_side(self.server_receives)
    }

    /// One outcome per member, from the group's streams `s` run in `w`.
    pub fn outcomes(
        &self,
        topo: &Topology,
        s: &Streams,
        w: &NetWorld,
        m: Measure,
    ) -> Vec<NetOutcome> {
        let mut outs = outcomes(self.server_receives, &s.result(w), &self.parts, m);
        let at = s.at(self.server());
        let server = (w.mem(at), w.nic(at));
        let receives = self.server_receives;
        add_bounds(&mut outs, topo, self.ends, server, &self.parts, receives, m);
        outs
    }
}

/// The TCP_STREAM workloads `members` (one group of `groups`) as one component, its hosts'
/// memory systems loaded with the run's CPU streams there (`victim`: the server's, for
/// the core check).
pub(super) fn build_group(
    topo: &Topology,
    members: &[&Workload],
    m: Measure,
    beside: &mut Beside,
    victim: Option<&Victim>,
) -> Result<(Streams, Rows), String> {
    let mut parts = Vec::new();
    let mut server_host = None;
    for w in members {
        let Kind::Netperf {
            connections,
            server,
            nic,
            cpu_node,
            mem_node,
            nic_mode,
            netdev_pf,
            ..
        } = &w.kind
        else {
            unreachable!("groups hold netperf workloads")
        };
        let (socket, node) = placement(topo, server, *cpu_node, *mem_node)
            .map_err(|e| format!("workload `{}`: {e}", w.name))?;
        let choice = super::packet::choice(*nic_mode, *netdev_pf);
        let (h, pf) = setup::server(topo, server, nic, choice, socket, node)
            .map_err(|e| format!("workload `{}`: {e}", w.name))?;
        server_host.get_or_insert(h);
        parts.push(Part {
            cpu_node: *cpu_node,
            connections: *connections,
            socket,
            node,
            choice,
            pf,
        });
    }
    let key = shared(&members[0].kind).expect("a group's workload");
    let mut server = server_host.expect("a group has members");
    beside.load(topo, key.server, &mut server.mem)?;
    let mut client = setup::stream_client(topo, key.client, key.client_nic)?;
    beside.load(topo, key.client, &mut client.mem)?;
    if let Some(mode) = key.coalescing {
        server.coalescing.mode = mode;
        client.coalescing.mode = mode;
    }
    let ends = (server.host, server.device);
    let net = Stream {
        server,
        client,
        server_receives: key.server_receives,
    };
    let streams = net.build(topo, key.server, &parts, key.msg_bytes, m, victim)?;
    let rows = Rows {
        parts,
        server_receives: key.server_receives,
        ends,
    };
    Ok((streams, rows))
}
