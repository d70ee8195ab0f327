//! The benchmark of the NUMA/RDMA study (docs/hardware.md §4) as a discrete-event run of
//! client threads, two RNICs and the server's memory: one RC QP per connection, one
//! client thread per connection on the client RNIC's node (hardware threads round robin),
//! each connection on its own adjacent slot of one server region.
//!
//! One operation's journey: the thread builds the WQE and stores it by BlueFlame
//! (`POST_CYCLES`, the platform's MMIO store, the PCIe link); the requester's transmit
//! unit takes it in order per QP — a READ or atomic only while the QP has fewer than
//! `max_rd_atomic` of them outstanding — the QPs with work taking turns one WQE each
//! (the RNIC's `SendArbiter`, which this run drives with its events), looks up the QP
//! context when it gets to the WQE, gathers a WRITE's payload by DMA unless inline, and
//! sends the packets; the responder's receive unit parses them, looks up the QP context
//! and the translation, and DMA-writes (WRITE: posted, the ACK leaves at once),
//! DMA-reads (READ: the response leaves once the data is in) or reads and writes back 8
//! bytes (atomics); the requester's receive unit takes the response, DMA-writes READ
//! data and the CQE; the thread, spinning on its CQ, reads the CQE (`POLL_CYCLES`).
//! Bytes move with the operations: a WRITE's payload lands in the server region, a READ
//! returns the server's bytes into the client region. A message of several MTU packets
//! goes through these stages packet by packet (cut-through).
//!
//! Variance (`RunOptions`): the thread notices a CQE at a uniformly random point of one
//! poll call after it lands, drawn from the run's seeded generator, so a run is a pure
//! function of its spec and seed.
//!
//! Roles are per connection (`Side`): each connection's requester is a thread of the
//! client or of the server host and its responder is the other host; the requester's
//! region is its own host's (`local` for the client, `remote` for the server). The
//! benchmark's connections all post from the client; an application on top
//! (`memcached`) also posts from the server and watches WRITEs land (`watch_writes`).
//!
//! `Mode::Closed`: each thread posts its next operation when it has seen the previous
//! completion (latency). `Mode::Open`: each thread keeps posting while fewer than `depth`
//! of its operations are unfinished, and completions are counted per 10 ms window
//! (`stats`).

use std::collections::VecDeque;

use devices::nic::tlp_wire_bytes;
use devices::rnic::qp::{execute, ATOMIC_BYTES};
use devices::rnic::{wire, Place, Qp, SendArbiter, Verb, Wqe};
use sim::net::{Event, Net, Notice};
use sim::timers::Timers;
use sim::{dist, Time};
use wire::Packet;

mod driver;
pub use driver::{run, run_with, run_with_agents, BenchRun};

use super::agents::ServerAgents;
use super::stats::{Samples, Throughput};
use super::{RdmaHost, Region, BENCH_MAX_INLINE, CQE_BYTES, POLL_CYCLES, POST_CYCLES};
use crate::net::Core;

/// Completion-queue entries per connection (assumption: a ring of 256 CQEs; each is its
/// own buffer in the memory system).
pub const CQ_DEPTH: u64 = 256;
const CQ_BUF: u64 = 0x70 << 40;
/// Send-queue slots per connection whose WQE lines the memory system tracks
/// (assumption: a ring of 256 × 64 B; the study's queues are deeper, but a slot is
/// reused only long after the RNIC fetched it, so the ring's depth does not matter).
const SQ_RING: u64 = 256;
const SQ_BUF: u64 = 0x71 << 40;

/// Bytes of a WQE in the send queue: control and remote-address segments (32 B), then
/// the inline payload or one data segment, in whole 64 B lines (the BlueFlame stores).
fn wqe_bytes(w: &Wqe) -> u64 {
    (32 + if w.inline { 4 + w.len } else { 16 }).div_ceil(64) * 64
}

/// How the threads drive their connections.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Mode {
    /// One operation outstanding per connection; `warmup` operations each before the
    /// `ops` measured.
    Closed { warmup: u64, ops: u64 },
    /// Up to `depth` operations unfinished per connection; `windows` samples of `window`
    /// after `warmup`.
    Open {
        warmup: Time,
        window: Time,
        windows: u32,
        depth: u32,
    },
}

/// One benchmark run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BenchSpec {
    pub verb: Verb,
    pub bytes: u64,
    pub connections: u32,
    /// Path MTU.
    pub mtu: u32,
    /// Each QP's `max_rd_atomic`.
    pub max_rd_atomic: u32,
    /// The server region on the node away from the server's RNIC.
    pub server_remote: bool,
    pub mode: Mode,
}

