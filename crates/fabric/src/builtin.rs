//! The built-in scenario catalog: every file of `scenarios/` embedded at build time.
//! A scenario argument is a path when such a file exists, else a built-in name.

use std::collections::HashMap;
use std::path::Path;

use crate::error::ScenarioError;
use crate::scenario::{load, FsResolver, Resolver, Scenario, Source};

include!(concat!(env!("OUT_DIR"), "/builtin_files.rs"));

/// Resolves includes among the embedded files, relative to the including file.
pub struct BuiltinResolver;

impl Resolver for BuiltinResolver {
    fn resolve(&self, from: &str, include: &str) -> Result<Source, String> {
        let from = from.strip_prefix("builtin:").unwrap_or(from);
        let dir = from.rsplit_once('/').map(|(d, _)| d).unwrap_or("");
        let mut parts: Vec<&str> = dir.split('/').filter(|s| !s.is_empty()).collect();
        for seg in include.split('/') {
            match seg {
                ".." => {
                    parts.pop();
                }
                "." | "" => {}
                s => parts.push(s),
            }
        }
        let rel = parts.join("/");
        FILES
            .iter()
            .find(|(p, _)| *p == rel)
            .map(|(p, t)| Source {
                name: format!("builtin:{p}"),
                text: t.to_string(),
            })
            .ok_or_else(|| format!("no built-in file `{rel}`"))
    }
}

/// Sub-directories of `scenarios/` whose files are scenarios too, named `dir/file`
/// (the others hold includes, experiments and benchmarks).
const SCENARIO_DIRS: &[&str] = &["contention/"];

/// Built-in scenario files: top-level TOML files and those of `SCENARIO_DIRS`.
fn scenario_files() -> impl Iterator<Item = (&'static str, &'static str)> {
    FILES.iter().copied().filter(|(p, _)| {
        !p.contains('/')
            || SCENARIO_DIRS
                .iter()
                .any(|d| p.strip_prefix(d).is_some_and(|f| !f.contains('/')))
    })
}

/// The built-in experiment files (`scenarios/experiments/*.toml`), in name order.
pub fn experiment_files() -> impl Iterator<Item = Source> {
    FILES
        .iter()
        .filter(|(p, _)| p.starts_with("experiments/"))
        .map(|(p, t)| Source {
            name: format!("builtin:{p}"),
            text: t.to_string(),
        })
}

/// Names of the built-in scenarios.
pub fn names() -> Vec<&'static str> {
    scenario_files()
        .map(|(p, _)| p.trim_end_matches(".toml"))
        .collect()
}

/// Loads a built-in scenario by name.
pub fn load_builtin(name: &str) -> Option<Result<Scenario, ScenarioError>> {
    let (path, text) = scenario_files().find(|(p, _)| p.trim_end_matches(".toml") == name)?;
    Some(load(
        Source {
            name: format!("builtin:{path}"),
            text: text.to_string(),
        },
        &BuiltinResolver,
    ))
}

/// `(name, description)` of every built-in scenario.
pub fn catalog() -> Vec<(String, String)> {
    names()
        .into_iter()
        .map(|n| match load_builtin(n) {
            Some(Ok(s)) => (n.to_string(), s.topology.description),
            _ => (
                n.to_string(),
                "(does not load: run `nudma topo check`)".to_string(),
            ),
        })
        .collect()
}

/// A built-in platform or device model: its name, what it is, and the built-in file that
/// defines it (what a scenario's `include` names).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Part {
    pub name: String,
    pub description: String,
    pub include: String,
}

