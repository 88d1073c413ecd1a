//! Every crate's modules form a star or a line, never a circle: a module that imports
//! another (`crate::…`, `super::…`, `self::…`, or a parent naming its child) is above it,
//! and no chain of imports comes back. The crate root (`lib.rs`) is the crate's face — it
//! declares and re-exports the modules, and what it defines (the crate's error, its state)
//! sits below them all — so edges to and from it are not counted; nor are binaries'
//! `main.rs` or test modules (`#[cfg(test)] mod …`). Read from the source, not the compiler:
//! a shared type moves to a leaf module, and a dispatcher stays above its readers.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Module = Vec<String>;

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace").to_path_buf()
}

/// The workspace's crates with a `src/` folder.
fn crates() -> Vec<PathBuf> {
    fn walk(dir: &Path, found: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        if dir.join("Cargo.toml").is_file() && dir.join("src").is_dir() {
            found.push(dir.to_path_buf());
        }
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if path.is_dir() && !name.starts_with('.') && name != "target" && name != "src" {
                walk(&path, found);
            }
        }
    }
    let mut found = Vec::new();
    for top in ["functions", "shared", "infra", "tests"] {
        walk(&repository().join(top), &mut found);
    }
    found.sort();
    found
}

/// The library's source files by module path (`a/b.rs` and `a/b/mod.rs` are `a::b`).
fn modules(src: &Path) -> BTreeMap<Module, PathBuf> {
    fn walk(dir: &Path, files: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("a source folder").flatten() {
            let path = entry.path();
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n != "bin") {
                    walk(&path, files);
                }
            } else if path.extension().is_some_and(|e| e == "rs") && path.file_name().is_some_and(|n| n != "main.rs") {
                files.push(path);
            }
        }
    }
    let mut files = Vec::new();
    walk(src, &mut files);
    files
        .into_iter()
        .map(|file| {
            let relative = file.strip_prefix(src).expect("under src").with_extension("");
            let mut module: Module = relative.iter().map(|part| part.to_string_lossy().into_owned()).collect();
            if module.last().is_some_and(|last| last == "mod" || last == "lib") {
                module.pop();
            }
            (module, file)
        })
        .collect()
}

