//! The namespace's bytes and the media's timing.
//!
//! A namespace is a sparse store of logical blocks: a block never written reads as zeros.
//! The media is a number of parallel channels, each busy for one command's latency, behind
//! one shared data path of the media's bandwidth: at queue depth 1 a command takes its
//! latency; saturated, commands finish as fast as the bandwidth (or the channels) allow.

use std::collections::BTreeMap;

use sim::Time;

/// One namespace's data.
#[derive(Clone, Debug)]
pub struct Namespace {
    lba_bytes: u64,
    blocks: u64,
    data: BTreeMap<u64, Box<[u8]>>,
}

impl Namespace {
    /// `blocks` logical blocks of `lba_bytes` (512 or 4096).
    pub fn new(lba_bytes: u64, blocks: u64) -> Namespace {
        Namespace {
            lba_bytes,
            blocks,
            data: BTreeMap::new(),
        }
    }

    pub fn lba_bytes(&self) -> u64 {
        self.lba_bytes
    }

    pub fn blocks(&self) -> u64 {
        self.blocks
    }

    /// Blocks ever written (NUSE).
    pub fn used(&self) -> u64 {
        self.data.len() as u64
    }

    /// Whether `[slba, slba + n)` lies in the namespace.
    pub fn in_range(&self, slba: u64, n: u64) -> bool {
        slba.checked_add(n).is_some_and(|end| end <= self.blocks)
    }

    /// The bytes of `n` blocks from `slba` (zeros where never written).
    pub fn read(&self, slba: u64, n: u64) -> Vec<u8> {
        let bs = self.lba_bytes as usize;
        let mut out = vec![0u8; bs * n as usize];
        for (lba, b) in self.data.range(slba..slba + n) {
            let at = (lba - slba) as usize * bs;
            out[at..at + bs].copy_from_slice(b);
        }
        out
    }

    /// Stores whole blocks from `slba`.
    pub fn write(&mut self, slba: u64, bytes: &[u8]) {
        let bs = self.lba_bytes as usize;
        for (i, b) in bytes.chunks(bs).enumerate() {
            let mut block = vec![0u8; bs].into_boxed_slice();
            block[..b.len()].copy_from_slice(b);
            self.data.insert(slba + i as u64, block);
        }
    }
}

/// Media timing: latency per command, a shared data path, parallel channels.
#[derive(Clone, Debug, PartialEq)]
pub struct MediaTiming {
    pub read: Time,
    pub write: Time,
    /// Bandwidth of reads and writes, in GB/s (10^9 B/s).
    pub read_gbps: f64,
    pub write_gbps: f64,
    pub channels: u32,
}

/// The media's state: when each channel and the data path are free.
#[derive(Clone, Debug)]
pub struct Media {
    timing: MediaTiming,
    channels: Vec<Time>,
    path_free: Time,
}

impl Media {
    pub fn new(timing: MediaTiming) -> Media {
        Media {
            channels: vec![Time::ZERO; timing.channels.max(1) as usize],
            path_free: Time::ZERO,
            timing,
        }
    }

    pub fn timing(&self) -> &MediaTiming {
        &self.timing
    }

    /// A command of `bytes` arriving at `now`: when its data is read from (or written
    /// to) the media. It takes the first free channel for its latency, and its bytes pass
    /// the shared data path at the media's bandwidth after the path's earlier bytes.
    pub fn access(&mut self, now: Time, write: bool, bytes: u64) -> Time {
        let (latency, gbps) = match write {
            true => (self.timing.write, self.timing.write_gbps),
            false => (self.timing.read, self.timing.read_gbps),
        };
        let transfer = Time::from_ps((bytes as f64 * 1000.0 / gbps).round() as u64);
        let (i, free) = self
            .channels
            .iter()
            .copied()
            .enumerate()
            .min_by_key(|&(i, t)| (t, i))
            .expect("at least one channel");
        let start = free.max(now);
        let done = (start + latency).max(self.path_free + transfer);
        self.path_free = done;
        self.channels[i] = done;
        done
    }

    /// Forgets queued work (a controller reset).
    pub fn reset(&mut self, now: Time) {
        self.channels.iter_mut().for_each(|c| *c = (*c).min(now));
        self.path_free = self.path_free.min(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unwritten_blocks_read_as_zeros_and_written_ones_as_written() {
        let mut ns = Namespace::new(512, 100);
        ns.write(3, &[7u8; 1024]);
        let got = ns.read(2, 4);
        assert!(got[..512].iter().all(|&b| b == 0));
        assert!(got[512..1536].iter().all(|&b| b == 7));
        assert!(got[1536..].iter().all(|&b| b == 0));
        assert!(ns.in_range(99, 1) && !ns.in_range(99, 2) && !ns.in_range(u64::MAX, 2));
        assert_eq!(ns.used(), 2);
    }

    #[test]
    fn one_command_takes_the_latency_and_many_are_bound_by_bandwidth() {
        let mut m = Media::new(MediaTiming {
            read: Time::from_ns(8000),
            write: Time::from_ns(8000),
            read_gbps: 2.0,
            write_gbps: 2.0,
            channels: 8,
        });
        assert_eq!(m.access(Time::ZERO, false, 4096), Time::from_ns(8000));
        let mut m2 = Media::new(m.timing().clone());
        let last = (0..1000)
            .map(|_| m2.access(Time::ZERO, false, 4096))
            .max()
            .unwrap();
        // 4 MB at 2 GB/s ≈ 2 ms.
        let gbps = 1000.0 * 4096.0 / last.as_ps() as f64 * 1000.0;
        assert!((gbps - 2.0).abs() < 0.05, "{gbps}");
    }
}
