//! Byte sizes as users write them in scenarios: an integer (bytes) or a string with a
//! binary unit ("256 MiB", "4 KiB", "1 TiB"; "KB/MB/GB" are read as KiB/MiB/GiB, the
//! convention of EXPERIMENTS.md).

use std::fmt;

use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;

/// A size in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Size(pub u64);

impl Size {
    pub fn bytes(self) -> u64 {
        self.0
    }
}

/// Parses "256 MiB", "4KiB", "0x1000", "4096". Errors name what was wrong.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    if let Some(hex) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        return u64::from_str_radix(&hex.replace('_', ""), 16)
            .map_err(|_| format!("`{s}` is not a hexadecimal number"));
    }
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '_'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    if num.is_empty() {
        return Err(format!(
            "`{s}` is not a size: expected a number of bytes or e.g. \"256 MiB\""
        ));
    }
    let n: u64 = num
        .replace('_', "")
        .parse()
        .map_err(|_| format!("`{s}`: number too large"))?;
    let mult: u64 = match unit.trim() {
        "" | "B" => 1,
        "KiB" | "KB" | "K" => 1 << 10,
        "MiB" | "MB" | "M" => 1 << 20,
        "GiB" | "GB" | "G" => 1 << 30,
        "TiB" | "TB" | "T" => 1 << 40,
        other => {
            return Err(format!(
                "unknown size unit `{other}` in `{s}` (use B, KiB, MiB, GiB or TiB)"
            ))
        }
    };
    n.checked_mul(mult)
        .ok_or_else(|| format!("`{s}` does not fit in 64 bits"))
}

/// Formats a byte count with the largest binary unit that divides it exactly.
pub fn fmt_size(bytes: u64) -> String {
    const UNITS: [(&str, u32); 4] = [("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)];
    for (name, shift) in UNITS {
        if bytes != 0 && bytes.trailing_zeros() >= shift {
            return format!("{} {name}", bytes >> shift);
        }
    }
    format!("{bytes} B")
}

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&fmt_size(self.0))
    }
}

impl<'de> Deserialize<'de> for Size {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Size;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a size: bytes as an integer, or a string like \"256 MiB\"")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Size, E> {
                u64::try_from(v)
                    .map(Size)
                    .map_err(|_| E::custom("a size cannot be negative"))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Size, E> {
                Ok(Size(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Size, E> {
                parse_size(v).map(Size).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units_and_rejects_garbage() {
        assert_eq!(parse_size("256 MiB"), Ok(256 << 20));
        assert_eq!(parse_size("4KiB"), Ok(4096));
        assert_eq!(parse_size("64 MB"), Ok(64 << 20));
        assert_eq!(parse_size("0x1000"), Ok(4096));
        assert_eq!(parse_size("1_024"), Ok(1024));
        assert!(parse_size("12 parsecs")
            .unwrap_err()
            .contains("unknown size unit"));
        assert!(parse_size("MiB").is_err());
        assert!(parse_size("99999999999 TiB")
            .unwrap_err()
            .contains("64 bits"));
    }

    #[test]
    fn formats_exact_units() {
        assert_eq!(fmt_size(256 << 20), "256 MiB");
        assert_eq!(fmt_size(3 << 30), "3 GiB");
        assert_eq!(fmt_size(1000), "1000 B");
    }
}
