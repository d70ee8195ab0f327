//! SVG plots of `nudma reproduce`: one file `<id>.svg` per experiment that names an x
//! parameter, with one chart per plotted metric stacked vertically, one line with points
//! per series (the config plus every parameter other than x), or grouped bars when x is
//! categorical; how coinciding series stay visible is in [`chart`].
//!
//! Each series has its own (colour, marker) pair — twelve colours and five filled marker
//! shapes, so no two of the first sixty series share both — and each published value of a
//! plotted metric is drawn at its run's x in the series' colour as a hollow marker: a
//! circle for a prediction, a diamond for a calibration point ("fitted"), a published
//! range as both ends joined by a bar; the legend names both kinds.
//!
//! An experiment whose x names a list-valued metric rather than a parameter (a timeline:
//! `t_ms` beside per-sample metrics of the same length) gets one line per run, each
//! plotted metric's list against the x list.
//!
//! Experiments without an x get no plot: their few values read better in the table. Drawing uses plotters' SVG backend, which writes text as `<text>` elements with a
//! generic `font-family`, so no font file is read here; the viewer picks a font.

use std::collections::BTreeSet;
use std::fs;
use std::io;
use std::ops::Range;
use std::path::{Path, PathBuf};

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::coord::CoordTranslate;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use serde_json::Value;

use crate::format::{format_number, format_param_value, is_size_param};
use crate::result::{Basis, ExperimentInfo, Reference, Run};

mod chart;
use chart::draw;

const WIDTH: u32 = 960;
const MIN_CHART_HEIGHT: u32 = 400;
const LEGEND_LINE: i32 = 18;
const FONT: &str = "sans-serif";

/// Twelve hues that stay apart on white: Tableau 10, navy and black.
pub const PALETTE: [RGBColor; 12] = [
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
    RGBColor(0, 0, 128),
    RGBColor(0, 0, 0),
];

/// The shape of a point marker.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Shape {
    Circle,
    Square,
    TriangleUp,
    Diamond,
    TriangleDown,
}

/// The series' filled markers; their count (5) and the palette's (12) share no factor.
pub const SHAPES: [Shape; 5] = [
    Shape::Circle,
    Shape::Square,
    Shape::TriangleUp,
    Shape::Diamond,
    Shape::TriangleDown,
];

/// The colour and filled marker of the `i`-th series of a plot: colour `i mod 12`, shape
/// `i mod 5`, so neighbours differ in both and no two of the first 60 series share both.
pub fn series_style(i: usize) -> (RGBColor, Shape) {
    (PALETTE[i % PALETTE.len()], SHAPES[i % SHAPES.len()])
}

/// The hollow marker of a published value: a circle for a prediction, a diamond for a
/// value a parameter was fitted on.
pub fn published_shape(basis: Basis) -> Shape {
    match basis {
        Basis::Prediction => Shape::Circle,
        Basis::Calibration(_) => Shape::Diamond,
    }
}

/// The legend's words for a published value's basis.
pub fn published_label(basis: Basis) -> &'static str {
    match basis {
        Basis::Prediction => "published (predicted)",
        Basis::Calibration(_) => "published (fitted)",
    }
}

/// Half the size of a series marker and of a published one, in pixels.
const MARK: i32 = 4;
/// Most markers drawn on a timeline's line (a sweep marks every point).
const MAX_MARKERS: usize = 25;
const PUBLISHED_MARK: i32 = 7;

/// A point marker: a filled one for a series point, a hollow one (stroke 2) for a
/// published value.
#[derive(Clone, Copy)]
struct Marker {
    shape: Shape,
    size: i32,
    color: RGBColor,
    filled: bool,
}

impl Marker {
    fn series((color, shape): (RGBColor, Shape)) -> Self {
        Marker {
            shape,
            size: MARK,
            color,
            filled: true,
        }
    }

    fn published(basis: Basis, color: RGBColor) -> Self {
        Marker {
            shape: published_shape(basis),
            size: PUBLISHED_MARK,
            color,
            filled: false,
        }
    }

