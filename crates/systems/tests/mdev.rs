//! MDEV end to end: a K40c in the chassis lender passed through to a VM on the borrower
//! (the built-in `smartio_chassis_k40c`, lender IOMMU on): borrow at the guest's reset,
//! guest memory probed and mapped at Bus Master Enable, device DMA to guest-physical
//! addresses landing in the VM's host pages, interrupts relayed, shutdown releasing
//! everything, cold migration keeping the guest's bytes.

mod common;

use common::*;
use fabric::{Fabric, Requester};
use host::Hosts;
use systems::smartio::{
    guest_layout, setup_guest_dma, Cluster, ControlKind, Fdid, HostPage, Hypervisor, MdevError,
    MdevId, VmConfig, VmId, VmInterrupt, CMD_BUS_MASTER, CMD_INTX_DISABLE, CMD_MEMORY, DEVCTL_FLR,
    HIGH_MEM_BASE, LOW_MEM_TOP, PCIE_DEVCTL,
};

const GIB: u64 = 1 << 30;

/// The MDEV testbed: `smartio_chassis_k40c` with the lender's IOMMU set (as
/// `studies::harness::load` sets host IOMMUs for `--set host.lender.iommu=…`).
fn k40c(lender_iommu: bool) -> Fabric {
    let mut s = fabric::builtin::load_builtin("smartio_chassis_k40c")
        .expect("built in")
        .unwrap();
    let id = s.topology.host_by_name("lender").unwrap();
    s.topology.hosts[id.index()].iommu = lender_iommu;
    Fabric::from_scenario(s).unwrap()
}

struct Setup {
    f: Fabric,
    c: Cluster,
    hv: Hypervisor,
    vm: VmId,
    m: MdevId,
    dev: Requester,
}

/// A VM of `mem` bytes on `vm_host` with an mdev of `device` (lent, not borrowed yet).
fn vm_with_mdev(mut f: Fabric, device: &str, vm_host: &str, mem: u64, page: HostPage) -> Setup {
    let mut c = Cluster::new(&f);
    let fdid: Fdid = c.fdid_by_name(&f, device).unwrap();
    c.lend(fdid).unwrap();
    let mut hv = Hypervisor::new();
    let h = host(&f, vm_host);
    let vm = hv
        .create_vm(
            &mut f,
            h,
            "guest",
            VmConfig {
                mem_bytes: mem,
                page,
                node: 0,
                seed: 7,
            },
        )
        .unwrap();
    assert_eq!(hv.mdev_parents(&c, h), vec![fdid]);
    let m = hv.create_mdev(&c, &f, vm, fdid).unwrap();
    let dev = hv.device(&c, m).unwrap();
    Setup {
        f,
        c,
        hv,
        vm,
        m,
        dev,
    }
}

fn guest_reset_and_bme(s: &mut Setup) {
    s.hv.guest_config_write(
        &mut s.c,
        &mut s.f,
        s.m,
        PCIE_DEVCTL,
        &DEVCTL_FLR.to_le_bytes(),
    )
    .unwrap();
    s.hv.guest_config_write(
        &mut s.c,
        &mut s.f,
        s.m,
        0x04,
        &(CMD_MEMORY | CMD_BUS_MASTER).to_le_bytes(),
    )
    .unwrap();
}

/// The bytes at `gpa` as the VM's host RAM holds them, read through its GPA → HPA table.
fn vm_ram(s: &Setup, gpa: u64, len: usize) -> Vec<u8> {
    let v = s.hv.vm(s.vm).unwrap();
    let mut out = Vec::with_capacity(len);
    let mut at = gpa;
    while out.len() < len {
        let e = v.backing(at).expect("guest memory");
        let n = ((e.gpa + e.len - at) as usize).min(len - out.len());
        out.extend(peek(&s.f, v.gpa_to_hpa(at).unwrap(), n));
        at += n as u64;
    }
    out
}

