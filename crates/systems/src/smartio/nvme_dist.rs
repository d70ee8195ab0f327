//! The distributed user-space NVMe driver (libnvm in its SmartIO mode, docs/hardware.md §6):
//! one NVMe controller shared by many hosts.
//!
//! A **manager** (`nvm_dis_ctrl_init` + `nvm_ctrl_reset` + `nvm_aq_create` +
//! `nvm_dis_rpc_enable`) resets the controller, owns its admin queue pair and asks for as
//! many I/O queues as the controller allows (Set Features, Number of Queues). A **client**
//! on any host (`nvm_dis_rpc_bind`) borrows the controller shared, places its queues by
//! access hints (an SQ is `DEVICE_READ|HOST_WRITE`, so near the device; a CQ is
//! `DEVICE_WRITE|HOST_READ`, so near the polling CPU — or wherever the caller says:
//! `SqPlacement`), and asks the manager to create them (`nvm_rpc_cq_create`,
//! `nvm_rpc_sq_create`): one request and one reply through the manager's mailbox and a
//! data interrupt, counted as control messages (`AdminRpc`, `AdminRpcReply`). The manager
//! issues the real Create I/O CQ/SQ commands on its admin queue, so the controller's own
//! queue limit decides: a client past it is refused with the controller's Invalid Queue
//! Identifier, in words.
//!
//! After that a client's I/O touches no other host's CPU and sends no control message: its
//! CPU stores SQ entries and rings the SQ doorbell through its shadow BAR0, the controller
//! fetches the entry and moves the data through the client's DMA window, and the client
//! polls its CQ. The same `devices::nvme::NvmeDriver` component runs the manager's admin
//! queue and every client's I/O queue.

use std::collections::{BTreeMap, BTreeSet};

use devices::nvme::command::{Command, Completion, Status};
use devices::nvme::queue::{Buffer, DriverStep, IoJob, QueueMemory};
use devices::nvme::{NvmeController, NvmeDriver, NvmeDriverConfig, NvmeParams};
use fabric::{Access, Endpoint, Fabric, HostId, Path, PcieNodeId, Request, Requester};
use host::{DmaDirection, Hosts, NumaNode, PhysAddr};
use sim::component::Sim;
use sim::net::ComponentId;
use sim::timed::TimedFabric;

use super::api::{AccessHints, Near, Segment};
use super::lending::{BorrowOptions, Borrowed, Cluster};
use super::pool::Fdid;
use super::ControlKind;

/// Admin queue entries of the manager (libnvm's default admin queue is one page of SQ
/// entries; 32 are plenty for queue creation).
pub(super) const ADMIN_ENTRIES: u16 = 32;

/// What the distributed driver could not do, in words.
#[derive(Debug, thiserror::Error)]
pub enum DistError {
    #[error("{0}")]
    Lend(#[from] super::LendError),
    #[error("{0}")]
    Setup(String),
    /// The controller refused an admin command the manager relayed.
    #[error("{what} refused by {device}: {status}")]
    Refused {
        what: String,
        device: String,
        status: String,
    },
}

/// Where a client's submission queue lives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SqPlacement {
    /// By its hints, `DEVICE_READ|HOST_WRITE`: RAM of the lender, on the device's node.
    NearDevice,
    /// RAM of the client's host (where its CPU writes).
    NearCpu,
    /// Memory behind a BAR of another device (a GPU's memory, `"lender.gpu"`), which the
    /// client borrows for it; the controller reaches it peer-to-peer.
    DeviceMemory { device: String, bar: u8 },
}

impl SqPlacement {
    /// `borrower_ram` (the client's RAM), `lender_ram` (the lender's, by the SQ's hints)
    /// or `HOST.DEVICE.barN` (a device's memory).
    pub fn parse(word: &str) -> Result<SqPlacement, String> {
        Ok(match word {
            "borrower_ram" => SqPlacement::NearCpu,
            "lender_ram" => SqPlacement::NearDevice,
            other => {
                let (dev, bar) = other
                    .rsplit_once(".bar")
                    .and_then(|(d, b)| b.parse::<u8>().ok().map(|b| (d, b)))
                    .ok_or_else(|| {
                        format!(
                            "sq = `{other}`: use \"borrower_ram\", \"lender_ram\" or a device BAR (\"lender.gpu.bar1\")"
                        )
                    })?;
                SqPlacement::DeviceMemory {
                    device: dev.to_string(),
                    bar,
                }
            }
        })
    }
}

