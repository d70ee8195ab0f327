//! One operation's journey through the QPs and RNICs: the WQE posted by BlueFlame, the
//! transmit unit's turns, the READ/WRITE/atomic request and response packets, the
//! responder's DMA, the CQE and the thread that polls it.

use devices::nic::tlp_wire_bytes;
use devices::rnic::qp::{execute, ATOMIC_BYTES};
use devices::rnic::{wire, Place, SendArbiter, Verb, Wqe};
use sim::{dist, Time};
use wire::Packet;

use super::super::{RdmaHost, Region, CQE_BYTES, POLL_CYCLES, POST_CYCLES};
use super::{
    host_of, schedule, wqe_bytes, BenchSpec, Completion, Ev, Landed, Mode, Rdma, Side, CQ_BUF,
    CQ_DEPTH, SQ_BUF, SQ_RING,
};

/// The requester's host and region, then the responder's, of a connection posted from
/// `requester`.
fn ends<'b>(
    client: &'b mut RdmaHost,
    server: &'b mut RdmaHost,
    local: &'b mut Region,
    remote: &'b mut Region,
    requester: Side,
) -> (
    &'b mut RdmaHost,
    &'b mut Region,
    &'b mut RdmaHost,
    &'b mut Region,
) {
    match requester {
        Side::Client => (client, local, server, remote),
        Side::Server => (server, remote, client, local),
    }
}

fn header_only(p: wire::Packets, into: &mut Vec<Packet>) {
    into.push(Packet {
        payload: 0,
        wire_bytes: p.wire_bytes,
    });
}

/// `w`'s request packets, into `into` (cleared).
fn packets_out(w: &Wqe, mtu: u32, into: &mut Vec<Packet>) {
    into.clear();
    match w.verb {
        Verb::Write => into.extend(wire::write_request_each(w.len, mtu)),
        Verb::Read => header_only(wire::read_request(), into),
        _ => header_only(wire::atomic_request(), into),
    }
}

/// `w`'s response packets, into `into` (cleared).
fn packets_back(w: &Wqe, mtu: u32, into: &mut Vec<Packet>) {
    into.clear();
    match w.verb {
        Verb::Write => header_only(wire::ack(), into),
        Verb::Read => into.extend(wire::read_response_each(w.len, mtu)),
        _ => header_only(wire::atomic_response(), into),
    }
}

impl<'a> Rdma<'a> {
    /// The thread builds `w` in its send queue in memory and stores it into the RNIC's
    /// BlueFlame page (libmlx4 writes a BlueFlame WQE to both).
    pub(super) fn post_wqe(&mut self, c: u32, at: Time, w: Wqe) -> Result<(), String> {
        let conn = &mut self.conns[c as usize];
        let core = &mut self.cores[conn.core];
        let start = core.start(at);
        let end = start + core.cycles(POST_CYCLES);
        core.finish(start, end);
        conn.posted.push_back((w.wr_id, start));
        let wqe_bytes = wqe_bytes(&w);
        let sq_line = self.ns + SQ_BUF + ((c as u64) << 16) + conn.sq_slot % SQ_RING;
        conn.sq_slot += 1;
        let node = core.socket;
        let h = host_of(self.client, self.server, conn.requester);
        h.mem.cpu_write(end, node, sq_line, wqe_bytes);
        let pf = &mut h.rnic.pf;
        let on_link = pf.down.reserve(
            end + h.cpu_mmio_write,
            tlp_wire_bytes(wqe_bytes, pf.mps, false),
        );
        let at_rnic = on_link + pf.link_latency;
        self.at(at_rnic, c, Ev::Doorbell(w))
    }

