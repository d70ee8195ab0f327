//! Sparse byte stores: each host's RAM per NUMA node and each BAR holds real bytes, page
//! by page, allocated on first write. Unwritten bytes read as zero.

use rustc_hash::FxHashMap;

use crate::topology::{HostId, PcieNodeId};

const PAGE: usize = 4096;

/// One sparse memory indexed by offset.
#[derive(Clone, Debug, Default)]
pub struct ByteStore {
    pages: FxHashMap<u64, Box<[u8; PAGE]>>,
}

impl ByteStore {
    pub fn write(&mut self, offset: u64, data: &[u8]) {
        let mut done = 0;
        while done < data.len() {
            let at = offset + done as u64;
            let in_page = (at % PAGE as u64) as usize;
            let n = (PAGE - in_page).min(data.len() - done);
            let page = self
                .pages
                .entry(at / PAGE as u64)
                .or_insert_with(|| Box::new([0; PAGE]));
            page[in_page..in_page + n].copy_from_slice(&data[done..done + n]);
            done += n;
        }
    }

    pub fn read(&self, offset: u64, buf: &mut [u8]) {
        let mut done = 0;
        while done < buf.len() {
            let at = offset + done as u64;
            let in_page = (at % PAGE as u64) as usize;
            let n = (PAGE - in_page).min(buf.len() - done);
            match self.pages.get(&(at / PAGE as u64)) {
                Some(p) => buf[done..done + n].copy_from_slice(&p[in_page..in_page + n]),
                None => buf[done..done + n].fill(0),
            }
            done += n;
        }
    }

    /// Pages that hold bytes (for tests and memory accounting).
    pub fn resident_pages(&self) -> usize {
        self.pages.len()
    }
}

/// Where bytes live: RAM keyed by (host, NUMA node), BARs by (function node, BAR index).
#[derive(Clone, Debug, Default)]
pub struct Memory {
    ram: FxHashMap<(HostId, u32), ByteStore>,
    bars: FxHashMap<(PcieNodeId, u8), ByteStore>,
}

impl Memory {
    /// Forgets every byte of `host`'s RAM and of the BARs of `nodes` (a cold restart).
    pub fn clear_host(&mut self, host: HostId, nodes: &[PcieNodeId]) {
        self.ram.retain(|&(h, _), _| h != host);
        self.bars.retain(|&(n, _), _| !nodes.contains(&n));
    }

    pub fn ram(&mut self, host: HostId, node: u32) -> &mut ByteStore {
        self.ram.entry((host, node)).or_default()
    }
    pub fn bar(&mut self, node: PcieNodeId, bar: u8) -> &mut ByteStore {
        self.bars.entry((node, bar)).or_default()
    }
    pub fn peek_ram(&self, host: HostId, node: u32, offset: u64, buf: &mut [u8]) {
        match self.ram.get(&(host, node)) {
            Some(s) => s.read(offset, buf),
            None => buf.fill(0),
        }
    }
    pub fn peek_bar(&self, node: PcieNodeId, bar: u8, offset: u64, buf: &mut [u8]) {
        match self.bars.get(&(node, bar)) {
            Some(s) => s.read(offset, buf),
            None => buf.fill(0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_round_trip_across_pages_and_unwritten_reads_zero() {
        let mut s = ByteStore::default();
        let data: Vec<u8> = (0..10_000u32).map(|i| (i * 7 % 251) as u8).collect();
        s.write(4000, &data);
        let mut back = vec![0xAA; data.len()];
        s.read(4000, &mut back);
        assert_eq!(back, data);
        assert_eq!(s.resident_pages(), 4, "4000..14000 touches pages 0..=3");
        let mut far = [0xAAu8; 16];
        s.read(1 << 40, &mut far);
        assert_eq!(far, [0; 16]);
    }
}
