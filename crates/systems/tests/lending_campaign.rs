//! The lending side of issue 10's seeded fault campaign: a seeded stream of borrows
//! (exclusive and shared), returns, releases of exclusivity, uses of a borrowed device
//! (bytes stored through the shadow BAR and read back) and uses of dead handles, by two
//! borrowers against a lender's pool, while hundreds of seeded faults hit it — link flaps,
//! cable pulls re-plugged later, lender and borrower crashes with cold restarts.
//!
//! The control plane's reaction to a crash is the agents': the crashed host vanishes
//! (`host_vanished`: its borrows reclaimed, the devices it lent gone) and, restarted, it
//! rejoins (`host_rejoined`) and a lender lends its devices again. After every step the
//! test checks: no device is held exclusively by one borrow while another borrow of it
//! lives (a double lend); the borrows the cluster has are exactly the handles the
//! borrowers hold (a reclaim drops all of a crashed host's and nothing else); a down
//! host appears in no live borrow and its agent lists no peer; with no borrow live, no
//! adapter holds a window or requester entry. A use either moves its bytes or fails with
//! an error, and it fails exactly when a fault is on its way; a dead handle is refused.

mod common;

use std::collections::BTreeMap;

use common::*;
use fabric::faults::{FaultAction, FaultSpec};
use fabric::{CableId, Fabric, HostId, NtbId, Requester};
use host::Hosts;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use sim::faults::{campaign, Campaign, Change, FaultInjector};
use systems::smartio::{BorrowOptions, Borrowed, Cluster, Fdid, Lease, LendError};

/// One simulated step of the control-plane stream (faults are drawn on this clock).
const STEP_PS: u64 = 1_000_000;
const STEPS: u64 = 4000;

#[derive(Clone, Copy, Debug)]
struct Held {
    b: Borrowed,
    exclusive: bool,
}

#[derive(Debug, Default)]
struct Totals {
    faults: usize,
    changes_applied: usize,
    ops: u64,
    borrows: u64,
    returns: u64,
    releases: u64,
    uses_verified: u64,
    bytes_verified: u64,
    uses_failed_on_a_fault: u64,
    dead_handles_refused: u64,
    refused: BTreeMap<String, u64>,
    reclaimed: u64,
    gone_with_lender: u64,
    quiescent_checks: u64,
    double_lends: u64,
    silently_wrong: u64,
    unexpected: Vec<String>,
}

/// The variant of a refusal, to count refusals by kind.
fn kind(e: &LendError) -> String {
    let d = format!("{e:?}");
    d.split(|c: char| !c.is_alphanumeric())
        .next()
        .unwrap_or_default()
        .to_string()
}

struct Rig {
    f: Fabric,
    c: Cluster,
    lender: HostId,
    borrowers: [HostId; 2],
    devices: Vec<Fdid>,
    held: BTreeMap<HostId, Vec<Held>>,
    dead: Vec<Borrowed>,
    t: Totals,
}

impl Rig {
    fn lend_all(&mut self) {
        for &d in &self.devices {
            if let Err(e) = self.c.lend(d) {
                self.t.unexpected.push(format!("lending {d} again: {e}"));
            }
        }
    }

    /// Whether a fault is on the way between `host` and the lender: a crashed end or a
    /// dead cable between their adapters.
    fn fault_on_way(&self, host: HostId) -> bool {
        let f = &self.f;
        let cable = cable_between(f, host, self.lender);
        !f.host_up(host) || !f.host_up(self.lender) || f.cable_fault(cable).is_some()
    }

