//! The path examples of docs/hardware.md §2, plus the routing rules they rest on (IOMMU sends
//! peer-to-peer to the root; roots and hops counted as the field counts them). Each access
//! is set up through the host layer, as a driver's would be.

use fabric::{builtin, Access, Endpoint, Fabric, Path, Request, Requester, Target};
use host::{DmaDirection, Hosts, PhysAddr};

fn fabric(name: &str) -> Fabric {
    Fabric::from_scenario(
        builtin::load_builtin(name)
            .expect("built-in exists")
            .expect("loads"),
    )
    .expect("static windows program")
}

/// Plans and routes one access between named endpoints; returns (hops, roots, target, path).
fn route(f: &mut Fabric, from: &str, to: &str, access: Access) -> (usize, usize, Target, Path) {
    let requester = match f.resolve(from).unwrap() {
        Endpoint::Node(n) => Requester::Function(n),
        Endpoint::Cpu { host, package } => Requester::Cpu { host, package },
        e => panic!("{from} is not a requester: {e:?}"),
    };
    let (host, addr) = f.resolve_address(to, 0).unwrap();
    let m = Hosts::with(f, |h, f| {
        h.dma_map_single(
            f,
            requester,
            PhysAddr { host, addr },
            64,
            DmaDirection::Bidirectional,
        )
    })
    .unwrap();
    let req = Request {
        requester,
        addr: m.addr.0,
        len: 64,
        access,
    };
    let mut p = Path::default();
    let t = f
        .route(&req, &mut p)
        .unwrap_or_else(|e| panic!("fault: {e:?} after {:?}", p.steps));
    (p.hops(), p.roots(), t, p)
}

#[test]
fn nvme_fetching_sq_in_borrower_ram_crosses_four_chips() {
    let mut f = fabric("smartio_chassis_mxs824");
    let (hops, roots, t, _) = route(&mut f, "lender.nvme", "borrower.ram", Access::Read);
    assert_eq!(
        hops, 4,
        "chassis switch, lender PXH830, MXS824, borrower PXH830"
    );
    assert_eq!(roots, 1, "ends in the borrower's root complex");
    assert!(matches!(t, Target::Ram { host, .. } if f.topo.hosts[host.index()].name == "borrower"));
}

#[test]
fn nvme_fetching_sq_in_lender_ram_crosses_three_chips() {
    let mut f = fabric("smartio_chassis_mxs824");
    let (hops, _, t, _) = route(&mut f, "lender.nvme", "lender.ram", Access::Read);
    assert_eq!(hops, 3, "chassis switch and the two HIB68 chips");
    assert!(matches!(t, Target::Ram { host, .. } if f.topo.hosts[host.index()].name == "lender"));
}

#[test]
fn nvme_reading_gpu_memory_in_the_same_chassis_crosses_one_chip() {
    let mut f = fabric("smartio_chassis_mxs824");
    let (hops, roots, t, _) = route(&mut f, "lender.nvme", "lender.gpu", Access::Read);
    assert_eq!((hops, roots), (1, 0));
    assert!(
        matches!(t, Target::Bar { bar: 1, .. }),
        "the P4000's large memory BAR"
    );
}

#[test]
fn back_to_back_chassis_lender_drops_the_cluster_switch() {
    let mut f = fabric("smartio_chassis_b2b");
    let (hops, _, _, _) = route(&mut f, "lender.nvme", "borrower.ram", Access::Read);
    assert_eq!(hops, 3, "chassis switch and the two PXH830s");
}

#[test]
fn two_gpus_under_one_lenders_switch_stay_below_the_root() {
    let mut f = fabric("smartio_three_way");
    let (hops, roots, _, _) = route(&mut f, "lender1.gpu0", "lender1.gpu1", Access::Write);
    assert_eq!((roots, hops), (0, 1));
}

#[test]
fn one_gpu_in_each_of_two_lenders_crosses_four_chips_and_no_root() {
    let mut f = fabric("smartio_three_way");
    let (hops, roots, t, p) = route(&mut f, "lender1.gpu0", "lender2.gpu0", Access::Write);
    assert_eq!(
        (roots, hops),
        (0, 4),
        "switch, PXH830, PXH830, switch: {:?}",
        p.steps
    );
    assert!(matches!(t, Target::Bar { node, .. } if f.topo.node_label(node) == "lender2.gpu0"));
}

