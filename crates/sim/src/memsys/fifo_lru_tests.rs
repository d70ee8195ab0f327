//! `Fifo` and `Lru` against the behaviour that matters, and against straightforward
//! reference versions (the earlier `BTreeMap` ones) over random operation sequences: the
//! fast structures must place, merge, forget and evict exactly as they did.

use std::collections::BTreeMap;

use proptest::prelude::*;
use rustc_hash::FxHashMap;

use super::fifo::{HORIZON, SLIVER};
use super::{Fifo, Lru};
use crate::time::Time;

/// The reference server: busy intervals in a `BTreeMap`, searched, merged and pruned
/// on every reservation.
struct RefFifo {
    busy: BTreeMap<Time, Time>,
    forgotten: Time,
}

impl RefFifo {
    fn reserve(&mut self, at: Time, dur: Time) -> Time {
        let mut t = at.max(self.forgotten);
        if let Some((_, &e)) = self.busy.range(..=t).next_back() {
            t = t.max(e);
        }
        while let Some((&s, &e)) = self.busy.range(t..).next() {
            if s >= t + dur {
                break;
            }
            t = e;
        }
        let mut start = t;
        let mut end = t + dur;
        if let Some((&s, &e)) = self.busy.range(..=start).next_back() {
            if e + SLIVER >= start {
                self.busy.remove(&s);
                start = s;
            }
        }
        while let Some((&s, &e)) = self.busy.range(start..).next() {
            if s > end + SLIVER {
                break;
            }
            self.busy.remove(&s);
            end = end.max(e);
        }
        self.busy.insert(start, end);
        while let Some((&s, &e)) = self.busy.iter().next() {
            if e + HORIZON >= at || s == start {
                break;
            }
            self.busy.remove(&s);
            self.forgotten = self.forgotten.max(e);
        }
        t + dur
    }
}

/// The reference LRU: recency order in a `BTreeMap` of stamps.
#[derive(Default)]
struct RefLru {
    cap_lines: u64,
    used: u64,
    stamp: u64,
    map: FxHashMap<u64, (u64, u64, bool, u32)>,
    order: BTreeMap<u64, u64>,
}

impl RefLru {
    fn touch(&mut self, buf: u64) {
        if let Some(e) = self.map.get_mut(&buf) {
            self.order.remove(&e.1);
            self.stamp += 1;
            e.1 = self.stamp;
            self.order.insert(self.stamp, buf);
        }
    }

    fn remove(&mut self, buf: u64) -> Option<(u64, bool)> {
        let (lines, stamp, dirty, _) = self.map.remove(&buf)?;
        self.order.remove(&stamp);
        self.used -= lines;
        Some((lines, dirty))
    }

    fn insert(&mut self, buf: u64, lines: u64, dirty: bool, home: u32, written_back: &mut [u64]) {
        let was_dirty = self.remove(buf).is_some_and(|(_, d)| d);
        let lines = lines.min(self.cap_lines);
        while self.used + lines > self.cap_lines {
            let Some((_, &old)) = self.order.iter().next() else {
                break;
            };
            if let Some(&(l, _, d, h)) = self.map.get(&old) {
                self.remove(old);
                if d {
                    written_back[h as usize] += l;
                }
            }
        }
        self.stamp += 1;
        self.map
            .insert(buf, (lines, self.stamp, dirty || was_dirty, home));
        self.order.insert(self.stamp, buf);
        self.used += lines;
    }
}

/// 1 GB/s: one byte a nanosecond.
fn server() -> Fifo {
    Fifo::new(1.0)
}

fn intervals(f: &Fifo) -> Vec<(Time, Time)> {
    f.busy.iter().copied().collect()
}

#[test]
fn an_early_reservation_takes_the_first_gap_that_holds_it() {
    let mut f = server();
    // Busy [100, 200) and [250, 350) and [600, 700) ns: gaps of 50 and 250 ns.
    f.reserve(Time::from_ns(100), 100);
    f.reserve(Time::from_ns(250), 100);
    f.reserve(Time::from_ns(600), 100);
    // 120 ns arriving at 150 does not fit before 250, nor in [200, 250): it starts at 350.
    assert_eq!(f.reserve(Time::from_ns(150), 120), Time::from_ns(470));
    // 40 ns arriving at 0 fits before the first interval.
    assert_eq!(f.reserve(Time::ZERO, 40), Time::from_ns(40));
    // 200 ns arriving at 0 fits nowhere before 700.
    assert_eq!(f.reserve(Time::ZERO, 200), Time::from_ns(900));
}

