//! PCI vocabulary shared by both importers: bus/device/function addresses, the device
//! classes the audit reports (`net`, `infiniband`, `nvme`, …), and PCIe link speeds
//! and generations.

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

/// A PCI address, `DDDD:BB:DD.F`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct Bdf {
    pub domain: u32,
    pub bus: u8,
    pub device: u8,
    pub function: u8,
}

impl Bdf {
    pub fn new(domain: u32, bus: u8, device: u8, function: u8) -> Self {
        Bdf {
            domain,
            bus,
            device,
            function,
        }
    }

    /// `0000_81_00_0`: the address as an identifier fragment.
    pub fn ident(&self) -> String {
        format!(
            "{:04x}_{:02x}_{:02x}_{:x}",
            self.domain, self.bus, self.device, self.function
        )
    }

    /// Finds the last `DDDD:BB:DD.F` in a path or text (sysfs device paths nest
    /// bridges, so the last address is the device itself).
    pub fn last_in(text: &str) -> Option<Bdf> {
        let bytes = text.as_bytes();
        let mut found = None;
        let mut i = 0;
        while i + 12 <= bytes.len() {
            if let Some(b) = text.get(i..i + 12).and_then(|s| s.parse::<Bdf>().ok()) {
                let before_ok = i == 0 || !bytes[i - 1].is_ascii_hexdigit();
                let after_ok = i + 12 == bytes.len() || !bytes[i + 12].is_ascii_hexdigit();
                if before_ok && after_ok {
                    found = Some(b);
                    i += 12;
                    continue;
                }
            }
            i += 1;
        }
        found
    }
}

impl fmt::Display for Bdf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:04x}:{:02x}:{:02x}.{:x}",
            self.domain, self.bus, self.device, self.function
        )
    }
}

impl Serialize for Bdf {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// Why a PCI address could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid PCI address {0:?} (expected DDDD:BB:DD.F)")]
pub struct BdfParseError(pub String);

impl FromStr for Bdf {
    type Err = BdfParseError;

    /// Accepts `DDDD:BB:DD.F` and `BB:DD.F` (domain 0).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || BdfParseError(s.to_string());
        let (rest, func) = s.rsplit_once('.').ok_or_else(err)?;
        let parts: Vec<&str> = rest.split(':').collect();
        let (domain, bus, dev) = match parts.as_slice() {
            [d, b, v] => (*d, *b, *v),
            [b, v] => ("0", *b, *v),
            _ => return Err(err()),
        };
        let hex_ok = |t: &str, max_len: usize| {
            !t.is_empty() && t.len() <= max_len && t.bytes().all(|c| c.is_ascii_hexdigit())
        };
        if !hex_ok(domain, 8) || !hex_ok(bus, 2) || !hex_ok(dev, 2) || !hex_ok(func, 1) {
            return Err(err());
        }
        let domain = u32::from_str_radix(domain, 16).map_err(|_| err())?;
        let bus = u8::from_str_radix(bus, 16).map_err(|_| err())?;
        let device = u8::from_str_radix(dev, 16).map_err(|_| err())?;
        let function = u8::from_str_radix(func, 16).map_err(|_| err())?;
        if device > 0x1f || function > 7 {
            return Err(err());
        }
        Ok(Bdf {
            domain,
            bus,
            device,
            function,
        })
    }
}

/// What a PCI function is, as the audit groups devices.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum DeviceClass {
    Net,
    Infiniband,
    Nvme,
    Storage,
    Gpu,
    Bridge,
    Other,
}

impl DeviceClass {
    pub fn as_str(&self) -> &'static str {
        match self {
            DeviceClass::Net => "net",
            DeviceClass::Infiniband => "infiniband",
            DeviceClass::Nvme => "nvme",
            DeviceClass::Storage => "storage",
            DeviceClass::Gpu => "gpu",
            DeviceClass::Bridge => "bridge",
            DeviceClass::Other => "other",
        }
    }

    /// Devices that move bulk data by DMA, whose placement the audit cares about.
    pub fn does_bulk_io(&self) -> bool {
        matches!(
            self,
            DeviceClass::Net
                | DeviceClass::Infiniband
                | DeviceClass::Nvme
                | DeviceClass::Storage
                | DeviceClass::Gpu
        )
    }
}

