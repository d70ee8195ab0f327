//! Faults at simulated times, with PCIe's semantics, seen in real bytes: a cable flap
//! drops the posted writes that met it (the far RAM keeps its old bytes there) and
//! answers reads with Unsupported Request (all-ones, counted); a crashed host's reads
//! complete with all-ones after the completion timeout; a cold restart clears memory.

use devices::{pattern_byte, DmaJob, DmaSpec, Op, Ops, Payload};
use fabric::faults::{FaultAction, FaultSpec, FaultTarget};
use fabric::{builtin, CableId, Fabric, FaultKind, HostId, Requester};
use sim::component::Sim;
use sim::faults::FaultInjector;
use sim::timed::TimedFabric;
use sim::Time;

const BYTES: u64 = 256 * 1024;
const FAR_OFFSET: u64 = 0x100_0000;

fn b2b() -> TimedFabric {
    let s = builtin::load_builtin("smartio_pxh830_b2b")
        .unwrap()
        .unwrap();
    TimedFabric::new(Fabric::from_scenario(s).unwrap(), 1).unwrap()
}

/// Host a's NTB DMA engine, and the bus address it uses for BYTES of host b's RAM.
fn engine_to_b(tf: &mut TimedFabric) -> (Requester, u64, HostId, u64) {
    let n = match tf.fabric.resolve("a.ntb").unwrap() {
        fabric::Endpoint::Node(n) => n,
        e => panic!("{e:?}"),
    };
    let who = Requester::Function(n);
    let (host, addr) = tf.fabric.resolve_address("b.ram", FAR_OFFSET).unwrap();
    let m = host::Hosts::with(&mut tf.fabric, |h, f| {
        h.dma_map_single(
            f,
            who,
            host::PhysAddr { host, addr },
            BYTES,
            host::DmaDirection::Bidirectional,
        )
    })
    .unwrap();
    (who, m.addr.0, host, addr)
}

fn spec() -> DmaSpec {
    DmaSpec {
        mps: 256,
        mrrs: 512,
        max_reads: 16,
        issue_ps_per_kib: 65_000, // ≈ 15.75 GB/s: a Gen3 x16 link
    }
}

fn cable_flap(at_us: u64, for_us: u64) -> Vec<FaultSpec> {
    vec![FaultSpec {
        name: Some("flap".into()),
        at_ps: at_us * 1_000_000,
        action: FaultAction::LinkDown,
        target_name: "a.ntb".into(),
        target: FaultTarget::Cables(vec![CableId(0)]),
        duration_ps: Some(for_us * 1_000_000),
    }]
}

/// Runs `job` beside an injector of `faults` from time 0; gives the job and the log.
fn run_with(
    tf: &mut TimedFabric,
    job: DmaJob,
    faults: &[FaultSpec],
) -> (DmaJob, Vec<(Time, String)>) {
    let mut sim = Sim::new();
    let inj = sim.add(FaultInjector::new(faults));
    sim.get_mut::<FaultInjector>(inj).unwrap().start(tf, inj);
    let id = sim.add(job);
    tf.net.wake_at(Time::ZERO, id);
    sim.run_until_finished(tf);
    // Let the injector's later changes happen too.
    sim.run_until_idle(tf);
    let log = sim.get::<FaultInjector>(inj).unwrap().log().to_vec();
    (sim.take::<DmaJob>(id).unwrap(), log)
}

