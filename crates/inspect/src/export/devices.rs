//! The host's PCIe tree: `[[host.switch]]` for each switch, `[[host.device]]` for each
//! device (multi-PF devices as one with several functions), and the device models they
//! are instances of. Links the machine does not report are recovered or assumed.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

use super::{assumed, quote, sanitize_name, Names};
use crate::audit::{device_placement, multi_pf_groups};
use crate::layout::Layout;
use crate::model::{Bar, Machine, PciDevice};
use crate::pci::{gen_width_candidates, DeviceClass};

/// Device models every exported device is an instance of: the timing layer needs the
/// memory behind BARs, the DMA requester its reads, a GPU its launch and poll costs.
pub(super) fn device_models_toml() -> String {
    let mut out = String::new();
    let common = [
        ("bar_gbps", "1.0", "a register-like BAR; nothing measured"),
        (
            "bar_latency_ns",
            "200.0",
            "a register access inside the device; nothing measured",
        ),
        ("bar_rcb_bytes", "64", "64 B read completions"),
        (
            "dma_max_reads",
            "32",
            "a typical device's outstanding reads; nothing measured",
        ),
        ("dma_mrrs_bytes", "512", "the MRRS Linux commonly programs"),
    ];
    for (name, extra) in [
        (DEVICE_MODEL, &[][..]),
        (
            GPU_MODEL,
            &[
                (
                    "launch_ns",
                    "5000.0",
                    "kernel launch overhead, as the built-in GPUs",
                ),
                (
                    "poll_ns",
                    "500.0",
                    "one poll-loop iteration, as the built-in GPUs",
                ),
            ][..],
        ),
    ] {
        let _ = writeln!(
            out,
            "[device_model.{name}]   # nothing measured: every value below is an assumption"
        );
        let _ = writeln!(out, "[device_model.{name}.timing]");
        for (key, value, why) in common.iter().chain(extra) {
            let _ = writeln!(out, "{}", assumed(key, value, why));
        }
        let _ = writeln!(out);
    }
    out
}

const DEVICE_MODEL: &str = "imported";
const GPU_MODEL: &str = "imported_gpu";

pub(super) struct PciExport<'a> {
    m: &'a Machine,
    /// Root complex name per NUMA node (a memory-only node: its package's).
    rc_of_node: BTreeMap<u32, String>,
    /// rc per scenario package, for devices hwloc attaches to several nodes.
    layout: &'a Layout,
    switch_up: BTreeSet<usize>,
    /// Switch names by upstream port, unique in the host (a hand-edited export may give
    /// two bridges one address).
    switch_names: BTreeMap<usize, String>,
    /// Names of the root complexes and switches, which devices must not take.
    reserved: Names,
    /// The PCIe generation of the platform's root ports and how it is known.
    platform_gen: Option<(u8, String)>,
}

impl<'a> PciExport<'a> {
    pub(super) fn new(m: &'a Machine, layout: &'a Layout) -> Self {
        let rc_of_node = m
            .nodes
            .iter()
            .filter_map(|n| Some((n.id, format!("rc{}", layout.package_of(n.id)?))))
            .collect();
        // A switch is an upstream port: a bridge below a bridge, with bridges below it.
        let switch_up = (0..m.pci.len())
            .filter(|&i| {
                let d = &m.pci[i];
                d.is_bridge
                    && d.parent.is_some_and(|p| m.pci[p].is_bridge)
                    && m.pci.iter().any(|c| c.is_bridge && c.parent == Some(i))
            })
            .collect::<BTreeSet<usize>>();
        let mut reserved = Names::default();
        for p in 0..layout.packages.len() {
            reserved.take(&format!("rc{p}"));
        }
        let switch_names = switch_up
            .iter()
            .map(|&i| (i, reserved.take(&format!("sw_{}", m.pci[i].bdf.ident()))))
            .collect();
        PciExport {
            m,
            rc_of_node,
            layout,
            switch_up,
            switch_names,
            reserved,
            platform_gen: platform_pcie_gen(m),
        }
    }

    fn switch_name(&self, i: usize) -> String {
        self.switch_names.get(&i).cloned().unwrap_or_default()
    }

