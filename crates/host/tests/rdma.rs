//! One-sided RDMA on the NUMA/RDMA study's testbed (docs/hardware.md §4): bytes, verbs
//! semantics, the outstanding-read limit and the NUMA relations the model must produce.

mod testbed;
use devices::rnic::Verb;
use host::rdma::bench::{self, BenchSpec, Mode, Rdma, RunOptions};
use host::rdma::{RdmaHost, Region};
use sim::Time;
use testbed::{hosts, topo};

/// A client region of zeros and a server region of a known pattern, 4 KiB each.
fn regions(c: &mut RdmaHost, s: &mut RdmaHost, remote: bool) -> (Region, Region) {
    let local = c.register(1, c.rnic_node(), 4096, 64, |_| 0).unwrap();
    let node = s.node(remote);
    let server = s
        .register(2, node, 4096, 64, |i| (i * 7 % 251) as u8)
        .unwrap();
    (local, server)
}

fn closed(verb: Verb, qps: u32, remote: bool) -> BenchSpec {
    BenchSpec {
        verb,
        bytes: 64,
        connections: qps,
        mtu: 256,
        max_rd_atomic: 1,
        server_remote: remote,
        mode: Mode::Closed {
            warmup: 200,
            ops: 200,
        },
    }
}

fn latency(verb: Verb, qps: u32, remote: bool) -> f64 {
    latency_with(verb, qps, remote, RunOptions::default())
}

fn latency_with(verb: Verb, qps: u32, remote: bool, opts: RunOptions) -> f64 {
    let t = topo();
    let (mut c, mut s) = hosts(&t);
    bench::run_with(&mut c, &mut s, closed(verb, qps, remote), opts)
        .unwrap()
        .latency_ns
}

#[test]
fn a_write_lands_intact_and_a_read_returns_the_servers_bytes() {
    let t = topo();
    let (mut c, mut s) = hosts(&t);
    let (mut local, server) = regions(&mut c, &mut s, true);
    let expect_read: Vec<u8> = server.bytes[1000..1000 + 1500].to_vec();
    for (i, b) in local.bytes[..600].iter_mut().enumerate() {
        *b = (i % 256) as u8 ^ 0x5a;
    }
    let written: Vec<u8> = local.bytes[..600].to_vec();
    let mut r = Rdma::new(&mut c, &mut s, local, server, 2, 1, 256).unwrap();
    // 600 B: three packets at MTU 256, gathered (not inline).
    r.post(0, Verb::Write, 3000, 0, 600).unwrap();
    // 1,500 B: six response packets, into the client region at 2,000.
    r.post(1, Verb::Read, 1000, 2000, 1500).unwrap();
    r.run().unwrap();
    assert_eq!(&r.remote.bytes[3000..3600], &written[..]);
    assert_eq!(&r.local.bytes[2000..3500], &expect_read[..]);
    let read = r.completions.iter().find(|c| c.conn == 1).unwrap();
    assert_eq!(read.data, expect_read);
    assert!(r.completions.iter().all(|c| c.seen > c.posted));
}

#[test]
fn fetch_and_add_from_many_qps_loses_no_update() {
    let t = topo();
    let (mut c, mut s) = hosts(&t);
    let (local, mut server) = regions(&mut c, &mut s, false);
    server.bytes[64..72].copy_from_slice(&0u64.to_le_bytes());
    let mut r = Rdma::new(&mut c, &mut s, local, server, 8, 4, 256).unwrap();
    for round in 0..25 {
        for qp in 0..8 {
            r.post(
                qp,
                Verb::FetchAdd { add: 1 },
                64,
                8 * (qp as u64 + round % 2),
                8,
            )
            .unwrap();
        }
    }
    r.run().unwrap();
    let final_value = u64::from_le_bytes(r.remote.bytes[64..72].try_into().unwrap());
    assert_eq!(final_value, 200, "200 increments, none lost");
    let mut olds: Vec<u64> = r
        .completions
        .iter()
        .map(|c| u64::from_le_bytes(c.data[..8].try_into().unwrap()))
        .collect();
    olds.sort_unstable();
    assert_eq!(
        olds,
        (0..200).collect::<Vec<_>>(),
        "each saw a distinct value"
    );
}

