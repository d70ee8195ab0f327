//! TLP trains (`Net::send_write_train`) against the same TLPs sent one by one: on a route
//! where nothing else interleaves, the train's last byte lands when the last TLP would,
//! and the wires count the same TLPs and bytes; a receiver with fewer credits than the
//! train has TLPs refuses it.

use sim::net::{Delivery, Event, Hop, Issue, Net, Notice};
use sim::pcie;
use sim::Time;

/// A device on a x4 link into a switch, a slower x4 cable (an NTB's), then a x8 into the
/// root and DRAM: a slower wire behind a faster one and one ahead of it, credited
/// receivers, switch and NTB delays, as a lender's controller writing to a borrower.
fn route(credits: u16) -> (Net, u32) {
    let mut net = Net::new(1);
    let c = [credits; 3];
    let (a, _) = net.add_link("dev", pcie::ps_per_kib(3, 4), Time::from_ns(4), c, true);
    let (b, _) = net.add_link("cable", pcie::ps_per_kib(2, 4), Time::from_ns(10), c, true);
    let (d, _) = net.add_link("root", pcie::ps_per_kib(3, 8), Time::from_ns(4), c, true);
    let mem = net.add_sink("dram", 10.0, Time::from_ns(80), Time::from_ns(60), 64);
    let r = net.add_route(vec![
        Hop::Wire(a),
        Hop::Delay(Time::from_ns(150)),
        Hop::Wire(b),
        Hop::Delay(Time::from_ns(100)),
        Hop::Wire(d),
        Hop::Delay(Time::from_ns(50)),
        Hop::Sink(mem, false),
    ]);
    (net, r)
}

/// Runs the network dry: (bytes landed, when the last write landed).
fn landings(net: &mut Net) -> (u64, Time) {
    let (mut bytes, mut last) = (0, Time::ZERO);
    while let Some(n) = net.next_notice(Time::MAX) {
        if let Notice::To(_, Event::Delivery(Delivery::WriteDone { bytes: b, .. })) = n {
            bytes += b as u64;
            last = net.now();
        }
    }
    (bytes, last)
}

fn write(route: u32, at: u64, bytes: u32) -> Issue {
    Issue::new(route, 0, 0, bytes, at)
}

#[test]
fn a_train_lands_when_its_last_tlp_would_and_counts_the_same_tlps() {
    // 4 KiB in 256 B TLPs, and 1000 B in 256 B TLPs (a short last TLP).
    for total in [4096u32, 1000] {
        let (mut one, r) = route(32);
        for k in 0..total.div_ceil(256) {
            let n = (total - k * 256).min(256);
            one.send_write(write(r, k as u64 * 256, n));
        }
        let (b1, t1) = landings(&mut one);
        let (mut train, r) = route(32);
        assert!(train.send_write_train(write(r, 0, total), 256));
        let (b2, t2) = landings(&mut train);
        assert_eq!((b1, b2), (total as u64, total as u64));
        // Serialization rounds to the picosecond per TLP one way, per train the other.
        let diff = t1.as_ps().abs_diff(t2.as_ps());
        assert!(diff <= 16, "{total} B: TLP by TLP {t1}, train {t2}");
        assert_eq!(one.counters(), train.counters(), "{total} B");
    }
}

#[test]
fn a_train_behind_another_waits_its_turn_and_trains_can_be_turned_off() {
    // Two 4 KiB writes back to back: the second train queues behind the first at the
    // first wire, as its TLPs would behind the first's.
    let (mut one, r) = route(32);
    for k in 0..32u64 {
        one.send_write(write(r, k * 256, 256));
    }
    let (_, t1) = landings(&mut one);
    let (mut train, r) = route(32);
    assert!(train.send_write_train(write(r, 0, 4096), 256));
    assert!(train.send_write_train(write(r, 4096, 4096), 256));
    let (b2, t2) = landings(&mut train);
    assert_eq!(b2, 8192);
    assert!(t1.as_ps().abs_diff(t2.as_ps()) <= 32, "{t1} vs {t2}");
    train.set_trains(false);
    assert!(!train.send_write_train(write(r, 0, 4096), 256));
}

#[test]
fn a_receiver_with_fewer_credits_than_the_train_refuses_it() {
    let (mut net, r) = route(8);
    assert!(
        !net.send_write_train(write(r, 0, 4096), 256),
        "16 TLPs, 8 credits"
    );
    assert!(net.send_write_train(write(r, 0, 2048), 256), "8 TLPs fit");
    assert_eq!(landings(&mut net).0, 2048);
}
