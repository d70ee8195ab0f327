//! The pending-event set: [`Queue`], a ladder queue with power-of-two bucket widths.
//!
//! Structure (after Tang, Goh & Thng, "Ladder queue", ACM TOMACS 2005), from the far
//! future to the present:
//!
//! * **top** — an unsorted vector of far-future events, with its min and max time;
//! * **rungs** — arrays of buckets. Rung 0 is built from the whole of top when
//!   everything below has drained; rung *i + 1* re-spreads one over-full bucket of rung
//!   *i* into finer buckets. Bucket widths are powers of two, so a bucket index is a
//!   shift (`t >> shift`), never a division;
//! * **bottom** — a short deque of (time, node) pairs for the earliest events, sorted
//!   latest first and popped from the back. A deque, so that a flood of events at
//!   one time (each inserted in front of its equals) costs O(1) per insertion.
//!   Payloads stay in their nodes until popped, so sorting moves 16-byte pairs
//!   whatever the event type.
//!
//! A bucket is a singly linked list threaded through one node arena (`u32` links,
//! new events at the head), and nodes freed by `pop` are reused last-in first-out. So
//! a push writes the node that the last pop just freed (still in L1), a bucket costs
//! 4 bytes of head pointer, and a 1,000-event pending set fits in a few tens of KiB.
//! A vector per bucket was measured slower: one small heap buffer per bucket spreads
//! the working set over hundreds of cache lines.
//!
//! In a hold model (pop one, push one later, as in PHOLD) every event is touched a
//! constant number of times on average: linked into a bucket (or appended to top and
//! moved into a bucket once), then its (time, node) pair is sorted into bottom among
//! a handful of others. That is what makes it beat a binary heap's O(log n) sifts
//! (measured in `benches/phold.rs`: about 2x at 1,000 pending events, 3x at 100,000).
//!
//! **Determinism.** Events with equal time pop in insertion order (FIFO). This holds
//! without storing a sequence number because (1) at any moment the containers partition
//! the time line, so two events with the same time always live in the same container;
//! (2) every container keeps a known insertion order: top in order, bucket lists in
//! reverse order (head insertion), and a container is only ever filled, in that order,
//! from one other container while it is empty; (3) the sort of a bucket moving to
//! bottom is stable, and insertion into bottom goes after every event with the same
//! time (in pop order).
//!
//! **Any insertion order is correct.** An event earlier than everything left in the
//! rungs goes into bottom by sorted insertion, so the queue is a general priority
//! queue; it is just fastest when insertions are not earlier than the last pop, which
//! the engine guarantees.

use std::collections::VecDeque;

use crate::time::Time;

/// A bucket with more events than this is spread over a finer rung instead of being
/// sorted into bottom (if its events do not all share one time).
const SPAWN_THRESHOLD: usize = 48;

/// A bottom grown by insertions past this many events is spread over a finer rung
/// (assumption: above `SPAWN_THRESHOLD`, so that a bucket just sorted into bottom is not
/// spread again at once; sorted insertion into a deque of this size is still cheap).
const BOTTOM_SPAWN: usize = 96;

/// Deepest ladder. Each finer rung divides the bucket width by at least 2^6 (the
/// threshold above), so 64-bit times need at most 11 rungs below rung 0; past this
/// depth a bucket is sorted instead, which is still correct.
const MAX_RUNGS: usize = 16;

/// Rung 0 gets about this many buckets per event it is built from (measured on PHOLD;
/// see `benches/phold.rs`).
const RUNG0_BUCKETS_PER_EVENT: u64 = 2;

/// End of a list.
const NIL: u32 = u32::MAX;

/// One pending event in top. The payload is stored inline: no boxing, no per-event
/// allocation.
struct Entry<E> {
    t: u64,
    e: E,
}

/// One event in bottom: its time and its node.
#[derive(Clone, Copy)]
struct Ref {
    t: u64,
    node: u32,
}

/// One event in a bucket list or in bottom, or a free node (`e == None`) in the free
/// list.
struct Node<E> {
    t: u64,
    next: u32,
    e: Option<E>,
}

/// One rung: `nb` buckets of width `1 << shift` ps; bucket `i` holds the events whose
/// time has `t >> shift == base + i`.
struct Rung {
    base: u64,
    shift: u32,
    /// First bucket not yet consumed; buckets before it are empty and their time range
    /// now belongs to the finer rungs or to bottom.
    cur: usize,
    nb: usize,
    count: usize,
    /// List heads. May be longer than `nb` (kept from earlier use); heads past `nb`,
    /// like all heads of an exhausted rung, are `NIL`.
    heads: Vec<u32>,
}

impl Rung {
    fn new() -> Self {
        Rung {
            base: 0,
            shift: 0,
            cur: 0,
            nb: 0,
            count: 0,
            heads: Vec::new(),
        }
    }

