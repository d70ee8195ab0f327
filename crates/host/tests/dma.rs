//! The host layer's DMA API against the fabric: bytes a device writes at the DMA address it
//! was given land in the right RAM, and after unmap the same access faults — in the
//! functional path and in the timed one; translated IOVAs, DMA masks, the IOVA allocator,
//! shared NTB windows and requester entries, scatter-gather and coherent buffers.

use fabric::{builtin, Fabric, FaultKind, HostId, PcieNodeId, Requester};
use host::{
    DmaDirection, HostError, Hosts, IommuPolicy, NumaNode, PhysAddr, Placement, DEFAULT_IOVA_RANGE,
};
use sim::timed::TimedFabric;

fn fabric(name: &str, iommu_on: &[&str]) -> Fabric {
    let mut s = builtin::load_builtin(name).unwrap().unwrap();
    for h in iommu_on {
        let id = s.topology.host_by_name(h).unwrap();
        s.topology.hosts[id.index()].iommu = true;
    }
    Fabric::from_scenario(s).unwrap()
}

fn function(f: &Fabric, name: &str) -> PcieNodeId {
    match f.resolve(name).unwrap() {
        fabric::Endpoint::Node(n) => n,
        e => panic!("{name}: {e:?}"),
    }
}

fn ram(f: &Fabric, name: &str, offset: u64) -> PhysAddr {
    let (host, addr) = f.resolve_address(name, offset).unwrap();
    PhysAddr { host, addr }
}

fn host(f: &Fabric, name: &str) -> HostId {
    f.topo.host_by_name(name).unwrap()
}

fn peek(f: &Fabric, at: PhysAddr, len: usize) -> Vec<u8> {
    let h = f.topo.host(at.host);
    let region = h.decode(at.addr).unwrap();
    let fabric::Owner::Ram { node, node_offset } = region.owner else {
        panic!("not RAM")
    };
    let mut buf = vec![0; len];
    f.peek_ram(
        at.host,
        node,
        node_offset + (at.addr - region.start),
        &mut buf,
    );
    buf
}

fn bytes(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(7).wrapping_add(seed))
        .collect()
}

fn translated(f: &mut Fabric, h: HostId, range: (u64, u64)) {
    Hosts::with(f, |hs, _| {
        hs.set_iommu_policy(h, IommuPolicy::Translated, range)
    })
    .unwrap();
}

#[test]
fn identity_mapping_carries_real_bytes_until_unmapped() {
    let mut f = fabric("ioctopus_r730", &["server"]);
    let nic = function(&f, "server.nic.pf0");
    let buf = ram(&f, "server.ram.node1", 1 << 20);
    let dev = Requester::Function(nic);
    let m = Hosts::with(&mut f, |h, f| {
        h.dma_map_single(f, dev, buf, 8192, DmaDirection::FromDevice)
    })
    .unwrap();
    assert_eq!(m.addr.0, buf.addr, "identity policy: IOVA = physical");
    let data = bytes(8192, 3);
    f.dma_write(nic, m.addr.0, &data).unwrap();
    assert_eq!(peek(&f, buf, 8192), data);
    Hosts::with(&mut f, |h, f| h.dma_unmap_single(f, &m)).unwrap();
    let fault = f.dma_write(nic, m.addr.0, &data).unwrap_err();
    assert_eq!(fault.kind, FaultKind::IommuNotMapped);
    // Unmapping twice is a clear error, not a panic.
    let e = Hosts::with(&mut f, |h, f| h.dma_unmap_single(f, &m)).unwrap_err();
    assert!(e.to_string().contains("is not mapped"), "{e}");
}

#[test]
fn without_an_iommu_the_dma_address_is_the_bus_address() {
    let mut f = fabric("ioctopus_r730", &[]);
    let nic = function(&f, "server.nic.pf1");
    let buf = ram(&f, "server.ram.node0", 3 << 20);
    let m = Hosts::with(&mut f, |h, f| {
        h.dma_map_single(
            f,
            Requester::Function(nic),
            buf,
            100,
            DmaDirection::Bidirectional,
        )
    })
    .unwrap();
    assert_eq!(m.addr.0, buf.addr);
    f.dma_write(nic, m.addr.0, &bytes(100, 9)).unwrap();
    assert_eq!(peek(&f, buf, 100), bytes(100, 9));
}

