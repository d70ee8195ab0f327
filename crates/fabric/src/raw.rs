//! The scenario file exactly as written: serde structures that mirror the TOML, with spans
//! kept on every value that validation may need to point at. Nothing here is checked
//! beyond types and unknown keys; `build.rs`-style validation lives in `scenario/`.

use std::collections::BTreeMap;

use serde::de::{self, DeserializeOwned, Deserializer, Error as _};
use serde::Deserialize;
use toml::Spanned;

use crate::basis::Basis;
use crate::units::Size;

/// A parameter value with its basis: a bare value (basis unstated) or an inline table
/// `{ value = 80.0, basis = "assumption", why = "…" }`, `basis = "calibrated", on = "…"`
/// or `basis = "reference", source = "docs/hardware.md §2"`.
#[derive(Debug, Clone)]
pub struct RawParam<T> {
    pub value: T,
    pub basis: Basis,
}

/// Timing parameters by key, each with its span and basis.
pub type RawTiming = BTreeMap<String, Spanned<RawParam<f64>>>;

impl<'de, T: DeserializeOwned> Deserialize<'de> for RawParam<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = toml::Value::deserialize(d)?;
        let value_of =
            |v: toml::Value| T::deserialize(v).map_err(|e| D::Error::custom(e.message()));
        let mut t = match v {
            toml::Value::Table(t) if t.contains_key("value") || t.contains_key("basis") => t,
            bare => {
                return Ok(RawParam {
                    value: value_of(bare)?,
                    basis: Basis::Unstated,
                })
            }
        };
        let value = t
            .remove("value")
            .ok_or_else(|| D::Error::custom("a value with a basis needs `value`"))?;
        let mut text = |k: &str| -> Result<String, D::Error> {
            match t.remove(k) {
                Some(toml::Value::String(s)) if !s.trim().is_empty() => Ok(s),
                Some(_) => Err(D::Error::custom(format!(
                    "`{k}` must be a non-empty string"
                ))),
                None => Err(D::Error::custom(format!("missing `{k}`"))),
            }
        };
        let word = text("basis").map_err(|_| {
            D::Error::custom(
                "a value with a basis needs `basis = \"reference\"` (with `source`), \"calibrated\" (with `on`) or \"assumption\" (with `why`)",
            )
        })?;
        let (basis, note) = match word.as_str() {
            "reference" => (Basis::Reference(text("source")?), "source"),
            "calibrated" => (Basis::Calibrated(text("on")?), "on"),
            "assumption" => (Basis::Assumption(text("why")?), "why"),
            other => {
                return Err(D::Error::custom(format!(
                    "unknown basis `{other}` (reference, calibrated or assumption)"
                )))
            }
        };
        if let Some(k) = t.keys().next() {
            return Err(D::Error::custom(format!(
                "unknown field `{k}`: a `{word}` value takes `value`, `basis` and `{note}`"
            )));
        }
        Ok(RawParam {
            value: value_of(value)?,
            basis,
        })
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawFile {
    pub scenario: Option<Spanned<RawMeta>>,
    #[serde(default)]
    pub include: Vec<Spanned<String>>,
    #[serde(default)]
    pub platform: BTreeMap<String, Spanned<RawPlatform>>,
    #[serde(default)]
    pub chip: BTreeMap<String, Spanned<RawChip>>,
    #[serde(default)]
    pub adapter: BTreeMap<String, Spanned<RawAdapter>>,
    /// Device models (kind, product, link, BARs, timing) that devices name with
    /// `device_model`.
    #[serde(default)]
    pub device_model: BTreeMap<String, Spanned<RawDeviceModel>>,
    #[serde(default)]
    pub host: Vec<Spanned<RawHost>>,
    /// A generated cluster: a tree of cluster switches with hosts from a template.
    pub cluster: Option<Spanned<RawCluster>>,
    #[serde(default)]
    pub cluster_switch: Vec<Spanned<RawClusterSwitch>>,
    #[serde(default)]
    pub cable: Vec<Spanned<RawCable>>,
    #[serde(default)]
    pub window: Vec<Spanned<RawWindow>>,
    /// Devices a host lends to the cluster's pool, and borrows of them (SmartIO Device
    /// Lending): carried as declarations; the systems layer performs them.
    #[serde(default)]
    pub lend: Vec<Spanned<RawLend>>,
    #[serde(default)]
    pub borrow: Vec<Spanned<RawBorrow>>,
    /// Faults injected at simulated times (`faults.rs`).
    #[serde(default)]
    pub fault: Vec<Spanned<RawFault>>,
    /// Workloads and the measurement window, for `nudma run`: read and checked by the
    /// layer that knows workload kinds (studies), carried here untouched.
    #[serde(default)]
    pub workload: Vec<toml::Value>,
    pub measure: Option<toml::Value>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawMeta {
    pub name: Spanned<String>,
    #[serde(default)]
    pub description: String,
}

/// A `[platform.X]`: every key, or `base = "Y"` and the keys that differ from platform
/// Y's (the required ones are checked once the base is applied).
#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct RawPlatform {
    /// The platform this one copies (built in, or defined by the scenario's files): each
    /// key given here replaces the base's, the timing and network-stack tables and the
    /// memory matrices key by key, the lists (interconnect, ioh, memory_node) whole.
    pub base: Option<Spanned<String>>,
    #[serde(default)]
    pub cpu: String,
    pub packages: Option<Spanned<u32>>,
    pub nodes_per_package: Option<Spanned<u32>>,
    pub cores_per_package: Option<Spanned<u32>>,
    pub threads_per_core: Option<Spanned<u32>>,
    pub clock_ghz: Option<Spanned<f64>>,
    pub llc_bytes: Option<Spanned<Size>>,
    pub llc_ways: Option<Spanned<u32>>,
    pub ddio_ways: Option<Spanned<u32>>,
    pub dram_bytes_per_node: Option<Spanned<Size>>,
    /// Root complexes re-issue peer-to-peer reads passing through them as requests of
    /// this many bytes (64 on Xeon). Absent: no splitting.
    pub root_read_split_bytes: Option<Spanned<u32>>,
    /// Root complexes forward peer-to-peer between root ports (Xeon does).
    pub root_p2p: Option<bool>,
    pub memory: Option<Spanned<RawMemory>>,
    pub interconnect: Option<Vec<Spanned<RawInterconnect>>>,
    pub ioh: Option<Vec<Spanned<RawIoh>>>,
    /// NUMA nodes without CPUs (HBM, NVDIMM, CXL or GPU memory), numbered after the
    /// packages' nodes.
    pub memory_node: Option<Vec<Spanned<RawMemoryNode>>>,
    /// Timing parameters for the timing layer (validated when the scenario loads).
    pub timing: Option<Spanned<RawTiming>>,
    /// Network-stack costs for `host::net` (validated when the scenario loads).
    pub netstack: Option<Spanned<RawTiming>>,
}

