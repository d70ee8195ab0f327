//! netperf TCP_STREAM between two hosts, one core each: the sender's process writes
//! `msg_bytes` per `send`, the stack sends TSO segments of up to 64 KiB through its NIC,
//! the wire carries MSS frames, the receiver's NIC writes each into a receive-ring buffer
//! and a completion entry, interrupts (coalesced), NAPI polls (budget), TCP acknowledges
//! every second segment, and the receiving process copies `msg_bytes` per `recv`. The
//! receive window is what the unread bytes leave of the socket buffer, so both sides
//! settle at the bottleneck's rate.
//!
//! Several connections may run at once (`run_lanes`), each on its own pair of cores with
//! its own rings and buffers, sharing both hosts' memory systems, PCIe links and ports,
//! and with a co-located workload (`run_lanes_with`, a `victim::Background`) advanced in
//! time order on one host's memory system.
//! One connection may have its receiving thread moved (`migration`): its frames then
//! enter the rings the NIC driver steers them to, and TCP holds segments that arrive
//! ahead of a hole in its out-of-order queue.
//!
//! This file owns the connections, the events and the sending side; `receive` the NAPI
//! polls of both sides (data on the receiver, ACKs on the sender) and the ACKs.

mod receive;

use std::collections::{BTreeMap, VecDeque};

use devices::nic::{frame, Coalescing};
use sim::component::{Component, Sim};
use sim::memsys::LINE;
use sim::net::{ComponentId, Event, Net};
use sim::timers::Timers;
use sim::Time;

use super::migration::{Migrating, MigrationResult, Observed};
use super::rxq::{RxQueue, Seg};
use super::world::{NetWorld, Shared};
use super::{buf, Core, NetHost, CQE_BYTES, DESC_BYTES, RING, TSO_BYTES};
use crate::victim::Background;

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
    /// Events the streams handled (up to the window's end).
    pub events: u64,
    /// Receive interrupts (NAPI polls an interrupt started) of the data queues over the
    /// window.
    pub receiver_interrupts: u64,
    /// Frames the receiving NIC's full buffer held back over the window (its link
    /// partner paused), and how long they waited in all, µs.
    pub receiver_pauses: u64,
    pub receiver_paused_us: f64,
    /// Per connection, in the order of the lanes.
    pub connections: Vec<ConnStats>,
}

/// One connection's share of a run's window.
#[derive(Clone, Debug, PartialEq)]
pub struct ConnStats {
    /// Payload delivered to the receiving process in the window.
    pub delivered_window: u64,
    /// Busy fraction of each side's core over the window.
    pub sender_util: f64,
    pub receiver_util: f64,
    /// Receive interrupts of its queue over the window.
    pub receiver_interrupts: u64,
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
    /// The scheduler moves the receiving thread (migration runs only).
    Move,
    /// The receive NIC's driver has work due (migration runs only).
    Driver,
}

/// Where one side of a connection runs: its core, the PF of its queues, the node of its
/// rings, buffers and process memory.
#[derive(Clone, Debug)]
pub struct Lane {
    pub core: Core,
    pub pf: usize,
    pub node: u32,
}

impl Lane {
    /// The lane a host is set up with.
    pub fn of(h: &NetHost) -> Lane {
        Lane {
            core: h.core.clone(),
            pf: h.pf,
            node: h.node,
        }
    }

    /// Exchanges this lane with the one `h` is running.
    fn swap_into(&mut self, h: &mut NetHost) {
        std::mem::swap(&mut self.core, &mut h.core);
        std::mem::swap(&mut self.pf, &mut h.pf);
        std::mem::swap(&mut self.node, &mut h.node);
    }
}

/// Which host of a stream a co-located workload shares its memory system with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    Sender,
    Receiver,
}

/// A workload beside the streams on one host's memory system (`run_lanes_with`).
pub struct Colocated<'b> {
    pub side: Side,
    pub work: &'b mut dyn Background,
}

