//! MDEV (the thesis's Paper III): a lent device passed through to a virtual machine. The
//! VM runs on a host of the cluster; its host has an *mdev parent* for every device lent
//! elsewhere, and a VM given one sees an ordinary PCI function whose DMA addresses are
//! guest-physical (GPA).
//!
//! * **Guest memory**: N bytes with x86's split — low `[0, min(N, 3 GiB))`, high from
//!   4 GiB for the rest — backed by host RAM pages of 4 KiB or 2 MiB allocated through
//!   the host layer (`Hosts::ram_alloc`) and assigned to guest pages in a seeded shuffled
//!   order, as a hypervisor's allocations come out scattered: GPA → HPA is a table the
//!   VM keeps (`Vm::gpa_to_hpa`), never an identity.
//! * **Borrow on reset**: creating the mdev borrows nothing. The guest's first
//!   configuration write (its driver's FLR) makes the parent borrow the device
//!   (exclusive, the bare-metal borrow's own DMA window left at one page: the guest's DMA
//!   never uses it) and then forwards the write. Configuration reads and writes are
//!   forwarded through the agents (counted `ConfigForward`/`ConfigReply`; a read before
//!   the borrow is answered by the lender's agent the same way).
//! * **Bus Master Enable** (Command bit 2 rising in a guest write): the parent pins guest
//!   memory and, not knowing the guest's layout, discovers it by probing from 0 and from
//!   4 GiB, one host page (extent) at a time, until a GPA is not backed. Each side gets a
//!   DMA window — with a borrower IOMMU, one IOVA range of the device's proxied requester
//!   ID there mapping each guest page's IOVA onto its HPA, reached by one run of lender
//!   address-LUT windows; without, a lender window per host page toward the HPA itself
//!   (shared when one covers several) — and the lender IOMMU **mirrors GPAs**: in the
//!   device's domain there, IOVA = GPA, mapped onto the lender NTB BAR address of the
//!   window. So the device DMAs to the GPA its guest driver gave it, the lender IOMMU
//!   translates every TLP, the NTB carries it to the borrower. MDEV needs the lender
//!   IOMMU: with it off, `create_mdev` refuses (`MdevError::LenderIommuOff`). Bus Master
//!   Enable cleared unmaps and unpins.
//! * **Interrupts**: a guest's MSI vector becomes a host vector of the VM's host
//!   (`Cluster::setup_msi`: the device's MSI lands at the borrower through the lender's
//!   MSI window); `relay_interrupts` reads the fabric's interrupt log and injects each
//!   MSI of an mdev into its VM (counted). INTx is allowed, unlike bare metal: the guest's
//!   Command write decides Interrupt Disable, and an assertion at the lender
//!   (`lender_intx`) is relayed by the agents (one counted `IntxRelay`) and injected.
//! * **Shutdown** unmaps and unpins, returns each device (FLR at the lender, every
//!   window, requester entry and IOMMU mapping released). **Cold migration** shuts the VM
//!   down, allocates guest memory on the new host, copies its bytes (CPU loads at the old
//!   host, CPU stores at the new, through the fabric), frees the old pages and moves the
//!   mdevs to the new host's parents: the next guest reset borrows from there and the
//!   guest's GPAs work again.
//!
//! Every NTB, requester-ID and IOMMU change goes through the host layer.
//!
//! This file owns the `Hypervisor`, its mdevs and what they hold, and `setup_guest_dma`;
//! beside it: `guest` (VMs and their guest memory), `config` (forwarded configuration
//! accesses, the borrow at reset, DMA at Bus Master Enable), `interrupts` (MSI and INTx
//! into VMs) and `lifecycle` (create, shut down, boot, migrate, destroy).

use std::collections::BTreeMap;

use fabric::{Fabric, HostId, Requester};
use host::{HostError, IovaRange, NtbWindow, RequesterEntry};

use super::lending::{Borrowed, Cluster, MsiRoute, DEVCTL_FLR, PCIE_DEVCTL};
use super::pool::{Availability, Fdid};
use super::LendError;

mod config;
mod guest;
mod interrupts;
mod lifecycle;

pub use guest::{guest_layout, GuestExtent, HostPage, Vm, VmConfig, VmInterrupt};

/// Top of low guest memory: guest RAM below the 32-bit hole.
pub const LOW_MEM_TOP: u64 = 3 << 30;
/// Where high guest memory starts.
pub const HIGH_MEM_BASE: u64 = 4 << 30;
/// Command register (0x04) bit 2: Bus Master Enable.
pub const CMD_BUS_MASTER: u16 = 1 << 2;
/// Command register bit 1: Memory Space Enable.
pub const CMD_MEMORY: u16 = 1 << 1;
/// First host vector (MSI data) the hypervisor gives mdevs' guest vectors.
const FIRST_HOST_VECTOR: u32 = 0x40;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct VmId(pub u32);

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MdevId(pub u32);

