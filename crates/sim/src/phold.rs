//! PHOLD, the standard discrete-event engine benchmark (the catalog's `engine.phold`).
//!
//! `lps` logical processes each start with one event at `0.1 us + Exp(1 us)` (as if
//! each had handled an event at time 0). Handling an event at `t` schedules one event
//! at a uniformly random LP at `t + 0.1 us + Exp(1 us)`, quantised to 1 ps. The run
//! stops once `events` events have been handled. The random draws per handled event
//! are, in this order: the destination LP, then the exponential delay.
//!
//! Two drivers consume exactly the same random sequence: [`run_engine`] on the
//! [`Engine`] (and so on the ladder [`Queue`](crate::Queue)), and [`run_binary_heap`]
//! on a minimal `BinaryHeap<Reverse<(time, seq, lp)>>`. Both break ties by insertion
//! order, so they must handle the same LPs in the same order and report the same
//! checksum: that is the correctness test of the queue. Neither reads the wall
//! clock; timing is the caller's business.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use thiserror::Error;

use crate::dist;
use crate::engine::{Engine, SimError};
use crate::time::Time;

/// Default number of logical processes.
pub const DEFAULT_LPS: u64 = 1_000;
/// Default number of events to handle.
pub const DEFAULT_EVENTS: u64 = 10_000_000;
/// Largest accepted LP count: every LP holds one pending event in memory (and the
/// LP index is a `u32`).
pub const MAX_LPS: u64 = 10_000_000;
/// Fixed part of every delay: 0.1 us.
pub const LOOKAHEAD: Time = Time::from_ps(100_000);
/// Mean of the exponential part of every delay: 1.0 us.
pub const MEAN_EXP: Time = Time::from_us(1);

/// Parameters of one PHOLD run (the catalog's names: `lps`, `events`, `seed`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PholdConfig {
    /// Logical processes, `1..=MAX_LPS`.
    pub lps: u64,
    /// Events to handle, at least 1.
    pub events: u64,
    /// Seed of the random generator.
    pub seed: u64,
}

impl Default for PholdConfig {
    fn default() -> Self {
        PholdConfig {
            lps: DEFAULT_LPS,
            events: DEFAULT_EVENTS,
            seed: 1,
        }
    }
}

/// Why a PHOLD run could not start or finish.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
pub enum PholdError {
    /// `lps` is 0 or too large.
    #[error(
        "lps must be between 1 and {MAX_LPS} (each LP keeps one pending event in memory), got {0}"
    )]
    Lps(u64),
    /// `events` is 0.
    #[error("events must be at least 1, got 0")]
    NoEvents,
    /// Simulated time ran past its maximum (only with absurdly long runs).
    #[error(transparent)]
    Sim(#[from] SimError),
}

impl PholdConfig {
    /// Check the parameters; every driver calls this first.
    pub fn validate(&self) -> Result<(), PholdError> {
        if self.lps == 0 || self.lps > MAX_LPS {
            return Err(PholdError::Lps(self.lps));
        }
        if self.events == 0 {
            return Err(PholdError::NoEvents);
        }
        Ok(())
    }
}

/// Outcome of a PHOLD run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PholdResult {
    /// Events handled (equals the requested count).
    pub events: u64,
    /// Order-dependent hash of the LPs handled; see [`Checksum`].
    pub checksum: u64,
    /// Simulated time of the last event handled.
    pub end_time: Time,
}

/// FNV-1a over the sequence of LP indices handled (one 32-bit word per event), so it
/// depends on the order as well as the multiset. [`Checksum::value`] keeps the low 53
/// bits, so that the number survives JSON readers that parse numbers as doubles.
#[derive(Clone, Copy, Debug)]
pub struct Checksum(u64);

impl Default for Checksum {
    fn default() -> Self {
        Checksum(0xcbf2_9ce4_8422_2325)
    }
}

impl Checksum {
    /// Fold one handled LP into the hash.
    #[inline]
    pub fn add(&mut self, lp: u32) {
        self.0 = (self.0 ^ u64::from(lp)).wrapping_mul(0x0000_0100_0000_01b3);
    }

