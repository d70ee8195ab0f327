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

use std::collections::BTreeMap;

use fabric::iommu::{Perm, PAGE};
use fabric::{Fabric, HostId, Requester};
use host::{HostError, Hosts, IovaRange, NtbWindow, NumaNode, PhysAddr, RequesterEntry};

use super::agent::ControlKind;
use super::lending::{BorrowOptions, Borrowed, Cluster, MsiRoute, DEVCTL_FLR, PCIE_DEVCTL};
use super::pool::{Availability, Fdid};
use super::LendError;

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

/// The host pages backing guest memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostPage {
    Small4K,
    Huge2M,
}

impl HostPage {
    pub fn bytes(self) -> u64 {
        match self {
            HostPage::Small4K => 4 << 10,
            HostPage::Huge2M => 2 << 20,
        }
    }
}

/// A VM's memory and where it lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VmConfig {
    /// Guest memory in bytes (a multiple of the host page).
    pub mem_bytes: u64,
    pub page: HostPage,
    /// NUMA node of the host its memory comes from.
    pub node: u32,
    /// Seed of the order host pages are given to guest pages.
    pub seed: u64,
}

impl VmConfig {
    /// `smartio.mdev`'s guest: 4 GiB on 2 MiB host pages (3 GiB low, 1 GiB high).
    pub fn mdev_experiment() -> VmConfig {
        VmConfig {
            mem_bytes: 4 << 30,
            page: HostPage::Huge2M,
            node: 0,
            seed: 1,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct VmId(pub u32);

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MdevId(pub u32);

/// A run of guest memory backed by one host page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GuestExtent {
    pub gpa: u64,
    pub hpa: u64,
    pub len: u64,
}

/// An interrupt injected into a VM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VmInterrupt {
    /// An MSI: the guest's vector, and the data the device wrote at the VM's host.
    Msi {
        mdev: MdevId,
        vector: u32,
        data: u32,
    },
    /// A legacy INTx assertion relayed from the lender.
    Intx { mdev: MdevId },
}

/// A virtual machine: its host, its guest-physical → host-physical table, its
/// interrupt log.
#[derive(Clone, Debug)]
pub struct Vm {
    pub name: String,
    host: HostId,
    config: VmConfig,
    /// Guest page GPA → HPA of the host page backing it.
    pages: BTreeMap<u64, u64>,
    running: bool,
    /// Host pages pinned by mdevs' DMA.
    pinned: u64,
    interrupts: Vec<VmInterrupt>,
}

impl Vm {
    pub fn host(&self) -> HostId {
        self.host
    }

    pub fn config(&self) -> VmConfig {
        self.config
    }

    pub fn running(&self) -> bool {
        self.running
    }

    /// Host pages pinned for devices' DMA now.
    pub fn pinned_pages(&self) -> u64 {
        self.pinned
    }

    /// The guest-physical ranges `(start, len)` of its memory: low, then high if any.
    pub fn layout(&self) -> Vec<(u64, u64)> {
        guest_layout(self.config.mem_bytes)
    }

    /// The host page backing `gpa`, or `None` (not guest memory): what a hypervisor's
    /// `gfn_to_pfn` answers, and what MDEV probes with.
    pub fn backing(&self, gpa: u64) -> Option<GuestExtent> {
        let p = self.config.page.bytes();
        let at = gpa - gpa % p;
        self.pages.get(&at).map(|&hpa| GuestExtent {
            gpa: at,
            hpa,
            len: p,
        })
    }

    /// Where `gpa` is in the VM's host.
    pub fn gpa_to_hpa(&self, gpa: u64) -> Option<PhysAddr> {
        self.backing(gpa).map(|e| PhysAddr {
            host: self.host,
            addr: e.hpa + (gpa - e.gpa),
        })
    }

    /// Every guest page, in GPA order.
    pub fn extents(&self) -> Vec<GuestExtent> {
        let len = self.config.page.bytes();
        self.pages
            .iter()
            .map(|(&gpa, &hpa)| GuestExtent { gpa, hpa, len })
            .collect()
    }

    pub fn interrupts(&self) -> &[VmInterrupt] {
        &self.interrupts
    }

