//! MSI-X interrupt moderation of a receive completion queue, as the driver sets it
//! (`ethtool -C`): off (an interrupt per completion), static (`rx-usecs` / `rx-frames`)
//! or adaptive (`adaptive-rx on`: the kernel's DIM library picks the pair).
//!
//! The moderation timer starts at the first unsignalled completion (mlx5 on a device
//! with `cq_period_start_from_cqe`, as ConnectX-4 has: the driver then uses
//! `MLX5_CQ_PERIOD_MODE_START_FROM_CQE` for receive CQs, `mlx5e_build_nic_params` in
//! drivers/net/ethernet/mellanox/mlx5/core/en_main.c), so the adaptive profiles are DIM's
//! CQE-based receive table.
//!
//! DIM (lib/dim/net_dim.c, lib/dim/dim.c, include/linux/dim.h): after each NAPI poll
//! that re-arms the queue the driver hands it a sample (interrupts, packets, bytes, time);
//! every `DIM_NEVENTS` interrupts it compares the window's bytes/ms, then packets/ms,
//! then interrupts/ms with the previous window's (a change of more than 10 % counts) and
//! steps one profile left (shorter timer) or right (longer) while that improves, turns
//! when it does not, and parks on a profile it has bracketed or at an edge.

use sim::Time;

use super::NicParams;

/// How the driver moderates a queue's interrupts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CoalesceMode {
    /// An interrupt per completion (`rx-usecs 0 rx-frames 1`).
    Off,
    /// The device model's `rx-usecs` / `rx-frames`.
    Static,
    /// DIM steps through the CQE-based receive profiles.
    Adaptive,
}

impl CoalesceMode {
    pub const NAMES: [&'static str; 3] = ["off", "static", "adaptive"];

    /// `off`, `static` or `adaptive`; an error naming the choices.
    pub fn parse(s: &str) -> Result<CoalesceMode, String> {
        match s {
            "off" => Ok(CoalesceMode::Off),
            "static" => Ok(CoalesceMode::Static),
            "adaptive" => Ok(CoalesceMode::Adaptive),
            other => Err(format!(
                "coalescing = \"{other}\": use \"off\", \"static\" or \"adaptive\""
            )),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            CoalesceMode::Off => "off",
            CoalesceMode::Static => "static",
            CoalesceMode::Adaptive => "adaptive",
        }
    }
}

/// One moderation setting: an interrupt `usecs` after the first unsignalled completion
/// or at `frames` completions, whichever comes first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Moderation {
    pub usecs: Time,
    pub frames: u32,
}

/// The driver's setting for a host's queues: the mode and the static pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Coalescing {
    pub mode: CoalesceMode,
    /// What `Static` uses: the device model's defaults.
    pub fixed: Moderation,
}

impl Coalescing {
    /// Static moderation with the NIC model's `nic_coalesce_ns` / `nic_coalesce_frames`.
    pub fn of(p: &NicParams) -> Coalescing {
        Coalescing {
            mode: CoalesceMode::Static,
            fixed: Moderation {
                usecs: p.coalesce,
                frames: p.coalesce_frames,
            },
        }
    }
}

/// DIM's CQE-based receive profiles, (µs, packets): `NET_DIM_RX_CQE_PROFILES` of
/// lib/dim/net_dim.c.
pub const RX_CQE_PROFILES: [(u64, u32); 5] = [(2, 256), (8, 128), (16, 64), (32, 64), (64, 64)];
/// The profile DIM starts on (`NET_DIM_DEF_PROFILE_CQE`).
pub const DEF_PROFILE_CQE: usize = 1;
/// Interrupts per DIM decision window (`DIM_NEVENTS`, include/linux/dim.h).
pub const DIM_NEVENTS: u64 = 64;

/// What the driver hands DIM after a poll: its counters and the time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DimSample {
    pub time: Time,
    pub events: u64,
    pub packets: u64,
    pub bytes: u64,
}

