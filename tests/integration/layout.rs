//! The source tree shows the pipeline, and the code follows it: every
//! `crate::…` path in `src/` names a module of its own stage or an earlier
//! one (the stages are listed in `src/lib.rs`), and no two files import each
//! other, directly or around a circle. Test modules (`#[cfg(test)]` and
//! after) are left out: a test may build its input with a later stage.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The stages, earliest first, as the first segment of a module path.
const STAGES: &[(&str, &[&str])] = &[
    ("base", &["sys", "text", "error", "user"]),
    ("space", &["space"]),
    ("unwind", &["unwind"]),
    ("format", &["format"]),
    ("record", &["record"]),
    ("analysis", &["analysis"]),
    ("model", &["model"]),
    ("output", &["output"]),
    ("face", &["commands", "fuzzing", "main", "lib"]),
];

fn stage_of(first_segment: &str) -> Option<usize> {
    STAGES
        .iter()
        .position(|(_, modules)| modules.contains(&first_segment))
}

/// `src/format/decode.rs` → `["format", "decode"]`; `src/sys/mod.rs` → `["sys"]`.
fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The module paths a source text names through `crate::` or `super::`
/// (the latter from module `from`, whose parent it names), braces expanded
/// (`crate::{a::B, c}` → `a::B`, `c`), each as its segments from the crate
/// root.
fn crate_paths(text: &str, from: &[String]) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for (prefix, root) in [
        ("crate::", &[][..]),
        ("super::", &from[..from.len().saturating_sub(1)]),
    ] {
        let mut found = Vec::new();
        paths_after(text, prefix, &mut found);
        out.extend(found.into_iter().map(|path| [root.to_vec(), path].concat()));
    }
    out
}

/// The paths that follow each `prefix` in `text` (not inside a longer
/// word: `pfprof_crate::` is not `crate::`), braces expanded.
fn paths_after(text: &str, prefix: &str, out: &mut Vec<Vec<String>>) {
    let mut rest = text;
    while let Some(at) = rest.find(prefix) {
        // `pfprof_symbolize::…` or a word ending in "crate" is not ours.
        let before = rest[..at].chars().next_back();
        rest = &rest[at + prefix.len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        if let Some(inner) = rest.strip_prefix('{') {
            // Top-level items of the group; a nested group keeps its prefix.
            let mut depth = 0;
            let mut start = 0;
            for (i, c) in inner.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => {
                        push_item(&inner[start..i], out);
                        break;
                    }
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        push_item(&inner[start..i], out);
                        start = i + 1;
                    }
                    _ => {}
                }
            }
        } else {
            push_item(rest, out);
        }
    }
}

/// A source file without its test module (`#[cfg(test)] mod …` and what
/// follows): a test may build its input with a later stage. A
/// `#[cfg(test)]` on a single item elsewhere does not end the file.
fn without_tests(text: &str) -> &str {
    let mut from = 0;
    while let Some(at) = text[from..].find("#[cfg(test)]") {
        let at = from + at;
        let next = text[at + "#[cfg(test)]".len()..].trim_start();
        let next = next
            .strip_prefix("pub(crate) ")
            .or_else(|| next.strip_prefix("pub "))
            .unwrap_or(next);
        if next.starts_with("mod ") {
            return &text[..at];
        }
        from = at + 1;
    }
    text
}

fn push_item(item: &str, out: &mut Vec<Vec<String>>) {
    let segments = segments(item.trim());
    if !segments.is_empty() {
        out.push(segments);
    }
}

fn segments(mut path: &str) -> Vec<String> {
    let mut out = Vec::new();
    loop {
        let end = path
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(path.len());
        if end == 0 {
            break;
        }
        out.push(path[..end].to_string());
        match path[end..].strip_prefix("::") {
            Some(rest) => path = rest,
            None => break,
        }
    }
    out
}

