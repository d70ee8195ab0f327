//! The single operations of the SmartIO data-path experiments (docs/studies.md "SmartIO",
//! hardware docs/hardware.md §2), which `nudma run`'s once-timed workloads call
//! (`run::once`): RAM-to-RAM latency across NTBs, bandwidthTest on a GPU, GPU
//! peer-to-peer copies, a counter ping-pong and the shape of a data path. Each takes
//! hardware and endpoint names; the numbers come from the fabric's routes and the timing
//! layer. `limits` and `nvme` hold the probes of the experiments that are not workload
//! files yet.

pub mod limits;
pub mod nvme;
pub mod program;

use devices::{Counters, DmaSpec, Gpu, Op};
use fabric::{HostId, Requester};
use sim::timed::ns;
use sim::Time;

use crate::harness::*;
use program::{Dev, Program};
use systems::smartio::Segment;

/// One-way latency of a CPU store of host `from` reaching `target` (a RAM or a BAR, at
/// `offset`): the store leaves the core, crosses the fabric as a posted write, lands, and
/// a core of the target's host polling it sees it.
pub fn cpu_store_oneway(
    tf: &mut TimedFabric,
    from: &str,
    target: &str,
    offset: u64,
) -> Result<Time, RunError> {
    let cpu = requester(tf, &format!("{from}.cpu"))?;
    let bus = map_buffer(tf, cpu, target, offset, 64)?;
    let src = tf
        .fabric
        .topo
        .host_by_name(from)
        .ok_or_else(|| RunError(format!("no host `{from}`")))?;
    let (dst, _) = tf
        .fabric
        .resolve_address(target, offset)
        .map_err(RunError::from(target))?;
    let store = ns(tf.timing_of(src).cpu_mmio_write_ns);
    let poll = ns(tf.timing_of(dst).cpu_poll_ns);
    let fly = devices::single_access(tf, cpu, Op::Write { dst: bus }, STORE_BYTES)
        .map_err(|f| fault_error(tf, f))?;
    Ok(store + fly + poll)
}

/// The part of `cpu_store_oneway`'s time spent from entering the near NTB adapter to
/// leaving the far one, derived from the store's own route: the zero-load time of the
/// steps that belong to the first NTB crossing's two adapters — each adapter's host link
/// (the link above its chip, which an access staying in its host never crosses), the near
/// adapter's address-LUT translation and requester-ID substitution, both chips — and
/// what lies between them (the cable, or cables and a cluster switch). Zero when the
/// store crosses no NTB.
pub fn cpu_store_ntb_span(
    tf: &mut TimedFabric,
    from: &str,
    target: &str,
    offset: u64,
) -> Result<Time, RunError> {
    let cpu = requester(tf, &format!("{from}.cpu"))?;
    let bus = map_buffer(tf, cpu, target, offset, 64)?;
    let req = fabric::Request {
        requester: cpu,
        addr: bus,
        len: STORE_BYTES,
        access: fabric::Access::Write,
    };
    let (path, times) = tf.step_times(&req).map_err(|f| fault_error(tf, f))?;
    Ok(match ntb_span(&tf.fabric.topo, &path.steps) {
        Some(r) => times[r].iter().fold(Time::ZERO, |a, &t| a + t),
        None => Time::ZERO,
    })
}

/// Bytes of the CPU store whose one-way latency `cpu_store_oneway` times.
const STORE_BYTES: u32 = 4;

/// The steps of a route's first NTB crossing that belong to its two adapters and lie
/// between them (see `cpu_store_ntb_span`), or `None` when the route crosses no NTB.
pub fn ntb_span(topo: &fabric::Topology, steps: &[fabric::Step]) -> Option<std::ops::Range<usize>> {
    use fabric::{NodeKind, NtbId, Step};
    let belongs = |s: &Step, ntb: NtbId| {
        let chip = topo.ntbs[ntb.index()].chip_node;
        match *s {
            Step::Link { node, .. } | Step::Switch { node } => node == chip,
            Step::NtbWindow { ntb: x, .. } | Step::RidLut { ntb: x, .. } => x == ntb,
            _ => false,
        }
    };
    let (first, near) = steps.iter().enumerate().find_map(|(i, s)| match *s {
        Step::NtbWindow { ntb, .. } => Some((i, ntb)),
        _ => None,
    })?;
    let mut start = first;
    while start > 0 && belongs(&steps[start - 1], near) {
        start -= 1;
    }
    // The far adapter: the first adapter chip after the near one's.
    let (far_at, far) = steps[first..]
        .iter()
        .enumerate()
        .find_map(|(k, s)| match *s {
            Step::Switch { node } => match topo.node(node).kind {
                NodeKind::Switch {
                    adapter: Some(a), ..
                } if a != near => Some((first + k, a)),
                _ => None,
            },
            _ => None,
        })?;
    let mut end = far_at + 1;
    while end < steps.len() && belongs(&steps[end], far) {
        end += 1;
    }
    Some(start..end)
}

