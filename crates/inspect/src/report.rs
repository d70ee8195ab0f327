//! Human-readable rendering of an [`Audit`]: a machine summary, the I/O devices
//! with their node and link, and the findings with their fixes. The JSON form is
//! the audit's serde serialisation ([`Audit::to_json`]).

use std::fmt::Write;

use crate::audit::{human_bytes, Audit, DeviceReport, Finding, Severity};
use crate::pci::DeviceClass;

const WRAP: usize = 96;

/// Renders the audit as text for a terminal.
pub fn render_human(audit: &Audit) -> String {
    let mut out = String::new();
    let host = audit
        .hostname
        .as_deref()
        .map(|h| format!(" (host {h})"))
        .unwrap_or_default();
    let _ = writeln!(out, "nudma inspect: {}{host}", audit.source);
    let m = &audit.machine;
    let _ = writeln!(
        out,
        "CPU: {}; {} package(s), {} core(s), {} hardware thread(s); {} NUMA node(s)",
        m.cpu.as_deref().unwrap_or("unknown model"),
        m.packages,
        m.cores,
        m.threads,
        audit.numa_nodes
    );
    for n in &audit.nodes {
        let mem = n
            .memory_bytes
            .map(|b| format!(", {}", human_bytes(b)))
            .unwrap_or_default();
        let what = match (&n.kind, &n.device) {
            (Some(k), Some(d)) => format!(" ({k} of {d})"),
            (Some(k), None) => format!(" ({k})"),
            (None, _) => String::new(),
        };
        // hwloc lists memory-only nodes with their neighbours' CPUs.
        let cpus = match (n.cpus.is_empty(), n.memory_only) {
            (true, _) => format!("no CPUs{what}"),
            (false, true) => format!("memory only{what}, beside CPUs {}", n.cpus),
            (false, false) => format!("CPUs {}{what}", n.cpus),
        };
        let _ = writeln!(out, "  node {}: {cpus}{mem}", n.id);
    }
    if let Some(d) = &audit.distances {
        if d.len() > 1 {
            let rows: Vec<String> = d
                .iter()
                .map(|r| {
                    r.iter()
                        .map(|v| format!("{v}"))
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .collect();
            let _ = writeln!(out, "  distances: [{}]", rows.join(" | "));
        }
    }
    if !audit.nudma_possible {
        let _ = writeln!(
            out,
            "\n==> Only one NUMA node: no NUDMA is possible on this machine (every device, CPU and page is local)."
        );
    }

    let shown: Vec<&DeviceReport> = audit
        .devices
        .iter()
        .filter(|d| d.class.does_bulk_io() || (d.class == DeviceClass::Other && d.name.is_some()))
        .collect();
    let hidden = audit.devices.len() - shown.len();
    let _ = writeln!(out, "\nI/O devices:");
    if shown.is_empty() {
        let _ = writeln!(out, "  (none)");
    } else {
        let _ = writeln!(
            out,
            "  {:<13} {:<10} {:<5} {:<12} {:<28} MODEL",
            "BDF", "CLASS", "NODE", "NAME", "LINK"
        );
        for d in &shown {
            let node = match (d.numa_node, d.inferred_numa_node) {
                (Some(n), _) => n.to_string(),
                (None, Some(n)) => format!("{n}?"),
                (None, None) => "-".to_string(),
            };
            let _ = writeln!(
                out,
                "  {:<13} {:<10} {:<5} {:<12} {:<28} {}",
                d.bdf,
                d.class.as_str(),
                node,
                d.name.as_deref().unwrap_or("-"),
                link_text(d),
                d.model.as_deref().unwrap_or("-")
            );
        }
        let _ = writeln!(
            out,
            "  (NODE: as reported; `N?` inferred from local_cpulist; `-` unknown)"
        );
    }
    if hidden > 0 {
        let _ = writeln!(
            out,
            "  + {hidden} bridge/chipset function(s) not shown (see --format json)"
        );
    }

    let _ = writeln!(
        out,
        "\nFindings: {} error(s), {} warning(s), {} info",
        audit.count(Severity::Error),
        audit.count(Severity::Warning),
        audit.count(Severity::Info)
    );
    for f in &audit.findings {
        render_finding(&mut out, f);
    }
    let _ = writeln!(out, "\nPredicted gains: {}.", audit.predicted_gain);
    out
}

fn link_text(d: &DeviceReport) -> String {
    let l = &d.link;
    let mut s = match (l.speed_gts, l.width) {
        (Some(sp), Some(w)) => format!("{sp} GT/s x{w}"),
        (Some(sp), None) => format!("{sp} GT/s"),
        (None, Some(w)) => format!("x{w}"),
        (None, None) => match l.gbytes_per_s {
            Some(g) => format!("{g} GB/s"),
            None => "-".to_string(),
        },
    };
    if let (Some(ms), Some(mw)) = (l.max_speed_gts, l.max_width) {
        if l.below_capability == Some(true) {
            s.push_str(&format!(" (max {ms} GT/s x{mw})"));
        }
    }
    s
}

fn render_finding(out: &mut String, f: &Finding) {
    let tag = format!("[{}]", f.severity);
    let _ = writeln!(out, "\n{tag} {}", f.what);
    if !f.why.is_empty() {
        for (i, line) in wrap(&f.why, WRAP).iter().enumerate() {
            let prefix = if i == 0 { "    why: " } else { "         " };
            let _ = writeln!(out, "{prefix}{line}");
        }
    }
    if !f.fix.is_empty() {
        let _ = writeln!(out, "    fix:");
        for cmd in &f.fix {
            if cmd.starts_with('#') {
                let _ = writeln!(out, "      {cmd}");
            } else {
                let _ = writeln!(out, "      $ {cmd}");
            }
        }
    }
}

fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut cur = String::new();
    for word in text.split_whitespace() {
        if !cur.is_empty() && cur.len() + 1 + word.len() > width {
            lines.push(std::mem::take(&mut cur));
        }
        if !cur.is_empty() {
            cur.push(' ');
        }
        cur.push_str(word);
    }
    if !cur.is_empty() {
        lines.push(cur);
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps_words() {
        let w = wrap("aaa bbb ccc ddd", 7);
        assert_eq!(w, vec!["aaa bbb", "ccc ddd"]);
        assert!(wrap("", 10).is_empty());
    }
}
