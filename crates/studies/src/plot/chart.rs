//! Drawing an experiment's plot: one chart per metric, its legend beside it.
//!
//! Series are lines with markers, or grouped bars when x is categorical (a line between
//! two categories would claim values between them). Series that coincide stay visible:
//! one equal to an earlier series at every point is drawn dashed over it and says so in
//! the legend; in a sweep, equal values' markers stand side by side (a legend note says
//! so); on a timeline each series marks other samples. The experiment's x marks (what
//! happens when) are labelled vertical lines.

use plotters::coord::cartesian::Cartesian2d;
use plotters::coord::types::RangedCoordf64;

use plotters::element::DashedPathElement;

use super::*;

/// Values closer than this fraction of a chart's y span (about a pixel) coincide.
const SAME: f64 = 0.004;
/// How far right each further marker of an equal value is drawn, in pixels.
const DODGE: i32 = 2 * MARK + 3;
/// The fraction of a category's width its group of bars takes.
const GROUP_WIDTH: f64 = 0.8;
const MARK_COLOUR: RGBColor = RGBColor(90, 90, 90);
const DODGE_NOTE: &str = "equal values: markers side by side";

type Area<DB> = DrawingArea<DB, Cartesian2d<XCoord, RangedCoordf64>>;

/// What one chart shows.
struct ChartData<'a> {
    metric: &'a str,
    /// Per series, its points (x position, y).
    points: Vec<Vec<(f64, f64)>>,
    published: Vec<Vec<Published>>,
    y: (f64, f64),
    bars: bool,
    /// Per series, the earlier series it equals at every point, if any.
    same_as: Vec<Option<usize>>,
    /// Per series and point, its marker's shift right in pixels.
    dodge: Vec<Vec<i32>>,
}

impl<'a> ChartData<'a> {
    fn new(metric: &'a str, series: &[Series], refs: &[Reference], bars: bool) -> Self {
        let points: Vec<Vec<(f64, f64)>> = series.iter().map(|s| s.points(metric)).collect();
        let published: Vec<Vec<Published>> =
            series.iter().map(|s| s.published(metric, refs)).collect();
        let y = y_range(
            points
                .iter()
                .flatten()
                .map(|p| p.1)
                .chain(published.iter().flatten().flat_map(|p| [p.low, p.high])),
        );
        let tol = (y.1 - y.0) * SAME;
        let close = |a: &(f64, f64), b: &(f64, f64)| a.0 == b.0 && (a.1 - b.1).abs() <= tol;
        let equal = |a: &[(f64, f64)], b: &[(f64, f64)]| {
            !a.is_empty() && a.len() == b.len() && a.iter().zip(b).all(|(p, q)| close(p, q))
        };
        // Bars stand side by side already.
        let same_as = (0..points.len())
            .map(|i| (0..i).find(|&j| !bars && equal(&points[i], &points[j])))
            .collect();
        // A timeline staggers its markers instead (`draw_lines`).
        let sweep = !bars && series.iter().all(|s| s.timeline.is_none());
        let dodge = points
            .iter()
            .enumerate()
            .map(|(i, pts)| {
                pts.iter()
                    .map(|p| {
                        let below = points[..i]
                            .iter()
                            .filter(|earlier| earlier.iter().any(|q| close(p, q)))
                            .count();
                        if sweep {
                            below as i32 * DODGE
                        } else {
                            0
                        }
                    })
                    .collect()
            })
            .collect();
        ChartData {
            metric,
            points,
            published,
            y,
            bars,
            same_as,
            dodge,
        }
    }

    /// Where series `i`'s bars (and published values) stand within a category.
    fn offset(&self, i: usize) -> f64 {
        if !self.bars {
            return 0.0;
        }
        let n = self.points.len().max(1) as f64;
        GROUP_WIDTH * ((i as f64 + 0.5) / n - 0.5)
    }
}

/// A chart's legend: a row per series, then the published values' kinds and a note.
struct Legend {
    labels: Vec<String>,
    dashed: Vec<bool>,
    kinds: Vec<Basis>,
    note: Option<&'static str>,
    bars: bool,
}