impl RawPlatform {
    pub fn interconnect(&self) -> &[Spanned<RawInterconnect>] {
        self.interconnect.as_deref().unwrap_or_default()
    }

    pub fn ioh(&self) -> &[Spanned<RawIoh>] {
        self.ioh.as_deref().unwrap_or_default()
    }

    pub fn memory_node(&self) -> &[Spanned<RawMemoryNode>] {
        self.memory_node.as_deref().unwrap_or_default()
    }
}

#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct RawMemoryNode {
    /// The package whose uncore serves the node (its home agent, or the root its
    /// memory hangs under).
    pub package: Spanned<u32>,
    pub bytes: Spanned<Size>,
    /// What memory it is: `dram`, `hbm`, `nvm`, `cxl`, `gpu` or `other`.
    pub kind: Option<Spanned<String>>,
    /// Bandwidth of the node's memory as a DMA target; absent: the platform's `dram_gbps`.
    pub gbps: Option<Spanned<RawParam<f64>>>,
}

#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct RawMemory {
    /// Row = CPU node, column = memory node; or one number for every pair.
    pub latency_ns: Option<Spanned<Matrix>>,
    pub bandwidth_gbps: Option<Spanned<Matrix>>,
}

#[derive(Debug, Clone)]
pub enum Matrix {
    Scalar(f64),
    Rows(Vec<Vec<f64>>),
}

