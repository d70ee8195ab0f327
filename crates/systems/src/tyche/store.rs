//! The bytes Tyche moves: the target's ramdisk (sparse; a block never written holds a
//! pattern of its address) and the channels' slots on each side.

use rustc_hash::FxHashMap;

const PAGE: u64 = 4096;

const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

/// The byte a never-written ramdisk address holds.
#[cfg(test)]
fn pattern(addr: u64) -> u8 {
    let x = addr.wrapping_mul(GOLDEN);
    (x >> 56) as u8 ^ (addr as u8)
}

/// `pattern` of each address from `addr` into `dst`: the product steps by an addition,
/// which vectorises (reads of never-written blocks were a third of a Tyche run).
fn fill_pattern(addr: u64, dst: &mut [u8]) {
    let mut x = addr.wrapping_mul(GOLDEN);
    for (i, d) in dst.iter_mut().enumerate() {
        *d = (x >> 56) as u8 ^ (addr.wrapping_add(i as u64) as u8);
        x = x.wrapping_add(GOLDEN);
    }
}

/// A ramdisk of 4 KiB pages, allocated when first written.
#[derive(Default)]
pub struct Ramdisk {
    pages: FxHashMap<u64, Box<[u8]>>,
}

impl Ramdisk {
    /// Reads `dst.len()` bytes at `addr`.
    pub fn read(&self, addr: u64, dst: &mut [u8]) {
        let mut off = 0usize;
        while off < dst.len() {
            let a = addr + off as u64;
            let (page, within) = (a / PAGE, (a % PAGE) as usize);
            let n = (PAGE as usize - within).min(dst.len() - off);
            match self.pages.get(&page) {
                Some(p) => dst[off..off + n].copy_from_slice(&p[within..within + n]),
                None => fill_pattern(a, &mut dst[off..off + n]),
            }
            off += n;
        }
    }

    /// Writes `src` at `addr`.
    pub fn write(&mut self, addr: u64, src: &[u8]) {
        let mut off = 0usize;
        while off < src.len() {
            let a = addr + off as u64;
            let (page, within) = (a / PAGE, (a % PAGE) as usize);
            let n = (PAGE as usize - within).min(src.len() - off);
            let part = &src[off..off + n];
            if n == PAGE as usize {
                // A whole page: its old bytes (the pattern, if never written) are all
                // overwritten, so none are generated.
                match self.pages.get_mut(&page) {
                    Some(p) => p.copy_from_slice(part),
                    None => {
                        self.pages.insert(page, part.into());
                    }
                }
            } else {
                let p = self.pages.entry(page).or_insert_with(|| {
                    let mut p = vec![0; PAGE as usize].into_boxed_slice();
                    fill_pattern(page * PAGE, &mut p);
                    p
                });
                p[within..within + n].copy_from_slice(part);
            }
            off += n;
        }
    }
}

/// The slots of every channel of one side, each `slot_bytes`, allocated when first used.
pub struct Slots {
    slot_bytes: usize,
    per_channel: usize,
    mem: Vec<Option<Vec<u8>>>,
}

impl Slots {
    pub fn new(channels: usize, per_channel: usize, slot_bytes: u64) -> Slots {
        Slots {
            slot_bytes: slot_bytes as usize,
            per_channel,
            mem: (0..channels * per_channel).map(|_| None).collect(),
        }
    }

    pub fn get(&mut self, chan: usize, slot: u32) -> &mut [u8] {
        let n = self.slot_bytes;
        self.mem[chan * self.per_channel + slot as usize].get_or_insert_with(|| vec![0; n])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ramdisk_returns_what_was_written_across_pages_and_the_pattern_elsewhere() {
        let mut d = Ramdisk::default();
        let data: Vec<u8> = (0..10000u32).map(|i| (i * 7 + 3) as u8).collect();
        d.write(4000, &data);
        let mut back = vec![0; 10000];
        d.read(4000, &mut back);
        assert_eq!(back, data);
        let mut edge = vec![0; 8];
        d.read(3996, &mut edge);
        assert_eq!(edge[4..], data[..4]);
        assert_eq!(edge[0], pattern(3996));
    }

    #[test]
    fn a_filled_pattern_is_each_address_pattern_even_where_addresses_wrap() {
        for start in [0, 4093, u64::MAX - 20] {
            let mut got = vec![0; 64];
            fill_pattern(start, &mut got);
            let want: Vec<u8> = (0..64).map(|i| pattern(start.wrapping_add(i))).collect();
            assert_eq!(got, want, "from {start:#x}");
        }
    }
}
