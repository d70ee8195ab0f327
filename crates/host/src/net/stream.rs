//! netperf TCP_STREAM between two hosts, one core each: the sender's process writes
//! `msg_bytes` per `send`, the stack sends TSO segments of up to 64 KiB through its NIC,
//! the wire carries MSS frames, the receiver's NIC writes each into a receive-ring buffer
//! and a completion entry, interrupts (coalesced), NAPI polls (budget), TCP acknowledges
//! every second segment, and the receiving process copies `msg_bytes` per `recv`. The
//! receive window is what the unread bytes leave of the socket buffer, so both sides
//! settle at the bottleneck's rate.

use std::collections::VecDeque;

use devices::nic::{frame, Coalescer};
use sim::memsys::LINE;
use sim::{Engine, Time};

use super::{buf, NetHost, CQE_BYTES, DESC_BYTES, RING, TSO_BYTES};

/// What to run.
#[derive(Clone, Copy, Debug)]
pub struct StreamSpec {
    pub msg_bytes: u64,
    /// IP MTU.
    pub mtu: u32,
    pub warmup: Time,
    pub window: Time,
}

/// What a run measured over the window.
#[derive(Clone, Debug, Default)]
pub struct StreamResult {
    /// Application payload delivered to the receiving process, Gb/s.
    pub throughput_gbps: f64,
    /// Busy fraction of each side's core.
    pub sender_util: f64,
    pub receiver_util: f64,
    /// DRAM reads + writes of each host, Gb/s.
    pub sender_mem_gbps: f64,
    pub receiver_mem_gbps: f64,
    /// Segments that arrived out of order or twice (must be 0), and bytes delivered in
    /// the whole run, in order.
    pub out_of_order: u64,
    pub bytes_delivered: u64,
    pub bytes_sent: u64,
    /// TSO sends and wire frames (whole run).
    pub tso_sends: u64,
    pub frames: u64,
    /// Engine events handled.
    pub events: u64,
}

#[derive(Clone, Copy, Debug)]
enum Ev {
    SenderApp,
    /// A data frame's completion entry is visible in the receiver's memory.
    DataCqe,
    RxIrq(u64),
    /// NAPI polls again: its budget ran out with completions left.
    RxPoll,
    /// An ACK's completion entry is visible in the sender's memory.
    AckCqe,
    TxIrq(u64),
    Warm,
}

/// A segment waiting in a receive queue: sequence, payload, ring slot.
#[derive(Clone, Copy, Debug)]
struct Seg {
    visible: Time,
    seq: u64,
    len: u64,
    slot: u64,
}

#[derive(Default)]
struct RxQueue {
    slot: u64,
    last_visible: Time,
    pending: VecDeque<Seg>,
    coalesce: Coalescer,
    gen: u64,
    napi: bool,
}

impl RxQueue {
    /// A frame's DMA and CQE write by `h`'s NIC, arriving at `at`: when its CQE is
    /// visible (completions are written in order).
    fn receive(&mut self, h: &mut NetHost, at: Time, bytes: u64) -> (Time, u64) {
        let slot = self.slot % RING;
        self.slot += 1;
        let pf = &mut h.nic.pfs[h.pf];
        let data = pf.dma_write(at, &mut h.mem, h.node, buf::RX_DATA + (slot << 6), bytes);
        let cqe = pf.dma_write(data, &mut h.mem, h.node, buf::RX_CQE + slot, CQE_BYTES);
        self.last_visible = self.last_visible.max(cqe);
        (self.last_visible, slot)
    }
}

struct Sim<'a> {
    eng: Engine<Ev>,
    spec: StreamSpec,
    mss: u64,
    tx: &'a mut NetHost,
    rx: &'a mut NetHost,
    // Sender.
    app_written: u64,
    snd_una: u64,
    snd_nxt: u64,
    rwnd: u64,
    app_blocked: bool,
    app_scheduled: bool,
    tx_cqes: VecDeque<(Time, u64)>,
    tx_slot: u64,
    acks: RxQueue,
    // Receiver.
    rx_q: RxQueue,
    rcv_nxt: u64,
    sockq: VecDeque<(u64, u64, u64)>,
    unread: u64,
    segs_unacked: u32,
    adv_wnd: u64,
    delivered: u64,
    delivered_window: u64,
    out_of_order: u64,
    tso_sends: u64,
    frames: u64,
    wire_back: Time,
}

