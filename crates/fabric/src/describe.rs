//! Presentation of fabric objects for people and programs: step and target names, the
//! topology as a text tree, Graphviz DOT and JSON, and path/fault JSON for `topo path`.

use std::fmt::Write as _;

use serde_json::{json, Value};

use crate::path::{Fault, FaultKind, Path, Step, Target};
use crate::topology::*;
use crate::units::fmt_size;
use crate::Fabric;

fn hex(x: u64) -> String {
    format!("{x:#x}")
}

fn node_kind_label(t: &Topology, n: &Node) -> String {
    match n.kind {
        NodeKind::RootComplex { .. } => "root complex".into(),
        NodeKind::Switch {
            chip,
            adapter: Some(a),
        } => format!(
            "{} NTB adapter ({})",
            t.ntbs[a.index()].adapter.name.to_uppercase(),
            t.chip(chip).name.to_uppercase()
        ),
        NodeKind::Switch {
            chip,
            adapter: None,
        } => format!("switch {}", t.chip(chip).name.to_uppercase()),
        NodeKind::Function { device, pf } => {
            let d = &t.devices[device.index()];
            let kind = format!("{:?}", d.kind).to_lowercase();
            if d.functions.len() > 1 {
                format!("{kind} PF{pf} {}", d.model)
            } else {
                format!("{kind} {}", d.model)
            }
        }
        NodeKind::NtbFunction { ntb } => {
            let n = &t.ntbs[ntb.index()];
            format!(
                "NTB function, {} LUT windows of {}",
                n.lut_windows,
                fmt_size(n.window_size)
            )
        }
    }
}

/// A human name for one step.
pub fn step_name(t: &Topology, s: &Step) -> String {
    match *s {
        Step::Link { node, down } => {
            let n = t.node(node);
            let p = n.parent.map(|p| t.node_label(p)).unwrap_or_default();
            let arrow = if down { "↓" } else { "↑" };
            format!(
                "{p} {arrow} {} ({})",
                t.node_label(node),
                n.link.map(|l| l.to_string()).unwrap_or_default()
            )
        }
        Step::Switch { node } => {
            let n = t.node(node);
            let NodeKind::Switch { chip, .. } = n.kind else {
                unreachable!()
            };
            format!(
                "{} ({}, {} ns)",
                t.node_label(node),
                t.chip(chip).name.to_uppercase(),
                t.chip(chip).latency_ns
            )
        }
        Step::Root { node } => t.node_label(node),
        Step::Interconnect { host, hop } => {
            let p = t.platform_of(host);
            let l = &p.interconnect[hop.link as usize];
            format!(
                "{}: {} → {} ({})",
                t.host(host).name,
                p.vertex_name(hop.from),
                p.vertex_name(hop.to),
                l.kind.to_uppercase()
            )
        }
        Step::Iommu {
            host,
            rid,
            iova,
            phys,
        } => format!(
            "{} IOMMU: {rid} IOVA {iova:#x} → {phys:#x}",
            t.host(host).name
        ),
        Step::NtbWindow {
            ntb,
            window,
            from,
            to_host,
            to,
        } => format!(
            "{} address-LUT window {window}: {from:#x} → {} {to:#x}",
            t.cable_end_label(CableEnd::Ntb(ntb)),
            t.host(to_host).name
        ),
        Step::RidLut {
            ntb,
            index,
            from,
            to,
        } => format!(
            "{} requester-ID LUT entry {index}: {from} → {to}",
            t.cable_end_label(CableEnd::Ntb(ntb))
        ),
        Step::Cable { cable } => {
            let c = &t.cables[cable.index()];
            format!(
                "cable {} ↔ {} ({})",
                t.cable_end_label(c.ends[0]),
                t.cable_end_label(c.ends[1]),
                c.link
            )
        }
        Step::ClusterSwitch { switch } => {
            let s = &t.cluster_switches[switch.index()];
            format!(
                "{} ({}, {} ns)",
                s.name,
                t.chip(s.chip).name.to_uppercase(),
                t.chip(s.chip).latency_ns
            )
        }
    }
}

