//! Two GPU kernels bouncing a 4-byte counter, as a simulation component that runs beside
//! any other traffic: A writes n to B's counter; B's kernel notices it and writes n + 1 to
//! A's; A notices and starts the next round. With the counters in each GPU's own memory, a
//! kernel notices a write a poll-loop iteration (`poll_ns`) after it lands; with the
//! counters in host RAM, each waiting kernel polls its word by reads across the fabric —
//! real read traffic — until the value is there. Every value is checked against the bytes
//! in the fabric; each round trip is one operation.

use fabric::{Fault, Requester};
use sim::component::Component;
use sim::net::{ComponentId, Delivery, Event, Issue};
use sim::stats::Histogram;
use sim::timed::{bar_register, sink_address, TimedFabric};
use sim::timers::Timers;
use sim::Time;

use crate::gpu::{Counters, Gpu};

/// One side's route to the peer's counter (write) and to its own (poll read, host RAM).
#[derive(Clone, Copy, Debug)]
struct Side {
    write: Issue,
    write_addr: u64,
    poll: Option<(Issue, u64)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Who {
    A,
    B,
}

/// What a ping-pong timer means.
#[derive(Clone, Copy, Debug)]
enum PingTimer {
    /// The side's kernel, polling its own memory, sees the counter that landed there.
    Notice(Who),
    /// The side polls the counter in host RAM again.
    Poll(Who),
}

/// The ping-pong component and what it measured.
pub struct PingPong {
    a: Gpu,
    b: Gpu,
    counters: Counters,
    sides: [Side; 2],
    /// The value the waiting side waits for, and who waits.
    expect: u32,
    waiting: Who,
    round_start: Time,
    /// Round trips since the last reset.
    pub rounds: Histogram,
    /// Values read that were not the one written (a wrong route shows here).
    pub wrong_values: u64,
    /// Poll reads issued since the last reset (host RAM only).
    pub polls: u64,
    /// What each side's last poll read found in memory when memory served it.
    sampled: [u32; 2],
    timers: Timers<PingTimer>,
}

impl PingPong {
    /// Plans the routes of both sides (the bus addresses in `counters` must be mapped).
    pub fn new(
        tf: &mut TimedFabric,
        a: Gpu,
        b: Gpu,
        counters: Counters,
    ) -> Result<PingPong, Fault> {
        let side = |tf: &mut TimedFabric, me: &Gpu, write_at: u64, poll_at: Option<u64>| {
            let who = Requester::Function(me.node);
            let route = |tf: &mut TimedFabric, addr: u64, access| {
                let req = fabric::Request {
                    requester: who,
                    addr,
                    len: 4,
                    access,
                };
                tf.route(&req)
                    .map(|(r, t)| (Issue::new(r, 0, 0, 4, sink_address(&t)), addr))
            };
            let (write, write_addr) = route(tf, write_at, fabric::Access::Write)?;
            let poll = match poll_at {
                Some(p) => Some(route(tf, p, fabric::Access::Read)?),
                None => None,
            };
            Ok::<Side, Fault>(Side {
                write,
                write_addr,
                poll,
            })
        };
        let sides = match counters {
            Counters::InGpuMemory { a_to_b, b_to_a, .. } => {
                [side(tf, &a, a_to_b, None)?, side(tf, &b, b_to_a, None)?]
            }
            Counters::InHostRam {
                a_writes,
                b_polls,
                b_writes,
                a_polls,
            } => [
                side(tf, &a, a_writes, Some(a_polls))?,
                side(tf, &b, b_writes, Some(b_polls))?,
            ],
        };
        Ok(PingPong {
            a,
            b,
            counters,
            sides,
            expect: 0,
            waiting: Who::B,
            round_start: Time::ZERO,
            rounds: Histogram::default(),
            wrong_values: 0,
            polls: 0,
            sampled: [0; 2],
            timers: Timers::new(),
        })
    }

    /// Makes this component hear writes landing in the GPUs' memory (counters there).
    pub fn own_sinks(&self, tf: &mut TimedFabric, me: ComponentId) {
        if let Counters::InGpuMemory { .. } = self.counters {
            for g in [&self.a, &self.b] {
                if let Some(s) = tf.bar_sink(g.node) {
                    tf.net.set_sink_owner(s, me);
                }
            }
        }
    }

    pub fn reset_stats(&mut self) {
        self.rounds.clear();
        self.polls = 0;
    }

    fn gpu(&self, w: Who) -> &Gpu {
        match w {
            Who::A => &self.a,
            Who::B => &self.b,
        }
    }

    fn idx(w: Who) -> usize {
        match w {
            Who::A => 0,
            Who::B => 1,
        }
    }

    /// `w` writes `value` into the peer's counter; the peer then waits for it.
    fn write(&mut self, tf: &mut TimedFabric, me: ComponentId, w: Who, value: u32) {
        let s = self.sides[Self::idx(w)];
        tf.net.send_write(Issue {
            owner: me,
            flow: Self::idx(w) as u32,
            data: value as u64,
            ..s.write
        });
        self.expect = value;
        self.waiting = if w == Who::A { Who::B } else { Who::A };
        if self.sides[Self::idx(self.waiting)].poll.is_some() {
            // The waiting kernel's poll loop reads its word until the value is there.
            self.poll(tf, me, self.waiting);
        }
    }