#[test]
fn writes_that_meet_a_dead_cable_are_dropped_and_counted_and_the_rest_land() {
    let mut tf = b2b();
    let (who, bus, host, phys) = engine_to_b(&mut tf);
    let ram_node = 0;
    // The far RAM's old bytes: pattern 7 (b's CPU writes them; no cable involved).
    let old: Vec<u8> = (0..BYTES).map(|i| pattern_byte(7, i)).collect();
    tf.fabric.cpu_store(host, 0, phys, &old).unwrap();
    let job = DmaJob::ops(
        &mut tf,
        who,
        spec(),
        Op::Write { dst: bus },
        4096,
        Ops::Count(BYTES / 4096),
        BYTES / 4096,
    )
    .unwrap()
    .with_payload(Payload::Pattern(1));
    // The stream takes ≈ 20 µs; the cable is down from 5 to 9 µs.
    let (job, log) = run_with(&mut tf, job, &cable_flap(5, 4));
    let s = job.stats().clone();
    assert_eq!(log.len(), 2, "{log:?}");
    assert_eq!(log[0].0, Time::from_ps(5_000_000));
    assert!(
        log[0].1.starts_with("link down: cable a.ntb — b.ntb"),
        "{}",
        log[0].1
    );
    assert_eq!(log[1].0, Time::from_ps(9_000_000));
    assert!(
        job.outcome().end > Time::from_ps(9_000_000),
        "the stream outlives the flap"
    );
    let mut far = vec![0u8; BYTES as usize];
    let off = match tf
        .fabric
        .route(
            &fabric::Request {
                requester: Requester::Cpu { host, package: 0 },
                addr: phys,
                len: 1,
                access: fabric::Access::Read,
            },
            &mut fabric::Path::default(),
        )
        .unwrap()
    {
        fabric::Target::Ram { offset, .. } => offset,
        t => panic!("{t:?}"),
    };
    tf.fabric.peek_ram(host, ram_node, off, &mut far);
    // Every 256 B TLP landed whole or not at all.
    let mut dropped = Vec::new();
    for (k, chunk) in far.chunks(256).enumerate() {
        let base = k as u64 * 256;
        let new = chunk
            .iter()
            .enumerate()
            .all(|(i, &b)| b == pattern_byte(1, base + i as u64));
        let kept = chunk == &old[k * 256..(k + 1) * 256];
        assert!(new ^ kept, "TLP {k} is partly written");
        if kept {
            dropped.push(k);
        }
    }
    assert!(!dropped.is_empty(), "the flap dropped writes");
    assert_eq!(
        s.writes_dropped,
        dropped.len() as u64,
        "one count per TLP that tried"
    );
    assert_eq!(s.faults, s.writes_dropped);
    // The writes issued in order: those that met the dead link are one run of TLPs,
    // with writes that landed before it and after it.
    let (first, last) = (dropped[0], *dropped.last().unwrap());
    assert_eq!(
        last - first + 1,
        dropped.len(),
        "dropped TLPs are contiguous"
    );
    assert!(first > 0 && last < far.len() / 256 - 1);
    // Most drops happened at the cable's hop; the network counted them there.
    let hop = tf.net.failures().writes_dropped;
    assert!(hop > 0 && hop <= s.writes_dropped, "{hop} at the hop");
    // Bytes delivered exclude the dropped ones: no silent rate.
    assert_eq!(s.bytes, BYTES - 256 * s.writes_dropped);
}

#[test]
fn reads_across_a_flap_return_all_ones_exactly_where_they_failed() {
    let mut tf = b2b();
    let (who, bus, host, phys) = engine_to_b(&mut tf);
    let data: Vec<u8> = (0..BYTES).map(|i| pattern_byte(3, i)).collect();
    tf.fabric.cpu_store(host, 0, phys, &data).unwrap();
    let job = DmaJob::ops(
        &mut tf,
        who,
        spec(),
        Op::Read { src: bus },
        4096,
        Ops::Count(BYTES / 4096),
        BYTES / 4096,
    )
    .unwrap()
    .capturing();
    let (job, _) = run_with(&mut tf, job, &cable_flap(5, 4));
    let s = job.stats().clone();
    let got = job.captured().unwrap();
    let mut ones = 0;
    for (k, chunk) in got.chunks(512).enumerate() {
        let want = &data[k * 512..(k + 1) * 512];
        if chunk.iter().all(|&b| b == 0xFF) {
            ones += 1;
        } else {
            assert_eq!(chunk, want, "read {k}: real bytes where it did not fail");
        }
    }
    assert!(ones > 0, "the flap failed reads");
    assert_eq!(
        s.ur_completions, ones,
        "one UR per read answered with all-ones"
    );
    let f = tf.net.failures();
    assert!(f.reads_unsupported > 0, "requests met the dead link: {f:?}");
    // Each failed read met the dead link, lost its completions on it, or — its data
    // past the cable before the link died, arriving after — was refused by the route
    // when its bytes were taken (a TLP's flight time at the edge of the flap).
    let at_hop = f.reads_unsupported + f.reads_timed_out;
    assert!(
        at_hop <= ones && ones - at_hop <= 4,
        "{f:?}, {ones} all-ones"
    );
    assert_eq!(s.bytes, BYTES - 512 * ones);
}