/// Where a client's completion queue lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CqPlacement {
    /// By its hints, `DEVICE_WRITE|HOST_READ`: RAM of the polling CPU's host.
    NearCpu,
    /// RAM of the lender, on the device's node.
    NearDevice,
}

/// The manager of one controller.
pub struct Manager {
    pub host: HostId,
    pub device: PcieNodeId,
    pub fdid: Fdid,
    pub controller: ComponentId,
    pub driver: ComponentId,
    label: String,
    dstrd: u8,
    lba_bytes: u64,
    /// I/O queue pairs the controller allocated (Set Features, Number of Queues).
    io_pairs: u16,
    used: BTreeSet<u16>,
    /// The next free byte of each (device, BAR) holding SQs, so that every client's SQ in
    /// a device's memory is its own (handed out in pages, not reused after a delete).
    bar_next: BTreeMap<(PcieNodeId, u8), u64>,
}

/// A client's I/O queue pair and the driver that runs it.
#[derive(Clone, Debug)]
pub struct ClientQueue {
    pub host: HostId,
    pub qid: u16,
    pub entries: u16,
    /// The client's borrow of the controller (none when it runs on the lender itself).
    pub borrow: Option<Borrowed>,
    pub mem: QueueMemory,
    /// Data buffer and PRP-list pages, in the client's RAM, mapped for the controller.
    pub data: Buffer,
    pub prp_lists: Buffer,
    pub driver: ComponentId,
    /// Whatever else the client borrowed for its queues (a GPU holding the SQ).
    pub extra_borrows: Vec<Borrowed>,
}

/// A client's request for a queue pair.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueRequest {
    pub entries: u16,
    pub sq: SqPlacement,
    pub cq: CqPlacement,
    /// Bytes of data buffer (and PRP-list pages: one per `depth`).
    pub data_bytes: u64,
    pub depth: u16,
}

impl QueueRequest {
    /// libnvm's defaults: SQ near the device, CQ near the CPU.
    pub fn by_hints(entries: u16, data_bytes: u64, depth: u16) -> QueueRequest {
        QueueRequest {
            entries,
            sq: SqPlacement::NearDevice,
            cq: CqPlacement::NearCpu,
            data_bytes,
            depth,
        }
    }
}

pub(super) fn function_of(f: &Fabric, name: &str) -> Result<PcieNodeId, DistError> {
    match f.resolve(name) {
        Ok(Endpoint::Node(n)) => Ok(n),
        Ok(_) => Err(DistError::Setup(format!(
            "`{name}` is not a device function"
        ))),
        Err(e) => Err(DistError::Setup(format!("{name}: {e}"))),
    }
}

fn host_of(f: &Fabric, name: &str) -> Result<HostId, DistError> {
    f.topo
        .host_by_name(name)
        .ok_or_else(|| DistError::Setup(format!("no host `{name}`")))
}

pub(super) fn cpu(host: HostId) -> Requester {
    Requester::Cpu { host, package: 0 }
}

/// Runs a driver's queued steps to their end (set-up is control plane: nothing else of
/// the caller's runs meanwhile).
pub(super) fn run_steps(
    sim: &mut Sim<TimedFabric>,
    tf: &mut TimedFabric,
    driver: ComponentId,
    steps: Vec<DriverStep>,
) {
    sim.with(tf, driver, |d: &mut NvmeDriver, _| {
        for s in steps {
            d.push(s);
        }
    });
    let now = tf.net.now();
    tf.net.wake_at(now, driver);
    sim.run_until_finished(tf);
}

