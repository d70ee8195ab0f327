//! Tyche's message flow between an initiator and a target, frame by frame, as events.
//!
//! Read: the application's thread builds a request message and rings the channel's NIC;
//! the target's network thread takes it off its ring and queues it to a work-queue
//! thread, which copies the block from the ramdisk into a slot and sends it in data
//! frames the initiator's NIC writes at the offsets of the initiator's slot; once all
//! frames are in, a work-queue thread copies the slot into the application's buffer and
//! wakes the thread. Write: the thread copies its buffer into a slot and sends the
//! request message and the data frames into a target slot it holds credit for; the
//! target's work queue copies the slot into the ramdisk and answers with a completion
//! message.

use std::collections::VecDeque;
use std::rc::Rc;

use devices::nic::{frame, HostBuf};
use host::net::{CQE_BYTES, DESC_BYTES};
use rand_xoshiro::rand_core::RngCore;
use sim::component::{Component, HasNet, Sim};
use sim::net::{ComponentId, Event, Net};
use sim::timers::Timers;
use sim::{dist, Time};

use super::mem::{self, DmaLedger};
use super::rx::{self, Entry, RxPath, RxRing, Visible};
use super::sched::Channels;
use super::store::{Ramdisk, Slots};
use super::wake::{self, Woken};
use super::{Op, Place, TargetIo, TycheHost, TycheResult, TycheSpec};

/// Initiator and target, as indices into the two hosts.
const INI: usize = 0;
const TGT: usize = 1;

/// A request or completion message's bytes (assumption: Tyche's header — block,
/// size, slot, offsets — fits one minimum-size frame).
const MSG_BYTES: u64 = 64;
/// Tyche's header in every data frame (assumption: channel, slot, offset, length and a
/// sequence number in 32 B).
const HEADER_BYTES: u64 = 32;
/// Pre-allocated slots per channel on each side (assumption: 16 slots of the largest
/// request, 8 MiB per channel; docs/hardware.md §3 gives no count). They bound a channel's
/// requests in flight.
const SLOTS: u32 = 16;
/// Cycles of a block request through Tyche's submit path: bio to request, slot
/// allocation, message build (assumption: ≈ 1.8 µs at 2.26 GHz; docs/hardware.md §3 gives
/// no figure).
const REQUEST_CYCLES: u64 = 4000;
/// Each application thread's file (docs/hardware.md §3's FIO: 256 MB per thread; zmIO uses
/// the same span).
const FILE_BYTES: u64 = 256 << 20;
/// Bytes of a request's structure the submitting thread writes and the completing
/// thread reads and marks done (assumption: two lines of `struct request`/`bio` state).
const REQ_STRUCT_BYTES: u64 = 128;

/// Buffer identities in a host's memory system.
mod id {
    pub const SLOT: u64 = 1 << 40;
    pub const RING: u64 = 2 << 40;
    pub const CQE: u64 = 3 << 40;
    pub const DESC: u64 = 4 << 40;
    pub const APP: u64 = 5 << 40;
    pub const DISK: u64 = 6 << 40;
    /// The receive ring of messages (myri10ge's small-buffer ring); data frames go
    /// straight into slots (its big-buffer ring points into them).
    pub const RX: u64 = 7 << 40;
    /// A request's structure (`REQ_STRUCT_BYTES`), homed where its thread submits it.
    pub const REQ: u64 = 9 << 40;
}

#[derive(Clone, Copy, Debug)]
enum Ev {
    Issue(u32),
    /// The request message is visible in the target's ring.
    ReqIn(u32),
    /// A data frame is visible at side `.0`.
    FrameIn(usize, u32, u32),
    /// A work-queue thread of side `.0` takes the request.
    Work(usize, u32),
    /// The write's completion message is visible at the initiator.
    DoneIn(u32),
    /// Side `.0`'s NIC of channel `.1` raises its interrupt (moderation generation `.2`).
    Irq(usize, usize, u64),
    Warm,
}

#[derive(Clone, Copy, Debug, Default)]
struct Req {
    index: u32,
    thread: u32,
    node: u32,
    chan: usize,
    slot: [u32; 2],
    addr: u64,
    frames: u32,
    seen: u32,
    msg_in: bool,
    seq: u64,
}

/// One channel's per-side state.
#[derive(Clone, Debug)]
struct Side {
    /// Node of its slots, rings and threads, and whether that is the NIC's by Tyche's
    /// NUMA extension (`Place::NicLocal`).
    node: usize,
    affine: bool,
    /// Its network thread's core, and the core its NIC interrupts.
    net_core: usize,
    irq_core: usize,
    /// The NIC's receive ring: its interrupt and the poll that takes its entries.
    rx: RxRing,
    free: Vec<u32>,
    /// Sends posted (the transmit ring's position).
    ring: u64,
    /// Messages its NIC has written into the receive ring, and the network thread has
    /// taken.
    rx_written: u64,
    rx_taken: u64,
}

