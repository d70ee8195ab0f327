//! Simulated time: [`Time`], an integer count of picoseconds.
//!
//! Time is an integer so that the event queue never compares floats and a run is
//! reproducible bit for bit. One picosecond is the engine tick: fine enough for PCIe
//! symbol times and cache-line transfers, while a `u64` still spans about 213 days.

use std::fmt;
use std::ops::{Add, AddAssign, Sub, SubAssign};

/// Picoseconds per nanosecond.
pub const PS_PER_NS: u64 = 1_000;
/// Picoseconds per microsecond.
pub const PS_PER_US: u64 = 1_000_000;
/// Picoseconds per millisecond.
pub const PS_PER_MS: u64 = 1_000_000_000;
/// Picoseconds per second.
pub const PS_PER_S: u64 = 1_000_000_000_000;

/// A point in (or a span of) simulated time, in picoseconds.
///
/// The same type serves as instant and duration, like a tick counter: `now + delay`.
/// Arithmetic operators panic on overflow or underflow in every build profile (a model
/// bug, not a user error); use the `checked_*` methods where the operands come from
/// input.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Time(u64);

impl Time {
    /// Time zero, the start of every simulation.
    pub const ZERO: Time = Time(0);
    /// The largest representable time (about 213 days).
    pub const MAX: Time = Time(u64::MAX);

    /// `ps` picoseconds.
    pub const fn from_ps(ps: u64) -> Time {
        Time(ps)
    }

    /// `ns` nanoseconds. Panics if the result does not fit (more than ~213 days);
    /// see [`Time::checked_from_ns`].
    pub const fn from_ns(ns: u64) -> Time {
        match Self::checked_from_ns(ns) {
            Some(t) => t,
            None => panic!("Time::from_ns overflow"),
        }
    }

    /// `us` microseconds. Panics if the result does not fit; see
    /// [`Time::checked_from_us`].
    pub const fn from_us(us: u64) -> Time {
        match Self::checked_from_us(us) {
            Some(t) => t,
            None => panic!("Time::from_us overflow"),
        }
    }

    /// `ns` nanoseconds, or `None` if that does not fit.
    pub const fn checked_from_ns(ns: u64) -> Option<Time> {
        match ns.checked_mul(PS_PER_NS) {
            Some(ps) => Some(Time(ps)),
            None => None,
        }
    }

    /// `us` microseconds, or `None` if that does not fit.
    pub const fn checked_from_us(us: u64) -> Option<Time> {
        match us.checked_mul(PS_PER_US) {
            Some(ps) => Some(Time(ps)),
            None => None,
        }
    }

    /// A fractional number of nanoseconds (as platform descriptions give latencies),
    /// rounded to the nearest picosecond. `None` for negative, NaN or too large values.
    pub fn from_ns_f64(ns: f64) -> Option<Time> {
        let ps = (ns * PS_PER_NS as f64).round();
        // 2^64 is exactly representable; anything at or above it does not fit, and
        // NaN is in no range.
        if !(0.0..18_446_744_073_709_551_616.0).contains(&ps) {
            None
        } else {
            Some(Time(ps as u64))
        }
    }

    /// Whole picoseconds.
    pub const fn as_ps(self) -> u64 {
        self.0
    }

    /// Whole nanoseconds (truncated).
    pub const fn as_ns(self) -> u64 {
        self.0 / PS_PER_NS
    }

    /// Whole microseconds (truncated).
    pub const fn as_us(self) -> u64 {
        self.0 / PS_PER_US
    }

    /// Nanoseconds as a float, for reports only (never feed it back into the queue).
    pub fn as_ns_f64(self) -> f64 {
        self.0 as f64 / PS_PER_NS as f64
    }

    /// Microseconds as a float, for reports only.
    pub fn as_us_f64(self) -> f64 {
        self.0 as f64 / PS_PER_US as f64
    }

    /// Seconds as a float, for reports only.
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / PS_PER_S as f64
    }

    /// `self + rhs`, or `None` on overflow.
    pub const fn checked_add(self, rhs: Time) -> Option<Time> {
        match self.0.checked_add(rhs.0) {
            Some(ps) => Some(Time(ps)),
            None => None,
        }
    }

    /// `self - rhs`, or `None` if `rhs` is later than `self`.
    pub const fn checked_sub(self, rhs: Time) -> Option<Time> {
        match self.0.checked_sub(rhs.0) {
            Some(ps) => Some(Time(ps)),
            None => None,
        }
    }

    /// `self + rhs`, clamped to [`Time::MAX`].
    pub const fn saturating_add(self, rhs: Time) -> Time {
        Time(self.0.saturating_add(rhs.0))
    }

    /// `self - rhs`, clamped to [`Time::ZERO`].
    pub const fn saturating_sub(self, rhs: Time) -> Time {
        Time(self.0.saturating_sub(rhs.0))
    }
}

