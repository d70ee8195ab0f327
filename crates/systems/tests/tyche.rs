//! Tyche's mechanisms (docs/hardware.md §3) on two dual-socket hosts with six Myricom NICs,
//! three under each package's root: bytes arrive intact, affinity keeps data off the
//! interconnect, round-robin does not, counters agree with the traffic generated.

use devices::nic::CoalesceMode;
use fabric::scenario::Source;
use fabric::{builtin, Fabric, Topology};
use sim::Time;
use systems::tyche::{
    self, App, AppKind, BufferPlacement, Op, Place, RxPath, Scheduler, TargetIo, TycheHost,
    TycheSpec,
};

fn nic(name: &str, root: &str) -> String {
    format!(
        "[[host.device]]\nname = \"{name}\"\ndevice_model = \"myri10ge\"\nparent = \"{root}\"\n"
    )
}

fn topo() -> Topology {
    let mut text = String::from(
        "include = [\"platforms/r730.toml\", \"platforms/devices.toml\"]\n[scenario]\nname = \"t\"\n",
    );
    for host in ["initiator", "target"] {
        text += &format!("[[host]]\nname = \"{host}\"\nplatform = \"r730\"\n");
        for i in 0..6 {
            text += &nic(&format!("nic{i}"), if i < 3 { "rc0" } else { "rc1" });
        }
    }
    let s = builtin::load_source(Source {
        name: "t.toml".into(),
        text,
    })
    .unwrap();
    Fabric::from_scenario(s).unwrap().topo
}

const NICS: [&str; 6] = ["nic0", "nic1", "nic2", "nic3", "nic4", "nic5"];

fn hosts(t: &Topology) -> (TycheHost, TycheHost) {
    let h = |n| TycheHost::new(t, t.host_by_name(n).unwrap(), &NICS).unwrap();
    (h("initiator"), h("target"))
}

fn spec(op: Op, app: App, place: Place, scheduler: Scheduler) -> TycheSpec {
    TycheSpec {
        op,
        req_bytes: 128 << 10,
        frame_bytes: 8192,
        app,
        channels: 6,
        initiator: place,
        target: place,
        scheduler,
        target_io: TargetIo::Ramdisk,
        rx: RxPath::default(),
        coalescing: tyche::rx::COALESCING,
        warmup: Time::from_us(300),
        window: Time::from_us(1500),
    }
}

fn zmio(threads: u32, placement: BufferPlacement) -> App {
    App {
        kind: AppKind::Zmio,
        threads,
        placement,
    }
}

fn run(s: &TycheSpec) -> tyche::TycheResult {
    let t = topo();
    let (mut i, mut g) = hosts(&t);
    tyche::run(&mut i, &mut g, s).unwrap()
}

const RX_PATHS: [RxPath; 3] = [RxPath::Polling, RxPath::NetworkThread, RxPath::Softirq];

#[test]
fn every_block_read_or_written_arrives_intact() {
    for (op, rx) in [Op::Read, Op::Write]
        .into_iter()
        .flat_map(|op| RX_PATHS.map(|rx| (op, rx)))
    {
        for (place, sched) in [
            (Place::NicLocal, Scheduler::Numa),
            (Place::Node(0), Scheduler::RoundRobin),
        ] {
            let mut s = spec(op, zmio(8, BufferPlacement::Balanced), place, sched);
            s.rx = rx;
            let r = run(&s);
            assert!(
                r.verified > 50,
                "{op:?}: only {} blocks compared",
                r.verified
            );
            assert_eq!(
                r.mismatches, 0,
                "{op:?} {place:?} {rx:?}: blocks arrived wrong"
            );
            assert_eq!(r.verified, r.requests_total);
        }
    }
}