    /// Make this (empty) rung ready to hold `nb` buckets starting at `base`.
    fn reset(&mut self, base: u64, shift: u32, nb: usize) {
        debug_assert_eq!(self.count, 0);
        self.base = base;
        self.shift = shift;
        self.cur = 0;
        self.nb = nb;
        if self.heads.len() < nb {
            self.heads.resize(nb, NIL);
        }
    }
}

/// A priority queue of events keyed by [`Time`], earliest first, FIFO among equal
/// times. See the module documentation for the structure and why it is deterministic.
pub struct Queue<E> {
    /// Sorted by time, latest first; among equal times, latest inserted first. So
    /// `pop()` from the end yields the earliest, first inserted.
    bottom: VecDeque<Ref>,
    /// Rung pool; `rungs[..active]` are in use, coarsest first. Rungs past `active`
    /// are kept for their allocations.
    rungs: Vec<Rung>,
    active: usize,
    /// Arena of bucket-list nodes; `free` heads the list of unused ones.
    nodes: Vec<Node<E>>,
    free: u32,
    top: Vec<Entry<E>>,
    top_min: u64,
    top_max: u64,
    len: usize,
}

impl<E> Default for Queue<E> {
    fn default() -> Self {
        Self::new()
    }
}

/// Number of significant bits of `x` (0 for 0).
#[inline]
fn bits(x: u64) -> u32 {
    u64::BITS - x.leading_zeros()
}

/// Take a free node (or grow the arena) holding `t, e`, linked in front of `next`.
#[inline]
fn alloc_node<E>(nodes: &mut Vec<Node<E>>, free: &mut u32, t: u64, e: E, next: u32) -> u32 {
    if *free != NIL {
        let i = *free;
        let n = &mut nodes[i as usize];
        *free = n.next;
        n.t = t;
        n.next = next;
        n.e = Some(e);
        i
    } else {
        let i = nodes.len();
        // 2^32 - 1 events pending in rungs would need well over 64 GiB.
        assert!(i < NIL as usize, "more than 2^32 - 1 pending events");
        nodes.push(Node {
            t,
            next,
            e: Some(e),
        });
        i as u32
    }
}

impl<E> Queue<E> {
    /// An empty queue.
    pub fn new() -> Self {
        Self::with_capacity(0)
    }

    /// An empty queue expecting about `n` pending events at a time.
    pub fn with_capacity(n: usize) -> Self {
        Queue {
            bottom: VecDeque::new(),
            rungs: Vec::new(),
            active: 0,
            nodes: Vec::with_capacity(n),
            free: NIL,
            top: Vec::with_capacity(n),
            top_min: u64::MAX,
            top_max: 0,
            len: 0,
        }
    }

    /// Number of pending events.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no event is pending.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Add an event at time `t`. It pops after every pending event with a time less
    /// than or equal to `t`.
    #[inline]
    pub fn push(&mut self, t: Time, e: E) {
        let t = t.as_ps();
        self.len += 1;
        if self.active == 0 {
            self.push_top(t, e);
            return;
        }
        // Finest rung first: most events land a short way ahead, in the finest rung or
        // bottom. Each finer rung spans exactly the coarser one's bucket before its
        // first unconsumed one, so an event past a rung's end belongs to a coarser rung,
        // and one before the finest rung's first unconsumed bucket to bottom.
        for r in self.rungs[..self.active].iter_mut().rev() {
            let idx = t >> r.shift;
            // `idx < base + cur`, written so that it cannot overflow.
            let rel = idx.wrapping_sub(r.base);
            if idx < r.base || rel < r.cur as u64 {
                // Earlier than every unconsumed bucket: bottom's range.
                self.push_bottom(t, e);
                return;
            }
            if rel < r.nb as u64 {
                let head = &mut r.heads[rel as usize];
                *head = alloc_node(&mut self.nodes, &mut self.free, t, e, *head);
                r.count += 1;
                return;
            }
        }
        // Past the end of rung 0: top.
        self.push_top(t, e);
    }

    fn push_top(&mut self, t: u64, e: E) {
        self.top_min = self.top_min.min(t);
        self.top_max = self.top_max.max(t);
        self.top.push(Entry { t, e });
    }