    fn apply(&mut self, ch: Change) {
        self.t.changes_applied += 1;
        match ch {
            Change::CableDown(c) => self.f.set_cable_up(c, false),
            Change::CableUp(c) => self.f.set_cable_up(c, true),
            Change::HostCrash(h) => {
                self.f.crash_host(h);
                // The agents notice at once: its borrows are reclaimed, what it lent is gone.
                let before = self.c.borrows().len();
                if let Err(e) = self.c.host_vanished(&mut self.f, h) {
                    self.t.unexpected.push(format!("host_vanished: {e}"));
                }
                let n = (before - self.c.borrows().len()) as u64;
                if h == self.lender {
                    self.t.gone_with_lender += n;
                    for hs in self.held.values_mut() {
                        self.dead.extend(hs.drain(..).map(|x| x.b));
                    }
                } else {
                    self.t.reclaimed += n;
                    let hs = self.held.entry(h).or_default();
                    self.dead.extend(hs.drain(..).map(|x| x.b));
                }
            }
            Change::HostRestart(h) => {
                let was_down = !self.f.host_up(h);
                self.f.restart_host(h);
                if was_down {
                    if let Err(e) = self.c.host_rejoined(h) {
                        self.t.unexpected.push(format!("host_rejoined: {e}"));
                    }
                    if h == self.lender {
                        self.lend_all();
                    }
                }
            }
        }
    }

    fn borrow(&mut self, host: HostId, fdid: Fdid, exclusive: bool) {
        let opts = if exclusive {
            BorrowOptions::exclusive()
        } else {
            BorrowOptions::shared()
        };
        match self.c.borrow(&mut self.f, host, fdid, opts) {
            Ok(b) => {
                self.t.borrows += 1;
                self.held
                    .entry(host)
                    .or_default()
                    .push(Held { b, exclusive });
            }
            Err(e) => self.refused(&e),
        }
    }

    fn refused(&mut self, e: &LendError) {
        if e.to_string().is_empty() {
            self.t.unexpected.push(format!("an empty error: {e:?}"));
        }
        *self.t.refused.entry(kind(e)).or_default() += 1;
    }

    /// Stores a pattern through the shadow BAR and reads it back; checks the real BAR.
    fn use_device(&mut self, host: HostId, i: usize, step: u64) {
        let h = self.held[&host][i];
        let bars = match self.c.shadow_bars(&self.f, h.b) {
            Ok(b) => b,
            Err(e) => {
                self.t
                    .unexpected
                    .push(format!("a held borrow refused its BARs: {e}"));
                return;
            }
        };
        let Some(bar) = bars.iter().find(|s| s.size >= 0x4000) else {
            self.t.unexpected.push("no BAR to use".into());
            return;
        };
        // A window of the BAR of its own per borrower, so shared borrowers do not meet.
        let off = 0x1000 + host.index() as u64 * 0x100;
        let data: Vec<u8> = (0..64u64)
            .map(|k| (step.wrapping_mul(31) + k * 7 + host.index() as u64) as u8)
            .collect();
        let cpu = Requester::Cpu { host, package: 0 };
        let faulted = self.fault_on_way(host);
        let stored = self.f.store(cpu, bar.bus + off, &data);
        let mut got = vec![0u8; 64];
        let loaded = self.f.load(cpu, bar.bus + off, &mut got);
        match (faulted, stored, loaded) {
            (false, Ok(()), Ok(())) => {
                let dev = self.c.function(&self.f, h.b).expect("live");
                let mut real = vec![0u8; 64];
                self.f.peek_bar(dev, bar.index, off, &mut real);
                if got != data || real != data {
                    self.t.silently_wrong += 1;
                } else {
                    self.t.uses_verified += 1;
                    self.t.bytes_verified += 64;
                }
            }
            (true, Err(_), Err(_)) => self.t.uses_failed_on_a_fault += 1,
            (fa, s, l) => self.t.unexpected.push(format!(
                "use by host {host}: fault on the way {fa}, store {s:?}, load {l:?}"
            )),
        }
    }

    fn use_dead(&mut self, b: Borrowed) {
        let mut buf = [0u8; 2];
        match self.c.config_read(&mut self.f, b, 0, &mut buf) {
            Err(LendError::NotHeld { .. }) => self.t.dead_handles_refused += 1,
            Err(e) => self
                .t
                .unexpected
                .push(format!("a dead handle refused oddly: {e}")),
            Ok(()) => self.t.silently_wrong += 1,
        }
        match self.c.return_device(&mut self.f, b) {
            Err(LendError::NotHeld { .. }) => self.t.dead_handles_refused += 1,
            r => self
                .t
                .unexpected
                .push(format!("returning a dead handle: {r:?}")),
        }
    }

