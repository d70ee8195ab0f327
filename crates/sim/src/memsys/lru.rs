//! One LLC share as an LRU of buffers with a capacity in lines. Evicting a dirty buffer
//! adds its lines to the write-backs of its home node.
//!
//! The entries sit in a slab linked in recency order, so a touch and a removal each cost
//! one hash lookup and a few pointer writes: the packet models touch or invalidate a
//! buffer several times per frame. An eviction costs no lookup: the evicted buffer's map
//! entry stays, stale, until its slot is checked (a lookup of a large LLC's map is a cache
//! miss, and a PageRank victim evicts a line for every line it reads).

use rustc_hash::FxHashMap;

/// No slot: the end of the recency list.
const NIL: u32 = u32::MAX;

#[derive(Clone, Debug)]
struct Entry {
    buf: u64,
    lines: u64,
    home: u32,
    dirty: bool,
    /// Whether a buffer holds the slot (a free slot keeps its last buffer's fields).
    held: bool,
    /// The next older and the next newer entry (`NIL` at either end).
    older: u32,
    newer: u32,
}

#[derive(Clone, Debug)]
pub(super) struct Lru {
    pub(super) cap_lines: u64,
    /// Lines held.
    pub(super) used: u64,
    /// Buffer → its slot, or a slot it held before it was evicted (stale: the slot is
    /// free or holds another buffer).
    map: FxHashMap<u64, u32>,
    slots: Vec<Entry>,
    /// Slots no buffer holds.
    free: Vec<u32>,
    /// The least and the most recently touched entries.
    oldest: u32,
    newest: u32,
}

impl Lru {
    pub(super) fn new(cap_lines: u64) -> Lru {
        Lru {
            cap_lines,
            used: 0,
            map: FxHashMap::default(),
            slots: Vec::new(),
            free: Vec::new(),
            oldest: NIL,
            newest: NIL,
        }
    }

    /// Whether slot `i` holds `buf`.
    fn holds(&self, i: u32, buf: u64) -> bool {
        let e = &self.slots[i as usize];
        e.held && e.buf == buf
    }

    fn find(&self, buf: u64) -> Option<u32> {
        self.map.get(&buf).copied().filter(|&i| self.holds(i, buf))
    }

    pub(super) fn contains(&self, buf: u64) -> bool {
        self.find(buf).is_some()
    }

    /// Makes `buf` the most recently touched; whether it was held.
    pub(super) fn touch(&mut self, buf: u64) -> bool {
        let Some(i) = self.find(buf) else {
            return false;
        };
        self.unlink(i);
        self.link_newest(i);
        true
    }

    /// Drops `buf`; its lines and whether it was dirty.
    pub(super) fn remove(&mut self, buf: u64) -> Option<(u64, bool)> {
        let i = self.map.remove(&buf).filter(|&i| self.holds(i, buf))?;
        Some(self.vacate(i))
    }

    /// Frees slot `i` (its map entry, if any, goes stale); its lines and whether it was
    /// dirty.
    fn vacate(&mut self, i: u32) -> (u64, bool) {
        self.unlink(i);
        self.free.push(i);
        let e = &mut self.slots[i as usize];
        e.held = false;
        self.used -= e.lines;
        (e.lines, e.dirty)
    }

    /// Inserts (or refreshes) `buf`, homed on node `home`; adds the dirty lines of the
    /// evicted buffers to `written_back[their home]`.
    pub(super) fn insert(
        &mut self,
        buf: u64,
        lines: u64,
        dirty: bool,
        home: u32,
        written_back: &mut [u64],
    ) {
        let was_dirty = self.remove(buf).is_some_and(|(_, d)| d);
        self.insert_absent(buf, lines, dirty || was_dirty, home, written_back);
    }

    /// `insert` of a buffer the caller knows is not held (it just missed or removed it):
    /// one hash lookup fewer, which is most of an insertion's cost in a large LLC.
    pub(super) fn insert_absent(
        &mut self,
        buf: u64,
        lines: u64,
        dirty: bool,
        home: u32,
        written_back: &mut [u64],
    ) {
        debug_assert!(!self.contains(buf), "buffer {buf:#x} is held");
        let lines = lines.min(self.cap_lines);
        while self.used + lines > self.cap_lines && self.oldest != NIL {
            let home = self.slots[self.oldest as usize].home;
            let (l, d) = self.vacate(self.oldest);
            if d {
                written_back[home as usize] += l;
            }
        }
        let e = Entry {
            buf,
            lines,
            home,
            dirty,
            held: true,
            older: NIL,
            newer: NIL,
        };
        let i = match self.free.pop() {
            Some(i) => {
                self.slots[i as usize] = e;
                i
            }
            None => {
                self.slots.push(e);
                (self.slots.len() - 1) as u32
            }
        };
        self.link_newest(i);
        self.map.insert(buf, i);
        self.used += lines;
        // Stale entries go once they outnumber the live ones, so the map stays within
        // twice the held buffers (amortised: a pass per as many insertions).
        let held = self.slots.len() - self.free.len();
        if self.map.len() > 2 * held + 64 {
            let slots = &self.slots;
            self.map.retain(|&b, &mut i| {
                let e = &slots[i as usize];
                e.held && e.buf == b
            });
        }
    }

    fn unlink(&mut self, i: u32) {
        let (older, newer) = {
            let e = &self.slots[i as usize];
            (e.older, e.newer)
        };
        match older {
            NIL => self.oldest = newer,
            o => self.slots[o as usize].newer = newer,
        }
        match newer {
            NIL => self.newest = older,
            n => self.slots[n as usize].older = older,
        }
    }

    fn link_newest(&mut self, i: u32) {
        let prev = self.newest;
        {
            let e = &mut self.slots[i as usize];
            e.older = prev;
            e.newer = NIL;
        }
        match prev {
            NIL => self.oldest = i,
            p => self.slots[p as usize].newer = i,
        }
        self.newest = i;
    }
}
