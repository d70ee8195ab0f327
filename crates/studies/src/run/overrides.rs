//! `--set KEY=V1,V2,…`: overrides of any scenario or workload key, and the sweep they
//! make. A key is a TOML path where an array of tables is indexed by its elements'
//! `name` (`host.srv.device.nic0.link.width`, `workload.rx.outstanding`,
//! `measure.duration`) or by position. The edit keeps the rest of the file as written, so
//! errors in untouched parts still point at the user's lines; a value that does not fit
//! is refused by the same validation as the file.

use std::cell::RefCell;

use fabric::builtin;
use fabric::error::name_list;
use fabric::scenario::{Resolver, Scenario, Source};
use serde_json::{Map, Value};
use toml_edit::{DocumentMut, Item};

/// One `--set`: a key and the values it takes.
#[derive(Clone, Debug)]
pub struct Override {
    pub key: String,
    pub values: Vec<toml_edit::Value>,
}

/// Splits on commas outside quotes and brackets.
fn split_values(s: &str) -> Vec<String> {
    let (mut out, mut cur, mut depth, mut quote) = (Vec::new(), String::new(), 0i32, None);
    for c in s.chars() {
        match (c, quote) {
            ('"' | '\'', None) => quote = Some(c),
            (q, Some(open)) if q == open => quote = None,
            ('[' | '{', None) => depth += 1,
            (']' | '}', None) => depth -= 1,
            (',', None) if depth == 0 => {
                out.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    out.push(cur);
    out
}

/// A value as typed: TOML when it parses (`32`, `true`, `"4 KiB"`, `[1, 2]`), else a string
/// (`4 KiB`, `write`).
fn value_of(raw: &str) -> toml_edit::Value {
    let t = raw.trim();
    t.parse::<toml_edit::Value>()
        .unwrap_or_else(|_| toml_edit::Value::from(t))
}

impl Override {
    /// Parses `KEY=V1,V2,…`.
    pub fn parse(arg: &str) -> Result<Override, String> {
        let (key, vals) = arg
            .split_once('=')
            .ok_or_else(|| format!("--set {arg}: expected KEY=VALUE[,VALUE…]"))?;
        let key = key.trim();
        if key.is_empty() || key.split('.').any(str::is_empty) {
            return Err(format!("--set {arg}: `{key}` is not a key path"));
        }
        let values: Vec<_> = split_values(vals).iter().map(|v| value_of(v)).collect();
        if values.iter().any(|v| v.as_str() == Some("")) {
            return Err(format!("--set {arg}: empty value"));
        }
        Ok(Override {
            key: key.to_string(),
            values,
        })
    }
}

/// One point of a sweep: a value per override.
pub type Point = Vec<(String, toml_edit::Value)>;

/// Every combination of the overrides' values (the first varies slowest).
pub fn points(overrides: &[Override]) -> Vec<Point> {
    let mut pts: Vec<Point> = vec![Vec::new()];
    for o in overrides {
        pts = pts
            .into_iter()
            .flat_map(|p| {
                o.values.iter().map(move |v| {
                    let mut q = p.clone();
                    q.push((o.key.clone(), v.clone()));
                    q
                })
            })
            .collect();
    }
    pts
}

/// The point's values as result parameters (numbers as numbers, sizes as written).
pub fn params_of(point: &Point) -> Map<String, Value> {
    point
        .iter()
        .map(|(k, v)| {
            let j = match v {
                toml_edit::Value::Integer(i) => Value::from(*i.value()),
                toml_edit::Value::Float(f) => Value::from(*f.value()),
                toml_edit::Value::Boolean(b) => Value::from(*b.value()),
                toml_edit::Value::String(s) => match fabric::units::parse_size(s.value()) {
                    Ok(n) if s.value().chars().any(|c| c.is_ascii_alphabetic()) => Value::from(n),
                    _ => Value::from(s.value().as_str()),
                },
                other => Value::from(other.to_string().trim()),
            };
            (k.clone(), j)
        })
        .collect()
}

/// Why a key could not be set in one file.
enum Miss {
    /// The file has no such table, entry or key (another file of the scenario may).
    Absent(String),
    /// The key names something of the wrong shape.
    Bad(String),
}

/// Applies a point to a scenario source (the main file only); errors name the key.
pub fn apply(src: &Source, point: &Point) -> Result<Source, String> {
    let (out, missing) = apply_where_present(src, point)?;
    match missing.first() {
        Some((_, m)) => Err(m.clone()),
        None => Ok(out),
    }
}

/// Sets every key the source has; returns the edited source and, per key it lacks, the
/// key's index and why.
fn apply_where_present(
    src: &Source,
    point: &Point,
) -> Result<(Source, Vec<(usize, String)>), String> {
    if point.is_empty() {
        return Ok((src.clone(), Vec::new()));
    }
    let text = with_cluster_hosts_written(&src.text, point);
    let mut doc: DocumentMut = text.parse().map_err(|e| format!("{}: {e}", src.name))?;
    let mut missing = Vec::new();
    for (i, (key, value)) in point.iter().enumerate() {
        let segs: Vec<&str> = key.split('.').collect();
        match set_item(doc.as_item_mut(), &segs, value.clone(), "") {
            Ok(()) => {}
            Err(Miss::Absent(m)) => missing.push((
                i,
                format!("--set {key}: {m}{}", cluster_hosts_note(&text, key)),
            )),
            Err(Miss::Bad(m)) => return Err(format!("--set {key}: {m}")),
        }
    }
    Ok((
        Source {
            name: format!("{} (with --set)", src.name),
            text: doc.to_string(),
        },
        missing,
    ))
}

/// A key `host.NAME.…` on a host the file's `[cluster]` makes, with no `[[host]]` of that
/// name: the host is written out, a copy of the cluster's host template named NAME, so the
/// key has a table to land in (a written host takes its generated namesake's place).
fn with_cluster_hosts_written(text: &str, point: &Point) -> String {
    let named: Vec<&str> = point
        .iter()
        .filter_map(|(k, _)| k.strip_prefix("host.")?.split('.').next())
        .collect();
    if named.is_empty() {
        return text.to_string();
    }
    // A file that does not parse is reported by the caller, at its own error.
    let Ok(doc) = toml::from_str::<toml::Table>(text) else {
        return text.to_string();
    };
    let Some((host_names, hosts, template)) = cluster_template(&doc) else {
        return text.to_string();
    };
    let written: Vec<&str> = doc
        .get("host")
        .and_then(toml::Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|h| h.get("name")?.as_str())
        .collect();
    let mut out = text.to_string();
    let mut done: Vec<&str> = Vec::new();
    for name in named {
        if written.contains(&name)
            || done.contains(&name)
            || !fabric::scenario::cluster_makes_host(host_names, hosts, name)
        {
            continue;
        }
        done.push(name);
        let mut host = toml::Table::new();
        host.insert("name".into(), name.into());
        host.extend(template.clone());
        let mut file = toml::Table::new();
        file.insert("host".into(), vec![toml::Value::Table(host)].into());
        if let Ok(t) = toml::to_string(&file) {
            out.push('\n');
            out.push_str(&t);
        }
    }
    out
}

/// For a key on a host no file names: the hosts the file's `[cluster]` makes.
fn cluster_hosts_note(text: &str, key: &str) -> String {
    let Some(doc) = key
        .starts_with("host.")
        .then(|| toml::from_str::<toml::Table>(text).ok())
        .flatten()
    else {
        return String::new();
    };
    let Some((names, hosts, _)) = cluster_template(&doc) else {
        return String::new();
    };
    let last = u32::try_from(hosts.saturating_sub(1)).unwrap_or(u32::MAX);
    match (
        fabric::scenario::cluster_host_name(names, 0),
        fabric::scenario::cluster_host_name(names, last),
    ) {
        (Some(first), Some(last)) => format!("; its [cluster] makes {first} … {last}"),
        _ => String::new(),
    }
}

/// A `[cluster]`'s host name pattern, its number of hosts and its host template.
fn cluster_template(doc: &toml::Table) -> Option<(&str, u64, &toml::Table)> {
    let c = doc.get("cluster")?.as_table()?;
    let per_leaf = u64::try_from(c.get("hosts_per_leaf")?.as_integer()?).ok()?;
    let mut hosts = per_leaf;
    for l in c
        .get("level")
        .and_then(toml::Value::as_array)
        .into_iter()
        .flatten()
    {
        let fanout = u64::try_from(l.get("fanout")?.as_integer()?).ok()?;
        hosts = hosts.saturating_mul(fanout);
    }
    Some((
        c.get("host_names")?.as_str()?,
        hosts,
        c.get("host")?.as_table()?,
    ))
}

/// Loads a scenario with a point's overrides: each key is set in the main file when it
/// has it, otherwise in the include that does (`platform.r730.timing.dram_gbps` lives in
/// `platforms/r730.toml`); a key no file has is an error naming what the main file has.
pub fn load(src: &Source, point: &Point) -> Result<(Scenario, Source), String> {
    let (main, missing) = apply_where_present(src, point)?;
    let resolver = IncludeOverrides {
        point,
        pending: RefCell::new(missing),
    };
    let scenario = fabric::scenario::load(main.clone(), &resolver).map_err(|e| e.to_string())?;
    if let Some((_, m)) = resolver.pending.into_inner().first() {
        return Err(m.clone());
    }
    Ok((scenario, main))
}

/// Resolves includes as a user's file does, setting in each the keys still pending.
struct IncludeOverrides<'a> {
    point: &'a Point,
    pending: RefCell<Vec<(usize, String)>>,
}

impl Resolver for IncludeOverrides<'_> {
    fn resolve(&self, from: &str, include: &str) -> Result<Source, String> {
        let src = builtin::AnyResolver.resolve(from, include)?;
        let mut pending = self.pending.borrow_mut();
        if pending.is_empty() {
            return Ok(src);
        }
        let keys: Point = pending
            .iter()
            .map(|(i, _)| self.point[*i].clone())
            .collect();
        let (out, still) = apply_where_present(&src, &keys)?;
        // Keep, of the pending keys, those this include lacks too.
        let lacking: Vec<usize> = still.iter().map(|(k, _)| pending[*k].0).collect();
        pending.retain(|(i, _)| lacking.contains(i));
        Ok(out)
    }
}

/// Where `segs` lead from `item` (whose own path is `here`), the value goes.
fn set_item(
    item: &mut Item,
    segs: &[&str],
    value: toml_edit::Value,
    here: &str,
) -> Result<(), Miss> {
    let Some((&seg, rest)) = segs.split_first() else {
        return match item {
            Item::Value(v) => {
                let decor = v.decor().clone();
                *v = value;
                *v.decor_mut() = decor;
                Ok(())
            }
            Item::None => {
                *item = Item::Value(value);
                Ok(())
            }
            _ => Err(Miss::Bad(format!("`{here}` is a table, not a value"))),
        };
    };
    let named = |names: Vec<Option<String>>| -> Result<usize, Miss> {
        names
            .iter()
            .position(|n| n.as_deref() == Some(seg))
            .or_else(|| seg.parse::<usize>().ok().filter(|&k| k < names.len()))
            .ok_or_else(|| {
                Miss::Absent(format!(
                    "no `{here}` entry named `{seg}` (there are: {})",
                    name_list(names.into_iter().flatten())
                ))
            })
    };
    let name_of =
        |t: &dyn toml_edit::TableLike| t.get("name").and_then(|n| n.as_str()).map(str::to_string);
    let next = join(here, seg);
    if let Some(arr) = item.as_array_of_tables_mut() {
        let idx = named(arr.iter().map(|t| name_of(t)).collect())?;
        let t = arr.get_mut(idx).expect("index checked");
        return set_table_like(t, rest, value, &next);
    }
    if let Some(toml_edit::Value::Array(arr)) = item.as_value_mut() {
        let names = arr
            .iter()
            .map(|v| v.as_inline_table().and_then(|t| name_of(t)))
            .collect();
        let idx = named(names)?;
        return match arr.get_mut(idx) {
            Some(toml_edit::Value::InlineTable(t)) => set_table_like(t, rest, value, &next),
            Some(v) if rest.is_empty() => {
                let decor = v.decor().clone();
                *v = value;
                *v.decor_mut() = decor;
                Ok(())
            }
            _ => Err(Miss::Bad(format!("`{next}` is a value, not a table"))),
        };
    }
    match item.as_table_like_mut() {
        Some(t) => set_table_like(t, segs, value, here),
        None => Err(Miss::Bad(format!("`{here}` is a value, not a table"))),
    }
}

fn set_table_like(
    t: &mut dyn toml_edit::TableLike,
    segs: &[&str],
    value: toml_edit::Value,
    here: &str,
) -> Result<(), Miss> {
    let Some((&seg, rest)) = segs.split_first() else {
        return Err(Miss::Bad(format!("`{here}` is a table, not a value")));
    };
    match t.get_mut(seg) {
        Some(item) => set_item(item, rest, value, &join(here, seg)),
        // A key the file leaves out (an optional one): the scenario's own validation
        // refuses it if it is not a key there.
        None if rest.is_empty() => {
            t.insert(seg, Item::Value(value));
            Ok(())
        }
        None if here.is_empty() => Err(Miss::Absent(format!(
            "the file has no top-level `{seg}` (it has: {}); a workload's field is \
             `workload.NAME.FIELD`",
            name_list(t.iter().map(|(k, _)| k))
        ))),
        None => Err(Miss::Absent(format!(
            "no `{seg}` in `{here}` (it has: {})",
            name_list(t.iter().map(|(k, _)| k))
        ))),
    }
}

fn join(here: &str, seg: &str) -> String {
    if here.is_empty() {
        seg.to_string()
    } else {
        format!("{here}.{seg}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = r#"# my rack
[scenario]
name = "t"

[[host]]
name = "srv"
[[host.device]]
name = "nic0"
link = { gen = 3, width = 8 }   # a comment stays
functions = [{ parent = "rc0", link = { gen = 3, width = 8 } }]

[[workload]]
name = "rx"
outstanding = 32

[measure]
duration = "1 ms"
"#;

    fn src() -> Source {
        Source {
            name: "t.toml".into(),
            text: TEXT.into(),
        }
    }

    fn one(key: &str, v: &str) -> Result<Source, String> {
        let o = Override::parse(&format!("{key}={v}"))?;
        apply(&src(), &points(&[o])[0])
    }

    #[test]
    fn keys_reach_named_tables_inline_tables_and_arrays() {
        let s = one("host.srv.device.nic0.link.width", "16").unwrap();
        assert!(
            s.text
                .contains("link = { gen = 3, width = 16 }   # a comment stays"),
            "{}",
            s.text
        );
        let s = one("workload.rx.outstanding", "4").unwrap();
        assert!(
            s.text.contains(
                "outstanding = 4
"
            ),
            "{}",
            s.text
        );
        let s = one("measure.duration", "2 ms").unwrap();
        assert!(s.text.contains("duration = \"2 ms\""), "{}", s.text);
        let s = one("host.srv.device.nic0.functions.0.link.gen", "4").unwrap();
        assert!(
            s.text.contains("link = { gen = 4, width = 8 } }]"),
            "{}",
            s.text
        );
        assert_eq!(
            s.text.lines().count(),
            TEXT.lines().count(),
            "lines stay where they were"
        );
    }

    #[test]
    fn bad_keys_are_named() {
        let e = one("host.srv.device.nic9.link.width", "16").unwrap_err();
        assert!(
            e.contains("no `host.srv.device` entry named `nic9` (there are: nic0)"),
            "{e}"
        );
        let e = one("host.srv.devices.nic0", "1").unwrap_err();
        assert_eq!(
            e,
            "--set host.srv.devices.nic0: no `devices` in `host.srv` (it has: device, name)"
        );
        // Candidates are listed sorted, each once, even where the file repeats a name
        // (which its own validation refuses later).
        let twice = Source {
            name: "t.toml".into(),
            text: TEXT.replace(
                "[measure]",
                "[[workload]]\nname = \"rx\"\n[[workload]]\nname = \"ab\"\n\n[measure]",
            ),
        };
        let o = Override::parse("workload.nope.outstanding=1").unwrap();
        let e = apply(&twice, &points(&[o])[0]).unwrap_err();
        assert_eq!(
            e,
            "--set workload.nope.outstanding: no `workload` entry named `nope` (there are: ab, rx)"
        );
        assert!(Override::parse("workload.rx").is_err());
        assert!(Override::parse("workload..rx=1").is_err());
        // A workload's field written without `workload.`: the error says how to write it.
        let e = one("rx.outstanding", "1").unwrap_err();
        assert!(
            e.starts_with("--set rx.outstanding: the file has no top-level `rx` (it has: ")
                && e.ends_with("a workload's field is `workload.NAME.FIELD`"),
            "{e}"
        );
    }

    #[test]
    fn value_lists_make_a_cartesian_product() {
        let a = Override::parse("workload.rx.outstanding=1,2,4").unwrap();
        let b = Override::parse("measure.duration=1 ms,2 ms").unwrap();
        let p = points(&[a, b]);
        assert_eq!(p.len(), 6);
        let params = params_of(&p[5]);
        assert_eq!(params["workload.rx.outstanding"], serde_json::json!(4));
        assert_eq!(params["measure.duration"], serde_json::json!("2 ms"));
        let sized = params_of(&points(&[Override::parse("w.x=4 KiB").unwrap()])[0]);
        assert_eq!(sized["w.x"], serde_json::json!(4096));
        assert_eq!(
            Override::parse("x=[1, 2],3").unwrap().values.len(),
            2,
            "commas inside brackets belong to the value"
        );
    }
}