    /// Nearest enclosing switch (upstream port index) of a function.
    fn enclosing_switch(&self, i: usize) -> Option<usize> {
        let mut cur = self.m.pci[i].parent;
        let mut steps = 0;
        while let Some(p) = cur {
            if self.switch_up.contains(&p) {
                return Some(p);
            }
            cur = self.m.pci[p].parent;
            steps += 1;
            if steps > 64 {
                break;
            }
        }
        None
    }

    /// The `parent` value and an assumption comment, if the node was unknown.
    fn parent_of(&self, i: usize) -> (String, Option<String>) {
        if let Some(s) = self.enclosing_switch(i) {
            return (self.switch_name(s), None);
        }
        let d = &self.m.pci[i];
        match device_placement(self.m, d) {
            Some((n, inferred)) => match self.rc_of_node.get(&n) {
                Some(rc) => {
                    let note = inferred
                        .then(|| format!("assumption: node {n} inferred from local_cpulist"));
                    (rc.clone(), note)
                }
                None => (
                    "rc0".to_string(),
                    Some(format!(
                        "assumption: the machine places it on node {n}, which it does not list"
                    )),
                ),
            },
            // With one package there is one root complex to hang it on.
            None if self.layout.packages.len() < 2 => ("rc0".to_string(), None),
            None => {
                // hwloc may attach a device to an object spanning several nodes (a
                // package with DRAM and HBM nodes): one package all the same.
                let packages: BTreeSet<usize> = d
                    .attached_nodes
                    .iter()
                    .flat_map(|ns| ns.iter())
                    .filter_map(|n| self.layout.package_of(n))
                    .collect();
                match (packages.len(), packages.first()) {
                    (1, Some(p)) => (format!("rc{p}"), None),
                    _ => (
                        "rc0".to_string(),
                        Some(
                            "assumption: the machine does not say which node this is on"
                                .to_string(),
                        ),
                    ),
                }
            }
        }
    }

    /// The `link` value and a comment: reported, recovered or assumed.
    pub(super) fn link_of(&self, d: &PciDevice, default_width: u32) -> (String, Option<String>) {
        let ((g, w), note) = self.link_guess(d, default_width);
        if g <= 5 {
            return (format!("{{ gen = {g}, width = {w} }}"), note);
        }
        // The fabric models Gen1–5: a faster link becomes the Gen5 link of equal bandwidth.
        let w5 = (w << (g - 5)).min(32);
        let why =
            format!("assumption: Gen{g} x{w} is modelled as Gen5 x{w5} (the fabric models Gen1-5)");
        (
            format!("{{ gen = 5, width = {w5} }}"),
            Some(note.map_or(why.clone(), |n| format!("{n}; {why}"))),
        )
    }

    fn link_guess(&self, d: &PciDevice, default_width: u32) -> ((u8, u32), Option<String>) {
        if let Some((g, w)) = d.link.reported_gen_width() {
            return ((g, w), None);
        }
        let Some(gbps) = d.link.gbytes_per_s else {
            return (
                (3, default_width),
                Some("assumption: link not reported".to_string()),
            );
        };
        let candidates = gen_width_candidates(gbps);
        match candidates.as_slice() {
            [] => (
                (3, default_width),
                Some(format!(
                    "assumption: hwloc's {gbps} GB/s matches no PCIe link"
                )),
            ),
            [(g, w)] => (
                (*g, *w),
                Some(format!(
                    "recovered from hwloc's {gbps} GB/s, the only match"
                )),
            ),
            many => {
                let names = many
                    .iter()
                    .map(|(g, w)| format!("Gen{g} x{w}"))
                    .collect::<Vec<_>>()
                    .join(", ");
                // The platform's generation, else the newest below it, else the width
                // nearest x8.
                let (g, w, why) = match &self.platform_gen {
                    Some((pg, how)) => {
                        let pick = many
                            .iter()
                            .filter(|(g, _)| g <= pg)
                            .max_by_key(|(g, _)| *g)
                            .or_else(|| many.iter().min_by_key(|(g, _)| *g))
                            .copied()
                            .unwrap_or(many[0]);
                        (
                            pick.0,
                            pick.1,
                            format!("this platform's PCIe generation is Gen{pg} ({how})"),
                        )
                    }
                    None => {
                        let pick = nearest_x8(many);
                        (
                            pick.0,
                            pick.1,
                            "the platform's PCIe generation is unknown; the width nearest x8"
                                .to_string(),
                        )
                    }
                };
                (
                    (g, w),
                    Some(format!(
                        "assumption: hwloc's {gbps} GB/s fits {names}; Gen{g} x{w} taken as {why}"
                    )),
                )
            }
        }
    }

