//! Multipath failover (`smartio.failover` in docs/studies.md): a borrower with two NTB paths
//! to a lent P4800X loses its primary cable at 1 ms; no acknowledged write is lost, no
//! read-back byte differs, every I/O completes or is reported.

use fabric::faults::{FaultAction, FaultSpec, FaultTarget};
use fabric::{builtin, Fabric};
use sim::faults::{campaign, Campaign};
use sim::timed::TimedFabric;
use sim::Time;
use systems::smartio::failover::{
    failover_run_with, FailoverMode, FailoverPolicy, FailoverResult, FailoverRig, FailoverSetup,
};
use systems::smartio::nvme_dist::DistError;

fn tf() -> TimedFabric {
    let s = builtin::load_builtin("smartio_dual_path").unwrap().unwrap();
    TimedFabric::new(Fabric::from_scenario(s).unwrap(), 1).unwrap()
}

/// `failover_run_with` on `smartio_dual_path`'s names.
fn run_with(
    tf: &mut TimedFabric,
    mode: FailoverMode,
    ios: u64,
    seed: u64,
    faults: &[FaultSpec],
    policy: FailoverPolicy,
) -> Result<(FailoverResult, FailoverRig), DistError> {
    let setup = FailoverSetup::dual_path();
    failover_run_with(tf, &setup, mode, ios, seed, faults, policy)
}

/// The primary cable (`borrower.ntb0`) fails at 1 ms: pulled for good (`FailOver`), or
/// down for 1 ms (`Flap`, `Recreate`), as the catalog's `smartio.failover` writes it.
fn failover_run(
    tf: &mut TimedFabric,
    mode: FailoverMode,
    ios: u64,
    seed: u64,
) -> Result<FailoverResult, DistError> {
    let cables = fabric::faults::cables_at(&tf.fabric.topo, "borrower.ntb0").unwrap_or_default();
    let fault = FaultSpec {
        name: Some("primary".into()),
        at_ps: Time::from_us(1000).as_ps(),
        action: if mode == FailoverMode::FailOver {
            FaultAction::CablePull
        } else {
            FaultAction::LinkDown
        },
        target_name: "borrower.ntb0".into(),
        target: FaultTarget::Cables(cables),
        duration_ps: (mode != FailoverMode::FailOver).then_some(Time::from_us(1000).as_ps()),
    };
    run_with(tf, mode, ios, seed, &[fault], FailoverPolicy::default()).map(|(r, _)| r)
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
    let (r, _) = run_with(
        &mut tf(),
        FailoverMode::Flap,
        200,
        1,
        &[],
        FailoverPolicy::default(),
    )
    .unwrap();
    assert_eq!(r.ios_completed, 200, "{r:?}");
    assert_eq!((r.failovers, r.reissued, r.last_path), (0, 0, 0), "{r:?}");
    assert_eq!((r.acked_writes_lost, r.bytes_corrupted), (0, 0), "{r:?}");
}

fn cable_fault(t: &TimedFabric, adapter: &str, at_us: u64, down_us: Option<u64>) -> FaultSpec {
    FaultSpec {
        name: None,
        at_ps: Time::from_us(at_us).as_ps(),
        action: if down_us.is_some() {
            FaultAction::LinkDown
        } else {
            FaultAction::CablePull
        },
        target_name: adapter.into(),
        target: FaultTarget::Cables(fabric::faults::cables_at(&t.fabric.topo, adapter).unwrap()),
        duration_ps: down_us.map(|d| Time::from_us(d).as_ps()),
    }
}

/// The primary is pulled; the backup then flaps while it carries the I/O, so for a while
/// neither path works. The backup is resynced when its link is back and the controller
/// has posted its last completion — not a completion timeout (50 ms) later — and the
/// run finishes on it.
#[test]
fn a_flapped_path_resumes_when_the_controller_is_done_not_at_the_timeout() {
    let mut t = tf();
    let f = vec![
        cable_fault(&t, "borrower.ntb0", 1000, None),
        cable_fault(&t, "borrower.ntb1", 2000, Some(500)),
    ];
    let p = FailoverPolicy {
        pace: Time::from_us(20),
        ..FailoverPolicy::default()
    };
    let (r, _) = run_with(&mut t, FailoverMode::Flap, 400, 1, &f, p).unwrap();
    println!("both down {r:?} now {:?}", t.net.now());
    assert_eq!(r.ios_completed + r.ios_failed_reported, 400, "{r:?}");
    assert_eq!((r.acked_writes_lost, r.bytes_corrupted), (0, 0), "{r:?}");
    assert!(r.failovers >= 2 && r.resyncs >= 1, "{r:?}");
    assert_eq!(r.last_path, 1, "{r:?}");
    let lender = t.fabric.topo.host_by_name("lender").unwrap();
    let cto = Time::from_ns(t.timing_of(lender).completion_timeout_ns as u64);
    assert!(
        r.resyncs_before_timeout >= 1 && t.net.now() < cto,
        "resumed before the timeout: {r:?} at {:?}",
        t.net.now()
    );
}

