//! SVG plots of `nudma reproduce`: one file `<id>.svg` per experiment that names an x
//! parameter, with one chart per plotted metric stacked vertically, one line with points
//! per series (the config plus every parameter other than x).
//!
//! Experiments without an x parameter get no plot: their few values read better in the
//! table. Drawing uses plotters' SVG backend, which writes text as `<text>` elements with a
//! generic `font-family`, so no font file is read here; the viewer picks a font.

use std::collections::BTreeSet;
use std::fs;
use std::io;
use std::ops::Range;
use std::path::{Path, PathBuf};

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use serde_json::Value;

use crate::report::{format_number, format_param_value, is_size_param, series_label};
use crate::result::{ExperimentInfo, Run};

const WIDTH: u32 = 960;
const MIN_CHART_HEIGHT: u32 = 400;
const LEGEND_LINE: i32 = 18;
const FONT: &str = "sans-serif";

/// Tableau 10: distinct hues that stay readable on white.
const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// The file an experiment's plot is written to: `<id>.svg`, with anything but
/// `[A-Za-z0-9._-]` replaced so an id can never leave the output directory.
pub fn plot_file_name(id: &str) -> String {
    let safe: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{safe}.svg")
}

/// Whether [`write_plots`] draws a plot for `info`: it names an x parameter and metrics
/// to plot, and some run of it has that parameter.
pub fn has_plot(info: &ExperimentInfo, runs: &[Run]) -> bool {
    match info.x_param {
        Some(x) => {
            !info.plot_metrics.is_empty()
                && runs
                    .iter()
                    .any(|r| r.experiment == info.id && r.params.contains_key(x))
        }
        None => false,
    }
}

/// Writes `<id>.svg` into `dir` (created if missing) for every experiment of `infos` that
/// [`has_plot`]; returns the files written, in `infos` order.
pub fn write_plots(dir: &Path, infos: &[ExperimentInfo], runs: &[Run]) -> io::Result<Vec<PathBuf>> {
    fs::create_dir_all(dir)?;
    let mut written = Vec::new();
    let mut seen = BTreeSet::new();
    for info in infos {
        if !seen.insert(info.id) {
            continue;
        }
        if let Some(svg) = render_svg(info, runs)? {
            let path = dir.join(plot_file_name(info.id));
            fs::write(&path, svg)?;
            written.push(path);
        }
    }
    Ok(written)
}

/// The SVG text of an experiment's plot, or `None` when it [`has_plot`] not.
pub fn render_svg(info: &ExperimentInfo, runs: &[Run]) -> io::Result<Option<String>> {
    let Some(x) = info.x_param.filter(|_| has_plot(info, runs)) else {
        return Ok(None);
    };
    let runs: Vec<&Run> = runs
        .iter()
        .filter(|r| r.experiment == info.id && r.params.contains_key(x))
        .collect();
    let axis = XAxis::new(&runs, x, info.x_log2);
    let series = Series::collect(&runs, x, &axis);
    draw(info, x, &axis, &series).map(Some)
}

/// The unit of a metric's axis, as its name says. `*_gbps` is gigabits per second in
/// `ioctopus.*` (EXPERIMENTS.md: the network convention) and gigabytes elsewhere.
pub fn metric_unit(experiment: &str, metric: &str) -> Option<&'static str> {
    if metric.ends_with("_gbps") || metric == "gbps" {
        Some(if experiment.starts_with("ioctopus.") {
            "Gb/s"
        } else {
            "GB/s"
        })
    } else if metric.ends_with("_ns") {
        Some("ns")
    } else if metric.ends_with("_us") {
        Some("µs")
    } else if metric.ends_with("_ms") {
        Some("ms")
    } else if metric.ends_with("_s") {
        Some("s")
    } else {
        match metric {
            "mpps" => Some("Mpps"),
            "mops" => Some("Mops"),
            "kops" => Some("kops"),
            _ => None,
        }
    }
}

