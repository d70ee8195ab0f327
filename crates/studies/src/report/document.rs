//! `report.md` and `report.html` of `nudma reproduce`: the summary, per experiment its
//! description, window, plot and metric rows, and what the catalog lacks. A pure function
//! of the runs, as the rest of `report`.

use super::*;

/// Writes `report.md` and `report.html` into `dir` (created if missing): the summary, per
/// experiment its description, measurement window, plot and every metric row, and the
/// catalog experiments `not_implemented` (ID and title; the section is left out when
/// there are none).
///
/// The plots are linked as `<id>.svg` for the experiments [`plot::has_plot`] accepts, the
/// files [`plot::write_plots`] writes into the same `dir`; call both.
pub fn write_report(
    dir: &Path,
    infos: &[ExperimentInfo],
    runs: &[Run],
    refs: &[Reference],
    not_implemented: &[&Entry],
) -> io::Result<(PathBuf, PathBuf)> {
    fs::create_dir_all(dir)?;
    let doc = ReportDoc::build(infos, runs, refs, not_implemented);
    let md = dir.join("report.md");
    let html = dir.join("report.html");
    fs::write(&md, doc.markdown())?;
    fs::write(&html, doc.html())?;
    Ok((md, html))
}

/// The content of a report, rendered to Markdown or HTML.
struct ReportDoc<'a> {
    summary: String,
    sections: Vec<Section<'a>>,
    not_implemented: &'a [&'a Entry],
}

struct Section<'a> {
    id: &'a str,
    info: Option<&'a ExperimentInfo>,
    plot: Option<String>,
    rows: Vec<Comparison>,
}

const REPORT_TITLE: &str = "nudma reproduce report";
const REPORT_LEGEND: &str = "Basis: \"calibration\" names the parameters fitted on that \
     published value (reproducing it shows the fit, not the model, so it gets no ✓ or ✗); \
     \"prediction\": no parameter was set from it. ✓: a prediction within ±10 % of the \
     published value or range; ✗: outside; —: nothing published, the model's own number. \
     Errors are relative to the nearest end of a published range (0 inside it).";
const NOT_IMPLEMENTED_TITLE: &str = "Not implemented yet";
const NOT_IMPLEMENTED_TEXT: &str = "These experiments of the catalog \
     were asked for but are not implemented in this build, so they have no results here.";