    pub(super) fn handle(&mut self, t: Time, c: u32, ev: Ev) -> Result<(), String> {
        match ev {
            Ev::Post => self.next_post(c, t),
            Ev::Doorbell(w) => {
                self.doorbell(c, t, w);
                self.try_issue(c, t)
            }
            Ev::Request(w, arrivals) => self.respond(c, w, &arrivals),
            Ev::Response(w, data, arrivals) => self.requester_receive(c, w, data, &arrivals),
            Ev::Cqe(w, data) => self.seen(c, t, w, data),
            Ev::Landed(w, at_host) => {
                self.landed.push(Landed {
                    conn: c,
                    at_host,
                    offset: w.remote,
                    len: w.len,
                    at: t,
                });
                Ok(())
            }
            Ev::TxTurn(side) => self.tx_turn(side, t),
            Ev::Done(w) => {
                self.conns[c as usize].qp.complete(&w);
                self.try_issue(c, t)
            }
        }
    }

    /// `w`'s BlueFlame store reaches the RNIC at `t`; the RNIC takes it or fetches it
    /// from the send queue (`Rnic::doorbell`).
    fn doorbell(&mut self, c: u32, t: Time, w: Wqe) {
        let conn = &mut self.conns[c as usize];
        let ahead = conn.qp.sq.len();
        let slot = conn.sq_slot - 1 - ahead as u64;
        let sq_line = Place {
            node: self.cores[conn.core].socket,
            buf: self.ns + SQ_BUF + ((c as u64) << 16) + slot % SQ_RING,
        };
        let h = host_of(self.client, self.server, conn.requester);
        h.rnic
            .doorbell(t, &mut h.mem, c as usize, ahead, sq_line, wqe_bytes(&w));
        conn.qp.sq.push_back(w);
    }

    /// The send arbiter of `side`'s RNIC.
    fn arbiter(&mut self, side: Side) -> &mut SendArbiter {
        &mut self.host_mut(side).rnic.send
    }

    /// QP `c` may have work for its RNIC's transmit unit at `t`: issued at once when the
    /// unit is free and no other QP waits for it, else queued for a turn.
    fn try_issue(&mut self, c: u32, t: Time) -> Result<(), String> {
        if self.conns[c as usize].qp.next_issuable().is_none() {
            return Ok(());
        }
        let side = self.conns[c as usize].requester;
        if self.arbiter(side).takes_at_once(t) {
            self.issue(c, t)?;
        }
        if self.conns[c as usize].qp.next_issuable().is_none() {
            return Ok(());
        }
        match self.arbiter(side).wait(c as usize, t) {
            Some(at) => self.turn_at(side, at),
            None => Ok(()),
        }
    }

    /// A `TxTurn` for `side` at `at` (the arbiter says when one is due).
    fn turn_at(&mut self, side: Side, at: Time) -> Result<(), String> {
        self.at(at, 0, Ev::TxTurn(side))
    }

    /// The transmit unit of `side` may be free at `t`: the next waiting QP with work
    /// has its turn.
    fn tx_turn(&mut self, side: Side, t: Time) -> Result<(), String> {
        let conns = &self.conns;
        let h = host_of(self.client, self.server, side);
        let Some(q) = h.rnic.send.turn(|q| conns[q].qp.next_issuable().is_some()) else {
            return Ok(());
        };
        self.issue(q as u32, t)?;
        let more = self.conns[q].qp.next_issuable().is_some();
        match self.arbiter(side).end_turn(q, more, t) {
            Some(at) => self.turn_at(side, at),
            None => Ok(()),
        }
    }

