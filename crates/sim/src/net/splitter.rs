//! A root complex's peer-to-peer read splitter: forwarded reads re-issued as small
//! reads, tag-limited and paced.

use super::tlp::{Ev, ReadReq, OK};
use super::{Net, CLASS_NONPOSTED, NONE};
use crate::time::Time;
use std::collections::VecDeque;

/// A root complex's peer-to-peer read splitter: it re-issues each forwarded read as
/// `split`-byte reads, at most `tags` outstanding and at most one per `issue_gap` (the
/// root's peer-to-peer path handles one re-issue at a time).
#[derive(Clone, Debug)]
pub struct Splitter {
    pub name: String,
    pub split: u32,
    pub tags: u32,
    pub issue_gap: Time,
    pub(super) in_use: u32,
    pub(super) next_issue: Time,
    pub(super) wake_pending: bool,
    pub(super) waiting: VecDeque<u32>,
}

impl Net {
    pub fn add_splitter(&mut self, name: &str, split: u32, tags: u32, issue_gap: Time) -> u32 {
        self.splitters.push(Splitter {
            name: name.to_string(),
            split: split.max(1),
            tags: tags.max(1),
            issue_gap,
            in_use: 0,
            next_issue: Time::ZERO,
            wake_pending: false,
            waiting: VecDeque::new(),
        });
        self.splitters.len() as u32 - 1
    }

    /// (re-issue size, tags, minimum gap between re-issues) of a splitter.
    pub fn splitter_shape(&self, s: u32) -> (u32, u32, Time) {
        let sp = &self.splitters[s as usize];
        (sp.split, sp.tags, sp.issue_gap)
    }

    /// A read reaching a forwarding root: park it and issue sub-reads of `split` bytes,
    /// each needing one of the root's tags.
    pub(super) fn split(&mut self, t: u32, s: u32) {
        let tlp = self.tlps[t as usize];
        let class = CLASS_NONPOSTED;
        self.release_credit(tlp.held, class, 1);
        let split = self.splitters[s as usize].split;
        let mut left = tlp.payload;
        let mut first = true;
        while left > 0 {
            let n = left.min(split);
            left -= n;
            let sub = if first {
                first = false;
                let tl = &mut self.tlps[t as usize];
                tl.payload = n;
                tl.parent = tl.req;
                tl.held = NONE;
                tl.pos += 1;
                t
            } else {
                let mut c = tlp;
                c.payload = n;
                c.parent = tlp.req;
                c.held = NONE;
                c.pos += 1;
                self.alloc_tlp(c)
            };
            self.splitters[s as usize].waiting.push_back(sub);
        }
        self.pump_splitter(s);
    }

    pub(super) fn pump_splitter(&mut self, s: u32) {
        loop {
            let now = self.now();
            let sp = &mut self.splitters[s as usize];
            if sp.in_use >= sp.tags || sp.waiting.is_empty() || sp.wake_pending {
                return;
            }
            if now < sp.next_issue {
                sp.wake_pending = true;
                let at = sp.next_issue;
                self.engine
                    .schedule_at(at, Ev::Splitter(s))
                    .expect("future");
                return;
            }
            let sub = sp.waiting.pop_front().expect("checked non-empty");
            sp.in_use += 1;
            sp.next_issue = now + sp.issue_gap;
            // Each sub-read is a request of its own below the root.
            let parent = self.tlps[sub as usize].parent;
            let p = self.reads[parent as usize];
            let payload = self.tlps[sub as usize].payload;
            // Reverse-route index of this root (the sub-read continues just after it):
            // its completions stop here and rejoin the parent's way back. Kept per
            // sub-read, so a sub-read split again by a second root (a peer-to-peer read
            // crossing two roots) still knows where it rejoins the first.
            let n_hops = self.routes[p.route as usize].hops.len();
            let rejoin = (n_hops - self.tlps[sub as usize].pos as usize) as u16;
            let req = self.alloc_read(ReadReq {
                owner: p.owner,
                flow: p.flow,
                tag: p.tag,
                remaining: payload,
                route: p.route,
                rejoin,
                splitter: s,
                parent,
                addr64: p.addr64,
                issued: p.issued,
                failed: OK,
                lost: 0,
            });
            self.tlps[sub as usize].req = req;
            self.hop(sub);
        }
    }
}
