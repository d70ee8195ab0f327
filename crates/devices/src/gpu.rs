//! A GPU-like endpoint: memory behind a BAR that peers reach, a copy engine (a DMA
//! requester with the GPU's tags and request size), and a kernel that can run a ping-pong
//! on a 4-byte counter — writing the peer's counter and polling its own — with the counter
//! bytes moved through the fabric (so a wrong route shows up as a wrong value) and the
//! time taken from the timed network.

use std::collections::BTreeMap;

use fabric::{Fault, NodeKind, PcieNodeId, Requester};
use sim::timed::{ns, TimedFabric};
use sim::Time;

use crate::dma::{timed_read, timed_write, DmaSpec};

/// A GPU as the timing layer sees it, from its device `timing` table.
#[derive(Clone, Debug, PartialEq)]
pub struct Gpu {
    pub node: PcieNodeId,
    /// Copy-engine tags and request size (`dma_max_reads`, `dma_mrrs_bytes`).
    pub max_reads: u32,
    pub mrrs: u32,
    /// From a launch command reaching the GPU to its engine or kernel starting.
    pub launch: Time,
    /// A kernel's poll loop noticing a changed word in its own memory.
    pub poll: Time,
    /// The BAR that exposes GPU memory (the largest).
    pub memory_bar: u8,
}

/// A ping-pong that read a value it did not expect.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum GpuError {
    #[error("{0}")]
    Setup(String),
    #[error("access fault: {0:?}")]
    Fault(Fault),
    #[error("counter read {got}, expected {want}: the write did not land where the kernel polls")]
    WrongValue { got: u32, want: u32 },
}

impl From<Fault> for GpuError {
    fn from(f: Fault) -> Self {
        GpuError::Fault(f)
    }
}

fn param(t: &BTreeMap<String, f64>, key: &str, who: &str) -> Result<f64, GpuError> {
    t.get(key)
        .copied()
        .ok_or_else(|| GpuError::Setup(format!("{who} has no timing parameter `{key}`")))
}

impl Gpu {
    pub fn from_node(tf: &TimedFabric, node: PcieNodeId) -> Result<Gpu, GpuError> {
        let topo = &tf.fabric.topo;
        let who = topo.node_label(node);
        let NodeKind::Function { device, .. } = topo.node(node).kind else {
            return Err(GpuError::Setup(format!("{who} is not a device function")));
        };
        let t = &topo.devices[device.index()].timing;
        let memory_bar = topo
            .node(node)
            .bars
            .iter()
            .max_by_key(|b| b.size)
            .map(|b| b.index)
            .ok_or_else(|| GpuError::Setup(format!("{who} has no BAR")))?;
        Ok(Gpu {
            node,
            max_reads: param(t, "dma_max_reads", &who)? as u32,
            mrrs: param(t, "dma_mrrs_bytes", &who)? as u32,
            launch: ns(param(t, "launch_ns", &who)?),
            poll: ns(param(t, "poll_ns", &who)?),
            memory_bar,
        })
    }

    /// The copy engine's DMA behaviour for a given MPS, paced by the GPU's link.
    pub fn dma_spec(&self, tf: &TimedFabric, mps: u32) -> DmaSpec {
        let l = tf
            .fabric
            .topo
            .node(self.node)
            .link
            .expect("a GPU has a link");
        DmaSpec {
            mps,
            mrrs: self.mrrs,
            max_reads: self.max_reads,
            issue_ps_per_kib: sim::pcie::ps_per_kib(l.gen, l.width),
        }
    }

    /// A kernel store of `value` to bus address `bus`: a posted write whose bytes land
    /// in the fabric when it lands on the network.
    pub fn store_u32(&self, tf: &mut TimedFabric, bus: u64, value: u32) -> Result<Time, GpuError> {
        Ok(timed_write(
            tf,
            Requester::Function(self.node),
            bus,
            &value.to_le_bytes(),
        )?)
    }

    /// A kernel load of 4 bytes at bus address `bus` (its own memory or a peer's/host's):
    /// the value through the fabric, the time a read round trip on the network.
    pub fn load_u32(&self, tf: &mut TimedFabric, bus: u64) -> Result<(u32, Time), GpuError> {
        let (b, t) = timed_read(tf, Requester::Function(self.node), bus, 4)?;
        let mut w = [0u8; 4];
        w.copy_from_slice(&b[..4]);
        Ok((u32::from_le_bytes(w), t))
    }

    /// Reads the counter in the GPU's own memory (what its poll loop sees).
    pub fn own_u32(&self, tf: &TimedFabric, offset: u64) -> u32 {
        let mut b = [0u8; 4];
        tf.fabric
            .peek_bar(self.node, self.memory_bar, offset, &mut b);
        u32::from_le_bytes(b)
    }
}

/// Where each side's counter lives and how each side reaches the other's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counters {
    /// In each GPU's own memory: `a_to_b` is the bus address A uses for B's counter (at
    /// `b_offset` in B's memory BAR), and the other way round.
    InGpuMemory {
        a_to_b: u64,
        b_to_a: u64,
        a_offset: u64,
        b_offset: u64,
    },
    /// In host RAM: each side writes the other's word and polls its own with reads
    /// (`a_writes`/`b_polls` are B's word as A and B address it, and so on).
    InHostRam {
        a_writes: u64,
        b_polls: u64,
        b_writes: u64,
        a_polls: u64,
    },
}

/// `rounds` round trips A → B → A; returns the time of one (they are identical in a
/// deterministic model, and the loop checks every value the kernels read).
pub fn pingpong(
    tf: &mut TimedFabric,
    a: &Gpu,
    b: &Gpu,
    c: Counters,
    rounds: u32,
) -> Result<Time, GpuError> {
    let mut total = Time::ZERO;
    for k in 0..rounds.max(1) {
        let (ping, pong) = (2 * k + 1, 2 * k + 2);
        let leg = |tf: &mut TimedFabric,
                   from: &Gpu,
                   to: &Gpu,
                   value: u32,
                   write_at: u64,
                   seen: Seen|
         -> Result<Time, GpuError> {
            let fly = from.store_u32(tf, write_at, value)?;
            let (got, detect) = match seen {
                Seen::Own(offset) => (to.own_u32(tf, offset), to.poll),
                // A poll read lands after the write half a round trip later on average and
                // returns half a round trip after that.
                Seen::Read(bus) => {
                    let (v, rtt) = to.load_u32(tf, bus)?;
                    (v, rtt + to.poll)
                }
            };
            if got != value {
                return Err(GpuError::WrongValue { got, want: value });
            }
            Ok(fly + detect)
        };
        let t = match c {
            Counters::InGpuMemory {
                a_to_b,
                b_to_a,
                a_offset,
                b_offset,
            } => {
                leg(tf, a, b, ping, a_to_b, Seen::Own(b_offset))?
                    + leg(tf, b, a, pong, b_to_a, Seen::Own(a_offset))?
            }
            Counters::InHostRam {
                a_writes,
                b_polls,
                b_writes,
                a_polls,
            } => {
                leg(tf, a, b, ping, a_writes, Seen::Read(b_polls))?
                    + leg(tf, b, a, pong, b_writes, Seen::Read(a_polls))?
            }
        };
        total += t;
    }
    Ok(Time::from_ps(total.as_ps() / rounds.max(1) as u64))
}

#[derive(Clone, Copy)]
enum Seen {
    Own(u64),
    Read(u64),
}
