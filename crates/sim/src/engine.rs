//! The discrete-event engine: [`Engine`], a clock, a pending-event [`Queue`], a seeded
//! random generator and counters. Hardware models build on this.
//!
//! Events are a model-defined type `E` (typically an enum), stored inline in the queue.
//! The engine never reads the wall clock; all randomness comes from the generator
//! seeded in [`Engine::new`], so a run is a pure function of its inputs and seed.

use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use thiserror::Error;

use crate::dist;
use crate::queue::Queue;
use crate::time::Time;

/// A scheduling mistake. Scheduling is always checked (in release builds too): the
/// check is one comparison, and an event in the past would silently break causality.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
pub enum SimError {
    /// An event was scheduled before the current simulated time.
    #[error("event scheduled in the past: at {at}, but the simulation is at {now}")]
    InPast {
        /// The current time.
        now: Time,
        /// The requested time.
        at: Time,
    },
    /// `now + delay` does not fit in [`Time`].
    #[error("simulated time overflow: {now} + {delay} exceeds the largest time")]
    Overflow {
        /// The current time.
        now: Time,
        /// The requested delay.
        delay: Time,
    },
}

/// Engine counters, for reports and tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EngineStats {
    /// Events scheduled so far.
    pub scheduled: u64,
    /// Events popped (handed to a handler) so far.
    pub handled: u64,
    /// Events pending now.
    pub pending: u64,
}

/// A discrete-event engine over events of type `E`.
///
/// Events at equal times are handled in the order they were scheduled, so runs are
/// reproducible bit for bit.
///
/// ```
/// use sim::{Engine, Time};
///
/// let mut eng = Engine::new(42);
/// eng.schedule_at(Time::from_ns(5), "b").unwrap();
/// eng.schedule_at(Time::from_ns(1), "a").unwrap();
/// let mut seen = Vec::new();
/// eng.run(|eng, t, e| {
///     seen.push((t, e));
///     if e == "a" {
///         eng.schedule_in(Time::from_ns(10), "c")?;
///     }
///     Ok::<_, sim::SimError>(())
/// })
/// .unwrap();
/// assert_eq!(seen, [(Time::from_ns(1), "a"), (Time::from_ns(5), "b"), (Time::from_ns(11), "c")]);
/// ```
pub struct Engine<E> {
    queue: Queue<E>,
    now: Time,
    rng: Xoshiro256PlusPlus,
    scheduled: u64,
    handled: u64,
}

impl<E> Engine<E> {
    /// An engine at time zero whose generator is seeded from `seed`.
    pub fn new(seed: u64) -> Self {
        Self::with_capacity(seed, 0)
    }

    /// Like [`Engine::new`], expecting about `pending` events pending at a time.
    pub fn with_capacity(seed: u64, pending: usize) -> Self {
        Engine {
            queue: Queue::with_capacity(pending),
            now: Time::ZERO,
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
            scheduled: 0,
            handled: 0,
        }
    }

    /// The current simulated time: that of the event being (or last) handled.
    #[inline]
    pub fn now(&self) -> Time {
        self.now
    }

    /// Schedule `event` at absolute time `at`, which may equal `now()` (it is then
    /// handled after the events already scheduled for `now()`). Errors if `at` is in
    /// the past.
    #[inline]
    pub fn schedule_at(&mut self, at: Time, event: E) -> Result<(), SimError> {
        if at < self.now {
            return Err(SimError::InPast { now: self.now, at });
        }
        self.queue.push(at, event);
        self.scheduled += 1;
        Ok(())
    }

    /// Schedule `event` at `now() + delay`. Errors only on time overflow.
    #[inline]
    pub fn schedule_in(&mut self, delay: Time, event: E) -> Result<(), SimError> {
        let at = self.now.checked_add(delay).ok_or(SimError::Overflow {
            now: self.now,
            delay,
        })?;
        self.queue.push(at, event);
        self.scheduled += 1;
        Ok(())
    }

    /// Take the next event, advancing the clock to its time.
    #[inline]
    pub fn pop(&mut self) -> Option<(Time, E)> {
        let (t, e) = self.queue.pop()?;
        self.now = t;
        self.handled += 1;
        Some((t, e))
    }

    /// Time of the next event, if any (the clock does not move).
    pub fn peek_time(&mut self) -> Option<Time> {
        self.queue.peek_time()
    }

    /// Handle events until none is left. The handler gets the engine (to schedule
    /// more), the event's time and the event. Stops at the first handler error.
    /// Returns the number of events handled by this call.
    pub fn run<X>(
        &mut self,
        mut handler: impl FnMut(&mut Self, Time, E) -> Result<(), X>,
    ) -> Result<u64, X> {
        let mut n = 0;
        while let Some((t, e)) = self.pop() {
            n += 1;
            handler(self, t, e)?;
        }
        Ok(n)
    }

