//! CPU sets and the three textual forms a machine writes them in: Linux cpulists
//! (`0-3,8`), Linux hex masks (`ff,00000000`, as in `xps_cpus` or `smp_affinity`) and
//! hwloc bitmaps (`0x000000ff,0x00000001`). Node sets use the same type.

use std::collections::BTreeSet;
use std::fmt;

/// Highest CPU number accepted from text. Linux supports at most 8192 CPUs; a larger
/// bound keeps a hostile `0-4294967295` from allocating gigabytes.
pub const MAX_CPU: u32 = 1 << 16;

/// A set of CPU (or NUMA node) numbers, as the OS numbers them.
#[derive(Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CpuSet(BTreeSet<u32>);

/// Why a CPU set's text could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid CPU set {text:?}: {reason}")]
pub struct CpuSetParseError {
    pub text: String,
    pub reason: String,
}

fn parse_error(text: &str, reason: impl Into<String>) -> CpuSetParseError {
    CpuSetParseError {
        text: text.to_string(),
        reason: reason.into(),
    }
}

impl CpuSet {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn single(cpu: u32) -> Self {
        Self(std::iter::once(cpu).collect())
    }

    pub fn insert(&mut self, cpu: u32) -> bool {
        self.0.insert(cpu)
    }

    pub fn contains(&self, cpu: u32) -> bool {
        self.0.contains(&cpu)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.0.iter().copied()
    }

    pub fn first(&self) -> Option<u32> {
        self.0.first().copied()
    }

    pub fn is_subset(&self, other: &CpuSet) -> bool {
        self.0.is_subset(&other.0)
    }

    pub fn intersects(&self, other: &CpuSet) -> bool {
        self.0.intersection(&other.0).next().is_some()
    }

    pub fn intersection(&self, other: &CpuSet) -> CpuSet {
        CpuSet(self.0.intersection(&other.0).copied().collect())
    }

    pub fn union(&self, other: &CpuSet) -> CpuSet {
        CpuSet(self.0.union(&other.0).copied().collect())
    }

    pub fn difference(&self, other: &CpuSet) -> CpuSet {
        CpuSet(self.0.difference(&other.0).copied().collect())
    }

    /// Parses a Linux cpulist such as `0-3,8,10-11` (empty text is the empty set).
    pub fn parse_list(text: &str) -> Result<CpuSet, CpuSetParseError> {
        let mut set = CpuSet::new();
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return Ok(set);
        }
        for part in trimmed.split(',') {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            let (lo, hi) = match part.split_once('-') {
                Some((a, b)) => (parse_cpu(text, a)?, parse_cpu(text, b)?),
                None => {
                    let c = parse_cpu(text, part)?;
                    (c, c)
                }
            };
            if lo > hi {
                return Err(parse_error(text, format!("range {part} runs backwards")));
            }
            for cpu in lo..=hi {
                set.insert(cpu);
            }
        }
        Ok(set)
    }

    /// Parses a Linux hex mask: 32-bit words, most significant first, separated by
    /// commas (`00000000,0000000f`). Words may also carry hwloc's `0x` prefix, and an
    /// empty word (hwloc's `0x00000003,,0x00000001`) is 32 zero bits.
    pub fn parse_mask(text: &str) -> Result<CpuSet, CpuSetParseError> {
        let mut set = CpuSet::new();
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return Ok(set);
        }
        let mut base: u32 = 0;
        for word in trimmed.split(',').rev() {
            let word = word.trim();
            let digits = word
                .strip_prefix("0x")
                .or_else(|| word.strip_prefix("0X"))
                .unwrap_or(word);
            // hwloc writes an infinite tail as `0xf...f`; no real CPU lives there.
            if digits == "f...f" {
                base = base.saturating_add(32);
                continue;
            }
            // hwloc's writer leaves all-zero words empty (`0x…,,0x…`) on machines above
            // 64 PUs: an empty word stands for 32 zero bits.
            if digits.is_empty() {
                if word.is_empty() {
                    base = base.saturating_add(32);
                    continue;
                }
                return Err(parse_error(text, "`0x` without digits"));
            }
            for (i, ch) in digits.chars().rev().enumerate() {
                let nibble = ch
                    .to_digit(16)
                    .ok_or_else(|| parse_error(text, format!("{ch:?} is not a hex digit")))?;
                for bit in 0..4 {
                    if nibble & (1 << bit) != 0 {
                        let cpu = base as u64 + (i as u64) * 4 + bit as u64;
                        if cpu > MAX_CPU as u64 {
                            return Err(parse_error(text, format!("CPU {cpu} is too large")));
                        }
                        set.insert(cpu as u32);
                    }
                }
            }
            let width = (digits.len() as u32).max(8) * 4;
            base = base.saturating_add(width);
        }
        Ok(set)
    }

    /// Parses an hwloc bitmap (`0x00ff00ff`, `0xffffffff,0x00000001`, `0xf...f,0x0`).
    pub fn parse_hwloc(text: &str) -> Result<CpuSet, CpuSetParseError> {
        Self::parse_mask(text)
    }

    /// The cpulist form, e.g. `0-3,8`; the empty set is the empty string.
    pub fn to_list_string(&self) -> String {
        let mut out = String::new();
        let mut iter = self.0.iter().copied().peekable();
        while let Some(start) = iter.next() {
            let mut end = start;
            while iter.peek() == Some(&(end + 1)) {
                end += 1;
                iter.next();
            }
            if !out.is_empty() {
                out.push(',');
            }
            if start == end {
                out.push_str(&start.to_string());
            } else {
                out.push_str(&format!("{start}-{end}"));
            }
        }
        out
    }

    /// The hex-mask form the kernel accepts in `xps_cpus`, `rps_cpus` and
    /// `smp_affinity`: 32-bit words, most significant first, comma separated.
    pub fn to_mask_string(&self) -> String {
        let Some(max) = self.0.last().copied() else {
            return "0".to_string();
        };
        let words = (max / 32 + 1) as usize;
        let mut values = vec![0u32; words];
        for cpu in self.iter() {
            values[(cpu / 32) as usize] |= 1 << (cpu % 32);
        }
        let mut parts: Vec<String> = Vec::with_capacity(words);
        for (i, v) in values.iter().rev().enumerate() {
            if i == 0 {
                parts.push(format!("{v:x}"));
            } else {
                parts.push(format!("{v:08x}"));
            }
        }
        parts.join(",")
    }
}

