//! Parameter rules: what each timing parameter may be (`Rule`), the keys each table
//! knows (`PLATFORM_TIMING_KEYS`, `DEVICE_TIMING_KEYS`, …) and which rule each key
//! follows, and the checks that read a timing table against them. Values are checked
//! here, where they are written, so the timing layer never sees one it cannot use; a
//! device's keys are also checked as groups that go together (`Builder::device_timing`).

use std::collections::BTreeMap;
use std::ops::Range;

use toml::Spanned;

use super::Builder;
use crate::error::{name_list, ScenarioError};
use crate::raw::*;
use crate::topology::*;

/// What a timing parameter may be. Values are checked when the scenario loads, so the
/// timing layer only ever sees numbers it can turn into time without overflow.
#[derive(Clone, Copy, Debug)]
pub(super) enum Rule {
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
    pub(super) fn check(self, x: f64) -> Result<(), String> {
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

pub(super) fn platform_rule(key: &str) -> Option<Rule> {
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
pub const DEVICE_TIMING_KEYS: [&str; 38] = concat_keys([
    &[
        "bar_gbps",
        "bar_latency_ns",
        "bar_rcb_bytes",
        "dma_max_reads",
        "dma_mrrs_bytes",
        "launch_ns",
        "poll_ns",
    ],
    &DMA_ENGINE_KEYS,
    &NVME_TIMING_KEYS,
    &NIC_TIMING_KEYS,
    &RNIC_TIMING_KEYS,
]);

/// The keys of a DMA engine's own pace (`devices::pciebench::Engine`), all or none: the
/// largest write TLP it forms, the least time between two read requests, between the
/// starts of two write commands and between two write TLPs it issues, a read command's
/// time before its first request and after its last completion (its tags held), a write
/// command's after its last TLP, and the rate at which it stores a read's data into the
/// device's own memory.
pub const DMA_ENGINE_KEYS: [&str; 8] = [
    "dma_write_bytes",
    "dma_read_gap_ns",
    "dma_write_gap_ns",
    "dma_write_tlp_gap_ns",
    "dma_read_command_ns",
    "dma_read_complete_ns",
    "dma_write_command_ns",
    "dma_store_gbps",
];

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
/// MSI-X coalescing (an interrupt after this long or this many completions), and the
/// port's receive buffer, which pauses the link partner when full.
pub const NIC_TIMING_KEYS: [&str; 6] = [
    "nic_line_gbps",
    "nic_latency_ns",
    "nic_wire_ns",
    "nic_coalesce_ns",
    "nic_coalesce_frames",
    "nic_rx_buffer_bytes",
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

pub(super) fn netstack_rule(key: &str) -> Option<Rule> {
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

pub(super) fn device_rule(key: &str) -> Option<Rule> {
    Some(match key {
        "bar_gbps" => Rule::Bandwidth,
        "bar_latency_ns" | "launch_ns" | "poll_ns" => Rule::Latency,
        "nvme_read_ns" | "nvme_write_ns" | "nvme_command_ns" | "nvme_enable_ns" => Rule::Latency,
        "nvme_read_gbps" | "nvme_write_gbps" => Rule::Bandwidth,
        "nvme_channels" => Rule::Tags,
        "nvme_queue_pairs" | "nvme_max_queue_entries" => Rule::Queues,
        "bar_rcb_bytes" => Rule::Rcb,
        "dma_max_reads" => Rule::Tags,
        "dma_mrrs_bytes" | "dma_write_bytes" => Rule::Mrrs,
        "dma_read_gap_ns"
        | "dma_write_gap_ns"
        | "dma_write_tlp_gap_ns"
        | "dma_read_command_ns"
        | "dma_read_complete_ns"
        | "dma_write_command_ns" => Rule::Latency,
        "dma_store_gbps" => Rule::Bandwidth,
        "nic_line_gbps" => Rule::Bandwidth,
        "nic_latency_ns" | "nic_wire_ns" | "nic_coalesce_ns" => Rule::Latency,
        "nic_coalesce_frames" => Rule::Tags,
        "nic_rx_buffer_bytes" => Rule::BufferBytes,
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

pub(super) fn adapter_rule(key: &str) -> Option<Rule> {
    Some(match key {
        "ntb_translate_ns" | "dma_setup_ns" | "bar_latency_ns" => Rule::Latency,
        "bar_gbps" => Rule::Bandwidth,
        "bar_rcb_bytes" => Rule::Rcb,
        "dma_max_reads" => Rule::Tags,
        "dma_mrrs_bytes" => Rule::Mrrs,
        "nic_line_gbps" => Rule::Bandwidth,
        "nic_latency_ns" | "nic_wire_ns" | "nic_coalesce_ns" => Rule::Latency,
        "nic_coalesce_frames" => Rule::Tags,
        "nic_rx_buffer_bytes" => Rule::BufferBytes,
        _ => return None,
    })
}

/// A validated timing table: values and their basis, by key.
pub(super) type Table = (BTreeMap<String, f64>, Provenance);

impl Builder {
    /// Validates a timing table against its keys' rules: unknown keys refused, each value
    /// range-checked where it is written.
    pub(super) fn timing_table(
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

    /// Checks one value against `rule`; the message names the key's last part.
    pub(super) fn check_param(
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
    pub(super) fn device_timing(
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
            &DMA_ENGINE_KEYS,
            false,
            "a DMA engine states its write TLP size, its read, write and write-TLP issue gaps, its read and \
             write command times and its internal store rate together",
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
}
