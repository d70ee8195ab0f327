//! Scenario loading: parse the TOML (and its includes), validate every reference and
//! limit with a located error, then enumerate each host — bus numbers and requester IDs,
//! BAR placement (32-bit below 4 GiB, 64-bit above when asked or when large), bridge
//! windows, RAM layout around the 32-bit MMIO hole — and each platform's interconnect
//! paths. A `[cluster]` expands here into its switches, hosts and cables. Ways between
//! NTB adapters are not precomputed: one per pair would grow with the square of the
//! cluster (`Topology::ntb_way` searches when asked).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use toml::Spanned;

use crate::catalog::{builtin_adapters, builtin_chips, AdapterSpec, ChipSpec};
use crate::error::{name_list, LineIndex, ScenarioError};
use crate::raw::*;
use crate::topology::*;
use crate::units::fmt_size;

/// One source text (a scenario file or an include).
#[derive(Clone, Debug)]
pub struct Source {
    /// Shown in errors: a path, or `builtin:NAME`.
    pub name: String,
    pub text: String,
}

/// Finds the text of an `include`, relative to the including source.
pub trait Resolver {
    fn resolve(&self, from: &str, include: &str) -> Result<Source, String>;
}

/// Resolves includes on the file system, relative to the including file.
pub struct FsResolver;

impl Resolver for FsResolver {
    fn resolve(&self, from: &str, include: &str) -> Result<Source, String> {
        let base = Path::new(from).parent().unwrap_or(Path::new("."));
        let path: PathBuf = base.join(include);
        std::fs::read_to_string(&path)
            .map(|text| Source {
                name: path.display().to_string(),
                text,
            })
            .map_err(|e| format!("cannot read include `{}`: {e}", path.display()))
    }
}

/// A window the scenario asks to program statically into an NTB's address LUT.
#[derive(Clone, Debug)]
pub struct StaticWindow {
    pub ntb: String,
    pub to: String,
    pub offset: u64,
    pub size: u64,
    /// Where it was written, to locate errors found when it is programmed.
    pub at: ScenarioError,
}

/// A loaded scenario: the topology (with its lending declarations) plus what is to be
/// programmed into it.
#[derive(Clone, Debug)]
pub struct Scenario {
    pub topology: Topology,
    pub windows: Vec<StaticWindow>,
    /// The fault schedule (`[[fault]]`), in file order.
    pub faults: Vec<crate::faults::FaultSpec>,
}

/// Loads a scenario from a file on disk.
pub fn load_path(path: &Path) -> Result<Scenario, ScenarioError> {
    let text = std::fs::read_to_string(path).map_err(|e| ScenarioError {
        file: path.display().to_string(),
        line: 0,
        col: 0,
        key: None,
        message: format!("cannot read scenario: {e}"),
    })?;
    load(
        Source {
            name: path.display().to_string(),
            text,
        },
        &FsResolver,
    )
}

/// Loads a scenario from text, resolving includes with `resolver`.
pub fn load(main: Source, resolver: &dyn Resolver) -> Result<Scenario, ScenarioError> {
    let mut b = Builder::default();
    let root = b.parse(main)?;
    let raw = std::mem::replace(&mut b.files[root].raw, empty_raw());
    let meta = raw.scenario.as_ref().ok_or_else(|| {
        b.err(
            root,
            0..0,
            None,
            "missing [scenario] table with `name` (and `description`)",
        )
    })?;
    let name = meta.get_ref().name.get_ref().clone();
    if !valid_name(&name) {
        return Err(b.err(
            root,
            meta.get_ref().name.span(),
            Some("scenario.name".into()),
            "scenario names use letters, digits, `_` and `-`",
        ));
    }
    let description = meta.get_ref().description.clone();
    for inc in &raw.include {
        let src = resolver
            .resolve(&b.files[root].name, inc.get_ref())
            .map_err(|m| b.err(root, inc.span(), Some("include".into()), &m))?;
        let f = b.parse(src)?;
        b.check_include_only(f)?;
        let inc_raw = std::mem::replace(&mut b.files[f].raw, empty_raw());
        b.collect_parts(
            f,
            inc_raw.platform,
            inc_raw.chip,
            inc_raw.adapter,
            inc_raw.device_model,
        )?;
    }
    b.collect_parts(
        root,
        raw.platform.clone(),
        raw.chip.clone(),
        raw.adapter.clone(),
        raw.device_model.clone(),
    )?;
    b.build(root, name, description, raw)
}

fn empty_raw() -> RawFile {
    RawFile {
        scenario: None,
        include: vec![],
        platform: BTreeMap::new(),
        chip: BTreeMap::new(),
        adapter: BTreeMap::new(),
        device_model: BTreeMap::new(),
        host: vec![],
        cluster_switch: vec![],
        cable: vec![],
        window: vec![],
        lend: vec![],
        borrow: vec![],
        fault: vec![],
        cluster: None,
        workload: vec![],
        measure: None,
    }
}

/// The parser's type words in the words of a scenario's author (`expected u8` → `expected
/// a whole number from 0 to 255`).
fn plain_types(message: &str) -> String {
    const WORDS: [(&str, &str); 8] = [
        ("expected u8", "expected a whole number from 0 to 255"),
        ("expected u16", "expected a whole number from 0 to 65535"),
        (
            "expected u32",
            "expected a whole number from 0 to 4294967295",
        ),
        ("expected u64", "expected a whole number from 0 to 2^64 − 1"),
        ("expected i64", "expected a whole number"),
        ("expected f64", "expected a number"),
        ("expected a boolean", "expected true or false"),
        ("expected a borrowed string", "expected a string"),
    ];
    let mut out = message.to_string();
    for (from, to) in WORDS {
        out = out.replace(from, to);
    }
    out
}

pub fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// One PCI function of a device as written. Its link and BARs may come from a device
/// model in another file: `*_at` say which file and key path to name in errors.
struct FunctionSpec {
    parent: Spanned<String>,
    link: Spanned<RawLink>,
    link_at: (usize, String),
    bars: Vec<Spanned<RawBar>>,
    bars_at: (usize, String),
    bdf: Option<String>,
    key: String,
}

/// What a timing parameter may be. Values are checked when the scenario loads, so the
/// timing layer only ever sees numbers it can turn into time without overflow.
#[derive(Clone, Copy, Debug)]
enum Rule {
    /// 0..=1e9 ns: nothing in a machine takes longer than a second.
    Latency,
    /// 0.01..=1e5 GB/s.
    Bandwidth,
    /// Outstanding reads or tags: a whole number in 1..=1024 (10-bit tags).
    Tags,
    /// A finite table: 1..=2^20 entries.
    Entries,
    /// Read completion boundary: 64 or 128 bytes.
    Rcb,
    /// Largest read completion a root returns: a power of two in 64..=4096 bytes.
    CompletionBytes,
    /// Max read request size: a power of two in 128..=4096.
    Mrrs,
    /// A CPU access size: a power of two in 4..=4096.
    AccessBytes,
    /// A PCIe completion timeout: 50 µs ..= 1 s (PCIe's ranges start at 50 µs; a
    /// longer wait than a second is beyond any run).
    CompletionTimeout,
    /// NVMe queues or queue entries: a whole number in 2..=65536 (16-bit queue IDs and
    /// sizes, 0-based in the registers).
    Queues,
    /// CPU work: a whole number of cycles in 0..=1e9.
    Cycles,
    /// A socket buffer: a whole number of bytes in 4096..=2^30.
    BufferBytes,
    /// A platform's snoop mode: 1 for home snoop (directory in memory), 0 for source snoop.
    SnoopMode,
}

const MAX_LATENCY_NS: f64 = 1e9;
const GBPS_RANGE: (f64, f64) = (0.01, 1e5);
const MAX_TABLE_ENTRIES: f64 = (1u32 << 20) as f64;

impl Rule {
    fn check(self, x: f64) -> Result<(), String> {
        let whole = x.fract() == 0.0;
        let pow2 = |lo: f64, hi: f64| whole && x >= lo && x <= hi && (x as u64).is_power_of_two();
        let ok = x.is_finite()
            && match self {
                Rule::Latency => (0.0..=MAX_LATENCY_NS).contains(&x),
                Rule::Bandwidth => (GBPS_RANGE.0..=GBPS_RANGE.1).contains(&x),
                Rule::Tags => whole && (1.0..=1024.0).contains(&x),
                Rule::Entries => whole && (1.0..=MAX_TABLE_ENTRIES).contains(&x),
                Rule::Rcb => x == 64.0 || x == 128.0,
                Rule::CompletionBytes => pow2(64.0, 4096.0),
                Rule::Mrrs => pow2(128.0, 4096.0),
                Rule::AccessBytes => pow2(4.0, 4096.0),
                Rule::CompletionTimeout => (50e3..=MAX_LATENCY_NS).contains(&x),
                Rule::Queues => whole && (2.0..=65536.0).contains(&x),
                Rule::Cycles => whole && (0.0..=1e9).contains(&x),
                Rule::BufferBytes => whole && (4096.0..=(1u64 << 30) as f64).contains(&x),
                Rule::SnoopMode => x == 0.0 || x == 1.0,
            };
        if ok {
            return Ok(());
        }
        Err(format!(
            "must be {}, not {x}",
            match self {
                Rule::Latency => "a latency in 0..=1e9 ns (at most 1 s)",
                Rule::Bandwidth => "a bandwidth in 0.01..=100000 GB/s",
                Rule::Tags => "a whole number in 1..=1024",
                Rule::Entries => "a whole number of entries in 1..=1048576 (2^20)",
                Rule::Rcb => "64 or 128 (bytes)",
                Rule::CompletionBytes => "a power of two in 64..=4096 (bytes)",
                Rule::Mrrs => "a power of two in 128..=4096 (bytes)",
                Rule::AccessBytes => "a power of two in 4..=4096 (bytes)",
                Rule::CompletionTimeout =>
                    "a completion timeout in 50000..=1e9 ns (50 µs, PCIe's shortest, to 1 s)",
                Rule::Queues => "a whole number in 2..=65536 (NVMe queues or entries)",
                Rule::Cycles => "a whole number of cycles in 0..=1e9",
                Rule::BufferBytes => "a whole number of bytes in 4096..=1073741824 (1 GiB)",
                Rule::SnoopMode =>
                    "1 (home snoop: the home agent reads its in-memory directory) or 0 (source snoop)",
            }
        ))
    }
}

/// `[platform.X.timing]`: every key required.
pub const PLATFORM_TIMING_KEYS: [&str; 24] = [
    "dram_latency_ns",
    "dram_gbps",
    "llc_latency_ns",
    "rc_latency_ns",
    "rc_p2p_latency_ns",
    "rc_p2p_read_tags",
    "rc_p2p_read_gap_ns",
    "rcb_bytes",
    "read_completion_bytes",
    "iotlb_hit_ns",
    "iotlb_miss_ns",
    "iotlb_entries",
    "cpu_mmio_write_ns",
    "cpu_poll_ns",
    "interconnect_latency_ns",
    "interconnect_gbps",
    "pcie_link_ns",
    "cable_ns",
    "fc_update_ns",
    "cpu_mmio_write_bytes",
    "cpu_mmio_read_bytes",
    "cpu_mmio_reads",
    "completion_timeout_ns",
    "home_snoop",
];

fn platform_rule(key: &str) -> Option<Rule> {
    Some(match key {
        "dram_gbps" | "interconnect_gbps" => Rule::Bandwidth,
        "rc_p2p_read_tags" | "cpu_mmio_reads" => Rule::Tags,
        "rcb_bytes" => Rule::Rcb,
        "read_completion_bytes" => Rule::CompletionBytes,
        "iotlb_entries" => Rule::Entries,
        "cpu_mmio_write_bytes" | "cpu_mmio_read_bytes" => Rule::AccessBytes,
        "completion_timeout_ns" => Rule::CompletionTimeout,
        "home_snoop" => Rule::SnoopMode,
        k if PLATFORM_TIMING_KEYS.contains(&k) => Rule::Latency,
        _ => return None,
    })
}

/// A device's (or device model's) `timing` keys: the BAR, DMA and GPU keys any device may
/// state, then each model's own list (`NVME_TIMING_KEYS`, `NIC_TIMING_KEYS`,
/// `RNIC_TIMING_KEYS`), so a key added to a model is known to the validator at once.
pub const DEVICE_TIMING_KEYS: [&str; 29] = concat_keys([
    &[
        "bar_gbps",
        "bar_latency_ns",
        "bar_rcb_bytes",
        "dma_max_reads",
        "dma_mrrs_bytes",
        "launch_ns",
        "poll_ns",
    ],
    &NVME_TIMING_KEYS,
    &NIC_TIMING_KEYS,
    &RNIC_TIMING_KEYS,
]);

