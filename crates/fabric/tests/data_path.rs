//! Bytes move through the fabric: writes through an IOMMU and two NTBs arrive intact on
//! the far host; unmapped accesses fault and are logged; finite tables run out with
//! clear errors; BARs land on the right side of 4 GiB.

use fabric::iommu::Perm;
use fabric::scenario::{load, Source};
use fabric::{builtin, CableId, Fabric, FabricError, FaultKind, NtbId, Owner};

fn from_text(text: &str) -> Fabric {
    let s = load(
        Source {
            name: "test.toml".into(),
            text: text.into(),
        },
        &builtin::BuiltinResolver,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    Fabric::from_scenario(s).unwrap()
}

fn builtin_text(name: &str) -> String {
    builtin::FILES
        .iter()
        .find(|(p, _)| *p == format!("{name}.toml"))
        .unwrap()
        .1
        .to_string()
}

fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// Three-way ring with IOMMUs on at lender1 (the device's host) and the user (the far
/// host): lender1's GPU writes into the user's RAM through lender1's IOMMU, lender1's
/// NTB, the cable, the user's NTB and the user's IOMMU.
#[test]
fn bytes_cross_an_iommu_and_two_ntbs_intact() {
    let text = builtin_text("smartio_three_way")
        .replacen(
            "name = \"user\"\nplatform = \"smartio_host\"",
            "name = \"user\"\nplatform = \"smartio_host\"\niommu = true",
            1,
        )
        .replacen(
            "name = \"lender1\"\nplatform = \"smartio_host\"",
            "name = \"lender1\"\nplatform = \"smartio_host\"\niommu = true",
            1,
        );
    let mut f = from_text(&text);
    let user = f.topo.host_by_name("user").unwrap();
    let lender = f.topo.host_by_name("lender1").unwrap();
    let gpu = match f.resolve("lender1.gpu0").unwrap() {
        fabric::Endpoint::Node(n) => n,
        e => panic!("{e:?}"),
    };
    let gpu_rid = f.topo.node(gpu).rid;
    let lntb = f.topo.ntb_by_name(lender, "ntb").unwrap();
    let untb = f.topo.ntb_by_name(user, "ntb").unwrap();

    // User side: a 64 KiB buffer at node offset 1 MiB, mapped at IOVA 0x10_0000_0000 for
    // the proxy requester that lender1's GPU will appear as.
    let buf_phys = f.topo.host(user).ram_addr(0, 1 << 20).unwrap();
    let index = f.ntb_add_requester(lntb, gpu_rid).unwrap();
    let proxy = fabric::ntb::proxy_rid(f.topo.node(f.topo.ntbs[untb.index()].fn_node).rid, index);
    let ud = f.iommu_create_domain(user);
    f.iommu_attach(user, proxy, ud).unwrap();
    let iova_user = 0x10_0000_0000;
    f.iommu_map(user, ud, iova_user, buf_phys, 64 << 10, Perm::RW)
        .unwrap();
    // Lender side: an NTB window onto that IOVA, and the GPU's own IOVA for the window.
    let w = f.ntb_map_window(lntb, user, iova_user, 64 << 10).unwrap();
    let ld = f.iommu_create_domain(lender);
    f.iommu_attach(lender, gpu_rid, ld).unwrap();
    let iova_gpu = 0x2000_0000;
    let win_page = w.local_addr & !0xfff;
    f.iommu_map(lender, ld, iova_gpu, win_page, 64 << 10, Perm::RW)
        .unwrap();

    let data = pattern(40_000, 7);
    let at = iova_gpu + (w.local_addr - win_page) + 123;
    f.dma_write(gpu, at, &data).unwrap();

    let mut seen = vec![0; data.len()];
    f.peek_ram(user, 0, (1 << 20) + 123, &mut seen);
    assert_eq!(seen, data, "bytes arrive at the user's physical buffer");
    let mut back = vec![0; data.len()];
    f.dma_read(gpu, at, &mut back).unwrap();
    assert_eq!(back, data, "and read back through the same path");
    let mut around = [0xAA; 123];
    f.peek_ram(user, 0, 1 << 20, &mut around);
    assert_eq!(around, [0; 123], "nothing lands before the target");
    assert!(f.faults().is_empty());
}

#[test]
fn unmapped_accesses_fault_and_are_logged_with_requester_and_address() {
    let text = builtin_text("smartio_chassis_b2b").replacen(
        "name = \"lender\"\nplatform = \"smartio_host\"",
        "name = \"lender\"\nplatform = \"smartio_host\"\niommu = true",
        1,
    );
    let mut f = from_text(&text);
    let lender = f.topo.host_by_name("lender").unwrap();
    let nvme = f.topo.node_by_name(lender, "nvme").unwrap();
    let rid = f.topo.node(nvme).rid;

    // IOMMU on and no domain: the write never reaches RAM.
    let err = f.dma_write(nvme, 0x1000, &[1, 2, 3]).unwrap_err();
    assert_eq!(err.kind, FaultKind::IommuNoDomain);
    assert_eq!((err.requester, err.addr, err.host), (rid, 0x1000, lender));
    let mut ram = [9u8; 3];
    f.peek_ram(lender, 0, 0x1000, &mut ram);
    assert_eq!(ram, [0, 0, 0], "faulted write left RAM untouched");

    // A domain without the page: not mapped; a read-only page: write refused.
    let d = f.iommu_create_domain(lender);
    f.iommu_attach(lender, rid, d).unwrap();
    assert_eq!(
        f.dma_write(nvme, 0x5000, &[1]).unwrap_err().kind,
        FaultKind::IommuNotMapped
    );
    f.iommu_map(lender, d, 0x5000, 0x5000, 4096, Perm::READ)
        .unwrap();
    assert_eq!(
        f.dma_write(nvme, 0x5000, &[1]).unwrap_err().kind,
        FaultKind::IommuPermission
    );
    let mut b = [0u8; 4];
    f.dma_read(nvme, 0x5000, &mut b).unwrap();

    // A read that faults returns all-ones, as an Unsupported Request completion does.
    let mut ur = [0u8; 8];
    let e = f.dma_read(nvme, 0x9000, &mut ur).unwrap_err();
    assert_eq!(e.kind, FaultKind::IommuNotMapped);
    assert_eq!(ur, [0xFF; 8]);
    assert_eq!(f.faults().len(), 4, "every fault is in the log");
}

#[test]
fn ntb_windows_requesters_and_dead_links_fault() {
    let mut f = Fabric::from_scenario(
        builtin::load_builtin("smartio_pxh830_b2b")
            .unwrap()
            .unwrap(),
    )
    .unwrap();
    let a = f.topo.host_by_name("a").unwrap();
    let b = f.topo.host_by_name("b").unwrap();
    let ntb = f.topo.ntb_by_name(a, "ntb").unwrap();
    let fnode = f.topo.ntbs[ntb.index()].fn_node;
    let aperture = f.topo.node(fnode).bar(2).unwrap().addr;
    // Unprogrammed window.
    let e = f.cpu_store(a, 0, aperture, &[1]).unwrap_err();
    assert_eq!(e.kind, FaultKind::NtbWindowUnmapped);
    // Programmed: the CPU's reserved requester entry lets the store across.
    let target = f.topo.host(b).ram_addr(0, 0x4000).unwrap();
    let w = f.ntb_map_window(ntb, b, target, 4096).unwrap();
    f.cpu_store(a, 0, w.local_addr, b"hello").unwrap();
    let mut got = [0u8; 5];
    f.peek_ram(b, 0, 0x4000, &mut got);
    assert_eq!(&got, b"hello");
    // Released windows fault again.
    f.ntb_unmap_window(&w).unwrap();
    assert_eq!(
        f.cpu_store(a, 0, w.local_addr, &[1]).unwrap_err().kind,
        FaultKind::NtbWindowUnmapped
    );
    // A dead cable: writes are refused, reads return all-ones.
    let w = f.ntb_map_window(ntb, b, target, 4096).unwrap();
    f.set_cable_up(CableId(0), false);
    let mut r = [0u8; 4];
    assert_eq!(
        f.cpu_load(a, 0, w.local_addr, &mut r).unwrap_err().kind,
        FaultKind::LinkDown { cable: CableId(0) }
    );
    assert_eq!(r, [0xFF; 4]);
    // Nothing at an address no window claims.
    assert_eq!(
        f.cpu_store(a, 0, 0xFFF0_0000, &[1]).unwrap_err().kind,
        FaultKind::NoWindow
    );
}

#[test]
fn a_device_not_in_the_requester_lut_cannot_cross() {
    let mut f = Fabric::from_scenario(
        builtin::load_builtin("smartio_chassis_b2b")
            .unwrap()
            .unwrap(),
    )
    .unwrap();
    let (l, b) = (
        f.topo.host_by_name("lender").unwrap(),
        f.topo.host_by_name("borrower").unwrap(),
    );
    let nvme = f.topo.node_by_name(l, "nvme").unwrap();
    let ntb = f.topo.ntb_by_name(l, "ntb").unwrap();
    let w = f.ntb_map_window(ntb, b, 0, 4096).unwrap();
    let e = f.dma_write(nvme, w.local_addr, &[1]).unwrap_err();
    assert_eq!(e.kind, FaultKind::NtbRequesterUnknown);
    f.ntb_add_requester(ntb, f.topo.node(nvme).rid).unwrap();
    f.dma_write(nvme, w.local_addr, &[1]).unwrap();
}

#[test]
fn requester_lut_holds_thirty_devices_then_says_so() {
    let mut f = Fabric::from_scenario(
        builtin::load_builtin("smartio_pxh830_b2b")
            .unwrap()
            .unwrap(),
    )
    .unwrap();
    let ntb = NtbId(0);
    for i in 0..30u16 {
        f.ntb_add_requester(ntb, fabric::Rid(0x4000 + i)).unwrap();
    }
    let e = f.ntb_add_requester(ntb, fabric::Rid(0x5000)).unwrap_err();
    assert!(
        matches!(e, FabricError::Exhausted { capacity: 32, .. }),
        "{e}"
    );
    assert!(
        e.to_string()
            .contains("requester-ID LUT exhausted on a.ntb"),
        "{e}"
    );
    // Freeing one makes room; CPU entries stay.
    f.ntb_remove_requester(ntb, fabric::Rid(0x4003)).unwrap();
    f.ntb_add_requester(ntb, fabric::Rid(0x5000)).unwrap();
    let cpu = f.ntb_state(ntb).rids[0].unwrap();
    assert!(f.ntb_remove_requester(ntb, cpu).is_err());
}

#[test]
fn address_lut_runs_out_of_windows_with_a_clear_error() {
    let mut f = Fabric::from_scenario(
        builtin::load_builtin("smartio_pxh830_b2b")
            .unwrap()
            .unwrap(),
    )
    .unwrap();
    let b = f.topo.host_by_name("b").unwrap();
    let ws = f.topo.ntbs[0].window_size;
    let n = f.topo.ntbs[0].lut_windows;
    for i in 0..n as u64 {
        f.ntb_map_window(NtbId(0), b, i * ws, ws).unwrap();
    }
    let e = f.ntb_map_window(NtbId(0), b, 0, 1).unwrap_err();
    assert!(
        e.to_string()
            .contains("NTB address LUT exhausted on a.ntb: all 256 entries in use"),
        "{e}"
    );
    // A window larger than the whole BAR is not an exhausted LUT: it can never fit.
    let mut g0 = Fabric::from_scenario(
        builtin::load_builtin("smartio_pxh830_b2b")
            .unwrap()
            .unwrap(),
    )
    .unwrap();
    let bar = ws * n as u64;
    let e = g0.ntb_map_window(NtbId(0), b, 0, bar + ws).unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("exceeds the BAR by") && !text.contains("exhausted"),
        "{text}"
    );
    assert!(
        text.ends_with(&fabric::units::fmt_size(ws)),
        "by one window: {text}"
    );
    // A mapping that straddles a window boundary takes two windows.
    let mut g = Fabric::from_scenario(
        builtin::load_builtin("smartio_pxh830_b2b")
            .unwrap()
            .unwrap(),
    )
    .unwrap();
    let m = g.ntb_map_window(NtbId(0), b, ws - 4096, 8192).unwrap();
    assert_eq!(m.count, 2);
}

