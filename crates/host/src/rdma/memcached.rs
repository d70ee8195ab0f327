//! memcached over one-sided RDMA (`rdma.memcached`, docs/hardware.md §4): one server worker
//! thread, `connections` clients each a closed loop on the client host, over the
//! discrete-event RNICs of `bench` with both hosts posting.
//!
//! The study's port of memcached is not in its released repository (sss-lehigh/nurdma
//! holds the benchmark, the load generator and `results/memcached/*.result` only), so
//! the protocol is an assumption, the simplest one the study's description allows:
//!
//! - **GET**: the client READs the item's value straight from the server's store (one
//!   one-sided READ of `value_bytes`; assumption: the client knows the item's slot — a
//!   fixed hash of the key — so no bucket READ precedes it). The server's CPU is not
//!   involved.
//! - **SET**: the client puts the value in its own region and WRITEs a 16-byte request
//!   (sequence, key, length; inline) into its mailbox slot on the server. The worker,
//!   polling the mailboxes, reads the request (`WORKER_CYCLES` of parsing and item
//!   bookkeeping, assumption), posts a READ of the value from that client's region into a
//!   staging slot, copies it into the store when the READ completes, and WRITEs the
//!   request's sequence number back into the client's acknowledgement slot, which the
//!   client polls; the SET is done when the client sees it.
//!
//! Each client connection is one RC QP; the worker posts on the server's end of the same
//! QP, so the RNICs hold one context per client (the study's limit of 31 holds).
//!
//! Placement (`Placement`, the config names read literally): "local"/"remote" is relative
//! to each host's own RNIC: `both_local` puts the client threads and region on the
//! client RNIC's node and the worker and its store on the server RNIC's; `both_remote`
//! both on the other node of their host; `client_local_server_remote` the client local
//! and the server remote.
//!
//! Throughput is counted as the benchmark's: each connection's completed operations
//! (GET and SET) per window, the sum of per-connection means.

use devices::rnic::Verb;
use sim::Time;

use super::agents::ServerAgents;
use super::bench::{Completion, ConnSpec, Landed, Rdma, RunOptions, Side, Thread};
use super::stats::{Samples, Throughput};
use super::RdmaHost;

/// Cycles the worker spends on one SET besides its memory accesses (assumption:
/// memcached's request parsing, hash and item bookkeeping ≈ 300 cycles; docs/hardware.md §4
/// gives no figure).
pub const WORKER_CYCLES: u64 = 300;
/// Items in the store (assumption: 1,024; the store is a few pages, within the RNIC's
/// translation cache like the study's regions).
pub const KEYS: u32 = 1024;
/// Bytes of a SET request in the mailbox: sequence, key, length (u32 each) and the
/// connection.
pub const REQUEST_BYTES: u64 = 16;
/// Bytes of an acknowledgement: the request's sequence number.
pub const ACK_BYTES: u64 = 8;

/// Where each side's threads and region sit relative to its host's RNIC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    BothLocal,
    BothRemote,
    ClientLocalServerRemote,
}

impl Placement {
    pub fn parse(word: &str) -> Result<Placement, String> {
        match word {
            "both_local" => Ok(Placement::BothLocal),
            "both_remote" => Ok(Placement::BothRemote),
            "client_local_server_remote" => Ok(Placement::ClientLocalServerRemote),
            _ => Err(format!(
                "placement `{word}`: use \"both_local\", \"both_remote\" or \"client_local_server_remote\""
            )),
        }
    }

    /// (client away from its RNIC, server away from its RNIC).
    pub fn remote(self) -> (bool, bool) {
        match self {
            Placement::BothLocal => (false, false),
            Placement::BothRemote => (true, true),
            Placement::ClientLocalServerRemote => (false, true),
        }
    }
}

/// One run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct McSpec {
    pub connections: u32,
    /// Share of GETs.
    pub get_ratio: f64,
    pub value_bytes: u64,
    pub keys: u32,
    pub placement: Placement,
    pub mtu: u32,
    pub max_rd_atomic: u32,
    pub warmup: Time,
    pub window: Time,
    pub windows: u32,
    pub seed: u64,
}

/// What a run measured (the window after the warm-up).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct McResult {
    /// GETs and SETs per second: sum of per-connection means.
    pub throughput: Option<Throughput>,
    pub gets: u64,
    pub sets: u64,
    /// Each measured operation's latency, issue to seen, ns (GETs and SETs).
    pub latencies_ns: Vec<f64>,
    /// Bytes the worker's READs brought from the clients (SET values).
    pub set_read_bytes: u64,
    pub events: u64,
    pub simulated: Time,
}

