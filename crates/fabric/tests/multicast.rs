//! Multicast groups: a store into a group's window lands in every member and nowhere
//! else; reads are refused; the group table is finite; a dead member is skipped and
//! counted, never served.

use fabric::builtin;
use fabric::catalog::MULTICAST_GROUPS;
use fabric::{
    Access, CableEnd, CableId, Fabric, FabricError, FaultKind, GroupId, HostId, McRoutes, Request,
    Requester, Target,
};

const SEG: u64 = 0x1000_0000;

fn cluster60() -> Fabric {
    Fabric::from_scenario(builtin::load_builtin("smartio_cluster60").unwrap().unwrap()).unwrap()
}

fn host(f: &Fabric, name: &str) -> HostId {
    f.topo.host_by_name(name).unwrap()
}

/// A group sent from h00's adapter with members h01, h15 and h42 (a 4 KiB segment at
/// `SEG` in each).
fn group(f: &mut Fabric) -> (GroupId, u64) {
    let h00 = host(f, "h00");
    let ntb = f.topo.host(h00).ntbs[0];
    let g = f.multicast_create(ntb, 4096).unwrap();
    for m in ["h01", "h15", "h42"] {
        let h = host(f, m);
        f.multicast_join(g, h, SEG).unwrap();
    }
    (g, f.multicast_group(g).unwrap().local_addr)
}

fn pattern() -> Vec<u8> {
    (0..4096u32).map(|i| (i * 7 + 3) as u8).collect()
}

fn ram(f: &Fabric, h: HostId, addr: u64) -> Vec<u8> {
    let mut b = vec![0u8; 4096];
    f.peek_ram(h, 0, addr, &mut b);
    b
}

#[test]
fn a_store_lands_in_every_member_and_nowhere_else() {
    let mut f = cluster60();
    let (g, window) = group(&mut f);
    let h00 = host(&f, "h00");
    let data = pattern();
    f.cpu_store(h00, 0, window, &data).unwrap();
    for m in ["h01", "h15", "h42"] {
        assert_eq!(ram(&f, host(&f, m), SEG), data, "member {m}");
    }
    for other in ["h00", "h02", "h14", "h59"] {
        assert!(
            ram(&f, host(&f, other), SEG).iter().all(|&b| b == 0),
            "{other} is no member"
        );
    }
    let gr = f.multicast_group(g).unwrap();
    assert_eq!((gr.delivered, gr.skipped), (3, 0));
    assert!(f.faults().is_empty());
    // Each member's route: the window translation to that member's segment, the cluster
    // switches on its way; all share the sender's part and the top switch's way down.
    let mut r = McRoutes::default();
    let req = Request {
        requester: Requester::Cpu {
            host: h00,
            package: 0,
        },
        addr: window + 64,
        len: 64,
        access: Access::Write,
    };
    let t = f.route_multicast(&req, &mut r).unwrap();
    assert_eq!(
        t,
        Target::Multicast {
            group: g,
            offset: 64
        }
    );
    assert_eq!(r.members().len(), 3);
    for ((res, path), m) in r.members().iter().zip(["h01", "h15", "h42"]) {
        match res {
            Ok(Target::Ram { host: h, addr, .. }) => {
                assert_eq!((*h, *addr), (host(&f, m), SEG + 64));
            }
            other => panic!("{m}: {other:?}"),
        }
        assert_eq!(path.ntb_crossings(), 1);
    }
    // h01 shares h00's lower switch; h15 and h42 go over the top one: the common part
    // ends at h00's lower switch, where the ways diverge.
    let shared = Fabric::multicast_shared_steps(&r);
    assert!(shared > r.shared, "{shared} > {}", r.shared);
    // Unicast addresses give their own target and no member.
    let mut r2 = McRoutes::default();
    let t = f
        .route_multicast(&Request { addr: SEG, ..req }, &mut r2)
        .unwrap();
    assert!(matches!(t, Target::Ram { .. }));
    assert!(r2.members().is_empty());
}