impl Legend {
    fn new(chart: &ChartData, series: &[Series]) -> Self {
        let labels = series
            .iter()
            .zip(&chart.same_as)
            .map(|(s, same)| match same {
                Some(j) => format!("{} (= {}, dashed)", s.label, series[*j].label),
                None => s.label.clone(),
            })
            .collect();
        let dodged = chart.dodge.iter().flatten().any(|d| *d != 0);
        Legend {
            labels,
            dashed: chart.same_as.iter().map(Option::is_some).collect(),
            kinds: published_kinds(&chart.published),
            note: dodged.then_some(DODGE_NOTE),
            bars: chart.bars,
        }
    }

    /// Rows taken, a blank one before the published kinds and the note included.
    fn rows(&self) -> usize {
        let extra = self.kinds.len() + usize::from(self.note.is_some());
        self.labels.len() + extra + usize::from(extra > 0)
    }

    /// The longest text, in characters.
    fn longest(&self) -> usize {
        self.labels
            .iter()
            .map(|l| l.chars().count())
            .chain((!self.kinds.is_empty()).then_some(published_label(Basis::Prediction).len()))
            .chain(self.note.map(str::len))
            .max()
            .unwrap_or(0)
    }
}

pub(super) fn draw(
    info: &ExperimentInfo,
    x: &str,
    axis: &XAxis,
    series: &[Series],
    refs: &[Reference],
) -> io::Result<String> {
    let bars =
        matches!(axis.kind, XKind::Categories(_)) && series.iter().all(|s| s.timeline.is_none());
    let charts: Vec<ChartData> = info
        .plot_metrics
        .iter()
        .map(|m| ChartData::new(m, series, refs, bars))
        .collect();
    let legends: Vec<Legend> = charts.iter().map(|c| Legend::new(c, series)).collect();
    let n_charts = charts.len().max(1);
    let legend_rows = legends.iter().map(Legend::rows).max().unwrap_or(0) as i32;
    let chart_height = MIN_CHART_HEIGHT.max((90 + legend_rows * LEGEND_LINE) as u32);
    let longest = legends.iter().map(Legend::longest).max().unwrap_or(0) as u32;
    let legend_width = (longest * 7 + 50).clamp(140, 360);

    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, chart_height * n_charts as u32))
            .into_drawing_area();
        root.fill(&WHITE).map_err(io_err)?;
        let rows = root.split_evenly((n_charts, 1));
        for ((area, chart), legend) in rows.iter().zip(&charts).zip(&legends) {
            let (plot_area, legend_area) = area.split_horizontally(WIDTH - legend_width);
            draw_chart(&plot_area, info, x, axis, series, chart)?;
            draw_legend(&legend_area, legend)?;
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
    x: &str,
    axis: &XAxis,
    series: &[Series],
    data: &ChartData,
) -> io::Result<()> {
    let metric = data.metric;
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
            data.y.0..data.y.1,
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
    let plot = chart.plotting_area();
    if data.bars {
        draw_bars(plot, data)?;
    } else {
        draw_lines(plot, data, series)?;
    }
    draw_marks(plot, info, x, axis, data.y)?;
    // Published values over the series, so a simulated point never hides one.
    for (i, values) in data.published.iter().enumerate() {
        let color = series_style(i).0;
        for p in values {
            let marker = Marker::published(p.basis, color);
            let px = p.x + data.offset(i);
            if p.high > p.low {
                plot.draw(&PathElement::new(
                    vec![(px, p.low), (px, p.high)],
                    color.stroke_width(1),
                ))
                .map_err(io_err)?;
                marker.draw(plot, (px, p.high))?;
            }
            marker.draw(plot, (px, p.low))?;
        }
    }
    Ok(())
}

/// A line with markers per series; one equal to an earlier series dashed over it.
fn draw_lines<DB: DrawingBackend>(
    plot: &Area<DB>,
    data: &ChartData,
    series: &[Series],
) -> io::Result<()> {
    let n = series.len().max(1);
    for (i, pts) in data.points.iter().enumerate() {
        let style = series_style(i);
        let stroke = style.0.stroke_width(2);
        if data.same_as[i].is_some() {
            plot.draw(&DashedPathElement::new(pts.iter().copied(), 8, 8, stroke))
        } else {
            plot.draw(&PathElement::new(pts.clone(), stroke))
        }
        .map_err(io_err)?;
        let marker = Marker::series(style);
        // A timeline's samples are too dense for a marker each: about 25 per line, each
        // series on other samples than the others, so lines that run together all show.
        let (stride, start) = match series[i].timeline {
            Some(_) => {
                let stride = pts.len().div_ceil(MAX_MARKERS).max(1);
                (stride, i * stride / n)
            }
            None => (1, 0),
        };
        for (k, p) in pts.iter().enumerate().skip(start).step_by(stride) {
            marker.draw_shifted(plot, *p, data.dodge[i][k])?;
        }
    }
    Ok(())
}

