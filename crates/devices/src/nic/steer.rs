//! Receive steering: RSS (Toeplitz over the 5-tuple), per-PF ARFS tables, the
//! multi-PF switch (MPFS) of an octoNIC (docs/hardware.md §1), and Linux's multi-PF netdev
//! (mlx5 "socket direct", Documentation/networking/multi-pf-netdev.rst): one netdev whose
//! channels are spread over the PFs round-robin and whose receive steering tables belong
//! to the primary PF, pointing at any PF's receive queues.

use std::collections::HashMap;

/// A TCP/UDP flow's 5-tuple (IPv4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FiveTuple {
    pub src_ip: u32,
    pub dst_ip: u32,
    pub src_port: u16,
    pub dst_port: u16,
    pub proto: u8,
}

/// Microsoft's default RSS key, which Linux drivers use unless told otherwise.
pub const RSS_KEY: [u8; 40] = [
    0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0,
    0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30, 0xf2, 0x0c,
    0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
];

/// The Toeplitz hash of `input` under `key` (RSS specification): for every input bit
/// set, XOR in the 32 key bits starting at that bit's position.
pub fn toeplitz(key: &[u8], input: &[u8]) -> u32 {
    let key_bit = |i: usize| key.get(i / 8).map_or(0, |b| (b >> (7 - i % 8)) & 1) as u32;
    let mut result = 0u32;
    let mut window = u32::from_be_bytes([key[0], key[1], key[2], key[3]]);
    for (i, bit) in (0..input.len() * 8).map(|i| (i, input[i / 8] >> (7 - i % 8) & 1)) {
        if bit == 1 {
            result ^= window;
        }
        window = window << 1 | key_bit(i + 32);
    }
    result
}

/// The RSS hash of a flow as a NIC computes it (source IP, destination IP, source port,
/// destination port).
pub fn rss_hash(t: &FiveTuple) -> u32 {
    let mut input = [0u8; 12];
    input[0..4].copy_from_slice(&t.src_ip.to_be_bytes());
    input[4..8].copy_from_slice(&t.dst_ip.to_be_bytes());
    input[8..10].copy_from_slice(&t.src_port.to_be_bytes());
    input[10..12].copy_from_slice(&t.dst_port.to_be_bytes());
    toeplitz(&RSS_KEY, &input)
}

/// How incoming traffic reaches a PF of a multi-PF NIC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SteeringMode {
    /// Each PF its own netdev and MAC: traffic for a netdev enters through its PF.
    Standard,
    /// One port and MAC: the multi-PF switch maps a flow to a PF, then that PF's ARFS
    /// table (or RSS) picks the queue.
    OctoNic,
    /// Linux's multi-PF netdev: channel `c` works against PF `c % pfs` (its queue there
    /// is `c / pfs`); the primary PF (0) holds the one RSS indirection table and the ARFS
    /// rules, both over channels, so a flow lands on the PF of the channel its rule or
    /// hash names.
    LinuxMultiPf,
}

/// A PF's receive steering: an indirection table for RSS and an ARFS table of exact
/// flows → queue.
#[derive(Clone, Debug)]
pub struct PfSteering {
    pub indirection: Vec<u16>,
    pub arfs: HashMap<FiveTuple, u16>,
}

impl PfSteering {
    /// RSS over `queues` queues with a 128-entry indirection table (mlx5's size).
    pub fn new(queues: u16) -> PfSteering {
        PfSteering {
            indirection: (0..128).map(|i| i % queues.max(1)).collect(),
            arfs: HashMap::new(),
        }
    }

    /// The queue of a flow: its ARFS rule, or RSS.
    pub fn queue(&self, t: &FiveTuple) -> u16 {
        match self.arfs.get(t) {
            Some(&q) => q,
            None => self.indirection[rss_hash(t) as usize % self.indirection.len()],
        }
    }
}

/// The NIC's receive steering across its PFs.
#[derive(Clone, Debug)]
pub struct Steering {
    pub mode: SteeringMode,
    /// Per PF its tables; with `LinuxMultiPf` only the primary's (0) are used, and they
    /// name channels, not PF-local queues.
    pub pfs: Vec<PfSteering>,
    /// Octonic's multi-PF switch: flow → PF. Unknown flows go to PF 0 (the primary).
    pub mpfs: HashMap<FiveTuple, u8>,
}