fn last_admin(sim: &Sim<TimedFabric>, driver: ComponentId, n: usize) -> Vec<(Command, Completion)> {
    let log = &sim
        .get::<NvmeDriver>(driver)
        .expect("the manager's driver")
        .log
        .admin;
    log[log.len().saturating_sub(n)..].to_vec()
}

pub(super) fn status_text(s: Status) -> String {
    let what = match (s.sct, s.sc) {
        (1, 0x01) => "Invalid Queue Identifier",
        (1, 0x02) => "Invalid Queue Size",
        (1, 0x00) => "Completion Queue Invalid",
        (0, 0x02) => "Invalid Field in Command",
        (0, 0x0c) => "Command Sequence Error",
        _ => "error",
    };
    format!("{what} (SCT {:#x}, SC {:#04x})", s.sct, s.sc)
}

/// RAM of `node`, mapped for `device` as a requester in the same host (a manager or
/// client on the lender itself): (CPU address, device address).
pub(super) fn local_buffer(
    f: &mut Fabric,
    device: PcieNodeId,
    node: NumaNode,
    bytes: u64,
) -> Result<Buffer, DistError> {
    let c = Hosts::with(f, |h, f| {
        h.dma_alloc_coherent(f, Requester::Function(device), node, bytes)
    })
    .map_err(|e| DistError::Setup(e.to_string()))?;
    Ok(Buffer {
        cpu: c.phys.addr,
        dev: c.mapping.addr.0,
        bytes,
    })
}

impl Manager {
    /// `nvm_dis_ctrl_init` + reset + `nvm_aq_create` + `nvm_dis_rpc_enable` on host
    /// `host` for the NVMe `device` (`"lender.nvme"`), whose namespace has `blocks` LBAs
    /// of 512 bytes. Adds the controller to `sim` and enables it.
    pub fn start(
        sim: &mut Sim<TimedFabric>,
        tf: &mut TimedFabric,
        cl: &mut Cluster,
        host: &str,
        device: &str,
        blocks: u64,
    ) -> Result<Manager, DistError> {
        let hid = host_of(&tf.fabric, host)?;
        let node = function_of(&tf.fabric, device)?;
        let fdid = cl.fdid_by_name(&tf.fabric, device)?;
        let params = NvmeParams::from_node(tf, node, 512, blocks)
            .map_err(|e| DistError::Setup(e.to_string()))?;
        let ctrl =
            NvmeController::new(tf, node, params).map_err(|e| DistError::Setup(e.to_string()))?;
        let controller = sim.add(ctrl);
        sim.get::<NvmeController>(controller)
            .expect("just added")
            .attach(tf, controller)
            .map_err(|e| DistError::Setup(e.to_string()))?;
        let lender = tf.fabric.topo.node(node).host;
        let (bar0, admin, scratch) = if lender == hid {
            let n = NumaNode {
                host: hid,
                node: super::api::node_of(&tf.fabric, node),
            };
            let sq = local_buffer(&mut tf.fabric, node, n, 4096)?;
            let cq = local_buffer(&mut tf.fabric, node, n, 4096)?;
            let scratch = local_buffer(&mut tf.fabric, node, n, 4096)?;
            let bar0 = tf.fabric.topo.node(node).bars[0].addr;
            (bar0, memory(sq, cq), scratch)
        } else {
            let b = cl.borrow(&mut tf.fabric, hid, fdid, BorrowOptions::shared())?;
            let bar0 = cl.shadow_bar(&tf.fabric, b, 0)?;
            let sq = borrower_buffer(cl, &mut tf.fabric, b, 4096)?;
            let cq = borrower_buffer(cl, &mut tf.fabric, b, 4096)?;
            let scratch = borrower_buffer(cl, &mut tf.fabric, b, 4096)?;
            (bar0, memory(sq, cq), scratch)
        };
        let cfg = NvmeDriverConfig::new(tf, cpu(hid), bar0, admin, ADMIN_ENTRIES, scratch);
        let driver = sim.add(NvmeDriver::new(cfg, Vec::new()));
        let limit = sim
            .get::<NvmeController>(controller)
            .expect("just added")
            .io_queue_limit();
        run_steps(
            sim,
            tf,
            driver,
            vec![
                DriverStep::Enable,
                DriverStep::Identify { cns: 1, nsid: 0 },
                DriverStep::Identify { cns: 0, nsid: 1 },
                DriverStep::Admin(Command::set_queue_count(limit, limit)),
            ],
        );
        let label = tf.fabric.topo.node_label(node);
        let d = sim.get::<NvmeDriver>(driver).expect("the manager's driver");
        if d.log.ready_at.is_none() {
            return Err(DistError::Setup(format!(
                "{label} did not become ready (CSTS {:?})",
                d.log.csts
            )));
        }
        let (cmd, set) = d
            .log
            .admin
            .last()
            .cloned()
            .ok_or_else(|| DistError::Setup(format!("{label}: no admin completion")))?;
        if !set.status.is_success() {
            return Err(DistError::Refused {
                what: format!(
                    "Set Features (Number of Queues, opcode {:#04x})",
                    cmd.opcode
                ),
                device: label,
                status: status_text(set.status),
            });
        }
        // Dword 0: NSQA in bits 15:0, NCQA in 31:16, both 0-based.
        let nsqa = (set.dw0 & 0xffff) as u16 + 1;
        let ncqa = (set.dw0 >> 16) as u16 + 1;
        Ok(Manager {
            host: hid,
            device: node,
            fdid,
            controller,
            driver,
            label,
            dstrd: d.dstrd(),
            lba_bytes: d.lba_bytes(),
            io_pairs: nsqa.min(ncqa),
            used: BTreeSet::new(),
            bar_next: BTreeMap::new(),
        })
    }

