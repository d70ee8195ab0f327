//! A bandwidth server (a DRAM node, a link direction) reserved per packet for its
//! bytes, out of time order, in the first gap at or after each arrival.

use std::collections::VecDeque;

use crate::pcie;
use crate::time::Time;

/// A server at a bandwidth, reserved per packet for its bytes. Packet models reserve
/// it out of time order (a completion written after a payload read is priced before the
/// next packet's request), so it keeps its busy intervals and places each reservation
/// in the first gap at or after its arrival: a later packet does not queue behind an
/// earlier packet's future work, and the server never serves two at once.
#[derive(Clone, Debug)]
pub struct Fifo {
    /// Disjoint busy intervals (start, end), sorted, merged when they touch. A deque
    /// because most reservations land at or near the back and forgetting pops the
    /// front; binary search finds the rest.
    pub(super) busy: VecDeque<(Time, Time)>,
    ps_per_kib: u64,
    gbps: f64,
    /// End of the latest forgotten interval: nothing is placed before it, so a
    /// reservation arriving more than `HORIZON` out of order waits (pessimistic) instead
    /// of overbooking the server.
    pub(super) forgotten: Time,
    /// No reservation arrives before this time (`forget_before`).
    floor: Time,
    /// Reservations that arrived before `floor` anyway (a caller's promise broken).
    late: u64,
    /// Bytes served since the last reset of the counters.
    pub bytes: u64,
}

/// Busy intervals ending this long before an arrival are forgotten; a reservation arriving
/// before the last forgotten one's end starts after it (`Fifo::forgotten`), so the
/// server is never overbooked, only pessimistic that far out of order. A backlogged
/// core reserves at its own time, ahead of the event time: 12 memcached instances of
/// `ioctopus.colocation` reach > 1 ms apart (at 1 ms the port carried 140 Gb/s of a 100).
pub(super) const HORIZON: Time = Time::from_us(20000);

/// Gaps shorter than this are not kept (the smallest packet on the fastest link takes
/// longer).
pub(super) const SLIVER: Time = Time::from_ps(1000);

impl Fifo {
    pub fn new(gbps: f64) -> Fifo {
        Fifo {
            busy: VecDeque::new(),
            ps_per_kib: pcie::ps_per_kib_at(gbps),
            gbps,
            forgotten: Time::ZERO,
            floor: Time::ZERO,
            late: 0,
            bytes: 0,
        }
    }

    /// The caller's promise that no reservation arrives before `t` from now on (its
    /// simulation's time): the intervals that end a sliver or more before it can no
    /// longer shape a placement or a merge, so they are dropped. This keeps the list as
    /// short as the reservations are out of order, not `HORIZON` long.
    pub fn forget_before(&mut self, t: Time) {
        self.floor = self.floor.max(t);
        while let Some(&(_, e)) = self.busy.front() {
            if e + SLIVER >= t {
                break;
            }
            self.busy.pop_front();
            self.forgotten = self.forgotten.max(e);
        }
    }

    /// Reservations that arrived before a time promised by `forget_before`.
    pub fn late(&self) -> u64 {
        self.late
    }

    /// The server's full bandwidth, GB/s.
    pub fn gbps(&self) -> f64 {
        self.gbps
    }

    /// Serves this server's own requests at `share_gbps` from now on: the part of the
    /// bandwidth an arbiter leaves them beside background agents (`arbitration`).
    pub fn set_share(&mut self, share_gbps: f64) {
        self.ps_per_kib = pcie::ps_per_kib_at(share_gbps.min(self.gbps));
    }

    /// How much longer `bytes` take at the share left to this server's own requests than
    /// at its full bandwidth: the turns they wait for the background agents.
    pub fn wait(&self, bytes: u64) -> Time {
        let full = pcie::ps_per_kib_at(self.gbps);
        Time::from_ps((bytes * self.ps_per_kib.saturating_sub(full)).div_ceil(1024))
    }

    /// How long `bytes` occupy the server (at the share left to its own requests).
    pub fn duration(&self, bytes: u64) -> Time {
        Time::from_ps((bytes * self.ps_per_kib).div_ceil(1024))
    }

    /// Keeps the server idle over [`from`, `until`) wherever it is not already busy
    /// (its link partner paused it): nothing is placed there afterwards.
    pub fn pause(&mut self, from: Time, until: Time) {
        if until <= from {
            return;
        }
        let lo = self.count_from_back(|&(_, e)| e + SLIVER < from);
        let hi = self.count_from_back(|&(s, _)| s <= until + SLIVER);
        if lo >= hi {
            self.busy.insert(lo, (from, until));
            return;
        }
        let start = from.min(self.busy[lo].0);
        let end = until.max(self.busy[hi - 1].1);
        self.busy[lo] = (start, end);
        self.busy.drain(lo + 1..hi);
    }

