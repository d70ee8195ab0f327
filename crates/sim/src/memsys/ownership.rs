//! Cache-line ownership between cores' private caches and a device's DMA, for lines
//! that cores and a device use at once (an RDMA region that server threads also store
//! to): which socket's core holds a line Modified, which sockets hold clean copies, and
//! what each access has to do about it.
//!
//! Rules (MESI as a socket-granular directory; a core stands for its socket's private
//! caches):
//! - a device read of a line a core holds Modified waits for the snoop that fetches it
//!   (the core keeps its copy: PCIe reads are read-current snapshots, assumption);
//! - a device write invalidates every core copy (a Modified one is snooped first, its
//!   dirty bytes merged under the partial write);
//! - a core's store to a line it does not hold Modified misses and takes ownership:
//!   from another core (a snoop), or from the LLC/memory (a read for ownership), and
//!   invalidates the other copies;
//! - a core's load of a line another socket's core holds Modified is snooped there.
//!
//! Costs (`SnoopCosts`) are the caller's; `MemSys`'s LLC and DRAM pricing stays as it is
//! and this only adds the private-cache part it does not see.
//!
//! `OffHome` is the LLC-level counterpart `MemSys` keeps itself: which package's LLC holds
//! a buffer dirty away from its home node (a core on one socket filling a buffer homed on
//! the other), so that a device read of it is served by snooping that LLC.

use rustc_hash::FxHashMap;

use crate::time::Time;

/// A line's state across the sockets' private caches.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LineState {
    /// No core holds it (it may be in an LLC or in memory).
    #[default]
    Uncached,
    /// Clean copies in the private caches of these sockets (bit per socket).
    Shared(u32),
    /// Dirty in a private cache of this socket's core.
    Modified(u32),
}

/// What an access had to do beyond a hit in the requester's own cache.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Transfer {
    /// A core holding the line Modified was snooped for it: on which socket.
    pub snooped: Option<u32>,
    /// Clean copies invalidated (sockets).
    pub invalidated: u32,
    /// A core's miss that took the line from the LLC or memory (not from a core).
    pub fill: bool,
}

/// What snoops cost, from where the line's home is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SnoopCosts {
    /// Snooping a core on the home's own socket.
    pub local: Time,
    /// Snooping a core on another socket (a crossing there and back).
    pub remote: Time,
}

impl SnoopCosts {
    /// Extra time an access waits for `t` at a line whose home is `home`.
    pub fn of(&self, t: &Transfer, home: u32) -> Time {
        match t.snooped {
            Some(s) if s == home => self.local,
            Some(_) => self.remote,
            None => Time::ZERO,
        }
    }
}

/// Counters of ownership traffic since the last reset.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OwnershipCounters {
    /// Device reads that found a line Modified in a core.
    pub device_read_snoops: u64,
    /// Device writes that found a line Modified in a core.
    pub device_write_snoops: u64,
    /// Core copies (Modified or Shared) a device write invalidated.
    pub device_invalidations: u64,
    /// Core stores that missed and took ownership (from a core or the LLC/memory).
    pub ownership_takes: u64,
    /// Core stores that hit a line their socket already held Modified.
    pub store_hits: u64,
    /// Core loads that hit, and those that missed.
    pub load_hits: u64,
    pub load_misses: u64,
}

/// Lines' ownership, keyed by line address (byte address ÷ 64, the caller's numbering).
#[derive(Clone, Debug, Default)]
pub struct Ownership {
    lines: FxHashMap<u64, LineState>,
    pub counters: OwnershipCounters,
}

fn bit(socket: u32) -> u32 {
    1 << socket.min(31)
}

impl Ownership {
    pub fn new() -> Ownership {
        Ownership::default()
    }

    pub fn state(&self, line: u64) -> LineState {
        self.lines.get(&line).copied().unwrap_or_default()
    }

