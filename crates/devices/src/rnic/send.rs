//! The RNIC's send side: how a posted WQE reaches the transmit unit — taken from its
//! BlueFlame store, or fetched from the send queue in host memory by DMA — and which
//! send queue the unit serves next.
//!
//! `SendArbiter` holds the state; it knows neither an event engine nor a benchmark. Its
//! caller (`host::rdma::bench`) drives it with events: on a doorbell `Rnic::doorbell`,
//! then `takes_at_once`/`wait` whenever a send queue may have work, `turn`/`end_turn`
//! at the times `wait` and `end_turn` return, `take` and `issued` around each WQE it
//! issues. Send queues are named by the caller's index (`q`), dense from 0.

use std::collections::VecDeque;

use sim::Time;

/// One send queue's state at the transmit unit.
#[derive(Clone, Debug, Default)]
struct SendQueue {
    /// Per WQE accepted and not yet taken, in order: when its DMA fetch from the send
    /// queue completes, or `None` when it arrived by BlueFlame.
    fetch: VecDeque<Option<Time>>,
    /// When the transmit unit finished this queue's last WQE.
    unit_done: Time,
    /// In the line for a turn.
    waiting: bool,
}

/// An RNIC's send arbiter: the send queues with work the transmit unit has not reached
/// yet, served round robin one WQE per turn (assumption: the simplest fair arbiter;
/// ConnectX's is not documented), a queue going to the back if it has more. So the
/// unit looks a QP's context up when it works on it — not when a doorbell arrives while
/// it is busy with others — and with more QPs taking turns than the context cache
/// holds, every turn misses.
#[derive(Clone, Debug, Default)]
pub struct SendArbiter {
    queues: Vec<SendQueue>,
    waiting: VecDeque<usize>,
    /// A turn is pending at this time.
    turn_at: Option<Time>,
    /// When the unit is through with the last WQE issued. Responses the unit builds
    /// meanwhile do not hold back the next turn: they take the unit in the order they
    /// reach it, and so does the next queue's WQE.
    issued_until: Time,
}

impl SendArbiter {
    fn queue(&mut self, q: usize) -> &mut SendQueue {
        if q >= self.queues.len() {
            self.queues.resize_with(q + 1, SendQueue::default);
        }
        &mut self.queues[q]
    }

    /// The BlueFlame rule: a store for send queue `q` reaching the RNIC at `at`, with
    /// `ahead` of the queue's WQEs posted before it not yet issued. The RNIC takes the
    /// store's WQE only when the queue is idle — nothing ahead and the unit through with
    /// its last WQE; otherwise it discards the copy and fetches the WQE by DMA.
    /// Assumption: the ConnectX send engine consumes a BlueFlame WQE only in an idle
    /// send queue — why the driver also writes it to the queue in memory, and why the
    /// mlx5 driver stops using BlueFlame when the device back-pressures the queue (its
    /// commit "Use BlueFlame for TX"); the study's 16 closed-loop QPs complete 6.4 M
    /// operations/s (docs/hardware.md §4, 16 × 64 B in 2.5 µs), more than its 8 open-loop
    /// QPs' 6.06 M, which a transmit unit costing the same per WQE in both cannot do.
    pub fn takes_blueflame(&self, q: usize, at: Time, ahead: usize) -> bool {
        let unit_done = self.queues.get(q).map_or(Time::ZERO, |s| s.unit_done);
        ahead == 0 && unit_done <= at
    }

    /// A WQE joins send queue `q`: `fetched` is when its DMA fetch completes, `None`
    /// when the RNIC took it from the BlueFlame store.
    pub fn accept(&mut self, q: usize, fetched: Option<Time>) {
        self.queue(q).fetch.push_back(fetched);
    }

    /// The transmit unit takes `q`'s next WQE: when its fetch completes, or `None` when
    /// it is in the RNIC already (BlueFlame, or accepted by no doorbell).
    pub fn take(&mut self, q: usize) -> Option<Time> {
        self.queue(q).fetch.pop_front().flatten()
    }

    /// The unit is through with the WQE of `q` just issued at `done`.
    pub fn issued(&mut self, q: usize, done: Time) {
        self.queue(q).unit_done = done;
        self.issued_until = done;
    }

    /// A send queue with work at `t` is issued at once: the unit is free and no queue
    /// waits for a turn.
    pub fn takes_at_once(&self, t: Time) -> bool {
        self.issued_until <= t && self.waiting.is_empty()
    }

    /// Send queue `q` has work at `t` the unit has not taken: to the back of the line
    /// unless it is in it. When a turn must be scheduled (none is pending): its time.
    pub fn wait(&mut self, q: usize, t: Time) -> Option<Time> {
        let s = self.queue(q);
        if s.waiting {
            return None;
        }
        s.waiting = true;
        self.waiting.push_back(q);
        self.schedule_turn(self.issued_until.max(t))
    }