/// The key lists `parts` one after another as one array; a length that is not their
/// total fails the build.
const fn concat_keys<const N: usize, const P: usize>(
    parts: [&[&'static str]; P],
) -> [&'static str; N] {
    let mut out = [""; N];
    let (mut n, mut p) = (0, 0);
    while p < P {
        let mut i = 0;
        while i < parts[p].len() {
            out[n] = parts[p][i];
            n += 1;
            i += 1;
        }
        p += 1;
    }
    assert!(n == N, "the key lists' total length is not the array's");
    out
}

/// The keys an RNIC model (`devices::rnic`) reads, all or none: the port's data rate
/// (GB/s), the pipeline each packet crosses leaving and arriving, the cable's
/// propagation, the transmit unit's time per work request and the units' time per
/// packet, the QP-context and translation caches' entries, and the largest
/// `max_rd_atomic` a QP may have.
pub const RNIC_TIMING_KEYS: [&str; 8] = [
    "rnic_port_gbps",
    "rnic_latency_ns",
    "rnic_wire_ns",
    "rnic_wqe_ns",
    "rnic_packet_ns",
    "rnic_qpc_entries",
    "rnic_mtt_entries",
    "rnic_max_rd_atomic",
];

/// The keys a NIC model (`devices::nic`) reads, all or none: the port's line rate
/// (GB/s), the NIC's own pipeline latency per packet, the Ethernet cable's propagation,
/// and MSI-X coalescing (an interrupt after this long or this many completions).
pub const NIC_TIMING_KEYS: [&str; 5] = [
    "nic_line_gbps",
    "nic_latency_ns",
    "nic_wire_ns",
    "nic_coalesce_ns",
    "nic_coalesce_frames",
];

/// `[platform.X.netstack]`: the host network stack's costs on a core (`host::net`), all
/// keys required when the table is present. CPU work is in cycles so another clock
/// rescales it; TCP Small Queues' limit in bytes; the driver's flow-rule worker delay
/// and idle expiry (`systems::ioctopus::team`) in ns, as they are waits, not work.
pub const NETSTACK_KEYS: [&str; 14] = [
    "rx_segment_cycles",
    "tx_send_cycles",
    "tx_packet_cycles",
    "ack_cycles",
    "syscall_cycles",
    "irq_cycles",
    "copy_line_cycles",
    "line_fill_buffers",
    "rcvbuf_bytes",
    "napi_budget",
    "wakeup_cycles",
    "tsq_bytes",
    "flow_rule_update_ns",
    "flow_rule_expiry_ns",
];

fn netstack_rule(key: &str) -> Option<Rule> {
    Some(match key {
        "line_fill_buffers" | "napi_budget" => Rule::Tags,
        "rcvbuf_bytes" | "tsq_bytes" => Rule::BufferBytes,
        "flow_rule_update_ns" | "flow_rule_expiry_ns" => Rule::Latency,
        k if NETSTACK_KEYS.contains(&k) => Rule::Cycles,
        _ => return None,
    })
}

/// The keys an NVMe controller model (`devices::nvme`) reads, all or none: media latency
/// per read and write command, media bandwidth for reads and writes, parallel media
/// channels, the controller's own per-command processing, the CC.EN → CSTS.RDY delay,
/// queue pairs including the admin pair, and the largest queue (CAP.MQES + 1).
pub const NVME_TIMING_KEYS: [&str; 9] = [
    "nvme_read_ns",
    "nvme_write_ns",
    "nvme_read_gbps",
    "nvme_write_gbps",
    "nvme_channels",
    "nvme_command_ns",
    "nvme_enable_ns",
    "nvme_queue_pairs",
    "nvme_max_queue_entries",
];

fn device_rule(key: &str) -> Option<Rule> {
    Some(match key {
        "bar_gbps" => Rule::Bandwidth,
        "bar_latency_ns" | "launch_ns" | "poll_ns" => Rule::Latency,
        "nvme_read_ns" | "nvme_write_ns" | "nvme_command_ns" | "nvme_enable_ns" => Rule::Latency,
        "nvme_read_gbps" | "nvme_write_gbps" => Rule::Bandwidth,
        "nvme_channels" => Rule::Tags,
        "nvme_queue_pairs" | "nvme_max_queue_entries" => Rule::Queues,
        "bar_rcb_bytes" => Rule::Rcb,
        "dma_max_reads" => Rule::Tags,
        "dma_mrrs_bytes" => Rule::Mrrs,
        "nic_line_gbps" => Rule::Bandwidth,
        "nic_latency_ns" | "nic_wire_ns" | "nic_coalesce_ns" => Rule::Latency,
        "nic_coalesce_frames" => Rule::Tags,
        "rnic_port_gbps" => Rule::Bandwidth,
        "rnic_latency_ns" | "rnic_wire_ns" | "rnic_wqe_ns" | "rnic_packet_ns" => Rule::Latency,
        "rnic_qpc_entries" | "rnic_mtt_entries" => Rule::Entries,
        "rnic_max_rd_atomic" => Rule::Tags,
        _ => return None,
    })
}

/// An adapter's `timing` keys (the timing layer needs `ntb_translate_ns` and, for the
/// NTB function's registers, the `bar_*` keys).
pub const ADAPTER_TIMING_KEYS: [&str; 7] = [
    "ntb_translate_ns",
    "dma_max_reads",
    "dma_mrrs_bytes",
    "dma_setup_ns",
    "bar_gbps",
    "bar_latency_ns",
    "bar_rcb_bytes",
];

fn adapter_rule(key: &str) -> Option<Rule> {
    Some(match key {
        "ntb_translate_ns" | "dma_setup_ns" | "bar_latency_ns" => Rule::Latency,
        "bar_gbps" => Rule::Bandwidth,
        "bar_rcb_bytes" => Rule::Rcb,
        "dma_max_reads" => Rule::Tags,
        "dma_mrrs_bytes" => Rule::Mrrs,
        "nic_line_gbps" => Rule::Bandwidth,
        "nic_latency_ns" | "nic_wire_ns" | "nic_coalesce_ns" => Rule::Latency,
        "nic_coalesce_frames" => Rule::Tags,
        _ => return None,
    })
}

/// A validated timing table: values and their basis, by key.
type Table = (BTreeMap<String, f64>, Provenance);

/// A device model as collected: where it was written and its validated timing.
struct DeviceModel {
    file: usize,
    raw: Spanned<RawDeviceModel>,
    timing: Table,
}

struct File {
    name: String,
    text: String,
    lines: LineIndex,
    raw: RawFile,
}

#[derive(Default)]
struct Builder {
    files: Vec<File>,
    /// name -> (file, platform)
    platforms: BTreeMap<String, (usize, Spanned<RawPlatform>)>,
    chips: Vec<ChipSpec>,
    adapters: Vec<Arc<AdapterSpec>>,
    device_models: BTreeMap<String, DeviceModel>,
}

const MMIO32_DEFAULT: (u64, u64) = (0xC000_0000, 0xFEC0_0000);
const FOUR_GIB: u64 = 1 << 32;
const MIB: u64 = 1 << 20;
/// 64-bit BARs larger than this go above 4 GiB even when not asked (assumption: firmware
/// keeps small 64-bit BARs low to save the high window, large ones high).
const HIGH_BAR_THRESHOLD: u64 = 64 * MIB;
/// Size of an NTB function's register BAR (assumption: 128 KiB of 32-bit MMIO).
const NTB_REG_BAR: u64 = 128 << 10;

impl Builder {
    fn parse(&mut self, src: Source) -> Result<usize, ScenarioError> {
        let lines = LineIndex::new(&src.text);
        let id = self.files.len();
        match toml::from_str::<RawFile>(&src.text) {
            Ok(raw) => {
                self.files.push(File {
                    name: src.name,
                    text: src.text,
                    lines,
                    raw,
                });
                Ok(id)
            }
            Err(e) => {
                let (line, col) = e
                    .span()
                    .map(|s| lines.locate(&src.text, s.start))
                    .unwrap_or((0, 0));
                let message = e.message().trim();
                let key = e
                    .span()
                    .and_then(|s| crate::keypath::key_of_error(&src.text, s.start, message));
                Err(ScenarioError {
                    file: src.name,
                    line,
                    col,
                    key,
                    message: plain_types(message),
                })
            }
        }
    }

    fn err(
        &self,
        file: usize,
        span: Range<usize>,
        key: Option<String>,
        msg: &str,
    ) -> ScenarioError {
        let f = &self.files[file];
        let (line, col) = if span.is_empty() && span.start == 0 {
            (0, 0)
        } else {
            f.lines.locate(&f.text, span.start)
        };
        ScenarioError {
            file: f.name.clone(),
            line,
            col,
            key,
            message: msg.to_string(),
        }
    }

    fn check_include_only(&self, f: usize) -> Result<(), ScenarioError> {
        let r = &self.files[f].raw;
        let bad = if r.scenario.is_some() {
            Some("[scenario]")
        } else if !r.include.is_empty() {
            Some("include")
        } else if !r.host.is_empty() || r.cluster.is_some() {
            Some("[[host]] or [cluster]")
        } else if !r.cable.is_empty() || !r.cluster_switch.is_empty() || !r.window.is_empty() {
            Some("[[cable]], [[cluster_switch]] or [[window]]")
        } else if !r.workload.is_empty() || r.measure.is_some() {
            Some("[[workload]] or [measure]")
        } else if !r.fault.is_empty() {
            Some("[[fault]]")
        } else {
            None
        };
        match bad {
            Some(what) => Err(self.err(
                f,
                0..0,
                None,
                &format!("an included file may define only [platform.*], [chip.*], [adapter.*] and [device_model.*], not {what}"),
            )),
            None => Ok(()),
        }
    }

    fn collect_parts(
        &mut self,
        file: usize,
        platforms: BTreeMap<String, Spanned<RawPlatform>>,
        chips: BTreeMap<String, Spanned<RawChip>>,
        adapters: BTreeMap<String, Spanned<RawAdapter>>,
        device_models: BTreeMap<String, Spanned<RawDeviceModel>>,
    ) -> Result<(), ScenarioError> {
        if self.chips.is_empty() {
            self.chips = builtin_chips();
            self.adapters = builtin_adapters().into_iter().map(Arc::new).collect();
        }
        for (name, p) in platforms {
            if !valid_name(&name) {
                return Err(self.err(
                    file,
                    p.span(),
                    Some(format!("platform.{name}")),
                    "platform names use letters, digits, `_` and `-`",
                ));
            }
            if let Some((other, _)) = self.platforms.get(&name) {
                let msg = format!(
                    "platform `{name}` is defined twice (also in {})",
                    self.files[*other].name
                );
                return Err(self.err(file, p.span(), Some(format!("platform.{name}")), &msg));
            }
            self.platforms.insert(name, (file, p));
        }
        for (name, c) in chips {
            let key = Some(format!("chip.{name}"));
            if self.chips.iter().any(|x| x.name == name) {
                return Err(self.err(
                    file,
                    c.span(),
                    key,
                    &format!("chip `{name}` is already defined (built in or earlier)"),
                ));
            }
            let r = c.get_ref();
            let (lanes, ports) = (r.lanes.get_ref().value, r.ports.get_ref().value);
            if lanes == 0 || lanes > 1024 || !(2..=256).contains(&ports) {
                return Err(self.err(
                    file,
                    c.span(),
                    key,
                    "a switch chip needs 1..=1024 lanes and 2..=256 ports",
                ));
            }
            let ck = format!("chip.{name}");
            self.check_param(
                file,
                &r.latency_ns,
                Rule::Latency,
                &format!("{ck}.latency_ns"),
            )?;
            let mut basis = Provenance::new();
            basis.insert("lanes".into(), r.lanes.get_ref().basis.clone());
            basis.insert("ports".into(), r.ports.get_ref().basis.clone());
            basis.insert("latency_ns".into(), r.latency_ns.get_ref().basis.clone());
            if let Some(c) = &r.credits {
                basis.insert("credits".into(), c.get_ref().basis.clone());
            }
            self.chips.push(ChipSpec {
                name: name.clone(),
                description: r.description.clone(),
                lanes,
                ports,
                latency_ns: r.latency_ns.get_ref().value,
                cluster: r.cluster,
                credits: r.credits.as_ref().map_or([0; 3], |c| c.get_ref().value),
                source: format!("scenario {}", self.files[file].name),
                basis,
            });
        }
        for (name, a) in adapters {
            let key = format!("adapter.{name}");
            if self.adapters.iter().any(|x| x.name == name) {
                return Err(self.err(
                    file,
                    a.span(),
                    Some(key),
                    &format!("adapter `{name}` is already defined (built in or earlier)"),
                ));
            }
            let r = a.get_ref();
            let chip = self.find_board_chip(
                file,
                &r.chip,
                &format!("{key}.chip"),
                "an adapter's chip cannot be a cluster switch chip",
            )?;
            let link = self.link(file, &r.link, &format!("{key}.link"))?;
            let (bar, win) = (r.bar_size.get_ref().value.0, r.lut_windows.get_ref().value);
            self.check_lut(
                file,
                r.bar_size.span(),
                r.lut_windows.span(),
                bar,
                win,
                &key,
            )?;
            let (ent, res) = (
                r.rid_lut_entries.get_ref().value,
                r.rid_reserved.get_ref().value,
            );
            if ent == 0 || ent > 256 || res >= ent {
                return Err(self.err(
                    file,
                    r.rid_lut_entries.span(),
                    Some(format!("{key}.rid_lut_entries")),
                    "rid_lut_entries must be 1..=256 and greater than rid_reserved",
                ));
            }
            let ports = r.ports.as_ref().map_or(1, |p| p.get_ref().value);
            if ports == 0 || ports > 8 {
                return Err(self.err(
                    file,
                    r.ports.as_ref().map_or(a.span(), |p| p.span()),
                    Some(format!("{key}.ports")),
                    "ports must be 1..=8",
                ));
            }
            let (timing, mut basis) = self.timing_table(
                file,
                &r.timing,
                adapter_rule,
                &ADAPTER_TIMING_KEYS,
                &format!("{key}.timing"),
            )?;
            basis.insert("bar_size".into(), r.bar_size.get_ref().basis.clone());
            basis.insert("lut_windows".into(), r.lut_windows.get_ref().basis.clone());
            basis.insert(
                "rid_lut_entries".into(),
                r.rid_lut_entries.get_ref().basis.clone(),
            );
            basis.insert(
                "rid_reserved".into(),
                r.rid_reserved.get_ref().basis.clone(),
            );
            if let Some(p) = &r.ports {
                basis.insert("ports".into(), p.get_ref().basis.clone());
            }
            self.adapters.push(Arc::new(AdapterSpec {
                name: name.clone(),
                description: r.description.clone(),
                chip: self.chips[chip as usize].name.clone(),
                gen: link.gen,
                width: link.width,
                bar_size: bar,
                lut_windows: win,
                rid_lut_entries: ent,
                rid_reserved: res,
                ports,
                timing: timing.into_iter().collect(),
                source: format!("scenario {}", self.files[file].name),
                basis,
            }));
        }
        for (name, m) in device_models {
            let key = format!("device_model.{name}");
            if !valid_name(&name) {
                return Err(self.err(
                    file,
                    m.span(),
                    Some(key),
                    "device model names use letters, digits, `_` and `-`",
                ));
            }
            if let Some(other) = self.device_models.get(&name) {
                let msg = format!(
                    "device model `{name}` is defined twice (also in {})",
                    self.files[other.file].name
                );
                return Err(self.err(file, m.span(), Some(key), &msg));
            }
            let r = m.get_ref();
            if let Some(l) = &r.link {
                self.link(file, l, &format!("{key}.link"))?;
            }
            if let Some(mask) = &r.dma_mask_bits {
                self.check_mask(file, mask, &key)?;
            }
            for (bi, b) in r.bars.iter().flatten().enumerate() {
                if let Some(a) = &b.get_ref().address {
                    return Err(self.err(
                        file,
                        a.span(),
                        Some(format!("{key}.bars[{bi}].address")),
                        "a fixed BAR address belongs to a device, not to its model",
                    ));
                }
            }
            let timing = self.timing_table(
                file,
                &r.timing,
                device_rule,
                &DEVICE_TIMING_KEYS,
                &format!("{key}.timing"),
            )?;
            self.device_models.insert(
                name,
                DeviceModel {
                    file,
                    raw: m,
                    timing,
                },
            );
        }
        Ok(())
    }

    /// Validates a timing table against its keys' rules: unknown keys refused, each value
    /// range-checked where it is written.
    fn timing_table(
        &self,
        file: usize,
        raw: &RawTiming,
        rule: fn(&str) -> Option<Rule>,
        known: &[&str],
        key: &str,
    ) -> Result<Table, ScenarioError> {
        let mut values = BTreeMap::new();
        let mut basis = Provenance::new();
        for (k, v) in raw {
            let Some(r) = rule(k) else {
                return Err(self.err(
                    file,
                    v.span(),
                    Some(format!("{key}.{k}")),
                    &format!(
                        "unknown timing parameter `{k}` (known: {})",
                        name_list(known)
                    ),
                ));
            };
            self.check_param(file, v, r, &format!("{key}.{k}"))?;
            values.insert(k.clone(), v.get_ref().value);
            basis.insert(k.clone(), v.get_ref().basis.clone());
        }
        Ok((values, basis))
    }

    fn check_param(
        &self,
        file: usize,
        v: &Spanned<RawParam<f64>>,
        rule: Rule,
        key: &str,
    ) -> Result<(), ScenarioError> {
        rule.check(v.get_ref().value).map_err(|m| {
            let what = key.rsplit('.').next().unwrap_or(key);
            self.err(file, v.span(), Some(key.into()), &format!("{what} {m}"))
        })
    }

    /// A device's typed timing from its merged table: which groups of keys the timing
    /// layer needs depends on whether the host's platform has timing, on BARs and kind.
    #[allow(clippy::too_many_arguments)]
    fn device_timing(
        &self,
        file: usize,
        at: Range<usize>,
        key: &str,
        (t, basis): (&BTreeMap<String, f64>, Provenance),
        timed: bool,
        kind: DeviceKind,
        has_bars: bool,
    ) -> Result<DeviceTiming, ScenarioError> {
        let group = |keys: &[&str], needed: bool, why: &str| -> Result<bool, ScenarioError> {
            let present = keys.iter().filter(|k| t.contains_key(**k)).count();
            if present == keys.len() || (present == 0 && !needed) {
                return Ok(present > 0);
            }
            let missing: Vec<String> = keys
                .iter()
                .filter(|k| !t.contains_key(**k))
                .map(|k| format!("`{k}`"))
                .collect();
            Err(self.err(
                file,
                at.clone(),
                Some(format!("{key}.timing")),
                &format!("missing timing parameter {} ({why})", missing.join(", ")),
            ))
        };
        let bar = group(
            &["bar_gbps", "bar_latency_ns", "bar_rcb_bytes"],
            timed && has_bars,
            "the timing layer serves accesses to a device's BARs on a platform with timing; \
             bar_gbps, bar_latency_ns and bar_rcb_bytes go together",
        )?;
        let nic = group(
            &NIC_TIMING_KEYS,
            false,
            "a NIC model states its line rate, pipeline latency, cable and coalescing together",
        )?;
        let dma = group(
            &["dma_max_reads", "dma_mrrs_bytes"],
            nic,
            if nic {
                "a NIC model reads descriptors and payload as a DMA requester: it states its \
                 outstanding reads and its read request size"
            } else {
                "a DMA requester states both its outstanding reads and its read request size"
            },
        )?;
        group(
            &RNIC_TIMING_KEYS,
            false,
            "an RNIC model states its port, pipeline, cable, processing units, caches and \
             read-resource limit together",
        )?;
        group(
            &NVME_TIMING_KEYS,
            false,
            "an NVMe controller model states its media, processing, enable delay and queue \
             limits together",
        )?;
        let gpu = group(
            &["launch_ns", "poll_ns"],
            timed && kind == DeviceKind::Gpu,
            "a GPU on a platform with timing launches kernels and polls",
        )?;
        // Whole numbers in range: checked by their rules when the table was read.
        Ok(DeviceTiming {
            bar: bar.then(|| BarTiming {
                gbps: t["bar_gbps"],
                latency_ns: t["bar_latency_ns"],
                rcb_bytes: t["bar_rcb_bytes"] as u32,
            }),
            dma: dma.then(|| DmaTiming {
                max_reads: t["dma_max_reads"] as u32,
                mrrs_bytes: t["dma_mrrs_bytes"] as u32,
            }),
            launch_ns: gpu.then(|| t["launch_ns"]),
            poll_ns: gpu.then(|| t["poll_ns"]),
            basis,
        })
    }

    fn check_mask(&self, file: usize, m: &Spanned<u8>, key: &str) -> Result<u8, ScenarioError> {
        if !(32..=64).contains(m.get_ref()) {
            return Err(self.err(
                file,
                m.span(),
                Some(format!("{key}.dma_mask_bits")),
                "dma_mask_bits must be 32..=64",
            ));
        }
        Ok(*m.get_ref())
    }

    fn check_lut(
        &self,
        file: usize,
        bar_span: Range<usize>,
        win_span: Range<usize>,
        bar: u64,
        windows: u32,
        key: &str,
    ) -> Result<(), ScenarioError> {
        if !bar.is_power_of_two() || bar < MIB {
            return Err(self.err(
                file,
                bar_span,
                Some(format!("{key}.bar_size")),
                &format!(
                    "an NTB BAR must be a power of two of at least 1 MiB, not {}",
                    fmt_size(bar)
                ),
            ));
        }
        if windows == 0 || !windows.is_power_of_two() || bar / (windows as u64) < 4096 {
            return Err(self.err(
                file,
                win_span,
                Some(format!("{key}.lut_windows")),
                &format!(
                    "lut_windows must be a power of two dividing the {} BAR into windows of at least 4 KiB",
                    fmt_size(bar)
                ),
            ));
        }
        Ok(())
    }

    fn find_chip(
        &self,
        file: usize,
        name: &Spanned<String>,
        key: &str,
    ) -> Result<u32, ScenarioError> {
        self.chips
            .iter()
            .position(|c| &c.name == name.get_ref())
            .map(|i| i as u32)
            .ok_or_else(|| {
                let known = name_list(self.chips.iter().map(|c| c.name.as_str()));
                self.err(
                    file,
                    name.span(),
                    Some(key.into()),
                    &format!("unknown chip `{}` (known: {known})", name.get_ref()),
                )
            })
    }

    /// A chip that may sit on a board or in an adapter (not a cluster switch).
    fn find_board_chip(
        &self,
        file: usize,
        name: &Spanned<String>,
        key: &str,
        why_not: &str,
    ) -> Result<u32, ScenarioError> {
        let chip = self.find_chip(file, name, key)?;
        if self.chips[chip as usize].cluster {
            return Err(self.err(file, name.span(), Some(key.into()), why_not));
        }
        Ok(chip)
    }

    fn link(&self, file: usize, l: &Spanned<RawLink>, key: &str) -> Result<Link, ScenarioError> {
        let r = l.get_ref();
        if !(1..=5).contains(&r.gen) {
            return Err(self.err(
                file,
                l.span(),
                Some(format!("{key}.gen")),
                &format!("PCIe generation must be 1..=5, not {}", r.gen),
            ));
        }
        if ![1, 2, 4, 8, 12, 16, 32].contains(&r.width) {
            return Err(self.err(
                file,
                l.span(),
                Some(format!("{key}.width")),
                &format!(
                    "link width must be 1, 2, 4, 8, 12, 16 or 32, not {}",
                    r.width
                ),
            ));
        }
        Ok(Link {
            gen: r.gen,
            width: r.width,
            cable: r.cable,
        })
    }

    /// `[platform.X.timing]`: every key required, each in range.
    fn platform_timing(
        &self,
        file: usize,
        name: &str,
        at: Range<usize>,
        t: &Spanned<RawTiming>,
    ) -> Result<PlatformTiming, ScenarioError> {
        let key = format!("platform.{name}.timing");
        let (v, basis) = self.timing_table(
            file,
            t.get_ref(),
            platform_rule,
            &PLATFORM_TIMING_KEYS,
            &key,
        )?;
        let missing: Vec<&str> = PLATFORM_TIMING_KEYS
            .iter()
            .copied()
            .filter(|k| !v.contains_key(*k))
            .collect();
        if let Some(first) = missing.first() {
            let span = if t.span().is_empty() { at } else { t.span() };
            return Err(self.err(
                file,
                span,
                Some(format!("{key}.{first}")),
                &format!(
                    "platform `{name}` has no timing parameter {} (a timing table gives all {} keys: {})",
                    missing.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", "),
                    PLATFORM_TIMING_KEYS.len(),
                    PLATFORM_TIMING_KEYS.join(", ")
                ),
            ));
        }
        let f = |k: &str| v[k];
        // Whole numbers in range: checked by their rules above.
        let n = |k: &str| v[k] as u32;
        Ok(PlatformTiming {
            dram_latency_ns: f("dram_latency_ns"),
            dram_gbps: f("dram_gbps"),
            llc_latency_ns: f("llc_latency_ns"),
            rc_latency_ns: f("rc_latency_ns"),
            rc_p2p_latency_ns: f("rc_p2p_latency_ns"),
            rc_p2p_read_tags: n("rc_p2p_read_tags"),
            rc_p2p_read_gap_ns: f("rc_p2p_read_gap_ns"),
            rcb_bytes: n("rcb_bytes"),
            read_completion_bytes: n("read_completion_bytes"),
            iotlb_hit_ns: f("iotlb_hit_ns"),
            iotlb_miss_ns: f("iotlb_miss_ns"),
            iotlb_entries: n("iotlb_entries"),
            cpu_mmio_write_ns: f("cpu_mmio_write_ns"),
            cpu_poll_ns: f("cpu_poll_ns"),
            interconnect_latency_ns: f("interconnect_latency_ns"),
            interconnect_gbps: f("interconnect_gbps"),
            pcie_link_ns: f("pcie_link_ns"),
            cable_ns: f("cable_ns"),
            fc_update_ns: f("fc_update_ns"),
            cpu_mmio_write_bytes: n("cpu_mmio_write_bytes"),
            cpu_mmio_read_bytes: n("cpu_mmio_read_bytes"),
            cpu_mmio_reads: n("cpu_mmio_reads"),
            completion_timeout_ns: f("completion_timeout_ns"),
            home_snoop: f("home_snoop") == 1.0,
            basis,
        })
    }

    /// `[platform.X.netstack]`: every key required, each in range.
    fn netstack(
        &self,
        file: usize,
        name: &str,
        t: &Spanned<RawTiming>,
    ) -> Result<NetStackCosts, ScenarioError> {
        let key = format!("platform.{name}.netstack");
        let (v, basis) =
            self.timing_table(file, t.get_ref(), netstack_rule, &NETSTACK_KEYS, &key)?;
        let missing: Vec<&str> = NETSTACK_KEYS
            .iter()
            .copied()
            .filter(|k| !v.contains_key(*k))
            .collect();
        if let Some(first) = missing.first() {
            return Err(self.err(
                file,
                t.span(),
                Some(format!("{key}.{first}")),
                &format!(
                    "platform `{name}` has no network-stack parameter {} (a netstack table gives all {} keys: {})",
                    missing.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", "),
                    NETSTACK_KEYS.len(),
                    NETSTACK_KEYS.join(", ")
                ),
            ));
        }
        // Whole numbers in range: checked by their rules above.
        let n = |k: &str| v[k] as u64;
        Ok(NetStackCosts {
            rx_segment_cycles: n("rx_segment_cycles"),
            tx_send_cycles: n("tx_send_cycles"),
            tx_packet_cycles: n("tx_packet_cycles"),
            ack_cycles: n("ack_cycles"),
            syscall_cycles: n("syscall_cycles"),
            irq_cycles: n("irq_cycles"),
            copy_line_cycles: n("copy_line_cycles"),
            line_fill_buffers: n("line_fill_buffers") as u32,
            rcvbuf_bytes: n("rcvbuf_bytes"),
            napi_budget: n("napi_budget") as u32,
            wakeup_cycles: n("wakeup_cycles"),
            tsq_bytes: n("tsq_bytes"),
            flow_rule_update_ns: v["flow_rule_update_ns"],
            flow_rule_expiry_ns: v["flow_rule_expiry_ns"],
            basis,
        })
    }

    fn platform(&self, name: &str) -> Result<Platform, ScenarioError> {
        let (file, sp) = &self.platforms[name];
        let file = *file;
        let p = sp.get_ref();
        let key = |k: &str| Some(format!("platform.{name}.{k}"));
        let range = |v: &Spanned<u32>, k: &str, lo: u32, hi: u32| -> Result<u32, ScenarioError> {
            let x = *v.get_ref();
            if x < lo || x > hi {
                Err(self.err(
                    file,
                    v.span(),
                    key(k),
                    &format!("{k} must be {lo}..={hi}, not {x}"),
                ))
            } else {
                Ok(x)
            }
        };
        // Large NUMA machines (SGI UV, 8-socket servers with sub-NUMA groups) export
        // dozens of packages; CPU requesters keep a package in 8 bits.
        let packages = range(&p.packages, "packages", 1, 64)?;
        let npp = match &p.nodes_per_package {
            Some(v) => range(v, "nodes_per_package", 1, 8)?,
            None => 1,
        };
        let cores = range(&p.cores_per_package, "cores_per_package", 1, 1024)?;
        let tpc = match &p.threads_per_core {
            Some(v) => range(v, "threads_per_core", 1, 8)?,
            None => 1,
        };
        let llc_ways = range(&p.llc_ways, "llc_ways", 1, 64)?;
        let ddio_ways = range(&p.ddio_ways, "ddio_ways", 0, llc_ways)?;
        let clock = *p.clock_ghz.get_ref();
        if !(clock > 0.0 && clock < 100.0) {
            return Err(self.err(
                file,
                p.clock_ghz.span(),
                key("clock_ghz"),
                "clock_ghz must be in (0, 100)",
            ));
        }
        let llc = p.llc_bytes.get_ref().0;
        if llc == 0 {
            return Err(self.err(
                file,
                p.llc_bytes.span(),
                key("llc_bytes"),
                "llc_bytes must be > 0",
            ));
        }
        let dram = p.dram_bytes_per_node.get_ref().0;
        if dram < MIB || dram % MIB != 0 || dram > (1 << 46) {
            return Err(self.err(
                file,
                p.dram_bytes_per_node.span(),
                key("dram_bytes_per_node"),
                "dram_bytes_per_node must be a whole number of MiB between 1 MiB and 64 TiB",
            ));
        }
        let split = match &p.root_read_split_bytes {
            Some(v) => {
                let x = *v.get_ref();
                if !x.is_power_of_two() || !(64..=4096).contains(&x) {
                    return Err(self.err(
                        file,
                        v.span(),
                        key("root_read_split_bytes"),
                        "root_read_split_bytes must be a power of two in 64..=4096",
                    ));
                }
                Some(x)
            }
            None => None,
        };
        let mut iohs = Vec::new();
        for (i, ioh) in p.ioh.iter().enumerate() {
            let n = ioh.get_ref().name.get_ref();
            if !valid_name(n) || n.starts_with("pkg") || iohs.contains(n) {
                return Err(self.err(
                    file,
                    ioh.get_ref().name.span(),
                    key(&format!("ioh[{i}].name")),
                    &format!("I/O hub name `{n}` is invalid or repeated (names `pkgN` are the packages')"),
                ));
            }
            iohs.push(n.clone());
        }
        let vname = |s: &str| -> Option<u32> {
            if let Some(num) = s.strip_prefix("pkg") {
                num.parse::<u32>().ok().filter(|&v| v < packages)
            } else {
                iohs.iter()
                    .position(|x| x == s)
                    .map(|i| packages + i as u32)
            }
        };
        let mut interconnect = Vec::new();
        for (i, ic) in p.interconnect.iter().enumerate() {
            let r = ic.get_ref();
            let k = format!("interconnect[{i}]");
            let ends = r.ends.get_ref();
            if ends.len() != 2 {
                return Err(self.err(
                    file,
                    r.ends.span(),
                    key(&format!("{k}.ends")),
                    "an interconnect link has exactly two ends",
                ));
            }
            let mut v = [0u32; 2];
            for (j, e) in ends.iter().enumerate() {
                v[j] = vname(e.get_ref()).ok_or_else(|| {
                    self.err(
                        file,
                        e.span(),
                        key(&format!("{k}.ends")),
                        &format!(
                            "unknown interconnect end `{}` (packages are pkg0..pkg{}, I/O hubs: {})",
                            e.get_ref(),
                            packages - 1,
                            name_list(&iohs)
                        ),
                    )
                })?;
            }
            if v[0] == v[1] {
                return Err(self.err(
                    file,
                    r.ends.span(),
                    key(&format!("{k}.ends")),
                    "an interconnect link cannot join a vertex to itself",
                ));
            }
            let kind = r.kind.get_ref().clone();
            if !["qpi", "upi", "hypertransport", "infinity", "generic"].contains(&kind.as_str()) {
                return Err(self.err(
                    file,
                    r.kind.span(),
                    key(&format!("{k}.kind")),
                    "kind must be qpi, upi, hypertransport, infinity or generic",
                ));
            }
            for (val, what, rule) in [
                (&r.bandwidth_gbps, "bandwidth_gbps", Rule::Bandwidth),
                (&r.latency_ns, "latency_ns", Rule::Latency),
            ] {
                if let Some(v) = val {
                    rule.check(*v.get_ref()).map_err(|m| {
                        self.err(
                            file,
                            v.span(),
                            key(&format!("{k}.{what}")),
                            &format!("{what} {m}"),
                        )
                    })?;
                }
            }
            interconnect.push(InterconnectLink {
                a: v[0],
                b: v[1],
                kind,
                gts: r.gts,
                count: r.count.as_ref().map(|c| *c.get_ref()).unwrap_or(1).max(1),
                bandwidth_gbps: r.bandwidth_gbps.as_ref().map(|x| *x.get_ref()),
                latency_ns: r.latency_ns.as_ref().map(|x| *x.get_ref()),
                weight: r.weight.as_ref().map(|w| *w.get_ref()).unwrap_or(1).max(1),
            });
        }
        let mut memory_nodes = Vec::new();
        for (i, mn) in p.memory_node.iter().enumerate() {
            let r = mn.get_ref();
            let k = format!("memory_node[{i}]");
            let package = *r.package.get_ref();
            if package >= packages {
                return Err(self.err(
                    file,
                    r.package.span(),
                    key(&format!("{k}.package")),
                    &format!(
                        "package must be one of this platform's packages 0..={}, not {package}",
                        packages - 1
                    ),
                ));
            }
            let bytes = r.bytes.get_ref().0;
            if bytes < MIB || bytes % MIB != 0 || bytes > (1 << 46) {
                return Err(self.err(
                    file,
                    r.bytes.span(),
                    key(&format!("{k}.bytes")),
                    "bytes must be a whole number of MiB between 1 MiB and 64 TiB",
                ));
            }
            let kind = match &r.kind {
                Some(kd) if !MEMORY_NODE_KINDS.contains(&kd.get_ref().as_str()) => {
                    return Err(self.err(
                        file,
                        kd.span(),
                        key(&format!("{k}.kind")),
                        &format!(
                            "kind must be one of {}, not `{}`",
                            MEMORY_NODE_KINDS.join(", "),
                            kd.get_ref()
                        ),
                    ));
                }
                Some(kd) => kd.get_ref().clone(),
                None => "other".to_string(),
            };
            let gbps = match &r.gbps {
                Some(g) => {
                    self.check_param(
                        file,
                        g,
                        Rule::Bandwidth,
                        &format!("platform.{name}.{k}.gbps"),
                    )?;
                    Some((g.get_ref().value, g.get_ref().basis.clone()))
                }
                None => None,
            };
            memory_nodes.push(MemoryNode {
                package,
                bytes,
                kind,
                gbps,
            });
        }
        // Node numbers are u32 and every node gets a RAM range; keep both far from limits.
        if memory_nodes.len() > 256 {
            return Err(self.err(
                file,
                p.memory_node[256].span(),
                key("memory_node"),
                "a platform has at most 256 memory-only nodes",
            ));
        }
        let cpu_nodes = packages * npp;
        let nodes = cpu_nodes + memory_nodes.len() as u32;
        let matrix = |m: &Option<Spanned<RawMemory>>,
                      pick: fn(&RawMemory) -> &Option<Spanned<Matrix>>,
                      what: &str|
         -> Result<Option<Vec<Vec<f64>>>, ScenarioError> {
            let Some(mem) = m else { return Ok(None) };
            let Some(v) = pick(mem.get_ref()) else {
                return Ok(None);
            };
            // Rows are the nodes CPUs run on; columns every node memory can be on.
            let (rows_n, cols_n) = (cpu_nodes as usize, nodes as usize);
            let rows = match v.get_ref() {
                Matrix::Scalar(x) => vec![vec![*x; cols_n]; rows_n],
                Matrix::Rows(r) => r.clone(),
            };
            if rows.len() != rows_n || rows.iter().any(|r| r.len() != cols_n) {
                let shape = if rows_n == cols_n {
                    format!("a {rows_n} × {cols_n} matrix")
                } else {
                    format!(
                        "a {rows_n} × {cols_n} matrix ({rows_n} CPU node rows; columns for those and the {} memory-only node(s))",
                        cols_n - rows_n
                    )
                };
                return Err(self.err(file, v.span(), key(&format!("memory.{what}")), &format!("{what} must be {shape} (row = CPU node, column = memory node) or one number")));
            }
            let rule = if what == "latency_ns" {
                Rule::Latency
            } else {
                Rule::Bandwidth
            };
            if let Some(m) = rows.iter().flatten().find_map(|x| {
                if *x > 0.0 {
                    rule.check(*x).err()
                } else {
                    Some(format!("must be > 0, not {x}"))
                }
            }) {
                return Err(self.err(
                    file,
                    v.span(),
                    key(&format!("memory.{what}")),
                    &format!("{what} entries {m}"),
                ));
            }
            Ok(Some(rows))
        };
        let latency_ns = matrix(&p.memory, |m| &m.latency_ns, "latency_ns")?;
        let bandwidth_gbps = matrix(&p.memory, |m| &m.bandwidth_gbps, "bandwidth_gbps")?;
        let timing = match &p.timing {
            Some(t) => Some(self.platform_timing(file, name, sp.span(), t)?),
            None => None,
        };
        let netstack = match &p.netstack {
            Some(t) => Some(self.netstack(file, name, t)?),
            None => None,
        };
        let platform = Platform {
            name: name.to_string(),
            cpu: p.cpu.clone(),
            packages,
            nodes_per_package: npp,
            cores_per_package: cores,
            threads_per_core: tpc,
            clock_ghz: clock,
            llc_bytes: llc,
            llc_ways,
            ddio_ways,
            dram_bytes_per_node: dram,
            root_read_split_bytes: split,
            root_p2p: p.root_p2p.unwrap_or(true),
            latency_ns,
            bandwidth_gbps,
            interconnect,
            iohs,
            memory_nodes,
            timing,
            netstack,
            uncore_paths: Vec::new(),
        };
        // Every package and hub must be reachable from every other.
        let v = platform.uncore_vertices();
        let paths = uncore_paths(&platform);
        if let Some(to) = (1..v).find(|&t| paths[t as usize].is_none()) {
            return Err(self.err(
                file,
                sp.span(),
                Some(format!("platform.{name}.interconnect")),
                &format!(
                    "impossible topology: {} cannot reach {} through the interconnect links",
                    platform.vertex_name(0),
                    platform.vertex_name(to)
                ),
            ));
        }
        let mut platform = platform;
        platform.uncore_paths = all_pairs_uncore(&platform);
        Ok(platform)
    }

    fn build(
        mut self,
        root: usize,
        name: String,
        description: String,
        raw: RawFile,
    ) -> Result<Scenario, ScenarioError> {
        if self.chips.is_empty() {
            self.chips = builtin_chips();
            self.adapters = builtin_adapters().into_iter().map(Arc::new).collect();
        }
        let mut topo = Topology {
            name,
            description,
            chips: self.chips.clone(),
            platforms: Vec::new(),
            hosts: Vec::new(),
            nodes: Vec::new(),
            devices: Vec::new(),
            ntbs: Vec::new(),
            cluster_switches: Vec::new(),
            cables: Vec::new(),
            switch_group: Vec::new(),
            host_ids: HashMap::new(),
            lends: Vec::new(),
            borrows: Vec::new(),
        };
        let cluster = match &raw.cluster {
            Some(c) => Some(self.cluster_plan(root, c)?),
            None => None,
        };
        if raw.host.is_empty() && cluster.is_none() {
            return Err(self.err(
                root,
                0..0,
                Some("host".into()),
                "a scenario needs at least one [[host]] (or a [cluster] of them)",
            ));
        }
        // Written hosts by name: one named like a generated host takes that host's place.
        let mut written: HashMap<&str, usize> = HashMap::with_capacity(raw.host.len());
        for (hi, h) in raw.host.iter().enumerate() {
            let hkey = format!("host[{hi}]");
            let Some(n) = &h.get_ref().name else {
                return Err(self.err(
                    root,
                    h.span(),
                    Some(format!("{hkey}.name")),
                    "a [[host]] needs `name`",
                ));
            };
            if !valid_name(n.get_ref()) {
                return Err(self.err(
                    root,
                    n.span(),
                    Some(format!("{hkey}.name")),
                    "host names use letters, digits, `_` and `-`",
                ));
            }
            if written.insert(n.get_ref(), hi).is_some() {
                return Err(self.err(
                    root,
                    n.span(),
                    Some(format!("{hkey}.name")),
                    &format!("duplicate host name `{}`", n.get_ref()),
                ));
            }
        }
        // Host order: the cluster's hosts by number, then the other written hosts.
        let mut order: Vec<(Option<usize>, String)> = Vec::new();
        if let Some(c) = &cluster {
            order.reserve(c.hosts as usize);
            for i in 0..c.hosts {
                let name = c.host_names.name(i);
                order.push((written.remove(name.as_str()), name));
            }
        }
        for (hi, h) in raw.host.iter().enumerate() {
            let name = h.get_ref().name.as_ref().expect("checked above").get_ref();
            if written.contains_key(name.as_str()) {
                order.push((Some(hi), name.clone()));
            }
        }
        topo.host_ids.reserve(order.len());
        let mut platform_ids: HashMap<String, u32> = HashMap::new();
        for (written, name) in order {
            let (hr, hkey) = match (written, &cluster) {
                (Some(hi), _) => (raw.host[hi].get_ref(), format!("host[{hi}]")),
                (None, Some(c)) => (c.raw.host.get_ref(), "cluster.host".to_string()),
                (None, None) => unreachable!("only a cluster generates hosts"),
            };
            let pname = hr.platform.get_ref();
            let pid = match platform_ids.get(pname) {
                Some(&id) => id,
                None => {
                    if !self.platforms.contains_key(pname) {
                        let known: Vec<&String> = self.platforms.keys().collect();
                        return Err(self.err(
                            root,
                            hr.platform.span(),
                            Some(format!("{hkey}.platform")),
                            &format!("unknown platform `{pname}` (defined: {})", name_list(known)),
                        ));
                    }
                    let p = self.platform(pname)?;
                    topo.platforms.push(p);
                    let id = topo.platforms.len() as u32 - 1;
                    platform_ids.insert(pname.clone(), id);
                    id
                }
            };
            self.host(root, &hkey, &name, hr, pid, &mut topo)?;
            let id = topo.hosts.len() as HostId - 1;
            topo.host_ids.insert(name, id);
        }
        self.cluster(root, &raw, cluster.as_ref(), &mut topo)?;
        let mut windows = Vec::new();
        for (i, w) in raw.window.iter().enumerate() {
            let r = w.get_ref();
            let size = r.size.get_ref().0;
            if size == 0 {
                return Err(self.err(
                    root,
                    r.size.span(),
                    Some(format!("window[{i}].size")),
                    "a window needs a size > 0",
                ));
            }
            windows.push(StaticWindow {
                ntb: r.ntb.get_ref().clone(),
                to: r.to.get_ref().clone(),
                offset: r.offset.0,
                size,
                at: self.err(root, w.span(), Some(format!("window[{i}]")), ""),
            });
        }
        let (lends, borrows) = self.lending(root, &raw, &topo)?;
        topo.lends = lends;
        topo.borrows = borrows;
        let faults = self.faults(root, &raw, &topo)?;
        Ok(Scenario {
            topology: topo,
            windows,
            faults,
        })
    }

    /// Checks `[[lend]]` and `[[borrow]]`: hosts and devices exist, a function is lent
    /// once, a borrow names a lent function of another host, borrow names are unique.
    fn lending(
        &self,
        root: usize,
        raw: &RawFile,
        topo: &Topology,
    ) -> Result<(Vec<LendDecl>, Vec<BorrowDecl>), ScenarioError> {
        let host_of = |s: &Spanned<String>, key: String| -> Result<HostId, ScenarioError> {
            topo.host_by_name(s.get_ref()).ok_or_else(|| {
                let names: Vec<&String> = topo.hosts.iter().map(|h| &h.name).collect();
                self.err(
                    root,
                    s.span(),
                    Some(key),
                    &format!(
                        "unknown host `{}` (hosts: {})",
                        s.get_ref(),
                        name_list(names)
                    ),
                )
            })
        };
        let function_of = |host: HostId,
                           dev: &str,
                           s: &Spanned<String>,
                           key: String|
         -> Result<NodeId, ScenarioError> {
            let (d, pf) = match dev.rsplit_once(".pf") {
                Some((d, p)) => (d, p.parse::<usize>().ok()),
                None => (dev, Some(0)),
            };
            let h = topo.host(host);
            let found = topo
                .device_by_name(host, d)
                .and_then(|id| pf.and_then(|pf| topo.devices[id as usize].functions.get(pf)));
            found.copied().ok_or_else(|| {
                let names: Vec<&String> = h
                    .devices
                    .iter()
                    .map(|&d| &topo.devices[d as usize].name)
                    .collect();
                self.err(
                    root,
                    s.span(),
                    Some(key),
                    &format!(
                        "host `{}` has no device function `{dev}` (devices: {})",
                        h.name,
                        name_list(names)
                    ),
                )
            })
        };
        let mut lends: Vec<LendDecl> = Vec::new();
        for (i, l) in raw.lend.iter().enumerate() {
            let r = l.get_ref();
            let host = host_of(&r.host, format!("lend[{i}].host"))?;
            let key = format!("lend[{i}].device");
            let function = function_of(host, r.device.get_ref(), &r.device, key.clone())?;
            if let Some(j) = lends.iter().position(|x| x.function == function) {
                return Err(self.err(
                    root,
                    r.device.span(),
                    Some(key),
                    &format!(
                        "`{}.{}` is already lent by lend[{j}]",
                        r.host.get_ref(),
                        r.device.get_ref()
                    ),
                ));
            }
            lends.push(LendDecl {
                host,
                function,
                device: r.device.get_ref().clone(),
            });
        }
        let mut borrows: Vec<BorrowDecl> = Vec::new();
        for (i, b) in raw.borrow.iter().enumerate() {
            let r = b.get_ref();
            let host = host_of(&r.host, format!("borrow[{i}].host"))?;
            let name = r.name.get_ref();
            if !valid_name(name) {
                return Err(self.err(
                    root,
                    r.name.span(),
                    Some(format!("borrow[{i}].name")),
                    "borrow names use letters, digits, `_` and `-`",
                ));
            }
            if let Some(j) = borrows.iter().position(|x| &x.name == name) {
                return Err(self.err(
                    root,
                    r.name.span(),
                    Some(format!("borrow[{i}].name")),
                    &format!("duplicate borrow name `{name}` (also borrow[{j}])"),
                ));
            }
            let key = format!("borrow[{i}].device");
            let dev = r.device.get_ref();
            let (lname, rest) = dev.split_once('.').ok_or_else(|| {
                self.err(
                    root,
                    r.device.span(),
                    Some(key.clone()),
                    &format!("`{dev}` is not `lender.device`"),
                )
            })?;
            let lender = topo.host_by_name(lname).ok_or_else(|| {
                self.err(
                    root,
                    r.device.span(),
                    Some(key.clone()),
                    &format!("`{dev}` names unknown host `{lname}`"),
                )
            })?;
            let function = function_of(lender, rest, &r.device, key.clone())?;
            if !lends.iter().any(|l| l.function == function) {
                return Err(self.err(
                    root,
                    r.device.span(),
                    Some(key),
                    &format!("`{dev}` is borrowed but no [[lend]] lends it"),
                ));
            }
            if lender == host {
                return Err(self.err(
                    root,
                    r.host.span(),
                    Some(format!("borrow[{i}].host")),
                    &format!(
                        "host `{}` cannot borrow its own device `{dev}`",
                        r.host.get_ref()
                    ),
                ));
            }
            borrows.push(BorrowDecl {
                name: name.clone(),
                host,
                function,
                device: dev.clone(),
                exclusive: r.exclusive,
            });
        }
        Ok((lends, borrows))
    }

    /// `[[fault]]`s, each checked against the topology; names unique.
    fn faults(
        &self,
        root: usize,
        raw: &RawFile,
        topo: &Topology,
    ) -> Result<Vec<crate::faults::FaultSpec>, ScenarioError> {
        let mut out: Vec<crate::faults::FaultSpec> = Vec::with_capacity(raw.fault.len());
        for (i, f) in raw.fault.iter().enumerate() {
            let r = f.get_ref();
            let spec = crate::faults::validate(topo, r).map_err(|(key, msg)| {
                let span = match key {
                    "kind" => r.kind.span(),
                    "at" => r.at.span(),
                    "target" => r.target.span(),
                    _ => r.duration.as_ref().map_or(f.span(), |d| d.span()),
                };
                self.err(root, span, Some(format!("fault[{i}].{key}")), &msg)
            })?;
            if let (Some(n), Some(first)) = (
                &r.name,
                out.iter()
                    .position(|o| o.name.is_some() && o.name == spec.name),
            ) {
                return Err(self.err(
                    root,
                    n.span(),
                    Some(format!("fault[{i}].name")),
                    &format!("duplicate fault name `{}` (fault[{first}])", n.get_ref()),
                ));
            }
            out.push(spec);
        }
        Ok(out)
    }

    /// Builds host `name` from `hr` (a `[[host]]`, or a cluster's template, whose keys
    /// errors name under `hkey`).
    fn host(
        &self,
        file: usize,
        hkey: &str,
        name: &str,
        hr: &RawHost,
        pid: u32,
        topo: &mut Topology,
    ) -> Result<(), ScenarioError> {
        let hkey = hkey.to_string();
        let host_id = topo.hosts.len() as HostId;
        let platform = &topo.platforms[pid as usize];
        let mmio32 = match &hr.mmio32 {
            Some(m) => {
                let [a, b] = *m.get_ref();
                if a.0 >= b.0 || b.0 > FOUR_GIB || a.0 % MIB != 0 || b.0 % MIB != 0 {
                    return Err(self.err(
                        file,
                        m.span(),
                        Some(format!("{hkey}.mmio32")),
                        "mmio32 must be [base, limit) below 4 GiB, 1 MiB aligned, base < limit",
                    ));
                }
                (a.0, b.0)
            }
            None => MMIO32_DEFAULT,
        };
        // RAM: node by node from 0, skipping the 32-bit MMIO hole [mmio32.0, 4 GiB).
        let mut regions = Vec::new();
        let mut cursor = 0u64;
        for n in 0..platform.numa_nodes() {
            let mut left = platform.node_bytes(n);
            let mut node_offset = 0;
            while left > 0 {
                if cursor >= mmio32.0 && cursor < FOUR_GIB {
                    cursor = FOUR_GIB;
                }
                let room = if cursor < mmio32.0 {
                    mmio32.0 - cursor
                } else {
                    u64::MAX
                };
                let len = left.min(room);
                regions.push(Region {
                    start: cursor,
                    end: cursor + len,
                    owner: Owner::Ram {
                        node: n,
                        node_offset,
                    },
                });
                cursor += len;
                node_offset += len;
                left -= len;
            }
        }
        let top_of_ram = cursor.max(FOUR_GIB);
        let mmio64_base = match &hr.mmio64_base {
            Some(b) => {
                let v = b.get_ref().0;
                if v < top_of_ram || v % MIB != 0 {
                    return Err(self.err(file, b.span(), Some(format!("{hkey}.mmio64_base")), &format!("mmio64_base must be 1 MiB aligned and at or above the top of RAM ({:#x})", top_of_ram)));
                }
                v
            }
            // assumption: firmware starts the 64-bit window at the next 64 GiB boundary.
            None => top_of_ram.next_multiple_of(64 << 30),
        };

        let mps = match &hr.mps_bytes {
            Some(m) if ![128, 256, 512, 1024, 2048, 4096].contains(m.get_ref()) => {
                return Err(self.err(
                    file,
                    m.span(),
                    Some(format!("{hkey}.mps_bytes")),
                    "mps_bytes must be 128, 256, 512, 1024, 2048 or 4096",
                ));
            }
            Some(m) => *m.get_ref(),
            // assumption: 256 B, what server firmware commonly programs (REFERENCE.md §2's PXH830 testbeds)
            None => 256,
        };
        if let Some(t) = platform
            .timing
            .as_ref()
            .filter(|t| t.read_completion_bytes < t.rcb_bytes)
        {
            return Err(self.err(
                file,
                hr.platform.span(),
                Some(format!("platform.{}.timing.read_completion_bytes", platform.name)),
                &format!(
                    "read_completion_bytes ({}) is below the read completion boundary rcb_bytes ({}): \
                     completions are whole multiples of it",
                    t.read_completion_bytes, t.rcb_bytes
                ),
            ));
        }
        if let Some(t) = platform.timing.as_ref().filter(|t| t.rcb_bytes > mps) {
            return Err(self.err(
                file,
                hr.platform.span(),
                Some(format!("platform.{}.timing.rcb_bytes", platform.name)),
                &format!(
                    "rcb_bytes ({}) is above this host's max payload size ({mps} B)",
                    t.rcb_bytes
                ),
            ));
        }
        // Names in this host: root complexes first.
        let mut names: HashMap<String, (Range<usize>, NodeId)> = HashMap::new();
        let mut roots = Vec::new();
        let nv = platform.uncore_vertices();
        let rc_vertices: Vec<(u32, String)> = if platform.iohs.is_empty() {
            (0..platform.packages)
                .map(|v| (v, format!("rc{v}")))
                .collect()
        } else {
            (platform.packages..nv)
                .map(|v| (v, platform.vertex_name(v)))
                .collect()
        };
        let timed = platform.timing.is_some();
        for (v, name) in rc_vertices {
            let id = topo.nodes.len() as NodeId;
            topo.nodes.push(Node {
                host: host_id,
                name: name.clone(),
                kind: NodeKind::RootComplex { vertex: v },
                parent: None,
                link: None,
                depth: 0,
                root: id,
                rid: Rid::default(),
                port_rid: None,
                children: vec![],
                bars: vec![],
                window32: None,
                window64: None,
                dma_mask_bits: 64,
            });
            names.insert(name, (0..0, id));
            roots.push(id);
        }
        let mut host = Host {
            name: name.to_string(),
            platform: pid,
            iommu: hr.iommu,
            roots: roots.clone(),
            mmio32,
            mmio64_base,
            mps,
            top_of_ram,
            regions,
            nodes: roots.clone(),
            devices: vec![],
            ntbs: vec![],
        };
        let mut pending: Vec<(NodeId, Spanned<String>, String)> = Vec::new(); // node, parent ref, key
        let reserved = |n: &str| {
            n == "ram" || n == "cpu" || (n.starts_with("cpu") && n[3..].parse::<u32>().is_ok())
        };
        let claim = |b: &Builder,
                     names: &mut HashMap<String, (Range<usize>, NodeId)>,
                     n: &Spanned<String>,
                     key: &str,
                     id: NodeId|
         -> Result<(), ScenarioError> {
            let s = n.get_ref();
            if !valid_name(s) || reserved(s) {
                return Err(b.err(file, n.span(), Some(key.into()), &format!("`{s}` is not a usable component name (letters, digits, `_`, `-`; `ram` and `cpuN` are reserved)")));
            }
            if names.contains_key(s) {
                return Err(b.err(
                    file,
                    n.span(),
                    Some(key.into()),
                    &format!("duplicate name `{s}` in host `{name}`"),
                ));
            }
            names.insert(s.clone(), (n.span(), id));
            Ok(())
        };
        let new_node = |topo: &mut Topology,
                        name: String,
                        kind: NodeKind,
                        link: Option<Link>,
                        mask: u8,
                        bars: Vec<Bar>|
         -> NodeId {
            let id = topo.nodes.len() as NodeId;
            topo.nodes.push(Node {
                host: host_id,
                name,
                kind,
                parent: None,
                link,
                depth: 0,
                root: 0,
                rid: Rid::default(),
                port_rid: None,
                children: vec![],
                bars,
                window32: None,
                window64: None,
                dma_mask_bits: mask,
            });
            id
        };
        let mut fixed: Vec<(NodeId, u8, Range<usize>)> = Vec::new();
        for (si, s) in hr.switch.iter().enumerate() {
            let r = s.get_ref();
            let key = format!("{hkey}.switch[{si}]");
            let chip = self.find_board_chip(
                file,
                &r.chip,
                &format!("{key}.chip"),
                "a cluster switch chip goes in [[cluster_switch]], not inside a host",
            )?;
            let link = self.link(file, &r.link, &format!("{key}.link"))?;
            let id = new_node(
                topo,
                r.name.get_ref().clone(),
                NodeKind::Switch {
                    chip,
                    adapter: None,
                },
                Some(link),
                64,
                vec![],
            );
            claim(self, &mut names, &r.name, &format!("{key}.name"), id)?;
            pending.push((id, r.parent.clone(), format!("{key}.parent")));
        }
        for (di, d) in hr.device.iter().enumerate() {
            let r = d.get_ref();
            let key = format!("{hkey}.device[{di}]");
            let model = match &r.device_model {
                Some(m) => Some(self.device_models.get(m.get_ref()).ok_or_else(|| {
                    let known: Vec<&str> = self.device_models.keys().map(|s| s.as_str()).collect();
                    self.err(
                        file,
                        m.span(),
                        Some(format!("{key}.device_model")),
                        &format!(
                            "unknown device model `{}` (defined: {})",
                            m.get_ref(),
                            name_list(known)
                        ),
                    )
                })?),
                None => None,
            };
            let mkey = r
                .device_model
                .as_ref()
                .map(|m| format!("device_model.{}", m.get_ref()))
                .unwrap_or_default();
            let mraw = model.map(|m| m.raw.get_ref());
            let kind = match (r.kind.as_ref().map(|k| *k.get_ref()), mraw.and_then(|m| m.kind)) {
                (Some(k), Some(mk)) if k != mk => {
                    return Err(self.err(
                        file,
                        r.kind.as_ref().map_or(d.span(), |k| k.span()),
                        Some(format!("{key}.kind")),
                        &format!("the device's kind differs from its model's ({mk:?})"),
                    ))
                }
                (Some(k), _) | (None, Some(k)) => k,
                (None, None) => {
                    return Err(self.err(
                        file,
                        d.span(),
                        Some(format!("{key}.kind")),
                        "a device needs `kind` (nic, nvme, gpu, rnic or other) or a `device_model` that gives it",
                    ))
                }
            };
            let mask = match (
                &r.dma_mask_bits,
                mraw.and_then(|m| m.dma_mask_bits.as_ref()),
            ) {
                (Some(m), _) => self.check_mask(file, m, &key)?,
                (None, Some(m)) => *m.get_ref(),
                (None, None) => 64,
            };
            // BARs and link: the device's own, else its model's (named in errors where written).
            let (bars, bars_at) = match (&r.bars, mraw.and_then(|m| m.bars.as_ref()), model) {
                (Some(b), _, _) => (b.clone(), (file, key.clone())),
                (None, Some(b), Some(m)) => (b.clone(), (m.file, mkey.clone())),
                _ => (vec![], (file, key.clone())),
            };
            let dev_id = topo.devices.len() as DeviceId;
            let mut funcs: Vec<FunctionSpec> = Vec::new();
            let model_link = model.and_then(|m| m.raw.get_ref().link.clone().map(|l| (l, m.file)));
            match (&r.functions, &r.parent, &r.link) {
                (Some(fs), None, None) => {
                    if fs.get_ref().is_empty() || fs.get_ref().len() > 8 {
                        return Err(self.err(
                            file,
                            fs.span(),
                            Some(format!("{key}.functions")),
                            "a device has 1..=8 functions",
                        ));
                    }
                    for (fi, f) in fs.get_ref().iter().enumerate() {
                        let fr = f.get_ref();
                        let fkey = format!("{key}.functions[{fi}]");
                        let (bars, bars_at) = match &fr.bars {
                            Some(b) => (b.clone(), (file, fkey.clone())),
                            None => (bars.clone(), bars_at.clone()),
                        };
                        funcs.push(FunctionSpec {
                            parent: fr.parent.clone(),
                            link: fr.link.clone(),
                            link_at: (file, fkey.clone()),
                            bars,
                            bars_at,
                            bdf: fr.bdf.clone(),
                            key: fkey,
                        });
                    }
                }
                (None, Some(p), link) => {
                    let (link, link_at) = match (link, model_link) {
                        (Some(l), _) => (l.clone(), (file, key.clone())),
                        (None, Some((l, mf))) => (l, (mf, mkey.clone())),
                        (None, None) => {
                            return Err(self.err(
                                file,
                                d.span(),
                                Some(format!("{key}.link")),
                                "a device needs `link` (or a `device_model` that gives it)",
                            ))
                        }
                    };
                    funcs.push(FunctionSpec {
                        parent: p.clone(),
                        link,
                        link_at,
                        bars,
                        bars_at,
                        bdf: r.bdf.clone(),
                        key: key.clone(),
                    })
                }
                (Some(_), _, _) => return Err(self.err(
                    file,
                    d.span(),
                    Some(key),
                    "a multi-PF device gives `functions` instead of `parent` and `link`, not both",
                )),
                _ => {
                    return Err(self.err(
                        file,
                        d.span(),
                        Some(key),
                        "a device needs `parent` and `link` (or `functions` for a multi-PF device)",
                    ))
                }
            }
            claim(self, &mut names, &r.name, &format!("{key}.name"), u32::MAX)?;
            let multi = funcs.len() > 1;
            // Timing: the model's, then the device's own key by key.
            let (mut timing, mut basis) = model.map(|m| m.timing.clone()).unwrap_or_default();
            let (own, own_basis) = self.timing_table(
                file,
                &r.timing,
                device_rule,
                &DEVICE_TIMING_KEYS,
                &format!("{key}.timing"),
            )?;
            timing.extend(own);
            basis.extend(own_basis);
            let has_bars = funcs.iter().any(|f| !f.bars.is_empty());
            let timed_model = self.device_timing(
                file,
                d.span(),
                &key,
                (&timing, basis),
                timed,
                kind,
                has_bars,
            )?;
            let mut device = Device {
                host: host_id,
                name: r.name.get_ref().clone(),
                kind,
                model: if r.model.is_empty() {
                    mraw.map(|m| m.model.clone()).unwrap_or_default()
                } else {
                    r.model.clone()
                },
                functions: vec![],
                labels: vec![],
                timing,
                timed: timed_model,
                device_model: r.device_model.as_ref().map(|m| m.get_ref().clone()),
            };
            for (pf, f) in funcs.into_iter().enumerate() {
                let FunctionSpec {
                    parent,
                    link,
                    link_at,
                    bars,
                    bars_at,
                    bdf,
                    key: fkey,
                } = f;
                let link = self.link(link_at.0, &link, &format!("{}.link", link_at.1))?;
                let mut out = Vec::new();
                let mut index = 0u8;
                for (bi, b) in bars.iter().enumerate() {
                    let br = b.get_ref();
                    let (bfile, bkey) = (bars_at.0, format!("{}.bars[{bi}]", bars_at.1));
                    let size = br.size.get_ref().0;
                    if !size.is_power_of_two() || size < 16 {
                        return Err(self.err(bfile, br.size.span(), Some(format!("{bkey}.size")), &format!("a BAR size must be a power of two of at least 16 bytes, not {size}")));
                    }
                    let bits = br.bits.as_ref().map(|b| *b.get_ref()).unwrap_or(64);
                    if bits != 32 && bits != 64 {
                        return Err(self.err(
                            bfile,
                            br.bits.as_ref().map(|b| b.span()).unwrap_or(b.span()),
                            Some(format!("{bkey}.bits")),
                            "BAR bits must be 32 or 64",
                        ));
                    }
                    if bits == 32 && (br.above_4g == Some(true) || size > FOUR_GIB / 2) {
                        return Err(self.err(
                            bfile,
                            b.span(),
                            Some(bkey),
                            "a 32-bit BAR cannot be placed above 4 GiB or exceed 2 GiB",
                        ));
                    }
                    if index > 5 || (bits == 64 && index > 4) {
                        return Err(self.err(
                            bfile,
                            b.span(),
                            Some(bkey),
                            "a function has at most six 32-bit BAR slots (a 64-bit BAR takes two)",
                        ));
                    }
                    let above =
                        bits == 64 && (br.above_4g == Some(true) || size > HIGH_BAR_THRESHOLD);
                    let mut bar = Bar {
                        index,
                        size,
                        bits64: bits == 64,
                        prefetchable: br.prefetchable.unwrap_or(bits == 64),
                        addr: if above { u64::MAX } else { 0 },
                    };
                    if let Some(a) = &br.address {
                        let addr = a.get_ref().0;
                        if addr % size != 0 || (bits == 32 && addr + size > FOUR_GIB) {
                            return Err(self.err(bfile, a.span(), Some(format!("{bkey}.address")), &format!("a fixed BAR address must be aligned to its size ({}) and fit its width", fmt_size(size))));
                        }
                        bar.addr = addr;
                        fixed.push((topo.nodes.len() as NodeId, index, a.span()));
                    }
                    out.push(bar);
                    index += if bits == 64 { 2 } else { 1 };
                }
                let nname = if multi {
                    format!("{}.pf{pf}", r.name.get_ref())
                } else {
                    r.name.get_ref().clone()
                };
                let id = new_node(
                    topo,
                    nname,
                    NodeKind::Function {
                        device: dev_id,
                        pf: pf as u8,
                    },
                    Some(link),
                    mask,
                    out,
                );
                device.functions.push(id);
                device.labels.push(bdf);
                pending.push((id, parent, format!("{fkey}.parent")));
            }
            names.get_mut(r.name.get_ref()).expect("claimed above").1 = device.functions[0];
            topo.devices.push(device);
            host.devices.push(dev_id);
        }
        for (ni, n) in hr.ntb.iter().enumerate() {
            let r = n.get_ref();
            let key = format!("{hkey}.ntb[{ni}]");
            let spec = self
                .adapters
                .iter()
                .find(|a| &a.name == r.adapter.get_ref())
                .cloned()
                .ok_or_else(|| {
                    let known: Vec<&str> = self.adapters.iter().map(|a| a.name.as_str()).collect();
                    self.err(
                        file,
                        r.adapter.span(),
                        Some(format!("{key}.adapter")),
                        &format!(
                            "unknown NTB adapter `{}` (known: {})",
                            r.adapter.get_ref(),
                            name_list(known)
                        ),
                    )
                })?;
            let chip = self
                .chips
                .iter()
                .position(|c| c.name == spec.chip)
                .expect("adapter chips are validated") as u32;
            let link = match &r.link {
                Some(l) => self.link(file, l, &format!("{key}.link"))?,
                None => Link {
                    gen: spec.gen,
                    width: spec.width,
                    cable: false,
                },
            };
            let bar_size = r
                .bar_size
                .as_ref()
                .map(|b| b.get_ref().0)
                .unwrap_or(spec.bar_size);
            let windows = r
                .lut_windows
                .as_ref()
                .map(|w| *w.get_ref())
                .unwrap_or(spec.lut_windows);
            if r.bar_size.is_some() || r.lut_windows.is_some() {
                let bs = r.bar_size.as_ref().map_or(n.span(), |b| b.span());
                let ws = r.lut_windows.as_ref().map_or(n.span(), |w| w.span());
                self.check_lut(file, bs, ws, bar_size, windows, &key)?;
            }
            let ntb_id = topo.ntbs.len() as NtbId;
            let chip_node = new_node(
                topo,
                r.name.get_ref().clone(),
                NodeKind::Switch {
                    chip,
                    adapter: Some(ntb_id),
                },
                Some(link),
                64,
                vec![],
            );
            claim(self, &mut names, &r.name, &format!("{key}.name"), chip_node)?;
            let bars = vec![
                Bar {
                    index: 0,
                    size: NTB_REG_BAR,
                    bits64: false,
                    prefetchable: false,
                    addr: 0,
                },
                Bar {
                    index: 2,
                    size: bar_size,
                    bits64: true,
                    prefetchable: true,
                    addr: u64::MAX,
                },
            ];
            let fn_node = new_node(
                topo,
                format!("{}/ntb", r.name.get_ref()),
                NodeKind::NtbFunction { ntb: ntb_id },
                None,
                64,
                bars,
            );
            topo.nodes[fn_node as usize].parent = Some(chip_node);
            topo.nodes[chip_node as usize].children.push(fn_node);
            pending.push((chip_node, r.parent.clone(), format!("{key}.parent")));
            topo.ntbs.push(Ntb {
                host: host_id,
                name: r.name.get_ref().clone(),
                adapter: spec,
                chip_node,
                fn_node,
                lut_windows: windows,
                window_size: bar_size / windows as u64,
                window_bar: 2,
                cables: vec![],
            });
            host.ntbs.push(ntb_id);
        }
        // Parents: a root complex or a switch of this host.
        for (id, parent, key) in &pending {
            let p = parent.get_ref();
            let (_, pid) = names.get(p).cloned().ok_or_else(|| {
                let parents = names.iter().filter_map(|(n, (_, id))| {
                    matches!(
                        topo.nodes[*id as usize].kind,
                        NodeKind::RootComplex { .. } | NodeKind::Switch { adapter: None, .. }
                    )
                    .then_some(n.as_str())
                });
                self.err(
                    file,
                    parent.span(),
                    Some(key.clone()),
                    &format!(
                        "`{p}` is not a root complex or switch of host `{}` (root complexes and switches: {})",
                        name,
                        name_list(parents)
                    ),
                )
            })?;
            let pn = &topo.nodes[pid as usize];
            let ok = matches!(
                pn.kind,
                NodeKind::RootComplex { .. } | NodeKind::Switch { adapter: None, .. }
            );
            if !ok {
                return Err(self.err(file, parent.span(), Some(key.clone()), &format!("`{p}` cannot be a parent: only root complexes and switches have downstream ports")));
            }
            topo.nodes[*id as usize].parent = Some(pid);
            topo.nodes[pid as usize].children.push(*id);
        }
        // Cycles among switches: walk up from every node.
        for (id, parent, key) in &pending {
            let mut seen = 0;
            let mut cur = *id;
            while let Some(p) = topo.nodes[cur as usize].parent {
                cur = p;
                seen += 1;
                if seen > topo.nodes.len() {
                    return Err(self.err(
                        file,
                        parent.span(),
                        Some(key.clone()),
                        &format!(
                            "cycle: `{}` is (indirectly) its own parent",
                            topo.nodes[*id as usize].name
                        ),
                    ));
                }
            }
        }
        // Ports and lanes of every switch.
        let all: Vec<NodeId> = (roots[0]..topo.nodes.len() as NodeId).collect();
        for &id in &all {
            if let NodeKind::Switch { chip, adapter } = topo.nodes[id as usize].kind {
                let c = &self.chips[chip as usize];
                let n = &topo.nodes[id as usize];
                let down: Vec<NodeId> = n
                    .children
                    .iter()
                    .copied()
                    .filter(|&ch| topo.nodes[ch as usize].link.is_some())
                    .collect();
                let used_ports = down.len() as u32 + 1 + if adapter.is_some() { 1 } else { 0 };
                let lanes: u32 = down
                    .iter()
                    .map(|&ch| topo.nodes[ch as usize].link.unwrap().width as u32)
                    .sum::<u32>()
                    + n.link.map(|l| l.width as u32).unwrap_or(0);
                if used_ports > c.ports || lanes > c.lanes {
                    // Named and located as the switch (or NTB adapter) itself: its key
                    // path and its `name`.
                    let key = pending
                        .iter()
                        .find(|p| p.0 == id)
                        .map(|p| p.2.strip_suffix(".parent").unwrap_or(&p.2).to_string())
                        .unwrap_or_else(|| hkey.to_string());
                    let span = names
                        .get(&n.name)
                        .filter(|(_, nid)| *nid == id)
                        .map(|(span, _)| span.clone())
                        .unwrap_or(0..0);
                    let mut widths: Vec<String> = Vec::new();
                    if let Some(l) = n.link {
                        widths.push(format!("upstream x{}", l.width));
                    }
                    for &ch in &down {
                        let child = &topo.nodes[ch as usize];
                        if let Some(l) = child.link {
                            widths.push(format!("`{}` x{}", child.name, l.width));
                        }
                    }
                    return Err(self.err(
                        file,
                        span,
                        Some(key),
                        &format!(
                            "switch `{}` ({}) uses {used_ports} ports and {lanes} lanes ({}); the chip has {} ports and {} lanes",
                            n.name,
                            c.name,
                            widths.join(", "),
                            c.ports,
                            c.lanes
                        ),
                    ));
                }
            }
        }
        let nodes_of_host: Vec<NodeId> = all;
        host.nodes = nodes_of_host;
        // Depth, root, bus numbers and requester IDs, in tree order.
        let mut bus: u32 = 0;
        for &rc in roots.iter() {
            let root_bus = bus;
            bus += 1;
            topo.nodes[rc as usize].rid = Rid::new(root_bus as u8, 0, 0);
            let kids = topo.nodes[rc as usize].children.clone();
            for (port, &c) in kids.iter().enumerate() {
                if port >= 31 {
                    return Err(self.err(
                        file,
                        0..0,
                        Some(hkey.clone()),
                        &format!(
                            "root complex {} has more than 31 root ports",
                            topo.nodes[rc as usize].name
                        ),
                    ));
                }
                let port_rid = Rid::new(root_bus as u8, port as u8 + 1, 0);
                enumerate(topo, c, rc, 1, port_rid, &mut bus)
                    .map_err(|m| self.err(file, 0..0, Some(hkey.clone()), &m))?;
            }
        }
        // BARs and bridge windows.
        place_host(topo, &mut host, &fixed)
            .map_err(|(m, span)| self.err(file, span.unwrap_or(0..0), Some(hkey.clone()), &m))?;
        topo.hosts.push(host);
        Ok(())
    }

    /// Checks a `[cluster]` and works out its shape: the tree's switches per level, its
    /// hosts, and the links. Every switch of the tree must have the ports and lanes for
    /// its cables, so an impossible tree is refused here, at the key that makes it so.
    fn cluster_plan<'a>(
        &self,
        file: usize,
        c: &'a Spanned<RawCluster>,
    ) -> Result<ClusterPlan<'a>, ScenarioError> {
        let r = c.get_ref();
        let key = |k: &str| Some(format!("cluster.{k}"));
        let chip = self.find_chip(file, &r.switch_chip, "cluster.switch_chip")?;
        let spec = &self.chips[chip as usize];
        if !spec.cluster {
            return Err(self.err(
                file,
                r.switch_chip.span(),
                key("switch_chip"),
                &format!("chip `{}` is not a cluster switch chip", spec.name),
            ));
        }
        let pattern = |p: &Spanned<String>, k: &str| {
            NamePattern::parse(p.get_ref()).map_err(|m| self.err(file, p.span(), key(k), &m))
        };
        let switch_names = pattern(&r.switch_names, "switch_names")?;
        let host_names = pattern(&r.host_names, "host_names")?;
        if let Some(t) = &r.host.get_ref().name {
            return Err(self.err(
                file,
                t.span(),
                key("host.name"),
                "the host template has no `name`: its hosts are named by `cluster.host_names`",
            ));
        }
        let host_ntb = match &r.host_ntb {
            Some(n) => {
                if !r.host.get_ref().ntb.iter().any(|x| x.get_ref().name.get_ref() == n.get_ref()) {
                    return Err(self.err(
                        file,
                        n.span(),
                        key("host_ntb"),
                        &format!("the host template has no NTB adapter `{}`", n.get_ref()),
                    ));
                }
                n.get_ref().clone()
            }
            None => match r.host.get_ref().ntb.as_slice() {
                [only] => only.get_ref().name.get_ref().clone(),
                ntbs => {
                    return Err(self.err(
                        file,
                        r.host.span(),
                        key("host_ntb"),
                        &format!(
                            "the host template has {} NTB adapters: `host_ntb` names the one cabled to the leaf switch",
                            ntbs.len()
                        ),
                    ))
                }
            },
        };
        let host_link = self.link(file, &r.host_link, "cluster.host_link")?;
        let per_leaf = *r.hosts_per_leaf.get_ref();
        if per_leaf == 0 {
            return Err(self.err(
                file,
                r.hosts_per_leaf.span(),
                key("hosts_per_leaf"),
                "a leaf switch needs at least one host",
            ));
        }
        let mut links = Vec::with_capacity(r.level.len());
        let mut sizes = vec![1u64];
        for (i, l) in r.level.iter().enumerate() {
            let lr = l.get_ref();
            let fanout = *lr.fanout.get_ref();
            if fanout == 0 {
                return Err(self.err(
                    file,
                    lr.fanout.span(),
                    key(&format!("level[{i}].fanout")),
                    "a level needs at least one switch under each switch above it",
                ));
            }
            links.push(self.link(file, &lr.link, &format!("cluster.level[{i}].link"))?);
            // Too large a tree is refused below, with its host count.
            sizes.push(sizes[i].saturating_mul(fanout as u64));
        }
        // Each level's switches: what they cable up and down, against the chip.
        for (i, down) in (0..=r.level.len()).map(|i| (i, r.level.get(i))) {
            let (children, child_link, at, k) = match down {
                Some(l) => (
                    *l.get_ref().fanout.get_ref(),
                    links[i],
                    l.get_ref().fanout.span(),
                    format!("level[{i}].fanout"),
                ),
                None => (
                    per_leaf,
                    host_link,
                    r.hosts_per_leaf.span(),
                    "hosts_per_leaf".to_string(),
                ),
            };
            let up = i.checked_sub(1).map(|u| links[u]);
            let cables = children as u64 + u64::from(up.is_some());
            let lanes =
                children as u64 * child_link.width as u64 + up.map_or(0, |l| l.width as u64);
            if cables > spec.ports as u64 || lanes > spec.lanes as u64 {
                let which = if i == 0 {
                    "the top switch".to_string()
                } else {
                    format!("each switch of level {i}")
                };
                let below = if down.is_some() { "switches" } else { "hosts" };
                let upward = up.map_or(String::new(), |l| format!(" and x{} up", l.width));
                return Err(self.err(
                    file,
                    at,
                    key(&k),
                    &format!(
                        "impossible tree: {which} would cable {children} {below} at x{}{upward}: {cables} ports and {lanes} lanes; a {} has {} ports and {} lanes",
                        child_link.width, spec.name, spec.ports, spec.lanes
                    ),
                ));
            }
        }
        let leaves = *sizes.last().expect("the top level");
        let hosts = leaves.saturating_mul(per_leaf as u64);
        if hosts > MAX_CLUSTER_HOSTS {
            return Err(self.err(
                file,
                c.span(),
                Some("cluster".into()),
                &format!("the tree has {hosts} hosts; a cluster has at most {MAX_CLUSTER_HOSTS}"),
            ));
        }
        Ok(ClusterPlan {
            raw: r,
            chip,
            switch_names,
            host_names,
            sizes,
            links,
            per_leaf,
            hosts: hosts as u32,
            host_link,
            host_ntb,
        })
    }

    /// Cluster switches and cables: a `[cluster]`'s tree first (switches top down, then
    /// each switch's cable up, then each host's cable), then the written ones.
    fn cluster(
        &self,
        file: usize,
        raw: &RawFile,
        plan: Option<&ClusterPlan>,
        topo: &mut Topology,
    ) -> Result<(), ScenarioError> {
        let mut switch_ids: HashMap<String, ClusterSwitchId> = HashMap::new();
        let mut add_switch = |topo: &mut Topology,
                              name: String,
                              chip: u32,
                              at: Range<usize>,
                              key: String|
         -> Result<(), ScenarioError> {
            if !valid_name(&name)
                || switch_ids.contains_key(&name)
                || topo.host_ids.contains_key(&name)
            {
                return Err(self.err(
                    file,
                    at,
                    Some(key),
                    &format!(
                        "cluster switch name `{name}` is invalid or already used by a host or switch"
                    ),
                ));
            }
            switch_ids.insert(name.clone(), topo.cluster_switches.len() as ClusterSwitchId);
            topo.cluster_switches.push(ClusterSwitch {
                name,
                chip,
                cables: vec![],
            });
            Ok(())
        };
        if let Some(p) = plan {
            let total: u64 = p.sizes.iter().sum();
            topo.cluster_switches.reserve(total as usize);
            for s in 0..total as u32 {
                add_switch(
                    topo,
                    p.switch_names.name(s),
                    p.chip,
                    p.raw.switch_names.span(),
                    "cluster.switch_names".into(),
                )?;
            }
        }
        for (i, c) in raw.cluster_switch.iter().enumerate() {
            let r = c.get_ref();
            let key = format!("cluster_switch[{i}]");
            let chip = self.find_chip(file, &r.chip, &format!("{key}.chip"))?;
            if !self.chips[chip as usize].cluster {
                return Err(self.err(
                    file,
                    r.chip.span(),
                    Some(format!("{key}.chip")),
                    &format!("chip `{}` is not a cluster switch chip", r.chip.get_ref()),
                ));
            }
            add_switch(
                topo,
                r.name.get_ref().clone(),
                chip,
                r.name.span(),
                format!("{key}.name"),
            )?;
        }
        let mut cabled: HashSet<(CableEnd, CableEnd)> = HashSet::new();
        if let Some(p) = plan {
            let r = p.raw;
            // Level l's switches start after all switches above it.
            let mut first = 0u32;
            for (l, level) in r.level.iter().enumerate() {
                let (size, fanout) = (p.sizes[l + 1] as u32, *level.get_ref().fanout.get_ref());
                let at = CableAt::all(
                    level.get_ref().link.span(),
                    format!("cluster.level[{l}].link"),
                );
                let start = first + p.sizes[l] as u32;
                for j in 0..size {
                    let ends = [
                        CableEnd::ClusterSwitch(start + j),
                        CableEnd::ClusterSwitch(first + j / fanout),
                    ];
                    self.add_cable(file, topo, &mut cabled, ends, p.links[l], None, &at)?;
                }
                first = start;
            }
            let at = CableAt::all(r.host_link.span(), "cluster.host_link".into());
            for i in 0..p.hosts {
                let host = i as HostId;
                let ntb = topo.ntb_by_name(host, &p.host_ntb).ok_or_else(|| {
                    let name = &topo.hosts[i as usize].name;
                    // Only a written host in a generated host's place can lack it.
                    let (span, k) = raw
                        .host
                        .iter()
                        .enumerate()
                        .find_map(|(hi, h)| {
                            let n = h.get_ref().name.as_ref()?;
                            (n.get_ref() == name).then(|| (n.span(), format!("host[{hi}].name")))
                        })
                        .unwrap_or((r.host_ntb.as_ref().map_or(r.host.span(), |n| n.span()), "cluster.host_ntb".into()));
                    self.err(
                        file,
                        span,
                        Some(k),
                        &format!(
                            "host `{name}` takes the place of a host of the cluster, whose cable plugs into its NTB adapter `{}`: it has none of that name",
                            p.host_ntb
                        ),
                    )
                })?;
                let leaf = first + i / p.per_leaf;
                let ends = [CableEnd::Ntb(ntb), CableEnd::ClusterSwitch(leaf)];
                self.add_cable(file, topo, &mut cabled, ends, p.host_link, None, &at)?;
            }
        }
        for (i, c) in raw.cable.iter().enumerate() {
            let r = c.get_ref();
            let key = format!("cable[{i}]");
            let ends = r.ends.get_ref();
            if ends.len() != 2 {
                return Err(self.err(
                    file,
                    r.ends.span(),
                    Some(format!("{key}.ends")),
                    "a cable has exactly two ends",
                ));
            }
            let link = self.link(file, &r.link, &format!("{key}.link"))?;
            let mut out = [CableEnd::Ntb(0); 2];
            for (j, e) in ends.iter().enumerate() {
                let s = e.get_ref();
                let bad = |m: String| self.err(file, e.span(), Some(format!("{key}.ends")), &m);
                out[j] = if let Some((h, n)) = s.split_once('.') {
                    let hid = topo
                        .host_by_name(h)
                        .ok_or_else(|| bad(format!("unknown host `{h}`")))?;
                    CableEnd::Ntb(
                        topo.ntb_by_name(hid, n)
                            .ok_or_else(|| bad(format!("host `{h}` has no NTB adapter `{n}`")))?,
                    )
                } else {
                    CableEnd::ClusterSwitch(*switch_ids.get(s).ok_or_else(|| {
                        bad(format!("`{s}` is neither `host.ntb` nor a cluster switch"))
                    })?)
                };
            }
            let cable_ns = match &r.cable_ns {
                Some(v) => {
                    self.check_param(file, v, Rule::Latency, &format!("{key}.cable_ns"))?;
                    Some(v.get_ref().value)
                }
                None => None,
            };
            let at = CableAt {
                span: c.span(),
                key: key.clone(),
                ends_span: r.ends.span(),
                ends_key: format!("{key}.ends"),
            };
            self.add_cable(file, topo, &mut cabled, out, link, cable_ns, &at)?;
        }
        topo.switch_group = switch_groups(topo);
        Ok(())
    }

    /// Adds one cable, checking its ends: no loop, no second cable between the same two
    /// ends, an adapter's cable ports and width, a cluster switch's ports and lanes.
    #[allow(clippy::too_many_arguments)]
    fn add_cable(
        &self,
        file: usize,
        topo: &mut Topology,
        cabled: &mut HashSet<(CableEnd, CableEnd)>,
        ends: [CableEnd; 2],
        link: Link,
        cable_ns: Option<f64>,
        at: &CableAt,
    ) -> Result<(), ScenarioError> {
        let ends_err = |m: &str| self.err(file, at.ends_span.clone(), Some(at.ends_key.clone()), m);
        if ends[0] == ends[1] {
            return Err(ends_err("a cable cannot loop back to the same port group"));
        }
        let order = |e: CableEnd| match e {
            CableEnd::Ntb(x) => (0, x),
            CableEnd::ClusterSwitch(x) => (1, x),
        };
        let pair = if order(ends[0]) <= order(ends[1]) {
            (ends[0], ends[1])
        } else {
            (ends[1], ends[0])
        };
        if !cabled.insert(pair) {
            return Err(ends_err("these two ends are already cabled together"));
        }
        let id = topo.cables.len() as CableId;
        for end in ends {
            match end {
                CableEnd::Ntb(n) => {
                    let ntb = &mut topo.ntbs[n as usize];
                    ntb.cables.push(id);
                    if ntb.cables.len() as u32 > ntb.adapter.ports || link.width > ntb.adapter.width
                    {
                        let msg = format!(
                            "adapter {} ({}) has {} cable port(s) of up to x{}",
                            ntb.name, ntb.adapter.name, ntb.adapter.ports, ntb.adapter.width
                        );
                        return Err(self.err(file, at.span.clone(), Some(at.key.clone()), &msg));
                    }
                }
                CableEnd::ClusterSwitch(s) => {
                    let cs = &mut topo.cluster_switches[s as usize];
                    cs.cables.push(id);
                    let chip = &self.chips[cs.chip as usize];
                    let lanes: u32 = link.width as u32
                        + cs.cables[..cs.cables.len() - 1]
                            .iter()
                            .map(|&c| topo.cables[c as usize].link.width as u32)
                            .sum::<u32>();
                    if cs.cables.len() as u32 > chip.ports || lanes > chip.lanes {
                        let msg = format!(
                            "cluster switch `{}` has {} cables and {lanes} lanes cabled; a {} has {} ports and {} lanes",
                            cs.name,
                            cs.cables.len(),
                            chip.name,
                            chip.ports,
                            chip.lanes
                        );
                        return Err(self.err(file, at.span.clone(), Some(at.key.clone()), &msg));
                    }
                }
            }
        }
        topo.cables.push(Cable {
            ends,
            link,
            cable_ns,
        });
        Ok(())
    }
}

