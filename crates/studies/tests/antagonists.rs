//! CPU-side memory traffic competing with device DMA on the two-socket R730 of the
//! IOctopus testbed: STREAM-like cores saturate a node's DRAM (loaded latency rises),
//! remote ones load QPI per direction, and both slow a device's DMA that needs the same
//! memory; line fills in the device's package evict the lines DDIO left in the LLC.

use devices::{DmaJob, DmaSpec, Op};
use sim::cpu_stream::StreamOp;
use sim::timed::TimedFabric;
use sim::{pcie, Time};
use studies::harness::*;

fn r730() -> (TimedFabric, u32) {
    let tf = load("ioctopus_r730", &[]).unwrap();
    let host = tf.fabric.topo.host_by_name("server").unwrap();
    (tf, host)
}

/// Starts `n` streams of cores on `cpu` against node `mem` (10 line fill buffers each).
fn streams(tf: &mut TimedFabric, host: u32, n: u32, cpu: u32, mem: u32, op: StreamOp) {
    for _ in 0..n {
        tf.add_cpu_stream(host, cpu, mem, op, 10).unwrap();
    }
    tf.net.start_cpu_streams();
}

/// (aggregate GB/s of read+written bytes, mean miss latency ns) over a 20 µs window.
fn measure(tf: &mut TimedFabric) -> (f64, f64) {
    let before: u64 = tf
        .net
        .cpu_streams()
        .iter()
        .map(|s| s.bytes_read + s.bytes_written)
        .sum();
    let window = Time::from_ns(20_000);
    tf.net.run_for(window);
    let s = tf.net.cpu_streams();
    let after: u64 = s.iter().map(|s| s.bytes_read + s.bytes_written).sum();
    let lat = s.iter().map(|s| s.mean_latency_ns()).sum::<f64>() / s.len() as f64;
    (gbps(after - before, window), lat)
}

#[test]
fn local_streams_saturate_the_node_and_loaded_latency_follows_littles_law() {
    let idle = {
        let (tf, host) = r730();
        tf.timing_of(host).dram_latency_ns
    };
    let peak = {
        let (tf, host) = r730();
        tf.timing_of(host).dram_gbps
    };
    let mut last = (0.0, 0.0);
    for n in [1u32, 2, 4, 16, 24] {
        let (mut tf, host) = r730();
        streams(&mut tf, host, n, 0, 0, StreamOp::Read);
        tf.net.run_for(Time::from_ns(5_000));
        let (g, lat) = measure(&mut tf);
        assert!(g <= peak * 1.001, "never above the node's bandwidth: {g}");
        assert!(
            g >= last.0 && lat >= last.1,
            "more cores, no less traffic or latency"
        );
        // Little's law: misses in flight = throughput × latency.
        let in_flight = g * lat / 64.0;
        assert!(
            (in_flight / (10.0 * n as f64) - 1.0).abs() < 0.03,
            "{n} streams: {g:.2} GB/s × {lat:.1} ns = {in_flight:.1} lines in flight"
        );
        if n == 1 {
            assert!(
                (lat - idle).abs() < 2.0,
                "one core sees the idle latency: {lat}"
            );
        }
        if n >= 16 {
            assert!(g > 0.99 * peak, "16 × 10 misses saturate the node: {g}");
        }
        last = (g, lat);
    }
    assert!(
        last.1 > 2.5 * idle,
        "saturated latency {} vs idle {idle}",
        last.1
    );
}

#[test]
fn remote_streams_are_bound_by_qpi_and_counted_per_direction() {
    let (mut tf, host) = r730();
    streams(&mut tf, host, 16, 1, 0, StreamOp::Read);
    tf.net.run_for(Time::from_ns(5_000));
    let (g, _) = measure(&mut tf);
    // Two QPI links of 19.2 GB/s per direction; a 64 B line is 9 flits of 8 B.
    let qpi = 2.0 * 19.2 * 64.0 / 72.0;
    assert!((g / qpi - 1.0).abs() < 0.01, "{g} vs {qpi}");
    let c = tf.net.counters();
    let wire = |dir: &str| {
        c.wires
            .iter()
            .find(|w| w.0 == format!("server pkg0-pkg1 {dir}"))
            .cloned()
            .unwrap_or_else(|| panic!("no {dir} wire in {:?}", c.wires))
    };
    let (data, req) = (wire("→"), wire("←"));
    assert_eq!(data.1, data.3 * 72, "lines go node 0 → cores on node 1");
    assert_eq!(req.1, req.3 * 8, "requests go the other way, one flit each");
    assert_eq!(req.2, 0);
}

#[test]
fn writing_streams_move_each_line_twice() {
    let (mut tf, host) = r730();
    streams(&mut tf, host, 2, 0, 0, StreamOp::Write);
    tf.net.run_for(Time::from_ns(10_000));
    let s = &tf.net.cpu_streams()[0];
    assert!(s.bytes_read > 0);
    // Write-backs trail their reads for ownership by at most the lines in flight.
    assert!(s.bytes_read - s.bytes_written <= 2 * 10 * 64, "{s:?}");
    let c = tf.net.counters();
    let node0 = c.sinks.iter().find(|x| x.0 == "server DRAM node0").unwrap();
    assert!(node0.2 > 0 && node0.1 >= node0.2, "{node0:?}");
}

