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
    ("unwind", &["unwind"]),
    ("format", &["format"]),
    ("record", &["record"]),
    ("analysis", &["analysis"]),
    ("model", &["model"]),
    ("output", &["output"]),
    (
        "face",
        &[
            "recording",
            "live",
            "continuous",
            "archive",
            "top",
            "cli",
            "fuzzing",
            "main",
            "lib",
        ],
    ),
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

/// The module paths a source text names through `crate::`, braces expanded
/// (`crate::{a::B, c}` → `a::B`, `c`), each as its segments.
fn crate_paths(text: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("crate::") {
        // `pfprof_symbolize::…` or a word ending in "crate" is not ours.
        let before = rest[..at].chars().next_back();
        rest = &rest[at + "crate::".len()..];
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
                        push_item(&inner[start..i], &mut out);
                        break;
                    }
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        push_item(&inner[start..i], &mut out);
                        start = i + 1;
                    }
                    _ => {}
                }
            }
        } else {
            push_item(rest, &mut out);
        }
    }
    out
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
        let text = &text[..text.find("#[cfg(test)]").unwrap_or(text.len())];
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
        for path in crate_paths(text) {
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
    let got: Vec<String> = crate_paths(text).iter().map(|p| p.join("::")).collect();
    assert_eq!(got, ["a::B", "c::D", "e", "h", "f::g"]);
}