#[test]
fn the_device_is_borrowed_at_the_guest_reset_not_before() {
    let mut s = vm_with_mdev(
        k40c(true),
        "lender.gpu",
        "borrower",
        64 << 20,
        HostPage::Huge2M,
    );
    assert_eq!(s.hv.borrowed(s.m).unwrap(), None);
    assert!(
        s.c.borrows().is_empty(),
        "creating the mdev borrows nothing"
    );
    // A read before the reset is forwarded without borrowing.
    let mut id = [0u8; 4];
    s.hv.guest_config_read(&mut s.c, &mut s.f, s.m, 0, &mut id)
        .unwrap();
    assert!(s.c.borrows().is_empty());
    assert_eq!(s.c.stats().get(ControlKind::ConfigForward), 1);
    assert_eq!(s.c.stats().get(ControlKind::BorrowRequest), 0);
    s.hv.guest_config_write(
        &mut s.c,
        &mut s.f,
        s.m,
        PCIE_DEVCTL,
        &DEVCTL_FLR.to_le_bytes(),
    )
    .unwrap();
    let b = s.hv.borrowed(s.m).unwrap().expect("borrowed at the reset");
    assert_eq!(b.host, host(&s.f, "borrower"));
    assert_eq!(s.c.borrows(), vec![b]);
    assert_eq!(s.c.stats().get(ControlKind::BorrowGrant), 1);
    assert_eq!(
        s.c.stats().get(ControlKind::ConfigForward),
        2,
        "the FLR forwarded"
    );
    // The FLR reached the real device at the lender.
    let lender = host(&s.f, "lender");
    let rid = s.f.topo.node(function(&s.f, "lender.gpu")).rid;
    let mut v = [0u8; 2];
    s.f.config_read(lender, 0, rid, PCIE_DEVCTL, &mut v)
        .unwrap();
    assert_ne!(u16::from_le_bytes(v) & DEVCTL_FLR, 0);
    assert!(!s.hv.bus_master(s.m).unwrap());
}

#[test]
fn a_device_dma_to_a_gpa_faults_before_bus_master_enable() {
    let mut s = vm_with_mdev(
        k40c(true),
        "lender.gpu",
        "borrower",
        64 << 20,
        HostPage::Huge2M,
    );
    s.hv.guest_config_write(
        &mut s.c,
        &mut s.f,
        s.m,
        PCIE_DEVCTL,
        &DEVCTL_FLR.to_le_bytes(),
    )
    .unwrap();
    let data = bytes(256, 1);
    assert!(
        s.f.store(s.dev, 0x10_0000, &data).is_err(),
        "borrowed, no BME"
    );
    assert_eq!(vm_ram(&s, 0x10_0000, 256), vec![0; 256]);
    s.hv.guest_config_write(
        &mut s.c,
        &mut s.f,
        s.m,
        0x04,
        &(CMD_MEMORY | CMD_BUS_MASTER).to_le_bytes(),
    )
    .unwrap();
    s.f.store(s.dev, 0x10_0000, &data).unwrap();
    assert_eq!(vm_ram(&s, 0x10_0000, 256), data);
    // Clearing Bus Master Enable unmaps and unpins.
    s.hv.guest_config_write(&mut s.c, &mut s.f, s.m, 0x04, &CMD_MEMORY.to_le_bytes())
        .unwrap();
    assert!(s.f.store(s.dev, 0x10_0000, &data).is_err());
    assert_eq!(s.hv.vm(s.vm).unwrap().pinned_pages(), 0);
}

#[test]
fn probing_discovers_exactly_a_4_gib_guest_and_maps_it_through_two_windows() {
    let mut s = vm_with_mdev(
        k40c(true),
        "lender.gpu",
        "borrower",
        4 * GIB,
        HostPage::Huge2M,
    );
    let v = s.hv.vm(s.vm).unwrap();
    assert_eq!(v.layout(), vec![(0, 3 * GIB), (HIGH_MEM_BASE, GIB)]);
    // Scattered: GPA → HPA is not an identity, nor one run.
    let ext = v.extents();
    assert_eq!(ext.len(), 2048);
    let runs = ext
        .windows(2)
        .filter(|w| w[1].hpa != w[0].hpa + w[0].len)
        .count();
    assert!(runs > 1000, "host pages scattered ({runs} breaks)");
    assert!(ext.iter().any(|e| e.hpa != e.gpa));
    guest_reset_and_bme(&mut s);
    let w = s.hv.windows(s.m).unwrap();
    assert_eq!(w.len(), 2, "one DMA window for low memory, one for high");
    assert_eq!((w[0].gpa, w[0].len), (0, LOW_MEM_TOP));
    assert_eq!((w[1].gpa, w[1].len), (HIGH_MEM_BASE, GIB));
    assert!(w.iter().all(|x| x.iova.is_some() && x.lut_mappings == 1));
    // 2,048 pages found, plus one miss at the end of each side.
    assert_eq!(s.hv.stats().probes, 2048 + 2);
    assert_eq!(s.hv.vm(s.vm).unwrap().pinned_pages(), 2048);
    // The lender IOMMU mirrors every guest page and nothing else.
    let lender = host(&s.f, "lender");
    let rid = s.f.topo.node(function(&s.f, "lender.gpu")).rid;
    let d = s.f.iommu(lender).domain_of(rid).unwrap();
    // Plus the one page of the bare-metal borrow's own (unused) DMA window.
    assert_eq!(
        s.f.iommu(lender).mapped_pages(d),
        (4 * GIB / 4096) as usize + 1
    );
    let data = bytes(64, 9);
    assert!(
        s.f.store(s.dev, LOW_MEM_TOP, &data).is_err(),
        "the hole above low memory is not mapped"
    );
    assert!(s.f.store(s.dev, HIGH_MEM_BASE + GIB, &data).is_err());
}

