//! A VM and its guest memory: host pages scattered over guest pages (GPA → HPA),
//! what its CPU loads and stores, the interrupts injected into it.

use std::collections::BTreeMap;

use fabric::{Fabric, HostId, Requester};
use host::{HostError, Hosts, NumaNode, PhysAddr};

use super::{MdevError, MdevId, HIGH_MEM_BASE, LOW_MEM_TOP};

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
    pub(super) host: HostId,
    pub(super) config: VmConfig,
    /// Guest page GPA → HPA of the host page backing it.
    pub(super) pages: BTreeMap<u64, u64>,
    pub(super) running: bool,
    /// Host pages pinned by mdevs' DMA.
    pub(super) pinned: u64,
    pub(super) interrupts: Vec<VmInterrupt>,
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

/// Allocates an `config.mem_bytes` guest's host pages on `host` and gives them to guest
/// pages in a seeded shuffled order.
pub(super) fn alloc_guest(
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

pub(super) fn free_guest(f: &mut Fabric, host: HostId, v: &Vm) -> Result<(), MdevError> {
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