/// Where a cable was written, to locate errors about it and about its ends.
struct CableAt {
    span: Range<usize>,
    key: String,
    ends_span: Range<usize>,
    ends_key: String,
}

impl CableAt {
    /// A generated cable: its errors point at the line that made it.
    fn all(span: Range<usize>, key: String) -> CableAt {
        CableAt {
            span: span.clone(),
            key: key.clone(),
            ends_span: span,
            ends_key: key,
        }
    }
}

/// A cluster's size: more hosts than this is a slip in a fan-out, not a machine.
const MAX_CLUSTER_HOSTS: u64 = 100_000;

/// A `[cluster]`, checked: switch counts per level (top first), links, host count.
struct ClusterPlan<'a> {
    raw: &'a RawCluster,
    chip: u32,
    switch_names: NamePattern,
    host_names: NamePattern,
    /// Switches per level, the top (one) first.
    sizes: Vec<u64>,
    /// The uplink of each level below the top.
    links: Vec<Link>,
    per_leaf: u32,
    hosts: u32,
    host_link: Link,
    host_ntb: String,
}

/// A name with one number in it: `h{:02}` names `h00`, `h01`, …
#[derive(Debug)]
struct NamePattern {
    prefix: String,
    suffix: String,
    width: usize,
}

impl NamePattern {
    fn parse(p: &str) -> Result<NamePattern, String> {
        let bad = || {
            format!("`{p}` is not a name pattern: letters, digits, `_` and `-` around one number, `{{}}` or zero-padded `{{:0N}}` (`h{{:02}}`)")
        };
        let (prefix, rest) = p.split_once('{').ok_or_else(bad)?;
        let (spec, suffix) = rest.split_once('}').ok_or_else(bad)?;
        let width = match spec.strip_prefix(":0") {
            None if spec.is_empty() => 0,
            Some(w) => w
                .parse::<usize>()
                .ok()
                .filter(|w| (1..=9).contains(w))
                .ok_or_else(bad)?,
            None => return Err(bad()),
        };
        let word = |s: &str| {
            s.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        };
        if !word(prefix) || !word(suffix) || prefix.len() + suffix.len() + width.max(6) > 64 {
            return Err(bad());
        }
        Ok(NamePattern {
            prefix: prefix.to_string(),
            suffix: suffix.to_string(),
            width,
        })
    }

