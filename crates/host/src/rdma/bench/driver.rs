//! Driving a benchmark run: alone to its end (`run_with_agents`), or step by step beside
//! other models that share its hosts' memory systems (`BenchRun`).

use sim::Time;

use super::super::agents::ServerAgents;
use super::super::stats::Samples;
use super::super::RdmaHost;
use super::{BenchResult, BenchSpec, Ev, Mode, Rdma, RunOptions, Side, ATOMIC_BYTES};

/// Runs the benchmark `spec` from `client` to `server`: regions of one slot per
/// connection (adjacent, cache-aligned), the server's on its RNIC's node or the other.
pub fn run(
    client: &mut RdmaHost,
    server: &mut RdmaHost,
    spec: BenchSpec,
) -> Result<BenchResult, String> {
    run_with_agents(client, server, spec, RunOptions::default(), None)
}

/// `run` with the variance drawn as `opts` says.
pub fn run_with(
    client: &mut RdmaHost,
    server: &mut RdmaHost,
    spec: BenchSpec,
    opts: RunOptions,
) -> Result<BenchResult, String> {
    run_with_agents(client, server, spec, opts, None)
}

/// `run` with the variance drawn as `opts` says and `agents` on the server sharing the
/// region's lines and its memory system (their counters reset with the hosts' after the
/// warm-up).
pub fn run_with_agents<'a>(
    client: &'a mut RdmaHost,
    server: &'a mut RdmaHost,
    spec: BenchSpec,
    opts: RunOptions,
    agents: Option<&'a mut dyn ServerAgents>,
) -> Result<BenchResult, String> {
    let mut run = BenchRun::start(client, server, spec, opts, agents)?;
    while run.step()? {}
    Ok(run.finish())
}

/// A benchmark its caller steps one event at a time: a world whose other models share
/// the hosts steps it in time order with theirs, lending it the hosts' memory systems
/// for each step (`host_mut`).
pub struct BenchRun<'a> {
    r: Rdma<'a>,
    mode: Mode,
    /// No event after this is handled: an open loop's window ends here.
    end: Time,
    /// The window starts at the first event from here on (counters restart).
    warm_until: Time,
    reset: bool,
    /// Whether the window's start restarts the hosts' memory counters too: not when a
    /// world that shares them restarts them for every model at once.
    resets_memory: bool,
    last: Time,
}

impl<'a> BenchRun<'a> {
    /// Registers the regions (one slot per connection, adjacent and cache-aligned; the
    /// server's on its RNIC's node or the other) and posts the first operations.
    pub fn start(
        client: &'a mut RdmaHost,
        server: &'a mut RdmaHost,
        spec: BenchSpec,
        opts: RunOptions,
        agents: Option<&'a mut dyn ServerAgents>,
    ) -> Result<BenchRun<'a>, String> {
        if spec.bytes == 0 || spec.bytes > 1 << 30 {
            return Err(format!("bytes {} must be in 1..=1073741824", spec.bytes));
        }
        if spec.verb.is_atomic() && spec.bytes != ATOMIC_BYTES {
            return Err(format!(
                "an atomic benchmark moves 8 bytes, not {}",
                spec.bytes
            ));
        }
        let len = spec.bytes * spec.connections as u64;
        let slot = spec.bytes.div_ceil(64) * 64;
        let local = client.register(1, client.rnic_node(), len, slot, |i| i as u8)?;
        let node = server.node(spec.server_remote);
        let remote = server.register(2, node, len, slot, |i| (i as u8).wrapping_mul(3))?;
        let mut r = Rdma::new(
            client,
            server,
            local,
            remote,
            spec.connections,
            spec.max_rd_atomic,
            spec.mtu,
        )?;
        r.set_options(opts);
        r.work = Some(spec);
        r.agents = agents;
        let end = match spec.mode {
            Mode::Closed { ops, .. } => {
                if ops == 0 {
                    return Err("a closed loop needs ops > 0".into());
                }
                for c in 0..spec.connections {
                    r.post_next(c, Time::ZERO)?;
                }
                Time::MAX
            }
            Mode::Open {
                warmup,
                window,
                windows,
                depth,
            } => {
                if windows == 0 || window == Time::ZERO || depth == 0 {
                    return Err("an open loop needs windows, a window length and a depth".into());
                }
                r.samples = Some(Samples::new(
                    spec.connections as usize,
                    windows as usize,
                    window.as_secs_f64(),
                ));
                for c in 0..spec.connections {
                    r.at(Time::ZERO, c, Ev::Post)?;
                }
                warmup + Time::from_ps(window.as_ps() * windows as u64)
            }
        };
        let warm_until = match spec.mode {
            Mode::Open { warmup, .. } => warmup,
            Mode::Closed { .. } => Time::ZERO,
        };
        Ok(BenchRun {
            r,
            mode: spec.mode,
            end,
            warm_until,
            reset: false,
            resets_memory: true,
            last: Time::ZERO,
        })
    }

    /// Leaves the memory counters to the world that shares the hosts (it restarts them
    /// when the window starts).
    pub fn share_memory(&mut self) {
        self.resets_memory = false;
    }

    /// The time of the next event, if one is left before the end.
    pub fn next_time(&mut self) -> Option<Time> {
        self.r.net.peek_time().filter(|&t| t <= self.end)
    }

    /// Handles the next event, if one is left before the end (false when none is).
    pub fn step(&mut self) -> Result<bool, String> {
        let Some((t, c, ev)) = self.r.next(self.end) else {
            return Ok(false);
        };
        if !self.reset && t >= self.warm_until {
            for h in [&mut *self.r.client, &mut *self.r.server] {
                if self.resets_memory {
                    h.reset_counters();
                } else {
                    h.rnic.reset_counters();
                }
            }
            if let Some(a) = self.r.agents.as_deref_mut() {
                a.reset_counters();
            }
            self.reset = true;
        }
        for h in [&mut *self.r.client, &mut *self.r.server] {
            // The RNICs are the run's own; the memory systems are the world's when it
            // lends them (it keeps their time promise for every model it runs).
            h.rnic.forget_before(t);
            if self.resets_memory {
                h.mem.forget_before(t);
            }
        }
        self.last = t;
        self.r.handle(t, c, ev)?;
        Ok(true)
    }

    /// The host on `side` (to lend it a memory system between steps).
    pub fn host_mut(&mut self, side: Side) -> &mut RdmaHost {
        self.r.host_mut(side)
    }

    /// What the run measured.
    pub fn finish(self) -> BenchResult {
        let r = self.r;
        let mut out = BenchResult {
            operations: r.completed,
            simulated: self.last,
            events: r.handled,
            qpc_misses: r.client.rnic.qpc.misses + r.server.rnic.qpc.misses,
            mtt_misses: r.client.rnic.mtt.misses + r.server.rnic.mtt.misses,
            ..BenchResult::default()
        };
        if let Mode::Closed { .. } = self.mode {
            let means: Vec<f64> = r
                .conns
                .iter()
                .filter(|c| c.lat_n > 0)
                .map(|c| c.lat_sum / c.lat_n as f64)
                .collect();
            out.latency_ns = means.iter().sum::<f64>() / means.len().max(1) as f64;
        }
        out.throughput = r.samples.as_ref().map(Samples::throughput);
        out
    }
}
