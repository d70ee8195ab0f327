//! A multicast write is timed as one TLP along its slowest copy's route: the same steps
//! and zero-load time as a unicast write to that member, the shared part charged once.

use fabric::{builtin, Access, Fabric, Request, Requester, Step, Target};
use sim::timed::TimedFabric;

#[test]
fn a_multicast_write_is_timed_by_its_slowest_copy() {
    let s = builtin::load_builtin("smartio_cluster60").unwrap().unwrap();
    let mut f = Fabric::from_scenario(s).unwrap();
    let h = |f: &Fabric, n: &str| f.topo.host_by_name(n).unwrap();
    let (h00, h01, h42) = (h(&f, "h00"), h(&f, "h01"), h(&f, "h42"));
    let ntb = f.topo.host(h00).ntbs[0];
    let seg = 0x1000_0000;
    let g = f.multicast_create(ntb, 4096).unwrap();
    f.multicast_join(g, h01, seg).unwrap();
    f.multicast_join(g, h42, seg).unwrap();
    let window = f.multicast_group(g).unwrap().local_addr;
    // A unicast window to h42's segment, for comparison.
    let uni = f.ntb_map_window(ntb, h42, seg, 4096).unwrap().local_addr;
    let mut tf = TimedFabric::new(f, 1).unwrap();
    let req = |addr| Request {
        requester: Requester::Cpu {
            host: h00,
            package: 0,
        },
        addr,
        len: 256,
        access: Access::Write,
    };
    let (route, t) = tf.route(&req(window)).unwrap();
    assert_eq!(
        t,
        Target::Multicast {
            group: g,
            offset: 0
        }
    );
    let (mp, mt) = tf.step_times(&req(window)).unwrap();
    let (up, ut) = tf.step_times(&req(uni)).unwrap();
    // h42 is over the top switch, h01 next to h00: the slowest copy is h42's.
    assert!(mp
        .steps
        .iter()
        .any(|s| matches!(s, Step::NtbWindow { to_host, .. } if *to_host == h42)));
    assert_eq!(mp.steps.len(), up.steps.len());
    let sum = |v: &[sim::time::Time]| v.iter().map(|t| t.as_ps()).sum::<u64>();
    assert_eq!(sum(&mt), sum(&ut));
    assert!(sum(&mt) > 0);
    // The same route for every write to the page (cached), a new one after a change.
    assert_eq!(tf.route(&req(window + 256)).unwrap().0, route);
    // h42 down: the timed route is h01's, shorter.
    tf.crash_host(h42);
    let (mp2, mt2) = tf.step_times(&req(window)).unwrap();
    assert!(mp2
        .steps
        .iter()
        .any(|s| matches!(s, Step::NtbWindow { to_host, .. } if *to_host == h01)));
    assert!(sum(&mt2) < sum(&mt));
    // Reads of the window are refused.
    let rd = Request {
        access: Access::Read,
        ..req(window)
    };
    assert!(tf.route(&rd).is_err());
}
