//! `nudma reproduce --out`'s report.html in a real browser: headless Chromium renders it
//! and the page must hold up — a screenshot of the window's size that is not blank and
//! shows a plot's colours, the title and a heading per experiment, every plot it
//! references loaded by the browser (not only present on disk), and as many table rows as
//! report.md has. The same check runs on broken copies of the report (a plot deleted or
//! corrupted, a wrong relative path, the HTML cut short, an empty page) and must fail on
//! each: a checker that passes everything would pass those too.
//!
//! The browser is `$NUDMA_CHROMIUM`, else `chromium`, `chromium-browser` or
//! `google-chrome` on PATH; without one these tests fail (`.ci/run` installs chromium).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Cheap experiments (a few seconds together) with a timeline plot, a sweep plot and
/// none.
const EXPERIMENTS: [&str; 3] = [
    "smartio.sq_placement",
    "ioctopus.migration",
    "smartio.ntb_dma",
];
const WINDOW: (u32, u32) = (1280, 4000);
const TITLE: &str = "nudma reproduce report";
/// The first series' colour (`studies::plot::PALETTE[0]`): only a drawn plot has it.
const SERIES_COLOUR: (u8, u8, u8) = (31, 119, 180);
const BROWSER_TIMEOUT: Duration = Duration::from_secs(120);

/// The report of [`EXPERIMENTS`], written once for every test of this file.
fn report_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("report_browser");
        let _ = fs::remove_dir_all(&dir);
        let out = Command::new(env!("CARGO_BIN_EXE_nudma"))
            .arg("reproduce")
            .args(EXPERIMENTS)
            .arg("--out")
            .arg(&dir)
            .output()
            .expect("runs nudma");
        assert!(
            out.status.success(),
            "nudma reproduce failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        dir
    })
}

/// A copy of the report's files in a directory of its own, to break.
fn copy_of_report() -> tempfile::TempDir {
    let copy = tempfile::tempdir().unwrap();
    for entry in fs::read_dir(report_dir()).unwrap() {
        let path = entry.unwrap().path();
        fs::copy(&path, copy.path().join(path.file_name().unwrap())).unwrap();
    }
    copy
}