    /// Handle every event at or before `until`, then set the clock to `until` (if it
    /// is later), so that a following `schedule_in` counts from `until`. Events that
    /// handlers schedule at or before `until` are handled too. Returns the number of
    /// events handled by this call.
    pub fn run_until<X>(
        &mut self,
        until: Time,
        mut handler: impl FnMut(&mut Self, Time, E) -> Result<(), X>,
    ) -> Result<u64, X> {
        let mut n = 0;
        while self.queue.peek_time().is_some_and(|t| t <= until) {
            let Some((t, e)) = self.pop() else { break };
            n += 1;
            handler(self, t, e)?;
        }
        self.now = self.now.max(until);
        Ok(n)
    }

    /// The engine's generator. Draw from it only inside the simulation, in simulation
    /// order, to keep runs reproducible.
    #[inline]
    pub fn rng(&mut self) -> &mut Xoshiro256PlusPlus {
        &mut self.rng
    }

    /// An exponential delay with the given mean, quantised to 1 ps (see
    /// [`dist::exp_time`]).
    #[inline]
    pub fn sample_exp(&mut self, mean: Time) -> Time {
        dist::exp_time(&mut self.rng, mean)
    }

    /// A uniform integer in `0..n` (`n >= 1`; see [`dist::uniform_u32`]).
    #[inline]
    pub fn sample_index(&mut self, n: u32) -> u32 {
        dist::uniform_u32(&mut self.rng, n)
    }

    /// Events pending in the queue.
    pub fn pending(&self) -> usize {
        self.queue.len()
    }

    /// Counters.
    pub fn stats(&self) -> EngineStats {
        EngineStats {
            scheduled: self.scheduled,
            handled: self.handled,
            pending: self.queue.len() as u64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn past_is_an_error_and_now_is_allowed() {
        let mut eng = Engine::new(1);
        eng.schedule_at(Time::from_ns(10), 1u8).unwrap();
        assert_eq!(eng.pop(), Some((Time::from_ns(10), 1)));
        assert_eq!(eng.now(), Time::from_ns(10));
        assert_eq!(
            eng.schedule_at(Time::from_ns(9), 2),
            Err(SimError::InPast {
                now: Time::from_ns(10),
                at: Time::from_ns(9)
            })
        );
        eng.schedule_at(Time::from_ns(10), 3).unwrap();
        eng.schedule_in(Time::ZERO, 4).unwrap();
        assert_eq!(eng.pop(), Some((Time::from_ns(10), 3)));
        assert_eq!(eng.pop(), Some((Time::from_ns(10), 4)));
        assert_eq!(eng.pop(), None);
        let s = eng.stats();
        assert_eq!((s.scheduled, s.handled, s.pending), (3, 3, 0));
        let msg = SimError::InPast {
            now: Time::from_ns(10),
            at: Time::from_ns(9),
        }
        .to_string();
        assert!(msg.contains("9 ns") && msg.contains("10 ns"), "{msg}");
    }

    #[test]
    fn overflow_is_an_error() {
        let mut eng = Engine::new(1);
        eng.schedule_at(Time::MAX, ()).unwrap();
        eng.pop();
        assert!(matches!(
            eng.schedule_in(Time::from_ps(1), ()),
            Err(SimError::Overflow { .. })
        ));
    }

    #[test]
    fn run_until_stops_and_advances_clock() {
        let mut eng = Engine::new(1);
        for i in 0..10u64 {
            eng.schedule_at(Time::from_ns(i * 10), i).unwrap();
        }
        let mut seen = Vec::new();
        let n = eng
            .run_until(Time::from_ns(45), |eng, t, e| {
                seen.push(e);
                if e == 0 {
                    // Scheduled inside the window: handled in this call.
                    eng.schedule_at(t + Time::from_ns(15), 100)?;
                }
                Ok::<_, SimError>(())
            })
            .unwrap();
        assert_eq!(seen, [0, 1, 100, 2, 3, 4]);
        assert_eq!(n, 6);
        assert_eq!(eng.now(), Time::from_ns(45));
        assert_eq!(eng.pending(), 5);
        assert_eq!(eng.peek_time(), Some(Time::from_ns(50)));
    }

    #[test]
    fn handler_error_stops_run() {
        let mut eng = Engine::new(1);
        eng.schedule_at(Time::from_ns(1), 1).unwrap();
        eng.schedule_at(Time::from_ns(2), 2).unwrap();
        let r = eng.run(|_, _, e| if e == 1 { Err("boom") } else { Ok(()) });
        assert_eq!(r, Err("boom"));
        assert_eq!(eng.pending(), 1);
    }

    #[test]
    fn same_seed_same_random_stream() {
        let mut a: Engine<()> = Engine::new(5);
        let mut b: Engine<()> = Engine::new(5);
        for _ in 0..100 {
            assert_eq!(
                a.sample_exp(Time::from_us(1)),
                b.sample_exp(Time::from_us(1))
            );
            assert_eq!(a.sample_index(17), b.sample_index(17));
        }
    }
}
