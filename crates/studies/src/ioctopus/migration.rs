//! `ioctopus.migration`: netperf TCP_STREAM receive whose process the scheduler moves
//! to the other socket mid-run, on a standard NIC (the flow keeps entering through its
//! netdev's PF) or an octoNIC under the IOctopus team driver (`systems::ioctopus::team`).

use std::collections::BTreeMap;

use devices::nic::{Steering, SteeringMode};
use host::net::migration::{self, MigrationResult, MigrationSpec, Move, RxQueue};
use host::net::{stream, NetHost};
use serde_json::json;
use sim::Time;
use systems::ioctopus::team::{TeamDriver, TeamTiming};

use super::setup::{self, FLOW};
use crate::harness::RunError;
use crate::probe::{Fields, ProbeCx};

/// The catalog's timeline (move at 4.5 s of 10 s, 50 ms samples) scaled by 1/100: the
/// same shape, 100 samples, ~10⁵ instead of ~10⁷ packets per config.
pub const MOVE_AT: Time = Time::from_us(45_000);
pub const RUN: Time = Time::from_us(100_000);
pub const SAMPLE: Time = Time::from_us(1000);
/// Steady-state windows for `before_gbps` and `after_gbps`: after a 5 ms ramp, and from
/// 10 ms after the move (the rule update and the old queue's drain take < 1 ms).
const BEFORE: (Time, Time) = (Time::from_us(5000), MOVE_AT);
const AFTER: (Time, Time) = (Time::from_us(55_000), RUN);

/// The socket the process starts on and the one it moves to; one receive queue per core,
/// its ring on the core's node.
const FROM: RxQueue = RxQueue { index: 0, node: 0 };
const TO: RxQueue = RxQueue { index: 1, node: 1 };

/// One migrating run and the driver it used (its timing from the server platform's
/// `[platform.X.netstack]`).
pub struct Migrated {
    pub result: MigrationResult,
    pub driver: TeamDriver,
}

/// Runs the stream `client` → `server` (whose NIC and netdev PF are `server.pf`) with
/// the receiving process moving from socket 0 to socket 1 at [`MOVE_AT`].
pub fn run(
    client: &mut NetHost,
    server: &mut NetHost,
    mode: SteeringMode,
) -> Result<Migrated, String> {
    let spec = MigrationSpec {
        stream: stream::StreamSpec {
            msg_bytes: 65536,
            mtu: 1500,
            warmup: Time::ZERO,
            window: RUN,
        },
        mv: Move {
            at: MOVE_AT,
            to_socket: TO.node,
            to_queue: TO,
        },
        from_queue: FROM,
        sample: SAMPLE,
    };
    run_spec(client, server, mode, spec)
}

/// Runs `spec`'s migrating stream `client` → `server` under the team driver of `mode`
/// (`nudma run`'s netperf with `migrate_at_ms` runs its own timeline here).
pub fn run_spec(
    client: &mut NetHost,
    server: &mut NetHost,
    mode: SteeringMode,
    spec: MigrationSpec,
) -> Result<Migrated, String> {
    let sockets: Vec<u32> = server.nic.pfs.iter().map(|p| p.socket).collect();
    let to = spec.mv.to_queue.node;
    if !sockets.contains(&to) {
        return Err(format!(
            "the NIC has no PF on socket {to} (PF sockets {sockets:?})"
        ));
    }
    let steering = Steering::new(mode, sockets.len() as u8, 2);
    let timing = TeamTiming::of(&server.costs);
    let from = spec.from_queue;
    let mut driver = TeamDriver::new(
        steering, FLOW, from.node, from.index, server.pf, &sockets, timing,
    );
    let result = migration::run(client, server, spec, &mut driver)?;
    Ok(Migrated { result, driver })
}

/// The start of each of `n` samples, ms (the timeline's x).
pub fn sample_ms(n: usize) -> Vec<f64> {
    (0..n)
        .map(|i| Time::from_ps(SAMPLE.as_ps() * i as u64).as_us_f64() / 1e3)
        .collect()
}

/// Gb/s of each sample of `bytes`.
pub fn gbps(bytes: &[u64]) -> Vec<f64> {
    let s = SAMPLE.as_secs_f64();
    bytes.iter().map(|&b| b as f64 * 8.0 / s / 1e9).collect()
}

/// Mean Gb/s over all PFs in the samples within `[from, to)`.
pub fn mean_gbps(r: &MigrationResult, (from, to): (Time, Time)) -> f64 {
    let (a, b) = (
        (from.as_ps() / SAMPLE.as_ps()) as usize,
        (to.as_ps() / SAMPLE.as_ps()) as usize,
    );
    let bytes: u64 = r
        .pf_rx_bytes
        .iter()
        .map(|v| v[a..b].iter().sum::<u64>())
        .sum();
    bytes as f64 * 8.0 / (to - from).as_secs_f64() / 1e9
}

/// The `tcp_migration` probe.
pub fn tcp_migration(cx: &mut ProbeCx) -> Result<Fields, RunError> {
    let mode = super::steering_mode(cx)?;
    let nic = cx.arg("nic")?;
    let netdev_pf: usize = cx
        .arg("netdev_pf")?
        .parse()
        .map_err(|_| cx.error("netdev_pf must be a PF index (0, 1, …)"))?;
    let topo = &cx.tf.fabric.topo;
    let name = cx.arg("server")?;
    let host = topo
        .host_by_name(&name)
        .ok_or_else(|| cx.error(format!("no host `{name}`")))?;
    let mut server =
        NetHost::new(topo, host, &nic, netdev_pf, FROM.node, FROM.node).map_err(|e| cx.error(e))?;
    let mut client =
        setup::stream_client(topo, &cx.arg("client")?, &nic).map_err(|e| cx.error(e))?;
    let m = run(&mut client, &mut server, mode).map_err(|e| cx.error(e))?;
    let r = &m.result;
    cx.set_counters(json!({
        "rule_updates": m.driver.rule_updates,
        "expired": m.driver.expired.iter().map(|(t, r)| format!("{r:?} at {:.3} ms", t.as_us_f64() / 1e3)).collect::<Vec<_>>(),
        "arfs_callbacks": r.callbacks,
        "tx_per_pf": m.driver.tx_per_pf,
        "tx_switches": m.driver.tx_switches,
        "ring_peak": r.ring_peak,
        "bytes_delivered": r.stream.bytes_delivered,
        "events": r.stream.events,
    }));
    Ok(BTreeMap::from([
        ("before_gbps".into(), json!(mean_gbps(r, BEFORE))),
        ("after_gbps".into(), json!(mean_gbps(r, AFTER))),
        ("pf0_gbps".into(), json!(gbps(&r.pf_rx_bytes[0]))),
        (
            "pf1_gbps".into(),
            json!(gbps(r.pf_rx_bytes.get(1).map_or(&[][..], |v| v))),
        ),
        ("t_ms".into(), json!(sample_ms(r.pf_rx_bytes[0].len()))),
        ("reordered".into(), json!(r.reordered)),
        ("lost".into(), json!(r.lost)),
    ]))
}
