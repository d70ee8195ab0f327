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
use sim::Time;

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
    let frag_bytes =
        |i: usize| spec.pkt_bytes / n_frags + if i == 0 { spec.pkt_bytes % n_frags } else { 0 };
    let c = h.costs.clone();
    let sock = h.core.socket;
    let node = h.node;
    let end = spec.warmup + spec.window;
    let ip = spec.pkt_bytes as u32 - frame::ETH_HEADER - frame::FCS;
    let mut cqes: VecDeque<(Time, u64)> = VecDeque::new();
    let (mut cur, mut slot, mut sent, mut misses) = (Time::ZERO, 0u64, 0u64, 0u64);
    let mut warm = false;
    let (mut sent_w, mut misses_w) = (0u64, 0u64);
    let llc = h.mem.params().llc_latency;
    for (i, f) in frags.iter().enumerate() {
        h.mem
            .cpu_write(cur, f.node, buf::SKB + i as u64, frag_bytes(i));
    }
    while cur < end {
        if !warm && cur >= spec.warmup {
            warm = true;
            h.reset_counters();
            sent_w = sent;
            misses_w = misses;
        }
        // Reap what the NIC has completed; wait for the oldest when the ring is full.
        if cqes.len() as u64 >= RING {
            cur = cur.max(cqes[0].0);
        }
        let start = cur;
        while let Some(&(vis, s)) = cqes.front() {
            if vis > cur {
                break;
            }
            cqes.pop_front();
            let stall = h
                .mem
                .cpu_read(cur, sock, node, buf::TX_CQE + s, CQE_BYTES, true);
            if stall > llc {
                misses += 1;
            }
            cur += stall;
        }
        cur += h.core.cycles(c.tx_packet_cycles);
        let s = slot % RING;
        slot += 1;
        h.mem
            .cpu_write_home(cur, sock, node, buf::TX_DESC + s, DESC_BYTES);
        // The NIC requests every fragment once it has the descriptor, each through the
        // fragment's PF; the packet goes out when the last has arrived.
        let payload: Vec<(usize, HostBuf)> = frags
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let b = HostBuf {
                    node: f.node,
                    buf: buf::SKB + i as u64,
                    bytes: frag_bytes(i),
                };
                (f.pf, b)
            })
            .collect();
        let desc = HostBuf {
            node,
            buf: buf::TX_DESC + s,
            bytes: DESC_BYTES,
        };
        let data = h.nic.fetch_send(cur, &mut h.mem, h.pf, desc, &payload);
        // The NIC completes a packet once it has left the port.
        let on_wire = h.nic.tx_port.reserve(data, frame::wire_bytes(ip) as u64);
        let pf = &mut h.nic.pfs[h.pf];
        let cqe = pf.dma_write(on_wire, &mut h.mem, node, buf::TX_CQE + s, CQE_BYTES);
        cqes.push_back((cqe, s));
        sent += 1;
        h.core.finish(start, cur);
    }
    let w = spec.window.as_secs_f64();
    let n = sent - sent_w;
    Ok(PktgenResult {
        mpps: n as f64 / w / 1e6,
        throughput_gbps: n as f64 * spec.pkt_bytes as f64 * 8.0 / w / 1e9,
        mem_gbps: h.mem.dram_total() as f64 * 8.0 / w / 1e9,
        cpu_util: (h.core.busy.as_secs_f64() / w).min(1.0),
        cqe_misses_per_packet: (misses - misses_w) as f64 / n.max(1) as f64,
        interconnect_gbps: (0..sockets)
            .map(|s| h.mem.interconnect_bytes(s))
            .sum::<u64>() as f64
            * 8.0
            / w
            / 1e9,
        packets: n,
    })
}