#[test]
fn device_dma_to_low_and_high_gpas_lands_in_the_vm_pages_with_no_messages() {
    let mut s = vm_with_mdev(
        k40c(true),
        "lender.gpu",
        "borrower",
        4 * GIB,
        HostPage::Huge2M,
    );
    guest_reset_and_bme(&mut s);
    let before = s.c.stats().clone();
    // A transfer across the hole, as the guest driver gives it: two buffers, one ending
    // at the top of low memory (across two host pages), one from 4 GiB.
    let low = bytes(12 << 10, 3);
    let high = bytes(10 << 10, 5);
    let low_gpa = LOW_MEM_TOP - low.len() as u64;
    s.f.store(s.dev, low_gpa, &low).unwrap();
    s.f.store(s.dev, HIGH_MEM_BASE, &high).unwrap();
    assert_eq!(vm_ram(&s, low_gpa, low.len()), low);
    assert_eq!(vm_ram(&s, HIGH_MEM_BASE, high.len()), high);
    // The bytes sit at the right host-physical places (first byte of each side).
    let v = s.hv.vm(s.vm).unwrap();
    let hpa = v.gpa_to_hpa(HIGH_MEM_BASE).unwrap();
    assert_eq!(peek(&s.f, hpa, 16), high[..16]);
    assert_ne!(hpa.addr, HIGH_MEM_BASE, "not an identity");
    // A guest CPU write at a GPA is what the device reads there (low and high).
    let g = bytes(8192, 11);
    let v = s.hv.vm(s.vm).unwrap();
    v.write_guest(&mut s.f, 2 * GIB + 0x1ff000, &g).unwrap();
    v.write_guest(&mut s.f, HIGH_MEM_BASE + 0x3000_0000, &g)
        .unwrap();
    for gpa in [2 * GIB + 0x1ff000, HIGH_MEM_BASE + 0x3000_0000] {
        let mut got = vec![0; g.len()];
        s.f.load(s.dev, gpa, &mut got).unwrap();
        assert_eq!(got, g, "device read at {gpa:#x}");
    }
    assert_eq!(s.c.stats(), &before, "zero control messages per DMA");
}

#[test]
fn with_the_lender_iommu_off_mdev_refuses_clearly() {
    let mut f = k40c(false);
    let mut c = Cluster::new(&f);
    let gpu = c.fdid_by_name(&f, "lender.gpu").unwrap();
    c.lend(gpu).unwrap();
    let mut hv = Hypervisor::new();
    let b = host(&f, "borrower");
    let vm = hv
        .create_vm(
            &mut f,
            b,
            "vm0",
            VmConfig {
                mem_bytes: 64 << 20,
                page: HostPage::Huge2M,
                node: 0,
                seed: 1,
            },
        )
        .unwrap();
    let e = hv.create_mdev(&c, &f, vm, gpu).unwrap_err();
    assert!(matches!(e, MdevError::LenderIommuOff { .. }), "{e}");
    let msg = e.to_string();
    assert!(msg.contains("lender `lender` has its IOMMU off"), "{msg}");
    assert!(msg.contains("host.lender.iommu = true"), "{msg}");
    assert!(c.borrows().is_empty());
    let e = setup_guest_dma(
        &mut f,
        "lender.gpu",
        "borrower",
        VmConfig::mdev_experiment(),
        4096,
    )
    .unwrap_err();
    assert!(matches!(e, MdevError::LenderIommuOff { .. }), "{e}");
}

