//! A DMA requester as PCIe sees it: posted writes of at most MPS bytes, read requests of
//! at most MRRS bytes with a bounded number outstanding (tags), no request crossing a
//! 4 KiB boundary. Written once and used by every device model (GPU copy engine, NTB DMA
//! engine, NIC, NVMe): only the parameters differ.

use fabric::{Access, Fault, Request, Requester};
use sim::net::{Delivery, Driver, Issue, Net};
use sim::timed::TimedFabric;
use sim::{pcie, Time};

/// How a requester issues DMA.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DmaSpec {
    /// Max payload of a posted write (bytes).
    pub mps: u32,
    /// Max read request size (bytes).
    pub mrrs: u32,
    /// Read requests in flight at most (tags).
    pub max_reads: u32,
    /// Pacing of posted writes: picoseconds per KiB on the wire (the requester's own link,
    /// or its engine if slower).
    pub issue_ps_per_kib: u64,
}

/// What to move.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// Posted writes of `bytes` to bus address `dst` (data comes from the device itself).
    Write { dst: u64 },
    /// Reads of `bytes` at bus address `src` into the device.
    Read { src: u64 },
    /// Read `src`, write what arrives to `dst` (a DMA engine copying between two places).
    Copy { src: u64, dst: u64 },
}

/// The route of every 4 KiB page of a buffer, as the requester addresses it.
#[derive(Clone, Debug)]
pub struct PageRoutes {
    base: u64,
    /// Per page: the timed route, and the address at the target of the page's first byte
    /// (a RAM node offset or a BAR offset).
    routes: Vec<(u32, u64)>,
}

impl PageRoutes {
    /// Routes every page of `[addr, addr + bytes)` for `access` by `requester`.
    pub fn plan(
        tf: &mut TimedFabric,
        requester: Requester,
        addr: u64,
        bytes: u64,
        access: Access,
    ) -> Result<PageRoutes, Fault> {
        let base = addr & !0xfff;
        let end = addr + bytes.max(1);
        let mut routes = Vec::with_capacity(((end - base) >> 12) as usize + 1);
        let mut page = base;
        while page < end {
            let at = page.max(addr);
            let req = Request {
                requester,
                addr: at,
                len: 1,
                access,
            };
            let (route, target) = tf.route(&req)?;
            let at_target = match target {
                fabric::Target::Ram { offset, .. } | fabric::Target::Bar { offset, .. } => offset,
            };
            routes.push((route, at_target - (at - page)));
            page += 4096;
        }
        Ok(PageRoutes { base, routes })
    }

    /// What a request of `bytes` at `addr` needs to be injected.
    #[inline]
    fn issue(&self, addr: u64, bytes: u32, flow: u32) -> Issue {
        let (route, page_target) = self.routes[((addr - self.base) >> 12) as usize];
        Issue {
            route,
            flow,
            bytes,
            addr64: addr >= 1 << 32,
            iotlb_key: ((flow as u64) << 48) | (addr >> 12),
            target: page_target + (addr & 0xfff),
        }
    }
}

/// The largest request from `addr` within `limit` bytes, not crossing 4 KiB.
#[inline]
fn chunk(addr: u64, left: u64, limit: u32) -> u32 {
    let to_page = 4096 - (addr & 0xfff);
    left.min(limit as u64).min(to_page) as u32
}

/// When a DMA job started and ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DmaOutcome {
    pub start: Time,
    /// When half of the bytes had arrived (for a steady-state rate over the second half).
    pub mid: Time,
    pub end: Time,
    pub bytes: u64,
}

impl DmaOutcome {
    pub fn gbps(&self) -> f64 {
        self.bytes as f64 / (self.end - self.start).as_ps().max(1) as f64 * 1000.0
    }

    /// Rate over the second half of the transfer (GB/s).
    pub fn steady_gbps(&self) -> f64 {
        (self.bytes - self.bytes / 2) as f64 / (self.end - self.mid).as_ps().max(1) as f64 * 1000.0
    }
}

/// One DMA job driven through the network.
pub struct DmaJob {
    spec: DmaSpec,
    op: Op,
    bytes: u64,
    flow: u32,
    reads: Option<PageRoutes>,
    writes: Option<PageRoutes>,
    /// Next byte to request (reads) or write (writes).
    read_next: u64,
    write_next: u64,
    outstanding: u32,
    /// For a copy: bytes read but not yet written, as (offset, len) chunks.
    pending: std::collections::VecDeque<(u64, u32)>,
    written: u64,
    read_done: u64,
    start: Time,
    mid: Time,
    end: Time,
    done: bool,
    pacing: bool,
}

const TIMER_WRITE: u64 = 1;

impl DmaJob {
    /// Plans a job: routes every page it touches. `flow` tags its TLPs in counters.
    pub fn new(
        tf: &mut TimedFabric,
        requester: Requester,
        spec: DmaSpec,
        op: Op,
        bytes: u64,
        flow: u32,
    ) -> Result<DmaJob, Fault> {
        let (reads, writes) = match op {
            Op::Write { dst } => (
                None,
                Some(PageRoutes::plan(tf, requester, dst, bytes, Access::Write)?),
            ),
            Op::Read { src } => (
                Some(PageRoutes::plan(tf, requester, src, bytes, Access::Read)?),
                None,
            ),
            Op::Copy { src, dst } => (
                Some(PageRoutes::plan(tf, requester, src, bytes, Access::Read)?),
                Some(PageRoutes::plan(tf, requester, dst, bytes, Access::Write)?),
            ),
        };
        Ok(DmaJob {
            spec,
            op,
            bytes,
            flow,
            reads,
            writes,
            read_next: 0,
            write_next: 0,
            outstanding: 0,
            pending: Default::default(),
            written: 0,
            read_done: 0,
            start: Time::ZERO,
            mid: Time::ZERO,
            end: Time::ZERO,
            done: false,
            pacing: false,
        })
    }

