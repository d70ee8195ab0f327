//! pktgen with a packet whose pages span both nodes (docs/hardware.md §1 testbed): read
//! through the queue's PF, the far fragment crosses the CPU interconnect; read through
//! the PF local to each page (IOctoSG's per-fragment hint), none does.

use fabric::{builtin, Fabric, Topology};
use host::net::pktgen::{self, Fragment, PktgenSpec};
use host::net::NetHost;
use sim::Time;

/// The R730 testbed, its roots returning read completions of `completion` bytes (the
/// platform's own value when `None`).
fn topo(completion: Option<u32>) -> Topology {
    let s = builtin::load_builtin("ioctopus_r730").unwrap().unwrap();
    let mut t = Fabric::from_scenario(s).unwrap().topo;
    if let Some(bytes) = completion {
        for p in &mut t.platforms {
            if let Some(timing) = p.timing.as_mut() {
                timing.read_completion_bytes = bytes;
            }
        }
    }
    t
}

fn run(pkt: u64, fragments: Vec<Fragment>) -> pktgen::PktgenResult {
    run_on(&topo(None), pkt, fragments)
}

fn run_on(t: &Topology, pkt: u64, fragments: Vec<Fragment>) -> pktgen::PktgenResult {
    let mut h = NetHost::new(t, t.host_by_name("server").unwrap(), "nic", 0, 0, 0).unwrap();
    pktgen::run(
        &mut h,
        PktgenSpec {
            pkt_bytes: pkt,
            // The 1,024-entry ring fills at ≈ 0.3 Mpps when the link binds: ≈ 3.4 ms.
            warmup: Time::from_us(5000),
            window: Time::from_us(3000),
            fragments,
        },
    )
    .unwrap()
}

#[test]
fn a_far_fragment_crosses_the_interconnect_unless_its_local_pf_reads_it() {
    let f = |node, pf| Fragment { node, pf };
    for pkt in [256, 1500] {
        let one = run(pkt, Vec::new());
        let queue_pf = run(pkt, vec![f(0, 0), f(1, 0)]);
        let hinted = run(pkt, vec![f(0, 0), f(1, 1)]);
        assert_eq!(one.interconnect_gbps, 0.0, "{pkt}: {one:?}");
        assert_eq!(hinted.interconnect_gbps, 0.0, "{pkt}: {hinted:?}");
        // The far half of every packet crosses (with its read request's completions).
        let far = queue_pf.mpps * 1e6 * (pkt / 2) as f64 * 8.0 / 1e9;
        assert!(
            queue_pf.interconnect_gbps >= far,
            "{pkt}: {} < {far}",
            queue_pf.interconnect_gbps
        );
        // …and makes the home agent read DRAM; the hinted reads hit each socket's LLC.
        assert!(
            queue_pf.mem_gbps > 0.0 && hinted.mem_gbps == 0.0,
            "{pkt}: {queue_pf:?} {hinted:?}"
        );
        assert!(
            hinted.mpps >= queue_pf.mpps * 0.99,
            "{pkt}: {one:?} {queue_pf:?} {hinted:?}"
        );
    }
    // With 64 B read completions one x8 link binds 1500 B packets (docs/hardware.md §1's
    // x8 per PF); split over both PFs' links, the core binds instead. With the R730's
    // MPS-sized completions one link keeps up with the core and the split gains nothing.
    let small = topo(Some(64));
    let one = run_on(&small, 1500, Vec::new());
    let hinted = run_on(&small, 1500, vec![f(0, 0), f(1, 1)]);
    assert!(
        hinted.mpps > one.mpps * 1.03,
        "{} vs {}",
        hinted.mpps,
        one.mpps
    );
    let (one, hinted) = (run(1500, Vec::new()), run(1500, vec![f(0, 0), f(1, 1)]));
    assert!(
        (hinted.mpps / one.mpps - 1.0).abs() < 0.005,
        "{} vs {}",
        hinted.mpps,
        one.mpps
    );
}

#[test]
fn fragments_out_of_range_are_refused() {
    let t = topo(None);
    let mut h = NetHost::new(&t, t.host_by_name("server").unwrap(), "nic", 0, 0, 0).unwrap();
    let spec = |fragments| PktgenSpec {
        pkt_bytes: 128,
        warmup: Time::ZERO,
        window: Time::from_us(10),
        fragments,
    };
    let e = pktgen::run(&mut h, spec(vec![Fragment { node: 2, pf: 0 }])).unwrap_err();
    assert!(e.contains("node 2"), "{e}");
    let e = pktgen::run(&mut h, spec(vec![Fragment { node: 0, pf: 0 }; 3])).unwrap_err();
    assert!(e.contains("3 fragments"), "{e}");
}