#[test]
fn full_affinity_moves_nothing_across_the_interconnect_and_nics_write_their_own_node() {
    // Whichever context takes the frames: with the NUMA extension the interrupted core,
    // the network thread and the work queue are all on the NIC's node.
    for (op, rx) in [Op::Read, Op::Write]
        .into_iter()
        .flat_map(|op| RX_PATHS.map(|rx| (op, rx)))
    {
        let mut s = spec(
            op,
            zmio(8, BufferPlacement::Affine),
            Place::NicLocal,
            Scheduler::Numa,
        );
        s.rx = rx;
        let r = run(&s);
        assert!(
            r.throughput_gbps > 1.0,
            "{op:?}: {:.2} GB/s",
            r.throughput_gbps
        );
        assert_eq!(r.off_node_requests, 0);
        assert_eq!(
            r.interconnect_bytes[0], 0,
            "{op:?} {rx:?}: initiator QPI {:?}",
            r.qpi_gbps
        );
        assert!(r.nic_rx_bytes > 0);
        assert_eq!(r.nic_rx_off_node_bytes, 0, "{op:?}");
    }
}

#[test]
fn round_robin_moves_request_data_across_the_interconnect() {
    let r = run(&spec(
        Op::Read,
        zmio(8, BufferPlacement::Affine),
        Place::NicLocal,
        Scheduler::RoundRobin,
    ));
    assert!(r.off_node_requests > 0);
    // Half the requests are copied between a slot and a buffer on different nodes: the
    // copy's reads for ownership cross (lines the copying core's LLC still holds from
    // the buffer's last use do not), never more than all the data twice.
    let data = r.requests * (128 << 10);
    assert!(
        r.interconnect_bytes[0] >= data / 8 && r.interconnect_bytes[0] <= 2 * data + data / 2,
        "{} bytes crossed for {data} bytes of requests",
        r.interconnect_bytes[0]
    );
}

#[test]
fn interconnect_counters_add_up_to_the_dma_that_crossed() {
    // Everything on node 1 with the NICs of node 0 in use: all CPU work but the NICs'
    // interrupts (delivered on node 0) is local to node 1, so every interconnect byte is
    // DMA between a NIC and node 1's memory or an interrupt handler's and wake-up's line
    // transfers, which the control ledger counts apart.
    for op in [Op::Read, Op::Write] {
        let mut s = spec(
            op,
            zmio(4, BufferPlacement::Node(1)),
            Place::Node(1),
            Scheduler::RoundRobin,
        );
        s.channels = 3;
        s.target_io = TargetIo::NoOp;
        let r = run(&s);
        assert!(r.dma_cross_bytes[0] > 0);
        let total = |h: usize| r.dma_cross_bytes[h] + r.control_cross_bytes[h];
        assert_eq!(r.interconnect_bytes, [total(0), total(1)], "{op:?}");
        assert_eq!(r.nic_rx_off_node_bytes, r.nic_rx_bytes, "{op:?}");
    }
}

#[test]
fn the_numa_scheduler_balances_kilobytes_over_a_nodes_channels() {
    let r = run(&spec(
        Op::Read,
        zmio(8, BufferPlacement::Affine),
        Place::NicLocal,
        Scheduler::Numa,
    ));
    for node in [0..3, 3..6] {
        let kb = &r.channel_kb[node];
        let (lo, hi) = (kb.iter().min().unwrap(), kb.iter().max().unwrap());
        assert!(*lo > 0 && hi - lo <= 128, "{kb:?}");
    }
}

#[test]
fn same_spec_same_result() {
    let s = spec(
        Op::Read,
        zmio(4, BufferPlacement::Balanced),
        Place::NicLocal,
        Scheduler::NumaSpill,
    );
    let (a, b) = (run(&s), run(&s));
    assert_eq!(a.requests_total, b.requests_total);
    assert_eq!(a.interconnect_bytes, b.interconnect_bytes);
    assert_eq!(a.throughput_gbps, b.throughput_gbps);
}

