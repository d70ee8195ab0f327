//! The measurements of the SmartIO NVMe experiments, on any scenario: a client of the
//! distributed driver doing QD-1 random 4 KiB reads with its SQ placed somewhere
//! (`smartio.sq_placement`), and many clients sharing one controller, their SQs placed
//! likewise (`smartio.nvme_sharing`). Each runs a warm-up, then a measured window of
//! simulated time; nothing here knows an experiment.

use fabric::{Fabric, HostId};
use sim::component::Sim;
use sim::timed::TimedFabric;
use sim::Time;

use super::lending::Cluster;
use super::nvme_dist::{
    io_job, random_reads, CqPlacement, DistError, Manager, QueueRequest, SqPlacement,
};

/// LBAs the random reads spread over (1 GiB of 512 B blocks: past any cache, well inside
/// the drive).
const SPAN_BLOCKS: u64 = 1 << 21;
/// Blocks of the modelled namespace (a 375 GB P4800X in 512 B LBAs).
pub const NAMESPACE_BLOCKS: u64 = 375_000_000_000 / 512;

/// A fabric with every device of every host lent (the pool's default for experiments).
pub fn cluster_lending_all(f: &Fabric) -> Result<Cluster, DistError> {
    let mut cl = Cluster::new(f);
    for d in cl.device_list(f) {
        cl.lend(d.fdid)?;
    }
    Ok(cl)
}

/// QD-1 random reads of one client.
#[derive(Clone, Debug, PartialEq)]
pub struct Qd1Result {
    pub median_us: f64,
    pub p99_us: f64,
    pub ios: u64,
    /// Hops and roots of the controller's SQ fetch.
    pub sq_read_hops: usize,
    pub sq_read_roots: usize,
    pub control_msgs_per_io: f64,
}

/// A client on `client` of the controller `device` (managed from its own host), its SQ
/// placed by `sq`, CQ near its CPU: `warmup` reads, then `ios` measured.
pub fn qd1_reads(
    tf: &mut TimedFabric,
    client: &str,
    device: &str,
    sq: SqPlacement,
    warmup: u64,
    ios: u64,
    seed: u64,
) -> Result<Qd1Result, DistError> {
    let mut cl = cluster_lending_all(&tf.fabric)?;
    let mut sim = Sim::new();
    let lender = tf
        .fabric
        .topo
        .host(node_host(&tf.fabric, device)?)
        .name
        .clone();
    let mut m = Manager::start(&mut sim, tf, &mut cl, &lender, device, NAMESPACE_BLOCKS)?;
    let req = QueueRequest {
        sq,
        cq: CqPlacement::NearCpu,
        ..QueueRequest::by_hints(64, 4096, 1)
    };
    let q = m.create_queue_pair(&mut sim, tf, &mut cl, client, &req)?;
    let (hops, roots) = q.sq_fetch_path(&tf.fabric, m.device)?;
    let mut cmds = random_reads(warmup + ios, SPAN_BLOCKS, seed);
    let measured = cmds.split_off(warmup as usize);
    q.start_io(&mut sim, tf, io_job(cmds, 1));
    sim.run_until_finished(tf);
    let msgs = cl.stats().total();
    sim.with(tf, q.driver, |d: &mut devices::nvme::NvmeDriver, _| {
        d.reset_stats()
    });
    q.start_io(&mut sim, tf, io_job(measured, 1));
    sim.run_until_finished(tf);
    let log = &sim
        .get::<devices::nvme::NvmeDriver>(q.driver)
        .expect("the client's driver")
        .log;
    if log.io_errors > 0 {
        return Err(DistError::Setup(format!(
            "{} of the client's reads completed with an error",
            log.io_errors
        )));
    }
    let q = |x| log.latency.quantile_ns(x).unwrap_or(f64::NAN) / 1000.0;
    Ok(Qd1Result {
        median_us: q(0.5),
        p99_us: q(0.99),
        ios: log.latency.count(),
        sq_read_hops: hops,
        sq_read_roots: roots,
        control_msgs_per_io: (cl.stats().total() - msgs) as f64 / ios.max(1) as f64,
    })
}

fn node_host(f: &Fabric, device: &str) -> Result<HostId, DistError> {
    match f.resolve(device) {
        Ok(fabric::Endpoint::Node(n)) => Ok(f.topo.node(n).host),
        _ => Err(DistError::Setup(format!(
            "`{device}` is not a device function"
        ))),
    }
}

/// Many clients sharing one controller.
#[derive(Clone, Debug, PartialEq)]
pub struct SharingResult {
    pub clients_ok: u64,
    pub total_kiops: f64,
    pub min_client_kiops: f64,
    pub jain_fairness: f64,
    /// The controller's first refusal, in words (a client past its queue limit).
    pub error: Option<String>,
    /// Commands completed in the window (for the simulator's speed figure).
    pub commands: u64,
    pub window: Time,
    pub control_msgs_in_window: u64,
    /// Latency of every client's reads completed in the window, all clients together
    /// (NaN without any).
    pub median_us: f64,
    pub p99_us: f64,
}

