//! Property tests of the ladder queue against a sorted reference: pops come out in
//! nondecreasing time, FIFO among equal times, over random interleavings of pushes and
//! pops with many equal timestamps, clusters, huge jumps and pushes into the past.

use std::collections::BTreeMap;

use proptest::prelude::*;
use sim::{Queue, Time};

#[derive(Clone, Debug)]
enum Op {
    /// Push at an absolute time.
    At(u64),
    /// Push at the last popped time plus a delta (the engine's usual pattern).
    After(u64),
    Pop,
    Peek,
}

/// Absolute times: a handful of values (many ties), a narrow cluster, anything.
fn abs_time() -> impl Strategy<Value = u64> {
    prop_oneof![
        3 => 0u64..4,
        3 => 1_000u64..1_100,
        2 => any::<u64>(),
        1 => Just(u64::MAX),
        1 => (0u32..64).prop_map(|s| 1u64 << s),
    ]
}

/// Deltas after the last pop: zero (same time), small, PHOLD-like, huge.
fn delta() -> impl Strategy<Value = u64> {
    prop_oneof![
        3 => Just(0u64),
        3 => 0u64..16,
        3 => 100_000u64..5_000_000,
        1 => any::<u64>(),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => abs_time().prop_map(Op::At),
        4 => delta().prop_map(Op::After),
        4 => Just(Op::Pop),
        1 => Just(Op::Peek),
    ]
}

/// Run `ops` on the queue and on a BTreeMap keyed by (time, sequence), comparing every
/// observation. `monotone` drops absolute pushes before the last pop (engine usage).
fn check(ops: &[Op], monotone: bool) -> Result<(), TestCaseError> {
    let mut q: Queue<u64> = Queue::new();
    let mut reference: BTreeMap<(u64, u64), u64> = BTreeMap::new();
    let mut seq = 0u64;
    let mut now = 0u64;
    for op in ops {
        match *op {
            Op::At(t) | Op::After(t) => {
                let t = match *op {
                    Op::After(_) => now.saturating_add(t),
                    _ => t,
                };
                if monotone && t < now {
                    continue;
                }
                q.push(Time::from_ps(t), seq);
                reference.insert((t, seq), seq);
                seq += 1;
            }
            Op::Pop => {
                let want = reference.pop_first().map(|((t, _), id)| (t, id));
                let got = q.pop().map(|(t, id)| (t.as_ps(), id));
                prop_assert_eq!(got, want);
                if let Some((t, _)) = got {
                    now = t;
                }
            }
            Op::Peek => {
                let want = reference.first_key_value().map(|((t, _), _)| *t);
                prop_assert_eq!(q.peek_time().map(Time::as_ps), want);
            }
        }
        prop_assert_eq!(q.len(), reference.len());
    }
    // Drain the rest.
    while let Some(((t, _), id)) = reference.pop_first() {
        prop_assert_eq!(q.pop().map(|(t, id)| (t.as_ps(), id)), Some((t, id)));
    }
    prop_assert_eq!(q.pop().map(|(t, id)| (t.as_ps(), id)), None);
    prop_assert!(q.is_empty());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn matches_sorted_reference(ops in prop::collection::vec(op(), 0..400)) {
        check(&ops, false)?;
    }

    #[test]
    fn matches_sorted_reference_monotone(ops in prop::collection::vec(op(), 0..400)) {
        check(&ops, true)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Long runs with few pops, so buckets overflow and finer rungs are spawned.
    #[test]
    fn matches_sorted_reference_bulk(
        ops in prop::collection::vec(
            prop_oneof![
                6 => abs_time().prop_map(Op::At),
                3 => delta().prop_map(Op::After),
                2 => Just(Op::Pop),
            ],
            500..3000,
        )
    ) {
        check(&ops, false)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// A far horizon, then short hops that outnumber pops (a network under a run's
    /// horizon): nearly every push lands in the bucket being consumed, so bottom grows
    /// past its limit and is spread over finer rungs while it drains.
    #[test]
    fn matches_sorted_reference_under_a_far_horizon(
        ops in prop::collection::vec(
            prop_oneof![
                5 => (0u64..5_000).prop_map(Op::After),
                1 => Just(Op::After(0)),
                3 => Just(Op::Pop),
                1 => Just(Op::Peek),
            ],
            300..3000,
        )
    ) {
        let mut all = vec![Op::At(1 << 40), Op::After(1), Op::Pop];
        all.extend(ops);
        check(&all, true)?;
    }
}

/// A cluster plus one far outlier: rung 0 is so coarse that the cluster lands in one
/// bucket, which must be split over several finer rungs.
#[test]
fn cluster_with_outlier_spawns_rungs() {
    let mut q = Queue::new();
    let mut want = Vec::new();
    for i in 0..5_000u64 {
        let t = (i * 7_919) % 4_096;
        q.push(Time::from_ps(t), i);
        want.push((t, i));
    }
    q.push(Time::from_ps(1 << 60), 9_999_999);
    want.push((1 << 60, 9_999_999));
    want.sort();
    let got: Vec<(u64, u64)> =
        std::iter::from_fn(|| q.pop().map(|(t, i)| (t.as_ps(), i))).collect();
    assert_eq!(got, want);
}

/// A cluster with ties that exactly one finer rung separates: rung 0's buckets are
/// 2,048 ps wide (2,001 events over 2^22 ps) and the 2,000 cluster events, over
/// 1,024 distinct times, fill its first bucket; the finer rung has 1 ps buckets.
/// Checks that spreading a bucket keeps FIFO order among ties.
#[test]
fn one_spawned_rung_keeps_ties_fifo() {
    let mut q = Queue::new();
    let mut want = Vec::new();
    for i in 0..2_000u64 {
        let t = (i * 7_919) % 1_024;
        q.push(Time::from_ps(t), i);
        want.push((t, i));
    }
    q.push(Time::from_ps(1 << 22), 2_000);
    want.push((1 << 22, 2_000));
    want.sort();
    let got: Vec<(u64, u64)> =
        std::iter::from_fn(|| q.pop().map(|(t, i)| (t.as_ps(), i))).collect();
    assert_eq!(got, want);
}

/// A flood of events at one time, each scheduling a follow-up at the same time: FIFO
/// throughout (and no quadratic blow-up, though nothing here times it).
#[test]
fn equal_time_flood_with_follow_ups() {
    let mut q = Queue::new();
    let n = 20_000u64;
    for i in 0..n {
        q.push(Time::from_ps(5), i);
    }
    let mut next = n;
    for i in 0..2 * n {
        let (t, id) = q.pop().unwrap();
        assert_eq!((t.as_ps(), id), (5, i));
        if i < n {
            q.push(Time::from_ps(5), next);
            next += 1;
        }
    }
    assert!(q.is_empty());
}

/// Non-Copy payloads move through the queue intact.
#[test]
fn owned_payloads() {
    let mut q: Queue<String> = Queue::new();
    for i in (0..200u64).rev() {
        q.push(Time::from_ns(i % 10), format!("e{i}"));
    }
    let mut last = Time::ZERO;
    let mut n = 0;
    while let Some((t, s)) = q.pop() {
        assert!(t >= last);
        assert!(s.starts_with('e'));
        last = t;
        n += 1;
    }
    assert_eq!(n, 200);
}
