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

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::str::FromStr;

use serde::Serialize;

use crate::cpuset::CpuSet;
use crate::model::{Machine, NoteLevel, PciDevice, ProcessInfo, Source};
use crate::pci::{gen_from_gts, Bdf, DeviceClass, OsDeviceKind};

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

/// Why the audit believes a device is on a node the machine did not state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum InferredFrom {
    /// `local_cpulist` lies within exactly one node.
    LocalCpulist,
    /// Other functions under the same host bridge all report this node.
    HostBridge,
}

/// Where a device is, as far as the audit can tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Placement {
    Reported(u32),
    Inferred(u32, InferredFrom),
    Unknown,
}

impl Placement {
    fn node(&self) -> Option<u32> {
        match self {
            Placement::Reported(n) | Placement::Inferred(n, _) => Some(*n),
            Placement::Unknown => None,
        }
    }
}

struct Auditor<'a> {
    m: &'a Machine,
    multi: bool,
    sysfs: bool,
    placements: Vec<Placement>,
    findings: Vec<Finding>,
}

/// The node a device is attached to, as far as can be told: `(node, inferred)`.
/// `inferred` means the machine did not state it and the audit concluded it from
/// `local_cpulist` or from sibling functions under the same host bridge.
pub fn device_placement(m: &Machine, d: &PciDevice) -> Option<(u32, bool)> {
    match placement(m, d) {
        Placement::Reported(n) => Some((n, false)),
        Placement::Inferred(n, _) => Some((n, true)),
        Placement::Unknown => None,
    }
}

fn placement(m: &Machine, d: &PciDevice) -> Placement {
    if let Some(n) = d.numa_node {
        return Placement::Reported(n);
    }
    if m.nodes.len() < 2 {
        return Placement::Unknown;
    }
    if let Some(n) = d.local_cpus.as_ref().and_then(|c| m.node_containing(c)) {
        return Placement::Inferred(n, InferredFrom::LocalCpulist);
    }
    // Everything behind one host bridge hangs off one root complex, hence one socket.
    let siblings: BTreeSet<u32> = m
        .pci
        .iter()
        .filter(|o| o.host_bridge == d.host_bridge && o.bdf != d.bdf)
        .filter_map(|o| o.numa_node)
        .collect();
    if siblings.len() == 1 {
        if let Some(n) = siblings.first() {
            return Placement::Inferred(*n, InferredFrom::HostBridge);
        }
    }
    Placement::Unknown
}