/// One step as JSON: `kind`, `name`, and the fields a program needs.
pub fn step_json(t: &Topology, s: &Step) -> Value {
    let mut v = json!({ "kind": s.kind(), "name": step_name(t, s) });
    let extra = match *s {
        Step::Link { node, down } => {
            let l = t.node(node).link.expect("link steps have links");
            json!({ "gen": l.gen, "width": l.width, "cable": l.cable, "direction": if down { "down" } else { "up" } })
        }
        Step::Switch { node } => {
            let NodeKind::Switch { chip, adapter } = t.node(node).kind else {
                unreachable!()
            };
            json!({ "chip": t.chip(chip).name, "latency_ns": t.chip(chip).latency_ns, "adapter": adapter.map(|a| t.ntbs[a.index()].adapter.name.clone()) })
        }
        Step::Root { node } => json!({ "host": t.host(t.node(node).host).name }),
        Step::Interconnect { host, hop } => {
            let p = t.platform_of(host);
            json!({ "from": p.vertex_name(hop.from), "to": p.vertex_name(hop.to), "link_kind": p.interconnect[hop.link as usize].kind })
        }
        Step::Iommu {
            rid, iova, phys, ..
        } => json!({ "requester": rid.to_string(), "iova": iova, "phys": phys }),
        Step::NtbWindow {
            window,
            from,
            to_host,
            to,
            ..
        } => json!({ "window": window, "from": from, "to_host": t.host(to_host).name, "to": to }),
        Step::RidLut {
            index, from, to, ..
        } => json!({ "index": index, "from": from.to_string(), "to": to.to_string() }),
        Step::Cable { cable } => {
            let l = t.cables[cable.index()].link;
            json!({ "gen": l.gen, "width": l.width })
        }
        Step::ClusterSwitch { switch } => {
            let c = t.chip(t.cluster_switches[switch.index()].chip);
            json!({ "chip": c.name, "latency_ns": c.latency_ns })
        }
    };
    if let (Value::Object(m), Value::Object(e)) = (&mut v, extra) {
        m.extend(e);
    }
    v
}

pub fn target_name(t: &Topology, target: &Target) -> String {
    match *target {
        Target::Ram {
            host,
            node,
            addr,
            offset,
        } => format!(
            "RAM of {} node {node} at {addr:#x} (node offset {offset:#x})",
            t.host(host).name
        ),
        Target::Bar { node, bar, offset } => {
            format!("{} BAR{bar} + {offset:#x}", t.node_label(node))
        }
        Target::Interrupt { host, apic, addr } => {
            format!(
                "interrupt of {} to APIC {apic} (MSI address {addr:#x})",
                t.host(host).name
            )
        }
        Target::Multicast { group, offset } => {
            format!("multicast group {group} + {offset:#x} (replicated to its members)")
        }
    }
}

pub fn target_json(t: &Topology, target: &Target) -> Value {
    match *target {
        Target::Ram {
            host,
            node,
            addr,
            offset,
        } => {
            json!({ "kind": "ram", "host": t.host(host).name, "node": node, "address": addr, "offset": offset, "name": target_name(t, target) })
        }
        Target::Bar { node, bar, offset } => {
            json!({ "kind": "bar", "endpoint": t.node_label(node), "bar": bar, "offset": offset, "name": target_name(t, target) })
        }
        Target::Interrupt { host, apic, addr } => {
            json!({ "kind": "interrupt", "host": t.host(host).name, "apic": apic, "address": addr, "name": target_name(t, target) })
        }
        Target::Multicast { group, offset } => {
            json!({ "kind": "multicast", "group": group, "offset": offset, "name": target_name(t, target) })
        }
    }
}

