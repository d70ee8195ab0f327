//! Device Lending end to end: bytes through shadow BARs and DMA windows, control messages
//! counted (none per I/O), forwarded configuration, MSI redirection, INTx and FLR at the
//! lender, exclusive and shared borrows, use after return, vanishing hosts.

mod common;

use common::*;
use fabric::{FaultKind, Msi, Requester};
use host::{DmaDirection, Hosts};
use systems::smartio::{
    Availability, BorrowOptions, Cluster, ControlKind, Lease, LendError, CMD_INTX_DISABLE,
    DEVCTL_FLR, PCIE_DEVCTL,
};

fn lent(f: &mut fabric::Fabric, name: &str) -> (Cluster, systems::smartio::Fdid) {
    let mut c = Cluster::new(f);
    let fdid = c.fdid_by_name(f, name).unwrap();
    c.lend(fdid).unwrap();
    (c, fdid)
}

#[test]
fn fdids_follow_host_then_device_order() {
    let f = fabric(false, true);
    let c = Cluster::new(&f);
    let names: Vec<String> = c.device_list(&f).into_iter().map(|d| d.name).collect();
    assert_eq!(names, ["lender.gpu", "lender.nvme"]);
    assert_eq!(c.fabric_device_id(&f, "lender.nvme").unwrap().0, 1);
    assert!(c
        .device_list(&f)
        .iter()
        .all(|d| d.availability == Availability::Registered));
}

#[test]
fn a_cpu_store_through_a_shadow_bar_lands_in_the_real_bar() {
    let mut f = fabric(false, true);
    let (mut c, gpu) = lent(&mut f, "lender.gpu");
    let borrower = host(&f, "borrower");
    let b = c
        .borrow(&mut f, borrower, gpu, BorrowOptions::exclusive())
        .unwrap();
    let bars = c.shadow_bars(&f, b).unwrap();
    assert_eq!(bars.len(), 3);
    let dev = function(&f, "lender.gpu");
    for s in &bars {
        assert_ne!(
            s.bus, s.real,
            "the shadow is the borrower's NTB address, not the lender's"
        );
        let data = bytes(256, s.index);
        f.store(
            Requester::Cpu {
                host: borrower,
                package: 0,
            },
            s.bus + 0x1000,
            &data,
        )
        .unwrap();
        let mut got = vec![0; 256];
        f.peek_bar(dev, s.index, 0x1000, &mut got);
        assert_eq!(got, data, "BAR{}", s.index);
    }
}

#[test]
fn device_dma_lands_in_the_borrower_buffer_and_faults_after_return() {
    let mut f = fabric(false, true);
    let (mut c, gpu) = lent(&mut f, "lender.gpu");
    let borrower = host(&f, "borrower");
    let dev = function(&f, "lender.gpu");
    let b = c
        .borrow(&mut f, borrower, gpu, BorrowOptions::exclusive())
        .unwrap();
    let w = c
        .dma_window(&f, b)
        .unwrap()
        .expect("the borrower has an IOMMU");
    let buf = ram(&f, "borrower.ram", (5 << 20) + 0x123);
    let m = c
        .map_for_device(&mut f, b, buf, 10_000, DmaDirection::Bidirectional)
        .unwrap();
    assert!(
        (w.device_base..w.device_base + w.iova.len).contains(&m.addr.0),
        "inside the DMA window"
    );
    assert_eq!(m.addr.0 % 4096, 0x123, "the page offset is kept");
    let data = bytes(10_000, 7);
    f.store(Requester::Function(dev), m.addr.0, &data).unwrap();
    assert_eq!(peek(&f, buf, 10_000), data);
    let mut back = vec![0; 10_000];
    f.load(Requester::Function(dev), m.addr.0, &mut back)
        .unwrap();
    assert_eq!(back, data);

    c.return_device(&mut f, b).unwrap();
    let e = f
        .store(Requester::Function(dev), m.addr.0, &[1, 2, 3, 4])
        .unwrap_err();
    assert!(
        matches!(
            e.kind,
            FaultKind::NtbWindowUnmapped | FaultKind::NtbRequesterUnknown
        ),
        "{e:?}"
    );
    assert_eq!(peek(&f, buf, 4), data[..4], "nothing landed after return");
}

