//! Huge pages of a calibration buffer: how much of it the kernel gave in transparent
//! or explicit huge pages (`/proc/self/smaps`), and how the result says so.

use serde::Serialize;

/// Huge pages backing one memory node's buffer, read from `/proc/self/smaps` once the
/// buffer is filled (every page touched).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HugePages {
    pub node: u32,
    pub buffer_bytes: usize,
    /// Bytes in transparent huge pages (`AnonHugePages`); `None` when smaps could not
    /// be read.
    pub transparent_bytes: Option<u64>,
    /// Bytes in explicit hugetlbfs pages (`Private_Hugetlb` + `Shared_Hugetlb`).
    pub explicit_bytes: Option<u64>,
    /// What `madvise(MADV_HUGEPAGE)` answered: `accepted` or the error.
    pub advice: String,
}

impl HugePages {
    /// Share of the buffer in huge pages of either kind, if known.
    pub fn granted_fraction(&self) -> Option<f64> {
        let huge = self.transparent_bytes? + self.explicit_bytes.unwrap_or(0);
        Some(huge as f64 / self.buffer_bytes.max(1) as f64)
    }

    /// `node 0: 256 of 256 MiB in huge pages (transparent)`.
    pub fn describe(&self) -> String {
        match (self.transparent_bytes, self.explicit_bytes) {
            (Some(t), e) => format!(
                "node {}: {} of {} MiB in huge pages ({} MiB transparent, {} MiB explicit; madvise {})",
                self.node,
                (t + e.unwrap_or(0)) >> 20,
                self.buffer_bytes >> 20,
                t >> 20,
                e.unwrap_or(0) >> 20,
                self.advice
            ),
            (None, _) => format!(
                "node {}: huge pages unknown (/proc/self/smaps unreadable; madvise {})",
                self.node, self.advice
            ),
        }
    }
}

/// Sums `AnonHugePages` and `Private_Hugetlb` + `Shared_Hugetlb` (kB) over the smaps
/// entries inside `[start, end)`: (transparent bytes, explicit bytes). `None` when no
/// entry lies there.
pub fn smaps_huge_bytes(smaps: &str, start: u64, end: u64) -> Option<(u64, u64)> {
    let mut inside = false;
    let mut found = false;
    let (mut thp, mut tlb) = (0u64, 0u64);
    for line in smaps.lines() {
        // An entry starts with `7f12a4000000-7f12b4000000 rw-p 00000000 00:00 0 …`.
        let range = line.split_whitespace().next().and_then(|r| {
            let (a, b) = r.split_once('-')?;
            Some((
                u64::from_str_radix(a, 16).ok()?,
                u64::from_str_radix(b, 16).ok()?,
            ))
        });
        let perms = line.split_whitespace().nth(1).is_some_and(|p| p.len() == 4);
        if let Some((a, b)) = range.filter(|_| perms) {
            inside = a >= start && b <= end;
            found |= inside;
            continue;
        }
        if !inside {
            continue;
        }
        let kib = |field: &str| -> Option<u64> {
            line.strip_prefix(field)?
                .trim()
                .strip_suffix("kB")?
                .trim()
                .parse::<u64>()
                .ok()
        };
        if let Some(k) = kib("AnonHugePages:") {
            thp += k << 10;
        } else if let Some(k) = kib("Private_Hugetlb:").or_else(|| kib("Shared_Hugetlb:")) {
            tlb += k << 10;
        }
    }
    found.then_some((thp, tlb))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn huge_pages_of_a_range_from_smaps() {
        let smaps = "\
7f0000000000-7f0010000000 rw-p 00000000 00:00 0 
Size:             262144 kB
AnonHugePages:    260096 kB
Private_Hugetlb:       0 kB
Shared_Hugetlb:        0 kB
7f0010000000-7f0010200000 rw-p 00000000 00:00 0                          [heap]
AnonHugePages:      2048 kB
7f0020000000-7f0020400000 rw-s 00000000 00:0f 1234                       /dev/hugepages/x
AnonHugePages:         0 kB
Shared_Hugetlb:     4096 kB
";
        assert_eq!(
            smaps_huge_bytes(smaps, 0x7f00_0000_0000, 0x7f00_1000_0000),
            Some((260_096 << 10, 0))
        );
        assert_eq!(
            smaps_huge_bytes(smaps, 0x7f00_2000_0000, 0x7f00_2040_0000),
            Some((0, 4096 << 10))
        );
        assert_eq!(smaps_huge_bytes(smaps, 0x1000, 0x2000), None);
        let h = HugePages {
            node: 1,
            buffer_bytes: 256 << 20,
            transparent_bytes: Some(254 << 20),
            explicit_bytes: Some(0),
            advice: "accepted".into(),
        };
        assert!((h.granted_fraction().unwrap() - 254.0 / 256.0).abs() < 1e-12);
        assert_eq!(
            h.describe(),
            "node 1: 254 of 256 MiB in huge pages (254 MiB transparent, 0 MiB explicit; madvise accepted)"
        );
    }
}