/// The code of a file with comments, strings and character literals blanked out, and its
/// test modules removed.
fn code(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let starts = |i: usize, s: &str| s.chars().enumerate().all(|(k, c)| chars.get(i + k) == Some(&c));
    while i < chars.len() {
        let c = chars[i];
        let after_ident = i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_');
        if starts(i, "//") {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if starts(i, "/*") {
            let mut depth = 0;
            while i < chars.len() {
                if starts(i, "/*") {
                    depth += 1;
                    i += 2;
                } else if starts(i, "*/") {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if (c == 'r' || (c == 'b' && chars.get(i + 1) == Some(&'r'))) && !after_ident && {
            let mut j = i + if c == 'b' { 2 } else { 1 };
            while chars.get(j) == Some(&'#') {
                j += 1;
            }
            chars.get(j) == Some(&'"')
        } {
            let mut j = i + if c == 'b' { 2 } else { 1 };
            let mut hashes = 0;
            while chars[j] == '#' {
                hashes += 1;
                j += 1;
            }
            j += 1;
            loop {
                if j >= chars.len() {
                    break;
                }
                if chars[j] == '"' && (0..hashes).all(|k| chars.get(j + 1 + k) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            out.push_str("\"\"");
            i = j;
        } else if c == '"' || (c == 'b' && chars.get(i + 1) == Some(&'"') && !after_ident) {
            i += if c == 'b' { 2 } else { 1 };
            while i < chars.len() && chars[i] != '"' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else if c == '\'' && chars.get(i + 1) == Some(&'\\') {
            i += 2;
            while i < chars.len() && chars[i] != '\'' {
                i += 1;
            }
            i += 1;
            out.push_str("' '");
        } else if c == '\'' && chars.get(i + 2) == Some(&'\'') {
            i += 3;
            out.push_str("' '");
        } else {
            out.push(c);
            i += 1;
        }
    }
    without_test_modules(&out)
}

fn without_test_modules(code: &str) -> String {
    let mut code = code.to_owned();
    while let Some(start) = code.find("#[cfg(test)]") {
        let rest = code[start + "#[cfg(test)]".len()..].trim_start();
        if !rest.starts_with("mod ") {
            code.replace_range(start..start + "#[cfg(test)]".len(), "");
            continue;
        }
        let open = start + code[start..].find('{').expect("a test module's body");
        let mut depth = 0;
        let mut end = code.len();
        for (k, ch) in code[open..].char_indices() {
            match ch {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = open + k + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        code.replace_range(start..end, "");
    }
    code
}

/// The paths a use tree starting at `rest` names: `a::b`, `a::{b, c::d}` and so on.
fn use_tree(rest: &str) -> Vec<Vec<String>> {
    fn tree(chars: &[char], i: &mut usize) -> Vec<Vec<String>> {
        let skip_space = |i: &mut usize| {
            while *i < chars.len() && chars[*i].is_whitespace() {
                *i += 1;
            }
        };
        skip_space(i);
        if chars.get(*i) == Some(&'{') {
            *i += 1;
            let mut paths = Vec::new();
            loop {
                skip_space(i);
                match chars.get(*i) {
                    Some('}') => {
                        *i += 1;
                        break;
                    }
                    Some(',') => *i += 1,
                    None => break,
                    _ => paths.extend(tree(chars, i)),
                }
            }
            return paths;
        }
        let start = *i;
        while *i < chars.len() && (chars[*i].is_alphanumeric() || chars[*i] == '_') {
            *i += 1;
        }
        let segment: String = chars[start..*i].iter().collect();
        if segment.is_empty() {
            return vec![Vec::new()];
        }
        if chars.get(*i) == Some(&':') && chars.get(*i + 1) == Some(&':') {
            *i += 2;
            return tree(chars, i)
                .into_iter()
                .map(|mut tail| {
                    tail.insert(0, segment.clone());
                    tail
                })
                .collect();
        }
        vec![vec![segment]]
    }
    let chars: Vec<char> = rest.chars().collect();
    tree(&chars, &mut 0)
}

/// The modules `module` (the file `file`) imports, among `all`.
fn imports(module: &Module, file: &Path, all: &BTreeMap<Module, PathBuf>) -> BTreeSet<Module> {
    let code = code(&std::fs::read_to_string(file).expect("a source file"));
    let mut found = BTreeSet::new();
    let resolve = |full: Vec<String>, found: &mut BTreeSet<Module>| {
        let target = (0..=full.len()).rev().map(|k| full[..k].to_vec()).find(|prefix| all.contains_key(prefix));
        if let Some(target) = target.filter(|t| !t.is_empty() && t != module) {
            found.insert(target);
        }
    };
    for anchor in ["crate::", "super::", "self::"] {
        let mut from = 0;
        while let Some(at) = code[from..].find(anchor).map(|k| from + k) {
            from = at + anchor.len();
            let before = code[..at].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            for tail in use_tree(&code[from..]) {
                let mut base: Module = match anchor {
                    "crate::" => Vec::new(),
                    "super::" => module[..module.len().saturating_sub(1)].to_vec(),
                    _ => module.clone(),
                };
                let mut tail = tail.as_slice();
                while tail.first().is_some_and(|s| s == "super") {
                    base.pop();
                    tail = &tail[1..];
                }
                base.extend(tail.iter().cloned());
                resolve(base, &mut found);
            }
        }
    }
    // A parent naming a child module in its own code (not declaring or re-exporting it).
    for child in all.keys().filter(|k| k.len() == module.len() + 1 && k.starts_with(module)) {
        let name = format!("{}::", child.last().expect("a name"));
        let named = code.lines().map(str::trim).any(|line| {
            let declares = ["mod ", "pub mod ", "pub(crate) mod ", "pub use ", "pub(crate) use "]
                .iter()
                .any(|p| line.starts_with(p));
            !declares
                && line.match_indices(&name).any(|(k, _)| {
                    !line[..k].chars().next_back().is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':')
                })
        });
        if named && !module.is_empty() {
            found.insert(child.clone());
        }
    }
    found
}

/// The circles of the graph: its strongly connected components of more than one module.
fn circles(edges: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<Vec<Module>> {
    struct Search<'a> {
        edges: &'a BTreeMap<Module, BTreeSet<Module>>,
        index: BTreeMap<Module, usize>,
        low: BTreeMap<Module, usize>,
        stack: Vec<Module>,
        circles: Vec<Vec<Module>>,
    }
    impl Search<'_> {
        fn visit(&mut self, v: &Module) {
            let n = self.index.len();
            self.index.insert(v.clone(), n);
            self.low.insert(v.clone(), n);
            self.stack.push(v.clone());
            for w in self.edges.get(v).into_iter().flatten() {
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let low = self.low[v].min(self.low[w]);
                    self.low.insert(v.clone(), low);
                } else if self.stack.contains(w) {
                    let low = self.low[v].min(self.index[w]);
                    self.low.insert(v.clone(), low);
                }
            }
            if self.low[v] == self.index[v] {
                let mut component = Vec::new();
                while let Some(w) = self.stack.pop() {
                    let done = &w == v;
                    component.push(w);
                    if done {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.circles.push(component);
                }
            }
        }
    }
    let mut search =
        Search { edges, index: BTreeMap::new(), low: BTreeMap::new(), stack: Vec::new(), circles: Vec::new() };
    for v in edges.keys() {
        if !search.index.contains_key(v) {
            search.visit(v);
        }
    }
    search.circles
}

fn graph(src: &Path) -> BTreeMap<Module, BTreeSet<Module>> {
    let all = modules(src);
    all.iter().filter(|(m, _)| !m.is_empty()).map(|(m, file)| (m.clone(), imports(m, file, &all))).collect()
}

#[test]
fn no_crate_imports_its_own_modules_in_a_circle() {
    let mut found = Vec::new();
    let crates = crates();
    assert!(crates.len() > 20, "only {} crates found: the scan is broken", crates.len());
    for krate in crates {
        for circle in circles(&graph(&krate.join("src"))) {
            let names: Vec<String> = circle.iter().map(|m| m.join("::")).collect();
            found.push(format!(
                "{}: {}",
                krate.strip_prefix(repository()).unwrap_or(&krate).display(),
                names.join(", ")
            ));
        }
    }
    assert!(found.is_empty(), "modules importing each other in a circle:\n{}", found.join("\n"));
}

#[test]
fn the_check_sees_a_circle_through_groups_super_and_a_parent_naming_its_child() {
    let folder = std::env::temp_dir().join(format!("sluice-cycles-{}", std::process::id()));
    let src = folder.join("src");
    std::fs::create_dir_all(src.join("readers")).expect("folders");
    let write = |path: &str, text: &str| std::fs::write(src.join(path), text).expect("write");
    write("lib.rs", "pub mod dispatch;\npub mod readers;\npub mod leaf;\npub struct State;\n");
    write("dispatch.rs", "use crate::{leaf::Shared, readers::{pdf::read}};\npub fn go() { read() }\n");
    write("readers/mod.rs", "pub mod pdf;\npub fn all() { pdf::read() }\n");
    write(
        "readers/pdf.rs",
        "// crate::dispatch in a comment is not an import\nuse crate::State;\n\
         pub fn read() { let _ = \"crate::dispatch\"; let _ = '\"'; super::super::dispatch::go() }\n",
    );
    write("leaf.rs", "pub struct Shared;\n#[cfg(test)]\nmod tests { use crate::dispatch::go; }\n");
    let edges = graph(&src);
    let module = |path: &str| path.split("::").map(str::to_owned).collect::<Module>();
    assert_eq!(edges[&module("dispatch")], BTreeSet::from([module("leaf"), module("readers::pdf")]));
    assert_eq!(edges[&module("readers")], BTreeSet::from([module("readers::pdf")]));
    assert_eq!(edges[&module("readers::pdf")], BTreeSet::from([module("dispatch")]));
    assert!(edges[&module("leaf")].is_empty(), "a test module's imports are not the module's");
    assert_eq!(circles(&edges), vec![vec![module("dispatch"), module("readers::pdf")]]);
    std::fs::remove_dir_all(folder).expect("clean up");
}
