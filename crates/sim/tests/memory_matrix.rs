//! A platform's memory matrices drive memory timing: on a two-node machine with an
//! asymmetric latency matrix, a device's DMA read from a root on node i into node j's
//! DRAM costs its PCIe part plus `latency_ns[i][j]`, a write lands with the entry's delay
//! once, the CPU's line reads and an idle CPU stream's misses take the entry itself, CPU
//! streams saturate at `bandwidth_gbps[i][j]` while DMA keeps the DRAM sink, and an entry
//! below what the interconnect alone takes is refused naming the pair. Bad matrices are
//! refused when the scenario loads.

mod common;

use common::{dma_route, one_dma, timed, try_load, try_timed, two_packages, DRAM_NS};
use fabric::{Access, HostId};
use sim::component::Sim;
use sim::cpu_stream::{CpuStream, StreamOp};
use sim::timed::TimedFabric;
use sim::Time;

/// Two packages, one node each, a device under each package's root; `memory` is the
/// `[platform.two.memory]` body (empty: no matrix).
fn scenario(memory: &str, interconnect_latency_ns: f64) -> String {
    let memory = if memory.is_empty() {
        String::new()
    } else {
        format!("[platform.two.memory]\n{memory}\n")
    };
    two_packages("matrix", &memory, interconnect_latency_ns)
}

fn matrix(name: &str, m: [[f64; 2]; 2]) -> String {
    format!(
        "{name} = [[{:?}, {:?}], [{:?}, {:?}]]",
        m[0][0], m[0][1], m[1][0], m[1][1]
    )
}

/// Simulated latency (ns) of one 64 B DMA read (to its data) or write (to its landing)
/// of device `d{dev}` into node `node` on an idle fabric; checks the flow model's
/// closed form agrees.
fn dma_ns(text: &str, dev: usize, node: u32, access: Access) -> f64 {
    let mut tf = timed(text);
    let route = dma_route(&mut tf, dev, node, access);
    let flow = match access {
        Access::Read => tf.net.zero_load_read(route, 64, true),
        Access::Write => tf.net.zero_load_write(route, 64, true),
    };
    let des = one_dma(&mut tf, route, access);
    // The closed form leaves out a DRAM write's own service time (64 B at 100 GB/s);
    // otherwise the two agree to the picosecond.
    let slack = match access {
        Access::Read => Time::ZERO,
        Access::Write => Time::from_ps(640),
    };
    assert!(
        des >= flow && des - flow <= slack,
        "flow model {flow:?} and simulation {des:?} disagree (d{dev} → node{node} {access:?})"
    );
    des.as_ns_f64()
}

const LAT: [[f64; 2]; 2] = [[80.0, 150.0], [170.0, 95.0]];

#[test]
fn dma_reads_cost_the_pcie_part_plus_the_matrix_entry_of_the_roots_node() {
    let plain = scenario("", 25.0);
    let with = scenario(&matrix("latency_ns", LAT), 25.0);
    for (i, row) in LAT.iter().enumerate() {
        // Without a matrix a local read is the PCIe part plus the local DRAM latency.
        let pcie_part = dma_ns(&plain, i, i as u32, Access::Read) - DRAM_NS;
        for (j, entry) in row.iter().enumerate() {
            let got = dma_ns(&with, i, j as u32, Access::Read);
            assert!(
                (got - (pcie_part + entry)).abs() < 1e-6,
                "d{i} (root on node {i}) reading node {j}: {got} ns, expected {pcie_part} + {entry} ns"
            );
        }
    }
    // Without a matrix, remote costs the interconnect round trip over local, whatever
    // the row: the hops, as before.
    let (l0, r0) = (
        dma_ns(&plain, 0, 0, Access::Read),
        dma_ns(&plain, 0, 1, Access::Read),
    );
    let (l1, r1) = (
        dma_ns(&plain, 1, 1, Access::Read),
        dma_ns(&plain, 1, 0, Access::Read),
    );
    assert!(r0 - l0 > 50.0 && ((r0 - l0) - (r1 - l1)).abs() < 1e-6);
}

