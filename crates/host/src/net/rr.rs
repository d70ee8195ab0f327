//! netperf TCP_RR between two hosts, one core each: a
//! transaction is a request of `msg_bytes` from the client and a response of
//! `msg_bytes` back; one transaction is outstanding at a time, so the round trip is the
//! sum of the critical path: on the sending side the `send` syscall and copy, the TSO
//! send, the doorbell and the NIC's descriptor and payload reads; the NIC latencies and
//! the wire; on the receiving side the NIC's payload and completion writes, an interrupt
//! when a poll finds nothing yet (at once with coalescing off, else when the host's
//! moderation fires: `devices::nic::coalesce`), the completion reads and per-segment
//! stack work, the wakeup of the blocked process and its `recv` copy. Every line is
//! priced by `sim::memsys` where it is (DDIO share, CPU share, local or remote DRAM).
//!
//! Simplifications, stated: the process is woken once, when the whole message is in
//! (netperf loops `recv` until it has the message; the partial copies overlap arrivals,
//! which this does not model); TCP's ACKs of multi-segment messages cost the receiver
//! their send work but the sender's handling of them is off the critical path (it idles
//! waiting for the response); the response of a one-segment message carries the ACK
//! (delayed ACK). There is no variance source, so every steady-state transaction takes
//! the same time and the 99th percentile equals the mean.

use devices::nic::{frame, Coalescer};
use sim::memsys::LINE;
use sim::Time;

use super::round_trip::{Exchange, RoundTrips};
use super::{buf, NetHost, CQE_BYTES, DESC_BYTES, RING, TSO_BYTES};

#[derive(Clone, Copy, Debug)]
pub struct RrSpec {
    pub msg_bytes: u64,
    /// IP MTU.
    pub mtu: u32,
    /// Transactions run before the measured ones (rings and caches reach steady state).
    pub warmup: u32,
    pub transactions: u32,
}

#[derive(Clone, Debug, Default)]
pub struct RrResult {
    /// Mean round trip: 1 / transactions per second, µs.
    pub latency_us: f64,
    pub p99_us: f64,
    pub transactions_per_s: f64,
    /// Dependent completion reads that missed the LLC, per transaction (both sides).
    pub cqe_misses: f64,
    /// Payload frames per one-way message.
    pub frames_per_message: u64,
    /// The server's receive interrupts per second over the measured transactions.
    pub server_interrupts_per_s: f64,
}

/// One side's rings.
#[derive(Default)]
pub struct Side {
    tx_slot: u64,
    rx_slot: u64,
    /// The completion of the last send, reaped by the next poll.
    tx_cqe: Option<u64>,
    /// The receive queue's interrupt moderation, and the frames and bytes it has taken.
    coalesce: Coalescer,
    rx_packets: u64,
    rx_bytes: u64,
}

/// TCP_RR's exchange: `msg_bytes` each way in segments of `mss`.
pub struct Rr {
    msg_bytes: u64,
    mss: u64,
    misses: u64,
    /// Payload frames of the last message.
    frames: u64,
    /// The buffer namespace of the model in its world (0 alone).
    ns: u64,
}

/// TCP_RR as a component of a world (`round_trip`).
pub type Transactions = RoundTrips<Rr>;

impl Exchange for Rr {
    type Side = Side;

    fn send(
        &mut self,
        h: &mut NetHost,
        side: &mut Side,
        t: Time,
        peer: &NetHost,
    ) -> Vec<(Time, u64)> {
        self.send(h, side, t, peer)
    }

    fn receive(&mut self, h: &mut NetHost, side: &mut Side, arrivals: &[(Time, u64)]) -> Time {
        self.receive(h, side, arrivals)
    }

    fn warm(&mut self, server: &mut Side) {
        self.misses = 0;
        server.coalesce.reset_count();
    }

    fn set_namespace(&mut self, ns: u64) {
        self.ns = ns;
    }
}

impl Rr {
    fn new(msg_bytes: u64, mtu: u32) -> Rr {
        Rr {
            msg_bytes,
            mss: frame::mss(mtu) as u64,
            misses: 0,
            frames: 0,
            ns: 0,
        }
    }
}

impl Transactions {
    /// TCP_RR from `client` to `server` (views of two hosts) with `msg_bytes` each way
    /// over `mtu`, measuring `window` after `warmup`.
    pub fn new(
        client: NetHost,
        server: NetHost,
        msg_bytes: u64,
        mtu: u32,
        warmup: Time,
        window: Time,
    ) -> Result<Transactions, String> {
        check(msg_bytes, mtu)?;
        RoundTrips::of(Rr::new(msg_bytes, mtu), client, server, warmup, window)
    }

    /// The measured transactions' result; an error when the window held none.
    pub fn result(&self) -> Result<RrResult, String> {
        let lat = self.round_trips()?;
        Ok(result(lat, &self.x, self.server_side(), self.x.frames))
    }
}

