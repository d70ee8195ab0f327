//! memcached workloads of `nudma run` that run as one model (`host::net::memcached`):
//! those of one file with the same server, client, NICs, NIC mode and memaslap load share
//! the server's memory system (LLC, DDIO share, DRAM, interconnect), the NICs' PCIe links
//! and the port. Each workload's `instances` are server instances on cores of its
//! `cpu_node`, their rings and items on its `mem_node`, their queue on the PF the NIC's
//! steering gives that socket; each row reports its own instances. A single workload of
//! one instance runs this way only when it shares a host with another model or a victim
//! (`run::net` runs it otherwise).

use fabric::Topology;
use host::net::memcached::{Memcached, MemcachedResult, MemcachedSpec};
use host::net::stream::Lane;
use serde_json::json;

use super::beside::Beside;
use super::packet::{self, placement, Group, NetOutcome};
use super::spec::{Kind, Measure, NetEnds, NicMode, Workload};
use super::victim::Victim;
use crate::ioctopus::setup::{self, MTU};

/// What memcached workloads must share to run as one model.
#[derive(PartialEq)]
struct Shared<'a> {
    server: &'a str,
    client: &'a str,
    nic: &'a str,
    client_nic: &'a str,
    nic_mode: NicMode,
    key_bytes: u64,
    value_bytes: u64,
    set_ratio: u64,
    clients: u32,
    keys: u64,
    seed: Option<u64>,
}

fn shared(kind: &Kind) -> Option<Shared<'_>> {
    match kind {
        Kind::Memcached {
            ends,
            key_bytes,
            value_bytes,
            set_ratio,
            clients,
            keys,
            seed,
            instances,
        } if *instances > 0 => Some(Shared {
            server: &ends.server,
            client: &ends.client,
            nic: &ends.nic,
            client_nic: &ends.client_nic,
            nic_mode: ends.nic_mode,
            key_bytes: *key_bytes,
            value_bytes: *value_bytes,
            set_ratio: set_ratio.to_bits(),
            clients: *clients,
            keys: *keys,
            seed: *seed,
        }),
        _ => None,
    }
}

/// The memcached workloads of `workloads` that can run as one model, by what they share;
/// two or more must, and so must one with several instances.
pub(super) fn groups(workloads: &[Workload]) -> Vec<Group<'_>> {
    super::packet::group_by(workloads, shared)
        .into_iter()
        .map(|members| {
            let key = shared(&workloads[members[0]].kind).expect("grouped");
            let several = |i: &usize| matches!(workloads[*i].kind, Kind::Memcached { instances, .. } if instances > 1);
            Group {
                together: members.len() > 1 || members.iter().any(several),
                members,
                server: key.server,
                client: key.client,
            }
        })
        .collect()
}

/// What a group's rows need of its set-up once its instances have run.
pub(super) struct Rows {
    /// Per member: its first instance, its instances, its queue's PF.
    parts: Vec<(usize, usize, usize)>,
    value_bytes: u64,
}

/// The memcached workloads `members` (one group of `groups`) as one component, its hosts'
/// memory systems loaded with the run's CPU streams there (`victim`: the server's, for
/// the core check).
pub(super) fn build_group(
    topo: &Topology,
    members: &[&Workload],
    m: Measure,
    seed: u64,
    beside: &mut Beside,
    victim: Option<&Victim>,
) -> Result<(Memcached, Rows), String> {
    let key = shared(&members[0].kind).expect("a group's workload");
    let mut lanes = Vec::new();
    let mut parts = Vec::new();
    let mut server = None;
    for w in members {
        let Kind::Memcached {
            ends, instances, ..
        } = &w.kind
        else {
            unreachable!("groups hold memcached workloads")
        };
        let (h, lane) = lane(topo, ends).map_err(|e| format!("workload `{}`: {e}", w.name))?;
        parts.push((lanes.len(), *instances as usize, lane.pf));
        lanes.extend((0..*instances).map(|_| Lane {
            core: lane.core.clone(),
            ..lane
        }));
        server.get_or_insert(h);
    }
    let mut server = server.expect("a group has members");
    check_cores(topo, members, victim)?;
    beside.load(topo, key.server, &mut server.mem)?;
    let mut client = setup::stream_client(topo, key.client, key.client_nic)?;
    beside.load(topo, key.client, &mut client.mem)?;
    let spec = MemcachedSpec {
        key_bytes: key.key_bytes,
        value_bytes: key.value_bytes,
        set_ratio: f64::from_bits(key.set_ratio),
        clients: key.clients,
        keys: key.keys,
        mtu: MTU,
        warmup: m.warmup,
        window: m.duration,
        seed: key.seed.unwrap_or(seed),
    };
    let mc = Memcached::new(server, client, spec, lanes)?;
    let rows = Rows {
        parts,
        value_bytes: key.value_bytes,
    };
    Ok((mc, rows))
}