#[test]
fn translated_iovas_differ_from_physical_and_respect_a_32_bit_mask() {
    let mut f = fabric("ioctopus_r730", &["server"]);
    let nic = function(&f, "server.nic.pf0");
    f.topo.nodes[nic.index()].dma_mask_bits = 32;
    let dev = Requester::Function(nic);
    let buf = ram(&f, "server.ram.node1", 5 << 20);
    assert!(buf.addr > 1 << 32, "node 1 lies above 4 GiB");

    // Identity: a 32-bit device cannot reach it, and says why.
    let e = Hosts::with(&mut f, |h, f| {
        h.dma_map_single(f, dev, buf, 4096, DmaDirection::FromDevice)
    })
    .unwrap_err();
    assert!(matches!(e, HostError::DmaMask { bits: 32, .. }), "{e}");
    assert!(e.to_string().contains("identity mode"), "{e}");
    assert_eq!(
        f.iommu(HostId(0))
            .mapped_pages(f.iommu(HostId(0)).domain_of(f.topo.node(nic).rid).unwrap()),
        0,
        "the failed mapping left no page behind"
    );

    translated(&mut f, HostId(0), DEFAULT_IOVA_RANGE);
    let m = Hosts::with(&mut f, |h, f| {
        h.dma_map_single(f, dev, buf, 6000, DmaDirection::FromDevice)
    })
    .unwrap();
    assert_ne!(m.addr.0, buf.addr);
    assert!(m.addr.0 + 6000 <= 1 << 32, "IOVA {} below 4 GiB", m.addr);
    assert!(
        !(0xfee0_0000..0xfef0_0000).contains(&m.addr.0),
        "never in the MSI window"
    );
    let data = bytes(6000, 1);
    f.dma_write(nic, m.addr.0, &data).unwrap();
    assert_eq!(
        peek(&f, buf, 6000),
        data,
        "bytes land at the physical buffer"
    );
    // Mapped for the device's writes only: its reads are refused.
    let mut back = [0u8; 4];
    assert_eq!(
        f.dma_read(nic, m.addr.0, &mut back).unwrap_err().kind,
        FaultKind::IommuPermission
    );
    Hosts::with(&mut f, |h, f| h.dma_unmap_single(f, &m)).unwrap();
    assert_eq!(
        f.dma_write(nic, m.addr.0, &data).unwrap_err().kind,
        FaultKind::IommuNotMapped
    );

    // Without an IOMMU nothing remaps: the mask refuses it.
    let mut g = fabric("ioctopus_r730", &[]);
    g.topo.nodes[nic.index()].dma_mask_bits = 32;
    let e = Hosts::with(&mut g, |h, f| {
        h.dma_map_single(f, dev, buf, 64, DmaDirection::FromDevice)
    })
    .unwrap_err();
    assert!(
        e.to_string().contains("32-bit DMA mask") && e.to_string().contains("no IOMMU"),
        "{e}"
    );
}

#[test]
fn the_iova_allocator_reuses_freed_space_and_reports_exhaustion() {
    let mut f = fabric("ioctopus_r730", &["server"]);
    let nic = Requester::Function(function(&f, "server.nic.pf0"));
    // Four pages of IOVA space.
    translated(&mut f, HostId(0), (0x10_0000, 0x10_4000));
    let buf = ram(&f, "server.ram.node0", 16 << 20);
    let map = |f: &mut Fabric, off: u64, len: u64| {
        let b = PhysAddr {
            addr: buf.addr + off,
            ..buf
        };
        Hosts::with(f, |h, f| {
            h.dma_map_single(f, nic, b, len, DmaDirection::Bidirectional)
        })
    };
    let a = map(&mut f, 0, 8192).unwrap();
    let b = map(&mut f, 0x10_000, 8192).unwrap();
    assert_ne!(a.addr, b.addr);
    let e = map(&mut f, 0x20_000, 1).unwrap_err();
    assert!(matches!(e, HostError::Exhausted { .. }), "{e}");
    assert!(e.to_string().contains("IOVA space"), "{e}");
    Hosts::with(&mut f, |h, f| h.dma_unmap_single(f, &a)).unwrap();
    let c = map(&mut f, 0x30_000, 8192).unwrap();
    assert_eq!(c.addr, a.addr, "the freed range is handed out again");
    assert_eq!(Hosts::with(&mut f, |h, _| h.live_mappings()), 2);
    // Changing the policy under live mappings is refused.
    let e = Hosts::with(&mut f, |h, _| {
        h.set_iommu_policy(HostId(0), IommuPolicy::Identity, DEFAULT_IOVA_RANGE)
    })
    .unwrap_err();
    assert!(e.to_string().contains("live mapping"), "{e}");
}

