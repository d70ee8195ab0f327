//! Peer-to-peer between borrowed devices on the built-in three-way testbed (docs/hardware.md
//! §2), lends and borrows declared in the scenario (`[[lend]]`, `[[borrow]]`) and performed
//! by `Cluster::from_fabric`. Each mapping is checked by routing the device's access
//! through the fabric: the switch chips (hops) and root complexes (roots) it crosses, and
//! the cables between adapters against the borrower's cached way.

use fabric::{builtin, Access, Fabric, NtbHop, Path, PcieNodeId, Request, Requester, Step};
use systems::smartio::{Cluster, ControlKind, P2pCase, PeerTarget};

const DECLS: &str = r#"
[[lend]]
host = "lender1"
device = "gpu0"
[[lend]]
host = "lender1"
device = "gpu1"
[[lend]]
host = "lender2"
device = "gpu0"

[[borrow]]
host = "user"
device = "lender1.gpu0"
exclusive = true
name = "a"
[[borrow]]
host = "user"
device = "lender1.gpu1"
name = "b1"
[[borrow]]
host = "user"
device = "lender2.gpu0"
name = "b2"
"#;

fn three_way(iommu_on: &[&str]) -> Fabric {
    let mut src = builtin::source_of("smartio_three_way").unwrap();
    src.text.push_str(DECLS);
    let mut s = builtin::load_source(src).unwrap();
    assert_eq!(s.topology.lends.len(), 3);
    assert_eq!(s.topology.borrows.len(), 3);
    for h in iommu_on {
        let id = s.topology.host_by_name(h).unwrap();
        s.topology.hosts[id.index()].iommu = true;
    }
    Fabric::from_scenario(s).unwrap()
}

/// Routes a 64-byte write by `dev` at `addr`: (hops, roots, cables crossed).
fn route(f: &Fabric, dev: PcieNodeId, addr: u64) -> (usize, usize, Vec<NtbHop>) {
    let mut p = Path::default();
    f.route(
        &Request {
            requester: Requester::Function(dev),
            addr,
            len: 64,
            access: Access::Write,
        },
        &mut p,
    )
    .unwrap_or_else(|e| panic!("fault {e:?} after {:?}", p.steps));
    let cables = p
        .steps
        .iter()
        .filter_map(|s| match *s {
            Step::Cable { cable } => Some(NtbHop::Cable(cable)),
            Step::ClusterSwitch { switch } => Some(NtbHop::ClusterSwitch(switch)),
            _ => None,
        })
        .collect();
    (p.hops(), p.roots(), cables)
}

#[test]
fn the_scenario_s_borrows_are_performed_and_the_borrower_knows_where_each_device_lives() {
    let mut f = three_way(&[]);
    let c = Cluster::from_fabric(&mut f).unwrap();
    let user = f.topo.host_by_name("user").unwrap();
    let l1 = f.topo.host_by_name("lender1").unwrap();
    let l2 = f.topo.host_by_name("lender2").unwrap();
    let a = c.borrow_named("a").unwrap();
    assert_eq!(a.host, user);
    assert_eq!(c.device(a.fdid).unwrap().name, "lender1.gpu0");
    let lenders: Vec<_> = c.agent(user).peers().iter().map(|p| p.lender).collect();
    assert_eq!(lenders, [l1, l1, l2]);
    // Each lender reaches the user over their direct cable.
    for p in c.agent(user).peers() {
        assert_eq!(p.way.len(), 1, "{p:?}");
    }
    assert_eq!(c.stats().get(ControlKind::BorrowGrant), 3);
}

#[test]
fn two_gpus_in_one_lender_talk_under_its_switch_without_a_message() {
    let mut f = three_way(&[]);
    let mut c = Cluster::from_fabric(&mut f).unwrap();
    let (a, b1) = (c.borrow_named("a").unwrap(), c.borrow_named("b1").unwrap());
    let before = c.stats().total();
    let m = c
        .map_device_for_device(&mut f, a, PeerTarget::Borrowed(b1), 1, 0x2000, 4096)
        .unwrap();
    assert_eq!(m.case, P2pCase::SameLender);
    assert_eq!(
        c.stats().total(),
        before,
        "the lender-local address needs nobody"
    );
    let b1_bar = f
        .topo
        .node(c.function(&f, b1).unwrap())
        .bar(1)
        .unwrap()
        .addr;
    assert_eq!(
        m.mapping.addr.0,
        b1_bar + 0x2000,
        "the lender-local bus address"
    );
    let dev = c.function(&f, a).unwrap();
    assert_eq!(
        route(&f, dev, m.mapping.addr.0),
        (1, 0, vec![]),
        "1L-P2P-SW: 0 roots, 1 hop"
    );
    let data = [0x5au8; 64];
    f.store(Requester::Function(dev), m.mapping.addr.0, &data)
        .unwrap();
    let mut got = [0u8; 64];
    f.peek_bar(c.function(&f, b1).unwrap(), 1, 0x2000, &mut got);
    assert_eq!(got, data);
}

