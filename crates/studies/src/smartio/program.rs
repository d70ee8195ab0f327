//! A SmartIO user program on one host, as `smartio.gpu_dma` and `smartio.p2p` run one
//! (docs/hardware.md §6): it borrows every device that is not its host's own from the pool
//! (`SCIBorrowDevice`), creates its RAM as segments of its host (`SCICreateSegment`),
//! maps them and peers' BARs for each device (`SCIMap*SegmentForDevice`, peer-to-peer
//! through `map_device_for_device`) and BARs for its CPU (the shadow BAR), then returns
//! what it borrowed (`SCIReturnDevice`: Function Level Reset, every window torn down).
//! Its host's own devices go through the host's DMA API, as a local program's do.

use fabric::{HostId, PcieNodeId, Requester};
use host::{DmaDirection, DmaMapping, Hosts, NumaNode, PhysAddr};
use sim::timed::TimedFabric;
use systems::smartio::{
    AccessHints, BorrowOptions, Borrowed, Cluster, PeerTarget, Segment, DEFAULT_DMA_WINDOW,
};

use crate::harness::RunError;

/// A device as the program holds it: its own host's, or borrowed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dev {
    pub function: PcieNodeId,
    pub borrow: Option<Borrowed>,
}

impl Dev {
    /// The requester its DMA comes from (the real function, wherever it sits).
    pub fn requester(&self) -> Requester {
        Requester::Function(self.function)
    }
}

/// What the program holds until `finish`: the cluster, its borrows, its segments and the
/// host DMA API mappings of its host's own devices.
pub struct Program {
    pub cluster: Cluster,
    pub host: HostId,
    pub host_name: String,
    borrows: Vec<Borrowed>,
    segments: Vec<Segment>,
    local_maps: Vec<DmaMapping>,
}

fn lend_err(what: &str) -> impl Fn(systems::smartio::LendError) -> RunError + '_ {
    move |e| RunError(format!("{what}: {e}"))
}

impl Program {
    /// A program on host `user`, holding nothing yet.
    pub fn new(tf: &TimedFabric, user: &str) -> Result<Program, RunError> {
        let host = tf
            .fabric
            .topo
            .host_by_name(user)
            .ok_or_else(|| RunError(format!("no host `{user}`")))?;
        Ok(Program {
            cluster: Cluster::new(&tf.fabric),
            host,
            host_name: user.to_string(),
            borrows: Vec::new(),
            segments: Vec::new(),
            local_maps: Vec::new(),
        })
    }

    /// Runs `body` with a program on `user`, then returns everything it holds, also when
    /// `body` failed (its error first).
    pub fn run<T>(
        tf: &mut TimedFabric,
        user: &str,
        body: impl FnOnce(&mut Program, &mut TimedFabric) -> Result<T, RunError>,
    ) -> Result<T, RunError> {
        let mut p = Program::new(tf, user)?;
        let r = body(&mut p, tf);
        let done = p.finish(tf);
        let v = r?;
        done?;
        Ok(v)
    }

    /// Device `name`: its host's own as it is; another host's lent by that host's agent
    /// and borrowed exclusively, with a DMA window (used when the program's host has an
    /// IOMMU) of at least `window` bytes.
    pub fn device(
        &mut self,
        tf: &mut TimedFabric,
        name: &str,
        window: u64,
    ) -> Result<Dev, RunError> {
        let f = &mut tf.fabric;
        let function = match f.resolve(name).map_err(RunError::from(name))? {
            fabric::Endpoint::Node(n) => n,
            _ => return Err(RunError(format!("{name}: not a device function"))),
        };
        if f.topo.node(function).host == self.host {
            return Ok(Dev {
                function,
                borrow: None,
            });
        }
        let fdid = self.cluster.fdid_by_name(f, name).map_err(lend_err(name))?;
        self.cluster.lend(fdid).map_err(lend_err(name))?;
        let opts = BorrowOptions {
            dma_window: window.next_power_of_two().max(DEFAULT_DMA_WINDOW),
            ..BorrowOptions::exclusive()
        };
        let b = self
            .cluster
            .borrow(f, self.host, fdid, opts)
            .map_err(lend_err(name))?;
        self.borrows.push(b);
        Ok(Dev {
            function,
            borrow: Some(b),
        })
    }

    /// `bytes` of the program's host's RAM (node 0), a segment of its own.
    pub fn ram(&mut self, tf: &mut TimedFabric, bytes: u64) -> Result<Segment, RunError> {
        let node = NumaNode {
            host: self.host,
            node: 0,
        };
        let hints = AccessHints::DEVICE_READ | AccessHints::DEVICE_WRITE | AccessHints::HOST_READ;
        let s = self
            .cluster
            .create_local_segment(&mut tf.fabric, node, bytes, hints)
            .map_err(lend_err(&format!("{}.ram", self.host_name)))?;
        self.segments.push(s);
        Ok(s)
    }