#[test]
fn compare_and_swap_from_many_qps_has_one_winner() {
    let t = topo();
    let (mut c, mut s) = hosts(&t);
    let (local, mut server) = regions(&mut c, &mut s, false);
    server.bytes[128..136].copy_from_slice(&0u64.to_le_bytes());
    let mut r = Rdma::new(&mut c, &mut s, local, server, 8, 1, 256).unwrap();
    for qp in 0..8u32 {
        let v = Verb::CompareSwap {
            compare: 0,
            swap: 100 + qp as u64,
        };
        r.post(qp, v, 128, 8 * qp as u64, 8).unwrap();
    }
    r.run().unwrap();
    let winners: Vec<u32> = r
        .completions
        .iter()
        .filter(|c| c.data == 0u64.to_le_bytes())
        .map(|c| c.conn)
        .collect();
    assert_eq!(winners.len(), 1, "exactly one CAS saw the old 0");
    let now = u64::from_le_bytes(r.remote.bytes[128..136].try_into().unwrap());
    assert_eq!(now, 100 + winners[0] as u64);
    assert!(r
        .completions
        .iter()
        .filter(|c| c.conn != winners[0])
        .all(|c| c.data == now.to_le_bytes()));
}

/// Ten READs posted at once on one QP: how long until the last completes, and the most
/// that were outstanding.
fn ten_reads(max_rd_atomic: u32) -> (Time, u32) {
    let t = topo();
    let (mut c, mut s) = hosts(&t);
    let (local, server) = regions(&mut c, &mut s, false);
    let mut r = Rdma::new(&mut c, &mut s, local, server, 1, max_rd_atomic, 256).unwrap();
    for i in 0..10 {
        r.post(0, Verb::Read, 64 * i, 64 * i, 64).unwrap();
    }
    r.run().unwrap();
    let last = r.completions.iter().map(|c| c.seen).max().unwrap();
    (last, r.peak_reads_in_flight())
}

#[test]
fn the_outstanding_read_limit_holds_and_binds() {
    let (t1, peak1) = ten_reads(1);
    let (t4, peak4) = ten_reads(4);
    assert_eq!(peak1, 1);
    assert_eq!(peak4, 4);
    assert!(
        t1.as_ns_f64() > 2.5 * t4.as_ns_f64(),
        "one READ at a time serialises ten round trips: {t1:?} vs {t4:?}"
    );
}

#[test]
fn a_remote_read_pays_the_round_trip_and_the_home_dram_read_and_a_write_does_not() {
    let t = topo();
    let (c, _) = hosts(&t);
    let p = c.mem.params();
    let ic = p.interconnect_latency.as_ns_f64();
    let home = p.dram_latency.as_ns_f64() - p.llc_latency.as_ns_f64();
    let read = latency(Verb::Read, 1, true) - latency(Verb::Read, 1, false);
    // The responder's DMA read goes to the home node and back (2 crossings), and the
    // home agent answers after its DRAM read although its LLC holds the line (home
    // snoop); its 64 B serialized on QPI once.
    let least = 2.0 * ic + home;
    assert!(
        read >= least && read < least + 10.0,
        "remote READ penalty {read:.1} ns: 2 x {ic} ns crossings + {home} ns DRAM over LLC"
    );
    let write = latency(Verb::Write, 1, true) - latency(Verb::Write, 1, false);
    assert!(
        write.abs() < 1.0,
        "a posted WRITE's remote penalty: {write}"
    );
    assert!(latency(Verb::Write, 1, false) < latency(Verb::Read, 1, false));
}