impl<'a> ReportDoc<'a> {
    fn build(
        infos: &'a [ExperimentInfo],
        runs: &'a [Run],
        refs: &[Reference],
        not_implemented: &'a [&'a Entry],
    ) -> Self {
        let sections = group_by_experiment(runs)
            .into_iter()
            .map(|(id, block)| {
                let info = infos.iter().find(|i| i.id == id);
                let plot = info
                    .filter(|i| plot::has_plot(i, runs))
                    .map(|i| plot::plot_file_name(i.id));
                Section {
                    id,
                    info,
                    plot,
                    rows: block
                        .iter()
                        .flat_map(|r| run_metric_rows(r, refs))
                        .collect(),
                }
            })
            .collect();
        ReportDoc {
            summary: summary_line(&comparison_rows(runs, refs)),
            sections,
            not_implemented,
        }
    }

    fn markdown(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "# {REPORT_TITLE}\n");
        let _ = writeln!(out, "{}\n", md_escape(&self.summary));
        let _ = writeln!(out, "{}\n", md_escape(REPORT_LEGEND));
        for s in &self.sections {
            let _ = writeln!(out, "- [{}](#{})", s.id, md_anchor(s.id));
        }
        if !self.not_implemented.is_empty() {
            let _ = writeln!(
                out,
                "- [{NOT_IMPLEMENTED_TITLE}](#{})",
                md_anchor(NOT_IMPLEMENTED_TITLE)
            );
        }
        for s in &self.sections {
            let _ = writeln!(out, "\n## {}\n", s.id);
            if let Some(info) = s.info {
                if !info.description.is_empty() {
                    let _ = writeln!(out, "{}\n", md_escape(info.description));
                }
                if !info.mechanism.is_empty() {
                    let _ = writeln!(out, "Mechanism: {}\n", md_escape(info.mechanism));
                }
                if !info.window.is_empty() {
                    let _ = writeln!(out, "Measurement window: {}\n", md_escape(info.window));
                }
            }
            if let Some(file) = &s.plot {
                let _ = writeln!(out, "![{}]({file})\n", s.id);
            }
            if s.rows.is_empty() {
                out.push_str("No numeric metrics.\n");
                continue;
            }
            out.push_str(
                "| config | params | metric | unit | simulated | published | error | basis | | source |\n",
            );
            out.push_str("|---|---|---|---|--:|--:|--:|---|:-:|---|\n");
            for r in &s.rows {
                let cells = [
                    r.config.clone(),
                    r.params.clone(),
                    r.metric.clone(),
                    unit_text(s.info, &r.metric),
                    r.simulated_text(),
                    r.published_text(),
                    r.error_text(),
                    r.basis_text(),
                    r.verdict().to_string(),
                    r.source.unwrap_or("").to_string(),
                ];
                out.push('|');
                for c in cells {
                    let _ = write!(out, " {} |", md_escape(&c));
                }
                out.push('\n');
            }
        }
        if !self.not_implemented.is_empty() {
            let _ = writeln!(out, "\n## {NOT_IMPLEMENTED_TITLE}\n");
            let _ = writeln!(out, "{NOT_IMPLEMENTED_TEXT}\n");
            out.push_str("| experiment | title |\n|---|---|\n");
            for e in self.not_implemented {
                let _ = writeln!(out, "| {} | {} |", md_escape(e.id), md_escape(e.title));
            }
        }
        out
    }

    fn html(&self) -> String {
        let mut out = String::new();
        out.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
        let _ = writeln!(out, "<title>{REPORT_TITLE}</title>");
        out.push_str(
            "<style>\n\
             body{font-family:sans-serif;margin:2em auto;max-width:1100px;padding:0 1em;color:#222}\n\
             table{border-collapse:collapse;margin:1em 0;font-size:0.9em}\n\
             th,td{border:1px solid #ccc;padding:0.25em 0.6em;text-align:left}\n\
             th{background:#f0f0f0}\n\
             td.num{text-align:right;font-variant-numeric:tabular-nums}\n\
             tr.ok td.verdict{color:#1a7f37}\n\
             tr.bad td.verdict{color:#c62828;font-weight:bold}\n\
             tr.pred td{color:#555}\n\
             tr.cal td{color:#555;font-style:italic}\n\
             img{max-width:100%;border:1px solid #ddd}\n\
             .window{color:#555}\n\
             </style>\n</head>\n<body>\n",
        );
        let _ = writeln!(out, "<h1>{REPORT_TITLE}</h1>");
        let _ = writeln!(
            out,
            "<p><strong>{}</strong></p>",
            html_escape(&self.summary)
        );
        let _ = writeln!(out, "<p>{}</p>", html_escape(REPORT_LEGEND));
        out.push_str("<ul>\n");
        for s in &self.sections {
            let _ = writeln!(
                out,
                "<li><a href=\"#{}\">{}</a></li>",
                html_escape(&anchor(s.id)),
                html_escape(s.id)
            );
        }
        if !self.not_implemented.is_empty() {
            let _ = writeln!(
                out,
                "<li><a href=\"#not-implemented\">{NOT_IMPLEMENTED_TITLE}</a></li>"
            );
        }
        out.push_str("</ul>\n");
        for s in &self.sections {
            let id = html_escape(s.id);
            let _ = writeln!(
                out,
                "<section id=\"{}\">\n<h2>{id}</h2>",
                html_escape(&anchor(s.id))
            );
            if let Some(info) = s.info {
                if !info.description.is_empty() {
                    let _ = writeln!(out, "<p>{}</p>", html_escape(info.description));
                }
                if !info.mechanism.is_empty() {
                    let _ = writeln!(out, "<p>Mechanism: {}</p>", html_escape(info.mechanism));
                }
                if !info.window.is_empty() {
                    let _ = writeln!(
                        out,
                        "<p class=\"window\">Measurement window: {}</p>",
                        html_escape(info.window)
                    );
                }
            }
            if let Some(file) = &s.plot {
                let _ = writeln!(
                    out,
                    "<p><img src=\"{}\" alt=\"{id} plot\"></p>",
                    html_escape(file)
                );
            }
            if s.rows.is_empty() {
                out.push_str("<p>No numeric metrics.</p>\n</section>\n");
                continue;
            }
            out.push_str(
                "<table>\n<tr><th>config</th><th>params</th><th>metric</th><th>unit</th><th>simulated</th>\
                 <th>published</th><th>error</th><th>basis</th><th></th><th>source</th></tr>\n",
            );
            for r in &s.rows {
                let class = match r.within_tolerance() {
                    _ if r.is_calibration() => "cal",
                    Some(true) => "ok",
                    Some(false) => "bad",
                    None => "pred",
                };
                let _ = writeln!(
                    out,
                    "<tr class=\"{class}\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
                     <td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
                     <td>{}</td><td class=\"verdict\">{}</td><td>{}</td></tr>",
                    html_escape(&r.config),
                    html_escape(&r.params),
                    html_escape(&r.metric),
                    html_escape(&unit_text(s.info, &r.metric)),
                    html_escape(&r.simulated_text()),
                    html_escape(&r.published_text()),
                    html_escape(&r.error_text()),
                    html_escape(&r.basis_text()),
                    r.verdict(),
                    html_escape(r.source.unwrap_or("")),
                );
            }
            out.push_str("</table>\n</section>\n");
        }
        if !self.not_implemented.is_empty() {
            let _ = writeln!(
                out,
                "<section id=\"not-implemented\">\n<h2>{NOT_IMPLEMENTED_TITLE}</h2>\n<p>{}</p>",
                html_escape(NOT_IMPLEMENTED_TEXT)
            );
            out.push_str("<table>\n<tr><th>experiment</th><th>title</th></tr>\n");
            for e in self.not_implemented {
                let _ = writeln!(
                    out,
                    "<tr><td>{}</td><td>{}</td></tr>",
                    html_escape(e.id),
                    html_escape(e.title)
                );
            }
            out.push_str("</table>\n</section>\n");
        }
        out.push_str("</body>\n</html>\n");
        out
    }
}

/// A fragment id for an experiment: ids are dotted names, which are valid as is; anything
/// else becomes "-".
fn anchor(id: &str) -> String {
    id.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .collect()
}

/// The anchor Markdown renderers (GitHub's convention) give a heading: lowercase,
/// punctuation other than "-" and "_" dropped, so "rdma.latency" → "rdmalatency".
fn md_anchor(heading: &str) -> String {
    heading
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| {
            if c == ' ' {
                '-'
            } else {
                c.to_ascii_lowercase()
            }
        })
        .collect()
}

fn html_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

/// Markdown table cells break on "|" and newlines; the rest of the text is plain.
fn md_escape(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}