#[test]
fn bars_land_below_or_above_4gib_as_asked_and_windows_nest() {
    let f = Fabric::from_scenario(
        builtin::load_builtin("smartio_chassis_baseline")
            .unwrap()
            .unwrap(),
    )
    .unwrap();
    let h = f.topo.host_by_name("user").unwrap();
    let gpu = f.topo.node_by_name(h, "gpu").unwrap();
    let n = f.topo.node(gpu);
    let (bar0, bar1, bar3) = (n.bar(0).unwrap(), n.bar(1).unwrap(), n.bar(3).unwrap());
    assert!(
        !bar0.bits64 && bar0.end() <= 1 << 32,
        "32-bit BAR below 4 GiB"
    );
    assert!(bar1.addr >= 1 << 32, "256 MiB 64-bit BAR goes high (large)");
    assert!(
        bar3.end() <= 1 << 32,
        "32 MiB 64-bit BAR stays low when not asked"
    );
    for b in n.bars.iter() {
        assert_eq!(b.addr % b.size, 0, "BARs are naturally aligned");
    }
    // Each node's BARs sit inside the windows of every bridge above it.
    for id in f.topo.host(h).nodes.iter().copied() {
        let node = f.topo.node(id);
        for b in &node.bars {
            let mut up = Some(id);
            while let Some(u) = up {
                let un = f.topo.node(u);
                let w = if b.addr >= 1 << 32 {
                    un.window64
                } else {
                    un.window32
                };
                if un.link.is_some() {
                    let (s, e) = w.unwrap_or_else(|| panic!("{} has no window", un.name));
                    assert!(
                        s <= b.addr && b.end() <= e,
                        "{}'s BAR{} inside {}'s window",
                        node.name,
                        b.index,
                        un.name
                    );
                }
                up = un.parent;
            }
        }
    }
    // No two regions overlap and RAM skips the 32-bit MMIO hole.
    let regs = &f.topo.host(h).regions;
    assert!(regs.windows(2).all(|w| w[0].end <= w[1].start));
    let hole = f.topo.host(h).mmio32;
    assert!(regs
        .iter()
        .filter(|r| matches!(r.owner, Owner::Ram { .. }))
        .all(|r| r.end <= hole.0 || r.start >= 1 << 32));
}

