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

use devices::rnic::qp::ATOMIC_BYTES;
use devices::rnic::{wire, Qp, SendArbiter, Verb, Wqe};
use sim::net::{Event, Net, Notice};
use sim::timers::Timers;
use sim::{dist, Time};
use wire::Packet;

mod driver;
mod journey;
pub use driver::{run, run_with, run_with_agents, BenchRun};

use super::agents::ServerAgents;
use super::stats::{Samples, Throughput};
use super::{RdmaHost, Region, BENCH_MAX_INLINE};
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

/// The host on `side`; a free function so that callers can hold other fields of `Rdma`
/// (its connections, its cores) at the same time.
fn host_of<'b>(client: &'b mut RdmaHost, server: &'b mut RdmaHost, side: Side) -> &'b mut RdmaHost {
    match side {
        Side::Client => client,
        Side::Server => server,
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
}