    /// The requester issues its QP's next WQE: transmit unit, QP context, gather.
    fn issue(&mut self, c: u32, t: Time) -> Result<(), String> {
        let side = self.conns[c as usize].requester;
        if let Some(w) = self.conns[c as usize].qp.issue() {
            let conn = &self.conns[c as usize];
            let qpn = conn.qp.qpn;
            self.peak_reads = self.peak_reads.max(conn.qp.reads_in_flight());
            let (h, own, _, _) = ends(
                self.client,
                self.server,
                &mut self.local,
                &mut self.remote,
                side,
            );
            let rn = &mut h.rnic;
            let fetched = rn.send.take(c as usize);
            let wqe = rn.params.wqe;
            // A fetched WQE streams into the unit over the link as read completions
            // before it is parsed, as a gathered payload does; a BlueFlame one is there.
            let (from, streaming) = match fetched {
                Some(f) => (t.max(f), rn.gather_stream(wqe_bytes(&w))),
                None => (t, Time::ZERO),
            };
            let s = rn.tx.serve(from, wqe + streaming);
            let ready = rn.qp_context(s + streaming, &mut h.mem, qpn) + wqe;
            rn.tx.hold_until(ready);
            packets_out(&w, self.mtu, &mut self.out_pkts);
            let out = &self.out_pkts;
            let gathered;
            let ready_each: &[Time] = if w.verb == Verb::Write && !w.inline {
                let tr = rn.translate(ready, &mut h.mem, own.key, w.local, w.len);
                let buf = own.buf_at(w.local);
                gathered = rn.dma_read_each(tr, &mut h.mem, own.node, buf, out);
                let streamed = tr + rn.gather_stream(w.len);
                rn.tx.hold_until(streamed);
                &gathered
            } else {
                self.scratch.clear();
                self.scratch.resize(out.len(), ready);
                &self.scratch
            };
            let done = rn.tx.free_at();
            // Cut-through: each packet leaves once its own payload is in.
            let arrivals = rn.transmit_each(ready_each, out);
            rn.send.issued(c as usize, done);
            self.at(arrivals[0], c, Ev::Request(w, arrivals))?;
        }
        Ok(())
    }

    /// A message's packets arriving at `rn` at `arrivals`: the first parsed, QP `qpn`'s
    /// context looked up (the receive unit waits for a missing one), then the rest;
    /// when each is parsed and when the context is there.
    fn receive_message(h: &mut RdmaHost, qpn: u32, arrivals: &[Time]) -> (Vec<Time>, Time) {
        let rn = &mut h.rnic;
        let mut parsed = rn.receive_each(&arrivals[..1]);
        let ctx = rn.qp_context(parsed[0], &mut h.mem, qpn);
        rn.rx.hold_until(ctx);
        if arrivals.len() > 1 {
            parsed.extend(rn.receive_each(&arrivals[1..]));
        }
        (parsed, ctx)
    }

    /// The responder: receive, context, translation, the DMA, the response — per
    /// packet, so a multi-packet message is pipelined through the stages.
    fn respond(&mut self, c: u32, w: Wqe, arrivals: &[Time]) -> Result<(), String> {
        let conn = &self.conns[c as usize];
        let (qpn, side) = (conn.responder_qpn, conn.requester);
        let (_, own, h, far) = ends(
            self.client,
            self.server,
            &mut self.local,
            &mut self.remote,
            side,
        );
        let (parsed, ctx) = Self::receive_message(h, qpn, arrivals);
        let rn = &mut h.rnic;
        let tr = rn.translate(ctx, &mut h.mem, far.key, w.remote, w.len);
        let (node, buf) = (far.node, far.buf_at(w.remote));
        // Lines the server's agents hold: the DMA waits for their snoops.
        let dma = match (side, self.agents.as_deref_mut()) {
            (Side::Client, Some(a)) => a.device_access(tr, &mut h.mem, far, w, rn.socket()),
            _ => tr,
        };
        packets_back(&w, self.mtu, &mut self.back_pkts);
        let back = &self.back_pkts;
        let r = w.remote as usize..(w.remote + w.len) as usize;
        let l = w.local as usize..(w.local + w.len) as usize;
        // The bytes move here; READ data lands in the requester's region, which its
        // thread reads only after the completion, so the early copy is not observable.
        let data = match w.verb {
            Verb::Write => {
                far.bytes[r].copy_from_slice(&own.bytes[l]);
                Vec::new()
            }
            Verb::Read => {
                own.bytes[l].copy_from_slice(&far.bytes[r.clone()]);
                if self.keep_data && self.work.is_none() {
                    far.bytes[r].to_vec()
                } else {
                    Vec::new()
                }
            }
            _ => execute(w.verb, &mut far.bytes, w.remote, w.len, &[]),
        };
        let read_each;
        let ready_each: &[Time] = match w.verb {
            Verb::Write => {
                self.scratch.clear();
                self.scratch.extend(parsed.iter().map(|&p| p.max(dma)));
                // Posted: the ACK does not wait for the writes to become visible, only
                // for the last packet.
                packets_out(&w, self.mtu, &mut self.out_pkts);
                let visible =
                    rn.dma_write_each(&mut h.mem, node, buf, &self.scratch, &self.out_pkts, None);
                if self.watch_writes {
                    let ev = Ev::Landed(w, side.other());
                    schedule(&mut self.net, &mut self.timers, visible, c, ev)?;
                }
                let last = self.scratch.len() - 1;
                &self.scratch[last..]
            }
            Verb::Read => {
                read_each = rn.dma_read_each(dma, &mut h.mem, node, buf, back);
                &read_each
            }
            _ => {
                let r = rn.pf.dma_read(dma, &mut h.mem, node, buf, ATOMIC_BYTES);
                rn.pf.dma_write(r, &mut h.mem, node, buf, ATOMIC_BYTES);
                self.scratch.clear();
                self.scratch.push(r);
                &self.scratch
            }
        };
        let built = rn.build_each(ready_each);
        let arrivals = rn.transmit_each(&built, back);
        self.at(arrivals[0], c, Ev::Response(w, data, arrivals))
    }

