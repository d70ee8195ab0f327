//! `Fabric`: a topology plus its mutable hardware state (NTB LUTs, IOMMU page tables,
//! byte stores, cable state, fault log), the router, and the functional data path
//! (`dma_read`/`dma_write`/`cpu_load`/`cpu_store`) that moves real bytes through it.
//!
//! This file holds the state, its construction and its plain changes (links and hosts
//! failing, IOMMU tables). The rest is by concern, each an `impl Fabric` of its own:
//! `ntb_windows` (address-LUT windows and the adapter-to-adapter ways they use),
//! `routing` (where a request goes and what it crosses), `multicast` (groups and their
//! replicated routes), `config` (configuration requests, routed by ID) and `data_path`
//! (accesses that move bytes).

mod config;
mod data_path;
mod multicast;
mod ntb_windows;
mod routing;

use rustc_hash::FxHashMap;

use crate::error::{FabricError, ScenarioError};
use crate::iommu::{DomainId, Iommu, Perm};
use crate::memory::Memory;
use crate::multicast::{McGroup, McRoutes};
use crate::ntb::NtbState;
use crate::path::*;
use crate::scenario::Scenario;
use crate::topology::*;

/// An interrupt message as delivered: the host, the APIC its address names, its data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Msi {
    pub host: HostId,
    pub apic: u32,
    pub data: u32,
}

pub struct Fabric {
    pub topo: Topology,
    ntb: Vec<NtbState>,
    iommu: Vec<Iommu>,
    cable_up: Vec<bool>,
    /// Hosts that have not crashed (a crashed host answers nothing and issues nothing).
    host_up: Vec<bool>,
    mem: Memory,
    faults: Vec<Fault>,
    /// Interrupt messages delivered, in order (the functional side of MSI/MSI-X).
    interrupts: Vec<Msi>,
    scratch: Path,
    /// Ways between adapters that programmed address-LUT entries use (`LutEntry::way`):
    /// searched when the first entry of an adapter pair is programmed, dropped with the
    /// pair's last entry, so they follow the windows in use, never the cluster's size.
    ways: Vec<Way>,
    way_of: FxHashMap<(NtbId, NtbId), u32>,
    /// Slots of `ways` no entry uses.
    free_ways: Vec<u32>,
    /// Bumped by every change to IOMMU tables, NTB LUTs or link state: whoever caches
    /// routes (the timing layer) drops them when it moves.
    routing_epoch: u64,
    /// The state of the software driving this hardware (the host layer's IOMMU and NTB
    /// drivers), kept with the machine so whoever holds the fabric holds its drivers'
    /// bookkeeping too. Opaque here: the fabric never looks inside.
    driver_state: Option<Box<dyn std::any::Any + Send + Sync>>,
    /// The multicast group table (`catalog::MULTICAST_GROUPS` slots, made on first use).
    mcast: Vec<Option<McGroup>>,
    /// Reused by `store` into a multicast window.
    mc_scratch: McRoutes,
}

impl Fabric {
    pub fn new(topo: Topology) -> Fabric {
        let ntb = topo
            .ntbs
            .iter()
            .map(|n| {
                let rc = topo.node(topo.node(n.chip_node).root).rid;
                NtbState::new(n, rc)
            })
            .collect();
        let iommu = vec![Iommu::default(); topo.hosts.len()];
        let cable_up = vec![true; topo.cables.len()];
        let host_up = vec![true; topo.hosts.len()];
        Fabric {
            topo,
            ntb,
            iommu,
            cable_up,
            host_up,
            mem: Memory::default(),
            faults: Vec::new(),
            interrupts: Vec::new(),
            scratch: Path::with_capacity(64),
            ways: Vec::new(),
            way_of: FxHashMap::default(),
            free_ways: Vec::new(),
            routing_epoch: 0,
            driver_state: None,
            mcast: Vec::new(),
            mc_scratch: McRoutes::default(),
        }
    }

    /// Builds the fabric and programs the scenario's static NTB windows.
    pub fn from_scenario(s: Scenario) -> Result<Fabric, ScenarioError> {
        let mut f = Fabric::new(s.topology);
        for (i, w) in s.windows.iter().enumerate() {
            let locate = |msg: String| ScenarioError {
                message: msg,
                ..w.at.clone()
            };
            // The same window twice would take LUT entries for nothing: a slip, not intent.
            if let Some(first) = s.windows[..i]
                .iter()
                .find(|v| (&v.ntb, &v.to, v.offset, v.size) == (&w.ntb, &w.to, w.offset, w.size))
            {
                return Err(locate(format!(
                    "the same window as line {} ({} → {} + {:#x}, {} bytes)",
                    first.at.line, w.ntb, w.to, w.offset, w.size
                )));
            }
            let (h, n) = w
                .ntb
                .split_once('.')
                .ok_or_else(|| locate(format!("`{}` is not `host.ntb`", w.ntb)))?;
            let ntb = f
                .topo
                .host_by_name(h)
                .and_then(|hid| f.topo.ntb_by_name(hid, n))
                .ok_or_else(|| locate(format!("no NTB adapter `{}`", w.ntb)))?;
            let (host, addr) = f
                .resolve_address(&w.to, w.offset)
                .map_err(|e| locate(e.to_string()))?;
            f.ntb_map_window(ntb, host, addr, w.size)
                .map_err(|e| locate(e.to_string()))?;
        }
        Ok(f)
    }

