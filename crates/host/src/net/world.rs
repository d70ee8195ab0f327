//! One simulation of the network stack's models that share hosts. The world holds what
//! they share: the kernel's network (clock and timers), each host's memory system and
//! each NIC's state, the workloads beside them (a PageRank victim, advanced in time
//! order) and the flow drivers of migrating streams. A model owns its views of its hosts
//! (`NetHost`: cores, PFs, nodes, stack costs); while it handles an event the world lends
//! each view the host's memory system and NIC (`lend`, then `lend` again to give them
//! back), so two models on one host take the same DRAM, LLC, interconnect, PCIe links and
//! port, in time order. A view's own `mem` and `nic` are stand-ins between events.

use devices::nic::Nic;
use fabric::{DeviceId, HostId};
use sim::component::{HasNet, Sim};
use sim::memsys::MemSys;
use sim::net::Net;
use sim::Time;

use super::migration::Migrating;
use super::NetHost;
use crate::victim::Background;

/// Where a host's memory system is in the world (a model with no NIC in it: RDMA).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SharedMem(usize);

/// Where a view's shared parts are in the world.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Shared {
    mem: usize,
    nic: usize,
}

impl From<Shared> for SharedMem {
    fn from(s: Shared) -> SharedMem {
        SharedMem(s.mem)
    }
}

/// What the models of one simulation share (see the module's documentation).
pub struct NetWorld<'b> {
    pub(crate) net: Net,
    hosts: Vec<HostId>,
    /// Boxed as the views' are: lending swaps pointers, not the systems.
    #[allow(clippy::vec_box)]
    mems: Vec<Box<MemSys>>,
    /// Whether each memory system is lent out (to catch a read of a stand-in).
    lent: Vec<bool>,
    nics: Vec<(DeviceId, Box<Nic>)>,
    beside: Vec<(usize, &'b mut dyn Background)>,
    pub(crate) flows: Vec<Migrating<'b>>,
    /// Models started so far (each gets its own buffer namespace).
    models: u64,
    /// The measurement window every model shares: warm-up and length.
    window: Option<(Time, Time)>,
    /// Whether the window has started (every memory system's counters restarted).
    warmed: bool,
}

/// The first bit of a model's buffer namespace: below it, a model's connections or
/// instances (bits 32–39), its kinds of buffer (`net::buf`, bits 40–43; the RDMA
/// benchmark's regions and queues, bits 40–46) and offsets.
const MODEL_SHIFT: u32 = 48;

impl HasNet for NetWorld<'_> {
    fn net(&mut self) -> &mut Net {
        &mut self.net
    }
}

