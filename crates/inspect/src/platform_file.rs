//! The platform parameter file `nudma calibrate --out` writes and
//! `nudma inspect --export --calibration` reads: a `[platform.NAME.memory]` TOML
//! fragment with `latency_ns` and `bandwidth_gbps` matrices (row = CPU node,
//! column = memory node) under a comment header saying what was measured and how.
//!
//! The reader accepts exactly this fragment shape (comments, one table header, the
//! two keys with nested arrays of numbers, possibly over several lines), so it needs
//! no TOML library; anything else is an error naming the line.

use std::path::Path;

use crate::error::InspectError;

/// Memory latency and bandwidth per (CPU node, memory node).
#[derive(Clone, Debug, PartialEq)]
pub struct MemoryParams {
    pub platform: String,
    /// Node numbers in matrix order, when the file says (`# node order: 0, 1`).
    pub node_order: Option<Vec<u32>>,
    pub latency_ns: Vec<Vec<f64>>,
    pub bandwidth_gbps: Vec<Vec<f64>>,
    /// The comment header, without `# `.
    pub header: Vec<String>,
}

impl MemoryParams {
    pub fn nodes(&self) -> usize {
        self.latency_ns.len()
    }

    /// The fragment text: header comments, table, both matrices.
    pub fn to_fragment(&self) -> String {
        let mut out = String::new();
        for line in &self.header {
            if line.is_empty() {
                out.push_str("#\n");
            } else {
                out.push_str(&format!("# {line}\n"));
            }
        }
        if let Some(order) = &self.node_order {
            let list: Vec<String> = order.iter().map(u32::to_string).collect();
            out.push_str(&format!("# node order: {}\n", list.join(", ")));
        }
        out.push_str(&format!("[platform.{}.memory]\n", self.platform));
        out.push_str(&format!(
            "latency_ns = {}        # row = CPU node, column = memory node\n",
            matrix_toml(&self.latency_ns)
        ));
        out.push_str(&format!(
            "bandwidth_gbps = {}    # GB/s\n",
            matrix_toml(&self.bandwidth_gbps)
        ));
        out
    }

    pub fn read(path: &Path) -> Result<MemoryParams, InspectError> {
        let text = std::fs::read_to_string(path).map_err(|e| InspectError::io(path, e))?;
        Self::parse(&text, path)
    }