#[test]
fn a_crashed_hosts_reads_complete_as_ur_after_the_completion_timeout_and_restart_is_cold() {
    let mut tf = b2b();
    let (who, bus, host, phys) = engine_to_b(&mut tf);
    let data: Vec<u8> = (0..BYTES).map(|i| pattern_byte(5, i)).collect();
    tf.fabric.cpu_store(host, 0, phys, &data).unwrap();
    let timeout = tf.net.completion_timeout();
    assert_eq!(
        timeout,
        Time::from_ps(50_000_000_000),
        "the platform's 50 ms"
    );
    let job = DmaJob::ops(
        &mut tf,
        who,
        spec(),
        Op::Read { src: bus },
        4096,
        Ops::Count(BYTES / 4096),
        BYTES / 4096,
    )
    .unwrap()
    .capturing();
    let crash_at = Time::from_ps(5_000_000);
    let crash = vec![FaultSpec {
        name: None,
        at_ps: crash_at.as_ps(),
        action: FaultAction::HostCrash,
        target_name: "b".into(),
        target: FaultTarget::Host(host),
        duration_ps: None,
    }];
    let (job, log) = run_with(&mut tf, job, &crash);
    assert_eq!(log.len(), 1);
    assert!(log[0].1.starts_with("host `b` crashed"), "{}", log[0].1);
    let s = job.stats().clone();
    let f = tf.net.failures();
    assert!(
        f.reads_timed_out > 0,
        "reads in flight lost their completions: {f:?}"
    );
    assert!(
        f.reads_unsupported > 0,
        "later reads met the dead adapter: {f:?}"
    );
    assert!(s.ur_completions >= f.reads_timed_out + f.reads_unsupported);
    // Timed-out reads were issued before the crash and within a round trip of it; they
    // end exactly one completion timeout after their issue.
    let end = job.outcome().end;
    assert!(end <= crash_at + timeout, "{end:?}");
    assert!(
        end >= crash_at + timeout - Time::from_ps(5_000_000),
        "{end:?}"
    );
    let got = job.captured().unwrap();
    assert!(got.chunks(512).any(|c| c.iter().all(|&b| b == 0xFF)));
    assert_eq!(&got[..512], &data[..512], "reads before the crash got data");
    // DMA into the crashed host faults, named in the fabric's words.
    let e = DmaJob::new(&mut tf, who, spec(), Op::Write { dst: bus }, 64)
        .err()
        .expect("refused");
    assert_eq!(e.kind, FaultKind::HostDown { host });
    assert_eq!(
        fabric::describe::fault_kind_text(&tf.fabric.topo, e.kind),
        "host `b` is down"
    );
    // A cold restart: b's memory is gone, the cable is live again.
    tf.restart_host(host);
    let mut buf = [0u8; 64];
    tf.fabric.cpu_load(host, 0, phys, &mut buf).unwrap();
    assert_eq!(buf, [0u8; 64], "memory lost in the crash");
    let t = devices::timed_write(&mut tf, who, bus, &[9; 64]).unwrap();
    assert!(t > Time::ZERO);
    tf.fabric.cpu_load(host, 0, phys, &mut buf).unwrap();
    assert_eq!(buf, [9u8; 64]);
}