    /// I/O queue pairs the controller allocated to this manager.
    pub fn io_pairs(&self) -> u16 {
        self.io_pairs
    }

    pub fn lba_bytes(&self) -> u64 {
        self.lba_bytes
    }

    /// A client on `host` binds to the manager and gets its own I/O queue pair, placed as
    /// `req` says. Two control messages (request, reply) for the relayed creation, plus
    /// the client's borrow; none afterwards.
    pub fn create_queue_pair(
        &mut self,
        sim: &mut Sim<TimedFabric>,
        tf: &mut TimedFabric,
        cl: &mut Cluster,
        host: &str,
        req: &QueueRequest,
    ) -> Result<ClientQueue, DistError> {
        let hid = host_of(&tf.fabric, host)?;
        let lender = tf.fabric.topo.node(self.device).host;
        let borrow = if hid == lender {
            None
        } else {
            Some(cl.borrow(&mut tf.fabric, hid, self.fdid, BorrowOptions::shared())?)
        };
        let r = self.set_up_client(sim, tf, cl, hid, borrow, req);
        if r.is_err() {
            if let Some(b) = borrow {
                let _ = cl.return_device(&mut tf.fabric, b);
            }
        }
        r
    }

    /// Like `create_queue_pair`, on a borrow the client already holds (`borrow`, e.g. one
    /// made through a chosen adapter pair with `BorrowOptions::through`): the queue pair's
    /// memory, data buffer and doorbells all go through that borrow. The borrow stays the
    /// caller's when the creation fails.
    pub fn create_queue_pair_on(
        &mut self,
        sim: &mut Sim<TimedFabric>,
        tf: &mut TimedFabric,
        cl: &mut Cluster,
        borrow: Borrowed,
        req: &QueueRequest,
    ) -> Result<ClientQueue, DistError> {
        self.set_up_client(sim, tf, cl, borrow.host, Some(borrow), req)
    }

