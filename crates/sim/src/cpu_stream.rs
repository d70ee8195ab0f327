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
//! A stream runs from `start_cpu_streams` until `stop_cpu_streams`; while any runs, the
//! network never runs dry, so `Net::run` returns when the driver says it has finished.

use crate::net::{Delivery, Driver, Issue, Net};
use crate::time::Time;

/// Flow ids at and above this belong to CPU streams (device flows stay below).
pub const STREAM_FLOW_BASE: u32 = 0xFFF0_0000;

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

/// A running stream and what it moved.
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
    /// Per fill buffer: when its miss in flight was issued and the line's offset.
    slots: Vec<Option<(Time, u64)>>,
}

impl CpuStream {
    /// Mean latency of the stream's misses so far (ns), 0 before the first.
    pub fn mean_latency_ns(&self) -> f64 {
        if self.misses == 0 {
            return 0.0;
        }
        self.latency_ps as f64 / self.misses as f64 / 1000.0
    }
}

/// Whether a flow id belongs to a CPU stream.
pub fn is_stream_flow(flow: u32) -> bool {
    flow >= STREAM_FLOW_BASE
}

impl Net {
    /// Adds a stream (not yet running) and returns its index.
    pub fn add_cpu_stream(&mut self, spec: StreamSpec) -> u32 {
        let n = spec.outstanding.max(1) as usize;
        self.streams.push(CpuStream {
            spec,
            next_line: 0,
            fills: 0,
            running: false,
            bytes_read: 0,
            bytes_written: 0,
            evictions: 0,
            latency_ps: 0,
            misses: 0,
            slots: vec![None; n],
        });
        self.streams.len() as u32 - 1
    }

    pub fn cpu_stream(&self, s: u32) -> &CpuStream {
        &self.streams[s as usize]
    }

    pub fn cpu_streams(&self) -> &[CpuStream] {
        &self.streams
    }

    /// Starts every stream that is not running: each puts its misses in flight now.
    pub fn start_cpu_streams(&mut self) {
        for s in 0..self.streams.len() as u32 {
            if self.streams[s as usize].running {
                continue;
            }
            self.streams[s as usize].running = true;
            self.streams_running += 1;
            // Fill buffers still waiting since a stop keep their miss.
            for slot in 0..self.streams[s as usize].slots.len() as u64 {
                if self.streams[s as usize].slots[slot as usize].is_none() {
                    self.issue_line(s, slot);
                }
            }
        }
    }

    /// Stops every stream: misses in flight complete, none are issued after them.
    pub fn stop_cpu_streams(&mut self) {
        for st in &mut self.streams {
            st.running = false;
        }
        self.streams_running = 0;
    }

    pub fn cpu_streams_running(&self) -> bool {
        self.streams_running > 0
    }

    /// Runs the network for `window` of simulated time with no device driver: CPU streams
    /// (and anything else in flight) progress; deliveries to devices are dropped.
    pub fn run_for(&mut self, window: Time) {
        struct Window(bool);
        impl Driver for Window {
            fn delivered(&mut self, _: &mut Net, _: Delivery) {}
            fn timer(&mut self, _: &mut Net, _: u64) {
                self.0 = true;
            }
            fn finished(&self) -> bool {
                self.0
            }
        }
        let at = self.now() + window;
        self.timer_at(at, 0);
        self.run(&mut Window(false), Time::MAX);
    }

    /// Issues the next line miss of stream `s` from fill-buffer `slot`.
    fn issue_line(&mut self, s: u32, slot: u64) {
        let now = self.now();
        let st = &mut self.streams[s as usize];
        let lines = (st.spec.span / LINE as u64).max(1);
        let target = st.spec.base + (st.next_line % lines) * LINE as u64;
        st.next_line += 1;
        st.slots[slot as usize] = Some((now, target));
        let issue = Issue {
            route: st.spec.route,
            flow: STREAM_FLOW_BASE + s,
            bytes: LINE,
            addr64: true,
            iotlb_key: 0,
            target,
        };
        self.send_read(issue, slot);
    }

    /// A delivery for a stream's flow (called by `run` instead of the driver).
    pub(crate) fn stream_delivered(&mut self, d: Delivery) {
        match d {
            Delivery::WriteDone { flow, bytes } => {
                self.streams[(flow - STREAM_FLOW_BASE) as usize].bytes_written += bytes as u64;
            }
            Delivery::ReadData {
                flow,
                tag,
                bytes,
                last,
            } => {
                let s = flow - STREAM_FLOW_BASE;
                let now = self.now();
                let st = &mut self.streams[s as usize];
                st.bytes_read += bytes as u64;
                if !last {
                    return;
                }
                let (issued, target) = st.slots[tag as usize]
                    .take()
                    .expect("a line arrives only for a miss in flight");
                st.latency_ps += (now - issued).as_ps() as u128;
                st.misses += 1;
                st.fills += 1;
                let evict = st.spec.fills_per_eviction > 0
                    && st.fills.is_multiple_of(st.spec.fills_per_eviction as u64);
                let (fill_llc, op, route, running) =
                    (st.spec.fill_llc, st.spec.op, st.spec.route, st.running);
                if let (true, Some(sink)) = (evict, fill_llc) {
                    if self.evict_ddio_line(sink) {
                        self.streams[s as usize].evictions += 1;
                    }
                }
                if op == StreamOp::Write {
                    // The dirty line goes back to its node (posted, off the critical path).
                    self.send_write(Issue {
                        route,
                        flow,
                        bytes: LINE,
                        addr64: true,
                        iotlb_key: 0,
                        target,
                    });
                }
                if running {
                    self.issue_line(s, tag);
                }
            }
        }
    }
}
