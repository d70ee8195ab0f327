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
use sim::component::Component;
use sim::memsys::LINE;
use sim::net::{ComponentId, Event};
use sim::timers::Timers;
use sim::Time;

use super::world::{NetWorld, Shared};
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
struct Side {
    tx_slot: u64,
    rx_slot: u64,
    /// The completion of the last send, reaped by the next poll.
    tx_cqe: Option<u64>,
    /// The receive queue's interrupt moderation, and the frames and bytes it has taken.
    coalesce: Coalescer,
    rx_packets: u64,
    rx_bytes: u64,
}

struct Rr {
    mss: u64,
    misses: u64,
    /// The buffer namespace of the model in its world (0 alone).
    ns: u64,
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
    let mut m = Rr {
        mss: frame::mss(spec.mtu) as u64,
        misses: 0,
        ns: 0,
    };
    let (mut cs, mut ss) = (Side::default(), Side::default());
    let mut t = Time::ZERO;
    let mut lat = Vec::with_capacity(spec.transactions as usize);
    let mut frames = 0;
    for i in 0..spec.warmup + spec.transactions {
        if i == spec.warmup {
            m.misses = 0;
            ss.coalesce.reset_count();
        }
        let (arr, f) = m.send(client, &mut cs, t, spec.msg_bytes, server);
        let req = m.receive(server, &mut ss, &arr, spec.msg_bytes);
        let (arr, _) = m.send(server, &mut ss, req, spec.msg_bytes, client);
        let done = m.receive(client, &mut cs, &arr, spec.msg_bytes);
        if i >= spec.warmup {
            lat.push(done - t);
        }
        frames = f;
        t = done;
    }
    Ok(result(lat, &m, &ss, frames))
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
    /// `h`'s process sends `n` bytes at `t`: when each segment (or, for an LRO receiver,
    /// each TSO burst) arrives at `peer`'s NIC, with its payload bytes; and the frames.
    fn send(
        &mut self,
        h: &mut NetHost,
        side: &mut Side,
        t: Time,
        n: u64,
        peer: &NetHost,
    ) -> (Vec<(Time, u64)>, u64) {
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
        (arrivals, frames)
    }

