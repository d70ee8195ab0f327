//! SVG plots of `nudma reproduce`: one file `<id>.svg` per experiment that names an x
//! parameter, with one chart per plotted metric stacked vertically, one line with points
//! per series (the config plus every parameter other than x).
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

    /// Draws the marker centred on `at` (in `area`'s coordinates).
    fn draw<DB: DrawingBackend, CT: CoordTranslate>(
        &self,
        area: &DrawingArea<DB, CT>,
        at: CT::From,
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
                    .draw(&(base + Circle::new((0, 0), s, style)))
                    .map_err(io_err)
            }
            Shape::Square => vec![(-s, -s), (s, -s), (s, s), (-s, s)],
            Shape::TriangleUp => vec![(0, -s - 1), (s + 1, s), (-s - 1, s)],
            Shape::TriangleDown => vec![(0, s + 1), (-s - 1, -s), (s + 1, -s)],
            Shape::Diamond => vec![(0, -s - 1), (s + 1, 0), (0, s + 1), (-s - 1, 0)],
        };
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

fn draw(
    info: &ExperimentInfo,
    x: &str,
    axis: &XAxis,
    series: &[Series],
    refs: &[Reference],
) -> io::Result<String> {
    let n_charts = info.plot_metrics.len().max(1);
    // Per chart, its published values per series and which kinds the legend names.
    let published: Vec<Vec<Vec<Published>>> = info
        .plot_metrics
        .iter()
        .map(|m| series.iter().map(|s| s.published(m, refs)).collect())
        .collect();
    let kinds: Vec<Vec<Basis>> = published.iter().map(|p| published_kinds(p)).collect();
    let extra_rows = kinds.iter().map(Vec::len).max().unwrap_or(0);
    let legend_rows = (series.len() + extra_rows + usize::from(extra_rows > 0)) as i32;
    let chart_height = MIN_CHART_HEIGHT.max((90 + legend_rows * LEGEND_LINE) as u32);
    let longest = series
        .iter()
        .map(|s| s.label.chars().count())
        .chain((extra_rows > 0).then_some(published_label(Basis::Prediction).len()))
        .max()
        .unwrap_or(0) as u32;
    let legend_width = (longest * 7 + 50).clamp(140, 360);

    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, chart_height * n_charts as u32))
            .into_drawing_area();
        root.fill(&WHITE).map_err(io_err)?;
        let rows = root.split_evenly((n_charts, 1));
        for (k, (area, metric)) in rows.iter().zip(&info.plot_metrics).enumerate() {
            let (plot_area, legend_area) = area.split_horizontally(WIDTH - legend_width);
            draw_chart(&plot_area, info, metric, x, axis, series, &published[k])?;
            draw_legend(&legend_area, series, &kinds[k])?;
        }
        root.present().map_err(io_err)?;
    }
    Ok(svg)
}

/// The bases among a chart's published values: prediction first, then calibration.
fn published_kinds(published: &[Vec<Published>]) -> Vec<Basis> {
    let all = published.iter().flatten();
    let mut kinds = Vec::new();
    if all.clone().any(|p| !p.basis.is_calibration()) {
        kinds.push(Basis::Prediction);
    }
    if all.clone().any(|p| p.basis.is_calibration()) {
        kinds.push(Basis::Calibration(&[]));
    }
    kinds
}

fn draw_chart<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    info: &ExperimentInfo,
    metric: &str,
    x: &str,
    axis: &XAxis,
    series: &[Series],
    published: &[Vec<Published>],
) -> io::Result<()> {
    let points: Vec<Vec<(f64, f64)>> = series.iter().map(|s| s.points(metric)).collect();
    let (y_lo, y_hi) = y_range(
        points
            .iter()
            .flatten()
            .map(|p| p.1)
            .chain(published.iter().flatten().flat_map(|p| [p.low, p.high])),
    );
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
    let y_desc = match info.unit(metric) {
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
        let style = series_style(i);
        chart
            .draw_series(LineSeries::new(
                pts.iter().copied(),
                style.0.stroke_width(2),
            ))
            .map_err(io_err)?;
        let marker = Marker::series(style);
        // A timeline's samples are too dense for a marker each: about 25 per line.
        let stride = match series[i].timeline {
            Some(_) => pts.len().div_ceil(MAX_MARKERS).max(1),
            None => 1,
        };
        for p in pts.iter().step_by(stride) {
            marker.draw(chart.plotting_area(), *p)?;
        }
    }
    // Published values over the series, so a simulated point never hides one.
    for (i, values) in published.iter().enumerate() {
        let color = series_style(i).0;
        for p in values {
            let marker = Marker::published(p.basis, color);
            if p.high > p.low {
                chart
                    .draw_series(std::iter::once(PathElement::new(
                        vec![(p.x, p.low), (p.x, p.high)],
                        color.stroke_width(1),
                    )))
                    .map_err(io_err)?;
                marker.draw(chart.plotting_area(), (p.x, p.high))?;
            }
            marker.draw(chart.plotting_area(), (p.x, p.low))?;
        }
    }
    Ok(())
}

/// The legend beside the chart rather than over it, so it never hides data however many
/// series there are; below the series, the published markers the chart uses.
fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    series: &[Series],
    published: &[Basis],
) -> io::Result<()> {
    let style = TextStyle::from((FONT, 13).into_font())
        .color(&BLACK)
        .pos(Pos::new(HPos::Left, VPos::Center));
    for (i, s) in series.iter().enumerate() {
        let (color, shape) = series_style(i);
        let y = 52 + i as i32 * LEGEND_LINE;
        area.draw(&PathElement::new(
            vec![(4, y), (28, y)],
            color.stroke_width(2),
        ))
        .map_err(io_err)?;
        Marker::series((color, shape)).draw(area, (16, y))?;
        area.draw(&Text::new(s.label.clone(), (34, y), style.clone()))
            .map_err(io_err)?;
    }
    for (k, basis) in published.iter().enumerate() {
        let y = 52 + (series.len() + 1 + k) as i32 * LEGEND_LINE;
        Marker::published(*basis, BLACK).draw(area, (16, y))?;
        area.draw(&Text::new(published_label(*basis), (34, y), style.clone()))
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
