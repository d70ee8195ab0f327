//! The driver of one flow under thread migration (docs/hardware.md §1): a standard NIC's
//! per-netdev ARFS, or the IOctopus team driver over an octoNIC. Both learn where the
//! flow is consumed from the stack's ARFS callback and change their rules from a worker
//! (Linux runs `ndo_rx_flow_steer`'s table update in a work item, not in the callback);
//! the octoNIC's worker also moves the flow's MPFS rule to the PF local to the new core.
//! Rules no frame has hit for the idle time expire. Transmits go through the PF local to
//! the sending core, switching only when nothing of the flow is in flight on the old
//! queue (`ooo_okay`), so the flow's own packets cannot overtake each other.

use std::collections::HashMap;

use devices::nic::{FiveTuple, Steering, SteeringMode};
use fabric::NetStackCosts;
use host::net::migration::{FlowDriver, RxQueue};
use sim::Time;

use super::{steer_flow, tx_pf};

/// The driver's timing, from the platform's `[platform.X.netstack]` table.
#[derive(Clone, Copy, Debug)]
pub struct TeamTiming {
    /// From the ARFS callback until the worker's rule is in the NIC.
    pub rule_update: Time,
    /// A rule no frame has hit for this long is removed.
    pub idle_expiry: Time,
}

impl TeamTiming {
    /// `flow_rule_update_ns` and `flow_rule_expiry_ns` of a platform's stack costs.
    pub fn of(costs: &NetStackCosts) -> TeamTiming {
        let ns = |x: f64| Time::from_ps((x * 1000.0).round() as u64);
        TeamTiming {
            rule_update: ns(costs.flow_rule_update_ns),
            idle_expiry: ns(costs.flow_rule_expiry_ns),
        }
    }
}

/// A rule of the flow the NIC holds: where, and when a frame last hit it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Rule {
    /// The multi-PF switch's flow → PF rule.
    Mpfs,
    /// PF `n`'s ARFS flow → queue rule.
    Arfs(usize),
}

/// One flow's receive rules and transmit queue choice.
#[derive(Clone, Debug)]
pub struct TeamDriver {
    pub steering: Steering,
    flow: FiveTuple,
    netdev_pf: usize,
    pf_sockets: Vec<u32>,
    timing: TeamTiming,
    /// A callback's update waiting for the worker: when, to which socket and queue.
    pending: Option<(Time, u32, u16)>,
    last_hit: HashMap<Rule, Time>,
    /// Worker runs that changed a rule, and rules expired (with when).
    pub rule_updates: u64,
    pub expired: Vec<(Time, Rule)>,
    /// Transmit PF, when its last packet leaves, transmits per PF, queue switches.
    tx_pf: usize,
    tx_busy_until: Time,
    pub tx_per_pf: Vec<u64>,
    pub tx_switches: u64,
}

/// The PF whose ARFS table holds a flow's rule when the flow lands on `pf`: that PF's
/// own, except on Linux's multi-PF netdev, whose rules all live in the primary PF's table
/// (one rule per flow, retargeted in place to another PF's channel).
fn arfs_table(mode: SteeringMode, pf: usize) -> usize {
    match mode {
        SteeringMode::LinuxMultiPf => 0,
        _ => pf,
    }
}

impl TeamDriver {
    /// The driver of `flow` on a NIC of `steering.mode`, the flow consumed at first on
    /// a core of `socket` reading `queue`.
    pub fn new(
        mut steering: Steering,
        flow: FiveTuple,
        socket: u32,
        queue: u16,
        netdev_pf: usize,
        pf_sockets: &[u32],
        timing: TeamTiming,
    ) -> TeamDriver {
        let pf = steer_flow(&mut steering, flow, socket, queue, netdev_pf, pf_sockets);
        let mut last_hit = HashMap::from([(Rule::Arfs(arfs_table(steering.mode, pf)), Time::ZERO)]);
        if steering.mode == SteeringMode::OctoNic {
            last_hit.insert(Rule::Mpfs, Time::ZERO);
        }
        let tx = tx_pf(steering.mode, netdev_pf, socket, pf_sockets);
        TeamDriver {
            tx_per_pf: vec![0; pf_sockets.len()],
            steering,
            flow,
            netdev_pf,
            pf_sockets: pf_sockets.to_vec(),
            timing,
            pending: None,
            last_hit,
            rule_updates: 0,
            expired: Vec::new(),
            tx_pf: tx,
            tx_busy_until: Time::ZERO,
            tx_switches: 0,
        }
    }