/// The protocol's state between events: channels, requests, slots and the ramdisk
/// (the hosts are the world's).
struct Tyche {
    timers: Timers<Ev>,
    /// The ramdisk's block choices.
    rng: dist::Rng,
    events: u64,
    /// Shared, so a handler can read it while it changes the state.
    spec: Rc<TycheSpec>,
    chans: Channels,
    sides: Vec<[Side; 2]>,
    waiting: Vec<VecDeque<u32>>,
    reqs: Vec<Req>,
    slots: [Slots; 2],
    disk: Ramdisk,
    /// A request's bytes as the application wrote them, and as the ramdisk holds them:
    /// reused by every request (no allocation per frame or request).
    scratch: Vec<u8>,
    check: Vec<u8>,
    ledger: [DmaLedger; 2],
    r: TycheResult,
    bytes_window: u64,
    warm: bool,
}

/// What the protocol runs on: the kernel's network and the two hosts.
struct World<'a> {
    net: Net,
    h: [&'a mut TycheHost; 2],
}

impl HasNet for World<'_> {
    fn net(&mut self) -> &mut Net {
        &mut self.net
    }
}

impl<'a> Component<World<'a>> for Tyche {
    fn notify(&mut self, w: &mut World<'a>, me: ComponentId, event: Event) {
        let Event::Timer(key) = event else {
            return;
        };
        let ev = self.timers.take(key);
        let t = w.net.now();
        self.events += 1;
        Step {
            s: self,
            net: &mut w.net,
            me,
            h: &mut w.h,
        }
        .handle(t, ev);
    }
}

/// One event's view: the protocol's state with the world's parts it acts on.
struct Step<'x, 'a> {
    s: &'x mut Tyche,
    net: &'x mut Net,
    me: ComponentId,
    h: &'x mut [&'a mut TycheHost; 2],
}

/// Runs `spec` from `initiator` to `target`.
pub fn run(
    initiator: &mut TycheHost,
    target: &mut TycheHost,
    spec: &TycheSpec,
) -> Result<TycheResult, String> {
    spec.check()?;
    for h in [&*initiator, &*target] {
        if spec.channels > h.nics.len() {
            return Err(format!(
                "{} channels: host `{}` has {} NIC(s)",
                spec.channels,
                h.name,
                h.nics.len()
            ));
        }
        for p in [spec.initiator, spec.target] {
            if let Place::Node(n) = p {
                if n >= h.nodes {
                    return Err(format!("node {n}: host `{}` has {} nodes", h.name, h.nodes));
                }
            }
        }
        if let super::BufferPlacement::Node(n) = spec.app.placement {
            if n >= h.nodes {
                return Err(format!(
                    "buffers on node {n}: host `{}` has {} nodes",
                    h.name, h.nodes
                ));
            }
        }
    }
    let n = spec.channels;
    let mut sides = Vec::new();
    for c in 0..n {
        let side = |h: &TycheHost, place: Place| {
            let node = match place {
                Place::NicLocal => h.nic_node[c],
                Place::Node(x) => x,
            };
            // Network threads of a node's channels spread over its cores.
            let rank = (0..c).filter(|&o| h.nic_node[o] == h.nic_node[c]).count() as u32;
            Side {
                node: node as usize,
                affine: place == Place::NicLocal,
                net_core: h.core_of(node, rank),
                irq_core: h.irq_core(c, rank),
                rx: RxRing::new(rx::coalescing(spec.coalescing, &h.nics[c].params)),
                free: (0..SLOTS).rev().collect(),
                ring: 0,
                rx_written: 0,
                rx_taken: 0,
            }
        };
        sides.push([side(initiator, spec.initiator), side(target, spec.target)]);
    }
    let line = initiator.nics[0].params.line_gbps;
    let (cross_gbps, cross_lat) = mem::interconnect(&initiator.mem);
    let chans = Channels::new(
        initiator.nic_node[..n].to_vec(),
        line,
        cross_gbps,
        cross_lat,
    );
    let depth = spec.app.depth();
    let nreq = spec.app.threads * depth;
    let reqs = (0..nreq)
        .map(|i| Req {
            index: i,
            thread: i / depth,
            node: spec.app.buffer_node(i / depth, i % depth, initiator.nodes),
            ..Req::default()
        })
        .collect();
    let mut state = Tyche {
        timers: Timers::new(),
        rng: dist::seeded(1),
        events: 0,
        spec: Rc::new(spec.clone()),
        chans,
        sides,
        waiting: vec![VecDeque::new(); n],
        reqs,
        slots: [
            Slots::new(n, SLOTS as usize, spec.req_bytes),
            Slots::new(n, SLOTS as usize, spec.req_bytes),
        ],
        disk: Ramdisk::default(),
        scratch: vec![0; spec.req_bytes as usize],
        check: vec![0; spec.req_bytes as usize],
        ledger: [DmaLedger::default(); 2],
        r: TycheResult {
            channel_kb: vec![0; n],
            ..TycheResult::default()
        },
        bytes_window: 0,
        warm: false,
    };
    let mut world = World {
        net: Net::new(1),
        h: [initiator, target],
    };
    for i in 0..nreq {
        state.timers.at(&mut world.net, Time::ZERO, 0, Ev::Issue(i));
    }
    state.timers.at(&mut world.net, spec.warmup, 0, Ev::Warm);
    let end = spec.warmup + spec.window;
    let mut sim = Sim::new();
    let id = sim.add(state);
    debug_assert_eq!(id, 0, "the timers above are the first component's");
    // Events at `end` are still handled; the horizon comes before any later one.
    sim.run_until(&mut world, end + Time::from_ps(1));
    let mut state: Tyche = sim.take(id).expect("the protocol is component 0");
    Ok(Step {
        s: &mut state,
        net: &mut world.net,
        me: id,
        h: &mut world.h,
    }
    .finish())
}