/// Address-LUT windows and requester entries the fabric holds for an NTB.
fn lut_in_use(f: &Fabric, ntb: fabric::NtbId) -> (usize, usize) {
    let st = f.ntb_state(ntb);
    (st.programmed_windows(), st.rids.len() - st.free_rids())
}

#[test]
fn cross_host_mappings_share_one_window_and_one_requester_entry() {
    let mut f = fabric("smartio_chassis_mxs824", &["borrower"]);
    let nvme = function(&f, "lender.nvme");
    let dev = Requester::Function(nvme);
    let lender = host(&f, "lender");
    let ntb = f.topo.ntb_by_name(lender, "ntb").unwrap();
    let (w0, r0) = lut_in_use(&f, ntb);
    let a_buf = ram(&f, "borrower.ram", 0x1000);
    let b_buf = ram(&f, "borrower.ram", 0x3000);
    let (a, log) = Hosts::with(&mut f, |h, f| {
        let m = h.dma_map_single(f, dev, a_buf, 64, DmaDirection::Bidirectional);
        (m, h.take_log())
    });
    let a = a.unwrap();
    assert_eq!(
        lut_in_use(&f, ntb),
        (w0 + 1, r0 + 1),
        "one window, one requester entry"
    );
    assert!(
        log.iter().any(|l| l.contains("requester-ID LUT entry")),
        "{log:?}"
    );
    assert!(
        log.iter().any(|l| l.contains("address-LUT window")),
        "{log:?}"
    );
    assert!(
        log.iter()
            .any(|l| l.contains("mapped IOVA") && l.contains("borrower's IOMMU")),
        "{log:?}"
    );
    let (b, log) = Hosts::with(&mut f, |h, f| {
        let m = h.dma_map_single(f, dev, b_buf, 64, DmaDirection::Bidirectional);
        (m, h.take_log())
    });
    let b = b.unwrap();
    assert_eq!(
        lut_in_use(&f, ntb),
        (w0 + 1, r0 + 1),
        "the second mapping shares them"
    );
    assert!(
        !log.iter().any(|l| l.contains("LUT")),
        "nothing new programmed: {log:?}"
    );
    assert_eq!(
        b.addr.0 - a.addr.0,
        0x2000,
        "same window, offsets carried over"
    );

    f.dma_write(nvme, a.addr.0, b"first").unwrap();
    f.dma_write(nvme, b.addr.0, b"second").unwrap();
    assert_eq!(peek(&f, a_buf, 5), b"first");
    assert_eq!(peek(&f, b_buf, 6), b"second");

    // Unmapping one leaves the other working.
    Hosts::with(&mut f, |h, f| h.dma_unmap_single(f, &a)).unwrap();
    assert_eq!(lut_in_use(&f, ntb), (w0 + 1, r0 + 1));
    f.dma_write(nvme, b.addr.0, b"still").unwrap();
    assert_eq!(peek(&f, b_buf, 5), b"still");
    // The far IOMMU page of the first buffer is gone: through the window it faults there.
    assert_eq!(
        f.dma_write(nvme, a.addr.0, b"x").unwrap_err().kind,
        FaultKind::IommuNotMapped
    );

    Hosts::with(&mut f, |h, f| h.dma_unmap_single(f, &b)).unwrap();
    assert_eq!(
        lut_in_use(&f, ntb),
        (w0, r0),
        "LUT entries back to what they were"
    );
    assert_eq!(
        Hosts::with(&mut f, |h, _| h.ntb(ntb).unwrap().windows_held()),
        0
    );
    assert_eq!(
        f.dma_write(nvme, b.addr.0, b"x").unwrap_err().kind,
        FaultKind::NtbWindowUnmapped
    );
    let borrower = host(&f, "borrower");
    let iommu = f.iommu(borrower);
    let proxies = (0..8u8).filter_map(|i| {
        let far_fn = f
            .topo
            .node(f.topo.ntbs[f.topo.ntb_by_name(borrower, "ntb").unwrap().index()].fn_node)
            .rid;
        iommu.domain_of(fabric::ntb::proxy_rid(far_fn, i))
    });
    assert!(
        proxies.map(|d| iommu.mapped_pages(d)).all(|n| n == 0),
        "far IOMMU pages unmapped"
    );
}

