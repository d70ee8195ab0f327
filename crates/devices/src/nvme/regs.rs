//! Controller registers of BAR0 (NVMe 1.3 §3.1), the doorbells and the MSI-X table this
//! model places in the same BAR.

/// Controller Capabilities (8 B, read-only).
pub const CAP: u64 = 0x00;
/// Version (4 B): 1.3.0.
pub const VS: u64 = 0x08;
/// Interrupt Mask Set / Clear (4 B each; read back the mask).
pub const INTMS: u64 = 0x0C;
pub const INTMC: u64 = 0x10;
/// Controller Configuration (4 B).
pub const CC: u64 = 0x14;
/// Controller Status (4 B, read-only).
pub const CSTS: u64 = 0x1C;
/// Admin Queue Attributes (4 B): ASQS 11:0, ACQS 27:16, both 0-based.
pub const AQA: u64 = 0x24;
/// Admin SQ / CQ base addresses (8 B each).
pub const ASQ: u64 = 0x28;
pub const ACQ: u64 = 0x30;
/// Controller Memory Buffer location and size (4 B each): zero, no CMB.
pub const CMBLOC: u64 = 0x38;
pub const CMBSZ: u64 = 0x3C;
/// First doorbell (SQ 0 tail).
pub const DOORBELLS: u64 = 0x1000;
/// The MSI-X table this model places in BAR0 (16 B per vector: address low, address
/// high, data, vector control with bit 0 = masked) and its pending-bit array.
pub const MSIX_TABLE: u64 = 0x2000;
pub const MSIX_PBA: u64 = 0x3000;
/// Bytes per MSI-X table entry.
pub const MSIX_ENTRY: u64 = 16;

/// The version this model implements (VS: major 31:16, minor 15:8).
pub const VERSION_1_3: u32 = 0x0001_0300;

/// CC fields.
pub const CC_EN: u32 = 1;
/// CSTS fields.
pub const CSTS_RDY: u32 = 1;
pub const CSTS_CFS: u32 = 1 << 1;
/// CSTS.SHST (3:2) and its "shutdown processing complete" value.
pub const CSTS_SHST: u32 = 3 << 2;
pub const CSTS_SHST_COMPLETE: u32 = 2 << 2;

/// The doorbell of queue `qid` (`cq`: the CQ head doorbell, else the SQ tail one) for a
/// doorbell stride CAP.DSTRD: `0x1000 + (2 qid + cq) × (4 << DSTRD)`.
pub fn doorbell(qid: u16, cq: bool, dstrd: u8) -> u64 {
    DOORBELLS + (2 * qid as u64 + cq as u64) * (4u64 << dstrd)
}

/// Which doorbell a BAR0 offset is, if it is one: (qid, is the CQ head doorbell).
pub fn doorbell_at(offset: u64, dstrd: u8) -> Option<(u16, bool)> {
    let stride = 4u64 << dstrd;
    let rel = offset.checked_sub(DOORBELLS)?;
    if rel % stride != 0 {
        return None;
    }
    let n = rel / stride;
    let qid = u16::try_from(n / 2).ok()?;
    Some((qid, n % 2 == 1))
}

/// Controller Capabilities, field by field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cap {
    /// Maximum queue entries supported, 0-based (a queue holds at most MQES + 1).
    pub mqes: u16,
    /// Contiguous queues required.
    pub cqr: bool,
    /// Timeout for CSTS.RDY to change after CC.EN changes, in 500 ms units.
    pub to: u8,
    /// Doorbell stride: doorbells are `4 << dstrd` bytes apart.
    pub dstrd: u8,
    /// Command sets: bit 0 = NVM.
    pub css: u8,
    /// Memory page sizes supported: 2^(12 + MPSMIN) ..= 2^(12 + MPSMAX).
    pub mpsmin: u8,
    pub mpsmax: u8,
}