/// An operation of the closed loop.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    Get(u32),
    Set(u32, Vec<u8>),
}

/// A client's operation in progress.
#[derive(Clone, Copy, Debug)]
enum Pending {
    Idle,
    Get { wr: u64, start: Time },
    Set { seq: u32, start: Time },
}

/// Offsets of the two regions.
#[derive(Clone, Copy, Debug)]
struct Layout {
    slot: u64,
    keys: u64,
    conns: u64,
}

impl Layout {
    // Server region: the store, then per connection a mailbox, a staging slot and the
    // acknowledgement's source.
    fn item(&self, key: u32) -> u64 {
        key as u64 * self.slot
    }
    fn mailbox(&self, c: u32) -> u64 {
        (self.keys + 3 * c as u64) * self.slot
    }
    fn staging(&self, c: u32) -> u64 {
        self.mailbox(c) + self.slot
    }
    fn ack_src(&self, c: u32) -> u64 {
        self.mailbox(c) + 2 * self.slot
    }
    fn server_len(&self) -> u64 {
        (self.keys + 3 * self.conns) * self.slot
    }
    // Client region, per connection: GET destination, SET value, request, ack.
    fn get_dst(&self, c: u32) -> u64 {
        4 * c as u64 * self.slot
    }
    fn set_src(&self, c: u32) -> u64 {
        self.get_dst(c) + self.slot
    }
    fn request(&self, c: u32) -> u64 {
        self.get_dst(c) + 2 * self.slot
    }
    fn ack(&self, c: u32) -> u64 {
        self.get_dst(c) + 3 * self.slot
    }
    fn client_len(&self) -> u64 {
        4 * self.conns * self.slot
    }
}

/// Where the next operations come from.
enum Source {
    /// Each client draws its own: GET with `get_ratio`, a uniform key.
    Random { rng: Vec<u64> },
    /// A list run in order, one operation at a time over all clients.
    Script(std::collections::VecDeque<(u32, Op)>),
}

struct Driver {
    spec: McSpec,
    lay: Layout,
    source: Source,
    pending: Vec<Pending>,
    /// The worker's next sequence per client (SETs seen).
    seq: Vec<u32>,
    /// The worker's SET in progress per client: (key, READ's wr_id).
    worker_read: Vec<Option<(u32, u64)>>,
    samples: Samples,
    measuring_from: Time,
    out: McResult,
    /// Bytes each scripted GET returned, in order.
    got: Vec<Vec<u8>>,
    worker: usize,
}

