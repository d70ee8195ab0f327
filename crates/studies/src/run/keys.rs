//! The keys a scenario file sets, by the paths `--set` addresses them with: tables by
//! their keys, arrays of tables by each entry's `name` (its index from 0 when it has
//! none). `nudma compare` lists the keys two files set differently.

use std::collections::BTreeMap;

use fabric::scenario::Source;

/// Every scalar (or array of scalars) `src`'s own text sets, by key path, as TOML writes
/// it; the files it includes are not read.
pub fn keys_of(src: &Source) -> Result<BTreeMap<String, String>, String> {
    let table: toml::Table = toml::from_str(&src.text).map_err(|e| format!("{}: {e}", src.name))?;
    let mut out = BTreeMap::new();
    flatten("", &toml::Value::Table(table), &mut out);
    Ok(out)
}

fn flatten(path: &str, v: &toml::Value, out: &mut BTreeMap<String, String>) {
    let join = |k: &str| {
        if path.is_empty() {
            k.to_string()
        } else {
            format!("{path}.{k}")
        }
    };
    match v {
        toml::Value::Table(t) => {
            for (k, v) in t {
                flatten(&join(k), v, out);
            }
        }
        toml::Value::Array(a) if !a.is_empty() && a.iter().all(toml::Value::is_table) => {
            for (i, e) in a.iter().enumerate() {
                let name = e.get("name").and_then(toml::Value::as_str);
                let key = name.map_or_else(|| i.to_string(), str::to_string);
                flatten(&join(&key), e, out);
            }
        }
        other => {
            out.insert(path.to_string(), other.to_string());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrays_of_tables_are_keyed_by_name_or_index() {
        let src = Source {
            name: "t.toml".into(),
            text: "[scenario]\nname = \"x\"\n[[host]]\nname = \"srv\"\n[[host.device]]\n\
                   name = \"nic\"\nlink = { gen = 3, width = 16 }\n[[cable]]\nlanes = [1, 2]\n"
                .into(),
        };
        let k = keys_of(&src).unwrap();
        assert_eq!(k["host.srv.device.nic.link.width"], "16");
        assert_eq!(k["cable.0.lanes"], "[1, 2]");
        assert_eq!(k["scenario.name"], "\"x\"");
    }
}