impl<'b> NetWorld<'b> {
    pub fn new(seed: u64) -> NetWorld<'b> {
        NetWorld {
            net: Net::new(seed),
            hosts: Vec::new(),
            mems: Vec::new(),
            lent: Vec::new(),
            nics: Vec::new(),
            beside: Vec::new(),
            flows: Vec::new(),
            models: 0,
            window: None,
            warmed: false,
        }
    }

    /// The current simulated time.
    pub fn now(&self) -> Time {
        self.net.now()
    }

    /// Starts a model measuring `window` after `warmup`: the buffer namespace of its
    /// rings, socket buffers and items, disjoint from every other model's in the world
    /// (the memory systems track lines by buffer). Every model measures the same window,
    /// since the hosts' counters restart when it starts.
    pub fn start_model(&mut self, warmup: Time, window: Time) -> Result<u64, String> {
        match self.window {
            Some(w) if w != (warmup, window) => {
                return Err(format!(
                    "a model measuring {window:?} after {warmup:?} in a world that measures \
                     {:?} after {:?}",
                    w.1, w.0
                ))
            }
            _ => self.window = Some((warmup, window)),
        }
        let ns = self.models << MODEL_SHIFT;
        self.models += 1;
        Ok(ns)
    }

    /// Joins `view`, a model's view of a host and its NIC: the first view of a host gives
    /// the world its memory system, the first of a NIC that NIC's state; later views share
    /// them (their own are stand-ins from then on).
    pub fn join(&mut self, view: &NetHost) -> Shared {
        let SharedMem(mem) = self.join_memory(view.host, &view.mem);
        let nic = match self.nics.iter().position(|(d, _)| *d == view.device) {
            Some(i) => i,
            None => {
                self.nics.push((view.device, view.nic.clone()));
                self.nics.len() - 1
            }
        };
        Shared { mem, nic }
    }

    /// Joins a model's view of host `host`'s memory system, `mem`: the first view of a
    /// host gives the world its memory system; later ones share it.
    pub fn join_memory(&mut self, host: HostId, mem: &MemSys) -> SharedMem {
        match self.hosts.iter().position(|&h| h == host) {
            Some(i) => SharedMem(i),
            None => {
                self.hosts.push(host);
                self.mems.push(Box::new(mem.clone()));
                self.lent.push(false);
                SharedMem(self.hosts.len() - 1)
            }
        }
    }

    /// Swaps `mem` with the world's memory system `at`: once to lend it to a model for
    /// an event, once more to take it back.
    pub fn lend_memory(&mut self, at: SharedMem, mem: &mut Box<MemSys>) {
        self.lent[at.0] = !self.lent[at.0];
        std::mem::swap(&mut self.mems[at.0], mem);
    }

    /// `work` runs beside on the memory system of `at`'s host: brought up to every
    /// event's time before the event is handled, its counters restarted with a window's.
    pub fn beside(&mut self, at: impl Into<SharedMem>, work: &'b mut dyn Background) {
        self.beside.push((at.into().0, work));
    }

    /// Swaps `view`'s memory system and NIC with the world's: once to lend them for an
    /// event, once more to take them back.
    pub(crate) fn lend(&mut self, at: Shared, view: &mut NetHost) {
        self.lent[at.mem] = !self.lent[at.mem];
        std::mem::swap(&mut self.mems[at.mem], &mut view.mem);
        std::mem::swap(&mut self.nics[at.nic].1, &mut view.nic);
    }

    /// Brings the workloads beside up to `t`, and the memory systems' past with them:
    /// before a model stepped outside the kernel (RDMA) handles an event at `t`, and at
    /// the run's end (so the workloads beside have run as long as the models).
    pub fn advance_beside(&mut self, t: Time) {
        self.before_event(t, false);
    }

    /// Brings the workloads beside up to `t`, the time of the event about to be handled
    /// (their counters restarted when it starts the window, `warm`).
    pub(crate) fn before_event(&mut self, t: Time, warm: bool) {
        if !self.warmed && self.window.is_some_and(|(w, _)| t >= w) {
            // The window starts for every memory system at once, whichever models use it.
            self.warmed = true;
            for (m, mem) in self.mems.iter_mut().enumerate() {
                assert!(!self.lent[m], "a memory system lent out between events");
                mem.reset_counters();
            }
        }
        for (m, work) in &mut self.beside {
            assert!(!self.lent[*m], "a memory system lent out between events");
            work.advance(&mut self.mems[*m], t);
            if warm {
                work.reset_counters();
            }
        }
        for (m, mem) in self.mems.iter_mut().enumerate() {
            assert!(!self.lent[m], "a memory system lent out between events");
            mem.forget_before(t);
        }
        for (_, nic) in &mut self.nics {
            nic.forget_before(t);
        }
    }

    /// Memory and port reservations that started before the event that made them: each
    /// is a model's bug, since the servers forget the past before every event.
    pub fn late_reservations(&self) -> u64 {
        let mems = self.mems.iter().map(|m| m.late());
        mems.chain(self.nics.iter().map(|(_, n)| n.late())).sum()
    }

    /// The memory system `at` (between events).
    pub fn memory(&self, at: SharedMem) -> &MemSys {
        assert!(!self.lent[at.0], "a memory system lent out between events");
        &self.mems[at.0]
    }

    /// Host `at`'s memory system (between events, e.g. for the window's counters).
    pub fn mem(&self, at: Shared) -> &MemSys {
        self.memory(at.into())
    }

    /// Host `at`'s NIC (between events).
    pub fn nic(&self, at: Shared) -> &Nic {
        &self.nics[at.nic].1
    }

    /// Runs `sim`'s models in this world through `end`: events at `end` are still
    /// handled (the horizon comes before any later one), and the workloads beside are
    /// brought there too.
    pub fn run_through(&mut self, sim: &mut Sim<NetWorld<'b>>, end: Time) {
        sim.run_until(self, end + Time::from_ps(1));
        self.advance_beside(end);
    }
}