impl fmt::Display for DeviceClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What kind of OS-visible device hangs off a PCI function.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum OsDeviceKind {
    /// A network interface (`eth0`, `ib0`).
    Net,
    /// An RDMA/verbs device (`mlx5_0`, `qib0`).
    Openfabrics,
    /// An NVMe controller (`nvme0`).
    NvmeController,
    /// A block device (`sda`, `nvme0n1`).
    Block,
    /// A GPU (`card0`, `cuda0`).
    Gpu,
    /// A coprocessor (`mic0`, OpenCL non-GPU).
    Coproc,
    /// A DMA engine channel.
    Dma,
    /// Memory exposed as a device (DAX, CXL).
    Memory,
    Other,
}

/// A device the OS created for a PCI function.
#[derive(Clone, PartialEq, Eq, Debug, Serialize)]
pub struct OsDevice {
    pub name: String,
    pub kind: OsDeviceKind,
}

/// Maps a 24-bit PCI class code (class, subclass, prog-if) plus the OS devices found
/// on the function to the audit's device class.
pub fn classify(class_code: Option<u32>, os_devices: &[OsDevice]) -> DeviceClass {
    let has = |k: OsDeviceKind| os_devices.iter().any(|d| d.kind == k);
    let Some(code) = class_code else {
        return if has(OsDeviceKind::Net) {
            DeviceClass::Net
        } else if has(OsDeviceKind::NvmeController) {
            DeviceClass::Nvme
        } else {
            DeviceClass::Other
        };
    };
    let base = (code >> 16) & 0xff;
    let sub = (code >> 8) & 0xff;
    match (base, sub) {
        (0x01, 0x08) => DeviceClass::Nvme,
        (0x01, _) => DeviceClass::Storage,
        (0x02, 0x07) => DeviceClass::Infiniband,
        // A VPI adapter (ConnectX-3 "network controller") running IPoIB: verbs device
        // plus an `ib*` interface.
        (0x02, _)
            if has(OsDeviceKind::Openfabrics)
                && os_devices
                    .iter()
                    .any(|d| d.kind == OsDeviceKind::Net && d.name.starts_with("ib")) =>
        {
            DeviceClass::Infiniband
        }
        (0x02, _) => DeviceClass::Net,
        (0x03, _) => DeviceClass::Gpu,
        (0x06, _) => DeviceClass::Bridge,
        (0x0c, 0x06) => DeviceClass::Infiniband,
        _ => DeviceClass::Other,
    }
}

/// Parses sysfs link speed text: `8.0 GT/s PCIe`, `2.5 GT/s`, `Unknown`.
pub fn parse_link_speed(text: &str) -> Option<f64> {
    let first = text.split_whitespace().next()?;
    let v: f64 = first.parse().ok()?;
    (v.is_finite() && v > 0.0).then_some(v)
}

/// PCIe generation for a signalling rate in GT/s.
pub fn gen_from_gts(gts: f64) -> Option<u8> {
    const TABLE: [(f64, u8); 6] = [
        (2.5, 1),
        (5.0, 2),
        (8.0, 3),
        (16.0, 4),
        (32.0, 5),
        (64.0, 6),
    ];
    TABLE
        .iter()
        .find(|(rate, _)| (gts - rate).abs() < 0.01)
        .map(|&(_, g)| g)
}

/// Usable bandwidth of one lane in GB/s after line encoding, the convention hwloc
/// uses for `pci_link_speed`.
pub fn lane_gbytes(gen: u8) -> f64 {
    match gen {
        1 => 0.25,
        2 => 0.5,
        3 => 8.0 * 128.0 / 130.0 / 8.0,
        4 => 16.0 * 128.0 / 130.0 / 8.0,
        5 => 32.0 * 128.0 / 130.0 / 8.0,
        _ => 64.0 * 128.0 / 130.0 / 8.0,
    }
}

