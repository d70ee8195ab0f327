//! fio on an NVMe device, as fio 3 runs it with `ioengine=libaio`, `direct=1`: `threads`
//! jobs, each keeping `iodepth` asynchronous reads (or writes) of `block_bytes` in flight
//! to one device, random or sequential, from buffers on a chosen NUMA node.
//!
//! The kernel side is the block driver's (`nvme_blk::NvmeBlk`): it probes the controller
//! and creates one I/O queue pair per thread (blk-mq gives each CPU its hardware queue),
//! their memory on the device's NUMA node — Linux's `dma_alloc_coherent` for a device's
//! queues allocates on the device's node. Each thread then adopts its queue pair
//! (`DriverStep::AttachQueuePair`) and submits from its own CPU package: its SQ stores and
//! CQ polls travel from the thread's node, its doorbells into BAR0. Direct I/O pins the
//! user buffer and maps it for the device; here each thread's buffer is mapped once
//! before time starts (the map is the host layer's: identity without an IOMMU, and the
//! block driver charges no CPU time for a map either, `BlkConfig::map_cost`).
//!
//! Each of a thread's `iodepth` slots owns one `block_bytes` piece of its buffer, and
//! command *i* uses slot *i* mod `iodepth`, as fio reuses its `io_u` buffers. The
//! queue-pair driver submits in order as slots free up, so when the media completes out
//! of order two commands can share a slot for a while; the timing does not depend on the
//! bytes, and a read's bytes are checked only where a slot had one command.
//!
//! A thread's commands are a list long enough for the time it must run
//! (`FioSpec::lasts`, at the media's bandwidth with the whole device to itself, or
//! `iodepth` per media latency if fewer); a thread that runs out before then is an error,
//! not a quiet drop in throughput.

use devices::nvme::queue::{Buffer, DriverStep, IoCmd, IoJob, QueueMemory};
use devices::nvme::{NvmeController, NvmeDriver, NvmeDriverConfig, NvmeParams};
use fabric::raw::DeviceKind;
use fabric::{Endpoint, HostId, NodeKind, PcieNodeId, Requester};
use host::DmaDirection;
use rand_xoshiro::rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use sim::component::Sim;
use sim::net::ComponentId;
use sim::stats::Histogram;
use sim::timed::TimedFabric;
use sim::Time;

use super::access::{DeviceAccess, Local};
use super::nvme_blk::{block_bytes, BlkConfig, NvmeBlk, BLOCK, NAMESPACE_BLOCKS};

/// Linux's default I/O queue depth (`nvme.io_queue_depth` = 1024), capped by the
/// controller's CAP.MQES + 1.
pub const LINUX_IO_QUEUE_DEPTH: u32 = 1024;

/// One fio job description.
#[derive(Clone, Debug, PartialEq)]
pub struct FioSpec {
    /// `host.device`: an NVMe device.
    pub device: String,
    /// The node whose CPUs run the threads.
    pub cpu_node: u32,
    /// The node holding the threads' buffers.
    pub mem_node: u32,
    pub threads: u16,
    pub iodepth: u16,
    pub block_bytes: u64,
    pub write: bool,
    /// Random offsets (`rw=randread`), or each thread sequential in its own part of the
    /// namespace (`rw=read`).
    pub random: bool,
    /// Seeds the random offsets.
    pub seed: u64,
    /// How long the threads must keep I/O in flight (warm-up and window).
    pub lasts: Time,
}

/// Why a fio job could not be set up or run.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct FioError(pub String);

/// What the threads did since the last `reset_stats`.
#[derive(Clone, Debug, Default)]
pub struct FioStats {
    pub bytes: u64,
    pub ops: u64,
    /// Submission (SQ entry stored) to completion seen, every thread's commands.
    pub latency: Histogram,
    /// Completions with an error status, and driver-side faults.
    pub errors: u64,
    pub faults: u64,
}