    /// The requester takes the response: READ data and the CQE written by DMA.
    fn requester_receive(
        &mut self,
        c: u32,
        w: Wqe,
        data: Vec<u8>,
        arrivals: &[Time],
    ) -> Result<(), String> {
        let conn = &mut self.conns[c as usize];
        let (qpn, side) = (conn.qp.qpn, conn.requester);
        let cqe = self.ns + CQ_BUF + ((c as u64) << 16) + conn.cq_slot % CQ_DEPTH;
        conn.cq_slot += 1;
        let (h, own, _, _) = ends(
            self.client,
            self.server,
            &mut self.local,
            &mut self.remote,
            side,
        );
        let (parsed, ctx) = Self::receive_message(h, qpn, arrivals);
        let done = parsed[parsed.len() - 1].max(ctx);
        let rn = &mut h.rnic;
        let node = own.node;
        let visible = if w.verb.is_read_like() {
            if w.verb.is_atomic() {
                let l = w.local as usize..w.local as usize + data.len();
                own.bytes[l].copy_from_slice(&data);
            }
            let tr = rn.translate(ctx, &mut h.mem, own.key, w.local, w.len);
            let buf = own.buf_at(w.local);
            self.scratch.clear();
            self.scratch.extend(parsed.iter().map(|&p| p.max(tr)));
            // Each response packet's data is written as it is parsed; an atomic's
            // original value rides in its one packet's AtomicAckETH.
            packets_back(&w, self.mtu, &mut self.back_pkts);
            if w.verb.is_atomic() {
                self.back_pkts[0].payload = ATOMIC_BYTES;
            }
            rn.dma_write_each(
                &mut h.mem,
                node,
                buf,
                &self.scratch,
                &self.back_pkts,
                Some((cqe, CQE_BYTES)),
            )
        } else {
            rn.pf.dma_write(done, &mut h.mem, node, cqe, CQE_BYTES)
        };
        // The READ slot is free only once the last response packet is parsed (`done`),
        // not when the first arrives: the QP may issue again then, taking its place among
        // the QPs waiting for the transmit unit at that time.
        self.at(done, c, Ev::Done(w))?;
        let data = if self.work.is_some() || !self.keep_data {
            Vec::new()
        } else {
            data
        };
        self.at(visible, c, Ev::Cqe(w, data))
    }