#[test]
fn a_thousand_map_dma_unmap_cycles_send_no_control_message() {
    let mut f = fabric(false, true);
    let (mut c, gpu) = lent(&mut f, "lender.gpu");
    let borrower = host(&f, "borrower");
    let dev = function(&f, "lender.gpu");
    let lntb = ntb(&f, "lender");
    let b = c
        .borrow(&mut f, borrower, gpu, BorrowOptions::exclusive())
        .unwrap();
    assert_eq!(c.stats().get(ControlKind::BorrowRequest), 1);
    assert_eq!(c.stats().get(ControlKind::BorrowGrant), 1);
    assert_eq!(c.stats().total(), 2, "{:?}", c.stats().by_kind());
    let windows = f.ntb_state(lntb).programmed_windows();
    let rids = f.ntb_state(lntb).free_rids();
    for i in 0..1000u64 {
        let buf = ram(&f, "borrower.ram", (1 << 24) + (i % 37) * 8192 + i % 64);
        let m = c
            .map_for_device(&mut f, b, buf, 300 + i % 5000, DmaDirection::Bidirectional)
            .unwrap();
        let data = bytes(64, i as u8);
        f.store(Requester::Function(dev), m.addr.0, &data).unwrap();
        let mut back = vec![0; 64];
        f.load(Requester::Function(dev), m.addr.0, &mut back)
            .unwrap();
        assert_eq!(back, data);
        c.unmap_for_device(&mut f, &m).unwrap();
    }
    assert_eq!(
        c.stats().total(),
        2,
        "no message per I/O: {:?}",
        c.stats().by_kind()
    );
    assert_eq!(
        f.ntb_state(lntb).programmed_windows(),
        windows,
        "no NTB change"
    );
    assert_eq!(f.ntb_state(lntb).free_rids(), rids);
    c.return_device(&mut f, b).unwrap();
    assert_eq!(c.stats().get(ControlKind::Return), 1);
    assert_eq!(c.stats().get(ControlKind::ReturnAck), 1);
    assert_eq!(c.stats().total(), 4);
}

#[test]
fn without_a_borrower_iommu_each_mapping_is_a_lender_window_and_a_message() {
    let mut f = fabric(false, false);
    let (mut c, gpu) = lent(&mut f, "lender.gpu");
    let borrower = host(&f, "borrower");
    let dev = function(&f, "lender.gpu");
    let lntb = ntb(&f, "lender");
    let b = c
        .borrow(&mut f, borrower, gpu, BorrowOptions::exclusive())
        .unwrap();
    assert!(c.dma_window(&f, b).unwrap().is_none());
    let before = f.ntb_state(lntb).programmed_windows();
    let buf = ram(&f, "borrower.ram", 3 << 20);
    let m = c
        .map_for_device(&mut f, b, buf, 4096, DmaDirection::FromDevice)
        .unwrap();
    assert_eq!(c.stats().get(ControlKind::WindowSetup), 1);
    assert_eq!(f.ntb_state(lntb).programmed_windows(), before + 1);
    let data = bytes(4096, 9);
    f.store(Requester::Function(dev), m.addr.0, &data).unwrap();
    assert_eq!(peek(&f, buf, 4096), data);
    c.unmap_for_device(&mut f, &m).unwrap();
    assert_eq!(c.stats().get(ControlKind::WindowTeardown), 1);
    assert_eq!(f.ntb_state(lntb).programmed_windows(), before);
}