/// Runs a TCP stream from `tx` to `rx` (each with its NIC, PF, core and node).
pub fn run(tx: &mut NetHost, rx: &mut NetHost, spec: StreamSpec) -> Result<StreamResult, String> {
    if spec.msg_bytes == 0 {
        return Err("msg_bytes must be > 0".into());
    }
    if spec.mtu < 576 || spec.mtu > 9000 {
        return Err(format!("mtu {} must be in 576..=9000", spec.mtu));
    }
    let rcvbuf = rx.costs.rcvbuf_bytes;
    let mut s = Sim {
        eng: Engine::new(1),
        spec,
        mss: frame::mss(spec.mtu) as u64,
        tx,
        rx,
        app_written: 0,
        snd_una: 0,
        snd_nxt: 0,
        rwnd: rcvbuf,
        app_blocked: false,
        app_scheduled: true,
        tx_cqes: VecDeque::new(),
        tx_slot: 0,
        acks: RxQueue::default(),
        rx_q: RxQueue::default(),
        rcv_nxt: 0,
        sockq: VecDeque::new(),
        unread: 0,
        segs_unacked: 0,
        adv_wnd: rcvbuf,
        delivered: 0,
        delivered_window: 0,
        out_of_order: 0,
        tso_sends: 0,
        frames: 0,
        wire_back: Time::ZERO,
    };
    s.eng
        .schedule_at(Time::ZERO, Ev::SenderApp)
        .map_err(|e| e.to_string())?;
    s.eng
        .schedule_at(spec.warmup, Ev::Warm)
        .map_err(|e| e.to_string())?;
    let end = spec.warmup + spec.window;
    while let Some((t, ev)) = s.eng.pop() {
        if t > end {
            break;
        }
        s.handle(t, ev);
    }
    let w = spec.window.as_secs_f64();
    let util = |h: &NetHost| (h.core.busy.as_secs_f64() / w).min(1.0);
    let mem = |h: &NetHost| h.mem.dram_total() as f64 * 8.0 / w / 1e9;
    Ok(StreamResult {
        throughput_gbps: s.delivered_window as f64 * 8.0 / w / 1e9,
        sender_util: util(s.tx),
        receiver_util: util(s.rx),
        sender_mem_gbps: mem(s.tx),
        receiver_mem_gbps: mem(s.rx),
        out_of_order: s.out_of_order,
        bytes_delivered: s.delivered,
        bytes_sent: s.snd_nxt,
        tso_sends: s.tso_sends,
        frames: s.frames,
        events: s.eng.stats().handled,
    })
}