    /// The thread spinning on its CQ reads the CQE and takes the completion.
    fn seen(&mut self, c: u32, t: Time, w: Wqe, data: Vec<u8>) -> Result<(), String> {
        let conn = &mut self.conns[c as usize];
        let cqe = self.ns + CQ_BUF + ((c as u64) << 16) + (conn.seen % CQ_DEPTH);
        let core = &mut self.cores[conn.core];
        // The thread spins on ibv_poll_cq unsynchronised with the RNIC, so it notices the
        // CQE a uniformly random part of one poll call (POLL_CYCLES) after it lands. (Too
        // little variance to make 2–8 closed-loop connections queue at the RNIC.)
        let phase = if self.poll_phase {
            let period = core.cycles(POLL_CYCLES).as_ps();
            Time::from_ps(
                dist::uniform_u32(&mut self.rng, period.min(u32::MAX as u64) as u32) as u64,
            )
        } else {
            Time::ZERO
        };
        let start = core.start(t + phase);
        let (h, own, _, _) = ends(
            self.client,
            self.server,
            &mut self.local,
            &mut self.remote,
            conn.requester,
        );
        let read = h
            .mem
            .cpu_read(start, core.socket, own.node, cqe, CQE_BYTES, true);
        let end = start + read + core.cycles(POLL_CYCLES);
        core.finish(start, end);
        let (wr_id, posted) = conn
            .posted
            .pop_front()
            .ok_or_else(|| format!("connection {c}: a completion nothing was posted for"))?;
        debug_assert_eq!(wr_id, w.wr_id, "RC completes in order");
        conn.seen += 1;
        self.completed += 1;
        let Some(spec) = self.work else {
            self.completions.push(Completion {
                conn: c,
                wr_id,
                data,
                posted,
                seen: end,
            });
            return Ok(());
        };
        match spec.mode {
            Mode::Closed { warmup, ops } => {
                if conn.seen > warmup {
                    conn.lat_sum += (end - posted).as_ns_f64();
                    conn.lat_n += 1;
                }
                if conn.seen < warmup + ops {
                    return self.post_next(c, end);
                }
            }
            Mode::Open {
                warmup,
                window,
                windows,
                ..
            } => {
                if end >= warmup {
                    let i = ((end - warmup).as_ps() / window.as_ps()) as usize;
                    if let Some(s) = self.samples.as_mut() {
                        if i < windows as usize {
                            s.counts[c as usize][i] += 1;
                        }
                    }
                }
                let conn = &mut self.conns[c as usize];
                if conn.blocked {
                    conn.blocked = false;
                    self.at(end, c, Ev::Post)?;
                }
            }
        }
        Ok(())
    }

    /// The benchmark's next operation on `c`: its own slot of each region.
    pub(super) fn post_next(&mut self, c: u32, at: Time) -> Result<(), String> {
        let spec = self.work.expect("a benchmark");
        let conn = &mut self.conns[c as usize];
        let off = c as u64 * spec.bytes;
        let w = Wqe {
            wr_id: conn.next_wr,
            verb: spec.verb,
            remote: off,
            local: off,
            len: spec.bytes,
            inline: spec.verb == Verb::Write && spec.bytes <= self.max_inline,
        };
        conn.next_wr += 1;
        self.post_wqe(c, at, w)
    }

    /// Open loop: post while under the depth, else wait for a completion.
    fn next_post(&mut self, c: u32, t: Time) -> Result<(), String> {
        let Some(BenchSpec {
            mode: Mode::Open { depth, .. },
            ..
        }) = self.work
        else {
            return Ok(());
        };
        let conn = &mut self.conns[c as usize];
        if conn.posted.len() >= depth as usize {
            conn.blocked = true;
            return Ok(());
        }
        self.post_next(c, t)?;
        let conn = &self.conns[c as usize];
        let free = self.cores[conn.core].busy_until();
        self.at(free, c, Ev::Post)
    }
}