    pub(super) fn switches_toml(&self) -> String {
        let mut out = String::new();
        for &i in &self.switch_up {
            let d = &self.m.pci[i];
            let (parent, pnote) = self.parent_of(i);
            let (link, lnote) = self.link_of(d, 16);
            let _ = writeln!(out, "[[host.switch]]");
            let _ = writeln!(out, "name = \"{}\"", self.switch_name(i));
            let _ = writeln!(
                out,
                "chip = \"generic\"   # assumption: switch model not identified"
            );
            let _ = writeln!(out, "parent = \"{parent}\"{}", comment(pnote));
            let _ = writeln!(out, "link = {link}{}", comment(lnote));
            let _ = writeln!(out);
        }
        out
    }

    pub(super) fn devices_toml(&self) -> (String, Vec<String>) {
        let m = self.m;
        let exported = |d: &PciDevice| -> bool {
            if d.physfn.is_some() || d.is_bridge {
                return false;
            }
            match d.class() {
                DeviceClass::Bridge => false,
                DeviceClass::Other => d.class_code.is_some_and(|c| matches!(c >> 16, 0x0b | 0x12)),
                _ => true,
            }
        };
        let groups = multi_pf_groups(m);
        let mut in_group: BTreeMap<usize, usize> = BTreeMap::new();
        for (gi, g) in groups.iter().enumerate() {
            for &i in g {
                in_group.insert(i, gi);
            }
        }
        let mut used = self.reserved.clone();
        let mut unique = |base: String| -> String { used.take(&base) };
        let mut out = String::new();
        let mut names = Vec::new();
        let mut done_groups: BTreeSet<usize> = BTreeSet::new();
        let mut skipped = 0usize;
        let mut memory_devices = Vec::new();
        for (i, d) in m.pci.iter().enumerate() {
            if !exported(d) {
                // A CXL memory expander's memory is not reached through PCIe BARs; it
                // becomes a NUMA node (and then a memory node here) once onlined.
                if d.class_code.is_some_and(|c| c >> 16 == 0x05) && !d.is_bridge {
                    memory_devices.push(d.label());
                    continue;
                }
                skipped += 1;
                continue;
            }
            let base = d
                .primary_name()
                .map(|n| sanitize_name(n, false))
                .unwrap_or_else(|| format!("dev_{}", d.bdf.ident()));
            let kind = match d.class() {
                DeviceClass::Net
                    if d.os_devices
                        .iter()
                        .any(|o| o.kind == crate::pci::OsDeviceKind::Openfabrics) =>
                {
                    "rnic"
                }
                DeviceClass::Net => "nic",
                DeviceClass::Infiniband => "rnic",
                DeviceClass::Nvme => "nvme",
                DeviceClass::Gpu => "gpu",
                _ => "other",
            };
            if let Some(&gi) = in_group.get(&i) {
                if !done_groups.insert(gi) {
                    continue;
                }
                let name = unique(base);
                names.push(name.clone());
                let _ = writeln!(out, "[[host.device]]");
                let _ = writeln!(out, "name = \"{name}\"");
                let _ = writeln!(out, "kind = \"{kind}\"");
                let _ = writeln!(
                    out,
                    "model = {}",
                    quote(&d.model().unwrap_or_else(|| "unknown".to_string()))
                );
                let mut notes = Vec::new();
                let funcs: Vec<String> = groups[gi]
                    .iter()
                    .map(|&fi| {
                        let f = &m.pci[fi];
                        let (parent, pn) = self.parent_of(fi);
                        let (link, ln) = self.link_of(f, 8);
                        notes.extend(pn.map(|n| format!("{}: {n}", f.bdf)));
                        notes.extend(ln.map(|n| format!("{}: {n}", f.bdf)));
                        format!(
                            "{{ parent = \"{parent}\", link = {link}, bdf = \"{}\" }}",
                            f.bdf
                        )
                    })
                    .collect();
                for n in notes {
                    let _ = writeln!(out, "# {n}");
                }
                let _ = writeln!(out, "functions = [{}]", funcs.join(", "));
                let _ = writeln!(out, "{}", bars_line(&d.bars));
                let _ = writeln!(out, "device_model = \"{}\"", model_of(kind));
                let _ = writeln!(out);
                continue;
            }
            let name = unique(base);
            names.push(name.clone());
            let (parent, pnote) = self.parent_of(i);
            let (link, lnote) = self.link_of(d, 8);
            let _ = writeln!(out, "[[host.device]]");
            let _ = writeln!(out, "name = \"{name}\"");
            let _ = writeln!(out, "kind = \"{kind}\"");
            let _ = writeln!(
                out,
                "model = {}",
                quote(&d.model().unwrap_or_else(|| "unknown".to_string()))
            );
            let _ = writeln!(out, "parent = \"{parent}\"{}", comment(pnote));
            let _ = writeln!(out, "link = {link}{}", comment(lnote));
            let _ = writeln!(out, "bdf = \"{}\"", d.bdf);
            let _ = writeln!(out, "{}", bars_line(&d.bars));
            let _ = writeln!(out, "device_model = \"{}\"", model_of(kind));
            let _ = writeln!(out);
        }
        if skipped > 0 {
            let _ = writeln!(
                out,
                "# {skipped} bridge, chipset and SR-IOV virtual functions are not exported as devices."
            );
        }
        if !memory_devices.is_empty() {
            let _ = writeln!(
                out,
                "# {} memory controller function(s) ({}) are not exported as devices: CXL memory is reached by loads and stores, not through BARs; once onlined as a NUMA node (daxctl, cxl create-region) it is exported as a memory node.",
                memory_devices.len(),
                memory_devices.join(", ")
            );
        }
        (out, names)
    }
}

