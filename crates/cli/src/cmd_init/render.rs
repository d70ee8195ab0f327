//! The text `nudma init` writes: TOML with the keys a user most often changes shown as
//! comments, holding the base's values, so that uncommenting one is the whole edit.

use std::fmt::Write as _;

use super::{first, timing_value, Facts, Machine, Wanted, WorkloadKind};

/// The copy of the built-in platform, and the scenario's name.
const PLATFORM: &str = "my_server";
/// The server's name when init describes it (an imported machine keeps its host name).
const HOST: &str = "srv";
/// The other end of a netperf's connection.
const CLIENT: &str = "client";
/// Where trailing comments start, as in the built-in files.
const COMMENT_COLUMN: usize = 33;

/// The machine alone: what `facts` loads to learn its host, roots and nodes.
pub fn machine_only(m: &Machine) -> String {
    match m {
        Machine::Builtin { base, .. } => format!(
            "[scenario]\nname = \"{PLATFORM}\"\n\n[platform.{PLATFORM}]\nbase = \"{base}\"\n\n\
             [[host]]\nname = \"{HOST}\"\nplatform = \"{PLATFORM}\"\n"
        ),
        Machine::Imported { toml, .. } => toml.clone(),
    }
}

/// The whole scenario.
pub fn scenario(m: &Machine, facts: &Facts, devices: &[Wanted], ws: &[WorkloadKind]) -> String {
    let mut out = String::new();
    match m {
        Machine::Builtin { base, chain } => {
            header(&mut out);
            let cpu = first(chain, "cpu").and_then(toml::Value::as_str);
            let models: Vec<&str> = devices.iter().map(product).collect();
            let description = match (cpu, models.is_empty()) {
                (Some(cpu), true) => cpu.to_string(),
                (Some(cpu), false) => format!("{cpu}; {} on socket 0", models.join(", ")),
                (None, _) => format!("a copy of {base}"),
            };
            let _ = writeln!(out, "[scenario]\nname = \"{PLATFORM}\"");
            let _ = writeln!(out, "description = {}\n", toml::Value::from(description));
            platform(&mut out, base, chain);
            for d in devices {
                model_copy(&mut out, d);
            }
            let _ = writeln!(
                out,
                "[[host]]\nname = \"{HOST}\"\nplatform = \"{PLATFORM}\""
            );
            line(
                &mut out,
                "# iommu = true",
                "every DMA translated by the IOMMU (default off)",
            );
            out.push('\n');
        }
        Machine::Imported { toml, .. } => {
            // The device models go before the exported host, its devices after it.
            let at = toml.find("\n[[host]]\n").map_or(toml.len(), |i| i + 1);
            out.push_str(&toml[..at]);
            if !devices.is_empty() {
                out.push_str("# Added by `nudma init`: built-in device models, copied.\n");
                for d in devices {
                    model_copy(&mut out, d);
                }
            }
            out.push_str(&toml[at..]);
            if !out.ends_with("\n\n") {
                out.push('\n');
            }
        }
    }
    for d in devices {
        device(&mut out, d, &facts.root);
    }
    let netperf = ws.contains(&WorkloadKind::Netperf);
    if netperf {
        client(&mut out, facts, devices);
    }
    for w in ws {
        workload(&mut out, *w, facts, devices);
    }
    measure(&mut out, netperf);
    out
}

/// How many `[[workload]]`s `scenario` writes.
pub fn workload_count(ws: &[WorkloadKind], devices: &[Wanted]) -> usize {
    ws.iter()
        .map(|w| match w {
            WorkloadKind::Dma => devices.len(),
            _ => 1,
        })
        .sum()
}

fn header(out: &mut String) {
    out.push_str(
        "# A starter scenario from `nudma init`: edit it to describe your own server.\n\
         # `base = \"NAME\"` copies a built-in platform or device model (`nudma list` names\n\
         # them all): uncomment and change the keys that differ on your machine; every other\n\
         # key keeps the base's value and its basis (`nudma topo show` says which were copied).\n\
         #   nudma topo check FILE    a wrong key is an error naming its line\n\
         #   nudma run FILE           simulate the workloads below\n\
         # Keys: docs/guide.md, \"Describing your own hardware\"; workloads: docs/workloads.md.\n\n",
    );
}

