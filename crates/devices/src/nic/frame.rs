//! Ethernet framing and TCP segmentation (IEEE 802.3; RFC 793/7323 headers).

/// Preamble and start-of-frame delimiter.
pub const PREAMBLE: u32 = 8;
/// Destination and source MAC, EtherType.
pub const ETH_HEADER: u32 = 14;
/// Frame check sequence.
pub const FCS: u32 = 4;
/// Minimum inter-frame gap.
pub const IFG: u32 = 12;
/// Smallest Ethernet frame (header to FCS).
pub const MIN_FRAME: u32 = 64;
/// IPv4 (20) and TCP (20) headers plus the 12 B timestamp option Linux sends.
pub const TCP_IP_HEADERS: u32 = 20 + 20 + 12;
/// A pure ACK's IP and TCP headers with timestamps.
pub const ACK_BYTES: u32 = TCP_IP_HEADERS;

/// TCP payload per segment for an IP `mtu` (1500 → 1448 with timestamps).
pub fn mss(mtu: u32) -> u32 {
    mtu - TCP_IP_HEADERS
}

/// Bytes the frame puts in host memory: Ethernet header and the IP packet (no FCS, which
/// the NIC strips).
pub fn frame_in_memory(ip_bytes: u32) -> u32 {
    ETH_HEADER + ip_bytes
}

/// Byte times a frame carrying an `ip_bytes` IP packet occupies on the wire, padding,
/// preamble, FCS and inter-frame gap included.
pub fn wire_bytes(ip_bytes: u32) -> u32 {
    (ETH_HEADER + ip_bytes + FCS).max(MIN_FRAME) + PREAMBLE + IFG
}

/// A TSO send of `bytes` cut into MSS segments: the payload of each wire frame.
pub fn tso_segments(bytes: u32, mss: u32) -> impl Iterator<Item = u32> {
    let n = bytes.div_ceil(mss);
    (0..n).map(move |i| (bytes - i * mss).min(mss))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tso_of_64_kib_is_ceil_over_mss_frames_carrying_every_byte() {
        let m = mss(1500);
        assert_eq!(m, 1448);
        let segs: Vec<u32> = tso_segments(65536, m).collect();
        assert_eq!(segs.len(), 65536usize.div_ceil(1448));
        assert_eq!(segs.iter().sum::<u32>(), 65536);
        assert!(segs.iter().all(|&s| s <= m));
    }

    #[test]
    fn a_full_frame_is_1538_byte_times_and_a_tiny_one_is_padded() {
        assert_eq!(wire_bytes(1500), 1538);
        assert_eq!(wire_bytes(40), 84, "64 B minimum frame + preamble + IFG");
    }
}