#[test]
fn configuration_through_the_shadow_is_the_real_device_s() {
    let mut f = fabric(false, true);
    let (mut c, gpu) = lent(&mut f, "lender.gpu");
    let lender = host(&f, "lender");
    let borrower = host(&f, "borrower");
    let dev = function(&f, "lender.gpu");
    let rid = f.topo.node(dev).rid;
    // The device's identity, as its firmware presents it at the lender.
    f.config_write(lender, 0, rid, 0, &[0xde, 0x10, 0x24, 0x10])
        .unwrap();
    let b = c
        .borrow(&mut f, borrower, gpu, BorrowOptions::exclusive())
        .unwrap();
    let mut id = [0u8; 4];
    c.config_read(&mut f, b, 0, &mut id).unwrap();
    assert_eq!(id, [0xde, 0x10, 0x24, 0x10], "vendor 0x10de, device 0x1024");
    let mut bar1 = [0u8; 8];
    c.config_read(&mut f, b, 0x14, &mut bar1).unwrap();
    let real = f.topo.node(dev).bar(1).unwrap().addr;
    assert_eq!(
        u64::from_le_bytes(bar1) & !0xf,
        real,
        "BAR1 register as enumerated"
    );
    c.config_write(&mut f, b, 0x40, &[0xab]).unwrap();
    let mut x = [0u8; 1];
    f.config_read(lender, 0, rid, 0x40, &mut x).unwrap();
    assert_eq!(x, [0xab], "the write reached the real device");
    assert_eq!(c.stats().get(ControlKind::ConfigForward), 3);
    assert_eq!(c.stats().get(ControlKind::ConfigReply), 3);
}

#[test]
fn intx_is_masked_at_borrow_and_the_device_reset_at_return() {
    let mut f = fabric(false, true);
    let (mut c, gpu) = lent(&mut f, "lender.gpu");
    let lender = host(&f, "lender");
    let borrower = host(&f, "borrower");
    let rid = f.topo.node(function(&f, "lender.gpu")).rid;
    let read16 = |f: &mut fabric::Fabric, reg| {
        let mut v = [0u8; 2];
        f.config_read(lender, 0, rid, reg, &mut v).unwrap();
        u16::from_le_bytes(v)
    };
    assert_eq!(read16(&mut f, 0x04) & CMD_INTX_DISABLE, 0);
    let b = c
        .borrow(&mut f, borrower, gpu, BorrowOptions::exclusive())
        .unwrap();
    assert_ne!(read16(&mut f, 0x04) & CMD_INTX_DISABLE, 0, "INTx disabled");
    assert_eq!(read16(&mut f, PCIE_DEVCTL) & DEVCTL_FLR, 0);
    c.return_device(&mut f, b).unwrap();
    assert_ne!(
        read16(&mut f, PCIE_DEVCTL) & DEVCTL_FLR,
        0,
        "FLR written at the lender"
    );
}

#[test]
fn a_shared_device_is_reset_only_when_its_last_borrower_leaves() {
    let mut f = fabric(false, true);
    let (mut c, gpu) = lent(&mut f, "lender.gpu");
    let lender = host(&f, "lender");
    let rid = f.topo.node(function(&f, "lender.gpu")).rid;
    let flr = |f: &mut fabric::Fabric| {
        let mut v = [0u8; 2];
        f.config_read(lender, 0, rid, PCIE_DEVCTL, &mut v).unwrap();
        u16::from_le_bytes(v) & DEVCTL_FLR != 0
    };
    let (borrower, other) = (host(&f, "borrower"), host(&f, "other"));
    let s1 = c
        .borrow(&mut f, borrower, gpu, BorrowOptions::shared())
        .unwrap();
    let s2 = c
        .borrow(&mut f, other, gpu, BorrowOptions::shared())
        .unwrap();
    c.return_device(&mut f, s1).unwrap();
    assert!(!flr(&mut f), "no reset under the other borrower");
    c.host_vanished(&mut f, other).unwrap();
    assert!(flr(&mut f), "the last borrower's reclaim resets the device");
    let _ = s2;
}