    /// The checksum, within 2^53.
    pub fn value(self) -> u64 {
        self.0 & ((1u64 << 53) - 1)
    }
}

/// One delay: 0.1 us + Exp(1 us), in ps.
#[inline]
fn delay_ps(rng: &mut Xoshiro256PlusPlus) -> u64 {
    LOOKAHEAD.as_ps() + dist::exp_ps(rng, MEAN_EXP.as_ps() as f64)
}

/// PHOLD on the [`Engine`] (ladder queue).
pub fn run_engine(cfg: &PholdConfig) -> Result<PholdResult, PholdError> {
    cfg.validate()?;
    // Validated: fits in u32.
    let lps = cfg.lps as u32;
    let mut eng: Engine<u32> = Engine::with_capacity(cfg.seed, lps as usize);
    for lp in 0..lps {
        let d = delay_ps(eng.rng());
        eng.schedule_at(Time::from_ps(d), lp)?;
    }
    let mut sum = Checksum::default();
    for _ in 0..cfg.events {
        // Never empty: every handled event schedules one.
        let Some((_, lp)) = eng.pop() else { break };
        sum.add(lp);
        let dst = dist::uniform_u32(eng.rng(), lps);
        let d = delay_ps(eng.rng());
        eng.schedule_in(Time::from_ps(d), dst)?;
    }
    Ok(PholdResult {
        events: eng.stats().handled,
        checksum: sum.value(),
        end_time: eng.now(),
    })
}

/// PHOLD on a minimal binary heap, the baseline: the same random sequence, ties broken
/// by an insertion sequence number.
pub fn run_binary_heap(cfg: &PholdConfig) -> Result<PholdResult, PholdError> {
    cfg.validate()?;
    let lps = cfg.lps as u32;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(cfg.seed);
    let mut heap: BinaryHeap<Reverse<(u64, u64, u32)>> = BinaryHeap::with_capacity(lps as usize);
    let mut seq = 0u64;
    for lp in 0..lps {
        heap.push(Reverse((delay_ps(&mut rng), seq, lp)));
        seq += 1;
    }
    let mut sum = Checksum::default();
    let mut handled = 0u64;
    let mut now = 0u64;
    for _ in 0..cfg.events {
        let Some(Reverse((t, _, lp))) = heap.pop() else {
            break;
        };
        now = t;
        handled += 1;
        sum.add(lp);
        let dst = dist::uniform_u32(&mut rng, lps);
        let d = delay_ps(&mut rng);
        let at = t.checked_add(d).ok_or(SimError::Overflow {
            now: Time::from_ps(t),
            delay: Time::from_ps(d),
        })?;
        heap.push(Reverse((at, seq, dst)));
        seq += 1;
    }
    Ok(PholdResult {
        events: handled,
        checksum: sum.value(),
        end_time: Time::from_ps(now),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(lps: u64, events: u64, seed: u64) -> PholdConfig {
        PholdConfig { lps, events, seed }
    }

    #[test]
    fn validation() {
        assert_eq!(run_engine(&cfg(0, 10, 1)), Err(PholdError::Lps(0)));
        assert_eq!(
            run_binary_heap(&cfg(MAX_LPS + 1, 10, 1)),
            Err(PholdError::Lps(MAX_LPS + 1))
        );
        assert_eq!(run_engine(&cfg(10, 0, 1)), Err(PholdError::NoEvents));
        assert!(PholdError::Lps(0).to_string().contains("lps"));
    }

    #[test]
    fn counts_events_and_time_advances() {
        let r = run_engine(&cfg(10, 1_000, 3)).unwrap();
        assert_eq!(r.events, 1_000);
        // 100 events per LP, each at least 0.1 us after the previous on its chain.
        assert!(r.end_time > Time::from_us(10));
        assert!(r.checksum < 1 << 53);
    }

    #[test]
    fn single_lp_and_single_event() {
        for c in [cfg(1, 5_000, 9), cfg(1000, 1, 9), cfg(1, 1, 0)] {
            assert_eq!(run_engine(&c).unwrap(), run_binary_heap(&c).unwrap());
        }
    }
}