    /// The guest's CPU stores `data` at `gpa` (through the GPA → HPA table, CPU stores of
    /// the VM's host through the fabric).
    pub fn write_guest(&self, f: &mut Fabric, gpa: u64, data: &[u8]) -> Result<(), MdevError> {
        let mut done = 0usize;
        while done < data.len() {
            let (hpa, n) = self.piece(gpa + done as u64, data.len() - done)?;
            f.store(self.cpu(), hpa, &data[done..done + n])
                .map_err(|e| MdevError::Fault(format!("{e:?}")))?;
            done += n;
        }
        Ok(())
    }

    /// The guest's CPU loads `buf.len()` bytes at `gpa`.
    pub fn read_guest(&self, f: &mut Fabric, gpa: u64, buf: &mut [u8]) -> Result<(), MdevError> {
        let mut done = 0usize;
        while done < buf.len() {
            let (hpa, n) = self.piece(gpa + done as u64, buf.len() - done)?;
            f.load(self.cpu(), hpa, &mut buf[done..done + n])
                .map_err(|e| MdevError::Fault(format!("{e:?}")))?;
            done += n;
        }
        Ok(())
    }

    fn cpu(&self) -> Requester {
        Requester::Cpu {
            host: self.host,
            package: 0,
        }
    }

    /// HPA of `gpa` and how many of `want` bytes stay in its host page.
    fn piece(&self, gpa: u64, want: usize) -> Result<(u64, usize), MdevError> {
        let e = self.backing(gpa).ok_or_else(|| {
            MdevError::Invalid(format!(
                "GPA {gpa:#x} is not guest memory of VM `{}`",
                self.name
            ))
        })?;
        let n = ((e.gpa + e.len - gpa) as usize).min(want);
        Ok((e.hpa + (gpa - e.gpa), n))
    }
}

/// Low and high guest memory of an `n`-byte guest.
pub fn guest_layout(n: u64) -> Vec<(u64, u64)> {
    let low = n.min(LOW_MEM_TOP);
    let mut v = vec![(0, low)];
    if n > low {
        v.push((HIGH_MEM_BASE, n - low));
    }
    v
}

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

