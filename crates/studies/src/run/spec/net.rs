//! The network workloads, each on its hosts' packet-granular stack: netperf
//! (`netperf`: TCP_STREAM with its antagonists and migration, TCP_RR), the in-kernel
//! packet generator (`pktgen`), memcached under memaslap (`memcached`) and sockperf's UDP
//! ping-pong (`udp_pingpong`). Their raw schemas, and their reading into a `Kind` with its
//! range checks.

use devices::nic::CoalesceMode;
use fabric::units::Size;
use fabric::ScenarioError;
use serde::Deserialize;
use sim::Time;

use super::located::{millis, Entry};
use super::{Antagonists, Kind, Measure, Migration, NetEnds, NetTest, NicMode};

/// Most connections a netperf workload may open (the packet model's limit).
pub const MAX_CONNECTIONS: u32 = 256;
/// Largest TCP_RR message (the packet model's limit).
pub const MAX_RR_MSG: u64 = 1 << 20;

/// Largest UDP datagram in one 1500-byte MTU frame (IPv4 and UDP headers off).
pub const MAX_UDP_MSG: u64 = 1500 - 28;
/// A migration's default sampling period of the per-PF counters (every 50 ms).
pub const MIGRATION_SAMPLE_MS: f64 = 50.0;

/// Which side of a TCP_STREAM the server is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
enum NetDirection {
    Rx,
    Tx,
}

/// The test's name as a file writes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
enum RawNetTest {
    #[serde(rename = "TCP_STREAM")]
    TcpStream,
    #[serde(rename = "TCP_RR")]
    TcpRr,
}

/// A PF of a NIC: its index (`1`) or its name (`"pf1"`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct PfIndex(usize);

impl<'de> Deserialize<'de> for PfIndex {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<PfIndex, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = PfIndex;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a PF index (0, 1, …) or a PF name (\"pf0\", \"pf1\", …)")
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<PfIndex, E> {
                usize::try_from(v)
                    .map(PfIndex)
                    .map_err(|_| E::custom(format!("PF index {v} is negative")))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<PfIndex, E> {
                usize::try_from(v)
                    .map(PfIndex)
                    .map_err(|_| E::custom(format!("PF index {v} is too large")))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<PfIndex, E> {
                v.strip_prefix("pf")
                    .and_then(|n| n.parse().ok())
                    .map(PfIndex)
                    .ok_or_else(|| {
                        E::custom(format!(
                            "`{v}` is not a PF: write its index (1) or its name (\"pf1\")"
                        ))
                    })
            }
        }
        d.deserialize_any(V)
    }
}

