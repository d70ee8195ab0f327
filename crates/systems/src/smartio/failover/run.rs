//! Running a failover campaign: lending the controller, borrowing it through each
//! adapter pair with a queue pair per path, and the run loop that injects faults and
//! acts on them (revoking, recreating, crashing and restarting the borrower), then
//! verifies every acknowledged write.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use devices::nvme::NvmeController;
use fabric::faults::{FaultAction, FaultSpec, FaultTarget};
use fabric::{HostId, Requester};
use sim::component::Sim;
use sim::faults::FaultInjector;
use sim::net::ComponentId;
use sim::timed::{ns, TimedFabric};
use sim::timers::Timers;
use sim::Time;

use super::client::{block_bytes, FailoverClient, FailoverResult, PathQ};
use super::policy::{FailoverMode, FailoverPolicy, BLOCK, DEPTH, LBAS};
use crate::smartio::lending::{BorrowOptions, Borrowed, Cluster};
use crate::smartio::nvme_dist::{ClientQueue, DistError, Manager, QueueRequest};

/// A borrower's path: its borrow and queue pair.
pub struct PathSetUp {
    pub borrow: Borrowed,
    pub queue: ClientQueue,
    pub bar0: u64,
    /// The borrower adapter's window onto the SQ in lender RAM.
    pub sq_window: host::NtbWindow,
}

fn release_sq_window(tf: &mut TimedFabric, p: &PathSetUp) -> Result<(), DistError> {
    host::Hosts::with(&mut tf.fabric, |hs, f| {
        hs.ntb_release_window(f, &p.sq_window)
    })
    .map_err(|e| DistError::Setup(e.to_string()))
}

fn borrow_path(
    sim: &mut Sim<TimedFabric>,
    tf: &mut TimedFabric,
    (cl, m): (&mut Cluster, &mut Manager),
    setup: &FailoverSetup,
    pair: usize,
) -> Result<PathSetUp, DistError> {
    let f = &tf.fabric;
    let host_id = |name: &str| {
        f.topo
            .host_by_name(name)
            .ok_or_else(|| DistError::Setup(format!("no host `{name}`")))
    };
    let (host, lender) = (host_id(&setup.borrower)?, host_id(setup.lender())?);
    let name = &setup.adapters[pair];
    let (l, b) = (
        f.topo.ntb_by_name(lender, name),
        f.topo.ntb_by_name(host, name),
    );
    let (Some(l), Some(b)) = (l, b) else {
        return Err(DistError::Setup(format!("no adapter pair `{name}`")));
    };
    let borrow = cl.borrow(
        &mut tf.fabric,
        host,
        m.fdid,
        BorrowOptions::shared().through(l, b),
    )?;
    let req = QueueRequest::by_hints(64, DEPTH as u64 * BLOCK, DEPTH as u16);
    let mut queue = m.create_queue_pair_on(sim, tf, cl, borrow, &req)?;
    // The SQ is in lender RAM (by hints); the CPU stores its entries through this path's
    // own adapter (the segment's CPU mapping goes through the default pair). The lender
    // has no IOMMU: the controller's address of the SQ is its physical address.
    if tf.fabric.topo.host(lender).iommu {
        return Err(DistError::Setup(
            "the lender's IOMMU must be off for failover".into(),
        ));
    }
    let bytes = queue.entries as u64 * 64;
    let w = host::Hosts::with(&mut tf.fabric, |hs, f| {
        hs.ntb_acquire_window(f, b, lender, queue.mem.sq_dev, bytes)
    })
    .map_err(|e| DistError::Setup(e.to_string()))?;
    queue.mem.sq_cpu = w.local;
    // A new CQ starts empty (its RAM may be an old queue's, with old phase tags).
    let cpu = Requester::Cpu { host, package: 0 };
    let zeros = vec![0u8; queue.entries as usize * 16];
    tf.fabric
        .store(cpu, queue.mem.cq_cpu, &zeros)
        .map_err(|e| DistError::Setup(format!("clearing the CQ: {e:?}")))?;
    let bar0 = cl.shadow_bar(&tf.fabric, borrow, 0)?;
    Ok(PathSetUp {
        borrow,
        queue,
        bar0,
        sq_window: w,
    })
}

/// Everything a run set up, for a test to look at afterwards.
pub struct FailoverRig {
    pub sim: Sim<TimedFabric>,
    pub cl: Cluster,
    pub manager: Manager,
    pub client: ComponentId,
    pub injector: ComponentId,
}