/// Recovers a (generation, width) from hwloc's link bandwidth in GB/s: the closest
/// standard combination within 2 %. hwloc keeps only the product, and gen N x2w
/// carries exactly what gen N+1 xw does; such ties go to the width nearest x8 (the
/// commonest NIC/NVMe link). The bandwidth, which is what a model needs, is right
/// either way.
pub fn estimate_gen_width(gbytes: f64) -> Option<(u8, u32)> {
    if !(gbytes.is_finite() && gbytes > 0.0) {
        return None;
    }
    let mut best: Option<(f64, u8, u32)> = None;
    for gen in 1..=6u8 {
        for width in [1u32, 2, 4, 8, 16, 32] {
            let err = (lane_gbytes(gen) * width as f64 - gbytes).abs() / gbytes;
            if err > 0.02 {
                continue;
            }
            let from_x8 = |w: u32| (w as f64 / 8.0).log2().abs();
            let better = match best {
                None => true,
                Some((e, _, w)) => {
                    err < e - 1e-9 || ((err - e).abs() <= 1e-9 && from_x8(width) < from_x8(w))
                }
            };
            if better {
                best = Some((err, gen, width));
            }
        }
    }
    best.map(|(_, g, w)| (g, w))
}

/// Every (generation, width) that carries hwloc's link bandwidth in GB/s as well as the
/// best does (within 0.01 % of each other; at most 2 % from the figure): Gen3 x16,
/// Gen4 x8, Gen5 x4 and Gen6 x2 all carry 15.75 GB/s, so the figure alone cannot tell
/// them apart.
pub fn gen_width_candidates(gbytes: f64) -> Vec<(u8, u32)> {
    if !(gbytes.is_finite() && gbytes > 0.0) {
        return Vec::new();
    }
    let all: Vec<(f64, u8, u32)> = (1..=6u8)
        .flat_map(|gen| [1u32, 2, 4, 8, 16, 32].map(|w| (gen, w)))
        .map(|(gen, w)| {
            (
                (lane_gbytes(gen) * w as f64 - gbytes).abs() / gbytes,
                gen,
                w,
            )
        })
        .filter(|(err, _, _)| *err <= 0.02)
        .collect();
    let Some(best) = all.iter().map(|x| x.0).min_by(f64::total_cmp) else {
        return Vec::new();
    };
    all.into_iter()
        .filter(|(err, _, _)| *err <= best + 1e-4)
        .map(|(_, g, w)| (g, w))
        .collect()
}

/// The state of a PCIe link as the importers could read it.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct LinkStatus {
    /// Negotiated signalling rate, GT/s (sysfs `current_link_speed`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub current_gts: Option<f64>,
    /// Negotiated lanes (sysfs `current_link_width`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub current_width: Option<u32>,
    /// What the device can do (sysfs `max_link_speed`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_gts: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_width: Option<u32>,
    /// Link bandwidth in GB/s as hwloc reports it (`pci_link_speed`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gbytes_per_s: Option<f64>,
}

impl LinkStatus {
    pub fn is_known(&self) -> bool {
        self.current_gts.is_some() || self.current_width.is_some() || self.gbytes_per_s.is_some()
    }

    /// (generation, width) of the running link as the machine reports them (sysfs rate
    /// and width), not recovered from a bandwidth.
    pub fn reported_gen_width(&self) -> Option<(u8, u32)> {
        match (self.current_gts.and_then(gen_from_gts), self.current_width) {
            (Some(g), Some(w)) if w > 0 => Some((g, w)),
            _ => None,
        }
    }