    /// Sorted insertion, popped after every event at the same time (FIFO). A bottom
    /// that grows past `BOTTOM_SPAWN` (a model whose events mostly land inside the bucket
    /// being consumed: nanosecond hops under a rung sized by a millisecond horizon) is
    /// spread over a finer rung, as an over-full bucket is, so insertion stays short.
    fn push_bottom(&mut self, t: u64, e: E) {
        let node = alloc_node(&mut self.nodes, &mut self.free, t, e, NIL);
        let at = self.bottom.partition_point(|x| x.t > t);
        self.bottom.insert(at, Ref { t, node });
        if self.bottom.len() > BOTTOM_SPAWN && self.active > 0 && self.active < MAX_RUNGS {
            let level = self.active - 1;
            let r = &self.rungs[level];
            let (lo, hi) = (self.bottom[self.bottom.len() - 1].t, self.bottom[0].t);
            // Only when bottom is exactly the bucket last consumed (an event pushed
            // before that bucket's start, after a peek, stays in a sorted bottom).
            if r.cur > 0 && r.shift > 0 && lo != hi && lo >> r.shift == r.base + r.cur as u64 - 1 {
                let b = r.cur - 1;
                self.spawn(level, b);
            }
        }
    }

    /// Remove and return the earliest event (the first inserted among equals).
    #[inline]
    pub fn pop(&mut self) -> Option<(Time, E)> {
        if self.bottom.is_empty() && !self.refill() {
            return None;
        }
        let Ref { t, node } = self.bottom.pop_back()?;
        let n = &mut self.nodes[node as usize];
        let e = n.e.take()?;
        // Freed last, reused first: the next push writes this (cached) node.
        n.next = self.free;
        self.free = node;
        self.len -= 1;
        Some((Time::from_ps(t), e))
    }

    /// Time of the earliest event, without removing it. Takes `&mut self` because it
    /// may move events down the ladder (no observable change).
    pub fn peek_time(&mut self) -> Option<Time> {
        if self.bottom.is_empty() && !self.refill() {
            return None;
        }
        self.bottom.back().map(|x| Time::from_ps(x.t))
    }

    /// Drop every pending event (keeps allocations).
    pub fn clear(&mut self) {
        self.bottom.clear();
        self.top.clear();
        self.top_min = u64::MAX;
        self.top_max = 0;
        self.nodes.clear();
        self.free = NIL;
        for r in &mut self.rungs {
            r.heads.fill(NIL);
            r.count = 0;
        }
        self.active = 0;
        self.len = 0;
    }

    /// Fill the (empty) bottom with the earliest bucket. Returns false if the queue is
    /// empty.
    #[inline(never)]
    fn refill(&mut self) -> bool {
        debug_assert!(self.bottom.is_empty());
        loop {
            if self.active == 0 {
                if self.top.is_empty() {
                    return false;
                }
                self.build_rung0();
            }
            let level = self.active - 1;
            let r = &mut self.rungs[level];
            if r.count == 0 {
                // Exhausted: its range now belongs to bottom (empty) or, for rung 0,
                // to a new rung 0 built from top.
                self.active = level;
                continue;
            }
            while r.heads[r.cur] == NIL {
                r.cur += 1;
            }
            let b = r.cur;
            r.cur += 1;
            // Move the list into bottom, so in reverse insertion order.
            let mut i = std::mem::replace(&mut r.heads[b], NIL);
            while i != NIL {
                let n = &self.nodes[i as usize];
                self.bottom.push_back(Ref { t: n.t, node: i });
                i = n.next;
            }
            let k = self.bottom.len();
            r.count -= k;
            if k > SPAWN_THRESHOLD && r.shift > 0 && self.active < MAX_RUNGS {
                let t0 = self.bottom[0].t;
                if self.bottom.iter().any(|x| x.t != t0) {
                    self.spawn(level, b);
                    continue;
                }
                // All at one time: no finer rung can separate them.
            }
            sort_for_bottom(self.bottom.make_contiguous());
            return true;
        }
    }

    /// Build rung 0 from all of top.
    fn build_rung0(&mut self) {
        let n = self.top.len() as u64;
        let span = self.top_max - self.top_min;
        let shift = bits(span / (n * RUNG0_BUCKETS_PER_EVENT)).min(u64::BITS - 1);
        let base = self.top_min >> shift;
        let nb = ((self.top_max >> shift) - base + 1) as usize;
        if self.rungs.is_empty() {
            self.rungs.push(Rung::new());
        }
        let r = &mut self.rungs[0];
        r.reset(base, shift, nb);
        // In insertion order, so each list ends up in reverse insertion order.
        for x in self.top.drain(..) {
            let head = &mut r.heads[((x.t >> shift) - base) as usize];
            *head = alloc_node(&mut self.nodes, &mut self.free, x.t, x.e, *head);
        }
        r.count = n as usize;
        self.top_min = u64::MAX;
        self.top_max = 0;
        self.active = 1;
    }