/// One connection's state: sender, receiver, and where each side runs.
struct Conn {
    /// Buffer-identity namespace of the connection's rings and buffers.
    ns: u64,
    tx_lane: Lane,
    rx_lane: Lane,
    // Sender.
    app_written: u64,
    snd_una: u64,
    snd_nxt: u64,
    rwnd: u64,
    app_blocked: bool,
    app_scheduled: bool,
    /// Sends the NIC has not completed yet (as the driver last saw): visible, slot, bytes.
    tx_cqes: VecDeque<(Time, u64, u64)>,
    /// Bytes of those sends (TCP Small Queues' count).
    in_device: u64,
    tx_slot: u64,
    acks: RxQueue,
    // Receiver.
    rx_q: RxQueue,
    rcv_nxt: u64,
    /// Segments TCP holds ahead of a hole, by sequence, and how many it has held.
    ofo: BTreeMap<u64, Seg>,
    reordered: u64,
    /// Received segments not yet copied out: length, bytes copied, slot, node.
    sockq: VecDeque<(u64, u64, u64, u32)>,
    unread: u64,
    segs_unacked: u32,
    adv_wnd: u64,
    delivered: u64,
    delivered_window: u64,
    out_of_order: u64,
    tso_sends: u64,
    frames: u64,
}

impl Conn {
    fn new(i: usize, tx_lane: Lane, rx_lane: Lane, rcvbuf: u64) -> Conn {
        Conn {
            // Connection i's buffers live above bit 32: disjoint from every other's.
            ns: (i as u64) << 32,
            acks: RxQueue::on(tx_lane.node),
            rx_q: RxQueue::on(rx_lane.node),
            tx_lane,
            rx_lane,
            app_written: 0,
            snd_una: 0,
            snd_nxt: 0,
            rwnd: rcvbuf,
            app_blocked: false,
            app_scheduled: true,
            tx_cqes: VecDeque::new(),
            in_device: 0,
            tx_slot: 0,
            rcv_nxt: 0,
            ofo: BTreeMap::new(),
            reordered: 0,
            sockq: VecDeque::new(),
            unread: 0,
            segs_unacked: 0,
            adv_wnd: rcvbuf,
            delivered: 0,
            delivered_window: 0,
            out_of_order: 0,
            tso_sends: 0,
            frames: 0,
        }
    }
}

/// The streams' state between events: every connection and the timers of their events.
struct State {
    timers: Timers<(u32, Ev)>,
    spec: StreamSpec,
    mss: u64,
    /// The active connection and its index; the others wait in `conns`.
    k: Conn,
    cur: u32,
    conns: Vec<Conn>,
    /// Events handled.
    events: u64,
}

/// TCP_STREAM connections between two hosts, as one component of a [`NetWorld`]: its
/// views of the sending and receiving host (the active connection's lanes in them), where
/// their shared parts are in the world, and its migrating flow there, if any.
pub struct Streams {
    hosts: [NetHost; 2],
    at: [Shared; 2],
    flow: Option<usize>,
    st: State,
}

impl<'b> Component<NetWorld<'b>> for Streams {
    fn notify(&mut self, w: &mut NetWorld<'b>, me: ComponentId, event: Event) {
        let Event::Timer(key) = event else {
            return;
        };
        let (i, ev) = self.st.timers.take(key);
        let t = w.net.now();
        self.st.events += 1;
        // The workloads beside first: all reserve DRAM, LLC and interconnect in time order.
        w.before_event(t, matches!(ev, Ev::Warm));
        let [tx, rx] = &mut self.hosts;
        w.lend(self.at[0], tx);
        w.lend(self.at[1], rx);
        let mut s = Step {
            s: &mut self.st,
            net: &mut w.net,
            me,
            tx,
            rx,
            mig: self.flow.and_then(|f| w.flows.get_mut(f)),
        };
        s.s.activate(i, s.tx, s.rx);
        s.handle(t, ev);
        s.schedule_driver();
        w.lend(self.at[0], tx);
        w.lend(self.at[1], rx);
    }
}