/// The browser to use; a test that needs one fails without it rather than passing
/// unchecked.
fn browser() -> PathBuf {
    if let Some(path) = std::env::var_os("NUDMA_CHROMIUM") {
        return PathBuf::from(path);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for name in ["chromium", "chromium-browser", "google-chrome"] {
        for dir in std::env::split_paths(&path) {
            let candidate = dir.join(name);
            if is_executable(&candidate) {
                return candidate;
            }
        }
    }
    panic!(
        "no headless browser to check report.html: install chromium (Debian: `apt-get install \
         chromium`; .ci/run does it) or set NUDMA_CHROMIUM to a Chromium or Chrome binary"
    );
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// What the browser made of a report: the DOM after the page's load event, and a
/// screenshot of the window.
struct Rendered {
    dom: String,
    png: Vec<u8>,
}

/// Marks each image with the width the browser decoded (0 when it failed to load), so
/// the dumped DOM tells a loaded plot from a broken one. It runs on a copy of the page.
const PROBE: &str = "<script>addEventListener('load',()=>{for(const i of document.images)\
                     i.setAttribute('data-natural-width',i.naturalWidth)})</script>";

/// Loads `dir/report.html` in headless Chromium.
fn render(dir: &Path) -> Rendered {
    let html = fs::read_to_string(dir.join("report.html")).expect("report.html");
    // The probe in a copy beside the report, so relative paths resolve as the report's;
    // in its head, where broken markup further down cannot swallow it.
    let probed = match html.find("<head>") {
        Some(at) => format!("{}{PROBE}{}", &html[..at + 6], &html[at + 6..]),
        None => format!("{PROBE}{html}"),
    };
    let page = dir.join("report.probe.html");
    fs::write(&page, probed).unwrap();
    let work = tempfile::tempdir().unwrap();
    let shot = work.path().join("shot.png");
    let dom_file = work.path().join("dom.html");
    let mut child = Command::new(browser())
        .args([
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--hide-scrollbars",
            "--no-first-run",
            "--force-device-scale-factor=1",
        ])
        .arg(format!(
            "--user-data-dir={}",
            work.path().join("profile").display()
        ))
        .arg(format!("--screenshot={}", shot.display()))
        .arg(format!("--window-size={},{}", WINDOW.0, WINDOW.1))
        .arg("--dump-dom")
        .arg(file_url(&page))
        .stdin(Stdio::null())
        .stdout(fs::File::create(&dom_file).unwrap())
        .stderr(Stdio::null())
        .spawn()
        .expect("starts the browser");
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > BROWSER_TIMEOUT {
            let _ = child.kill();
            panic!("the browser did not finish within {BROWSER_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    fs::remove_file(&page).unwrap();
    assert!(status.success(), "the browser failed: {status}");
    Rendered {
        dom: fs::read_to_string(&dom_file).unwrap(),
        png: fs::read(&shot).unwrap_or_default(),
    }
}

/// `file://` URL of an absolute path, bytes outside the unreserved set percent-encoded.
fn file_url(path: &Path) -> String {
    let mut url = String::from("file://");
    for b in path.to_str().expect("UTF-8 path").bytes() {
        if b.is_ascii_alphanumeric() || b"/-_.~".contains(&b) {
            url.push(b as char);
        } else {
            url.push_str(&format!("%{b:02X}"));
        }
    }
    url
}

/// Everything wrong with the rendered report of `dir` (of `experiments`); empty when the
/// page holds up.
fn problems(dir: &Path, experiments: &[&str], page: &Rendered) -> Vec<String> {
    let mut out = screenshot_problems(&page.png);
    // What markup turned into a comment is not on the page, though the dump shows it.
    let dom = &without_comments(&page.dom);
    if !dom.contains(&format!("<title>{TITLE}</title>")) {
        out.push("no <title>".into());
    }
    if !dom.contains(&format!("<h1>{TITLE}</h1>")) {
        out.push("no <h1>".into());
    }
    for id in experiments {
        if !dom.contains(&format!("<h2>{id}</h2>")) {
            out.push(format!("no heading for {id}"));
        }
    }
    out.extend(plot_problems(dir, dom));
    // Every row of report.md's tables, header rows included, must be a row on the page:
    // markup that swallows part of the page loses rows.
    let md = fs::read_to_string(dir.join("report.md")).unwrap_or_default();
    let md_rows = md
        .lines()
        .filter(|l| l.starts_with('|') && !l.starts_with("|---"))
        .count();
    let html_rows = dom.matches("<tr").count();
    if html_rows != md_rows {
        out.push(format!(
            "{html_rows} table rows on the page, report.md has {md_rows}"
        ));
    }
    out
}

/// The serialised DOM less its comments.
fn without_comments(dom: &str) -> String {
    let mut out = String::with_capacity(dom.len());
    let mut rest = dom;
    while let Some(start) = rest.find("<!--") {
        out.push_str(&rest[..start]);
        rest = match rest[start..].find("-->") {
            Some(end) => &rest[start + end + 3..],
            None => "",
        };
    }
    out.push_str(rest);
    out
}

/// Each `<img>` of the DOM loaded in the browser from a file of `dir`, and every SVG
/// written to `dir` is shown by one.
fn plot_problems(dir: &Path, dom: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut shown = Vec::new();
    for tag in dom
        .split("<img")
        .skip(1)
        .map(|t| &t[..t.find('>').unwrap_or(t.len())])
    {
        let src = attribute(tag, "src").unwrap_or_default();
        if !dir.join(&src).is_file() {
            out.push(format!("plot {src:?} is not a file beside report.html"));
        }
        match attribute(tag, "data-natural-width").map(|w| w.parse::<u32>()) {
            Some(Ok(w)) if w > 0 => {}
            Some(_) => out.push(format!("plot {src:?} did not load in the browser")),
            None => out.push(format!("the page's load event never marked {src:?}")),
        }
        shown.push(src);
    }
    for entry in fs::read_dir(dir).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if name.ends_with(".svg") && !shown.contains(&name) {
            out.push(format!("plot {name} is not shown on the page"));
        }
    }
    out
}

/// The value of `name="…"` in an element's attribute text.
fn attribute(tag: &str, name: &str) -> Option<String> {
    let start = tag.find(&format!(" {name}=\""))? + name.len() + 3;
    let len = tag[start..].find('"')?;
    Some(tag[start..start + len].to_string())
}

/// The screenshot is a PNG of the window's size, not blank (at least 3 % of it differs
/// from the background), and a plot's first-series colour shows.
fn screenshot_problems(png_bytes: &[u8]) -> Vec<String> {
    let mut decoder = png::Decoder::new(std::io::Cursor::new(png_bytes));
    decoder.set_transformations(png::Transformations::normalize_to_color8());
    let mut reader = match decoder.read_info() {
        Ok(r) => r,
        Err(e) => return vec![format!("the screenshot is not a PNG: {e}")],
    };
    let mut buf = vec![0; reader.output_buffer_size().unwrap_or(0)];
    let info = match reader.next_frame(&mut buf) {
        Ok(info) => info,
        Err(e) => return vec![format!("the screenshot does not decode: {e}")],
    };
    let mut out = Vec::new();
    if (info.width, info.height) != WINDOW {
        out.push(format!(
            "the screenshot is {}×{}, not {}×{}",
            info.width, info.height, WINDOW.0, WINDOW.1
        ));
    }
    let channels = info.color_type.samples();
    if channels < 3 {
        return vec![format!(
            "the screenshot is not in colour: {:?}",
            info.color_type
        )];
    }
    let pixels: Vec<(u8, u8, u8)> = buf[..info.buffer_size()]
        .chunks_exact(channels)
        .map(|p| (p[0], p[1], p[2]))
        .collect();
    let background = pixels[0];
    let drawn = pixels.iter().filter(|p| **p != background).count();
    if drawn * 100 < pixels.len() * 3 {
        out.push(format!(
            "the screenshot is blank: {drawn} of {} pixels differ from the background",
            pixels.len()
        ));
    }
    let near = |p: &(u8, u8, u8)| {
        let d = |a: u8, b: u8| (i32::from(a) - i32::from(b)).abs();
        d(p.0, SERIES_COLOUR.0) + d(p.1, SERIES_COLOUR.1) + d(p.2, SERIES_COLOUR.2) <= 30
    };
    let coloured = pixels.iter().filter(|p| near(p)).count();
    if coloured < 500 {
        out.push(format!(
            "no plot shows in the screenshot: {coloured} pixels of the first series' colour"
        ));
    }
    out
}

#[test]
fn the_report_renders_in_a_browser_with_every_plot() {
    let dir = report_dir();
    let page = render(dir);
    let found = problems(dir, &EXPERIMENTS, &page);
    assert!(found.is_empty(), "report.html is broken: {found:#?}");
    // Two plots (the timeline and the sweep) were checked, not none.
    assert_eq!(page.dom.matches("data-natural-width=\"960\"").count(), 2);
}

/// The check run on a copy of the report broken by `damage`: its problems.
fn problems_after(damage: impl FnOnce(&Path)) -> Vec<String> {
    let copy = copy_of_report();
    damage(copy.path());
    let page = render(copy.path());
    problems(copy.path(), &EXPERIMENTS, &page)
}

fn assert_reported(found: &[String], needle: &str) {
    assert!(
        found.iter().any(|p| p.contains(needle)),
        "expected a problem containing {needle:?}, got {found:#?}"
    );
}

#[test]
fn a_deleted_plot_fails_the_check() {
    let found = problems_after(|d| fs::remove_file(d.join("ioctopus.migration.svg")).unwrap());
    assert_reported(&found, "\"ioctopus.migration.svg\" is not a file");
    assert_reported(&found, "\"ioctopus.migration.svg\" did not load");
}

#[test]
fn a_corrupt_plot_fails_the_check() {
    // The file is there, so only the browser can tell.
    let found = problems_after(|d| {
        fs::write(
            d.join("smartio.ntb_dma.svg"),
            "<svg xmlns=\"http://www.w3.org/2000/svg\"",
        )
        .unwrap()
    });
    assert_eq!(
        found,
        vec!["plot \"smartio.ntb_dma.svg\" did not load in the browser".to_string()]
    );
}

#[test]
fn a_wrong_relative_path_fails_the_check() {
    let found = problems_after(|d| {
        let html = fs::read_to_string(d.join("report.html")).unwrap();
        let moved = html.replace(
            "src=\"smartio.ntb_dma.svg\"",
            "src=\"plots/smartio.ntb_dma.svg\"",
        );
        fs::write(d.join("report.html"), moved).unwrap();
    });
    assert_reported(&found, "\"plots/smartio.ntb_dma.svg\" did not load");
    assert_reported(&found, "plot smartio.ntb_dma.svg is not shown");
}

#[test]
fn malformed_html_fails_the_check() {
    // An unclosed comment in the middle swallows the rest of the page.
    let found = problems_after(|d| {
        let html = fs::read_to_string(d.join("report.html")).unwrap();
        let broken = html.replacen("<section id=\"smartio.sq_placement\">", "<!--", 1);
        fs::write(d.join("report.html"), broken).unwrap();
    });
    assert_reported(&found, "no heading for smartio.sq_placement");
    assert_reported(&found, "table rows on the page");
}

#[test]
fn an_empty_page_fails_the_check() {
    let found = problems_after(|d| {
        let empty =
            format!("<!DOCTYPE html><html><head><title>{TITLE}</title></head><body></body></html>");
        fs::write(d.join("report.html"), empty).unwrap();
    });
    assert_reported(&found, "the screenshot is blank");
    assert_reported(&found, "no plot shows in the screenshot");
    assert_reported(&found, "no <h1>");
}
