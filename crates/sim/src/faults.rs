//! Faults at simulated times: `FaultInjector`, a component that applies a fault schedule
//! (a scenario's `[[fault]]`s, or a seeded random campaign) to the timed fabric with
//! timers — cables down and up, hosts crashing and restarting — and logs each change
//! with its time. It knows the fabric and its wires, never a device: what a fault does to
//! traffic is what the fabric's routes and the network's dead wires make of it.

use fabric::describe::cable_text;
use fabric::faults::{cables_at, FaultAction, FaultSpec, FaultTarget};
use fabric::{CableId, HostId, Topology};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::component::Component;
use crate::net::{ComponentId, Event};
use crate::time::Time;
use crate::timed::TimedFabric;
use crate::timers::Timers;

/// One change of fabric state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    CableDown(CableId),
    CableUp(CableId),
    HostCrash(HostId),
    HostRestart(HostId),
}

/// A change at its time, and the fault (index in the schedule) it comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Planned {
    pub at: Time,
    pub change: Change,
    pub fault: usize,
}

/// Applies a fault schedule at its times; background work (always `finished`).
pub struct FaultInjector {
    plan: Vec<Planned>,
    names: Vec<String>,
    log: Vec<(Time, String)>,
    /// Each pending change's index in `plan`.
    timers: Timers<usize>,
}

impl FaultInjector {
    /// The changes of `faults`, in time order (a flap is a down and an up; a crash with
    /// a duration a crash and a restart); changes at the same time keep schedule order.
    pub fn new(faults: &[FaultSpec]) -> FaultInjector {
        let mut plan = Vec::new();
        for (i, f) in faults.iter().enumerate() {
            let at = Time::from_ps(f.at_ps);
            let back = f.duration_ps.map(|d| Time::from_ps(f.at_ps + d));
            match (&f.target, f.action) {
                (FaultTarget::Cables(cs), a) => {
                    for &c in cs {
                        let (first, then) = match a {
                            FaultAction::LinkUp => (Change::CableUp(c), None),
                            FaultAction::CablePull => (Change::CableDown(c), None),
                            _ => (Change::CableDown(c), back.map(|b| (b, Change::CableUp(c)))),
                        };
                        plan.push(Planned {
                            at,
                            change: first,
                            fault: i,
                        });
                        if let Some((b, ch)) = then {
                            plan.push(Planned {
                                at: b,
                                change: ch,
                                fault: i,
                            });
                        }
                    }
                }
                (&FaultTarget::Host(h), FaultAction::HostRestart) => plan.push(Planned {
                    at,
                    change: Change::HostRestart(h),
                    fault: i,
                }),
                (&FaultTarget::Host(h), _) => {
                    plan.push(Planned {
                        at,
                        change: Change::HostCrash(h),
                        fault: i,
                    });
                    if let Some(b) = back {
                        plan.push(Planned {
                            at: b,
                            change: Change::HostRestart(h),
                            fault: i,
                        });
                    }
                }
            }
        }
        plan.sort_by_key(|p| p.at);
        let names = faults
            .iter()
            .enumerate()
            .map(|(i, f)| f.name.clone().unwrap_or_else(|| format!("fault[{i}]")))
            .collect();
        FaultInjector {
            plan,
            names,
            log: Vec::new(),
            timers: Timers::new(),
        }
    }

    pub fn plan(&self) -> &[Planned] {
        &self.plan
    }

    /// Schedules every change (the injector must have been added as component `me`).
    pub fn start(&mut self, tf: &mut TimedFabric, me: ComponentId) {
        for (i, p) in self.plan.iter().enumerate() {
            self.timers.at(&mut tf.net, p.at, me, i);
        }
    }

    /// What was applied: (simulated time, what happened), in order.
    pub fn log(&self) -> &[(Time, String)] {
        &self.log
    }

    fn apply(&mut self, tf: &mut TimedFabric, p: Planned) {
        let topo = &tf.fabric.topo;
        let name = &self.names[p.fault];
        let text = match p.change {
            Change::CableDown(c) => {
                let was = tf.fabric.cable_up(c);
                let t = format!(
                    "link down: {} ({name}){}",
                    cable_text(topo, c),
                    if was { "" } else { "; it was down already" }
                );
                tf.set_cable_up(c, false);
                t
            }
            Change::CableUp(c) => {
                let was = tf.fabric.cable_up(c);
                let t = format!(
                    "link up: {} ({name}){}",
                    cable_text(topo, c),
                    if was {
                        "; it was up already: nothing changes"
                    } else {
                        ""
                    }
                );
                tf.set_cable_up(c, true);
                t
            }
            Change::HostCrash(h) => {
                let t = format!(
                    "host `{}` crashed ({name}){}",
                    topo.host(h).name,
                    if tf.fabric.host_up(h) {
                        ""
                    } else {
                        "; it was down already"
                    }
                );
                tf.crash_host(h);
                t
            }
            Change::HostRestart(h) => {
                let t = if tf.fabric.host_up(h) {
                    format!(
                        "host `{}` restart ({name}): it was up, nothing changes (memory kept)",
                        topo.host(h).name
                    )
                } else {
                    format!(
                        "host `{}` restarted cold ({name}): its memory is cleared",
                        topo.host(h).name
                    )
                };
                tf.restart_host(h);
                t
            }
        };
        self.log.push((tf.net.now(), text));
    }
}