#[test]
fn latency_grows_as_the_transmit_unit_saturates() {
    let t = topo();
    let (c, _) = hosts(&t);
    let wqe = c.rnic.params.wqe.as_ns_f64();
    let one = latency(Verb::Read, 1, false);
    assert!((latency(Verb::Read, 4, false) - one).abs() < 0.01 * one);
    // 16 QPs × rnic_wqe_ns exceeds one round trip: the unit's queue sets the latency.
    let sixteen = latency(Verb::Read, 16, false);
    assert!(16.0 * wqe > one);
    assert!(
        (sixteen - 16.0 * wqe).abs() < 0.02 * sixteen,
        "{sixteen} vs 16 x {wqe}"
    );
}

#[test]
fn qp_contexts_beyond_the_cache_are_fetched_and_slow_every_operation() {
    let t = topo();
    let (mut c, mut s) = hosts(&t);
    let entries = c.rnic.params.qpc_entries as u32;
    let fits = bench::run(&mut c, &mut s, closed(Verb::Read, entries, false)).unwrap();
    let (mut c, mut s) = hosts(&t);
    let over = bench::run(&mut c, &mut s, closed(Verb::Read, entries + 1, false)).unwrap();
    // Closed loops count from the start: each RNIC's first touch of each context misses.
    assert_eq!(fits.qpc_misses, 2 * entries as u64, "{entries} QPs fit");
    assert!(over.qpc_misses > 100 * (entries as u64 + 1));
    let per_qp = |r: &bench::BenchResult, n: u32| r.latency_ns / n as f64;
    assert!(per_qp(&over, entries + 1) > 1.2 * per_qp(&fits, entries));
}

/// Ops/s and QP-context misses of `connections` open-loop 8 B connections, counted after
/// `warmup`.
fn open_conns(verb: Verb, connections: u32, warmup: Time) -> (f64, u64) {
    let t = topo();
    let (mut c, mut s) = hosts(&t);
    let spec = BenchSpec {
        verb,
        bytes: 8,
        connections,
        mtu: 256,
        max_rd_atomic: 1,
        server_remote: false,
        mode: Mode::Open {
            warmup,
            window: Time::from_us(250),
            windows: 2,
            depth: 128,
        },
    };
    let r = bench::run(&mut c, &mut s, spec).unwrap();
    (r.throughput.unwrap().ops_per_s, r.qpc_misses)
}

/// One QP more than the context cache holds, open loop: the transmit unit serves the
/// QPs with work in turn, so every turn's context lookup misses in an LRU cache one
/// entry short — at the requester's send and at the responder at least — and the
/// rate falls for WRITEs (many per QP in flight) as for READs; with as many QPs as
/// entries nothing misses. The rate does not depend on how long the run warmed up: the
/// unit used to be booked by every doorbell on arrival, a millisecond-long start-up that
/// decided what a short window measured.
#[test]
fn one_qp_beyond_the_context_cache_misses_on_every_turn_and_the_run_is_stationary() {
    let (c, _) = hosts(&topo());
    let entries = c.rnic.params.qpc_entries as u32;
    let short = Time::from_us(200);
    for verb in [Verb::Write, Verb::Read] {
        let (fits, fits_misses) = open_conns(verb, entries, short);
        let (over, over_misses) = open_conns(verb, entries + 1, short);
        let (over_late, _) = open_conns(verb, entries + 1, Time::from_us(1000));
        assert_eq!(fits_misses, 0, "{verb:?}: {entries} QPs fit");
        let ops_in_windows = over * 500e-6;
        assert!(
            over_misses as f64 > 1.9 * ops_in_windows,
            "{verb:?}: {over_misses} misses for {ops_in_windows} operations"
        );
        assert!(over < 0.6 * fits, "{verb:?}: {fits} → {over}");
        assert!(
            (over_late - over).abs() < 0.01 * over,
            "{verb:?} stationary: {over} after 200 us, {over_late} after 1 ms"
        );
    }
}

fn open(verb: Verb, bytes: u64, max_rd_atomic: u32) -> f64 {
    open_on(&topo(), verb, bytes, max_rd_atomic)
}