pub fn fault_text(t: &Topology, f: &Fault) -> String {
    format!(
        "{} — {:?} by {} at {:#x} in host {}",
        fault_kind_text(t, f.kind),
        f.access,
        f.requester,
        f.addr,
        t.host(f.host).name
    )
}

/// What a fault kind says, in the fabric's words: a dead link or host is named
/// ("link down: cable borrower.ntb — lender.ntb", "host `lender` is down").
pub fn fault_kind_text(t: &Topology, k: FaultKind) -> String {
    match k {
        FaultKind::LinkDown { cable } => format!("link down: {}", cable_text(t, cable)),
        FaultKind::HostDown { host } => format!("host `{}` is down", t.host(host).name),
        FaultKind::MulticastRead { group } => format!("{} (group {group})", k.describe()),
        _ => k.describe().to_string(),
    }
}

/// A cable by its two ends: "cable borrower.ntb — lender.ntb".
pub fn cable_text(t: &Topology, cable: CableId) -> String {
    let c = &t.cables[cable.index()];
    format!(
        "cable {} — {}",
        t.cable_end_label(c.ends[0]),
        t.cable_end_label(c.ends[1])
    )
}

pub fn fault_json(t: &Topology, f: &Fault) -> Value {
    json!({ "kind": f.kind.name(), "what": fault_kind_text(t, f.kind), "host": t.host(f.host).name, "requester": f.requester.to_string(), "address": f.addr, "access": format!("{:?}", f.access).to_lowercase() })
}

pub fn path_json(t: &Topology, p: &Path, r: &Result<Target, Fault>) -> Value {
    json!({
        "hops": p.hops(),
        "roots": p.roots(),
        "steps": p.steps.iter().map(|s| step_json(t, s)).collect::<Vec<_>>(),
        "target": r.as_ref().ok().map(|x| target_json(t, x)),
        "fault": r.as_ref().err().map(|f| fault_json(t, f)),
    })
}

fn platform_line(p: &Platform) -> String {
    format!(
        "{}: {} package(s) × {} cores{}, {} NUMA node(s) × {} DRAM{}, LLC {} ({} ways, DDIO {})",
        p.name,
        p.packages,
        p.cores_per_package,
        if p.cpu.is_empty() {
            String::new()
        } else {
            format!(" [{}]", p.cpu)
        },
        p.cpu_nodes(),
        fmt_size(p.dram_bytes_per_node),
        if p.memory_nodes.is_empty() {
            String::new()
        } else {
            format!(" + {} memory-only node(s)", p.memory_nodes.len())
        },
        fmt_size(p.llc_bytes),
        p.llc_ways,
        p.ddio_ways
    ) + &base_text(p)
}

/// "; r730 with clock_ghz, timing.dram_gbps (46 keys from r730)", for a platform written
/// as a copy of another.
fn base_text(p: &Platform) -> String {
    match &p.base {
        Some(b) => format!(
            "; {} with {} ({} keys from {})",
            b.name,
            b.given.join(", "),
            b.inherited.len(),
            b.name
        ),
        None => String::new(),
    }
}

fn window_text(n: &Node) -> String {
    let mut s = String::new();
    if let Some((a, b)) = n.window32 {
        let _ = write!(s, " mem[{a:#x}-{:#x}]", b - 1);
    }
    if let Some((a, b)) = n.window64 {
        let _ = write!(s, " pref64[{a:#x}-{:#x}]", b - 1);
    }
    s
}