/// The message size and MTU a TCP_RR can run with.
fn check(msg_bytes: u64, mtu: u32) -> Result<(), String> {
    if msg_bytes == 0 || msg_bytes > 1 << 20 {
        return Err(format!("msg_bytes {msg_bytes} must be in 1..=1048576"));
    }
    if !(576..=9000).contains(&mtu) {
        return Err(format!("mtu {mtu} must be in 576..=9000"));
    }
    Ok(())
}

/// Runs TCP_RR between `client` and `server` (each with its NIC, PF, core and node).
pub fn run(client: &mut NetHost, server: &mut NetHost, spec: RrSpec) -> Result<RrResult, String> {
    check(spec.msg_bytes, spec.mtu)?;
    if spec.transactions == 0 {
        return Err("transactions must be > 0".into());
    }
    let mut m = Rr::new(spec.msg_bytes, spec.mtu);
    let (mut cs, mut ss) = (Side::default(), Side::default());
    let mut t = Time::ZERO;
    let mut lat = Vec::with_capacity(spec.transactions as usize);
    let mut last_frames = 0;
    for i in 0..spec.warmup + spec.transactions {
        if i == spec.warmup {
            m.misses = 0;
            ss.coalesce.reset_count();
        }
        let arr = m.send(client, &mut cs, t, server);
        let frames = m.frames;
        let req = m.receive(server, &mut ss, &arr);
        let arr = m.send(server, &mut ss, req, client);
        let done = m.receive(client, &mut cs, &arr);
        if i >= spec.warmup {
            lat.push(done - t);
        }
        last_frames = frames;
        t = done;
    }
    Ok(result(lat, &m, &ss, last_frames))
}

/// The result of the measured transactions' round trips `lat` (at least one).
fn result(mut lat: Vec<Time>, m: &Rr, server: &Side, frames: u64) -> RrResult {
    let n = lat.len() as f64;
    let mean = lat.iter().map(|d| d.as_secs_f64()).sum::<f64>() / n;
    lat.sort();
    let p99 = lat[((lat.len() * 99).div_ceil(100)).saturating_sub(1)];
    let measured: f64 = lat.iter().map(|d| d.as_secs_f64()).sum();
    RrResult {
        server_interrupts_per_s: server.coalesce.interrupts() as f64 / measured,
        latency_us: mean * 1e6,
        p99_us: p99.as_secs_f64() * 1e6,
        transactions_per_s: 1.0 / mean,
        cqe_misses: m.misses as f64 / n,
        frames_per_message: frames,
    }
}

impl Rr {
    /// `h`'s process sends the message at `t`: when each segment (or, for an LRO
    /// receiver, each TSO burst) arrives at `peer`'s NIC, with its payload bytes; the
    /// frames in `self.frames`.
    fn send(
        &mut self,
        h: &mut NetHost,
        side: &mut Side,
        t: Time,
        peer: &NetHost,
    ) -> Vec<(Time, u64)> {
        let n = self.msg_bytes;
        let c = h.costs.clone();
        let start = h.core.start(t);
        let sock = h.core.socket;
        let mut cur = start
            + h.core
                .cycles(c.syscall_cycles + n.div_ceil(LINE) * c.copy_line_cycles);
        cur = cur
            + h.mem
                .cpu_read(cur, sock, h.node, self.ns + buf::USER, n, false);
        let skbs = (c.rcvbuf_bytes / TSO_BYTES).max(1);
        let mut arrivals = Vec::new();
        let mut frames = 0;
        let mut sent = 0;
        while sent < n {
            let len = (n - sent).min(TSO_BYTES);
            let skb = self.ns + buf::SKB + side.tx_slot % skbs;
            h.mem.cpu_write_home(cur, sock, h.node, skb, len);
            cur += h.core.cycles(c.tx_send_cycles);
            let slot = side.tx_slot % RING;
            side.tx_slot += 1;
            h.mem
                .cpu_write_home(cur, sock, h.node, self.ns + buf::TX_DESC + slot, DESC_BYTES);
            let p = h.nic.params.clone();
            let headers = (frame::ETH_HEADER + frame::TCP_IP_HEADERS) as u64;
            let data = super::fetch_send(h, cur, self.ns + buf::TX_DESC + slot, skb, len + headers);
            let mut last = data;
            for seg in frame::tso_segments(len as u32, self.mss as u32) {
                let on_wire = h
                    .nic
                    .tx_port
                    .reserve(data, frame::wire_bytes(seg + frame::TCP_IP_HEADERS) as u64);
                last = on_wire + p.wire + peer.nic.params.latency;
                frames += 1;
                if !peer.lro {
                    arrivals.push((last, seg as u64));
                }
            }
            if peer.lro {
                arrivals.push((last, len));
            }
            let pf = &mut h.nic.pfs[h.pf];
            pf.dma_write(
                data,
                &mut h.mem,
                h.node,
                self.ns + buf::TX_CQE + slot,
                CQE_BYTES,
            );
            side.tx_cqe = Some(slot);
            sent += len;
        }
        h.core.finish(start, cur);
        self.frames = frames;
        arrivals
    }

