//! The SmartIO agents: one per host, lender and borrower at once. They exchange control
//! messages — borrow request and grant, return, configuration forwards, MSI set-up,
//! window set-up, reclaim — and every message is counted by kind in `ControlStats`, so
//! a test can assert that the data path sends none (zero messages per I/O).
//!
//! A borrower's agent keeps a table of where each device it borrowed lives (lender,
//! the adapter pair, the way between them, searched once with the fabric's `ntb_way`),
//! which peer-to-peer mapping reads without asking anyone.

use fabric::{Fabric, HostId, NtbHop, NtbId};

use super::pool::{BorrowId, Fdid};

/// Kinds of control messages between agents.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ControlKind {
    BorrowRequest,
    BorrowGrant,
    Return,
    ReturnAck,
    /// A shadow device's configuration read or write, forwarded to the lender.
    ConfigForward,
    ConfigReply,
    /// An MSI/MSI-X vector's address and data redirected through the lender's NTB.
    MsiSetup,
    /// The lender programs a window (or its IOMMU) for one mapping: the fallback without
    /// a borrower IOMMU, peer-to-peer through another lender, lender-side segments.
    WindowSetup,
    WindowTeardown,
    /// An exclusive borrow turned shared (`SCIReleaseExclusiveBorrow`).
    ReleaseExclusive,
    /// A lender takes back what a vanished borrower held.
    Reclaim,
    /// A borrower is told its lender vanished.
    DeviceGone,
    /// A client of the distributed NVMe driver asks the manager for an admin command
    /// (queue creation, Identify): a request in the manager's mailbox segment and a data
    /// interrupt (`SCITriggerDataInterrupt`).
    AdminRpc,
    /// The manager's answer: the completion in the client's mailbox and an interrupt.
    AdminRpcReply,
    /// A lent device's legacy INTx assertion, relayed by the lender's agent to the
    /// borrower (MDEV: a VM may use INTx; bare-metal lending masks it).
    IntxRelay,
}

const KINDS: usize = 15;

impl ControlKind {
    pub const ALL: [ControlKind; KINDS] = [
        ControlKind::BorrowRequest,
        ControlKind::BorrowGrant,
        ControlKind::Return,
        ControlKind::ReturnAck,
        ControlKind::ConfigForward,
        ControlKind::ConfigReply,
        ControlKind::MsiSetup,
        ControlKind::WindowSetup,
        ControlKind::WindowTeardown,
        ControlKind::ReleaseExclusive,
        ControlKind::Reclaim,
        ControlKind::DeviceGone,
        ControlKind::AdminRpc,
        ControlKind::AdminRpcReply,
        ControlKind::IntxRelay,
    ];

    fn index(self) -> usize {
        ControlKind::ALL
            .iter()
            .position(|&k| k == self)
            .expect("every kind is listed")
    }
}

/// Control messages sent, by kind.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ControlStats {
    counts: [u64; KINDS],
}

impl ControlStats {
    pub fn get(&self, kind: ControlKind) -> u64 {
        self.counts[kind.index()]
    }

    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Kinds with a non-zero count, in `ControlKind::ALL` order.
    pub fn by_kind(&self) -> Vec<(ControlKind, u64)> {
        ControlKind::ALL
            .iter()
            .map(|&k| (k, self.get(k)))
            .filter(|&(_, n)| n > 0)
            .collect()
    }

    pub(crate) fn count(&mut self, kind: ControlKind) {
        self.counts[kind.index()] += 1;
    }
}

/// Where a borrowed device lives, as its borrower's agent caches it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerEntry {
    pub fdid: Fdid,
    pub borrow: BorrowId,
    pub lender: HostId,
    /// The lender's adapter that the device's DMA leaves through toward the borrower,
    /// and the borrower's adapter it arrives at.
    pub lender_ntb: NtbId,
    pub borrower_ntb: NtbId,
    /// Cables and cluster switches between them (the fabric's `ntb_way`).
    pub way: Vec<NtbHop>,
}

/// One host's agent.
#[derive(Clone, Debug)]
pub struct Agent {
    pub host: HostId,
    pub vanished: bool,
    /// The borrower side: where each borrowed device lives.
    peers: Vec<PeerEntry>,
    /// Ways between two lenders' adapters, searched once per pair this borrower used
    /// for peer-to-peer (what it borrows, never the cluster's size).
    lender_ways: Vec<((NtbId, NtbId), Vec<NtbHop>)>,
}

impl Agent {
    pub fn new(host: HostId) -> Agent {
        Agent {
            host,
            vanished: false,
            peers: Vec::new(),
            lender_ways: Vec::new(),
        }
    }

    pub fn peers(&self) -> &[PeerEntry] {
        &self.peers
    }

    pub fn peer(&self, borrow: BorrowId) -> Option<&PeerEntry> {
        self.peers.iter().find(|p| p.borrow == borrow)
    }

    pub(crate) fn add_peer(&mut self, e: PeerEntry) {
        self.peers.push(e);
    }

    pub(crate) fn drop_peer(&mut self, borrow: BorrowId) {
        self.peers.retain(|p| p.borrow != borrow);
    }

    /// The way from lender adapter `a` to lender adapter `b`, cached after the first search.
    pub fn way_between(&mut self, f: &Fabric, a: NtbId, b: NtbId) -> Option<&[NtbHop]> {
        let i = match self.lender_ways.iter().position(|(k, _)| *k == (a, b)) {
            Some(i) => i,
            None => {
                let w = f.topo.ntb_way(a, b)?;
                self.lender_ways.push(((a, b), w));
                self.lender_ways.len() - 1
            }
        };
        Some(&self.lender_ways[i].1)
    }
}