/// A fio job on the simulation: the controller, the block driver that probed it, and one
/// submitting component per thread.
#[derive(Clone, Debug)]
pub struct Fio {
    pub spec: FioSpec,
    pub function: PcieNodeId,
    pub ctrl: ComponentId,
    pub blk: ComponentId,
    pub threads: Vec<ComponentId>,
    /// Per thread: its buffer as the CPU addresses it, and completions logged before the
    /// current window.
    pub buffers: Vec<u64>,
    ops_before: Vec<usize>,
    /// Entries of each I/O queue.
    pub queue_entries: u16,
}

/// The NUMA node a device hangs under: its root complex's package's first node (a root
/// in an I/O hub: node 0, an assumption — ACPI gives such a hub's node, nudma does not).
pub fn device_node(tf: &TimedFabric, function: PcieNodeId) -> u32 {
    let topo = &tf.fabric.topo;
    let n = topo.node(function);
    let p = topo.platform_of(n.host);
    match topo.node(n.root).kind {
        NodeKind::RootComplex { vertex } if vertex < p.packages => vertex * p.nodes_per_package,
        _ => 0,
    }
}

fn err(msg: impl Into<String>) -> FioError {
    FioError(msg.into())
}

/// What `check` found: the NVMe function, its host, the package running the threads,
/// the controller's parameters and the entries of each I/O queue.
struct Checked {
    function: PcieNodeId,
    host: HostId,
    package: u32,
    params: NvmeParams,
    entries: u16,
}

/// Checks `spec` against the hardware: an NVMe device, nodes the host has, a thread per
/// I/O queue pair, a depth the queues hold, blocks the controller transfers.
fn check(tf: &TimedFabric, spec: &FioSpec) -> Result<Checked, FioError> {
    let function = match tf.fabric.resolve(&spec.device) {
        Ok(Endpoint::Node(n)) => n,
        _ => return Err(err(format!("no device `{}`", spec.device))),
    };
    let topo = &tf.fabric.topo;
    let is_nvme = match topo.node(function).kind {
        NodeKind::Function { device, .. } => topo.devices[device.index()].kind == DeviceKind::Nvme,
        _ => false,
    };
    if !is_nvme {
        return Err(err(format!("`{}` is not an NVMe device", spec.device)));
    }
    let host = topo.node(function).host;
    let p = topo.platform_of(host);
    if spec.cpu_node >= p.cpu_nodes() {
        return Err(err(format!(
            "cpu_node {}: host `{}` has CPUs on nodes 0..{}",
            spec.cpu_node,
            topo.host(host).name,
            p.cpu_nodes()
        )));
    }
    if spec.mem_node >= p.numa_nodes() {
        return Err(err(format!(
            "mem_node {}: host `{}` has NUMA nodes 0..{}",
            spec.mem_node,
            topo.host(host).name,
            p.numa_nodes()
        )));
    }
    let package = p.package_of_node(spec.cpu_node);
    let params =
        NvmeParams::from_node(tf, function, BLOCK, NAMESPACE_BLOCKS).map_err(|e| err(e.0))?;
    let io_queues = params.queue_pairs - 1;
    if spec.threads == 0 || spec.threads > io_queues {
        return Err(err(format!(
            "threads = {}: {} gives 1..{io_queues} I/O queue pairs, one per thread",
            spec.threads, spec.device
        )));
    }
    let entries = params.max_queue_entries.min(LINUX_IO_QUEUE_DEPTH) as u16;
    if spec.iodepth == 0 || spec.iodepth >= entries {
        return Err(err(format!(
            "iodepth = {}: an I/O queue of {entries} entries holds 1..{} commands (one slot stays empty)",
            spec.iodepth,
            entries - 1
        )));
    }
    let max_transfer = BLOCK << params.mdts;
    if spec.block_bytes == 0
        || !spec.block_bytes.is_multiple_of(BLOCK)
        || spec.block_bytes > max_transfer
    {
        return Err(err(format!(
            "block_bytes = {}: a whole number of 4 KiB blocks up to the controller's maximum transfer (MDTS) of {} KiB",
            spec.block_bytes,
            max_transfer >> 10
        )));
    }
    Ok(Checked {
        function,
        host,
        package,
        params,
        entries,
    })
}

