//! InfiniBand framing of reliable-connected one-sided operations: how a verb is cut into
//! packets at the path MTU and how many bytes each packet puts on the wire.
//!
//! Header sizes are the InfiniBand Architecture Specification's (Vol. 1, ch. 9 "Transport
//! layer" and ch. 7 "Link layer"): LRH 8 B, BTH 12 B, RETH 16 B (first packet of a WRITE,
//! the READ request), AETH 4 B (the ACK; first, last or only packet of a READ response),
//! AtomicETH 28 B, AtomicAckETH 8 B, ICRC 4 B, VCRC 2 B; the payload is padded to a whole
//! number of 4-byte words. No GRH: the testbed is one subnet (docs/hardware.md §4 names one
//! HCA per host and no router).

/// Local route header.
pub const LRH: u64 = 8;
/// Base transport header.
pub const BTH: u64 = 12;
/// RDMA extended transport header: virtual address, R_Key, DMA length.
pub const RETH: u64 = 16;
/// ACK extended transport header: syndrome and MSN.
pub const AETH: u64 = 4;
/// Atomic extended transport header: address, R_Key, swap/add and compare data.
pub const ATOMIC_ETH: u64 = 28;
/// Atomic acknowledge extended transport header: the original remote value.
pub const ATOMIC_ACK_ETH: u64 = 8;
/// Invariant CRC.
pub const ICRC: u64 = 4;
/// Variant CRC.
pub const VCRC: u64 = 2;

/// Path MTUs InfiniBand allows (IBA Vol. 1 §7.7.8: 256 to 4096 bytes).
pub const MTUS: [u32; 5] = [256, 512, 1024, 2048, 4096];

/// Data rate of a 4x FDR port after 64b/66b coding: 4 lanes × 14.0625 Gb/s × 64/66,
/// in GB/s (≈ 6.818). docs/hardware.md §4's "56 Gb/s" is the rounded signalling rate.
pub fn fdr_4x_gbps() -> f64 {
    4.0 * 14.0625 * 64.0 / 66.0 / 8.0
}

/// Packets of one direction of an operation and the bytes they put on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packets {
    pub count: u64,
    pub wire_bytes: u64,
}

fn padded(payload: u64) -> u64 {
    payload.div_ceil(4) * 4
}

fn packet(payload: u64, ext: u64) -> u64 {
    LRH + BTH + ext + padded(payload) + ICRC + VCRC
}

/// Checks a path MTU.
pub fn check_mtu(mtu: u32) -> Result<(), String> {
    if MTUS.contains(&mtu) {
        Ok(())
    } else {
        Err(format!(
            "path MTU {mtu}: InfiniBand's MTUs are 256, 512, 1024, 2048 and 4096 bytes"
        ))
    }
}

/// One packet of a message: the payload it carries and the bytes it puts on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet {
    pub payload: u64,
    pub wire_bytes: u64,
}

impl Packets {
    /// The packets of one direction of an operation, in order.
    pub fn of(each: &[Packet]) -> Packets {
        Packets {
            count: each.len() as u64,
            wire_bytes: each.iter().map(|p| p.wire_bytes).sum(),
        }
    }
}

/// A message of `bytes` cut at `mtu`, its first packet carrying `first_ext` extra header
/// bytes, its last `last_ext` (the only packet of a one-packet message carries both).
fn message_each(bytes: u64, mtu: u32, first_ext: u64, last_ext: u64) -> Vec<Packet> {
    let mtu = mtu as u64;
    let count = bytes.div_ceil(mtu).max(1);
    (0..count)
        .map(|i| {
            let payload = (bytes - i * mtu).min(mtu);
            let mut ext = 0;
            if i == 0 {
                ext += first_ext;
            }
            if i + 1 == count {
                ext += last_ext;
            }
            Packet {
                payload,
                wire_bytes: packet(payload, ext),
            }
        })
        .collect()
}

fn message(bytes: u64, mtu: u32, first_ext: u64, last_ext: u64) -> Packets {
    Packets::of(&message_each(bytes, mtu, first_ext, last_ext))
}

/// The packets of a WRITE of `bytes`, in order (see `write_request`).
pub fn write_request_each(bytes: u64, mtu: u32) -> Vec<Packet> {
    message_each(bytes, mtu, RETH, 0)
}

/// The packets of a READ response of `bytes`, in order (see `read_response`).
pub fn read_response_each(bytes: u64, mtu: u32) -> Vec<Packet> {
    if bytes <= mtu as u64 {
        return vec![Packet {
            payload: bytes,
            wire_bytes: packet(bytes, AETH),
        }];
    }
    message_each(bytes, mtu, AETH, AETH)
}

/// A WRITE of `bytes`: RDMA WRITE First (RETH) / Middle / Last, or Only (RETH).
pub fn write_request(bytes: u64, mtu: u32) -> Packets {
    message(bytes, mtu, RETH, 0)
}

/// A READ request: one packet with a RETH and no payload.
pub fn read_request() -> Packets {
    Packets {
        count: 1,
        wire_bytes: packet(0, RETH),
    }
}

/// The READ response of `bytes`: First (AETH) / Middle / Last (AETH), or Only (AETH).
pub fn read_response(bytes: u64, mtu: u32) -> Packets {
    Packets::of(&read_response_each(bytes, mtu))
}

/// An ACK (of a WRITE): AETH, no payload.
pub fn ack() -> Packets {
    Packets {
        count: 1,
        wire_bytes: packet(0, AETH),
    }
}

/// A CAS or FAA request: one packet with an AtomicETH.
pub fn atomic_request() -> Packets {
    Packets {
        count: 1,
        wire_bytes: packet(0, ATOMIC_ETH),
    }
}

/// The atomic's acknowledgement: AETH and AtomicAckETH with the original value.
pub fn atomic_response() -> Packets {
    Packets {
        count: 1,
        wire_bytes: packet(0, AETH + ATOMIC_ACK_ETH),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_4_kib_read_at_mtu_256_is_16_response_packets_with_two_aeths() {
        let r = read_response(4096, 256);
        assert_eq!(r.count, 16);
        // 16 × (LRH 8 + BTH 12 + 256 + ICRC 4 + VCRC 2) + AETH on the first and the last.
        assert_eq!(r.wire_bytes, 16 * 282 + 8);
        assert_eq!(read_response(64, 256).wire_bytes, 8 + 12 + 4 + 64 + 4 + 2);
        assert_eq!(read_request().wire_bytes, 42);
        let each = read_response_each(600, 256);
        let payloads: Vec<u64> = each.iter().map(|p| p.payload).collect();
        assert_eq!(payloads, [256, 256, 88]);
        assert_eq!(Packets::of(&each), read_response(600, 256));
    }

    #[test]
    fn a_write_carries_its_reth_once_and_pads_the_payload() {
        let w = write_request(600, 256);
        assert_eq!(w.count, 3);
        // 256 + 256 + 88 payload, one RETH, three sets of LRH/BTH/ICRC/VCRC.
        assert_eq!(w.wire_bytes, 600 + 16 + 3 * 26);
        assert_eq!(write_request(5, 256).wire_bytes, 8 + 26 + 16);
        assert_eq!(atomic_response().wire_bytes, 26 + 12);
    }

    #[test]
    fn fdr_data_rate_and_mtus() {
        assert!((fdr_4x_gbps() - 6.818).abs() < 1e-3);
        assert!(check_mtu(256).is_ok());
        let e = check_mtu(1500).unwrap_err();
        assert!(e.contains("1500") && e.contains("4096"), "{e}");
    }
}