#[test]
fn an_msi_of_the_device_becomes_an_interrupt_at_the_borrower() {
    for lender_iommu in [false, true] {
        let mut f = fabric(lender_iommu, true);
        let (mut c, gpu) = lent(&mut f, "lender.gpu");
        let borrower = host(&f, "borrower");
        let lender = host(&f, "lender");
        let dev = function(&f, "lender.gpu");
        let b = c
            .borrow(&mut f, borrower, gpu, BorrowOptions::exclusive())
            .unwrap();
        let r = c.setup_msi(&mut f, b, 0x41, 3).unwrap();
        assert_eq!(c.stats().get(ControlKind::MsiSetup), 1);
        assert!(
            !fabric::MSI_WINDOW.contains(&r.addr),
            "the device writes into the lender's NTB"
        );
        f.store(Requester::Function(dev), r.addr, &r.data.to_le_bytes())
            .unwrap();
        assert_eq!(
            f.interrupts().last(),
            Some(&Msi {
                host: borrower,
                apic: 3,
                data: 0x41
            }),
            "lender IOMMU {lender_iommu}"
        );
        assert!(f.interrupts().iter().all(|m| m.host != lender));
        // The device's MSI capability holds what it was given.
        let mut cap = [0u8; 12];
        f.config_read(lender, 0, f.topo.node(dev).rid, 0x54, &mut cap)
            .unwrap();
        assert_eq!(
            u32::from_le_bytes(cap[0..4].try_into().unwrap()),
            r.addr as u32
        );
        assert_eq!(u32::from_le_bytes(cap[8..12].try_into().unwrap()), 0x41);
    }
}

#[test]
fn shared_borrows_are_counted_and_exclusive_ones_refused_while_they_last() {
    let mut f = fabric(false, true);
    let (mut c, gpu) = lent(&mut f, "lender.gpu");
    let borrower = host(&f, "borrower");
    let other = host(&f, "other");
    let s1 = c
        .borrow(&mut f, borrower, gpu, BorrowOptions::shared())
        .unwrap();
    let s2 = c
        .borrow(&mut f, other, gpu, BorrowOptions::shared())
        .unwrap();
    assert_eq!(c.device(gpu).unwrap().borrowers(), 2);
    assert!(matches!(c.device(gpu).unwrap().lease, Lease::Shared(ref v) if v.len() == 2));
    let e = c
        .borrow(&mut f, other, gpu, BorrowOptions::exclusive())
        .unwrap_err();
    assert!(matches!(e, LendError::SharedHeld { count: 2, .. }), "{e}");
    assert!(e.to_string().contains("fdid 0 (`lender.gpu`)"), "{e}");
    c.return_device(&mut f, s1).unwrap();
    assert_eq!(c.device(gpu).unwrap().borrowers(), 1);
    c.return_device(&mut f, s2).unwrap();
    let x = c
        .borrow(&mut f, borrower, gpu, BorrowOptions::exclusive())
        .unwrap();
    let e = c
        .borrow(&mut f, other, gpu, BorrowOptions::exclusive())
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("it is borrowed exclusively by host `borrower`"),
        "{e}"
    );
    let e = c
        .borrow(&mut f, other, gpu, BorrowOptions::shared())
        .unwrap_err();
    assert!(matches!(e, LendError::ExclusiveHeld { .. }), "{e}");
    c.release_exclusive(&f, x).unwrap();
    let y = c
        .borrow(&mut f, other, gpu, BorrowOptions::shared())
        .unwrap();
    assert_eq!(c.device(gpu).unwrap().borrowers(), 2);
    c.return_device(&mut f, x).unwrap();
    c.return_device(&mut f, y).unwrap();
    assert_eq!(c.device(gpu).unwrap().lease, Lease::Free);
}