/// What a run measured.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BenchResult {
    /// Closed loop: mean of the connections' mean latencies, post to completion seen.
    pub latency_ns: f64,
    /// Open loop: sum of per-connection mean rates and the per-window deviation.
    pub throughput: Option<Throughput>,
    /// Operations completed in the whole run (warm-up included).
    pub operations: u64,
    /// Simulated time of the run.
    pub simulated: Time,
    /// Engine events handled.
    pub events: u64,
    /// QP-context and MTT cache misses of both RNICs in the measured part.
    pub qpc_misses: u64,
    pub mtt_misses: u64,
}

/// A completion as the thread saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Completion {
    pub conn: u32,
    pub wr_id: u64,
    /// READ: the bytes returned; atomic: the original value (8 bytes, little-endian).
    /// Empty unless `keep_data` (the bytes are in the requester's region either way).
    pub data: Vec<u8>,
    pub posted: Time,
    pub seen: Time,
}

/// A WRITE's bytes visible in its responder's region (`watch_writes`): a thread polling
/// that memory can see them from `at`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Landed {
    pub conn: u32,
    /// The responder's host.
    pub at_host: Side,
    pub offset: u64,
    pub len: u64,
    pub at: Time,
}

/// One of the two hosts of a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    Client,
    Server,
}

impl Side {
    pub fn other(self) -> Side {
        match self {
            Side::Client => Side::Server,
            Side::Server => Side::Client,
        }
    }
}

/// A thread that posts: its host and node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Thread {
    pub host: Side,
    pub node: u32,
}

/// A connection: the thread that posts on it (`Rdma::with_threads`) and its QP number,
/// the same on both hosts (one RC QP per connection: either end may post on it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnSpec {
    pub thread: usize,
    pub qpn: u32,
}

/// An event of one connection. A request or response carries when each of its packets
/// reaches the far port (the event fires at the first's arrival). A WRITE's payload is
/// read from the requester's region when the responder executes it (the verbs forbid
/// touching a posted buffer before its completion, so the bytes are the same).
enum Ev {
    Post,
    Doorbell(Wqe),
    Request(Wqe, Vec<Time>),
    /// The atomic's original value, or a hand-posted READ's bytes when `keep_data`.
    Response(Wqe, Vec<u8>, Vec<Time>),
    Cqe(Wqe, Vec<u8>),
    Landed(Wqe, Side),
    /// The transmit unit of this side's RNIC may be free for the next waiting QP.
    TxTurn(Side),
    /// `w`'s response is all in: its READ slot (if any) is free and the QP may have
    /// work to issue.
    Done(Wqe),
}

struct Conn {
    qp: Qp,
    /// The host that posts on this connection; the other responds.
    requester: Side,
    responder_qpn: u32,
    core: usize,
    /// Posted and not yet seen complete: (wr_id, posted at).
    posted: VecDeque<(u64, Time)>,
    next_wr: u64,
    cq_slot: u64,
    /// Closed loop: operations seen and the latency sum of the measured ones.
    seen: u64,
    lat_sum: f64,
    lat_n: u64,
    blocked: bool,
    /// WQEs posted (the send-queue slot of the next).
    sq_slot: u64,
}

/// Two hosts' RNICs, regions and posting threads, run as events.
pub struct Rdma<'a> {
    /// The buffer namespace of this run's queues (its hosts' `RdmaHost::ns`).
    ns: u64,
    /// The kernel's clock and queue; each event is a timer of this run's one component.
    net: Net,
    timers: Timers<(u32, Ev)>,
    /// The poll phase's draws (`RunOptions::seed`).
    rng: dist::Rng,
    /// Events handled.
    handled: u64,
    client: &'a mut RdmaHost,
    server: &'a mut RdmaHost,
    /// The client's region (sources of WRITEs, destinations of READs).
    pub local: Region,
    /// The server's region.
    pub remote: Region,
    conns: Vec<Conn>,
    cores: Vec<Core>,
    mtu: u32,
    /// The benchmark's workload; `None` when operations are posted by hand.
    work: Option<BenchSpec>,
    /// Completions of hand-posted operations.
    pub completions: Vec<Completion>,
    samples: Option<Samples>,
    completed: u64,
    /// The most READs and atomics one QP had outstanding at once.
    peak_reads: u32,
    poll_phase: bool,
    /// Largest WRITE payload posted inline (`BENCH_MAX_INLINE` unless an application
    /// says otherwise, `set_max_inline`).
    max_inline: u64,
    /// Server-side agents sharing the region's lines and the memory system.
    agents: Option<&'a mut dyn ServerAgents>,
    /// Hand-posted completions carry their bytes (`Completion::data`).
    pub keep_data: bool,
    /// Report WRITEs landing in their responder's region (`landed`).
    pub watch_writes: bool,
    /// WRITEs landed since the caller last drained it (`watch_writes`).
    pub landed: Vec<Landed>,
    /// Reused per operation, so the hot loop does not allocate for them.
    scratch: Vec<Time>,
    out_pkts: Vec<Packet>,
    back_pkts: Vec<Packet>,
}

