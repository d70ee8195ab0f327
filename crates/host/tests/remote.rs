//! The host layer's calls for systems that build their own cross-host DMA paths: a
//! reserved IOVA range with pages mapped at chosen IOVAs (and nothing else touched), NTB
//! windows and requester entries as handles, shared and reference-counted with the DMA
//! API's, and a reservation given back unmapping what it still held.

use fabric::iommu::{Perm, PAGE};
use fabric::{builtin, Fabric, FaultKind, HostId, Requester};
use host::{ntb_pair, DmaDirection, HostError, Hosts, PhysAddr};

fn b2b(iommu_b: bool) -> Fabric {
    let mut s = builtin::load_builtin("smartio_pxh830_b2b")
        .unwrap()
        .unwrap();
    s.topology.hosts[1].iommu = iommu_b;
    Fabric::from_scenario(s).unwrap()
}

#[test]
fn pages_mapped_inside_a_reserved_range_carry_bytes_until_it_is_given_back() {
    let mut f = b2b(true);
    let (a, b) = (HostId(0), HostId(1));
    let (na, nb) = ntb_pair(&f, a, b).unwrap();
    let cpu = Requester::Cpu {
        host: a,
        package: 0,
    };
    let ram_b = f.topo.host(b).ram_addr(0, 1 << 20).unwrap();
    let (range, w) = Hosts::with(&mut f, |h, f| {
        // CPUs cross with their reserved entry; proxied on b's side as entry 0.
        let e = h
            .ntb_acquire_requester(f, na, f.requester_rid(cpu))
            .unwrap();
        assert_eq!(e.index, 0);
        let proxy = e.proxy_on(f, nb);
        let ws = f.topo.ntbs[na.index()].window_size;
        let range = h
            .iommu_reserve(f, b, proxy, 3 * PAGE, u64::MAX, ws)
            .unwrap();
        assert_eq!(range.start % ws, 0, "aligned to the window size");
        let w = h
            .ntb_acquire_window(f, na, b, range.start, range.len)
            .unwrap();
        let at = h
            .iommu_map_at(
                f,
                &range,
                range.start + PAGE + 0x10,
                ram_b + 0x10,
                100,
                Perm::RW,
            )
            .unwrap();
        assert_eq!(at, range.start + PAGE);
        let outside = h.iommu_map_at(f, &range, range.end(), ram_b, 8, Perm::RW);
        assert!(matches!(outside, Err(HostError::Invalid(_))), "{outside:?}");
        (range, w)
    });
    f.store(cpu, w.local + PAGE + 0x10, b"through the range")
        .unwrap();
    let mut got = [0u8; 17];
    f.load(cpu, w.local + PAGE + 0x10, &mut got).unwrap();
    assert_eq!(&got, b"through the range");
    let e = f.store(cpu, w.local, &[1]).unwrap_err();
    assert_eq!(
        e.kind,
        FaultKind::IommuNotMapped,
        "only the mapped page is reachable"
    );
    Hosts::with(&mut f, |h, f| {
        assert_eq!(h.iommu(b).unwrap().reserved_pages_mapped(range.rid), 1);
        // The policy cannot change under a reservation.
        assert!(h
            .set_iommu_policy(b, host::IommuPolicy::Translated, host::DEFAULT_IOVA_RANGE)
            .is_err());
        h.iommu_unreserve(f, &range).unwrap();
        assert_eq!(h.iommu(b).unwrap().reserved_pages_mapped(range.rid), 0);
        h.ntb_release_window(f, &w).unwrap();
    });
    assert!(f.store(cpu, w.local + PAGE + 0x10, &[1]).is_err());
    assert_eq!(f.ntb_state(na).programmed_windows(), 0);
}

#[test]
fn windows_and_requester_entries_are_shared_with_the_dma_api() {
    let mut f = b2b(false);
    let (na, _) = ntb_pair(&f, HostId(0), HostId(1)).unwrap();
    let nic_rid = fabric::Rid::new(9, 0, 0);
    let buf = PhysAddr {
        host: HostId(1),
        addr: f.topo.host(HostId(1)).ram_addr(0, 0).unwrap(),
    };
    Hosts::with(&mut f, |h, f| {
        let e1 = h.ntb_acquire_requester(f, na, nic_rid).unwrap();
        let e2 = h.ntb_acquire_requester(f, na, nic_rid).unwrap();
        assert_eq!(e1.index, e2.index);
        assert_eq!(h.ntb(na).unwrap().requesters_held(), 1);
        let w1 = h
            .ntb_acquire_window(f, na, HostId(1), buf.addr, 4096)
            .unwrap();
        // A DMA API mapping inside the same window shares it.
        let m = h
            .dma_map_single(
                f,
                Requester::Cpu {
                    host: HostId(0),
                    package: 0,
                },
                buf,
                64,
                DmaDirection::ToDevice,
            )
            .unwrap();
        assert_eq!(m.addr.0, w1.local);
        assert_eq!(f.ntb_state(na).programmed_windows(), 1);
        h.ntb_release_window(f, &w1).unwrap();
        assert_eq!(
            f.ntb_state(na).programmed_windows(),
            1,
            "the mapping still uses it"
        );
        h.dma_unmap_single(f, &m).unwrap();
        assert_eq!(f.ntb_state(na).programmed_windows(), 0);
        h.ntb_release_requester(f, &e1).unwrap();
        assert_eq!(f.ntb_state(na).rid_index(nic_rid), Some(e2.index));
        h.ntb_release_requester(f, &e2).unwrap();
        assert_eq!(f.ntb_state(na).rid_index(nic_rid), None);
    });
}