/// The block driver probing the controller, run until its probe is over: one I/O queue
/// pair per thread, their memory on the device's node.
fn probe_block_driver(
    tf: &mut TimedFabric,
    sim: &mut Sim<TimedFabric>,
    spec: &FioSpec,
    access: Local,
    dev_node: u32,
    entries: u16,
) -> Result<ComponentId, FioError> {
    let cfg = BlkConfig {
        queue_entries: entries,
        ..BlkConfig::default()
    };
    let nodes = vec![dev_node; spec.threads as usize];
    let blk = NvmeBlk::probe(tf, Box::new(access), &nodes, cfg)
        .map_err(|e| err(format!("{}: {e}", spec.device)))?;
    let blk = sim.add(blk);
    let now = tf.net.now();
    tf.net.wake_at(now, blk);
    sim.run_until_finished(tf);
    let b = sim.get::<NvmeBlk>(blk).expect("the driver");
    if !b.ready() {
        let why = b
            .log
            .error
            .as_ref()
            .map_or("did not finish".into(), |e| e.to_string());
        return Err(err(format!("{}: {why}", spec.device)));
    }
    Ok(blk)
}

/// Commands enough for `lasts`: at most the media's rate with the device to itself,
/// and at most `iodepth` per media latency (a command holds a channel that long).
fn command_count(spec: &FioSpec, media_gbps: f64, media_latency: Time) -> u64 {
    let slots = spec.iodepth as u64;
    let secs = spec.lasts.as_secs_f64();
    let by_rate = media_gbps * 1e9 * secs / spec.block_bytes as f64;
    let by_latency = slots as f64 * (secs / media_latency.as_secs_f64().max(1e-12) + 1.0);
    let bound = by_rate.min(by_latency).ceil() as u64;
    bound + 2 * slots + 1
}

/// What every thread is set up from: the job, where its CPU and the device are, the
/// controller as the block driver left it, and how many commands each gets.
struct ThreadPlan<'a> {
    spec: &'a FioSpec,
    host: HostId,
    cpu: Requester,
    dev_node: u32,
    bar0: u64,
    dstrd: u8,
    lba_bytes: u64,
    entries: u16,
    /// `block_bytes` pieces in the namespace.
    ios_per_region: u64,
    n_cmds: u64,
}