#[test]
fn raising_one_entry_raises_exactly_that_pairs_dma_latency_once() {
    let base = scenario(&matrix("latency_ns", LAT), 25.0);
    let mut raised = LAT;
    raised[0][1] += 40.0;
    let raised = scenario(&matrix("latency_ns", raised), 25.0);
    for access in [Access::Read, Access::Write] {
        for i in 0..2 {
            for j in 0..2u32 {
                let d = dma_ns(&raised, i, j, access) - dma_ns(&base, i, j, access);
                let want = if (i, j) == (0, 1) { 40.0 } else { 0.0 };
                assert!(
                    (d - want).abs() < 1e-6,
                    "{access:?} d{i} → node{j}: +{d} ns, expected +{want} (a read's round trip and a write's landing see the delay once)"
                );
            }
        }
    }
}

/// Mean miss latency (ns) of one idle CPU stream (one miss in flight) from `cpu` to `mem`,
/// the only component on `tf`'s network.
fn idle_stream_ns(tf: &mut TimedFabric, cpu: u32, mem: u32) -> f64 {
    let mut sim = Sim::new();
    let s = tf
        .cpu_stream(HostId(0), cpu, mem, StreamOp::Read, 1)
        .unwrap();
    let id = sim.add(s);
    let now = tf.net.now();
    tf.net.wake_at(now, id);
    sim.run_for(tf, Time::from_ns(20_000));
    let s = sim.get::<CpuStream>(id).unwrap();
    assert!(s.misses() > 50, "{}", s.misses());
    s.mean_latency_ns()
}

#[test]
fn cpu_line_reads_and_idle_stream_misses_take_the_matrix_entry() {
    let text = scenario(&matrix("latency_ns", LAT), 25.0);
    for i in 0..2u32 {
        for j in 0..2u32 {
            let want = LAT[i as usize][j as usize];
            let mut tf = timed(&text);
            let line = tf.cpu_line_read(HostId(0), i, j, 1 << 24).as_ns_f64();
            let stream = idle_stream_ns(&mut tf, i, j);
            assert!(
                (line - want).abs() < 1e-6 && (stream - want).abs() < 1e-6,
                "node {i} → node {j}: line read {line} ns, idle stream {stream} ns, matrix {want} ns"
            );
        }
    }
}

/// GB/s that `n` CPU streams of 16 misses each from `cpu` against `mem` sustain.
fn streams_gbps(tf: &mut TimedFabric, n: u32, cpu: u32, mem: u32) -> f64 {
    let mut sim = Sim::new();
    let ids: Vec<_> = (0..n)
        .map(|_| {
            let s = tf
                .cpu_stream(HostId(0), cpu, mem, StreamOp::Read, 16)
                .unwrap();
            let id = sim.add(s);
            let now = tf.net.now();
            tf.net.wake_at(now, id);
            id
        })
        .collect();
    let moved = |sim: &Sim<TimedFabric>| -> u64 {
        ids.iter()
            .map(|&id| sim.get::<CpuStream>(id).unwrap().bytes_read)
            .sum()
    };
    sim.run_for(tf, Time::from_ns(5_000));
    let before = moved(&sim);
    sim.run_for(tf, Time::from_ns(40_000));
    for &id in &ids {
        sim.get_mut::<CpuStream>(id).unwrap().stop();
    }
    (moved(&sim) - before) as f64 / 40_000.0
}

const BW: [[f64; 2]; 2] = [[40.0, 12.0], [8.0, 30.0]];