/// Ops/s of 8 open-loop connections on the testbed `t`.
fn open_on(t: &fabric::Topology, verb: Verb, bytes: u64, max_rd_atomic: u32) -> f64 {
    let (mut c, mut s) = hosts(t);
    let spec = BenchSpec {
        verb,
        bytes,
        connections: 8,
        mtu: 256,
        max_rd_atomic,
        server_remote: false,
        mode: Mode::Open {
            warmup: Time::from_us(100),
            window: Time::from_us(500),
            windows: 2,
            depth: 128,
        },
    };
    let r = bench::run(&mut c, &mut s, spec).unwrap();
    r.throughput.unwrap().ops_per_s
}

#[test]
fn small_reads_are_bound_by_one_outstanding_read_per_qp_and_writes_by_the_message_rate() {
    let t = topo();
    let (c, _) = hosts(&t);
    let wqe = c.rnic.params.wqe.as_secs_f64();
    let r1 = open(Verb::Read, 8, 1);
    let r2 = open(Verb::Read, 8, 2);
    assert!(r2 > 1.3 * r1, "a second READ per QP: {r1} → {r2}");
    // The unit takes rnic_wqe_ns per work request and waits for what streams in: the
    // WQE, fetched by DMA because the open loop keeps the send queue busy, and the
    // gathered payload (WRITEs are not inline).
    let streamed = (c.rnic.gather_stream(64) + c.rnic.gather_stream(8)).as_secs_f64();
    let w = open(Verb::Write, 8, 1);
    assert!(
        (w * (wqe + streamed) - 1.0).abs() < 0.01,
        "small WRITEs at the transmit unit's rate: {w} ops/s"
    );
    assert!(w > r1);
    let w64 = open(Verb::Write, 64, 1);
    assert!(
        w64 < 0.99 * w,
        "a 64 B payload streams in longer than an 8 B one: {w} → {w64}"
    );
}

#[test]
fn bad_requests_are_refused_with_the_reason() {
    let t = topo();
    let (mut c, mut s) = hosts(&t);
    let (local, server) = regions(&mut c, &mut s, false);
    let e = Rdma::new(&mut c, &mut s, local.clone(), server.clone(), 1, 17, 256)
        .err()
        .unwrap();
    assert!(
        e.contains("max_rd_atomic 17") && e.contains("1..=16"),
        "{e}"
    );
    let e = Rdma::new(&mut c, &mut s, local.clone(), server.clone(), 1, 1, 1500)
        .err()
        .unwrap();
    assert!(e.contains("MTU 1500"), "{e}");
    let mut r = Rdma::new(&mut c, &mut s, local, server, 1, 1, 256).unwrap();
    let e = r.post(0, Verb::Read, 4090, 0, 64).unwrap_err();
    assert!(e.contains("R_Key") && e.contains("4090..4154"), "{e}");
    let e = r.post(3, Verb::Read, 0, 0, 64).unwrap_err();
    assert!(e.contains("no connection 3"), "{e}");
    let e = RdmaHost::new(&t, "server", "nope").err().unwrap();
    assert!(
        e.contains("no device `nope`") && e.contains("`rnic`"),
        "{e}"
    );
}

#[test]
fn the_poll_loop_phase_is_seeded_variance_of_half_a_poll_call() {
    let off = RunOptions {
        seed: 1,
        poll_phase: false,
    };
    let on = RunOptions::default();
    // Without variance the connections fall into step and never queue.
    assert_eq!(
        latency_with(Verb::Read, 8, false, off),
        latency_with(Verb::Read, 1, false, off)
    );
    // Noticed a uniform part of one poll call late: half a call on average.
    let t = topo();
    let (c, _) = hosts(&t);
    let call = c.core(0).cycles(host::rdma::POLL_CYCLES).as_ns_f64();
    let late = latency_with(Verb::Read, 1, false, on) - latency_with(Verb::Read, 1, false, off);
    assert!(
        (late - call / 2.0).abs() < 0.1 * call,
        "{late:.1} ns late on average, a poll call is {call:.1} ns"
    );
    // A pure function of its seed.
    assert_eq!(
        latency_with(Verb::Write, 4, false, on),
        latency_with(Verb::Write, 4, false, on)
    );
    let other = RunOptions { seed: 7, ..on };
    assert_ne!(
        latency_with(Verb::Write, 4, false, on),
        latency_with(Verb::Write, 4, false, other)
    );
}

