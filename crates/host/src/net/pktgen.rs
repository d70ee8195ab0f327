//! The in-kernel packet generator on one core: the same packet (one buffer) posted again
//! and again; per packet the core writes a descriptor and rings the doorbell, the NIC
//! reads descriptor and packet and writes a completion entry, which the core reads back
//! (one dependent line, priced where it is: docs/hardware.md §1's ≈ 80 ns miss when the NIC
//! is remote, so its write went to DRAM instead of the LLC).
//!
//! A packet may be several fragments (pages) on different nodes; each fragment is read
//! by the PF its transmit descriptor names — the queue's PF, or with IOctoSG's per-
//! fragment hint (`systems::ioctopus::fragment_pf`) another PF of the same NIC.

use std::collections::VecDeque;

use devices::nic::{frame, HostBuf};
use sim::component::Component;
use sim::memsys::MemSys;
use sim::net::{ComponentId, Event};
use sim::timers::Timers;
use sim::Time;

use super::world::{NetWorld, Shared};
use super::{buf, NetHost, CQE_BYTES, DESC_BYTES, RING};

#[derive(Clone, Debug)]
pub struct PktgenSpec {
    /// Ethernet frame size, header to FCS (64 … 1518).
    pub pkt_bytes: u64,
    pub warmup: Time,
    pub window: Time,
    /// The packet's fragments in order (equal shares of the frame, the first takes the
    /// remainder); empty: one fragment on the host's node read by its queue's PF.
    pub fragments: Vec<Fragment>,
}

/// A fragment of the packet: the node its page is on (written there by a core of that
/// node, so it sits in that socket's LLC) and the PF that reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fragment {
    pub node: u32,
    pub pf: usize,
}

#[derive(Clone, Debug, Default)]
pub struct PktgenResult {
    pub mpps: f64,
    /// Frame bits per second on the wire, Gb/s (frame bytes, no preamble or gap).
    pub throughput_gbps: f64,
    pub mem_gbps: f64,
    pub cpu_util: f64,
    /// Completion reads that missed the LLC, per packet, in the window.
    pub cqe_misses_per_packet: f64,
    /// Bytes over the CPU interconnect (both directions), Gb/s.
    pub interconnect_gbps: f64,
    pub packets: u64,
}

/// Runs pktgen on `h` (its PF, core and node).
pub fn run(h: &mut NetHost, spec: PktgenSpec) -> Result<PktgenResult, String> {
    let mut g = Gen::new(h, spec)?;
    g.prime(h);
    while g.cur < g.end() {
        if !g.warm && g.cur >= g.spec.warmup {
            h.reset_counters(g.spec.warmup);
            g.mark_warm();
        }
        g.step(h);
    }
    Ok(g.result(&h.mem, h.core.busy))
}

/// pktgen's loop between packets: where its core is, the ring and the completions it has
/// still to reap, and its counts.
struct Gen {
    spec: PktgenSpec,
    frags: Vec<Fragment>,
    /// The model's buffer namespace in its world (0 alone).
    ns: u64,
    /// What the NIC reads for every packet: each fragment's PF and buffer (`prime`).
    payload: Vec<(usize, HostBuf)>,
    cqes: VecDeque<(Time, u64)>,
    /// When the core is free for the next packet.
    cur: Time,
    slot: u64,
    sent: u64,
    misses: u64,
    warm: bool,
    /// Packets sent and completion misses when the window started.
    sent_w: u64,
    misses_w: u64,
}

