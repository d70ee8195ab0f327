//! The RNIC's on-chip caches of host-resident tables: QP contexts and memory
//! translations (MTT entries) live in host memory the driver gives the device (ICM);
//! the device keeps recently used entries and fetches a missing one by a DMA read.

use std::collections::{BTreeMap, HashMap};

/// A least-recently-used cache of `capacity` entries with hit and miss counters.
#[derive(Clone, Debug)]
pub struct ContextCache {
    capacity: usize,
    stamp: u64,
    /// key → stamp of its last use
    map: HashMap<u64, u64>,
    order: BTreeMap<u64, u64>,
    pub hits: u64,
    pub misses: u64,
}

impl ContextCache {
    pub fn new(capacity: usize) -> ContextCache {
        ContextCache {
            capacity: capacity.max(1),
            stamp: 0,
            map: HashMap::new(),
            order: BTreeMap::new(),
            hits: 0,
            misses: 0,
        }
    }

    /// Looks `key` up and makes it the most recent; `true` on a hit. A miss inserts it,
    /// evicting the least recently used entry when full.
    pub fn access(&mut self, key: u64) -> bool {
        self.stamp += 1;
        if let Some(s) = self.map.get_mut(&key) {
            self.order.remove(s);
            *s = self.stamp;
            self.order.insert(self.stamp, key);
            self.hits += 1;
            return true;
        }
        self.misses += 1;
        if self.map.len() >= self.capacity {
            if let Some((&s, &old)) = self.order.iter().next() {
                self.order.remove(&s);
                self.map.remove(&old);
            }
        }
        self.map.insert(key, self.stamp);
        self.order.insert(self.stamp, key);
        false
    }

    pub fn reset_counters(&mut self) {
        self.hits = 0;
        self.misses = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cycling_one_more_key_than_fits_misses_every_time() {
        let mut c = ContextCache::new(4);
        for round in 0..3 {
            for k in 0..4 {
                assert_eq!(c.access(k), round > 0, "4 keys fit in 4 entries");
            }
        }
        let mut c = ContextCache::new(4);
        for _ in 0..3 {
            for k in 0..5 {
                c.access(k);
            }
        }
        assert_eq!(
            c.hits, 0,
            "LRU under a cyclic scan of 5 keys over 4 entries"
        );
        assert_eq!(c.misses, 15);
    }
}