    /// The address `dev` puts on the bus for the first byte of RAM segment `seg`.
    pub fn map_ram(
        &mut self,
        tf: &mut TimedFabric,
        dev: Dev,
        seg: &Segment,
    ) -> Result<u64, RunError> {
        let f = &mut tf.fabric;
        match dev.borrow {
            Some(b) => {
                let m = self
                    .cluster
                    .map_segment_for_device(f, b, seg, DmaDirection::Bidirectional)
                    .map_err(lend_err(&f.topo.node_label(dev.function)))?;
                Ok(m.addr.0)
            }
            None => self.local_map(tf, dev, seg.phys, seg.size),
        }
    }

    /// The address `a` puts on the bus for `len` bytes at `offset` of BAR `bar` of `b`:
    /// peer-to-peer, without a copy through RAM.
    pub fn map_bar(
        &mut self,
        tf: &mut TimedFabric,
        a: Dev,
        b: Dev,
        bar: u8,
        offset: u64,
        len: u64,
    ) -> Result<u64, RunError> {
        let f = &mut tf.fabric;
        let what = f.topo.node_label(b.function);
        match a.borrow {
            Some(ab) => {
                let peer = match b.borrow {
                    Some(bb) => PeerTarget::Borrowed(bb),
                    None => PeerTarget::Local(b.function),
                };
                let m = self
                    .cluster
                    .map_device_for_device(f, ab, peer, bar, offset, len)
                    .map_err(lend_err(&what))?;
                Ok(m.mapping.addr.0)
            }
            None => {
                let node = f.topo.node(b.function);
                let info = node
                    .bar(bar)
                    .copied()
                    .ok_or_else(|| RunError(format!("{what} has no BAR{bar}")))?;
                let at = PhysAddr {
                    host: node.host,
                    addr: info.addr + offset,
                };
                self.local_map(tf, a, at, len)
            }
        }
    }

    /// Where the program's CPU reaches BAR `bar` of `dev`: the shadow BAR of a borrowed
    /// device, its own bus address for its host's own.
    pub fn cpu_bar(&mut self, tf: &mut TimedFabric, dev: Dev, bar: u8) -> Result<u64, RunError> {
        let f = &mut tf.fabric;
        let what = f.topo.node_label(dev.function);
        match dev.borrow {
            Some(b) => {
                let s = self
                    .cluster
                    .connect_device_segment(f, b, bar)
                    .map_err(lend_err(&what))?;
                let m = self
                    .cluster
                    .map_segment_for_cpu(f, self.host, &s)
                    .map_err(lend_err(&what))?;
                Ok(m.addr)
            }
            None => f
                .topo
                .node(dev.function)
                .bar(bar)
                .map(|i| i.addr)
                .ok_or_else(|| RunError(format!("{what} has no BAR{bar}"))),
        }
    }

    /// The devices the program borrowed, in borrow order.
    pub fn borrows(&self) -> &[Borrowed] {
        &self.borrows
    }

    /// A device of the program's host mapped through the host's DMA API (its IOMMU, or its
    /// NTB adapter when the target is in another host).
    fn local_map(
        &mut self,
        tf: &mut TimedFabric,
        dev: Dev,
        at: PhysAddr,
        len: u64,
    ) -> Result<u64, RunError> {
        let m = Hosts::with(&mut tf.fabric, |h, f| {
            h.dma_map_single(
                f,
                dev.requester(),
                at,
                len.max(1),
                DmaDirection::Bidirectional,
            )
        })
        .map_err(|e| RunError(format!("{}: {e}", tf.fabric.topo.node_label(dev.function))))?;
        self.local_maps.push(m);
        Ok(m.addr.0)
    }

    /// Gives everything back: its own devices' mappings, every borrow (reset, its windows,
    /// requester entry and mappings torn down), its segments. The cluster stays to be
    /// looked at.
    pub fn finish(&mut self, tf: &mut TimedFabric) -> Result<(), RunError> {
        let f = &mut tf.fabric;
        for m in std::mem::take(&mut self.local_maps) {
            Hosts::with(f, |h, f| h.dma_unmap_single(f, &m))
                .map_err(|e| RunError(format!("unmapping: {e}")))?;
        }
        for b in std::mem::take(&mut self.borrows) {
            self.cluster
                .return_device(f, b)
                .map_err(lend_err("returning a device"))?;
        }
        for s in std::mem::take(&mut self.segments) {
            self.cluster
                .remove_segment(f, &s)
                .map_err(lend_err("removing a segment"))?;
        }
        Ok(())
    }
}