    /// Spread bucket `b` of rung `level` (already consumed and moved into bottom, in
    /// reverse insertion order) over a new finer rung covering exactly that bucket's
    /// time range.
    fn spawn(&mut self, level: usize, b: usize) {
        if self.rungs.len() <= level + 1 {
            self.rungs.push(Rung::new());
        }
        let (coarse, fine) = self.rungs.split_at_mut(level + 1);
        let parent = &coarse[level];
        let k = self.bottom.len() as u64;
        // About one bucket per event: divide the width by the next power of two >= k.
        let split = bits(k - 1).min(parent.shift);
        let shift = parent.shift - split;
        let base = (parent.base + b as u64) << split;
        let child = &mut fine[0];
        child.reset(base, shift, 1usize << split);
        // Oldest first (bottom is newest first), to keep every list's order. The
        // nodes are relinked, not copied.
        while let Some(x) = self.bottom.pop_back() {
            let head = &mut child.heads[((x.t >> shift) - base) as usize];
            self.nodes[x.node as usize].next = *head;
            *head = x.node;
        }
        child.count = k as usize;
        self.active = level + 2;
    }
}

/// Sort a drained bucket (in reverse insertion order) into bottom's order: time
/// descending, and among equal times the later inserted first, which is a stable sort
/// by descending time.
///
/// Buckets hold a handful of events with random times, so a comparison sort's
/// branches mispredict about once per element. Up to 16 events are instead placed by
/// rank, computed with branch-free comparisons of every pair; larger buckets
/// (equal-time floods, or past the deepest rung) use the standard stable sort.
fn sort_for_bottom(v: &mut [Ref]) {
    const SMALL: usize = 16;
    let k = v.len();
    if k > SMALL {
        v.sort_by_key(|x| std::cmp::Reverse(x.t));
        return;
    }
    let mut rank = [0usize; SMALL];
    for i in 1..k {
        for j in 0..i {
            // j is earlier in v (inserted later): it goes first unless i is later.
            let i_first = usize::from(v[i].t > v[j].t);
            rank[j] += i_first;
            rank[i] += 1 - i_first;
        }
    }
    let mut out = [Ref { t: 0, node: 0 }; SMALL];
    for i in 0..k {
        out[rank[i]] = v[i];
    }
    v.copy_from_slice(&out[..k]);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(q: &mut Queue<u32>) -> Vec<(u64, u32)> {
        std::iter::from_fn(|| q.pop().map(|(t, e)| (t.as_ps(), e))).collect()
    }

    #[test]
    fn empty() {
        let mut q: Queue<u32> = Queue::new();
        assert!(q.is_empty());
        assert_eq!(q.pop(), None);
        assert_eq!(q.peek_time(), None);
    }

    #[test]
    fn orders_by_time_then_fifo() {
        let mut q = Queue::new();
        for (i, t) in [5u64, 1, 5, 3, 1, 5, 0].into_iter().enumerate() {
            q.push(Time::from_ps(t), i as u32);
        }
        assert_eq!(q.len(), 7);
        assert_eq!(q.peek_time(), Some(Time::from_ps(0)));
        assert_eq!(
            drain(&mut q),
            vec![(0, 6), (1, 1), (1, 4), (3, 3), (5, 0), (5, 2), (5, 5)]
        );
        assert!(q.is_empty());
    }

    #[test]
    fn many_equal_times_stay_fifo() {
        let mut q = Queue::new();
        for i in 0..10_000u32 {
            q.push(Time::from_ps(42), i);
        }
        // Interleave: pop some, push more at the same time; they go after.
        for i in 0..100u32 {
            assert_eq!(q.pop(), Some((Time::from_ps(42), i)));
        }
        for i in 10_000..10_100u32 {
            q.push(Time::from_ps(42), i);
        }
        let rest: Vec<u32> = drain(&mut q).into_iter().map(|(_, e)| e).collect();
        assert_eq!(rest, (100..10_100).collect::<Vec<_>>());
    }

    #[test]
    fn extreme_times() {
        let mut q = Queue::new();
        let times = [u64::MAX, 0, u64::MAX - 1, 1 << 63, u64::MAX, 7, 1 << 40];
        for (i, &t) in times.iter().enumerate() {
            q.push(Time::from_ps(t), i as u32);
        }
        let mut want: Vec<(u64, u32)> = times
            .iter()
            .enumerate()
            .map(|(i, &t)| (t, i as u32))
            .collect();
        want.sort();
        assert_eq!(drain(&mut q), want);
    }

    #[test]
    fn clear_then_reuse() {
        let mut q = Queue::new();
        for i in 0..1000u32 {
            q.push(Time::from_ps(u64::from(i) * 7919 % 1000), i);
        }
        q.pop();
        q.clear();
        assert!(q.is_empty());
        assert_eq!(q.pop(), None);
        q.push(Time::from_ps(3), 1);
        assert_eq!(q.pop(), Some((Time::from_ps(3), 1)));
    }
}