/// The `NetEnds` of a raw workload table with netperf's host and NIC fields (its
/// `client_nic` defaulting to `nic`, as netperf's).
macro_rules! net_ends {
    ($r:ident) => {
        NetEnds {
            server: $r.server,
            client: $r.client,
            client_nic: $r.client_nic.unwrap_or_else(|| $r.nic.clone()),
            nic: $r.nic,
            cpu_node: $r.cpu_node,
            mem_node: $r.mem_node,
            nic_mode: $r.nic_mode,
            netdev_pf: $r.netdev_pf.0,
        }
    };
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNetperf {
    name: String,
    #[allow(dead_code)]
    kind: String,
    test: RawNetTest,
    /// TCP_STREAM only: the server receives (rx, the default) or sends.
    direction: Option<NetDirection>,
    msg_bytes: Size,
    #[serde(default = "one_connection")]
    connections: u32,
    server: String,
    client: String,
    nic: String,
    /// The client's NIC when its name differs from the server's.
    client_nic: Option<String>,
    cpu_node: u32,
    mem_node: u32,
    nic_mode: NicMode,
    #[serde(default)]
    netdev_pf: PfIndex,
    /// "off", "static" or "adaptive".
    coalescing: Option<String>,
    stream_pairs: Option<u32>,
    stream_node: Option<u32>,
    /// TCP_RR: the client's process and memory on its NIC's socket (`local`, the
    /// default) or the other one (`remote`).
    client_placement: Option<String>,
    migrate_at_ms: Option<f64>,
    sample_ms: Option<f64>,
    /// `[from, to]` ms: the steady windows `before_gbit_s` and `after_gbit_s` average.
    before_ms: Option<[f64; 2]>,
    after_ms: Option<[f64; 2]>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMemcached {
    name: String,
    #[allow(dead_code)]
    kind: String,
    server: String,
    client: String,
    nic: String,
    client_nic: Option<String>,
    cpu_node: u32,
    mem_node: u32,
    nic_mode: NicMode,
    #[serde(default)]
    netdev_pf: PfIndex,
    #[serde(default = "memaslap_key_bytes")]
    key_bytes: Size,
    #[serde(default = "memaslap_value_bytes")]
    value_bytes: Size,
    #[serde(default = "memaslap_set_ratio")]
    set_ratio: f64,
    #[serde(default = "memaslap_concurrency")]
    clients: u32,
    #[serde(default = "memaslap_window")]
    keys: u64,
    /// The clients' key and GET/SET draws (default: the run's `--seed`).
    seed: Option<u64>,
    #[serde(default = "one_instance")]
    instances: u32,
}

fn one_instance() -> u32 {
    1
}

// memaslap's documented defaults (libmemcached, docs/bin/memaslap.rst: key size 64,
// value size 1024, get/set 9:1, concurrency 16, window size 10k).
fn memaslap_key_bytes() -> Size {
    Size(64)
}
fn memaslap_value_bytes() -> Size {
    Size(1024)
}
fn memaslap_set_ratio() -> f64 {
    0.1
}
fn memaslap_concurrency() -> u32 {
    16
}
fn memaslap_window() -> u64 {
    host::net::memcached::MEMSLAP_KEYS
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawUdp {
    name: String,
    #[allow(dead_code)]
    kind: String,
    msg_bytes: Size,
    server: String,
    client: String,
    nic: String,
    client_nic: Option<String>,
    cpu_node: u32,
    mem_node: u32,
    nic_mode: NicMode,
    #[serde(default)]
    netdev_pf: PfIndex,
    stream_pairs: Option<u32>,
    stream_node: Option<u32>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPktgen {
    name: String,
    #[allow(dead_code)]
    kind: String,
    host: String,
    nic: String,
    cpu_node: u32,
    mem_node: u32,
    pkt_bytes: Size,
    nic_mode: NicMode,
    #[serde(default)]
    netdev_pf: PfIndex,
    /// The NUMA nodes of the packet's fragments, in order (default: one, on `mem_node`).
    fragment_nodes: Option<Vec<u32>>,
    /// The octoNIC's IOctoSG: each fragment read through the PF local to its page.
    #[serde(default)]
    ioctosg: bool,
}

fn one_connection() -> u32 {
    1
}

/// A `netperf` workload: its test, its antagonists and migration, and their ranges.
pub(super) fn netperf(e: &Entry, measure: &Measure) -> Result<(String, Kind), ScenarioError> {
    let r: RawNetperf = e.read()?;
    let field = |f: &str, msg: &str| e.field(&r.name, f, msg);
    let test = match (r.test, r.direction) {
        (RawNetTest::TcpStream, d) => NetTest::TcpStream {
            server_receives: d != Some(NetDirection::Tx),
        },
        (RawNetTest::TcpRr, None) => NetTest::TcpRr,
        (RawNetTest::TcpRr, Some(_)) => {
            return Err(field(
                "direction",
                "`direction` is for TCP_STREAM: a TCP_RR transaction goes both ways",
            ))
        }
    };
    let coalescing = match &r.coalescing {
        None => None,
        Some(c) => Some(CoalesceMode::parse(c).map_err(|m| field("coalescing", &m))?),
    };
    let streams = antagonists(r.stream_pairs, r.stream_node, &field)?;
    let migration = migration(&r, test, measure, &field)?;
    let client_remote = match r.client_placement.as_deref() {
        None | Some("local") => false,
        Some("remote") => true,
        Some(p) => {
            return Err(field(
                "client_placement",
                &format!(
                    "client_placement `{p}`: use \"local\" or \"remote\" (to the client's NIC)"
                ),
            ))
        }
    };
    if r.client_placement.is_some() && test != NetTest::TcpRr {
        return Err(field(
            "client_placement",
            "`client_placement` is for TCP_RR (a TCP_STREAM's client is a stock bulk-transfer host)",
        ));
    }
    // Hosts, NICs, PFs and nodes are checked against the fabric at run time.
    e.check(
        r.msg_bytes.0 >= 1,
        &r.name,
        "msg_bytes",
        "must be at least 1 byte",
    )?;
    e.check(
        r.connections <= MAX_CONNECTIONS,
        &r.name,
        "connections",
        "must be 1 .. 256 connections",
    )?;
    e.check(
        r.connections > 0 || (matches!(test, NetTest::TcpStream { .. }) && streams.is_none()),
        &r.name,
        "connections",
        "0 connections (an idle workload, so a sweep can leave it out) is for a TCP_STREAM \
         without stream_pairs",
    )?;
    if test == NetTest::TcpRr {
        e.check(
            r.msg_bytes.0 <= MAX_RR_MSG,
            &r.name,
            "msg_bytes",
            "a TCP_RR message must be at most 1 MiB",
        )?;
        e.check(
            r.connections == 1,
            &r.name,
            "connections",
            "TCP_RR runs one connection (one transaction outstanding)",
        )?;
    }
    let k = Kind::Netperf {
        test,
        coalescing,
        msg_bytes: r.msg_bytes.0,
        connections: r.connections,
        server: r.server,
        client: r.client,
        client_nic: r.client_nic.unwrap_or_else(|| r.nic.clone()),
        nic: r.nic,
        cpu_node: r.cpu_node,
        mem_node: r.mem_node,
        nic_mode: r.nic_mode,
        netdev_pf: r.netdev_pf.0,
        streams,
        migration,
        client_remote,
    };
    Ok((r.name, k))
}

/// A netperf workload's migration: `migrate_at_ms` inside the run (`measure`'s warm-up
/// and window), sampled every `sample_ms`, of one TCP_STREAM rx connection.
fn migration(
    r: &RawNetperf,
    test: NetTest,
    measure: &Measure,
    field: &dyn Fn(&str, &str) -> ScenarioError,
) -> Result<Option<Migration>, ScenarioError> {
    match (r.migrate_at_ms, r.sample_ms) {
        (None, None) if r.before_ms.is_none() && r.after_ms.is_none() => Ok(None),
        (None, _) => Err(if r.sample_ms.is_some() {
            field(
                "sample_ms",
                "`sample_ms` samples a migration: give `migrate_at_ms` too",
            )
        } else {
            let key = if r.before_ms.is_some() {
                "before_ms"
            } else {
                "after_ms"
            };
            field(
                key,
                &format!("`{key}` averages a migration's samples: give `migrate_at_ms` too"),
            )
        }),
        (Some(at), sample) => {
            let sample = sample.unwrap_or(MIGRATION_SAMPLE_MS);
            let lasts = measure.warmup + measure.duration;
            let at = millis(at)
                .filter(|t| *t > Time::ZERO && *t < lasts)
                .ok_or_else(|| {
                    field(
                        "migrate_at_ms",
                        &format!(
                            "must be a time inside the run, 0 .. {} ms (warm-up and window)",
                            lasts.as_us_f64() / 1e3
                        ),
                    )
                })?;
            let sample = millis(sample)
                .filter(|t| *t >= Time::from_us(1))
                .ok_or_else(|| field("sample_ms", "must be 0.001 ms .. 1 s"))?;
            let rx = test
                == NetTest::TcpStream {
                    server_receives: true,
                };
            if !rx || r.connections != 1 {
                return Err(field(
                    "migrate_at_ms",
                    "a migration moves the receiver of one TCP_STREAM rx connection",
                ));
            }
            let window = |key: &str, w: Option<[f64; 2]>| -> Result<_, ScenarioError> {
                let Some([a, b]) = w else { return Ok(None) };
                let whole = |ms: f64| millis(ms).filter(|t| t.as_ps() % sample.as_ps() == 0);
                match (whole(a), whole(b)) {
                    (Some(a), Some(b)) if a < b && b <= lasts => Ok(Some((a, b))),
                    _ => Err(field(
                        key,
                        &format!(
                            "must be [from, to] ms inside the run (0 .. {} ms), whole samples of \
                             {} ms, from < to",
                            lasts.as_us_f64() / 1e3,
                            sample.as_us_f64() / 1e3
                        ),
                    )),
                }
            };
            Ok(Some(Migration {
                at,
                sample,
                before: window("before_ms", r.before_ms)?,
                after: window("after_ms", r.after_ms)?,
            }))
        }
    }
}

/// STREAM antagonists: `stream_pairs` and `stream_node` go together.
fn antagonists(
    pairs: Option<u32>,
    node: Option<u32>,
    field: &dyn Fn(&str, &str) -> ScenarioError,
) -> Result<Option<Antagonists>, ScenarioError> {
    match (pairs, node) {
        (None, None) => Ok(None),
        (Some(pairs), Some(node)) => Ok(Some(Antagonists { pairs, node })),
        (Some(_), None) => Err(field(
            "stream_pairs",
            "STREAM antagonists need `stream_node` too: the memory node they load",
        )),
        (None, Some(_)) => Err(field(
            "stream_node",
            "`stream_node` is the memory node STREAM antagonists load: give `stream_pairs` too",
        )),
    }
}

/// A `memcached` workload: its server's ends and memaslap's parameters.
pub(super) fn memcached(e: &Entry) -> Result<(String, Kind), ScenarioError> {
    let r: RawMemcached = e.read()?;
    e.check(
        (16..=256).contains(&r.key_bytes.0),
        &r.name,
        "key_bytes",
        "must be 16 .. 256 bytes (memaslap's shortest key; memcached's 250 bytes and the client's prefix)",
    )?;
    e.check(
        (16..=1 << 20).contains(&r.value_bytes.0),
        &r.name,
        "value_bytes",
        "must be 16 B .. 1 MiB (a value carries its key and version; memcached's default item size limit)",
    )?;
    e.check(
        (0.0..=1.0).contains(&r.set_ratio),
        &r.name,
        "set_ratio",
        "must be a share of SETs in 0 .. 1",
    )?;
    e.check(
        (1..=1024).contains(&r.clients),
        &r.name,
        "clients",
        "must be 1 .. 1024 memaslap connections",
    )?;
    e.check(
        (1..=1 << 24).contains(&r.keys),
        &r.name,
        "keys",
        "must be 1 .. 16777216 keys",
    )?;
    e.check(
        r.instances <= MAX_CONNECTIONS,
        &r.name,
        "instances",
        "must be 0 .. 256 server instances (0: the workload is idle, so a sweep can leave it out)",
    )?;
    let k = Kind::Memcached {
        ends: net_ends!(r),
        key_bytes: r.key_bytes.0,
        value_bytes: r.value_bytes.0,
        set_ratio: r.set_ratio,
        clients: r.clients,
        keys: r.keys,
        seed: r.seed,
        instances: r.instances,
    };
    Ok((r.name, k))
}

/// A `udp_pingpong` workload: its ends, its datagram and its antagonists.
pub(super) fn udp_pingpong(e: &Entry) -> Result<(String, Kind), ScenarioError> {
    let r: RawUdp = e.read()?;
    let field = |f: &str, msg: &str| e.field(&r.name, f, msg);
    let streams = antagonists(r.stream_pairs, r.stream_node, &field)?;
    e.check(
        (1..=MAX_UDP_MSG).contains(&r.msg_bytes.0),
        &r.name,
        "msg_bytes",
        "must be 1 .. 1472 bytes (one datagram in one 1500-byte MTU frame)",
    )?;
    let k = Kind::UdpPingPong {
        ends: net_ends!(r),
        msg_bytes: r.msg_bytes.0,
        streams,
    };
    Ok((r.name, k))
}

/// A `pktgen` workload: the packet generator on one core of a host.
pub(super) fn pktgen(e: &Entry) -> Result<(String, Kind), ScenarioError> {
    let r: RawPktgen = e.read()?;
    e.check(
        (64..=1518).contains(&r.pkt_bytes.0),
        &r.name,
        "pkt_bytes",
        "must be an Ethernet frame size, 64 .. 1518 bytes",
    )?;
    let fragment_nodes = r.fragment_nodes.unwrap_or_else(|| vec![r.mem_node]);
    e.check(
        (1..=16).contains(&fragment_nodes.len()),
        &r.name,
        "fragment_nodes",
        "must name 1 .. 16 fragments' nodes",
    )?;
    e.check(
        !r.ioctosg || r.nic_mode == NicMode::Octonic,
        &r.name,
        "ioctosg",
        "IOctoSG is the octoNIC's (nic_mode = \"octonic\")",
    )?;
    let k = Kind::Pktgen {
        host: r.host,
        nic: r.nic,
        cpu_node: r.cpu_node,
        mem_node: r.mem_node,
        pkt_bytes: r.pkt_bytes.0,
        nic_mode: r.nic_mode,
        netdev_pf: r.netdev_pf.0,
        fragment_nodes,
        ioctosg: r.ioctosg,
    };
    Ok((r.name, k))
}
