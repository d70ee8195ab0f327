//! A memcached server driven by memslap clients over TCP (IOctopus, `ioctopus.memcached`):
//! each client connection keeps one request outstanding (closed loop, no think time). A
//! GET is a small request in and the value out: memcached answers with `sendmsg` over
//! iovecs that point into the item, and the kernel copies those bytes into socket-buffer
//! pages (no zero-copy), which the NIC then reads as TSO sends. A SET is the value in: the
//! NIC writes MSS frames into the receive ring, and memcached `read`s them straight into
//! the item's slab memory (a copy out of the socket buffers), then replies `STORED`.
//!
//! Every packet is priced like `stream`'s: the NIC's descriptor, payload and completion
//! DMA over its PF's link and `sim::memsys` (DDIO share, DRAM, interconnect), the per-
//! segment, per-ACK, per-send and per-syscall cycles of `[platform.X.netstack]`, the
//! copies' line reads and writes where the lines are. Items are buffers in the server's
//! memory on the instance's node; with 512 KiB values their working set (`keys × value`)
//! is far bigger than the LLC, so a GET's copy reads DRAM and a SET's copy evicts dirty
//! lines back to it.
//!
//! Values carry real bytes: a SET stores the bytes the client generated, a GET returns the
//! stored bytes, and the client checks each returned value whole (see [`value_bytes`]).
//!
//! Simplifications, stated: the client side runs no core model (memslap's 14 threads on
//! 14 cores are not the bottleneck of one server core: assumption, docs/hardware.md §1 names
//! no client limit), but its port and PCIe link are priced; a SET's value leaves the
//! client as 64 KiB TSO sends whenever the server's receive ring has room for their frames
//! (the ring, not TCP's 6 MiB window, is what bounds a slow receiver: more would be dropped
//! and retransmitted — assumption); a GET's value is copied and sent in one `sendmsg`
//! (TCP Small Queues and the send window not modelled: one connection's 512 KiB fit the
//! 6 MiB socket buffer); an interrupt is paid when a packet finds the core idle, none while
//! it is busy (NAPI keeps polling).

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use devices::nic::{frame, HostBuf};
use sim::component::{Component, Sim};
use sim::memsys::LINE;
use sim::net::{ComponentId, Event, Net};
use sim::timers::Timers;
use sim::{dist, Time};

use super::stream::Lane;
use super::world::{NetWorld, Shared};
use super::{buf, Core, NetHost, CQE_BYTES, DESC_BYTES, RING, TSO_BYTES};
use crate::victim::Background;

/// memcached's own work per request — parsing the command, hashing the key, the item
/// lookup or allocation and LRU update — in cycles. Assumption: ≈ 1 µs at 2 GHz, the
/// order of memcached's per-request user-space path measured without the network stack;
/// docs/hardware.md §1 gives no figure.
pub const REQUEST_CYCLES: u64 = 2000;

/// Keys memslap draws from. Assumption: memaslap's default task window of 10 k keys; what
/// matters is that `keys × value` (≈ 5 GB at 512 KiB) is far beyond the 35 MB LLC
/// (docs/hardware.md §1), which any key space of more than ≈ 100 keys gives.
pub const MEMSLAP_KEYS: u64 = 10_000;

/// Items and socket-buffer pages are priced in chunks of this many bytes (one TSO send).
const CHUNK: u64 = TSO_BYTES;
/// Buffer namespace of item chunks (beside `buf`'s).
const ITEM: u64 = 7 << 40;
/// A command's line and the reply's header (`get <key>\r\n`, `VALUE <key> 0 <n>\r\n`,
/// `STORED\r\n`) beyond the key: a few tens of bytes.
const COMMAND_BYTES: u64 = 32;

/// What to run.
#[derive(Clone, Copy, Debug)]
pub struct MemcachedSpec {
    pub key_bytes: u64,
    pub value_bytes: u64,
    /// Fraction of requests that are SETs (0..=1).
    pub set_ratio: f64,
    /// memslap connections per server instance, each with one request outstanding.
    pub clients: u32,
    pub keys: u64,
    /// IP MTU.
    pub mtu: u32,
    pub warmup: Time,
    pub window: Time,
    pub seed: u64,
}