impl Steering {
    pub fn new(mode: SteeringMode, pfs: u8, queues_per_pf: u16) -> Steering {
        let mut s = Steering {
            mode,
            pfs: (0..pfs).map(|_| PfSteering::new(queues_per_pf)).collect(),
            mpfs: HashMap::new(),
        };
        if mode == SteeringMode::LinuxMultiPf && pfs > 0 {
            // One default RSS table over every channel of the netdev.
            s.pfs[0] = PfSteering::new(queues_per_pf.saturating_mul(pfs as u16));
        }
        s
    }

    /// Where a frame of flow `t` goes: (PF, queue). In standard mode the frame already
    /// belongs to the netdev whose MAC it carries, `netdev_pf`.
    pub fn steer(&self, t: &FiveTuple, netdev_pf: u8) -> (u8, u16) {
        match self.mode {
            SteeringMode::Standard => (netdev_pf, self.pfs[netdev_pf as usize].queue(t)),
            SteeringMode::OctoNic => {
                let pf = self.mpfs.get(t).copied().unwrap_or(0);
                (pf, self.pfs[pf as usize].queue(t))
            }
            SteeringMode::LinuxMultiPf => self.channel_pf(self.pfs[0].queue(t)),
        }
    }

    /// A multi-PF netdev's channel as (PF, queue on that PF): round-robin over the PFs.
    pub fn channel_pf(&self, channel: u16) -> (u8, u16) {
        let n = self.pfs.len().max(1) as u16;
        ((channel % n) as u8, channel / n)
    }

    /// The channel of queue `queue` on PF `pf` of a multi-PF netdev.
    pub fn pf_channel(&self, pf: u8, queue: u16) -> u16 {
        queue * self.pfs.len().max(1) as u16 + pf as u16
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toeplitz_matches_the_rss_verification_suite() {
        // Microsoft's RSS verification: 66.9.149.187:2794 → 161.142.100.80:1766.
        let t = FiveTuple {
            src_ip: u32::from_be_bytes([66, 9, 149, 187]),
            dst_ip: u32::from_be_bytes([161, 142, 100, 80]),
            src_port: 2794,
            dst_port: 1766,
            proto: 6,
        };
        assert_eq!(rss_hash(&t), 0x51cc_c178);
    }

    #[test]
    fn octonic_uses_the_mpfs_rule_then_arfs_and_standard_the_netdev() {
        let t = FiveTuple {
            src_ip: 1,
            dst_ip: 2,
            src_port: 3,
            dst_port: 4,
            proto: 6,
        };
        let mut s = Steering::new(SteeringMode::OctoNic, 2, 14);
        s.mpfs.insert(t, 1);
        s.pfs[1].arfs.insert(t, 5);
        assert_eq!(s.steer(&t, 0), (1, 5));
        s.mode = SteeringMode::Standard;
        assert_eq!(s.steer(&t, 0).0, 0);
    }

    #[test]
    fn linux_multipf_spreads_channels_round_robin_and_steers_through_the_primary() {
        // multi-pf-netdev.rst's example: 2 PFs, 5 channels → PFs 0 1 0 1 0.
        let s = Steering::new(SteeringMode::LinuxMultiPf, 2, 3);
        let pfs: Vec<u8> = (0..5).map(|c| s.channel_pf(c).0).collect();
        assert_eq!(pfs, [0, 1, 0, 1, 0]);
        for c in 0..6 {
            let (pf, q) = s.channel_pf(c);
            assert_eq!(s.pf_channel(pf, q), c);
        }
        // RSS alone spreads flows over both PFs' channels, whatever netdev they name.
        let mut hit = [0u32; 2];
        for port in 0..64u16 {
            let t = FiveTuple {
                src_ip: 1,
                dst_ip: 2,
                src_port: 1000 + port,
                dst_port: 4,
                proto: 6,
            };
            hit[s.steer(&t, 0).0 as usize] += 1;
        }
        assert!(hit[0] > 10 && hit[1] > 10, "{hit:?}");
        // An ARFS rule in the primary's table points at a secondary PF's queue.
        let t = FiveTuple {
            src_ip: 1,
            dst_ip: 2,
            src_port: 3,
            dst_port: 4,
            proto: 6,
        };
        let mut s = s;
        let channel = s.pf_channel(1, 2);
        s.pfs[0].arfs.insert(t, channel);
        assert_eq!(s.steer(&t, 0), (1, 2));
    }
}
