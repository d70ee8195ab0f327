//! Submission and completion queue entries (NVMe 1.3 §4.2, §4.6) as bytes, the opcodes
//! and status codes this model uses, and the Identify data structures it returns.

/// Admin command opcodes.
pub mod admin {
    pub const DELETE_IO_SQ: u8 = 0x00;
    pub const CREATE_IO_SQ: u8 = 0x01;
    pub const DELETE_IO_CQ: u8 = 0x04;
    pub const CREATE_IO_CQ: u8 = 0x05;
    pub const IDENTIFY: u8 = 0x06;
    pub const SET_FEATURES: u8 = 0x09;
    pub const GET_FEATURES: u8 = 0x0A;
}

/// NVM command set opcodes.
pub mod io {
    pub const FLUSH: u8 = 0x00;
    pub const WRITE: u8 = 0x01;
    pub const READ: u8 = 0x02;
}

/// Feature identifiers.
pub const FID_NUMBER_OF_QUEUES: u8 = 0x07;

/// Identify CNS values.
pub const CNS_NAMESPACE: u8 = 0x00;
pub const CNS_CONTROLLER: u8 = 0x01;

/// A completion's status field: type and code (§4.6.1.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Status {
    /// Status code type: 0 generic, 1 command specific, 2 media errors.
    pub sct: u8,
    pub sc: u8,
}

impl Status {
    pub const SUCCESS: Status = Status { sct: 0, sc: 0x00 };
    pub const INVALID_OPCODE: Status = Status { sct: 0, sc: 0x01 };
    pub const INVALID_FIELD: Status = Status { sct: 0, sc: 0x02 };
    pub const DATA_TRANSFER_ERROR: Status = Status { sct: 0, sc: 0x04 };
    pub const ABORTED_SQ_DELETION: Status = Status { sct: 0, sc: 0x08 };
    pub const INVALID_NAMESPACE: Status = Status { sct: 0, sc: 0x0B };
    pub const COMMAND_SEQUENCE_ERROR: Status = Status { sct: 0, sc: 0x0C };
    pub const INVALID_PRP_OFFSET: Status = Status { sct: 0, sc: 0x13 };
    pub const LBA_OUT_OF_RANGE: Status = Status { sct: 0, sc: 0x80 };
    pub const COMPLETION_QUEUE_INVALID: Status = Status { sct: 1, sc: 0x00 };
    pub const INVALID_QUEUE_IDENTIFIER: Status = Status { sct: 1, sc: 0x01 };
    pub const INVALID_QUEUE_SIZE: Status = Status { sct: 1, sc: 0x02 };
    pub const INVALID_INTERRUPT_VECTOR: Status = Status { sct: 1, sc: 0x08 };
    pub const INVALID_QUEUE_DELETION: Status = Status { sct: 1, sc: 0x0C };

    pub fn is_success(self) -> bool {
        self == Status::SUCCESS
    }

    /// The 15-bit status field (SC 7:0, SCT 10:8; DNR 14 set for every error: this model
    /// never fails a command that a retry would pass).
    pub fn field(self) -> u16 {
        let dnr = if self.is_success() { 0 } else { 1 << 14 };
        self.sc as u16 | ((self.sct & 7) as u16) << 8 | dnr
    }

    pub fn from_field(f: u16) -> Status {
        Status {
            sct: (f >> 8 & 7) as u8,
            sc: f as u8,
        }
    }
}

/// A 64-byte submission queue entry.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Command {
    pub opcode: u8,
    pub cid: u16,
    pub nsid: u32,
    pub prp1: u64,
    pub prp2: u64,
    /// Command dwords 10..=15.
    pub cdw: [u32; 6],
}

impl Command {
    pub fn to_bytes(&self) -> [u8; 64] {
        let mut b = [0u8; 64];
        b[0] = self.opcode;
        b[2..4].copy_from_slice(&self.cid.to_le_bytes());
        b[4..8].copy_from_slice(&self.nsid.to_le_bytes());
        b[24..32].copy_from_slice(&self.prp1.to_le_bytes());
        b[32..40].copy_from_slice(&self.prp2.to_le_bytes());
        for (i, d) in self.cdw.iter().enumerate() {
            b[40 + 4 * i..44 + 4 * i].copy_from_slice(&d.to_le_bytes());
        }
        b
    }

    pub fn from_bytes(b: &[u8; 64]) -> Command {
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        Command {
            opcode: b[0],
            cid: u16::from_le_bytes([b[2], b[3]]),
            nsid: u32_at(4),
            prp1: u64_at(24),
            prp2: u64_at(32),
            cdw: std::array::from_fn(|i| u32_at(40 + 4 * i)),
        }
    }

    pub fn cdw10(&self) -> u32 {
        self.cdw[0]
    }

    pub fn cdw11(&self) -> u32 {
        self.cdw[1]
    }

    pub fn cdw12(&self) -> u32 {
        self.cdw[2]
    }