impl Gen {
    fn new(h: &NetHost, spec: PktgenSpec) -> Result<Gen, String> {
        if !(64..=1518).contains(&spec.pkt_bytes) {
            return Err(format!(
                "pkt_bytes {} must be an Ethernet frame size in 64..=1518",
                spec.pkt_bytes
            ));
        }
        let frags = if spec.fragments.is_empty() {
            vec![Fragment {
                node: h.node,
                pf: h.pf,
            }]
        } else {
            spec.fragments.clone()
        };
        let sockets = h.mem.params().sockets;
        for f in &frags {
            if f.pf >= h.nic.pfs.len() || f.node >= sockets {
                return Err(format!(
                    "fragment on node {} via pf{}: the host has {sockets} node(s) and its NIC {} PF(s)",
                    f.node,
                    f.pf,
                    h.nic.pfs.len()
                ));
            }
        }
        let n_frags = frags.len() as u64;
        if spec.pkt_bytes < n_frags * 64 {
            return Err(format!(
                "pkt_bytes {}: {n_frags} fragments need at least 64 B each",
                spec.pkt_bytes
            ));
        }
        Ok(Gen {
            spec,
            frags,
            ns: 0,
            payload: Vec::new(),
            cqes: VecDeque::new(),
            cur: Time::ZERO,
            slot: 0,
            sent: 0,
            misses: 0,
            warm: false,
            sent_w: 0,
            misses_w: 0,
        })
    }

    fn end(&self) -> Time {
        self.spec.warmup + self.spec.window
    }

    fn frag_bytes(&self, i: usize) -> u64 {
        let n = self.frags.len() as u64;
        self.spec.pkt_bytes / n + if i == 0 { self.spec.pkt_bytes % n } else { 0 }
    }

    /// The packet's fragments written once, each by a core of its node; the same packet
    /// is posted every time, so what the NIC reads is fixed here (in the model's namespace).
    fn prime(&mut self, h: &mut NetHost) {
        for (i, f) in self.frags.iter().enumerate() {
            let bytes = self.frag_bytes(i);
            h.mem
                .cpu_write(self.cur, f.node, self.ns + buf::SKB + i as u64, bytes);
        }
        self.payload = (0..self.frags.len())
            .map(|i| {
                let f = self.frags[i];
                let b = HostBuf {
                    node: f.node,
                    buf: self.ns + buf::SKB + i as u64,
                    bytes: self.frag_bytes(i),
                };
                (f.pf, b)
            })
            .collect();
    }

    /// The window starts: the counts so far are the warm-up's.
    fn mark_warm(&mut self) {
        self.warm = true;
        self.sent_w = self.sent;
        self.misses_w = self.misses;
    }

    /// The core reaps what the NIC has completed and posts the next packet.
    fn step(&mut self, h: &mut NetHost) {
        let sock = h.core.socket;
        let node = h.node;
        let ns = self.ns;
        let llc = h.mem.params().llc_latency;
        let ip = self.spec.pkt_bytes as u32 - frame::ETH_HEADER - frame::FCS;
        let mut cur = self.cur;
        // Reap what the NIC has completed; wait for the oldest when the ring is full.
        if self.cqes.len() as u64 >= RING {
            cur = cur.max(self.cqes[0].0);
        }
        let start = cur;
        while let Some(&(vis, s)) = self.cqes.front() {
            if vis > cur {
                break;
            }
            self.cqes.pop_front();
            let stall = h
                .mem
                .cpu_read(cur, sock, node, ns + buf::TX_CQE + s, CQE_BYTES, true);
            if stall > llc {
                self.misses += 1;
            }
            cur += stall;
        }
        cur += h.core.cycles(h.costs.tx_packet_cycles);
        let s = self.slot % RING;
        self.slot += 1;
        h.mem
            .cpu_write_home(cur, sock, node, ns + buf::TX_DESC + s, DESC_BYTES);
        // The NIC requests every fragment once it has the descriptor, each through the
        // fragment's PF; the packet goes out when the last has arrived.
        let desc = HostBuf {
            node,
            buf: ns + buf::TX_DESC + s,
            bytes: DESC_BYTES,
        };
        let data = h.nic.fetch_send(cur, &mut h.mem, h.pf, desc, &self.payload);
        // The NIC completes a packet once it has left the port.
        let on_wire = h.nic.tx_port.reserve(data, frame::wire_bytes(ip) as u64);
        let pf = &mut h.nic.pfs[h.pf];
        let cqe = pf.dma_write(on_wire, &mut h.mem, node, ns + buf::TX_CQE + s, CQE_BYTES);
        self.cqes.push_back((cqe, s));
        self.sent += 1;
        h.core.finish(start, cur);
        self.cur = cur;
    }

