//! Every source the repository cites is in the repository: no file of crates/, scenarios/,
//! python/, examples/, docs/, README.md or ARCHITECTURE.md names a design, experiment or
//! reference document kept outside it, and every `docs/hardware.md §N` cited is a section
//! `## N.` of docs/hardware.md.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

const CITING: &str = "docs/hardware.md";

/// Documents outside the repository that files once cited (spelled in pieces so that
/// this file does not cite them itself).
fn outside() -> [String; 3] {
    ["REFERENCE", "DESIGN", "EXPERIMENTS"].map(|name| format!("{name}.md"))
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every text file under the checked trees, build output and hidden directories aside.
fn files(root: &Path) -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if path.is_dir() {
                if !name.starts_with('.') && name != "target" && name != "__pycache__" {
                    walk(&path, out);
                }
            } else {
                out.push(path);
            }
        }
    }
    let mut out = Vec::new();
    for tree in ["crates", "scenarios", "python", "examples", "docs"] {
        walk(&root.join(tree), &mut out);
    }
    out.push(root.join("README.md"));
    out.push(root.join("ARCHITECTURE.md"));
    out.sort();
    out
}

/// The section numbers a citation at each `docs/hardware.md` names: `§N` right after it,
/// or after a line break and the next line's comment marker (a citation wrapped in a
/// comment). A mention without a section is not a citation.
fn cited_sections(text: &str) -> Vec<(usize, u32)> {
    let mut out = Vec::new();
    for (at, _) in text.match_indices(CITING) {
        let rest = text[at + CITING.len()..]
            .trim_start_matches(|c: char| c.is_whitespace() || "/!#*".contains(c));
        if let Some(digits) = rest.strip_prefix('§') {
            let n: String = digits.chars().take_while(char::is_ascii_digit).collect();
            if let Ok(n) = n.parse() {
                out.push((text[..at].matches('\n').count() + 1, n));
            }
        }
    }
    out
}

#[test]
fn no_file_cites_a_document_outside_the_repository() {
    let root = root();
    let names = outside();
    let mut found = Vec::new();
    let mut read = 0;
    for path in files(&root) {
        // Binary fixtures (hwloc tarballs) are not text: nothing to cite.
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        read += 1;
        for (line_no, line) in text.lines().enumerate() {
            for name in &names {
                if line.contains(name.as_str()) {
                    let file = path.strip_prefix(&root).unwrap().display();
                    found.push(format!("{file}:{}: {name}", line_no + 1));
                }
            }
        }
    }
    assert!(
        read > 100,
        "only {read} files read under {}",
        root.display()
    );
    assert!(
        found.is_empty(),
        "cite docs/hardware.md, docs/studies.md, docs/cli.md or ARCHITECTURE.md instead:\n{}",
        found.join("\n")
    );
}

#[test]
fn every_cited_section_of_the_hardware_page_exists() {
    let root = root();
    let page = std::fs::read_to_string(root.join(CITING)).unwrap();
    let sections: BTreeSet<u32> = page
        .lines()
        .filter_map(|l| l.strip_prefix("## "))
        .filter_map(|h| h.split_once('.').and_then(|(n, _)| n.parse().ok()))
        .collect();
    assert_eq!(
        sections,
        (1..=6).collect(),
        "docs/hardware.md keeps sections 1-6"
    );
    let mut cited = 0;
    let mut missing = Vec::new();
    for path in files(&root) {
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        for (line, n) in cited_sections(&text) {
            cited += 1;
            if !sections.contains(&n) {
                let file = path.strip_prefix(&root).unwrap().display();
                missing.push(format!("{file}:{line}: §{n}"));
            }
        }
    }
    assert!(cited > 100, "only {cited} citations of {CITING} found");
    assert!(
        missing.is_empty(),
        "cited sections that docs/hardware.md does not have:\n{}",
        missing.join("\n")
    );
}

#[test]
fn a_citation_wrapped_in_a_comment_names_its_section() {
    assert_eq!(
        cited_sections("x (docs/hardware.md\n//! §2), y docs/hardware.md §6's z"),
        vec![(1, 2), (2, 6)]
    );
    assert_eq!(
        cited_sections("see docs/hardware.md for the sources"),
        vec![]
    );
}
