//! CPU-side memory traffic competing with device DMA on the two-socket R730 of the
//! IOctopus testbed: STREAM-like cores saturate a node's DRAM (loaded latency rises),
//! remote ones load QPI per direction, and both slow a device's DMA that needs the same
//! memory; line fills in the device's package evict the lines DDIO left in the LLC.

use devices::{DmaJob, DmaOutcome, DmaSpec, Op};
use fabric::HostId;
use sim::component::Sim;
use sim::cpu_stream::{CpuStream, StreamOp};
use sim::net::ComponentId;
use sim::timed::TimedFabric;
use sim::{pcie, Time};
use studies::harness::*;

/// The server with its CPU streams and device jobs as components of one simulation.
struct Rig {
    tf: TimedFabric,
    sim: Sim<TimedFabric>,
    streams: Vec<ComponentId>,
    host: HostId,
}

impl Rig {
    fn new() -> Rig {
        let tf = load("ioctopus_r730", &[]).unwrap();
        let host = tf.fabric.topo.host_by_name("server").unwrap();
        Rig {
            tf,
            sim: Sim::new(),
            streams: Vec::new(),
            host,
        }
    }

    /// Starts `n` streams of cores on `cpu` against node `mem` (10 line fill buffers each).
    fn streams(&mut self, n: u32, cpu: u32, mem: u32, op: StreamOp) {
        for _ in 0..n {
            let s = self.tf.cpu_stream(self.host, cpu, mem, op, 10).unwrap();
            let id = self.sim.add(s);
            let now = self.tf.net.now();
            self.tf.net.wake_at(now, id);
            self.streams.push(id);
        }
    }

    fn stream(&self, i: usize) -> &CpuStream {
        self.sim.get::<CpuStream>(self.streams[i]).unwrap()
    }

    fn all_streams(&self) -> Vec<&CpuStream> {
        (0..self.streams.len()).map(|i| self.stream(i)).collect()
    }

    fn stop_streams(&mut self) {
        for &id in &self.streams {
            self.sim.get_mut::<CpuStream>(id).unwrap().stop();
        }
    }

    fn run_for(&mut self, t: Time) {
        self.sim.run_for(&mut self.tf, t);
    }

    /// Runs a DMA job from now until it is done, beside whatever else runs.
    fn dma(&mut self, job: DmaJob) -> DmaOutcome {
        let id = self.sim.add(job);
        let now = self.tf.net.now();
        self.tf.net.wake_at(now, id);
        self.sim.run_until_finished(&mut self.tf);
        self.sim.get::<DmaJob>(id).unwrap().outcome()
    }
}

/// (aggregate GB/s of read+written bytes, mean miss latency ns) over a 20 µs window.
fn measure(rig: &mut Rig) -> (f64, f64) {
    let moved = |rig: &Rig| -> u64 {
        rig.all_streams()
            .iter()
            .map(|s| s.bytes_read + s.bytes_written)
            .sum()
    };
    let before = moved(rig);
    let window = Time::from_ns(20_000);
    rig.run_for(window);
    let after = moved(rig);
    let s = rig.all_streams();
    let lat = s.iter().map(|s| s.mean_latency_ns()).sum::<f64>() / s.len() as f64;
    (gbps(after - before, window), lat)
}

