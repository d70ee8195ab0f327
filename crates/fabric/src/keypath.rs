//! The key path of a place in a TOML text (`host[0].device[1].link.width`), so that an error
//! the TOML parser reports at a byte offset — a wrong type, a number out of range, a
//! missing or unknown field — can name the key as the loader's own errors do. Arrays of
//! tables and arrays are indexed from 0, as in those errors.

use std::collections::HashMap;

/// A level of nesting inside a table's body.
enum Frame {
    /// A table (the body under a header, or an inline table): the key whose value is being
    /// read, once its `=` was seen.
    Table { key: Option<String> },
    /// An array value: the element being read.
    Array { index: usize },
}

/// The key path at byte `offset` of `text`: the table the offset is in (a header at the
/// offset counts as its table), then the key whose value the offset is in, through inline
/// tables and arrays. `None` when the offset is at the top level outside any value.
pub fn key_path_at(text: &str, offset: usize) -> Option<String> {
    let mut end = offset.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let bytes = text.as_bytes();
    let mut header: Vec<String> = Vec::new();
    let mut aot: HashMap<String, usize> = HashMap::new();
    let mut frames = vec![Frame::Table { key: None }];
    let mut i = 0;
    while i < end {
        let c = bytes[i];
        let expecting_key = matches!(frames.last(), Some(Frame::Table { key: None }));
        match c {
            b'#' => {
                while i < end && bytes[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            b'\n' => {
                if let [Frame::Table { key }] = frames.as_mut_slice() {
                    *key = None;
                }
            }
            b'"' | b'\'' if !expecting_key => {
                i = skip_string(bytes, i);
                continue;
            }
            b'[' if expecting_key && frames.len() == 1 => {
                let (path, next) = read_header(text, i, &mut aot);
                header = path;
                i = next;
                continue;
            }
            b'[' => frames.push(Frame::Array { index: 0 }),
            b'{' => frames.push(Frame::Table { key: None }),
            b']' | b'}' if frames.len() > 1 => {
                frames.pop();
            }
            b',' => match frames.last_mut() {
                Some(Frame::Array { index }) => *index += 1,
                Some(Frame::Table { key }) => *key = None,
                None => {}
            },
            b' ' | b'\t' | b'\r' => {}
            _ if expecting_key => {
                let (key, next) = read_key(bytes, i);
                if let Some(Frame::Table { key: k }) = frames.last_mut() {
                    *k = Some(key);
                }
                i = next;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    // An error at a table's header names that table.
    let at_header = frames.len() == 1
        && matches!(frames[0], Frame::Table { key: None })
        && text[end..].trim_start_matches([' ', '\t']).starts_with('[');
    if at_header {
        let start = end + (text[end..].len() - text[end..].trim_start_matches([' ', '\t']).len());
        header = read_header(text, start, &mut aot).0;
    }
    let mut path = header.join(".");
    for f in &frames {
        match f {
            Frame::Table { key: Some(k) } => {
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(k);
            }
            Frame::Table { key: None } => {}
            Frame::Array { index } => path.push_str(&format!("[{index}]")),
        }
    }
    (!path.is_empty()).then_some(path)
}

/// The key a TOML parse error at `offset` is about: for "missing field `x`" and "unknown
/// field `x`" the table's path and `x`, otherwise the key whose value is at `offset`.
pub fn key_of_error(text: &str, offset: usize, message: &str) -> Option<String> {
    let field = ["missing field `", "unknown field `"]
        .iter()
        .find_map(|p| message.strip_prefix(p))
        .and_then(|rest| rest.split('`').next());
    let path = key_path_at(text, offset);
    match (field, path) {
        (Some(f), Some(p)) if p == f || p.ends_with(&format!(".{f}")) => Some(p),
        (Some(f), Some(p)) => Some(format!("{p}.{f}")),
        (Some(f), None) => Some(f.to_string()),
        (None, p) => p,
    }
}

/// Past the string starting at `i` (basic, literal, or either multi-line form).
fn skip_string(bytes: &[u8], i: usize) -> usize {
    let q = bytes[i];
    let triple = bytes.get(i..i + 3) == Some(&[q, q, q][..]);
    let mut j = i + if triple { 3 } else { 1 };
    while j < bytes.len() {
        if q == b'"' && bytes[j] == b'\\' {
            j += 2;
            continue;
        }
        if triple {
            if bytes.get(j..j + 3) == Some(&[q, q, q][..]) {
                return j + 3;
            }
        } else if bytes[j] == q || bytes[j] == b'\n' {
            return j + 1;
        }
        j += 1;
    }
    j
}

/// A (possibly dotted, possibly quoted) key starting at `i`, up to its `=`: the key and
/// the position after the `=`.
fn read_key(bytes: &[u8], mut i: usize) -> (String, usize) {
    let mut key = String::new();
    while i < bytes.len() && bytes[i] != b'=' && bytes[i] != b'\n' {
        match bytes[i] {
            b'"' | b'\'' => {
                let end = skip_string(bytes, i);
                let inner = &bytes[i + 1..end.saturating_sub(1).max(i + 1)];
                key.push_str(&String::from_utf8_lossy(inner));
                i = end;
                continue;
            }
            b' ' | b'\t' => {}
            c => key.push(c as char),
        }
        i += 1;
    }
    (key, (i + 1).min(bytes.len()))
}

/// The header at `i` (`[a.b]` or `[[a.b]]`) as indexed path segments, counting arrays of
/// tables; and the position after it.
fn read_header(text: &str, i: usize, aot: &mut HashMap<String, usize>) -> (Vec<String>, usize) {
    let rest = &text[i..];
    let array = rest.starts_with("[[");
    let open = if array { 2 } else { 1 };
    let close = rest
        .find(if array { "]]" } else { "]" })
        .unwrap_or(rest.len());
    let next = i + (close + open).min(rest.len());
    let names: Vec<String> = rest[open..close.max(open)]
        .split('.')
        .map(|s| s.trim().trim_matches(['"', '\'']).to_string())
        .collect();
    let mut segs: Vec<String> = Vec::new();
    for (k, name) in names.iter().enumerate() {
        let plain = if segs.is_empty() {
            name.clone()
        } else {
            format!("{}.{name}", segs.join("."))
        };
        let last = k + 1 == names.len();
        let count = if last && array {
            let n = aot.entry(plain).or_insert(0);
            *n += 1;
            Some(*n)
        } else {
            aot.get(&plain).copied()
        };
        segs.push(match count {
            Some(n) => format!("{name}[{}]", n - 1),
            None => name.clone(),
        });
    }
    (segs, next)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = r#"include = ["a.toml"]   # a comment [x]

[scenario]
name = "t"

[[host]]
name = "a"
[[host.switch]]
name = "sw"
link = { gen = 3, width = 300 }
[[host.switch]]
name = "sw2"
[[host]]
name = "b"
[[host.device]]
name = "d"
bars = [{ size = "16 KiB" }, { size = "4 KB", bits = 32 }]
timing = { "quoted key" = 1.0 }
[platform.p.timing]
dram_ns = "x"
"#;

    fn at(needle: &str) -> Option<String> {
        key_path_at(TEXT, TEXT.find(needle).unwrap())
    }

    #[test]
    fn paths_index_arrays_of_tables_and_inline_values() {
        assert_eq!(at("300").as_deref(), Some("host[0].switch[0].link.width"));
        assert_eq!(at("\"sw2\"").as_deref(), Some("host[0].switch[1].name"));
        assert_eq!(
            at("\"4 KB\"").as_deref(),
            Some("host[1].device[0].bars[1].size")
        );
        assert_eq!(
            at("1.0").as_deref(),
            Some("host[1].device[0].timing.quoted key")
        );
        assert_eq!(at("\"x\"").as_deref(), Some("platform.p.timing.dram_ns"));
        assert_eq!(at("\"a.toml\"").as_deref(), Some("include[0]"));
        assert_eq!(at("\"t\"").as_deref(), Some("scenario.name"));
        // A header names its table; a key's start names the table it is in.
        assert_eq!(at("[[host.device]]").as_deref(), Some("host[1].device[0]"));
        assert_eq!(at("[[host]]\nname = \"b\"").as_deref(), Some("host[1]"));
        assert_eq!(at("bars").as_deref(), Some("host[1].device[0]"));
        assert_eq!(key_path_at(TEXT, 0), None);
    }

    #[test]
    fn missing_and_unknown_fields_are_named_in_their_table() {
        let off = TEXT.find("[[host.switch]]").unwrap();
        assert_eq!(
            key_of_error(TEXT, off, "missing field `chip`").as_deref(),
            Some("host[0].switch[0].chip")
        );
        let off = TEXT.find("bars").unwrap();
        assert_eq!(
            key_of_error(TEXT, off, "unknown field `bars`, expected one of `a`").as_deref(),
            Some("host[1].device[0].bars")
        );
        let off = TEXT.find("{ gen").unwrap();
        assert_eq!(
            key_of_error(TEXT, off, "missing field `lanes`").as_deref(),
            Some("host[0].switch[0].link.lanes")
        );
        let off = TEXT.find("300").unwrap();
        assert_eq!(
            key_of_error(TEXT, off, "invalid value: integer `300`").as_deref(),
            Some("host[0].switch[0].link.width")
        );
    }

    #[test]
    fn odd_text_does_not_panic() {
        for text in [
            "[",
            "[[",
            "a = \"",
            "a = [{",
            "]]]",
            "x = '''\n",
            "é = 1",
            "\"",
            "a = {]",
        ] {
            for off in 0..=text.len() + 1 {
                let _ = key_path_at(text, off);
                let _ = key_of_error(text, off, "missing field `x`");
            }
        }
    }
}