/// Each series' value as a bar from zero, the series of a category side by side.
fn draw_bars<DB: DrawingBackend>(plot: &Area<DB>, data: &ChartData) -> io::Result<()> {
    let n = data.points.len().max(1) as f64;
    let half = GROUP_WIDTH / n / 2.0;
    let base = 0.0f64.clamp(data.y.0, data.y.1);
    for (i, pts) in data.points.iter().enumerate() {
        let color = series_style(i).0;
        for (x, y) in pts {
            let x = x + data.offset(i);
            let corners = [(x - half, base), (x + half, *y)];
            plot.draw(&Rectangle::new(corners, color.mix(0.8).filled()))
                .map_err(io_err)?;
            plot.draw(&Rectangle::new(corners, color.stroke_width(1)))
                .map_err(io_err)?;
        }
    }
    Ok(())
}

/// The experiment's x marks: a dashed vertical line, its label at the top.
fn draw_marks<DB: DrawingBackend>(
    plot: &Area<DB>,
    info: &ExperimentInfo,
    x: &str,
    axis: &XAxis,
    (y_lo, y_hi): (f64, f64),
) -> io::Result<()> {
    let style = TextStyle::from((FONT, 13).into_font())
        .color(&MARK_COLOUR)
        .pos(Pos::new(HPos::Left, VPos::Top));
    for (at, label) in &info.x_marks {
        let Some(pos) = axis.pos(&Value::from(*at), x) else {
            continue;
        };
        if !axis.range.contains(&pos) {
            continue;
        }
        let line = [(pos, y_lo), (pos, y_hi)];
        plot.draw(&DashedPathElement::new(
            line,
            5,
            4,
            MARK_COLOUR.stroke_width(1),
        ))
        .map_err(io_err)?;
        plot.draw(&(EmptyElement::at((pos, y_hi)) + Text::new(*label, (5, 4), style.clone())))
            .map_err(io_err)?;
    }
    Ok(())
}

/// The legend beside the chart rather than over it, so it never hides data however many
/// series there are; below the series, the published markers the chart uses and a note.
fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    legend: &Legend,
) -> io::Result<()> {
    let style = TextStyle::from((FONT, 13).into_font())
        .color(&BLACK)
        .pos(Pos::new(HPos::Left, VPos::Center));
    let row = |k: usize| 52 + k as i32 * LEGEND_LINE;
    for (i, label) in legend.labels.iter().enumerate() {
        let (color, shape) = series_style(i);
        let y = row(i);
        if legend.bars {
            Marker::swatch(color).draw(area, (16, y))?;
        } else {
            let line = [(4, y), (28, y)];
            let stroke = color.stroke_width(2);
            if legend.dashed[i] {
                area.draw(&DashedPathElement::new(line, 5, 3, stroke))
            } else {
                area.draw(&PathElement::new(line, stroke))
            }
            .map_err(io_err)?;
            Marker::series((color, shape)).draw(area, (16, y))?;
        }
        area.draw(&Text::new(label.clone(), (34, y), style.clone()))
            .map_err(io_err)?;
    }
    let below = legend.labels.len() + 1;
    for (k, basis) in legend.kinds.iter().enumerate() {
        let y = row(below + k);
        Marker::published(*basis, BLACK).draw(area, (16, y))?;
        area.draw(&Text::new(published_label(*basis), (34, y), style.clone()))
            .map_err(io_err)?;
    }
    if let Some(note) = legend.note {
        let y = row(below + legend.kinds.len());
        area.draw(&Text::new(note, (4, y), style.clone()))
            .map_err(io_err)?;
    }
    Ok(())
}