impl ThreadPlan<'_> {
    /// Thread `t` on I/O queue pair `t + 1` (memory `mem`): its buffer allocated, mapped
    /// and (for writes) filled, its PRP lists, its commands, and its driver added to the
    /// simulation. Returns the driver and the buffer's CPU address.
    fn add_thread(
        &self,
        tf: &mut TimedFabric,
        sim: &mut Sim<TimedFabric>,
        access: &mut Local,
        rng: &mut Xoshiro256PlusPlus,
        t: usize,
        mem: QueueMemory,
    ) -> Result<(ComponentId, u64), FioError> {
        let ThreadPlan {
            spec,
            host,
            cpu,
            dev_node,
            bar0,
            dstrd,
            lba_bytes,
            entries,
            ..
        } = *self;
        let slots = spec.iodepth as u64;
        let per_io = spec.block_bytes;
        let buf = super::access::alloc_ram(&mut tf.fabric, host, spec.mem_node, slots * per_io)
            .map_err(|e| err(format!("thread {t}'s buffer: {e}")))?
            .phys
            .addr;
        let dir = if spec.write {
            DmaDirection::ToDevice
        } else {
            DmaDirection::FromDevice
        };
        let m = access
            .map(&mut tf.fabric, buf, slots * per_io, dir)
            .map_err(|e| err(format!("thread {t}'s buffer: {e}")))?;
        if spec.write {
            // fio fills its write buffers before it submits.
            let bytes = block_bytes(spec.seed ^ ((t as u64) << 32), slots * per_io);
            tf.fabric
                .store(cpu, buf, &bytes)
                .map_err(|e| err(format!("thread {t}'s buffer: {e:?}")))?;
        }
        let lists = access
            .alloc_coherent(&mut tf.fabric, dev_node, slots * 4096)
            .map_err(|e| err(format!("thread {t}'s PRP lists: {e}")))?;
        let cmds = self.commands(rng, t);
        let qid = t as u16 + 1;
        let thread_cpu = Requester::Cpu {
            host,
            package: tf
                .fabric
                .topo
                .platform_of(host)
                .package_of_node(spec.cpu_node),
        };
        // The admin queue is the block driver's; a thread never uses its own.
        let dcfg = NvmeDriverConfig::new(
            tf,
            thread_cpu,
            bar0,
            mem,
            2,
            Buffer {
                cpu: 0,
                dev: 0,
                bytes: 0,
            },
        );
        let steps = vec![
            DriverStep::AttachQueuePair {
                qid,
                entries,
                mem,
                dstrd,
                lba_bytes,
            },
            DriverStep::Io(IoJob {
                qid,
                depth: spec.iodepth,
                nsid: 1,
                cmds,
                data: Buffer {
                    cpu: buf,
                    dev: m.dev,
                    bytes: slots * per_io,
                },
                prp_lists: Buffer {
                    cpu: lists.cpu,
                    dev: lists.dev,
                    bytes: slots * 4096,
                },
            }),
        ];
        Ok((sim.add(NvmeDriver::new(dcfg, steps)), buf))
    }

    /// Thread `t`'s commands, command `i` on buffer slot `i` mod `iodepth`.
    fn commands(&self, rng: &mut Xoshiro256PlusPlus, t: usize) -> Vec<IoCmd> {
        let ThreadPlan {
            spec,
            lba_bytes,
            ios_per_region,
            n_cmds,
            ..
        } = *self;
        let slots = spec.iodepth as u64;
        let per_io = spec.block_bytes;
        let blocks = (per_io / lba_bytes) as u16;
        // Sequential: each thread from its own part of the namespace, wrapping in it.
        let part = (ios_per_region / spec.threads as u64).max(1);
        (0..n_cmds)
            .map(|i| {
                let io = if spec.random {
                    rng.next_u64() % ios_per_region
                } else {
                    (t as u64 * part + i % part) % ios_per_region
                };
                IoCmd {
                    write: spec.write,
                    slba: io * per_io / lba_bytes,
                    blocks,
                    buf_offset: (i % slots) * per_io,
                }
            })
            .collect()
    }
}

impl Fio {
    /// Checks `spec` against the hardware, probes the controller through the block driver
    /// (running the simulation until the probe is over: call it before any other
    /// component has work) and sets up the threads, which start with `start`.
    pub fn probe(
        tf: &mut TimedFabric,
        sim: &mut Sim<TimedFabric>,
        spec: FioSpec,
    ) -> Result<Fio, FioError> {
        let Checked {
            function,
            host,
            package,
            params,
            entries,
        } = check(tf, &spec)?;
        let (media_gbps, media_latency) = if spec.write {
            (params.media.write_gbps, params.media.write)
        } else {
            (params.media.read_gbps, params.media.read)
        };
        let ctrl = NvmeController::new(tf, function, params).map_err(|e| err(e.0))?;
        let ctrl = sim.add(ctrl);
        sim.get::<NvmeController>(ctrl)
            .expect("just added")
            .attach(tf, ctrl)
            .map_err(|e| err(e.0))?;
        let cpu = Requester::Cpu { host, package };
        let local = |f: &fabric::Fabric| {
            Local::new(f, cpu, function).map_err(|e| err(format!("{}: {e}", spec.device)))
        };
        let dev_node = device_node(tf, function);
        let blk = probe_block_driver(tf, sim, &spec, local(&tf.fabric)?, dev_node, entries)?;
        let b = sim.get::<NvmeBlk>(blk).expect("the driver");
        let (bar0, dstrd, lba_bytes, nsze) =
            (b.bar0(), b.inner().dstrd(), b.log.lba_bytes, b.log.nsze);
        let queues: Vec<_> = (0..spec.threads as usize)
            .map(|t| b.io_queue(t).expect("one queue pair per thread"))
            .collect();
        // The threads' buffers and PRP-list pages, mapped once (see the module notes).
        let mut access = local(&tf.fabric)?;
        let plan = ThreadPlan {
            spec: &spec,
            host,
            cpu,
            dev_node,
            bar0,
            dstrd,
            lba_bytes,
            entries,
            ios_per_region: nsze * BLOCK / spec.block_bytes,
            n_cmds: command_count(&spec, media_gbps, media_latency),
        };
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(spec.seed);
        let mut threads = Vec::new();
        let mut buffers = Vec::new();
        for (t, mem) in queues.into_iter().enumerate() {
            let (thread, buf) = plan.add_thread(tf, sim, &mut access, &mut rng, t, mem)?;
            threads.push(thread);
            buffers.push(buf);
        }
        Ok(Fio {
            ops_before: vec![0; threads.len()],
            spec,
            function,
            ctrl,
            blk,
            threads,
            buffers,
            queue_entries: entries,
        })
    }

