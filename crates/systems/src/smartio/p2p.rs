//! Peer-to-peer between devices a host borrowed: the address device A puts on the bus to
//! reach a BAR of device B, in the three cases of the thesis — B local to the borrower
//! (through A's lender's NTB back to the borrower, in A's DMA window), B in A's own lender
//! (the lender-local bus address: switch-local when the lender IOMMU is off), B in another
//! lender (through A's lender's NTB straight toward B's lender). Where each borrowed device
//! lives is read from the borrower agent's table, and the way between two lenders'
//! adapters is the fabric's `ntb_way`, searched once and cached there.

use fabric::{Fabric, NtbHop, PcieNodeId, Requester};
use host::{ntb_pair, DmaAddr, DmaDirection, HostError, Hosts, PhysAddr};

use super::agent::ControlKind;
use super::lending::{lender_reach, Borrowed, Cluster, DeviceMapping, MapHold};
use super::LendError;

/// The device whose BAR device A is to reach.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PeerTarget {
    /// A function of the borrower's own (a local GPU).
    Local(PcieNodeId),
    /// A device the same borrower borrowed.
    Borrowed(Borrowed),
}

/// Which of the three cases a peer-to-peer mapping is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum P2pCase {
    BorrowerLocal,
    SameLender,
    OtherLender,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct P2pMapping {
    pub mapping: DeviceMapping,
    pub case: P2pCase,
    /// Cables and cluster switches the access crosses between adapters (none for a peer
    /// in the same lender).
    pub way: Vec<NtbHop>,
}

impl Cluster {
    /// The address borrowed device `a` uses for `len` bytes at `offset` of BAR `bar` of
    /// `b`. Messages: none for a peer in the DMA window or, with the lender IOMMU off, in
    /// the same lender; one `WindowSetup` when the lender must program its IOMMU or NTB.
    #[allow(clippy::too_many_arguments)]
    pub fn map_device_for_device(
        &mut self,
        f: &mut Fabric,
        a: Borrowed,
        b: PeerTarget,
        bar: u8,
        offset: u64,
        len: u64,
    ) -> Result<P2pMapping, LendError> {
        let x = self.live(f, a)?;
        let (a_lender, a_fn, a_ntb, a_borrower_ntb) =
            (x.lender, x.function, x.lender_ntb, x.borrower_ntb);
        let (case, target_host, target_fn) = match b {
            PeerTarget::Local(n) => {
                if f.topo.node(n).host != a.host {
                    return Err(LendError::Invalid(format!(
                        "`{}` is not in the borrower: borrow it and name the borrow",
                        f.topo.node_label(n)
                    )));
                }
                (P2pCase::BorrowerLocal, a.host, n)
            }
            PeerTarget::Borrowed(hb) => {
                let y = self.live(f, hb)?;
                if hb.host != a.host {
                    return Err(LendError::Invalid(format!(
                        "{} and {} have different borrowers",
                        self.label(a.fdid),
                        self.label(hb.fdid)
                    )));
                }
                // Where B lives, from the borrower's table.
                let lender = self.agents[a.host.index()]
                    .peer(hb.id)
                    .map_or(y.lender, |p| p.lender);
                let case = if lender == a_lender {
                    P2pCase::SameLender
                } else {
                    P2pCase::OtherLender
                };
                (case, lender, y.function)
            }
        };
        let bar_info = f.topo.node(target_fn).bar(bar).copied().ok_or_else(|| {
            LendError::Invalid(format!(
                "`{}` has no BAR{bar}",
                f.topo.node_label(target_fn)
            ))
        })?;
        if len == 0 || offset.checked_add(len).is_none_or(|e| e > bar_info.size) {
            return Err(LendError::Invalid(format!(
                "{len:#x} bytes at {offset:#x} do not fit BAR{bar} of `{}` ({:#x} bytes)",
                f.topo.node_label(target_fn),
                bar_info.size
            )));
        }
        let at = PhysAddr {
            host: target_host,
            addr: bar_info.addr + offset,
        };
        let mut way = Vec::new();
        let mapping = match case {
            P2pCase::BorrowerLocal => {
                if let Some(w) = f.topo.ntb_way(a_ntb, a_borrower_ntb) {
                    way = w;
                }
                self.map_for_device(f, a, at, len, DmaDirection::Bidirectional)?
            }
            P2pCase::SameLender if !f.topo.host(a_lender).iommu => {
                let (addr, _) =
                    Hosts::with(f, |hs, f| lender_reach(hs, f, a_lender, a_fn, at.addr, len))
                        .map_err(|e| self.host_err(f, a.fdid, a.host, e))?;
                self.record(a, addr, len, MapHold::Direct)
            }
            P2pCase::SameLender | P2pCase::OtherLender => {
                if case == P2pCase::OtherLender {
                    let (s, d) =
                        ntb_pair(f, a_lender, target_host).ok_or_else(|| LendError::NoPath {
                            from: f.topo.host(a_lender).name.clone(),
                            to: f.topo.host(target_host).name.clone(),
                        })?;
                    way = self.agents[a.host.index()]
                        .way_between(f, s, d)
                        .map(|w| w.to_vec())
                        .unwrap_or_default();
                }
                self.post(ControlKind::WindowSetup);
                let m = Hosts::with(f, |hs, f| -> Result<_, HostError> {
                    hs.dma_map_single(
                        f,
                        Requester::Function(a_fn),
                        at,
                        len,
                        DmaDirection::Bidirectional,
                    )
                })
                .map_err(|e| self.host_err(f, a.fdid, a.host, e))?;
                self.record(a, m.addr.0, len, MapHold::Host(m))
            }
        };
        Ok(P2pMapping { mapping, case, way })
    }

    /// Keeps a mapping with its borrow (torn down with it).
    pub(crate) fn record(
        &mut self,
        a: Borrowed,
        addr: u64,
        len: u64,
        hold: MapHold,
    ) -> DeviceMapping {
        let id = self.next_map;
        self.next_map += 1;
        self.borrows
            .get_mut(&a.id)
            .expect("live")
            .maps
            .insert(id, hold);
        DeviceMapping {
            id,
            borrow: a.id,
            addr: DmaAddr(addr),
            len,
        }
    }
}