#[test]
fn strict_numa_routing_of_skewed_writes_loads_one_nodes_nics_and_spilling_helps() {
    // zmIO's writes: 99 % of the buffers on node 0. The NUMA scheduler keeps each on its
    // node, so node 0's three ports carry more than any of node 1's, whose few buffers
    // cycle fast on idle channels (closed loop). A port's counter includes the frames
    // already booked beyond the run's end (16 slots a channel), so no rate bound here.
    let skew = BufferPlacement::Skewed { node0: 0.99 };
    let sp = spec(Op::Write, zmio(16, skew), Place::NicLocal, Scheduler::Numa);
    let t = topo();
    let (mut i, mut g) = hosts(&t);
    let r = tyche::run(&mut i, &mut g, &sp).unwrap();
    assert_eq!(r.off_node_requests, 0);
    let wire: Vec<u64> = i.nics.iter().map(|n| n.tx_port.bytes).collect();
    let least0 = wire[..3].iter().min().unwrap();
    assert!(wire[3..].iter().all(|w| w < least0), "{wire:?}");
    // Spilling puts node 1's idle channels to work.
    let mut ss = sp.clone();
    ss.scheduler = Scheduler::NumaSpill;
    let s = run(&ss);
    assert!(s.off_node_requests > 0);
    assert!(
        s.throughput_gbps > 1.2 * r.throughput_gbps,
        "{:.2} vs {:.2}",
        s.throughput_gbps,
        r.throughput_gbps
    );
}

#[test]
fn on_the_dual_hub_testbed_full_affinity_keeps_the_processor_link_idle() {
    let s = builtin::load_builtin("tyche_6nic").unwrap().unwrap();
    let t = Fabric::from_scenario(s).unwrap().topo;
    let (mut i, mut g) = hosts(&t);
    let r = tyche::run(
        &mut i,
        &mut g,
        &spec(
            Op::Read,
            zmio(8, BufferPlacement::Affine),
            Place::NicLocal,
            Scheduler::Numa,
        ),
    )
    .unwrap();
    assert_eq!(r.mismatches, 0);
    assert!(r.throughput_gbps > 1.0);
    for (link, gbps) in &r.qpi_gbps {
        if link.starts_with("pkg") && link.contains("→pkg") {
            assert_eq!(*gbps, 0.0, "{link}: {:?}", r.qpi_gbps);
        }
    }
    assert_eq!(r.qpi0_share, Some(0.0));
    assert_eq!(r.nic_rx_off_node_bytes, 0);
}

/// Without affinity Tyche's threads all run on node 0's cores, which then do the whole
/// host's protocol work; with round-robin channels the slot-to-buffer copies cross the
/// processor link and cost more core time per byte than ideal's local ones.
#[test]
fn without_affinity_node_0_cores_do_all_the_work_and_remote_copies_cost_more_core_time() {
    let s = builtin::load_builtin("tyche_6nic").unwrap().unwrap();
    let t = Fabric::from_scenario(s).unwrap().topo;
    let run = |app: App, place: Place, sched: Scheduler| {
        let (mut i, mut g) = hosts(&t);
        tyche::run(&mut i, &mut g, &spec(Op::Read, app, place, sched)).unwrap()
    };
    let per_gb = |r: &tyche::TycheResult| r.cores_busy[0].iter().sum::<f64>() / r.throughput_gbps;

    // Application and Tyche all on node 0: node 1's cores do nothing, on either host.
    let worst = run(
        zmio(8, BufferPlacement::Node(0)),
        Place::Node(0),
        Scheduler::RoundRobin,
    );
    for host in &worst.cores_busy {
        assert_eq!(host.len(), 2, "{:?}", worst.cores_busy);
        assert!(host[0] > 0.5, "{:?}", worst.cores_busy);
        assert_eq!(host[1], 0.0, "{:?}", worst.cores_busy);
    }

    // Full affinity: both nodes' cores work; round-robin with the buffers split by
    // thread: copies across the processor link take more core time per byte.
    let ideal = run(
        zmio(8, BufferPlacement::Affine),
        Place::NicLocal,
        Scheduler::Numa,
    );
    let tynuma = run(
        zmio(8, BufferPlacement::Balanced),
        Place::NicLocal,
        Scheduler::RoundRobin,
    );
    assert!(
        ideal.cores_busy[0].iter().all(|&c| c > 0.2),
        "{:?}",
        ideal.cores_busy
    );
    assert!(
        per_gb(&tynuma) > 1.2 * per_gb(&ideal),
        "initiator core-seconds per GB: tynuma {:.3}, ideal {:.3}",
        per_gb(&tynuma),
        per_gb(&ideal)
    );
}