/// Who fails over: the client's host (`borrower`), the controller it borrows (`device`,
/// `HOST.NAME` on the lender) and the adapter pair of each path, named alike on both hosts
/// (`adapters[0]` the primary).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FailoverSetup {
    pub borrower: String,
    pub device: String,
    pub adapters: [String; 2],
}

impl FailoverSetup {
    /// The lender: the host of `device`.
    pub fn lender(&self) -> &str {
        self.device.split('.').next().unwrap_or_default()
    }

    /// The names of the built-in `smartio_dual_path` scenario.
    pub fn dual_path() -> FailoverSetup {
        FailoverSetup {
            borrower: "borrower".into(),
            device: "lender.nvme".into(),
            adapters: ["ntb0".into(), "ntb1".into()],
        }
    }
}

/// Runs `ios` verified I/Os (writes of new blocks and read-backs) of `setup`'s client on
/// both paths, starting on the primary, under `faults` (times from the run's start) and
/// `policy`. In `Recreate` mode every link-up of the primary's cable is followed by the
/// lender's agent revoking the primary borrow.
pub fn failover_run_with(
    tf: &mut TimedFabric,
    setup: &FailoverSetup,
    mode: FailoverMode,
    ios: u64,
    seed: u64,
    faults: &[FaultSpec],
    policy: FailoverPolicy,
) -> Result<(FailoverResult, FailoverRig), DistError> {
    let mut run = Campaign::set_up(tf, setup)?;
    let client = run.client(tf, mode, policy, ios, seed);
    let _ = client.mmio;
    let t0 = tf.net.now();
    let shifted: Vec<FaultSpec> = faults
        .iter()
        .map(|f| FaultSpec {
            at_ps: f.at_ps + t0.as_ps(),
            ..f.clone()
        })
        .collect();
    let inj = run.sim.add(FaultInjector::new(&shifted));
    run.sim
        .get_mut::<FaultInjector>(inj)
        .expect("added")
        .start(tf, inj);
    let cid = run.sim.add(client);
    run.sim.with(tf, cid, |c: &mut FailoverClient, tf| {
        c.start_at(tf, t0, cid)
    });
    let acts = campaign_acts(tf, setup, mode, run.host, &shifted);
    run.run(tf, cid, &acts)?;
    Ok(run.finish(cid, inj))
}

/// What the run loop acts on, in time order: the primary cable coming back (recreate:
/// the agent revokes then), the borrower crashing and, restarted, borrowing again
/// (each a nanosecond after the injector's change: the agents notice it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Act {
    Revoke0,
    Crash,
    Restart,
}

/// The acts of a campaign whose faults (already shifted to start now) are `shifted`.
fn campaign_acts(
    tf: &TimedFabric,
    setup: &FailoverSetup,
    mode: FailoverMode,
    host: HostId,
    shifted: &[FaultSpec],
) -> Vec<(Time, Act)> {
    // Times the primary cable comes back (recreate: the agent revokes then).
    let primary = format!("{}.{}", setup.borrower, setup.adapters[0]);
    let cable0 = fabric::faults::cables_at(&tf.fabric.topo, &primary).unwrap_or_default();
    let mut ups: Vec<Time> = shifted
        .iter()
        .filter(
            |f| matches!(&f.target, FaultTarget::Cables(c) if c.iter().any(|x| cable0.contains(x))),
        )
        .filter_map(|f| f.duration_ps.map(|d| Time::from_ps(f.at_ps + d)))
        .collect();
    ups.sort();
    let mut acts: Vec<(Time, Act)> = Vec::new();
    if mode == FailoverMode::Recreate {
        acts.extend(ups.iter().map(|&t| (t, Act::Revoke0)));
    }
    let notice = Time::from_ns(1);
    for f in shifted {
        if f.target != FaultTarget::Host(host) {
            continue;
        }
        let at = Time::from_ps(f.at_ps) + notice;
        match f.action {
            FaultAction::HostRestart => acts.push((at, Act::Restart)),
            _ => {
                acts.push((at, Act::Crash));
                if let Some(d) = f.duration_ps {
                    acts.push((at + Time::from_ps(d), Act::Restart));
                }
            }
        }
    }
    acts.sort();
    acts
}

/// A failover campaign under way: the lender's device lent and its manager started,
/// the borrower's two paths, and the simulation they run in.
struct Campaign {
    setup: FailoverSetup,
    sim: Sim<TimedFabric>,
    cl: Cluster,
    m: Manager,
    /// The borrower.
    host: HostId,
    dstrd: u8,
    /// The primary (through `ntb0`) and the backup (through `ntb1`).
    paths: [PathSetUp; 2],
}