impl Add for Time {
    type Output = Time;
    fn add(self, rhs: Time) -> Time {
        self.checked_add(rhs).expect("simulated time overflow")
    }
}

impl Sub for Time {
    type Output = Time;
    fn sub(self, rhs: Time) -> Time {
        self.checked_sub(rhs).expect("simulated time underflow")
    }
}

impl AddAssign for Time {
    fn add_assign(&mut self, rhs: Time) {
        *self = *self + rhs;
    }
}

impl SubAssign for Time {
    fn sub_assign(&mut self, rhs: Time) {
        *self = *self - rhs;
    }
}

/// Exact decimal in the largest unit that is at most the value: `0 ps`, `750 ps`,
/// `1.5 ns`, `2.000001 us`, `3 s`. No float is involved, so nothing is rounded.
impl fmt::Display for Time {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ps = self.0;
        let (unit, per, digits) = if ps >= PS_PER_S {
            ("s", PS_PER_S, 12)
        } else if ps >= PS_PER_MS {
            ("ms", PS_PER_MS, 9)
        } else if ps >= PS_PER_US {
            ("us", PS_PER_US, 6)
        } else if ps >= PS_PER_NS {
            ("ns", PS_PER_NS, 3)
        } else {
            return write!(f, "{ps} ps");
        };
        let whole = ps / per;
        let frac = ps % per;
        if frac == 0 {
            write!(f, "{whole} {unit}")
        } else {
            let frac = format!("{frac:0digits$}");
            write!(f, "{whole}.{} {unit}", frac.trim_end_matches('0'))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constructors_and_accessors() {
        assert_eq!(Time::from_ns(3).as_ps(), 3_000);
        assert_eq!(Time::from_us(2).as_ps(), 2_000_000);
        assert_eq!(Time::from_ps(2_500).as_ns(), 2);
        assert_eq!(Time::from_us(7).as_us(), 7);
        assert_eq!(Time::checked_from_ns(u64::MAX), None);
        assert_eq!(Time::checked_from_us(u64::MAX / 10), None);
        assert_eq!(Time::from_ns_f64(0.1), Some(Time::from_ps(100)));
        assert_eq!(Time::from_ns_f64(1.2345), Some(Time::from_ps(1_235)));
        assert_eq!(Time::from_ns_f64(-1.0), None);
        assert_eq!(Time::from_ns_f64(f64::NAN), None);
        assert_eq!(Time::from_ns_f64(1e30), None);
        assert!((Time::from_ns(1500).as_us_f64() - 1.5).abs() < 1e-12);
    }

    #[test]
    fn arithmetic() {
        let a = Time::from_ns(5);
        let b = Time::from_ps(250);
        assert_eq!(a + b, Time::from_ps(5_250));
        assert_eq!(a - b, Time::from_ps(4_750));
        assert_eq!(b.checked_sub(a), None);
        assert_eq!(Time::MAX.checked_add(b), None);
        assert_eq!(Time::MAX.saturating_add(b), Time::MAX);
        assert_eq!(b.saturating_sub(a), Time::ZERO);
        let mut c = a;
        c += b;
        c -= a;
        assert_eq!(c, b);
    }

    #[test]
    #[should_panic(expected = "underflow")]
    fn sub_underflow_panics() {
        let _ = Time::from_ps(1) - Time::from_ps(2);
    }

    #[test]
    fn display() {
        assert_eq!(Time::ZERO.to_string(), "0 ps");
        assert_eq!(Time::from_ps(750).to_string(), "750 ps");
        assert_eq!(Time::from_ps(1_500).to_string(), "1.5 ns");
        assert_eq!(Time::from_ps(2_000_001).to_string(), "2.000001 us");
        assert_eq!(Time::from_us(1_000).to_string(), "1 ms");
        assert_eq!(Time::from_ps(3 * PS_PER_S).to_string(), "3 s");
        assert_eq!(Time::MAX.to_string(), "18446744.073709551615 s");
    }
}