/// What a run measured over the window (sums over instances).
#[derive(Clone, Debug, Default)]
pub struct MemcachedResult {
    /// Requests completed (reply fully at the client) per second, thousands.
    pub kops: f64,
    pub gets: u64,
    pub sets: u64,
    /// Value bytes moved (both directions), Gb/s.
    pub value_gbps: f64,
    /// The server's DRAM reads + writes, Gb/s.
    pub mem_gbps: f64,
    /// Interconnect bytes of the server (both directions), Gb/s.
    pub interconnect_gbps: f64,
    /// Mean busy fraction of the server cores.
    pub server_util: f64,
    /// GET replies checked whole (whole run), and those whose bytes were not what a SET
    /// stored or that were older than a SET acknowledged before the GET was sent.
    pub values_checked: u64,
    pub values_corrupt: u64,
    pub values_stale: u64,
    pub events: u64,
    /// Per instance (lane), in lane order: its requests completed in the window.
    pub instances: Vec<InstanceCounts>,
}

/// One instance's share of a run's window.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct InstanceCounts {
    pub gets: u64,
    pub sets: u64,
    /// Its core's busy fraction.
    pub util: f64,
}

/// The bytes of version `version` of `key`'s value: the version and key (8 bytes each,
/// little-endian), then a stream determined by both. Version 0 is what the load phase
/// stored before the run.
pub fn value_bytes(key: u64, version: u64, len: u64) -> Vec<u8> {
    let mut v = Vec::with_capacity(len as usize);
    v.extend_from_slice(&version.to_le_bytes());
    v.extend_from_slice(&key.to_le_bytes());
    let mut x = key.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ version.rotate_left(32);
    while (v.len() as u64) < len {
        // splitmix64
        x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        v.extend_from_slice(&(z ^ (z >> 31)).to_le_bytes());
    }
    v.truncate(len as usize);
    v
}

/// The version a value claims, if its bytes are exactly that version of `key`'s value.
pub fn check_value(key: u64, bytes: &[u8]) -> Option<u64> {
    if bytes.len() < 16 || bytes[8..16] != key.to_le_bytes() {
        return None;
    }
    let version = u64::from_le_bytes(bytes[..8].try_into().ok()?);
    (value_bytes(key, version, bytes.len() as u64) == bytes).then_some(version)
}

#[derive(Clone, Copy, Debug)]
enum Ev {
    /// A client sends its next request.
    Issue,
    /// A GET request is visible in the server's ring (its slot).
    GetReq(u64),
    /// A SET's chunk (frames `slot..slot + frames`, `bytes` of value) is visible.
    SetChunk {
        slot: u64,
        frames: u64,
        bytes: u64,
    },
    /// ACK frames from the client (first slot, count) are visible.
    Acks(u64, u64),
    /// The reply is whole at the client.
    Reply,
    Warm,
}

enum Op {
    Get {
        key: u64,
        /// A SET of the key acknowledged before this GET was sent (None: one in flight).
        at_least: Option<u64>,
        /// The item's bytes as sent: shared with the item (a later SET links a new one),
        /// so a 512 KiB GET moves no bytes in the simulator itself.
        reply: Arc<[u8]>,
    },
    Set {
        key: u64,
        version: u64,
        value: Vec<u8>,
        /// Value bytes the client has sent, and the server has copied into the item.
        sent: u64,
        copied: u64,
    },
}

struct Conn {
    inst: usize,
    op: Option<Op>,
}

/// One memcached server instance: its core, PF and node, rings and items.
struct Inst {
    core: Core,
    pf: usize,
    node: u32,
    /// Buffer-identity namespace of its rings, socket buffers and items.
    ns: u64,
    rx_slot: u64,
    /// Frames written into the receive ring and not yet processed.
    ring_pending: u64,
    /// SET chunks waiting for ring room: connection, value bytes.
    backlog: VecDeque<(usize, u64)>,
    tx_slot: u64,
    skb: u64,
    /// Transmit completions not yet reaped: visible, slot.
    tx_cqes: VecDeque<(Time, u64)>,
    items: HashMap<u64, Arc<[u8]>>,
    /// GETs and SETs completed in the window.
    counts: (u64, u64),
}

/// The instances' and clients' state between events.
struct State {
    /// The model's buffer namespace in its world (its instances' are above it).
    ns: u64,
    timers: Timers<(u32, Ev)>,
    /// memslap's choices of operation and key.
    rng: dist::Rng,
    events: u64,
    spec: MemcachedSpec,
    mss: u64,
    insts: Vec<Inst>,
    conns: Vec<Conn>,
    next_version: u64,
    /// Client-side ledger, per (instance, key) — each instance is its own server with its
    /// own items: last acknowledged SET version, SETs in flight.
    acked: HashMap<(usize, u64), u64>,
    sets_in_flight: HashMap<(usize, u64), u32>,
    measuring: bool,
    r: MemcachedResult,
}