impl Rows {
    /// One outcome per member, from the group's result; an error if any GET returned
    /// other bytes than a SET stored.
    pub fn outcomes(&self, r: &MemcachedResult, m: Measure) -> Result<Vec<NetOutcome>, String> {
        let secs = m.duration.as_secs_f64();
        let mut outs = Vec::new();
        for &(first, n, pf) in &self.parts {
            let mine = &r.instances[first..first + n];
            let (gets, sets): (u64, u64) = mine
                .iter()
                .fold((0, 0), |a, i| (a.0 + i.gets, a.1 + i.sets));
            let mut counters = packet::checked_counters(r, pf)?;
            counters["instances"] = json!(n);
            counters["gets"] = json!(gets);
            counters["sets"] = json!(sets);
            counters["instance_cpu_util"] =
                json!(mine.iter().map(|i| i.util).sum::<f64>() / n as f64);
            let done = (gets + sets) as f64;
            outs.push(NetOutcome {
                metrics: packet::metrics(&[
                    ("kops", done / secs / 1e3),
                    ("mem_bw_gbit_s", r.mem_gbps),
                    (
                        "throughput_gbit_s",
                        done * self.value_bytes as f64 * 8.0 / secs / 1e9,
                    ),
                ]),
                counters,
            });
        }
        Ok(outs)
    }
}

/// A workload's server host, set up with its queue on the PF the NIC's steering gives its
/// socket, and the lane of each of its instances.
fn lane(topo: &Topology, ends: &NetEnds) -> Result<(host::net::NetHost, Lane), String> {
    let (socket, node) = placement(topo, &ends.server, ends.cpu_node, ends.mem_node)?;
    let choice = packet::choice(ends.nic_mode, ends.netdev_pf);
    let (h, pf) = setup::server(topo, &ends.server, &ends.nic, choice, socket, node)?;
    let mut core = h.core.clone();
    core.socket = socket;
    Ok((h, Lane { core, pf, node }))
}

/// One instance per core: the instances on each socket, and the victim's threads there,
/// fit its cores.
fn check_cores(
    topo: &Topology,
    members: &[&Workload],
    victim: Option<&Victim>,
) -> Result<(), String> {
    let mut per_socket = std::collections::BTreeMap::<u32, u32>::new();
    let mut server = "";
    for w in members {
        if let Kind::Memcached {
            ends, instances, ..
        } = &w.kind
        {
            let (socket, _) = placement(topo, &ends.server, ends.cpu_node, ends.mem_node)?;
            *per_socket.entry(socket).or_default() += instances;
            server = &ends.server;
        }
    }
    let h = topo.host_by_name(server).expect("placed");
    let cores = topo.platform_of(h).cores_per_package;
    let victims = victim.map_or(0, Victim::threads_per_socket);
    for (socket, n) in per_socket {
        if n + victims > cores {
            return Err(format!(
                "{n} memcached instances{} on socket {socket} of host `{server}`, which has \
                 {cores} cores (one instance per core)",
                if victims > 0 {
                    format!(" and the victim's {victims} threads")
                } else {
                    String::new()
                }
            ));
        }
    }
    Ok(())
}