    /// The rules the NIC holds for the flow now.
    pub fn rules(&self) -> Vec<Rule> {
        let mut r: Vec<Rule> = self.last_hit.keys().copied().collect();
        r.sort_by_key(|r| match r {
            Rule::Mpfs => 0,
            Rule::Arfs(n) => n + 1,
        });
        r
    }

    fn has_rule(&self, r: Rule) -> bool {
        match r {
            Rule::Mpfs => self.steering.mpfs.contains_key(&self.flow),
            Rule::Arfs(n) => self.steering.pfs[n].arfs.contains_key(&self.flow),
        }
    }
}

impl FlowDriver for TeamDriver {
    fn rx_flow_steer(&mut self, t: Time, socket: u32, queue: RxQueue) {
        self.pending = Some((t + self.timing.rule_update, socket, queue.index));
    }

    fn next_work(&self) -> Option<Time> {
        let expiry = self.last_hit.values().map(|&h| h + self.timing.idle_expiry);
        self.pending
            .map(|(at, ..)| at)
            .into_iter()
            .chain(expiry)
            .min()
    }

    fn work(&mut self, t: Time) {
        if let Some((at, socket, queue)) = self.pending {
            if at <= t {
                self.pending = None;
                let pf = steer_flow(
                    &mut self.steering,
                    self.flow,
                    socket,
                    queue,
                    self.netdev_pf,
                    &self.pf_sockets,
                );
                self.rule_updates += 1;
                self.last_hit
                    .insert(Rule::Arfs(arfs_table(self.steering.mode, pf)), t);
                if self.steering.mode == SteeringMode::OctoNic {
                    self.last_hit.insert(Rule::Mpfs, t);
                }
            }
        }
        let idle: Vec<Rule> = self
            .last_hit
            .iter()
            .filter(|(_, &h)| h + self.timing.idle_expiry <= t)
            .map(|(&r, _)| r)
            .collect();
        for r in idle {
            self.last_hit.remove(&r);
            debug_assert!(self.has_rule(r));
            match r {
                Rule::Mpfs => {
                    self.steering.mpfs.remove(&self.flow);
                }
                Rule::Arfs(n) => {
                    self.steering.pfs[n].arfs.remove(&self.flow);
                }
            }
            self.expired.push((t, r));
        }
    }

    fn rx_steer(&mut self, t: Time) -> (usize, u16) {
        let (pf, q) = self.steering.steer(&self.flow, self.netdev_pf as u8);
        let pf = pf as usize;
        if self.steering.mode == SteeringMode::OctoNic && self.last_hit.contains_key(&Rule::Mpfs) {
            self.last_hit.insert(Rule::Mpfs, t);
        }
        let arfs = Rule::Arfs(arfs_table(self.steering.mode, pf));
        if self.last_hit.contains_key(&arfs) {
            self.last_hit.insert(arfs, t);
        }
        (pf, q)
    }