#[test]
fn a_scatter_gather_list_of_scattered_pages_becomes_one_iova_range() {
    let mut f = fabric("ioctopus_r730", &["server"]);
    let nic = function(&f, "server.nic.pf0");
    let dev = Requester::Function(nic);
    let pages = [
        ram(&f, "server.ram.node0", 0x20_0000),
        ram(&f, "server.ram.node1", 0x5000),
        ram(&f, "server.ram.node0", 0x90_0000),
    ];
    let sg: Vec<(PhysAddr, u64)> = pages.iter().map(|&p| (p, 4096)).collect();

    // Identity: three pieces, as scattered as the pages.
    let m = Hosts::with(&mut f, |h, f| {
        h.dma_map_sg(f, dev, &sg, DmaDirection::FromDevice)
    })
    .unwrap();
    assert_eq!(m.segments.len(), 3);
    Hosts::with(&mut f, |h, f| h.dma_unmap_sg(f, &m)).unwrap();

    translated(&mut f, HostId(0), DEFAULT_IOVA_RANGE);
    let m = Hosts::with(&mut f, |h, f| {
        h.dma_map_sg(f, dev, &sg, DmaDirection::FromDevice)
    })
    .unwrap();
    assert_eq!(m.segments.len(), 1, "{:?}", m.segments);
    let (iova, len) = m.segments[0];
    assert_eq!(len, 3 * 4096);
    let data = bytes(3 * 4096, 5);
    f.dma_write(nic, iova.0, &data).unwrap();
    for (i, &p) in pages.iter().enumerate() {
        assert_eq!(
            peek(&f, p, 4096),
            data[i * 4096..(i + 1) * 4096],
            "page {i}"
        );
    }
    Hosts::with(&mut f, |h, f| h.dma_unmap_sg(f, &m)).unwrap();
    assert_eq!(
        f.dma_write(nic, iova.0 + 4096, &[1]).unwrap_err().kind,
        FaultKind::IommuNotMapped
    );
}

#[test]
fn coherent_buffers_come_from_the_node_and_go_back_to_it() {
    let mut f = fabric("ioctopus_r730", &["server"]);
    let nic = function(&f, "server.nic.pf1");
    let dev = Requester::Function(nic);
    let node = NumaNode {
        host: HostId(0),
        node: 1,
    };
    let c = Hosts::with(&mut f, |h, f| h.dma_alloc_coherent(f, dev, node, 10_000)).unwrap();
    let region = f.topo.host(HostId(0)).decode(c.phys.addr).unwrap();
    assert!(
        matches!(region.owner, fabric::Owner::Ram { node: 1, .. }),
        "on node 1"
    );
    f.dma_write(nic, c.mapping.addr.0, &bytes(10_000, 2))
        .unwrap();
    assert_eq!(peek(&f, c.phys, 10_000), bytes(10_000, 2));
    let d = Hosts::with(&mut f, |h, f| h.dma_alloc_coherent(f, dev, node, 4096)).unwrap();
    assert!(
        d.phys.addr + 4096 <= c.phys.addr || d.phys.addr >= c.phys.addr + 12_288,
        "disjoint"
    );
    Hosts::with(&mut f, |h, f| h.dma_free_coherent(f, &c)).unwrap();
    assert_eq!(
        f.dma_write(nic, c.mapping.addr.0, &[1]).unwrap_err().kind,
        FaultKind::IommuNotMapped
    );
    let e = Hosts::with(&mut f, |h, f| {
        h.dma_alloc_coherent(
            f,
            dev,
            NumaNode {
                host: HostId(0),
                node: 7,
            },
            64,
        )
    })
    .unwrap_err();
    assert!(e.to_string().contains("no NUMA node 7"), "{e}");
    let e = Hosts::with(&mut f, |h, f| h.dma_alloc_coherent(f, dev, node, 1 << 40)).unwrap_err();
    assert!(matches!(e, HostError::Exhausted { .. }), "{e}");
}