#[test]
fn handles_after_return_and_what_was_never_held_are_refused() {
    let mut f = fabric(false, true);
    let (mut c, gpu) = lent(&mut f, "lender.gpu");
    let borrower = host(&f, "borrower");
    let other = host(&f, "other");
    let b = c
        .borrow(&mut f, borrower, gpu, BorrowOptions::exclusive())
        .unwrap();
    let forged = systems::smartio::Borrowed { host: other, ..b };
    let e = c.return_device(&mut f, forged).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("host `other` does not hold fdid 0 (`lender.gpu`)"),
        "{e}"
    );
    c.return_device(&mut f, b).unwrap();
    let buf = ram(&f, "borrower.ram", 1 << 20);
    for e in [
        c.return_device(&mut f, b).unwrap_err(),
        c.map_for_device(&mut f, b, buf, 64, DmaDirection::ToDevice)
            .unwrap_err(),
        c.shadow_bar(&f, b, 1).unwrap_err(),
        c.setup_msi(&mut f, b, 1, 0).unwrap_err(),
    ] {
        assert!(matches!(e, LendError::NotHeld { .. }), "{e}");
    }
    let e = c
        .borrow(
            &mut f,
            borrower,
            systems::smartio::Fdid(99),
            BorrowOptions::shared(),
        )
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "unknown fabric device ID 99 (the pool has fdids 0..2)"
    );
    let nvme = c.fdid_by_name(&f, "lender.nvme").unwrap();
    let e = c
        .borrow(&mut f, borrower, nvme, BorrowOptions::shared())
        .unwrap_err();
    assert!(matches!(e, LendError::NotLent { .. }), "{e}");
}

#[test]
fn a_vanished_borrower_has_everything_reclaimed() {
    let mut f = fabric(true, true);
    let (mut c, gpu) = lent(&mut f, "lender.gpu");
    let borrower = host(&f, "borrower");
    let other = host(&f, "other");
    let lender = host(&f, "lender");
    let (lntb, bntb) = (ntb(&f, "lender"), ntb(&f, "borrower"));
    let b = c
        .borrow(&mut f, borrower, gpu, BorrowOptions::exclusive())
        .unwrap();
    let proxy = c.dma_window(&f, b).unwrap().unwrap().iova.rid;
    let buf = ram(&f, "borrower.ram", 1 << 20);
    c.map_for_device(&mut f, b, buf, 8192, DmaDirection::Bidirectional)
        .unwrap();
    c.setup_msi(&mut f, b, 5, 0).unwrap();
    let seg = c
        .create_device_segment(
            &mut f,
            b,
            4096,
            systems::smartio::AccessHints::DEVICE_READ | systems::smartio::AccessHints::HOST_WRITE,
            None,
        )
        .unwrap();
    c.map_segment_for_device(&mut f, b, &seg, DmaDirection::ToDevice)
        .unwrap();
    Hosts::with(&mut f, |h, _| {
        assert!(h.ntb(lntb).unwrap().windows_held() > 0);
        assert!(h.ntb(bntb).unwrap().windows_held() > 0);
        assert!(h.iommu(borrower).unwrap().reserved_pages_mapped(proxy) > 0);
    });
    c.host_vanished(&mut f, borrower).unwrap();
    assert_eq!(c.stats().get(ControlKind::Reclaim), 1);
    Hosts::with(&mut f, |h, _| {
        assert_eq!(h.ntb(lntb).unwrap().windows_held(), 0);
        assert_eq!(h.ntb(lntb).unwrap().requesters_held(), 0);
        assert_eq!(h.ntb(bntb).unwrap().windows_held(), 0);
        assert_eq!(h.iommu(borrower).unwrap().reserved_pages_mapped(proxy), 0);
        assert_eq!(
            h.live_mappings(),
            1,
            "only the lender-side segment (the lender's RAM) stays"
        );
    });
    assert_eq!(f.ntb_state(lntb).programmed_windows(), 0);
    assert_eq!(f.ntb_state(lntb).free_rids(), 30);
    let _ = lender;
    assert_eq!(c.device(gpu).unwrap().lease, Lease::Free);
    let again = c
        .borrow(&mut f, other, gpu, BorrowOptions::exclusive())
        .unwrap();
    assert_eq!(c.agent(other).peers().len(), 1);
    assert!(c.agent(borrower).peers().is_empty());
    let e = c
        .borrow(&mut f, borrower, gpu, BorrowOptions::shared())
        .unwrap_err();
    assert_eq!(e, LendError::HostVanished("borrower".into()));
    c.return_device(&mut f, again).unwrap();
}

