//! The NUDMA audit: turns a [`Machine`] into findings, each with a severity, what
//! was found, why it costs, and the exact commands that fix it.
//!
//! Severities, in order (`--fail-on` compares with this order):
//! - `info`: a fact worth knowing or a harmless oddity (the node map of the I/O
//!   devices, a multi-PF NIC, `numa_node = -1` on a single-node machine);
//! - `warning`: placement the machine cannot guarantee or that probably costs
//!   (unknown or contradictory `numa_node`, a link below capability, interrupts or
//!   queue masks allowed on other nodes, a process partly away from its device);
//! - `error`: I/O that certainly crosses the interconnect now (interrupts only
//!   deliverable to another node, a process entirely away from its device).
//!
//! Predicted gains come from `predict`, which runs the machine through the timing model;
//! findings it does not apply to carry `predicted_gain: null`.
//!
//! This file holds the findings and the report they make, and runs the checks; where a
//! device is attached is `placement`, and the checks are by subject: `nodes` (devices'
//! NUMA attachment), `links`, `interrupts` (IRQ affinity, XPS/RPS masks) and
//! `processes`.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::Serialize;

use crate::cpuset::CpuSet;
use crate::model::{Machine, NoteLevel, PciDevice, ProcessInfo, Source};
use crate::pci::{gen_from_gts, Bdf, DeviceClass};

mod interrupts;
mod links;
mod nodes;
mod placement;
mod processes;

pub use placement::{device_placement, multi_pf_groups, InferredFrom};
use placement::{placement, Placement};

/// What the report says when no finding got a predicted gain (see `predict`).
pub const PREDICTED_GAIN_STATUS: &str =
    "none: no finding here moves a device's I/O between nodes (or the machine has one node)";

/// How much a finding matters. Ordered: `Info < Warning < Error`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Info,
    Warning,
    Error,
}

impl Severity {
    pub fn as_str(&self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown severity {0:?} (expected info, warning or error)")]
pub struct SeverityParseError(pub String);

impl FromStr for Severity {
    type Err = SeverityParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "info" => Ok(Severity::Info),
            "warning" | "warn" => Ok(Severity::Warning),
            "error" => Ok(Severity::Error),
            _ => Err(SeverityParseError(s.to_string())),
        }
    }
}

/// One problem or fact, with its fix.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Finding {
    pub severity: Severity,
    /// A stable identifier of the kind of finding (`irq-affinity-remote`, …).
    pub kind: String,
    /// The PCI address the finding is about, if it is about one device.
    pub device: Option<String>,
    pub what: String,
    pub why: String,
    /// Shell commands, in order; lines starting with `#` are steps no command does.
    pub fix: Vec<String>,
    /// For a placement finding: how many times more one I/O costs served from another
    /// node than from the device's (see `predict`); `null` where it does not apply.
    pub predicted_gain: Option<f64>,
}

impl Finding {
    fn new(severity: Severity, kind: &str, what: String, why: String, fix: Vec<String>) -> Self {
        Finding {
            severity,
            kind: kind.to_string(),
            device: None,
            what,
            why,
            fix,
            predicted_gain: None,
        }
    }

    fn on(mut self, bdf: Bdf) -> Self {
        self.device = Some(bdf.to_string());
        self
    }
}

/// The link of one device as reported.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LinkReport {
    pub speed_gts: Option<f64>,
    pub width: Option<u32>,
    pub gen: Option<u8>,
    pub max_speed_gts: Option<f64>,
    pub max_width: Option<u32>,
    /// hwloc's link bandwidth, GB/s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gbytes_per_s: Option<f64>,
    /// `true` when running below what both ends can do; `null` when unknown.
    pub below_capability: Option<bool>,
}

/// One PCI function in the audit output.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DeviceReport {
    pub bdf: String,
    pub class: DeviceClass,
    pub pci_class: Option<String>,
    /// The node the machine reports; `null` where it does not say.
    pub numa_node: Option<u32>,
    /// The node `local_cpulist` points to, when `numa_node` is unknown.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inferred_numa_node: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inferred_from: Option<InferredFrom>,
    pub name: Option<String>,
    pub os_devices: Vec<String>,
    pub model: Option<String>,
    pub local_cpulist: Option<String>,
    pub link: LinkReport,
    pub irqs: Vec<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sriov_numvfs: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub physfn: Option<String>,
    pub findings: Vec<Finding>,
}

