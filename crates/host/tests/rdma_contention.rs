//! Server-side contention beside one-sided RDMA (docs/hardware.md §4 testbed): workers on
//! the region's lines (`rdma::workers`) and independent load threads (`rdma::load`).
//! Each test states the relation the mechanism implies, derived before running.

mod testbed;
use devices::rnic::Verb;
use host::rdma::agents::ServerAgents;
use host::rdma::bench::{self, BenchResult, BenchSpec, Mode};
use host::rdma::load::{IndependentLoad, LoadSpec, Placement, Residence, LOAD_THREADS};
use host::rdma::workers::{Mix, MrWorkers};
use sim::Time;
use testbed::{hosts, topo};

fn closed(verb: Verb, remote: bool) -> BenchSpec {
    BenchSpec {
        verb,
        bytes: 64,
        connections: 1,
        mtu: 256,
        max_rd_atomic: 1,
        server_remote: remote,
        mode: Mode::Closed {
            warmup: 100,
            ops: 300,
        },
    }
}

fn open(verb: Verb, remote: bool) -> BenchSpec {
    BenchSpec {
        verb,
        bytes: 64,
        connections: 8,
        mtu: 256,
        max_rd_atomic: 1,
        server_remote: remote,
        mode: Mode::Open {
            warmup: Time::from_us(1000),
            window: Time::from_us(250),
            windows: 2,
            depth: 128,
        },
    }
}

/// A closed-loop run with `workers` of `mix` on the region's node, and the workers after.
fn with_workers(verb: Verb, workers: u32, mix: Mix) -> (BenchResult, MrWorkers) {
    let t = topo();
    let (mut c, mut s) = hosts(&t);
    let spec = closed(verb, false);
    let node = s.node(false);
    let mut w = MrWorkers::new(&s, node, workers, mix, 3).unwrap();
    let r = bench::run_with_agents(
        &mut c,
        &mut s,
        spec,
        bench::RunOptions::default(),
        Some(&mut w as &mut dyn ServerAgents),
    )
    .unwrap();
    (r, w)
}

#[test]
fn an_rnic_read_of_a_line_a_worker_keeps_modifying_waits_for_the_snoop() {
    // One worker storing to the line: each READ finds it Modified in that worker's core
    // on the home socket and waits one local snoop (38 ns, the LLC hit of docs/hardware.md
    // §4); no other worker queues for the line. Loads leave a shared copy: no wait.
    let (quiet, _) = with_workers(Verb::Read, 0, Mix::Write);
    let (stored, _) = with_workers(Verb::Read, 1, Mix::Write);
    let (loaded, _) = with_workers(Verb::Read, 1, Mix::Read);
    let extra = stored.latency_ns - quiet.latency_ns;
    assert!((extra - 38.0).abs() < 2.0, "snoop added {extra:.1} ns");
    assert!(
        (loaded.latency_ns - quiet.latency_ns).abs() < 0.5,
        "{} vs {}",
        loaded.latency_ns,
        quiet.latency_ns
    );
    // More storing workers queue for the line ahead of the RNIC: longer still.
    let (many, _) = with_workers(Verb::Read, 16, Mix::Write);
    assert!(
        many.latency_ns > stored.latency_ns + 100.0,
        "{}",
        many.latency_ns
    );
}

#[test]
fn ownership_counters_add_up_to_the_rnics_accesses() {
    // Closed loop: counters start at time zero, so every operation is counted; a 64 B
    // aligned operation touches one line.
    let (r, w) = with_workers(Verb::Read, 4, Mix::Write);
    let c = w.counters;
    assert_eq!(c.device_lines, r.operations);
    // Only stores: every READ finds its line Modified and is snooped.
    assert_eq!(c.found_modified, c.device_lines);
    assert_eq!(w.lines.counters.device_read_snoops, c.device_lines);
    // WRITEs invalidate the stored line each time; the next store takes ownership again.
    let (r, w) = with_workers(Verb::Write, 1, Mix::Write);
    assert_eq!(w.counters.device_lines, r.operations);
    assert_eq!(w.lines.counters.device_invalidations, r.operations);
    assert_eq!(w.lines.counters.ownership_takes, r.operations);
    assert_eq!(w.lines.counters.store_hits, 0);
}

