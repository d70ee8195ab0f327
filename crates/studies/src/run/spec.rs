//! The `[[workload]]` and `[measure]` sections of a scenario file, as DESIGN.md shapes
//! them, read with their positions so that every error names file, line, column and key.
//! Which hardware a workload names is checked later, against the loaded fabric.

use std::ops::Range;

use fabric::scenario::Source;
use fabric::units::Size;
use fabric::ScenarioError;
use serde::Deserialize;
use sim::Time;
use toml::Spanned;

/// A workload of a scenario.
#[derive(Clone, Debug, PartialEq)]
pub struct Workload {
    pub name: String,
    pub kind: Kind,
    /// Where it was written (for errors found against the fabric).
    pub at: ScenarioError,
}

/// Read or write, as a workload says it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    Read,
    Write,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Kind {
    /// A device keeps `outstanding` DMA requests of `transfer_bytes` in flight to or from
    /// `target` (+`offset`), each split per MPS/MRRS and bounded by the device's tags.
    Dma {
        device: String,
        target: String,
        offset: u64,
        op: Direction,
        transfer_bytes: u64,
        outstanding: u32,
    },
    /// Cores on `cpu_node` keep `misses_in_flight` line misses against `mem_node`.
    CpuStream {
        host: String,
        cpu_node: u32,
        mem_node: u32,
        op: Direction,
        misses_in_flight: u32,
    },
    /// Two GPU kernels bounce a counter: A writes B's, B answers in A's. The counters sit
    /// in each GPU's memory, or in `ram` (host RAM, polled by reads).
    PingPong {
        a: String,
        b: String,
        ram: Option<String>,
    },
    /// An NTB adapter's DMA engine copies `transfer_bytes` from `source` to `target`,
    /// `outstanding` copies at a time.
    NtbCopy {
        ntb: String,
        source: String,
        source_offset: u64,
        target: String,
        offset: u64,
        transfer_bytes: u64,
        outstanding: u32,
    },
}

impl Kind {
    pub fn name(&self) -> &'static str {
        match self {
            Kind::Dma { .. } => "dma",
            Kind::CpuStream { .. } => "cpu_stream",
            Kind::NtbCopy { .. } => "ntb_copy",
            Kind::PingPong { .. } => "pingpong",
        }
    }
}

/// The measurement window in simulated time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Measure {
    pub warmup: Time,
    pub duration: Time,
}

/// What `nudma run` needs of a scenario besides its hardware.
#[derive(Clone, Debug, PartialEq)]
pub struct RunSpec {
    pub workloads: Vec<Workload>,
    pub measure: Measure,
}