    /// Identify (CNS 0: namespace `nsid`; CNS 1: the controller) into 4 KiB at `prp1`
    /// (and `prp2` when the 4 KiB crosses a page).
    pub fn identify(cns: u8, nsid: u32, prp1: u64, prp2: u64) -> Command {
        Command {
            opcode: admin::IDENTIFY,
            nsid,
            prp1,
            prp2,
            cdw: [cns as u32, 0, 0, 0, 0, 0],
            ..Command::default()
        }
    }

    /// Set Features, Number of Queues: `sqs` and `cqs` I/O queues requested (1-based).
    pub fn set_queue_count(sqs: u16, cqs: u16) -> Command {
        Command {
            opcode: admin::SET_FEATURES,
            cdw: [
                FID_NUMBER_OF_QUEUES as u32,
                (sqs.wrapping_sub(1) as u32) | (cqs.wrapping_sub(1) as u32) << 16,
                0,
                0,
                0,
                0,
            ],
            ..Command::default()
        }
    }

    pub fn get_queue_count() -> Command {
        Command {
            opcode: admin::GET_FEATURES,
            cdw: [FID_NUMBER_OF_QUEUES as u32, 0, 0, 0, 0, 0],
            ..Command::default()
        }
    }

    /// Create I/O CQ `qid` of `entries` at `base` (physically contiguous); `vector`:
    /// interrupts enabled on that MSI-X vector, `None`: polled (IEN = 0).
    pub fn create_io_cq(qid: u16, entries: u16, base: u64, vector: Option<u16>) -> Command {
        let ien = vector.is_some() as u32;
        Command {
            opcode: admin::CREATE_IO_CQ,
            prp1: base,
            cdw: [
                qid as u32 | (entries.wrapping_sub(1) as u32) << 16,
                1 | ien << 1 | (vector.unwrap_or(0) as u32) << 16,
                0,
                0,
                0,
                0,
            ],
            ..Command::default()
        }
    }

    /// Create I/O SQ `qid` of `entries` at `base`, completing into CQ `cqid`.
    pub fn create_io_sq(qid: u16, entries: u16, base: u64, cqid: u16) -> Command {
        Command {
            opcode: admin::CREATE_IO_SQ,
            prp1: base,
            cdw: [
                qid as u32 | (entries.wrapping_sub(1) as u32) << 16,
                1 | (cqid as u32) << 16,
                0,
                0,
                0,
                0,
            ],
            ..Command::default()
        }
    }

    pub fn delete_io_sq(qid: u16) -> Command {
        Command {
            opcode: admin::DELETE_IO_SQ,
            cdw: [qid as u32, 0, 0, 0, 0, 0],
            ..Command::default()
        }
    }

    pub fn delete_io_cq(qid: u16) -> Command {
        Command {
            opcode: admin::DELETE_IO_CQ,
            cdw: [qid as u32, 0, 0, 0, 0, 0],
            ..Command::default()
        }
    }

    /// Read (`write` false) or Write of `blocks` logical blocks from `slba` on `nsid`.
    pub fn rw(write: bool, nsid: u32, slba: u64, blocks: u16, prp1: u64, prp2: u64) -> Command {
        Command {
            opcode: if write { io::WRITE } else { io::READ },
            nsid,
            prp1,
            prp2,
            cdw: [
                slba as u32,
                (slba >> 32) as u32,
                blocks.wrapping_sub(1) as u32,
                0,
                0,
                0,
            ],
            ..Command::default()
        }
    }

    pub fn flush(nsid: u32) -> Command {
        Command {
            opcode: io::FLUSH,
            nsid,
            ..Command::default()
        }
    }
}

/// A 16-byte completion queue entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Completion {
    /// Command specific (Set Features: the queues allocated).
    pub dw0: u32,
    pub sq_head: u16,
    pub sq_id: u16,
    pub cid: u16,
    pub phase: bool,
    pub status: Status,
}

impl Completion {
    pub fn to_bytes(&self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[0..4].copy_from_slice(&self.dw0.to_le_bytes());
        b[8..10].copy_from_slice(&self.sq_head.to_le_bytes());
        b[10..12].copy_from_slice(&self.sq_id.to_le_bytes());
        b[12..14].copy_from_slice(&self.cid.to_le_bytes());
        let sf = (self.status.field() << 1) | self.phase as u16;
        b[14..16].copy_from_slice(&sf.to_le_bytes());
        b
    }

    pub fn from_bytes(b: &[u8; 16]) -> Completion {
        let sf = u16::from_le_bytes([b[14], b[15]]);
        Completion {
            dw0: u32::from_le_bytes(b[0..4].try_into().expect("4 bytes")),
            sq_head: u16::from_le_bytes([b[8], b[9]]),
            sq_id: u16::from_le_bytes([b[10], b[11]]),
            cid: u16::from_le_bytes([b[12], b[13]]),
            phase: sf & 1 == 1,
            status: Status::from_field(sf >> 1),
        }
    }
}