impl Sim<'_> {
    fn at(&mut self, t: Time, ev: Ev) {
        let t = t.max(self.eng.now());
        self.eng.schedule_at(t, ev).expect("time moves forward");
    }

    fn handle(&mut self, t: Time, ev: Ev) {
        match ev {
            Ev::Warm => {
                self.tx.reset_counters();
                self.rx.reset_counters();
                self.delivered_window = 0;
            }
            Ev::SenderApp => self.sender_app(t),
            Ev::DataCqe => {
                if let Some(at) = completion(&mut self.rx_q, t, &self.rx.nic.params) {
                    let g = self.rx_q.gen;
                    self.at(at, Ev::RxIrq(g));
                }
            }
            Ev::RxIrq(g) => {
                if g == self.rx_q.gen && !self.rx_q.napi {
                    self.receiver_poll(t, true);
                }
            }
            Ev::RxPoll => self.receiver_poll(t, false),
            Ev::AckCqe => {
                if let Some(at) = completion(&mut self.acks, t, &self.tx.nic.params) {
                    let g = self.acks.gen;
                    self.at(at, Ev::TxIrq(g));
                }
            }
            Ev::TxIrq(g) => {
                if g == self.acks.gen && !self.acks.napi {
                    self.sender_poll(t);
                }
            }
        }
    }

    /// The sending process: `send` calls until it has written a TSO's worth or the
    /// socket buffer is full, then the stack transmits what the window allows.
    fn sender_app(&mut self, t: Time) {
        self.app_scheduled = false;
        let start = self.tx.core.start(t);
        let mut cur = start;
        let sndbuf = self.tx.costs.rcvbuf_bytes;
        let c = self.tx.costs.clone();
        let mut batch = 0;
        self.reap_tx_completions(&mut cur);
        while batch < TSO_BYTES {
            if self.app_written - self.snd_una + self.spec.msg_bytes > sndbuf {
                self.app_blocked = true;
                break;
            }
            let n = self.spec.msg_bytes;
            let lines = n.div_ceil(LINE);
            cur += self
                .tx
                .core
                .cycles(c.syscall_cycles + lines * c.copy_line_cycles);
            // The user buffer is the same each call (hot); the skb pages are the socket's.
            let skb = buf::SKB + (self.app_written / TSO_BYTES) % (sndbuf / TSO_BYTES).max(1);
            let sock = self.tx.core.socket;
            cur = cur
                + self
                    .tx
                    .mem
                    .cpu_read(cur, sock, self.tx.node, buf::USER, n, false);
            self.tx.mem.cpu_write(cur, sock, skb, TSO_BYTES);
            self.app_written += n;
            batch += n;
            if self.app_written - self.snd_nxt >= TSO_BYTES {
                self.transmit(&mut cur, false);
            }
        }
        // End of the batch: no more data is coming right now (autocork releases it).
        self.transmit(&mut cur, true);
        self.tx.core.finish(start, cur);
        if !self.app_blocked {
            self.app_scheduled = true;
            self.at(cur, Ev::SenderApp);
        }
    }

    /// Sends TSO segments while data is queued and the window allows. Nagle: a
    /// sub-MSS remainder waits while data is in flight.
    fn transmit(&mut self, cur: &mut Time, flush: bool) {
        let c = self.tx.costs.clone();
        loop {
            let queued = self.app_written - self.snd_nxt;
            let in_flight = self.snd_nxt - self.snd_una;
            let room = self.rwnd.saturating_sub(in_flight);
            let n = queued.min(TSO_BYTES).min(room);
            if n == 0 || (n < TSO_BYTES && !flush) || (n < self.mss && in_flight > 0) {
                return;
            }
            *cur += self.tx.core.cycles(c.tx_send_cycles);
            let slot = self.tx_slot % RING;
            self.tx_slot += 1;
            let sock = self.tx.core.socket;
            self.tx
                .mem
                .cpu_write(*cur, sock, buf::TX_DESC + slot, DESC_BYTES);
            let node = self.tx.node;
            let skb = buf::SKB
                + (self.snd_nxt / TSO_BYTES) % (self.tx.costs.rcvbuf_bytes / TSO_BYTES).max(1);
            let params = self.tx.nic.params.clone();
            let pf = &mut self.tx.nic.pfs[self.tx.pf];
            let doorbell = *cur + params.latency;
            let desc = pf.dma_read(
                doorbell,
                &mut self.tx.mem,
                node,
                buf::TX_DESC + slot,
                DESC_BYTES,
            );
            let headers = frame::ETH_HEADER as u64 + frame::TCP_IP_HEADERS as u64;
            let data = pf.dma_read(desc, &mut self.tx.mem, node, skb, n + headers);
            // Segments onto the wire, each with its own headers and framing.
            let mut seq = self.snd_nxt;
            let segs = frame::tso_segments(n as u32, self.mss as u32).count();
            for (i, len) in frame::tso_segments(n as u32, self.mss as u32).enumerate() {
                let ip = len + frame::TCP_IP_HEADERS;
                let on_wire = self
                    .tx
                    .nic
                    .tx_port
                    .reserve(data, frame::wire_bytes(ip) as u64);
                let arrive = on_wire + params.wire + self.rx.nic.params.latency;
                self.frames += 1;
                if self.rx.lro {
                    // LRO: the burst's frames land in one aggregate; one completion at its end.
                    let pf = &mut self.rx.nic.pfs[self.rx.pf];
                    let slot = self.rx_q.slot % RING;
                    let b = buf::RX_DATA + (slot << 6) + i as u64;
                    pf.dma_write(arrive, &mut self.rx.mem, self.rx.node, b, len as u64 + 66);
                    if i + 1 < segs {
                        continue;
                    }
                    let (visible, slot) =
                        self.rx_q
                            .receive(self.rx, arrive, frame::ETH_HEADER as u64 + 52);
                    self.rx_q.pending.push_back(Seg {
                        visible,
                        seq: self.snd_nxt,
                        len: n,
                        slot,
                    });
                    self.at(visible, Ev::DataCqe);
                    break;
                }
                let (visible, slot) =
                    self.rx_q
                        .receive(self.rx, arrive, frame::frame_in_memory(ip) as u64);
                self.rx_q.pending.push_back(Seg {
                    visible,
                    seq,
                    len: len as u64,
                    slot,
                });
                self.at(visible, Ev::DataCqe);
                seq += len as u64;
            }
            let pf = &mut self.tx.nic.pfs[self.tx.pf];
            let cqe = pf.dma_write(data, &mut self.tx.mem, node, buf::TX_CQE + slot, CQE_BYTES);
            self.tx_cqes.push_back((cqe, slot));
            self.snd_nxt += n;
            self.tso_sends += 1;
        }
    }

    /// The driver reads the transmit completions the NIC has written (one dependent
    /// line each, priced where it is).
    fn reap_tx_completions(&mut self, cur: &mut Time) {
        let sock = self.tx.core.socket;
        while let Some(&(vis, slot)) = self.tx_cqes.front() {
            if vis > *cur {
                break;
            }
            self.tx_cqes.pop_front();
            *cur = *cur
                + self.tx.mem.cpu_read(
                    *cur,
                    sock,
                    self.tx.node,
                    buf::TX_CQE + slot,
                    CQE_BYTES,
                    true,
                );
        }
    }

    /// NAPI on the receiver: interrupt, then up to a budget of completions, TCP receive
    /// with an ACK every second segment; then the process's `recv` calls.
    fn receiver_poll(&mut self, t: Time, irq: bool) {
        let c = self.rx.costs.clone();
        let start = self.rx.core.start(t);
        let mut cur = start;
        self.rx_q.napi = true;
        if irq {
            cur += self.rx.core.cycles(c.irq_cycles);
        }
        let sock = self.rx.core.socket;
        let node = self.rx.node;
        let mut done = 0;
        while done < c.napi_budget {
            let Some(&seg) = self.rx_q.pending.front() else {
                break;
            };
            if seg.visible > cur {
                break;
            }
            self.rx_q.pending.pop_front();
            done += 1;
            cur = cur
                + self
                    .rx
                    .mem
                    .cpu_read(cur, sock, node, buf::RX_CQE + seg.slot, CQE_BYTES, true);
            cur += self.rx.core.cycles(c.rx_segment_cycles);
            if seg.seq != self.rcv_nxt {
                self.out_of_order += 1;
                continue;
            }
            self.rcv_nxt += seg.len;
            self.sockq.push_back((seg.len, 0, seg.slot));
            // The frames of the segment (one, or an LRO aggregate's) are read by the copy.
            self.unread += seg.len;
            self.segs_unacked += 1;
            if self.segs_unacked >= 2 {
                self.send_ack(&mut cur);
            }
        }
        // The process reads what is there, `msg_bytes` per call.
        while self.unread > 0 {
            let n = self.unread.min(self.spec.msg_bytes);
            cur += self
                .rx
                .core
                .cycles(c.syscall_cycles + n.div_ceil(LINE) * c.copy_line_cycles);
            let mut left = n;
            while left > 0 {
                let (len, off, slot) = self.sockq.front_mut().expect("unread bytes are queued");
                let take = left.min(*len - *off);
                // The copy touches the frames under [off, off + take): price each once.
                let (first, last) = (*off / self.mss, (*off + take - 1) / self.mss);
                for k in first..=last {
                    let b = buf::RX_DATA + (*slot << 6) + k;
                    let bytes = (*len - k * self.mss).min(self.mss) + 66;
                    cur = cur + self.rx.mem.cpu_read(cur, sock, node, b, bytes, false);
                }
                *off += take;
                left -= take;
                if *off == *len {
                    self.sockq.pop_front();
                }
            }
            self.rx.mem.cpu_write(cur, sock, buf::USER, n);
            self.unread -= n;
            self.delivered += n;
            self.delivered_window += n;
        }
        // Window update once the reader has freed half the buffer behind the last ACK.
        if self.adv_wnd < c.rcvbuf_bytes / 2 {
            self.send_ack(&mut cur);
        }
        self.rx.core.finish(start, cur);
        let more = self.rx_q.pending.front().map(|s| s.visible);
        match more {
            Some(v) if v <= cur => self.at(cur, Ev::RxPoll),
            _ => {
                // NAPI complete: interrupts on again; anything pending re-counts.
                self.rx_q.napi = false;
                self.rx_q.gen += 1;
                self.rx_q.coalesce.clear();
                let pending: Vec<Time> = self.rx_q.pending.iter().map(|s| s.visible).collect();
                for v in pending {
                    if let Some(at) = self
                        .rx_q
                        .coalesce
                        .completion(v.max(cur), &self.rx.nic.params)
                    {
                        let g = self.rx_q.gen;
                        self.at(at, Ev::RxIrq(g));
                    }
                }
            }
        }
    }

    /// A pure ACK from the receiver (cumulative, carrying the window).
    fn send_ack(&mut self, cur: &mut Time) {
        let c = &self.rx.costs;
        *cur += self.rx.core.cycles(c.ack_cycles);
        self.segs_unacked = 0;
        let wnd = c.rcvbuf_bytes - self.unread;
        self.adv_wnd = wnd;
        let p = self.rx.nic.params.clone();
        let on_wire = self.wire_back.max(*cur + p.latency)
            + sim::pcie::serialize(
                frame::wire_bytes(frame::ACK_BYTES),
                sim::pcie::ps_per_kib_at(p.line_gbps),
            );
        self.wire_back = on_wire;
        let arrive = on_wire + p.wire + self.tx.nic.params.latency;
        let (visible, slot) = self.acks.receive(
            self.tx,
            arrive,
            frame::frame_in_memory(frame::ACK_BYTES) as u64,
        );
        self.acks.pending.push_back(Seg {
            visible,
            seq: self.rcv_nxt,
            len: wnd,
            slot,
        });
        self.at(visible, Ev::AckCqe);
    }

    /// NAPI on the sender: ACKs free the window and the socket buffer.
    fn sender_poll(&mut self, t: Time) {
        let c = self.tx.costs.clone();
        let start = self.tx.core.start(t);
        let mut cur = start + self.tx.core.cycles(c.irq_cycles);
        self.acks.napi = true;
        let sock = self.tx.core.socket;
        let node = self.tx.node;
        while let Some(&a) = self.acks.pending.front() {
            if a.visible > cur {
                break;
            }
            self.acks.pending.pop_front();
            cur = cur
                + self
                    .tx
                    .mem
                    .cpu_read(cur, sock, node, buf::RX_CQE + a.slot, CQE_BYTES, true);
            cur += self.tx.core.cycles(c.ack_cycles);
            self.snd_una = self.snd_una.max(a.seq);
            // An ACK entry carries the cumulative ACK in `seq` and the window in `len`.
            self.rwnd = (a.len + a.seq).saturating_sub(self.snd_una);
        }
        self.reap_tx_completions(&mut cur);
        self.transmit(&mut cur, true);
        self.tx.core.finish(start, cur);
        self.acks.napi = false;
        self.acks.gen += 1;
        self.acks.coalesce.clear();
        let pending: Vec<Time> = self.acks.pending.iter().map(|s| s.visible).collect();
        for v in pending {
            if let Some(at) = self
                .acks
                .coalesce
                .completion(v.max(cur), &self.tx.nic.params)
            {
                let g = self.acks.gen;
                self.at(at, Ev::TxIrq(g));
            }
        }
        if self.app_blocked
            && self.app_written - self.snd_una + self.spec.msg_bytes <= c.rcvbuf_bytes
        {
            self.app_blocked = false;
        }
        if !self.app_blocked && !self.app_scheduled {
            self.app_scheduled = true;
            self.at(cur, Ev::SenderApp);
        }
    }
}

/// A completion became visible while interrupts are on: the coalescer's decision.
fn completion(q: &mut RxQueue, t: Time, p: &devices::nic::NicParams) -> Option<Time> {
    if q.napi {
        return None;
    }
    q.coalesce.completion(t, p)
}
