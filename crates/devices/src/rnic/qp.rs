//! Reliable-connected queue pairs and the one-sided verbs: what a work request asks,
//! the requester's in-order send queue with its bound on outstanding READs and atomics
//! (`max_rd_atomic`), and what each verb does to the responder's memory.

use std::collections::VecDeque;

/// A one-sided verb.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verb {
    Read,
    Write,
    /// IBV_WR_ATOMIC_CMP_AND_SWP: the remote 8 bytes become `swap` if they equal
    /// `compare`; the original value comes back.
    CompareSwap {
        compare: u64,
        swap: u64,
    },
    /// IBV_WR_ATOMIC_FETCH_AND_ADD: the remote 8 bytes grow by `add` (wrapping); the
    /// original value comes back.
    FetchAdd {
        add: u64,
    },
}

impl Verb {
    /// READs and atomics need a responder resource (`max_rd_atomic` bounds them).
    pub fn is_read_like(self) -> bool {
        !matches!(self, Verb::Write)
    }

    pub fn is_atomic(self) -> bool {
        matches!(self, Verb::CompareSwap { .. } | Verb::FetchAdd { .. })
    }

    pub fn parse(word: &str) -> Result<Verb, String> {
        match word {
            "read" => Ok(Verb::Read),
            "write" => Ok(Verb::Write),
            _ => Err(format!(
                "op `{word}`: a benchmark op is \"read\" or \"write\" (atomics take operands)"
            )),
        }
    }
}

/// Bytes an atomic works on.
pub const ATOMIC_BYTES: u64 = 8;

/// A work request on a send queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Wqe {
    pub wr_id: u64,
    pub verb: Verb,
    /// Offset of the remote bytes in the responder's region.
    pub remote: u64,
    /// Offset of the local bytes in the requester's region (source of a WRITE,
    /// destination of a READ or of an atomic's original value).
    pub local: u64,
    pub len: u64,
    /// A WRITE whose payload travels in the WQE (written by the CPU through BlueFlame),
    /// so the RNIC does not gather it by DMA.
    pub inline: bool,
}

impl Wqe {
    /// Checks the request against the regions' sizes: a located reason, never a clamp.
    pub fn check(&self, local_len: u64, remote_len: u64) -> Result<(), String> {
        if self.len == 0 {
            return Err(format!("work request {}: zero length", self.wr_id));
        }
        if self.verb.is_atomic() && (self.len != ATOMIC_BYTES || !self.remote.is_multiple_of(8)) {
            return Err(format!(
                "work request {}: an atomic works on 8 bytes at an 8-byte aligned remote offset (len {}, offset {})",
                self.wr_id, self.len, self.remote
            ));
        }
        let out = |off: u64, len: u64| off.checked_add(self.len).is_none_or(|e| e > len);
        if out(self.remote, remote_len) {
            return Err(format!(
                "work request {}: remote bytes {}..{} outside the {remote_len}-byte region (R_Key violation)",
                self.wr_id,
                self.remote,
                self.remote.saturating_add(self.len)
            ));
        }
        if out(self.local, local_len) {
            return Err(format!(
                "work request {}: local bytes {}..{} outside the {local_len}-byte region (L_Key violation)",
                self.wr_id,
                self.local,
                self.local.saturating_add(self.len)
            ));
        }
        Ok(())
    }
}

/// Performs `verb` on the responder's `region` (the bytes the DMA reaches): a WRITE
/// stores `payload`, a READ returns the bytes, an atomic returns the original 8 bytes
/// (little-endian, as x86 memory holds them) after its update. The responder runs one
/// atomic at a time to completion, so atomics on one address from many QPs are
/// serialised.
pub fn execute(verb: Verb, region: &mut [u8], remote: u64, len: u64, payload: &[u8]) -> Vec<u8> {
    let r = remote as usize..(remote + len) as usize;
    match verb {
        Verb::Write => {
            region[r].copy_from_slice(&payload[..len as usize]);
            Vec::new()
        }
        Verb::Read => region[r].to_vec(),
        Verb::CompareSwap { compare, swap } => {
            let old = u64::from_le_bytes(region[r.clone()].try_into().expect("8 bytes"));
            if old == compare {
                region[r].copy_from_slice(&swap.to_le_bytes());
            }
            old.to_le_bytes().to_vec()
        }
        Verb::FetchAdd { add } => {
            let old = u64::from_le_bytes(region[r.clone()].try_into().expect("8 bytes"));
            region[r].copy_from_slice(&old.wrapping_add(add).to_le_bytes());
            old.to_le_bytes().to_vec()
        }
    }
}

