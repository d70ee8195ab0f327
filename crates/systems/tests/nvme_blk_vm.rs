//! The same `NvmeBlk` driver local, borrowed and in a VM (MDEV): bytes written and read
//! back through the guest's path with no control message per I/O, Bus Master Enable from
//! the driver's own probe config write, and the same admin command sequence on all three.

mod common;

use common::{builtin_text, timed};
use sim::timed::TimedFabric;
use systems::drivers::nvme_blk::{BlkConfig, BlkRequest, BlkRun};

/// `smartio_900p_b2b` with a P4800X in the lender and the lender's IOMMU on (MDEV needs it).
fn b2b_p4800x_lender_iommu() -> String {
    let t = builtin_text("smartio_900p_b2b");
    let a = "name = \"lender\"\nplatform = \"smartio_host\"\n";
    assert!(t.contains(a));
    let t = t.replace(a, &format!("{a}iommu = true\n"));
    let b = "device_model = \"optane900p\"";
    assert!(t.contains(b));
    t.replace(b, "device_model = \"p4800x\"")
}

fn random_blocks(n: u64, seed: u64) -> Vec<BlkRequest> {
    let mut x = seed;
    let mut seen = std::collections::BTreeSet::new();
    let mut out = Vec::new();
    while (out.len() as u64) < n {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let lba = (x >> 33) % 200_000;
        if seen.insert(lba) {
            out.push(BlkRequest {
                write: true,
                lba,
                cpu: 0,
            });
        }
    }
    out
}

/// Random 4 KiB writes then reads of the same blocks; the read median (µs).
fn write_read(tf: &mut TimedFabric, run: &mut BlkRun, n: u64) -> f64 {
    let w = random_blocks(n, 42);
    let before = run.control_msgs();
    run.run(tf, w.clone()).unwrap_or_else(|e| panic!("{e}"));
    run.driver_mut().reset_stats();
    let r: Vec<BlkRequest> = w
        .iter()
        .map(|x| BlkRequest { write: false, ..*x })
        .collect();
    let log = run.run(tf, r).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(log.mismatches, 0);
    assert_eq!(
        log.verified_bytes,
        n * 4096,
        "every block read back identical"
    );
    let med = log.read_latency.quantile_ns(0.5).unwrap() / 1000.0;
    assert_eq!(run.control_msgs(), before, "no control message per I/O");
    med
}

#[test]
fn the_same_driver_writes_and_reads_back_through_a_vm() {
    let mut tf = timed(&b2b_p4800x_lender_iommu());
    let mut vm = BlkRun::new_vm(&mut tf, "borrower", "lender.nvme", BlkConfig::default())
        .unwrap_or_else(|e| panic!("{e}"));
    let (hv, m) = vm.vm.clone().unwrap();
    assert!(
        hv.borrow().bus_master(m).unwrap(),
        "the driver's probe config write enabled bus mastering through the mdev"
    );
    assert!(
        vm.borrow.is_some(),
        "the guest's first config write borrowed the device"
    );
    assert!(hv.borrow().stats().dma_setups >= 1);
    let vm_us = write_read(&mut tf, &mut vm, 64);

    let mut tf = timed(&b2b_p4800x_lender_iommu());
    let mut lent = BlkRun::new(
        &mut tf,
        "borrower",
        "lender.nvme",
        true,
        BlkConfig::default(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let lent_us = write_read(&mut tf, &mut lent, 64);
    eprintln!("QD1 4 KiB read median: VM {vm_us:.3} us, borrowed {lent_us:.3} us");
    assert!(vm_us > 0.0 && lent_us > 0.0);
}

#[test]
fn local_borrowed_and_vm_runs_use_the_same_driver_and_steps() {
    let mut runs = Vec::new();
    let text = b2b_p4800x_lender_iommu();
    let mut tf = timed(&text);
    runs.push(
        BlkRun::new(
            &mut tf,
            "lender",
            "lender.nvme",
            false,
            BlkConfig::default(),
        )
        .unwrap(),
    );
    let mut tf = timed(&text);
    runs.push(
        BlkRun::new(
            &mut tf,
            "borrower",
            "lender.nvme",
            true,
            BlkConfig::default(),
        )
        .unwrap(),
    );
    let mut tf = timed(&text);
    runs.push(BlkRun::new_vm(&mut tf, "borrower", "lender.nvme", BlkConfig::default()).unwrap());
    let ops: Vec<Vec<u8>> = runs
        .iter()
        .map(|r| {
            // `driver()` downcasts to `NvmeBlk`: the same driver type in all three.
            r.driver()
                .inner()
                .log
                .admin
                .iter()
                .map(|(c, _)| c.opcode)
                .collect()
        })
        .collect();
    assert!(ops[0].len() >= 5, "{ops:?}");
    assert_eq!(ops[0], ops[1]);
    assert_eq!(ops[0], ops[2]);
    for r in &runs {
        assert!(r.driver().ready());
        assert_eq!(r.driver().log.nsze, runs[0].driver().log.nsze);
    }
}
