//! The cluster's device pool: one fabric device ID (fdid) per PCI function of every
//! `[[host.device]]`, assigned in (host, device, function) order as each host's agent
//! registers its devices, so the same scenario always gives the same fdids. Each entry
//! says whether its host lends it, whether it is gone (its lender vanished), and who
//! holds it: nobody, one exclusive borrower, or shared borrowers counted.

use fabric::{Fabric, HostId, PcieNodeId};
use rustc_hash::FxHashMap;

use super::LendError;

/// A cluster-wide fabric device ID (SISCI's fdid).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Fdid(pub u32);

impl std::fmt::Display for Fdid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "fdid {}", self.0)
    }
}

/// One borrow of a device, cluster-wide (handles carry it; a returned one is never reused).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BorrowId(pub u64);

/// Whether a device is offered to the pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Availability {
    /// Known to the pool (registered by its host's agent), not lent.
    Registered,
    /// Its host lends it.
    Lent,
    /// Its lender vanished.
    Gone,
}

/// Who holds a device (`SCI_FLAG_EXCLUSIVE` semantics).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum Lease {
    #[default]
    Free,
    Exclusive(BorrowId),
    /// Shared borrowers, in the order they borrowed.
    Shared(Vec<BorrowId>),
}

/// A device of the pool.
#[derive(Clone, Debug)]
pub struct PoolDevice {
    pub fdid: Fdid,
    /// The lender (the host the function is in).
    pub host: HostId,
    pub function: PcieNodeId,
    /// `host.device`, or `host.device.pfN` for a function of a multi-function device.
    pub name: String,
    pub availability: Availability,
    pub lease: Lease,
}

impl PoolDevice {
    /// `fdid 3 (`lender.gpu`)`, as errors name a device.
    pub fn label(&self) -> String {
        format!("{} (`{}`)", self.fdid, self.name)
    }

    /// How many borrowers hold it (0, 1 exclusive, or the shared count).
    pub fn borrowers(&self) -> usize {
        match &self.lease {
            Lease::Free => 0,
            Lease::Exclusive(_) => 1,
            Lease::Shared(v) => v.len(),
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct Pool {
    devices: Vec<PoolDevice>,
    by_function: FxHashMap<PcieNodeId, Fdid>,
}

impl Pool {
    /// Registers every function of `host`'s devices (what its agent does when it starts),
    /// in the host's device order; already registered ones keep their fdid.
    pub fn add_host_devices(&mut self, f: &Fabric, host: HostId) {
        for &d in &f.topo.host(host).devices {
            let dev = &f.topo.devices[d.index()];
            for (i, &function) in dev.functions.iter().enumerate() {
                let name = if dev.functions.len() == 1 {
                    format!("{}.{}", f.topo.host(host).name, dev.name)
                } else {
                    format!("{}.{}.pf{i}", f.topo.host(host).name, dev.name)
                };
                self.add_device(host, function, name);
            }
        }
    }

    /// Registers one function; returns its fdid (the existing one if registered).
    pub fn add_device(&mut self, host: HostId, function: PcieNodeId, name: String) -> Fdid {
        if let Some(&id) = self.by_function.get(&function) {
            return id;
        }
        let fdid = Fdid(self.devices.len() as u32);
        self.devices.push(PoolDevice {
            fdid,
            host,
            function,
            name,
            availability: Availability::Registered,
            lease: Lease::Free,
        });
        self.by_function.insert(function, fdid);
        fdid
    }

    pub fn devices(&self) -> &[PoolDevice] {
        &self.devices
    }

    pub fn fdid_of(&self, function: PcieNodeId) -> Option<Fdid> {
        self.by_function.get(&function).copied()
    }

    pub fn get(&self, fdid: Fdid) -> Result<&PoolDevice, LendError> {
        self.devices
            .get(fdid.0 as usize)
            .ok_or(LendError::UnknownFdid {
                fdid,
                known: self.devices.len() as u32,
            })
    }

    pub(crate) fn get_mut(&mut self, fdid: Fdid) -> Result<&mut PoolDevice, LendError> {
        let known = self.devices.len() as u32;
        self.devices
            .get_mut(fdid.0 as usize)
            .ok_or(LendError::UnknownFdid { fdid, known })
    }

    /// Whether `fdid` can be borrowed now (lent, not gone, lease compatible).
    pub(crate) fn check_borrow(
        &self,
        fdid: Fdid,
        exclusive: bool,
        host: &str,
        holder_name: impl Fn(BorrowId) -> String,
    ) -> Result<(), LendError> {
        let d = self.get(fdid)?;
        match d.availability {
            Availability::Gone => {
                return Err(LendError::Gone {
                    dev: d.label(),
                    host: host.into(),
                })
            }
            Availability::Registered => {
                return Err(LendError::NotLent {
                    dev: d.label(),
                    host: host.into(),
                })
            }
            Availability::Lent => {}
        }
        match &d.lease {
            Lease::Free => Ok(()),
            Lease::Exclusive(id) => Err(LendError::ExclusiveHeld {
                dev: d.label(),
                host: host.into(),
                holder: holder_name(*id),
            }),
            Lease::Shared(v) if exclusive => Err(LendError::SharedHeld {
                dev: d.label(),
                host: host.into(),
                count: v.len(),
            }),
            Lease::Shared(_) => Ok(()),
        }
    }

    /// Records a borrow `check_borrow` allowed.
    pub(crate) fn take(&mut self, fdid: Fdid, id: BorrowId, exclusive: bool) {
        let d = &mut self.devices[fdid.0 as usize];
        d.lease = match std::mem::take(&mut d.lease) {
            Lease::Free if exclusive => Lease::Exclusive(id),
            Lease::Free => Lease::Shared(vec![id]),
            Lease::Shared(mut v) => {
                v.push(id);
                Lease::Shared(v)
            }
            l @ Lease::Exclusive(_) => l,
        };
    }

    /// Drops borrow `id` from the device's lease.
    pub(crate) fn give_back(&mut self, fdid: Fdid, id: BorrowId) {
        let d = &mut self.devices[fdid.0 as usize];
        d.lease = match std::mem::take(&mut d.lease) {
            Lease::Exclusive(x) if x == id => Lease::Free,
            Lease::Shared(mut v) => {
                v.retain(|&x| x != id);
                if v.is_empty() {
                    Lease::Free
                } else {
                    Lease::Shared(v)
                }
            }
            l => l,
        };
    }

    /// An exclusive borrow becomes a shared one (`SCIReleaseExclusiveBorrow`).
    pub(crate) fn share(&mut self, fdid: Fdid, id: BorrowId) {
        let d = &mut self.devices[fdid.0 as usize];
        if d.lease == Lease::Exclusive(id) {
            d.lease = Lease::Shared(vec![id]);
        }
    }
}
