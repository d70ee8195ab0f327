//! The SISCI-shaped API: segments placed by access hints (an NVMe-style submission queue
//! near the device, a completion queue near the CPU), mapped for the device and for the
//! borrower's CPU with real bytes both ways; BAR segments; requester registration.

mod common;

use common::*;
use fabric::Requester;
use host::{DmaDirection, NumaNode};
use systems::smartio::{AccessHints, BorrowOptions, Cluster, ControlKind, Near, SegmentKind};

fn setup(lender_iommu: bool) -> (fabric::Fabric, Cluster, systems::smartio::Borrowed) {
    let mut f = fabric(lender_iommu, true);
    let mut c = Cluster::new(&f);
    let nvme = c.fabric_device_id(&f, "lender.nvme").unwrap();
    c.lend(nvme).unwrap();
    let borrower = host(&f, "borrower");
    let b = c
        .borrow(&mut f, borrower, nvme, BorrowOptions::exclusive())
        .unwrap();
    (f, c, b)
}

#[test]
fn hints_place_a_submission_queue_near_the_device_and_a_completion_queue_near_the_cpu() {
    let (mut f, mut c, b) = setup(false);
    let (lender, borrower) = (host(&f, "lender"), host(&f, "borrower"));
    let sq = c
        .create_device_segment(
            &mut f,
            b,
            4096,
            AccessHints::DEVICE_READ | AccessHints::HOST_WRITE,
            None,
        )
        .unwrap();
    let cq = c
        .create_device_segment(
            &mut f,
            b,
            4096,
            AccessHints::DEVICE_WRITE | AccessHints::HOST_READ,
            None,
        )
        .unwrap();
    assert_eq!(
        sq.phys.host, lender,
        "device-read, host-write: the lender's RAM"
    );
    assert_eq!(
        cq.phys.host, borrower,
        "device-write, host-read: the borrower's RAM"
    );
    let forced = c
        .create_device_segment(
            &mut f,
            b,
            4096,
            AccessHints::DEVICE_READ | AccessHints::HOST_WRITE,
            Some(Near::Cpu),
        )
        .unwrap();
    assert_eq!(forced.phys.host, borrower, "an explicit placement wins");
    let pinned = c
        .create_device_segment(
            &mut f,
            b,
            4096,
            AccessHints::default(),
            Some(Near::Node(NumaNode {
                host: lender,
                node: 0,
            })),
        )
        .unwrap();
    assert_eq!(pinned.phys.host, lender);
    assert_eq!(sq.kind, SegmentKind::Ram);

    let dev = function(&f, "lender.nvme");
    let cpu = Requester::Cpu {
        host: borrower,
        package: 0,
    };
    let messages = c.stats().total();
    // The host writes a command into the SQ through its NTB; the device reads it locally.
    let sq_cpu = c.map_segment_for_cpu(&mut f, borrower, &sq).unwrap();
    let sq_dev = c
        .map_segment_for_device(&mut f, b, &sq, DmaDirection::ToDevice)
        .unwrap();
    assert_eq!(
        sq_dev.addr.0, sq.phys.addr,
        "lender RAM: the device's own bus address"
    );
    let cmd = bytes(64, 0x21);
    f.store(cpu, sq_cpu.addr + 128, &cmd).unwrap();
    let mut got = vec![0; 64];
    f.load(Requester::Function(dev), sq_dev.addr.0 + 128, &mut got)
        .unwrap();
    assert_eq!(got, cmd);
    // The device writes a completion into the CQ through its DMA window; the host reads it.
    let cq_cpu = c.map_segment_for_cpu(&mut f, borrower, &cq).unwrap();
    assert_eq!(cq_cpu.addr, cq.phys.addr, "local memory: its own address");
    let cq_dev = c
        .map_segment_for_device(&mut f, b, &cq, DmaDirection::FromDevice)
        .unwrap();
    let w = c.dma_window(&f, b).unwrap().unwrap();
    assert!((w.device_base..w.device_base + w.iova.len).contains(&cq_dev.addr.0));
    let cpl = bytes(16, 0x42);
    f.store(Requester::Function(dev), cq_dev.addr.0 + 16, &cpl)
        .unwrap();
    let mut got = vec![0; 16];
    f.load(cpu, cq_cpu.addr + 16, &mut got).unwrap();
    assert_eq!(got, cpl);
    assert_eq!(c.stats().total(), messages, "no message for either queue");
    c.unmap_for_device(&mut f, &sq_dev).unwrap();
    c.unmap_for_device(&mut f, &cq_dev).unwrap();
    c.unmap_segment_for_cpu(&mut f, &sq_cpu).unwrap();
    for s in [sq, cq, forced, pinned] {
        c.remove_segment(&mut f, &s).unwrap();
    }
}

