//! The `gpu_copy` and `gpu_p2p` workloads' operations run as a SmartIO user program: the GPU is
//! borrowed (visible in the pool) while the DMA runs, its bytes land in the borrower's
//! segment, and returning it tears every window down so its old address faults.

use fabric::{NtbId, Requester};
use host::Hosts;
use studies::harness;
use studies::smartio::program::Program;
use studies::smartio::{DataPath, GpuCopy};
use systems::smartio::Lease;

/// Address-LUT windows held through every adapter's driver.
fn windows_held(tf: &mut sim::timed::TimedFabric) -> usize {
    let ntbs = tf.fabric.topo.ntbs.len();
    Hosts::with(&mut tf.fabric, |h, _| {
        (0..ntbs)
            .map(NtbId::from_index)
            .filter_map(|n| h.ntb(n).map(|d| d.windows_held()))
            .sum()
    })
}

#[test]
fn gpu_copy_borrows_the_gpu_while_it_copies_and_returns_it() {
    let mut tf = harness::load("smartio_chassis_b2b", &[]).unwrap();
    let idle = windows_held(&mut tf);
    let bytes = 64 << 10;
    let mut p = Program::new(&tf, "borrower").unwrap();
    let g = GpuCopy::set_up(&mut p, &mut tf, "lender.gpu", bytes).unwrap();
    let fdid = p
        .cluster
        .fabric_device_id(&tf.fabric, "lender.gpu")
        .unwrap();
    let b = p.borrows()[0];
    assert_eq!(b.fdid, fdid);
    assert_eq!(
        p.cluster.device(fdid).unwrap().lease,
        Lease::Exclusive(b.id),
        "the GPU is borrowed while the copy runs"
    );
    assert!(
        windows_held(&mut tf) > idle,
        "the borrow programs NTB windows"
    );

    let t = g.time(&mut tf, p.host, true).unwrap();
    assert!(t > sim::Time::ZERO);
    let cpu = Requester::Cpu {
        host: p.host,
        package: 0,
    };
    let mut back = vec![0u8; bytes as usize];
    tf.fabric.load(cpu, g.buffer.phys.addr, &mut back).unwrap();
    let want: Vec<u8> = (0..bytes).map(|i| devices::pattern_byte(0, i)).collect();
    assert!(
        back == want,
        "the GPU's bytes land in the borrower's segment"
    );

    p.finish(&mut tf).unwrap();
    assert_eq!(p.cluster.device(fdid).unwrap().lease, Lease::Free);
    assert!(p.borrows().is_empty());
    assert_eq!(
        windows_held(&mut tf),
        idle,
        "return tears every window down"
    );
    let gpu = g.gpu.requester();
    assert!(
        tf.fabric.store(gpu, g.buf, &[1, 2, 3, 4]).is_err(),
        "the GPU's old address into the borrower no longer routes"
    );
}

#[test]
fn p2p_between_two_lenders_goes_through_both_borrows() {
    let mut tf = harness::load("smartio_three_way", &[]).unwrap();
    let idle = windows_held(&mut tf);
    let mut p = Program::new(&tf, "user").unwrap();
    let path =
        DataPath::set_up(&mut p, &mut tf, "lender1.gpu0", "lender2.gpu0", false, 4096).unwrap();
    assert_eq!(p.borrows().len(), 2, "both GPUs are borrowed by the user");
    assert!(path.src.is_none());
    let data: Vec<u8> = (0..64u8).collect();
    tf.fabric
        .store(path.a.requester(), path.dst, &data)
        .unwrap();
    // A's write landed in B's BAR1, as B's lender's CPU reads it there.
    let bar1 = tf.fabric.topo.node(path.b.function).bar(1).unwrap().addr;
    let lender2 = tf.fabric.topo.host_by_name("lender2").unwrap();
    let mut back = vec![0u8; data.len()];
    tf.fabric
        .load(
            Requester::Cpu {
                host: lender2,
                package: 0,
            },
            bar1,
            &mut back,
        )
        .unwrap();
    assert_eq!(back, data);
    p.finish(&mut tf).unwrap();
    assert_eq!(windows_held(&mut tf), idle);
}

#[test]
fn a_gpu_of_another_host_cannot_be_borrowed_twice() {
    let mut tf = harness::load("smartio_chassis_b2b", &[]).unwrap();
    let mut p = Program::new(&tf, "borrower").unwrap();
    p.device(&mut tf, "lender.gpu", 4096).unwrap();
    let e = p.device(&mut tf, "lender.gpu", 4096).unwrap_err();
    assert!(e.0.contains("borrowed exclusively"), "{}", e.0);
    p.finish(&mut tf).unwrap();
}