impl Step<'_, '_> {
    fn at(&mut self, t: Time, ev: Ev) {
        let t = t.max(self.net.now());
        self.s.timers.at(self.net, t, self.me, ev);
    }

    fn finish(self) -> TycheResult {
        let mut r = std::mem::take(&mut self.s.r);
        let w = self.s.spec.window.as_secs_f64();
        let ini = &self.h[INI].mem;
        r.throughput_gbps = self.s.bytes_window as f64 / w / 1e9;
        r.qpi_gbps = mem::link_bytes(ini)
            .into_iter()
            .map(|(k, b)| (k, b as f64 / w / 1e9))
            .collect();
        r.qpi0_share = mem::qpi0_share(ini);
        r.interconnect_bytes = [
            mem::interconnect_total(ini),
            mem::interconnect_total(&self.h[TGT].mem),
        ];
        r.channel_kb = self.s.chans.carried_kb.clone();
        r.nic_rx_bytes = self.s.ledger.iter().map(|l| l.rx_bytes).sum();
        r.nic_rx_off_node_bytes = self.s.ledger.iter().map(|l| l.rx_off_node).sum();
        r.dma_cross_bytes = [self.s.ledger[INI].cross, self.s.ledger[TGT].cross];
        r.control_cross_bytes = [
            self.s.ledger[INI].control_cross,
            self.s.ledger[TGT].control_cross,
        ];
        r.events = self.s.events;
        let busiest = |h: &TycheHost| {
            let most = h.cores.iter().map(|c| c.busy).max().unwrap_or(Time::ZERO);
            most.as_secs_f64() / w
        };
        r.busiest_core = [busiest(self.h[INI]), busiest(self.h[TGT])];
        let per_node = |h: &TycheHost| -> Vec<f64> {
            h.cores
                .chunks(h.cores_per_node as usize)
                .map(|node| node.iter().map(|c| c.busy.as_secs_f64()).sum::<f64>() / w)
                .collect()
        };
        r.cores_busy = [per_node(self.h[INI]), per_node(self.h[TGT])];
        r
    }

    fn handle(&mut self, t: Time, ev: Ev) {
        match ev {
            Ev::Warm => {
                self.s.warm = true;
                for h in self.h.iter_mut() {
                    h.mem.reset_counters();
                    for core in &mut h.cores {
                        core.busy = Time::ZERO;
                    }
                }
                self.s.ledger = [DmaLedger::default(); 2];
                self.s.bytes_window = 0;
                self.s.r.requests = 0;
                self.s.r.frames = 0;
                self.s.r.interrupts = 0;
                self.s.r.wakeups = 0;
                self.s.r.cross_wakeups = 0;
            }
            Ev::Issue(r) => self.issue(t, r),
            Ev::ReqIn(r) => self.visible(TGT, t, Entry::Request(r)),
            Ev::FrameIn(side, r, k) => self.visible(side, t, Entry::Frame(r, k)),
            Ev::Work(side, r) => self.work(t, side, r),
            Ev::DoneIn(r) => self.visible(INI, t, Entry::Done(r)),
            Ev::Irq(side, c, gen) => self.interrupt(t, side, c, gen),
        }
    }

