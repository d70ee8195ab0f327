//! Sources and includes: reading the root file and each `include` (through a
//! [`Resolver`], so tests and tools can serve texts from memory), parsing the TOML with
//! errors in the author's words, and refusing in an include what only the root may say.
//! The parts every file defines are collected in `parts`; the rest is built in `mod.rs`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::{valid_name, Builder, File, Scenario};
use crate::error::{LineIndex, ScenarioError};
use crate::raw::*;
use toml::Spanned;

/// One source text (a scenario file or an include).
#[derive(Clone, Debug)]
pub struct Source {
    /// Shown in errors: a path, or `builtin:NAME`.
    pub name: String,
    pub text: String,
}

/// Finds the text of an `include`, relative to the including source.
pub trait Resolver {
    fn resolve(&self, from: &str, include: &str) -> Result<Source, String>;
}

/// Resolves includes on the file system, relative to the including file.
pub struct FsResolver;

impl Resolver for FsResolver {
    fn resolve(&self, from: &str, include: &str) -> Result<Source, String> {
        let base = Path::new(from).parent().unwrap_or(Path::new("."));
        let path: PathBuf = base.join(include);
        read_text(&path)
            .map(|text| Source {
                name: path.display().to_string(),
                text,
            })
            .map_err(|e| format!("cannot read include `{}`: {e}", path.display()))
    }
}

/// The largest scenario, include or experiment file read (the largest built-in is a few
/// hundred KiB; a generated 10,000-host cluster is a few MiB).
pub const MAX_FILE_BYTES: u64 = 64 << 20;

/// A scenario, include or experiment file's text: a regular file (not a device, FIFO or
/// directory, which could be read forever) of at most `MAX_FILE_BYTES`, in UTF-8.
pub fn read_text(path: &Path) -> Result<String, String> {
    let meta = std::fs::metadata(path).map_err(|e| e.to_string())?;
    if !meta.is_file() {
        return Err("not a regular file".into());
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(format!(
            "{} bytes, more than the {} MiB a scenario file may have",
            meta.len(),
            MAX_FILE_BYTES >> 20
        ));
    }
    std::fs::read_to_string(path).map_err(|e| e.to_string())
}

/// Loads a scenario from a file on disk.
pub fn load_path(path: &Path) -> Result<Scenario, ScenarioError> {
    let text = read_text(path).map_err(|e| ScenarioError {
        file: path.display().to_string(),
        line: 0,
        col: 0,
        key: None,
        message: format!("cannot read scenario: {e}"),
    })?;
    load(
        Source {
            name: path.display().to_string(),
            text,
        },
        &FsResolver,
    )
}

/// Loads a scenario from text, resolving includes with `resolver`.
pub fn load(main: Source, resolver: &dyn Resolver) -> Result<Scenario, ScenarioError> {
    let mut b = Builder::default();
    let root = b.parse(main)?;
    let raw = std::mem::replace(&mut b.files[root].raw, empty_raw());
    let meta = raw.scenario.as_ref().ok_or_else(|| {
        b.err(
            root,
            0..0,
            None,
            "missing [scenario] table with `name` (and `description`)",
        )
    })?;
    let name = meta.get_ref().name.get_ref().clone();
    if !valid_name(&name) {
        return Err(b.err(
            root,
            meta.get_ref().name.span(),
            Some("scenario.name".into()),
            "scenario names use letters, digits, `_` and `-`",
        ));
    }
    let description = meta.get_ref().description.clone();
    for inc in &raw.include {
        let src = resolver
            .resolve(&b.files[root].name, inc.get_ref())
            .map_err(|m| b.err(root, inc.span(), Some("include".into()), &m))?;
        let f = b.parse_include(src)?;
        b.check_include_only(f)?;
        let inc_raw = std::mem::replace(&mut b.files[f].raw, empty_raw());
        b.collect_parts(
            f,
            inc_raw.platform,
            inc_raw.chip,
            inc_raw.adapter,
            inc_raw.device_model,
        )?;
    }
    b.collect_parts(
        root,
        raw.platform.clone(),
        raw.chip.clone(),
        raw.adapter.clone(),
        raw.device_model.clone(),
    )?;
    b.include_builtin_bases()?;
    b.resolve_device_model_bases()?;
    b.build(root, name, description, raw)
}

fn empty_raw() -> RawFile {
    RawFile {
        scenario: None,
        include: vec![],
        platform: BTreeMap::new(),
        chip: BTreeMap::new(),
        adapter: BTreeMap::new(),
        device_model: BTreeMap::new(),
        host: vec![],
        cluster_switch: vec![],
        cable: vec![],
        window: vec![],
        lend: vec![],
        borrow: vec![],
        fault: vec![],
        cluster: None,
        workload: vec![],
        measure: None,
    }
}