/// One of an mdev's DMA windows, for inspection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MdevWindow {
    /// The guest-physical range it covers (found by probing).
    pub gpa: u64,
    pub len: u64,
    /// The borrower IOVA range (`None` without a borrower IOMMU).
    pub iova: Option<IovaRange>,
    /// The lender NTB BAR address of the window's first byte (`None` without a borrower
    /// IOMMU: a window per host page).
    pub ntb_base: Option<u64>,
    /// Address-LUT mappings held on the lender's adapter for it.
    pub lut_mappings: usize,
}

/// What `setup_guest_dma` hands the experiment layer.
#[derive(Clone, Debug)]
pub struct MdevDmaSetup {
    pub hypervisor: Hypervisor,
    pub cluster: Cluster,
    pub vm: VmId,
    pub mdev: MdevId,
    /// The requester whose DMA the job issues (the lent function).
    pub device: Requester,
    /// GPA of the buffer in guest memory: the bus address the device is given.
    pub gpa: u64,
    pub bytes: u64,
}

/// Counts of what the hypervisor's MDEV layer did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MdevStats {
    /// Probes of guest memory (one per host page found, one per side's end).
    pub probes: u64,
    /// Borrows made at a guest's reset.
    pub borrows: u64,
    /// Bus Master Enable set-ups (pin, probe, map).
    pub dma_setups: u64,
    pub msi_injections: u64,
    pub intx_injections: u64,
    /// INTx assertions the device's Interrupt Disable bit held back.
    pub intx_masked: u64,
}

#[derive(Clone, Debug, Default)]
struct DmaSide {
    gpa: u64,
    len: u64,
    window: Option<(IovaRange, NtbWindow)>,
    page_windows: Vec<NtbWindow>,
    lender: Option<IovaRange>,
}

#[derive(Clone, Debug)]
struct MdevDma {
    requester: Option<RequesterEntry>,
    sides: Vec<DmaSide>,
    pinned: u64,
}

#[derive(Clone, Debug)]
struct Mdev {
    fdid: Fdid,
    vm: VmId,
    /// The parent's host (the VM's).
    host: HostId,
    borrow: Option<Borrowed>,
    /// The guest's view of the Command register.
    command: u16,
    dma: Option<MdevDma>,
    /// Host vector routes: (route, APIC, guest vector).
    msi: Vec<(MsiRoute, u32, u32)>,
}

/// Why an MDEV call failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MdevError {
    #[error("MDEV cannot pass {dev} to VM `{vm}`: its lender `{lender}` has its IOMMU off, and MDEV needs the lender IOMMU to mirror guest-physical addresses onto the NTB (turn it on: host.{lender}.iommu = true)")]
    LenderIommuOff {
        dev: String,
        vm: String,
        lender: String,
    },
    #[error("unknown VM #{}", .0 .0)]
    UnknownVm(VmId),
    #[error("unknown mdev #{}", .0 .0)]
    UnknownMdev(MdevId),
    #[error(transparent)]
    Lend(#[from] LendError),
    #[error("VM `{vm}`: {source}")]
    Host {
        vm: String,
        #[source]
        source: HostError,
    },
    #[error("an access faulted: {0}")]
    Fault(String),
    #[error("{0}")]
    Invalid(String),
}

/// The hypervisors of the cluster: VMs on any host, and the mdevs passed to them.
#[derive(Clone, Debug, Default)]
pub struct Hypervisor {
    vms: BTreeMap<VmId, Vm>,
    mdevs: BTreeMap<MdevId, Mdev>,
    next_vm: u32,
    next_mdev: u32,
    next_vector: u32,
    /// Entries of the fabric's interrupt log already looked at.
    seen: usize,
    stats: MdevStats,
}

impl Hypervisor {
    pub fn new() -> Hypervisor {
        Hypervisor::default()
    }

    pub fn stats(&self) -> MdevStats {
        self.stats
    }

    pub fn vm(&self, id: VmId) -> Result<&Vm, MdevError> {
        self.vms.get(&id).ok_or(MdevError::UnknownVm(id))
    }
    /// The devices an mdev parent on `host` could offer: lent by another host, not gone.
    pub fn mdev_parents(&self, c: &Cluster, host: HostId) -> Vec<Fdid> {
        c.pool()
            .devices()
            .iter()
            .filter(|d| d.host != host && d.availability == Availability::Lent)
            .map(|d| d.fdid)
            .collect()
    }