/// One event's view: the streams' state with the world's parts it acts on.
struct Step<'x, 'a> {
    s: &'x mut State,
    net: &'x mut Net,
    me: ComponentId,
    tx: &'x mut NetHost,
    rx: &'x mut NetHost,
    mig: Option<&'x mut Migrating<'a>>,
}

impl Streams {
    /// One TCP stream per `(sender lane, receiver lane)` from `tx` to `rx` (views of two
    /// different hosts).
    pub fn new(
        tx: NetHost,
        rx: NetHost,
        spec: StreamSpec,
        lanes: Vec<(Lane, Lane)>,
    ) -> Result<Streams, String> {
        if spec.msg_bytes == 0 {
            return Err("msg_bytes must be > 0".into());
        }
        if spec.mtu < 576 || spec.mtu > 9000 {
            return Err(format!("mtu {} must be in 576..=9000", spec.mtu));
        }
        if lanes.is_empty() || lanes.len() > 256 {
            return Err(format!("{} connections: must be 1..=256", lanes.len()));
        }
        if tx.host == rx.host {
            return Err("a stream's sender and receiver are two hosts".into());
        }
        for (i, (a, b)) in lanes.iter().enumerate() {
            for (l, h, side) in [(a, &tx, "sender"), (b, &rx, "receiver")] {
                if l.pf >= h.nic.pfs.len() || l.node >= h.mem.params().sockets {
                    return Err(format!(
                        "connection {i}: {side} lane on pf{} / node {} does not exist",
                        l.pf, l.node
                    ));
                }
            }
        }
        let rcvbuf = rx.costs.rcvbuf_bytes;
        let mut hosts = [tx, rx];
        let [tx, rx] = &mut hosts;
        let home = (Lane::of(tx), Lane::of(rx));
        let mut conns: Vec<Conn> = lanes
            .into_iter()
            .enumerate()
            .map(|(i, (a, b))| Conn::new(i, a, b, rcvbuf))
            .collect();
        // Connection 0 is active: its lanes in the hosts, the hosts' own lanes in its slot.
        let mut k = std::mem::replace(&mut conns[0], Conn::new(0, home.0, home.1, rcvbuf));
        k.tx_lane.swap_into(tx);
        k.rx_lane.swap_into(rx);
        Ok(Streams {
            hosts,
            at: [Shared::default(); 2],
            flow: None,
            st: State {
                timers: Timers::new(),
                spec,
                mss: frame::mss(spec.mtu) as u64,
                k,
                cur: 0,
                conns,
                events: 0,
            },
        })
    }

    /// Joins `w` as component `me`: its hosts' memory systems and NICs are the world's
    /// from now on, and its connections start sending at time zero.
    pub fn start(&mut self, w: &mut NetWorld<'_>, me: ComponentId) -> Result<(), String> {
        let ns = w.start_model(self.st.spec.warmup, self.st.spec.window)?;
        for c in self.st.conns.iter_mut().chain([&mut self.st.k]) {
            c.ns += ns;
        }
        self.at = [w.join(&self.hosts[0]), w.join(&self.hosts[1])];
        for i in 0..self.st.conns.len() as u32 {
            self.st
                .timers
                .at(&mut w.net, Time::ZERO, me, (i, Ev::SenderApp));
        }
        let warm = self.st.spec.warmup;
        self.st.timers.at(&mut w.net, warm, me, (0, Ev::Warm));
        Ok(())
    }

    /// Where the host on `side` shares its memory system and NIC in the world (after
    /// `start`).
    pub fn at(&self, side: Side) -> Shared {
        match side {
            Side::Sender => self.at[0],
            Side::Receiver => self.at[1],
        }
    }