#[test]
fn a_vanished_lender_makes_its_devices_gone() {
    let mut f = fabric(false, true);
    let (mut c, gpu) = lent(&mut f, "lender.gpu");
    let borrower = host(&f, "borrower");
    let other = host(&f, "other");
    let b = c
        .borrow(&mut f, borrower, gpu, BorrowOptions::shared())
        .unwrap();
    let lender = host(&f, "lender");
    c.host_vanished(&mut f, lender).unwrap();
    assert_eq!(c.stats().get(ControlKind::DeviceGone), 1);
    assert_eq!(c.device(gpu).unwrap().availability, Availability::Gone);
    let e = c
        .borrow(&mut f, other, gpu, BorrowOptions::shared())
        .unwrap_err();
    assert!(matches!(e, LendError::Gone { .. }), "{e}");
    assert!(e.to_string().contains("the device is gone"), "{e}");
    assert!(matches!(
        c.return_device(&mut f, b).unwrap_err(),
        LendError::NotHeld { .. }
    ));
    assert_eq!(
        c.lend(gpu).unwrap_err().to_string(),
        "host `lender` has vanished"
    );
    Hosts::with(&mut f, |h, f| {
        assert_eq!(h.ntb(ntb(f, "borrower")).unwrap().windows_held(), 0);
        assert_eq!(h.live_mappings(), 0);
    });
}

#[test]
fn two_shared_borrowers_each_get_their_own_window_and_bytes() {
    let mut f = fabric(false, true);
    let (mut c, gpu) = lent(&mut f, "lender.gpu");
    let dev = function(&f, "lender.gpu");
    let (borrower, other) = (host(&f, "borrower"), host(&f, "other"));
    let b1 = c
        .borrow(&mut f, borrower, gpu, BorrowOptions::shared())
        .unwrap();
    let b2 = c
        .borrow(&mut f, other, gpu, BorrowOptions::shared())
        .unwrap();
    let (w1, w2) = (
        c.dma_window(&f, b1).unwrap().unwrap(),
        c.dma_window(&f, b2).unwrap().unwrap(),
    );
    assert!(
        w1.device_base + w1.iova.len <= w2.device_base
            || w2.device_base + w2.iova.len <= w1.device_base,
        "the two windows do not overlap on the lender's bus"
    );
    let buf1 = ram(&f, "borrower.ram", 1 << 20);
    let buf2 = ram(&f, "other.ram", 1 << 20);
    let m1 = c
        .map_for_device(&mut f, b1, buf1, 4096, DmaDirection::FromDevice)
        .unwrap();
    let m2 = c
        .map_for_device(&mut f, b2, buf2, 4096, DmaDirection::FromDevice)
        .unwrap();
    f.store(Requester::Function(dev), m1.addr.0, &bytes(4096, 1))
        .unwrap();
    f.store(Requester::Function(dev), m2.addr.0, &bytes(4096, 2))
        .unwrap();
    assert_eq!(peek(&f, buf1, 4096), bytes(4096, 1));
    assert_eq!(peek(&f, buf2, 4096), bytes(4096, 2));
    // One borrower returning leaves the other's path intact.
    c.return_device(&mut f, b1).unwrap();
    f.store(Requester::Function(dev), m2.addr.0, &bytes(64, 3))
        .unwrap();
    assert_eq!(peek(&f, buf2, 64), bytes(64, 3));
    assert!(f.store(Requester::Function(dev), m1.addr.0, &[0]).is_err());
}

#[test]
fn the_same_scenario_gives_the_same_fdids_and_addresses() {
    let run = || {
        let mut f = fabric(true, true);
        let (mut c, gpu) = lent(&mut f, "lender.gpu");
        let borrower = host(&f, "borrower");
        let b = c
            .borrow(&mut f, borrower, gpu, BorrowOptions::exclusive())
            .unwrap();
        let buf = ram(&f, "borrower.ram", 1 << 20);
        let m = c
            .map_for_device(&mut f, b, buf, 4096, DmaDirection::ToDevice)
            .unwrap();
        let msi = c.setup_msi(&mut f, b, 1, 2).unwrap();
        (
            c.device_list(&f),
            c.shadow_bars(&f, b).unwrap(),
            c.dma_window(&f, b).unwrap(),
            m.addr,
            msi,
        )
    };
    assert_eq!(run(), run());
}