#[derive(Deserialize)]
struct File {
    #[serde(default)]
    workload: Vec<Spanned<toml::Table>>,
    measure: Option<Spanned<RawMeasure>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMeasure {
    warmup: Spanned<String>,
    duration: Spanned<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDma {
    name: String,
    #[allow(dead_code)]
    kind: String,
    device: String,
    target: String,
    #[serde(default)]
    offset: Size,
    op: Direction,
    transfer_bytes: Size,
    outstanding: u32,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStream {
    name: String,
    #[allow(dead_code)]
    kind: String,
    host: String,
    cpu_node: u32,
    mem_node: u32,
    op: Direction,
    misses_in_flight: u32,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPingPong {
    name: String,
    #[allow(dead_code)]
    kind: String,
    a: String,
    b: String,
    counters: Counters,
    ram: Option<String>,
}

#[derive(Deserialize, PartialEq)]
#[serde(rename_all = "snake_case")]
enum Counters {
    GpuMemory,
    HostRam,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCopy {
    name: String,
    #[allow(dead_code)]
    kind: String,
    ntb: String,
    source: String,
    #[serde(default)]
    source_offset: Size,
    target: String,
    #[serde(default)]
    offset: Size,
    transfer_bytes: Size,
    outstanding: u32,
}

/// Largest single DMA operation a workload may ask for (the model routes every page).
pub const MAX_TRANSFER: u64 = 1 << 30;
/// Largest buffer a DMA workload cycles through.
pub const MAX_BUFFER: u64 = 4 << 30;
/// Most operations or misses a workload may keep in flight.
pub const MAX_IN_FLIGHT: u32 = 1 << 16;
/// Longest measurement window (simulated), so a run stays tractable.
pub const MAX_WINDOW_NS: f64 = 1e9;

/// Line and column (1-based) of a byte offset.
fn locate(text: &str, at: usize) -> (usize, usize) {
    let before = &text[..at.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
    (line, col)
}

fn error(src: &Source, span: Range<usize>, key: Option<&str>, msg: &str) -> ScenarioError {
    let (line, col) = if span.is_empty() && span.start == 0 {
        (0, 0)
    } else {
        locate(&src.text, span.start)
    };
    ScenarioError {
        file: src.name.clone(),
        line,
        col,
        key: key.map(str::to_string),
        message: msg.to_string(),
    }
}

/// "100 us", "1 ms", "250ns", "2 s" (also µs): a duration in simulated time.
pub fn parse_duration(s: &str) -> Result<Time, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let x: f64 = num
        .replace('_', "")
        .parse()
        .map_err(|_| format!("`{s}` is not a duration: expected e.g. \"100 us\" or \"1 ms\""))?;
    let ns = match unit.trim() {
        "ps" => x / 1000.0,
        "ns" => x,
        "us" | "µs" => x * 1e3,
        "ms" => x * 1e6,
        "s" => x * 1e9,
        "" => return Err(format!("`{s}` has no unit (use ns, us, ms or s)")),
        other => {
            return Err(format!(
                "unknown time unit `{other}` in `{s}` (use ns, us, ms or s)"
            ))
        }
    };
    if !(0.0..=MAX_WINDOW_NS).contains(&ns) {
        return Err(format!("`{s}` is outside 0 .. 1 s of simulated time"));
    }
    Time::from_ns_f64(ns).ok_or_else(|| format!("`{s}` is not a representable time"))
}

/// Reads the workloads and measurement window of a scenario source. A scenario without
/// workloads is an error for `run` (it has nothing to simulate).
pub fn parse(src: &Source) -> Result<RunSpec, ScenarioError> {
    let file: File = toml::from_str(&src.text)
        .map_err(|e| error(src, e.span().unwrap_or(0..0), None, e.message()))?;
    if file.workload.is_empty() {
        return Err(error(
            src,
            0..0,
            None,
            "no [[workload]] to run (see README: \"Describing your own workloads\")",
        ));
    }
    let measure = file.measure.as_ref().ok_or_else(|| {
        error(
            src,
            0..0,
            None,
            "no [measure] table: give `warmup` and `duration` (simulated time, e.g. \"100 us\")",
        )
    })?;
    let m = measure.get_ref();
    let time = |v: &Spanned<String>, key: &str| {
        parse_duration(v.get_ref()).map_err(|msg| error(src, v.span(), Some(key), &msg))
    };
    let measure = Measure {
        warmup: time(&m.warmup, "measure.warmup")?,
        duration: time(&m.duration, "measure.duration")?,
    };
    if measure.duration == Time::ZERO {
        return Err(error(
            src,
            m.duration.span(),
            Some("measure.duration"),
            "the measurement window must be longer than zero",
        ));
    }
    let mut workloads: Vec<Workload> = Vec::new();
    for w in &file.workload {
        let span = w.span();
        let table = w.get_ref();
        let at = error(src, span.clone(), None, "");
        let kind = table.get("kind").and_then(|k| k.as_str()).ok_or_else(|| {
            error(
                src,
                span.clone(),
                Some("workload.kind"),
                "a workload needs `kind` = \"dma\", \"cpu_stream\", \"ntb_copy\" or \"pingpong\"",
            )
        })?;
        let name_of = |t: &toml::Table| {
            t.get("name")
                .and_then(|n| n.as_str())
                .unwrap_or("?")
                .to_string()
        };
        let bad = |e: toml::de::Error| {
            let key = format!("workload.{}", name_of(table));
            error(src, span.clone(), Some(&key), e.message())
        };
        let value = toml::Value::Table(table.clone());
        let (name, kind) = match kind {
            "dma" => {
                let r: RawDma = value.try_into().map_err(bad)?;
                let k = Kind::Dma {
                    device: r.device,
                    target: r.target,
                    offset: r.offset.0,
                    op: r.op,
                    transfer_bytes: r.transfer_bytes.0,
                    outstanding: r.outstanding,
                };
                (r.name, k)
            }
            "cpu_stream" => {
                let r: RawStream = value.try_into().map_err(bad)?;
                let k = Kind::CpuStream {
                    host: r.host,
                    cpu_node: r.cpu_node,
                    mem_node: r.mem_node,
                    op: r.op,
                    misses_in_flight: r.misses_in_flight,
                };
                (r.name, k)
            }
            "ntb_copy" => {
                let r: RawCopy = value.try_into().map_err(bad)?;
                let k = Kind::NtbCopy {
                    ntb: r.ntb,
                    source: r.source,
                    source_offset: r.source_offset.0,
                    target: r.target,
                    offset: r.offset.0,
                    transfer_bytes: r.transfer_bytes.0,
                    outstanding: r.outstanding,
                };
                (r.name, k)
            }
            "pingpong" => {
                let r: RawPingPong = value.try_into().map_err(bad)?;
                let ram = match (r.counters, r.ram) {
                    (Counters::HostRam, Some(ram)) => Some(ram),
                    (Counters::GpuMemory, None) => None,
                    (Counters::HostRam, None) => {
                        return Err(error(
                            src,
                            span,
                            Some(&format!("workload.{}.ram", r.name)),
                            "counters in host RAM need `ram` = \"host.ram.nodeN\"",
                        ))
                    }
                    (Counters::GpuMemory, Some(_)) => {
                        return Err(error(
                            src,
                            span,
                            Some(&format!("workload.{}.ram", r.name)),
                            "`ram` is for counters = \"host_ram\"",
                        ))
                    }
                };
                (
                    r.name,
                    Kind::PingPong {
                        a: r.a,
                        b: r.b,
                        ram,
                    },
                )
            }
            other => {
                return Err(error(
                    src,
                    span,
                    Some("workload.kind"),
                    &format!(
                    "unknown workload kind `{other}` (known: dma, cpu_stream, ntb_copy, pingpong)"
                ),
                ))
            }
        };
        let key = |f: &str| format!("workload.{name}.{f}");
        let range = |ok: bool, f: &str, msg: &str| {
            if ok {
                Ok(())
            } else {
                Err(error(src, span.clone(), Some(&key(f)), msg))
            }
        };
        match &kind {
            Kind::Dma {
                transfer_bytes,
                outstanding,
                ..
            }
            | Kind::NtbCopy {
                transfer_bytes,
                outstanding,
                ..
            } => {
                range(
                    (1..=MAX_TRANSFER).contains(transfer_bytes),
                    "transfer_bytes",
                    "must be 1 B .. 1 GiB",
                )?;
                range(
                    (1..=MAX_IN_FLIGHT).contains(outstanding),
                    "outstanding",
                    "must be 1 .. 65536 requests in flight",
                )?;
                // The buffer the requests cycle through is routed page by page.
                range(
                    transfer_bytes * *outstanding as u64 <= MAX_BUFFER,
                    "outstanding",
                    "transfer_bytes × outstanding (the buffer the requests cycle through) must stay within 4 GiB",
                )?;
            }
            Kind::PingPong { .. } => {}
            Kind::CpuStream {
                misses_in_flight, ..
            } => range(
                (1..=MAX_IN_FLIGHT).contains(misses_in_flight),
                "misses_in_flight",
                "must be 1 .. 65536 line misses in flight",
            )?,
        }
        if workloads.iter().any(|w| w.name == name) {
            return Err(error(
                src,
                span,
                Some(&key("name")),
                &format!("two workloads are named `{name}`: names must be unique"),
            ));
        }
        if !fabric::scenario::valid_name(&name) {
            return Err(error(
                src,
                span,
                Some(&key("name")),
                "workload names use letters, digits, `_` and `-`",
            ));
        }
        workloads.push(Workload { name, kind, at });
    }
    Ok(RunSpec { workloads, measure })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn src(text: &str) -> Source {
        Source {
            name: "t.toml".into(),
            text: text.into(),
        }
    }

    const OK: &str = r#"
[[workload]]
name = "rx"
kind = "dma"
device = "srv.nic0"
target = "srv.ram.node1"
op = "write"
transfer_bytes = "4 KiB"
outstanding = 32

[[workload]]
name = "ant"
kind = "cpu_stream"
host = "srv"
cpu_node = 0
mem_node = 1
op = "read"
misses_in_flight = 10

[measure]
warmup = "100 us"
duration = "1 ms"
"#;

    #[test]
    fn the_design_example_parses() {
        let s = parse(&src(OK)).unwrap();
        assert_eq!(s.workloads.len(), 2);
        assert_eq!(s.measure.duration, Time::from_ns(1_000_000));
        assert!(matches!(
            s.workloads[0].kind,
            Kind::Dma {
                transfer_bytes: 4096,
                outstanding: 32,
                op: Direction::Write,
                ..
            }
        ));
    }

    #[test]
    fn errors_are_located_and_named() {
        let e = parse(&src(&OK.replace("outstanding = 32", "outstandin = 32"))).unwrap_err();
        assert_eq!((e.line, e.key.as_deref()), (2, Some("workload.rx")));
        assert!(e.message.contains("outstandin"), "{e}");
        let e = parse(&src(&OK.replace("outstanding = 32", "outstanding = 0"))).unwrap_err();
        assert_eq!(e.key.as_deref(), Some("workload.rx.outstanding"));
        let e = parse(&src(&OK.replace("\"1 ms\"", "\"1 fortnight\""))).unwrap_err();
        assert_eq!(e.key.as_deref(), Some("measure.duration"));
        assert_eq!(e.line, 22);
        let e = parse(&src(&OK.replace("name = \"ant\"", "name = \"rx\""))).unwrap_err();
        assert!(e.message.contains("unique"), "{e}");
        let e = parse(&src(&OK.replace("kind = \"dma\"", "kind = \"dmaa\""))).unwrap_err();
        assert!(e.message.contains("unknown workload kind `dmaa`"), "{e}");
    }

    #[test]
    fn durations_need_units_and_stay_in_range() {
        assert_eq!(parse_duration("250ns").unwrap(), Time::from_ns(250));
        assert_eq!(parse_duration("1.5 us").unwrap(), Time::from_ns(1500));
        assert!(parse_duration("100").is_err());
        assert!(parse_duration("5 s").is_err());
    }
}