    fn name(&self, n: u32) -> String {
        format!("{}{n:0w$}{}", self.prefix, self.suffix, w = self.width)
    }
}

/// Which cluster switches are joined by switch-to-switch cables: per switch, the lowest
/// switch id of its group.
fn switch_groups(topo: &Topology) -> Vec<u32> {
    let n = topo.cluster_switches.len();
    let mut group = vec![u32::MAX; n];
    let mut stack = Vec::new();
    for s in 0..n {
        if group[s] != u32::MAX {
            continue;
        }
        group[s] = s as u32;
        stack.push(s as u32);
        while let Some(cur) = stack.pop() {
            for &c in &topo.cluster_switches[cur as usize].cables {
                for e in topo.cables[c as usize].ends {
                    if let CableEnd::ClusterSwitch(o) = e {
                        if group[o as usize] == u32::MAX {
                            group[o as usize] = s as u32;
                            stack.push(o);
                        }
                    }
                }
            }
        }
    }
    group
}

/// Assigns buses and requester IDs below a root port, depth-first.
fn enumerate(
    topo: &mut Topology,
    id: NodeId,
    rc: NodeId,
    depth: u16,
    port_rid: Rid,
    bus: &mut u32,
) -> Result<(), String> {
    if *bus > 255 {
        return Err("PCI bus numbers exhausted (256 per segment)".into());
    }
    let b = *bus as u8;
    *bus += 1;
    {
        let n = &mut topo.nodes[id as usize];
        n.depth = depth;
        n.root = rc;
        n.port_rid = Some(port_rid);
        n.rid = Rid::new(b, 0, 0);
    }
    if topo.nodes[id as usize].is_switch() {
        // The switch's internal bus carries its downstream ports.
        if *bus > 255 {
            return Err("PCI bus numbers exhausted (256 per segment)".into());
        }
        let internal = *bus as u8;
        *bus += 1;
        let kids = topo.nodes[id as usize].children.clone();
        for (port, &c) in kids.iter().enumerate() {
            if matches!(topo.nodes[c as usize].kind, NodeKind::NtbFunction { .. }) {
                let n = &mut topo.nodes[c as usize];
                n.depth = depth + 1;
                n.root = rc;
                n.rid = Rid::new(internal, 0, 0);
                continue;
            }
            enumerate(
                topo,
                c,
                rc,
                depth + 1,
                Rid::new(internal, port as u8 + 1, 0),
                bus,
            )?;
        }
    }
    Ok(())
}