    /// Starts a VM named `name` on `host`: guest memory allocated from the host's RAM
    /// (`config.node`), host pages given to guest pages in a shuffled order.
    pub fn create_vm(
        &mut self,
        f: &mut Fabric,
        host: HostId,
        name: &str,
        config: VmConfig,
    ) -> Result<VmId, MdevError> {
        if f.topo.hosts.get(host.index()).is_none() {
            return Err(MdevError::Invalid(format!("no host #{host}")));
        }
        let pages = alloc_guest(f, host, name, config)?;
        let id = VmId(self.next_vm);
        self.next_vm += 1;
        self.vms.insert(
            id,
            Vm {
                name: name.into(),
                host,
                config,
                pages,
                running: true,
                pinned: 0,
                interrupts: Vec::new(),
            },
        );
        Ok(id)
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

    /// A guest configuration read, forwarded to the lender (two counted messages).
    pub fn guest_config_read(
        &mut self,
        c: &mut Cluster,
        f: &mut Fabric,
        m: MdevId,
        reg: u64,
        buf: &mut [u8],
    ) -> Result<(), MdevError> {
        let (md, _) = self.running_vm(m)?;
        match md.borrow {
            Some(b) => c.config_read(f, b, reg, buf)?,
            None => {
                // Not borrowed yet: the lender's agent answers the forwarded read.
                let d = c.device(md.fdid)?.clone();
                c.post(ControlKind::ConfigForward);
                f.config_read(d.host, 0, f.topo.node(d.function).rid, reg, buf)
                    .map_err(|e| LendError::ConfigFault {
                        dev: d.label(),
                        why: format!("{e:?}"),
                    })?;
                c.post(ControlKind::ConfigReply);
            }
        }
        Ok(())
    }

    /// A guest configuration write through the mdev. The first one (the guest driver's
    /// reset) borrows the device from the VM's host; every one is forwarded (two counted
    /// messages). Bus Master Enable rising maps guest memory; falling unmaps it.
    pub fn guest_config_write(
        &mut self,
        c: &mut Cluster,
        f: &mut Fabric,
        m: MdevId,
        reg: u64,
        data: &[u8],
    ) -> Result<(), MdevError> {
        let (md, v) = self.running_vm(m)?;
        let (fdid, host, vm_name) = (md.fdid, md.host, v.name.clone());
        let b = match md.borrow {
            Some(b) => b,
            None => {
                let opts = BorrowOptions {
                    exclusive: true,
                    dma_window: PAGE,
                    through: None,
                };
                let b = c.borrow(f, host, fdid, opts)?;
                self.stats.borrows += 1;
                self.mdevs.get_mut(&m).expect("checked").borrow = Some(b);
                b
            }
        };
        c.config_write(f, b, reg, data)?;
        // The guest's Command register, bytes 0x04..0x06 of what it wrote.
        let old = self.mdev(m)?.command;
        let mut cmd = old.to_le_bytes();
        for (i, byte) in data.iter().enumerate() {
            let at = reg + i as u64;
            if (4..6).contains(&at) {
                cmd[(at - 4) as usize] = *byte;
            }
        }
        let new = u16::from_le_bytes(cmd);
        self.mdevs.get_mut(&m).expect("checked").command = new;
        let (was, is) = (old & CMD_BUS_MASTER != 0, new & CMD_BUS_MASTER != 0);
        if is && !was {
            self.enable_dma(c, f, m, &vm_name)?;
        } else if was && !is {
            self.disable_dma(f, m, &vm_name)?;
        }
        Ok(())
    }

    /// Bus Master Enable: pin, probe and map guest memory for the device.
    fn enable_dma(
        &mut self,
        c: &Cluster,
        f: &mut Fabric,
        m: MdevId,
        vm_name: &str,
    ) -> Result<(), MdevError> {
        let md = self.mdev(m)?;
        let b = md.borrow.expect("borrowed before any write");
        let x = c.live(f, b)?;
        let (lender, borrower, lender_ntb, borrower_ntb, function) = (
            x.lender,
            x.borrower,
            x.lender_ntb,
            x.borrower_ntb,
            x.function,
        );
        if !f.topo.host(lender).iommu {
            return Err(MdevError::LenderIommuOff {
                dev: c.device(md.fdid)?.label(),
                vm: vm_name.into(),
                lender: f.topo.host(lender).name.clone(),
            });
        }
        // Probe from each base until a GPA is not backed.
        let v = self.vm(md.vm)?;
        let mut sides = Vec::new();
        let mut probes = 0;
        for base in [0, HIGH_MEM_BASE] {
            let mut ext = Vec::new();
            let mut gpa = base;
            loop {
                probes += 1;
                match v.backing(gpa) {
                    Some(e) => {
                        gpa = e.gpa + e.len;
                        ext.push(e);
                    }
                    None => break,
                }
            }
            if !ext.is_empty() {
                sides.push((base, gpa - base, ext));
            }
        }
        self.stats.probes += probes;
        let bits = f.topo.node(function).dma_mask_bits;
        let limit = if bits >= 64 { u64::MAX } else { 1u64 << bits };
        if let Some((base, len, _)) = sides.iter().find(|s| s.0 + s.1 > limit) {
            return Err(MdevError::Invalid(format!(
                "{}: guest memory {base:#x}..{:#x} of VM `{vm_name}` is above its {bits}-bit DMA mask",
                f.topo.node_label(function),
                base + len
            )));
        }
        let pinned: u64 = sides.iter().map(|s| s.2.len() as u64).sum();
        let rid = f.topo.node(function).rid;
        let borrower_iommu = f.topo.host(borrower).iommu;
        let mut dma = MdevDma {
            requester: None,
            sides: Vec::new(),
            pinned,
        };
        let r = Hosts::with(f, |hs, f| -> Result<(), HostError> {
            let e = hs.ntb_acquire_requester(f, lender_ntb, rid)?;
            dma.requester = Some(e);
            let proxied = e.proxy_on(f, borrower_ntb);
            let ws = f.topo.ntbs[lender_ntb.index()].window_size;
            for (base, len, ext) in &sides {
                dma.sides.push(DmaSide {
                    gpa: *base,
                    len: *len,
                    ..DmaSide::default()
                });
                let side = dma.sides.last_mut().expect("pushed");
                let lr = hs.iommu_reserve_at(f, lender, rid, *base, *len)?;
                side.lender = Some(lr);
                if borrower_iommu {
                    let range = hs.iommu_reserve(f, borrower, proxied, *len, u64::MAX, ws)?;
                    let w = match hs.ntb_acquire_window(f, lender_ntb, borrower, range.start, *len)
                    {
                        Ok(w) => w,
                        Err(e) => {
                            hs.iommu_unreserve(f, &range)?;
                            return Err(e);
                        }
                    };
                    side.window = Some((range, w));
                    for x in ext {
                        hs.iommu_map_at(
                            f,
                            &range,
                            range.start + (x.gpa - base),
                            x.hpa,
                            x.len,
                            Perm::RW,
                        )?;
                    }
                    hs.iommu_map_at(f, &lr, *base, w.local, *len, Perm::RW)?;
                } else {
                    for x in ext {
                        let w = hs.ntb_acquire_window(f, lender_ntb, borrower, x.hpa, x.len)?;
                        side.page_windows.push(w);
                        hs.iommu_map_at(f, &lr, x.gpa, w.local, x.len, Perm::RW)?;
                    }
                }
            }
            Ok(())
        });
        if let Err(e) = r {
            let _ = Hosts::with(f, |hs, f| release_dma(hs, f, &mut dma));
            return Err(MdevError::Host {
                vm: vm_name.into(),
                source: e,
            });
        }
        self.stats.dma_setups += 1;
        let vm = self.mdevs[&m].vm;
        self.vms.get_mut(&vm).expect("live").pinned += pinned;
        self.mdevs.get_mut(&m).expect("checked").dma = Some(dma);
        Ok(())
    }

    fn disable_dma(&mut self, f: &mut Fabric, m: MdevId, vm_name: &str) -> Result<(), MdevError> {
        let md = self.mdevs.get_mut(&m).ok_or(MdevError::UnknownMdev(m))?;
        let Some(mut dma) = md.dma.take() else {
            return Ok(());
        };
        let vm = md.vm;
        Hosts::with(f, |hs, f| release_dma(hs, f, &mut dma)).map_err(|e| MdevError::Host {
            vm: vm_name.into(),
            source: e,
        })?;
        if let Some(v) = self.vms.get_mut(&vm) {
            v.pinned -= dma.pinned;
        }
        Ok(())
    }

    /// The guest enables MSI vector `guest_vector` (trapped by the mdev): the hypervisor
    /// gives it a host vector of the VM's host and redirects the device's MSI there
    /// (`Cluster::setup_msi`, one counted message). Returns the route.
    pub fn guest_enable_msi(
        &mut self,
        c: &mut Cluster,
        f: &mut Fabric,
        m: MdevId,
        guest_vector: u32,
    ) -> Result<MsiRoute, MdevError> {
        let (md, v) = self.running_vm(m)?;
        let b = md.borrow.ok_or_else(|| {
            MdevError::Invalid(format!(
                "VM `{}` has not reset its device yet: nothing is borrowed to send MSIs",
                v.name
            ))
        })?;
        let host_vector = FIRST_HOST_VECTOR + self.next_vector;
        let apic = 0u8;
        let r = c.setup_msi(f, b, host_vector, apic)?;
        self.next_vector += 1;
        self.mdevs
            .get_mut(&m)
            .expect("checked")
            .msi
            .push((r, apic as u32, guest_vector));
        Ok(r)
    }

    /// Injects into their VMs the MSIs of mdevs that arrived at their hosts since the
    /// last call (read from the fabric's interrupt log); returns how many.
    pub fn relay_interrupts(&mut self, f: &Fabric) -> usize {
        let log = f.interrupts();
        if self.seen > log.len() {
            self.seen = 0;
        }
        let mut n = 0;
        for msi in &log[self.seen..] {
            let hit = self.mdevs.iter().find_map(|(&id, md)| {
                let b = md.borrow?;
                (b.host == msi.host)
                    .then(|| {
                        md.msi
                            .iter()
                            .find(|(r, apic, _)| *apic == msi.apic && r.data == msi.data)
                            .map(|&(_, _, gv)| (id, md.vm, gv))
                    })
                    .flatten()
            });
            if let Some((mdev, vm, vector)) = hit {
                if let Some(v) = self.vms.get_mut(&vm) {
                    v.interrupts.push(VmInterrupt::Msi {
                        mdev,
                        vector,
                        data: msi.data,
                    });
                    self.stats.msi_injections += 1;
                    n += 1;
                }
            }
        }
        self.seen = log.len();
        n
    }

    /// The device asserts its legacy INTx at the lender. Unless the device's Interrupt
    /// Disable bit (as the guest last wrote it) holds it back, the lender's agent relays
    /// it to the VM's host (one counted `IntxRelay` message), which injects it. Returns
    /// whether it reached the VM.
    pub fn lender_intx(
        &mut self,
        c: &mut Cluster,
        f: &mut Fabric,
        m: MdevId,
    ) -> Result<bool, MdevError> {
        let md = self.mdev(m)?;
        let Some(b) = md.borrow else {
            return Ok(false);
        };
        let x = c.live(f, b)?;
        let (lender, rid) = (x.lender, f.topo.node(x.function).rid);
        let mut cmd = [0u8; 2];
        f.config_read(lender, 0, rid, 0x04, &mut cmd)
            .map_err(|e| MdevError::Fault(format!("{e:?}")))?;
        if u16::from_le_bytes(cmd) & super::lending::CMD_INTX_DISABLE != 0 {
            self.stats.intx_masked += 1;
            return Ok(false);
        }
        c.post(ControlKind::IntxRelay);
        let vm = md.vm;
        let v = self.vms.get_mut(&vm).expect("live");
        v.interrupts.push(VmInterrupt::Intx { mdev: m });
        self.stats.intx_injections += 1;
        Ok(true)
    }

    /// The guest shuts down: each of its mdevs unmapped and unpinned, its device returned
    /// (FLR at the lender, every window, requester entry and IOMMU mapping released).
    /// Guest memory stays (for a boot or a migration).
    pub fn shutdown_vm(
        &mut self,
        c: &mut Cluster,
        f: &mut Fabric,
        vm: VmId,
    ) -> Result<(), MdevError> {
        let name = self.vm(vm)?.name.clone();
        let ids: Vec<MdevId> = self
            .mdevs
            .iter()
            .filter(|(_, m)| m.vm == vm)
            .map(|(&id, _)| id)
            .collect();
        for id in ids {
            self.disable_dma(f, id, &name)?;
            let md = self.mdevs.get_mut(&id).expect("listed");
            md.command = 0;
            md.msi.clear();
            if let Some(b) = md.borrow.take() {
                c.return_device(f, b)?;
            }
        }
        self.vms.get_mut(&vm).expect("checked").running = false;
        Ok(())
    }

    /// Boots a shut-down VM (its devices are borrowed again at the guest's reset).
    pub fn boot_vm(&mut self, vm: VmId) -> Result<(), MdevError> {
        self.vms
            .get_mut(&vm)
            .ok_or(MdevError::UnknownVm(vm))?
            .running = true;
        Ok(())
    }

    /// Cold migration to `to`: shut down, guest memory allocated on `to` (`node`), its
    /// bytes copied (CPU loads at the old host, stores at the new), the old pages freed,
    /// the VM's mdevs moved to `to`'s parents, the VM booted there.
    pub fn migrate_vm(
        &mut self,
        c: &mut Cluster,
        f: &mut Fabric,
        vm: VmId,
        to: HostId,
        node: u32,
    ) -> Result<(), MdevError> {
        let v = self.vm(vm)?;
        if f.topo.hosts.get(to.index()).is_none() {
            return Err(MdevError::Invalid(format!("no host #{to}")));
        }
        if v.host == to {
            return Err(MdevError::Invalid(format!(
                "VM `{}` is already on host `{}`",
                v.name,
                f.topo.host(to).name
            )));
        }
        for md in self.mdevs.values().filter(|m| m.vm == vm) {
            let d = c.device(md.fdid)?;
            if d.host == to {
                return Err(MdevError::Invalid(format!(
                    "VM `{}` cannot move to `{}`: its mdev's device {} lives there, and MDEV passes through devices of other hosts",
                    v.name,
                    f.topo.host(to).name,
                    d.label()
                )));
            }
        }
        self.shutdown_vm(c, f, vm)?;
        let v = self.vm(vm)?.clone();
        let config = VmConfig { node, ..v.config };
        let pages = alloc_guest(f, to, &v.name, config)?;
        let p = config.page.bytes();
        let chunk = p.min(2 << 20) as usize;
        let mut src = vec![0u8; chunk];
        let mut dst = vec![0u8; chunk];
        let old = Requester::Cpu {
            host: v.host,
            package: 0,
        };
        let new = Requester::Cpu {
            host: to,
            package: 0,
        };
        let fault = |e| MdevError::Fault(format!("{e:?}"));
        for (gpa, &from) in &v.pages {
            let at = pages[gpa];
            for off in (0..p).step_by(chunk) {
                f.load(old, from + off, &mut src).map_err(fault)?;
                if src.iter().all(|&x| x == 0) {
                    // Skip zeros the new page already holds (sparse memory stays sparse).
                    f.load(new, at + off, &mut dst).map_err(fault)?;
                    if dst.iter().all(|&x| x == 0) {
                        continue;
                    }
                }
                f.store(new, at + off, &src).map_err(fault)?;
            }
        }
        free_guest(f, v.host, &v)?;
        let x = self.vms.get_mut(&vm).expect("checked");
        x.host = to;
        x.config = config;
        x.pages = pages;
        x.running = true;
        for md in self.mdevs.values_mut().filter(|m| m.vm == vm) {
            md.host = to;
        }
        Ok(())
    }

    /// Shuts a VM down and frees its memory; its mdevs go with it.
    pub fn destroy_vm(
        &mut self,
        c: &mut Cluster,
        f: &mut Fabric,
        vm: VmId,
    ) -> Result<(), MdevError> {
        self.shutdown_vm(c, f, vm)?;
        let v = self.vms.remove(&vm).expect("checked");
        self.mdevs.retain(|_, m| m.vm != vm);
        free_guest(f, v.host, &v)
    }
}

/// Allocates an `config.mem_bytes` guest's host pages on `host` and gives them to guest
/// pages in a seeded shuffled order.
fn alloc_guest(
    f: &mut Fabric,
    host: HostId,
    name: &str,
    config: VmConfig,
) -> Result<BTreeMap<u64, u64>, MdevError> {
    let p = config.page.bytes();
    if config.mem_bytes == 0 || !config.mem_bytes.is_multiple_of(p) {
        return Err(MdevError::Invalid(format!(
            "VM `{name}`: guest memory of {} bytes is not a whole number of {p}-byte host pages",
            config.mem_bytes
        )));
    }
    let count = config.mem_bytes / p;
    let node = NumaNode {
        host,
        node: config.node,
    };
    let r = Hosts::with(f, |hs, f| -> Result<Vec<u64>, HostError> {
        let mut got = Vec::with_capacity(count as usize);
        for _ in 0..count {
            match hs.ram_alloc(f, node, p, p) {
                Ok(a) => got.push(a.addr),
                Err(e) => {
                    for &a in &got {
                        hs.ram_free(PhysAddr { host, addr: a }, p)?;
                    }
                    return Err(e);
                }
            }
        }
        Ok(got)
    });
    let mut hpas = r.map_err(|e| MdevError::Host {
        vm: name.into(),
        source: e,
    })?;
    // Fisher–Yates with splitmix64: scattered, and the same for the same seed.
    let mut s = config.seed ^ 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        s = s.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = s;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    for i in (1..hpas.len()).rev() {
        let j = (next() % (i as u64 + 1)) as usize;
        hpas.swap(i, j);
    }
    let mut pages = BTreeMap::new();
    let mut it = hpas.into_iter();
    for (start, len) in guest_layout(config.mem_bytes) {
        for gpa in (start..start + len).step_by(p as usize) {
            pages.insert(gpa, it.next().expect("one host page per guest page"));
        }
    }
    Ok(pages)
}

fn free_guest(f: &mut Fabric, host: HostId, v: &Vm) -> Result<(), MdevError> {
    let p = v.config.page.bytes();
    Hosts::with(f, |hs, _| -> Result<(), HostError> {
        for &hpa in v.pages.values() {
            hs.ram_free(PhysAddr { host, addr: hpa }, p)?;
        }
        Ok(())
    })
    .map_err(|e| MdevError::Host {
        vm: v.name.clone(),
        source: e,
    })
}

/// Releases what an mdev's DMA set-up holds (whatever part of it was made).
fn release_dma(hs: &mut Hosts, f: &mut Fabric, d: &mut MdevDma) -> Result<(), HostError> {
    for s in d.sides.iter_mut().rev() {
        if let Some(lr) = s.lender.take() {
            hs.iommu_unreserve(f, &lr)?;
        }
        for w in s.page_windows.drain(..).rev() {
            hs.ntb_release_window(f, &w)?;
        }
        if let Some((range, w)) = s.window.take() {
            hs.ntb_release_window(f, &w)?;
            hs.iommu_unreserve(f, &range)?;
        }
    }
    if let Some(e) = d.requester.take() {
        hs.ntb_release_requester(f, &e)?;
    }
    Ok(())
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
