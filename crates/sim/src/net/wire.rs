//! Wires: one direction of a link, its FIFO serialization and propagation, and the
//! credit-based flow control at its receiver (credits returned by UpdateFC after the
//! credit-update latency).

use super::tlp::{Ev, Kind};
use super::{Net, CLASS_COMPLETION, CLASS_NONPOSTED, CLASS_POSTED, NONE};
use crate::pcie::serialize;
use crate::pcie::DLLP_PER_TLP;
use crate::time::Time;
use std::collections::VecDeque;

/// One direction of a link.
#[derive(Clone, Debug)]
pub struct Wire {
    pub name: String,
    pub ps_per_kib: u64,
    pub latency: Time,
    /// Credits (TLP headers) the receiver advertises per class; 0 = infinite.
    pub credit_cap: [u16; 3],
    pub(super) credits: [u16; 3],
    /// Credits on their way back (UpdateFC), as (time, credits), oldest first: taken in
    /// when a TLP next looks, so that a credit costs an event only when a TLP waits.
    pub(super) returns: [VecDeque<(Time, u16)>; 3],
    /// An `Ev::Credit` wake is scheduled for the class (at most one at a time).
    pub(super) wake: [bool; 3],
    pub(super) queues: [VecDeque<u32>; 3],
    pub(super) free_at: Time,
    /// The opposite direction, which carries this direction's ACK/UpdateFC DLLPs.
    pub reverse: u32,
    /// Whether TLPs pay PCIe framing/DLLP costs here (not on a CPU interconnect).
    pub pcie: bool,
    pub bytes: u64,
    pub payload_bytes: u64,
    pub tlps: u64,
    /// The link is down: a TLP that would start across it fails here (`TlpFailure`).
    pub down: bool,
}

impl Wire {
    /// The rate, 10^9 bytes per second (the inverse of `ps_per_kib`).
    pub fn gbytes_per_s(&self) -> f64 {
        1024.0 * 1000.0 / self.ps_per_kib as f64
    }

    /// Takes in the credits of `class` returned by `now`.
    pub(super) fn absorb_returns(&mut self, class: usize, now: Time) {
        while let Some(&(at, n)) = self.returns[class].front() {
            if at > now {
                break;
            }
            self.returns[class].pop_front();
            self.credits[class] += n;
        }
    }

    /// (bytes, payload bytes) serialized by `now`: what was committed, less the backlog
    /// still queued at the transmitter (payload prorated).
    pub(super) fn sent_by(&self, now: Time) -> (u64, u64) {
        let backlog_ps = self.free_at.as_ps().saturating_sub(now.as_ps());
        if backlog_ps == 0 || self.ps_per_kib == 0 || self.bytes == 0 {
            return (self.bytes, self.payload_bytes);
        }
        let backlog = (backlog_ps as u128 * 1024 / self.ps_per_kib as u128) as u64;
        let sent = self.bytes.saturating_sub(backlog);
        let payload = (self.payload_bytes as u128 * sent as u128 / self.bytes as u128) as u64;
        (sent, payload)
    }
}

impl Net {
    /// Adds both directions of a link; returns (forward, reverse) wire ids.
    pub fn add_link(
        &mut self,
        name: &str,
        ps_per_kib: u64,
        latency: Time,
        credits: [u16; 3],
        pcie: bool,
    ) -> (u32, u32) {
        let a = self.wires.len() as u32;
        for (i, dir) in ["→", "←"].iter().enumerate() {
            self.wires.push(Wire {
                name: format!("{name} {dir}"),
                ps_per_kib,
                latency,
                credit_cap: credits,
                credits,
                returns: Default::default(),
                wake: [false; 3],
                queues: Default::default(),
                free_at: Time::ZERO,
                reverse: if i == 0 { a + 1 } else { a },
                pcie,
                bytes: 0,
                payload_bytes: 0,
                tlps: 0,
                down: false,
            });
        }
        (a, a + 1)
    }

    pub fn set_credits(&mut self, wire: u32, credits: [u16; 3]) {
        let w = &mut self.wires[wire as usize];
        w.credit_cap = credits;
        w.credits = credits;
        w.returns = Default::default();
    }

    /// Takes a wire (one direction of a link) down or up. A TLP reaching a dead wire
    /// fails there: a posted write is dropped, a read request is answered with
    /// Unsupported Request from that point, a completion is lost (its read times out).
    /// TLPs already on the wire arrive.
    pub fn set_wire_down(&mut self, wire: u32, down: bool) {
        self.wires[wire as usize].down = down;
        if down {
            // TLPs waiting at the port for credits meet the dead link now.
            for class in 0..3 {
                while let Some(t) = self.wires[wire as usize].queues[class].pop_front() {
                    self.dead_wire(t);
                }
            }
        }
    }

