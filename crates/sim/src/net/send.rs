//! Injecting requests: posted writes (alone or as a train), reads, and components'
//! timers, wake-ups and horizons.

use super::tlp::{Ev, Issue, Kind, ReadReq, Tlp, OK};
use super::TimerKey;
use super::{ComponentId, Hop, Net, CLASS_POSTED, NONE};
use crate::pcie;
use crate::time::Time;

impl Net {
    pub(super) fn alloc_tlp(&mut self, t: Tlp) -> u32 {
        match self.free_tlps.pop() {
            Some(i) => {
                self.tlps[i as usize] = t;
                i
            }
            None => {
                self.tlps.push(t);
                self.tlps.len() as u32 - 1
            }
        }
    }

    pub(super) fn alloc_read(&mut self, r: ReadReq) -> u32 {
        match self.free_reads.pop() {
            Some(i) => {
                self.reads[i as usize] = r;
                i
            }
            None => {
                self.reads.push(r);
                self.reads.len() as u32 - 1
            }
        }
    }

    /// Injects a posted write now.
    pub fn send_write(&mut self, i: Issue) {
        let wire_bytes = pcie::wire_bytes(i.bytes, false, i.addr64);
        self.inject_write(&i, wire_bytes, 1, i.bytes, 0);
    }

    /// A posted write TLP (or a train of `count`, each `unit` bytes and `unit_wire` wire
    /// bytes but the last) from `i`, sent to its first hop.
    pub(super) fn inject_write(
        &mut self,
        i: &Issue,
        wire_bytes: u32,
        count: u16,
        unit: u32,
        unit_wire: u32,
    ) {
        let t = self.alloc_tlp(Tlp {
            kind: Kind::Write,
            payload: i.bytes,
            wire_bytes,
            route: i.route,
            pos: 0,
            stop: u16::MAX,
            held: NONE,
            owner: i.owner,
            data: i.data,
            cpu: i.cpu,
            sample: i.sample,
            req: NONE,
            parent: NONE,
            flow: i.flow,
            iotlb_key: i.iotlb_key,
            target: i.target,
            ur: false,
            count,
            unit,
            unit_wire,
            spread: Time::ZERO,
        });
        self.hop(t);
    }

    /// Injects a posted write of `i.bytes` cut into TLPs of `tlp_bytes` (the last one
    /// shorter) as one *train*: one event per hop for all its TLPs, one `WriteDone` for
    /// all its bytes when the last lands. At each wire the train takes its TLPs' credits
    /// together and reserves the wire for their serialization back to back, its first TLP
    /// leaving as a lone TLP would and its last no earlier than it arrived plus its own
    /// serialization, so that a train pipelines across hops as its TLPs do and keeps FIFO
    /// order with other traffic. Exact while nothing else joins a wire mid-train and the
    /// TLPs reach each wire evenly spaced; another TLP arriving while a train crosses waits
    /// for the whole train (TLP by TLP it would slot in between). Returns false, sending
    /// nothing, when trains are off or the route cannot carry this one as a train (a wire
    /// whose receiver has fewer posted credits than the train has TLPs, or a sink whose
    /// owner hears of each write): send it TLP by TLP then.
    pub fn send_write_train(&mut self, i: Issue, tlp_bytes: u32) -> bool {
        let unit = tlp_bytes.max(1);
        let count = i.bytes.div_ceil(unit).max(1);
        if !self.trains || count > u16::MAX as u32 || !self.train_fits(i.route, count) {
            return false;
        }
        let last = i.bytes - (count - 1) * unit;
        let unit_wire = pcie::wire_bytes(unit, false, i.addr64);
        let wire_bytes = (count - 1) * unit_wire + pcie::wire_bytes(last, false, i.addr64);
        self.inject_write(&i, wire_bytes, count as u16, unit, unit_wire);
        true
    }

    /// Whether a write train of `count` TLPs can take `route`: every wire is a PCIe link
    /// whose receiver holds that many posted headers, and the sink has no owner. A CPU
    /// interconnect (QPI/UPI) is refused: cores' line-sized misses interleave with DMA
    /// there all the time, so a train would hold them back (measured: `ioctopus.nvme_upi`'s
    /// STREAM lost half its bandwidth and UPI a third of its utilisation with trains).
    pub(super) fn train_fits(&self, route: u32, count: u32) -> bool {
        self.routes[route as usize].hops.iter().all(|h| match *h {
            Hop::Wire(w) => {
                let wire = &self.wires[w as usize];
                let cap = wire.credit_cap[CLASS_POSTED] as u32;
                wire.pcie && (cap == 0 || cap >= count)
            }
            Hop::Sink(s, _) => self.sinks[s as usize].owner == NONE,
            _ => true,
        })
    }

    /// Injects a read request now; data comes back as `Delivery::ReadData` with `tag`.
    pub fn send_read(&mut self, i: Issue, tag: u64) {
        let req = self.alloc_read(ReadReq {
            owner: i.owner,
            flow: i.flow,
            tag,
            remaining: i.bytes,
            route: i.route,
            rejoin: 0,
            splitter: NONE,
            parent: NONE,
            addr64: i.addr64,
            issued: self.engine.now(),
            failed: OK,
            lost: 0,
        });
        let t = self.alloc_tlp(Tlp {
            kind: Kind::Read,
            payload: i.bytes,
            wire_bytes: pcie::wire_bytes(0, false, i.addr64),
            route: i.route,
            pos: 0,
            stop: u16::MAX,
            held: NONE,
            owner: i.owner,
            data: 0,
            cpu: i.cpu,
            sample: i.sample,
            req,
            parent: NONE,
            flow: i.flow,
            iotlb_key: i.iotlb_key,
            target: i.target,
            ur: false,
            count: 1,
            unit: i.bytes,
            unit_wire: 0,
            spread: Time::ZERO,
        });
        self.hop(t);
    }

    /// Tells `component` of its timer `key` at `at` (not before now). Components set
    /// timers with `Timers::at`, which keeps what each means.
    pub(crate) fn timer_at(&mut self, at: Time, component: ComponentId, key: TimerKey) {
        let at = at.max(self.now());
        self.engine
            .schedule_at(at, Ev::Timer(component, key))
            .expect("not in the past");
    }

    /// Wakes `component` at `at` (not before now) with `Event::Wake`: how whoever runs a
    /// simulation starts a component.
    pub fn wake_at(&mut self, at: Time, component: ComponentId) {
        let at = at.max(self.now());
        self.engine
            .schedule_at(at, Ev::Wake(component))
            .expect("not in the past");
    }

    /// Makes `next_notice` return `Notice::Horizon(at)` when the clock reaches `at`.
    pub fn set_horizon(&mut self, at: Time) {
        let at = at.max(self.now());
        self.engine
            .schedule_at(at, Ev::Horizon)
            .expect("not in the past");
    }
}
