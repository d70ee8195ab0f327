//! `smartio.multicast`: one Identify Controller whose 4 KiB lands in every member of a
//! multicast group of 2, 16 and 59 hosts of smartio_cluster60 in one operation; a crashed
//! member is skipped (and counted), the others still get identical bytes.

use fabric::{builtin, Fabric, GroupId};
use sim::timed::TimedFabric;
use systems::smartio::multicast::multicast_identify;

fn cluster60() -> TimedFabric {
    let s = builtin::load_builtin("smartio_cluster60").unwrap().unwrap();
    TimedFabric::new(Fabric::from_scenario(s).unwrap(), 1).unwrap()
}

#[test]
fn identify_lands_in_every_member_of_2_16_and_59() {
    for hosts in [2, 16, 59] {
        let mut tf = cluster60();
        let r = multicast_identify(&mut tf, "h00.nvme", hosts).unwrap();
        assert_eq!(r.deliveries, hosts, "{hosts} hosts: {r:?}");
        assert!(r.bytes_identical, "{hosts} hosts");
        assert_eq!(r.skipped_copies, 0);
        assert_eq!(r.dma_faults, 0, "every data TLP had a timed route");
        // The 4 KiB went as MPS-sized TLPs, each replicated to every member.
        assert!(
            r.copies >= hosts as u64 && r.copies.is_multiple_of(hosts as u64),
            "{r:?}"
        );
        assert_eq!(r.members.first().map(String::as_str), Some("h01"));
        assert_eq!(r.members.last().unwrap(), &format!("h{hosts:02}"));
        // One operation: the controller wrote the data once, to the group's address.
        assert!(tf.fabric.faults().is_empty(), "{:?}", tf.fabric.faults());
        // Non-members got nothing: the next host's RAM at a member's segment address.
        if hosts < 59 {
            let other = tf
                .fabric
                .topo
                .host_by_name(&format!("h{:02}", hosts + 1))
                .unwrap();
            let first = tf.fabric.topo.host_by_name("h01").unwrap();
            let g = tf.fabric.multicast_group(GroupId(0)).unwrap();
            let seg = g.members.iter().find(|m| m.host == first).unwrap().far_addr;
            let mut b = vec![0u8; 4096];
            tf.fabric.peek_ram(other, 0, seg, &mut b);
            assert!(b.iter().all(|&x| x == 0), "h{:02} got bytes", hosts + 1);
        }
    }
}

#[test]
fn a_crashed_member_is_skipped_and_the_rest_are_identical() {
    let mut tf = cluster60();
    let h07 = tf.fabric.topo.host_by_name("h07").unwrap();
    tf.crash_host(h07);
    let r = multicast_identify(&mut tf, "h00.nvme", 16).unwrap();
    assert_eq!(r.deliveries, 15, "{r:?}");
    assert!(r.bytes_identical);
    // The 4 KiB write is one MPS-sized TLP or more: each skipped copy of h07 counted.
    assert!(r.skipped_copies >= 1);
    assert!(tf
        .fabric
        .faults()
        .iter()
        .any(|f| f.kind == fabric::FaultKind::HostDown { host: h07 }));
}

#[test]
fn a_group_needs_enough_hosts() {
    let mut tf = cluster60();
    assert!(multicast_identify(&mut tf, "h00.nvme", 60).is_err());
}
