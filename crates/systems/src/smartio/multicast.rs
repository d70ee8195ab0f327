//! `smartio.multicast`: one NVMe Identify whose data lands in a multicast group of N
//! hosts in one operation. The lender's driver (on the host with the controller) makes a
//! group sent from its adapter, each member host joins with a 4 KiB segment of its RAM
//! (`SCI_MEMACCESS_MULTIHOST_READ`), the group is mapped for the controller, and one
//! Identify Controller is issued whose PRP1 is the group's device address: the
//! controller's one 4 KiB data write is replicated by the switches to every member.
//!
//! Each member's segment is first filled with a poison byte by the member's own CPU, so a
//! delivery is seen as a segment that no longer holds it; every member reads its segment
//! back through the fabric (a crashed member's read faults: not delivered). The bytes are
//! compared with those of a unicast Identify Controller of the same controller into the
//! lender's own RAM.

use devices::nvme::command::{Command, IdentifyController, CNS_CONTROLLER};
use devices::nvme::queue::DriverStep;
use devices::nvme::{NvmeController, NvmeDriver, NvmeDriverConfig, NvmeParams};
use fabric::HostId;
use host::NumaNode;
use sim::component::Sim;
use sim::timed::TimedFabric;

use super::api::node_of;
use super::lending::Cluster;
use super::nvme_dist::{
    cpu, function_of, local_buffer, memory, run_steps, status_text, DistError, ADMIN_ENTRIES,
};

/// What a segment holds before the Identify: a byte no Identify page is made of.
const POISON: u8 = 0xA5;
/// Identify data: one 4 KiB page.
const IDENTIFY_BYTES: u64 = 4096;

/// The outcome of `multicast_identify`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MulticastResult {
    /// Members of the group.
    pub hosts: usize,
    /// Members whose segment got the Identify's bytes (read back through the fabric).
    pub deliveries: usize,
    /// Every delivered member's 4 KiB equals the controller's Identify Controller data (a
    /// unicast Identify of the same controller), and that data parses as the controller's.
    pub bytes_identical: bool,
    /// Member copies the fabric skipped (dead way or host), as the group counted them.
    pub skipped_copies: u64,
    /// The members, in join order.
    pub members: Vec<String>,
    /// The address the controller wrote to (the group's window as the device sees it).
    pub device_addr: u64,
    /// DMA writes of the controller that found no timed route (0: every data TLP was
    /// timed along the group's route).
    pub dma_faults: u64,
    /// Member copies the fabric wrote (one per member per data TLP).
    pub copies: u64,
}