    /// The application thread of request slot `r` issues its next request.
    fn issue(&mut self, t: Time, r: u32) {
        let spec = Rc::clone(&self.s.spec);
        let req = &mut self.s.reqs[r as usize];
        // A thread's requests in flight never overlap: each of its buffers draws blocks
        // from its own interleave of the file, so two writes in flight (which may finish
        // out of order on different channels) never race for a block.
        let depth = spec.app.depth() as u64;
        let blocks = (FILE_BYTES / spec.req_bytes / depth).max(1);
        let pick = self.s.rng.next_u64() % blocks;
        let lane = (req.index as u64) % depth;
        req.addr = req.thread as u64 * FILE_BYTES + (pick * depth + lane) * spec.req_bytes;
        req.frames = spec.req_bytes.div_ceil(spec.frame_bytes) as u32;
        req.seen = 0;
        req.msg_in = false;
        req.seq += 1;
        let node = req.node;
        let c = self.s.chans.pick(spec.scheduler, node, spec.req_bytes);
        if self.s.chans.node[c] != node {
            self.s.r.off_node_requests += 1;
        }
        self.s.reqs[r as usize].chan = c;
        self.s.waiting[c].push_back(r);
        self.admit(t, c);
    }

    /// Starts the channel's waiting requests while it has slots on both sides.
    fn admit(&mut self, t: Time, c: usize) {
        while !self.s.waiting[c].is_empty()
            && !self.s.sides[c][INI].free.is_empty()
            && !self.s.sides[c][TGT].free.is_empty()
        {
            let r = self.s.waiting[c].pop_front().expect("checked");
            let si = self.s.sides[c][INI].free.pop().expect("checked");
            let st = self.s.sides[c][TGT].free.pop().expect("checked");
            self.s.reqs[r as usize].slot = [si, st];
            self.submit(t, r);
        }
    }

    fn app_core(&self, thread: u32) -> usize {
        let h = &self.h[INI];
        match self.s.spec.app.thread_node(thread, h.nodes) {
            Some(n) => h.core_of(n, thread / h.nodes),
            None => thread as usize % h.cores.len(),
        }
    }

    fn slot_buf(c: usize, slot: u32, k: u32) -> u64 {
        id::SLOT | (c as u64) << 32 | (slot as u64) << 16 | k as u64
    }

    /// Frame `k`'s part of the application buffer of request `r` (each request of a
    /// thread has its own buffer, reused from one request to the next).
    fn app_buf(r: u32, k: u32) -> u64 {
        id::APP | (r as u64) << 16 | k as u64
    }

    fn frame_len(&self, k: u32) -> u64 {
        (self.s.spec.req_bytes - k as u64 * self.s.spec.frame_bytes).min(self.s.spec.frame_bytes)
    }

    /// The application's thread submits request `r` on its channel.
    fn submit(&mut self, t: Time, r: u32) {
        let req = self.s.reqs[r as usize];
        let c = req.chan;
        let core = self.app_core(req.thread);
        let chan_node = self.s.sides[c][INI].node as u32;
        let h = &mut self.h[INI];
        let socket = h.cores[core].socket;
        let start = h.cores[core].start(t);
        let mut cur = start + h.cores[core].cycles(REQUEST_CYCLES);
        if self.s.spec.rx.interrupts() {
            // The thread fills the request's structure, homed on its own node (its
            // completion, on another core, reads it: `complete_request`).
            cur += mem::cpu_store(
                &mut h.mem,
                cur,
                socket,
                socket,
                id::REQ | r as u64,
                REQ_STRUCT_BYTES,
            );
        }
        if self.s.spec.op == Op::Write {
            // The block's bytes into the initiator's slot: the thread fills its buffer
            // (the application's data) and Tyche copies it.
            fill(&mut self.s.scratch, req.thread, req.seq);
            let buf = self.s.slots[INI].get(c, req.slot[0]);
            buf.copy_from_slice(&self.s.scratch);
            for k in 0..req.frames {
                let len = self.frame_len(k);
                let h = &mut self.h[INI];
                let app = Self::app_buf(r, k);
                let stall = mem::cpu_copy(
                    &mut h.mem,
                    cur,
                    socket,
                    req.node,
                    app,
                    chan_node,
                    Self::slot_buf(c, req.slot[0], k),
                    len,
                );
                cur =
                    cur + stall + h.cores[core].cycles(h.costs.copy_line_cycles * len.div_ceil(64));
            }
        }
        cur = self.send_message(INI, c, cur, core, Ev::ReqIn(r));
        if self.s.spec.op == Op::Write {
            for k in 0..req.frames {
                cur = self.send_frame(INI, c, cur, core, r, k);
            }
        }
        self.h[INI].cores[core].finish(start, cur);
    }

