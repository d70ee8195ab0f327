//! A TCP stream's receive side as NAPI runs it: the receiver's poll (completions, the
//! in-order queue, the process's copies), its ACKs and window updates, and the sender's
//! poll of those ACKs.

use sim::memsys::LINE;
use sim::Time;

use super::{completion, Ev, Step};
use crate::net::rxq::Seg;
use crate::net::{buf, CQE_BYTES};
use devices::nic::frame;

impl Step<'_, '_> {
    /// NAPI on the receiver: interrupt, then up to a budget of completions, TCP receive
    /// with an ACK every second segment; then the process's `recv` calls.
    pub(super) fn receiver_poll(&mut self, t: Time, irq: bool) {
        let c = self.rx.costs.clone();
        let start = self.rx.core.start(t);
        let mut cur = start;
        self.s.k.rx_q.napi = true;
        if irq {
            cur += self.rx.core.cycles(c.irq_cycles);
        }
        let sock = self.rx.core.socket;
        let mut done = 0;
        while done < c.napi_budget {
            let Some(seg) = self.s.k.rx_q.pop_visible(cur) else {
                break;
            };
            done += 1;
            cur = cur
                + self.rx.mem.cpu_read(
                    cur,
                    sock,
                    seg.node,
                    self.s.k.ns + buf::RX_CQE + seg.slot,
                    CQE_BYTES,
                    true,
                );
            cur += self.rx.core.cycles(c.rx_segment_cycles);
            if let Some(m) = &mut self.mig {
                // The ARFS callback: the flow met on a queue the thread no longer reads.
                m.met(cur, sock, self.s.k.rx_q.rings[seg.ring].index);
            }
            if seg.seq < self.s.k.rcv_nxt {
                self.s.k.out_of_order += 1;
                continue;
            }
            if seg.seq > self.s.k.rcv_nxt {
                // Ahead of a hole: TCP's out-of-order queue holds it until the hole fills.
                self.s.k.reordered += 1;
                self.s.k.out_of_order += 1;
                self.s.k.ofo.insert(seg.seq, seg);
                continue;
            }
            let mut next = Some(seg);
            while let Some(seg) = next {
                self.s.k.rcv_nxt += seg.len;
                self.s.k.sockq.push_back((seg.len, 0, seg.slot, seg.node));
                // The frames of the segment (one, or an LRO aggregate's) are read by the copy.
                self.s.k.unread += seg.len;
                self.s.k.segs_unacked += 1;
                if self.s.k.segs_unacked >= 2 {
                    self.send_ack(&mut cur);
                }
                next = self.s.k.ofo.remove(&self.s.k.rcv_nxt);
            }
        }
        // The process reads what is there, `msg_bytes` per call.
        while self.s.k.unread > 0 {
            let n = self.s.k.unread.min(self.s.spec.msg_bytes);
            cur += self
                .rx
                .core
                .cycles(c.syscall_cycles + n.div_ceil(LINE) * c.copy_line_cycles);
            let mut left = n;
            while left > 0 {
                let (len, off, slot, node) =
                    self.s.k.sockq.front_mut().expect("unread bytes are queued");
                let node = *node;
                let take = left.min(*len - *off);
                // The copy touches the frames under [off, off + take): price each once.
                let (first, last) = (*off / self.s.mss, (*off + take - 1) / self.s.mss);
                for k in first..=last {
                    let b = self.s.k.ns + buf::RX_DATA + (*slot << 6) + k;
                    let bytes = (*len - k * self.s.mss).min(self.s.mss) + 66;
                    cur = cur + self.rx.mem.cpu_read(cur, sock, node, b, bytes, false);
                }
                *off += take;
                left -= take;
                if *off == *len {
                    self.s.k.sockq.pop_front();
                }
            }
            let home = self.rx.node;
            self.rx
                .mem
                .cpu_write_home(cur, sock, home, self.s.k.ns + buf::USER, n);
            self.s.k.unread -= n;
            self.s.k.delivered += n;
            self.s.k.delivered_window += n;
        }
        // Window update once the reader has freed half the buffer behind the last ACK.
        if self.s.k.adv_wnd < c.rcvbuf_bytes / 2 {
            self.send_ack(&mut cur);
        }
        self.rx.core.finish(start, cur);
        let more = self.s.k.rx_q.pending.front().map(|s| s.visible);
        match more {
            Some(v) if v <= cur => self.at(cur, Ev::RxPoll),
            _ => {
                // NAPI complete: interrupts on again; anything pending re-counts.
                self.s.k.rx_q.rearm(cur, &self.rx.coalescing);
                let pending: Vec<Time> = self.s.k.rx_q.pending.iter().map(|s| s.visible).collect();
                for v in pending {
                    if let Some(at) =
                        completion(&mut self.s.k.rx_q, v.max(cur), &self.rx.coalescing)
                    {
                        let g = self.s.k.rx_q.gen;
                        self.at(at, Ev::RxIrq(g));
                    }
                }
            }
        }
    }