#[test]
fn bad_arguments_are_errors() {
    let mut f = fabric("smartio_chassis_mxs824", &[]);
    let buf = ram(&f, "borrower.ram", 0);
    let nvme = Requester::Function(function(&f, "lender.nvme"));
    let e = Hosts::with(&mut f, |h, f| {
        h.dma_map_single(f, nvme, buf, 0, DmaDirection::ToDevice)
    })
    .unwrap_err();
    assert!(e.to_string().contains("at least one byte"), "{e}");
    let root = f.topo.host(HostId(0)).roots[0];
    let e = Hosts::with(&mut f, |h, f| {
        h.dma_map_single(
            f,
            Requester::Function(root),
            buf,
            64,
            DmaDirection::ToDevice,
        )
    })
    .unwrap_err();
    assert!(e.to_string().contains("not a requester"), "{e}");
    let e = Hosts::with(&mut f, |h, f| {
        h.dma_map_single(
            f,
            nvme,
            PhysAddr {
                host: HostId(9),
                addr: 0,
            },
            64,
            DmaDirection::ToDevice,
        )
    })
    .unwrap_err();
    assert!(e.to_string().contains("no host 9"), "{e}");
    let e = Hosts::with(&mut f, |h, f| {
        h.dma_map_sg(f, nvme, &[], DmaDirection::ToDevice)
    })
    .unwrap_err();
    assert!(e.to_string().contains("empty"), "{e}");
}

#[test]
fn an_unmapped_buffer_faults_in_the_timed_path_too() {
    let f = fabric("smartio_chassis_mxs824", &["lender"]);
    let mut tf = TimedFabric::new(f, 1).unwrap();
    let nvme = function(&tf.fabric, "lender.nvme");
    let dev = Requester::Function(nvme);
    let buf = ram(&tf.fabric, "borrower.ram", 0x4000);
    let m = Hosts::with(&mut tf.fabric, |h, f| {
        h.dma_map_single(f, dev, buf, 64, DmaDirection::Bidirectional)
    })
    .unwrap();
    let req = fabric::Request {
        requester: dev,
        addr: m.addr.0,
        len: 64,
        access: fabric::Access::Write,
    };
    let (_, t) = tf.route(&req).expect("mapped: routed (and cached)");
    assert!(matches!(t, fabric::Target::Ram { host, .. } if host == buf.host));
    Hosts::with(&mut tf.fabric, |h, f| h.dma_unmap_single(f, &m)).unwrap();
    let fault = tf.route(&req).unwrap_err();
    assert_eq!(
        fault.kind,
        FaultKind::IommuNotMapped,
        "the lender's IOMMU page went first"
    );
}

#[test]
fn placement_puts_each_cpu_on_its_packages_node() {
    let f = fabric("ioctopus_r730", &[]);
    let p = Placement::of_host(&f.topo, HostId(0)).unwrap();
    let plat = f.topo.platform_of(HostId(0));
    let n = plat.packages * plat.cores_per_package * plat.threads_per_core;
    assert_eq!(p.cpus().len() as u32, n);
    assert_eq!(p.node_of(0).unwrap(), 0);
    assert_eq!(
        p.node_of(plat.cores_per_package).unwrap(),
        1,
        "first core of package 1"
    );
    let node1 = p.cpus_of(1).unwrap();
    assert_eq!(node1.len() as u32, n / 2);
    assert!(node1.iter().all(|&c| p.node_of(c).unwrap() == 1));
    assert!(p.node_of(n).unwrap_err().to_string().contains("CPUs 0.."));
    assert!(p
        .cpus_of(2)
        .unwrap_err()
        .to_string()
        .contains("NUMA nodes 0..1"));
    assert!(Placement::of_host(&f.topo, HostId(5)).is_err());
}