#[test]
fn a_read_of_a_multicast_address_faults_with_the_multicast_kind() {
    let mut f = cluster60();
    let (g, window) = group(&mut f);
    let h00 = host(&f, "h00");
    let mut buf = [0u8; 64];
    let e = f.cpu_load(h00, 0, window, &mut buf).unwrap_err();
    assert_eq!(e.kind, FaultKind::MulticastRead { group: g });
    assert_eq!(e.kind.name(), "multicast_read");
    assert!(buf.iter().all(|&b| b == 0xFF));
    assert!(fabric::describe::fault_text(&f.topo, &e).contains("multicast"));
    // A multicast window is not a unicast window: unmapping it as one is refused.
    let gr = f.multicast_group(g).unwrap().clone();
    let m = fabric::ntb::WindowMapping {
        ntb: gr.ntb,
        first: gr.first,
        count: gr.count,
        local_addr: gr.local_addr,
    };
    assert!(f.ntb_unmap_window(&m).is_err());
}

#[test]
fn the_group_table_is_finite_and_says_so() {
    let mut f = cluster60();
    let h00 = host(&f, "h00");
    let ntb = f.topo.host(h00).ntbs[0];
    let ids: Vec<GroupId> = (0..MULTICAST_GROUPS)
        .map(|_| f.multicast_create(ntb, 4096).unwrap())
        .collect();
    assert_eq!(f.multicast_groups(), 64);
    let e = f.multicast_create(ntb, 4096).unwrap_err();
    assert!(
        matches!(
            e,
            FabricError::Exhausted {
                what: "multicast group table",
                capacity: 64,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("multicast group table"));
    // Destroying one gives its slot and LUT entries back.
    let free = f.ntb_state(ntb).free_windows();
    f.multicast_destroy(ids[5]).unwrap();
    assert_eq!(f.ntb_state(ntb).free_windows(), free + 1);
    assert_eq!(f.multicast_create(ntb, 4096).unwrap(), ids[5]);
}

#[test]
fn a_dead_member_is_skipped_and_counted() {
    let mut f = cluster60();
    let (g, window) = group(&mut f);
    let h00 = host(&f, "h00");
    let h15 = host(&f, "h15");
    let ntb15 = f.topo.host(h15).ntbs[0];
    let cable = f
        .topo
        .cables
        .iter()
        .position(|c| c.ends.contains(&CableEnd::Ntb(ntb15)))
        .map(CableId::from_index)
        .unwrap();
    f.set_cable_up(cable, false);
    let data = pattern();
    // The write is posted: it reaches the replication point, so the sender sees no error.
    f.cpu_store(h00, 0, window, &data).unwrap();
    assert_eq!(ram(&f, host(&f, "h01"), SEG), data);
    assert_eq!(ram(&f, host(&f, "h42"), SEG), data);
    assert!(ram(&f, h15, SEG).iter().all(|&b| b == 0), "h15 served");
    let gr = f.multicast_group(g).unwrap();
    assert_eq!((gr.delivered, gr.skipped), (2, 1));
    assert_eq!(f.faults().len(), 1);
    assert_eq!(f.faults()[0].kind, FaultKind::LinkDown { cable });
    // A crashed member host likewise; the cable back up serves h15 again.
    f.set_cable_up(cable, true);
    f.crash_host(host(&f, "h42"));
    f.cpu_store(h00, 0, window, &data).unwrap();
    assert_eq!(ram(&f, h15, SEG), data);
    let gr = f.multicast_group(g).unwrap();
    assert_eq!((gr.delivered, gr.skipped), (4, 2));
    assert!(matches!(f.faults()[1].kind, FaultKind::HostDown { .. }));
    // A member leaves: no more copies to it.
    f.multicast_leave(g, h15).unwrap();
    assert_eq!(f.multicast_group(g).unwrap().members.len(), 2);
}