/// One READ of `len` bytes on an idle pair, post to completion seen, without variance.
fn one_read(len: u64) -> f64 {
    let t = topo();
    let (mut c, mut s) = hosts(&t);
    let (local, server) = regions(&mut c, &mut s, false);
    let mut r = Rdma::new(&mut c, &mut s, local, server, 1, 1, 256).unwrap();
    r.set_options(RunOptions {
        seed: 1,
        poll_phase: false,
    });
    r.post(0, Verb::Read, 0, 0, len).unwrap();
    r.run().unwrap();
    let done = &r.completions[0];
    (done.seen - done.posted).as_ns_f64()
}

#[test]
fn a_multi_packet_read_is_cut_through_not_store_and_forward() {
    let t = topo();
    let (c, _) = hosts(&t);
    let unit = c.rnic.params.packet.as_ns_f64();
    let full = devices::rnic::wire::read_response_each(1024, 256)[1].wire_bytes;
    let on_port = full as f64 / c.rnic.params.port_gbps;
    let extra = one_read(1024) - one_read(64);
    // Store-and-forward pays each of the three further packets at every stage: built by
    // the responder's unit, serialized on the port, parsed by the requester's unit.
    let store_and_forward = 3.0 * (2.0 * unit + on_port);
    assert!(
        extra < 0.6 * store_and_forward,
        "1 KiB over 64 B: {extra:.0} ns, store-and-forward would add ≥ {store_and_forward:.0}"
    );
    // Pipelined, the slowest stage still takes each further packet in turn.
    assert!(extra > 3.0 * unit, "{extra:.0} ns");
}

/// Bytes the client's RNIC received from its root (BlueFlame stores and read
/// completions) while ten 64 B READs posted on one QP at once, or one at a time, ran.
fn ten_reads_downstream(at_once: bool) -> u64 {
    let t = topo();
    let (mut c, mut s) = hosts(&t);
    let (local, server) = regions(&mut c, &mut s, false);
    let mut r = Rdma::new(&mut c, &mut s, local, server, 1, 1, 256).unwrap();
    for i in 0..10 {
        r.post(0, Verb::Read, 64 * i, 64 * i, 64).unwrap();
        if !at_once {
            r.run().unwrap();
        }
    }
    r.run().unwrap();
    assert_eq!(r.completions.len(), 10);
    drop(r);
    c.rnic.pf.down.bytes
}

#[test]
fn a_busy_send_queue_has_its_wqes_fetched_by_dma_and_an_idle_one_takes_the_blueflame_copy() {
    // One at a time, every READ finds its queue idle: ten BlueFlame stores, nothing read.
    // Ten at once (one READ outstanding per QP): the nine behind the first are fetched,
    // each a 64 B read completion more on the RNIC's link.
    let one_by_one = ten_reads_downstream(false);
    let at_once = ten_reads_downstream(true);
    let completion = devices::nic::tlp_wire_bytes(64, 256, true);
    assert_eq!(
        at_once - one_by_one,
        9 * completion,
        "{one_by_one} → {at_once}"
    );
}

#[test]
fn closed_loop_qps_outrun_the_open_loop_as_blueflame_spares_the_unit_the_wqe_fetch() {
    // The study's relation (docs/hardware.md §4): 16 closed-loop QPs complete more 64 B
    // WRITEs per second than 8 open-loop ones.
    let closed_rate = 16.0e9 / latency(Verb::Write, 16, false);
    let open_rate = open(Verb::Write, 64, 1);
    assert!(
        closed_rate > 1.03 * open_rate,
        "closed {closed_rate} vs open {open_rate} ops/s"
    );
}

/// Ops/s of 8 open-loop WRITEs of `bytes` on the testbed with the root returning read
/// completions of `completion` bytes.
fn open_write_with_completions(bytes: u64, completion: u32) -> f64 {
    let mut t = topo();
    for p in &mut t.platforms {
        if let Some(timing) = p.timing.as_mut() {
            timing.read_completion_bytes = completion;
        }
    }
    open_on(&t, Verb::Write, bytes, 1)
}