#[test]
fn touching_and_sliver_close_intervals_merge_and_wider_gaps_stay() {
    let mut f = server();
    f.reserve(Time::ZERO, 100);
    f.reserve(Time::from_ns(100), 100); // touches [0, 100)
    assert_eq!(intervals(&f), [(Time::ZERO, Time::from_ns(200))]);
    // A gap shorter than SLIVER is not kept…
    let near = Time::from_ns(200) + SLIVER - Time::from_ps(1);
    f.reserve(near, 100);
    assert_eq!(intervals(&f), [(Time::ZERO, near + Time::from_ns(100))]);
    // …a wider one is.
    let far = near + Time::from_ns(100) + SLIVER + Time::from_ps(1);
    f.reserve(far, 100);
    assert_eq!(f.busy.len(), 2);
    // Filling the gap between two intervals leaves one.
    let mut g = server();
    g.reserve(Time::ZERO, 100);
    g.reserve(Time::from_ns(300), 100);
    assert_eq!(g.reserve(Time::from_ns(100), 200), Time::from_ns(300));
    assert_eq!(intervals(&g), [(Time::ZERO, Time::from_ns(400))]);
}

#[test]
fn a_reservation_older_than_the_horizon_waits_behind_the_forgotten_work() {
    let mut f = server();
    f.reserve(Time::ZERO, 1000); // [0, 1 µs)
    f.reserve(Time::from_us(5), 1000); // [5, 6 µs)
    let far = HORIZON + Time::from_us(7);
    f.reserve(far, 1000);
    assert_eq!(
        f.forgotten,
        Time::from_us(6),
        "both early intervals forgotten"
    );
    assert_eq!(f.busy.len(), 1);
    // The gap [1, 5 µs) is gone: an arrival at 0 starts after the forgotten end.
    assert_eq!(f.reserve(Time::ZERO, 1000), Time::from_us(7));
}

#[test]
fn lru_evicts_the_least_recently_touched_and_sends_dirty_lines_home() {
    let mut l = Lru::new(30);
    let mut wb = [0u64; 2];
    l.insert(1, 10, true, 1, &mut wb); // dirty, homed on node 1
    l.insert(2, 10, true, 0, &mut wb); // dirty, homed on node 0
    l.insert(3, 10, false, 0, &mut wb); // clean
    l.touch(1);
    // Needs 10 lines: 2 is now the least recently touched.
    l.insert(4, 10, true, 0, &mut wb);
    assert!(!l.contains(2) && l.contains(1) && l.contains(3));
    assert_eq!(wb, [10, 0]);
    // Needs 20 more: 3 (clean) then 1 (dirty, node 1).
    l.insert(5, 20, false, 0, &mut wb);
    assert!(!l.contains(3) && !l.contains(1) && l.contains(4) && l.contains(5));
    assert_eq!(wb, [10, 10]);
    // A buffer removed (a dirty one) is neither evicted again nor written back: room
    // for 6 comes from 5, the oldest still held.
    l.remove(4);
    l.insert(6, 20, false, 0, &mut wb);
    assert!(!l.contains(5) && l.contains(6));
    assert_eq!(wb, [10, 10]);
    assert_eq!(l.used, 20);
}

#[test]
fn lru_refresh_keeps_a_dirty_buffer_dirty() {
    let mut l = Lru::new(10);
    let mut wb = [0u64; 1];
    l.insert(1, 5, true, 0, &mut wb);
    l.insert(1, 5, false, 0, &mut wb); // a clean refill of a dirty buffer
    l.insert(2, 10, false, 0, &mut wb);
    assert_eq!(wb, [5]);
}

/// Arrival steps in whole nanoseconds (so gaps of exactly SLIVER occur): mostly forward
/// by up to 2 µs or a few ns, sometimes back by up to 50 µs, rarely back past the
/// horizon; each with a size up to a few packets.
fn arrivals() -> impl Strategy<Value = Vec<(i64, u64)>> {
    let step = prop_oneof![
        6 => 0i64..2000,
        3 => 0i64..40,
        2 => -50_000i64..0,
        1 => -30_000_000i64..-20_000_000,
    ];
    prop::collection::vec((step, 1u64..3000), 1..300)
}

