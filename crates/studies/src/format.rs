//! How parameters and measured values are written wherever a person reads them: tables,
//! reports, plot labels and error messages (sizes in binary units, 4 significant digits).

use serde_json::{Map, Number, Value};

/// Whether a parameter holds a size in bytes ("bytes", "*_bytes"; "req_kb" is already in
/// KiB and prints as is).
pub fn is_size_param(name: &str) -> bool {
    name == "bytes" || name.ends_with("_bytes")
}

/// Parameters as "name=value" separated by spaces, sizes as "64 MiB", e.g.
/// "bytes=64 MiB op=read".
pub fn render_params(params: &Map<String, Value>) -> String {
    params
        .iter()
        .map(|(name, value)| format!("{name}={}", format_param_value(name, value)))
        .collect::<Vec<_>>()
        .join(" ")
}

/// One parameter value: strings bare, sizes as "4 KiB", other numbers as integers where
/// they are whole.
pub fn format_param_value(name: &str, value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Number(n) => {
            if is_size_param(name) {
                if let Some(b) = whole_u64(n) {
                    return format_size(b);
                }
            }
            format_json_number(n)
        }
        Value::Null => "n/a".to_string(),
        other => other.to_string(),
    }
}

fn whole_u64(n: &Number) -> Option<u64> {
    n.as_u64().or_else(|| {
        let f = n.as_f64()?;
        (f >= 0.0 && f.fract() == 0.0 && f < 9.0e15).then_some(f as u64)
    })
}

fn format_json_number(n: &Number) -> String {
    if let Some(u) = n.as_u64() {
        return u.to_string();
    }
    if let Some(i) = n.as_i64() {
        return i.to_string();
    }
    match n.as_f64() {
        // 1e8 written as a float is still the integer 100000000 to a reader.
        Some(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => format!("{}", f as i64),
        Some(f) => format!("{f}"),
        None => n.to_string(),
    }
}

/// A byte count in the largest binary unit that divides it: "4 KiB", "64 MiB", "1500 B".
pub fn format_size(bytes: u64) -> String {
    const UNITS: [(u64, &str); 4] = [
        (1 << 40, "TiB"),
        (1 << 30, "GiB"),
        (1 << 20, "MiB"),
        (1 << 10, "KiB"),
    ];
    for (unit, name) in UNITS {
        if bytes >= unit && bytes.is_multiple_of(unit) {
            return format!("{} {name}", bytes / unit);
        }
    }
    format!("{bytes} B")
}

/// A measured value with 4 significant digits (whole numbers from 1000 up), trailing zeros
/// dropped; "n/a" for NaN and infinities.
pub fn format_number(x: f64) -> String {
    if !x.is_finite() {
        return "n/a".to_string();
    }
    if x == 0.0 {
        return "0".to_string();
    }
    let a = x.abs();
    if !(1e-4..1e15).contains(&a) {
        return format!("{x:.3e}");
    }
    if a >= 1000.0 {
        return format!("{x:.0}");
    }
    let decimals = (3 - a.log10().floor() as i32).clamp(0, 8) as usize;
    let s = format!("{x:.decimals$}");
    let s = if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    };
    if s == "-0" {
        "0".to_string()
    } else {
        s
    }
}

/// The unit a workload field's name ends in (`nudma run`'s rows and counters name theirs):
/// `_gbit_s` Gb/s (10^9 bits per second), `_gbyte_s` GB/s (10^9 bytes per second), `_ns`,
/// `_us`, `_ms` and `_s` times (also before a percentile: `latency_ns_p50`), `_per_s` and
/// `_per_sec` rates, and rates named by their unit (`mpps`, `mops`, `kops`, `kiops`).
/// `None` for a count, a fraction, a ratio or a word.
pub fn unit_of(field: &str) -> Option<&'static str> {
    let f = field
        .strip_suffix("_p50")
        .or_else(|| field.strip_suffix("_p99"))
        .unwrap_or(field);
    const SUFFIXES: [(&str, &str); 8] = [
        ("_gbit_s", "Gb/s"),
        ("_gbyte_s", "GB/s"),
        ("_per_s", "/s"),
        ("_per_sec", "/s"),
        ("_ns", "ns"),
        ("_us", "µs"),
        ("_ms", "ms"),
        ("_s", "s"),
    ];
    if let Some((_, unit)) = SUFFIXES.iter().find(|(s, _)| f.ends_with(s)) {
        return Some(unit);
    }
    let word = f.rsplit('_').next().unwrap_or(f);
    match word {
        "ns" => Some("ns"),
        "mpps" => Some("Mpps"),
        "mops" => Some("Mops"),
        "kops" => Some("kops"),
        "kiops" => Some("kIOPS"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::unit_of;

    #[test]
    fn a_field_names_its_unit() {
        for (field, unit) in [
            ("throughput_gbit_s", Some("Gb/s")),
            ("throughput_gbyte_s", Some("GB/s")),
            ("bw_gbit_s", Some("Gb/s")),
            ("qpi_gbyte_s", Some("GB/s")),
            ("latency_ns_p99", Some("ns")),
            ("ns", Some("ns")),
            ("latency_us", Some("µs")),
            ("t_ms", Some("ms")),
            ("ops_per_sec", Some("/s")),
            ("server_irqs_per_s", Some("/s")),
            ("std_mops", Some("Mops")),
            ("total_kiops", Some("kIOPS")),
            ("cpu_util", None),
            ("hops", None),
            // A catalog metric's name says nothing: `*_gbps` is Gb/s in `ioctopus.*`.
            ("throughput_gbps", None),
        ] {
            assert_eq!(unit_of(field), unit, "{field}");
        }
    }
}
