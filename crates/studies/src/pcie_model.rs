//! pcie-bench's own analytical model of PCIe bandwidth (Neugebauer et al., "Understanding
//! PCIe performance for end host networking", SIGCOMM 2018; pcie-bench/pcie-model,
//! Apache-2.0: `model/pcie.py`, `model/mem_bw.py`, `pcie_bw.py`), restated so that its
//! figures can be set beside nudma's and the measurements. It differs from nudma's flow
//! model where the issue of DLLPs lies: it charges ACK and UpdateFC DLLPs to the data's
//! own direction at the PCIe specification's recommended rates, where nudma charges them
//! to the reverse direction, and it counts 8 B of framing per TLP.

/// One link as pcie-bench's model sees it (Gen3 and later: 128b/130b coding).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PcieModel {
    pub gen: u8,
    pub width: u8,
    pub mps: u32,
    pub mrrs: u32,
    /// 4-DW request headers (addresses above 4 GiB).
    pub addr64: bool,
}

/// The specification's ACK limit and UpdateFC interval (symbol times) for Gen3 and later,
/// by width and MPS: PCIe Base 5.0 tables 3-7..3-9 and 2-46..2-48 as pcie-model carries
/// them (the two tables hold the same values from Gen3 on).
fn dllp_interval(width: u8, mps: u32) -> Option<f64> {
    let row: [f64; 6] = match width {
        1 => [333., 512., 655., 1167., 2191., 4239.],
        2 => [224., 313., 385., 641., 1153., 2177.],
        4 => [169., 214., 250., 378., 634., 1146.],
        8 => [163., 203., 182., 246., 374., 630.],
        16 => [144., 168., 182., 246., 374., 630.],
        32 => [129., 141., 148., 180., 244., 372.],
        _ => return None,
    };
    let i = [128, 256, 512, 1024, 2048, 4096]
        .iter()
        .position(|&m| m == mps)?;
    Some(row[i])
}

/// A DLLP with its framing, and a TLP's header with its framing (bytes), as pcie-model
/// counts them; SKP ordered sets every 1538 symbols, 4 long.
const DLLP_BYTES: f64 = 8.0;
const TLP_FRAMING: f64 = 8.0 + 4.0;
const SKP: f64 = 4.0 / 1538.0;

impl PcieModel {
    /// pcie-model's defaults (`pcie_bw.py`): MPS 256, MRRS 512, 64-bit addresses.
    pub fn pciebench_defaults(gen: u8, width: u8) -> PcieModel {
        PcieModel {
            gen,
            width,
            mps: 256,
            mrrs: 512,
            addr64: true,
        }
    }

    /// What TLPs may use of the link, Gb/s per direction: the raw rate less one ACK and
    /// one UpdateFC per interval and the SKP ordered sets. `None` before Gen3 or for a
    /// width or MPS PCIe does not have.
    fn tlp_gbit(&self) -> Option<f64> {
        let gts = match self.gen {
            3 => 8.0,
            4 => 16.0,
            5 => 32.0,
            _ => return None,
        };
        let raw = gts * 128.0 / 130.0 * self.width as f64;
        let dllp = 2.0 * DLLP_BYTES / dllp_interval(self.width, self.mps)?;
        Some(raw * (1.0 - dllp - SKP))
    }

    fn write_header(&self) -> f64 {
        TLP_FRAMING + if self.addr64 { 12.0 } else { 8.0 }
    }

    /// Raw bytes of one transfer of `size` in each direction: (to the host, from it).
    fn raw_bytes(&self, size: u32, write: bool, read: bool) -> (f64, f64) {
        let tlps = |limit: u32| size.div_ceil(limit) as f64;
        let (mut up, mut down) = (0.0, 0.0);
        if write {
            up += tlps(self.mps) * self.write_header() + size as f64;
        }
        if read {
            up += tlps(self.mrrs) * self.write_header();
            down += tlps(self.mps) * (TLP_FRAMING + 8.0) + size as f64;
        }
        (up, down)
    }

    /// Gb/s of data a stream of `size`-byte writes carries.
    pub fn write_gbit(&self, size: u32) -> Option<f64> {
        let (up, _) = self.raw_bytes(size, true, false);
        Some(self.tlp_gbit()? * size as f64 / up)
    }

    /// Gb/s of data a stream of `size`-byte reads returns: the completions' direction
    /// full, unless the requests run out of the other direction first.
    pub fn read_gbit(&self, size: u32) -> Option<f64> {
        self.both(size, false)
    }

    /// Gb/s per direction of alternating `size`-byte reads and writes (what pcie-bench's
    /// BW_DMA_RW reports, and `pcie_bw.py`'s read/write column).
    pub fn read_write_gbit(&self, size: u32) -> Option<f64> {
        self.both(size, true)
    }

    fn both(&self, size: u32, write: bool) -> Option<f64> {
        let bw = self.tlp_gbit()?;
        let (up, down) = self.raw_bytes(size, write, true);
        // Transfers per second the completions allow, then the requests (and writes).
        let mut trans = bw / down;
        if trans * up > bw {
            trans = bw / up;
        }
        Some(trans * size as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gen3_x8_as_pcie_bench_reports_it() {
        let m = PcieModel::pciebench_defaults(3, 8);
        // 2 KiB writes: 8 TLPs of 256 B with 24 B of header and framing each, on a link
        // left 57.9 Gb/s by its DLLPs and SKPs — the 53.0 Gb/s the paper's Figure shows.
        let w = m.write_gbit(2048).unwrap();
        assert!((w - 52.92).abs() < 0.01, "{w}");
        // 64 B writes: 64 of every 88 bytes.
        let w64 = m.write_gbit(64).unwrap();
        assert!((w64 - 57.88 * 64.0 / 88.0).abs() < 0.01, "{w64}");
        // Reads return 20 B of overhead per 256 B completion; RW shares both directions.
        let r = m.read_gbit(2048).unwrap();
        assert!(
            (r - 57.88 * 2048.0 / (2048.0 + 8.0 * 20.0)).abs() < 0.01,
            "{r}"
        );
        let rw = m.read_write_gbit(2048).unwrap();
        assert!(rw < w && rw < r, "{rw}");
        assert_eq!(PcieModel::pciebench_defaults(2, 8).write_gbit(64), None);
    }
}