#[test]
fn larger_read_completions_speed_up_the_gather_of_large_writes_only() {
    // 2 KiB: the gather streams 32 completions of 64 B or 8 of 256 B (84 vs 276 wire
    // bytes each); 64 B: one completion either way.
    let big64 = open_write_with_completions(2048, 64);
    let big256 = open_write_with_completions(2048, 256);
    assert!(big256 > 1.1 * big64, "2 KiB: {big64} → {big256}");
    let small64 = open_write_with_completions(64, 64);
    let small256 = open_write_with_completions(64, 256);
    assert!(
        (small256 / small64 - 1.0).abs() < 0.005,
        "64 B: {small64} → {small256}"
    );
}

/// A response is booked when its request arrives, for when its data will be in; the
/// response unit builds it, so a WQE the transmit unit could send before then is not
/// held back behind it (one unit for both made it wait).
#[test]
fn a_response_booked_for_later_does_not_hold_back_a_wqe() {
    let t = topo();
    let (mut c, _) = hosts(&t);
    let rn = &mut c.rnic;
    let later = Time::from_ns(1000);
    let built = rn.build_each(&[later]);
    assert_eq!(built[0], later + rn.params.packet);
    let wqe = rn.params.wqe;
    assert_eq!(rn.tx.serve(Time::from_ns(100), wqe), Time::from_ns(100));
    // A second response waits for the first, in its own unit.
    assert_eq!(
        rn.build_each(&[later])[0],
        later + rn.params.packet + rn.params.packet
    );
}

/// A 64 KiB READ posted at 0 and, if `second_at` is given, a 64 B READ posted then on
/// the same QP: when each completion is seen.
fn read_behind_a_long_read(max_rd_atomic: u32, second_at: Option<Time>) -> Vec<Time> {
    let t = topo();
    let (mut c, mut s) = hosts(&t);
    let len = 64 * 1024;
    let local = c.register(1, c.rnic_node(), 2 * len, 64, |_| 0).unwrap();
    let node = s.node(false);
    let server = s.register(2, node, 2 * len, 64, |i| i as u8).unwrap();
    let mut r = Rdma::new(&mut c, &mut s, local, server, 1, max_rd_atomic, 256).unwrap();
    r.set_options(RunOptions {
        seed: 1,
        poll_phase: false,
    });
    r.post(0, Verb::Read, 0, 0, len).unwrap();
    if let Some(at) = second_at {
        r.post_at(0, at, Verb::Read, len, len, 64).unwrap();
    }
    r.run().unwrap();
    r.completions.iter().map(|c| c.seen).collect()
}

/// With one READ slot, a READ posted while the previous READ's response still streams in
/// waits for its last packet, not its first: a round trip after the long READ completes.
/// With two slots it overlaps and completes right behind it.
#[test]
fn a_read_slot_is_freed_by_the_last_response_packet_not_the_first() {
    let rtt = one_read(64);
    let alone = read_behind_a_long_read(1, None)[0];
    assert!(
        alone.as_ns_f64() > 4.0 * rtt,
        "the long READ must stream for several round trips: {alone:?}, rtt {rtt:.0} ns"
    );
    // Halfway: the long READ's first response packet is in (about a round trip after
    // the post) and the rest still streams.
    let second_at = Time::from_ps(alone.as_ps() / 2);
    let one = read_behind_a_long_read(1, Some(second_at));
    let two = read_behind_a_long_read(2, Some(second_at));
    let gap1 = (one[1] - one[0]).as_ns_f64();
    let gap2 = (two[1] - two[0]).as_ns_f64();
    assert!(
        gap1 > 0.3 * rtt,
        "one slot: the second READ completes {gap1:.0} ns after the first, rtt {rtt:.0} ns"
    );
    assert!(
        gap2 < 0.15 * rtt,
        "two slots: the second READ completes {gap2:.0} ns after the first, rtt {rtt:.0} ns"
    );
}