/// `[platform.my_server]`: the base, and its most often changed keys as comments.
fn platform(out: &mut String, base: &str, chain: &[toml::Table]) {
    let _ = writeln!(out, "[platform.{PLATFORM}]");
    line(
        out,
        &format!("base = \"{base}\""),
        "the built-in platform copied",
    );
    for key in [
        "cpu",
        "cores_per_package",
        "clock_ghz",
        "dram_bytes_per_node",
    ] {
        if let Some(v) = first(chain, key) {
            let _ = writeln!(out, "# {key} = {v}");
        }
    }
    let links = first(chain, "interconnect").and_then(toml::Value::as_array);
    if let Some(links) = links.filter(|l| !l.is_empty()) {
        out.push_str(
            "# A list is replaced whole: give every link of your machine's interconnect.\n",
        );
        for link in links {
            let _ = writeln!(out, "# [[platform.{PLATFORM}.interconnect]]");
            for key in [
                "ends",
                "kind",
                "gts",
                "count",
                "bandwidth_gbps",
                "latency_ns",
            ] {
                if let Some(v) = link.get(key) {
                    let _ = writeln!(out, "# {key} = {v}");
                }
            }
        }
    }
    let timing = [
        ("dram_latency_ns", "a local DRAM read, ns"),
        ("dram_gbps", "one node's DRAM bandwidth, GB/s"),
        ("interconnect_latency_ns", "one interconnect crossing, ns"),
    ];
    let given: Vec<_> = timing
        .iter()
        .filter_map(|(k, why)| timing_value(chain, k).map(|v| (k, v, why)))
        .collect();
    if !given.is_empty() {
        out.push_str(
            "# Timing keys are copied one by one: give those you measured (`nudma calibrate`).\n",
        );
        line(
            out,
            &format!("# [platform.{PLATFORM}.timing]"),
            "each value may be { value = …, basis = … }",
        );
        for (k, v, why) in given {
            line(out, &format!("# {k} = {v}"), why);
        }
    }
    out.push('\n');
}

/// `[device_model.my_KIND]`: a copy of the built-in model, its link and rates as comments.
fn model_copy(out: &mut String, d: &Wanted) {
    let _ = writeln!(out, "[device_model.{}]", d.copy);
    line(out, &format!("base = \"{}\"", d.model), product(d));
    match first(&d.chain, "link") {
        Some(link) => {
            let _ = writeln!(out, "# link = {link}");
        }
        // The fabric needs a link; the model leaves it to the card.
        None => line(
            out,
            "link = { gen = 3, width = 16 }",
            &format!("{} gives no link: your card's", d.model),
        ),
    }
    let keys: &[(&str, &str)] = match d.kind {
        "nic" => &[("nic_line_gbps", "the port's rate, GB/s")],
        "nvme" => &[
            ("nvme_read_gbps", "media reads, GB/s"),
            ("nvme_write_gbps", "media writes, GB/s"),
        ],
        _ => &[("dma_max_reads", "DMA reads in flight")],
    };
    let given: Vec<_> = keys
        .iter()
        .filter_map(|(k, why)| timing_value(&d.chain, k).map(|v| (k, v, why)))
        .collect();
    if !given.is_empty() {
        line(
            out,
            &format!("# [device_model.{}.timing]", d.copy),
            "copied key by key, as a platform's",
        );
        for (k, v, why) in given {
            line(out, &format!("# {k} = {v}"), why);
        }
    }
    out.push('\n');
}

fn device(out: &mut String, d: &Wanted, root: &str) {
    let _ = writeln!(
        out,
        "[[host.device]]\nname = \"{}\"\ndevice_model = \"{}\"",
        d.name, d.copy
    );
    line(
        out,
        &format!("parent = \"{root}\""),
        "the first root complex: socket 0",
    );
    out.push('\n');
}

/// netperf's other end: a host like the server with the same NIC.
fn client(out: &mut String, facts: &Facts, devices: &[Wanted]) {
    let Some(nic) = devices.iter().find(|d| d.kind == "nic") else {
        return;
    };
    line(
        out,
        "[[host]]",
        "netperf's client: the same platform and NIC",
    );
    let _ = writeln!(
        out,
        "name = \"{CLIENT}\"\nplatform = \"{}\"",
        facts.platform
    );
    let _ = writeln!(
        out,
        "[[host.device]]\nname = \"{}\"\ndevice_model = \"{}\"\nparent = \"{}\"\n",
        nic.name, nic.copy, facts.root
    );
}

