//! The TLP network against what its mechanisms imply: link-bound streaming writes run at
//! payload efficiency × link rate; reads bounded by outstanding bytes / round trip; a
//! root that splits reads into 64 B with few tags collapses read bandwidth; receiver
//! credits bound a long credit loop; completions split at the read completion boundary.

use sim::component::{Component, Sim};
use sim::net::{ComponentId, Delivery, Event, Hop, Issue, Net};
use sim::pcie;
use sim::Time;

/// Keeps `window` requests of `size` in flight until `total` bytes are done.
struct Stream {
    route: u32,
    read: bool,
    size: u32,
    total: u64,
    issued: u64,
    done: u64,
    finish: Time,
    tag: u64,
    /// Reads kept in flight.
    window: usize,
}

impl Stream {
    fn issue(&mut self, net: &mut Net) {
        if self.issued >= self.total {
            return;
        }
        self.issued += self.size as u64;
        self.tag += 1;
        let issue = Issue {
            addr64: true,
            ..Issue::new(self.route, ME, 0, self.size, self.issued)
        };
        if self.read {
            net.send_read(issue, self.tag);
        } else {
            net.send_write(issue);
        }
    }
}

/// The only component of these one-driver simulations.
const ME: ComponentId = 0;

impl Component<Net> for Stream {
    fn notify(&mut self, net: &mut Net, _: ComponentId, ev: Event) {
        match ev {
            Event::Delivery(d) => self.delivered(net, d),
            Event::Wake => self.timer(net),
            Event::Timer(_) => unreachable!("sets no timers"),
        }
    }

    fn finished(&self) -> bool {
        self.done >= self.total
    }
}

impl Stream {
    fn delivered(&mut self, net: &mut Net, d: Delivery) {
        match d {
            Delivery::WriteDone { bytes, .. } => {
                self.done += bytes as u64;
                self.finish = net.now();
            }
            Delivery::ReadData { bytes, last, .. } => {
                self.done += bytes as u64;
                self.finish = net.now();
                if last {
                    self.issue(net);
                }
            }
            Delivery::Mmio { .. } | Delivery::ReadServed { .. } => {}
        }
    }

    fn timer(&mut self, net: &mut Net) {
        if self.read {
            if self.issued == 0 {
                for _ in 0..self.window {
                    self.issue(net);
                }
            }
            return;
        }
        // Writes: one per serialization slot is enough to keep the link busy.
        for _ in 0..64 {
            self.issue(net);
        }
        if self.issued < self.total {
            net.wake_at(net.now() + Time::from_ns(1000), ME);
        }
    }
}

fn run(net: &mut Net, route: u32, read: bool, size: u32, window: usize, total: u64) -> f64 {
    let s = Stream {
        route,
        read,
        size,
        total,
        issued: 0,
        done: 0,
        finish: Time::ZERO,
        tag: 0,
        window,
    };
    let mut sim = Sim::new();
    let id = sim.add(s);
    assert_eq!(id, ME);
    let start = net.now();
    net.wake_at(start, ME);
    sim.run_until_finished(net);
    let s = sim.get::<Stream>(ME).unwrap();
    assert_eq!(s.done, total, "every byte arrives");
    total as f64 / (s.finish - start).as_ps() as f64 * 1000.0
}

fn one_link(credits: [u16; 3], delay_ns: u64) -> (Net, u32) {
    let mut net = Net::new(1);
    let (f, _) = net.add_link(
        "x16",
        pcie::ps_per_kib(3, 16),
        Time::from_ns(20),
        credits,
        true,
    );
    let (g, _) = net.add_link(
        "x16b",
        pcie::ps_per_kib(3, 16),
        Time::from_ns(20),
        [0; 3],
        true,
    );
    let mem = net.add_sink("dram", 1000.0, Time::from_ns(80), Time::from_ns(10), 64);
    let r = net.add_route(vec![
        Hop::Wire(f),
        Hop::Delay(Time::from_ns(delay_ns)),
        Hop::Wire(g),
        Hop::Sink(mem, false),
    ]);
    (net, r)
}

#[test]
fn streaming_writes_run_at_link_efficiency() {
    let (mut net, r) = one_link([0; 3], 100);
    let gbps = run(&mut net, r, false, 256, 0, 4 << 20);
    let expect = 256.0 / pcie::wire_bytes(256, false, true) as f64 * pcie::link_gbps(3, 16);
    assert!((gbps / expect - 1.0).abs() < 0.03, "{gbps} vs {expect}");
}