#[test]
fn with_the_lender_iommu_a_lender_segment_costs_one_message() {
    let (mut f, mut c, b) = setup(true);
    let sq = c
        .create_device_segment(
            &mut f,
            b,
            8192,
            AccessHints::DEVICE_READ | AccessHints::HOST_WRITE,
            None,
        )
        .unwrap();
    let before = c.stats().get(ControlKind::WindowSetup);
    let m = c
        .map_segment_for_device(&mut f, b, &sq, DmaDirection::ToDevice)
        .unwrap();
    assert_eq!(c.stats().get(ControlKind::WindowSetup), before + 1);
    let data = bytes(8192, 3);
    let lender = host(&f, "lender");
    f.store(
        Requester::Cpu {
            host: lender,
            package: 0,
        },
        sq.phys.addr,
        &data,
    )
    .unwrap();
    let mut got = vec![0; 8192];
    f.load(
        Requester::Function(function(&f, "lender.nvme")),
        m.addr.0,
        &mut got,
    )
    .unwrap();
    assert_eq!(got, data);
}

#[test]
fn a_bar_segment_maps_for_the_borrower_s_cpu_as_the_shadow_bar() {
    let (mut f, mut c, b) = setup(false);
    let borrower = host(&f, "borrower");
    let seg = c.connect_device_segment(&f, b, 0).unwrap();
    assert_eq!(
        seg.kind,
        SegmentKind::Bar {
            fdid: b.fdid,
            bar: 0
        }
    );
    let m = c.map_segment_for_cpu(&mut f, borrower, &seg).unwrap();
    assert_eq!(m.addr, c.shadow_bar(&f, b, 0).unwrap());
    // A doorbell write.
    f.store(
        Requester::Cpu {
            host: borrower,
            package: 0,
        },
        m.addr + 0x1000,
        &[1, 0, 0, 0],
    )
    .unwrap();
    let mut got = [0u8; 4];
    f.peek_bar(function(&f, "lender.nvme"), 0, 0x1000, &mut got);
    assert_eq!(got, [1, 0, 0, 0]);
}

#[test]
fn a_registered_requester_takes_one_requester_lut_entry() {
    let (mut f, mut c, _b) = setup(false);
    let gpu = function(&f, "lender.gpu");
    let lntb = ntb(&f, "lender");
    let free = f.ntb_state(lntb).free_rids();
    let r = c.register_pcie_requester(&mut f, gpu).unwrap();
    assert_eq!(f.ntb_state(lntb).free_rids(), free - 1);
    assert_eq!(
        f.ntb_state(lntb).rid_index(f.topo.node(gpu).rid),
        Some(r.index())
    );
    c.unregister_pcie_requester(&mut f, r).unwrap();
    assert_eq!(f.ntb_state(lntb).free_rids(), free);
    let list = c.device_list(&f);
    assert_eq!(list[1].name, "lender.nvme");
    assert_eq!(list[1].borrowers, 1);
    assert_eq!(list[0].borrowers, 0);
}