    /// A client gives its I/O queue pair `qid` up (`nvm_rpc_sq_delete` + `cq_delete`):
    /// the manager deletes the SQ (the controller aborts its commands) then the CQ on its
    /// admin queue; two control messages. The qid is free again.
    pub fn delete_queue_pair(
        &mut self,
        sim: &mut Sim<TimedFabric>,
        tf: &mut TimedFabric,
        cl: &mut Cluster,
        qid: u16,
    ) -> Result<(), DistError> {
        cl.post(ControlKind::AdminRpc);
        run_steps(
            sim,
            tf,
            self.driver,
            vec![
                DriverStep::Admin(Command::delete_io_sq(qid)),
                DriverStep::Admin(Command::delete_io_cq(qid)),
            ],
        );
        cl.post(ControlKind::AdminRpcReply);
        self.used.remove(&qid);
        for (cmd, e) in last_admin(sim, self.driver, 2) {
            if !e.status.is_success() {
                return Err(DistError::Refused {
                    what: format!("Delete I/O queue {qid} (opcode {:#04x})", cmd.opcode),
                    device: self.label.clone(),
                    status: status_text(e.status),
                });
            }
        }
        Ok(())
    }

    fn set_up_client(
        &mut self,
        sim: &mut Sim<TimedFabric>,
        tf: &mut TimedFabric,
        cl: &mut Cluster,
        hid: HostId,
        borrow: Option<Borrowed>,
        req: &QueueRequest,
    ) -> Result<ClientQueue, DistError> {
        let qbytes = req.entries as u64 * 64;
        let mut extra = Vec::new();
        let dev_node = NumaNode {
            host: tf.fabric.topo.node(self.device).host,
            node: super::api::node_of(&tf.fabric, self.device),
        };
        let own = NumaNode { host: hid, node: 0 };
        // Where the client's CPU and the controller address each queue.
        let sq = match (&req.sq, borrow) {
            (SqPlacement::NearCpu, None) | (SqPlacement::NearDevice, None) => {
                local_buffer(&mut tf.fabric, self.device, dev_node, qbytes)?
            }
            (SqPlacement::NearCpu, Some(b)) => borrower_buffer(cl, &mut tf.fabric, b, qbytes)?,
            (SqPlacement::NearDevice, Some(b)) => {
                let hints = AccessHints::DEVICE_READ | AccessHints::HOST_WRITE;
                let s = cl.create_device_segment(&mut tf.fabric, b, qbytes, hints, None)?;
                segment_buffer(cl, &mut tf.fabric, b, hid, &s)?
            }
            (SqPlacement::DeviceMemory { device, bar }, b) => {
                let (buf, g) = self.device_memory_sq(tf, cl, hid, b, device, *bar, qbytes)?;
                extra.extend(g);
                buf
            }
        };
        let cq = match (req.cq, borrow) {
            (_, None) => local_buffer(&mut tf.fabric, self.device, own, req.entries as u64 * 16)?,
            (CqPlacement::NearCpu, Some(b)) => {
                borrower_buffer(cl, &mut tf.fabric, b, req.entries as u64 * 16)?
            }
            (CqPlacement::NearDevice, Some(b)) => {
                let s = cl.create_device_segment(
                    &mut tf.fabric,
                    b,
                    req.entries as u64 * 16,
                    AccessHints::DEVICE_WRITE | AccessHints::HOST_READ,
                    Some(Near::Device),
                )?;
                segment_buffer(cl, &mut tf.fabric, b, hid, &s)?
            }
        };
        let (data, prp_lists) = match borrow {
            None => (
                local_buffer(&mut tf.fabric, self.device, own, req.data_bytes)?,
                local_buffer(&mut tf.fabric, self.device, own, req.depth as u64 * 4096)?,
            ),
            Some(b) => (
                borrower_buffer(cl, &mut tf.fabric, b, req.data_bytes)?,
                borrower_buffer(cl, &mut tf.fabric, b, req.depth as u64 * 4096)?,
            ),
        };
        let mem = memory(sq, cq);
        // The relayed creation: the manager's admin queue does it, the controller decides.
        cl.post(ControlKind::AdminRpc);
        let qid = (1..=u16::MAX)
            .find(|q| !self.used.contains(q))
            .expect("fewer than 65535 queues in use");
        run_steps(
            sim,
            tf,
            self.driver,
            vec![DriverStep::CreateQueuePair {
                qid,
                entries: req.entries,
                mem,
                vector: None,
            }],
        );
        cl.post(ControlKind::AdminRpcReply);
        for (cmd, e) in last_admin(sim, self.driver, 2) {
            if !e.status.is_success() {
                let what = if cmd.opcode == 0x05 {
                    "Create I/O Completion Queue"
                } else {
                    "Create I/O Submission Queue"
                };
                return Err(DistError::Refused {
                    what: format!(
                        "{what} {qid} for host `{}` ({} I/O queue pairs allocated, {} in use)",
                        tf.fabric.topo.host(hid).name,
                        self.io_pairs,
                        self.used.len()
                    ),
                    device: self.label.clone(),
                    status: status_text(e.status),
                });
            }
        }
        self.used.insert(qid);
        let bar0 = match borrow {
            Some(b) => cl.shadow_bar(&tf.fabric, b, 0)?,
            None => tf.fabric.topo.node(self.device).bars[0].addr,
        };
        let scratch = Buffer {
            cpu: prp_lists.cpu,
            dev: prp_lists.dev,
            bytes: 0,
        };
        let cfg = NvmeDriverConfig::new(tf, cpu(hid), bar0, mem, ADMIN_ENTRIES, scratch);
        let driver = sim.add(NvmeDriver::new(cfg, Vec::new()));
        run_steps(
            sim,
            tf,
            driver,
            vec![DriverStep::AttachQueuePair {
                qid,
                entries: req.entries,
                mem,
                dstrd: self.dstrd,
                lba_bytes: self.lba_bytes,
            }],
        );
        Ok(ClientQueue {
            host: hid,
            qid,
            entries: req.entries,
            borrow,
            mem,
            data,
            prp_lists,
            driver,
            extra_borrows: extra,
        })
    }