    /// Reserves the server for `bytes` arriving at `at`; when they are through.
    pub fn reserve(&mut self, at: Time, bytes: u64) -> Time {
        let dur = self.duration(bytes);
        self.bytes += bytes;
        self.late += u64::from(at < self.floor);
        let (t, i) = self.first_gap(at.max(self.forgotten), dur);
        let mut start = t;
        let mut end = t + dur;
        // Merge with neighbours closer than SLIVER: a gap too short for any packet would
        // only lengthen every later search. The new interval replaces busy[lo..hi].
        let mut hi = self.walk_to(i, |&(s, _)| s <= start);
        let mut lo = hi;
        if lo > 0 && self.busy[lo - 1].1 + SLIVER >= start {
            lo -= 1;
            start = self.busy[lo].0;
        }
        while let Some(&(s, e)) = self.busy.get(hi) {
            if s > end + SLIVER {
                break;
            }
            end = end.max(e);
            hi += 1;
        }
        match hi - lo {
            0 => self.busy.insert(lo, (start, end)),
            n => {
                self.busy[lo] = (start, end);
                if n > 1 {
                    self.busy.drain(lo + 1..hi);
                }
            }
        }
        while let Some(&(s, e)) = self.busy.front() {
            if e + HORIZON >= at || s == start {
                break;
            }
            self.busy.pop_front();
            self.forgotten = self.forgotten.max(e);
        }
        t + dur
    }

    /// Where a reservation of `dur` arriving at `t` starts: after the interval under way
    /// at `t`, in the first gap that holds it; and the index where the search stopped.
    fn first_gap(&self, mut t: Time, dur: Time) -> (Time, usize) {
        let under_way = self.starting_by(t);
        if under_way > 0 {
            t = t.max(self.busy[under_way - 1].1);
        }
        let mut i = self.walk_to(under_way, |&(s, _)| s < t);
        while let Some(&(s, e)) = self.busy.get(i) {
            if s >= t + dur {
                break;
            }
            t = e;
            i += 1;
            while self.busy.get(i).is_some_and(|&(s, _)| s < t) {
                i += 1;
            }
        }
        (t, i)
    }

    /// How many intervals from the front satisfy `before` (true on a prefix), walking
    /// from `hint`: the searches of one reservation end a step or two apart, so only the
    /// first needs the gallop of `count_from_back`.
    fn walk_to(&self, hint: usize, before: impl Fn(&(Time, Time)) -> bool) -> usize {
        let mut i = hint.min(self.busy.len());
        while i > 0 && !before(&self.busy[i - 1]) {
            i -= 1;
        }
        while self.busy.get(i).is_some_and(&before) {
            i += 1;
        }
        i
    }

    /// How many intervals start at or before `t`.
    fn starting_by(&self, t: Time) -> usize {
        self.count_from_back(|&(s, _)| s <= t)
    }

    /// How many intervals from the front satisfy `before` (true on a prefix), searched
    /// from the back: most reservations land after the last interval's start (one
    /// probe) or a few intervals before it (galloping back, then bisecting).
    fn count_from_back(&self, before: impl Fn(&(Time, Time)) -> bool) -> usize {
        let n = self.busy.len();
        let (mut lo, mut hi) = (0, n);
        let mut step = 1;
        while step <= n {
            if before(&self.busy[n - step]) {
                lo = n - step + 1;
                break;
            }
            hi = n - step;
            step *= 2;
        }
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if before(&self.busy[mid]) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reservation_beyond_the_horizon_waits_rather_than_overbooks() {
        // 1 GB/s: 1000 bytes take 1 µs. Book [0, 1 µs), then one far in the future so the
        // first is forgotten, then one arriving at 0 again.
        let mut f = Fifo::new(1.0);
        let first = f.reserve(Time::ZERO, 1000);
        let far = HORIZON + Time::from_us(10);
        f.reserve(far, 1000);
        let late = f.reserve(Time::ZERO, 1000);
        // It may not be served during [0, first): that time is already sold.
        assert!(
            late >= first + Time::from_us(1),
            "{late:?} overlaps {first:?}"
        );
        // Within the horizon the gap before a future booking is still used.
        let mut g = Fifo::new(1.0);
        g.reserve(Time::from_us(100), 1000);
        assert_eq!(g.reserve(Time::ZERO, 1000), Time::from_us(1));
    }

    #[test]
    fn a_server_fills_gaps_but_never_serves_two_at_once() {
        let mut f = Fifo::new(1.0); // 1 B/ns
        let late = f.reserve(Time::from_ns(1000), 100);
        assert_eq!(late, Time::from_ns(1100));
        // An earlier arrival fits in the gap before it…
        assert_eq!(f.reserve(Time::ZERO, 100), Time::from_ns(100));
        // …one that does not fit goes after it.
        assert_eq!(f.reserve(Time::from_ns(950), 100), Time::from_ns(1200));
        assert_eq!(f.bytes, 300);
    }

    #[test]
    fn a_paused_server_places_nothing_in_the_pause() {
        let mut f = Fifo::new(1.0); // 1 B/ns
        f.reserve(Time::from_ns(1000), 100);
        f.pause(Time::from_ns(100), Time::from_ns(600));
        // Before the pause there is room; in it there is none, up to the next booking's end.
        assert_eq!(f.reserve(Time::ZERO, 100), Time::from_ns(100));
        assert_eq!(f.reserve(Time::from_ns(200), 100), Time::from_ns(700));
        assert_eq!(f.reserve(Time::from_ns(650), 400), Time::from_ns(1500));
        // A pause over busy time and beyond it merges with it.
        f.pause(Time::from_ns(1400), Time::from_ns(2000));
        assert_eq!(f.reserve(Time::from_ns(1500), 100), Time::from_ns(2100));
        assert_eq!(f.bytes, 800);
    }
}