    pub fn parse(text: &str, path: &Path) -> Result<MemoryParams, InspectError> {
        let err = |line: usize, message: String| InspectError::Calibration {
            path: path.to_path_buf(),
            line,
            message,
        };
        let mut platform = None;
        let mut header = Vec::new();
        let mut node_order = None;
        let mut latency = None;
        let mut bandwidth = None;
        let lines: Vec<&str> = text.lines().collect();
        let mut i = 0;
        while i < lines.len() {
            let lineno = i + 1;
            let raw = lines[i];
            let line = strip_comment(raw).trim();
            if line.is_empty() {
                if let Some(c) = raw.trim().strip_prefix('#') {
                    let c = c.trim();
                    if let Some(order) = c.strip_prefix("node order:") {
                        let parsed: Result<Vec<u32>, _> =
                            order.split(',').map(|v| v.trim().parse::<u32>()).collect();
                        node_order = Some(parsed.map_err(|_| {
                            err(lineno, format!("unreadable node order {:?}", order.trim()))
                        })?);
                    } else if platform.is_none() {
                        header.push(c.to_string());
                    }
                }
                i += 1;
                continue;
            }
            if let Some(table) = line.strip_prefix('[') {
                let name = table
                    .strip_suffix(']')
                    .and_then(|t| t.trim().strip_prefix("platform."))
                    .and_then(|t| t.strip_suffix(".memory"))
                    .filter(|n| !n.is_empty() && n.bytes().all(is_key_char))
                    .ok_or_else(|| {
                        err(
                            lineno,
                            format!("expected a [platform.NAME.memory] table, found {line}"),
                        )
                    })?;
                if platform.is_some() {
                    return Err(err(lineno, "a second table; expected only one".to_string()));
                }
                platform = Some(name.to_string());
                i += 1;
                continue;
            }
            let Some((key, value)) = line.split_once('=') else {
                return Err(err(lineno, format!("expected `key = value`, found {line}")));
            };
            let key = key.trim();
            if platform.is_none() {
                return Err(err(
                    lineno,
                    format!("{key} before the [platform.NAME.memory] table"),
                ));
            }
            // A matrix may span lines: collect until the brackets balance.
            let mut value = value.trim().to_string();
            let start = lineno;
            while depth(&value) > 0 {
                i += 1;
                let Some(next) = lines.get(i) else {
                    return Err(err(start, format!("{key}: unterminated array")));
                };
                value.push(' ');
                value.push_str(strip_comment(next).trim());
            }
            let matrix = parse_matrix(&value).map_err(|m| err(start, format!("{key}: {m}")))?;
            match key {
                "latency_ns" => latency = Some((start, matrix)),
                "bandwidth_gbps" => bandwidth = Some((start, matrix)),
                other => {
                    return Err(err(
                        start,
                        format!("unknown key {other:?} (expected latency_ns or bandwidth_gbps)"),
                    ))
                }
            }
            i += 1;
        }
        let platform = platform.ok_or_else(|| {
            err(
                lines.len().max(1),
                "no [platform.NAME.memory] table".to_string(),
            )
        })?;
        let (lat_line, latency_ns) =
            latency.ok_or_else(|| err(lines.len().max(1), "latency_ns is missing".to_string()))?;
        let (bw_line, bandwidth_gbps) = bandwidth
            .ok_or_else(|| err(lines.len().max(1), "bandwidth_gbps is missing".to_string()))?;
        for (line, name, m) in [
            (lat_line, "latency_ns", &latency_ns),
            (bw_line, "bandwidth_gbps", &bandwidth_gbps),
        ] {
            let n = m.len();
            if n == 0 || m.iter().any(|r| r.len() != n) {
                return Err(err(
                    line,
                    format!("{name} must be a square, non-empty matrix"),
                ));
            }
            if m.iter().flatten().any(|v| !(v.is_finite() && *v > 0.0)) {
                return Err(err(line, format!("{name} values must be positive numbers")));
            }
        }
        if latency_ns.len() != bandwidth_gbps.len() {
            return Err(err(
                bw_line,
                format!(
                    "bandwidth_gbps is {0}×{0} but latency_ns is {1}×{1}",
                    bandwidth_gbps.len(),
                    latency_ns.len()
                ),
            ));
        }
        if let Some(order) = &node_order {
            if order.len() != latency_ns.len() {
                return Err(err(
                    lat_line,
                    format!(
                        "node order lists {} nodes but the matrices have {}",
                        order.len(),
                        latency_ns.len()
                    ),
                ));
            }
        }
        Ok(MemoryParams {
            platform,
            node_order,
            latency_ns,
            bandwidth_gbps,
            header,
        })
    }
}

fn is_key_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'-'
}

fn strip_comment(line: &str) -> &str {
    line.split_once('#').map(|(a, _)| a).unwrap_or(line)
}

fn depth(text: &str) -> i64 {
    text.chars().fold(0, |d, c| match c {
        '[' => d + 1,
        ']' => d - 1,
        _ => d,
    })
}

/// `[[1.0, 2.0], [3.0, 4.0]]` → rows.
fn parse_matrix(text: &str) -> Result<Vec<Vec<f64>>, String> {
    let t = text.trim();
    let inner = t
        .strip_prefix('[')
        .and_then(|r| r.strip_suffix(']'))
        .ok_or_else(|| format!("expected [[…], …], found {t}"))?;
    let mut rows = Vec::new();
    let mut rest = inner.trim();
    while !rest.is_empty() {
        let body = rest
            .strip_prefix('[')
            .ok_or_else(|| format!("expected a row `[…]` at {rest:?}"))?;
        let end = body
            .find(']')
            .ok_or_else(|| "unterminated row".to_string())?;
        let row: Result<Vec<f64>, String> = body[..end]
            .split(',')
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .map(|v| {
                v.parse::<f64>()
                    .map_err(|_| format!("{v:?} is not a number"))
            })
            .collect();
        rows.push(row?);
        rest = body[end + 1..].trim_start();
        rest = rest.strip_prefix(',').unwrap_or(rest).trim_start();
    }
    Ok(rows)
}