/// bandwidthTest's copy by GPU `gpu` to (write) or from (read) host `user`'s RAM, timed
/// from launch until the user's host sees it complete. A program on `user` borrows the
/// GPU when it is another host's and returns it afterwards.
pub fn gpu_copy_time(
    tf: &mut TimedFabric,
    gpu: &str,
    user: &str,
    bytes: u64,
    write: bool,
) -> Result<Time, RunError> {
    Program::run(tf, user, |p, tf| {
        let g = GpuCopy::set_up(p, tf, gpu, bytes)?;
        g.time(tf, p.host, write)
    })
}

/// Two GPUs a program on host `user` borrows (unless they are its own), and whether A's
/// data reaches B through the user's RAM (`via_ram`) or straight into B's memory.
#[derive(Clone, Copy, Debug)]
pub struct GpuPair<'a> {
    pub a: &'a str,
    pub b: &'a str,
    pub user: &'a str,
    pub via_ram: bool,
}

/// GPU `a` copies `bytes` to GPU `b` (straight into its memory, or through the user's
/// RAM), ended by a synchronising launch.
pub fn p2p_copy(tf: &mut TimedFabric, pair: GpuPair, bytes: u64) -> Result<Time, RunError> {
    Program::run(tf, pair.user, |p, tf| {
        let path = DataPath::set_up(p, tf, pair.a, pair.b, pair.via_ram, bytes)?;
        p2p_transfer(tf, &path, bytes)
    })
}

/// One round trip A → B → A of the GPUs' counter ping-pong.
pub fn gpu_pingpong(tf: &mut TimedFabric, pair: GpuPair) -> Result<Time, RunError> {
    Program::run(tf, pair.user, |p, tf| {
        pingpong(p, tf, pair.a, pair.b, pair.via_ram)
    })
}

/// (hops, roots) of GPU `a`'s data path to GPU `b`.
pub fn path_shape(tf: &mut TimedFabric, pair: GpuPair) -> Result<(usize, usize), RunError> {
    Program::run(tf, pair.user, |p, tf| {
        let path = DataPath::set_up(p, tf, pair.a, pair.b, pair.via_ram, PATH_PROBE_BYTES)?;
        data_path(tf, &path)
    })
}

/// Bytes of the access whose route `path_shape` counts.
const PATH_PROBE_BYTES: u64 = 64;

/// bandwidthTest's buffers as a program maps them: the copy's buffer and the completion
/// flag, segments of the user's RAM mapped for the GPU, and the GPU's doorbell mapped for
/// the user's CPU.
pub struct GpuCopy {
    pub gpu: Dev,
    pub buffer: Segment,
    /// The GPU's bus address of the buffer's first byte.
    pub buf: u64,
    /// The GPU's bus address of the completion flag.
    pub flag: u64,
    /// The CPU's address of the GPU's doorbell (BAR0).
    pub doorbell: u64,
    spec: DmaSpec,
    bytes: u64,
}

impl GpuCopy {
    /// Borrows `gpu` (unless it is the program's host's) and maps a buffer of `bytes` and
    /// a flag for it, its doorbell for the CPU.
    pub fn set_up(
        p: &mut Program,
        tf: &mut TimedFabric,
        gpu: &str,
        bytes: u64,
    ) -> Result<GpuCopy, RunError> {
        let dev = p.device(tf, gpu, bytes + FLAG_BYTES)?;
        let buffer = p.ram(tf, bytes)?;
        let flag_seg = p.ram(tf, FLAG_BYTES)?;
        let buf = p.map_ram(tf, dev, &buffer)?;
        let flag = p.map_ram(tf, dev, &flag_seg)?;
        let doorbell = p.cpu_bar(tf, dev, 0)?;
        let lender = tf.fabric.topo.node(dev.function).host;
        let spec = device_spec(tf, dev.requester(), mps_between(tf, lender, p.host))?;
        Ok(GpuCopy {
            gpu: dev,
            buffer,
            buf,
            flag,
            doorbell,
            spec,
            bytes,
        })
    }

