//! A sparse map from page number to entry, kept as an IOMMU keeps its tables: leaf tables
//! of 512 entries, one per 2 MiB of address space. Mapping or unmapping a run of pages
//! finds each leaf once and then walks an array, where a map from page to entry hashes
//! every page (a 64 MiB buffer is 16,384 pages, mapped and unmapped per transfer).

use rustc_hash::FxHashMap;

/// Entries per leaf table (a 4 KiB table of 8-byte PTEs in VT-d and AMD-Vi).
const LEAF: u64 = 512;

#[derive(Clone, Debug)]
struct Leaf<T> {
    slots: [Option<T>; LEAF as usize],
    used: u32,
}

#[derive(Clone, Debug)]
pub struct PageTable<T> {
    leaves: FxHashMap<u64, Box<Leaf<T>>>,
    len: usize,
}

impl<T> Default for PageTable<T> {
    fn default() -> Self {
        PageTable {
            leaves: FxHashMap::default(),
            len: 0,
        }
    }
}

/// The pieces of the run `[first, end)` that fall in one leaf each: (leaf, from, to) with
/// slot indices `from..to`.
fn pieces(first: u64, end: u64) -> impl Iterator<Item = (u64, usize, usize)> {
    let mut p = first;
    std::iter::from_fn(move || {
        if p >= end {
            return None;
        }
        let leaf = p / LEAF;
        let to = end.min((leaf + 1) * LEAF);
        let piece = (leaf, (p % LEAF) as usize, (to - leaf * LEAF) as usize);
        p = to;
        Some(piece)
    })
}

impl<T: Copy> PageTable<T> {
    /// Pages with an entry.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline]
    pub fn get(&self, page: u64) -> Option<&T> {
        self.leaves.get(&(page / LEAF))?.slots[(page % LEAF) as usize].as_ref()
    }

    pub fn get_mut(&mut self, page: u64) -> Option<&mut T> {
        self.leaves.get_mut(&(page / LEAF))?.slots[(page % LEAF) as usize].as_mut()
    }

    pub fn contains(&self, page: u64) -> bool {
        self.get(page).is_some()
    }

    /// The first page of `[first, end)` with an entry.
    pub fn first_present(&self, first: u64, end: u64) -> Option<u64> {
        pieces(first, end).find_map(|(leaf, from, to)| {
            let l = self.leaves.get(&leaf)?;
            let i = (from..to).find(|&i| l.slots[i].is_some())?;
            Some(leaf * LEAF + i as u64)
        })
    }

    /// How many pages from `first` (up to `end`) have no entry, in a row.
    pub fn absent_run(&self, first: u64, end: u64) -> u64 {
        self.first_present(first, end).unwrap_or(end) - first
    }

    /// Sets the entry of every page of `[first, end)` to `entry(page)`.
    pub fn insert_run(&mut self, first: u64, end: u64, mut entry: impl FnMut(u64) -> T) {
        for (leaf, from, to) in pieces(first, end) {
            let l = self.leaves.entry(leaf).or_insert_with(|| {
                Box::new(Leaf {
                    slots: [None; LEAF as usize],
                    used: 0,
                })
            });
            for i in from..to {
                if l.slots[i].is_none() {
                    l.used += 1;
                    self.len += 1;
                }
                l.slots[i] = Some(entry(leaf * LEAF + i as u64));
            }
        }
    }

    /// Removes the entries of `[first, end)` in order; the first page without one stops it
    /// (the pages before it stay removed).
    pub fn remove_run(&mut self, first: u64, end: u64) -> Result<(), u64> {
        for (leaf, from, to) in pieces(first, end) {
            let Some(l) = self.leaves.get_mut(&leaf) else {
                return Err(leaf * LEAF + from as u64);
            };
            let mut missing = None;
            for i in from..to {
                if l.slots[i].take().is_none() {
                    missing = Some(leaf * LEAF + i as u64);
                    break;
                }
                l.used -= 1;
                self.len -= 1;
            }
            if l.used == 0 {
                self.leaves.remove(&leaf);
            }
            if let Some(p) = missing {
                return Err(p);
            }
        }
        Ok(())
    }

    pub fn remove(&mut self, page: u64) -> Option<T> {
        let leaf = page / LEAF;
        let l = self.leaves.get_mut(&leaf)?;
        let e = l.slots[(page % LEAF) as usize].take()?;
        l.used -= 1;
        self.len -= 1;
        if l.used == 0 {
            self.leaves.remove(&leaf);
        }
        Some(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// Runs a script of operations on a table and on a plain map, and compares.
    #[test]
    fn runs_across_leaves_behave_as_a_map_of_pages() {
        let mut t = PageTable::<u64>::default();
        let mut m = BTreeMap::<u64, u64>::new();
        let ops: [(bool, u64, u64); 7] = [
            (true, 500, 1030),
            (true, 2000, 2001),
            (false, 510, 520),
            (true, 511, 515),
            (false, 505, 700),
            (false, 1000, 1030),
            (false, 2000, 2001),
        ];
        for (insert, a, b) in ops {
            if insert {
                t.insert_run(a, b, |p| p * 3);
                for p in a..b {
                    m.insert(p, p * 3);
                }
            } else {
                let want = (a..b).find(|p| !m.contains_key(p));
                for p in a..want.unwrap_or(b) {
                    m.remove(&p);
                }
                assert_eq!(t.remove_run(a, b).err(), want, "remove {a}..{b}");
            }
            assert_eq!(t.len(), m.len());
            for p in 0..2100 {
                assert_eq!(t.get(p), m.get(&p), "page {p}");
            }
            let first = m.range(450..1100).next().map(|(&p, _)| p);
            assert_eq!(t.first_present(450, 1100), first);
        }
        // Removing what is left frees every leaf.
        for p in m.keys() {
            t.remove(*p);
        }
        assert!(t.is_empty() && t.leaves.is_empty());
    }

    #[test]
    fn an_absent_run_stops_at_the_first_entry() {
        let mut t = PageTable::<u32>::default();
        t.insert_run(1024, 1025, |_| 0);
        assert_eq!(t.absent_run(100, 2000), 924);
        assert_eq!(t.absent_run(1025, 2000), 975);
        assert_eq!(t.absent_run(1024, 2000), 0);
    }
}