/// Schedules `ev` of connection `c` at `at` (not before now): a free function, so that
/// callers can hold the run's hosts at the same time.
fn schedule(
    net: &mut Net,
    timers: &mut Timers<(u32, Ev)>,
    at: Time,
    c: u32,
    ev: Ev,
) -> Result<(), String> {
    if at < net.now() {
        return Err(format!(
            "an event at {at:?}, before the clock's {:?}",
            net.now()
        ));
    }
    timers.at(net, at, 0, (c, ev));
    Ok(())
}

/// The requester's host and region, then the responder's, of a connection posted from
/// `requester`.
/// The host on `side`; a free function so that callers can hold other fields of `Rdma`
/// (its connections, its cores) at the same time.
fn host_of<'b>(client: &'b mut RdmaHost, server: &'b mut RdmaHost, side: Side) -> &'b mut RdmaHost {
    match side {
        Side::Client => client,
        Side::Server => server,
    }
}

fn ends<'b>(
    client: &'b mut RdmaHost,
    server: &'b mut RdmaHost,
    local: &'b mut Region,
    remote: &'b mut Region,
    requester: Side,
) -> (
    &'b mut RdmaHost,
    &'b mut Region,
    &'b mut RdmaHost,
    &'b mut Region,
) {
    match requester {
        Side::Client => (client, local, server, remote),
        Side::Server => (server, remote, client, local),
    }
}

fn header_only(p: wire::Packets, into: &mut Vec<Packet>) {
    into.push(Packet {
        payload: 0,
        wire_bytes: p.wire_bytes,
    });
}

/// `w`'s request packets, into `into` (cleared).
fn packets_out(w: &Wqe, mtu: u32, into: &mut Vec<Packet>) {
    into.clear();
    match w.verb {
        Verb::Write => into.extend(wire::write_request_each(w.len, mtu)),
        Verb::Read => header_only(wire::read_request(), into),
        _ => header_only(wire::atomic_request(), into),
    }
}

/// `w`'s response packets, into `into` (cleared).
fn packets_back(w: &Wqe, mtu: u32, into: &mut Vec<Packet>) {
    into.clear();
    match w.verb {
        Verb::Write => header_only(wire::ack(), into),
        Verb::Read => into.extend(wire::read_response_each(w.len, mtu)),
        _ => header_only(wire::atomic_response(), into),
    }
}

/// How a run draws its variance.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunOptions {
    /// Seed of the run's generator.
    pub seed: u64,
    /// A spinning thread notices a completion at a uniformly random point of its poll
    /// loop's iteration (`poll_phase`); off, at once.
    pub poll_phase: bool,
}

impl Default for RunOptions {
    fn default() -> RunOptions {
        RunOptions {
            seed: 1,
            poll_phase: true,
        }
    }
}