    /// The invariants after a step.
    fn check(&mut self) {
        let live = self.c.borrows();
        for &d in &self.devices {
            let of: Vec<&Borrowed> = live.iter().filter(|b| b.fdid == d).collect();
            let lease = self.c.device(d).map(|x| x.lease.clone());
            let exclusive_held = self
                .held
                .values()
                .flatten()
                .filter(|h| h.b.fdid == d && h.exclusive)
                .count();
            if matches!(lease, Ok(Lease::Exclusive(_))) && of.len() > 1
                || exclusive_held > 1
                || exclusive_held == 1 && of.len() > 1
            {
                self.t.double_lends += 1;
            }
        }
        let mut model: Vec<Borrowed> = self.held.values().flatten().map(|h| h.b).collect();
        model.sort();
        let mut cl = live.clone();
        cl.sort();
        if model != cl {
            self.t.unexpected.push(format!(
                "the cluster's borrows {cl:?} are not the handles held {model:?}"
            ));
        }
        for h in (0..self.f.topo.hosts.len()).map(HostId::from_index) {
            let peers = self.c.agent(h).peers().len();
            if !self.f.host_up(h) {
                let lender_down = h == self.lender && !live.is_empty();
                if live.iter().any(|b| b.host == h) || lender_down || peers > 0 {
                    self.t
                        .unexpected
                        .push(format!("host {h} is down but still in borrows"));
                }
            } else if peers != self.held.get(&h).map_or(0, Vec::len) {
                self.t
                    .unexpected
                    .push(format!("host {h}'s agent lists {peers} peers"));
            }
        }
        if live.is_empty() {
            self.t.quiescent_checks += 1;
            let ntbs: Vec<_> = (0..self.f.topo.ntbs.len()).map(NtbId::from_index).collect();
            let held = Hosts::with(&mut self.f, |hs, _| {
                ntbs.iter()
                    .map(|&n| {
                        hs.ntb(n)
                            .map_or(0, |d| d.windows_held() + d.requesters_held())
                    })
                    .sum::<usize>()
            });
            let programmed: usize = ntbs
                .iter()
                .map(|&n| self.f.ntb_state(n).programmed_windows())
                .sum();
            if held + programmed > 0 {
                self.t.unexpected.push(format!(
                    "no borrow lives, yet adapters hold {held} entries and {programmed} windows"
                ));
            }
        }
    }
}

fn cable_between(f: &Fabric, a: HostId, b: HostId) -> CableId {
    let name = |h: HostId| format!("{}.ntb", f.topo.host(h).name);
    let at_a = fabric::faults::cables_at(&f.topo, &name(a)).unwrap();
    let at_b = fabric::faults::cables_at(&f.topo, &name(b)).unwrap();
    *at_a.iter().find(|c| at_b.contains(c)).expect("cabled")
}