/// The NIC PF's DMA behaviour (assumption: a ConnectX-class requester on Gen3 x8).
fn nic_spec(max_reads: u32) -> DmaSpec {
    DmaSpec {
        mps: 256,
        mrrs: 512,
        max_reads,
        issue_ps_per_kib: pcie::ps_per_kib(3, 8),
    }
}

/// PF `pf` of the server's NIC (Gen3 x8 each) reads 4 MiB at node-0 offset 256 MiB with
/// few reads in flight (as descriptor and small-packet fetches are), so it is bound by the
/// round trip, which includes the DRAM queue.
fn nic_read_gbps(tf: &mut TimedFabric, pf: u32) -> f64 {
    let nic = requester(tf, &format!("server.nic.pf{pf}")).unwrap();
    let bytes = 4 << 20;
    let bus = map_buffer(tf, nic, "server.ram.node0", 256 << 20, bytes).unwrap();
    let spec = nic_spec(4);
    let job = DmaJob::new(tf, nic, spec, Op::Read { src: bus }, bytes, 1).unwrap();
    job.run(&mut tf.net, Time::ZERO).steady_gbps()
}

#[test]
fn dma_slows_when_cores_saturate_the_memory_it_needs_and_only_then() {
    let quiet = nic_read_gbps(&mut r730().0, 0);
    let elsewhere = {
        let (mut tf, host) = r730();
        streams(&mut tf, host, 24, 1, 1, StreamOp::Read);
        nic_read_gbps(&mut tf, 0)
    };
    let contended = {
        let (mut tf, host) = r730();
        streams(&mut tf, host, 24, 0, 0, StreamOp::Read);
        nic_read_gbps(&mut tf, 0)
    };
    assert!(
        (elsewhere / quiet - 1.0).abs() < 0.01,
        "cores on the other node's memory leave it alone: {elsewhere} vs {quiet}"
    );
    assert!(
        contended < 0.8 * quiet,
        "a saturated node's queue slows the NIC's latency-bound reads: {contended} vs {quiet}"
    );
    // Through the other socket the NIC's reads cross QPI, which remote cores also load.
    let remote_quiet = nic_read_gbps(&mut r730().0, 1);
    let remote_contended = {
        let (mut tf, host) = r730();
        streams(&mut tf, host, 24, 1, 0, StreamOp::Read);
        nic_read_gbps(&mut tf, 1)
    };
    assert!(
        remote_contended < 0.8 * remote_quiet,
        "{remote_contended} vs {remote_quiet}"
    );
}

/// PF0 writes 256 KiB to node 0 (DDIO), cores on `cpu` stream for 20 µs, PF0 reads it
/// back: the LLC hits and misses of that read.
fn ddio_then_streams(cpu: Option<u32>) -> (u64, u64, u64) {
    let (mut tf, host) = r730();
    let nic = requester(&tf, "server.nic.pf0").unwrap();
    let bytes = 256 << 10;
    let bus = map_buffer(&mut tf, nic, "server.ram.node0", 64 << 20, bytes).unwrap();
    let spec = nic_spec(32);
    DmaJob::new(&mut tf, nic, spec, Op::Write { dst: bus }, bytes, 1)
        .unwrap()
        .run(&mut tf.net, Time::ZERO);
    let evictions = if let Some(cpu) = cpu {
        streams(&mut tf, host, 8, cpu, cpu, StreamOp::Read);
        tf.net.run_for(Time::from_ns(20_000));
        tf.net.stop_cpu_streams();
        // Let the misses in flight land (and evict) before reading back.
        tf.net.run_for(Time::from_ns(2_000));
        tf.net.cpu_streams().iter().map(|s| s.evictions).sum()
    } else {
        0
    };
    let before = tf.net.counters().llc[0].clone();
    DmaJob::new(&mut tf, nic, spec, Op::Read { src: bus }, bytes, 1)
        .unwrap()
        .run(&mut tf.net, Time::ZERO);
    let after = tf.net.counters().llc[0].clone();
    assert_eq!(after.0, "server DRAM node0");
    (after.1 - before.1, after.2 - before.2, evictions)
}

#[test]
fn line_fills_in_the_devices_package_evict_what_ddio_left_in_the_llc() {
    let lines = (256 << 10) / 64;
    assert_eq!(
        ddio_then_streams(None),
        (lines, 0, 0),
        "undisturbed: every line hits"
    );
    assert_eq!(
        ddio_then_streams(Some(1)),
        (lines, 0, 0),
        "cores of the other package fill their own LLC"
    );
    let (hits, misses, evicted) = ddio_then_streams(Some(0));
    // 8 × 10 misses near 60 GB/s for 20 µs fill ≈ 18,000 lines; one in ten (2 DDIO ways of
    // 20) takes a DDIO way, evicting the oldest DDIO line: the start of the buffer.
    assert!(evicted > lines / 4 && evicted < lines, "{evicted}");
    assert_eq!(
        (hits, misses),
        (lines - evicted, evicted),
        "each evicted line is a miss on the way back"
    );
}

#[test]
fn a_stream_on_a_node_the_host_lacks_is_refused() {
    let (mut tf, host) = r730();
    let e = tf
        .add_cpu_stream(host, 0, 7, StreamOp::Read, 10)
        .unwrap_err();
    assert!(e.to_string().contains("NUMA nodes 0..2"), "{e}");
    let e = tf
        .add_cpu_stream(host, 0, 0, StreamOp::Read, 0)
        .unwrap_err();
    assert!(e.to_string().contains("at least one"), "{e}");
}