    /// The stream's one connection has its receiving thread moved (before `start`).
    fn migrate<'b>(
        &mut self,
        w: &mut NetWorld<'b>,
        me: ComponentId,
        m: Migrating<'b>,
    ) -> Result<(), String> {
        let n = self.st.conns.len();
        if n != 1 {
            return Err(format!("a migrating stream is one connection, not {n}"));
        }
        self.st.k.rx_q.rings = m.rings();
        let at = m.spec.mv.at;
        self.st.timers.at(&mut w.net, at, me, (0, Ev::Move));
        w.flows.push(m);
        self.flow = Some(w.flows.len() - 1);
        Ok(())
    }

    /// Connection `j`'s state and its sender's and receiver's cores (the active one's
    /// cores are in the hosts' views).
    fn conn(&self, j: usize) -> (&Conn, &Core, &Core) {
        if j == self.st.cur as usize {
            (&self.st.k, &self.hosts[0].core, &self.hosts[1].core)
        } else {
            let c = &self.st.conns[j];
            (c, &c.tx_lane.core, &c.rx_lane.core)
        }
    }

    /// What the window measured; `w` is the world the streams ran in.
    pub fn result(&self, w: &NetWorld<'_>) -> StreamResult {
        let s = &self.st;
        let n = s.conns.len();
        let win = s.spec.window.as_secs_f64();
        let util = |c: &Core| (c.busy.as_secs_f64() / win).min(1.0);
        let mem = |at: Shared| w.mem(at).dram_total() as f64 * 8.0 / win / 1e9;
        let cs: Vec<(&Conn, &Core, &Core)> = (0..n).map(|j| self.conn(j)).collect();
        let mean =
            |f: &dyn Fn(&(&Conn, &Core, &Core)) -> f64| cs.iter().map(f).sum::<f64>() / n as f64;
        let sum = |f: &dyn Fn(&Conn) -> u64| cs.iter().map(|c| f(c.0)).sum::<u64>();
        StreamResult {
            throughput_gbps: sum(&|c| c.delivered_window) as f64 * 8.0 / win / 1e9,
            sender_util: mean(&|c| util(c.1)),
            receiver_util: mean(&|c| util(c.2)),
            sender_mem_gbps: mem(self.at[0]),
            receiver_mem_gbps: mem(self.at[1]),
            out_of_order: sum(&|c| c.out_of_order),
            bytes_delivered: sum(&|c| c.delivered),
            bytes_sent: sum(&|c| c.snd_nxt),
            tso_sends: sum(&|c| c.tso_sends),
            frames: sum(&|c| c.frames),
            events: s.events,
            receiver_interrupts: sum(&|c| c.rx_q.coalesce.interrupts()),
            receiver_pauses: w.nic(self.at[1]).rx_buffer.paused_frames,
            receiver_paused_us: w.nic(self.at[1]).rx_buffer.paused.as_ps() as f64 / 1e6,
            connections: cs
                .iter()
                .map(|(c, tx, rx)| ConnStats {
                    delivered_window: c.delivered_window,
                    sender_util: util(tx),
                    receiver_util: util(rx),
                    receiver_interrupts: c.rx_q.coalesce.interrupts(),
                })
                .collect(),
        }
    }

    /// What a migrating stream observed of its receive side.
    fn observed(&self) -> Observed {
        let (c, _, _) = self.conn(0);
        // Conservation: every byte sent was read, is unread, held out of order or still
        // in a ring (frames on the wire are already queued for their completion time).
        let held: u64 = c.ofo.values().chain(&c.rx_q.pending).map(|g| g.len).sum();
        Observed {
            reordered: c.reordered,
            lost: c.snd_nxt - c.delivered - c.unread - held,
            ring_peak: c.rx_q.rings.iter().map(|r| r.peak).collect(),
        }
    }

    /// The views, with their own lanes back and the world's memory systems and NICs lent
    /// into them.
    fn into_hosts(mut self, w: &mut NetWorld<'_>) -> [NetHost; 2] {
        let [tx, rx] = &mut self.hosts;
        // Back to connection 0 and park it: every connection is in `conns`, the hosts
        // hold their own lanes again.
        self.st.activate(0, tx, rx);
        self.st.park(tx, rx);
        w.lend(self.at[0], tx);
        w.lend(self.at[1], rx);
        self.hosts
    }
}