#[derive(Clone, Copy, Default)]
struct Need {
    size: u64,
    align: u64,
}

fn is_high(b: &Bar) -> bool {
    b.addr == u64::MAX
}

/// Bottom-up sizing of one pool (false = below 4 GiB, true = above) for `id`'s subtree:
/// items (sorted by `items_of`) packed; a bridge window is 1 MiB granular.
fn size_pool(topo: &Topology, id: NodeId, high: bool, fixed: &HashSet<(NodeId, u8)>) -> Need {
    let items = items_of(topo, id, high, fixed);
    let mut off = 0u64;
    let mut align = 1;
    for (_, need) in &items {
        off = off.next_multiple_of(need.align) + need.size;
        align = align.max(need.align);
    }
    Need {
        size: off.next_multiple_of(MIB),
        align: align.max(MIB),
    }
}

enum Item {
    Bar(u8),
    Child(NodeId),
}

fn items_of(
    topo: &Topology,
    id: NodeId,
    high: bool,
    fixed: &HashSet<(NodeId, u8)>,
) -> Vec<(Item, Need)> {
    let n = &topo.nodes[id as usize];
    let mut items = Vec::new();
    for b in &n.bars {
        if is_high(b) == high && !fixed.contains(&(id, b.index)) {
            items.push((
                Item::Bar(b.index),
                Need {
                    size: b.size,
                    align: b.size,
                },
            ));
        }
    }
    for &c in &n.children {
        let need = size_pool(topo, c, high, fixed);
        if need.size > 0 && subtree_has(topo, c, high, fixed) {
            items.push((Item::Child(c), need));
        }
    }
    // Largest alignment first: packs without padding when sizes are multiples of alignments.
    items.sort_by_key(|i| std::cmp::Reverse(i.1.align));
    items
}