/// The built-in platforms and device models (`scenarios/platforms/*.toml`), each sorted
/// by name: a platform described by its CPUs, a device model by its kind and product.
pub fn parts() -> (Vec<Part>, Vec<Part>) {
    let (mut platforms, mut models) = (Vec::new(), Vec::new());
    // Device model → (kind, base): a model copied with `base` takes its base's kind.
    let mut kinds = HashMap::new();
    for (path, text) in FILES.iter().filter(|(p, _)| p.starts_with("platforms/")) {
        // The built-in files load in every test that includes them; a file that did not
        // parse would list nothing rather than stop `nudma list`.
        let Ok(t) = text.parse::<toml::Table>() else {
            continue;
        };
        let field = |v: &toml::Value, k: &str| {
            v.get(k)
                .and_then(toml::Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        let part = |name: &String, description: String| Part {
            name: name.clone(),
            description,
            include: path.to_string(),
        };
        for (name, v) in t
            .get("platform")
            .and_then(toml::Value::as_table)
            .into_iter()
            .flatten()
        {
            platforms.push(part(name, field(v, "cpu")));
        }
        let device_models = t.get("device_model").and_then(toml::Value::as_table);
        for (name, v) in device_models.into_iter().flatten() {
            kinds.insert(name.clone(), (field(v, "kind"), field(v, "base")));
            models.push((part(name, String::new()), field(v, "model")));
        }
    }
    let mut models: Vec<Part> = models
        .into_iter()
        .map(|(mut p, model)| {
            p.description = format!("{}: {model}", kind_of(&kinds, &p.name));
            p
        })
        .collect();
    platforms.sort_by(|a, b| a.name.cmp(&b.name));
    models.sort_by(|a, b| a.name.cmp(&b.name));
    (platforms, models)
}

/// A built-in device model's kind: its own, or its base's (a few levels at most; a
/// cycle, which loading refuses, gives none).
fn kind_of(kinds: &HashMap<String, (String, String)>, name: &str) -> String {
    let mut at = name;
    for _ in 0..8 {
        match kinds.get(at) {
            Some((kind, _)) if !kind.is_empty() => return kind.clone(),
            Some((_, base)) if !base.is_empty() => at = base,
            _ => break,
        }
    }
    String::new()
}

/// The built-in file that defines platform or device model `name` (`kind` = `platform`
/// or `device_model`): what a `base` that no file of a scenario defines is taken from.
pub(crate) fn part_source(kind: &str, name: &str) -> Option<Source> {
    FILES
        .iter()
        .filter(|(p, _)| p.starts_with("platforms/"))
        .find(|(_, text)| {
            text.parse::<toml::Table>().ok().is_some_and(|t| {
                t.get(kind)
                    .and_then(toml::Value::as_table)
                    .is_some_and(|parts| parts.contains_key(name))
            })
        })
        .map(|(p, t)| Source {
            name: format!("builtin:{p}"),
            text: t.to_string(),
        })
}

/// Resolves includes of a user's file next to it on disk, or, when no such file exists,
/// among the built-in files (so `include = ["platforms/r730.toml"]` works from anywhere);
/// includes of a built-in file stay among the built-ins.
pub struct AnyResolver;

impl Resolver for AnyResolver {
    fn resolve(&self, from: &str, include: &str) -> Result<Source, String> {
        if from.starts_with("builtin:") {
            return BuiltinResolver.resolve(from, include);
        }
        let base = Path::new(from).parent().unwrap_or(Path::new("."));
        if base.join(include).exists() {
            return FsResolver.resolve(from, include);
        }
        BuiltinResolver
            .resolve("builtin:scenario.toml", include)
            .map_err(|_| {
                format!(
                    "cannot read include `{}`: no such file, and no built-in file `{include}`",
                    base.join(include).display()
                )
            })
    }
}

/// The text of a scenario argument: a file path when such a file exists, else a built-in
/// name; unknown names list the built-ins.
pub fn source_of(arg: &str) -> Result<Source, ScenarioError> {
    let p = Path::new(arg);
    if p.exists() {
        let text = crate::scenario::read_text(p).map_err(|e| ScenarioError {
            file: arg.to_string(),
            line: 0,
            col: 0,
            key: None,
            message: format!("cannot read scenario: {e}"),
        })?;
        return Ok(Source {
            name: p.display().to_string(),
            text,
        });
    }
    match scenario_files().find(|(p, _)| p.trim_end_matches(".toml") == arg) {
        Some((path, text)) => Ok(Source {
            name: format!("builtin:{path}"),
            text: text.to_string(),
        }),
        None => Err(ScenarioError {
            file: arg.to_string(),
            line: 0,
            col: 0,
            key: None,
            message: format!(
                "no such file and no built-in scenario of that name (built-in: {})",
                crate::error::name_list(names())
            ),
        }),
    }
}

/// Loads a scenario text, resolving includes with `AnyResolver`.
pub fn load_source(src: Source) -> Result<Scenario, ScenarioError> {
    load(src, &AnyResolver)
}

/// A file path if one exists, else a built-in name; unknown names list the built-ins.
pub fn load_any(arg: &str) -> Result<Scenario, ScenarioError> {
    load_source(source_of(arg)?)
}