/// A value on a log2 axis: a whole multiple of 1024^k as "4K", "64K", "1M", "64M", "1G".
pub fn format_pow2_tick(v: f64) -> String {
    if !v.is_finite() {
        return "n/a".to_string();
    }
    let r = v.round();
    if r >= 1024.0 && (v - r).abs() <= 1e-6 * r {
        let n = r as u64;
        for (unit, suffix) in [
            (1u64 << 40, "T"),
            (1 << 30, "G"),
            (1 << 20, "M"),
            (1 << 10, "K"),
        ] {
            if n >= unit && n.is_multiple_of(unit) {
                return format!("{}{suffix}", n / unit);
            }
        }
    }
    format_number(if (v - r).abs() <= 1e-6 * r.abs() {
        r
    } else {
        v
    })
}

enum XKind {
    /// Positions are log2 of the value.
    Log2,
    Linear {
        sizes: bool,
    },
    /// Non-numeric values, at 0, 1, 2, … in order of first appearance.
    Categories(Vec<String>),
}

struct XAxis {
    kind: XKind,
    range: Range<f64>,
    ticks: Vec<f64>,
}

impl XAxis {
    fn new(runs: &[&Run], x: &str, log2: bool) -> XAxis {
        let values: Vec<&Value> = runs.iter().filter_map(|r| r.params.get(x)).collect();
        let numbers: Vec<f64> = values.iter().filter_map(|v| v.as_f64()).collect();
        if numbers.len() < values.len() || numbers.iter().any(|v| !v.is_finite()) {
            let mut labels: Vec<String> = Vec::new();
            for v in &values {
                let label = format_param_value(x, v);
                if !labels.contains(&label) {
                    labels.push(label);
                }
            }
            let n = labels.len().max(1) as f64;
            return XAxis {
                ticks: (0..labels.len()).map(|i| i as f64).collect(),
                kind: XKind::Categories(labels),
                range: -0.5..n - 0.5,
            };
        }
        let log2 = log2 && numbers.iter().all(|v| *v > 0.0);
        let pos: Vec<f64> = if log2 {
            numbers.iter().map(|v| v.log2()).collect()
        } else {
            numbers.clone()
        };
        let lo = pos.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = pos.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let (lo, hi) = if lo.is_finite() { (lo, hi) } else { (0.0, 1.0) };
        let span = hi - lo;
        let pad = if log2 {
            (span * 0.04).max(0.3)
        } else if span > 0.0 {
            span * 0.04
        } else {
            (lo.abs() * 0.1).max(0.5)
        };
        let ticks = if log2 {
            log2_ticks(lo, hi)
        } else {
            linear_ticks(&pos, lo, hi)
        };
        XAxis {
            kind: if log2 {
                XKind::Log2
            } else {
                XKind::Linear {
                    sizes: is_size_param(x),
                }
            },
            range: lo - pad..hi + pad,
            ticks,
        }
    }

    fn pos(&self, v: &Value, x: &str) -> Option<f64> {
        match &self.kind {
            XKind::Log2 => v.as_f64().filter(|v| *v > 0.0).map(f64::log2),
            XKind::Linear { .. } => v.as_f64(),
            XKind::Categories(labels) => {
                let label = format_param_value(x, v);
                labels.iter().position(|l| *l == label).map(|i| i as f64)
            }
        }
    }

    fn label(&self, pos: f64) -> String {
        match &self.kind {
            XKind::Log2 => format_pow2_tick(pos.exp2()),
            XKind::Linear { sizes: true } => format_pow2_tick(pos),
            XKind::Linear { sizes: false } => format_number(pos),
            XKind::Categories(labels) => {
                let i = pos.round();
                if i >= 0.0 && (i as usize) < labels.len() {
                    labels[i as usize].clone()
                } else {
                    String::new()
                }
            }
        }
    }
}

/// Every power of two in [lo, hi] (exponents), thinned to at most ~9 ticks; the one point
/// itself when no power of two falls inside.
fn log2_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let first = (lo - 1e-9).ceil();
    let last = (hi + 1e-9).floor();
    if !(first.is_finite() && last.is_finite()) || last < first {
        return vec![lo];
    }
    let count = (last - first) as usize + 1;
    let step = count.div_ceil(9).max(1);
    (0..count).step_by(step).map(|k| first + k as f64).collect()
}