fn subtree_has(topo: &Topology, id: NodeId, high: bool, fixed: &HashSet<(NodeId, u8)>) -> bool {
    let n = &topo.nodes[id as usize];
    n.bars
        .iter()
        .any(|b| is_high(b) == high && !fixed.contains(&(id, b.index)))
        || n.children
            .iter()
            .any(|&c| subtree_has(topo, c, high, fixed))
}

fn place(topo: &mut Topology, id: NodeId, high: bool, base: u64, fixed: &HashSet<(NodeId, u8)>) {
    let need = size_pool(topo, id, high, fixed);
    let window = Some((base, base + need.size));
    if high {
        topo.nodes[id as usize].window64 = window;
    } else {
        topo.nodes[id as usize].window32 = window;
    }
    let items = items_of(topo, id, high, fixed);
    let mut off = base;
    for (item, need) in items {
        off = off.next_multiple_of(need.align);
        match item {
            Item::Bar(i) => {
                let bar = topo.nodes[id as usize]
                    .bars
                    .iter_mut()
                    .find(|b| b.index == i)
                    .expect("bar exists");
                bar.addr = off;
            }
            Item::Child(c) => place(topo, c, high, off, fixed),
        }
        off += need.size;
    }
}

/// Places every BAR of a host and builds its sorted address map.
fn place_host(
    topo: &mut Topology,
    host: &mut Host,
    fixed_list: &[(NodeId, u8, Range<usize>)],
) -> Result<(), (String, Option<Range<usize>>)> {
    let fixed: HashSet<(NodeId, u8)> = fixed_list.iter().map(|f| (f.0, f.1)).collect();
    for high in [false, true] {
        let (mut cursor, limit) = if high {
            (host.mmio64_base, u64::MAX)
        } else {
            host.mmio32
        };
        for &rc in &host.roots.clone() {
            for c in topo.nodes[rc as usize].children.clone() {
                if !subtree_has(topo, c, high, &fixed) {
                    continue;
                }
                let need = size_pool(topo, c, high, &fixed);
                cursor = cursor.next_multiple_of(need.align);
                if cursor.checked_add(need.size).is_none_or(|end| end > limit) {
                    let what = if high {
                        "64-bit"
                    } else {
                        "32-bit (below 4 GiB)"
                    };
                    return Err((
                        format!(
                            "{what} MMIO window of host `{}` exhausted: `{}` needs {} more",
                            host.name,
                            topo.nodes[c as usize].name,
                            fmt_size(need.size)
                        ),
                        None,
                    ));
                }
                place(topo, c, high, cursor, &fixed);
                cursor += need.size;
            }
        }
    }
    let mut regions = host.regions.clone();
    for &id in &host.nodes {
        for b in &topo.nodes[id as usize].bars {
            regions.push(Region {
                start: b.addr,
                end: b.end(),
                owner: Owner::Bar {
                    node: id,
                    bar: b.index,
                },
            });
        }
    }
    regions.sort_by_key(|r| (r.start, r.end));
    for w in regions.windows(2) {
        if w[1].start < w[0].end {
            let label = |r: &Region| match r.owner {
                Owner::Ram { node, .. } => format!("RAM of node {node}"),
                Owner::Bar { node, bar } => {
                    format!("BAR{bar} of `{}`", topo.nodes[node as usize].name)
                }
            };
            let span = [w[0], w[1]].iter().find_map(|r| match r.owner {
                Owner::Bar { node, bar } => fixed_list
                    .iter()
                    .find(|f| f.0 == node && f.1 == bar)
                    .map(|f| f.2.clone()),
                _ => None,
            });
            return Err((
                format!(
                    "overlapping windows: {} [{:#x}, {:#x}) and {} [{:#x}, {:#x})",
                    label(&w[0]),
                    w[0].start,
                    w[0].end,
                    label(&w[1]),
                    w[1].start,
                    w[1].end
                ),
                span,
            ));
        }
    }
    host.regions = regions;
    Ok(())
}

