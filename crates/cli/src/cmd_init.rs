//! `nudma init`: a starter scenario to edit. One server — a built-in platform copied with
//! `base = "NAME"`, or a real machine as `nudma inspect --export` writes it — with
//! built-in device models (each copied too) on its first root complex, a workload per
//! `--workload` and a `[measure]` window. The text is checked as `nudma topo check`
//! checks it before it is written: what `init` writes always checks.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context};
use fabric::builtin::{self, AnyResolver, FILES};
use fabric::error::name_list;
use fabric::scenario::{load, Source};
use inspect::export::Calibration;
use inspect::platform_file::MemoryParams;
use nudma::api::audit;

mod render;

/// The platform a plain `nudma init` copies: a current two-socket server.
const DEFAULT_PLATFORM: &str = "spr_8480";

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum WorkloadKind {
    /// Each device moves data by DMA (a NIC receiving, an NVMe reading its media, a GPU
    /// copying host memory).
    Dma,
    /// fio random 4 KiB reads on the NVMe.
    Fio,
    /// netperf TCP_STREAM into the server through the NIC, from a client host.
    Netperf,
    /// A core of node 0 streaming memory: another socket's, across the interconnect,
    /// when there is one.
    #[value(name = "cpu_stream")]
    CpuStream,
}

#[derive(clap::Args, Debug)]
pub struct InitArgs {
    /// The built-in platform to copy (`nudma list`); default spr_8480.
    #[arg(long, value_name = "NAME", conflicts_with_all = ["hwloc", "sysfs_root", "this_machine"])]
    pub platform: Option<String>,
    /// Start from an hwloc XML export of a machine, as `nudma inspect --export` does.
    #[arg(long, value_name = "FILE.xml", conflicts_with_all = ["sysfs_root", "this_machine"])]
    pub hwloc: Option<PathBuf>,
    /// Start from a sysfs snapshot (hwloc-gather-topology layout).
    #[arg(long, value_name = "DIR", conflicts_with = "this_machine")]
    pub sysfs_root: Option<PathBuf>,
    /// Start from this machine (live sysfs, read-only).
    #[arg(long)]
    pub this_machine: bool,
    /// An imported machine's memory latency/bandwidth from `nudma calibrate --out FILE`.
    #[arg(long, value_name = "FILE")]
    pub calibration: Option<PathBuf>,
    /// A built-in NIC model to add on socket 0 (`nudma list`).
    #[arg(long, value_name = "MODEL")]
    pub nic: Option<String>,
    /// A built-in NVMe model to add on socket 0.
    #[arg(long, value_name = "MODEL")]
    pub nvme: Option<String>,
    /// A built-in GPU model to add on socket 0.
    #[arg(long, value_name = "MODEL")]
    pub gpu: Option<String>,
    /// A workload to add (repeatable); default: dma on each device, or cpu_stream when
    /// there is none.
    #[arg(long = "workload", value_name = "KIND", value_enum)]
    pub workloads: Vec<WorkloadKind>,
    /// Write the scenario to FILE instead of stdout.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Overwrite FILE when it exists.
    #[arg(long, requires = "out")]
    pub force: bool,
}

/// A device the user asked for: its kind and built-in model.
#[derive(Clone, Debug)]
pub struct Wanted {
    pub kind: &'static str,
    pub model: String,
    /// The device's name in the scenario, unique in its host.
    pub name: String,
    /// What its `[device_model.X]` copy is called.
    pub copy: String,
    /// The built-in model and those it copies, nearest first.
    pub chain: Vec<toml::Table>,
}

/// Where the server comes from.
pub enum Machine {
    /// A built-in platform, copied as `[platform.my_server]`.
    Builtin {
        base: String,
        chain: Vec<toml::Table>,
    },
    /// A machine exported as `nudma inspect --export` writes it.
    Imported { toml: String, source: String },
}