    /// (generation, width) of the running link, if the importer could tell; from
    /// hwloc's bandwidth alone a guess among equals (see [`gen_width_candidates`]).
    pub fn current_gen_width(&self) -> Option<(u8, u32)> {
        match (self.current_gts.and_then(gen_from_gts), self.current_width) {
            (Some(g), Some(w)) if w > 0 => Some((g, w)),
            _ => self.gbytes_per_s.and_then(estimate_gen_width),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bdf_parse_and_print() {
        let b: Bdf = "0000:81:00.1".parse().unwrap();
        assert_eq!(b, Bdf::new(0, 0x81, 0, 1));
        assert_eq!(b.to_string(), "0000:81:00.1");
        assert_eq!("81:00.1".parse::<Bdf>().unwrap(), b);
        assert!("0000:81:00".parse::<Bdf>().is_err());
        assert!("0000:81:20.0".parse::<Bdf>().is_err());
        assert!("pci0000:00".parse::<Bdf>().is_err());
        assert_eq!(b.ident(), "0000_81_00_1");
    }

    #[test]
    fn bandwidth_ties_are_all_candidates() {
        // hwloc's figure for Gen3 x16 is carried as well by Gen4 x8, Gen5 x4, Gen6 x2.
        assert_eq!(
            gen_width_candidates(15.753846),
            [(3, 16), (4, 8), (5, 4), (6, 2)]
        );
        // Gen3 x1 (0.985) is 1.5 % from Gen2 x2 (1.0): no tie, one candidate.
        assert_eq!(gen_width_candidates(0.984615), [(3, 1)]);
        assert_eq!(gen_width_candidates(0.25), [(1, 1)]);
        assert_eq!(gen_width_candidates(0.5), [(1, 2), (2, 1)]);
        assert!(gen_width_candidates(0.2).is_empty());
        assert!(gen_width_candidates(f64::NAN).is_empty());
    }

    #[test]
    fn bdf_in_paths() {
        let p = "../../devices/pci0000:00/0000:00:01.1/0000:02:00.0/net/eth0";
        assert_eq!(Bdf::last_in(p), Some(Bdf::new(0, 2, 0, 0)));
        assert_eq!(
            Bdf::last_in("PCI-MSIX-0000:00:03.0"),
            Some(Bdf::new(0, 0, 3, 0))
        );
        assert_eq!(Bdf::last_in("/sys/devices/virtual/net/lo"), None);
    }

    #[test]
    fn classes() {
        assert_eq!(classify(Some(0x010802), &[]), DeviceClass::Nvme);
        assert_eq!(classify(Some(0x020000), &[]), DeviceClass::Net);
        assert_eq!(classify(Some(0x020700), &[]), DeviceClass::Infiniband);
        assert_eq!(classify(Some(0x0c0600), &[]), DeviceClass::Infiniband);
        let vpi = [
            OsDevice {
                name: "ib0".into(),
                kind: OsDeviceKind::Net,
            },
            OsDevice {
                name: "mlx4_0".into(),
                kind: OsDeviceKind::Openfabrics,
            },
        ];
        assert_eq!(classify(Some(0x028000), &vpi), DeviceClass::Infiniband);
        assert_eq!(classify(Some(0x030200), &[]), DeviceClass::Gpu);
        assert_eq!(classify(Some(0x060400), &[]), DeviceClass::Bridge);
        assert_eq!(classify(Some(0x0b4000), &[]), DeviceClass::Other);
    }

    #[test]
    fn link_speeds() {
        assert_eq!(parse_link_speed("8.0 GT/s PCIe"), Some(8.0));
        assert_eq!(parse_link_speed("Unknown"), None);
        assert_eq!(gen_from_gts(2.5), Some(1));
        assert_eq!(gen_from_gts(16.0), Some(4));
        // gen2 x8 and gen1 x16 both carry 4 GB/s: the width nearer x8 is chosen.
        assert_eq!(estimate_gen_width(4.0), Some((2, 8)));
        assert_eq!(estimate_gen_width(0.0), None);
        assert_eq!(estimate_gen_width(0.2), None);
        assert_eq!(estimate_gen_width(15.75), Some((4, 8)));
    }
}