#[test]
fn reads_are_bounded_by_outstanding_bytes_over_round_trip() {
    let (mut net, r) = one_link([0; 3], 2000);
    // RTT ≈ 2 × (20 + 2000 + 20) ns + 80 ns ≈ 4.2 µs; 4 × 512 B in flight ⇒ ≈ 0.49 GB/s.
    let gbps = run(&mut net, r, true, 512, 4, 1 << 20);
    assert!((0.40..0.52).contains(&gbps), "{gbps}");
    // Twice the window, twice the bandwidth while latency-bound.
    let (mut net2, r2) = one_link([0; 3], 2000);
    let g2 = run(&mut net2, r2, true, 512, 8, 1 << 20);
    assert!((g2 / gbps - 2.0).abs() < 0.1, "{g2} vs {gbps}");
}

#[test]
fn completions_are_split_at_the_read_completion_boundary() {
    let (mut net, r) = one_link([0; 3], 0);
    run(&mut net, r, true, 512, 1, 512 * 10);
    let c = net.counters();
    let back = c.wires.iter().find(|w| w.0 == "x16 ←").unwrap();
    assert_eq!(back.3, 80, "10 reads of 512 B → 80 completions of 64 B");
    assert_eq!(back.2, 5120);
}

#[test]
fn receiver_credits_bound_a_long_credit_loop() {
    // 4 posted credits, loop ≈ ser + 20 ns + 500 ns + 22 ns ⇒ ≈ 4 × 256 B / 560 ns ≈ 1.8 GB/s.
    let (mut net, r) = one_link([4, 4, 4], 500);
    let gbps = run(&mut net, r, false, 256, 0, 1 << 20);
    assert!((1.6..2.0).contains(&gbps), "{gbps}");
    let (mut net, r) = one_link([8, 8, 8], 500);
    let g8 = run(&mut net, r, false, 256, 0, 1 << 20);
    assert!(
        (g8 / gbps - 2.0).abs() < 0.15,
        "twice the credits, twice the rate: {g8} vs {gbps}"
    );
}

fn splitting_root(tags: u32, split: bool, gap: Time) -> (Net, u32) {
    let mut net = Net::new(1);
    let (a, _) = net.add_link(
        "up",
        pcie::ps_per_kib(3, 16),
        Time::from_ns(20),
        [0; 3],
        true,
    );
    let (b, _) = net.add_link(
        "down",
        pcie::ps_per_kib(3, 16),
        Time::from_ns(20),
        [0; 3],
        true,
    );
    let mem = net.add_sink("gpu", 1000.0, Time::from_ns(300), Time::from_ns(10), 128);
    let sp = net.add_splitter("rc", 64, tags, gap);
    let mut hops = vec![Hop::Wire(a), Hop::Delay(Time::from_ns(100))];
    if split {
        hops.push(Hop::RootSplit(sp));
    }
    hops.extend([
        Hop::Wire(b),
        Hop::Delay(Time::from_ns(500)),
        Hop::Sink(mem, false),
    ]);
    let r = net.add_route(hops);
    (net, r)
}

#[test]
fn a_splitting_root_with_few_tags_collapses_read_bandwidth() {
    let build = |tags, split| splitting_root(tags, split, Time::ZERO);
    let (mut n0, r0) = build(16, false);
    let direct = run(&mut n0, r0, true, 256, 32, 1 << 20);
    let (mut n1, r1) = build(16, true);
    let split = run(&mut n1, r1, true, 256, 32, 1 << 20);
    assert!(split < direct / 3.0, "split {split} vs direct {direct}");
    let (mut n2, r2) = build(32, true);
    let more_tags = run(&mut n2, r2, true, 256, 32, 1 << 20);
    assert!(
        more_tags > split * 1.6,
        "root tags bound it: {more_tags} vs {split}"
    );
}

#[test]
fn a_root_re_issue_gap_caps_split_reads_whatever_the_tags() {
    // 64 B per 40 ns = 1.6 GB/s, below what 64 tags over the ≈ 0.6 µs loop allow (≈ 6 GB/s).
    let gap = Time::from_ns(40);
    let (mut n, r) = splitting_root(64, true, gap);
    let paced = run(&mut n, r, true, 256, 32, 1 << 20);
    assert!((1.45..=1.6).contains(&paced), "{paced}");
    let (mut n, r) = splitting_root(128, true, gap);
    let more_tags = run(&mut n, r, true, 256, 32, 1 << 20);
    assert!(
        (more_tags / paced - 1.0).abs() < 0.02,
        "tags no longer matter: {more_tags} vs {paced}"
    );
    // The gap belongs to the root's re-issue: a read that is not split is not paced.
    let (mut n, r) = splitting_root(64, false, gap);
    let direct = run(&mut n, r, true, 256, 32, 1 << 20);
    assert!(direct > 3.0 * paced, "{direct} vs {paced}");
}