/// memcached instances on one server and their memslap clients on another, as one
/// component of a [`NetWorld`]: its views of the server and the client host, and where
/// their shared parts are in the world.
pub struct Memcached {
    hosts: [NetHost; 2],
    at: [Shared; 2],
    st: State,
}

impl<'b> Component<NetWorld<'b>> for Memcached {
    fn notify(&mut self, w: &mut NetWorld<'b>, me: ComponentId, event: Event) {
        let Event::Timer(key) = event else {
            return;
        };
        let (c, ev) = self.st.timers.take(key);
        let t = w.net.now();
        self.st.events += 1;
        // The workloads beside first: all reserve DRAM, LLC and interconnect in time order.
        w.before_event(t, matches!(ev, Ev::Warm));
        let [server, client] = &mut self.hosts;
        w.lend(self.at[0], server);
        w.lend(self.at[1], client);
        Step {
            s: &mut self.st,
            net: &mut w.net,
            me,
            server,
            client,
        }
        .handle(t, c as usize, ev);
        w.lend(self.at[0], server);
        w.lend(self.at[1], client);
    }
}

/// One event's view: the state with the world's parts it acts on.
struct Step<'x> {
    s: &'x mut State,
    net: &'x mut Net,
    me: ComponentId,
    server: &'x mut NetHost,
    client: &'x mut NetHost,
}

impl Memcached {
    /// One memcached instance per lane of `server` (its own core, the PF of its queue,
    /// the node of its rings and items), each with `spec.clients` connections from
    /// `client` (a view of another host).
    pub fn new(
        server: NetHost,
        client: NetHost,
        spec: MemcachedSpec,
        lanes: Vec<Lane>,
    ) -> Result<Memcached, String> {
        check(&spec, &server, &lanes)?;
        if server.host == client.host {
            return Err("memcached's server and its clients are two hosts".into());
        }
        let insts: Vec<Inst> = lanes
            .into_iter()
            .enumerate()
            .map(|(i, l)| Inst {
                core: l.core,
                pf: l.pf,
                node: l.node,
                ns: (i as u64) << 32,
                rx_slot: 0,
                ring_pending: 0,
                backlog: VecDeque::new(),
                tx_slot: 0,
                skb: 0,
                tx_cqes: VecDeque::new(),
                items: HashMap::new(),
                counts: (0, 0),
            })
            .collect();
        let conns: Vec<Conn> = (0..insts.len() * spec.clients as usize)
            .map(|c| Conn {
                inst: c / spec.clients as usize,
                op: None,
            })
            .collect();
        Ok(Memcached {
            hosts: [server, client],
            at: [Shared::default(); 2],
            st: State {
                ns: 0,
                timers: Timers::new(),
                rng: dist::seeded(spec.seed),
                events: 0,
                spec,
                mss: frame::mss(spec.mtu) as u64,
                insts,
                conns,
                next_version: 1,
                acked: HashMap::new(),
                sets_in_flight: HashMap::new(),
                measuring: false,
                r: MemcachedResult::default(),
            },
        })
    }

    /// Joins `w` as component `me`: its hosts' memory systems and NICs are the world's
    /// from now on, and every client issues its first request at time zero.
    pub fn start(&mut self, w: &mut NetWorld<'_>, me: ComponentId) -> Result<(), String> {
        let ns = w.start_model(self.st.spec.warmup, self.st.spec.window)?;
        self.st.ns = ns;
        for i in &mut self.st.insts {
            i.ns += ns;
        }
        self.at = [w.join(&self.hosts[0]), w.join(&self.hosts[1])];
        for c in 0..self.st.conns.len() as u32 {
            self.st
                .timers
                .at(&mut w.net, Time::ZERO, me, (c, Ev::Issue));
        }
        let warm = self.st.spec.warmup;
        self.st.timers.at(&mut w.net, warm, me, (0, Ev::Warm));
        Ok(())
    }

    /// Where the server's shared parts are in the world (after `start`).
    pub fn server(&self) -> Shared {
        self.at[0]
    }