#[test]
fn stages_import_only_earlier_stages_and_no_cycles() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let modules: BTreeSet<Vec<String>> = files.iter().map(|f| module_path(&src, f)).collect();
    let mut edges: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    let mut wrong = Vec::new();
    for file in &files {
        let from = module_path(&src, file);
        let text = std::fs::read_to_string(file).unwrap();
        let text = without_tests(&text);
        let Some(from_stage) = stage_of(&from[0]) else {
            wrong.push(format!(
                "{}: in no stage (add it to STAGES)",
                file.display()
            ));
            continue;
        };
        assert!(
            !text.contains("super::super::"),
            "{}: reaches out of its folder with super::super::",
            file.display()
        );
        for path in crate_paths(text, &from) {
            let Some(to_stage) = stage_of(&path[0]) else {
                wrong.push(format!(
                    "{}: crate::{} is in no stage",
                    file.display(),
                    path.join("::")
                ));
                continue;
            };
            if to_stage > from_stage {
                wrong.push(format!(
                    "{} ({}) imports crate::{} ({}), a later stage",
                    file.display(),
                    STAGES[from_stage].0,
                    path.join("::"),
                    STAGES[to_stage].0
                ));
            }
            // The file the path lands in: its longest prefix that is a module.
            let target = (1..=path.len())
                .rev()
                .map(|n| path[..n].to_vec())
                .find(|p| modules.contains(p));
            if let Some(target) = target.filter(|t| *t != from) {
                edges.entry(from.clone()).or_default().insert(target);
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "imports against the stages:\n{}",
        wrong.join("\n")
    );
    assert!(
        edges.len() > 20,
        "the scan found too few imports: {edges:?}"
    );

    // No circle between files: a depth-first search finds no back edge.
    fn visit(
        node: &Vec<String>,
        edges: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
        state: &mut BTreeMap<Vec<String>, bool>,
        path: &mut Vec<Vec<String>>,
    ) -> Option<Vec<Vec<String>>> {
        match state.get(node) {
            Some(true) => return None,
            Some(false) => {
                let start = path.iter().position(|n| n == node).unwrap();
                let mut circle = path[start..].to_vec();
                circle.push(node.clone());
                return Some(circle);
            }
            None => {}
        }
        state.insert(node.clone(), false);
        path.push(node.clone());
        for next in edges.get(node).into_iter().flatten() {
            if let Some(circle) = visit(next, edges, state, path) {
                return Some(circle);
            }
        }
        path.pop();
        state.insert(node.clone(), true);
        None
    }
    let mut circles = Vec::new();
    for node in edges.keys() {
        // A fresh search from each file: every circle is named, not just one.
        if let Some(circle) = visit(node, &edges, &mut BTreeMap::new(), &mut Vec::new()) {
            let names: Vec<String> = circle.iter().map(|m| m.join("::")).collect();
            circles.push(names.join(" → "));
        }
    }
    assert!(circles.is_empty(), "import cycles:\n{}", circles.join("\n"));
}

#[test]
fn crate_paths_are_read_with_braces() {
    let text = "use crate::a::B;\nuse crate::{c::D, e::{F, G}, h};\nlet x = pfprof_crate::z; crate::f::g();";
    let from = ["format".to_string(), "outdir".to_string()];
    let got: Vec<String> = crate_paths(text, &from)
        .iter()
        .map(|p| p.join("::"))
        .collect();
    assert_eq!(got, ["a::B", "c::D", "e", "h", "f::g"]);
    // super:: names the parent module: a sibling file in a folder, the
    // crate root from a folder's mod.rs.
    let text = "use super::jitmaps::is_map_name; super::{events::X, records};";
    let got: Vec<String> = crate_paths(text, &from)
        .iter()
        .map(|p| p.join("::"))
        .collect();
    assert_eq!(
        got,
        [
            "format::jitmaps::is_map_name",
            "format::events::X",
            "format::records"
        ]
    );
    let got: Vec<String> = crate_paths("super::maps::parse", &["sys".into()])
        .iter()
        .map(|p| p.join("::"))
        .collect();
    assert_eq!(got, ["maps::parse"]);
}

/// A test module ends what is scanned; a test-only item does not.
#[test]
fn test_modules_are_left_out() {
    let text = "use crate::a;\n#[cfg(test)]\nfn helper() {}\nuse crate::b;\n#[cfg(test)]\nmod tests { use crate::c; }";
    let got: Vec<String> = crate_paths(without_tests(text), &[])
        .iter()
        .map(|p| p.join("::"))
        .collect();
    assert_eq!(got, ["a", "b"]);
}

/// The README's Layout names every folder of `src/` and the symbolizer.
#[test]
fn readme_layout_names_every_folder() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let section = &readme[readme.find("\n## Layout").expect("a Layout section")..];
    let block = section.split("```").nth(1).expect("the Layout's list");
    let mut folders = vec!["symbolize/".to_string()];
    for entry in std::fs::read_dir(root.join("src")).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            let name = path.file_name().unwrap().to_string_lossy();
            folders.push(format!("src/{name}/"));
        }
    }
    let missing: Vec<&String> = folders
        .iter()
        .filter(|f| !block.contains(f.as_str()) && !block.contains(&f[4..]))
        .collect();
    assert!(missing.is_empty(), "not in README's Layout: {missing:?}");
}

/// docs/layout.md names every file of `src/` and `symbolize/src/`, and
/// every path it names exists.
#[test]
fn docs_layout_names_every_source_file() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let layout = std::fs::read_to_string(root.join("docs/layout.md")).unwrap();
    let block = layout
        .split("```")
        .nth(1)
        .expect("docs/layout.md's file list");
    let named: BTreeSet<&str> = block
        .split_whitespace()
        .filter(|w| w.starts_with("src/") || w.starts_with("symbolize/src/"))
        .collect();
    let mut files = Vec::new();
    for dir in ["src", "symbolize/src"] {
        all_files(&root.join(dir), &mut files);
    }
    let missing: Vec<String> = files
        .iter()
        .map(|f| f.strip_prefix(root).unwrap().display().to_string())
        .filter(|f| !named.contains(f.as_str()))
        .collect();
    assert!(missing.is_empty(), "not in docs/layout.md: {missing:?}");
    let stale: Vec<&&str> = named
        .iter()
        .filter(|p| !p.ends_with('/') && !root.join(p).exists())
        .collect();
    assert!(
        stale.is_empty(),
        "in docs/layout.md but not in the tree: {stale:?}"
    );
}

fn all_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            all_files(&path, out);
        } else {
            out.push(path);
        }
    }
}

/// No file of `src/` or `symbolize/src/` holds more than 1,000 lines before
/// its tests (`#[cfg(test)]`): a room a person can hold.
#[test]
fn no_source_file_holds_more_than_1000_lines_before_its_tests() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in ["src", "symbolize/src"] {
        rust_files(&root.join(dir), &mut files);
    }
    let long: Vec<String> = files
        .iter()
        .filter_map(|file| {
            let text = std::fs::read_to_string(file).unwrap();
            let lines = without_tests(&text).lines().count();
            (lines > 1_000).then(|| format!("{} ({lines})", file.display()))
        })
        .collect();
    assert!(
        long.is_empty(),
        "over 1,000 lines before the tests: {long:?}"
    );
}
