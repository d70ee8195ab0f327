//! A migrating stream's receive side with a driver of the test's own: frames split over
//! two rings whose completions become visible out of sequence order, so TCP's
//! out-of-order queue must put the stream back together (docs/hardware.md §1 testbed).

use fabric::{builtin, Fabric, Topology};
use host::net::migration::{self, FlowDriver, MigrationSpec, Move, RxQueue};
use host::net::{stream, NetHost};
use sim::Time;

fn topo() -> Topology {
    let s = builtin::load_builtin("ioctopus_r730").unwrap().unwrap();
    Fabric::from_scenario(s).unwrap().topo
}

const FROM: RxQueue = RxQueue { index: 0, node: 0 };
const TO: RxQueue = RxQueue { index: 1, node: 1 };

/// Every other frame through PF 1 (socket 1) into the ring on node 0 — a remote write
/// that misses DDIO — and the rest through PF 1 into the ring on its own node; no rules.
#[derive(Default)]
struct Alternate {
    frames: u64,
    callbacks: Vec<(u32, RxQueue)>,
}

impl FlowDriver for Alternate {
    fn rx_flow_steer(&mut self, _t: Time, socket: u32, queue: RxQueue) {
        self.callbacks.push((socket, queue));
    }
    fn next_work(&self) -> Option<Time> {
        None
    }
    fn work(&mut self, _t: Time) {}
    fn rx_steer(&mut self, _t: Time) -> (usize, u16) {
        self.frames += 1;
        (1, if self.frames.is_multiple_of(2) { 0 } else { 1 })
    }
    fn tx_pf(&mut self, _t: Time, _socket: u32, _done: Time) -> usize {
        0
    }
}

fn hosts(t: &Topology) -> (NetHost, NetHost) {
    let mut c = NetHost::new(t, t.host_by_name("client").unwrap(), "nic", 0, 0, 0).unwrap();
    c.lro = true;
    let s = NetHost::new(t, t.host_by_name("server").unwrap(), "nic", 0, 0, 0).unwrap();
    (c, s)
}

fn spec(at: Time) -> MigrationSpec {
    MigrationSpec {
        stream: stream::StreamSpec {
            msg_bytes: 65536,
            mtu: 1500,
            warmup: Time::ZERO,
            window: Time::from_us(4000),
        },
        mv: Move {
            at,
            to_socket: 1,
            to_queue: TO,
        },
        from_queue: FROM,
        sample: Time::from_us(500),
    }
}

#[test]
fn segments_overtaken_across_rings_wait_in_tcps_out_of_order_queue_and_nothing_is_lost() {
    let t = topo();
    let (mut c, mut s) = hosts(&t);
    let mut d = Alternate::default();
    let r = migration::run(&mut c, &mut s, spec(Time::from_us(2000)), &mut d).unwrap();
    // The slow ring's frames are overtaken: TCP holds the later ones, then delivers all
    // in sequence (the process reads only in-order bytes).
    assert!(r.reordered > 0, "{r:?}");
    assert_eq!(r.lost, 0);
    assert!(r.stream.bytes_delivered > 1_000_000, "{r:?}");
    assert!(r.stream.bytes_delivered <= r.stream.bytes_sent);
    // Every frame entered PF 1; PF 0's samples stay empty; 8 samples of 500 µs.
    assert!(r.pf_rx_bytes[0].iter().all(|&b| b == 0));
    assert_eq!(r.pf_rx_bytes[1].len(), 8);
    assert!(r.pf_rx_bytes[1].iter().all(|&b| b > 0));
    // Both rings filled; the stack told the driver once where the flow is read now.
    assert!(r.ring_peak.iter().all(|&p| p > 0), "{:?}", r.ring_peak);
    assert_eq!(r.callbacks, 1);
    assert_eq!(d.callbacks, vec![(1, TO)]);
}

#[test]
fn a_bad_migration_is_refused_with_the_reason() {
    let t = topo();
    let mut d = Alternate::default();
    type Edit = Box<dyn Fn(&mut MigrationSpec)>;
    let cases: [(Edit, &str); 4] = [
        (
            Box::new(|s| s.sample = Time::ZERO),
            "sampling period must be > 0",
        ),
        (
            Box::new(|s| s.mv.to_socket = 2),
            "cannot move to socket 2: the host has 2",
        ),
        (
            Box::new(|s| s.mv.to_queue = FROM),
            "the new core's queue must differ",
        ),
        (
            Box::new(|s| s.mv.to_queue.node = 5),
            "receive queue 1's ring cannot be on node 5",
        ),
    ];
    for (edit, msg) in cases {
        let (mut c, mut s) = hosts(&t);
        let mut sp = spec(Time::from_us(100));
        edit(&mut sp);
        let e = migration::run(&mut c, &mut s, sp, &mut d).unwrap_err();
        assert!(e.contains(msg), "`{msg}` in: {e}");
    }
    let (mut c, mut s) = hosts(&t);
    s.lro = true;
    let e = migration::run(&mut c, &mut s, spec(Time::from_us(100)), &mut d).unwrap_err();
    assert!(e.contains("cannot use hardware LRO"), "{e}");
}
