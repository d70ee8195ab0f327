//! README's examples are what the binary prints: every ```text block that opens with a
//! `$ nudma …` line is run from the repository's root, and its stdout must equal the
//! rest of the block (trailing spaces aside).

use std::path::Path;
use std::process::Command;

/// `(command line, expected output)` of each README example.
fn examples(readme: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = readme;
    while let Some(start) = rest.find("```text\n$ nudma ") {
        let body = &rest[start + "```text\n".len()..];
        let end = body.find("```").expect("an unclosed ```text block");
        let (cmd, expected) = body[..end].split_once('\n').expect("a command line");
        out.push((cmd.to_string(), expected.to_string()));
        rest = &body[end..];
    }
    out
}

fn normalise(s: &str) -> String {
    s.trim_end()
        .lines()
        .map(str::trim_end)
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn every_readme_example_prints_what_the_readme_shows() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let examples = examples(&readme);
    assert!(examples.len() >= 4, "{} examples found", examples.len());
    let mut wrong = Vec::new();
    for (cmd, expected) in &examples {
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
                "{cmd}\n--- README:\n{expected}\n--- prints:\n{got}\n"
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "README examples out of date:\n{}",
        wrong.join("\n")
    );
}