#[test]
fn an_msi_reaches_the_vm_log_and_intx_is_relayed_and_counted() {
    let mut s = vm_with_mdev(
        k40c(true),
        "lender.gpu",
        "borrower",
        64 << 20,
        HostPage::Huge2M,
    );
    guest_reset_and_bme(&mut s);
    let r =
        s.hv.guest_enable_msi(&mut s.c, &mut s.f, s.m, 0x21)
            .unwrap();
    assert_eq!(s.c.stats().get(ControlKind::MsiSetup), 1);
    assert_eq!(s.hv.relay_interrupts(&s.f), 0);
    s.f.store(s.dev, r.addr, &r.data.to_le_bytes()).unwrap();
    let borrower = host(&s.f, "borrower");
    assert_eq!(
        s.f.interrupts().last().unwrap().host,
        borrower,
        "landed at the borrower"
    );
    assert_eq!(s.hv.relay_interrupts(&s.f), 1);
    assert_eq!(s.hv.relay_interrupts(&s.f), 0, "each MSI injected once");
    assert_eq!(
        s.hv.vm(s.vm).unwrap().interrupts(),
        [VmInterrupt::Msi {
            mdev: s.m,
            vector: 0x21,
            data: r.data
        }]
    );
    assert_eq!(s.hv.stats().msi_injections, 1);
    // INTx: the guest left Interrupt Disable clear, so an assertion is relayed.
    let before = s.c.stats().get(ControlKind::IntxRelay);
    assert!(s.hv.lender_intx(&mut s.c, &mut s.f, s.m).unwrap());
    assert!(s.hv.lender_intx(&mut s.c, &mut s.f, s.m).unwrap());
    assert_eq!(s.c.stats().get(ControlKind::IntxRelay), before + 2);
    assert_eq!(s.hv.stats().intx_injections, 2);
    assert_eq!(
        s.hv.vm(s.vm).unwrap().interrupts()[1..],
        [
            VmInterrupt::Intx { mdev: s.m },
            VmInterrupt::Intx { mdev: s.m }
        ]
    );
    // The guest masks INTx: nothing relayed.
    s.hv.guest_config_write(
        &mut s.c,
        &mut s.f,
        s.m,
        0x04,
        &(CMD_MEMORY | CMD_BUS_MASTER | CMD_INTX_DISABLE).to_le_bytes(),
    )
    .unwrap();
    assert!(!s.hv.lender_intx(&mut s.c, &mut s.f, s.m).unwrap());
    assert_eq!(s.c.stats().get(ControlKind::IntxRelay), before + 2);
    assert_eq!(s.hv.stats().intx_masked, 1);
}

#[test]
fn shutdown_releases_every_window_entry_mapping_and_pin() {
    let mut s = vm_with_mdev(
        k40c(true),
        "lender.gpu",
        "borrower",
        4 * GIB,
        HostPage::Huge2M,
    );
    let lender = host(&s.f, "lender");
    let lntb = ntb(&s.f, "lender");
    let (used0, ..) = Hosts::ntb_requester_use(&s.f, lntb);
    guest_reset_and_bme(&mut s);
    let r =
        s.hv.guest_enable_msi(&mut s.c, &mut s.f, s.m, 0x22)
            .unwrap();
    assert!(r.addr != 0);
    assert!(
        s.f.ntb_state(lntb).programmed_windows() >= 128,
        "3 GiB + 1 GiB of 32 MiB windows"
    );
    assert!(Hosts::ntb_requester_use(&s.f, lntb).0 > used0);
    s.hv.shutdown_vm(&mut s.c, &mut s.f, s.vm).unwrap();
    assert!(s.c.borrows().is_empty());
    assert_eq!(s.hv.borrowed(s.m).unwrap(), None);
    assert_eq!(
        s.f.ntb_state(lntb).programmed_windows(),
        0,
        "no lender windows"
    );
    assert_eq!(
        Hosts::ntb_requester_use(&s.f, lntb).0,
        used0,
        "no requester entries"
    );
    let rid = s.f.topo.node(function(&s.f, "lender.gpu")).rid;
    let d = s.f.iommu(lender).domain_of(rid).unwrap();
    assert_eq!(
        s.f.iommu(lender).mapped_pages(d),
        0,
        "no lender IOMMU mapping"
    );
    let bntb = ntb(&s.f, "borrower");
    assert_eq!(
        s.f.ntb_state(bntb).programmed_windows(),
        0,
        "no shadow BARs"
    );
    assert_eq!(s.hv.vm(s.vm).unwrap().pinned_pages(), 0);
    assert!(s.f.store(s.dev, 0x1000, &[1]).is_err());
    // The device was reset at the lender.
    let mut v = [0u8; 2];
    s.f.config_read(lender, 0, rid, PCIE_DEVCTL, &mut v)
        .unwrap();
    assert_ne!(u16::from_le_bytes(v) & DEVCTL_FLR, 0);
    assert_eq!(s.c.stats().get(ControlKind::ReturnAck), 1);
    // Booted again, the guest's reset borrows it again and its DMA works.
    s.hv.boot_vm(s.vm).unwrap();
    guest_reset_and_bme(&mut s);
    s.f.store(s.dev, HIGH_MEM_BASE + 0x42, &[7, 8, 9]).unwrap();
    assert_eq!(vm_ram(&s, HIGH_MEM_BASE + 0x42, 3), [7, 8, 9]);
}