    fn addrs(&self) -> (u64, u64) {
        match self.op {
            Op::Write { dst } => (0, dst),
            Op::Read { src } => (src, 0),
            Op::Copy { src, dst } => (src, dst),
        }
    }

    /// Starts the job at `at` and runs the network until it is done.
    pub fn run(mut self, net: &mut Net, at: Time) -> DmaOutcome {
        self.start = at.max(net.now());
        net.timer_at(self.start, 0);
        net.run(&mut self, Time::MAX);
        DmaOutcome {
            start: self.start,
            mid: self.mid,
            end: self.end,
            bytes: self.bytes,
        }
    }

    fn issue_reads(&mut self, net: &mut Net) {
        let (src, _) = self.addrs();
        let Some(routes) = &self.reads else { return };
        while self.outstanding < self.spec.max_reads && self.read_next < self.bytes {
            let addr = src + self.read_next;
            let n = chunk(addr, self.bytes - self.read_next, self.spec.mrrs);
            net.send_read(routes.issue(addr, n, self.flow), self.read_next);
            self.read_next += n as u64;
            self.outstanding += 1;
        }
    }

    /// Issues one posted write (of the next chunk) and schedules the next by pacing.
    fn issue_write(&mut self, net: &mut Net) {
        let (_, dst) = self.addrs();
        let Some(routes) = &self.writes else { return };
        let (offset, limit) = match self.op {
            Op::Copy { .. } => match self.pending.front_mut() {
                Some(front) => (front.0, front.1),
                None => {
                    self.pacing = false;
                    return;
                }
            },
            _ if self.write_next < self.bytes => {
                (self.write_next, (self.bytes - self.write_next) as u32)
            }
            _ => {
                self.pacing = false;
                return;
            }
        };
        let addr = dst + offset;
        let n = chunk(addr, limit as u64, self.spec.mps);
        net.send_write(routes.issue(addr, n, self.flow));
        match self.op {
            Op::Copy { .. } => {
                let front = self.pending.front_mut().expect("checked");
                front.0 += n as u64;
                front.1 -= n;
                if front.1 == 0 {
                    self.pending.pop_front();
                }
            }
            _ => self.write_next += n as u64,
        }
        self.pacing = true;
        let gap = pcie::serialize(
            pcie::wire_bytes(n, false, addr >= 1 << 32),
            self.spec.issue_ps_per_kib,
        );
        net.timer_at(net.now() + gap, TIMER_WRITE);
    }

    fn finish_if_done(&mut self, net: &Net) {
        let progress = match self.op {
            Op::Read { .. } => self.read_done,
            _ => self.written,
        };
        if self.mid == Time::ZERO && progress >= self.bytes / 2 {
            self.mid = net.now();
        }
        if progress == self.bytes {
            self.end = net.now();
            self.done = true;
        }
    }
}

impl Driver for DmaJob {
    fn delivered(&mut self, net: &mut Net, d: Delivery) {
        match d {
            Delivery::WriteDone { bytes, .. } => {
                self.written += bytes as u64;
                self.finish_if_done(net);
            }
            Delivery::ReadData {
                tag, bytes, last, ..
            } => {
                self.read_done += bytes as u64;
                if last {
                    self.outstanding -= 1;
                    if let Op::Copy { .. } = self.op {
                        // The whole request is in: write it out.
                        let (src, _) = self.addrs();
                        let len = chunk(src + tag, self.bytes - tag, self.spec.mrrs);
                        self.pending.push_back((tag, len));
                        if !self.pacing {
                            self.issue_write(net);
                        }
                    }
                    self.issue_reads(net);
                }
                self.finish_if_done(net);
            }
        }
    }

    fn timer(&mut self, net: &mut Net, token: u64) {
        if token == TIMER_WRITE {
            self.issue_write(net);
            return;
        }
        // Start.
        match self.op {
            Op::Write { .. } => self.issue_write(net),
            Op::Read { .. } | Op::Copy { .. } => self.issue_reads(net),
        }
        if self.bytes == 0 {
            self.end = net.now();
            self.done = true;
        }
    }

    fn finished(&self) -> bool {
        self.done
    }
}

/// Time of one small access on an idle network: a posted write until it lands, or a read
/// until its data is back (for doorbells, flags, counters and polls).
pub fn single_access(
    tf: &mut TimedFabric,
    requester: Requester,
    op: Op,
    bytes: u32,
) -> Result<Time, Fault> {
    let spec = DmaSpec {
        mps: 4096,
        mrrs: 4096,
        max_reads: 1,
        issue_ps_per_kib: 1,
    };
    let job = DmaJob::new(tf, requester, spec, op, bytes as u64, 0)?;
    let o = job.run(&mut tf.net, Time::ZERO);
    Ok(o.end - o.start)
}
