//! A page-granular range allocator: free extents in a sorted map, first fit from the top
//! (as Linux's IOVA allocator works downward from the DMA mask's limit), freed ranges
//! merged with their neighbours. Used for IOVA space and for host RAM per NUMA node.

use std::collections::BTreeMap;

use fabric::iommu::PAGE;

#[derive(Clone, Debug)]
pub struct RangeAllocator {
    /// Free extents: start → length in bytes (both page multiples).
    free: BTreeMap<u64, u64>,
    start: u64,
    end: u64,
}

impl RangeAllocator {
    /// Manages `[start, end)`, rounded inward to whole pages.
    pub fn new(start: u64, end: u64) -> RangeAllocator {
        let s = start.div_ceil(PAGE) * PAGE;
        let e = end - end % PAGE;
        let mut free = BTreeMap::new();
        if e > s {
            free.insert(s, e - s);
        }
        RangeAllocator {
            free,
            start: s,
            end: e.max(s),
        }
    }

    /// The managed range.
    pub fn range(&self) -> (u64, u64) {
        (self.start, self.end)
    }

    /// Takes `[start, end)` out of the free space for good (a window the hardware claims).
    pub fn reserve(&mut self, start: u64, end: u64) {
        let (s, e) = (start - start % PAGE, end.div_ceil(PAGE) * PAGE);
        let hit: Vec<(u64, u64)> = self
            .free
            .range(..e)
            .filter(|(&fs, &fl)| fs + fl > s)
            .map(|(&a, &b)| (a, b))
            .collect();
        for (fs, fl) in hit {
            self.free.remove(&fs);
            if fs < s {
                self.free.insert(fs, s - fs);
            }
            if fs + fl > e {
                self.free.insert(e, fs + fl - e);
            }
        }
    }

    /// The highest `len` bytes (a page multiple) free entirely below `limit`.
    pub fn alloc(&mut self, len: u64, limit: u64) -> Option<u64> {
        if len == 0 || !len.is_multiple_of(PAGE) {
            return None;
        }
        let (at, fs, fl) = self.free.range(..limit).rev().find_map(|(&fs, &fl)| {
            let top = (fs + fl).min(limit);
            (top >= fs + len).then(|| (top - len, fs, fl))
        })?;
        self.free.remove(&fs);
        if at > fs {
            self.free.insert(fs, at - fs);
        }
        if fs + fl > at + len {
            self.free.insert(at + len, fs + fl - at - len);
        }
        Some(at)
    }

    /// The highest `len` bytes free entirely below `limit` whose start is a multiple of
    /// `align` (a power of two, at least a page): a range an NTB window can cover with
    /// the fewest address-LUT entries.
    pub fn alloc_aligned(&mut self, len: u64, limit: u64, align: u64) -> Option<u64> {
        if len == 0 || !len.is_multiple_of(PAGE) || !align.is_power_of_two() || align < PAGE {
            return None;
        }
        let (at, fs, fl) = self.free.range(..limit).rev().find_map(|(&fs, &fl)| {
            let top = (fs + fl).min(limit);
            let at = top.checked_sub(len)? & !(align - 1);
            (at >= fs).then_some((at, fs, fl))
        })?;
        self.free.remove(&fs);
        if at > fs {
            self.free.insert(fs, at - fs);
        }
        if fs + fl > at + len {
            self.free.insert(at + len, fs + fl - at - len);
        }
        Some(at)
    }

    /// Takes `[start, start+len)` (clipped to the managed range) out of the free space if
    /// all of it is free, and says whether it did (nothing is taken otherwise): a range a
    /// caller must have at a fixed place (a guest's physical addresses mirrored as IOVAs).
    pub fn take(&mut self, start: u64, len: u64) -> bool {
        let s = start.max(self.start);
        let e = start.saturating_add(len).min(self.end);
        if s >= e {
            return true;
        }
        let Some((&fs, &fl)) = self.free.range(..=s).next_back() else {
            return false;
        };
        if fs + fl < e {
            return false;
        }
        self.free.remove(&fs);
        if s > fs {
            self.free.insert(fs, s - fs);
        }
        if fs + fl > e {
            self.free.insert(e, fs + fl - e);
        }
        true
    }

    /// Returns `[at, at+len)`; it must have come from `alloc` or `take` (what lies outside
    /// the managed range is ignored, so `take` of a range reaching below it gives back
    /// only what it took).
    pub fn free(&mut self, at: u64, len: u64) {
        let (s0, e0) = (at.max(self.start), at.saturating_add(len).min(self.end));
        if s0 >= e0 {
            return;
        }
        let (mut s, mut l) = (s0, e0 - s0);
        if let Some((&ps, &pl)) = self.free.range(..s).next_back() {
            if ps + pl == s {
                self.free.remove(&ps);
                s = ps;
                l += pl;
            }
        }
        if let Some(&nl) = self.free.get(&(s + l)) {
            self.free.remove(&(s + l));
            l += nl;
        }
        self.free.insert(s, l);
    }

    /// Free bytes in all.
    pub fn free_bytes(&self) -> u64 {
        self.free.values().sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocates_top_down_and_merges_what_is_freed() {
        let mut a = RangeAllocator::new(0x1000, 0x10000);
        let x = a.alloc(0x2000, u64::MAX).unwrap();
        assert_eq!(x, 0xe000);
        let y = a.alloc(0x1000, 0x8000).unwrap();
        assert_eq!(y, 0x7000, "highest page below the limit");
        a.free(x, 0x2000);
        a.free(y, 0x1000);
        assert_eq!(a.free_bytes(), 0xf000);
        assert_eq!(a.alloc(0xf000, u64::MAX), Some(0x1000), "one extent again");
        assert_eq!(a.alloc(0x1000, u64::MAX), None);
    }

    #[test]
    fn aligned_allocations_start_on_the_alignment() {
        let mut a = RangeAllocator::new(0x1000, 0x100_0000);
        let x = a.alloc_aligned(0x3000, u64::MAX, 0x10_0000).unwrap();
        assert_eq!(x, 0xf0_0000);
        let y = a.alloc_aligned(0x10_0000, u64::MAX, 0x10_0000).unwrap();
        assert_eq!(y, 0xe0_0000, "the slack above the first stays free");
        assert_eq!(a.alloc(0x1000, u64::MAX), Some(0xff_f000));
    }

    #[test]
    fn a_fixed_range_is_taken_only_when_free_and_given_back_clipped() {
        let mut a = RangeAllocator::new(0x1000, 0x10000);
        assert!(
            a.take(0, 0x3000),
            "the page below the managed range is not the allocator's"
        );
        assert!(!a.take(0x2000, 0x2000), "0x2000 was taken");
        assert!(a.take(0x8000, 0x1000));
        a.free(0, 0x3000);
        a.free(0x8000, 0x1000);
        assert_eq!(a.free_bytes(), 0xf000, "page 0 never enters the free space");
        assert_eq!(a.alloc(0xf000, u64::MAX), Some(0x1000));
    }

    #[test]
    fn reserved_ranges_are_never_handed_out() {
        let mut a = RangeAllocator::new(0, 0x10000);
        a.reserve(0xc000, 0xd000);
        assert_eq!(a.alloc(0x4000, u64::MAX), Some(0x8000));
        assert_eq!(a.alloc(0x3000, u64::MAX), Some(0xd000));
    }
}