    /// Side `from`'s core `core` (on socket) posts a message on channel `c` at `at`: it
    /// writes the message into the channel's ring and rings the NIC; `ev` happens when
    /// the message is visible at the other side. When the core is done.
    fn send_message(&mut self, from: usize, c: usize, at: Time, core: usize, ev: Ev) -> Time {
        let node = self.s.sides[c][from].node as u32;
        let slot = self.s.sides[c][from].ring % host::net::RING;
        self.s.sides[c][from].ring += 1;
        let msg = id::RING | (c as u64) << 32 | slot;
        let h = &mut self.h[from];
        let socket = h.cores[core].socket;
        let stall = mem::cpu_store(&mut h.mem, at, socket, node, msg, MSG_BYTES);
        let doorbell = at + stall + h.cores[core].cycles(h.costs.tx_packet_cycles);
        let desc = HostBuf {
            node,
            buf: id::DESC | (c as u64) << 32 | slot,
            bytes: DESC_BYTES,
        };
        let payload = HostBuf {
            node,
            buf: msg,
            bytes: MSG_BYTES,
        };
        let visible = self.transmit(from, c, socket, doorbell, desc, payload, None, MSG_BYTES);
        self.at(visible, ev);
        doorbell
    }

    /// Side `from` sends data frame `k` of request `r` from its slot into the other
    /// side's slot at the frame's offset. When the posting core is done.
    fn send_frame(&mut self, from: usize, c: usize, at: Time, core: usize, r: u32, k: u32) -> Time {
        let to = 1 - from;
        let req = &self.s.reqs[r as usize];
        let len = self.frame_len(k);
        let (src, dst) = (req.slot[from], req.slot[to]);
        let node = self.s.sides[c][from].node as u32;
        let h = &mut self.h[from];
        let socket = h.cores[core].socket;
        let doorbell = at + h.cores[core].cycles(h.costs.tx_packet_cycles);
        let ring = self.s.sides[c][from].ring % host::net::RING;
        self.s.sides[c][from].ring += 1;
        let desc = HostBuf {
            node,
            buf: id::DESC | (c as u64) << 32 | ring,
            bytes: DESC_BYTES,
        };
        let payload = HostBuf {
            node,
            buf: Self::slot_buf(c, src, k),
            bytes: len,
        };
        let dst = Self::slot_buf(c, dst, k);
        let visible = self.transmit(
            from,
            c,
            socket,
            doorbell,
            desc,
            payload,
            Some(dst),
            len + HEADER_BYTES,
        );
        self.at(visible, Ev::FrameIn(to, r, k));
        doorbell
    }

    /// Side `from`'s NIC of channel `c`, rung by a core on `socket` at `doorbell`,
    /// fetches `desc` and `payload`, puts the frame on the wire, and the other side's NIC
    /// writes it into `dst` (on that side's channel node; a message goes into its receive
    /// ring) with a completion entry. When it is visible.
    #[allow(clippy::too_many_arguments)]
    fn transmit(
        &mut self,
        from: usize,
        c: usize,
        socket: u32,
        doorbell: Time,
        desc: HostBuf,
        payload: HostBuf,
        dst: Option<u64>,
        frame_bytes: u64,
    ) -> Time {
        let to = 1 - from;
        let h = &mut *self.h[from];
        let doorbell = mem::pio_arrival(&h.mem, doorbell, socket, &h.nics[c]);
        let ready = mem::nic_fetch(
            &mut h.nics[c],
            doorbell,
            &mut h.mem,
            &mut self.s.ledger[from],
            desc,
            payload,
        );
        let nic = &mut h.nics[c];
        let on_wire = nic
            .tx_port
            .reserve(ready, frame::wire_bytes(frame_bytes as u32) as u64);
        let arrive = on_wire + nic.params.wire;
        let dst_node = self.s.sides[c][to].node as u32;
        let ring = self.s.sides[c][to].rx_written % host::net::RING;
        self.s.sides[c][to].rx_written += 1;
        let dst = dst.unwrap_or(id::RX | (c as u64) << 32 | ring);
        let g = &mut *self.h[to];
        let at = arrive + g.nics[c].params.latency;
        let nic_node = g.nic_node[c];
        mem::nic_write(
            &mut g.nics[c],
            nic_node,
            at,
            &mut g.mem,
            &mut self.s.ledger[to],
            dst_node,
            dst,
            frame_bytes,
            id::CQE | (c as u64) << 32 | ring,
            CQE_BYTES,
        )
    }

    /// Receive-ring entry `e` of `side` is visible at `t`: the running poll takes it, or
    /// it waits for the NIC's (moderated) interrupt.
    fn visible(&mut self, side: usize, t: Time, e: Entry) {
        let r = match e {
            Entry::Request(r) | Entry::Frame(r, _) | Entry::Done(r) => r,
        };
        let c = self.s.reqs[r as usize].chan;
        if !self.s.spec.rx.interrupts() {
            return self.take(side, t, e);
        }
        match self.s.sides[c][side].rx.visible(t, e) {
            Visible::Poll => self.take(side, t, e),
            Visible::Wait(Some(at)) => {
                let gen = self.s.sides[c][side].rx.gen;
                self.at(at, Ev::Irq(side, c, gen));
            }
            Visible::Wait(None) => {}
        }
    }

