//! The guide stays a guide and its links lead somewhere: the README is at most 200 lines,
//! and every relative link in the README, BENCHMARKS.md and `docs/` names a file of the
//! repository and, with a `#fragment`, a heading of that file (as GitHub renders anchors).

use std::collections::HashSet;
use std::path::{Path, PathBuf};

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace").to_path_buf()
}

/// The Markdown files a reader follows links through.
fn documents() -> Vec<PathBuf> {
    let root = repository();
    let mut files = vec![root.join("README.md"), root.join("BENCHMARKS.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("docs/")
        .map(|entry| entry.expect("entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    files
}

/// The lines outside fenced code blocks.
fn prose(text: &str) -> Vec<&str> {
    let mut fenced = false;
    text.lines()
        .filter(|line| {
            if line.trim_start().starts_with("```") {
                fenced = !fenced;
                return false;
            }
            !fenced
        })
        .collect()
}

/// The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens,
/// and a repeated anchor numbered.
fn anchors(text: &str) -> HashSet<String> {
    let mut seen = HashSet::new();
    for line in prose(text) {
        let Some(title) = line.strip_prefix('#').map(|t| t.trim_start_matches('#')) else { continue };
        if !title.starts_with(' ') {
            continue;
        }
        let slug: String = title
            .trim()
            .to_lowercase()
            .chars()
            .filter_map(|c| match c {
                ' ' => Some('-'),
                c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
                _ => None,
            })
            .collect();
        let mut anchor = slug.clone();
        let mut n = 0;
        while seen.contains(&anchor) {
            n += 1;
            anchor = format!("{slug}-{n}");
        }
        seen.insert(anchor);
    }
    seen
}

/// Every `](target)` of a Markdown file's prose, outside code spans.
fn link_targets(text: &str) -> Vec<String> {
    let mut targets = Vec::new();
    for line in prose(text) {
        let outside_code: String = line.split('`').step_by(2).collect::<Vec<_>>().join(" ");
        let mut rest = outside_code.as_str();
        while let Some(start) = rest.find("](") {
            let after = &rest[start + 2..];
            let Some(end) = after.find(')') else { break };
            targets.push(after[..end].to_owned());
            rest = &after[end..];
        }
    }
    targets
}

#[test]
fn the_readme_is_a_guide_of_at_most_two_hundred_lines() {
    let readme = std::fs::read_to_string(repository().join("README.md")).expect("README.md");
    let lines = readme.lines().count();
    assert!(lines <= 200, "README.md has {lines} lines: move behaviour into docs/");
    let commands: Vec<&str> = readme.lines().skip_while(|l| !l.starts_with("```sh")).skip(1).take(2).collect();
    assert!(
        commands[0].starts_with("infra/local/run ") && commands[1].starts_with("infra/local/test "),
        "the two set-up commands open the README: {commands:?}"
    );
}

#[test]
fn every_relative_link_names_a_file_and_a_heading_that_exist() {
    let mut broken = Vec::new();
    let mut checked = 0;
    for file in documents() {
        let text = std::fs::read_to_string(&file).expect("a document");
        for target in link_targets(&text) {
            if target.starts_with("http://") || target.starts_with("https://") || target.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let (path, fragment) = match target.split_once('#') {
                Some((path, fragment)) => (path, Some(fragment)),
                None => (target.as_str(), None),
            };
            let linked = if path.is_empty() { file.clone() } else { file.parent().expect("folder").join(path) };
            if !linked.exists() {
                broken.push(format!("{}: {target}: no such file", file.display()));
                continue;
            }
            if let Some(fragment) = fragment.filter(|_| linked.extension().is_some_and(|e| e == "md")) {
                let headings = anchors(&std::fs::read_to_string(&linked).expect("linked document"));
                if !headings.contains(fragment) {
                    broken.push(format!("{}: {target}: no such heading", file.display()));
                }
            }
        }
    }
    assert!(checked > 50, "only {checked} links found: the scan is broken");
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn anchors_follow_githubs_rules() {
    let found = anchors("# Tests, benchmarks and fuzzing\n## The arm64 smoke\n## `sluice parse`\n## A run\n## A run\n");
    for anchor in ["tests-benchmarks-and-fuzzing", "the-arm64-smoke", "sluice-parse", "a-run", "a-run-1"] {
        assert!(found.contains(anchor), "{anchor} in {found:?}");
    }
    assert_eq!(link_targets("see [a](docs/a.md#b) and [c](https://x)"), ["docs/a.md#b", "https://x"]);
    assert!(link_targets("code: `![x](#image-N)`").is_empty(), "a code span holds no link");
}