    /// `h` receives the segments of the message arriving at its NIC at the given times:
    /// when its process has copied the message out.
    fn receive(&mut self, h: &mut NetHost, side: &mut Side, arrivals: &[(Time, u64)]) -> Time {
        let n = self.msg_bytes;
        let c = h.costs.clone();
        let sock = h.core.socket;
        // The NIC writes each segment's frame(s) and completion, in order.
        let mut segs = Vec::with_capacity(arrivals.len());
        let mut visible = Time::ZERO;
        for &(at, len) in arrivals {
            let slot = side.rx_slot % RING;
            side.rx_slot += 1;
            let pf = &mut h.nic.pfs[h.pf];
            let mut data = at;
            let frames = len.div_ceil(self.mss);
            for k in 0..frames {
                let b = (len - k * self.mss).min(self.mss);
                let bytes =
                    frame::frame_in_memory((b + frame::TCP_IP_HEADERS as u64) as u32) as u64;
                data = data.max(pf.dma_write(
                    at,
                    &mut h.mem,
                    h.node,
                    self.ns + buf::RX_DATA + (slot << 6) + k,
                    bytes,
                ));
            }
            let cqe = pf.dma_write(
                data,
                &mut h.mem,
                h.node,
                self.ns + buf::RX_CQE + slot,
                CQE_BYTES,
            );
            visible = visible.max(cqe);
            segs.push((visible, len, slot, frames));
        }
        let mut start = Time::ZERO;
        let mut cur = Time::ZERO;
        let mut polling = false;
        let mut unacked = 0;
        for (i, &(vis, len, slot, _)) in segs.iter().enumerate() {
            side.rx_packets += 1;
            side.rx_bytes += len;
            if !polling || vis > cur {
                // Nothing to poll: NAPI completes, and the moderation decides when the
                // next completions interrupt.
                if polling {
                    h.core.finish(start, cur);
                    side.coalesce.rearm(
                        cur,
                        &h.coalescing,
                        side.rx_packets - 1,
                        side.rx_bytes - len,
                    );
                }
                let irq = interrupt_at(&mut side.coalesce, &h.coalescing, &segs[i..]);
                start = h.core.start(irq);
                cur = start + h.core.cycles(c.irq_cycles);
                polling = true;
                if let Some(tx) = side.tx_cqe.take() {
                    cur = cur + self.dependent(h, cur, self.ns + buf::TX_CQE + tx);
                }
            }
            cur = cur + self.dependent(h, cur, self.ns + buf::RX_CQE + slot);
            cur += h.core.cycles(c.rx_segment_cycles);
            unacked += 1;
            if segs.len() > 1 && (unacked == 2 || i + 1 == segs.len()) {
                cur += h.core.cycles(c.ack_cycles);
                unacked = 0;
            }
        }
        // The process wakes and copies the message out of the frames.
        cur += h
            .core
            .cycles(c.wakeup_cycles + c.syscall_cycles + n.div_ceil(LINE) * c.copy_line_cycles);
        for &(_, len, slot, frames) in &segs {
            for k in 0..frames {
                let b = (len - k * self.mss).min(self.mss) + 66;
                cur = cur
                    + h.mem.cpu_read(
                        cur,
                        sock,
                        h.node,
                        self.ns + buf::RX_DATA + (slot << 6) + k,
                        b,
                        false,
                    );
            }
        }
        h.mem
            .cpu_write_home(cur, sock, h.node, self.ns + buf::USER, n);
        h.core.finish(start, cur);
        side.coalesce
            .rearm(cur, &h.coalescing, side.rx_packets, side.rx_bytes);
        cur
    }

    /// A dependent read of a completion entry; counts misses.
    fn dependent(&mut self, h: &mut NetHost, at: Time, b: u64) -> Time {
        let sock = h.core.socket;
        if !h.mem.cached(sock, b) {
            self.misses += 1;
        }
        h.mem.cpu_read(at, sock, h.node, b, CQE_BYTES, true)
    }
}

/// When the interrupt for the first of `segs` (visible, in order, while interrupts are
/// on) fires: the moderation's timer from the first, or the completion that reaches its
/// frame count before the timer.
fn interrupt_at(
    q: &mut Coalescer,
    c: &devices::nic::Coalescing,
    segs: &[(Time, u64, u64, u64)],
) -> Time {
    let mut irq = None;
    for &(vis, ..) in segs {
        if irq.is_some_and(|t| vis >= t) {
            break;
        }
        if let Some(t) = q.completion(vis, c) {
            irq = Some(irq.map_or(t, |i: Time| i.min(t)));
        }
    }
    q.clear();
    irq.expect("a completion interrupts or arms the timer")
}