#[test]
fn a_device_with_a_40_bit_mask_cannot_reach_a_bar_above_1_tib_without_the_iommu() {
    let text = builtin_text("smartio_pxh810_b2b").replacen(
        "name = \"lender\"\nplatform = \"smartio_host\"",
        "name = \"lender\"\nplatform = \"smartio_host\"\nmmio64_base = \"1 TiB\"",
        1,
    );
    let mut f = from_text(&text);
    let l = f.topo.host_by_name("lender").unwrap();
    let gpu = f.topo.node_by_name(l, "gpu").unwrap();
    let ntb = f.topo.ntb_by_name(l, "ntb").unwrap();
    let b = f.topo.host_by_name("borrower").unwrap();
    f.ntb_add_requester(ntb, f.topo.node(gpu).rid).unwrap();
    let w = f.ntb_map_window(ntb, b, 0x10000, 4096).unwrap();
    assert!(
        w.local_addr >= 1 << 40,
        "the NTB BAR is above the GPU's reach"
    );
    assert_eq!(
        f.dma_write(gpu, w.local_addr, &[1]).unwrap_err().kind,
        FaultKind::DmaMask
    );
}

#[test]
fn same_scenario_same_addresses() {
    let a = Fabric::from_scenario(builtin::load_builtin("smartio_cluster60").unwrap().unwrap())
        .unwrap();
    let b = Fabric::from_scenario(builtin::load_builtin("smartio_cluster60").unwrap().unwrap())
        .unwrap();
    for (x, y) in a.topo.hosts.iter().zip(&b.topo.hosts) {
        assert_eq!(x.regions, y.regions);
    }
}