/// The topology as an indented tree.
pub fn topology_text(f: &Fabric) -> String {
    let t = &f.topo;
    let mut out = String::new();
    let _ = writeln!(out, "scenario {} — {}", t.name, t.description);
    for (hi, h) in t.hosts.iter().enumerate() {
        let p = t.platform_of(HostId::from_index(hi));
        let _ = writeln!(
            out,
            "\nhost {} (IOMMU {})\n  platform {}",
            h.name,
            if h.iommu { "on" } else { "off" },
            platform_line(p)
        );
        for l in &p.interconnect {
            let _ = writeln!(
                out,
                "  interconnect {} ↔ {} {}{}{}",
                p.vertex_name(l.a),
                p.vertex_name(l.b),
                l.kind.to_uppercase(),
                l.gts
                    .map(|g| format!(" {g} GT/s × {}", l.count))
                    .unwrap_or_default(),
                p.timing
                    .as_ref()
                    .map(|t| format!(", {} GB/s per direction", l.gbps(t.interconnect_gbps)))
                    .unwrap_or_default()
            );
        }
        for r in &h.regions {
            if let Owner::Ram { node, .. } = r.owner {
                let _ = writeln!(
                    out,
                    "  RAM node{node} [{:#x}-{:#x}] {}{}",
                    r.start,
                    r.end - 1,
                    fmt_size(r.end - r.start),
                    p.memory_node(node)
                        .map(|m| format!(" ({}, memory only, served by pkg{})", m.kind, m.package))
                        .unwrap_or_default()
                );
            }
        }
        for &rc in &h.roots {
            tree(t, rc, "  ", true, true, &mut out);
        }
    }
    if !t.cables.is_empty() {
        let _ = writeln!(out, "\ncables");
        for c in &t.cables {
            let _ = writeln!(
                out,
                "  {} ↔ {} ({})",
                t.cable_end_label(c.ends[0]),
                t.cable_end_label(c.ends[1]),
                c.link
            );
        }
    }
    for s in &t.cluster_switches {
        let _ = writeln!(
            out,
            "cluster switch {} ({}), {} cables",
            s.name,
            t.chip(s.chip).name.to_uppercase(),
            s.cables.len()
        );
    }
    lending_text(t, &mut out);
    out
}

/// The scenario's `[[lend]]` and `[[borrow]]` declarations (carried out when a run starts).
fn lending_text(t: &Topology, out: &mut String) {
    if t.lends.is_empty() && t.borrows.is_empty() {
        return;
    }
    let _ = writeln!(out, "\nlending (set up when a run starts)");
    for l in &t.lends {
        let _ = writeln!(
            out,
            "  {} lends {} ({})",
            t.host(l.host).name,
            l.device,
            t.node(l.function).rid
        );
    }
    for b in &t.borrows {
        let _ = writeln!(
            out,
            "  {} borrows {} as {} ({})",
            t.host(b.host).name,
            b.device,
            b.name,
            if b.exclusive { "exclusive" } else { "shared" }
        );
    }
}

fn tree(t: &Topology, id: PcieNodeId, prefix: &str, last: bool, top: bool, out: &mut String) {
    let n = t.node(id);
    let branch = if top {
        ""
    } else if last {
        "└─ "
    } else {
        "├─ "
    };
    let mut bars = String::new();
    for b in &n.bars {
        let _ = write!(bars, " BAR{}={}@{:#x}", b.index, fmt_size(b.size), b.addr);
    }
    let link = n.link.map(|l| format!(" [{l}]")).unwrap_or_default();
    let windows = if n.link.is_some() {
        window_text(n)
    } else {
        String::new()
    };
    let _ = writeln!(
        out,
        "{prefix}{branch}{} {} — {}{link}{}{}",
        n.name,
        n.rid,
        node_kind_label(t, n),
        bars,
        windows
    );
    let child_prefix = if top {
        format!("{prefix}  ")
    } else {
        format!("{prefix}{}", if last { "   " } else { "│  " })
    };
    for (i, &c) in n.children.iter().enumerate() {
        tree(t, c, &child_prefix, i + 1 == n.children.len(), false, out);
    }
}

fn dot_id(t: &Topology, id: PcieNodeId) -> String {
    format!("\"{}\"", t.node_label(id))
}