/// CPU side of the machine, for the report header.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MachineSummary {
    pub cpu: Option<String>,
    pub packages: usize,
    pub cores: usize,
    /// Hardware threads (online CPUs).
    pub threads: usize,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NodeReport {
    pub id: u32,
    pub cpus: String,
    pub memory_bytes: Option<u64>,
    /// No CPU runs on the node (HBM, NVM, CXL or GPU memory; all its CPUs offline).
    pub memory_only: bool,
    /// What memory it is, as the machine says (`HBM`, `GPUMemory`, …).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The PCI function whose memory it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ProcessReport {
    pub pid: u32,
    pub name: Option<String>,
    pub threads: usize,
    /// Threads per node of the CPU each last ran on.
    pub threads_per_node: BTreeMap<u32, usize>,
    pub memory_bytes_per_node: BTreeMap<u32, u64>,
    pub devices: Vec<String>,
}

/// The result of auditing one machine.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Audit {
    pub source: String,
    pub hostname: Option<String>,
    pub machine: MachineSummary,
    pub numa_nodes: usize,
    /// `false` on a single-node machine: nothing can be non-uniform there.
    pub nudma_possible: bool,
    pub nodes: Vec<NodeReport>,
    /// NUMA distances (row = from node, column = to node, in `nodes` order).
    pub distances: Option<Vec<Vec<f64>>>,
    pub devices: Vec<DeviceReport>,
    pub processes: Vec<ProcessReport>,
    /// Every finding, device findings included, most severe first.
    pub findings: Vec<Finding>,
    pub predicted_gain: &'static str,
}

impl Audit {
    /// The exit status for `--fail-on`: 1 when a finding is at or above `fail_on`.
    pub fn exit_code(&self, fail_on: Option<Severity>) -> u8 {
        match fail_on {
            Some(s) if self.findings.iter().any(|f| f.severity >= s) => 1,
            _ => 0,
        }
    }

    pub fn count(&self, severity: Severity) -> usize {
        self.findings
            .iter()
            .filter(|f| f.severity == severity)
            .count()
    }

    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }

    pub fn device(&self, bdf: &str) -> Option<&DeviceReport> {
        self.devices.iter().find(|d| d.bdf == bdf)
    }

    pub fn findings_of_kind<'a>(&'a self, kind: &'a str) -> impl Iterator<Item = &'a Finding> {
        self.findings.iter().filter(move |f| f.kind == kind)
    }
}

struct Auditor<'a> {
    m: &'a Machine,
    multi: bool,
    sysfs: bool,
    placements: Vec<Placement>,
    findings: Vec<Finding>,
}

/// Audits a machine.
pub fn audit(m: &Machine) -> Audit {
    let placements = m.pci.iter().map(|d| placement(m, d)).collect();
    let mut a = Auditor {
        m,
        multi: m.nodes.len() > 1,
        sysfs: m.source.is_sysfs(),
        placements,
        findings: Vec::new(),
    };
    a.import_notes();
    a.single_node();
    a.numa_attachment();
    a.links();
    a.interrupts();
    a.queues();
    a.multi_pf();
    a.io_locality();
    a.processes();
    a.not_audited();

    let mut findings = a.findings;
    // Most severe first; within a severity keep discovery order (device order).
    findings.sort_by_key(|f| std::cmp::Reverse(f.severity));

    let devices = m
        .pci
        .iter()
        .zip(&a.placements)
        .map(|(d, p)| device_report(m, d, *p, &findings))
        .collect();
    let nodes: Vec<NodeReport> = m
        .nodes
        .iter()
        .map(|n| NodeReport {
            id: n.id,
            cpus: n.cpus.to_list_string(),
            memory_bytes: n.memory_bytes,
            memory_only: m.is_memory_only(n.id),
            kind: n.kind.clone(),
            device: n.device.map(|b| b.to_string()),
        })
        .collect();
    let distances = m.numa_distances().and_then(|d| {
        m.nodes
            .iter()
            .map(|a| {
                m.nodes
                    .iter()
                    .map(|b| d.get(a.id as u64, b.id as u64))
                    .collect::<Option<Vec<f64>>>()
            })
            .collect::<Option<Vec<Vec<f64>>>>()
    });
    Audit {
        source: m.source.describe(),
        hostname: m.hostname.clone(),
        machine: MachineSummary {
            cpu: m.cpu_model.clone(),
            packages: m.packages.len(),
            cores: m.cores.len(),
            threads: m.cpus.len(),
        },
        numa_nodes: m.nodes.len(),
        nudma_possible: m.nodes.len() > 1,
        nodes,
        distances,
        devices,
        processes: m.processes.iter().map(|p| process_report(m, p)).collect(),
        findings,
        predicted_gain: PREDICTED_GAIN_STATUS,
    }
}