/// One Identify Controller from `device` (`"h00.nvme"`), driven by its own host, whose
/// data lands in a group of the first `hosts` other hosts (in host order: h01.. on
/// `smartio_cluster60`), each with a 4 KiB segment.
pub fn multicast_identify(
    tf: &mut TimedFabric,
    device: &str,
    hosts: usize,
) -> Result<MulticastResult, DistError> {
    let node = function_of(&tf.fabric, device)?;
    let lender = tf.fabric.topo.node(node).host;
    let members: Vec<HostId> = (0..tf.fabric.topo.hosts.len())
        .map(HostId::from_index)
        .filter(|&h| h != lender)
        .take(hosts)
        .collect();
    if members.len() < hosts || hosts == 0 {
        return Err(DistError::Setup(format!(
            "a multicast group of {hosts} hosts: the scenario has {} besides {}",
            members.len(),
            tf.fabric.topo.host(lender).name
        )));
    }
    let mut cl = Cluster::new(&tf.fabric);
    let mut sim: Sim<TimedFabric> = Sim::new();

    // The controller, enabled and driven by its own host (nvme_dist's `Manager::start`).
    let params = NvmeParams::from_node(tf, node, 512, 1 << 16)
        .map_err(|e| DistError::Setup(e.to_string()))?;
    let ctrl =
        NvmeController::new(tf, node, params).map_err(|e| DistError::Setup(e.to_string()))?;
    let controller = sim.add(ctrl);
    sim.get::<NvmeController>(controller)
        .expect("just added")
        .attach(tf, controller)
        .map_err(|e| DistError::Setup(e.to_string()))?;
    let near = NumaNode {
        host: lender,
        node: node_of(&tf.fabric, node),
    };
    let sq = local_buffer(&mut tf.fabric, node, near, 4096)?;
    let cq = local_buffer(&mut tf.fabric, node, near, 4096)?;
    let scratch = local_buffer(&mut tf.fabric, node, near, IDENTIFY_BYTES)?;
    let bar0 = tf.fabric.topo.node(node).bars[0].addr;

    // The group, its members' segments (poisoned by their own CPUs), the device mapping.
    let mut group = cl.create_multicast_group(&mut tf.fabric, lender, IDENTIFY_BYTES)?;
    let poison = vec![POISON; IDENTIFY_BYTES as usize];
    let mut segs = Vec::with_capacity(hosts);
    for &h in &members {
        let s = cl.create_multicast_segment(&mut tf.fabric, h, IDENTIFY_BYTES)?;
        cl.join_multicast_group(&mut tf.fabric, &mut group, &s)?;
        // A crashed member's CPU stores nothing: its segment is read back as nothing too.
        let _ = tf.fabric.cpu_store(h, 0, s.phys.addr, &poison);
        segs.push(s);
    }
    let mapping = cl.map_multicast_for_device(&mut tf.fabric, &group, node)?;

    let cfg = NvmeDriverConfig::new(
        tf,
        cpu(lender),
        bar0,
        memory(sq, cq),
        ADMIN_ENTRIES,
        scratch,
    );
    let driver = sim.add(NvmeDriver::new(cfg, Vec::new()));
    run_steps(
        &mut sim,
        tf,
        driver,
        vec![
            DriverStep::Enable,
            // The reference: the controller's Identify data into the lender's RAM.
            DriverStep::Identify {
                cns: CNS_CONTROLLER,
                nsid: 0,
            },
            // The one operation: PRP1 is the group (4 KiB, page-aligned: no PRP2).
            DriverStep::Admin(Command::identify(CNS_CONTROLLER, 0, mapping.addr, 0)),
        ],
    );
    let label = tf.fabric.topo.node_label(node);
    let d = sim.get::<NvmeDriver>(driver).expect("the driver");
    let reference = d.log.identify_controller.clone().ok_or_else(|| {
        DistError::Setup(format!(
            "{label}: the unicast Identify Controller gave no data"
        ))
    })?;
    let (cmd, done) = d
        .log
        .admin
        .last()
        .cloned()
        .ok_or_else(|| DistError::Setup(format!("{label}: no admin completion")))?;
    if cmd.prp1 != mapping.addr || !done.status.is_success() {
        return Err(DistError::Refused {
            what: "Identify Controller into the multicast group".into(),
            device: label,
            status: status_text(done.status),
        });
    }
    let parsed = IdentifyController::from_bytes(&reference);
    let mut deliveries = 0;
    let mut identical = parsed.vid != 0 && reference.len() == IDENTIFY_BYTES as usize;
    let mut buf = vec![0u8; IDENTIFY_BYTES as usize];
    for s in &segs {
        // The member's CPU reads its segment (routed: a crashed host reads nothing).
        if tf
            .fabric
            .cpu_load(s.phys.host, 0, s.phys.addr, &mut buf)
            .is_err()
        {
            continue;
        }
        if buf == poison {
            continue;
        }
        deliveries += 1;
        identical &= buf == reference;
    }
    let (copies, skipped_copies) = tf
        .fabric
        .multicast_group(group.id)
        .map_or((0, 0), |g| (g.delivered, g.skipped));
    let dma_faults = sim
        .get::<NvmeController>(controller)
        .expect("the controller")
        .stats()
        .dma_faults;
    Ok(MulticastResult {
        hosts,
        deliveries,
        bytes_identical: identical && deliveries > 0,
        skipped_copies,
        members: members
            .iter()
            .map(|&h| tf.fabric.topo.host(h).name.clone())
            .collect(),
        device_addr: mapping.addr,
        dma_faults,
        copies,
    })
}