    /// What the window measured; `w` is the world it ran in.
    pub fn result(&self, w: &NetWorld<'_>) -> MemcachedResult {
        let s = &self.st;
        let spec = s.spec;
        let win = spec.window.as_secs_f64();
        let n = s.insts.len() as f64;
        let mut r = s.r.clone();
        let mem = w.mem(self.at[0]);
        r.kops = (r.gets + r.sets) as f64 / win / 1e3;
        r.value_gbps = ((r.gets + r.sets) * spec.value_bytes) as f64 * 8.0 / win / 1e9;
        r.mem_gbps = mem.dram_total() as f64 * 8.0 / win / 1e9;
        let sockets = mem.params().sockets;
        r.interconnect_gbps =
            (0..sockets).map(|k| mem.interconnect_bytes(k)).sum::<u64>() as f64 * 8.0 / win / 1e9;
        let util = |i: &Inst| (i.core.busy.as_secs_f64() / win).min(1.0);
        r.server_util = s.insts.iter().map(util).sum::<f64>() / n;
        r.events = s.events;
        r.instances = s
            .insts
            .iter()
            .map(|i| InstanceCounts {
                gets: i.counts.0,
                sets: i.counts.1,
                util: util(i),
            })
            .collect();
        r
    }

    /// The views, with the world's memory systems and NICs lent back into them.
    fn into_hosts(mut self, w: &mut NetWorld<'_>) -> [NetHost; 2] {
        let [server, client] = &mut self.hosts;
        w.lend(self.at[0], server);
        w.lend(self.at[1], client);
        self.hosts
    }
}

/// The spec's values and the lanes, against the server.
fn check(spec: &MemcachedSpec, server: &NetHost, lanes: &[Lane]) -> Result<(), String> {
    if !(0.0..=1.0).contains(&spec.set_ratio) {
        return Err(format!("set_ratio {} must be in 0..=1", spec.set_ratio));
    }
    if spec.value_bytes < 16 || spec.value_bytes > 1 << 20 {
        return Err(format!(
            "value_bytes {} must be in 16..=1048576 (memcached's default item size limit)",
            spec.value_bytes
        ));
    }
    if spec.key_bytes == 0 || spec.key_bytes > 250 + 6 {
        return Err(format!(
            "key_bytes {} must be in 1..=256 (memcached keys are at most 250 bytes plus memslap's prefix)",
            spec.key_bytes
        ));
    }
    if spec.clients == 0 || spec.clients > 1024 {
        return Err(format!("clients {} must be in 1..=1024", spec.clients));
    }
    if spec.keys == 0 || spec.keys > 1 << 24 {
        return Err(format!("keys {} must be in 1..=16777216", spec.keys));
    }
    if spec.mtu < 576 || spec.mtu > 9000 {
        return Err(format!("mtu {} must be in 576..=9000", spec.mtu));
    }
    if lanes.is_empty() || lanes.len() > 256 {
        return Err(format!("{} instances: must be 1..=256", lanes.len()));
    }
    for (i, l) in lanes.iter().enumerate() {
        if l.pf >= server.nic.pfs.len() || l.node >= server.mem.params().sockets {
            return Err(format!(
                "instance {i}: lane on pf{} / node {} does not exist",
                l.pf, l.node
            ));
        }
    }
    Ok(())
}

/// One memcached instance on `server`'s own lane (core, PF, node), `spec.clients`
/// memslap connections from `client`.
pub fn run(
    server: &mut NetHost,
    client: &mut NetHost,
    spec: MemcachedSpec,
) -> Result<MemcachedResult, String> {
    let lane = Lane::of(server);
    run_instances(server, client, spec, vec![lane])
}

/// One memcached instance per lane of `server` (its own core, the PF of its queue, the
/// node of its rings and items), each with `spec.clients` connections from `client`; all
/// share the server's memory system, PCIe links and port.
pub fn run_instances(
    server: &mut NetHost,
    client: &mut NetHost,
    spec: MemcachedSpec,
    lanes: Vec<Lane>,
) -> Result<MemcachedResult, String> {
    run_with(server, client, spec, lanes, None)
}