/// Without affinity node 0's memory carries the whole host's DMA and copies: how much
/// `worst` loses against `ideal` follows node 0's DRAM bandwidth, and with twice of it
/// `worst` reaches the NICs' rate.
#[test]
fn without_affinity_the_loss_follows_the_dram_bandwidth_of_node_0() {
    let s = builtin::load_builtin("tyche_6nic").unwrap().unwrap();
    let t = Fabric::from_scenario(s).unwrap().topo;
    let gbps = |dram_scale: f64, worst: bool| {
        let host = |n| {
            let mut h = TycheHost::new(&t, t.host_by_name(n).unwrap(), &NICS).unwrap();
            let mut p = h.mem.params().clone();
            p.dram_gbps *= dram_scale;
            h.mem = sim::memsys::MemSys::with_uncore(p, h.mem.uncore().clone()).unwrap();
            h
        };
        let (mut i, mut g) = (host("initiator"), host("target"));
        let mut s = if worst {
            spec(
                Op::Read,
                zmio(32, BufferPlacement::Skewed { node0: 0.75 }),
                Place::Node(0),
                Scheduler::RoundRobin,
            )
        } else {
            spec(
                Op::Read,
                zmio(32, BufferPlacement::Affine),
                Place::NicLocal,
                Scheduler::Numa,
            )
        };
        // The experiments' window: a short one still carries the start-up backlog.
        (s.warmup, s.window) = (Time::from_us(2000), Time::from_us(6000));
        tyche::run(&mut i, &mut g, &s).unwrap().throughput_gbps
    };
    let loss = |scale: f64| gbps(scale, false) / gbps(scale, true);
    let (scarce, platform, ample) = (loss(0.75), loss(1.0), loss(2.0));
    assert!(ample < 1.03, "twice the DRAM: ideal / worst {ample:.3}");
    assert!(
        platform > 1.1,
        "the platform's DRAM: ideal / worst {platform:.3}"
    );
    assert!(
        scarce > platform + 0.1,
        "three quarters of the DRAM: ideal / worst {scarce:.3} against {platform:.3}"
    );
}

#[test]
fn the_window_counts_every_completed_request_and_the_frames_that_carried_it() {
    for op in [Op::Read, Op::Write] {
        let s = spec(
            op,
            zmio(8, BufferPlacement::Balanced),
            Place::NicLocal,
            Scheduler::Numa,
        );
        let r = run(&s);
        assert_eq!(
            r.verified, r.requests_total,
            "{op:?}: one check per request"
        );
        assert!(r.requests > 0 && r.requests < r.requests_total, "{op:?}");
        // Requests are counted where they complete, frames where they arrive: every
        // completed request's frames arrived, and a request still in flight (at most the
        // application's threads × depth) has at most all of its own.
        let per = s.req_bytes / s.frame_bytes;
        let in_flight = (s.app.threads * s.app.depth()) as u64;
        assert!(
            r.frames_total >= r.requests_total * per
                && r.frames_total <= (r.requests_total + in_flight) * per,
            "{op:?}: {} frames for {} requests",
            r.frames_total,
            r.requests_total
        );
        // In the window the requests that started before it and those still open at its
        // end bound the difference.
        let diff = r.frames.abs_diff(r.requests * per);
        assert!(
            diff <= in_flight * per,
            "{op:?}: {} frames for {} requests in the window",
            r.frames,
            r.requests
        );
    }
}