/// Groups of PCI functions (indexes into `m.pci`) that belong to one physical NIC
/// but sit on different NUMA nodes or host bridges: a multi-PF NIC. Functions are
/// grouped by PCIe serial number, or else by vendor, device and bus:device
/// appearing under different host bridges or PCI domains. Ordinary multi-port
/// cards (all functions behind one port) are not groups.
pub fn multi_pf_groups(m: &Machine) -> Vec<Vec<usize>> {
    let nics: Vec<usize> = m
        .pci
        .iter()
        .enumerate()
        .filter(|(_, d)| {
            matches!(d.class(), DeviceClass::Net | DeviceClass::Infiniband) && d.physfn.is_none()
        })
        .map(|(i, _)| i)
        .collect();
    let mut candidates: Vec<Vec<usize>> = Vec::new();
    let mut grouped: BTreeSet<usize> = BTreeSet::new();
    let mut by_serial: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for &i in &nics {
        if let Some(s) = m.pci[i].serial.as_deref() {
            by_serial.entry(s).or_default().push(i);
        }
    }
    for (_, g) in by_serial {
        if g.len() > 1 {
            grouped.extend(g.iter().copied());
            candidates.push(g);
        }
    }
    let mut by_slot: BTreeMap<(u16, u16, u8, u8), Vec<usize>> = BTreeMap::new();
    for &i in &nics {
        let d = &m.pci[i];
        if grouped.contains(&i) {
            continue;
        }
        if let (Some(v), Some(dev)) = (d.vendor_id, d.device_id) {
            by_slot
                .entry((v, dev, d.bdf.bus, d.bdf.device))
                .or_default()
                .push(i);
        }
    }
    candidates.extend(by_slot.into_values().filter(|g| {
        let places: BTreeSet<(&str, u32)> = g
            .iter()
            .map(|&i| (m.pci[i].host_bridge.as_str(), m.pci[i].bdf.domain))
            .collect();
        g.len() > 1 && places.len() > 1
    }));
    candidates
        .into_iter()
        .filter(|g| {
            let nodes: BTreeSet<Option<u32>> =
                g.iter().map(|&i| placement(m, &m.pci[i]).node()).collect();
            let hosts: BTreeSet<&str> = g.iter().map(|&i| m.pci[i].host_bridge.as_str()).collect();
            nodes.len() > 1 || hosts.len() > 1
        })
        .collect()
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

/// How much of a process's resident memory is off `node`, for a finding's text.
fn remote_memory_text(p: &ProcessInfo, node: u32) -> String {
    let total_mem: u64 = p.memory_bytes_per_node.values().sum();
    let on: u64 = p.memory_bytes_per_node.get(&node).copied().unwrap_or(0);
    if total_mem == 0 {
        "no resident memory was measured".to_string()
    } else {
        format!(
            "{:.0}% of its {} resident memory is on other nodes",
            (total_mem - on) as f64 / total_mem as f64 * 100.0,
            human_bytes(total_mem)
        )
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

fn speed_text(gts: f64) -> String {
    if gts.fract() == 0.0 {
        format!("{gts:.0} GT/s")
    } else {
        format!("{gts} GT/s")
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

    fn single_node(&mut self) {
        if self.multi {
            return;
        }
        let node = self.m.nodes.first();
        self.push(Finding::new(
            Severity::Info,
            "single-numa-node",
            format!(
                "1 NUMA node (CPUs {}): no NUDMA is possible on this machine",
                node.map(|n| n.cpus.to_list_string()).unwrap_or_default()
            ),
            "Every CPU, every memory page and every device share one node, so no DMA, doorbell or interrupt crosses a CPU interconnect; the NUMA findings below are harmless here. (A virtual machine may hide the host's nodes: audit the host for the real picture.)".to_string(),
            Vec::new(),
        ));
    }

    fn numa_attachment(&mut self) {
        let mut others_unknown: Vec<Bdf> = Vec::new();
        for (i, d) in self.m.pci.iter().enumerate() {
            let class = d.class();
            let placement = self.placements[i];
            if d.physfn.is_some() {
                // A VF has its PF's placement; reporting it again adds nothing.
                continue;
            }
            if d.numa_node.is_none() {
                if !class.does_bulk_io() {
                    others_unknown.push(d.bdf);
                    continue;
                }
                let f = self.unknown_node(d, placement);
                self.push(f);
            } else if let (Some(n), Some(local)) = (d.numa_node, &d.local_cpus) {
                if !self.multi || !class.does_bulk_io() || local.is_empty() {
                    continue;
                }
                let node_cpus = self.node_cpus(n);
                if local.is_subset(&node_cpus) {
                    continue;
                }
                let points_to = self.m.node_containing(local);
                let bdf = d.bdf;
                let mut why = format!(
                    "numa_node comes from the firmware's proximity domain (_PXM) of the device, local_cpulist from that of its root bus; they disagree, so drivers allocate the device's rings on node {n} while tools that read local_cpulist (irqbalance, hwloc, MPI) place its interrupts and threads elsewhere. "
                );
                let mut fix = vec![format!("lspci -vv -s {bdf}")];
                match points_to {
                    Some(p) => {
                        why.push_str(&format!("local_cpulist points to node {p}."));
                        fix.push("# find out which socket the slot is wired to (board manual, `lstopo --whole-io`), then tell the kernel:".to_string());
                        fix.push(format!("echo {p} > /sys/bus/pci/devices/{bdf}/numa_node   # or {n}, whichever is the wired one; writing it taints the kernel (FW_BUG)"));
                    }
                    None => {
                        why.push_str(&format!(
                            "local_cpulist ({}) spans several nodes: the firmware gives the bus no locality at all.",
                            local.to_list_string()
                        ));
                        fix.push("# update the BIOS/firmware so the root bus carries its proximity domain (_PXM)".to_string());
                        fix.push(numactl(n, &format!("<command using {}>", d.label())));
                    }
                }
                self.push(
                    Finding::new(
                        Severity::Warning,
                        "numa-node-inconsistent",
                        format!(
                            "{}: numa_node = {n} but local_cpulist = {} is not within node {n} (CPUs {})",
                            d.label(),
                            local.to_list_string(),
                            node_cpus.to_list_string()
                        ),
                        why,
                        fix,
                    )
                    .on(bdf),
                );
            }
        }
        if !others_unknown.is_empty() {
            let examples: Vec<String> = others_unknown
                .iter()
                .take(4)
                .map(|b| b.to_string())
                .collect();
            let more = others_unknown.len().saturating_sub(examples.len());
            let source_says = if self.sysfs {
                "report numa_node = -1"
            } else {
                "are not attached to a single NUMA node"
            };
            self.push(Finding::new(
                Severity::Info,
                "numa-node-unknown-other",
                format!(
                    "{} bridge, chipset and other non-I/O functions {source_says} ({}{})",
                    others_unknown.len(),
                    examples.join(", "),
                    if more > 0 { format!(", … {more} more") } else { String::new() }
                ),
                "Bridges, uncore and chipset functions do no bulk DMA, so their locality does not matter; it is listed because it shows whether the firmware describes locality at all.".to_string(),
                Vec::new(),
            ));
        }
    }

    fn unknown_node(&self, d: &PciDevice, placement: Placement) -> Finding {
        let bdf = d.bdf;
        let label = d.label();
        let what = if self.sysfs {
            match d.numa_node_raw {
                Some(v) => format!("{label}: numa_node = {v}: the machine does not say which node the device is attached to"),
                None => format!("{label}: no numa_node attribute: the machine does not say which node the device is attached to"),
            }
        } else {
            match &d.attached_nodes {
                Some(n) if !n.is_empty() => format!(
                    "{label}: hwloc attaches the device to nodes {} together, not to one node",
                    n.to_list_string()
                ),
                _ => format!("{label}: hwloc does not attach the device to a NUMA node"),
            }
        };
        if !self.multi {
            return Finding::new(
                Severity::Info,
                "numa-node-unknown",
                what,
                "With a single NUMA node there is nothing to choose: the device is local to every CPU and page. Linux reports -1 when the firmware gives no proximity information, which is normal here.".to_string(),
                Vec::new(),
            )
            .on(bdf);
        }
        let mut why = "Without a node, drivers allocate the device's descriptor rings and buffers on whatever node the probing thread ran, and irqbalance spreads its interrupts over all nodes: DMA, doorbells and interrupts may cross the interconnect on every I/O. The usual cause is firmware that gives the root bus no proximity domain (ACPI _PXM).".to_string();
        let mut fix = Vec::new();
        match placement {
            Placement::Inferred(n, from) => {
                match from {
                    InferredFrom::LocalCpulist => why.push_str(&format!(
                        " local_cpulist ({}) lies within node {n}, so the device is most likely attached to node {n}.",
                        d.local_cpus.as_ref().map(CpuSet::to_list_string).unwrap_or_default()
                    )),
                    InferredFrom::HostBridge => why.push_str(&format!(
                        " Other functions under the same host bridge ({}) report node {n}, so the device is most likely attached to node {n}.",
                        d.host_bridge
                    )),
                }
                fix.push(format!(
                    "echo {n} > /sys/bus/pci/devices/{bdf}/numa_node   # as root; taints the kernel (FW_BUG) until the firmware is fixed"
                ));
                fix.push(numactl(n, &format!("<command using {label}>")));
            }
            _ => {
                if let Some(l) = &d.local_cpus {
                    why.push_str(&format!(
                        " local_cpulist ({}) does not narrow it down either.",
                        l.to_list_string()
                    ));
                }
                fix.push(format!(
                    "# find the socket this slot is wired to: the board's block diagram, or `lspci -tv` for the root port of {bdf}"
                ));
                fix.push(format!(
                    "echo <node> > /sys/bus/pci/devices/{bdf}/numa_node   # as root; taints the kernel (FW_BUG)"
                ));
                fix.push(
                    "# and ask the vendor for firmware that reports _PXM for this root bus"
                        .to_string(),
                );
            }
        }
        Finding::new(Severity::Warning, "numa-node-unknown", what, why, fix).on(bdf)
    }

    fn links(&mut self) {
        for d in &self.m.pci {
            if d.physfn.is_some() {
                continue;
            }
            // Root ports share their link with the device below; check endpoints
            // and switch upstream ports only.
            let is_switch_up =
                d.is_bridge
                    && d.parent.is_some_and(|p| self.m.pci[p].is_bridge)
                    && self.m.pci.iter().any(|c| {
                        c.is_bridge && c.parent.is_some_and(|p| self.m.pci[p].bdf == d.bdf)
                    });
            if d.is_bridge && !is_switch_up {
                continue;
            }
            let Some(Some((cap_s, cap_w))) = below_capability(self.m, d) else {
                continue;
            };
            let (cur_s, cur_w) = (
                d.link.current_gts.unwrap_or(0.0),
                d.link.current_width.unwrap_or(0),
            );
            let share = (cur_s * cur_w as f64) / (cap_s * cap_w as f64) * 100.0;
            let bdf = d.bdf;
            let width_short = cur_w < cap_w;
            let mut why =
                format!("The link carries about {share:.0}% of the bandwidth both ends support. ");
            if width_short {
                why.push_str("Fewer lanes than both ends have usually means a slot wired narrower than it looks, a riser, or a bad contact.");
            } else {
                why.push_str("A lower speed with full width is often power management (ASPM or the driver lowers the speed while idle): check again under load; if it stays low, the slot, riser or BIOS setting limits it.");
            }
            self.findings.push(
                Finding::new(
                    Severity::Warning,
                    "link-degraded",
                    format!(
                        "{}: PCIe link runs at {} x{cur_w}, below its capability {} x{cap_w}",
                        d.label(),
                        speed_text(cur_s),
                        speed_text(cap_s)
                    ),
                    why,
                    vec![
                        format!("lspci -vv -s {bdf} | grep -E 'LnkCap|LnkSta'   # under load"),
                        format!(
                            "# reseat the card or move it to a slot wired x{cap_w} at {}; check the BIOS PCIe speed setting",
                            speed_text(cap_s)
                        ),
                    ],
                )
                .on(bdf),
            );
        }
        // A card that could do more than its slot: not degraded, but worth knowing.
        for d in &self.m.pci {
            let Some(parent) = d.parent.map(|p| &self.m.pci[p]) else {
                continue;
            };
            if d.is_bridge || d.physfn.is_some() {
                continue;
            }
            let (Some(dw), Some(pw)) = (d.link.max_width, parent.link.max_width) else {
                continue;
            };
            let (Some(ds), Some(ps)) = (d.link.max_gts, parent.link.max_gts) else {
                continue;
            };
            if dw > pw || ds > ps + 0.01 {
                self.findings.push(
                    Finding::new(
                        Severity::Info,
                        "link-slot-limited",
                        format!(
                            "{}: the device can do {} x{dw} but its slot ({}) only {} x{pw}",
                            d.label(),
                            speed_text(ds),
                            parent.bdf,
                            speed_text(ps)
                        ),
                        "The link runs at what the slot allows; the device's full bandwidth needs a wider or faster slot.".to_string(),
                        vec![format!("# move {} to a slot with {} x{dw}", d.label(), speed_text(ds))],
                    )
                    .on(d.bdf),
                );
            }
        }
    }

    fn interrupts(&mut self) {
        if !self.sysfs || !self.multi {
            return;
        }
        let irq_info: BTreeMap<u32, &crate::model::Irq> =
            self.m.irqs.iter().map(|i| (i.irq, i)).collect();
        for (i, d) in self.m.pci.iter().enumerate() {
            let Some(node) = self.placements[i].node() else {
                continue;
            };
            if d.irqs.is_empty() || !d.class().does_bulk_io() {
                continue;
            }
            let local = self.node_cpus(node);
            if local.is_empty() {
                continue;
            }
            let mut remote = Vec::new();
            let mut crossing = Vec::new();
            let (mut local_count, mut remote_count) = (0u64, 0u64);
            for irq in &d.irqs {
                let Some(info) = irq_info.get(irq) else {
                    continue;
                };
                for (cpu, c) in &info.counts {
                    if local.contains(*cpu) {
                        local_count += c;
                    } else {
                        remote_count += c;
                    }
                }
                let Some(allowed) = &info.affinity else {
                    continue;
                };
                let effective_remote = info
                    .effective
                    .as_ref()
                    .is_some_and(|e| !e.intersects(&local));
                if !allowed.intersects(&local) || effective_remote {
                    remote.push(*irq);
                } else if !allowed.is_subset(&local) {
                    crossing.push(*irq);
                }
            }
            if remote.is_empty() && crossing.is_empty() {
                continue;
            }
            let (severity, kind) = if remote.is_empty() {
                (Severity::Warning, "irq-affinity-crosses-nodes")
            } else {
                (Severity::Error, "irq-affinity-remote")
            };
            let offending: Vec<u32> = remote.iter().chain(&crossing).copied().collect();
            let label = d.label();
            let mut what = format!(
                "{label} on node {node}: {} of {} interrupts ",
                offending.len(),
                d.irqs.len()
            );
            if remote.is_empty() {
                what.push_str("may be delivered to CPUs of other nodes");
            } else {
                what.push_str(&format!(
                    "go to other nodes ({} only to remote CPUs)",
                    remote.len()
                ));
            }
            what.push_str(&format!(" (IRQ {})", irq_list(&offending)));
            let mut why = format!(
                "An interrupt handled on another node pulls the completion and the driver's ring state across the interconnect and wakes the consumer on the wrong node. Node {node} has CPUs {}.",
                local.to_list_string()
            );
            if local_count + remote_count > 0 {
                why.push_str(&format!(
                    " So far {remote_count} of {} interrupts of this device were handled off node {node}.",
                    local_count + remote_count
                ));
            }
            let mut fix = vec![
                "systemctl stop irqbalance   # or it rewrites the masks; a fixed numa_node lets it place them right".to_string(),
            ];
            let cpus: Vec<u32> = local.iter().collect();
            let all = d.irqs.clone();
            for (k, irq) in all.iter().enumerate() {
                let target = if all.len() == 1 {
                    local.to_list_string()
                } else {
                    cpus[k % cpus.len()].to_string()
                };
                fix.push(format!("echo {target} > /proc/irq/{irq}/smp_affinity_list"));
            }
            if d.class() == DeviceClass::Net && all.len() > cpus.len() {
                if let Some(ifname) = d.os_names(OsDeviceKind::Net).next() {
                    fix.push(format!(
                        "ethtool -L {ifname} combined {}   # one queue per CPU of node {node}",
                        cpus.len()
                    ));
                }
            }
            self.findings
                .push(Finding::new(severity, kind, what, why, fix).on(d.bdf));
        }
    }

    fn queues(&mut self) {
        if !self.sysfs || !self.multi {
            return;
        }
        for iface in &self.m.net_interfaces {
            let Some(bdf) = iface.bdf else {
                continue;
            };
            let Some(idx) = self.m.pci_index(bdf) else {
                continue;
            };
            let Some(node) = self.placements[idx].node() else {
                continue;
            };
            let local = self.node_cpus(node);
            if local.is_empty() {
                continue;
            }
            let cpus: Vec<u32> = local.iter().collect();
            for (kind, file, queues, prefix) in [
                ("xps-crosses-nodes", "xps_cpus", &iface.tx_queues, "tx"),
                ("rps-crosses-nodes", "rps_cpus", &iface.rx_queues, "rx"),
            ] {
                let bad: Vec<(u32, &CpuSet)> = queues
                    .iter()
                    .filter_map(|q| q.cpus.as_ref().map(|c| (q.index, c)))
                    .filter(|(_, c)| !c.is_empty() && !c.is_subset(&local))
                    .collect();
                if bad.is_empty() {
                    continue;
                }
                let name = &iface.name;
                let examples: Vec<String> = bad
                    .iter()
                    .take(3)
                    .map(|(i, c)| {
                        format!(
                            "{prefix}-{i} → CPUs {} (nodes {})",
                            c.to_list_string(),
                            self.m.nodes_of_cpus(c).to_list_string()
                        )
                    })
                    .collect();
                let what = format!(
                    "{name} ({bdf}, node {node}): {} of {} {} masks include CPUs of other nodes: {}{}",
                    bad.len(),
                    queues.len(),
                    file,
                    examples.join("; "),
                    if bad.len() > 3 { "; …" } else { "" }
                );
                let why = if prefix == "tx" {
                    format!("XPS picks the transmit queue by the sending CPU. CPUs outside node {node} that send through {name} write descriptors and payload into memory the NIC reads across the interconnect, and a queue shared by CPUs of several nodes bounces its cache lines between sockets. Run the senders on node {node} (CPUs {}) and give each queue local CPUs.", local.to_list_string())
                } else {
                    format!("RPS hands received packets to the CPUs in the mask. Packets DMA'd into node-{node} memory and processed on another node cross the interconnect twice (data and socket wake-up). Keep protocol processing on node {node} (CPUs {}).", local.to_list_string())
                };
                let mut fix = Vec::new();
                for (k, q) in queues.iter().enumerate() {
                    let mask = if prefix == "tx" {
                        CpuSet::single(cpus[k % cpus.len()]).to_mask_string()
                    } else {
                        local.to_mask_string()
                    };
                    fix.push(format!(
                        "echo {mask} > /sys/class/net/{name}/queues/{prefix}-{}/{file}",
                        q.index
                    ));
                }
                fix.push(numactl(node, &format!("<application using {name}>")));
                self.findings
                    .push(Finding::new(Severity::Warning, kind, what, why, fix).on(bdf));
            }
        }
    }

    fn multi_pf(&mut self) {
        let groups = multi_pf_groups(self.m);
        for g in groups {
            let nodes: BTreeSet<Option<u32>> =
                g.iter().map(|&i| self.placements[i].node()).collect();
            let first = &self.m.pci[g[0]];
            let parts: Vec<String> = g
                .iter()
                .map(|&i| {
                    let d = &self.m.pci[i];
                    match self.placements[i].node() {
                        Some(n) => format!("{} → node {n}", d.label()),
                        None => format!("{} → node unknown", d.label()),
                    }
                })
                .collect();
            let how = match &first.serial {
                Some(s)
                    if g.iter()
                        .all(|&i| self.m.pci[i].serial.as_deref() == Some(s)) =>
                {
                    format!("same serial number {s}")
                }
                _ => "same vendor, device and bus:device under different host bridges".to_string(),
            };
            let mut fix = Vec::new();
            for &i in &g {
                let d = &self.m.pci[i];
                if let Some(n) = self.placements[i].node() {
                    fix.push(numactl(
                        n,
                        &format!("<workload of node {n}, using {}>", d.label()),
                    ));
                }
            }
            fix.push("# bond/team the PFs and steer each flow to the PF of the node that runs its socket owner (IOctopus-style), instead of sending everything through one PF".to_string());
            self.findings.push(
                Finding::new(
                    Severity::Info,
                    "multi-pf-nic",
                    format!(
                        "one physical NIC ({}) with {} PCI functions on different {}: {}",
                        first.model().unwrap_or_else(|| "unknown model".to_string()),
                        g.len(),
                        if nodes.len() > 1 { "NUMA nodes" } else { "host bridges" },
                        parts.join(", ")
                    ),
                    format!("Recognised by {how}. A multi-PF (socket-direct, multi-host) NIC gives each socket a local PCIe function: traffic of threads on a node stays local only if it goes through that node's PF; traffic through the other PF crosses the interconnect on every DMA."),
                    fix,
                )
                .on(first.bdf),
            );
        }
    }

    fn io_locality(&mut self) {
        if !self.multi {
            return;
        }
        let mut per_node: BTreeMap<u32, Vec<String>> = BTreeMap::new();
        let mut unknown = Vec::new();
        let mut fix = Vec::new();
        for (i, d) in self.m.pci.iter().enumerate() {
            if !d.class().does_bulk_io() || d.physfn.is_some() {
                continue;
            }
            let label = d
                .primary_name()
                .map(|n| format!("{n} ({})", d.class()))
                .unwrap_or_else(|| format!("{} ({})", d.bdf, d.class()));
            match self.placements[i] {
                Placement::Reported(n) => per_node.entry(n).or_default().push(label),
                Placement::Inferred(n, _) => {
                    per_node.entry(n).or_default().push(format!("{label}?"))
                }
                Placement::Unknown => unknown.push(label),
            }
            if let Some(n) = self.placements[i].node() {
                match d.class() {
                    DeviceClass::Nvme => {
                        let dev = d
                            .os_names(OsDeviceKind::Block)
                            .next()
                            .map(|b| format!("/dev/{b}"))
                            .or_else(|| {
                                d.os_names(OsDeviceKind::NvmeController)
                                    .next()
                                    .map(|c| format!("/dev/{c}n1"))
                            })
                            .unwrap_or_else(|| "/dev/nvmeXn1".to_string());
                        fix.push(format!(
                            "fio --name=local --filename={dev} --direct=1 --rw=randread --bs=4k --iodepth=32 --numa_cpu_nodes={n} --numa_mem_policy=bind:{n}"
                        ));
                    }
                    DeviceClass::Net | DeviceClass::Infiniband | DeviceClass::Gpu => {
                        if let Some(name) = d.primary_name() {
                            fix.push(numactl(n, &format!("<application using {name}>")));
                        }
                    }
                    _ => {}
                }
            }
        }
        if per_node.is_empty() && unknown.is_empty() {
            return;
        }
        let mut what = String::from("I/O devices per node: ");
        let mut parts: Vec<String> = self
            .m
            .nodes
            .iter()
            .map(|n| match per_node.get(&n.id) {
                Some(v) => format!("node {}: {}", n.id, v.join(", ")),
                None => format!("node {}: none", n.id),
            })
            .collect();
        if !unknown.is_empty() {
            parts.push(format!("unknown node: {}", unknown.join(", ")));
        }
        what.push_str(&parts.join("; "));
        let empty: Vec<String> = self
            .m
            .nodes
            .iter()
            .filter(|n| !per_node.contains_key(&n.id) && !n.cpus.is_empty())
            .map(|n| n.id.to_string())
            .collect();
        let mut why = "A device's DMA, doorbells and interrupts stay on its node only when the threads and buffers that drive it live there too; from any other node every access crosses the CPU interconnect (NUDMA).".to_string();
        if !per_node.is_empty() && unknown.is_empty() && !empty.is_empty() {
            why.push_str(&format!(
                " Node(s) {} have no I/O devices: threads there reach every device remotely, so keep I/O-heavy work off them or use a multi-PF device.",
                empty.join(", ")
            ));
        }
        if per_node
            .values()
            .any(|v| v.iter().any(|l| l.ends_with('?')))
        {
            why.push_str(" `?` marks a node the audit inferred; the machine does not state it.");
        }
        if !unknown.is_empty() {
            why.push_str(" Devices on an unknown node cannot be placed well until their node is known (see their findings).");
        }
        fix.dedup();
        self.findings
            .push(Finding::new(Severity::Info, "io-locality", what, why, fix));
    }

    fn processes(&mut self) {
        let m = self.m;
        for p in &m.processes {
            self.process(p);
        }
    }

    /// The findings on one process given with `--pid`: tied to the devices it uses where
    /// it uses any on a known node, else its threads compared with its memory.
    fn process(&mut self, p: &ProcessInfo) {
        let who = match &p.name {
            Some(n) => format!("process {} ({n})", p.pid),
            None => format!("process {}", p.pid),
        };
        if p.threads.is_empty() && p.name.is_none() {
            self.findings.push(Finding::new(
                Severity::Warning,
                "process-unreadable",
                format!("{who}: cannot be read: {}", p.problems.join("; ")),
                "The process may have exited, or procfs hides it from this user.".to_string(),
                vec![format!("ps -o pid,psr,comm -L -p {}", p.pid)],
            ));
            return;
        }
        let thread_nodes: Vec<u32> = p
            .threads
            .iter()
            .filter_map(|t| t.last_cpu.and_then(|c| self.m.node_of_cpu(c)))
            .collect();
        if !p.problems.is_empty() {
            self.findings.push(Finding::new(
                Severity::Info,
                "process-partly-unreadable",
                format!("{who}: some files could not be read: {}", p.problems.join("; ")),
                "Without them the audit sees less of the process (numa_maps and fd need the same user or root).".to_string(),
                Vec::new(),
            ));
        }
        if !self.process_devices(p, &who, &thread_nodes) {
            self.process_placement(p, &who, &thread_nodes);
        }
    }

    /// A finding per device the process uses on a known node (on a multi-node machine):
    /// local, or how far its threads and memory are from it. Whether there was one.
    fn process_devices(&mut self, p: &ProcessInfo, who: &str, thread_nodes: &[u32]) -> bool {
        let total_mem: u64 = p.memory_bytes_per_node.values().sum();
        let mut reported_device = false;
        for u in &p.devices {
            let Some(idx) = self.m.pci_index(u.bdf) else {
                continue;
            };
            let Some(node) = self.placements[idx].node() else {
                continue;
            };
            if !self.multi {
                continue;
            }
            reported_device = true;
            let dev = &self.m.pci[idx];
            let remote_threads = thread_nodes.iter().filter(|&&n| n != node).count();
            let on: u64 = p.memory_bytes_per_node.get(&node).copied().unwrap_or(0);
            let remote_frac = if total_mem > 0 {
                (total_mem - on) as f64 / total_mem as f64
            } else {
                0.0
            };
            let thread_sev = if thread_nodes.is_empty() || remote_threads == 0 {
                None
            } else if remote_threads == thread_nodes.len() {
                Some(Severity::Error)
            } else {
                Some(Severity::Warning)
            };
            let mem_sev = if remote_frac >= 0.5 {
                Some(Severity::Error)
            } else if remote_frac >= 0.1 {
                Some(Severity::Warning)
            } else {
                None
            };
            let Some(severity) = thread_sev.max(mem_sev) else {
                self.findings.push(
                    Finding::new(
                        Severity::Info,
                        "process-placement",
                        format!(
                            "{who} uses {} on node {node} and runs there: its threads and memory are local",
                            dev.label()
                        ),
                        "Placement of the given process relative to the devices it uses.".to_string(),
                        Vec::new(),
                    )
                    .on(dev.bdf),
                );
                continue;
            };
            let local = self.node_cpus(node);
            let others: Vec<String> = p
                .memory_bytes_per_node
                .keys()
                .filter(|&&n| n != node)
                .map(|n| n.to_string())
                .collect();
            let mut fix = vec![format!(
                "taskset -a -p -c {} {}",
                local.to_list_string(),
                p.pid
            )];
            if !others.is_empty() {
                fix.push(format!(
                    "migratepages {} {} {node}",
                    p.pid,
                    others.join(",")
                ));
            }
            fix.push(format!(
                "# or restart it bound to the device's node: {}",
                numactl(node, "<command>")
            ));
            if dev.class() == DeviceClass::Nvme {
                fix.push(format!(
                    "# for fio: --numa_cpu_nodes={node} --numa_mem_policy=bind:{node}"
                ));
            }
            self.findings.push(
                Finding::new(
                    severity,
                    "process-device-remote",
                    format!(
                        "{who} uses {} on node {node} (via {}), but {remote_threads} of {} threads last ran on other nodes and {}",
                        dev.label(),
                        u.via,
                        thread_nodes.len(),
                        remote_memory_text(p, node)
                    ),
                    format!("Every I/O the process issues to {} then crosses the interconnect: descriptors and doorbells from remote CPUs, DMA into remote memory, completions and interrupts back across. Node {node} has CPUs {}.", dev.label(), local.to_list_string()),
                    fix,
                )
                .on(dev.bdf),
            );
        }
        reported_device
    }

    /// Without a device tie: the process's threads compared with its memory.
    fn process_placement(&mut self, p: &ProcessInfo, who: &str, thread_nodes: &[u32]) {
        let total_mem: u64 = p.memory_bytes_per_node.values().sum();
        let mut hist: BTreeMap<u32, usize> = BTreeMap::new();
        for n in thread_nodes {
            *hist.entry(*n).or_default() += 1;
        }
        let main_node = hist.iter().max_by_key(|(_, c)| **c).map(|(n, _)| *n);
        let threads_text = if hist.is_empty() {
            "no thread's last CPU known".to_string()
        } else {
            hist.iter()
                .map(|(n, c)| format!("{c} thread(s) last ran on node {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let memory_text = if p.memory_bytes_per_node.is_empty() {
            "memory per node unknown".to_string()
        } else {
            format!(
                "memory: {}",
                p.memory_bytes_per_node
                    .iter()
                    .map(|(n, b)| format!("{} on node {n}", human_bytes(*b)))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        let placement = format!("{threads_text}; {memory_text}");
        let device_note = if p.devices.is_empty() {
            " No device file or mapping ties it to a PCI device (sockets cannot be tied to a NIC from /proc): compare with the I/O map above."
        } else {
            ""
        };
        match main_node {
            Some(n)
                if self.multi && total_mem > 0 && {
                    let on = p.memory_bytes_per_node.get(&n).copied().unwrap_or(0);
                    (total_mem - on) as f64 / total_mem as f64 >= 0.5
                } =>
            {
                let others: Vec<String> = p
                    .memory_bytes_per_node
                    .keys()
                    .filter(|&&k| k != n)
                    .map(|k| k.to_string())
                    .collect();
                self.findings.push(Finding::new(
                    Severity::Warning,
                    "process-memory-remote",
                    format!("{who}: most threads run on node {n} but {}", remote_memory_text(p, n)),
                    format!("Loads and stores, and any DMA into those buffers, cross the interconnect.{device_note} ({placement})"),
                    vec![
                        format!("migratepages {} {} {n}", p.pid, others.join(",")),
                        format!("# or restart it bound: {}", numactl(n, "<command>")),
                    ],
                ));
            }
            _ => self.findings.push(Finding::new(
                Severity::Info,
                "process-placement",
                format!("{who}: {placement}"),
                format!("Placement of the given process.{device_note}"),
                Vec::new(),
            )),
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

fn irq_list(irqs: &[u32]) -> String {
    let set: CpuSet = irqs.iter().copied().collect();
    set.to_list_string()
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