    /// The NIC of `side`'s channel `c` interrupts its core at `t`: the handler schedules
    /// the poll, which takes the entries the interrupt signals — on the interrupted core
    /// itself (`RxPath::Softirq`), or in the network thread the handler wakes.
    fn interrupt(&mut self, t: Time, side: usize, c: usize, gen: u64) {
        let entries = self.s.sides[c][side].rx.fire(gen);
        if entries.is_empty() {
            return;
        }
        if self.s.warm {
            self.s.r.interrupts += 1;
        }
        let irq = self.s.sides[c][side].irq_core;
        let node = self.s.sides[c][side].node as u32;
        let ring = self.s.sides[c][side].rx_taken % host::net::RING;
        let cqe = wake::Entry {
            node,
            buf: id::CQE | (c as u64) << 32 | ring,
            bytes: CQE_BYTES,
        };
        let poll = match self.s.spec.rx {
            RxPath::Polling => unreachable!("no interrupts while polling"),
            RxPath::NetworkThread => {
                let core = self.s.sides[c][side].net_core;
                let w = wake::interrupt(self.h[side], &mut self.s.ledger[side], t, irq, cqe, core);
                self.count_wake(irq, core, w);
                w.runs
            }
            RxPath::Softirq => {
                let h = &mut self.h[side];
                let start = h.cores[irq].start(t);
                let end = start + h.cores[irq].cycles(h.costs.irq_cycles);
                h.cores[irq].finish(start, end);
                end
            }
        };
        self.s.sides[c][side].rx.poll_done = poll;
        for e in entries {
            // Each entry's work pushes `poll_done` on; entries the NIC writes meanwhile
            // are taken by the same poll (`visible`).
            let at = self.s.sides[c][side].rx.poll_done;
            self.take(side, at, e);
        }
    }

    /// The poll takes entry `e` of `side`'s ring at `t`.
    fn take(&mut self, side: usize, t: Time, e: Entry) {
        match e {
            Entry::Request(r) => self.request_in(t, r),
            Entry::Frame(r, k) => self.frame_in(t, side, r, k),
            Entry::Done(r) => self.done_in(t, r),
        }
    }

    /// The core that takes `side`'s received entries on channel `c` (`RxPath`).
    fn rx_core(&self, side: usize, c: usize) -> usize {
        match self.s.spec.rx {
            RxPath::Polling | RxPath::NetworkThread => self.s.sides[c][side].net_core,
            RxPath::Softirq => self.s.sides[c][side].irq_core,
        }
    }

    /// The receive core of `side`'s channel takes one entry off its ring at `t`: the
    /// completion entry and, for a message, its bytes (a data frame's header is in its
    /// first lines, which the NIC wrote into the slot). When it is done.
    fn net_rx(&mut self, side: usize, c: usize, t: Time, msg: bool) -> Time {
        let core = self.rx_core(side, c);
        let node = self.s.sides[c][side].node as u32;
        let ring = self.s.sides[c][side].rx_taken % host::net::RING;
        let h = &mut self.h[side];
        let socket = h.cores[core].socket;
        let start = h.cores[core].start(t);
        self.s.sides[c][side].rx_taken += 1;
        let mut stall = mem::cpu_load(
            &mut h.mem,
            start,
            socket,
            node,
            id::CQE | (c as u64) << 32 | ring,
            CQE_BYTES,
        );
        if msg {
            let m = id::RX | (c as u64) << 32 | ring;
            stall += mem::cpu_load(&mut h.mem, start + stall, socket, node, m, MSG_BYTES);
        }
        let end = start + stall + h.cores[core].cycles(h.costs.tx_packet_cycles);
        h.cores[core].finish(start, end);
        let rx = &mut self.s.sides[c][side].rx;
        rx.poll_done = rx.poll_done.max(end);
        end
    }

    /// Counts a wake-up from core `waker` to `wakee` in the window.
    fn count_wake(&mut self, waker: usize, wakee: usize, w: Woken) {
        if self.s.warm && waker != wakee {
            self.s.r.wakeups += 1;
            self.s.r.cross_wakeups += w.cross as u64;
        }
    }

    /// Core `waker` of `side`, its own task booked, hands work at `at` to the thread on
    /// core `wakee`: it wakes the thread unless that core is running (a thread there
    /// finds the work when it looks). Books the wake-up on both cores; when the wakee
    /// may run.
    fn hand_over(&mut self, side: usize, waker: usize, at: Time, wakee: usize) -> Time {
        let h = &mut self.h[side];
        if !self.s.spec.rx.interrupts() || wakee != waker && h.cores[wakee].busy_until() > at {
            return at;
        }
        let start = h.cores[waker].start(at);
        let w = wake::wake(h, &mut self.s.ledger[side], start, waker, wakee);
        self.h[side].cores[waker].finish(start, w.waker_done);
        self.count_wake(waker, wakee, w);
        w.runs
    }