fn node0_testbed() -> (Topology, [&'static str; 3]) {
    let s = builtin::load_builtin("tyche_node0").unwrap().unwrap();
    (
        Fabric::from_scenario(s).unwrap().topo,
        ["nic0", "nic1", "nic2"],
    )
}

#[test]
fn a_send_request_posted_from_the_far_package_reaches_the_nic_one_crossing_later() {
    // myri10ge posts send requests by PIO: the NIC behind node 0's hub sees one from a
    // node-1 core after the processor link too.
    let (t, nics) = node0_testbed();
    let h = TycheHost::new(&t, t.host_by_name("initiator").unwrap(), &nics).unwrap();
    let at = Time::from_us(1);
    let near = tyche::mem::pio_arrival(&h.mem, at, 0, &h.nics[0]);
    let far = tyche::mem::pio_arrival(&h.mem, at, 1, &h.nics[0]);
    assert!(near > at, "the hub is a link away from its own processor");
    assert_eq!(far - near, h.mem.uncore().latency(1, 0));
}

#[test]
fn with_the_nics_on_node_0_worst_placement_loses_nothing_while_the_links_have_headroom() {
    // tyche.nics_node0's prediction: 3 NICs, 32 FIO threads, reads. All on node 1, every
    // frame crosses hub → node 0 → node 1 and its CPU work stays local to node 1 (the
    // network threads poll: `RxPath::Polling`), so the NICs' line rate is reached as
    // long as the links carry it.
    let (t, nics) = node0_testbed();
    let run_at = |node: u32| {
        let h = |n| TycheHost::new(&t, t.host_by_name(n).unwrap(), &nics).unwrap();
        let (mut i, mut g) = (h("initiator"), h("target"));
        let app = App {
            kind: AppKind::Fio,
            threads: 32,
            placement: BufferPlacement::Node(node),
        };
        let mut s = spec(Op::Read, app, Place::Node(node), Scheduler::RoundRobin);
        s.channels = 3;
        s.target_io = TargetIo::NoOp;
        tyche::run(&mut i, &mut g, &s).unwrap()
    };
    let (ideal, worst) = (run_at(0), run_at(1));
    let link = |r: &tyche::TycheResult, l: &str| r.qpi_gbps[l];
    assert_eq!(link(&ideal, "pkg0→pkg1"), 0.0, "{:?}", ideal.qpi_gbps);
    // The data crosses the processor link once (give or take the requests open at the
    // window's ends), well under its 11.72 GB/s.
    let carried = link(&worst, "pkg0→pkg1");
    assert!(
        carried >= 0.9 * worst.throughput_gbps && carried < 0.5 * 11.72,
        "{:?}",
        worst.qpi_gbps
    );
    assert!(
        ideal.requests.abs_diff(worst.requests) <= 1,
        "ideal {} and worst {} requests in the window",
        ideal.requests,
        worst.requests
    );
}

/// tyche.nics_node0 over one NIC and `window`: everything on `node`, frames taken by
/// `rx` under the NIC's moderation `co`.
fn node0_fio(
    node: u32,
    threads: u32,
    op: Op,
    window: Time,
    rx: RxPath,
    co: CoalesceMode,
) -> tyche::TycheResult {
    node0_run(node, threads, op, 1, None, window, rx, co)
}

/// tyche.nics_node0 with FIO, Tyche and their memory on `node`, over `channels` of the
/// node-0 NICs, the target completing without I/O; `warmup` when given, else `spec`'s.
#[allow(clippy::too_many_arguments)]
fn node0_run(
    node: u32,
    threads: u32,
    op: Op,
    channels: usize,
    warmup: Option<Time>,
    window: Time,
    rx: RxPath,
    co: CoalesceMode,
) -> tyche::TycheResult {
    let (t, nics) = node0_testbed();
    let h = |n| TycheHost::new(&t, t.host_by_name(n).unwrap(), &nics).unwrap();
    let (mut i, mut g) = (h("initiator"), h("target"));
    let app = App {
        kind: AppKind::Fio,
        threads,
        placement: BufferPlacement::Node(node),
    };
    let mut s = spec(op, app, Place::Node(node), Scheduler::RoundRobin);
    s.channels = channels;
    s.target_io = TargetIo::NoOp;
    if let Some(w) = warmup {
        s.warmup = w;
    }
    s.window = window;
    s.rx = rx;
    s.coalescing = co;
    tyche::run(&mut i, &mut g, &s).unwrap()
}

#[test]
fn interrupts_wake_threads_across_nodes_only_when_they_sleep_on_the_far_node() {
    // NICs behind node 0's hub interrupt node 0's cores. With Tyche's threads on node 0
    // every wake-up stays on the package; with them on node 1 each interrupt's wake-up
    // of the network thread is an IPI across the processor link, and the handler's reads
    // of the ring and of the thread's runqueue cross it too.
    for op in [Op::Read, Op::Write] {
        let at = |node| {
            let (rx, co) = (RxPath::NetworkThread, CoalesceMode::Off);
            node0_fio(node, 1, op, Time::from_us(3000), rx, co)
        };
        let (ideal, worst) = (at(0), at(1));
        assert!(
            ideal.interrupts > 0 && ideal.wakeups > 0,
            "{op:?}: {ideal:?}"
        );
        assert_eq!(ideal.cross_wakeups, 0, "{op:?}");
        assert_eq!(ideal.control_cross_bytes, [0, 0], "{op:?}");
        assert!(worst.cross_wakeups > 0, "{op:?}");
        // Every interrupt of a sleeping network thread in worst crosses (its handler on
        // node 0, the thread on node 1): at least one per interrupt.
        assert!(
            worst.cross_wakeups >= worst.interrupts,
            "{op:?}: {} cross-node wake-ups for {} interrupts",
            worst.cross_wakeups,
            worst.interrupts
        );
        assert!(worst.control_cross_bytes[0] > 0 && worst.control_cross_bytes[1] > 0);
    }
}

#[test]
fn a_wake_up_across_nodes_costs_the_crossing_that_one_on_the_package_does_not() {
    // Waking a sleeping thread on the waker's core is the switch alone; on another core
    // of the package an IPI and the runqueue's lines; on the other package the IPI and
    // the lines cross the processor link, later by at least its latency.
    let (t, nics) = node0_testbed();
    let host = || TycheHost::new(&t, t.host_by_name("initiator").unwrap(), &nics).unwrap();
    let at = Time::from_us(10);
    let woken = |wakee: usize| {
        let mut h = host();
        let mut ledger = tyche::mem::DmaLedger::default();
        let w = tyche::wake::wake(&mut h, &mut ledger, at, 0, wakee);
        (w, ledger.control_cross)
    };
    let h = host();
    let (same, _) = woken(0);
    assert_eq!(same.runs, at + h.cores[0].cycles(h.costs.wakeup_cycles));
    let other_node = h.core_of(1, 0);
    let (near, near_bytes) = woken(h.core_of(0, 1));
    let (far, far_bytes) = woken(other_node);
    assert!(near.runs > same.runs && !near.cross && near_bytes == 0);
    assert!(far.cross && far_bytes > 0);
    assert!(
        far.runs >= near.runs + h.mem.uncore().latency(0, 1),
        "near {:?} far {:?}",
        near.runs,
        far.runs
    );
}

#[test]
fn moderation_signals_a_burst_of_frames_with_one_interrupt_and_polling_takes_none() {
    // One FIO thread reading 128 KiB over one NIC: 16 data frames a request. Without
    // moderation an interrupt comes whenever a frame finds the poll done; with myri10ge's
    // 75 µs delay one interrupt signals the frames of a whole stretch of the burst.
    let window = Time::from_us(3000);
    for rx in [RxPath::NetworkThread, RxPath::Softirq] {
        let off = node0_fio(0, 1, Op::Read, window, rx, CoalesceMode::Off);
        let delayed = node0_fio(0, 1, Op::Read, window, rx, CoalesceMode::Static);
        assert!(off.interrupts >= off.requests, "{rx:?}: {off:?}");
        assert!(
            4 * delayed.interrupts < delayed.frames,
            "{rx:?}: {} interrupts for {} frames",
            delayed.interrupts,
            delayed.frames
        );
        assert!(delayed.interrupts < off.interrupts, "{rx:?}");
        // Each request waits out the delay at both ends: fewer complete.
        assert!(delayed.requests < off.requests, "{rx:?}");
    }
    let polling = node0_fio(
        0,
        1,
        Op::Read,
        window,
        RxPath::Polling,
        CoalesceMode::Static,
    );
    assert_eq!((polling.interrupts, polling.wakeups), (0, 0));
    assert_eq!(RxPath::default(), RxPath::Polling);
}

/// tyche.nics_node0's read over three NICs: Tyche and FIO all on `node`.
fn node0_read(node: u32, threads: u32, rx: RxPath) -> tyche::TycheResult {
    let (warmup, window) = (Some(Time::from_us(2000)), Time::from_us(6000));
    node0_run(
        node,
        threads,
        Op::Read,
        3,
        warmup,
        window,
        rx,
        CoalesceMode::Off,
    )
}

#[test]
fn with_the_nics_on_node_0_the_softirq_copies_node_1_buffers_across_the_processor_link() {
    // Without the NUMA extension the receive softirq of node 0's core queues the
    // request's completion on its own core: the copy of a node-1 slot into a node-1
    // buffer reads every line across the processor link (pkg1→pkg0), which a network
    // thread on node 1 does not. At 4 threads that latency costs throughput against
    // everything on node 0.
    let ideal = node0_read(0, 4, RxPath::Softirq);
    let worst = node0_read(1, 4, RxPath::Softirq);
    let thread = node0_read(1, 4, RxPath::NetworkThread);
    let back = |r: &tyche::TycheResult| r.qpi_gbps["pkg1→pkg0"];
    assert_eq!(back(&ideal), 0.0, "{:?}", ideal.qpi_gbps);
    assert!(
        back(&worst) >= 0.9 * worst.throughput_gbps,
        "the copy's reads: {:?} at {:.2} GB/s",
        worst.qpi_gbps,
        worst.throughput_gbps
    );
    assert!(
        back(&thread) < 0.1 * thread.throughput_gbps,
        "{:?}",
        thread.qpi_gbps
    );
    assert!(
        worst.throughput_gbps < 0.95 * ideal.throughput_gbps,
        "worst {:.3} ideal {:.3} GB/s",
        worst.throughput_gbps,
        ideal.throughput_gbps
    );
    // Each request's completion wakes FIO's thread on node 1 from node 0.
    assert!(worst.cross_wakeups >= worst.requests && ideal.cross_wakeups == 0);
}

#[test]
fn a_node_the_hosts_do_not_have_is_refused_not_clamped() {
    let t = topo();
    for (place, buffers, what) in [
        (Place::Node(2), BufferPlacement::Balanced, "node 2: host"),
        (
            Place::NicLocal,
            BufferPlacement::Node(2),
            "buffers on node 2: host",
        ),
    ] {
        let (mut ini, mut tgt) = hosts(&t);
        let s = spec(Op::Read, zmio(8, buffers), place, Scheduler::Numa);
        let e = tyche::run(&mut ini, &mut tgt, &s).unwrap_err();
        assert!(e.starts_with(what) && e.ends_with("has 2 nodes"), "{e}");
    }
}
