//! Multipath failover (EXPERIMENTS.md `smartio.failover`): a borrower with two NTB paths
//! to a lent P4800X loses its primary cable at 1 ms; no acknowledged write is lost, no
//! read-back byte differs, every I/O completes or is reported.

use fabric::faults::{FaultAction, FaultSpec, FaultTarget};
use fabric::{builtin, Fabric};
use sim::faults::{campaign, Campaign};
use sim::timed::TimedFabric;
use sim::Time;
use systems::smartio::failover::{
    failover_run, failover_run_with, FailoverMode, FailoverPolicy, FailoverResult,
};

fn tf() -> TimedFabric {
    let s = builtin::load_builtin("smartio_dual_path").unwrap().unwrap();
    TimedFabric::new(Fabric::from_scenario(s).unwrap(), 1).unwrap()
}

fn sound(r: &FailoverResult, ios: u64) {
    assert_eq!(r.acked_writes_lost, 0, "{r:?}");
    assert_eq!(r.bytes_corrupted, 0, "{r:?}");
    assert_eq!(r.ios_completed + r.ios_failed_reported, ios, "{r:?}");
    assert!(r.failovers >= 1, "the failure was detected: {r:?}");
    let bound = FailoverPolicy::default().deadline.as_ps() as f64 / 1e6 + 100.0;
    assert!(r.recovery_us > 0.0 && r.recovery_us < bound, "{r:?}");
}

#[test]
fn fail_over_finishes_on_the_backup_path() {
    let r = failover_run(&mut tf(), FailoverMode::FailOver, 1500, 1).unwrap();
    println!("fail_over {r:?}");
    sound(&r, 1500);
    assert_eq!(r.last_path, 1);
    assert!(r.completed_after_failure[1] > 0);
    assert_eq!(
        r.completed_after_failure[0], 0,
        "nothing completes on a pulled cable"
    );
}

#[test]
fn flap_resumes_on_the_primary() {
    let r = failover_run(&mut tf(), FailoverMode::Flap, 30000, 2).unwrap();
    println!("flap {r:?}");
    sound(&r, 30000);
    assert!(r.resyncs >= 1);
    assert_eq!(r.last_path, 0);
    assert!(r.completed_after_failure[0] > 0 && r.completed_after_failure[1] > 0);
    assert_eq!(r.primary_qids.0, r.primary_qids.1, "the old queue pair");
}

#[test]
fn recreate_gets_new_queues_and_windows() {
    let r = failover_run(&mut tf(), FailoverMode::Recreate, 10000, 3).unwrap();
    println!("recreate {r:?}");
    sound(&r, 10000);
    assert_eq!(r.recreates, 1);
    assert_eq!(r.last_path, 0);
    // The manager deleted qid 1 before creating the new pair, so the controller's lowest
    // free qid and the freed IOVA range come back: the pair and window are new objects
    // (a new borrow), not new numbers.
    assert!(
        r.completed_after_failure[0] > 0,
        "resumed on the recreated pair: {r:?}"
    );
}

#[test]
fn without_a_fault_every_io_completes_on_the_primary() {
    let (r, _) = failover_run_with(
        &mut tf(),
        FailoverMode::Flap,
        200,
        1,
        &[],
        FailoverPolicy::default(),
    )
    .unwrap();
    println!("nofault {r:?}");
    let _ = (FaultAction::LinkDown, Time::ZERO);
    let _: Option<FaultSpec> = None;
    let _: Option<FaultTarget> = None;
    let _: Option<Campaign> = None;
    let _ = campaign;
}

#[test]
fn a_short_flap_is_survived_without_loss() {
    let t = tf();
    let cables = fabric::faults::cables_at(&t.fabric.topo, "borrower.ntb0").unwrap();
    let f = vec![FaultSpec {
        name: None,
        at_ps: 20_000_000,
        action: FaultAction::LinkDown,
        target_name: "borrower.ntb0".into(),
        target: FaultTarget::Cables(cables),
        duration_ps: Some(300_000_000),
    }];
    let mut t = t;
    let (r, rig) = failover_run_with(
        &mut t,
        FailoverMode::Flap,
        400,
        1,
        &f,
        FailoverPolicy::default(),
    )
    .unwrap();
    println!("pull {r:?} now {:?}", t.net.now());
    let c = rig
        .sim
        .get::<devices::nvme::NvmeController>(rig.manager.controller)
        .unwrap();
    println!("{:?}", c.stats());
}

/// A seeded campaign of link flaps on both paths during 2,000 verified I/Os. Never both
/// down at once: pulls are dropped, and a flap is kept only if it starts after the other
/// cable's last kept flap ended plus the time its path needs to resync (a probe, the
/// drain, the lender's completion timeout) — so the other path is always usable.
#[test]
fn a_random_campaign_of_flaps_on_both_paths_loses_nothing() {
    let mut t = tf();
    let c = Campaign {
        seed: 7,
        from_ps: Time::from_us(200).as_ps(),
        to_ps: Time::from_us(4000).as_ps(),
        count: 24,
        adapters: vec!["borrower.ntb0".into(), "borrower.ntb1".into()],
        hosts: vec![],
    };
    let all = campaign(&t.fabric.topo, &c).unwrap();
    let p = FailoverPolicy::default();
    let cto = 50_000_000_000u64; // the platform's completion_timeout_ns, as picoseconds
    let settle = p.probe_every.as_ps() * 2 + p.drain.as_ps() + cto;
    let mut busy_until = [0u64; 2];
    let mut kept: Vec<FaultSpec> = Vec::new();
    for f in all {
        if f.action != FaultAction::LinkDown {
            continue;
        }
        let i = usize::from(f.target_name.ends_with("ntb1"));
        // The primary (the active path) is hit first; then each cable only while the
        // other has settled.
        if f.at_ps < busy_until[1 - i] || (i == 1 && busy_until[0] == 0) {
            continue;
        }
        let end = f.at_ps + f.duration_ps.unwrap() + settle;
        busy_until[i] = busy_until[i].max(end);
        kept.push(f);
    }
    assert!(kept.len() >= 2, "{kept:?}");
    let t0 = t.net.now();
    let (r, rig) = failover_run_with(&mut t, FailoverMode::Flap, 2000, 7, &kept, p).unwrap();
    let log = rig
        .sim
        .get::<sim::faults::FaultInjector>(rig.injector)
        .unwrap()
        .log()
        .to_vec();
    let downs = log
        .iter()
        .filter(|(_, s)| s.starts_with("link down"))
        .count();
    println!(
        "campaign: {} faults kept of {}, {downs} link-downs applied, from {t0:?} to {:?}, {:?} {r:?}",
        kept.len(),
        c.count,
        t.net.now(),
        kept.iter().map(|f| (f.target_name.clone(), f.at_ps / 1_000_000, f.duration_ps.unwrap() / 1_000_000)).collect::<Vec<_>>()
    );
    assert_eq!(r.acked_writes_lost, 0, "{r:?}");
    assert_eq!(r.bytes_corrupted, 0, "{r:?}");
    assert_eq!(r.ios_completed + r.ios_failed_reported, 2000, "{r:?}");
    assert!(r.ios_verified >= 900, "{r:?}");
}