impl Campaign {
    /// Lends the lender's devices, starts the manager and borrows the controller through
    /// each adapter pair.
    fn set_up(tf: &mut TimedFabric, setup: &FailoverSetup) -> Result<Campaign, DistError> {
        let mut sim = Sim::new();
        let mut cl = Cluster::new(&tf.fabric);
        for d in cl.device_list(&tf.fabric) {
            cl.lend(d.fdid)?;
        }
        let blocks = 1u64 << 22;
        let (lender, device) = (setup.lender(), setup.device.as_str());
        let mut m = Manager::start(&mut sim, tf, &mut cl, lender, device, blocks)?;
        let p0 = borrow_path(&mut sim, tf, (&mut cl, &mut m), setup, 0)?;
        let p1 = borrow_path(&mut sim, tf, (&mut cl, &mut m), setup, 1)?;
        let dstrd = sim
            .get::<devices::nvme::NvmeDriver>(m.driver)
            .map(|d| d.dstrd())
            .unwrap_or(0);
        Ok(Campaign {
            setup: setup.clone(),
            host: p0.queue.host,
            sim,
            cl,
            m,
            dstrd,
            paths: [p0, p1],
        })
    }

    /// The client of `ios` I/Os on both paths, starting on the primary.
    fn client(
        &self,
        tf: &TimedFabric,
        mode: FailoverMode,
        policy: FailoverPolicy,
        ios: u64,
        seed: u64,
    ) -> FailoverClient {
        let [p0, p1] = &self.paths;
        let host = self.host;
        let pt = tf.timing_of(host);
        let cpu = Requester::Cpu { host, package: 0 };
        let mut res = FailoverResult {
            primary_qids: (p0.queue.qid, p0.queue.qid),
            primary_data_dev: (p0.queue.data.dev, p0.queue.data.dev),
            ..FailoverResult::default()
        };
        res.last_path = 0;
        FailoverClient {
            timers: Timers::new(),
            cpu,
            mode,
            policy,
            cq_poll: ns(pt.cpu_poll_ns),
            mmio: ns(pt.cpu_mmio_write_ns),
            seed: (seed & 0xff) as u8,
            base_lba: 0,
            paths: vec![
                PathQ::new(&p0.queue, p0.bar0, self.dstrd),
                PathQ::new(&p1.queue, p1.bar0, self.dstrd),
            ],
            active: 0,
            ops: Vec::new(),
            retry: VecDeque::new(),
            to_read: VecDeque::new(),
            last_was_write: false,
            next_block: 0,
            target: ios,
            issued: 0,
            acked: BTreeSet::new(),
            sampled: BTreeMap::new(),
            fence_sample: BTreeMap::new(),
            wants_recreate: None,
            res,
            first_failure: None,
            switched_at: None,
            done_ops: 0,
            stores: BTreeMap::new(),
            next_store: 0,
            completion_timeout: ns(tf
                .timing_of(tf.fabric.topo.node(self.m.device).host)
                .completion_timeout_ns),
            drain_until: [Time::ZERO; 2],
            down: false,
            epoch: 0,
            next_issue: Time::ZERO,
            pace_armed: false,
        }
    }

    /// Runs the simulation to the end of the workload, acting on `acts` as their times
    /// come and recreating a path whenever the client asks for it.
    fn run(
        &mut self,
        tf: &mut TimedFabric,
        cid: ComponentId,
        acts: &[(Time, Act)],
    ) -> Result<(), DistError> {
        let mut next = 0;
        loop {
            let c = self.sim.get::<FailoverClient>(cid).expect("client");
            if let Some(p) = c.wants_recreate {
                self.recreate(tf, cid, p)?;
                continue;
            }
            let done =
                !c.down && c.done_ops >= c.target && c.retry.is_empty() && c.in_flight() == 0;
            if done {
                return Ok(());
            }
            let Some(&(at, act)) = acts.get(next) else {
                self.sim.run_until_finished(tf);
                let c = self.sim.get::<FailoverClient>(cid).expect("client");
                if c.wants_recreate.is_none() {
                    return Ok(());
                }
                continue;
            };
            next += 1;
            self.sim.run_until(tf, at);
            let down = self.sim.get::<FailoverClient>(cid).expect("client").down;
            match act {
                Act::Revoke0 if !down => self.revoke_primary(tf, cid)?,
                Act::Crash if !down => self.crash(tf, cid)?,
                Act::Restart if down && tf.fabric.host_up(self.host) => self.restart(tf, cid)?,
                _ => {}
            }
        }
    }