fn device_report(m: &Machine, d: &PciDevice, p: Placement, findings: &[Finding]) -> DeviceReport {
    let bdf = d.bdf.to_string();
    let below = below_capability(m, d);
    DeviceReport {
        bdf: bdf.clone(),
        class: d.class(),
        pci_class: d.pci_class_string(),
        numa_node: d.numa_node,
        inferred_numa_node: match p {
            Placement::Inferred(n, _) => Some(n),
            _ => None,
        },
        inferred_from: match p {
            Placement::Inferred(_, from) => Some(from),
            _ => None,
        },
        name: d.primary_name().map(str::to_string),
        os_devices: d.os_devices.iter().map(|o| o.name.clone()).collect(),
        model: d.model(),
        local_cpulist: d.local_cpus.as_ref().map(CpuSet::to_list_string),
        link: LinkReport {
            speed_gts: d.link.current_gts,
            width: d.link.current_width,
            gen: d.link.current_gts.and_then(gen_from_gts),
            max_speed_gts: d.link.max_gts,
            max_width: d.link.max_width,
            gbytes_per_s: d.link.gbytes_per_s,
            below_capability: below.map(|b| b.is_some()),
        },
        irqs: d.irqs.clone(),
        sriov_numvfs: d.sriov_numvfs,
        physfn: d.physfn.map(|b| b.to_string()),
        findings: findings
            .iter()
            .filter(|f| f.device.as_deref() == Some(bdf.as_str()))
            .cloned()
            .collect(),
    }
}

fn process_report(m: &Machine, p: &ProcessInfo) -> ProcessReport {
    let mut threads_per_node: BTreeMap<u32, usize> = BTreeMap::new();
    for t in &p.threads {
        if let Some(n) = t.last_cpu.and_then(|c| m.node_of_cpu(c)) {
            *threads_per_node.entry(n).or_default() += 1;
        }
    }
    ProcessReport {
        pid: p.pid,
        name: p.name.clone(),
        threads: p.threads.len(),
        threads_per_node,
        memory_bytes_per_node: p.memory_bytes_per_node.clone(),
        devices: p.devices.iter().map(|d| d.bdf.to_string()).collect(),
    }
}

/// The capability limit of a link and whether the current link is below it:
/// `None` = unknown, `Some(None)` = at capability, `Some(Some((gts, width)))` =
/// below, with the capability.
fn below_capability(m: &Machine, d: &PciDevice) -> Option<Option<(f64, u32)>> {
    let (cur_s, cur_w) = (d.link.current_gts?, d.link.current_width?);
    let parent = d.parent.map(|i| &m.pci[i]);
    let min_opt = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, y) => x.or(y),
    };
    let cap_s = min_opt(d.link.max_gts, parent.and_then(|p| p.link.max_gts))?;
    let cap_w = match (d.link.max_width, parent.and_then(|p| p.link.max_width)) {
        (Some(x), Some(y)) => x.min(y),
        (x, y) => x.or(y)?,
    };
    if cur_s + 0.01 < cap_s || cur_w < cap_w {
        Some(Some((cap_s, cap_w)))
    } else {
        Some(None)
    }
}

/// `numactl` binding both CPUs and memory to one node.
fn numactl(node: u32, what: &str) -> String {
    format!("numactl --cpunodebind={node} --membind={node} -- {what}")
}

impl<'a> Auditor<'a> {
    fn push(&mut self, f: Finding) {
        self.findings.push(f);
    }

    fn node_cpus(&self, node: u32) -> CpuSet {
        self.m
            .node(node)
            .map(|n| n.cpus.clone())
            .unwrap_or_default()
    }

    fn import_notes(&mut self) {
        for note in &self.m.notes {
            let severity = match note.level {
                NoteLevel::Info => Severity::Info,
                NoteLevel::Warning => Severity::Warning,
            };
            self.findings.push(Finding::new(
                severity,
                "import-problem",
                format!("{}: {}", note.path, note.message),
                "The importer reads only what the machine exposes; a missing or unreadable file narrows what the audit can check (run as root or on the machine itself for the full picture).".to_string(),
                Vec::new(),
            ));
        }
    }

    fn not_audited(&mut self) {
        if let Source::Hwloc { .. } = self.m.source {
            self.findings.push(Finding::new(
                Severity::Info,
                "not-audited",
                "interrupt affinity, XPS/RPS masks, link capability and processes are not audited from an hwloc XML".to_string(),
                "An hwloc export records the topology, not the kernel's run-time settings; run `nudma inspect` on the machine itself (or on a sysfs snapshot) for those checks.".to_string(),
                Vec::new(),
            ));
        }
    }
}

/// `1.5 GiB`-style sizes for reports.
pub fn human_bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{b} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn severity_order_and_parse() {
        assert!(Severity::Info < Severity::Warning && Severity::Warning < Severity::Error);
        assert_eq!("WARNING".parse::<Severity>().unwrap(), Severity::Warning);
        assert_eq!("warn".parse::<Severity>().unwrap(), Severity::Warning);
        assert!("fatal".parse::<Severity>().is_err());
    }

    #[test]
    fn sizes() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(3 << 30), "3.0 GiB");
    }
}