    /// The copy timed from launch until host `user` sees it complete: the CPU rings the
    /// GPU (doorbell write), the copy engine starts after its launch overhead, runs the
    /// DMA, then writes the completion flag that the host polls.
    pub fn time(&self, tf: &mut TimedFabric, user: HostId, write: bool) -> Result<Time, RunError> {
        let (g, cpu) = (
            self.gpu.requester(),
            Requester::Cpu {
                host: user,
                package: 0,
            },
        );
        let launch = ns(tf.timing_of(user).cpu_mmio_write_ns)
            + one_way(tf, cpu, self.doorbell)?
            + ns(device_param(tf, g, "launch_ns")?);
        let op = if write {
            Op::Write { dst: self.buf }
        } else {
            Op::Read { src: self.buf }
        };
        let dma = dma_time(tf, g, self.spec, op, self.bytes)?;
        let notify = one_way(tf, g, self.flag)? + ns(tf.timing_of(user).cpu_poll_ns);
        Ok(launch + dma + notify)
    }
}

/// The completion flag's segment: a page (the smallest segment there is).
const FLAG_BYTES: u64 = 4096;

/// The A → B data path of `smartio.p2p` as a program maps it: both GPUs (borrowed when
/// another host's), and where A writes and B reads — B's BAR1 straight, or a segment of
/// the user's RAM mapped for both.
pub struct DataPath {
    pub a: Dev,
    pub b: Dev,
    /// Where A writes.
    pub dst: u64,
    /// Where B reads (through the user's RAM), or `None` when A writes into B.
    pub src: Option<u64>,
    /// The host whose memory A writes.
    pub target_host: HostId,
}

impl DataPath {
    pub fn set_up(
        p: &mut Program,
        tf: &mut TimedFabric,
        a: &str,
        b: &str,
        via_ram: bool,
        bytes: u64,
    ) -> Result<DataPath, RunError> {
        let (a, b) = (p.device(tf, a, bytes)?, p.device(tf, b, bytes)?);
        if via_ram {
            let seg = p.ram(tf, bytes)?;
            let dst = p.map_ram(tf, a, &seg)?;
            let src = p.map_ram(tf, b, &seg)?;
            Ok(DataPath {
                a,
                b,
                dst,
                src: Some(src),
                target_host: p.host,
            })
        } else {
            let dst = p.map_bar(tf, a, b, 1, 0, bytes.min(P2P_BAR_BYTES))?;
            Ok(DataPath {
                a,
                b,
                dst,
                src: None,
                target_host: tf.fabric.topo.node(b.function).host,
            })
        }
    }
}

/// How much of B's BAR1 a straight copy maps: larger copies wrap around it, as CUDA's
/// peer copies into a buffer of that size would (the K420's BAR1 holds 128 MiB).
const P2P_BAR_BYTES: u64 = 128 << 20;

use sim::timed::TimedFabric;

/// Hops and roots of the A → B data path in the counting convention of the thesis's
/// table of peer-to-peer scenarios (Paper IV, Table 1; docs/hardware.md §2): a hop is every
/// switch chip (an adapter's or a cluster switch included) and every root complex the data
/// passes through, one crossing at a time (a switch crossed up and back down counts
/// twice); roots are the root complexes crossed, likewise. A write straight into B's
/// memory is one route. Through the user's RAM the data path is A's write to the RAM
/// joined to B's read of it at the RAM's root complex, which the data passes through
/// once: it counts once as a root and once as a hop. (`topo path`'s `hops` counts switch
/// chips only, and a root where an access ends is no hop there.)
fn data_path(tf: &mut TimedFabric, path: &DataPath) -> Result<(usize, usize), RunError> {
    let route = |tf: &mut TimedFabric,
                 who: Requester,
                 bus: u64,
                 access: fabric::Access|
     -> Result<fabric::Path, RunError> {
        let mut p = fabric::Path::default();
        tf.fabric
            .route(
                &fabric::Request {
                    requester: who,
                    addr: bus,
                    len: PATH_PROBE_BYTES as u32,
                    access,
                },
                &mut p,
            )
            .map_err(|f| fault_error(tf, f))?;
        Ok(p)
    };
    let (a, b) = (path.a.requester(), path.b.requester());
    match path.src {
        Some(src) => {
            let to_ram = route(tf, a, path.dst, fabric::Access::Write)?;
            let from_ram = route(tf, b, src, fabric::Access::Read)?;
            Ok(join_at_memory(&to_ram, &from_ram))
        }
        None => {
            let p = route(tf, a, path.dst, fabric::Access::Write)?;
            Ok((p.hops() + p.roots(), p.roots()))
        }
    }
}