/// The values themselves when few (parameter sweeps list a handful), else ~8 round steps.
fn linear_ticks(values: &[f64], lo: f64, hi: f64) -> Vec<f64> {
    let mut distinct: Vec<f64> = values.to_vec();
    distinct.sort_by(f64::total_cmp);
    distinct.dedup();
    if distinct.len() <= 12 {
        return distinct;
    }
    let raw = (hi - lo) / 8.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    if !(step.is_finite() && step > 0.0) {
        return distinct;
    }
    let mut ticks = Vec::new();
    let mut t = (lo / step).ceil() * step;
    while t <= hi + step * 1e-9 && ticks.len() < 50 {
        ticks.push(t);
        t += step;
    }
    ticks
}

/// One line of a chart: the runs of one (config, other params), sorted by x.
struct Series<'a> {
    label: String,
    runs: Vec<(f64, &'a Run)>,
}

impl<'a> Series<'a> {
    fn collect(runs: &[&'a Run], x: &str, axis: &XAxis) -> Vec<Series<'a>> {
        let mut series: Vec<Series<'a>> = Vec::new();
        for run in runs {
            let Some(pos) = run.params.get(x).and_then(|v| axis.pos(v, x)) else {
                continue;
            };
            let label = series_label(run, x);
            match series.iter_mut().find(|s| s.label == label) {
                Some(s) => s.runs.push((pos, run)),
                None => series.push(Series {
                    label,
                    runs: vec![(pos, run)],
                }),
            }
        }
        for s in &mut series {
            s.runs.sort_by(|a, b| a.0.total_cmp(&b.0));
        }
        series
    }

    fn points(&self, metric: &str) -> Vec<(f64, f64)> {
        self.runs
            .iter()
            .filter_map(|(x, run)| {
                let y = run.metrics.get(metric)?.as_f64()?;
                y.is_finite().then_some((*x, y))
            })
            .collect()
    }
}

/// A linear f64 axis whose ticks are exactly `ticks`. Plotters' own `with_key_points`
/// cannot take a label formatter on f64 (its wrapper loses the formatting impl), hence this.
struct XCoord {
    range: Range<f64>,
    ticks: Vec<f64>,
}

impl Ranged for XCoord {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        let span = self.range.end - self.range.start;
        if span.is_nan() || span <= 0.0 {
            return (limit.0 + limit.1) / 2;
        }
        let t = (value - self.range.start) / span;
        // `as` saturates (NaN → 0), so no input can panic here.
        limit
            .0
            .saturating_add(((limit.1 - limit.0) as f64 * t + 1e-3).floor() as i32)
    }

    fn key_points<H: KeyPointHint>(&self, hint: H) -> Vec<f64> {
        // Light (minor) grid lines are not wanted between the chosen ticks.
        if hint.weight().allow_light_points() {
            Vec::new()
        } else {
            self.ticks.clone()
        }
    }

    fn range(&self) -> Range<f64> {
        self.range.clone()
    }
}

fn io_err<E: std::fmt::Display>(e: E) -> io::Error {
    io::Error::other(format!("plot: {e}"))
}

fn draw(info: &ExperimentInfo, x: &str, axis: &XAxis, series: &[Series]) -> io::Result<String> {
    let n_charts = info.plot_metrics.len().max(1);
    let legend_rows = series.len() as i32;
    let chart_height = MIN_CHART_HEIGHT.max((90 + legend_rows * LEGEND_LINE) as u32);
    let longest = series
        .iter()
        .map(|s| s.label.chars().count())
        .max()
        .unwrap_or(0) as u32;
    let legend_width = (longest * 7 + 50).clamp(140, 360);

    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, chart_height * n_charts as u32))
            .into_drawing_area();
        root.fill(&WHITE).map_err(io_err)?;
        let rows = root.split_evenly((n_charts, 1));
        for (area, metric) in rows.iter().zip(&info.plot_metrics) {
            let (plot_area, legend_area) = area.split_horizontally(WIDTH - legend_width);
            draw_chart(&plot_area, info, metric, x, axis, series)?;
            draw_legend(&legend_area, series)?;
        }
        root.present().map_err(io_err)?;
    }
    Ok(svg)
}