fn run(seed: u64) -> Totals {
    let f = fabric(false, true);
    let (lender, borrowers) = (
        host(&f, "lender"),
        [host(&f, "borrower"), host(&f, "other")],
    );
    let c = Cluster::new(&f);
    let devices = vec![
        c.fdid_by_name(&f, "lender.gpu").unwrap(),
        c.fdid_by_name(&f, "lender.nvme").unwrap(),
    ];
    let faults: Vec<FaultSpec> = campaign(
        &f.topo,
        &Campaign {
            seed,
            from_ps: 10 * STEP_PS,
            to_ps: STEPS * STEP_PS,
            count: 330,
            adapters: vec![
                "lender.ntb".into(),
                "borrower.ntb".into(),
                "other.ntb".into(),
            ],
            hosts: vec!["lender".into(), "borrower".into(), "other".into()],
            longest_ps: Some(40 * STEP_PS),
            replug_within_ps: Some(100 * STEP_PS),
        },
    )
    .unwrap();
    let plan = FaultInjector::new(&faults).plan().to_vec();
    let mut r = Rig {
        f,
        c,
        lender,
        borrowers,
        devices,
        held: BTreeMap::new(),
        dead: Vec::new(),
        t: Totals {
            faults: faults
                .iter()
                .filter(|f| f.action != FaultAction::LinkUp)
                .count(),
            ..Totals::default()
        },
    };
    r.lend_all();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut next = 0;
    for step in 0..STEPS {
        while next < plan.len() && plan[next].at.as_ps() <= step * STEP_PS {
            r.apply(plan[next].change);
            next += 1;
        }
        let host = r.borrowers[rng.random_range(0..2)];
        r.t.ops += 1;
        let n = r.held.get(&host).map_or(0, Vec::len);
        let roll = rng.random_range(0..20u32);
        if !r.f.host_up(host) {
            // A crashed host runs nothing; the lender may still be asked to borrow.
            if roll == 0 {
                let d = r.devices[rng.random_range(0..2)];
                r.borrow(r.lender, d, false);
            }
        } else if roll < 6 || n == 0 && roll < 14 {
            let d = r.devices[rng.random_range(0..2)];
            r.borrow(host, d, roll < 2);
        } else if roll < 9 && n > 0 {
            let i = rng.random_range(0..n);
            let h = r.held.get_mut(&host).expect("n > 0").remove(i);
            match r.c.return_device(&mut r.f, h.b) {
                Ok(()) => {
                    r.t.returns += 1;
                    r.dead.push(h.b);
                }
                Err(e) => r.t.unexpected.push(format!("returning a held borrow: {e}")),
            }
        } else if roll < 10 && n > 0 {
            let i = rng.random_range(0..n);
            let h = r.held[&host][i];
            match r.c.release_exclusive(&r.f, h.b) {
                Ok(()) => {
                    r.t.releases += 1;
                    r.held.get_mut(&host).expect("n > 0")[i].exclusive = false;
                }
                Err(e) => r.refused(&e),
            }
        } else if roll < 17 && n > 0 {
            let i = rng.random_range(0..n);
            r.use_device(host, i, step);
        } else if !r.dead.is_empty() {
            let b = r.dead[rng.random_range(0..r.dead.len())];
            r.use_dead(b);
        }
        r.check();
    }
    // Everything returned at the end: nothing left held anywhere.
    while next < plan.len() {
        r.apply(plan[next].change);
        next += 1;
    }
    for h in (0..r.f.topo.hosts.len()).map(HostId::from_index) {
        if !r.f.host_up(h) {
            r.apply(Change::HostRestart(h));
        }
    }
    let all: Vec<Held> = r.held.values_mut().flat_map(|v| v.drain(..)).collect();
    for h in all {
        if let Err(e) = r.c.return_device(&mut r.f, h.b) {
            r.t.unexpected.push(format!("final return: {e}"));
        }
    }
    r.check();
    r.t
}

#[test]
fn a_seeded_lending_campaign_never_double_lends_nor_leaks() {
    let t = run(10);
    println!("lending campaign: {t:#?}");
    assert!(t.unexpected.is_empty(), "{:#?}", t.unexpected);
    assert_eq!(t.double_lends, 0);
    assert_eq!(t.silently_wrong, 0);
    assert!(t.faults >= 300, "{t:?}");
    // The stream did what it is for: every kind of step, and crashes that took borrows.
    assert!(
        t.borrows >= 300 && t.returns >= 100 && t.releases >= 10,
        "{t:?}"
    );
    assert!(
        t.uses_verified >= 300 && t.uses_failed_on_a_fault >= 20,
        "{t:?}"
    );
    assert!(t.dead_handles_refused >= 100, "{t:?}");
    assert!(t.reclaimed >= 10 && t.gone_with_lender >= 10, "{t:?}");
    for k in [
        "ExclusiveHeld",
        "SharedHeld",
        "Gone",
        "HostVanished",
        "Invalid",
    ] {
        assert!(t.refused.get(k).is_some_and(|&n| n > 0), "no {k}: {t:?}");
    }
    assert!(t.quiescent_checks >= 10, "{t:?}");
}

#[test]
fn the_lending_campaign_is_the_same_for_a_seed() {
    let (a, b) = (run(3), run(3));
    assert_eq!(format!("{a:?}"), format!("{b:?}"));
    assert_ne!(format!("{a:?}"), format!("{:?}", run(4)));
}
