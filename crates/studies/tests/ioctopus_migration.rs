//! `ioctopus.migration`'s mechanism: the receiving process moves from socket 0 to
//! socket 1 mid-stream (docs/hardware.md §1 testbed).

use devices::nic::SteeringMode;
use fabric::{builtin, Fabric, Topology};
use host::net::migration::{MigrationResult, MigrationSpec, Move, RxQueue};
use host::net::{stream, NetHost};
use sim::Time;
use studies::ioctopus::migration::{self, Migrated};
use systems::ioctopus::team::{Rule, TeamTiming};

/// `ioctopus.migration`'s timeline: the move at 45 ms of a 100 ms run, 1 ms samples, from
/// socket 0's queue 0 to socket 1's queue 1.
const MOVE_AT: Time = Time::from_us(45_000);
const RUN: Time = Time::from_us(100_000);
const SAMPLE: Time = Time::from_us(1000);

fn topo() -> Topology {
    let s = builtin::load_builtin("ioctopus_r730").unwrap().unwrap();
    Fabric::from_scenario(s).unwrap().topo
}

fn migrate(mode: SteeringMode) -> Migrated {
    let t = topo();
    let mut c = NetHost::new(&t, t.host_by_name("client").unwrap(), "nic", 0, 0, 0).unwrap();
    c.lro = true;
    let mut s = NetHost::new(&t, t.host_by_name("server").unwrap(), "nic", 0, 0, 0).unwrap();
    let spec = MigrationSpec {
        stream: stream::StreamSpec {
            msg_bytes: 65536,
            mtu: 1500,
            warmup: Time::ZERO,
            window: RUN,
        },
        mv: Move {
            at: MOVE_AT,
            to_socket: 1,
            to_queue: RxQueue { index: 1, node: 1 },
        },
        from_queue: RxQueue { index: 0, node: 0 },
        sample: SAMPLE,
    };
    migration::run_spec(&mut c, &mut s, mode, spec).unwrap()
}

/// A thread that never moves: receive from `pf` with the core and memory on `socket`.
fn steady(pf: usize, socket: u32) -> f64 {
    let t = topo();
    let mut c = NetHost::new(&t, t.host_by_name("client").unwrap(), "nic", 0, 0, 0).unwrap();
    c.lro = true;
    let mut s = NetHost::new(
        &t,
        t.host_by_name("server").unwrap(),
        "nic",
        pf,
        socket,
        socket,
    )
    .unwrap();
    let spec = stream::StreamSpec {
        msg_bytes: 65536,
        mtu: 1500,
        warmup: Time::from_us(5000),
        window: Time::from_us(20_000),
    };
    stream::run(&mut c, &mut s, spec).unwrap().throughput_gbps
}

fn sample(t: Time) -> usize {
    (t.as_ps() / SAMPLE.as_ps()) as usize
}

/// Mean Gb/s over all PFs in the samples from 10 ms after the move to the end.
fn after(m: &Migrated) -> f64 {
    let r: &MigrationResult = &m.result;
    let (from, to) = (MOVE_AT + Time::from_us(10_000), RUN);
    let bytes: u64 = r
        .pf_rx_bytes
        .iter()
        .map(|v| v[sample(from)..sample(to)].iter().sum::<u64>())
        .sum();
    bytes as f64 * 8.0 / (to - from).as_secs_f64() / 1e9
}

#[test]
fn with_the_octonic_or_linux_multipf_rx_moves_to_the_pf_local_to_the_new_core_at_the_local_rate() {
    // Linux's multi-PF netdev retargets the primary PF's ARFS rule to a channel of PF 1.
    for mode in [SteeringMode::OctoNic, SteeringMode::LinuxMultiPf] {
        let m = migrate(mode);
        let r = &m.result;
        let settled = sample(MOVE_AT) + 2;
        // Before the move everything enters PF 0; once the worker's rule is in, PF 1.
        assert!(r.pf_rx_bytes[1][..sample(MOVE_AT)].iter().all(|&b| b == 0));
        assert!(
            r.pf_rx_bytes[0][settled..].iter().all(|&b| b == 0),
            "{:?}",
            r.pf_rx_bytes[0]
        );
        assert!(r.pf_rx_bytes[1][settled..].iter().all(|&b| b > 0));
        let local = steady(1, 1);
        let a = after(&m);
        assert!(
            (a / local - 1.0).abs() < 0.02,
            "{mode:?}: after {a} vs local {local}"
        );
        assert_eq!((r.reordered, r.lost), (0, 0));
        assert_eq!(r.stream.out_of_order, 0);
        // The flow's ACKs follow the thread to PF 1, switching once.
        assert_eq!(m.driver.tx_switches, 1);
        assert!(m.driver.tx_per_pf[1] > 0);
    }
}

#[test]
fn with_a_standard_nic_rx_stays_on_the_old_pf_at_the_remote_rate() {
    let m = migrate(SteeringMode::Standard);
    let r = &m.result;
    assert!(r.pf_rx_bytes[1].iter().all(|&b| b == 0));
    assert!(r.pf_rx_bytes[0][sample(MOVE_AT) + 2..]
        .iter()
        .all(|&b| b > 0));
    // Remote: PF 0 on socket 0 writing the rings of a core on socket 1.
    let remote = steady(0, 1);
    let local = steady(1, 1);
    let a = after(&m);
    assert!(
        (a / remote - 1.0).abs() < 0.02,
        "after {a} vs remote {remote}"
    );
    assert!(a < local * 0.9, "after {a} vs local {local}");
    assert_eq!((r.reordered, r.lost, r.stream.out_of_order), (0, 0, 0));
    assert_eq!(m.driver.tx_switches, 0);
}

#[test]
fn the_rule_changes_once_per_migration_and_the_stale_one_expires_after_the_idle_time() {
    // The driver's waits are the server platform's (`flow_rule_update_ns`, `_expiry_ns`).
    let t = topo();
    let server = t.host_by_name("server").unwrap();
    let timing = TeamTiming::of(t.platform_of(server).netstack.as_ref().unwrap());
    for mode in [
        SteeringMode::OctoNic,
        SteeringMode::Standard,
        SteeringMode::LinuxMultiPf,
    ] {
        let m = migrate(mode);
        assert_eq!(m.result.callbacks, 1, "{mode:?}");
        assert_eq!(m.driver.rule_updates, 1, "{mode:?}");
        match mode {
            SteeringMode::OctoNic => {
                // PF 0's ARFS entry: last hit just before the update, gone an idle time later.
                let [(at, rule)] = m.driver.expired[..] else {
                    panic!("{:?}", m.driver.expired)
                };
                assert_eq!(rule, Rule::Arfs(0));
                let lo = MOVE_AT + timing.rule_update + timing.idle_expiry;
                assert!(at >= lo && at < lo + Time::from_us(1000), "{at:?}");
                assert_eq!(m.driver.rules(), vec![Rule::Mpfs, Rule::Arfs(1)]);
            }
            SteeringMode::Standard | SteeringMode::LinuxMultiPf => {
                // The one rule (in the netdev's or the primary PF's table) is retargeted in
                // place and stays hit.
                assert!(m.driver.expired.is_empty());
                assert_eq!(m.driver.rules(), vec![Rule::Arfs(0)]);
            }
        }
    }
}

#[test]
fn the_same_run_gives_the_same_timeline() {
    let a = migrate(SteeringMode::OctoNic).result;
    let b = migrate(SteeringMode::OctoNic).result;
    assert_eq!(a.pf_rx_bytes, b.pf_rx_bytes);
}
