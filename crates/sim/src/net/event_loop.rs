//! The event loop: a TLP's way hop by hop to the end of its route, TLPs meeting dead
//! links and reads timing out, and `next_notice`, which runs the network until
//! something is for a component.

use super::tlp::{Delivery, Ev, Event, Kind, Notice, Tlp, TlpFailure, FAILED_TIMEOUT, FAILED_UR};
use super::{Hop, Net, CLASS_COMPLETION, NONE};
use crate::pcie;
use crate::pcie::serialize;
use crate::time::Time;

impl Net {
    /// Steps a TLP over the `Delay`/`MemoryDelay` hops at its position; their sum.
    pub(super) fn skip_delays(&mut self, t: u32) -> Time {
        let tl = &mut self.tlps[t as usize];
        let hops = &self.routes[tl.route as usize].hops;
        let mut d = Time::ZERO;
        while tl.pos < tl.stop {
            match hops.get(tl.pos as usize) {
                Some(Hop::Delay(x) | Hop::MemoryDelay(x)) => {
                    d += *x;
                    tl.pos += 1;
                }
                _ => break,
            }
        }
        d
    }

    /// Processes the hop a TLP has reached.
    pub(super) fn hop(&mut self, t: u32) {
        loop {
            let tlp = self.tlps[t as usize];
            let hops = &self.routes[tlp.route as usize].hops;
            let Some(&hop) = hops.get(tlp.pos as usize).filter(|_| tlp.pos < tlp.stop) else {
                self.end_of_route(t);
                return;
            };
            match hop {
                Hop::Delay(_) | Hop::MemoryDelay(_) => {
                    let d = self.skip_delays(t);
                    if d == Time::ZERO {
                        continue;
                    }
                    let at = self.now() + d;
                    self.engine.schedule_at(at, Ev::Hop(t)).expect("future");
                    return;
                }
                Hop::Iommu(i) => {
                    self.tlps[t as usize].pos += 1;
                    let tlb = &mut self.iotlbs[i as usize];
                    // A train's TLPs share a page: after the first lookup, the rest hit.
                    tlb.hits += tlp.count as u64 - 1;
                    let d = if tlb.present.contains(&tlp.iotlb_key) {
                        tlb.hits += 1;
                        tlb.hit
                    } else {
                        tlb.misses += 1;
                        let n = tlb.next;
                        let old = std::mem::replace(&mut tlb.entries[n], tlp.iotlb_key);
                        tlb.present.remove(&old);
                        tlb.present.insert(tlp.iotlb_key);
                        tlb.next = (n + 1) % tlb.entries.len();
                        tlb.miss
                    };
                    if tlp.count > 1 {
                        let hit = tlb.hit;
                        let tl = &mut self.tlps[t as usize];
                        tl.spread = (tl.spread + hit).max(d) - d;
                    }
                    let at = self.now() + d + self.skip_delays(t);
                    self.engine.schedule_at(at, Ev::Hop(t)).expect("future");
                    return;
                }
                Hop::Wire(w) if self.wires[w as usize].down => {
                    self.dead_wire(t);
                    return;
                }
                Hop::Wire(w) => {
                    let class = Self::class_of(tlp.kind);
                    let now = self.now();
                    let wire = &mut self.wires[w as usize];
                    if wire.credit_cap[class] == 0 {
                        self.transmit(t, w);
                        return;
                    }
                    wire.absorb_returns(class, now);
                    if wire.credits[class] >= tlp.count && wire.queues[class].is_empty() {
                        wire.credits[class] -= tlp.count;
                        self.transmit(t, w);
                    } else {
                        wire.queues[class].push_back(t);
                        if !wire.wake[class] {
                            if let Some(&(at, _)) = wire.returns[class].front() {
                                wire.wake[class] = true;
                                self.engine
                                    .schedule_at(at, Ev::Credit(w, class as u8))
                                    .expect("future");
                            }
                        }
                    }
                    return;
                }
                Hop::Pace(p) => {
                    self.tlps[t as usize].pos += 1;
                    let now = self.now();
                    let pc = &mut self.pacers[p as usize];
                    let start = now.max(pc.free_at);
                    let last = serialize(tlp.last_payload(), pc.ps_per_kib);
                    // A train's last TLP passes after the others' bytes, not before it came.
                    let tail = (start + serialize(tlp.payload, pc.ps_per_kib) - last)
                        .max(now + tlp.spread);
                    pc.free_at = tail + last;
                    pc.bytes += tlp.payload as u64;
                    self.tlps[t as usize].spread = tail - start;
                    if start == now {
                        continue;
                    }
                    self.engine.schedule_at(start, Ev::Hop(t)).expect("future");
                    return;
                }
                Hop::RootSplit(s) if tlp.kind == Kind::Read => {
                    self.split(t, s);
                    return;
                }
                Hop::RootSplit(_) => {
                    self.tlps[t as usize].pos += 1;
                }
                Hop::Sink(s, ddio) => {
                    self.arrive_at_sink(t, s, ddio);
                    return;
                }
            }
        }
    }