/// The topology as a Graphviz graph: one cluster per host, cables and cluster switches
/// between them.
pub fn topology_dot(f: &Fabric) -> String {
    let t = &f.topo;
    let mut o = String::new();
    // Big clusters: lay out left to right and draw a host that holds nothing but NTB
    // adapters as one small node, so the switch tree stays readable.
    let big = t.hosts.len() > 8;
    let _ = writeln!(o, "graph \"{}\" {{\n  graph [rankdir={}, fontname=\"Helvetica\", label=\"{}\", labelloc=t, newrank=true{}];\n  node [fontname=\"Helvetica\", fontsize=10];\n  edge [fontname=\"Helvetica\", fontsize=8];", t.name, if big { "LR" } else { "TB" }, t.description.replace('"', "'"), if big { ", ranksep=1.5, nodesep=0.05" } else { "" });
    for (hi, h) in t.hosts.iter().enumerate() {
        let only_ntbs = h.nodes.iter().all(|&id| {
            matches!(
                t.node(id).kind,
                NodeKind::RootComplex { .. }
                    | NodeKind::Switch {
                        adapter: Some(_),
                        ..
                    }
                    | NodeKind::NtbFunction { .. }
            )
        });
        if big && only_ntbs {
            for &n in &h.ntbs {
                let ntb = &t.ntbs[n.index()];
                let _ = writeln!(o, "  {} [shape=box, style=\"rounded,filled\", fillcolor=gold, fontsize=8, height=0.2, label=\"{} ({})\"];", dot_id(t, ntb.chip_node), h.name, ntb.adapter.name.to_uppercase());
            }
            continue;
        }
        let _ = writeln!(
            o,
            "  subgraph \"cluster_{}\" {{\n    label=\"{}{}\"; style=rounded; color=gray50;",
            h.name,
            h.name,
            if h.iommu { " (IOMMU on)" } else { "" }
        );
        let p = t.platform_of(HostId::from_index(hi));
        for v in 0..p.uncore_vertices() {
            let _ = writeln!(
                o,
                "    \"{}.{}\" [shape=box3d, label=\"{}\"];",
                h.name,
                p.vertex_name(v),
                p.vertex_name(v)
            );
        }
        for l in &p.interconnect {
            let _ = writeln!(
                o,
                "    \"{}.{}\" -- \"{}.{}\" [color=firebrick, penwidth=2, label=\"{}\"];",
                h.name,
                p.vertex_name(l.a),
                h.name,
                p.vertex_name(l.b),
                l.kind.to_uppercase()
            );
        }
        for &id in &h.nodes {
            let n = t.node(id);
            let (shape, color) = match n.kind {
                NodeKind::RootComplex { .. } => ("box", "lightsteelblue"),
                NodeKind::Switch {
                    adapter: Some(_), ..
                } => ("hexagon", "gold"),
                NodeKind::Switch { .. } => ("diamond", "khaki"),
                NodeKind::Function { .. } => ("ellipse", "palegreen"),
                NodeKind::NtbFunction { .. } => continue,
            };
            let _ = writeln!(
                o,
                "    {} [shape={shape}, style=filled, fillcolor={color}, label=\"{}\\n{}\"];",
                dot_id(t, id),
                n.name,
                node_kind_label(t, n).replace('"', "'")
            );
            if let NodeKind::RootComplex { vertex } = n.kind {
                if p.iohs.is_empty() {
                    let _ = writeln!(
                        o,
                        "    \"{}.{}\" -- {} [style=dotted];",
                        h.name,
                        p.vertex_name(vertex),
                        dot_id(t, id)
                    );
                }
            }
            if let (Some(parent), Some(l)) = (n.parent, n.link) {
                let _ = writeln!(
                    o,
                    "    {} -- {} [label=\"{}\"{}];",
                    dot_id(t, parent),
                    dot_id(t, id),
                    l,
                    if l.cable { ", style=dashed" } else { "" }
                );
            }
        }
        let _ = writeln!(o, "  }}");
    }
    for s in &t.cluster_switches {
        let _ = writeln!(
            o,
            "  \"{}\" [shape=octagon, style=filled, fillcolor=orange, label=\"{}\\n{}\"];",
            s.name,
            s.name,
            t.chip(s.chip).name.to_uppercase()
        );
    }
    for c in &t.cables {
        let end = |e: CableEnd| match e {
            CableEnd::Ntb(n) => dot_id(t, t.ntbs[n.index()].chip_node),
            CableEnd::ClusterSwitch(s) => format!("\"{}\"", t.cluster_switches[s.index()].name),
        };
        let _ = writeln!(
            o,
            "  {} -- {} [penwidth=2, color=darkorange, label=\"{}\"];",
            end(c.ends[0]),
            end(c.ends[1]),
            c.link
        );
    }
    o.push_str("}\n");
    o
}