    pub fn wire(&self, w: u32) -> &Wire {
        &self.wires[w as usize]
    }

    /// Every wire (each link direction), in the order they were added.
    pub fn wires(&self) -> impl Iterator<Item = &Wire> {
        self.wires.iter()
    }

    pub fn fc_extra(&self) -> Time {
        self.fc_extra
    }

    /// Sets the credit-update latency (the platform's `fc_update_ns`).
    pub fn set_fc_extra(&mut self, t: Time) {
        self.fc_extra = t;
    }

    /// `n` credits of `wire`'s receiver are freed now; they are back at the transmitter
    /// after the UpdateFC's trip. An event wakes the transmitter then only if a TLP waits.
    pub(super) fn release_credit(&mut self, wire: u32, class: usize, n: u16) {
        if wire == NONE || self.wires[wire as usize].credit_cap[class] == 0 {
            return;
        }
        let w = &mut self.wires[wire as usize];
        let at = self.engine.now() + w.latency + self.fc_extra;
        w.returns[class].push_back((at, n));
        // Returns are in time order: a pending wake comes no later than this one.
        if !w.queues[class].is_empty() && !w.wake[class] {
            w.wake[class] = true;
            self.engine
                .schedule_at(at, Ev::Credit(wire, class as u8))
                .expect("future");
        }
    }

    /// Sends the TLPs waiting at `w` for credits of `class` that now have them; if some
    /// still wait, wakes again when the next credits return.
    pub(super) fn pump_credits(&mut self, w: u32, class: usize) {
        let now = self.now();
        loop {
            let wire = &mut self.wires[w as usize];
            wire.absorb_returns(class, now);
            let Some(&next) = wire.queues[class].front() else {
                return;
            };
            let need = self.tlps[next as usize].count;
            if wire.credits[class] < need {
                if let (Some(&(at, _)), false) = (wire.returns[class].front(), wire.wake[class]) {
                    wire.wake[class] = true;
                    self.engine
                        .schedule_at(at, Ev::Credit(w, class as u8))
                        .expect("future");
                }
                return;
            }
            wire.queues[class].pop_front();
            wire.credits[class] -= need;
            self.transmit(next, w);
        }
    }

    pub(super) fn class_of(k: Kind) -> usize {
        match k {
            Kind::Write => CLASS_POSTED,
            Kind::Read => CLASS_NONPOSTED,
            Kind::Completion => CLASS_COMPLETION,
        }
    }

    /// Starts a TLP on a wire now (credit already taken).
    pub(super) fn transmit(&mut self, t: u32, w: u32) {
        let now = self.now();
        let tlp = self.tlps[t as usize];
        let class = Self::class_of(tlp.kind);
        let held = tlp.held;
        let wire = &mut self.wires[w as usize];
        let start = now.max(wire.free_at);
        let (first, last, bytes) = tlp.wire_sizes(wire.pcie);
        let first_end = start + serialize(first, wire.ps_per_kib);
        // A train's TLPs follow back to back; its last cannot leave before it arrived.
        let end = if tlp.count == 1 {
            first_end
        } else {
            (start + serialize(bytes, wire.ps_per_kib))
                .max(now + tlp.spread + serialize(last, wire.ps_per_kib))
        };
        wire.free_at = end;
        wire.bytes += bytes as u64;
        wire.tlps += tlp.count as u64;
        if tlp.kind != Kind::Read && !tlp.ur {
            wire.payload_bytes += tlp.payload as u64;
        }
        let arrive = first_end + wire.latency;
        let (pcie, rev) = (wire.pcie, wire.reverse);
        if pcie {
            let acks = DLLP_PER_TLP * tlp.count as u32;
            let r = &mut self.wires[rev as usize];
            r.free_at = r.free_at.max(now) + serialize(acks, r.ps_per_kib);
            r.bytes += acks as u64;
        }
        // Leaving the previous receiver's buffer frees its credits.
        self.release_credit(held, class, tlp.count);
        let tl = &mut self.tlps[t as usize];
        tl.held = w;
        tl.pos += 1;
        tl.spread = end - first_end;
        // Fixed delays right after the wire (a switch, an NTB, a root's forwarding) hold
        // no state: the TLP goes on to the hop behind them at the same time, one event.
        let arrive = arrive + self.skip_delays(t);
        self.engine.schedule_at(arrive, Ev::Hop(t)).expect("future");
    }
}