impl Cap {
    pub fn to_u64(self) -> u64 {
        self.mqes as u64
            | (self.cqr as u64) << 16
            | (self.to as u64) << 24
            | ((self.dstrd & 0xf) as u64) << 32
            | (self.css as u64) << 37
            | ((self.mpsmin & 0xf) as u64) << 48
            | ((self.mpsmax & 0xf) as u64) << 52
    }

    pub fn from_u64(v: u64) -> Cap {
        Cap {
            mqes: v as u16,
            cqr: v >> 16 & 1 == 1,
            to: (v >> 24) as u8,
            dstrd: (v >> 32 & 0xf) as u8,
            css: (v >> 37) as u8,
            mpsmin: (v >> 48 & 0xf) as u8,
            mpsmax: (v >> 52 & 0xf) as u8,
        }
    }
}

/// Controller Configuration, field by field.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cc {
    pub en: bool,
    /// I/O command set selected (0 = NVM).
    pub css: u8,
    /// Memory page size 2^(12 + mps).
    pub mps: u8,
    /// Arbitration mechanism (0 = round robin).
    pub ams: u8,
    /// Shutdown notification.
    pub shn: u8,
    /// I/O SQ / CQ entry sizes, log2 (6 = 64 B, 4 = 16 B).
    pub iosqes: u8,
    pub iocqes: u8,
}

impl Cc {
    pub fn to_u32(self) -> u32 {
        self.en as u32
            | ((self.css & 7) as u32) << 4
            | ((self.mps & 0xf) as u32) << 7
            | ((self.ams & 7) as u32) << 11
            | ((self.shn & 3) as u32) << 14
            | ((self.iosqes & 0xf) as u32) << 16
            | ((self.iocqes & 0xf) as u32) << 20
    }

    pub fn from_u32(v: u32) -> Cc {
        Cc {
            en: v & 1 == 1,
            css: (v >> 4 & 7) as u8,
            mps: (v >> 7 & 0xf) as u8,
            ams: (v >> 11 & 7) as u8,
            shn: (v >> 14 & 3) as u8,
            iosqes: (v >> 16 & 0xf) as u8,
            iocqes: (v >> 20 & 0xf) as u8,
        }
    }

    /// What a driver writes to enable an NVM controller with 4 KiB pages.
    pub fn enable() -> Cc {
        Cc {
            en: true,
            iosqes: 6,
            iocqes: 4,
            ..Cc::default()
        }
    }

    /// The memory page size in bytes.
    pub fn page_bytes(self) -> u64 {
        4096 << self.mps
    }
}

/// AQA for admin queues of `sq_entries` and `cq_entries` (each at least 2).
pub fn aqa(sq_entries: u16, cq_entries: u16) -> u32 {
    (sq_entries as u32 - 1) & 0xfff | ((cq_entries as u32 - 1) & 0xfff) << 16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doorbells_follow_the_stride() {
        assert_eq!(doorbell(0, false, 0), 0x1000);
        assert_eq!(doorbell(0, true, 0), 0x1004);
        assert_eq!(doorbell(3, true, 0), 0x101C);
        assert_eq!(doorbell(1, false, 2), 0x1000 + 2 * 16);
        for dstrd in [0, 1, 3] {
            for q in [0u16, 1, 31] {
                for cq in [false, true] {
                    assert_eq!(doorbell_at(doorbell(q, cq, dstrd), dstrd), Some((q, cq)));
                }
            }
        }
        assert_eq!(doorbell_at(0x1002, 0), None);
        assert_eq!(doorbell_at(0x14, 0), None);
    }

    #[test]
    fn registers_round_trip() {
        let cap = Cap {
            mqes: 4095,
            cqr: true,
            to: 2,
            dstrd: 1,
            css: 1,
            mpsmin: 0,
            mpsmax: 4,
        };
        assert_eq!(Cap::from_u64(cap.to_u64()), cap);
        let cc = Cc::enable();
        assert_eq!(Cc::from_u32(cc.to_u32()), cc);
        assert_eq!(cc.to_u32(), 0x0046_0001);
        assert_eq!(aqa(32, 32), 0x001F_001F);
    }
}