/// The topology as JSON.
pub fn topology_json(f: &Fabric) -> Value {
    let t = &f.topo;
    let hosts: Vec<Value> = t.hosts.iter().enumerate().map(|(hi, h)| {
        let p = t.platform_of(HostId::from_index(hi));
        let nodes: Vec<Value> = h.nodes.iter().map(|&id| {
            let n = t.node(id);
            let kind = match n.kind {
                NodeKind::RootComplex { .. } => "root_complex",
                NodeKind::Switch { adapter: Some(_), .. } => "ntb_adapter",
                NodeKind::Switch { .. } => "switch",
                NodeKind::Function { .. } => "function",
                NodeKind::NtbFunction { .. } => "ntb_function",
            };
            json!({
                "name": n.name, "kind": kind, "description": node_kind_label(t, n), "rid": n.rid.to_string(),
                "parent": n.parent.map(|p| t.node(p).name.clone()),
                "link": n.link.map(|l| json!({"gen": l.gen, "width": l.width, "cable": l.cable})),
                "bars": n.bars.iter().map(|b| json!({"index": b.index, "size": b.size, "address": b.addr, "bits": if b.bits64 {64} else {32}, "prefetchable": b.prefetchable})).collect::<Vec<_>>(),
                "window32": n.window32.map(|(a, b)| [hex(a), hex(b)]),
                "window64": n.window64.map(|(a, b)| [hex(a), hex(b)]),
                "dma_mask_bits": n.dma_mask_bits,
            })
        }).collect();
        json!({
            "name": h.name, "platform": p.name, "base": p.base.as_ref().map(|b| json!({"name": b.name, "given": b.given, "inherited": b.inherited})), "packages": p.packages, "numa_nodes": p.numa_nodes(), "iommu": h.iommu,
            "memory_nodes": p.memory_nodes.iter().enumerate().map(|(i, m)| json!({"node": p.cpu_nodes() + i as u32, "package": m.package, "kind": m.kind, "bytes": m.bytes, "gbps": m.gbps.as_ref().map(|g| g.0)})).collect::<Vec<_>>(),
            "ram": h.regions.iter().filter_map(|r| match r.owner { Owner::Ram { node, .. } => Some(json!({"node": node, "start": r.start, "end": r.end})), _ => None }).collect::<Vec<_>>(),
            "nodes": nodes,
        })
    }).collect();
    json!({
        "name": t.name,
        "description": t.description,
        "hosts": hosts,
        "cluster_switches": t.cluster_switches.iter().map(|s| json!({"name": s.name, "chip": t.chip(s.chip).name})).collect::<Vec<_>>(),
        "cables": t.cables.iter().map(|c| json!({"ends": [t.cable_end_label(c.ends[0]), t.cable_end_label(c.ends[1])], "gen": c.link.gen, "width": c.link.width})).collect::<Vec<_>>(),
        "lends": t.lends.iter().map(|l| json!({"host": t.host(l.host).name, "device": l.device})).collect::<Vec<_>>(),
        "borrows": t.borrows.iter().map(|b| json!({"host": t.host(b.host).name, "name": b.name, "device": b.device, "exclusive": b.exclusive})).collect::<Vec<_>>(),
    })
}