fn xorshift(s: &mut u64) -> f64 {
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    (s.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
}

impl Driver {
    fn next_op(&mut self, c: u32) -> Option<Op> {
        match &mut self.source {
            Source::Random { rng } => {
                let s = &mut rng[c as usize];
                let get = xorshift(s) < self.spec.get_ratio;
                let key = ((xorshift(s) * self.spec.keys as f64) as u32).min(self.spec.keys - 1);
                if get {
                    Some(Op::Get(key))
                } else {
                    // A value that names its writer: connection, a counter, the key.
                    let tag = xorshift(s).to_bits();
                    let v = (0..self.spec.value_bytes)
                        .map(|i| (tag.rotate_left(i as u32 % 64) as u8) ^ (c as u8) ^ i as u8)
                        .collect();
                    Some(Op::Set(key, v))
                }
            }
            Source::Script(q) => match q.front() {
                Some((qc, _)) if *qc == c => q.pop_front().map(|(_, op)| op),
                _ => None,
            },
        }
    }

    /// Client `c` starts its next operation at `at` (if any; a script's only when no
    /// other is in progress).
    fn start(&mut self, r: &mut Rdma, c: u32, at: Time) -> Result<(), String> {
        let busy = self.pending.iter().any(|p| !matches!(p, Pending::Idle));
        if busy && matches!(self.source, Source::Script(_)) {
            return Ok(());
        }
        let Some(op) = self.next_op(c) else {
            self.pending[c as usize] = Pending::Idle;
            return Ok(());
        };
        let (vb, lay) = (self.spec.value_bytes, self.lay);
        match op {
            Op::Get(key) => {
                let wr = r.post_at(c, at, Verb::Read, lay.item(key), lay.get_dst(c), vb)?;
                self.pending[c as usize] = Pending::Get { wr, start: at };
            }
            Op::Set(key, value) => {
                if value.len() as u64 != vb {
                    return Err(format!("a SET of {} bytes: values are {vb}", value.len()));
                }
                let seq = self.seq[c as usize].wrapping_add(1);
                let mut req = [0u8; REQUEST_BYTES as usize];
                req[..4].copy_from_slice(&seq.to_le_bytes());
                req[4..8].copy_from_slice(&key.to_le_bytes());
                req[8..12].copy_from_slice(&(vb as u32).to_le_bytes());
                req[12..16].copy_from_slice(&c.to_le_bytes());
                let (s, q) = (lay.set_src(c) as usize, lay.request(c) as usize);
                r.local.bytes[s..s + vb as usize].copy_from_slice(&value);
                r.local.bytes[q..q + req.len()].copy_from_slice(&req);
                r.post_at(
                    c,
                    at,
                    Verb::Write,
                    lay.mailbox(c),
                    lay.request(c),
                    REQUEST_BYTES,
                )?;
                self.pending[c as usize] = Pending::Set { seq, start: at };
            }
        }
        Ok(())
    }

    fn finish(&mut self, r: &mut Rdma, c: u32, start: Time, end: Time) -> Result<(), String> {
        if end >= self.measuring_from {
            let i = ((end - self.measuring_from).as_ps() / self.spec.window.as_ps()) as usize;
            if i < self.spec.windows as usize {
                self.samples.counts[c as usize][i] += 1;
                self.out.latencies_ns.push((end - start).as_ns_f64());
            }
        }
        self.pending[c as usize] = Pending::Idle;
        self.start(r, c, end)
    }

    /// A completion seen by its thread.
    fn completed(&mut self, r: &mut Rdma, k: Completion) -> Result<(), String> {
        let n = self.spec.connections;
        if k.conn < n {
            // A client's: its GET's READ is done (a SET's request WRITE completes
            // unwatched; the SET waits for the worker's acknowledgement).
            let c = k.conn;
            if let Pending::Get { wr, start } = self.pending[c as usize] {
                if wr == k.wr_id {
                    if matches!(self.source, Source::Script(_)) {
                        let d = self.lay.get_dst(c) as usize;
                        let v = r.local.bytes[d..d + self.spec.value_bytes as usize].to_vec();
                        self.got.push(v);
                    }
                    if k.seen >= self.measuring_from {
                        self.out.gets += 1;
                    }
                    return self.finish(r, c, start, k.seen);
                }
            }
            return Ok(());
        }
        // The worker's: the value READ is in: store it and acknowledge.
        let c = k.conn - n;
        let Some((key, wr)) = self.worker_read[c as usize] else {
            return Ok(());
        };
        if wr != k.wr_id {
            return Ok(());
        }
        self.worker_read[c as usize] = None;
        let (vb, lay) = (self.spec.value_bytes, self.lay);
        let (st, it, ack) = (
            lay.staging(c) as usize,
            lay.item(key) as usize,
            lay.ack_src(c) as usize,
        );
        r.remote.bytes.copy_within(st..st + vb as usize, it);
        let seq = self.seq[c as usize];
        r.remote.bytes[ack..ack + 4].copy_from_slice(&seq.to_le_bytes());
        let (node, bst, bit) = (
            r.remote.node,
            r.remote.buf_at(lay.staging(c)),
            r.remote.buf_at(lay.item(key)),
        );
        let socket = r.core_mut(self.worker).map(|k| k.socket).unwrap_or(node);
        let start = r.core_mut(self.worker).expect("worker").start(k.seen);
        let mem = &mut r.host_mut(Side::Server).mem;
        let copy = mem.cpu_read(start, socket, node, bst, vb, true)
            + mem.cpu_write(start, socket, bit, vb);
        let core = r.core_mut(self.worker).expect("worker");
        let end = start + copy;
        core.finish(start, end);
        self.out.set_read_bytes += vb;
        r.post_at(
            k.conn,
            end,
            Verb::Write,
            lay.ack(c),
            lay.ack_src(c),
            ACK_BYTES,
        )?;
        Ok(())
    }

    /// A WRITE became visible: a request in a mailbox (the worker) or an
    /// acknowledgement (the client).
    fn landed(&mut self, r: &mut Rdma, l: Landed) -> Result<(), String> {
        let n = self.spec.connections;
        match l.at_host {
            Side::Server => {
                let c = l.conn;
                let mb = self.lay.mailbox(c) as usize;
                let b = &r.remote.bytes[mb..mb + REQUEST_BYTES as usize];
                let word = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4"));
                let (seq, key) = (word(0), word(4));
                if key >= self.spec.keys || word(12) != c {
                    return Err(format!("mailbox {c}: a malformed request"));
                }
                self.seq[c as usize] = seq;
                // The worker polls the mailboxes: it reads the request's line when free,
                // then parses it and does the item's bookkeeping.
                let node = r.remote.node;
                let buf = r.remote.buf_at(mb as u64);
                let core = r.core_mut(self.worker).expect("worker");
                let (socket, start, work) =
                    (core.socket, core.start(l.at), core.cycles(WORKER_CYCLES));
                let read = r.host_mut(Side::Server).mem.cpu_read(
                    start,
                    socket,
                    node,
                    buf,
                    REQUEST_BYTES,
                    true,
                );
                let end = start + read + work;
                r.core_mut(self.worker).expect("worker").finish(start, end);
                let vb = self.spec.value_bytes;
                let wr = r.post_at(
                    n + c,
                    end,
                    Verb::Read,
                    self.lay.set_src(c),
                    self.lay.staging(c),
                    vb,
                )?;
                self.worker_read[c as usize] = Some((key, wr));
            }
            Side::Client => {
                let c = l.conn - n;
                let Pending::Set { seq, start } = self.pending[c as usize] else {
                    return Ok(());
                };
                let a = self.lay.ack(c) as usize;
                let got = u32::from_le_bytes(r.local.bytes[a..a + 4].try_into().expect("4"));
                if got != seq {
                    return Ok(());
                }
                // The client spins on its acknowledgement slot: it reads the line.
                let (node, buf) = (r.local.node, r.local.buf_at(a as u64));
                let core = r.core_mut(c as usize).expect("client thread");
                let (socket, s) = (core.socket, core.start(l.at));
                let read = r
                    .host_mut(Side::Client)
                    .mem
                    .cpu_read(s, socket, node, buf, ACK_BYTES, true);
                let end = s + read;
                r.core_mut(c as usize)
                    .expect("client thread")
                    .finish(s, end);
                if end >= self.measuring_from {
                    self.out.sets += 1;
                }
                self.finish(r, c, start, end)?;
            }
        }
        Ok(())
    }
}

fn check(spec: &McSpec) -> Result<(), String> {
    if spec.connections == 0 || spec.connections > 30 {
        return Err(format!(
            "connections {}: 1 ..= 30 (one QP each within the RNIC's 31 cached contexts)",
            spec.connections
        ));
    }
    if !(0.0..=1.0).contains(&spec.get_ratio) {
        return Err(format!(
            "get_ratio {} is not a share in 0 ..= 1",
            spec.get_ratio
        ));
    }
    if !(1..=4096).contains(&spec.value_bytes) {
        return Err(format!("value_bytes {}: 1 ..= 4096", spec.value_bytes));
    }
    if spec.keys == 0 {
        return Err("keys must be at least 1".into());
    }
    if spec.windows == 0 || spec.window == Time::ZERO {
        return Err("a run needs windows and a window length".into());
    }
    Ok(())
}

/// Runs `spec` between `client` and `server` (its load, if any, already started on the
/// server and passed as `agents`): the closed loops, counted per window.
pub fn run<'a>(
    client: &'a mut RdmaHost,
    server: &'a mut RdmaHost,
    spec: McSpec,
    agents: Option<&'a mut dyn ServerAgents>,
) -> Result<McResult, String> {
    check(&spec)?;
    let rng = (0..spec.connections as u64)
        .map(|c| (spec.seed ^ (c + 1)).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
        .collect();
    let end = spec.warmup + Time::from_ps(spec.window.as_ps() * spec.windows as u64);
    drive(client, server, spec, Source::Random { rng }, agents, end).map(|(r, _)| r)
}

/// Runs `ops` in order, each after the one before has finished, and returns the bytes
/// of each GET (e.g. to see a GET return what a SET stored).
pub fn script(
    client: &mut RdmaHost,
    server: &mut RdmaHost,
    spec: McSpec,
    ops: Vec<(u32, Op)>,
) -> Result<(McResult, Vec<Vec<u8>>), String> {
    check(&spec)?;
    if let Some((c, _)) = ops.iter().find(|(c, _)| *c >= spec.connections) {
        return Err(format!("no connection {c}"));
    }
    drive(
        client,
        server,
        spec,
        Source::Script(ops.into()),
        None,
        Time::MAX,
    )
}

fn drive<'a>(
    client: &'a mut RdmaHost,
    server: &'a mut RdmaHost,
    spec: McSpec,
    source: Source,
    agents: Option<&'a mut dyn ServerAgents>,
    end: Time,
) -> Result<(McResult, Vec<Vec<u8>>), String> {
    let n = spec.connections;
    let lay = Layout {
        slot: spec.value_bytes.div_ceil(64).max(1) * 64,
        keys: spec.keys as u64,
        conns: n as u64,
    };
    let (client_away, server_away) = spec.placement.remote();
    let (cn, sn) = (client.node(client_away), server.node(server_away));
    // The store starts with every item holding a known pattern.
    let local = client.register(1, cn, lay.client_len(), lay.slot, |_| 0)?;
    let remote = server.register(2, sn, lay.server_len(), lay.slot, |i| (i % 251) as u8)?;
    let per_node = client.threads_per_node.max(1);
    let mut threads: Vec<Thread> = (0..n.min(per_node))
        .map(|_| Thread {
            host: Side::Client,
            node: cn,
        })
        .collect();
    let worker = threads.len();
    threads.push(Thread {
        host: Side::Server,
        node: sn,
    });
    // Connections 0..n: the clients' ends; n..2n: the worker's ends of the same QPs.
    let conns: Vec<ConnSpec> = (0..n)
        .map(|c| ConnSpec {
            thread: (c % per_node) as usize,
            qpn: c + 1,
        })
        .chain((0..n).map(|c| ConnSpec {
            thread: worker,
            qpn: c + 1,
        }))
        .collect();
    let mut r = Rdma::with_threads(
        client,
        server,
        local,
        remote,
        &threads,
        &conns,
        spec.max_rd_atomic,
        spec.mtu,
    )?;
    r.set_options(RunOptions {
        seed: spec.seed,
        poll_phase: true,
    });
    r.set_agents(agents);
    // Assumption: the port posts its 16 B requests and 8 B acknowledgements inline, as
    // key-value stores over RDMA do for messages this small (the study's memcached source
    // is not public); the values themselves are READ, never written.
    r.set_max_inline(REQUEST_BYTES);
    r.keep_data = false;
    r.watch_writes = true;
    let scripted = matches!(source, Source::Script(_));
    let mut d = Driver {
        spec,
        lay,
        source,
        pending: vec![Pending::Idle; n as usize],
        seq: vec![0; n as usize],
        worker_read: vec![None; n as usize],
        samples: Samples::new(n as usize, spec.windows as usize, spec.window.as_secs_f64()),
        measuring_from: if scripted { Time::ZERO } else { spec.warmup },
        out: McResult::default(),
        got: Vec::new(),
        worker,
    };
    for c in 0..n {
        d.start(&mut r, c, Time::ZERO)?;
    }
    let mut reset = scripted;
    let mut last = Time::ZERO;
    let mut events = 0u64;
    let mut completions = Vec::new();
    let mut landed = Vec::new();
    while let Some(t) = r.step()? {
        if t > end {
            break;
        }
        events += 1;
        last = t;
        if !reset && t >= spec.warmup {
            r.host_mut(Side::Client).reset_counters();
            r.host_mut(Side::Server).reset_counters();
            reset = true;
        }
        std::mem::swap(&mut completions, &mut r.completions);
        for k in completions.drain(..) {
            d.completed(&mut r, k)?;
        }
        std::mem::swap(&mut landed, &mut r.landed);
        for l in landed.drain(..) {
            d.landed(&mut r, l)?;
        }
        if scripted && d.pending.iter().all(|p| matches!(p, Pending::Idle)) {
            // The next scripted operation may belong to another client.
            if let Source::Script(q) = &d.source {
                if let Some(&(c, _)) = q.front() {
                    let at = r.now();
                    d.start(&mut r, c, at)?;
                }
            }
        }
    }
    d.out.events = events;
    d.out.simulated = last;
    if !scripted {
        d.out.throughput = Some(d.samples.throughput());
    }
    Ok((d.out, d.got))
}