    /// An SQ in another device's memory: the client borrows that device (when it is not
    /// its own), its CPU writes through the shadow BAR, and the controller reaches the BAR
    /// peer-to-peer.
    #[allow(clippy::too_many_arguments)]
    fn device_memory_sq(
        &mut self,
        tf: &mut TimedFabric,
        cl: &mut Cluster,
        hid: HostId,
        nvme_borrow: Option<Borrowed>,
        device: &str,
        bar: u8,
        bytes: u64,
    ) -> Result<(Buffer, Option<Borrowed>), DistError> {
        let g = function_of(&tf.fabric, device)?;
        let gnode = tf.fabric.topo.node(g);
        let info = gnode.bar(bar).copied().ok_or_else(|| {
            DistError::Setup(format!("{device} has no BAR{bar} for a submission queue"))
        })?;
        let offset = self.bar_next.get(&(g, bar)).copied().unwrap_or(0);
        if offset + bytes > info.size {
            return Err(DistError::Setup(format!(
                "{device} BAR{bar} ({} bytes, {offset} already holding queues) has no room for a {bytes}-byte queue",
                info.size
            )));
        }
        // An SQ's base is page-aligned (NVMe: a contiguous queue starts on a memory page).
        self.bar_next
            .insert((g, bar), (offset + bytes).next_multiple_of(4096));
        let ghost = gnode.host;
        let (cpu_addr, gb) = if ghost == hid {
            (info.addr + offset, None)
        } else {
            let fd = cl.fdid_by_name(&tf.fabric, device)?;
            let b = cl.borrow(&mut tf.fabric, hid, fd, BorrowOptions::shared())?;
            (cl.shadow_bar(&tf.fabric, b, bar)? + offset, Some(b))
        };
        // The controller's address of the BAR: lender-local when both are in one host,
        // else through the host layer (a window toward the BAR's host).
        let nvme_host = tf.fabric.topo.node(self.device).host;
        let dev_addr = if ghost == nvme_host {
            Hosts::with(&mut tf.fabric, |h, f| {
                h.dma_map_single(
                    f,
                    Requester::Function(self.device),
                    PhysAddr {
                        host: ghost,
                        addr: info.addr + offset,
                    },
                    bytes,
                    DmaDirection::ToDevice,
                )
            })
            .map_err(|e| DistError::Setup(e.to_string()))?
            .addr
            .0
        } else {
            let b = nvme_borrow.ok_or_else(|| {
                DistError::Setup(format!("{device}: the controller's host cannot reach it"))
            })?;
            cl.map_for_device(
                &mut tf.fabric,
                b,
                PhysAddr {
                    host: ghost,
                    addr: info.addr + offset,
                },
                bytes,
                DmaDirection::ToDevice,
            )?
            .addr
            .0
        };
        Ok((
            Buffer {
                cpu: cpu_addr,
                dev: dev_addr,
                bytes,
            },
            gb,
        ))
    }
}