/// Runs a TCP stream from `tx` to `rx` (each with its NIC, PF, core and node).
pub fn run(tx: &mut NetHost, rx: &mut NetHost, spec: StreamSpec) -> Result<StreamResult, String> {
    let lanes = vec![(Lane::of(tx), Lane::of(rx))];
    run_lanes(tx, rx, spec, lanes)
}

/// Runs one TCP stream per `(sender lane, receiver lane)` from `tx` to `rx` at once;
/// the result sums throughput and memory traffic, and averages core utilisation.
pub fn run_lanes(
    tx: &mut NetHost,
    rx: &mut NetHost,
    spec: StreamSpec,
    lanes: Vec<(Lane, Lane)>,
) -> Result<StreamResult, String> {
    run_inner(tx, rx, spec, lanes, None, None).map(|(r, _)| r)
}

/// As [`run_lanes`], with `bg` running on one host's memory system alongside: brought up
/// to every event's time before the event is handled (so both reserve DRAM, LLC and
/// interconnect in time order), its counters reset with the window's.
pub fn run_lanes_with(
    tx: &mut NetHost,
    rx: &mut NetHost,
    spec: StreamSpec,
    lanes: Vec<(Lane, Lane)>,
    bg: Option<Colocated<'_>>,
) -> Result<StreamResult, String> {
    run_inner(tx, rx, spec, lanes, None, bg).map(|(r, _)| r)
}

/// One stream whose receiving thread moves (`migration::run` checks the spec).
pub(crate) fn run_migrating<'a>(
    tx: &'a mut NetHost,
    rx: &'a mut NetHost,
    spec: super::migration::MigrationSpec,
    mig: Migrating<'a>,
) -> Result<MigrationResult, String> {
    let lanes = vec![(Lane::of(tx), Lane::of(rx))];
    let (stream, out) = run_inner(tx, rx, spec.stream, lanes, Some(mig), None)?;
    let (mig, observed) = out.expect("a migrating run returns its state");
    Ok(mig.result(stream, observed))
}