    fn request_in(&mut self, t: Time, r: u32) {
        let c = self.s.reqs[r as usize].chan;
        let end = self.net_rx(TGT, c, t, true);
        match self.s.spec.op {
            Op::Read => self.at(end, Ev::Work(TGT, r)),
            Op::Write => {
                let req = &mut self.s.reqs[r as usize];
                req.msg_in = true;
                if req.seen == req.frames {
                    self.at(end, Ev::Work(TGT, r));
                }
            }
        }
    }

    fn frame_in(&mut self, t: Time, side: usize, r: u32, k: u32) {
        let c = self.s.reqs[r as usize].chan;
        let end = self.net_rx(side, c, t, false);
        self.s.r.frames_total += 1;
        if self.s.warm {
            self.s.r.frames += 1;
        }
        // The frame's bytes land at the offset the receiver chose: its slot, frame k.
        let req = &self.s.reqs[r as usize];
        let off = (k as u64 * self.s.spec.frame_bytes) as usize;
        let len = self.frame_len(k) as usize;
        let (src, dst) = (req.slot[1 - side], req.slot[side]);
        let [ini, tgt] = &mut self.s.slots;
        let (from, to) = if side == INI { (tgt, ini) } else { (ini, tgt) };
        to.get(c, dst)[off..off + len].copy_from_slice(&from.get(c, src)[off..off + len]);
        let req = &mut self.s.reqs[r as usize];
        req.seen += 1;
        let all = req.seen == req.frames;
        match side {
            INI if all => self.at(end, Ev::Work(INI, r)),
            TGT if all && req.msg_in => self.at(end, Ev::Work(TGT, r)),
            _ => {}
        }
    }

    /// A work-queue core of `side` for channel `c`: the idlest on the channel's node (a
    /// per-core pinned queue on that node), except that a softirq without Tyche's NUMA
    /// extension queues the work on its own core (`RxPath::Softirq`).
    fn wq_core(&self, side: usize, c: usize) -> usize {
        let s = &self.s.sides[c][side];
        if self.s.spec.rx == RxPath::Softirq && !s.affine {
            return s.irq_core;
        }
        self.h[side].idlest_core(Some(s.node as u32))
    }

    fn work(&mut self, t: Time, side: usize, r: u32) {
        let req = self.s.reqs[r as usize];
        let c = req.chan;
        let core = self.wq_core(side, c);
        let chan_node = self.s.sides[c][side].node as u32;
        // The receive context queues the request and wakes the work-queue thread.
        let t = self.hand_over(side, self.rx_core(side, c), t, core);
        let start = self.h[side].cores[core].start(t);
        let mut cur = start;
        let rd_node = |addr: u64, nodes: u32| ((addr >> 20) % nodes as u64) as u32;
        match (side, self.s.spec.op) {
            (TGT, Op::Read) => {
                if self.s.spec.target_io == TargetIo::Ramdisk {
                    let slot = self.s.slots[TGT].get(c, req.slot[1]);
                    self.s.disk.read(req.addr, slot);
                    cur = self.copy_frames(
                        TGT,
                        core,
                        cur,
                        &req,
                        true,
                        chan_node,
                        rd_node(req.addr, self.h[TGT].nodes),
                    );
                }
                for k in 0..req.frames {
                    cur = self.send_frame(TGT, c, cur, core, r, k);
                }
            }
            (TGT, Op::Write) => {
                if self.s.spec.target_io == TargetIo::Ramdisk {
                    let slot = self.s.slots[TGT].get(c, req.slot[1]);
                    self.s.disk.write(req.addr, slot);
                    cur = self.copy_frames(
                        TGT,
                        core,
                        cur,
                        &req,
                        false,
                        chan_node,
                        rd_node(req.addr, self.h[TGT].nodes),
                    );
                }
                cur = self.send_message(TGT, c, cur, core, Ev::DoneIn(r));
            }
            (_, Op::Read) => {
                // The initiator copies its slot into the application's buffer.
                cur = self.copy_frames(INI, core, cur, &req, false, chan_node, req.node);
                if self.s.spec.target_io == TargetIo::Ramdisk {
                    self.s.disk.read(req.addr, &mut self.s.check);
                    let slot = self.s.slots[INI].get(c, req.slot[0]);
                    let ok = *slot == self.s.check[..];
                    self.verify(ok);
                }
                cur += self.complete_request(core, cur, r);
                self.h[INI].cores[core].finish(start, cur);
                let app = self.app_core(req.thread);
                let runs = self.hand_over(INI, core, cur, app);
                self.complete(cur, runs, r);
                return;
            }
            (_, Op::Write) => unreachable!("initiator writes complete on their message"),
        }
        self.h[side].cores[core].finish(start, cur);
    }