#[test]
fn same_inputs_same_timing() {
    let a = {
        let (mut n, r) = one_link([4, 4, 4], 300);
        run(&mut n, r, true, 512, 8, 1 << 20)
    };
    let b = {
        let (mut n, r) = one_link([4, 4, 4], 300);
        run(&mut n, r, true, 512, 8, 1 << 20)
    };
    assert_eq!(a.to_bits(), b.to_bits());
}

/// Writes `bytes` at target 0 over `route`, then reads them back over `read_route`.
fn write_then_read(net: &mut Net, write_route: u32, read_route: u32, bytes: u64) -> (f64, f64) {
    let w = run(net, write_route, false, 256, 0, bytes);
    let r = run(net, read_route, true, 256, 8, bytes);
    (w, r)
}

#[test]
fn ddio_writes_allocate_in_the_llc_and_remote_writes_invalidate() {
    let build = |ddio: bool| {
        let mut net = Net::new(1);
        let (f, _) = net.add_link(
            "x16",
            pcie::ps_per_kib(3, 16),
            Time::from_ns(20),
            [0; 3],
            true,
        );
        let mem = net.add_sink("dram", 50.0, Time::from_ns(90), Time::from_ns(90), 64);
        net.set_llc(mem, 1 << 20, Time::from_ns(20));
        let w = net.add_route(vec![Hop::Wire(f), Hop::Sink(mem, ddio)]);
        let r = net.add_route(vec![Hop::Wire(f), Hop::Sink(mem, true)]);
        (net, w, r, mem)
    };
    // Local (DDIO) writes of 256 KiB fit in a 1 MiB DDIO share: the reads that follow hit.
    let (mut net, w, r, mem) = build(true);
    write_then_read(&mut net, w, r, 256 << 10);
    let llc = net.sink(mem).llc.clone().unwrap();
    assert_eq!(llc.ddio_allocs, 4096);
    assert_eq!((llc.dma_read_hits, llc.dma_read_misses), (4096, 0));
    assert_eq!(llc.writebacks, 0);
    // Writes from the other socket bypass the LLC: the same reads miss.
    let (mut net, w, r, mem) = build(false);
    write_then_read(&mut net, w, r, 256 << 10);
    let llc = net.sink(mem).llc.clone().unwrap();
    assert_eq!(llc.ddio_allocs, 0);
    assert_eq!(llc.dma_read_hits, 0);
    // A working set larger than the DDIO share spills: write-backs to DRAM.
    let (mut net, w, r, mem) = build(true);
    write_then_read(&mut net, w, r, 4 << 20);
    let llc = net.sink(mem).llc.clone().unwrap();
    assert_eq!(llc.writebacks, (4 << 20) / 64 - (1 << 20) / 64);
    assert!(llc.dma_read_misses > 0, "the early lines were evicted");
}

#[test]
fn a_cpu_stream_keeps_its_misses_in_flight_across_stop_and_restart() {
    use sim::cpu_stream::{CpuStream, StreamOp, StreamSpec};
    let mut net = Net::new(1);
    // 64 B per 10 ns at the sink, 100 ns latency: 4 misses in flight.
    let mem = net.add_sink("dram", 6.4, Time::from_ns(100), Time::from_ns(100), 64);
    let route = net.add_route(vec![Hop::Sink(mem, false)]);
    let mut sim = Sim::new();
    let s = sim.add(CpuStream::new(StreamSpec {
        name: "cores".into(),
        route,
        op: StreamOp::Read,
        outstanding: 4,
        base: 0,
        span: 1 << 20,
        fill_llc: None,
        fills_per_eviction: 0,
    }));
    let window = |sim: &mut Sim<Net>, net: &mut Net| {
        let before = sim.get::<CpuStream>(s).unwrap().bytes_read;
        sim.run_for(net, Time::from_ns(10_000));
        sim.get::<CpuStream>(s).unwrap().bytes_read - before
    };
    net.wake_at(Time::ZERO, s);
    let first = window(&mut sim, &mut net);
    // 4 lines per 100 ns round trip for 10 µs (the sink, at 40 % load, adds no wait).
    assert!(
        (first as f64 / (4.0 * 64.0 * 10_000.0 / 100.0) - 1.0).abs() < 0.02,
        "{first}"
    );
    sim.get_mut::<CpuStream>(s).unwrap().stop();
    // Restarting before the misses in flight land must not add fill buffers.
    sim.with(&mut net, s, |c: &mut CpuStream, net| c.start(net, s));
    let second = window(&mut sim, &mut net);
    assert!(second.abs_diff(first) <= 4 * 64, "{second} vs {first}");
    sim.get_mut::<CpuStream>(s).unwrap().stop();
    let at = net.now();
    assert_eq!(sim.run_until_idle(&mut net), sim::component::Stop::Idle);
    assert!(
        net.now() - at <= Time::from_ns(120),
        "stopped streams drain: {:?}",
        net.now() - at
    );
}
