//! sockperf ping-pong over UDP between two hosts, one core each, interrupt coalescing off:
//! the client sends a datagram of `msg_bytes`, the server's process receives it and sends
//! it back, one outstanding at a time. Like sockperf, the latency reported is half the
//! round trip. Every line the stacks and NICs touch is priced by `sim::memsys` where it
//! is (DDIO share, CPU share, local or remote DRAM, and what background streams leave of
//! the interconnect and DRAM).
//!
//! Costs come from the platform's netstack table, reused for UDP (assumptions, stated):
//! a send is `syscall_cycles` + the copy + `tx_send_cycles` (socket send to the driver's
//! doorbell: UDP's path is no longer than TCP's), a receive is `irq_cycles` + the
//! completion reads + `rx_segment_cycles` (driver receive and IP/UDP of one packet) +
//! the process's wakeup (`wakeup_cycles`), `syscall_cycles` and the copy. One
//! datagram is one frame (`msg_bytes` ≤ the MTU's payload). There is no variance
//! source, so the 99th percentile equals the mean in steady state.

use devices::nic::frame;
use sim::memsys::LINE;
use sim::Time;

use super::round_trip::{Exchange, RoundTrips};
use super::{buf, NetHost, CQE_BYTES, DESC_BYTES, RING};

/// IPv4 and UDP headers.
pub const UDP_IP_HEADERS: u32 = 20 + 8;

#[derive(Clone, Copy, Debug)]
pub struct UdpSpec {
    pub msg_bytes: u64,
    /// IP MTU.
    pub mtu: u32,
    /// Round trips before the measured ones (rings and caches reach steady state).
    pub warmup: u32,
    pub round_trips: u32,
}

#[derive(Clone, Debug, Default)]
pub struct UdpResult {
    /// Half the mean round trip, µs (sockperf's latency).
    pub latency_us: f64,
    /// Half the 99th-percentile round trip, µs.
    pub p99_us: f64,
    /// Dependent completion reads that missed the LLC, per round trip (both sides).
    pub cqe_misses: f64,
}

/// One side's rings.
#[derive(Default)]
pub struct Side {
    tx_slot: u64,
    rx_slot: u64,
    /// The completion of the last send, reaped by the next interrupt.
    tx_cqe: Option<u64>,
}

/// The message size a ping-pong over `mtu` can carry.
fn check(msg_bytes: u64, mtu: u32) -> Result<(), String> {
    let max = mtu.saturating_sub(UDP_IP_HEADERS) as u64;
    if msg_bytes == 0 || msg_bytes > max {
        return Err(format!(
            "msg_bytes {msg_bytes} must be in 1..={max} (one datagram in one {mtu}-byte MTU frame)"
        ));
    }
    Ok(())
}

/// Runs the ping-pong between `client` and `server` (each with its NIC, PF, core, node).
pub fn ping_pong(
    client: &mut NetHost,
    server: &mut NetHost,
    spec: UdpSpec,
) -> Result<UdpResult, String> {
    check(spec.msg_bytes, spec.mtu)?;
    if spec.round_trips == 0 {
        return Err("round_trips must be > 0".into());
    }
    let (mut cs, mut ss) = (Side::default(), Side::default());
    let mut u = Udp::new(spec.msg_bytes);
    let mut t = Time::ZERO;
    let mut rtt = Vec::with_capacity(spec.round_trips as usize);
    for i in 0..spec.warmup + spec.round_trips {
        if i == spec.warmup {
            u.misses = 0;
        }
        let arr = u.send(client, &mut cs, t, server);
        let req = u.receive(server, &mut ss, arr);
        let arr = u.send(server, &mut ss, req, client);
        let done = u.receive(client, &mut cs, arr);
        if i >= spec.warmup {
            rtt.push(done - t);
        }
        t = done;
    }
    Ok(result(rtt, u.misses))
}

/// sockperf's figures from the measured round trips `rtt` (at least one).
fn result(mut rtt: Vec<Time>, misses: u64) -> UdpResult {
    let n = rtt.len() as f64;
    let mean = rtt.iter().map(|d| d.as_secs_f64()).sum::<f64>() / n;
    rtt.sort();
    let p99 = rtt[((rtt.len() * 99).div_ceil(100)).saturating_sub(1)];
    UdpResult {
        latency_us: mean * 1e6 / 2.0,
        p99_us: p99.as_secs_f64() * 1e6 / 2.0,
        cqe_misses: misses as f64 / n,
    }
}

/// The UDP ping-pong's exchange: one datagram of `msg_bytes` each way.
pub struct Udp {
    msg_bytes: u64,
    /// Dependent completion reads that missed the LLC.
    misses: u64,
    /// The buffer namespace of the model in its world (0 alone).
    ns: u64,
}

/// The UDP ping-pong as a component of a world (`round_trip`).
pub type PingPongs = RoundTrips<Udp>;

impl Exchange for Udp {
    type Side = Side;

    fn send(
        &mut self,
        h: &mut NetHost,
        side: &mut Side,
        t: Time,
        peer: &NetHost,
    ) -> Vec<(Time, u64)> {
        vec![(Udp::send(self, h, side, t, peer), self.msg_bytes)]
    }