#[test]
fn with_the_lender_iommu_on_the_same_pair_goes_up_to_its_root() {
    let mut f = three_way(&["lender1"]);
    let mut c = Cluster::from_fabric(&mut f).unwrap();
    let (a, b1) = (c.borrow_named("a").unwrap(), c.borrow_named("b1").unwrap());
    let before = c.stats().get(ControlKind::WindowSetup);
    let m = c
        .map_device_for_device(&mut f, a, PeerTarget::Borrowed(b1), 1, 0, 4096)
        .unwrap();
    assert_eq!(m.case, P2pCase::SameLender);
    assert_eq!(
        c.stats().get(ControlKind::WindowSetup),
        before + 1,
        "the lender maps its IOMMU"
    );
    let dev = c.function(&f, a).unwrap();
    // Switch up, the root (with the IOMMU), switch down.
    assert_eq!(route(&f, dev, m.mapping.addr.0), (2, 1, vec![]));
}

#[test]
fn gpus_in_two_lenders_talk_through_both_adapters_and_no_root() {
    let mut f = three_way(&[]);
    let mut c = Cluster::from_fabric(&mut f).unwrap();
    let (a, b2) = (c.borrow_named("a").unwrap(), c.borrow_named("b2").unwrap());
    let m = c
        .map_device_for_device(&mut f, a, PeerTarget::Borrowed(b2), 1, 0x1000, 4096)
        .unwrap();
    assert_eq!(m.case, P2pCase::OtherLender);
    let l1 = f
        .topo
        .ntb_by_name(f.topo.host_by_name("lender1").unwrap(), "ntb")
        .unwrap();
    let l2 = f
        .topo
        .ntb_by_name(f.topo.host_by_name("lender2").unwrap(), "ntb")
        .unwrap();
    assert_eq!(
        Some(m.way.clone()),
        f.topo.ntb_way(l1, l2),
        "the cached way is the fabric's"
    );
    let dev = c.function(&f, a).unwrap();
    let (hops, roots, cables) = route(&f, dev, m.mapping.addr.0);
    assert_eq!(
        (hops, roots),
        (4, 0),
        "2L-P2P-SW: switch, PXH830, PXH830, switch"
    );
    assert_eq!(
        cables, m.way,
        "the access takes the lender1–lender2 cable, not the user's"
    );
    let data = [0xc3u8; 64];
    f.store(Requester::Function(dev), m.mapping.addr.0, &data)
        .unwrap();
    let mut got = [0u8; 64];
    f.peek_bar(c.function(&f, b2).unwrap(), 1, 0x1000, &mut got);
    assert_eq!(got, data);
}

#[test]
fn a_gpu_of_the_borrower_is_reached_through_the_dma_window() {
    let mut f = three_way(&["user"]);
    let mut c = Cluster::from_fabric(&mut f).unwrap();
    let a = c.borrow_named("a").unwrap();
    let gpu2 = match f.resolve("user.gpu2").unwrap() {
        fabric::Endpoint::Node(n) => n,
        e => panic!("{e:?}"),
    };
    let before = c.stats().total();
    let m = c
        .map_device_for_device(&mut f, a, PeerTarget::Local(gpu2), 1, 0x3000, 4096)
        .unwrap();
    assert_eq!(m.case, P2pCase::BorrowerLocal);
    assert_eq!(
        c.stats().total(),
        before,
        "inside the DMA window: no message"
    );
    let w = c.dma_window(&f, a).unwrap().unwrap();
    assert!((w.device_base..w.device_base + w.iova.len).contains(&m.mapping.addr.0));
    let dev = c.function(&f, a).unwrap();
    let (hops, roots, cables) = route(&f, dev, m.mapping.addr.0);
    // lender1's switch and PXH830, the user's PXH830 and switch, up to the user's root
    // (IOMMU) and down through sw2.
    assert_eq!((hops, roots), (5, 1));
    assert_eq!(cables, m.way);
    let data = [0x77u8; 64];
    f.store(Requester::Function(dev), m.mapping.addr.0, &data)
        .unwrap();
    let mut got = [0u8; 64];
    f.peek_bar(gpu2, 1, 0x3000, &mut got);
    assert_eq!(got, data);
}
