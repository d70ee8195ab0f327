//! The kernel-style NVMe block driver (`systems::drivers::nvme_blk`): the same driver
//! code on a local and a borrowed controller, bytes written and read back, no control
//! message per I/O when borrowed, every per-I/O mapping gone after it, the lent-vs-local
//! latency difference derived from the routes' step times, and an error (not wrong data)
//! after the device is returned.

mod common;

use common::{builtin_text, timed};
use fabric::{Access, Request, Requester};
use sim::timed::TimedFabric;
use sim::Time;
use systems::drivers::nvme_blk::{BlkConfig, BlkError, BlkRequest, BlkRun};
use systems::drivers::{nvme_qd1_latency, LatencyResult};

/// docs/hardware.md §2: the thesis compared local and lent with a RAM-disk NVMe in the
/// chassis position. The same edits as the experiment's `set` overrides
/// (`host.user.device.nvme.device_model`, `host.lender.device.nvme.device_model`,
/// `host.borrower.iommu`).
fn ramdisk(text: &str) -> String {
    let t = text.replace(
        r#"device_model = "p4800x""#,
        r#"device_model = "ramdisk_nvme""#,
    );
    assert_ne!(t, text, "the chassis has its NVMe");
    t
}

fn borrower_iommu(text: &str, on: bool) -> String {
    let a = "name = \"borrower\"\nplatform = \"smartio_host\"\n";
    assert!(text.contains(a));
    text.replace(a, &format!("{a}iommu = {on}\n"))
}

/// The four configs of `smartio.nvme_latency`: (name, scenario text, host, device, borrowed).
fn configs() -> Vec<(&'static str, String, &'static str, &'static str, bool)> {
    vec![
        (
            "local_chassis",
            ramdisk(&builtin_text("smartio_chassis_baseline")),
            "user",
            "user.nvme",
            false,
        ),
        (
            "lent_chassis",
            borrower_iommu(&ramdisk(&builtin_text("smartio_chassis_b2b")), true),
            "borrower",
            "lender.nvme",
            true,
        ),
        (
            "local_direct",
            builtin_text("smartio_nvme_direct"),
            "user",
            "user.nvme",
            false,
        ),
        (
            "borrowed_b2b",
            builtin_text("smartio_900p_b2b"),
            "borrower",
            "lender.nvme",
            true,
        ),
    ]
}