/// The requester's side of one RC queue pair: posted work requests in order and the
/// READs/atomics in flight.
#[derive(Clone, Debug)]
pub struct Qp {
    pub qpn: u32,
    /// READs and atomics this QP may have outstanding (`ibv_qp_attr.max_rd_atomic`).
    pub max_rd_atomic: u32,
    rd_in_flight: u32,
    /// Posted, not yet issued onto the wire.
    pub sq: VecDeque<Wqe>,
    /// Issued, not yet completed.
    pub in_flight: u32,
}

impl Qp {
    pub fn new(qpn: u32, max_rd_atomic: u32) -> Qp {
        Qp {
            qpn,
            max_rd_atomic,
            rd_in_flight: 0,
            sq: VecDeque::new(),
            in_flight: 0,
        }
    }

    /// The next work request the requester may issue: the send queue is processed in
    /// order, so a READ waiting for a responder resource holds back everything behind it.
    pub fn next_issuable(&self) -> Option<&Wqe> {
        let w = self.sq.front()?;
        (!w.verb.is_read_like() || self.rd_in_flight < self.max_rd_atomic).then_some(w)
    }

    /// Takes the next issuable work request and counts it in flight.
    pub fn issue(&mut self) -> Option<Wqe> {
        self.next_issuable()?;
        let w = self.sq.pop_front()?;
        if w.verb.is_read_like() {
            self.rd_in_flight += 1;
        }
        self.in_flight += 1;
        Some(w)
    }

    /// The response (or ACK) of `w` arrived.
    pub fn complete(&mut self, w: &Wqe) {
        if w.verb.is_read_like() {
            self.rd_in_flight -= 1;
        }
        self.in_flight -= 1;
    }

    /// READs and atomics in flight.
    pub fn reads_in_flight(&self) -> u32 {
        self.rd_in_flight
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wqe(id: u64, verb: Verb) -> Wqe {
        Wqe {
            wr_id: id,
            verb,
            remote: 0,
            local: 0,
            len: 8,
            inline: false,
        }
    }

    #[test]
    fn one_outstanding_read_holds_back_the_send_queue_in_order() {
        let mut q = Qp::new(1, 1);
        q.sq.push_back(wqe(1, Verb::Read));
        q.sq.push_back(wqe(2, Verb::Write));
        q.sq.push_back(wqe(3, Verb::Read));
        let r1 = q.issue().unwrap();
        let w2 = q.issue().unwrap();
        assert_eq!(w2.wr_id, 2, "a WRITE does not need a read resource");
        assert_eq!(
            q.issue(),
            None,
            "the second READ waits for the first's response"
        );
        assert_eq!(q.reads_in_flight(), 1);
        q.complete(&r1);
        assert_eq!(q.issue().unwrap().wr_id, 3);
    }

    #[test]
    fn atomics_follow_the_verbs_semantics() {
        let mut m = vec![0u8; 16];
        m[8..16].copy_from_slice(&5u64.to_le_bytes());
        let cas = |c, s| Verb::CompareSwap {
            compare: c,
            swap: s,
        };
        assert_eq!(execute(cas(4, 9), &mut m, 8, 8, &[]), 5u64.to_le_bytes());
        assert_eq!(&m[8..16], &5u64.to_le_bytes(), "compare failed: unchanged");
        assert_eq!(execute(cas(5, 9), &mut m, 8, 8, &[]), 5u64.to_le_bytes());
        assert_eq!(&m[8..16], &9u64.to_le_bytes());
        let faa = Verb::FetchAdd { add: u64::MAX };
        assert_eq!(execute(faa, &mut m, 8, 8, &[]), 9u64.to_le_bytes());
        assert_eq!(&m[8..16], &8u64.to_le_bytes(), "wrapping add");
    }

    #[test]
    fn requests_outside_their_regions_are_refused_with_the_key_named() {
        let mut w = wqe(7, Verb::Read);
        w.remote = 60;
        let e = w.check(64, 64).unwrap_err();
        assert!(e.contains("R_Key") && e.contains("60..68"), "{e}");
        let mut a = wqe(8, Verb::FetchAdd { add: 1 });
        a.remote = 4;
        let e = a.check(64, 64).unwrap_err();
        assert!(e.contains("8-byte aligned"), "{e}");
    }
}