    /// A turn (at the time `wait` or `end_turn` gave): the first waiting queue that
    /// `has_work`, out of the line — the caller issues one WQE of it and ends the turn.
    /// Queues without work leave the line; `None` when none is left.
    pub fn turn(&mut self, has_work: impl Fn(usize) -> bool) -> Option<usize> {
        self.turn_at = None;
        while let Some(q) = self.waiting.pop_front() {
            self.queues[q].waiting = false;
            if has_work(q) {
                return Some(q);
            }
        }
        None
    }

    /// The turn of `q` at `t` is over: `q` to the back of the line if it has `more`
    /// work. When the next turn must be scheduled: its time.
    pub fn end_turn(&mut self, q: usize, more: bool, t: Time) -> Option<Time> {
        if more {
            self.queues[q].waiting = true;
            self.waiting.push_back(q);
        }
        if self.waiting.is_empty() {
            return None;
        }
        self.schedule_turn(self.issued_until.max(t))
    }

    fn schedule_turn(&mut self, at: Time) -> Option<Time> {
        if self.turn_at.is_some() {
            return None;
        }
        self.turn_at = Some(at);
        Some(at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ns(n: u64) -> Time {
        Time::from_ps(n * 1000)
    }

    /// Serves turns from `first` until no queue has work, each WQE taking the unit
    /// `cost`: the queues in the order served, and the time of each turn.
    fn serve(
        a: &mut SendArbiter,
        work: &mut [u32],
        first: Time,
        cost: Time,
    ) -> (Vec<usize>, Vec<Time>) {
        let (mut order, mut times) = (Vec::new(), Vec::new());
        let mut next = Some(first);
        while let Some(t) = next {
            let Some(q) = a.turn(|q| work[q] > 0) else {
                break;
            };
            work[q] -= 1;
            order.push(q);
            times.push(t);
            a.issued(q, t + cost);
            next = a.end_turn(q, work[q] > 0, t);
        }
        (order, times)
    }

    #[test]
    fn queues_take_turns_one_wqe_each_and_one_with_more_goes_to_the_back() {
        let mut a = SendArbiter::default();
        a.issued(3, ns(5));
        let mut work = [2, 1, 3];
        assert_eq!(
            a.wait(0, ns(0)),
            Some(ns(5)),
            "the turn when the unit is free"
        );
        assert_eq!(a.wait(1, ns(1)), None, "a turn is pending already");
        assert_eq!(a.wait(2, ns(2)), None);
        assert_eq!(a.wait(0, ns(3)), None, "queue 0 is in the line once");
        let (order, times) = serve(&mut a, &mut work, ns(5), ns(10));
        assert_eq!(order, [0, 1, 2, 0, 2, 2]);
        assert_eq!(times, [5, 15, 25, 35, 45, 55].map(ns));
        assert!(a.takes_at_once(ns(65)) && !a.takes_at_once(ns(64)));
    }

    #[test]
    fn a_queue_is_issued_at_once_only_when_the_unit_is_free_and_nobody_waits() {
        let mut a = SendArbiter::default();
        assert!(a.takes_at_once(Time::ZERO));
        a.issued(0, ns(10));
        assert!(!a.takes_at_once(ns(9)), "the unit is busy");
        assert_eq!(a.wait(1, ns(9)), Some(ns(10)));
        assert!(!a.takes_at_once(ns(20)), "queue 1 waits for its turn");
        assert_eq!(
            a.turn(|_| false),
            None,
            "a queue without work leaves the line"
        );
        assert!(a.takes_at_once(ns(20)));
        assert_eq!(a.wait(1, ns(20)), Some(ns(20)), "queue 1 may wait again");
    }

    #[test]
    fn a_blueflame_wqe_is_taken_only_in_an_idle_send_queue() {
        let mut a = SendArbiter::default();
        assert!(a.takes_blueflame(0, Time::ZERO, 0));
        assert!(!a.takes_blueflame(0, Time::ZERO, 1), "a WQE is ahead of it");
        a.issued(0, ns(100));
        assert!(
            !a.takes_blueflame(0, ns(50), 0),
            "the unit is still on the queue's last WQE"
        );
        assert!(a.takes_blueflame(0, ns(100), 0));
        assert!(a.takes_blueflame(1, ns(50), 0), "another queue is idle");
        a.accept(0, None);
        a.accept(0, Some(ns(70)));
        assert_eq!(a.take(0), None, "the BlueFlame WQE is in the RNIC");
        assert_eq!(
            a.take(0),
            Some(ns(70)),
            "the fetched one is in at its DMA's end"
        );
    }
}
