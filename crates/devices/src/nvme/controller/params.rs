//! What a controller is built from: its parameters, read from its device's `timing`
//! table, link and host, its Controller Memory Buffer, and the error of a controller
//! that cannot be built from them.

use fabric::{NodeKind, PcieNodeId};
use sim::timed::{ns, TimedFabric};
use sim::Time;

use crate::nvme::media::MediaTiming;

/// A controller that cannot be built from its parameters.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct NvmeError(pub String);

/// A controller's parameters, from its device's `timing` table (the `nvme_*` keys and the
/// DMA keys), its link and host, and the namespace the caller gives it.
#[derive(Clone, Debug, PartialEq)]
pub struct NvmeParams {
    pub media: MediaTiming,
    /// Controller processing per command (one command at a time).
    pub command: Time,
    /// CC.EN 0 → 1 until CSTS.RDY.
    pub enable: Time,
    /// Queue pairs including the admin pair.
    pub queue_pairs: u16,
    /// Entries of the largest queue (CAP.MQES + 1).
    pub max_queue_entries: u32,
    /// DMA: outstanding reads, read request size, posted write payload (the host's MPS).
    pub max_reads: u32,
    pub mrrs: u32,
    pub mps: u32,
    /// CAP.DSTRD.
    pub dstrd: u8,
    /// Identify Controller: max data transfer 2^mdts pages.
    pub mdts: u8,
    pub vid: u16,
    pub serial: String,
    pub model: String,
    /// Namespace 1: LBA size (512 or 4096) and blocks.
    pub lba_bytes: u64,
    pub blocks: u64,
    /// A Controller Memory Buffer: the function's first memory BAR after BAR0, if its
    /// device (model) gives it one (the P4800X has none, docs/hardware.md §2).
    pub cmb: Option<Cmb>,
}

/// A Controller Memory Buffer holding submission queues (CMBSZ.SQS): the controller
/// reads SQ entries there inside the device, without a PCIe read.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Cmb {
    pub bar: u8,
    /// Its bus address and size (the whole BAR, CMBLOC.OFST 0).
    pub addr: u64,
    pub bytes: u64,
    /// One internal read of an SQ entry there (the device's `bar_latency_ns`).
    pub access: Time,
}

impl Cmb {
    pub fn contains(&self, addr: u64, len: u64) -> bool {
        addr >= self.addr && addr.saturating_add(len) <= self.addr + self.bytes
    }
}

impl NvmeParams {
    /// The parameters of the NVMe function `node`, with a namespace of `blocks` of
    /// `lba_bytes`.
    pub fn from_node(
        tf: &TimedFabric,
        node: PcieNodeId,
        lba_bytes: u64,
        blocks: u64,
    ) -> Result<NvmeParams, NvmeError> {
        let topo = &tf.fabric.topo;
        let who = topo.node_label(node);
        let NodeKind::Function { device, .. } = topo.node(node).kind else {
            return Err(NvmeError(format!("{who} is not a device function")));
        };
        let d = &topo.devices[device.index()];
        let t = &d.timing;
        let p = |k: &str| {
            t.get(k)
                .copied()
                .ok_or_else(|| NvmeError(format!("{who} has no timing parameter `{k}`")))
        };
        if lba_bytes != 512 && lba_bytes != 4096 {
            return Err(NvmeError(format!(
                "LBA size {lba_bytes} B: this model offers 512 B or 4 KiB"
            )));
        }
        Ok(NvmeParams {
            media: MediaTiming {
                read: ns(p("nvme_read_ns")?),
                write: ns(p("nvme_write_ns")?),
                read_gbps: p("nvme_read_gbps")?,
                write_gbps: p("nvme_write_gbps")?,
                channels: p("nvme_channels")? as u32,
            },
            command: ns(p("nvme_command_ns")?),
            enable: ns(p("nvme_enable_ns")?),
            // 65,535 I/O queues and the admin pair would be 65,536: a u16 holds one less.
            queue_pairs: p("nvme_queue_pairs")?.min(65535.0) as u16,
            max_queue_entries: p("nvme_max_queue_entries")? as u32,
            max_reads: p("dma_max_reads")? as u32,
            mrrs: p("dma_mrrs_bytes")? as u32,
            mps: topo.host(topo.node(node).host).mps,
            dstrd: 0,
            mdts: 5,
            vid: 0x8086,
            serial: format!("NUDMA{:015}", node),
            model: if d.model.is_empty() {
                d.name.clone()
            } else {
                d.model.clone()
            },
            lba_bytes,
            blocks,
            cmb: match topo.node(node).bars.iter().find(|b| b.index != 0) {
                Some(b) => Some(Cmb {
                    bar: b.index,
                    addr: b.addr,
                    bytes: b.size,
                    access: ns(p("bar_latency_ns")?),
                }),
                None => None,
            },
        })
    }
}