#[test]
fn cpu_streams_saturate_at_the_bandwidth_matrix_entry() {
    let text = scenario(
        &format!(
            "{}\n{}",
            matrix("latency_ns", LAT),
            matrix("bandwidth_gbps", BW)
        ),
        25.0,
    );
    for i in 0..2u32 {
        for j in 0..2u32 {
            let cap = BW[i as usize][j as usize];
            let one = streams_gbps(&mut timed(&text), 1, i, j);
            let many = streams_gbps(&mut timed(&text), 8, i, j);
            // One stream's 16 misses over the entry's latency stay below the cap; enough
            // streams reach it and no more (the DRAM sink and the link run far faster).
            let latency_bound = 16.0 * 64.0 / LAT[i as usize][j as usize];
            eprintln!("node {i} against node {j}: 1 stream {one:.2} GB/s, 8 streams {many:.2} GB/s, matrix {cap}");
            assert!(one <= latency_bound * 1.01 && one < cap, "{i}→{j}: {one}");
            assert!(
                many <= cap * 1.001 && many > cap * 0.97,
                "node {i} against node {j}: {many} GB/s, matrix {cap} GB/s"
            );
        }
    }
}

#[test]
fn dma_keeps_the_dram_sink_when_the_platform_has_a_bandwidth_matrix() {
    let lat = matrix("latency_ns", LAT);
    let without = scenario(&lat, 25.0);
    let with = scenario(&format!("{lat}\n{}", matrix("bandwidth_gbps", BW)), 25.0);
    for access in [Access::Read, Access::Write] {
        let est = |text: &str| {
            let mut tf = timed(text);
            let r = dma_route(&mut tf, 0, 1, access);
            match access {
                Access::Read => tf.net.flow_read(r, 512, 16, true),
                Access::Write => tf.net.flow_write(r, 256, true),
            }
        };
        let (a, b) = (est(&without), est(&with));
        assert_eq!(a, b, "{access:?}: DMA is paced by the CPU bandwidth matrix");
        // The 8 GB/s entry for node 1's cores would bind if DMA were paced by it.
        assert!(a.gbps > BW[1][0], "{a:?}");
    }
}

#[test]
fn an_entry_below_the_interconnect_round_trip_is_an_error_naming_the_pair() {
    // Two 60 ns crossings take more than 100 ns before any DRAM is reached.
    let mut lat = LAT;
    lat[1][0] = 100.0;
    let err = match try_timed(&scenario(&matrix("latency_ns", lat), 60.0)) {
        Err(e) => e.0,
        Ok(_) => panic!("a 100 ns remote entry over 2 × 60 ns of links was accepted"),
    };
    for part in [
        "platform `two`",
        "memory.latency_ns[1][0] = 100",
        "CPU node 1, memory node 0",
    ] {
        assert!(err.contains(part), "{part:?} missing from: {err}");
    }
    // The same entry with 25 ns crossings is fine.
    assert!(try_timed(&scenario(&matrix("latency_ns", lat), 25.0)).is_ok());
}

#[test]
fn bad_matrices_are_refused_at_load_with_their_key() {
    for what in ["latency_ns", "bandwidth_gbps"] {
        for bad in [
            "[[80.0, 150.0, 1.0], [170.0, 95.0, 1.0]]",
            "[[80.0, 150.0], [170.0]]",
            "[[80.0, 150.0]]",
            "[[80.0, 0.0], [170.0, 95.0]]",
            "[[80.0, -5.0], [170.0, 95.0]]",
            "[[80.0, nan], [170.0, 95.0]]",
            "[[80.0, inf], [170.0, 95.0]]",
            "0.0",
        ] {
            let text = scenario(&format!("{what} = {bad}"), 25.0);
            let e = match try_load(&text) {
                Err(e) => e,
                Ok(_) => panic!("{what} = {bad} was accepted"),
            };
            assert_eq!(
                e.key.as_deref(),
                Some(format!("platform.two.memory.{what}").as_str()),
                "{what} = {bad}: {e}"
            );
            assert!(e.line > 0, "{e}");
        }
    }
}