    /// A TLP whose next wire is down. Decided here, at the hop, because that is where
    /// PCIe decides it: the port whose link is down drops a posted write, answers a
    /// request with Unsupported Request, and a completion routed to it is lost.
    pub(super) fn dead_wire(&mut self, t: u32) {
        let tlp = self.tlps[t as usize];
        self.release_credit(tlp.held, Self::class_of(tlp.kind), tlp.count);
        let now = self.now();
        match tlp.kind {
            Kind::Write => {
                self.failures.writes_dropped += tlp.count as u64;
                self.free_tlps.push(t);
                let d = Delivery::WriteDone {
                    flow: tlp.flow,
                    bytes: tlp.payload,
                };
                self.engine
                    .schedule_at(now, Ev::DeliverFailed(tlp.owner, d, TlpFailure::Dropped))
                    .expect("now");
            }
            Kind::Read => {
                self.failures.reads_unsupported += 1;
                let r = self.reads[tlp.req as usize];
                self.reads[tlp.req as usize].failed = r.failed.max(FAILED_UR);
                let route = &self.routes[tlp.route as usize];
                // Back over the hops already crossed: forward hop p is reverse n - 2 - p.
                let pos = (route.hops.len() - 1 - tlp.pos as usize) as u16;
                let rev = route.reverse;
                self.tlps[t as usize] = Tlp {
                    kind: Kind::Completion,
                    payload: r.remaining,
                    wire_bytes: pcie::wire_bytes(0, true, r.addr64),
                    route: rev,
                    pos,
                    stop: if r.parent != NONE {
                        r.rejoin - 1
                    } else {
                        u16::MAX
                    },
                    held: NONE,
                    sample: false,
                    parent: NONE,
                    iotlb_key: 0,
                    ur: true,
                    ..tlp
                };
                self.engine.schedule_at(now, Ev::Hop(t)).expect("now");
            }
            Kind::Completion => {
                self.failures.completions_lost += 1;
                self.free_tlps.push(t);
                self.lose(tlp.req, tlp.payload);
            }
        }
    }

    /// `bytes` of read `req`'s completions will never arrive: count them down through
    /// the reads it was split from; the requester's read ends by its completion timeout.
    pub(super) fn lose(&mut self, req: u32, bytes: u32) {
        let mut q = req;
        loop {
            let r = &mut self.reads[q as usize];
            r.remaining -= bytes;
            r.failed = FAILED_TIMEOUT;
            if r.parent == NONE {
                break;
            }
            let (parent, splitter, done) = (r.parent, r.splitter, r.remaining == 0);
            if done {
                self.free_reads.push(q);
                self.splitters[splitter as usize].in_use -= 1;
                self.pump_splitter(splitter);
            }
            q = parent;
        }
        self.reads[q as usize].lost += bytes;
        if self.reads[q as usize].remaining == 0 {
            self.time_out(q);
        }
    }

    /// Read `q` has nothing more coming and lost part of it: its requester hears of it
    /// when the completion timeout from its issue runs out.
    pub(super) fn time_out(&mut self, q: u32) {
        let r = self.reads[q as usize];
        self.free_reads.push(q);
        self.failures.reads_timed_out += 1;
        let at = self.now().max(r.issued + self.completion_timeout);
        let d = Delivery::ReadData {
            flow: r.flow,
            tag: r.tag,
            bytes: r.lost,
            last: true,
        };
        self.engine
            .schedule_at(
                at,
                Ev::DeliverFailed(r.owner, d, TlpFailure::CompletionTimeout),
            )
            .expect("future");
    }