fn measure(text: &str, host: &str, dev: &str, borrowed: bool, ios: u64) -> LatencyResult {
    let mut tf = timed(text);
    nvme_qd1_latency(&mut tf, host, dev, borrowed, ios, 7).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn the_same_driver_writes_and_reads_back_bytes_on_a_local_and_a_borrowed_controller() {
    for (name, text, host, dev, borrowed) in configs().into_iter().take(2) {
        let r = measure(&text, host, dev, borrowed, 40);
        assert_eq!(r.mismatches, 0, "{name}");
        assert_eq!(r.bytes_verified, 40 * 4096, "{name}: every block read back");
        assert!(
            r.median_us > 0.0 && r.p99_us >= r.median_us,
            "{name}: {r:?}"
        );
    }
}

#[test]
fn borrowed_io_sends_no_control_message_while_the_borrow_and_probe_do() {
    let text = borrower_iommu(&ramdisk(&builtin_text("smartio_chassis_b2b")), true);
    let r = measure(&text, "borrower", "lender.nvme", true, 30);
    assert_eq!(r.control_msgs_per_io, 0.0, "{r:?}");
    assert!(r.borrow_msgs >= 2, "request and grant: {r:?}");
    // Config space (id, command read and write) forwarded, MSI set up.
    assert!(r.probe_msgs >= 7, "{r:?}");
    // The count is real: without a borrower IOMMU there is no DMA window, and every
    // mapping is a lender window set up and torn down by messages.
    let text = borrower_iommu(&ramdisk(&builtin_text("smartio_chassis_b2b")), false);
    let r = measure(&text, "borrower", "lender.nvme", true, 10);
    assert_eq!(r.control_msgs_per_io, 2.0, "{r:?}");
    assert_eq!(r.bytes_verified, 10 * 4096);
    // Local: nothing to count.
    let text = ramdisk(&builtin_text("smartio_chassis_baseline"));
    let r = measure(&text, "user", "user.nvme", false, 10);
    assert_eq!(
        (r.control_msgs_per_io, r.borrow_msgs, r.probe_msgs),
        (0.0, 0, 0)
    );
}

#[test]
fn every_mapping_made_for_an_io_is_gone_after_it() {
    for (name, text, host, dev, borrowed) in configs().into_iter().take(2) {
        let mut tf = timed(&text);
        let mut run = BlkRun::new(&mut tf, host, dev, borrowed, BlkConfig::default()).unwrap();
        let before = run.live_mappings(&mut tf);
        let reqs = (0..20)
            .map(|i| BlkRequest {
                write: i % 2 == 0,
                lba: 1000 + i / 2,
                cpu: 0,
            })
            .collect();
        let log = run.run(&mut tf, reqs).unwrap().clone();
        assert_eq!(
            (log.maps, log.unmaps),
            (20, 20),
            "{name}: one map and unmap per I/O"
        );
        assert_eq!(log.verified_bytes, 10 * 4096, "{name}");
        assert_eq!(
            run.live_mappings(&mut tf),
            before,
            "{name}: mappings back to the pre-I/O count"
        );
        // While one is mapped, it shows: map a page as the driver does and count.
        assert!(before > 0, "{name}: the queues' coherent mappings are live");
    }
}

/// Zero-load time of `req`'s route (every step's time from `TimedFabric::step_times`).
fn route_ns(tf: &mut TimedFabric, req: Request) -> f64 {
    let (_, times) = tf.step_times(&req).unwrap();
    times
        .iter()
        .copied()
        .fold(Time::ZERO, |a, b| a + b)
        .as_ns_f64()
}

/// The one-way trips on the critical path of a QD1 4 KiB read, after the SQ entry is
/// stored: the doorbell (CPU → BAR0), the SQ entry fetch (request and its completion:
/// a round trip), the data (device → RAM, the last 256 B TLP) and the CQ entry (device →
/// RAM). The CQ poll is the CPU reading its own RAM in both cases. Zero-load sum.
fn command_trips_ns(tf: &mut TimedFabric, run: &BlkRun, cpu: Requester) -> f64 {
    let dev = Requester::Function(run.function);
    let q = run.driver().inner().queue_pair(1).unwrap().mem;
    let bar0 = run.driver().bar0();
    let req = |requester, addr, len, access| Request {
        requester,
        addr,
        len,
        access,
    };
    route_ns(tf, req(cpu, bar0 + 0x1008, 4, Access::Write))
        + route_ns(tf, req(dev, q.sq_dev, 64, Access::Read))
        // The fetch's completion comes back the reverse way: as a 64 B write toward the SQ.
        + route_ns(tf, req(dev, q.sq_dev, 64, Access::Write))
        + route_ns(tf, req(dev, q.cq_dev, 256, Access::Write))
        + route_ns(tf, req(dev, q.cq_dev, 16, Access::Write))
}

fn bcpu_host(tf: &TimedFabric) -> fabric::HostId {
    tf.fabric.topo.host_by_name("borrower").unwrap()
}

fn qd1_reads(tf: &mut TimedFabric, run: &mut BlkRun, n: u64) -> f64 {
    let w: Vec<BlkRequest> = (0..n)
        .map(|i| BlkRequest {
            write: true,
            lba: i * 7919 % 100_000,
            cpu: 0,
        })
        .collect();
    run.run(tf, w.clone()).unwrap();
    run.driver_mut().reset_stats();
    let r: Vec<BlkRequest> = w
        .iter()
        .map(|x| BlkRequest { write: false, ..*x })
        .collect();
    let log = run.run(tf, r).unwrap();
    assert_eq!(log.verified_bytes, n * 4096);
    log.read_latency.quantile_ns(0.5).unwrap()
}

#[test]
fn lent_qd1_latency_exceeds_local_by_the_ntb_crossings_of_the_commands_trips() {
    let (_, local_text, ..) = configs().remove(0);
    let (_, lent_text, ..) = configs().remove(1);
    let mut ltf = timed(&local_text);
    let mut local =
        BlkRun::new(&mut ltf, "user", "user.nvme", false, BlkConfig::default()).unwrap();
    let mut btf = timed(&lent_text);
    let mut lent = BlkRun::new(
        &mut btf,
        "borrower",
        "lender.nvme",
        true,
        BlkConfig::default(),
    )
    .unwrap();
    // Same chip count: the drive reaches the driving host's root through three switch
    // chips either way (chassis switch + HIB68 pair, or chassis switch + two PXH830s).
    let chips = |tf: &mut TimedFabric, run: &BlkRun| {
        let q = run.driver().inner().queue_pair(1).unwrap().mem;
        let req = Request {
            requester: Requester::Function(run.function),
            addr: q.cq_dev,
            len: 16,
            access: Access::Write,
        };
        let (path, _) = tf.step_times(&req).unwrap();
        path.steps
            .iter()
            .filter(|s| matches!(s, fabric::Step::Switch { .. }))
            .count()
    };
    assert_eq!(chips(&mut ltf, &local), chips(&mut btf, &lent));
    let ucpu = Requester::Cpu {
        host: ltf.fabric.topo.host_by_name("user").unwrap(),
        package: 0,
    };
    let bcpu = Requester::Cpu {
        host: btf.fabric.topo.host_by_name("borrower").unwrap(),
        package: 0,
    };
    let local_trips = command_trips_ns(&mut ltf, &local, ucpu);
    let lent_trips = command_trips_ns(&mut btf, &lent, bcpu);
    let expected = lent_trips - local_trips;
    let near = qd1_reads(&mut ltf, &mut local, 100);
    let far = qd1_reads(&mut btf, &mut lent, 100);
    eprintln!(
        "QD1 4 KiB read p50: local chassis {near:.0} ns, lent chassis {far:.0} ns; \
         difference {:.0} ns, expected from the command's one-way trips {expected:.0} ns \
         (local {local_trips:.0}, lent {lent_trips:.0})",
        far - near
    );
    assert!(expected > 0.0, "the NTB path is the longer");
    // The CPU finds the completion by polling its CQ: each side's latency is quantized by
    // a poll (a CPU read of its RAM every `cpu_poll_ns`), so the measured difference is
    // the trips' difference within two poll periods.
    let poll = btf.timing_of(bcpu_host(&btf)).cpu_poll_ns;
    let d = far - near;
    assert!(
        d > 0.5 * expected && d < expected + 2.0 * poll,
        "measured {d} ns vs expected {expected} ns (poll {poll} ns)"
    );
}

#[test]
fn after_the_device_is_returned_the_next_io_fails_with_an_error_not_wrong_data() {
    let (_, text, ..) = configs().remove(1);
    let mut tf = timed(&text);
    let mut run = BlkRun::new(
        &mut tf,
        "borrower",
        "lender.nvme",
        true,
        BlkConfig::default(),
    )
    .unwrap();
    let w = BlkRequest {
        write: true,
        lba: 42,
        cpu: 0,
    };
    run.run(&mut tf, vec![w, BlkRequest { write: false, ..w }])
        .unwrap();
    assert_eq!(run.driver().log.verified_bytes, 4096);
    run.return_device(&mut tf).unwrap();
    let e = run
        .run(&mut tf, vec![BlkRequest { write: false, ..w }])
        .expect_err("I/O on a returned device");
    assert!(matches!(e, BlkError::Io(_)), "{e}");
    assert!(e.to_string().contains("does not hold"), "{e}");
    let log = &run.driver().log;
    assert_eq!(
        (log.verified_bytes, log.mismatches, log.completed),
        (4096, 0, 2)
    );
}

#[test]
fn the_four_configs_of_smartio_nvme_latency() {
    for (name, text, host, dev, borrowed) in configs() {
        let r = measure(&text, host, dev, borrowed, 300);
        eprintln!(
            "{name}: read p50 {:.2} us p99 {:.2} us, write p50 {:.2} us p99 {:.2} us, \
             control msgs/IO {}, borrow {} probe {} msgs, {} B verified",
            r.median_us,
            r.p99_us,
            r.write_median_us,
            r.write_p99_us,
            r.control_msgs_per_io,
            r.borrow_msgs,
            r.probe_msgs,
            r.bytes_verified
        );
        assert_eq!(r.control_msgs_per_io, 0.0, "{name}");
        assert_eq!((r.bytes_verified, r.mismatches), (300 * 4096, 0), "{name}");
    }
}