fn parse_cpu(whole: &str, s: &str) -> Result<u32, CpuSetParseError> {
    let s = s.trim();
    let v: u64 = s
        .parse()
        .map_err(|_| parse_error(whole, format!("{s:?} is not a CPU number")))?;
    if v > MAX_CPU as u64 {
        return Err(parse_error(whole, format!("CPU {v} is too large")));
    }
    Ok(v as u32)
}

impl FromIterator<u32> for CpuSet {
    fn from_iter<T: IntoIterator<Item = u32>>(iter: T) -> Self {
        CpuSet(iter.into_iter().collect())
    }
}

impl fmt::Display for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_list_string())
    }
}

impl fmt::Debug for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CpuSet({})", self.to_list_string())
    }
}

impl serde::Serialize for CpuSet {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_list_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_round_trip() {
        let s = CpuSet::parse_list("0-3,8,10-11").unwrap();
        assert_eq!(s.len(), 7);
        assert_eq!(s.to_list_string(), "0-3,8,10-11");
        assert_eq!(CpuSet::parse_list("").unwrap().len(), 0);
        assert_eq!(
            CpuSet::parse_list("0,4,8\n").unwrap().to_list_string(),
            "0,4,8"
        );
    }

    #[test]
    fn bad_lists_are_errors() {
        assert!(CpuSet::parse_list("3-1").is_err());
        assert!(CpuSet::parse_list("a").is_err());
        assert!(CpuSet::parse_list("0-4294967295").is_err());
    }

    #[test]
    fn masks() {
        let s = CpuSet::parse_mask("00000000,00000000,00000000,0000000f").unwrap();
        assert_eq!(s.to_list_string(), "0-3");
        let s = CpuSet::parse_mask("0000,00000011,11111111").unwrap();
        assert_eq!(s.to_list_string(), "0,4,8,12,16,20,24,28,32,36");
        assert_eq!(CpuSet::parse_mask("0").unwrap().len(), 0);
        let s = CpuSet::parse_list("8-15,32").unwrap();
        assert_eq!(s.to_mask_string(), "1,0000ff00");
        assert_eq!(CpuSet::parse_mask(&s.to_mask_string()).unwrap(), s);
        assert!(CpuSet::parse_mask("zz").is_err());
    }

    #[test]
    fn empty_words_are_zero_words() {
        // hwloc's writer for a 96-PU machine: PUs 0, 64 and 65.
        let s = CpuSet::parse_hwloc("0x00000003,,0x00000001").unwrap();
        assert_eq!(s.to_list_string(), "0,64-65");
        let s = CpuSet::parse_hwloc("0x1,,,").unwrap();
        assert_eq!(s.to_list_string(), "96");
        assert!(CpuSet::parse_hwloc("0x1,0x,0x1").is_err());
    }

    #[test]
    fn hwloc_bitmaps() {
        let s = CpuSet::parse_hwloc("0x00aaaaaa").unwrap();
        assert_eq!(s.len(), 12);
        assert!(s.contains(1) && !s.contains(0));
        let s = CpuSet::parse_hwloc("0xf...f,0x00000001").unwrap();
        assert_eq!(s.to_list_string(), "0");
        let s = CpuSet::parse_hwloc("0x00000001,0x00000000").unwrap();
        assert_eq!(s.to_list_string(), "32");
    }
}