    /// A legend's filled square for a series drawn as bars.
    fn swatch(color: RGBColor) -> Self {
        Marker {
            shape: Shape::Square,
            size: MARK + 2,
            color,
            filled: true,
        }
    }

    /// Draws the marker centred on `at` (in `area`'s coordinates).
    fn draw<DB: DrawingBackend, CT: CoordTranslate>(
        &self,
        area: &DrawingArea<DB, CT>,
        at: CT::From,
    ) -> io::Result<()> {
        self.draw_shifted(area, at, 0)
    }

    /// Draws the marker `dx` pixels right of `at`.
    fn draw_shifted<DB: DrawingBackend, CT: CoordTranslate>(
        &self,
        area: &DrawingArea<DB, CT>,
        at: CT::From,
        dx: i32,
    ) -> io::Result<()> {
        let style = ShapeStyle {
            color: self.color.to_rgba(),
            filled: self.filled,
            stroke_width: if self.filled { 1 } else { 2 },
        };
        let s = self.size;
        let base = EmptyElement::at(at);
        let polygon: Vec<(i32, i32)> = match self.shape {
            Shape::Circle => {
                return area
                    .draw(&(base + Circle::new((dx, 0), s, style)))
                    .map_err(io_err)
            }
            Shape::Square => vec![(-s, -s), (s, -s), (s, s), (-s, s)],
            Shape::TriangleUp => vec![(0, -s - 1), (s + 1, s), (-s - 1, s)],
            Shape::TriangleDown => vec![(0, s + 1), (-s - 1, -s), (s + 1, -s)],
            Shape::Diamond => vec![(0, -s - 1), (s + 1, 0), (0, s + 1), (-s - 1, 0)],
        };
        let polygon: Vec<(i32, i32)> = polygon.into_iter().map(|(x, y)| (x + dx, y)).collect();
        if self.filled {
            area.draw(&(base + Polygon::new(polygon, style)))
        } else {
            let mut closed = polygon.clone();
            closed.push(polygon[0]);
            area.draw(&(base + PathElement::new(closed, style)))
        }
        .map_err(io_err)
    }
}

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

/// Whether [`write_plots`] draws a plot for `info`: it names an x and metrics to plot,
/// and some run of it has x as a parameter or (a timeline) as a list metric.
pub fn has_plot(info: &ExperimentInfo, runs: &[Run]) -> bool {
    match info.x_param {
        Some(x) => {
            !info.plot_metrics.is_empty()
                && runs.iter().any(|r| {
                    r.experiment == info.id && (r.params.contains_key(x) || is_timeline(r, x))
                })
        }
        None => false,
    }
}

/// A run whose `x` is a list metric (and no parameter): its plot is a timeline.
fn is_timeline(run: &Run, x: &str) -> bool {
    !run.params.contains_key(x) && run.metrics.get(x).is_some_and(Value::is_array)
}

/// The finite numbers of a list metric, by position (`None` where an entry is not one).
fn list(run: &Run, metric: &str) -> Vec<Option<f64>> {
    run.metrics
        .get(metric)
        .and_then(Value::as_array)
        .map(|v| {
            v.iter()
                .map(|y| y.as_f64().filter(|y| y.is_finite()))
                .collect()
        })
        .unwrap_or_default()
}

/// The series of a run in a sweep over `x`: its config and every other parameter.
pub fn series_label(run: &Run, x: &str) -> String {
    let mut label = run.config.clone();
    for (name, value) in run.params.iter().filter(|(n, _)| *n != x) {
        label.push_str(&format!(" {name}={}", format_param_value(name, value)));
    }
    label
}

/// Writes `<id>.svg` into `dir` (created if missing) for every experiment of `infos` that
/// [`has_plot`], with the published values of `refs` marked; returns the files written, in
/// `infos` order.
pub fn write_plots(
    dir: &Path,
    infos: &[ExperimentInfo],
    runs: &[Run],
    refs: &[Reference],
) -> io::Result<Vec<PathBuf>> {
    fs::create_dir_all(dir)?;
    let mut written = Vec::new();
    let mut seen = BTreeSet::new();
    for info in infos {
        if !seen.insert(info.id) {
            continue;
        }
        if let Some(svg) = render_svg(info, runs, refs)? {
            let path = dir.join(plot_file_name(info.id));
            fs::write(&path, svg)?;
            written.push(path);
        }
    }
    Ok(written)
}