impl<'a> Rdma<'a> {
    /// `connections` RC QPs between `client` and `server` with `max_rd_atomic` each,
    /// their threads on the client RNIC's node; `local` and `remote` registered regions.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        client: &'a mut RdmaHost,
        server: &'a mut RdmaHost,
        local: Region,
        remote: Region,
        connections: u32,
        max_rd_atomic: u32,
        mtu: u32,
    ) -> Result<Rdma<'a>, String> {
        if connections == 0 {
            return Err("connections must be at least 1".into());
        }
        let node = client.rnic_node();
        let n = client.threads_per_node.max(1).min(connections);
        let threads = vec![
            Thread {
                host: Side::Client,
                node
            };
            n as usize
        ];
        let conns: Vec<ConnSpec> = (0..connections)
            .map(|c| ConnSpec {
                thread: (c % n) as usize,
                qpn: c + 1,
            })
            .collect();
        Rdma::with_threads(
            client,
            server,
            local,
            remote,
            &threads,
            &conns,
            max_rd_atomic,
            mtu,
        )
    }

    /// RC QPs between `client` and `server`, connection `c` posted by
    /// `threads[conns[c].thread]` (a thread of either host) and answered by the other
    /// host; `local` is the client's region, `remote` the server's. Two connections may
    /// name the same QP, one posting from each end.
    #[allow(clippy::too_many_arguments)]
    pub fn with_threads(
        client: &'a mut RdmaHost,
        server: &'a mut RdmaHost,
        local: Region,
        remote: Region,
        threads: &[Thread],
        conns: &[ConnSpec],
        max_rd_atomic: u32,
        mtu: u32,
    ) -> Result<Rdma<'a>, String> {
        wire::check_mtu(mtu)?;
        if conns.is_empty() {
            return Err("connections must be at least 1".into());
        }
        for h in [&*client, &*server] {
            let max = h.rnic.params.max_rd_atomic;
            if max_rd_atomic == 0 || max_rd_atomic > max {
                return Err(format!(
                    "max_rd_atomic {max_rd_atomic}: host `{}`'s RNIC allows 1..={max}",
                    h.name
                ));
            }
        }
        let mut cores = Vec::with_capacity(threads.len());
        for t in threads {
            let h = match t.host {
                Side::Client => &*client,
                Side::Server => &*server,
            };
            if t.node >= h.mem.params().sockets {
                return Err(format!("host `{}` has no node {}", h.name, t.node));
            }
            cores.push(h.core(t.node));
        }
        let conns = conns
            .iter()
            .enumerate()
            .map(|(c, s)| {
                let th = threads
                    .get(s.thread)
                    .ok_or_else(|| format!("connection {c}: no thread {}", s.thread))?;
                Ok(Conn {
                    qp: Qp::new(s.qpn, max_rd_atomic),
                    requester: th.host,
                    responder_qpn: s.qpn,
                    core: s.thread,
                    posted: VecDeque::new(),
                    next_wr: 0,
                    cq_slot: 0,
                    seen: 0,
                    lat_sum: 0.0,
                    lat_n: 0,
                    blocked: false,
                    sq_slot: 0,
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
        // The arbiters' send queues are this run's connections, new on both RNICs.
        client.rnic.send = SendArbiter::default();
        server.rnic.send = SendArbiter::default();
        let opts = RunOptions::default();
        Ok(Rdma {
            ns: client.ns,
            net: Net::new(opts.seed),
            timers: Timers::new(),
            rng: dist::seeded(opts.seed),
            handled: 0,
            client,
            server,
            local,
            remote,
            conns,
            cores,
            mtu,
            work: None,
            completions: Vec::new(),
            samples: None,
            completed: 0,
            peak_reads: 0,
            poll_phase: opts.poll_phase,
            max_inline: BENCH_MAX_INLINE,
            agents: None,
            keep_data: true,
            watch_writes: false,
            landed: Vec::new(),
            scratch: Vec::new(),
            out_pkts: Vec::new(),
            back_pkts: Vec::new(),
        })
    }

    /// Draws the run's variance from `opts` (before anything is posted).
    pub fn set_options(&mut self, opts: RunOptions) {
        self.rng = dist::seeded(opts.seed);
        self.poll_phase = opts.poll_phase;
    }

    /// WRITEs of up to `bytes` are posted inline from now on (their payload rides in the
    /// BlueFlame store; the RNIC gathers nothing).
    pub fn set_max_inline(&mut self, bytes: u64) {
        self.max_inline = bytes;
    }

    /// Server-side agents (on the server host) from now on.
    pub fn set_agents(&mut self, agents: Option<&'a mut dyn ServerAgents>) {
        self.agents = agents;
    }

    /// Posts `verb` of `len` bytes on connection `conn` at the current time: bytes at
    /// `remote` of the responder's region, `local` of the requester's. Errors on a
    /// request outside the regions.
    pub fn post(
        &mut self,
        conn: u32,
        verb: Verb,
        remote: u64,
        local: u64,
        len: u64,
    ) -> Result<u64, String> {
        let now = self.net.now();
        self.post_at(conn, now, verb, remote, local, len)
    }

    /// `post` by the connection's thread at `at` (no earlier than the current time).
    pub fn post_at(
        &mut self,
        conn: u32,
        at: Time,
        verb: Verb,
        remote: u64,
        local: u64,
        len: u64,
    ) -> Result<u64, String> {
        if at < self.net.now() {
            return Err(format!("connection {conn}: a post in the past"));
        }
        let c = self
            .conns
            .get_mut(conn as usize)
            .ok_or_else(|| format!("no connection {conn}"))?;
        let w = Wqe {
            wr_id: c.next_wr,
            verb,
            remote,
            local,
            len,
            inline: verb == Verb::Write && len <= self.max_inline,
        };
        let (own, far) = match c.requester {
            Side::Client => (self.local.len(), self.remote.len()),
            Side::Server => (self.remote.len(), self.local.len()),
        };
        w.check(own, far)?;
        c.next_wr += 1;
        self.post_wqe(conn, at, w)?;
        Ok(w.wr_id)
    }

    /// The next event, if it is due by `until`: its time, connection and what it is.
    fn next(&mut self, until: Time) -> Option<(Time, u32, Ev)> {
        let key = match self.net.next_notice(until)? {
            Notice::To(_, Event::Timer(key)) => key,
            n => unreachable!("the run sets only timers: {n:?}"),
        };
        let (c, ev) = self.timers.take(key);
        self.handled += 1;
        Some((self.net.now(), c, ev))
    }

    /// Schedules `ev` of connection `c` at `at` (not before now).
    fn at(&mut self, at: Time, c: u32, ev: Ev) -> Result<(), String> {
        schedule(&mut self.net, &mut self.timers, at, c, ev)
    }

    /// The current simulated time.
    pub fn now(&self) -> Time {
        self.net.now()
    }

    /// The host that posts on connection `conn`.
    pub fn requester(&self, conn: u32) -> Option<Side> {
        self.conns.get(conn as usize).map(|c| c.requester)
    }

    /// Thread `t`'s core (the caller's work on it, e.g. an application's request
    /// handling, is priced there).
    pub fn core_mut(&mut self, t: usize) -> Option<&mut Core> {
        self.cores.get_mut(t)
    }

    /// The host on `side`.
    pub fn host_mut(&mut self, side: Side) -> &mut RdmaHost {
        host_of(self.client, self.server, side)
    }

    /// The most READs and atomics any QP had outstanding at once so far.
    pub fn peak_reads_in_flight(&self) -> u32 {
        self.peak_reads
    }

    /// Runs until nothing is left to do (hand-posted operations).
    pub fn run(&mut self) -> Result<(), String> {
        while self.step()?.is_some() {}
        Ok(())
    }

    /// Handles the next event; its time, or `None` when nothing is left. New
    /// `completions` and `landed` WRITEs accumulate for the caller to drain.
    pub fn step(&mut self) -> Result<Option<Time>, String> {
        let Some((t, c, ev)) = self.next(Time::MAX) else {
            return Ok(None);
        };
        self.handle(t, c, ev)?;
        Ok(Some(t))
    }

    /// The thread builds `w` in its send queue in memory and stores it into the RNIC's
    /// BlueFlame page (libmlx4 writes a BlueFlame WQE to both).
    fn post_wqe(&mut self, c: u32, at: Time, w: Wqe) -> Result<(), String> {
        let conn = &mut self.conns[c as usize];
        let core = &mut self.cores[conn.core];
        let start = core.start(at);
        let end = start + core.cycles(POST_CYCLES);
        core.finish(start, end);
        conn.posted.push_back((w.wr_id, start));
        let wqe_bytes = wqe_bytes(&w);
        let sq_line = self.ns + SQ_BUF + ((c as u64) << 16) + conn.sq_slot % SQ_RING;
        conn.sq_slot += 1;
        let node = core.socket;
        let h = host_of(self.client, self.server, conn.requester);
        h.mem.cpu_write(end, node, sq_line, wqe_bytes);
        let pf = &mut h.rnic.pf;
        let on_link = pf.down.reserve(
            end + h.cpu_mmio_write,
            tlp_wire_bytes(wqe_bytes, pf.mps, false),
        );
        let at_rnic = on_link + pf.link_latency;
        self.at(at_rnic, c, Ev::Doorbell(w))
    }

    fn handle(&mut self, t: Time, c: u32, ev: Ev) -> Result<(), String> {
        match ev {
            Ev::Post => self.next_post(c, t),
            Ev::Doorbell(w) => {
                self.doorbell(c, t, w);
                self.try_issue(c, t)
            }
            Ev::Request(w, arrivals) => self.respond(c, w, &arrivals),
            Ev::Response(w, data, arrivals) => self.requester_receive(c, w, data, &arrivals),
            Ev::Cqe(w, data) => self.seen(c, t, w, data),
            Ev::Landed(w, at_host) => {
                self.landed.push(Landed {
                    conn: c,
                    at_host,
                    offset: w.remote,
                    len: w.len,
                    at: t,
                });
                Ok(())
            }
            Ev::TxTurn(side) => self.tx_turn(side, t),
            Ev::Done(w) => {
                self.conns[c as usize].qp.complete(&w);
                self.try_issue(c, t)
            }
        }
    }

    /// `w`'s BlueFlame store reaches the RNIC at `t`; the RNIC takes it or fetches it
    /// from the send queue (`Rnic::doorbell`).
    fn doorbell(&mut self, c: u32, t: Time, w: Wqe) {
        let conn = &mut self.conns[c as usize];
        let ahead = conn.qp.sq.len();
        let slot = conn.sq_slot - 1 - ahead as u64;
        let sq_line = Place {
            node: self.cores[conn.core].socket,
            buf: self.ns + SQ_BUF + ((c as u64) << 16) + slot % SQ_RING,
        };
        let h = host_of(self.client, self.server, conn.requester);
        h.rnic
            .doorbell(t, &mut h.mem, c as usize, ahead, sq_line, wqe_bytes(&w));
        conn.qp.sq.push_back(w);
    }

    /// The send arbiter of `side`'s RNIC.
    fn arbiter(&mut self, side: Side) -> &mut SendArbiter {
        &mut self.host_mut(side).rnic.send
    }

    /// QP `c` may have work for its RNIC's transmit unit at `t`: issued at once when the
    /// unit is free and no other QP waits for it, else queued for a turn.
    fn try_issue(&mut self, c: u32, t: Time) -> Result<(), String> {
        if self.conns[c as usize].qp.next_issuable().is_none() {
            return Ok(());
        }
        let side = self.conns[c as usize].requester;
        if self.arbiter(side).takes_at_once(t) {
            self.issue(c, t)?;
        }
        if self.conns[c as usize].qp.next_issuable().is_none() {
            return Ok(());
        }
        match self.arbiter(side).wait(c as usize, t) {
            Some(at) => self.turn_at(side, at),
            None => Ok(()),
        }
    }

    /// A `TxTurn` for `side` at `at` (the arbiter says when one is due).
    fn turn_at(&mut self, side: Side, at: Time) -> Result<(), String> {
        self.at(at, 0, Ev::TxTurn(side))
    }

    /// The transmit unit of `side` may be free at `t`: the next waiting QP with work
    /// has its turn.
    fn tx_turn(&mut self, side: Side, t: Time) -> Result<(), String> {
        let conns = &self.conns;
        let h = host_of(self.client, self.server, side);
        let Some(q) = h.rnic.send.turn(|q| conns[q].qp.next_issuable().is_some()) else {
            return Ok(());
        };
        self.issue(q as u32, t)?;
        let more = self.conns[q].qp.next_issuable().is_some();
        match self.arbiter(side).end_turn(q, more, t) {
            Some(at) => self.turn_at(side, at),
            None => Ok(()),
        }
    }

    /// The requester issues its QP's next WQE: transmit unit, QP context, gather.
    fn issue(&mut self, c: u32, t: Time) -> Result<(), String> {
        let side = self.conns[c as usize].requester;
        if let Some(w) = self.conns[c as usize].qp.issue() {
            let conn = &self.conns[c as usize];
            let qpn = conn.qp.qpn;
            self.peak_reads = self.peak_reads.max(conn.qp.reads_in_flight());
            let (h, own, _, _) = ends(
                self.client,
                self.server,
                &mut self.local,
                &mut self.remote,
                side,
            );
            let rn = &mut h.rnic;
            let fetched = rn.send.take(c as usize);
            let wqe = rn.params.wqe;
            // A fetched WQE streams into the unit over the link as read completions
            // before it is parsed, as a gathered payload does; a BlueFlame one is there.
            let (from, streaming) = match fetched {
                Some(f) => (t.max(f), rn.gather_stream(wqe_bytes(&w))),
                None => (t, Time::ZERO),
            };
            let s = rn.tx.serve(from, wqe + streaming);
            let ready = rn.qp_context(s + streaming, &mut h.mem, qpn) + wqe;
            rn.tx.hold_until(ready);
            packets_out(&w, self.mtu, &mut self.out_pkts);
            let out = &self.out_pkts;
            let gathered;
            let ready_each: &[Time] = if w.verb == Verb::Write && !w.inline {
                let tr = rn.translate(ready, &mut h.mem, own.key, w.local, w.len);
                let buf = own.buf_at(w.local);
                gathered = rn.dma_read_each(tr, &mut h.mem, own.node, buf, out);
                let streamed = tr + rn.gather_stream(w.len);
                rn.tx.hold_until(streamed);
                &gathered
            } else {
                self.scratch.clear();
                self.scratch.resize(out.len(), ready);
                &self.scratch
            };
            let done = rn.tx.free_at();
            // Cut-through: each packet leaves once its own payload is in.
            let arrivals = rn.transmit_each(ready_each, out);
            rn.send.issued(c as usize, done);
            self.at(arrivals[0], c, Ev::Request(w, arrivals))?;
        }
        Ok(())
    }

    /// A message's packets arriving at `rn` at `arrivals`: the first parsed, QP `qpn`'s
    /// context looked up (the receive unit waits for a missing one), then the rest;
    /// when each is parsed and when the context is there.
    fn receive_message(h: &mut RdmaHost, qpn: u32, arrivals: &[Time]) -> (Vec<Time>, Time) {
        let rn = &mut h.rnic;
        let mut parsed = rn.receive_each(&arrivals[..1]);
        let ctx = rn.qp_context(parsed[0], &mut h.mem, qpn);
        rn.rx.hold_until(ctx);
        if arrivals.len() > 1 {
            parsed.extend(rn.receive_each(&arrivals[1..]));
        }
        (parsed, ctx)
    }

    /// The responder: receive, context, translation, the DMA, the response — per
    /// packet, so a multi-packet message is pipelined through the stages.
    fn respond(&mut self, c: u32, w: Wqe, arrivals: &[Time]) -> Result<(), String> {
        let conn = &self.conns[c as usize];
        let (qpn, side) = (conn.responder_qpn, conn.requester);
        let (_, own, h, far) = ends(
            self.client,
            self.server,
            &mut self.local,
            &mut self.remote,
            side,
        );
        let (parsed, ctx) = Self::receive_message(h, qpn, arrivals);
        let rn = &mut h.rnic;
        let tr = rn.translate(ctx, &mut h.mem, far.key, w.remote, w.len);
        let (node, buf) = (far.node, far.buf_at(w.remote));
        // Lines the server's agents hold: the DMA waits for their snoops.
        let dma = match (side, self.agents.as_deref_mut()) {
            (Side::Client, Some(a)) => a.device_access(tr, &mut h.mem, far, w, rn.socket()),
            _ => tr,
        };
        packets_back(&w, self.mtu, &mut self.back_pkts);
        let back = &self.back_pkts;
        let r = w.remote as usize..(w.remote + w.len) as usize;
        let l = w.local as usize..(w.local + w.len) as usize;
        // The bytes move here; READ data lands in the requester's region, which its
        // thread reads only after the completion, so the early copy is not observable.
        let data = match w.verb {
            Verb::Write => {
                far.bytes[r].copy_from_slice(&own.bytes[l]);
                Vec::new()
            }
            Verb::Read => {
                own.bytes[l].copy_from_slice(&far.bytes[r.clone()]);
                if self.keep_data && self.work.is_none() {
                    far.bytes[r].to_vec()
                } else {
                    Vec::new()
                }
            }
            _ => execute(w.verb, &mut far.bytes, w.remote, w.len, &[]),
        };
        let read_each;
        let ready_each: &[Time] = match w.verb {
            Verb::Write => {
                self.scratch.clear();
                self.scratch.extend(parsed.iter().map(|&p| p.max(dma)));
                // Posted: the ACK does not wait for the writes to become visible, only
                // for the last packet.
                packets_out(&w, self.mtu, &mut self.out_pkts);
                let visible =
                    rn.dma_write_each(&mut h.mem, node, buf, &self.scratch, &self.out_pkts, None);
                if self.watch_writes {
                    let ev = Ev::Landed(w, side.other());
                    schedule(&mut self.net, &mut self.timers, visible, c, ev)?;
                }
                let last = self.scratch.len() - 1;
                &self.scratch[last..]
            }
            Verb::Read => {
                read_each = rn.dma_read_each(dma, &mut h.mem, node, buf, back);
                &read_each
            }
            _ => {
                let r = rn.pf.dma_read(dma, &mut h.mem, node, buf, ATOMIC_BYTES);
                rn.pf.dma_write(r, &mut h.mem, node, buf, ATOMIC_BYTES);
                self.scratch.clear();
                self.scratch.push(r);
                &self.scratch
            }
        };
        let built = rn.build_each(ready_each);
        let arrivals = rn.transmit_each(&built, back);
        self.at(arrivals[0], c, Ev::Response(w, data, arrivals))
    }

    /// The requester takes the response: READ data and the CQE written by DMA.
    fn requester_receive(
        &mut self,
        c: u32,
        w: Wqe,
        data: Vec<u8>,
        arrivals: &[Time],
    ) -> Result<(), String> {
        let conn = &mut self.conns[c as usize];
        let (qpn, side) = (conn.qp.qpn, conn.requester);
        let cqe = self.ns + CQ_BUF + ((c as u64) << 16) + conn.cq_slot % CQ_DEPTH;
        conn.cq_slot += 1;
        let (h, own, _, _) = ends(
            self.client,
            self.server,
            &mut self.local,
            &mut self.remote,
            side,
        );
        let (parsed, ctx) = Self::receive_message(h, qpn, arrivals);
        let done = parsed[parsed.len() - 1].max(ctx);
        let rn = &mut h.rnic;
        let node = own.node;
        let visible = if w.verb.is_read_like() {
            if w.verb.is_atomic() {
                let l = w.local as usize..w.local as usize + data.len();
                own.bytes[l].copy_from_slice(&data);
            }
            let tr = rn.translate(ctx, &mut h.mem, own.key, w.local, w.len);
            let buf = own.buf_at(w.local);
            self.scratch.clear();
            self.scratch.extend(parsed.iter().map(|&p| p.max(tr)));
            // Each response packet's data is written as it is parsed; an atomic's
            // original value rides in its one packet's AtomicAckETH.
            packets_back(&w, self.mtu, &mut self.back_pkts);
            if w.verb.is_atomic() {
                self.back_pkts[0].payload = ATOMIC_BYTES;
            }
            rn.dma_write_each(
                &mut h.mem,
                node,
                buf,
                &self.scratch,
                &self.back_pkts,
                Some((cqe, CQE_BYTES)),
            )
        } else {
            rn.pf.dma_write(done, &mut h.mem, node, cqe, CQE_BYTES)
        };
        // The READ slot is free only once the last response packet is parsed (`done`),
        // not when the first arrives: the QP may issue again then, taking its place among
        // the QPs waiting for the transmit unit at that time.
        self.at(done, c, Ev::Done(w))?;
        let data = if self.work.is_some() || !self.keep_data {
            Vec::new()
        } else {
            data
        };
        self.at(visible, c, Ev::Cqe(w, data))
    }

    /// The thread spinning on its CQ reads the CQE and takes the completion.
    fn seen(&mut self, c: u32, t: Time, w: Wqe, data: Vec<u8>) -> Result<(), String> {
        let conn = &mut self.conns[c as usize];
        let cqe = self.ns + CQ_BUF + ((c as u64) << 16) + (conn.seen % CQ_DEPTH);
        let core = &mut self.cores[conn.core];
        // The thread spins on ibv_poll_cq unsynchronised with the RNIC, so it notices the
        // CQE a uniformly random part of one poll call (POLL_CYCLES) after it lands. (Too
        // little variance to make 2–8 closed-loop connections queue at the RNIC.)
        let phase = if self.poll_phase {
            let period = core.cycles(POLL_CYCLES).as_ps();
            Time::from_ps(
                dist::uniform_u32(&mut self.rng, period.min(u32::MAX as u64) as u32) as u64,
            )
        } else {
            Time::ZERO
        };
        let start = core.start(t + phase);
        let (h, own, _, _) = ends(
            self.client,
            self.server,
            &mut self.local,
            &mut self.remote,
            conn.requester,
        );
        let read = h
            .mem
            .cpu_read(start, core.socket, own.node, cqe, CQE_BYTES, true);
        let end = start + read + core.cycles(POLL_CYCLES);
        core.finish(start, end);
        let (wr_id, posted) = conn
            .posted
            .pop_front()
            .ok_or_else(|| format!("connection {c}: a completion nothing was posted for"))?;
        debug_assert_eq!(wr_id, w.wr_id, "RC completes in order");
        conn.seen += 1;
        self.completed += 1;
        let Some(spec) = self.work else {
            self.completions.push(Completion {
                conn: c,
                wr_id,
                data,
                posted,
                seen: end,
            });
            return Ok(());
        };
        match spec.mode {
            Mode::Closed { warmup, ops } => {
                if conn.seen > warmup {
                    conn.lat_sum += (end - posted).as_ns_f64();
                    conn.lat_n += 1;
                }
                if conn.seen < warmup + ops {
                    return self.post_next(c, end);
                }
            }
            Mode::Open {
                warmup,
                window,
                windows,
                ..
            } => {
                if end >= warmup {
                    let i = ((end - warmup).as_ps() / window.as_ps()) as usize;
                    if let Some(s) = self.samples.as_mut() {
                        if i < windows as usize {
                            s.counts[c as usize][i] += 1;
                        }
                    }
                }
                let conn = &mut self.conns[c as usize];
                if conn.blocked {
                    conn.blocked = false;
                    self.at(end, c, Ev::Post)?;
                }
            }
        }
        Ok(())
    }

    /// The benchmark's next operation on `c`: its own slot of each region.
    fn post_next(&mut self, c: u32, at: Time) -> Result<(), String> {
        let spec = self.work.expect("a benchmark");
        let conn = &mut self.conns[c as usize];
        let off = c as u64 * spec.bytes;
        let w = Wqe {
            wr_id: conn.next_wr,
            verb: spec.verb,
            remote: off,
            local: off,
            len: spec.bytes,
            inline: spec.verb == Verb::Write && spec.bytes <= self.max_inline,
        };
        conn.next_wr += 1;
        self.post_wqe(c, at, w)
    }

    /// Open loop: post while under the depth, else wait for a completion.
    fn next_post(&mut self, c: u32, t: Time) -> Result<(), String> {
        let Some(BenchSpec {
            mode: Mode::Open { depth, .. },
            ..
        }) = self.work
        else {
            return Ok(());
        };
        let conn = &mut self.conns[c as usize];
        if conn.posted.len() >= depth as usize {
            conn.blocked = true;
            return Ok(());
        }
        self.post_next(c, t)?;
        let conn = &self.conns[c as usize];
        let free = self.cores[conn.core].busy_until();
        self.at(free, c, Ev::Post)
    }
}