/// The streams alone in a world of their own; the hosts come back with the run's state.
fn run_inner<'a>(
    tx: &mut NetHost,
    rx: &mut NetHost,
    spec: StreamSpec,
    lanes: Vec<(Lane, Lane)>,
    mig: Option<Migrating<'a>>,
    bg: Option<Colocated<'a>>,
) -> Result<(StreamResult, Option<(Migrating<'a>, Observed)>), String> {
    let streams = Streams::new(tx.clone(), rx.clone(), spec, lanes)?;
    let mut world = NetWorld::new(1);
    let mut sim = Sim::new();
    let id = sim.add(streams);
    let started = sim.with(&mut world, id, |s: &mut Streams, w| {
        s.start(w, id)?;
        if let Some(b) = bg {
            w.beside(s.at(b.side), b.work);
        }
        match mig {
            Some(m) => s.migrate(w, id, m),
            None => Ok(()),
        }
    });
    started.expect("the streams are a component")?;
    world.run_through(&mut sim, spec.warmup + spec.window);
    let streams: Streams = sim.take(id).expect("the streams are a component");
    let r = streams.result(&world);
    let observed = streams.flow.map(|_| streams.observed());
    let [t, r_host] = streams.into_hosts(&mut world);
    (*tx, *rx) = (t, r_host);
    let out = world.flows.pop().zip(observed);
    Ok((r, out))
}

impl State {
    /// Makes connection `i` the active one: its state in `k`, its cores, PFs and nodes
    /// in the two hosts.
    fn activate(&mut self, i: u32, tx: &mut NetHost, rx: &mut NetHost) {
        if i == self.cur {
            return;
        }
        self.park(tx, rx);
        std::mem::swap(&mut self.k, &mut self.conns[i as usize]);
        self.cur = i;
        self.k.tx_lane.swap_into(tx);
        self.k.rx_lane.swap_into(rx);
    }

    /// Puts the active connection back in its slot (its lanes back from the hosts).
    fn park(&mut self, tx: &mut NetHost, rx: &mut NetHost) {
        self.k.tx_lane.swap_into(tx);
        self.k.rx_lane.swap_into(rx);
        std::mem::swap(&mut self.k, &mut self.conns[self.cur as usize]);
    }
}

impl Step<'_, '_> {
    fn at(&mut self, t: Time, ev: Ev) {
        let t = t.max(self.net.now());
        self.s.timers.at(self.net, t, self.me, (self.s.cur, ev));
    }

    /// Wakes the driver when its next work is earlier than its pending wake-up.
    fn schedule_driver(&mut self) {
        let Some(m) = &mut self.mig else { return };
        if let Some(w) = m.driver.next_work() {
            if m.driver_at.is_none_or(|a| w < a) {
                m.driver_at = Some(w);
                self.at(w, Ev::Driver);
            }
        }
    }

    /// Where a frame reaching the receive NIC at `at` goes: PF and ring.
    fn rx_path(&mut self, at: Time) -> (usize, usize) {
        let Some(m) = &mut self.mig else {
            return (self.rx.pf, 0);
        };
        let (pf, q) = m.driver.rx_steer(at);
        // The driver only learns the thread's two queues, which are the two rings.
        let ring = self.s.k.rx_q.rings.iter().position(|r| r.index == q);
        (pf, ring.unwrap_or(0))
    }

    fn handle(&mut self, t: Time, ev: Ev) {
        match ev {
            Ev::Warm => {
                self.tx.reset_counters(t);
                self.rx.reset_counters(t);
                self.s.k.delivered_window = 0;
                self.s.k.rx_q.coalesce.reset_count();
                for c in &mut self.s.conns {
                    c.delivered_window = 0;
                    c.rx_q.coalesce.reset_count();
                    c.tx_lane.core.restart(t);
                    c.rx_lane.core.restart(t);
                }
            }
            Ev::SenderApp => self.sender_app(t),
            Ev::DataCqe => {
                if let Some(at) = completion(&mut self.s.k.rx_q, t, &self.rx.coalescing) {
                    let g = self.s.k.rx_q.gen;
                    self.at(at, Ev::RxIrq(g));
                }
            }
            Ev::RxIrq(g) => {
                if g == self.s.k.rx_q.gen && !self.s.k.rx_q.napi {
                    self.receiver_poll(t, true);
                }
            }
            Ev::RxPoll => self.receiver_poll(t, false),
            Ev::AckCqe => {
                if let Some(at) = completion(&mut self.s.k.acks, t, &self.tx.coalescing) {
                    let g = self.s.k.acks.gen;
                    self.at(at, Ev::TxIrq(g));
                }
            }
            Ev::TxIrq(g) => {
                if g == self.s.k.acks.gen && !self.s.k.acks.napi {
                    self.sender_poll(t);
                }
            }
            Ev::Move => {
                // Only the receiving thread moves; its queue's interrupts follow it (the
                // new core's queue is the one its NAPI polls).
                let m = self
                    .mig
                    .as_mut()
                    .expect("moves are scheduled by migrations");
                self.rx.core.socket = m.spec.mv.to_socket;
                m.consumer = m.spec.mv.to_queue;
            }
            Ev::Driver => {
                let m = self
                    .mig
                    .as_mut()
                    .expect("driver work is scheduled by migrations");
                m.driver_at = None;
                m.driver.work(t);
            }
        }
    }

    /// The sending process: `send` calls until it has written a TSO's worth or the
    /// socket buffer is full, then the stack transmits what the window allows.
    fn sender_app(&mut self, t: Time) {
        self.s.k.app_scheduled = false;
        let start = self.tx.core.start(t);
        let mut cur = start;
        let sndbuf = self.tx.costs.rcvbuf_bytes;
        let c = self.tx.costs.clone();
        let mut batch = 0;
        self.reap_tx_completions(&mut cur);
        while batch < TSO_BYTES {
            if self.s.k.app_written - self.s.k.snd_una + self.s.spec.msg_bytes > sndbuf {
                self.s.k.app_blocked = true;
                break;
            }
            let n = self.s.spec.msg_bytes;
            let lines = n.div_ceil(LINE);
            cur += self
                .tx
                .core
                .cycles(c.syscall_cycles + lines * c.copy_line_cycles);
            // The user buffer is the same each call (hot); the skb pages are the socket's.
            let skb = self.s.k.ns
                + buf::SKB
                + (self.s.k.app_written / TSO_BYTES) % (sndbuf / TSO_BYTES).max(1);
            let sock = self.tx.core.socket;
            cur = cur
                + self
                    .tx
                    .mem
                    .cpu_read(cur, sock, self.tx.node, self.s.k.ns + buf::USER, n, false);
            let node = self.tx.node;
            cur = cur + self.tx.mem.cpu_write_home(cur, sock, node, skb, TSO_BYTES);
            self.s.k.app_written += n;
            batch += n;
            if self.s.k.app_written - self.s.k.snd_nxt >= TSO_BYTES {
                self.transmit(&mut cur, false);
            }
        }
        // End of the batch: no more data is coming right now (autocork releases it).
        self.transmit(&mut cur, true);
        self.tx.core.finish(start, cur);
        if !self.s.k.app_blocked {
            self.s.k.app_scheduled = true;
            self.at(cur, Ev::SenderApp);
        }
    }

    /// Sends TSO segments while data is queued and the window allows. Nagle: a
    /// sub-MSS remainder waits while data is in flight.
    fn transmit(&mut self, cur: &mut Time, flush: bool) {
        let c = self.tx.costs.clone();
        loop {
            let queued = self.s.k.app_written - self.s.k.snd_nxt;
            let in_flight = self.s.k.snd_nxt - self.s.k.snd_una;
            let room = self.s.k.rwnd.saturating_sub(in_flight);
            // TCP Small Queues: no more than `tsq_bytes` of this socket in the device's queue.
            if self.s.k.in_device >= c.tsq_bytes {
                return;
            }
            let n = queued.min(TSO_BYTES).min(room);
            if n == 0 || (n < TSO_BYTES && !flush) || (n < self.s.mss && in_flight > 0) {
                return;
            }
            *cur += self.tx.core.cycles(c.tx_send_cycles);
            let slot = self.s.k.tx_slot % RING;
            self.s.k.tx_slot += 1;
            let sock = self.tx.core.socket;
            let node = self.tx.node;
            let desc = self.s.k.ns + buf::TX_DESC + slot;
            self.tx
                .mem
                .cpu_write_home(*cur, sock, node, desc, DESC_BYTES);
            let skb = self.s.k.ns
                + buf::SKB
                + (self.s.k.snd_nxt / TSO_BYTES) % (self.tx.costs.rcvbuf_bytes / TSO_BYTES).max(1);
            let params = self.tx.nic.params.clone();
            let headers = frame::ETH_HEADER as u64 + frame::TCP_IP_HEADERS as u64;
            let data = super::fetch_send(self.tx, *cur, desc, skb, n + headers);
            // Segments onto the wire, each with its own headers and framing.
            let mut seq = self.s.k.snd_nxt;
            let mut left_port = data;
            let segs = frame::tso_segments(n as u32, self.s.mss as u32).count();
            for (i, len) in frame::tso_segments(n as u32, self.s.mss as u32).enumerate() {
                let ip = len + frame::TCP_IP_HEADERS;
                let on_wire = self
                    .tx
                    .nic
                    .tx_port
                    .reserve(data, frame::wire_bytes(ip) as u64);
                left_port = left_port.max(on_wire);
                let arrive = on_wire + params.wire + self.rx.nic.params.latency;
                self.s.k.frames += 1;
                if self.rx.lro {
                    // LRO: the burst's frames land in one aggregate; one completion at its end.
                    let ring = self.s.k.rx_q.rings[0];
                    let b = self.s.k.ns + buf::RX_DATA + ((ring.slot % RING) << 6) + i as u64;
                    let bytes = len as u64 + 66;
                    let nic = &mut self.rx.nic;
                    let admitted = nic.rx_buffer.admit(arrive, bytes);
                    let pf = &mut nic.pfs[self.rx.pf];
                    let done = pf.dma_write(admitted, &mut self.rx.mem, ring.node, b, bytes);
                    nic.rx_buffer.hold(admitted, done, bytes);
                    let left =
                        super::pause_sender(&mut self.tx.nic.tx_port, on_wire, arrive, admitted);
                    left_port = left_port.max(left);
                    if i + 1 < segs {
                        continue;
                    }
                    let bytes = frame::ETH_HEADER as u64 + 52;
                    let rx_pf = self.rx.pf;
                    let (visible, slot, _) =
                        self.s
                            .k
                            .rx_q
                            .receive(self.rx, rx_pf, 0, self.s.k.ns, arrive, bytes);
                    self.s.k.rx_q.push(Seg {
                        visible,
                        seq: self.s.k.snd_nxt,
                        len: n,
                        slot,
                        ring: 0,
                        node: ring.node,
                    });
                    self.at(visible, Ev::DataCqe);
                    break;
                }
                let (rx_pf, ring) = self.rx_path(arrive);
                let bytes = frame::frame_in_memory(ip) as u64;
                let (visible, slot, admitted) =
                    self.s
                        .k
                        .rx_q
                        .receive(self.rx, rx_pf, ring, self.s.k.ns, arrive, bytes);
                let left = super::pause_sender(&mut self.tx.nic.tx_port, on_wire, arrive, admitted);
                left_port = left_port.max(left);
                if let Some(m) = &mut self.mig {
                    m.sample(arrive, rx_pf, len as u64);
                }
                self.s.k.rx_q.push(Seg {
                    visible,
                    seq,
                    len: len as u64,
                    slot,
                    ring,
                    node: self.s.k.rx_q.rings[ring].node,
                });
                self.at(visible, Ev::DataCqe);
                seq += len as u64;
            }
            // The send completes once its last frame has left the port (as pktgen's): until
            // then its bytes count against TCP Small Queues, which so bounds what waits in
            // the NIC for the port, not only what waits for its reads.
            let pf = &mut self.tx.nic.pfs[self.tx.pf];
            let cqe = pf.dma_write(
                left_port,
                &mut self.tx.mem,
                node,
                self.s.k.ns + buf::TX_CQE + slot,
                CQE_BYTES,
            );
            self.s.k.tx_cqes.push_back((cqe, slot, n));
            self.s.k.in_device += n;
            self.s.k.snd_nxt += n;
            self.s.k.tso_sends += 1;
        }
    }

    /// The driver reads the transmit completions the NIC has written (one dependent
    /// line each, priced where it is).
    fn reap_tx_completions(&mut self, cur: &mut Time) {
        let sock = self.tx.core.socket;
        while let Some(&(vis, slot, bytes)) = self.s.k.tx_cqes.front() {
            if vis > *cur {
                break;
            }
            self.s.k.tx_cqes.pop_front();
            self.s.k.in_device -= bytes;
            *cur = *cur
                + self.tx.mem.cpu_read(
                    *cur,
                    sock,
                    self.tx.node,
                    self.s.k.ns + buf::TX_CQE + slot,
                    CQE_BYTES,
                    true,
                );
        }
    }
}

/// A completion became visible: while interrupts are on (no NAPI poll running), the
/// coalescer's decision under the host driver's setting.
fn completion(q: &mut RxQueue, t: Time, c: &Coalescing) -> Option<Time> {
    if q.napi {
        return None;
    }
    q.coalesce.completion(t, c)
}
