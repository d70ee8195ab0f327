//! CPU-side memory traffic on the same network as device DMA: STREAM-like antagonists and
//! load threads. A stream stands for cores that keep a fixed number of cache-line misses
//! outstanding (their line fill buffers) against one NUMA node's DRAM, over the CPU
//! interconnect when that node is remote. Each miss is a 64 B read; a writing stream also
//! writes each line back (read for ownership, then write-back), so it moves twice the bytes.
//! Their working sets are far larger than the LLC, so every access misses.
//!
//! What they take from devices: DRAM bandwidth at the node (the sink's FIFO queue, so
//! loaded latency rises as the node saturates), interconnect bandwidth per direction, and
//! LLC capacity in the cores' package — a line fill lands in any of the LLC's ways, so one
//! fill in `llc_ways / ddio_ways` evicts a line DDIO had allocated (written back to DRAM).
//!
//! A stream is an ordinary simulation component (`component::Component`), in the
//! background: it runs from `start` until `stop`, and while it runs the network never runs
//! dry, so runs beside it end when the working components finish or at a horizon.

use crate::component::{Component, HasNet};
use crate::net::{ComponentId, Delivery, Event, Issue, Net};
use crate::stats::Histogram;
use crate::time::Time;

const LINE: u32 = 64;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamOp {
    /// Loads: one line read per miss.
    Read,
    /// Stores: a read for ownership, then the dirty line written back.
    Write,
}

/// What to build a stream from; routes come from the timed fabric.
#[derive(Clone, Debug)]
pub struct StreamSpec {
    pub name: String,
    /// Route from the cores to the memory node (interconnect wires, then the DRAM sink).
    pub route: u32,
    pub op: StreamOp,
    /// Misses in flight at once (cores × line fill buffers per core).
    pub outstanding: u32,
    /// First byte offset at the node; lines advance from there and wrap after `span`.
    pub base: u64,
    pub span: u64,
    /// The DRAM sink whose LLC holds the cores' package's lines (for eviction pressure),
    /// and how many line fills evict one DDIO line there (0: no pressure).
    pub fill_llc: Option<u32>,
    pub fills_per_eviction: u32,
}

/// A stream of CPU line misses and what it moved.
#[derive(Clone, Debug)]
pub struct CpuStream {
    pub spec: StreamSpec,
    next_line: u64,
    fills: u64,
    running: bool,
    pub bytes_read: u64,
    pub bytes_written: u64,
    /// DDIO lines its fills evicted.
    pub evictions: u64,
    /// Sum of the miss latencies seen, and how many, for a mean loaded latency.
    latency_ps: u128,
    misses: u64,
    /// Miss latencies since the last `reset_stats`.
    pub window_latency: Histogram,
    /// Bytes moved since the last `reset_stats` (reads and write-backs).
    pub window_bytes: u64,
    /// Per fill buffer: when its miss in flight was issued and the line's offset.
    slots: Vec<Option<(Time, u64)>>,
}

impl CpuStream {
    /// A stream, not yet running.
    pub fn new(spec: StreamSpec) -> CpuStream {
        let n = spec.outstanding.max(1) as usize;
        CpuStream {
            spec,
            next_line: 0,
            fills: 0,
            running: false,
            bytes_read: 0,
            bytes_written: 0,
            evictions: 0,
            latency_ps: 0,
            misses: 0,
            window_latency: Histogram::default(),
            window_bytes: 0,
            slots: vec![None; n],
        }
    }

    /// Mean latency of the stream's misses so far (ns), 0 before the first.
    pub fn mean_latency_ns(&self) -> f64 {
        if self.misses == 0 {
            return 0.0;
        }
        self.latency_ps as f64 / self.misses as f64 / 1000.0
    }

    /// Starts a measurement window.
    pub fn reset_stats(&mut self) {
        self.window_latency.clear();
        self.window_bytes = 0;
    }

    /// Misses completed so far.
    pub fn misses(&self) -> u64 {
        self.misses
    }

    pub fn running(&self) -> bool {
        self.running
    }

    /// Starts the stream now: every idle fill buffer puts a miss in flight (buffers still
    /// waiting since a stop keep theirs).
    pub fn start(&mut self, net: &mut Net, me: ComponentId) {
        if self.running {
            return;
        }
        self.running = true;
        for slot in 0..self.slots.len() as u64 {
            if self.slots[slot as usize].is_none() {
                self.issue_line(net, me, slot);
            }
        }
    }

    /// Stops the stream: misses in flight complete, none are issued after them.
    pub fn stop(&mut self) {
        self.running = false;
    }

    /// Issues the next line miss from fill-buffer `slot`.
    fn issue_line(&mut self, net: &mut Net, me: ComponentId, slot: u64) {
        let lines = (self.spec.span / LINE as u64).max(1);
        let target = self.spec.base + (self.next_line % lines) * LINE as u64;
        self.next_line += 1;
        self.slots[slot as usize] = Some((net.now(), target));
        net.send_read(self.line(me, target), slot);
    }

    fn line(&self, me: ComponentId, target: u64) -> Issue {
        Issue {
            addr64: true,
            cpu: true,
            ..Issue::new(self.spec.route, me, 0, LINE, target)
        }
    }

    fn delivered(&mut self, net: &mut Net, me: ComponentId, d: Delivery) {
        match d {
            Delivery::WriteDone { bytes, .. } => {
                self.bytes_written += bytes as u64;
                self.window_bytes += bytes as u64;
            }
            Delivery::ReadData {
                tag, bytes, last, ..
            } => {
                self.bytes_read += bytes as u64;
                self.window_bytes += bytes as u64;
                if !last {
                    return;
                }
                let Some((issued, target)) = self.slots[tag as usize].take() else {
                    return;
                };
                self.latency_ps += (net.now() - issued).as_ps() as u128;
                self.window_latency.record(net.now() - issued);
                self.misses += 1;
                self.fills += 1;
                let evict = self.spec.fills_per_eviction > 0
                    && self
                        .fills
                        .is_multiple_of(self.spec.fills_per_eviction as u64);
                if let (true, Some(sink)) = (evict, self.spec.fill_llc) {
                    if net.evict_ddio_line(sink) {
                        self.evictions += 1;
                    }
                }
                if self.spec.op == StreamOp::Write {
                    // The dirty line goes back to its node (posted, off the critical path).
                    net.send_write(self.line(me, target));
                }
                if self.running {
                    self.issue_line(net, me, tag);
                }
            }
            Delivery::Mmio { .. } | Delivery::ReadServed { .. } => {}
        }
    }
}

impl<C: HasNet + 'static> Component<C> for CpuStream {
    fn notify(&mut self, cx: &mut C, me: ComponentId, event: Event) {
        match event {
            Event::Wake => self.start(cx.net(), me),
            Event::Timer(_) => unreachable!("a CPU stream sets no timers"),
            Event::Delivery(d) => self.delivered(cx.net(), me, d),
        }
    }
}
