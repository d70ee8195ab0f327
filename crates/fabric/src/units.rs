//! Byte sizes as users write them in scenarios, experiment files, `--set` values and CLI
//! size arguments: an integer (bytes), a hexadecimal `0x…`, or a string with a binary unit
//! ("256 MiB", "4 KiB", "1 TiB"). Decimal-looking units (`KB`, `MB`, `GB`, `TB`, `kB`) and
//! bare letters (`K`, `M`, `G`, `T`) are refused with a hint naming both readings: `1 MB`
//! is 2^20 bytes to some and 10^6 to others, and a size must not depend on who reads it.

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
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        "TiB" => 1 << 40,
        other => {
            return Err(match ambiguous_unit(other) {
                Some((_, shift, _)) if n.checked_mul(1 << shift).is_none() => {
                    format!("`{s}` does not fit in 64 bits")
                }
                Some((binary, shift, decimal)) => ambiguous(s, n, binary, shift, decimal),
                None => {
                    format!("unknown size unit `{other}` in `{s}` (use B, KiB, MiB, GiB or TiB)")
                }
            })
        }
    };
    n.checked_mul(mult)
        .ok_or_else(|| format!("`{s}` does not fit in 64 bits"))
}

/// A unit that reads as either binary or decimal: its binary name, the power of two and
/// the power of ten it may mean.
fn ambiguous_unit(unit: &str) -> Option<(&'static str, u32, u32)> {
    let letter = match unit.strip_suffix(['B', 'b']).unwrap_or(unit) {
        "K" | "k" => 'K',
        "M" | "m" => 'M',
        "G" | "g" => 'G',
        "T" | "t" => 'T',
        _ => return None,
    };
    Some(match letter {
        'K' => ("KiB", 10, 3),
        'M' => ("MiB", 20, 6),
        'G' => ("GiB", 30, 9),
        _ => ("TiB", 40, 12),
    })
}

/// "`1 MB` is ambiguous: write `1 MiB` (2^20 bytes) or `1000000` (10^6 bytes)".
fn ambiguous(s: &str, n: u64, binary: &str, shift: u32, decimal: u32) -> String {
    let num = s
        .trim()
        .trim_end_matches(|c: char| c.is_ascii_alphabetic())
        .trim();
    let times = |base: &str, exp: u32| {
        if n == 1 {
            format!("{base}^{exp}")
        } else {
            format!("{n} × {base}^{exp}")
        }
    };
    let mut msg = format!(
        "`{}` is ambiguous: write `{num} {binary}` ({} bytes)",
        s.trim(),
        times("2", shift)
    );
    // 10^(3j) < 2^(10j): where the binary reading fits, the decimal one does too.
    if let Some(d) = 10u64.checked_pow(decimal).and_then(|p| n.checked_mul(p)) {
        msg.push_str(&format!(" or `{d}` ({} bytes)", times("10", decimal)));
    }
    msg
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
    fn decimal_looking_units_are_refused_with_both_readings() {
        assert_eq!(
            parse_size("1 MB").unwrap_err(),
            "`1 MB` is ambiguous: write `1 MiB` (2^20 bytes) or `1000000` (10^6 bytes)"
        );
        assert_eq!(
            parse_size("64MB").unwrap_err(),
            "`64MB` is ambiguous: write `64 MiB` (64 × 2^20 bytes) or `64000000` (64 × 10^6 bytes)"
        );
        for (text, binary) in [
            ("4 KB", "`4 KiB`"),
            ("4 kB", "`4 KiB`"),
            ("4K", "`4 KiB`"),
            ("2 G", "`2 GiB`"),
            ("2 GB", "`2 GiB`"),
            ("1 TB", "`1 TiB`"),
            ("3 mb", "`3 MiB`"),
        ] {
            let e = parse_size(text).unwrap_err();
            assert!(
                e.contains("is ambiguous: write ") && e.contains(binary),
                "{text}: {e}"
            );
        }
        // No hint towards a size that does not exist.
        assert_eq!(
            parse_size("99999999 TB").unwrap_err(),
            "`99999999 TB` does not fit in 64 bits"
        );
        // The binary units read as they say.
        assert_eq!(parse_size("1 MiB"), Ok(1 << 20));
        assert_eq!(parse_size("2 GiB"), Ok(2 << 30));
        assert_eq!(parse_size("1TiB"), Ok(1 << 40));
        assert_eq!(parse_size("512 B"), Ok(512));
    }

    #[test]
    fn formats_exact_units() {
        assert_eq!(fmt_size(256 << 20), "256 MiB");
        assert_eq!(fmt_size(3 << 30), "3 GiB");
        assert_eq!(fmt_size(1000), "1000 B");
    }
}