fn model_of(kind: &str) -> &'static str {
    if kind == "gpu" {
        GPU_MODEL
    } else {
        DEVICE_MODEL
    }
}

/// Of links carrying the same bandwidth, the one whose width is nearest x8.
fn nearest_x8(many: &[(u8, u32)]) -> (u8, u32) {
    let from_x8 = |w: u32| (w as f64 / 8.0).log2().abs();
    many.iter()
        .copied()
        .min_by(|a, b| from_x8(a.1).total_cmp(&from_x8(b.1)))
        .unwrap_or((3, 8))
}

/// The PCIe generation of the platform's root ports: the fastest link the machine
/// reports with its rate (sysfs), else what the CPU model is documented to provide.
fn platform_pcie_gen(m: &Machine) -> Option<(u8, String)> {
    let reported = m
        .pci
        .iter()
        .filter_map(|d| d.link.max_gts.or(d.link.current_gts))
        .filter_map(crate::pci::gen_from_gts)
        .max();
    if let Some(g) = reported {
        return Some((g, "the fastest link rate the machine reports".to_string()));
    }
    let model = m.cpu_model.as_deref()?;
    pcie_gen_of_cpu(model).map(|g| (g, format!("documented for the CPU model {model:?}")))
}

/// The PCIe generation a CPU family's root ports run (vendors' datasheets): Westmere-era
/// Xeons (X5670, E7-4870) and Opterons Gen2; Xeon E5 and E7 v2–v4, Xeon Scalable 1st/2nd
/// generation (x1xx, x2xx; Cooper Lake's x3xxH) and EPYC 7xx1 Gen3; Ice Lake (x3xx),
/// EPYC 7xx2/7xx3 and POWER9 Gen4; Sapphire Rapids and later (x4xx…), EPYC 9xx4 and
/// later, POWER10 Gen5.
pub fn pcie_gen_of_cpu(model: &str) -> Option<u8> {
    let l = model.to_ascii_lowercase();
    let number_after = |key: &str| -> Option<String> {
        let rest = &l[l.find(key)? + key.len()..];
        let tok: String = rest
            .trim_start()
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect();
        (tok.len() >= 4 && tok[..4].chars().all(|c| c.is_ascii_digit())).then_some(tok)
    };
    if l.contains("epyc") {
        let n = number_after("epyc")?;
        return match n.as_bytes()[3] {
            b'1' => Some(3),
            b'2' | b'3' => Some(4),
            _ => Some(5),
        };
    }
    if l.contains("power10") {
        return Some(5);
    }
    if l.contains("power9") {
        return Some(4);
    }
    if l.contains("power8") {
        return Some(3);
    }
    if l.contains("opteron") {
        return Some(2);
    }
    if !l.contains("xeon") {
        return None;
    }
    if l.contains("e5-") {
        return Some(3);
    }
    if l.contains("e7-") {
        return Some(if l.contains(" v") { 3 } else { 2 });
    }
    for tier in ["platinum", "gold", "silver", "bronze"] {
        if let Some(n) = number_after(tier) {
            return match n.as_bytes()[1] {
                b'1' | b'2' => Some(3),
                b'3' if n.ends_with('h') || n.ends_with("hl") => Some(3),
                b'3' => Some(4),
                _ => Some(5),
            };
        }
    }
    if l.contains("xeon max") {
        return Some(5);
    }
    // Nehalem/Westmere: X5670, E5620, L5640 (no dash), through an IOH.
    let westmere = l.split_whitespace().any(|t| {
        let b = t.as_bytes();
        b.len() == 5
            && matches!(b[0], b'x' | b'e' | b'l' | b'w')
            && b[1..].iter().all(u8::is_ascii_digit)
            && b[1] == b'5'
    });
    westmere.then_some(2)
}