/// The SVG text of an experiment's plot, or `None` when it [`has_plot`] not. Every
/// reference of `refs` that applies to a plotted run and metric is marked at that run's x.
pub fn render_svg(
    info: &ExperimentInfo,
    runs: &[Run],
    refs: &[Reference],
) -> io::Result<Option<String>> {
    let Some(x) = info.x_param.filter(|_| has_plot(info, runs)) else {
        return Ok(None);
    };
    let sweep: Vec<&Run> = runs
        .iter()
        .filter(|r| r.experiment == info.id && r.params.contains_key(x))
        .collect();
    if !sweep.is_empty() {
        let axis = XAxis::new(&sweep, x, info.x_log2);
        let series = Series::collect(&sweep, x, &axis);
        return draw(info, x, &axis, &series, refs).map(Some);
    }
    let timeline: Vec<&Run> = runs
        .iter()
        .filter(|r| r.experiment == info.id && is_timeline(r, x))
        .collect();
    let xs: Vec<f64> = timeline.iter().flat_map(|r| list(r, x)).flatten().collect();
    let axis = XAxis::numeric(&xs, x, false);
    let series: Vec<Series> = timeline
        .iter()
        .map(|r| Series {
            label: series_label(r, x),
            runs: Vec::new(),
            timeline: Some((x.to_string(), *r)),
        })
        .collect();
    draw(info, x, &axis, &series, refs).map(Some)
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
        XAxis::numeric(&numbers, x, log2)
    }

    /// A numeric axis over `numbers` (log2 if asked and all are positive).
    fn numeric(numbers: &[f64], x: &str, log2: bool) -> XAxis {
        let log2 = log2 && numbers.iter().all(|v| *v > 0.0);
        let pos: Vec<f64> = if log2 {
            numbers.iter().map(|v| v.log2()).collect()
        } else {
            numbers.to_vec()
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

/// One line of a chart: the runs of one (config, other params), sorted by x; or, on a
/// timeline, one run's lists (the x metric's name and the run).
struct Series<'a> {
    label: String,
    runs: Vec<(f64, &'a Run)>,
    timeline: Option<(String, &'a Run)>,
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
                    timeline: None,
                }),
            }
        }
        for s in &mut series {
            s.runs.sort_by(|a, b| a.0.total_cmp(&b.0));
        }
        series
    }

    fn points(&self, metric: &str) -> Vec<(f64, f64)> {
        if let Some((x, run)) = &self.timeline {
            // Sample by sample, where both lists have a number.
            return list(run, x)
                .into_iter()
                .zip(list(run, metric))
                .filter_map(|(x, y)| Some((x?, y?)))
                .collect();
        }
        self.runs
            .iter()
            .filter_map(|(x, run)| {
                let y = run.metrics.get(metric)?.as_f64()?;
                y.is_finite().then_some((*x, y))
            })
            .collect()
    }

    /// The published values of `metric` among `refs` that apply to this series' runs:
    /// (x, low, high, basis), in run then reference order, each once.
    fn published(&self, metric: &str, refs: &[Reference]) -> Vec<Published> {
        let mut out: Vec<Published> = Vec::new();
        for (x, run) in &self.runs {
            for r in refs.iter().filter(|r| r.metric == metric && r.applies(run)) {
                let p = Published {
                    x: *x,
                    low: r.value,
                    high: r.value_high.max(r.value),
                    basis: r.basis,
                };
                if p.low.is_finite() && p.high.is_finite() && !out.contains(&p) {
                    out.push(p);
                }
            }
        }
        out
    }
}

/// A published value placed on a chart.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Published {
    x: f64,
    low: f64,
    high: f64,
    basis: Basis,
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