/// As [`run_instances`], with `bg` (a co-located workload) running on the server's memory
/// system alongside: brought up to every event's time before the event is handled, its
/// counters reset with the window's.
pub fn run_with(
    server: &mut NetHost,
    client: &mut NetHost,
    spec: MemcachedSpec,
    lanes: Vec<Lane>,
    bg: Option<&mut dyn Background>,
) -> Result<MemcachedResult, String> {
    let mc = Memcached::new(server.clone(), client.clone(), spec, lanes)?;
    let mut world = NetWorld::new(spec.seed);
    let mut sim = Sim::new();
    let id = sim.add(mc);
    sim.with(&mut world, id, |m: &mut Memcached, w| {
        m.start(w, id)?;
        if let Some(b) = bg {
            w.beside(m.server(), b);
        }
        Ok::<(), String>(())
    })
    .expect("memcached is a component")?;
    world.run_through(&mut sim, spec.warmup + spec.window);
    let mc: Memcached = sim.take(id).expect("memcached is a component");
    let r = mc.result(&world);
    let [s, c] = mc.into_hosts(&mut world);
    (*server, *client) = (s, c);
    Ok(r)
}

impl Step<'_> {
    fn at(&mut self, t: Time, c: usize, ev: Ev) {
        let t = t.max(self.net.now());
        self.s.timers.at(self.net, t, self.me, (c as u32, ev));
    }

    fn handle(&mut self, t: Time, c: usize, ev: Ev) {
        match ev {
            Ev::Warm => {
                self.server.mem.reset_counters();
                for i in &mut self.s.insts {
                    i.core.restart(t);
                    i.counts = (0, 0);
                }
                self.s.r.gets = 0;
                self.s.r.sets = 0;
                self.s.measuring = true;
            }
            Ev::Issue => self.issue(t, c),
            Ev::GetReq(slot) => self.get(t, c, slot),
            Ev::SetChunk {
                slot,
                frames,
                bytes,
            } => self.set_chunk(t, c, slot, frames, bytes),
            Ev::Acks(slot, n) => self.acks(t, c, slot, n),
            Ev::Reply => self.reply(t, c),
        }
    }

    /// The client's next request: a SET with probability `set_ratio`, a uniform key.
    fn issue(&mut self, t: Time, c: usize) {
        let set = (dist::uniform_u32(&mut self.s.rng, 1 << 20) as f64)
            < self.s.spec.set_ratio * (1 << 20) as f64;
        let key = (dist::uniform_u32(&mut self.s.rng, u32::MAX) as u64) % self.s.spec.keys;
        let cmd = COMMAND_BYTES + self.s.spec.key_bytes;
        let inst = self.s.conns[c].inst;
        if set {
            let version = self.s.next_version;
            self.s.next_version += 1;
            *self.s.sets_in_flight.entry((inst, key)).or_default() += 1;
            self.s.conns[c].op = Some(Op::Set {
                key,
                version,
                value: value_bytes(key, version, self.s.spec.value_bytes),
                sent: 0,
                copied: 0,
            });
            // The command line rides in the first chunk; the value follows in TSO sends.
            let mut left = self.s.spec.value_bytes;
            while left > 0 {
                let n = left.min(CHUNK);
                left -= n;
                self.s.insts[inst].backlog.push_back((c, n));
            }
            self.release_backlog(t, inst);
        } else {
            let at_least = if self
                .s
                .sets_in_flight
                .get(&(inst, key))
                .copied()
                .unwrap_or(0)
                > 0
            {
                None
            } else {
                Some(self.s.acked.get(&(inst, key)).copied().unwrap_or(0))
            };
            self.s.conns[c].op = Some(Op::Get {
                key,
                at_least,
                reply: Arc::from([]),
            });
            let (visible, slot, _) = self.client_send(t, c, cmd);
            self.at(visible, c, Ev::GetReq(slot));
        }
    }

    /// Sends the SET chunks waiting for this instance's ring while it has room for their
    /// frames (the window update reaches the client one NIC latency, wire and NIC latency
    /// after `t`).
    fn release_backlog(&mut self, t: Time, inst: usize) {
        while let Some(&(c, n)) = self.s.insts[inst].backlog.front() {
            let frames = (n + COMMAND_BYTES + self.s.spec.key_bytes).div_ceil(self.s.mss);
            if self.s.insts[inst].ring_pending + frames > RING {
                return;
            }
            self.s.insts[inst].backlog.pop_front();
            let first = matches!(self.s.conns[c].op, Some(Op::Set { sent: 0, .. }));
            let extra = if first {
                COMMAND_BYTES + self.s.spec.key_bytes
            } else {
                0
            };
            if let Some(Op::Set { sent, .. }) = &mut self.s.conns[c].op {
                *sent += n;
            }
            let (visible, slot, frames) = self.client_send(t, c, n + extra);
            self.at(
                visible,
                c,
                Ev::SetChunk {
                    slot,
                    frames,
                    bytes: n,
                },
            );
        }
    }

    /// The client sends `bytes` on connection `c` from `t`: MSS frames on its port and the
    /// wire, written by the server's NIC into consecutive receive-ring slots with their
    /// completions. When the last completion is visible, the first slot, the frames.
    fn client_send(&mut self, t: Time, c: usize, bytes: u64) -> (Time, u64, u64) {
        let i = self.s.conns[c].inst;
        let inst = &mut self.s.insts[i];
        let cp = self.client.nic.params.clone();
        let sp = self.server.nic.params.clone();
        let first = inst.rx_slot;
        let mut visible = t;
        let mut frames = 0;
        for len in frame::tso_segments(bytes as u32, self.s.mss as u32) {
            let ip = len + frame::TCP_IP_HEADERS;
            let on_wire = self
                .client
                .nic
                .tx_port
                .reserve(t + cp.latency, frame::wire_bytes(ip) as u64);
            let arrive = on_wire + cp.wire + sp.latency;
            visible = visible.max(self.ring_write(i, arrive, frame::frame_in_memory(ip) as u64));
            frames += 1;
        }
        (visible, first, frames)
    }

    /// The server's NIC writes one frame into instance `i`'s next ring slot and its
    /// completion entry: when the entry is visible.
    fn ring_write(&mut self, i: usize, at: Time, bytes: u64) -> Time {
        let inst = &mut self.s.insts[i];
        let slot = inst.rx_slot % RING;
        inst.rx_slot += 1;
        inst.ring_pending += 1;
        let pf = &mut self.server.nic.pfs[inst.pf];
        let data = pf.dma_write(
            at,
            &mut self.server.mem,
            inst.node,
            inst.ns + buf::RX_DATA + (slot << 6),
            bytes,
        );
        pf.dma_write(
            data,
            &mut self.server.mem,
            inst.node,
            inst.ns + buf::RX_CQE + slot,
            CQE_BYTES,
        )
    }

    /// A task on instance `i`'s core for work ready at `t`: its start (an interrupt first
    /// if the core was idle) after reaping transmit completions.
    fn begin(&mut self, i: usize, t: Time) -> Time {
        let c = &self.server.costs;
        let inst = &mut self.s.insts[i];
        let idle = inst.core.busy_until() < t;
        let mut cur = inst.core.start(t);
        if idle {
            cur += inst.core.cycles(c.irq_cycles);
        }
        let sock = inst.core.socket;
        while let Some(&(vis, slot)) = inst.tx_cqes.front() {
            if vis > cur {
                break;
            }
            inst.tx_cqes.pop_front();
            cur = cur
                + self.server.mem.cpu_read(
                    cur,
                    sock,
                    inst.node,
                    inst.ns + buf::TX_CQE + slot,
                    CQE_BYTES,
                    true,
                );
        }
        cur
    }

    /// The driver and stack take `frames` completions from slot `first` on: each a
    /// dependent completion read and `per_frame` cycles.
    fn rx_frames(&mut self, i: usize, cur: &mut Time, first: u64, frames: u64, per_frame: u64) {
        let inst = &mut self.s.insts[i];
        let sock = inst.core.socket;
        for k in 0..frames {
            let slot = (first + k) % RING;
            *cur = *cur
                + self.server.mem.cpu_read(
                    *cur,
                    sock,
                    inst.node,
                    inst.ns + buf::RX_CQE + slot,
                    CQE_BYTES,
                    true,
                );
            *cur += inst.core.cycles(per_frame);
        }
        inst.ring_pending -= frames;
    }

    fn end(&mut self, i: usize, start: Time, cur: Time) {
        self.s.insts[i].core.finish(start, cur);
        self.release_backlog(cur, i);
    }

    /// A GET: the request's frame, memcached's lookup, then `sendmsg` of the item.
    fn get(&mut self, t: Time, c: usize, slot: u64) {
        let i = self.s.conns[c].inst;
        let start = self.begin(i, t);
        let mut cur = start;
        let costs = self.server.costs.clone();
        self.rx_frames(i, &mut cur, slot, 1, costs.rx_segment_cycles);
        let inst = &self.s.insts[i];
        cur += inst.core.cycles(costs.syscall_cycles + REQUEST_CYCLES);
        let Some(Op::Get { key, reply, .. }) = &mut self.s.conns[c].op else {
            return;
        };
        let key = *key;
        *reply = match inst.items.get(&key) {
            Some(v) => Arc::clone(v),
            None => value_bytes(key, 0, self.s.spec.value_bytes).into(),
        };
        let done = self.server_send(i, c, &mut cur, self.s.spec.value_bytes, Some(key));
        self.end(i, start, cur);
        self.at(done, c, Ev::Reply);
    }

    /// Frames of a SET's value: receive work, an ACK per two segments, then memcached's
    /// `read` copies the chunk into the item. The last chunk stores the item and replies.
    fn set_chunk(&mut self, t: Time, c: usize, first: u64, frames: u64, bytes: u64) {
        let i = self.s.conns[c].inst;
        let start = self.begin(i, t);
        let mut cur = start;
        let costs = self.server.costs.clone();
        self.rx_frames(i, &mut cur, first, frames, costs.rx_segment_cycles);
        let acks = frames / 2;
        let p = self.server.nic.params.clone();
        for _ in 0..acks {
            cur += self.s.insts[i].core.cycles(costs.ack_cycles);
            self.server
                .nic
                .tx_port
                .reserve(cur + p.latency, frame::wire_bytes(frame::ACK_BYTES) as u64);
        }
        let Some(Op::Set {
            key,
            copied,
            value,
            version,
            ..
        }) = &mut self.s.conns[c].op
        else {
            return;
        };
        let (key, offset) = (*key, *copied);
        *copied += bytes;
        let complete = *copied >= self.s.spec.value_bytes;
        let inst = &mut self.s.insts[i];
        let sock = inst.core.socket;
        cur += inst
            .core
            .cycles(costs.syscall_cycles + bytes.div_ceil(LINE) * costs.copy_line_cycles);
        for k in 0..frames {
            let slot = (first + k) % RING;
            cur = cur
                + self.server.mem.cpu_read(
                    cur,
                    sock,
                    inst.node,
                    inst.ns + buf::RX_DATA + (slot << 6),
                    self.s.mss,
                    false,
                );
        }
        let chunk = item_chunk(inst.ns, key, offset, self.s.spec.value_bytes);
        self.server
            .mem
            .cpu_write_home(cur, sock, inst.node, chunk, bytes);
        if !complete {
            self.end(i, start, cur);
            return;
        }
        // The item is linked: its bytes are the value the client sent.
        cur += inst.core.cycles(REQUEST_CYCLES);
        let (value, version) = (std::mem::take(value), *version);
        debug_assert_eq!(check_value(key, &value), Some(version));
        inst.items.insert(key, value.into());
        let done = self.server_send(i, c, &mut cur, 8, None);
        self.end(i, start, cur);
        self.at(done, c, Ev::Reply);
    }

    /// ACKs of a GET's value: per ACK a completion read and the ACK's processing.
    fn acks(&mut self, t: Time, c: usize, first: u64, n: u64) {
        let i = self.s.conns[c].inst;
        let start = self.begin(i, t);
        let mut cur = start;
        let ack = self.server.costs.ack_cycles;
        self.rx_frames(i, &mut cur, first, n, ack);
        self.end(i, start, cur);
    }

    /// `sendmsg` of `bytes` on connection `c` (a GET's value copied out of `item`'s
    /// chunks into socket-buffer pages, or a short reply): TSO sends through the
    /// instance's PF, frames over the port to the client's NIC, whose ACKs (one per two
    /// segments) come back into the server's ring. When the last byte is at the client.
    fn server_send(
        &mut self,
        i: usize,
        c: usize,
        cur: &mut Time,
        bytes: u64,
        item: Option<u64>,
    ) -> Time {
        let costs = self.server.costs.clone();
        let sp = self.server.nic.params.clone();
        let cp = self.client.nic.params.clone();
        let sndbuf_chunks = (costs.rcvbuf_bytes / CHUNK).max(1);
        *cur += self.s.insts[i].core.cycles(costs.syscall_cycles);
        let mut done = *cur;
        let mut offset = 0;
        while offset < bytes {
            let n = (bytes - offset).min(CHUNK);
            let inst = &mut self.s.insts[i];
            let sock = inst.core.socket;
            let skb = inst.ns + buf::SKB + inst.skb % sndbuf_chunks;
            inst.skb += 1;
            // The copy from the item's lines into the socket buffer's pages.
            *cur += inst.core.cycles(n.div_ceil(LINE) * costs.copy_line_cycles);
            if let Some(key) = item {
                let chunk = item_chunk(inst.ns, key, offset, self.s.spec.value_bytes);
                *cur = *cur
                    + self
                        .server
                        .mem
                        .cpu_read(*cur, sock, inst.node, chunk, n, false);
            }
            self.server
                .mem
                .cpu_write_home(*cur, sock, inst.node, skb, n);
            // The TSO send: descriptor, doorbell, the NIC's reads, frames, completion.
            *cur += inst.core.cycles(costs.tx_send_cycles);
            let slot = inst.tx_slot % RING;
            inst.tx_slot += 1;
            let desc_buf = inst.ns + buf::TX_DESC + slot;
            self.server
                .mem
                .cpu_write_home(*cur, sock, inst.node, desc_buf, DESC_BYTES);
            let headers = (frame::ETH_HEADER + frame::TCP_IP_HEADERS) as u64;
            let on = |buf, bytes| HostBuf {
                node: inst.node,
                buf,
                bytes,
            };
            let data = self.server.nic.fetch_send(
                *cur,
                &mut self.server.mem,
                inst.pf,
                on(desc_buf, DESC_BYTES),
                &[(inst.pf, on(skb, n + headers))],
            );
            let pf = &mut self.server.nic.pfs[inst.pf];
            let cqe = pf.dma_write(
                data,
                &mut self.server.mem,
                inst.node,
                inst.ns + buf::TX_CQE + slot,
                CQE_BYTES,
            );
            inst.tx_cqes.push_back((cqe, slot));
            let mut last = data;
            let mut segs = 0;
            for len in frame::tso_segments(n as u32, self.s.mss as u32) {
                let ip = len + frame::TCP_IP_HEADERS;
                let on_wire = self
                    .server
                    .nic
                    .tx_port
                    .reserve(data, frame::wire_bytes(ip) as u64);
                let arrive = on_wire + sp.wire + cp.latency;
                let cpf = &mut self.client.nic.pfs[self.client.pf];
                let landed = cpf.dma_write(
                    arrive,
                    &mut self.client.mem,
                    self.client.node,
                    self.s.ns + buf::RX_DATA + (c as u64) * 64 + segs % 64,
                    frame::frame_in_memory(ip) as u64,
                );
                last = last.max(landed);
                segs += 1;
            }
            done = done.max(last);
            // The client's ACKs for this send, one per two segments.
            let acks = segs / 2;
            if acks > 0 {
                let first = self.s.insts[i].rx_slot;
                let mut visible = last;
                for _ in 0..acks {
                    let on_wire = self.client.nic.tx_port.reserve(
                        last + cp.latency,
                        frame::wire_bytes(frame::ACK_BYTES) as u64,
                    );
                    let arrive = on_wire + cp.wire + sp.latency;
                    let v =
                        self.ring_write(i, arrive, frame::frame_in_memory(frame::ACK_BYTES) as u64);
                    visible = visible.max(v);
                }
                self.at(visible, c, Ev::Acks(first, acks));
            }
            offset += n;
        }
        done
    }

    /// The reply is whole at the client: a GET's value is checked; the client sends its
    /// next request at once.
    fn reply(&mut self, t: Time, c: usize) {
        match self.s.conns[c].op.take() {
            Some(Op::Get {
                key,
                at_least,
                reply,
            }) => {
                self.s.r.values_checked += 1;
                match check_value(key, &reply) {
                    None => self.s.r.values_corrupt += 1,
                    Some(v) if at_least.is_some_and(|a| v < a) => self.s.r.values_stale += 1,
                    Some(_) => {}
                }
                if self.s.measuring {
                    self.s.r.gets += 1;
                    self.s.insts[self.s.conns[c].inst].counts.0 += 1;
                }
            }
            Some(Op::Set { key, version, .. }) => {
                let inst = self.s.conns[c].inst;
                let a = self.s.acked.entry((inst, key)).or_default();
                *a = (*a).max(version);
                if let Some(n) = self.s.sets_in_flight.get_mut(&(inst, key)) {
                    *n -= 1;
                }
                if self.s.measuring {
                    self.s.r.sets += 1;
                    self.s.insts[inst].counts.1 += 1;
                }
            }
            None => {}
        }
        self.at(t, c, Ev::Issue);
    }
}

/// The buffer of the item chunk holding `offset` of `key`'s value.
fn item_chunk(ns: u64, key: u64, offset: u64, value_bytes: u64) -> u64 {
    ns + ITEM + key * value_bytes.div_ceil(CHUNK) + offset / CHUNK
}