    fn poll(&mut self, tf: &mut TimedFabric, me: ComponentId, w: Who) {
        let (poll, _) = self.sides[Self::idx(w)].poll.expect("host RAM counters");
        self.polls += 1;
        tf.net.send_read(
            Issue {
                owner: me,
                flow: 10 + Self::idx(w) as u32,
                sample: true,
                ..poll
            },
            Self::idx(w) as u64,
        );
    }

    /// The value `w` sees at its counter now (its own memory, or its word in RAM).
    fn seen(&self, tf: &mut TimedFabric, w: Who) -> u32 {
        let mut b = [0u8; 4];
        match (self.counters, w) {
            (Counters::InGpuMemory { a_offset, .. }, Who::A) => {
                tf.fabric
                    .peek_bar(self.a.node, self.a.memory_bar, a_offset, &mut b)
            }
            (Counters::InGpuMemory { b_offset, .. }, Who::B) => {
                tf.fabric
                    .peek_bar(self.b.node, self.b.memory_bar, b_offset, &mut b)
            }
            (Counters::InHostRam { .. }, _) => {
                let (_, addr) = self.sides[Self::idx(w)].poll.expect("host RAM");
                let who = Requester::Function(self.gpu(w).node);
                let _ = tf.fabric.load(who, addr, &mut b);
            }
        }
        u32::from_le_bytes(b)
    }

    /// `w` noticed the value it waited for: answer, or (A) close the round.
    fn noticed(&mut self, tf: &mut TimedFabric, me: ComponentId, w: Who) {
        let now = tf.net.now();
        match w {
            Who::B => self.write(tf, me, Who::B, self.expect + 1),
            Who::A => {
                self.rounds.record(now - self.round_start);
                self.round_start = now;
                self.write(tf, me, Who::A, self.expect + 1);
            }
        }
    }
}

impl Component<TimedFabric> for PingPong {
    fn notify(&mut self, tf: &mut TimedFabric, me: ComponentId, ev: Event) {
        match ev {
            Event::Wake => {
                self.own_sinks(tf, me);
                self.round_start = tf.net.now();
                self.write(tf, me, Who::A, 1);
            }
            Event::Timer(key) => match self.timers.take(key) {
                PingTimer::Notice(w) => {
                    if self.seen(tf, w) == self.expect {
                        self.noticed(tf, me, w);
                    } else {
                        self.wrong_values += 1;
                    }
                }
                PingTimer::Poll(w) => self.poll(tf, me, w),
            },
            // The writer's bytes land in the fabric when its write lands.
            Event::Delivery(Delivery::WriteDone { flow, .. }) => {
                // The only write in flight carries the value the peer waits for.
                let w = if flow == 0 { Who::A } else { Who::B };
                let s = self.sides[Self::idx(w)];
                let who = Requester::Function(self.gpu(w).node);
                if tf
                    .fabric
                    .store(who, s.write_addr, &self.expect.to_le_bytes())
                    .is_err()
                {
                    self.wrong_values += 1;
                }
            }
            // A write reached a GPU's memory: its kernel's poll loop sees it next time round.
            // Other writes into the GPUs' memory (a copy beside us) are not the counter.
            Event::Delivery(Delivery::Mmio { sink, offset, .. }) => {
                let Counters::InGpuMemory {
                    a_offset, b_offset, ..
                } = self.counters
                else {
                    return;
                };
                let at = |g: &Gpu, off: u64| {
                    Some(sink) == tf.bar_sink(g.node) && bar_register(offset) == (g.memory_bar, off)
                };
                let (w, who) = if at(&self.a, a_offset) {
                    (self.a.poll, Who::A)
                } else if at(&self.b, b_offset) {
                    (self.b.poll, Who::B)
                } else {
                    return;
                };
                let now = tf.net.now();
                self.timers
                    .at(&mut tf.net, now + w, me, PingTimer::Notice(who));
            }
            // Memory served a poll read: what it returns is what is there now.
            Event::Delivery(Delivery::ReadServed { tag, .. }) => {
                let w = if tag == 0 { Who::A } else { Who::B };
                self.sampled[tag as usize] = self.seen(tf, w);
            }
            // A poll read came back: the value it carries, or poll again.
            Event::Delivery(Delivery::ReadData {
                tag, last: true, ..
            }) => {
                let w = if tag == 0 { Who::A } else { Who::B };
                if w != self.waiting {
                    return;
                }
                if self.sampled[tag as usize] == self.expect {
                    self.noticed(tf, me, w);
                } else {
                    let at = tf.net.now() + self.gpu(w).poll;
                    self.timers.at(&mut tf.net, at, me, PingTimer::Poll(w));
                }
            }
            Event::Delivery(_) => {}
        }
    }
}