/// What the Identify Controller structure says (the fields this model fills).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IdentifyController {
    pub vid: u16,
    pub ssvid: u16,
    pub serial: String,
    pub model: String,
    pub firmware: String,
    /// Max data transfer, 2^mdts pages.
    pub mdts: u8,
    pub version: u32,
    pub namespaces: u32,
}

/// Pads ASCII text with spaces to `n` bytes (Identify strings).
fn ascii(out: &mut [u8], s: &str) {
    out.fill(b' ');
    for (o, c) in out.iter_mut().zip(s.bytes()) {
        *o = c;
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).trim_end().to_string()
}

impl IdentifyController {
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut b = vec![0u8; 4096];
        b[0..2].copy_from_slice(&self.vid.to_le_bytes());
        b[2..4].copy_from_slice(&self.ssvid.to_le_bytes());
        ascii(&mut b[4..24], &self.serial);
        ascii(&mut b[24..64], &self.model);
        ascii(&mut b[64..72], &self.firmware);
        b[77] = self.mdts;
        b[80..84].copy_from_slice(&self.version.to_le_bytes());
        // SQES: required and max 64 B; CQES: 16 B.
        b[512] = 6 << 4 | 6;
        b[513] = 4 << 4 | 4;
        b[516..520].copy_from_slice(&self.namespaces.to_le_bytes());
        b
    }

    pub fn from_bytes(b: &[u8]) -> IdentifyController {
        IdentifyController {
            vid: u16::from_le_bytes([b[0], b[1]]),
            ssvid: u16::from_le_bytes([b[2], b[3]]),
            serial: text(&b[4..24]),
            model: text(&b[24..64]),
            firmware: text(&b[64..72]),
            mdts: b[77],
            version: u32::from_le_bytes(b[80..84].try_into().expect("4 bytes")),
            namespaces: u32::from_le_bytes(b[516..520].try_into().expect("4 bytes")),
        }
    }

    /// (SQES, CQES) bytes as read from a raw structure: (required, max) log2 nibbles.
    pub fn entry_sizes(b: &[u8]) -> (u8, u8) {
        (b[512], b[513])
    }
}

/// What the Identify Namespace structure says (one LBA format).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdentifyNamespace {
    /// Size, capacity and use in logical blocks.
    pub nsze: u64,
    pub ncap: u64,
    pub nuse: u64,
    /// log2 of the LBA data size (9: 512 B, 12: 4 KiB).
    pub lbads: u8,
}

impl IdentifyNamespace {
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut b = vec![0u8; 4096];
        b[0..8].copy_from_slice(&self.nsze.to_le_bytes());
        b[8..16].copy_from_slice(&self.ncap.to_le_bytes());
        b[16..24].copy_from_slice(&self.nuse.to_le_bytes());
        b[25] = 0; // NLBAF: one format (0-based)
        b[26] = 0; // FLBAS: format 0 in use
                   // LBAF0: MS 0, LBADS, RP 0.
        b[128..132].copy_from_slice(&((self.lbads as u32) << 16).to_le_bytes());
        b
    }

    pub fn from_bytes(b: &[u8]) -> IdentifyNamespace {
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        let flbas = (b[26] & 0xf) as usize;
        IdentifyNamespace {
            nsze: u64_at(0),
            ncap: u64_at(8),
            nuse: u64_at(16),
            lbads: b[128 + 4 * flbas + 2],
        }
    }

    pub fn lba_bytes(&self) -> u64 {
        1 << self.lbads
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_through_bytes() {
        let c = Command::rw(true, 1, 0x1_2345_6789, 16, 0xdead_b000, 0xbeef_0000);
        assert_eq!(Command::from_bytes(&c.to_bytes()), c);
        let e = Completion {
            dw0: 7,
            sq_head: 3,
            sq_id: 2,
            cid: 99,
            phase: true,
            status: Status::INVALID_QUEUE_IDENTIFIER,
        };
        let b = e.to_bytes();
        assert_eq!(Completion::from_bytes(&b), e);
        // Status field at bits 31:17 of DW3, phase at bit 16: SCT 1, SC 1, DNR.
        let dw3 = u32::from_le_bytes(b[12..16].try_into().unwrap());
        assert_eq!(dw3 >> 16 & 1, 1);
        assert_eq!(dw3 >> 17 & 0xff, 0x01);
        assert_eq!(dw3 >> 25 & 7, 1);
        assert_eq!(dw3 >> 31, 1, "DNR");
        let id = IdentifyController {
            vid: 0x8086,
            ssvid: 0x8086,
            serial: "SN1".into(),
            model: "M".into(),
            firmware: "F".into(),
            mdts: 5,
            version: 0x10300,
            namespaces: 1,
        };
        assert_eq!(IdentifyController::from_bytes(&id.to_bytes()), id);
    }
}