impl ClientQueue {
    /// Starts a closed loop of I/O on this queue pair (`job.qid` is set to the client's).
    pub fn start_io(&self, sim: &mut Sim<TimedFabric>, tf: &mut TimedFabric, mut job: IoJob) {
        job.qid = self.qid;
        job.data = self.data;
        job.prp_lists = self.prp_lists;
        sim.with(tf, self.driver, |d: &mut NvmeDriver, _| {
            d.push(DriverStep::Io(job));
        });
        let now = tf.net.now();
        tf.net.wake_at(now, self.driver);
    }

    /// The path of the controller's fetch of this queue's SQ entries: (hops, roots).
    pub fn sq_fetch_path(
        &self,
        f: &Fabric,
        controller: PcieNodeId,
    ) -> Result<(usize, usize), DistError> {
        let mut p = Path::with_capacity(32);
        f.route(
            &Request {
                requester: Requester::Function(controller),
                addr: self.mem.sq_dev,
                len: 64,
                access: Access::Read,
            },
            &mut p,
        )
        .map_err(|e| DistError::Setup(fabric::describe::fault_text(&f.topo, &e)))?;
        Ok((p.hops(), p.roots()))
    }
}

pub(super) fn memory(sq: Buffer, cq: Buffer) -> QueueMemory {
    QueueMemory {
        sq_cpu: sq.cpu,
        sq_dev: sq.dev,
        cq_cpu: cq.cpu,
        cq_dev: cq.dev,
    }
}

/// RAM of the borrower (near its CPU), mapped for the borrowed controller through the
/// DMA window: (CPU address, device address).
fn borrower_buffer(
    cl: &mut Cluster,
    f: &mut Fabric,
    b: Borrowed,
    bytes: u64,
) -> Result<Buffer, DistError> {
    let hints = AccessHints::DEVICE_WRITE | AccessHints::HOST_READ;
    let s = cl.create_device_segment(f, b, bytes, hints, Some(Near::Cpu))?;
    segment_buffer(cl, f, b, b.host, &s)
}

/// A segment as `host`'s CPU and as the borrowed device address it.
fn segment_buffer(
    cl: &mut Cluster,
    f: &mut Fabric,
    b: Borrowed,
    host: HostId,
    s: &Segment,
) -> Result<Buffer, DistError> {
    let dev = cl.map_segment_for_device(f, b, s, DmaDirection::Bidirectional)?;
    let cpu = cl.map_segment_for_cpu(f, host, s)?;
    Ok(Buffer {
        cpu: cpu.addr,
        dev: dev.addr.0,
        bytes: s.size,
    })
}

/// Random 4 KiB reads (8 LBAs of 512 B) over the first `span_blocks` LBAs, from a seeded
/// generator (SplitMix64: the same seed, the same LBAs).
pub fn random_reads(n: u64, span_blocks: u64, seed: u64) -> Vec<devices::nvme::queue::IoCmd> {
    let mut s = seed;
    let slots = (span_blocks / 8).max(1);
    (0..n)
        .map(|_| {
            s = s.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = s;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^= z >> 31;
            devices::nvme::queue::IoCmd {
                write: false,
                slba: (z % slots) * 8,
                blocks: 8,
                buf_offset: 0,
            }
        })
        .collect()
}

/// An I/O job over `cmds` at `depth` (the client fills in its queue and buffers).
pub fn io_job(cmds: Vec<devices::nvme::queue::IoCmd>, depth: u16) -> IoJob {
    let none = Buffer {
        cpu: 0,
        dev: 0,
        bytes: 0,
    };
    IoJob {
        qid: 0,
        depth,
        nsid: 1,
        cmds,
        data: none,
        prp_lists: none,
    }
}