// By hand rather than `untagged`, so that a bad entry is reported as itself, at its place,
// instead of "did not match any variant".
impl<'de> Deserialize<'de> for Matrix {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> de::Visitor<'de> for V {
            type Value = Matrix;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a number, or rows of numbers (row = CPU node, column = memory node)")
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Matrix, E> {
                Ok(Matrix::Scalar(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Matrix, E> {
                Ok(Matrix::Scalar(v as f64))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Matrix, E> {
                Ok(Matrix::Scalar(v as f64))
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, a: A) -> Result<Matrix, A::Error> {
                Vec::<Vec<f64>>::deserialize(de::value::SeqAccessDeserializer::new(a))
                    .map(Matrix::Rows)
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct RawInterconnect {
    pub ends: Spanned<Vec<Spanned<String>>>,
    #[serde(default = "default_ic_kind")]
    pub kind: Spanned<String>,
    /// Transfers per second (GT/s); with a known kind, its bandwidth (2 bytes per
    /// transfer and direction) unless `bandwidth_gbps` is given.
    pub gts: Option<Spanned<f64>>,
    pub count: Option<Spanned<u32>>,
    pub bandwidth_gbps: Option<Spanned<f64>>,
    pub latency_ns: Option<Spanned<f64>>,
    /// Routing preference between equal-length interconnect paths (lower wins).
    pub weight: Option<Spanned<u32>>,
}

fn default_ic_kind() -> Spanned<String> {
    Spanned::new(0..0, "generic".to_string())
}

#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct RawIoh {
    pub name: Spanned<String>,
}

#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct RawChip {
    #[serde(default)]
    pub description: String,
    pub lanes: Spanned<RawParam<u32>>,
    pub ports: Spanned<RawParam<u32>>,
    pub latency_ns: Spanned<RawParam<f64>>,
    #[serde(default)]
    pub cluster: bool,
    /// Receive credits per port in TLPs: [posted, non-posted, completion]; 0 = unlimited.
    pub credits: Option<Spanned<RawParam<[u16; 3]>>>,
}

#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct RawAdapter {
    #[serde(default)]
    pub description: String,
    pub chip: Spanned<String>,
    pub link: Spanned<RawLink>,
    pub bar_size: Spanned<RawParam<Size>>,
    pub lut_windows: Spanned<RawParam<u32>>,
    pub rid_lut_entries: Spanned<RawParam<u32>>,
    pub rid_reserved: Spanned<RawParam<u32>>,
    /// Cable ports; 1 when absent.
    pub ports: Option<Spanned<RawParam<u32>>>,
    #[serde(default)]
    pub timing: RawTiming,
}

/// A device model defined once (e.g. in `platforms/devices.toml`) and named by devices
/// with `device_model`; a device's own keys win over its model's.
#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct RawDeviceModel {
    /// The device model this one copies (built in, or defined by the scenario's files):
    /// each key given here replaces the base's, the timing table key by key.
    pub base: Option<Spanned<String>>,
    pub kind: Option<DeviceKind>,
    /// The product, shown in descriptions (e.g. "NVIDIA Quadro P4000").
    #[serde(default)]
    pub model: String,
    pub link: Option<Spanned<RawLink>>,
    pub bars: Option<Vec<Spanned<RawBar>>>,
    pub dma_mask_bits: Option<Spanned<u8>>,
    #[serde(default)]
    pub timing: RawTiming,
}

#[derive(Debug, Deserialize, Clone, Copy)]
#[serde(deny_unknown_fields)]
pub struct RawLink {
    pub gen: u8,
    pub width: u8,
    /// An external cable (e.g. a transparent HIB68 pair); affects nothing but display and
    /// the timing layer's per-link constants.
    #[serde(default)]
    pub cable: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawHost {
    /// Required in `[[host]]`; absent in a cluster's host template (its hosts are named
    /// by `host_names`).
    pub name: Option<Spanned<String>>,
    pub platform: Spanned<String>,
    #[serde(default)]
    pub iommu: bool,
    /// The IOMMU maps large contiguous buffers with 2 MiB pages, one IOTLB entry each
    /// (Linux's intel_iommu default); false: 4 KiB pages only (`intel_iommu=sp_off`).
    #[serde(default)]
    pub iommu_superpages: bool,
    /// 32-bit MMIO window for BARs below 4 GiB: [base, limit).
    pub mmio32: Option<Spanned<[Size; 2]>>,
    /// Where 64-bit BARs go above 4 GiB.
    pub mmio64_base: Option<Spanned<Size>>,
    /// Max payload size programmed in this host's hierarchy (bytes).
    pub mps_bytes: Option<Spanned<u32>>,
    #[serde(default)]
    pub switch: Vec<Spanned<RawSwitch>>,
    #[serde(default)]
    pub device: Vec<Spanned<RawDevice>>,
    #[serde(default)]
    pub ntb: Vec<Spanned<RawNtb>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSwitch {
    pub name: Spanned<String>,
    pub chip: Spanned<String>,
    pub parent: Spanned<String>,
    pub link: Spanned<RawLink>,
}

#[derive(Debug, Deserialize, Clone, Copy, PartialEq, Eq, Hash)]
#[serde(rename_all = "lowercase")]
pub enum DeviceKind {
    Nic,
    Nvme,
    Gpu,
    Rnic,
    Other,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawDevice {
    pub name: Spanned<String>,
    /// Required unless the device model gives it.
    pub kind: Option<Spanned<DeviceKind>>,
    /// A `[device_model.NAME]` this device is an instance of.
    pub device_model: Option<Spanned<String>>,
    #[serde(default)]
    pub model: String,
    pub parent: Option<Spanned<String>>,
    pub link: Option<Spanned<RawLink>>,
    pub bdf: Option<String>,
    #[serde(default)]
    pub bars: Option<Vec<Spanned<RawBar>>>,
    pub dma_mask_bits: Option<Spanned<u8>>,
    /// A multi-PF device: one function per entry, each with its own parent and link.
    pub functions: Option<Spanned<Vec<Spanned<RawFunction>>>>,
    /// Timing parameters of the device (over its device model's, key by key).
    #[serde(default)]
    pub timing: RawTiming,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawFunction {
    pub parent: Spanned<String>,
    pub link: Spanned<RawLink>,
    pub bdf: Option<String>,
    pub bars: Option<Vec<Spanned<RawBar>>>,
}

#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct RawBar {
    pub size: Spanned<Size>,
    pub bits: Option<Spanned<u8>>,
    pub prefetchable: Option<bool>,
    /// Ask for placement above 4 GiB (a 64-bit BAR only).
    pub above_4g: Option<bool>,
    /// A firmware-fixed address (checked for overlaps instead of allocated).
    pub address: Option<Spanned<Size>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawNtb {
    pub name: Spanned<String>,
    pub adapter: Spanned<String>,
    pub parent: Spanned<String>,
    pub link: Option<Spanned<RawLink>>,
    pub bar_size: Option<Spanned<Size>>,
    pub lut_windows: Option<Spanned<u32>>,
}

/// `[cluster]`: a tree of cluster switches written as a few lines instead of one table per
/// host, switch and cable. The top switch has, level by level, `fanout` switches under
/// each switch of the level above; every switch of the last level (the top one when there
/// are no levels) has `hosts_per_leaf` hosts made from the `host` template, each cabled by
/// its adapter `host_ntb`. Switches are numbered breadth-first from the top (0), hosts
/// leaf by leaf from 0; a `[[host]]` with a generated host's name takes its place.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCluster {
    /// The chip of every switch of the tree (a cluster switch chip).
    pub switch_chip: Spanned<String>,
    /// Switch names: a pattern with one number, `{}` or zero-padded `{:0N}` (`mxs{}`).
    pub switch_names: Spanned<String>,
    /// Levels below the top switch, top down.
    #[serde(default)]
    pub level: Vec<Spanned<RawLevel>>,
    pub hosts_per_leaf: Spanned<u32>,
    /// Host names: a pattern with one number (`h{:02}`).
    pub host_names: Spanned<String>,
    /// The cable from each host's adapter to its leaf switch.
    pub host_link: Spanned<RawLink>,
    /// The template's adapter that is cabled; may be left out when it has only one.
    pub host_ntb: Option<Spanned<String>>,
    /// The template every host is made from: a `[[host]]` without a name.
    pub host: Spanned<RawHost>,
}

/// One level of a `[cluster]` tree below the top switch.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawLevel {
    /// Switches of this level under each switch of the level above.
    pub fanout: Spanned<u32>,
    /// The cable from each switch of this level up to its parent.
    pub link: Spanned<RawLink>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawClusterSwitch {
    pub name: Spanned<String>,
    pub chip: Spanned<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCable {
    pub ends: Spanned<Vec<Spanned<String>>>,
    pub link: Spanned<RawLink>,
    /// This cable's extra propagation, when not the platform's `cable_ns` (ns).
    pub cable_ns: Option<Spanned<RawParam<f64>>>,
}

/// A static NTB window programmed from the scenario (before the SmartIO layer programs
/// them through borrow/map calls).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawLend {
    /// The lending host.
    pub host: Spanned<String>,
    /// One of its devices: `device` or `device.pfN`.
    pub device: Spanned<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawBorrow {
    /// The borrowing host.
    pub host: Spanned<String>,
    /// The lent device, `lender.device[.pfN]`.
    pub device: Spanned<String>,
    #[serde(default)]
    pub exclusive: bool,
    /// The borrow's name, unique in the scenario (what workloads name it by).
    pub name: Spanned<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawWindow {
    /// `host.ntb`: the adapter whose address LUT gets the entry.
    pub ntb: Spanned<String>,
    /// What the window reaches on the far side: `host.ram[.nodeN]` or `host.dev[.pfN].barN`.
    pub to: Spanned<String>,
    #[serde(default)]
    pub offset: Size,
    pub size: Spanned<Size>,
}

/// One `[[fault]]` as written (see `faults.rs`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawFault {
    pub name: Option<Spanned<String>>,
    pub at: Spanned<String>,
    pub kind: Spanned<String>,
    pub target: Spanned<String>,
    pub duration: Option<Spanned<String>>,
}