/// `[[90.0, 140.0], [140.0, 90.0]]`.
pub fn matrix_toml(m: &[Vec<f64>]) -> String {
    let rows: Vec<String> = m
        .iter()
        .map(|r| {
            let vals: Vec<String> = r.iter().map(|v| format_float(*v)).collect();
            format!("[{}]", vals.join(", "))
        })
        .collect();
    format!("[{}]", rows.join(", "))
}

/// A TOML float with one decimal at least (`90.0`, `12.35`).
pub fn format_float(v: f64) -> String {
    let rounded = (v * 100.0).round() / 100.0;
    let s = format!("{rounded}");
    if s.contains('.') || s.contains('e') || s.contains("inf") || s.contains("NaN") {
        s
    } else {
        format!("{s}.0")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> MemoryParams {
        MemoryParams {
            platform: "imported".into(),
            node_order: Some(vec![0, 1]),
            latency_ns: vec![vec![90.0, 140.5], vec![141.0, 91.25]],
            bandwidth_gbps: vec![vec![60.0, 30.0], vec![30.0, 60.0]],
            header: vec!["measured by test".into(), String::new(), "second".into()],
        }
    }

    #[test]
    fn round_trip() {
        let p = sample();
        let text = p.to_fragment();
        assert!(text.contains("[platform.imported.memory]"));
        let back = MemoryParams::parse(&text, Path::new("c.toml")).unwrap();
        assert_eq!(back.latency_ns, p.latency_ns);
        assert_eq!(back.bandwidth_gbps, p.bandwidth_gbps);
        assert_eq!(back.node_order, Some(vec![0, 1]));
        assert_eq!(back.platform, "imported");
    }

    #[test]
    fn multi_line_arrays() {
        let text = "[platform.x.memory]\nlatency_ns = [\n  [1.0, 2.0],\n  [3.0, 4.0],\n]\nbandwidth_gbps = [[5, 6], [7, 8]]\n";
        let p = MemoryParams::parse(text, Path::new("c.toml")).unwrap();
        assert_eq!(p.latency_ns[1], vec![3.0, 4.0]);
        assert_eq!(p.bandwidth_gbps[0], vec![5.0, 6.0]);
    }

    #[test]
    fn errors_name_the_line() {
        let cases = [
            ("latency_ns = [[1.0]]\n", ":1:"),
            ("[platform.x.memory]\nlatency_ns = [[1.0, x]]\nbandwidth_gbps = [[1.0]]\n", ":2:"),
            ("[platform.x.memory]\nlatency_ns = [[1.0]]\nbandwidth_gbps = [[1.0, 2.0], [3.0, 4.0]]\n", ":3:"),
            ("[platform.x.memory]\nlatency_ns = [[1.0]]\n", "bandwidth_gbps is missing"),
            ("[foo]\n", ":1:"),
            ("[platform.x.memory]\nlatency_ns = [[1.0], [2.0]]\nbandwidth_gbps = [[1.0]]\n", "square"),
            ("[platform.x.memory]\nlatency_ns = [[-1.0]]\nbandwidth_gbps = [[1.0]]\n", "positive"),
            ("[platform.x.memory]\nlatency_ns = [[1.0]\n", "unterminated"),
        ];
        for (text, needle) in cases {
            let e = MemoryParams::parse(text, Path::new("c.toml"))
                .unwrap_err()
                .to_string();
            assert!(e.contains(needle), "{text:?}: {e}");
            assert!(e.starts_with("c.toml:"), "{e}");
        }
    }

    #[test]
    fn floats() {
        assert_eq!(format_float(90.0), "90.0");
        assert_eq!(format_float(12.345), "12.35");
    }
}