fn comment(note: Option<String>) -> String {
    note.map(|n| format!("   # {n}")).unwrap_or_default()
}

/// `bars = …`: the reported BARs the fabric can hold, else one assumed BAR so that
/// CPUs and peers can address the device (hwloc does not report BARs).
fn bars_line(bars: &[Bar]) -> String {
    // The fabric's rules (crates/fabric/src/scenario/host/devices.rs): six 32-bit slots,
    // a 64-bit BAR takes two; a size is a power of two of at least 16 bytes, at most
    // 2 GiB for a 32-bit BAR.
    let mut slots = 0;
    let (mut kept, mut left_out) = (Vec::new(), Vec::new());
    for b in bars {
        let need = if b.is_64bit { 2 } else { 1 };
        let fits = b.size.is_power_of_two()
            && b.size >= 16
            && (b.is_64bit || b.size <= 1 << 31)
            && slots + need <= 6;
        if fits {
            slots += need;
            kept.push(if b.is_64bit {
                format!("{{ size = {} }}", b.size)
            } else {
                format!("{{ size = {}, bits = 32 }}", b.size)
            });
        } else {
            left_out.push(b.size.to_string());
        }
    }
    let note = if left_out.is_empty() {
        String::new()
    } else {
        format!(
            "   # assumption: BAR(s) of {} bytes left out: the fabric takes six 32-bit slots a function (a 64-bit BAR takes two) and sizes that are powers of two of at least 16 bytes (at most 2 GiB when 32-bit)",
            left_out.join(", ")
        )
    };
    if kept.is_empty() {
        let why = if bars.is_empty() {
            "BARs not reported"
        } else {
            "no reported BAR fits the fabric"
        };
        return format!(
            "bars = [{{ size = {ASSUMED_BAR_BYTES} }}]   # assumption: {why}; one 1 MiB BAR so that CPUs and peers can address the device{}",
            note.replacen("   # assumption:", ";", 1)
        );
    }
    format!("bars = [{}]{note}", kept.join(", "))
}

/// The BAR a device gets when the machine reports none.
const ASSUMED_BAR_BYTES: u64 = 1 << 20;