#[test]
fn lender_iommu_sends_switch_local_peer_to_peer_up_to_the_root() {
    let text = builtin::FILES
        .iter()
        .find(|(p, _)| *p == "smartio_three_way.toml")
        .unwrap()
        .1;
    let text = text.replacen(
        "name = \"lender1\"\nplatform = \"smartio_host\"",
        "name = \"lender1\"\nplatform = \"smartio_host\"\niommu = true",
        1,
    );
    let s = fabric::scenario::load(
        fabric::scenario::Source {
            name: "builtin:smartio_three_way.toml".into(),
            text,
        },
        &builtin::BuiltinResolver,
    )
    .unwrap();
    let mut f = Fabric::from_scenario(s).unwrap();
    let (hops, roots, _, p) = route(&mut f, "lender1.gpu0", "lender1.gpu1", Access::Write);
    assert_eq!(roots, 1, "up to the root for translation: {:?}", p.steps);
    assert_eq!(
        hops, 2,
        "the switch on the way up and again on the way down"
    );
    assert!(p.steps.iter().any(|s| s.kind() == "iommu"));
}

#[test]
fn gpus_under_different_switches_of_one_host_go_through_the_root() {
    let mut f = fabric("smartio_three_way");
    let (hops, roots, _, _) = route(&mut f, "user.gpu0", "user.gpu2", Access::Write);
    assert_eq!((roots, hops), (1, 2));
}

#[test]
fn cpu_store_into_the_other_hosts_ram_crosses_both_adapters() {
    let mut f = fabric("smartio_pxh830_b2b");
    let (hops, roots, t, p) = route(&mut f, "a.cpu", "b.ram", Access::Write);
    assert_eq!((hops, roots), (2, 2), "{:?}", p.steps);
    assert!(matches!(t, Target::Ram { .. }));
    let kinds: Vec<&str> = p.steps.iter().map(|s| s.kind()).collect();
    assert_eq!(
        kinds,
        [
            "root",
            "link",
            "ntb_window",
            "rid_lut",
            "switch",
            "cable",
            "switch",
            "link",
            "root"
        ],
        "CPU → root → A's NTB window (host side) → A's crossbar → cable → B's crossbar → root of B"
    );
}

#[test]
fn hosts_on_different_lower_cluster_switches_cross_three_cluster_switches() {
    let mut f = fabric("smartio_cluster60");
    let (hops, _, _, p) = route(&mut f, "h00.nvme", "h59.ram", Access::Read);
    let cluster = p
        .steps
        .iter()
        .filter(|s| s.kind() == "cluster_switch")
        .count();
    assert_eq!(cluster, 3, "mxs1 → mxs0 → mxs6");
    assert_eq!(
        hops,
        1 + 2 + 3,
        "chassis switch, two PXH830s, three MXS824s"
    );
    let (hops_near, _, _, _) = route(&mut f, "h00.nvme", "h05.ram", Access::Read);
    assert_eq!(
        hops_near, 4,
        "same lower switch: chassis, PXH830, mxs1, PXH830"
    );
}

#[test]
fn multi_pf_nic_reaches_each_sockets_memory_locally_through_its_own_pf() {
    let mut f = fabric("ioctopus_r730");
    let (_, _, _, p0) = route(&mut f, "server.nic.pf0", "server.ram.node0", Access::Write);
    let (_, _, _, p1) = route(&mut f, "server.nic.pf1", "server.ram.node0", Access::Write);
    let qpi = |p: &Path| {
        p.steps
            .iter()
            .filter(|s| s.kind() == "interconnect")
            .count()
    };
    assert_eq!(qpi(&p0), 0, "PF0 hangs off socket 0");
    assert_eq!(qpi(&p1), 1, "PF1 writes node 0 across QPI");
}

#[test]
fn tyche_remote_dma_goes_through_the_processor_link() {
    let mut f = fabric("tyche_6nic");
    let (_, _, t, p) = route(&mut f, "target.nic0", "target.ram.node1", Access::Write);
    assert!(matches!(t, Target::Ram { node: 1, .. }));
    let hops: Vec<_> = p
        .steps
        .iter()
        .filter(|s| s.kind() == "interconnect")
        .collect();
    assert_eq!(hops.len(), 2, "ioh0 → pkg0 → pkg1: {hops:?}");
}