    fn receive(&mut self, h: &mut NetHost, side: &mut Side, arrivals: &[(Time, u64)]) -> Time {
        Udp::receive(self, h, side, arrivals[0].0)
    }

    fn warm(&mut self, _server: &mut Side) {
        self.misses = 0;
    }

    fn set_namespace(&mut self, ns: u64) {
        self.ns = ns;
    }
}

impl PingPongs {
    /// The ping-pong from `client` to `server` (views of two hosts) with `msg_bytes` each
    /// way over `mtu`, measuring `window` after `warmup`.
    pub fn new(
        client: NetHost,
        server: NetHost,
        msg_bytes: u64,
        mtu: u32,
        warmup: Time,
        window: Time,
    ) -> Result<PingPongs, String> {
        check(msg_bytes, mtu)?;
        RoundTrips::of(Udp::new(msg_bytes), client, server, warmup, window)
    }

    /// The measured round trips' figures; an error when the window held none.
    pub fn result(&self) -> Result<UdpResult, String> {
        Ok(result(self.round_trips()?, self.x.misses))
    }
}

impl Udp {
    fn new(msg_bytes: u64) -> Udp {
        Udp {
            msg_bytes,
            misses: 0,
            ns: 0,
        }
    }

    /// `h`'s process sends the datagram at `t`: when the frame is in `peer`'s NIC.
    fn send(&mut self, h: &mut NetHost, side: &mut Side, t: Time, peer: &NetHost) -> Time {
        let n = self.msg_bytes;
        let ns = self.ns;
        let c = h.costs.clone();
        let start = h.core.start(t);
        let sock = h.core.socket;
        let mut cur = start
            + h.core
                .cycles(c.syscall_cycles + n.div_ceil(LINE) * c.copy_line_cycles);
        cur = cur + h.mem.cpu_read(cur, sock, h.node, ns + buf::USER, n, false);
        let slot = side.tx_slot % RING;
        side.tx_slot += 1;
        let headers = (frame::ETH_HEADER + UDP_IP_HEADERS) as u64;
        h.mem
            .cpu_write_home(cur, sock, h.node, ns + buf::SKB + slot, n + headers);
        cur += h.core.cycles(c.tx_send_cycles);
        h.mem
            .cpu_write_home(cur, sock, h.node, ns + buf::TX_DESC + slot, DESC_BYTES);
        let p = h.nic.params.clone();
        let data = super::fetch_send(
            h,
            cur,
            ns + buf::TX_DESC + slot,
            ns + buf::SKB + slot,
            n + headers,
        );
        let ip_bytes = n as u32 + UDP_IP_HEADERS;
        let on_wire = h
            .nic
            .tx_port
            .reserve(data, frame::wire_bytes(ip_bytes) as u64);
        let pf = &mut h.nic.pfs[h.pf];
        pf.dma_write(data, &mut h.mem, h.node, ns + buf::TX_CQE + slot, CQE_BYTES);
        side.tx_cqe = Some(slot);
        h.core.finish(start, cur);
        on_wire + p.wire + peer.nic.params.latency
    }

    /// `h` receives the datagram arriving at its NIC at `at`: when its process has copied
    /// it out.
    fn receive(&mut self, h: &mut NetHost, side: &mut Side, at: Time) -> Time {
        let n = self.msg_bytes;
        let ns = self.ns;
        let misses = &mut self.misses;
        let c = h.costs.clone();
        let sock = h.core.socket;
        let slot = side.rx_slot % RING;
        side.rx_slot += 1;
        let frame_bytes = frame::frame_in_memory(n as u32 + UDP_IP_HEADERS) as u64;
        let pf = &mut h.nic.pfs[h.pf];
        let data = pf.dma_write(
            at,
            &mut h.mem,
            h.node,
            ns + buf::RX_DATA + (slot << 6),
            frame_bytes,
        );
        let visible = pf.dma_write(data, &mut h.mem, h.node, ns + buf::RX_CQE + slot, CQE_BYTES);
        // Coalescing off: the completion interrupts; the handler reaps the last send's
        // completion and this one.
        let start = h.core.start(visible);
        let mut cur = start + h.core.cycles(c.irq_cycles);
        if let Some(tx) = side.tx_cqe.take() {
            cur = cur + dependent(h, cur, ns + buf::TX_CQE + tx, misses);
        }
        cur = cur + dependent(h, cur, ns + buf::RX_CQE + slot, misses);
        cur += h.core.cycles(
            c.rx_segment_cycles
                + c.wakeup_cycles
                + c.syscall_cycles
                + n.div_ceil(LINE) * c.copy_line_cycles,
        );
        cur = cur
            + h.mem.cpu_read(
                cur,
                sock,
                h.node,
                ns + buf::RX_DATA + (slot << 6),
                frame_bytes,
                false,
            );
        h.mem.cpu_write_home(cur, sock, h.node, ns + buf::USER, n);
        h.core.finish(start, cur);
        cur
    }
}

/// A dependent read of a completion entry; counts misses.
fn dependent(h: &mut NetHost, at: Time, b: u64, misses: &mut u64) -> Time {
    let sock = h.core.socket;
    if !h.mem.cached(sock, b) {
        *misses += 1;
    }
    h.mem.cpu_read(at, sock, h.node, b, CQE_BYTES, true)
}