#[test]
fn a_cpu_load_over_a_dead_link_gets_all_ones_and_the_fault_names_the_cable() {
    let mut tf = b2b();
    let (_, _, host_b, phys) = engine_to_b(&mut tf);
    let cpu = Requester::Cpu {
        host: HostId(0),
        package: 0,
    };
    let m = host::Hosts::with(&mut tf.fabric, |h, f| {
        h.dma_map_single(
            f,
            cpu,
            host::PhysAddr {
                host: host_b,
                addr: phys,
            },
            4096,
            host::DmaDirection::Bidirectional,
        )
    })
    .unwrap();
    tf.set_cable_up(CableId(0), false);
    let mut buf = [0u8; 8];
    let e = tf.fabric.load(cpu, m.addr.0, &mut buf).unwrap_err();
    assert_eq!(buf, [0xFF; 8]);
    assert_eq!(e.kind, FaultKind::LinkDown { cable: CableId(0) });
    assert_eq!(
        fabric::describe::fault_kind_text(&tf.fabric.topo, e.kind),
        "link down: cable a.ntb — b.ntb"
    );
}

#[test]
fn a_random_campaign_is_the_same_for_a_seed_and_differs_for_another() {
    let tf = b2b();
    let c = |seed| sim::faults::Campaign {
        seed,
        from_ps: 0,
        to_ps: 1_000_000_000,
        count: 12,
        adapters: vec!["a.ntb".into()],
        hosts: vec!["b".into()],
        longest_ps: None,
        replug_within_ps: None,
    };
    let one = sim::faults::campaign(&tf.fabric.topo, &c(42)).unwrap();
    assert_eq!(one, sim::faults::campaign(&tf.fabric.topo, &c(42)).unwrap());
    assert_ne!(one, sim::faults::campaign(&tf.fabric.topo, &c(43)).unwrap());
    assert_eq!(one.len(), 12);
    assert!(
        one.windows(2).all(|w| w[0].at_ps <= w[1].at_ps),
        "in time order"
    );
    assert!(one.iter().all(|f| f.at_ps < 1_000_000_000));
    assert!(one.iter().any(|f| f.action == FaultAction::LinkDown));
    assert!(sim::faults::campaign(
        &tf.fabric.topo,
        &sim::faults::Campaign {
            adapters: vec!["nope.ntb".into()],
            ..c(1)
        }
    )
    .unwrap_err()
    .contains("nope.ntb"));
}

#[test]
fn a_campaign_bounds_its_flaps_and_replugs_each_pull_after_it() {
    let tf = b2b();
    let c = sim::faults::Campaign {
        seed: 5,
        from_ps: 0,
        to_ps: 1_000_000_000,
        count: 200,
        adapters: vec!["a.ntb".into()],
        hosts: vec!["b".into()],
        longest_ps: Some(2_000_000),
        replug_within_ps: Some(30_000_000),
    };
    let all = sim::faults::campaign(&tf.fabric.topo, &c).unwrap();
    let of = |a: FaultAction| all.iter().filter(move |f| f.action == a);
    assert_eq!(all.len() - of(FaultAction::LinkUp).count(), 200);
    assert!(of(FaultAction::CablePull).count() > 10);
    assert!(all
        .iter()
        .all(|f| f.duration_ps.is_none_or(|d| d <= 2_000_000)));
    for pull in of(FaultAction::CablePull) {
        let name = format!("{} re-plugged", pull.name.as_deref().unwrap());
        let up = all
            .iter()
            .find(|f| f.name.as_deref() == Some(name.as_str()))
            .unwrap_or_else(|| panic!("{name} missing"));
        assert_eq!(up.action, FaultAction::LinkUp);
        assert_eq!(up.target, pull.target);
        assert!(up.at_ps > pull.at_ps && up.at_ps <= pull.at_ps + 30_000_000);
    }
    assert!(all.windows(2).all(|w| w[0].at_ps <= w[1].at_ps));
    let e = sim::faults::campaign(
        &tf.fabric.topo,
        &sim::faults::Campaign {
            replug_within_ps: Some(10),
            ..c
        },
    )
    .unwrap_err();
    assert!(e.contains("re-plug"), "{e}");
}