fn draw_chart<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    info: &ExperimentInfo,
    metric: &str,
    x: &str,
    axis: &XAxis,
    series: &[Series],
) -> io::Result<()> {
    let points: Vec<Vec<(f64, f64)>> = series.iter().map(|s| s.points(metric)).collect();
    let (y_lo, y_hi) = y_range(points.iter().flatten().map(|p| p.1));
    let mut chart = ChartBuilder::on(area)
        .caption(format!("{} — {metric}", info.id), (FONT, 18))
        .margin(12)
        .x_label_area_size(48)
        .y_label_area_size(78)
        .build_cartesian_2d(
            XCoord {
                range: axis.range.clone(),
                ticks: axis.ticks.clone(),
            },
            y_lo..y_hi,
        )
        .map_err(io_err)?;
    let y_desc = match metric_unit(info.id, metric) {
        Some(unit) => format!("{metric} ({unit})"),
        None => metric.to_string(),
    };
    let x_fmt = |v: &f64| axis.label(*v);
    let y_fmt = |v: &f64| format_number(*v);
    chart
        .configure_mesh()
        .x_desc(x)
        .y_desc(y_desc)
        .x_label_formatter(&x_fmt)
        .y_label_formatter(&y_fmt)
        .y_labels(8)
        .max_light_lines(2)
        .bold_line_style(RGBColor(215, 215, 215))
        .light_line_style(RGBColor(242, 242, 242))
        .label_style((FONT, 13))
        .axis_desc_style((FONT, 14))
        .draw()
        .map_err(io_err)?;
    for (i, pts) in points.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2)))
            .map_err(io_err)?;
        let marker = i / PALETTE.len();
        match marker % 3 {
            0 => chart.draw_series(pts.iter().map(|p| Circle::new(*p, 3, color.filled()))),
            1 => chart.draw_series(
                pts.iter()
                    .map(|p| TriangleMarker::new(*p, 4, color.filled())),
            ),
            _ => chart.draw_series(pts.iter().map(|p| Cross::new(*p, 4, color.stroke_width(2)))),
        }
        .map_err(io_err)?;
    }
    Ok(())
}

/// The legend beside the chart rather than over it, so it never hides data however many
/// series there are.
fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    series: &[Series],
) -> io::Result<()> {
    let style = TextStyle::from((FONT, 13).into_font())
        .color(&BLACK)
        .pos(Pos::new(HPos::Left, VPos::Center));
    for (i, s) in series.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        let y = 52 + i as i32 * LEGEND_LINE;
        area.draw(&PathElement::new(
            vec![(4, y), (28, y)],
            color.stroke_width(2),
        ))
        .map_err(io_err)?;
        let p = (16, y);
        match (i / PALETTE.len()) % 3 {
            0 => area.draw(&Circle::new(p, 3, color.filled())),
            1 => area.draw(&TriangleMarker::new(p, 4, color.filled())),
            _ => area.draw(&Cross::new(p, 4, color.stroke_width(2))),
        }
        .map_err(io_err)?;
        area.draw(&Text::new(s.label.clone(), (34, y), style.clone()))
            .map_err(io_err)?;
    }
    Ok(())
}

/// From zero (or the lowest value, if negative) to the highest, with 5 % headroom; a unit
/// range when there is no data, so the axes still draw.
fn y_range(values: impl Iterator<Item = f64>) -> (f64, f64) {
    // Clamped so that the span and the headroom stay finite for any finite input.
    let (mut lo, mut hi) = (0.0f64, 0.0f64);
    for v in values {
        lo = lo.min(v.max(-1e306));
        hi = hi.max(v.min(1e306));
    }
    if hi - lo <= 0.0 {
        return (0.0, 1.0);
    }
    let pad = (hi - lo) * 0.05;
    (
        if lo < 0.0 { lo - pad } else { lo },
        if hi > 0.0 { hi + pad } else { hi },
    )
}