fn workload(out: &mut String, w: WorkloadKind, facts: &Facts, devices: &[Wanted]) {
    let host = &facts.host;
    let find = |kind: &str| devices.iter().find(|d| d.kind == kind);
    match w {
        WorkloadKind::Dma => {
            for d in devices {
                dma(out, d, host);
            }
        }
        WorkloadKind::Fio => {
            let Some(d) = find("nvme") else { return };
            let _ = writeln!(out, "[[workload]]\nname = \"fio\"");
            line(out, "kind = \"fio\"", "fio, libaio, direct=1");
            let _ = writeln!(out, "device = \"{host}.{}\"", d.name);
            line(out, "cpu_node = 0", "where its threads run");
            line(out, "mem_node = 0", "where their buffers are");
            line(out, "threads = 4", "one I/O queue pair each");
            line(out, "iodepth = 32", "requests in flight per thread");
            let _ = writeln!(
                out,
                "block_bytes = \"4 KiB\"\nop = \"read\"\npattern = \"random\"\n"
            );
        }
        WorkloadKind::Netperf => {
            let Some(d) = find("nic") else { return };
            let _ = writeln!(
                out,
                "[[workload]]\nname = \"netperf_rx\"\nkind = \"netperf\""
            );
            line(out, "test = \"TCP_STREAM\"", "TCP_STREAM | TCP_RR");
            line(
                out,
                "direction = \"rx\"",
                "the server receives (rx) or sends (tx)",
            );
            line(out, "msg_bytes = \"64 KiB\"", "netperf -m");
            line(out, "connections = 1", "one core of cpu_node each");
            let _ = writeln!(out, "server = \"{host}\"\nclient = \"{CLIENT}\"");
            let _ = writeln!(out, "nic = \"{}\"", d.name);
            line(
                out,
                "cpu_node = 0",
                "the process's and its interrupts' core",
            );
            line(out, "mem_node = 0", "its buffers and rings");
            line(
                out,
                "nic_mode = \"standard\"",
                "standard | octonic | linux_multipf",
            );
            out.push('\n');
        }
        WorkloadKind::CpuStream => {
            let _ = writeln!(out, "[[workload]]\nname = \"stream\"");
            line(
                out,
                "kind = \"cpu_stream\"",
                "cores keep line misses in flight",
            );
            let _ = writeln!(out, "host = \"{host}\"\ncpu_node = 0");
            match facts.remote_node {
                Some(n) => line(
                    out,
                    &format!("mem_node = {n}"),
                    "another socket's memory: across the interconnect",
                ),
                None => {
                    let _ = writeln!(out, "mem_node = 0");
                }
            }
            line(
                out,
                "op = \"read\"",
                "write: read for ownership, then write back",
            );
            line(out, "misses_in_flight = 10", "per core");
            out.push('\n');
        }
    }
}

/// A device's data moving by DMA into or out of node 0, as it moves in use.
fn dma(out: &mut String, d: &Wanted, host: &str) {
    let (name, why, op, offset, bytes, outstanding) = match d.kind {
        "nic" => (
            "rx",
            "the NIC receives into node 0",
            "write",
            "0",
            "4 KiB",
            64,
        ),
        "nvme" => (
            "read",
            "the drive writes what it reads from its media",
            "write",
            "256 MiB",
            "128 KiB",
            32,
        ),
        _ => (
            "h2d",
            "the GPU copies from host memory",
            "read",
            "512 MiB",
            "1 MiB",
            8,
        ),
    };
    let _ = writeln!(out, "[[workload]]\nname = \"{}_{name}\"", d.name);
    line(out, "kind = \"dma\"", why);
    let _ = writeln!(out, "device = \"{host}.{}\"", d.name);
    line(
        out,
        &format!("target = \"{host}.ram.node0\""),
        "any endpoint: a RAM node, a BAR",
    );
    if offset != "0" {
        let _ = writeln!(out, "offset = \"{offset}\"");
    }
    line(
        out,
        &format!("op = \"{op}\""),
        "write: into the target; read: from it",
    );
    let _ = writeln!(
        out,
        "transfer_bytes = \"{bytes}\"\noutstanding = {outstanding}\n"
    );
}

fn measure(out: &mut String, network: bool) {
    out.push_str("[measure]\n");
    if network {
        line(
            out,
            "warmup = \"1 ms\"",
            "the network stack's rings settle over milliseconds",
        );
        let _ = writeln!(out, "duration = \"2 ms\"");
    } else {
        line(
            out,
            "warmup = \"20 us\"",
            "simulated time; statistics restart after it",
        );
        let _ = writeln!(out, "duration = \"200 us\"");
    }
}

/// What a device model is, as its built-in file names it.
fn product(d: &Wanted) -> &str {
    first(&d.chain, "model")
        .and_then(toml::Value::as_str)
        .unwrap_or(&d.model)
}

/// `code`, then `# comment` from the comment column.
fn line(out: &mut String, code: &str, comment: &str) {
    let pad = COMMENT_COLUMN.saturating_sub(code.chars().count()).max(1);
    let _ = writeln!(out, "{code}{:pad$}# {comment}", "");
}