#[test]
fn local_streams_saturate_the_node_and_loaded_latency_follows_littles_law() {
    let idle = {
        let rig = Rig::new();
        rig.tf.timing_of(rig.host).dram_latency_ns
    };
    let peak = {
        let rig = Rig::new();
        rig.tf.timing_of(rig.host).dram_gbps
    };
    let mut last = (0.0, 0.0);
    for n in [1u32, 2, 4, 16, 24] {
        let mut rig = Rig::new();
        rig.streams(n, 0, 0, StreamOp::Read);
        rig.run_for(Time::from_ns(5_000));
        let (g, lat) = measure(&mut rig);
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
    let mut rig = Rig::new();
    rig.streams(16, 1, 0, StreamOp::Read);
    rig.run_for(Time::from_ns(5_000));
    let (g, _) = measure(&mut rig);
    // Two QPI links of 19.2 GB/s per direction; a 64 B line is 9 flits of 8 B.
    let qpi = 2.0 * 19.2 * 64.0 / 72.0;
    assert!((g / qpi - 1.0).abs() < 0.01, "{g} vs {qpi}");
    let c = rig.tf.net.counters();
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
    let mut rig = Rig::new();
    rig.streams(2, 0, 0, StreamOp::Write);
    rig.run_for(Time::from_ns(10_000));
    let s = rig.stream(0);
    assert!(s.bytes_read > 0);
    // Write-backs trail their reads for ownership by at most the lines in flight.
    assert!(s.bytes_read - s.bytes_written <= 2 * 10 * 64, "{s:?}");
    let c = rig.tf.net.counters();
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
fn nic_read_gbps(rig: &mut Rig, pf: u32) -> f64 {
    let tf = &mut rig.tf;
    let nic = requester(tf, &format!("server.nic.pf{pf}")).unwrap();
    let bytes = 4 << 20;
    let bus = map_buffer(tf, nic, "server.ram.node0", 256 << 20, bytes).unwrap();
    let spec = nic_spec(4);
    let job = DmaJob::new(tf, nic, spec, Op::Read { src: bus }, bytes).unwrap();
    rig.dma(job).steady_gbps()
}

#[test]
fn dma_slows_when_cores_saturate_the_memory_it_needs_and_only_then() {
    let quiet = nic_read_gbps(&mut Rig::new(), 0);
    let elsewhere = {
        let mut rig = Rig::new();
        rig.streams(24, 1, 1, StreamOp::Read);
        nic_read_gbps(&mut rig, 0)
    };
    let contended = {
        let mut rig = Rig::new();
        rig.streams(24, 0, 0, StreamOp::Read);
        nic_read_gbps(&mut rig, 0)
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
    let remote_quiet = nic_read_gbps(&mut Rig::new(), 1);
    let remote_contended = {
        let mut rig = Rig::new();
        rig.streams(24, 1, 0, StreamOp::Read);
        nic_read_gbps(&mut rig, 1)
    };
    assert!(
        remote_contended < 0.8 * remote_quiet,
        "{remote_contended} vs {remote_quiet}"
    );
}

/// PF0 writes 256 KiB to node 0 (DDIO), cores on `cpu` stream for 20 µs, PF0 reads it
/// back: the LLC hits and misses of that read.
fn ddio_then_streams(cpu: Option<u32>) -> (u64, u64, u64) {
    let mut rig = Rig::new();
    let nic = requester(&rig.tf, "server.nic.pf0").unwrap();
    let bytes = 256 << 10;
    let bus = map_buffer(&mut rig.tf, nic, "server.ram.node0", 64 << 20, bytes).unwrap();
    let spec = nic_spec(32);
    let job = DmaJob::new(&mut rig.tf, nic, spec, Op::Write { dst: bus }, bytes).unwrap();
    rig.dma(job);
    let evictions = if let Some(cpu) = cpu {
        rig.streams(8, cpu, cpu, StreamOp::Read);
        rig.run_for(Time::from_ns(20_000));
        rig.stop_streams();
        // Let the misses in flight land (and evict) before reading back.
        rig.run_for(Time::from_ns(2_000));
        rig.all_streams().iter().map(|s| s.evictions).sum()
    } else {
        0
    };
    let before = rig.tf.net.counters().llc[0].clone();
    let job = DmaJob::new(&mut rig.tf, nic, spec, Op::Read { src: bus }, bytes).unwrap();
    rig.dma(job);
    let after = rig.tf.net.counters().llc[0].clone();
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
    let mut rig = Rig::new();
    let host = rig.host;
    let e = rig
        .tf
        .cpu_stream(host, 0, 7, StreamOp::Read, 10)
        .unwrap_err();
    assert!(e.to_string().contains("NUMA nodes 0..2"), "{e}");
    let e = rig
        .tf
        .cpu_stream(host, 0, 0, StreamOp::Read, 0)
        .unwrap_err();
    assert!(e.to_string().contains("at least one"), "{e}");
}

/// `ioctopus.nvme_upi`'s mechanism: STREAM on node 0 against node 1 shares UPI pkg0 → pkg1
/// with the SSDs' DMA only when fio's buffers are on node 1 (remote). Each run is one
/// `nudma run` of examples/ioctopus_fio.toml's hardware with `streams` STREAM cores and,
/// unless `fio_node` is `None`, fio on its four SSDs.
#[test]
fn streams_fill_upi_and_lose_more_beside_remote_fio_than_beside_local_fio() {
    struct Run {
        fio_gbps: f64,
        stream_gbps: f64,
        upi_util: f64,
    }
    let run = |fio_node: Option<u32>, streams: u32| -> Run {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../examples/ioctopus_fio.toml");
        let text = std::fs::read_to_string(&path).unwrap();
        let mut text = text[..text.find("[[workload]]").unwrap()].to_string();
        for d in 0..4 {
            if let Some(n) = fio_node {
                text += &format!(
                    "[[workload]]\nname = \"fio{d}\"\nkind = \"fio\"\ndevice = \"server.nvme{d}\"\n\
                     cpu_node = {n}\nmem_node = {n}\nthreads = 8\niodepth = 32\n\
                     block_bytes = \"128 KiB\"\nop = \"read\"\n"
                );
            }
        }
        text += &format!(
            "[[workload]]\nname = \"stream\"\nkind = \"cpu_stream\"\nhost = \"server\"\n\
             cpu_node = 0\nmem_node = 1\nop = \"write\"\nmisses_in_flight = 20\ncores = {streams}\n\
             [measure]\nwarmup = \"200 us\"\nduration = \"1 ms\"\n"
        );
        let src = fabric::scenario::Source {
            name: "ioctopus_fio.toml".into(),
            text,
        };
        let p = studies::run::run_point(&src, &Default::default(), 1).unwrap();
        let metric = |w: &str| {
            p.rows
                .iter()
                .filter(|r| r.params["workload"].as_str().unwrap().starts_with(w))
                .map(|r| r.metrics["throughput_gbyte_s"].as_f64().unwrap())
                .sum::<f64>()
        };
        Run {
            fio_gbps: metric("fio"),
            stream_gbps: metric("stream"),
            upi_util: p.counters["interconnect_util"].as_f64().unwrap(),
        }
    };
    let (r0, r6, l6, alone) = (
        run(Some(1), 0),
        run(Some(1), 6),
        run(Some(0), 6),
        run(None, 6),
    );
    // Remote fio alone already puts its DMA on UPI; streams fill it.
    assert!(
        r0.upi_util > 0.25 && r6.upi_util > 0.95,
        "{} {}",
        r0.upi_util,
        r6.upi_util
    );
    // Local fio puts nothing on UPI: STREAM there is as fast as alone.
    let (l, a) = (l6.stream_gbps, alone.stream_gbps);
    assert!((l / a - 1.0).abs() < 0.01, "{l} {a}");
    // Beside remote fio, STREAM's misses wait behind the DMA.
    assert!(r6.stream_gbps < 0.8 * l, "{} {l}", r6.stream_gbps);
    // fio itself is media-bound and posted: it keeps its rate either way (FIFO UPI).
    assert!(
        r6.fio_gbps <= l6.fio_gbps * 1.001,
        "{} {}",
        r6.fio_gbps,
        l6.fio_gbps
    );
    assert!(
        r6.fio_gbps > 0.99 * r0.fio_gbps,
        "{} {}",
        r6.fio_gbps,
        r0.fio_gbps
    );
    assert_eq!(alone.fio_gbps, 0.0);
}