/// Whole-nanosecond services at 1 and 4 GB/s (durations that line up with the
/// arrivals), any other bandwidth besides.
fn bandwidths() -> impl Strategy<Value = f64> {
    prop_oneof![Just(1.0), Just(4.0), 0.5f64..50.0]
}

#[derive(Clone, Debug)]
enum LruOp {
    Insert(u64, u64, bool, u32),
    Touch(u64),
    Remove(u64),
}

fn lru_ops() -> impl Strategy<Value = Vec<LruOp>> {
    let op = prop_oneof![
        3 => (0u64..40, 1u64..40, any::<bool>(), 0u32..3)
            .prop_map(|(b, n, d, h)| LruOp::Insert(b, n, d, h)),
        2 => (0u64..40).prop_map(LruOp::Touch),
        1 => (0u64..40).prop_map(LruOp::Remove),
    ];
    prop::collection::vec(op, 1..400)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Same completions, intervals and forgotten end as the reference, at any order of
    /// arrivals, sizes and shares.
    #[test]
    fn fifo_matches_the_reference(steps in arrivals(), gbps in bandwidths()) {
        let mut f = Fifo::new(gbps);
        let mut r = RefFifo { busy: BTreeMap::new(), forgotten: Time::ZERO };
        let mut now = 0u64;
        for (step, bytes) in steps {
            now = now.saturating_add_signed(step);
            let at = Time::from_ns(now);
            let dur = f.duration(bytes);
            prop_assert_eq!(f.reserve(at, bytes), r.reserve(at, dur));
            prop_assert_eq!(intervals(&f), r.busy.iter().map(|(&s, &e)| (s, e)).collect::<Vec<_>>());
            prop_assert_eq!(f.forgotten, r.forgotten);
        }
    }

    /// A server told the time before each arrival (`forget_before`) places every
    /// reservation where one that remembers everything does, with a short list.
    #[test]
    fn forgetting_the_past_changes_no_placement(steps in arrivals(), gbps in bandwidths()) {
        let (mut f, mut all) = (Fifo::new(gbps), Fifo::new(gbps));
        let (mut now, mut floor) = (0u64, 0u64);
        for (step, bytes) in steps {
            now = now.saturating_add_signed(step);
            // The clock never runs back; an arrival behind it is a later reservation
            // of work that arrived at the clock's time.
            floor = floor.max(now.saturating_sub(60_000));
            f.forget_before(Time::from_ns(floor));
            let at = Time::from_ns(now.max(floor));
            prop_assert_eq!(f.reserve(at, bytes), all.reserve(at, bytes));
            let kept = intervals(&f);
            let tail = &intervals(&all)[intervals(&all).len() - kept.len()..];
            prop_assert_eq!(kept.as_slice(), tail);
            prop_assert!(kept.iter().all(|&(_, e)| e + SLIVER >= Time::from_ns(floor)));
        }
        prop_assert_eq!(f.late(), 0);
    }

    /// Same contents, occupancy and write-backs per home as the reference.
    #[test]
    fn lru_matches_the_reference(ops in lru_ops(), cap in 1u64..200) {
        let mut l = Lru::new(cap);
        let mut r = RefLru { cap_lines: cap, ..RefLru::default() };
        let (mut wl, mut wr) = ([0u64; 3], [0u64; 3]);
        for op in ops {
            match op {
                LruOp::Insert(b, n, d, h) => {
                    // An absent buffer both ways (eviction leaves stale map entries
                    // that `insert_absent` must not trip over).
                    if l.contains(b) {
                        l.insert(b, n, d, h, &mut wl);
                    } else {
                        l.insert_absent(b, n, d, h, &mut wl);
                    }
                    r.insert(b, n, d, h, &mut wr);
                }
                LruOp::Touch(b) => {
                    l.touch(b);
                    r.touch(b);
                }
                LruOp::Remove(b) => prop_assert_eq!(l.remove(b), r.remove(b)),
            }
            prop_assert_eq!(wl, wr);
            prop_assert_eq!(l.used, r.used);
            for b in 0..40 {
                prop_assert_eq!(l.contains(b), r.map.contains_key(&b));
            }
        }
    }
}