    /// A device reads `line`: a Modified copy is snooped and stays where it is.
    pub fn device_read(&mut self, line: u64) -> Transfer {
        match self.state(line) {
            LineState::Modified(s) => {
                self.counters.device_read_snoops += 1;
                Transfer {
                    snooped: Some(s),
                    ..Transfer::default()
                }
            }
            _ => Transfer::default(),
        }
    }

    /// A device writes `line`: every core copy is invalidated, a Modified one snooped.
    pub fn device_write(&mut self, line: u64) -> Transfer {
        let t = match self.state(line) {
            LineState::Uncached => Transfer::default(),
            LineState::Shared(m) => Transfer {
                invalidated: m.count_ones(),
                ..Transfer::default()
            },
            LineState::Modified(s) => {
                self.counters.device_write_snoops += 1;
                Transfer {
                    snooped: Some(s),
                    invalidated: 1,
                    ..Transfer::default()
                }
            }
        };
        self.counters.device_invalidations += t.invalidated as u64;
        self.lines.remove(&line);
        t
    }

    /// A core on `socket` stores to `line`: a hit when its socket holds it Modified,
    /// else it takes ownership (snooping a Modified owner elsewhere, invalidating
    /// copies).
    pub fn cpu_store(&mut self, socket: u32, line: u64) -> Transfer {
        let t = match self.state(line) {
            LineState::Modified(s) if s == socket => {
                self.counters.store_hits += 1;
                return Transfer::default();
            }
            LineState::Modified(s) => Transfer {
                snooped: Some(s),
                invalidated: 1,
                fill: false,
            },
            LineState::Shared(m) => Transfer {
                invalidated: (m & !bit(socket)).count_ones(),
                fill: true,
                ..Transfer::default()
            },
            LineState::Uncached => Transfer {
                fill: true,
                ..Transfer::default()
            },
        };
        self.counters.ownership_takes += 1;
        self.lines.insert(line, LineState::Modified(socket));
        t
    }

    /// A core on `socket` loads `line`: a hit on its own copy, else a fill (from a
    /// Modified owner, which is downgraded to a shared copy, or from the LLC/memory).
    pub fn cpu_load(&mut self, socket: u32, line: u64) -> Transfer {
        let (t, now) = match self.state(line) {
            LineState::Modified(s) if s == socket => {
                self.counters.load_hits += 1;
                return Transfer::default();
            }
            LineState::Shared(m) if m & bit(socket) != 0 => {
                self.counters.load_hits += 1;
                return Transfer::default();
            }
            LineState::Modified(s) => (
                Transfer {
                    snooped: Some(s),
                    ..Transfer::default()
                },
                LineState::Shared(bit(s) | bit(socket)),
            ),
            LineState::Shared(m) => (
                Transfer {
                    fill: true,
                    ..Transfer::default()
                },
                LineState::Shared(m | bit(socket)),
            ),
            LineState::Uncached => (
                Transfer {
                    fill: true,
                    ..Transfer::default()
                },
                LineState::Shared(bit(socket)),
            ),
        };
        self.counters.load_misses += 1;
        self.lines.insert(line, now);
        t
    }

    pub fn reset_counters(&mut self) {
        self.counters = OwnershipCounters::default();
    }
}

/// Buffers dirty in the LLC of a package other than their home node's, keyed by buffer:
/// the package holding them. A dirty buffer in its home's LLC is not kept (the home
/// serves it); the record of one that left its LLC is dropped by the caller
/// (`refilled`), and whether the owner still holds it is the caller's LLC to answer.
#[derive(Clone, Debug, Default)]
pub struct OffHome {
    owner: FxHashMap<u64, u32>,
}

impl OffHome {
    /// A core on `socket` stored to `buf` homed on `home`: its package now holds the only
    /// (dirty) copy.
    pub fn store(&mut self, socket: u32, home: u32, buf: u64) {
        if socket == home {
            self.owner.remove(&buf);
        } else {
            self.owner.insert(buf, socket);
        }
    }

    /// A device wrote `buf`: every cached copy is gone or replaced by the device's data.
    pub fn device_write(&mut self, buf: u64) {
        self.owner.remove(&buf);
    }