    fn tx_pf(&mut self, t: Time, socket: u32, done: Time) -> usize {
        let want = tx_pf(self.steering.mode, self.netdev_pf, socket, &self.pf_sockets);
        // ooo_okay: the flow may change queue only when nothing of it is still queued on
        // the old one, so the new queue cannot send ahead of it.
        if want != self.tx_pf && t >= self.tx_busy_until {
            self.tx_pf = want;
            self.tx_switches += 1;
        }
        self.tx_busy_until = self.tx_busy_until.max(done);
        self.tx_per_pf[self.tx_pf] += 1;
        self.tx_pf
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FLOW: FiveTuple = FiveTuple {
        src_ip: 1,
        dst_ip: 2,
        src_port: 3,
        dst_port: 4,
        proto: 6,
    };
    const TIMING: TeamTiming = TeamTiming {
        rule_update: Time::from_us(50),
        idle_expiry: Time::from_us(1000),
    };

    fn driver(mode: SteeringMode) -> TeamDriver {
        TeamDriver::new(Steering::new(mode, 2, 2), FLOW, 0, 0, 0, &[0, 1], TIMING)
    }

    /// Frames every microsecond from `from` to `to`; runs the worker when it is due.
    fn traffic(d: &mut TeamDriver, from: u64, to: u64) -> Vec<usize> {
        let mut pfs = Vec::new();
        for us in from..to {
            let t = Time::from_us(us);
            while d.next_work().is_some_and(|w| w <= t) {
                let w = d.next_work().unwrap();
                d.work(w);
            }
            pfs.push(d.rx_steer(t).0);
        }
        pfs
    }

    #[test]
    fn the_octonic_moves_the_flow_once_after_the_worker_delay_and_expires_the_old_rule() {
        let mut d = driver(SteeringMode::OctoNic);
        assert_eq!(traffic(&mut d, 0, 100), vec![0; 100]);
        d.rx_flow_steer(Time::from_us(100), 1, RxQueue { index: 1, node: 1 });
        let pfs = traffic(&mut d, 100, 3000);
        // Frames enter PF 0 until the worker's rule is in, PF 1 (local to the new core) after.
        assert!(pfs[..50].iter().all(|&p| p == 0));
        assert!(pfs[50..].iter().all(|&p| p == 1));
        assert_eq!(d.steering.steer(&FLOW, 0), (1, 1));
        assert_eq!(d.rule_updates, 1);
        // PF 0's ARFS rule is hit by no frame after the move: it expires one idle time
        // after its last hit (149 µs), and only it.
        assert_eq!(d.expired, vec![(Time::from_us(1149), Rule::Arfs(0))]);
        assert_eq!(d.rules(), vec![Rule::Mpfs, Rule::Arfs(1)]);
        // When the flow stops, its remaining rules go too, and the NIC falls back to RSS.
        d.work(Time::from_us(2999 + 1000));
        assert!(d.rules().is_empty());
        assert!(d.steering.mpfs.is_empty() && d.steering.pfs[1].arfs.is_empty());
    }

    #[test]
    fn a_standard_nic_keeps_the_flow_on_its_netdev_pf_and_retargets_the_queue() {
        let mut d = driver(SteeringMode::Standard);
        d.rx_flow_steer(Time::from_us(10), 1, RxQueue { index: 1, node: 1 });
        let pfs = traffic(&mut d, 10, 500);
        assert!(pfs.iter().all(|&p| p == 0));
        assert_eq!(d.steering.steer(&FLOW, 0), (0, 1));
        assert_eq!(d.rule_updates, 1);
        assert!(d.expired.is_empty());
    }

    #[test]
    fn transmit_switches_to_the_local_pf_only_when_the_old_queue_is_empty() {
        let mut d = driver(SteeringMode::OctoNic);
        let us = Time::from_us;
        assert_eq!(d.tx_pf(us(0), 0, us(5)), 0);
        // The thread moved, but a packet is still queued on PF 0 until 5 µs: stay.
        assert_eq!(d.tx_pf(us(2), 1, us(6)), 0);
        assert_eq!(d.tx_pf(us(6), 1, us(7)), 1);
        assert_eq!(d.tx_switches, 1);
        assert_eq!(d.tx_per_pf, vec![2, 1]);
        let mut s = driver(SteeringMode::Standard);
        assert_eq!(s.tx_pf(us(9), 1, us(10)), 0);
        assert_eq!(s.tx_switches, 0);
    }
}