impl Component<TimedFabric> for FaultInjector {
    fn notify(&mut self, tf: &mut TimedFabric, _me: ComponentId, event: Event) {
        if let Event::Timer(key) = event {
            let p = self.plan[self.timers.take(key)];
            self.apply(tf, p);
        }
    }
}

/// What a random campaign may do.
#[derive(Clone, Debug)]
pub struct Campaign {
    pub seed: u64,
    /// Faults start in `[from, to)` (picoseconds).
    pub from_ps: u64,
    pub to_ps: u64,
    pub count: usize,
    /// Adapters (`host.ntb`) whose cables may flap or be pulled.
    pub adapters: Vec<String>,
    /// Hosts that may crash (and restart).
    pub hosts: Vec<String>,
    /// The longest a flap or a crash lasts (picoseconds); `None`: a tenth of the span.
    pub longest_ps: Option<u64>,
    /// A pulled cable is plugged back in (a `link_up`) after a random time up to this
    /// (picoseconds); `None`: it stays pulled.
    pub replug_within_ps: Option<u64>,
}

/// A deterministic list of faults for a campaign — same seed, same list: link flaps of
/// random durations (the longest `longest_ps`, by default a tenth of the span), pulls
/// (re-plugged after a random time when `replug_within_ps` says so: a `link_up` named
/// after its pull) and crashes (each crash restarts after a random time), in time order,
/// named `random0`, `random1`, …
/// An adapter or host that does not exist is an error naming it.
pub fn campaign(topo: &Topology, c: &Campaign) -> Result<Vec<FaultSpec>, String> {
    let cables: Vec<(String, Vec<CableId>)> = c
        .adapters
        .iter()
        .map(|a| match cables_at(topo, a) {
            Some(cs) if !cs.is_empty() => Ok((a.clone(), cs)),
            _ => Err(format!("no adapter `{a}` at a cable")),
        })
        .collect::<Result<_, _>>()?;
    let hosts: Vec<(String, HostId)> = c
        .hosts
        .iter()
        .map(|h| {
            topo.host_by_name(h)
                .map(|id| (h.clone(), id))
                .ok_or_else(|| format!("no host `{h}`"))
        })
        .collect::<Result<_, _>>()?;
    if c.count > 0 && cables.is_empty() && hosts.is_empty() {
        return Err("a campaign needs adapters or hosts to hit".into());
    }
    if c.to_ps <= c.from_ps {
        return Err("a campaign's span must end after it starts".into());
    }
    let span = c.to_ps - c.from_ps;
    let longest = c.longest_ps.unwrap_or(span / 10).max(1000);
    if c.replug_within_ps.is_some_and(|r| r < 1000) {
        return Err("a campaign's re-plug time must be at least 1 ns".into());
    }
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(c.seed);
    let mut out = Vec::with_capacity(c.count);
    // Each pull's re-plug, with the pull's start time to name it after its pull.
    let mut replugs: Vec<(u64, FaultSpec)> = Vec::new();
    for _ in 0..c.count {
        let at_ps = c.from_ps + rng.random_range(0..span);
        let duration = rng.random_range(1000..=longest);
        // Links fail more often than hosts: 3 in 5 flaps, 1 in 5 pulls, 1 in 5 crashes.
        let roll = rng.random_range(0..5u32);
        let crash = !hosts.is_empty() && (cables.is_empty() || roll == 4);
        let spec = if crash {
            let (name, h) = &hosts[rng.random_range(0..hosts.len())];
            FaultSpec {
                name: None,
                at_ps,
                action: FaultAction::HostCrash,
                target_name: name.clone(),
                target: FaultTarget::Host(*h),
                duration_ps: Some(duration),
            }
        } else {
            let (name, cs) = &cables[rng.random_range(0..cables.len())];
            let pull = roll == 3;
            let replug = match c.replug_within_ps {
                Some(r) if pull => Some(rng.random_range(1000..=r)),
                _ => None,
            };
            if let Some(r) = replug {
                replugs.push((
                    at_ps,
                    FaultSpec {
                        name: None,
                        at_ps: at_ps + r,
                        action: FaultAction::LinkUp,
                        target_name: name.clone(),
                        target: FaultTarget::Cables(cs.clone()),
                        duration_ps: None,
                    },
                ));
            }
            FaultSpec {
                name: None,
                at_ps,
                action: if pull {
                    FaultAction::CablePull
                } else {
                    FaultAction::LinkDown
                },
                target_name: name.clone(),
                target: FaultTarget::Cables(cs.clone()),
                duration_ps: (!pull).then_some(duration),
            }
        };
        out.push(spec);
    }
    out.sort_by_key(|f| f.at_ps);
    for (i, f) in out.iter_mut().enumerate() {
        f.name = Some(format!("random{i}"));
    }
    for (pulled_at, mut r) in replugs {
        let pull = out
            .iter()
            .find(|f| {
                f.action == FaultAction::CablePull && f.target == r.target && f.at_ps == pulled_at
            })
            .and_then(|f| f.name.clone())
            .unwrap_or_default();
        r.name = Some(format!("{pull} re-plugged"));
        out.push(r);
    }
    out.sort_by_key(|f| f.at_ps);
    Ok(out)
}
