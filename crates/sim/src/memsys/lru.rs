//! One LLC share as an LRU of buffers with a capacity in lines. Evicting a dirty buffer
//! adds its lines to the write-backs of its home node.
//!
//! The entries sit in a slab linked in recency order, so a touch, an eviction and a
//! removal each cost one hash lookup and a few pointer writes: the packet models touch
//! or invalidate a buffer several times per frame.

use rustc_hash::FxHashMap;

/// No slot: the end of the recency list.
const NIL: u32 = u32::MAX;

#[derive(Clone, Debug)]
struct Entry {
    buf: u64,
    lines: u64,
    home: u32,
    dirty: bool,
    /// The next older and the next newer entry (`NIL` at either end).
    older: u32,
    newer: u32,
}

#[derive(Clone, Debug)]
pub(super) struct Lru {
    pub(super) cap_lines: u64,
    /// Lines held.
    pub(super) used: u64,
    /// Buffer → its slot.
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

    pub(super) fn contains(&self, buf: u64) -> bool {
        self.map.contains_key(&buf)
    }

    /// Makes `buf` the most recently touched; whether it was held.
    pub(super) fn touch(&mut self, buf: u64) -> bool {
        let Some(&i) = self.map.get(&buf) else {
            return false;
        };
        self.unlink(i);
        self.link_newest(i);
        true
    }

    /// Drops `buf`; its lines and whether it was dirty.
    pub(super) fn remove(&mut self, buf: u64) -> Option<(u64, bool)> {
        let i = self.map.remove(&buf)?;
        self.unlink(i);
        self.free.push(i);
        let e = &self.slots[i as usize];
        self.used -= e.lines;
        Some((e.lines, e.dirty))
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
            let old = &self.slots[self.oldest as usize];
            let (old_buf, l, d, h) = (old.buf, old.lines, old.dirty, old.home);
            self.remove(old_buf);
            if d {
                written_back[h as usize] += l;
            }
        }
        let e = Entry {
            buf,
            lines,
            home,
            dirty,
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