    /// The window's figures: `mem` the host's memory system, `busy` the core's time.
    fn result(&self, mem: &MemSys, busy: Time) -> PktgenResult {
        let w = self.spec.window.as_secs_f64();
        let n = self.sent - self.sent_w;
        let sockets = mem.params().sockets;
        PktgenResult {
            mpps: n as f64 / w / 1e6,
            throughput_gbps: n as f64 * self.spec.pkt_bytes as f64 * 8.0 / w / 1e9,
            mem_gbps: mem.dram_total() as f64 * 8.0 / w / 1e9,
            cpu_util: (busy.as_secs_f64() / w).min(1.0),
            cqe_misses_per_packet: (self.misses - self.misses_w) as f64 / n.max(1) as f64,
            interconnect_gbps: (0..sockets).map(|s| mem.interconnect_bytes(s)).sum::<u64>() as f64
                * 8.0
                / w
                / 1e9,
            packets: n,
        }
    }
}

/// What the generator waits for next.
#[derive(Clone, Copy, Debug)]
enum Ev {
    /// Its core is free for the next packet.
    Packet,
    /// The measurement window starts.
    Warm,
}

/// pktgen as a component of a [`NetWorld`]: the same loop, one event per packet, on the
/// world's memory system and NIC of its host, so a TCP_STREAM, memcached or ping-pong on
/// the host takes the same port, PCIe links, DDIO share, LLC, DRAM and interconnect in
/// time order. Its row's `mem_bw_gbit_s` and `interconnect_gbit_s` are the host's.
pub struct Generator {
    host: NetHost,
    at: Shared,
    g: Gen,
    timers: Timers<Ev>,
    /// Events handled.
    pub events: u64,
}

impl<'b> Component<NetWorld<'b>> for Generator {
    fn notify(&mut self, w: &mut NetWorld<'b>, me: ComponentId, event: Event) {
        let Event::Timer(key) = event else {
            return;
        };
        let ev = self.timers.take(key);
        let t = w.net.now();
        self.events += 1;
        w.before_event(t, matches!(ev, Ev::Warm));
        match ev {
            Ev::Warm => {
                self.host.core.restart(t);
                self.g.mark_warm();
            }
            Ev::Packet => {
                w.lend(self.at, &mut self.host);
                self.g.step(&mut self.host);
                w.lend(self.at, &mut self.host);
                if self.g.cur < self.g.end() {
                    self.timers
                        .at(&mut w.net, self.g.cur.max(t), me, Ev::Packet);
                }
            }
        }
    }
}

impl Generator {
    /// pktgen on `h` (its PF, core and node) as `spec` says.
    pub fn new(h: NetHost, spec: PktgenSpec) -> Result<Generator, String> {
        let g = Gen::new(&h, spec)?;
        Ok(Generator {
            host: h,
            at: Shared::default(),
            g,
            timers: Timers::new(),
            events: 0,
        })
    }

    /// Joins `w` as component `me`: the host's memory system and NIC are the world's from
    /// now on; the packet is written and the first posted at time zero.
    pub fn start(&mut self, w: &mut NetWorld<'_>, me: ComponentId) -> Result<(), String> {
        self.g.ns = w.start_model(self.g.spec.warmup, self.g.spec.window)?;
        self.at = w.join(&self.host);
        w.lend(self.at, &mut self.host);
        self.g.prime(&mut self.host);
        w.lend(self.at, &mut self.host);
        self.timers.at(&mut w.net, Time::ZERO, me, Ev::Packet);
        self.timers.at(&mut w.net, self.g.spec.warmup, me, Ev::Warm);
        Ok(())
    }

    /// Where the host shares its memory system and NIC in the world (after `start`).
    pub fn at(&self) -> Shared {
        self.at
    }

    /// The window's figures (after the world has run).
    pub fn result(&self, w: &NetWorld<'_>) -> PktgenResult {
        self.g.result(w.mem(self.at), self.host.core.busy)
    }
}