/// (hops, roots) of a data path that goes into memory by `to` and out of it by `from`
/// (the reader's route to it): every chip and root of both, the memory's root once when
/// both end at the same root complex.
pub fn join_at_memory(to: &fabric::Path, from: &fabric::Path) -> (usize, usize) {
    let last_root = |p: &fabric::Path| {
        p.steps.iter().rev().find_map(|s| match *s {
            fabric::Step::Root { node } => Some(node),
            _ => None,
        })
    };
    let shared = usize::from(last_root(to).is_some() && last_root(to) == last_root(from));
    let roots = to.roots() + from.roots() - shared;
    (to.hops() + from.hops() + roots, roots)
}

/// One copy of `bytes` from A to B plus the synchronising launch that ends it.
fn p2p_transfer(tf: &mut TimedFabric, path: &DataPath, bytes: u64) -> Result<Time, RunError> {
    let launch = |tf: &TimedFabric, g: Requester| -> Result<Time, RunError> {
        Ok(ns(device_param(tf, g, "launch_ns")?))
    };
    let (a, b) = (path.a.requester(), path.b.requester());
    let host_of = |tf: &TimedFabric, d: Dev| tf.fabric.topo.node(d.function).host;
    let sa = device_spec(
        tf,
        a,
        mps_between(tf, host_of(tf, path.a), path.target_host),
    )?;
    let t1 = dma_time(tf, a, sa, Op::Write { dst: path.dst }, bytes)?;
    match path.src {
        Some(src) => {
            let sb = device_spec(
                tf,
                b,
                mps_between(tf, host_of(tf, path.b), path.target_host),
            )?;
            let t2 = dma_time(tf, b, sb, Op::Read { src }, bytes)?;
            Ok(launch(tf, a)? + t1 + launch(tf, b)? + t2)
        }
        None => Ok(launch(tf, a)? + t1),
    }
}

/// A → B → A on a 4-byte counter, by the GPUs' kernels (`devices::gpu::pingpong`): each
/// writes the peer's counter and polls its own — in GPU memory, or in the user's RAM where
/// the polls are reads across the fabric. The counter bytes travel through the fabric and
/// every value read is checked.
fn pingpong(
    p: &mut Program,
    tf: &mut TimedFabric,
    a_name: &str,
    b_name: &str,
    via_ram: bool,
) -> Result<Time, RunError> {
    let (a, b) = (
        p.device(tf, a_name, COUNTER_BYTES)?,
        p.device(tf, b_name, COUNTER_BYTES)?,
    );
    let ga = Gpu::from_node(tf, a.function).map_err(RunError::from(a_name))?;
    let gb = Gpu::from_node(tf, b.function).map_err(RunError::from(b_name))?;
    let counters = if via_ram {
        // A's counter in the segment's first page, B's in its second.
        let (wa, wb) = (0, COUNTER_BYTES / 2);
        let seg = p.ram(tf, COUNTER_BYTES)?;
        let (at_a, at_b) = (p.map_ram(tf, a, &seg)?, p.map_ram(tf, b, &seg)?);
        Counters::InHostRam {
            a_writes: at_a + wb,
            b_polls: at_b + wb,
            b_writes: at_b + wa,
            a_polls: at_a + wa,
        }
    } else {
        let (oa, ob) = (0x1000, 0x2000);
        Counters::InGpuMemory {
            a_to_b: p.map_bar(tf, a, b, gb.memory_bar, ob, 4)?,
            b_to_a: p.map_bar(tf, b, a, ga.memory_bar, oa, 4)?,
            a_offset: oa,
            b_offset: ob,
        }
    };
    devices::pingpong(tf, &ga, &gb, counters, PINGPONG_ROUNDS).map_err(RunError::from("ping-pong"))
}

/// The ping-pong's counter segment in the user's RAM: a page for each GPU's counter.
const COUNTER_BYTES: u64 = 8192;

/// Round trips run per configuration (each value is checked; the model is deterministic,
/// so the paper's 100,000 would repeat the same time).
const PINGPONG_ROUNDS: u32 = 10;