    /// Starts every thread now.
    pub fn start(&self, tf: &mut TimedFabric) {
        let now = tf.net.now();
        for &t in &self.threads {
            tf.net.wake_at(now, t);
        }
    }

    /// Starts a measurement window.
    pub fn reset_stats(&mut self, sim: &mut Sim<TimedFabric>) {
        for (i, &t) in self.threads.iter().enumerate() {
            let d = sim.get_mut::<NvmeDriver>(t).expect("a fio thread");
            self.ops_before[i] = d.log.io.len();
            d.reset_stats();
        }
    }

    /// What the threads did in the window; an error when a thread ran out of commands
    /// before the window ended (its list was too short for the time it had to run).
    pub fn stats(&self, sim: &Sim<TimedFabric>) -> Result<FioStats, FioError> {
        let mut s = FioStats::default();
        for (i, &t) in self.threads.iter().enumerate() {
            let d = sim.get::<NvmeDriver>(t).expect("a fio thread");
            if sim::component::Component::<TimedFabric>::finished(d) {
                return Err(err(format!(
                    "{}: thread {i} ran out of commands before the window ended",
                    self.spec.device
                )));
            }
            s.bytes += d.log.io_bytes;
            let window = &d.log.io[self.ops_before[i]..];
            s.ops += window.len() as u64;
            s.errors += window.iter().filter(|x| !x.2.status.is_success()).count() as u64;
            s.faults += d.log.faults;
            s.latency.merge(&d.log.latency);
        }
        Ok(s)
    }

    /// Each buffer slot's last command compared with the namespace: (bytes equal, bytes
    /// that differ). A read's bytes must be the namespace's, a write's the buffer's. Call
    /// it once the threads have finished their lists (nothing in flight); a thread's
    /// commands complete in the order the media took them, so a slot's last completion
    /// is its last writer. For checks.
    pub fn verify(&self, tf: &mut TimedFabric, sim: &Sim<TimedFabric>) -> (u64, u64) {
        let ns = sim
            .get::<NvmeController>(self.ctrl)
            .expect("the controller")
            .namespace();
        let cpu = Requester::Cpu {
            host: tf.fabric.topo.node(self.function).host,
            package: 0,
        };
        let (mut good, mut bad) = (0, 0);
        for (i, &t) in self.threads.iter().enumerate() {
            let d = sim.get::<NvmeDriver>(t).expect("a fio thread");
            let mut last: std::collections::BTreeMap<u64, &IoCmd> = Default::default();
            for (_, c, e) in &d.log.io {
                if e.status.is_success() {
                    last.insert(c.buf_offset, c);
                }
            }
            for (off, c) in last {
                let want = ns.read(c.slba, c.blocks as u64);
                let mut got = vec![0u8; want.len()];
                let ok = tf.fabric.load(cpu, self.buffers[i] + off, &mut got).is_ok();
                if ok && got == want {
                    good += want.len() as u64;
                } else {
                    bad += want.len() as u64;
                }
            }
        }
        (good, bad)
    }
}