/// Single-source shortest paths from vertex 0 (used to check connectivity).
fn uncore_paths(p: &Platform) -> Vec<Option<Vec<UncoreHop>>> {
    let all = all_pairs_uncore_opt(p);
    let v = p.uncore_vertices() as usize;
    all.into_iter().take(v).collect()
}

fn all_pairs_uncore(p: &Platform) -> Vec<Vec<UncoreHop>> {
    all_pairs_uncore_opt(p)
        .into_iter()
        .map(|x| x.unwrap_or_default())
        .collect()
}

/// Dijkstra from every vertex; ties keep the path found first (links in declaration order).
fn all_pairs_uncore_opt(p: &Platform) -> Vec<Option<Vec<UncoreHop>>> {
    let v = p.uncore_vertices() as usize;
    let mut out = vec![None; v * v];
    for s in 0..v {
        let mut dist = vec![u64::MAX; v];
        let mut prev: Vec<Option<UncoreHop>> = vec![None; v];
        let mut done = vec![false; v];
        dist[s] = 0;
        for _ in 0..v {
            let Some(u) = (0..v)
                .filter(|&i| !done[i] && dist[i] != u64::MAX)
                .min_by_key(|&i| (dist[i], i))
            else {
                break;
            };
            done[u] = true;
            for (li, l) in p.interconnect.iter().enumerate() {
                let other = if l.a as usize == u {
                    l.b
                } else if l.b as usize == u {
                    l.a
                } else {
                    continue;
                };
                let d = dist[u] + l.weight as u64;
                if d < dist[other as usize] {
                    dist[other as usize] = d;
                    prev[other as usize] = Some(UncoreHop {
                        link: li as u32,
                        from: u as u32,
                        to: other,
                    });
                }
            }
        }
        for t in 0..v {
            if dist[t] == u64::MAX {
                continue;
            }
            let mut path = Vec::new();
            let mut cur = t;
            while let Some(h) = prev[cur] {
                path.push(h);
                cur = h.from as usize;
            }
            path.reverse();
            out[s * v + t] = Some(path);
        }
    }
    out
}