/// The parser's type words in the words of a scenario's author (`expected u8` → `expected
/// a whole number from 0 to 255`).
fn plain_types(message: &str) -> String {
    const WORDS: [(&str, &str); 8] = [
        ("expected u8", "expected a whole number from 0 to 255"),
        ("expected u16", "expected a whole number from 0 to 65535"),
        (
            "expected u32",
            "expected a whole number from 0 to 4294967295",
        ),
        ("expected u64", "expected a whole number from 0 to 2^64 − 1"),
        ("expected i64", "expected a whole number"),
        ("expected f64", "expected a number"),
        ("expected a boolean", "expected true or false"),
        ("expected a borrowed string", "expected a string"),
    ];
    let mut out = message.to_string();
    for (from, to) in WORDS {
        out = out.replace(from, to);
    }
    out
}

/// The parts of included files parsed so far in this process, by name and text: a sweep
/// loads the same platform and device files at every point, and parsing them is most of
/// a small run's set-up. Only includes that parsed and define parts alone are kept; the
/// same text always parses the same.
type Parts = (
    BTreeMap<String, Spanned<RawPlatform>>,
    BTreeMap<String, Spanned<RawChip>>,
    BTreeMap<String, Spanned<RawAdapter>>,
    BTreeMap<String, Spanned<RawDeviceModel>>,
);
type Parsed = std::sync::Mutex<rustc_hash::FxHashMap<(String, String), Parts>>;
static INCLUDES: std::sync::OnceLock<Parsed> = std::sync::OnceLock::new();

impl Builder {
    /// `parse` and `check_include_only` for an included file, through the process's
    /// cache of parsed includes.
    pub(super) fn parse_include(&mut self, src: Source) -> Result<usize, ScenarioError> {
        let cache = INCLUDES.get_or_init(Default::default);
        let key = (src.name.clone(), src.text.clone());
        let hit = cache.lock().ok().and_then(|c| c.get(&key).cloned());
        if let Some((platform, chip, adapter, device_model)) = hit {
            let lines = LineIndex::new(&src.text);
            let raw = RawFile {
                platform,
                chip,
                adapter,
                device_model,
                ..empty_raw()
            };
            self.files.push(File {
                name: src.name,
                text: src.text,
                lines,
                raw,
            });
            return Ok(self.files.len() - 1);
        }
        let f = self.parse(src)?;
        self.check_include_only(f)?;
        let r = &self.files[f].raw;
        let parts = (
            r.platform.clone(),
            r.chip.clone(),
            r.adapter.clone(),
            r.device_model.clone(),
        );
        if let Ok(mut c) = cache.lock() {
            c.insert(key, parts);
        }
        Ok(f)
    }

    /// Parses one source into a new file of the builder; returns its index.
    fn parse(&mut self, src: Source) -> Result<usize, ScenarioError> {
        let lines = LineIndex::new(&src.text);
        let id = self.files.len();
        match toml::from_str::<RawFile>(&src.text) {
            Ok(raw) => {
                self.files.push(File {
                    name: src.name,
                    text: src.text,
                    lines,
                    raw,
                });
                Ok(id)
            }
            Err(e) => {
                let (line, col) = e
                    .span()
                    .map(|s| lines.locate(&src.text, s.start))
                    .unwrap_or((0, 0));
                let message = e.message().trim();
                let key = e
                    .span()
                    .and_then(|s| crate::keypath::key_of_error(&src.text, s.start, message));
                Err(ScenarioError {
                    file: src.name,
                    line,
                    col,
                    key,
                    message: plain_types(message),
                })
            }
        }
    }

    /// An included file may only define parts (platforms, chips, adapters, device models).
    fn check_include_only(&self, f: usize) -> Result<(), ScenarioError> {
        let r = &self.files[f].raw;
        let bad = if r.scenario.is_some() {
            Some("[scenario]")
        } else if !r.include.is_empty() {
            Some("include")
        } else if !r.host.is_empty() || r.cluster.is_some() {
            Some("[[host]] or [cluster]")
        } else if !r.cable.is_empty() || !r.cluster_switch.is_empty() || !r.window.is_empty() {
            Some("[[cable]], [[cluster_switch]] or [[window]]")
        } else if !r.workload.is_empty() || r.measure.is_some() {
            Some("[[workload]] or [measure]")
        } else if !r.fault.is_empty() {
            Some("[[fault]]")
        } else {
            None
        };
        match bad {
            Some(what) => Err(self.err(
                f,
                0..0,
                None,
                &format!("an included file may define only [platform.*], [chip.*], [adapter.*] and [device_model.*], not {what}"),
            )),
            None => Ok(()),
        }
    }
}