    /// Path `p` anew, as the client asked: the manager deletes its queue pair, the
    /// borrower borrows through the same pair again and the client adopts the new one.
    fn recreate(
        &mut self,
        tf: &mut TimedFabric,
        cid: ComponentId,
        p: usize,
    ) -> Result<(), DistError> {
        let dstrd = self.dstrd;
        self.m
            .delete_queue_pair(&mut self.sim, tf, &mut self.cl, self.paths[p].queue.qid)?;
        release_sq_window(tf, &self.paths[p])?;
        let n = borrow_path(
            &mut self.sim,
            tf,
            (&mut self.cl, &mut self.m),
            &self.setup,
            p,
        )?;
        self.sim.with(tf, cid, |c: &mut FailoverClient, tf| {
            c.adopt(p, &n.queue, n.bar0, dstrd);
            if p == 0 {
                c.res.primary_qids.1 = n.queue.qid;
                c.res.primary_data_dev.1 = n.queue.data.dev;
            }
            let now = tf.net.now();
            c.resume_at(tf, now, cid);
        });
        self.paths[p] = n;
        Ok(())
    }

    /// The lender's agent tears the primary's windows down as the link returns.
    fn revoke_primary(&mut self, tf: &mut TimedFabric, cid: ComponentId) -> Result<(), DistError> {
        self.cl.revoke(&mut tf.fabric, self.paths[0].borrow)?;
        self.sim
            .with(tf, cid, |c: &mut FailoverClient, _| c.revoked(0));
        Ok(())
    }

    /// The borrower crashed. At the lender: the manager deletes the dead client's queue
    /// pairs (the controller aborts what they held) and the agent revokes its borrows —
    /// no reset: the device is shared, the manager keeps it.
    fn crash(&mut self, tf: &mut TimedFabric, cid: ComponentId) -> Result<(), DistError> {
        self.sim
            .with(tf, cid, |c: &mut FailoverClient, _| c.host_crashed());
        let live = self.cl.borrows();
        for p in &self.paths {
            self.m
                .delete_queue_pair(&mut self.sim, tf, &mut self.cl, p.queue.qid)?;
            if live.contains(&p.borrow) {
                self.cl.revoke(&mut tf.fabric, p.borrow)?;
            }
        }
        Ok(())
    }

    /// Rebooted, the borrower's driver programs its adapters afresh (the old SQ windows
    /// are released), borrows through each pair again and asks the manager for new
    /// queue pairs.
    fn restart(&mut self, tf: &mut TimedFabric, cid: ComponentId) -> Result<(), DistError> {
        let dstrd = self.dstrd;
        for p in &self.paths {
            release_sq_window(tf, p)?;
        }
        let cl_m = (&mut self.cl, &mut self.m);
        let n0 = borrow_path(&mut self.sim, tf, cl_m, &self.setup, 0)?;
        let cl_m = (&mut self.cl, &mut self.m);
        let n1 = borrow_path(&mut self.sim, tf, cl_m, &self.setup, 1)?;
        self.sim.with(tf, cid, |c: &mut FailoverClient, tf| {
            c.host_restarted([(&n0.queue, n0.bar0), (&n1.queue, n1.bar0)], dstrd);
            let now = tf.net.now();
            c.start_at(tf, now, cid);
        });
        self.paths = [n0, n1];
        Ok(())
    }

    /// The client's result, with every acknowledged write's bytes checked on the media,
    /// and what the run set up.
    fn finish(self, cid: ComponentId, inj: ComponentId) -> (FailoverResult, FailoverRig) {
        let c = self.sim.get::<FailoverClient>(cid).expect("client");
        let mut res = c.res.clone();
        // Every acknowledged write's bytes on the media.
        let ctrl = self
            .sim
            .get::<NvmeController>(self.m.controller)
            .expect("controller");
        for &b in &c.acked {
            let got = ctrl.namespace().read(b * LBAS as u64, LBAS as u64);
            if got != block_bytes(c.seed, b) {
                res.acked_writes_lost += 1;
            }
        }
        let rig = FailoverRig {
            sim: self.sim,
            cl: self.cl,
            manager: self.m,
            client: cid,
            injector: inj,
        };
        (res, rig)
    }
}