    /// `h` receives the segments of an `n`-byte message arriving at its NIC at the given
    /// times: when its process has copied the message out.
    fn receive(
        &mut self,
        h: &mut NetHost,
        side: &mut Side,
        arrivals: &[(Time, u64)],
        n: u64,
    ) -> Time {
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

/// What a transaction of [`Transactions`] waits for next.
#[derive(Clone, Copy, Debug)]
enum Ev {
    /// The client's process sends a request.
    Request,
    /// The request's first segment is at the server's NIC.
    ServerReceive,
    /// The server's process sends the response.
    Response,
    /// The response's first segment is at the client's NIC.
    ClientReceive,
    /// The measurement window starts.
    Warm,
}

/// TCP_RR as a component of a [`NetWorld`]: the same transaction as [`run`]'s, one event
/// per side's send and receive, on the world's memory systems and NICs of its hosts, so
/// a TCP_STREAM or memcached on them queues the request and response in the same DRAM,
/// LLC, interconnect, PCIe links and port, in time order. Transactions run back to back
/// from time zero; those that start in the window and end within it are measured. The
/// process's RX queue and interrupt moderation are its own (its flow hashes to its own
/// queue, as netperf's does beside other flows).
pub struct Transactions {
    /// Client, server.
    hosts: [NetHost; 2],
    at: [Shared; 2],
    sides: [Side; 2],
    rr: Rr,
    msg_bytes: u64,
    warmup: Time,
    window: Time,
    timers: Timers<Ev>,
    /// When the transaction under way started.
    started: Time,
    /// Where the message under way reaches its receiver's NIC (`Rr::send`).
    arrivals: Vec<(Time, u64)>,
    frames: u64,
    /// Round trips of the measured transactions.
    lat: Vec<Time>,
    /// Events handled.
    pub events: u64,
}

impl<'b> Component<NetWorld<'b>> for Transactions {
    fn notify(&mut self, w: &mut NetWorld<'b>, me: ComponentId, event: Event) {
        let Event::Timer(key) = event else {
            return;
        };
        let ev = self.timers.take(key);
        let t = w.net.now();
        self.events += 1;
        // The workloads beside first: all reserve DRAM, LLC and interconnect in time order.
        w.before_event(t, matches!(ev, Ev::Warm));
        let [client, server] = &mut self.hosts;
        w.lend(self.at[0], client);
        w.lend(self.at[1], server);
        let next = self.handle(t, ev);
        let [client, server] = &mut self.hosts;
        w.lend(self.at[0], client);
        w.lend(self.at[1], server);
        if let Some((at, ev)) = next {
            self.timers.at(&mut w.net, at.max(t), me, ev);
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
        if client.host == server.host {
            return Err("a TCP_RR's client and server are two hosts".into());
        }
        Ok(Transactions {
            hosts: [client, server],
            at: [Shared::default(); 2],
            sides: [Side::default(), Side::default()],
            rr: Rr {
                mss: frame::mss(mtu) as u64,
                misses: 0,
                ns: 0,
            },
            msg_bytes,
            warmup,
            window,
            timers: Timers::new(),
            started: Time::ZERO,
            arrivals: Vec::new(),
            frames: 0,
            lat: Vec::new(),
            events: 0,
        })
    }

    /// Joins `w` as component `me`: its hosts' memory systems and NICs are the world's
    /// from now on, and the first request leaves at time zero.
    pub fn start(&mut self, w: &mut NetWorld<'_>, me: ComponentId) -> Result<(), String> {
        self.rr.ns = w.start_model(self.warmup, self.window)?;
        self.at = [w.join(&self.hosts[0]), w.join(&self.hosts[1])];
        self.timers.at(&mut w.net, Time::ZERO, me, Ev::Request);
        self.timers.at(&mut w.net, self.warmup, me, Ev::Warm);
        Ok(())
    }

    /// Where the server shares its memory system and NIC in the world (after `start`).
    pub fn server(&self) -> Shared {
        self.at[1]
    }

    /// One event on the hosts the world has lent: what comes next, and when.
    fn handle(&mut self, t: Time, ev: Ev) -> Option<(Time, Ev)> {
        let [client, server] = &mut self.hosts;
        let [cs, ss] = &mut self.sides;
        let n = self.msg_bytes;
        match ev {
            Ev::Warm => {
                self.rr.misses = 0;
                ss.coalesce.reset_count();
                None
            }
            Ev::Request => {
                self.started = t;
                let (arrivals, frames) = self.rr.send(client, cs, t, n, server);
                self.frames = frames;
                self.arrivals = arrivals;
                Some((self.arrivals[0].0, Ev::ServerReceive))
            }
            Ev::ServerReceive => {
                Some((self.rr.receive(server, ss, &self.arrivals, n), Ev::Response))
            }
            Ev::Response => {
                (self.arrivals, _) = self.rr.send(server, ss, t, n, client);
                Some((self.arrivals[0].0, Ev::ClientReceive))
            }
            Ev::ClientReceive => {
                let done = self.rr.receive(client, cs, &self.arrivals, n);
                let end = self.warmup + self.window;
                if self.started >= self.warmup && done <= end {
                    self.lat.push(done - self.started);
                }
                (done < end).then_some((done, Ev::Request))
            }
        }
    }

    /// How many transactions were measured.
    pub fn measured(&self) -> u32 {
        self.lat.len() as u32
    }

    /// The measured transactions' result; an error when the window held none.
    pub fn result(&self) -> Result<RrResult, String> {
        if self.lat.is_empty() {
            return Err(format!(
                "no TCP_RR transaction both started and ended within the {:?} window",
                self.window
            ));
        }
        Ok(result(
            self.lat.clone(),
            &self.rr,
            &self.sides[1],
            self.frames,
        ))
    }
}