/// What [`sharing_with`] runs: `clients` hosts (in `hosts` order, skipping the
/// controller's own) each bind a queue pair with its SQ placed by `sq` (CQ near its CPU)
/// and read 4 KiB at random at QD `depth`, measured over `window` after `warmup`.
#[derive(Clone, Debug)]
pub struct SharingSetup<'a> {
    pub device: &'a str,
    pub hosts: &'a [String],
    pub clients: usize,
    pub depth: u16,
    pub sq: SqPlacement,
    pub warmup: Time,
    pub window: Time,
}

/// `clients` hosts (in `hosts` order, skipping the controller's own) each bind a queue
/// pair by its hints (SQ near the device) and read 4 KiB at random at QD `depth`;
/// throughput per client over `window` after `warmup`.
pub fn sharing(
    tf: &mut TimedFabric,
    device: &str,
    hosts: &[String],
    clients: usize,
    depth: u16,
    warmup: Time,
    window: Time,
) -> Result<SharingResult, DistError> {
    sharing_with(
        tf,
        &SharingSetup {
            device,
            hosts,
            clients,
            depth,
            sq: SqPlacement::NearDevice,
            warmup,
            window,
        },
    )
}

/// Like [`sharing`], with every client's SQ placed by `setup.sq` (each client's queue in
/// its own RAM, in the lender's, or in its own part of a device's BAR).
pub fn sharing_with(
    tf: &mut TimedFabric,
    setup: &SharingSetup,
) -> Result<SharingResult, DistError> {
    let SharingSetup {
        device,
        hosts,
        clients,
        depth,
        warmup,
        window,
        ..
    } = *setup;
    let mut cl = cluster_lending_all(&tf.fabric)?;
    let mut sim = Sim::new();
    let lender_id = node_host(&tf.fabric, device)?;
    let lender = tf.fabric.topo.host(lender_id).name.clone();
    let mut m = Manager::start(&mut sim, tf, &mut cl, &lender, device, NAMESPACE_BLOCKS)?;
    let mut qs = Vec::new();
    let mut error = None;
    for h in hosts.iter().filter(|h| **h != lender).take(clients) {
        let req = QueueRequest {
            sq: setup.sq.clone(),
            ..QueueRequest::by_hints(64, depth as u64 * 4096, depth)
        };
        match m.create_queue_pair(&mut sim, tf, &mut cl, h, &req) {
            Ok(q) => qs.push(q),
            // The controller's own refusal (past its queue limit) is a result; a queue
            // that cannot be placed is the caller's mistake.
            Err(e @ DistError::Refused { .. }) => {
                error.get_or_insert(e.to_string());
            }
            Err(e) => return Err(e),
        }
    }
    if qs.len() < clients && error.is_none() {
        error = Some(format!(
            "only {} hosts besides the lender to run {clients} clients",
            qs.len()
        ));
    }
    // Enough commands that no client runs dry in the window (a QD-1 read takes > 5 µs).
    let per_client = ((warmup + window).as_ps() / 5_000_000 + 64) * depth as u64;
    for (i, q) in qs.iter().enumerate() {
        let mut cmds = random_reads(per_client, SPAN_BLOCKS, 1 + i as u64);
        for (k, c) in cmds.iter_mut().enumerate() {
            c.buf_offset = (k as u64 % depth as u64) * 4096;
        }
        q.start_io(&mut sim, tf, io_job(cmds, depth));
    }
    sim.run_for(tf, warmup);
    for q in &qs {
        sim.with(tf, q.driver, |d: &mut devices::nvme::NvmeDriver, _| {
            d.reset_stats()
        });
    }
    let msgs = cl.stats().total();
    sim.run_for(tf, window);
    let secs = window.as_ps() as f64 * 1e-12;
    let mut latency = sim::stats::Histogram::default();
    let mut io_errors = 0;
    let counts: Vec<u64> = qs
        .iter()
        .map(|q| {
            let log = &sim
                .get::<devices::nvme::NvmeDriver>(q.driver)
                .expect("a client's driver")
                .log;
            latency.merge(&log.latency);
            io_errors += log.io_errors;
            log.latency.count()
        })
        .collect();
    if io_errors > 0 {
        return Err(DistError::Setup(format!(
            "{io_errors} of the clients' reads completed with an error"
        )));
    }
    let us = |x| latency.quantile_ns(x).unwrap_or(f64::NAN) / 1000.0;
    let kiops: Vec<f64> = counts.iter().map(|&c| c as f64 / secs / 1000.0).collect();
    let total: f64 = kiops.iter().sum();
    let sq: f64 = kiops.iter().map(|x| x * x).sum();
    Ok(SharingResult {
        clients_ok: qs.len() as u64,
        total_kiops: total,
        min_client_kiops: kiops
            .iter()
            .copied()
            .fold(f64::INFINITY, f64::min)
            .min(total),
        jain_fairness: if sq > 0.0 {
            total * total / (kiops.len() as f64 * sq)
        } else {
            0.0
        },
        error,
        commands: counts.iter().sum(),
        window,
        control_msgs_in_window: cl.stats().total() - msgs,
        median_us: us(0.5),
        p99_us: us(0.99),
    })
}