    pub fn faults(&self) -> &[Fault] {
        &self.faults
    }

    /// Interrupt messages delivered so far.
    pub fn interrupts(&self) -> &[Msi] {
        &self.interrupts
    }

    pub fn clear_faults(&mut self) {
        self.faults.clear();
    }

    /// Changes whenever routing state changes (IOMMU tables, NTB LUTs, cables): a route
    /// cached under another epoch may be wrong.
    pub fn routing_epoch(&self) -> u64 {
        self.routing_epoch
    }

    /// Takes the drivers' state out (to be put back with `put_driver_state`); `None` when
    /// there is none yet or it is of another type.
    pub fn take_driver_state<T: std::any::Any + Send + Sync>(&mut self) -> Option<T> {
        let b = self.driver_state.take()?;
        match b.downcast::<T>() {
            Ok(t) => Some(*t),
            Err(b) => {
                self.driver_state = Some(b);
                None
            }
        }
    }

    pub fn put_driver_state<T: std::any::Any + Send + Sync>(&mut self, state: T) {
        self.driver_state = Some(Box::new(state));
    }

    pub fn ntb_state(&self, ntb: NtbId) -> &NtbState {
        &self.ntb[ntb.index()]
    }

    pub fn iommu(&self, host: HostId) -> &Iommu {
        &self.iommu[host.index()]
    }

    /// Takes a cable down or up (link failure).
    pub fn set_cable_up(&mut self, cable: CableId, up: bool) {
        self.routing_epoch += 1;
        self.cable_up[cable.index()] = up;
    }

    /// Whether the cable itself is up (as last set; its end hosts aside).
    pub fn cable_up(&self, cable: CableId) -> bool {
        self.cable_up[cable.index()]
    }

    /// Why a TLP cannot cross `cable` now: the cable is down, or a host at one of its
    /// ends has crashed (its adapter's link is down with it). `None`: it is live.
    pub fn cable_fault(&self, cable: CableId) -> Option<FaultKind> {
        let down_end = self.topo.cables[cable.index()]
            .ends
            .iter()
            .find_map(|e| match *e {
                CableEnd::Ntb(n) => {
                    let h = self.topo.ntbs[n.index()].host;
                    (!self.host_up[h.index()]).then_some(h)
                }
                CableEnd::ClusterSwitch(_) => None,
            });
        match down_end {
            Some(host) => Some(FaultKind::HostDown { host }),
            None if !self.cable_up[cable.index()] => Some(FaultKind::LinkDown { cable }),
            None => None,
        }
    }

    pub fn host_up(&self, host: HostId) -> bool {
        self.host_up[host.index()]
    }

    /// A host crashes: from now on every route into or out of it faults with
    /// `HostDown` naming it — its RAM, BARs and adapters answer nothing, its CPUs and
    /// devices issue nothing, and its adapters' links are down.
    pub fn crash_host(&mut self, host: HostId) {
        self.routing_epoch += 1;
        self.host_up[host.index()] = false;
    }

    /// A crashed host comes back, cold: what its RAM and its functions' BARs and config
    /// spaces held is lost (they read as zeros, as memory never written). NTB LUTs and
    /// IOMMU tables are left as they were: the host layer owns them, and what a rebooted
    /// OS programs again is its business, not the hardware's.
    pub fn restart_host(&mut self, host: HostId) {
        self.routing_epoch += 1;
        if !self.host_up[host.index()] {
            self.mem.clear_host(host, &self.topo.host(host).nodes);
        }
        self.host_up[host.index()] = true;
    }

    // ---- IOMMU ----------------------------------------------------------------------

    pub fn iommu_create_domain(&mut self, host: HostId) -> DomainId {
        self.iommu[host.index()].create_domain()
    }
    pub fn iommu_attach(&mut self, host: HostId, rid: Rid, d: DomainId) -> Result<(), FabricError> {
        self.routing_epoch += 1;
        self.iommu[host.index()].attach(rid, d)
    }
    pub fn iommu_detach(&mut self, host: HostId, rid: Rid) {
        self.routing_epoch += 1;
        self.iommu[host.index()].detach(rid)
    }
    pub fn iommu_map(
        &mut self,
        host: HostId,
        d: DomainId,
        iova: u64,
        phys: u64,
        len: u64,
        perm: Perm,
    ) -> Result<(), FabricError> {
        self.routing_epoch += 1;
        self.iommu[host.index()].map(d, iova, phys, len, perm)
    }
    pub fn iommu_unmap(
        &mut self,
        host: HostId,
        d: DomainId,
        iova: u64,
        len: u64,
    ) -> Result<(), FabricError> {
        self.routing_epoch += 1;
        self.iommu[host.index()].unmap(d, iova, len)
    }
}

/// A way between two adapters and how many programmed LUT entries use it.
#[derive(Clone, Debug)]
struct Way {
    ends: (NtbId, NtbId),
    hops: Box<[NtbHop]>,
    entries: u32,
}
