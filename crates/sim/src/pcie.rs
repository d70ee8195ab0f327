//! PCIe link arithmetic: raw rate per generation and width, TLP framing/header overhead,
//! DLLP size, and serialization time. docs/hardware.md §5 for the overheads, the PCIe base
//! specifications for rates and encodings.

use crate::time::Time;

/// Transfer rate in GT/s and the encoding efficiency of a PCIe generation.
pub fn gen_rate(gen: u8) -> (f64, f64) {
    match gen {
        1 => (2.5, 8.0 / 10.0),
        2 => (5.0, 8.0 / 10.0),
        3 => (8.0, 128.0 / 130.0),
        4 => (16.0, 128.0 / 130.0),
        _ => (32.0, 128.0 / 130.0),
    }
}

/// Raw bandwidth of a link in bytes per nanosecond (GB/s), per direction.
/// Gen3 x16 ≈ 15.75 GB/s (docs/hardware.md §2).
pub fn link_gbps(gen: u8, width: u8) -> f64 {
    let (gts, enc) = gen_rate(gen);
    gts * enc / 8.0 * width as f64
}

/// Framing, sequence number and LCRC around every TLP: Gen1/2 STP(1) + seq(2) + LCRC(4)
/// + END(1); Gen3+ STP token with sequence (4) + LCRC(4). Both 8 bytes.
pub const TLP_FRAMING: u32 = 8;
/// A DLLP on the wire (6 bytes + framing), for ACKs and flow-control updates.
pub const DLLP_BYTES: u32 = 8;
/// DLLP bytes charged to the reverse direction per TLP: one ACK and one UpdateFC per four
/// TLPs (assumption: typical ACK coalescing; docs/hardware.md §5 only says "plus DLLPs").
pub const DLLP_PER_TLP: u32 = DLLP_BYTES * 2 / 4;

/// Header bytes of a memory request (3 DW, or 4 DW with a 64-bit address) or a
/// completion (3 DW), docs/hardware.md §5.
pub fn header_bytes(is_completion: bool, addr64: bool) -> u32 {
    if !is_completion && addr64 {
        16
    } else {
        12
    }
}

/// Bytes a TLP occupies on the wire.
pub fn wire_bytes(payload: u32, is_completion: bool, addr64: bool) -> u32 {
    payload + header_bytes(is_completion, addr64) + TLP_FRAMING
}

/// Share of a link's time taken by SKP ordered sets (clock compensation), which carry no
/// TLP or DLLP. PCIe Base Specification, physical layer: with 8b/10b (Gen1/2) a 4-symbol
/// SKP ordered set is scheduled every 1180 to 1538 symbol times; with 128b/130b (Gen3 and
/// later) one SKP block every 370 to 375 blocks. nudma takes the shortest interval (the
/// most SKP a compliant transmitter sends; an assumption, as the spec allows the range):
/// 4 / 1184 ≈ 0.34 % and 1 / 371 ≈ 0.27 %.
pub fn skp_share(gen: u8) -> f64 {
    match gen {
        1 | 2 => 4.0 / (1180.0 + 4.0),
        _ => 1.0 / (370.0 + 1.0),
    }
}

/// Bandwidth a link's TLPs and DLLPs can use: the raw rate less its SKP ordered sets.
pub fn link_data_gbps(gen: u8, width: u8) -> f64 {
    link_gbps(gen, width) * (1.0 - skp_share(gen))
}

/// Serialization speed of a link as picoseconds per 1024 bytes (fixed point, so the hot
/// path multiplies integers), SKP ordered sets accounted.
pub fn ps_per_kib(gen: u8, width: u8) -> u64 {
    ps_per_kib_at(link_data_gbps(gen, width))
}

/// Picoseconds per 1024 bytes at `gbps` (10^9 bytes per second): the fixed-point pace of
/// any resource with a bandwidth (a link, a memory, a pacer).
pub fn ps_per_kib_at(gbps: f64) -> u64 {
    (1024.0 * 1000.0 / gbps).round() as u64
}

/// Time to put `bytes` on a link with `ps_per_kib`.
#[inline]
pub fn serialize(bytes: u32, ps_per_kib: u64) -> Time {
    Time::from_ps((bytes as u64 * ps_per_kib).div_ceil(1024))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gen3_x16_matches_reference() {
        assert!(
            (link_gbps(3, 16) - 15.75).abs() < 0.01,
            "docs/hardware.md §2: ≈ 15.75 GB/s raw"
        );
        assert!((link_gbps(3, 1) - 0.985).abs() < 0.001);
        assert!((link_gbps(1, 8) - 2.0).abs() < 1e-9);
        assert!((link_gbps(5, 16) - 63.0).abs() < 0.1);
    }

    #[test]
    fn tlp_overhead_is_twenty_to_twenty_four_bytes() {
        assert_eq!(wire_bytes(0, true, false), 20);
        assert_eq!(wire_bytes(256, false, true), 256 + 24);
        // 256 B writes on Gen3 x16: ≈ 14.4 GB/s of payload before DLLPs.
        let eff = 256.0 / wire_bytes(256, false, true) as f64 * link_gbps(3, 16);
        assert!((14.3..14.5).contains(&eff), "{eff}");
    }

    #[test]
    fn skp_ordered_sets_take_about_a_quarter_percent() {
        // ≈ 0.27 % of a Gen3 link (one block in 371), ≈ 0.34 % at Gen1/2.
        assert!((skp_share(3) - 0.0027).abs() < 0.0001, "{}", skp_share(3));
        assert!((skp_share(1) - 0.0034).abs() < 0.0001, "{}", skp_share(1));
        let data = 1024.0 * 1000.0 / ps_per_kib(3, 16) as f64;
        assert!((data / link_gbps(3, 16) - (1.0 - skp_share(3))).abs() < 1e-4);
    }

    #[test]
    fn serialization_scales_with_width() {
        let x8 = serialize(280, ps_per_kib(3, 8));
        let x16 = serialize(280, ps_per_kib(3, 16));
        assert!(x8.as_ps().abs_diff(2 * x16.as_ps()) <= 1);
    }
}