#[test]
fn cold_migration_keeps_the_guest_bytes_at_the_same_gpas() {
    let f = load_text(&text(true, true, "", ""));
    let mut s = vm_with_mdev(f, "lender.gpu", "borrower", 4 * GIB, HostPage::Huge2M);
    guest_reset_and_bme(&mut s);
    let lo = bytes(5000, 21);
    let hi = bytes(7000, 23);
    let (lo_gpa, hi_gpa) = (0x1234_5000, HIGH_MEM_BASE + 0x2345_6789);
    s.f.store(s.dev, lo_gpa, &lo).unwrap();
    s.f.store(s.dev, hi_gpa, &hi).unwrap();
    let old: Vec<_> = s.hv.vm(s.vm).unwrap().extents();
    let other = host(&s.f, "other");
    s.hv.migrate_vm(&mut s.c, &mut s.f, s.vm, other, 0).unwrap();
    let v = s.hv.vm(s.vm).unwrap();
    assert_eq!(v.host(), other);
    assert!(v.running());
    assert_eq!(v.gpa_to_hpa(lo_gpa).unwrap().host, other);
    assert!(
        s.c.borrows().is_empty(),
        "not borrowed until the guest resets it"
    );
    assert_eq!(vm_ram(&s, lo_gpa, lo.len()), lo, "bytes moved");
    guest_reset_and_bme(&mut s);
    assert_eq!(s.c.borrows()[0].host, other, "borrowed from the new host");
    for (gpa, want) in [(lo_gpa, &lo), (hi_gpa, &hi)] {
        let mut got = vec![0; want.len()];
        s.f.load(s.dev, gpa, &mut got).unwrap();
        assert_eq!(&got, want, "device read at {gpa:#x} after migration");
    }
    // The old host's pages were given back: a new VM there can have them.
    let b = host(&s.f, "borrower");
    let vm2 =
        s.hv.create_vm(
            &mut s.f,
            b,
            "next",
            VmConfig {
                mem_bytes: 4 * GIB,
                page: HostPage::Huge2M,
                node: 0,
                seed: 7,
            },
        )
        .unwrap();
    assert_eq!(
        s.hv.vm(vm2).unwrap().extents(),
        old,
        "same pages, same seed"
    );
}

#[test]
fn without_a_borrower_iommu_each_host_page_gets_a_lender_window() {
    let f = load_text(&text(true, false, "", ""));
    let mut s = vm_with_mdev(f, "lender.gpu", "borrower", 64 << 20, HostPage::Small4K);
    guest_reset_and_bme(&mut s);
    let w = s.hv.windows(s.m).unwrap();
    assert_eq!(w.len(), 1, "a 64 MiB guest has no high memory");
    assert!(w[0].iova.is_none());
    assert_eq!(w[0].lut_mappings, (64 << 20) / 4096);
    let data = bytes(9000, 2);
    s.f.store(s.dev, 0x30_0ff0, &data).unwrap();
    assert_eq!(vm_ram(&s, 0x30_0ff0, data.len()), data);
    s.hv.shutdown_vm(&mut s.c, &mut s.f, s.vm).unwrap();
    assert_eq!(s.f.ntb_state(ntb(&s.f, "lender")).programmed_windows(), 0);
}

#[test]
fn the_experiment_setup_gives_a_device_and_a_gpa_ready_for_dma() {
    let mut f = k40c(true);
    let n = 8 << 20;
    let mut x = setup_guest_dma(
        &mut f,
        "lender.gpu",
        "borrower",
        VmConfig::mdev_experiment(),
        n,
    )
    .unwrap();
    assert_eq!(x.device, Requester::Function(function(&f, "lender.gpu")));
    assert_eq!(x.gpa, HIGH_MEM_BASE);
    assert_eq!(guest_layout(4 * GIB).len(), 2);
    let before = x.cluster.stats().total();
    // Not periodic within a page: a byte stream shifted by a page would show.
    let data: Vec<u8> = (0..n as usize)
        .map(|i| (i ^ (i >> 12) ^ (i >> 21)) as u8)
        .collect();
    f.store(x.device, x.gpa, &data).unwrap();
    let v = x.hypervisor.vm(x.vm).unwrap();
    let mut got = vec![0; n as usize];
    v.read_guest(&mut f, x.gpa, &mut got).unwrap();
    assert_eq!(got, data);
    assert_eq!(x.cluster.stats().total(), before);
    x.hypervisor
        .shutdown_vm(&mut x.cluster, &mut f, x.vm)
        .unwrap();
}