    /// A pure ACK from the receiver (cumulative, carrying the window).
    pub(super) fn send_ack(&mut self, cur: &mut Time) {
        let c = &self.rx.costs;
        *cur += self.rx.core.cycles(c.ack_cycles);
        self.s.k.segs_unacked = 0;
        let wnd = c.rcvbuf_bytes - self.s.k.unread;
        self.s.k.adv_wnd = wnd;
        let p = self.rx.nic.params.clone();
        // The receiver's port, shared by every connection's ACKs (and any data it sends).
        let on_wire = self
            .rx
            .nic
            .tx_port
            .reserve(*cur + p.latency, frame::wire_bytes(frame::ACK_BYTES) as u64);
        if let Some(m) = &mut self.mig {
            // The team driver's transmit PF (its choice, `ooo_okay`, is the driver's).
            m.driver.tx_pf(*cur, self.rx.core.socket, on_wire);
        }
        let arrive = on_wire + p.wire + self.tx.nic.params.latency;
        let bytes = frame::frame_in_memory(frame::ACK_BYTES) as u64;
        let tx_pf = self.tx.pf;
        let (visible, slot, admitted) =
            self.s
                .k
                .acks
                .receive(self.tx, tx_pf, 0, self.s.k.ns, arrive, bytes);
        // An ACK's own departure counts for nothing here: only the pause matters.
        crate::net::pause_sender(&mut self.rx.nic.tx_port, on_wire, arrive, admitted);
        self.s.k.acks.push(Seg {
            visible,
            seq: self.s.k.rcv_nxt,
            len: wnd,
            slot,
            ring: 0,
            node: self.s.k.acks.rings[0].node,
        });
        self.at(visible, Ev::AckCqe);
    }

    /// NAPI on the sender: ACKs free the window and the socket buffer.
    pub(super) fn sender_poll(&mut self, t: Time) {
        let c = self.tx.costs.clone();
        let start = self.tx.core.start(t);
        let mut cur = start + self.tx.core.cycles(c.irq_cycles);
        self.s.k.acks.napi = true;
        let sock = self.tx.core.socket;
        let node = self.tx.node;
        while let Some(a) = self.s.k.acks.pop_visible(cur) {
            cur = cur
                + self.tx.mem.cpu_read(
                    cur,
                    sock,
                    node,
                    self.s.k.ns + buf::RX_CQE + a.slot,
                    CQE_BYTES,
                    true,
                );
            cur += self.tx.core.cycles(c.ack_cycles);
            self.s.k.snd_una = self.s.k.snd_una.max(a.seq);
            // An ACK entry carries the cumulative ACK in `seq` and the window in `len`.
            self.s.k.rwnd = (a.len + a.seq).saturating_sub(self.s.k.snd_una);
        }
        self.reap_tx_completions(&mut cur);
        self.transmit(&mut cur, true);
        self.tx.core.finish(start, cur);
        self.s.k.acks.rearm(cur, &self.tx.coalescing);
        let pending: Vec<Time> = self.s.k.acks.pending.iter().map(|s| s.visible).collect();
        for v in pending {
            if let Some(at) = completion(&mut self.s.k.acks, v.max(cur), &self.tx.coalescing) {
                let g = self.s.k.acks.gen;
                self.at(at, Ev::TxIrq(g));
            }
        }
        if self.s.k.app_blocked
            && self.s.k.app_written - self.s.k.snd_una + self.s.spec.msg_bytes <= c.rcvbuf_bytes
        {
            self.s.k.app_blocked = false;
        }
        if !self.s.k.app_blocked && !self.s.k.app_scheduled {
            self.s.k.app_scheduled = true;
            self.at(cur, Ev::SenderApp);
        }
    }
}