    /// A completion at the end of its reverse route: it reached the requester, or (for a
    /// split sub-read) the root that split it.
    pub(super) fn end_of_route(&mut self, t: u32) {
        let tlp = self.tlps[t as usize];
        debug_assert_eq!(tlp.kind, Kind::Completion);
        self.release_credit(tlp.held, CLASS_COMPLETION, 1);
        let r = self.reads[tlp.req as usize];
        let remaining = r.remaining - tlp.payload;
        self.reads[tlp.req as usize].remaining = remaining;
        if r.parent != NONE {
            // Sub-read data at the root: forward it on the parent's reverse route.
            let parent = r.parent;
            let rev = self.routes[r.route as usize].reverse;
            // A parent that is itself a sub-read stops at the root that split it.
            let p = self.reads[parent as usize];
            let tl = &mut self.tlps[t as usize];
            tl.req = parent;
            tl.route = rev;
            tl.pos = r.rejoin;
            tl.stop = if p.parent != NONE {
                p.rejoin - 1
            } else {
                u16::MAX
            };
            tl.held = NONE;
            if remaining == 0 {
                self.free_reads.push(tlp.req);
                self.splitters[r.splitter as usize].in_use -= 1;
                self.pump_splitter(r.splitter);
            }
            self.hop(t);
            return;
        }
        self.free_tlps.push(t);
        let failed = if tlp.ur {
            r.failed.max(FAILED_UR)
        } else {
            r.failed
        };
        self.reads[tlp.req as usize].failed = failed;
        if remaining == 0 && r.lost > 0 {
            // The last data to come; what was lost is given up at the timeout.
            let d = Delivery::ReadData {
                flow: r.flow,
                tag: r.tag,
                bytes: tlp.payload,
                last: false,
            };
            self.engine
                .schedule_at(self.now(), Ev::Deliver(r.owner, d))
                .expect("now");
            self.time_out(tlp.req);
            return;
        }
        if remaining == 0 {
            self.free_reads.push(tlp.req);
        }
        let d = Delivery::ReadData {
            flow: r.flow,
            tag: r.tag,
            bytes: tlp.payload,
            last: remaining == 0,
        };
        let failure = match failed {
            _ if tlp.ur => Some(TlpFailure::Unsupported),
            FAILED_UR if remaining == 0 => Some(TlpFailure::Unsupported),
            _ => None,
        };
        let ev = match failure {
            Some(f) => Ev::DeliverFailed(r.owner, d, f),
            None => Ev::Deliver(r.owner, d),
        };
        self.engine.schedule_at(self.now(), ev).expect("now");
    }

    /// Runs the network until something is for a component, a horizon is reached, or the
    /// next event lies after `until` (then `None`, and nothing past `until` is processed).
    pub fn next_notice(&mut self, until: Time) -> Option<Notice> {
        while let Some(t) = self.engine.peek_time() {
            if t > until {
                return None;
            }
            let (_, ev) = self.engine.pop().expect("peeked");
            match ev {
                Ev::Hop(tlp) => self.hop(tlp),
                Ev::Credit(w, class) => {
                    self.wires[w as usize].wake[class as usize] = false;
                    self.pump_credits(w, class as usize);
                }
                Ev::Deliver(c, d) => {
                    self.failure = None;
                    return Some(Notice::To(c, Event::Delivery(d)));
                }
                Ev::DeliverFailed(c, d, f) => {
                    self.failure = Some(f);
                    return Some(Notice::To(c, Event::Delivery(d)));
                }
                Ev::Timer(c, key) => {
                    self.failure = None;
                    return Some(Notice::To(c, Event::Timer(key)));
                }
                Ev::Wake(c) => {
                    self.failure = None;
                    return Some(Notice::To(c, Event::Wake));
                }
                Ev::Splitter(s) => {
                    self.splitters[s as usize].wake_pending = false;
                    self.pump_splitter(s);
                }
                Ev::Horizon => return Some(Notice::Horizon(t)),
            }
        }
        None
    }

    pub fn events_handled(&self) -> u64 {
        self.engine.stats().handled
    }
}