/// One window's rates per millisecond (`struct dim_stats`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Stats {
    ppms: u64,
    bpms: u64,
    epms: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tune {
    ParkingOnTop,
    ParkingTired,
    GoingRight,
    GoingLeft,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cmp {
    Worse,
    Same,
    Better,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    Stepped,
    TooTired,
    OnEdge,
}

/// DIM's state for one queue (`struct dim`, zero-initialised as the driver allocates it
/// but for the starting profile).
#[derive(Clone, Debug)]
pub struct Dim {
    profile_ix: usize,
    tune: Tune,
    steps_left: u32,
    steps_right: u32,
    tired: u32,
    prev: Stats,
    /// The window's first sample; `None` in `DIM_START_MEASURE`.
    start: Option<DimSample>,
}

impl Default for Dim {
    fn default() -> Dim {
        Dim {
            profile_ix: DEF_PROFILE_CQE,
            tune: Tune::ParkingOnTop,
            steps_left: 0,
            steps_right: 0,
            tired: 0,
            prev: Stats::default(),
            start: None,
        }
    }
}

/// `IS_SIGNIFICANT_DIFF`: more than 10 % apart.
fn significant(val: u64, reference: u64) -> bool {
    reference != 0 && 100 * val.abs_diff(reference) / reference > 10
}

fn compare(curr: &Stats, prev: &Stats) -> Cmp {
    let by = |c: u64, p: u64, more_is_better: bool| {
        if (c > p) == more_is_better {
            Cmp::Better
        } else {
            Cmp::Worse
        }
    };
    if prev.bpms == 0 {
        return if curr.bpms > 0 {
            Cmp::Better
        } else {
            Cmp::Same
        };
    }
    if significant(curr.bpms, prev.bpms) {
        return by(curr.bpms, prev.bpms, true);
    }
    if prev.ppms == 0 {
        return if curr.ppms > 0 {
            Cmp::Better
        } else {
            Cmp::Same
        };
    }
    if significant(curr.ppms, prev.ppms) {
        return by(curr.ppms, prev.ppms, true);
    }
    if prev.epms == 0 {
        return Cmp::Same;
    }
    if significant(curr.epms, prev.epms) {
        // Fewer interrupts for the same traffic is better.
        return by(curr.epms, prev.epms, false);
    }
    Cmp::Same
}

impl Dim {
    /// The profile in use, 0 (shortest timer) ..= 4.
    pub fn profile_ix(&self) -> usize {
        self.profile_ix
    }

    pub fn moderation(&self) -> Moderation {
        let (us, frames) = RX_CQE_PROFILES[self.profile_ix];
        Moderation {
            usecs: Time::from_us(us),
            frames,
        }
    }

    /// `net_dim`: a sample after a poll. Whether the profile changed (the driver then
    /// applies it; the next sample starts a new window).
    pub fn sample(&mut self, end: DimSample) -> bool {
        let Some(start) = self.start else {
            self.start = Some(end);
            return false;
        };
        if end.events - start.events < DIM_NEVENTS {
            return false;
        }
        let Some(curr) = Self::stats(&start, &end) else {
            self.start = Some(end);
            return false;
        };
        if self.decision(&curr) {
            // DIM_APPLY_NEW_PROFILE, then DIM_START_MEASURE once the work has run.
            self.start = None;
            return true;
        }
        self.start = Some(end);
        false
    }

    /// `dim_calc_stats`: per-millisecond rates, rounded up; none over an empty span.
    fn stats(start: &DimSample, end: &DimSample) -> Option<Stats> {
        let us = (end.time - start.time).as_ps() / 1_000_000;
        if us == 0 {
            return None;
        }
        let per_ms = |n: u64| (n * 1000).div_ceil(us);
        Some(Stats {
            ppms: per_ms(end.packets - start.packets),
            bpms: per_ms(end.bytes - start.bytes),
            epms: per_ms(DIM_NEVENTS),
        })
    }

    /// `net_dim_decision`: whether the profile changed.
    fn decision(&mut self, curr: &Stats) -> bool {
        let prev_tune = self.tune;
        let prev_ix = self.profile_ix;
        match self.tune {
            Tune::ParkingOnTop => {
                if compare(curr, &self.prev) != Cmp::Same {
                    self.exit_parking();
                }
            }
            Tune::ParkingTired => {
                self.tired -= 1;
                if self.tired == 0 {
                    self.exit_parking();
                }
            }
            Tune::GoingRight | Tune::GoingLeft => {
                if compare(curr, &self.prev) != Cmp::Better {
                    self.turn();
                }
                if self.on_top() {
                    self.park_on_top();
                } else {
                    match self.step() {
                        Step::OnEdge => self.park_on_top(),
                        Step::TooTired => self.park_tired(),
                        Step::Stepped => {}
                    }
                }
            }
        }
        if prev_tune != Tune::ParkingOnTop || self.tune != Tune::ParkingOnTop {
            self.prev = *curr;
        }
        self.profile_ix != prev_ix
    }

    /// `net_dim_step`.
    fn step(&mut self) -> Step {
        if self.tired == 2 * RX_CQE_PROFILES.len() as u32 {
            return Step::TooTired;
        }
        match self.tune {
            Tune::ParkingOnTop | Tune::ParkingTired => {}
            Tune::GoingRight => {
                if self.profile_ix == RX_CQE_PROFILES.len() - 1 {
                    return Step::OnEdge;
                }
                self.profile_ix += 1;
                self.steps_right += 1;
            }
            Tune::GoingLeft => {
                if self.profile_ix == 0 {
                    return Step::OnEdge;
                }
                self.profile_ix -= 1;
                self.steps_left += 1;
            }
        }
        self.tired += 1;
        Step::Stepped
    }

    fn exit_parking(&mut self) {
        self.tune = if self.profile_ix > 0 {
            Tune::GoingLeft
        } else {
            Tune::GoingRight
        };
        self.step();
    }

    /// `dim_on_top`: a profile bracketed by a turn right after steps the other way.
    fn on_top(&self) -> bool {
        match self.tune {
            Tune::ParkingOnTop | Tune::ParkingTired => true,
            Tune::GoingRight => self.steps_left > 1 && self.steps_right == 1,
            Tune::GoingLeft => self.steps_right > 1 && self.steps_left == 1,
        }
    }

    fn turn(&mut self) {
        match self.tune {
            Tune::ParkingOnTop | Tune::ParkingTired => {}
            Tune::GoingRight => {
                self.tune = Tune::GoingLeft;
                self.steps_left = 0;
            }
            Tune::GoingLeft => {
                self.tune = Tune::GoingRight;
                self.steps_right = 0;
            }
        }
    }

    fn park_on_top(&mut self) {
        self.steps_right = 0;
        self.steps_left = 0;
        self.tired = 0;
        self.tune = Tune::ParkingOnTop;
    }

    fn park_tired(&mut self) {
        self.steps_right = 0;
        self.steps_left = 0;
        self.tune = Tune::ParkingTired;
    }
}

/// Interrupt moderation of one completion queue under the driver's [`Coalescing`]:
/// fire at the setting's frames or its delay after the first unsignalled completion.
#[derive(Clone, Debug, Default)]
pub struct Coalescer {
    pending: u32,
    /// When the armed timer fires, if armed.
    pub timer: Option<Time>,
    dim: Dim,
    /// Interrupts so far (the queue's event counter) and since the last reset.
    events: u64,
    counted: u64,
}

impl Coalescer {
    /// The moderation in force under `c`.
    pub fn moderation(&self, c: &Coalescing) -> Moderation {
        match c.mode {
            CoalesceMode::Off => Moderation {
                usecs: Time::ZERO,
                frames: 1,
            },
            CoalesceMode::Static => c.fixed,
            CoalesceMode::Adaptive => self.dim.moderation(),
        }
    }

    /// A completion at `at` while interrupts are on: `Some(t)` when an interrupt must be
    /// raised at t now (the frame threshold) or a timer armed for t (the caller
    /// schedules it once).
    pub fn completion(&mut self, at: Time, c: &Coalescing) -> Option<Time> {
        let m = self.moderation(c);
        self.pending += 1;
        if self.pending >= m.frames {
            self.pending = 0;
            self.timer = None;
            return Some(at);
        }
        if self.timer.is_none() {
            let t = at + m.usecs;
            self.timer = Some(t);
            return Some(t);
        }
        None
    }

    /// The interrupt fired (or NAPI polled everything): start counting again.
    pub fn clear(&mut self) {
        self.pending = 0;
        self.timer = None;
    }

    /// NAPI finished the poll an interrupt started and re-arms the queue at `at`, having
    /// received `packets` frames of `bytes` so far: one more event, DIM's sample
    /// (adaptive only), and the count starts again.
    pub fn rearm(&mut self, at: Time, c: &Coalescing, packets: u64, bytes: u64) {
        self.events += 1;
        self.counted += 1;
        if c.mode == CoalesceMode::Adaptive {
            self.dim.sample(DimSample {
                time: at,
                events: self.events,
                packets,
                bytes,
            });
        }
        self.clear();
    }

    /// Interrupts since the last [`Coalescer::reset_count`].
    pub fn interrupts(&self) -> u64 {
        self.counted
    }

    pub fn reset_count(&mut self) {
        self.counted = 0;
    }

    /// DIM's state (its profile when adaptive).
    pub fn dim(&self) -> &Dim {
        &self.dim
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A window of 64 interrupts over `us` µs carrying `packets` of `bytes` each.
    fn window(d: &mut Dim, s: &mut DimSample, us: u64, packets: u64, bytes: u64) -> bool {
        s.time += Time::from_us(us);
        s.events += DIM_NEVENTS;
        s.packets += packets;
        s.bytes += packets * bytes;
        d.sample(*s)
    }

    #[test]
    fn dim_walks_left_while_shorter_timers_raise_the_byte_rate_and_parks_at_the_edge() {
        let mut d = Dim::default();
        let mut s = DimSample::default();
        assert!(!d.sample(s), "the first sample only starts the window");
        assert_eq!(d.moderation().usecs, Time::from_us(8));
        // A first window against no history is better: leave parking leftwards.
        assert!(window(&mut d, &mut s, 1000, 1000, 100));
        assert_eq!(d.profile_ix(), 0);
        assert_eq!(d.moderation().frames, 256);
        d.sample(s); // the new profile's window starts
                     // Better again (+20 % bytes/ms) at the left edge: park on top there.
        assert!(!window(&mut d, &mut s, 1000, 1200, 100));
        assert_eq!((d.profile_ix(), d.tune), (0, Tune::ParkingOnTop));
        // Parked: a window within 10 % of the last leaves it parked.
        assert!(!window(&mut d, &mut s, 1000, 1250, 100));
        assert_eq!(d.tune, Tune::ParkingOnTop);
        // A significant change (here a drop) makes it search again, rightwards from 0.
        assert!(window(&mut d, &mut s, 1000, 600, 100));
        assert_eq!((d.profile_ix(), d.tune), (1, Tune::GoingRight));
    }

    #[test]
    fn dim_turns_when_a_step_makes_things_worse_and_parks_on_the_bracketed_profile() {
        let mut d = Dim::default();
        let mut s = DimSample::default();
        d.sample(s);
        // Leave parking leftwards (to 0), then a worse window there: turn right (to 1).
        assert!(window(&mut d, &mut s, 1000, 1000, 100));
        d.sample(s);
        assert!(window(&mut d, &mut s, 1000, 500, 100));
        assert_eq!((d.profile_ix(), d.tune), (1, Tune::GoingRight));
        d.sample(s);
        // Better at 1 (the bytes came back): keep going right, to 2.
        assert!(window(&mut d, &mut s, 1000, 1000, 100));
        assert_eq!(d.profile_ix(), 2);
        d.sample(s);
        // Worse at 2: turn left, back to 1.
        assert!(window(&mut d, &mut s, 1000, 700, 100));
        assert_eq!((d.profile_ix(), d.tune), (1, Tune::GoingLeft));
        d.sample(s);
        // Better at 1 again: one step left after two right brackets it, so park there.
        assert!(!window(&mut d, &mut s, 1000, 1000, 100));
        assert_eq!((d.profile_ix(), d.tune), (1, Tune::ParkingOnTop));
    }

    #[test]
    fn dim_decides_only_every_64_interrupts() {
        let mut d = Dim::default();
        let mut s = DimSample::default();
        d.sample(s);
        s.time = Time::from_us(1000);
        s.events = DIM_NEVENTS - 1;
        s.packets = 1000;
        s.bytes = 100_000;
        assert!(!d.sample(s));
        assert_eq!(d.profile_ix(), DEF_PROFILE_CQE);
        s.events = DIM_NEVENTS;
        assert!(d.sample(s));
    }

    #[test]
    fn the_mode_picks_the_moderation() {
        let c = |mode| Coalescing {
            mode,
            fixed: Moderation {
                usecs: Time::from_us(8),
                frames: 3,
            },
        };
        let t = Time::from_us(10);
        let mut q = Coalescer::default();
        assert_eq!(q.completion(t, &c(CoalesceMode::Off)), Some(t));
        let mut q = Coalescer::default();
        let s = c(CoalesceMode::Static);
        assert_eq!(q.completion(t, &s), Some(t + Time::from_us(8)));
        assert_eq!(q.completion(t, &s), None);
        assert_eq!(
            q.completion(t, &s),
            Some(t),
            "the third frame fires at once"
        );
        let mut q = Coalescer::default();
        let a = c(CoalesceMode::Adaptive);
        assert_eq!(q.completion(t, &a), Some(t + Time::from_us(8)));
        assert_eq!(CoalesceMode::parse("adaptive"), Ok(CoalesceMode::Adaptive));
        assert!(CoalesceMode::parse("dynamic")
            .unwrap_err()
            .contains("\"off\""));
    }
}
