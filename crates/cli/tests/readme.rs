//! The documentation's examples are what the binary prints: every ```text block of
//! README.md and docs/*.md that opens with a `$ nudma …` line is run from the repository's
//! root, and its stdout must equal the rest of the block (trailing spaces aside).

use std::path::{Path, PathBuf};
use std::process::Command;

/// `(command line, expected output)` of each example in one Markdown file.
fn examples(markdown: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = markdown;
    while let Some(start) = rest.find("```text\n$ nudma ") {
        let body = &rest[start + "```text\n".len()..];
        let end = body.find("```").expect("an unclosed ```text block");
        let (cmd, expected) = body[..end].split_once('\n').expect("a command line");
        out.push((cmd.to_string(), expected.to_string()));
        rest = &body[end..];
    }
    out
}

/// README.md, then every Markdown file of docs/ in name order.
fn documents(root: &Path) -> Vec<PathBuf> {
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .map(|dir| {
            dir.map(|e| e.unwrap().path())
                .filter(|p| p.extension().is_some_and(|x| x == "md"))
                .collect()
        })
        .unwrap_or_default();
    docs.sort();
    docs.insert(0, root.join("README.md"));
    docs
}

fn normalise(s: &str) -> String {
    s.trim_end()
        .lines()
        .map(str::trim_end)
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn every_documented_example_prints_what_the_documentation_shows() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    // (file, command line, expected output); a block repeated byte for byte in another
    // place (the README's tour quotes the guides) runs once.
    let mut all: Vec<(String, String, String)> = Vec::new();
    for path in documents(&root) {
        let text = std::fs::read_to_string(&path).unwrap();
        let name = path.strip_prefix(&root).unwrap().display().to_string();
        for (cmd, expected) in examples(&text) {
            if !all.iter().any(|(_, c, e)| *c == cmd && *e == expected) {
                all.push((name.clone(), cmd, expected));
            }
        }
    }
    assert!(all.len() >= 4, "{} examples found", all.len());
    let mut wrong = Vec::new();
    for (file, cmd, expected) in &all {
        // The examples quote nothing: whitespace splits their arguments.
        let args: Vec<&str> = cmd
            .trim_start_matches("$ nudma ")
            .split_whitespace()
            .collect();
        let out = Command::new(env!("CARGO_BIN_EXE_nudma"))
            .args(&args)
            .current_dir(&root)
            .output()
            .unwrap();
        let got = normalise(&String::from_utf8_lossy(&out.stdout));
        if got != normalise(expected) {
            wrong.push(format!(
                "{file}: {cmd}\n--- documented:\n{expected}\n--- prints:\n{got}\n"
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "documented examples out of date:\n{}",
        wrong.join("\n")
    );
}