#[test]
fn a_run_alone_never_reserves_memory_before_the_time_it_promised() {
    // The run tells its hosts' memory systems its time before each event, so they may
    // forget the past; a reservation before that time would be placed differently than
    // with the past kept, and is counted. Workers' snoops and loads' streams included.
    let t = topo();
    let (mut c, mut s) = hosts(&t);
    let node = s.node(false);
    let mut w = MrWorkers::new(&s, node, 4, Mix::Write, 3).unwrap();
    let r = bench::run_with_agents(
        &mut c,
        &mut s,
        open(Verb::Write, false),
        bench::RunOptions::default(),
        Some(&mut w as &mut dyn ServerAgents),
    )
    .unwrap();
    assert!(r.operations > 1000, "{} operations", r.operations);
    assert_eq!((c.mem.late(), s.mem.late()), (0, 0));
    let (mut c, mut s) = hosts(&t);
    let spec = LoadSpec {
        threads: LOAD_THREADS,
        elems: 100_000_000,
        placement: Placement::BoundRemote,
    };
    let mut load = IndependentLoad::start(&mut s, spec).unwrap();
    bench::run_with_agents(
        &mut c,
        &mut s,
        open(Verb::Read, true),
        bench::RunOptions::default(),
        Some(&mut load as &mut dyn ServerAgents),
    )
    .unwrap();
    assert_eq!((c.mem.late(), s.mem.late()), (0, 0));
}

fn with_load(verb: Verb, remote: bool, placement: Placement, elems: u64) -> (f64, IndependentLoad) {
    let t = topo();
    let (mut c, mut s) = hosts(&t);
    let mut load = IndependentLoad::start(
        &mut s,
        LoadSpec {
            threads: LOAD_THREADS,
            elems,
            placement,
        },
    )
    .unwrap();
    let r = bench::run_with_agents(
        &mut c,
        &mut s,
        open(verb, remote),
        bench::RunOptions::default(),
        Some(&mut load as &mut dyn ServerAgents),
    )
    .unwrap();
    (r.throughput.unwrap().ops_per_s / 1e6, load)
}

#[test]
fn load_on_the_regions_node_slows_its_reads_and_load_elsewhere_does_not() {
    // Remote region (node 1): bound_remote threads load node 1's DRAM and sweep its LLC,
    // so READs of the pushed-out region go to loaded DRAM; bound_local threads touch
    // neither node 1's DRAM, its LLC nor the interconnect: no change at all.
    const BIG: u64 = 100_000_000;
    let (none, _) = with_load(Verb::Read, true, Placement::None, BIG);
    let (near, near_load) = with_load(Verb::Read, true, Placement::BoundRemote, BIG);
    let (far, _) = with_load(Verb::Read, true, Placement::BoundLocal, BIG);
    // A remote READ reads the home DRAM even for a cached line (home snoop), so the
    // push-out adds little; the loaded DRAM's queueing is what slows it.
    assert!(near < none, "bound_remote {near} vs none {none}");
    // The same rate, within one completion over the two windows: since the open loop's
    // WQEs are fetched by DMA, bound_local shifts the loop's phase by one operation
    // (4.174 vs 4.176 Mops here; over eight windows 4.1745 vs 4.175, still one), not
    // its rate — most likely a start-up access on the RNIC's node slowed by the load.
    let one_op = 1.0 / 500e-6 / 1e6;
    let close = |a: f64, b: f64| (a - b).abs() <= one_op * 1.001;
    assert!(
        close(far, none),
        "bound_local must not touch a remote region: {far} vs {none}"
    );
    assert!(near_load.pushed_out > 0);
    // The mirror image for a local region.
    let (none_l, _) = with_load(Verb::Read, false, Placement::None, BIG);
    let (near_l, _) = with_load(Verb::Read, false, Placement::BoundLocal, BIG);
    let (far_l, _) = with_load(Verb::Read, false, Placement::BoundRemote, BIG);
    assert!(near_l < 0.99 * none_l, "{near_l} vs {none_l}");
    assert!(close(far_l, none_l), "{far_l} vs {none_l}");
}

#[test]
fn small_working_sets_stay_in_caches_and_writes_keep_their_rate() {
    // 1e4 elements (80 KB a thread) fit the caches: no streams, no effect.
    let (none, _) = with_load(Verb::Read, false, Placement::None, 10_000);
    let (small, load) = with_load(Verb::Read, false, Placement::BoundLocal, 10_000);
    assert_eq!(small, none);
    assert!(
        matches!(load.residence[0], Residence::Llc(_)),
        "{:?}",
        load.residence
    );
    // WRITEs are bound by the RNIC's message rate and re-allocated by DDIO locally.
    let (w_none, _) = with_load(Verb::Write, false, Placement::None, 100_000_000);
    let (w_load, l) = with_load(Verb::Write, false, Placement::BoundLocal, 100_000_000);
    assert_eq!(w_load, w_none);
    assert_eq!(l.pushed_out, 0);
}

#[test]
fn bad_load_and_worker_settings_are_refused_with_the_reason() {
    let e = Placement::parse("bound").unwrap_err();
    assert!(
        e.contains("load `bound`") && e.contains("bound_remote"),
        "{e}"
    );
    let e = Mix::parse("w50").unwrap_err();
    assert!(e.contains("mix `w50`") && e.contains("w90"), "{e}");
    let t = topo();
    let (_, s) = hosts(&t);
    let e = MrWorkers::new(&s, 0, 49, Mix::Write, 1).unwrap_err();
    assert!(
        e.contains("workers 49") && e.contains("48 hardware threads"),
        "{e}"
    );
}