/// What the machine alone (before any device is added) loads as.
pub struct Facts {
    pub host: String,
    /// The first root complex (or I/O hub) of the host: where the devices go.
    pub root: String,
    /// A NUMA node of another package than node 0's, when there is one.
    pub remote_node: Option<u32>,
    /// Whether the platform has a `[platform.X.netstack]` table (network workloads).
    pub netstack: bool,
    /// The host's platform, and the built-in platform it copies.
    pub platform: String,
    pub base: Option<String>,
}

pub fn run(a: InitArgs) -> anyhow::Result<ExitCode> {
    let (text, summary) = scenario(&a)?;
    match &a.out {
        Some(path) => {
            write_new(path, &text, a.force)?;
            let p = path.display();
            eprintln!("wrote {p}: {summary}");
            eprintln!("next: edit it, then\n  nudma topo check {p}\n  nudma topo show {p}\n  nudma run {p}");
        }
        None => {
            print!("{text}");
            eprintln!("{summary}");
            eprintln!(
                "next: save it (--out FILE), edit it, then\n  nudma topo check FILE\n  nudma run FILE"
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The scenario's text, checked, and a one-line summary of it.
pub fn scenario(a: &InitArgs) -> anyhow::Result<(String, String)> {
    let machine = machine(a)?;
    let facts = facts(&machine)?;
    let taken = device_names(&machine)?;
    let devices = wanted(a, &taken)?;
    let workloads = workloads(a, &devices, &facts)?;
    let text = render::scenario(&machine, &facts, &devices, &workloads);
    verify(&text)?;
    let summary = format!(
        "{} device(s) added, {} workload(s){}",
        devices.len(),
        render::workload_count(&workloads, &devices),
        match &machine {
            Machine::Builtin { base, .. } => format!(", platform a copy of {base}"),
            Machine::Imported { source, .. } => format!(", machine imported from {source}"),
        }
    );
    Ok((text, summary))
}

fn machine(a: &InitArgs) -> anyhow::Result<Machine> {
    let import = a.hwloc.is_some() || a.sysfs_root.is_some() || a.this_machine;
    if a.calibration.is_some() && !import {
        bail!("--calibration is for an imported machine: give --hwloc, --sysfs-root or --this-machine");
    }
    if !import {
        let base = a.platform.as_deref().unwrap_or(DEFAULT_PLATFORM);
        let (platforms, _) = builtin::parts();
        if !platforms.iter().any(|p| p.name == base) {
            bail!(
                "--platform {base}: no built-in platform `{base}` (built-in: {})",
                name_list(platforms.iter().map(|p| p.name.as_str()))
            );
        }
        let chain = chain("platform", base);
        return Ok(Machine::Builtin {
            base: base.to_string(),
            chain,
        });
    }
    // The same import and export as `nudma inspect --export`.
    let params = match &a.calibration {
        Some(p) => Some((MemoryParams::read(p)?, p.as_path())),
        None => None,
    };
    let (m, _) = audit::run(&audit::AuditInput {
        sysfs_root: a.sysfs_root.as_deref(),
        hwloc: a.hwloc.as_deref(),
        calibration: params.as_ref().map(|(m, p)| (m, *p)),
        ..Default::default()
    })?;
    let cal = params
        .as_ref()
        .map(|(params, path)| Calibration { params, path });
    let export = inspect::export::scenario_toml(&m, cal)?;
    let source = match (&a.hwloc, &a.sysfs_root) {
        (Some(p), _) | (_, Some(p)) => p.display().to_string(),
        _ => "this machine".to_string(),
    };
    Ok(Machine::Imported {
        toml: export.toml,
        source,
    })
}

/// Loads the machine alone for what the rest is placed by.
fn facts(machine: &Machine) -> anyhow::Result<Facts> {
    let text = render::machine_only(machine);
    let s = load(
        Source {
            name: "<nudma init>".to_string(),
            text,
        },
        &AnyResolver,
    )
    .context("the machine does not load")?;
    let t = &s.topology;
    let host = t.hosts.first().context("the machine has no host")?;
    let root = host
        .roots
        .first()
        .context("the machine's host has no root complex")?;
    let p = &t.platforms[host.platform as usize];
    Ok(Facts {
        host: host.name.clone(),
        root: t.node(*root).name.clone(),
        remote_node: (p.packages > 1).then_some(p.nodes_per_package),
        netstack: p.netstack.is_some(),
        platform: p.name.clone(),
        base: p.base.as_ref().map(|b| b.name.clone()),
    })
}

/// The devices the machine has already (an imported one's), so added ones get new names.
fn device_names(machine: &Machine) -> anyhow::Result<Vec<String>> {
    match machine {
        Machine::Builtin { .. } => Ok(Vec::new()),
        Machine::Imported { toml, .. } => {
            let t: toml::Table = toml.parse().context("the exported machine")?;
            let hosts = t.get("host").and_then(toml::Value::as_array);
            let devices = hosts
                .into_iter()
                .flatten()
                .filter_map(|h| h.get("device").and_then(toml::Value::as_array))
                .flatten();
            Ok(devices
                .filter_map(|d| d.get("name").and_then(toml::Value::as_str))
                .map(str::to_string)
                .collect())
        }
    }
}

/// The devices asked for, each checked: a built-in model of the flag's kind.
fn wanted(a: &InitArgs, taken: &[String]) -> anyhow::Result<Vec<Wanted>> {
    let (_, models) = builtin::parts();
    let mut out = Vec::new();
    for (flag, kind, model) in [
        ("--nic", "nic", &a.nic),
        ("--nvme", "nvme", &a.nvme),
        ("--gpu", "gpu", &a.gpu),
    ] {
        let Some(model) = model else { continue };
        let of_kind = || {
            let names = models.iter().map(|m| m.name.as_str());
            name_list(names.filter(|m| model_kind(m).as_deref() == Some(kind)))
        };
        if !models.iter().any(|m| m.name == *model) {
            bail!(
                "{flag} {model}: no built-in device model `{model}` ({kind} models: {})",
                of_kind()
            );
        }
        let is = model_kind(model).unwrap_or_default();
        if is != kind {
            bail!(
                "{flag} {model}: `{model}` is a device model of kind {is}, not {kind} ({kind} models: {})",
                of_kind()
            );
        }
        let mut name = kind.to_string();
        for i in 2.. {
            if !taken.contains(&name) {
                break;
            }
            name = format!("{kind}{i}");
        }
        out.push(Wanted {
            kind,
            model: model.clone(),
            name,
            copy: format!("my_{kind}"),
            chain: chain("device_model", model),
        });
    }
    Ok(out)
}

/// The workloads to write, each checked against the devices and the platform.
fn workloads(a: &InitArgs, devices: &[Wanted], facts: &Facts) -> anyhow::Result<Vec<WorkloadKind>> {
    let mut out: Vec<WorkloadKind> = Vec::new();
    for w in &a.workloads {
        if !out.contains(w) {
            out.push(*w);
        }
    }
    if out.is_empty() {
        out.push(if devices.is_empty() {
            WorkloadKind::CpuStream
        } else {
            WorkloadKind::Dma
        });
    }
    let has = |kind: &str| devices.iter().find(|d| d.kind == kind);
    for w in &out {
        match w {
            WorkloadKind::Dma if devices.is_empty() => {
                bail!("--workload dma needs a device: give --nic, --nvme or --gpu MODEL")
            }
            WorkloadKind::Fio if has("nvme").is_none() => {
                bail!("--workload fio needs an NVMe drive: give --nvme MODEL")
            }
            WorkloadKind::Netperf => netperf_ok(has("nic"), facts)?,
            _ => {}
        }
    }
    Ok(out)
}

/// netperf runs the host network stack: a NIC model with NIC timing, a platform with a
/// network-stack table.
fn netperf_ok(nic: Option<&Wanted>, facts: &Facts) -> anyhow::Result<()> {
    let Some(nic) = nic else {
        bail!("--workload netperf needs a NIC: give --nic MODEL");
    };
    if timing_value(&nic.chain, "nic_line_gbps").is_none() {
        let (_, models) = builtin::parts();
        let timed = models.iter().map(|m| m.name.as_str()).filter(|m| {
            model_kind(m).as_deref() == Some("nic")
                && timing_value(&chain("device_model", m), "nic_line_gbps").is_some()
        });
        bail!(
            "--workload netperf: NIC model `{}` has no NIC timing (nic_line_gbps, …) for the network stack; NIC models with it: {}",
            nic.model,
            name_list(timed)
        );
    }
    if !facts.netstack {
        let (platforms, _) = builtin::parts();
        let with = platforms
            .iter()
            .map(|p| p.name.as_str())
            .filter(|p| first(&chain("platform", p), "netstack").is_some());
        let name = facts.base.as_deref().unwrap_or(&facts.platform);
        bail!(
            "--workload netperf: platform `{name}` has no network-stack table ([platform.{name}.netstack], the host stack's per-packet costs); built-in platforms with one: {}{}",
            name_list(with),
            match facts.base {
                Some(_) => "",
                None => " (examples/own_server_network.toml adds one to an exported machine)",
            }
        );
    }
    Ok(())
}

/// Checks the text as `nudma topo check` does: the fabric loads, the workloads and the
/// window parse.
fn verify(text: &str) -> anyhow::Result<()> {
    let src = Source {
        name: "<nudma init>".to_string(),
        text: text.to_string(),
    };
    let point = studies::run::sweep(&[]).remove(0);
    load(src.clone(), &AnyResolver)
        .map_err(anyhow::Error::from)
        .and_then(|_| studies::run::check(&src, &point).map_err(anyhow::Error::from))
        .context("nudma init wrote a scenario that does not check (a bug: please report it)")?;
    Ok(())
}

/// Writes `text` to a new file, or over an old one with `force`.
fn write_new(path: &Path, text: &str, force: bool) -> anyhow::Result<()> {
    let mut f = if force {
        std::fs::File::create(path)
    } else {
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)
    }
    .map_err(|e| match e.kind() {
        std::io::ErrorKind::AlreadyExists => anyhow::anyhow!(
            "{} exists: give --force to overwrite it, or another --out",
            path.display()
        ),
        _ => anyhow::anyhow!("cannot write {}: {e}", path.display()),
    })?;
    f.write_all(text.as_bytes())
        .with_context(|| format!("writing {}", path.display()))
}

/// The built-in `[table.name]` of `scenarios/platforms/` and those it copies through
/// `base`, nearest first (a cycle is the loader's error to report; here it stops).
pub fn chain(table: &str, name: &str) -> Vec<toml::Table> {
    let mut out = Vec::new();
    let mut next = Some(name.to_string());
    while let Some(n) = next.take() {
        let Some(t) = builtin_part(table, &n) else {
            break;
        };
        next = t
            .get("base")
            .and_then(toml::Value::as_str)
            .map(String::from);
        out.push(t);
        if out.len() > 16 {
            break;
        }
    }
    out
}

fn builtin_part(table: &str, name: &str) -> Option<toml::Table> {
    FILES
        .iter()
        .filter(|(p, _)| p.starts_with("platforms/"))
        .find_map(|(_, text)| {
            let t = text.parse::<toml::Table>().ok()?;
            t.get(table)?.get(name)?.as_table().cloned()
        })
}

/// A key as the nearest table of a chain gives it.
pub fn first<'a>(chain: &'a [toml::Table], key: &str) -> Option<&'a toml::Value> {
    chain.iter().find_map(|t| t.get(key))
}

/// A timing key's value as a chain gives it (timing tables are copied key by key), its
/// basis left out.
pub fn timing_value(chain: &[toml::Table], key: &str) -> Option<toml::Value> {
    let v = chain
        .iter()
        .find_map(|t| t.get("timing").and_then(|t| t.get(key)))?;
    match v.get("value") {
        Some(inner) => Some(inner.clone()),
        None => Some(v.clone()),
    }
}

/// A built-in device model's kind, through its bases.
fn model_kind(name: &str) -> Option<String> {
    first(&chain("device_model", name), "kind")
        .and_then(toml::Value::as_str)
        .map(String::from)
}