/// The campaign issue 10 asks for, on the I/O side: hundreds of seeded faults — link
/// flaps of up to 2 ms and cable pulls re-plugged within 20 ms on both paths of a
/// borrower (so at times neither works), and crashes of the borrower itself, restarted
/// cold within 2 ms (it borrows again and gets new queue pairs) — during verified NVMe
/// I/O through the distributed driver's two queue pairs. Every acknowledged write is read
/// back and compared, before and after crashes; at the end every acknowledged block is
/// compared on the media. Totals in docs/performance.md.
#[test]
fn a_seeded_campaign_of_hundreds_of_faults_loses_no_acknowledged_byte() {
    let mut t = tf();
    let c = Campaign {
        seed: 10,
        from_ps: Time::from_us(200).as_ps(),
        to_ps: Time::from_us(1_500_000).as_ps(),
        count: 320,
        adapters: vec!["borrower.ntb0".into(), "borrower.ntb1".into()],
        hosts: vec!["borrower".into()],
        longest_ps: Some(Time::from_us(2000).as_ps()),
        replug_within_ps: Some(Time::from_us(20_000).as_ps()),
    };
    let faults = campaign(&t.fabric.topo, &c).unwrap();
    let drawn = |a: FaultAction| faults.iter().filter(|f| f.action == a).count();
    let (flaps, pulls, crashes) = (
        drawn(FaultAction::LinkDown),
        drawn(FaultAction::CablePull),
        drawn(FaultAction::HostCrash),
    );
    assert_eq!(flaps + pulls + crashes, 320);
    assert_eq!(
        drawn(FaultAction::LinkUp),
        pulls,
        "every pull is re-plugged"
    );
    // An open workload: one new I/O per 75 us, so the 1.5 s of faults cost idle time.
    let p = FailoverPolicy {
        pace: Time::from_us(75),
        ..FailoverPolicy::default()
    };
    let ios = 20_000;
    let (r, rig) = run_with(&mut t, FailoverMode::Flap, ios, 10, &faults, p).unwrap();
    let log = rig
        .sim
        .get::<sim::faults::FaultInjector>(rig.injector)
        .unwrap()
        .log()
        .to_vec();
    let applied = |w: &str| log.iter().filter(|(_, s)| s.contains(w)).count();
    let (downs, crashed) = (applied("link down"), applied("crashed"));
    println!(
        "I/O campaign: {} faults drawn ({flaps} flaps, {pulls} pulls re-plugged, {crashes} \
         borrower crashes), {downs} link-downs and {crashed} crashes applied in {:?} \
         simulated; {} I/Os: {} completed, {} failed with an error, {} reads verified, {} \
         acknowledged writes lost, {} bytes corrupted; {} failovers, {} resyncs ({} before \
         the completion timeout), {} I/Os re-issued, {} crashes survived ({} I/Os in \
         flight lost with the host and resubmitted)",
        flaps + pulls + crashes,
        t.net.now(),
        ios,
        r.ios_completed,
        r.ios_failed_reported,
        r.ios_verified,
        r.acked_writes_lost,
        r.bytes_corrupted,
        r.failovers,
        r.resyncs,
        r.resyncs_before_timeout,
        r.reissued,
        r.host_crashes,
        r.ios_lost_with_host
    );
    assert_eq!(r.acked_writes_lost, 0, "{r:?}");
    assert_eq!(r.bytes_corrupted, 0, "{r:?}");
    assert_eq!(r.ios_completed + r.ios_failed_reported, ios, "{r:?}");
    assert!(downs + crashed >= 300, "the run outlasted the faults");
    assert!(r.host_crashes >= 30, "{r:?}");
    assert!(r.ios_verified >= ios / 3, "{r:?}");
    assert!(r.failovers >= 50 && r.resyncs >= 50, "{r:?}");
}
