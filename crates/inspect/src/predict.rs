//! Predicted gains: runs the audited machine, exported as a scenario, through nudma's
//! timing model. For a finding about where a device's I/O is served (interrupts, queue
//! masks, processes away from the device), the gain is the ratio of the cost of one I/O
//! with the buffer and the CPU that reads it on another node to the same I/O on the
//! device's own node: a 4 KiB DMA write into the buffer plus the CPU reading the first
//! line the device wrote (an LLC hit after DDIO when local, DRAM across the interconnect
//! when not).

use fabric::scenario::{load, Source};
use fabric::{Access, Fabric, PcieNodeId, Request, Requester};
use sim::timed::TimedFabric;
use sim::Time;

use crate::audit::Audit;
use crate::export::{scenario_toml, Calibration};
use crate::model::Machine;

/// Finding kinds whose fix moves a device's I/O back to the device's node.
const PLACEMENT_KINDS: [&str; 6] = [
    "irq-affinity-remote",
    "irq-affinity-crosses-nodes",
    "xps-crosses-nodes",
    "rps-crosses-nodes",
    "process-device-remote",
    "process-memory-remote",
];

/// Status line of predictions in the report.
pub const PREDICTED: &str = "from nudma's timing model of this machine (exported as a scenario; \
    parameters the machine does not state are assumptions — run `nudma calibrate` for memory): \
    cost of a 4 KiB DMA plus the CPU reading its first line, served from another node ÷ from the device's node";

/// One device's I/O cost with the buffer on `node`.
fn io_cost(scenario: &str, device: PcieNodeId, node: u32) -> Option<Time> {
    let s = load(
        Source {
            name: "imported".into(),
            text: scenario.to_string(),
        },
        &fabric::builtin::BuiltinResolver,
    )
    .ok()?;
    let mut tf = TimedFabric::new(Fabric::from_scenario(s).ok()?, 1).ok()?;
    let host = tf.fabric.topo.node(device).host;
    let offset = 64 << 20;
    let addr = tf.fabric.topo.host(host).ram_addr(node, offset)?;
    let req = Request {
        requester: Requester::Function(device),
        addr,
        len: 64,
        access: Access::Write,
    };
    tf.route(&req).ok()?;
    // The device's own DMA behaviour, from its (exported) timing table.
    let fabric::NodeKind::Function { device: d, .. } = tf.fabric.topo.node(device).kind else {
        return None;
    };
    let dma = tf.fabric.topo.devices[d.index()].timed.dma?;
    let spec = devices::DmaSpec {
        mps: tf.fabric.topo.host(host).mps,
        mrrs: dma.mrrs_bytes,
        max_reads: dma.max_reads,
        issue_ps_per_kib: 1,
    };
    let job = devices::DmaJob::new(
        &mut tf,
        req.requester,
        spec,
        devices::Op::Write { dst: addr },
        4096,
    )
    .ok()?;
    let (o, _) = job.run(&mut tf, Time::ZERO);
    let package = tf.fabric.topo.platform_of(host).package_of_node(node);
    Some((o.end - o.start) + tf.cpu_line_read(host, package, node, offset))
}

/// Fills `predicted_gain` of the placement findings; returns how many got one.
pub fn annotate(audit: &mut Audit, m: &Machine, calibration: Option<Calibration>) -> usize {
    if m.nodes.len() < 2 {
        return 0;
    }
    let Ok(export) = scenario_toml(m, calibration) else {
        return 0;
    };
    let Ok(s) = load(
        Source {
            name: "imported".into(),
            text: export.toml.clone(),
        },
        &fabric::builtin::BuiltinResolver,
    ) else {
        return 0;
    };
    let Ok(f) = Fabric::from_scenario(s) else {
        return 0;
    };
    // The other node is one CPUs run on: the finding is about CPUs away from the device.
    let nodes = f.topo.platforms[0].cpu_nodes();
    let mut done = 0;
    for finding in audit.findings.iter_mut() {
        if !PLACEMENT_KINDS.contains(&finding.kind.as_str()) {
            continue;
        }
        let Some(bdf) = finding.device.clone() else {
            continue;
        };
        // The exported device whose function carries this BDF.
        let Some(node) = f.topo.devices.iter().find_map(|d| {
            d.labels
                .iter()
                .position(|l| l.as_deref() == Some(bdf.as_str()))
                .map(|i| d.functions[i])
        }) else {
            continue;
        };
        let host = f.topo.node(node).host;
        let p = f.topo.platform_of(host);
        let fabric::NodeKind::RootComplex { vertex } = f.topo.node(f.topo.node(node).root).kind
        else {
            continue;
        };
        let local = vertex * p.nodes_per_package;
        let Some(remote) = (0..nodes).find(|&n| p.package_of_node(n) != vertex) else {
            continue;
        };
        if let (Some(l), Some(r)) = (
            io_cost(&export.toml, node, local),
            io_cost(&export.toml, node, remote),
        ) {
            let gain = r.as_ps() as f64 / l.as_ps().max(1) as f64;
            finding.predicted_gain = Some((gain * 100.0).round() / 100.0);
            // Scenario node numbers are the machine's in the export's order.
            let id = |n: u32| export.node_ids.get(n as usize).copied().unwrap_or(n);
            finding.why.push_str(&format!(
                " Predicted by nudma's model of this machine: {:.0} ns per 4 KiB I/O served from node {} vs {:.0} ns from node {} (×{gain:.2}).",
                r.as_ns_f64(),
                id(remote),
                l.as_ns_f64(),
                id(local)
            ));
            done += 1;
        }
    }
    done
}