    /// Prices a work-queue copy of a request's frames between `side`'s slot (on
    /// `slot_node`) and the other buffer (the ramdisk or the application's, on
    /// `other_node`): into the slot when `into_slot`. When the core is done.
    #[allow(clippy::too_many_arguments)]
    fn copy_frames(
        &mut self,
        side: usize,
        core: usize,
        mut cur: Time,
        req: &Req,
        into_slot: bool,
        slot_node: u32,
        other_node: u32,
    ) -> Time {
        let spec = Rc::clone(&self.s.spec);
        let h = &mut self.h[side];
        let socket = h.cores[core].socket;
        for k in 0..req.frames {
            let len = (spec.req_bytes - k as u64 * spec.frame_bytes).min(spec.frame_bytes);
            let slot = Self::slot_buf(req.chan, req.slot[side], k);
            let other = if side == TGT {
                id::DISK | (req.addr + k as u64 * spec.frame_bytes) >> 12
            } else {
                Self::app_buf(req.index, k)
            };
            let (s, sn, d, dn) = if into_slot {
                (other, other_node, slot, slot_node)
            } else {
                (slot, slot_node, other, other_node)
            };
            let stall = mem::cpu_copy(&mut h.mem, cur, socket, sn, s, dn, d, len);
            cur = cur + stall + h.cores[core].cycles(h.costs.copy_line_cycles * len.div_ceil(64));
        }
        cur
    }

    fn done_in(&mut self, t: Time, r: u32) {
        let c = self.s.reqs[r as usize].chan;
        let end = self.net_rx(INI, c, t, true);
        let core = self.rx_core(INI, c);
        let start = self.h[INI].cores[core].start(end);
        let end2 = start + self.complete_request(core, start, r);
        self.h[INI].cores[core].finish(start, end2);
        let app = self.app_core(self.s.reqs[r as usize].thread);
        let runs = self.hand_over(INI, core, end2, app);
        let rx = &mut self.s.sides[c][INI].rx;
        rx.poll_done = rx.poll_done.max(end2);
        let req = &self.s.reqs[r as usize];
        if self.s.spec.target_io == TargetIo::Ramdisk {
            fill(&mut self.s.scratch, req.thread, req.seq);
            self.s.disk.read(req.addr, &mut self.s.check);
            let ok = self.s.check == self.s.scratch;
            self.verify(ok);
        }
        self.complete(end2, runs, r);
    }

    /// The initiator's core `core` marks request `r` done in its structure at `at`: a read
    /// for ownership of lines the submitting thread wrote, a transfer from that thread's
    /// package when it ran elsewhere. What the core waits. Without interrupts
    /// (`RxPath::Polling`) it spends the platform's `wakeup_cycles` waking the thread
    /// instead, and the thread runs at once.
    fn complete_request(&mut self, core: usize, at: Time, r: u32) -> Time {
        if !self.s.spec.rx.interrupts() {
            let h = &self.h[INI];
            return h.cores[core].cycles(h.costs.wakeup_cycles);
        }
        let home = self.h[INI].cores[self.app_core(self.s.reqs[r as usize].thread)].socket;
        let h = &mut self.h[INI];
        let socket = h.cores[core].socket;
        let buf = id::REQ | r as u64;
        mem::control_load(
            &mut h.mem,
            &mut self.s.ledger[INI],
            at,
            socket,
            home,
            buf,
            REQ_STRUCT_BYTES,
        )
    }

    fn verify(&mut self, ok: bool) {
        self.s.r.verified += 1;
        if !ok {
            self.s.r.mismatches += 1;
        }
    }

    /// Request `r` is complete at `t`: its slots free; its thread, running again at
    /// `issue`, issues the next.
    fn complete(&mut self, t: Time, issue: Time, r: u32) {
        let req = &self.s.reqs[r as usize];
        let c = req.chan;
        self.s.sides[c][INI].free.push(req.slot[0]);
        self.s.sides[c][TGT].free.push(req.slot[1]);
        self.s.chans.done(c, self.s.spec.req_bytes);
        self.s.r.requests_total += 1;
        if self.s.warm {
            self.s.r.requests += 1;
            self.s.bytes_window += self.s.spec.req_bytes;
        }
        self.admit(t, c);
        self.at(issue, Ev::Issue(r));
    }
}

/// The bytes thread `thread` writes in its `seq`th request.
fn fill(buf: &mut [u8], thread: u32, seq: u64) {
    let base = (thread as u64) << 40 ^ seq.wrapping_mul(0x2545_F491_4F6C_DD1D);
    for (i, b) in buf.iter_mut().enumerate() {
        *b = (base.wrapping_add(i as u64).wrapping_mul(0x9E37_79B9) >> 24) as u8;
    }
}