    /// `socket`'s LLC missed on `buf` and fills it from memory: a dirty copy it held
    /// was evicted (and written back) in the meantime.
    pub fn refilled(&mut self, socket: u32, buf: u64) {
        if self.owner.get(&buf) == Some(&socket) {
            self.owner.remove(&buf);
        }
    }

    /// The package whose LLC holds `buf` dirty away from its home, if any.
    pub fn owner(&self, buf: u64) -> Option<u32> {
        self.owner.get(&buf).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const COSTS: SnoopCosts = SnoopCosts {
        local: Time::from_ns(38),
        remote: Time::from_ns(122),
    };

    #[test]
    fn a_device_read_of_a_modified_line_waits_for_the_snoop_and_leaves_the_owner() {
        let mut o = Ownership::new();
        assert_eq!(COSTS.of(&o.device_read(5), 0), Time::ZERO, "untouched line");
        o.cpu_store(0, 5);
        let t = o.device_read(5);
        assert_eq!(t.snooped, Some(0));
        assert_eq!(COSTS.of(&t, 0), Time::from_ns(38));
        assert_eq!(
            COSTS.of(&t, 1),
            Time::from_ns(122),
            "owner off the home socket"
        );
        assert_eq!(o.state(5), LineState::Modified(0));
        // The owner's next store is still a hit.
        assert_eq!(o.cpu_store(0, 5), Transfer::default());
        assert_eq!(o.counters.store_hits, 1);
    }

    #[test]
    fn a_device_write_invalidates_and_the_next_store_takes_ownership_again() {
        let mut o = Ownership::new();
        o.cpu_store(1, 9);
        let w = o.device_write(9);
        assert_eq!((w.snooped, w.invalidated), (Some(1), 1));
        assert_eq!(o.state(9), LineState::Uncached);
        let s = o.cpu_store(1, 9);
        assert!(s.fill && s.snooped.is_none(), "{s:?}");
        assert_eq!(o.counters.ownership_takes, 2);
        assert_eq!(o.counters.device_write_snoops, 1);
        // Shared copies on both sockets: a device write invalidates both.
        o.cpu_load(0, 9);
        o.cpu_load(1, 9);
        assert_eq!(o.state(9), LineState::Shared(0b11));
        assert_eq!(o.device_write(9).invalidated, 2);
        assert_eq!(o.counters.device_invalidations, 3);
    }

    #[test]
    fn off_home_records_a_remote_store_until_a_device_write_or_a_refill() {
        let mut o = OffHome::default();
        o.store(0, 0, 3);
        assert_eq!(o.owner(3), None, "dirty at its home: the home serves it");
        o.store(1, 0, 3);
        assert_eq!(o.owner(3), Some(1));
        o.refilled(0, 3);
        assert_eq!(
            o.owner(3),
            Some(1),
            "another socket's fill leaves the owner"
        );
        o.refilled(1, 3);
        assert_eq!(
            o.owner(3),
            None,
            "the owner's own refill: it was written back"
        );
        o.store(1, 0, 4);
        o.device_write(4);
        assert_eq!(o.owner(4), None);
        o.store(1, 0, 5);
        o.store(0, 0, 5);
        assert_eq!(o.owner(5), None, "a store at the home takes the line back");
    }

    #[test]
    fn stores_from_two_sockets_move_the_line_and_loads_share_it() {
        let mut o = Ownership::new();
        o.cpu_store(0, 1);
        let t = o.cpu_store(1, 1);
        assert_eq!((t.snooped, t.invalidated), (Some(0), 1));
        assert_eq!(o.state(1), LineState::Modified(1));
        let l = o.cpu_load(0, 1);
        assert_eq!(l.snooped, Some(1));
        assert_eq!(o.state(1), LineState::Shared(0b11));
        // Loads do not make a device read wait.
        assert_eq!(o.device_read(1), Transfer::default());
        assert_eq!(
            o.counters.device_read_snoops + o.counters.device_write_snoops,
            0
        );
    }
}