    /// Gives VM `vm` an mdev of `fdid` (the parent on the VM's host). Nothing is borrowed
    /// until the guest resets the device. Refused when the lender's IOMMU is off.
    pub fn create_mdev(
        &mut self,
        c: &Cluster,
        f: &Fabric,
        vm: VmId,
        fdid: Fdid,
    ) -> Result<MdevId, MdevError> {
        let v = self.vm(vm)?;
        let d = c.device(fdid)?;
        let lender = f.topo.host(d.host);
        if d.host == v.host {
            return Err(MdevError::Invalid(format!(
                "{} is in VM `{}`'s own host `{}`: MDEV passes through devices lent by other hosts",
                d.label(),
                v.name,
                lender.name
            )));
        }
        if !lender.iommu {
            return Err(MdevError::LenderIommuOff {
                dev: d.label(),
                vm: v.name.clone(),
                lender: lender.name.clone(),
            });
        }
        if d.availability != Availability::Lent {
            return Err(MdevError::Invalid(format!(
                "{} is not lent ({:?}): no mdev parent offers it",
                d.label(),
                d.availability
            )));
        }
        let host = v.host;
        let id = MdevId(self.next_mdev);
        self.next_mdev += 1;
        self.mdevs.insert(
            id,
            Mdev {
                fdid,
                vm,
                host,
                borrow: None,
                command: 0,
                dma: None,
                msi: Vec::new(),
            },
        );
        Ok(id)
    }

    fn mdev(&self, m: MdevId) -> Result<&Mdev, MdevError> {
        self.mdevs.get(&m).ok_or(MdevError::UnknownMdev(m))
    }

    /// The borrow behind an mdev (`None` before the guest's reset and after shutdown).
    pub fn borrowed(&self, m: MdevId) -> Result<Option<Borrowed>, MdevError> {
        Ok(self.mdev(m)?.borrow)
    }

    /// Whether the guest has enabled bus mastering (and guest memory is mapped).
    pub fn bus_master(&self, m: MdevId) -> Result<bool, MdevError> {
        Ok(self.mdev(m)?.dma.is_some())
    }

    /// The requester the device's DMA comes from.
    pub fn device(&self, c: &Cluster, m: MdevId) -> Result<Requester, MdevError> {
        Ok(Requester::Function(c.device(self.mdev(m)?.fdid)?.function))
    }

    /// The DMA windows set up at Bus Master Enable (empty before).
    pub fn windows(&self, m: MdevId) -> Result<Vec<MdevWindow>, MdevError> {
        Ok(self.mdev(m)?.dma.as_ref().map_or_else(Vec::new, |d| {
            d.sides
                .iter()
                .map(|s| MdevWindow {
                    gpa: s.gpa,
                    len: s.len,
                    iova: s.window.map(|w| w.0),
                    ntb_base: s.window.map(|w| w.1.local),
                    lut_mappings: s.page_windows.len() + s.window.is_some() as usize,
                })
                .collect()
        }))
    }

    fn running_vm(&self, m: MdevId) -> Result<(&Mdev, &Vm), MdevError> {
        let md = self.mdev(m)?;
        let v = self.vm(md.vm)?;
        if !v.running {
            return Err(MdevError::Invalid(format!(
                "VM `{}` is shut down: boot it first",
                v.name
            )));
        }
        Ok((md, v))
    }
}

/// Sets up MDEV as `smartio.mdev`'s `mdev` config does: `device` (e.g. `lender.gpu`) lent
/// by its host, a VM on `vm_host` with `guest`'s memory, an mdev of the device given to
/// it, the guest driver's reset (FLR, which borrows the device) and its Command write
/// (Memory Space and Bus Master Enable, which maps guest memory through MDEV). Returns
/// the requester and the GPA of a `bytes`-byte buffer in guest memory (high memory when
/// it fits there, else low memory from 1 GiB), ready for a DMA job.
pub fn setup_guest_dma(
    f: &mut Fabric,
    device: &str,
    vm_host: &str,
    guest: VmConfig,
    bytes: u64,
) -> Result<MdevDmaSetup, MdevError> {
    let mut c = Cluster::new(f);
    let fdid = c.fdid_by_name(f, device)?;
    c.lend(fdid)?;
    let host = f
        .topo
        .host_by_name(vm_host)
        .ok_or_else(|| MdevError::Invalid(format!("no host `{vm_host}`")))?;
    let mut hv = Hypervisor::new();
    let vm = hv.create_vm(f, host, "guest", guest)?;
    let m = hv.create_mdev(&c, f, vm, fdid)?;
    hv.guest_config_write(&mut c, f, m, PCIE_DEVCTL, &DEVCTL_FLR.to_le_bytes())?;
    hv.guest_config_write(
        &mut c,
        f,
        m,
        0x04,
        &(CMD_MEMORY | CMD_BUS_MASTER).to_le_bytes(),
    )?;
    let layout = guest_layout(guest.mem_bytes);
    let gpa = match layout.get(1) {
        Some(&(hb, hl)) if bytes <= hl => hb,
        _ if (1 << 30) + bytes <= layout[0].1 => 1 << 30,
        _ if bytes <= layout[0].1 => 0,
        _ => {
            return Err(MdevError::Invalid(format!(
                "a {bytes}-byte buffer fits in neither side of a {}-byte guest",
                guest.mem_bytes
            )))
        }
    };
    let device = hv.device(&c, m)?;
    Ok(MdevDmaSetup {
        hypervisor: hv,
        cluster: c,
        vm,
        mdev: m,
        device,
        gpa,
        bytes,
    })
}
