//! Loud, never silent: lost records reach every output and can fail the
//! run (`--max-lost`), frame-pointer chains cut at the kernel's frame limit
//! are marked, and hostile names from the profiled world never break an
//! output (XML, folded lines, text, terminal, JSON).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::util::{can_record, compile_c, pfprof, record_with, run, temp_dir};

/// The placeholder names of `fixtures/hostile_names.c` and what the test
/// writes over them (same length, byte for byte, in the compiled binary).
const HOSTILE: [(&[u8], &[u8]); 2] = [
    (b"evil_placeholder_name", b"evil<&\"]]>\x01\n\x1b[31mname"),
    (b"evil_placeholder_data", b"evil<&\"]]>\x01\n\x1b[31mdata"),
];

/// The hostile function name as every output must show it.
const SHOWN_FUNCTION: &str = r#"evil<&"]]>\x01\n\x1b[31mname"#;

/// Every file in `dir` whose name ends with `suffix`.
fn files(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(suffix))
        .collect();
    files.sort();
    files
}

/// Every SVG in `dir` is well-formed XML, by `xmllint --noout`.
fn assert_svgs_valid(dir: &Path) -> usize {
    let svgs = files(dir, ".svg");
    for svg in &svgs {
        let out = Command::new("xmllint")
            .arg("--noout")
            .arg(svg)
            .output()
            .unwrap_or_else(|e| panic!("cannot run xmllint ({e}): apt-get install libxml2-utils"));
        assert!(
            out.status.success(),
            "{} is not valid XML: {}",
            svg.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    svgs.len()
}

/// No byte a terminal would act on: nothing below 0x20 but newline, no DEL,
/// and no C1 control (U+0080..U+009F, two bytes in UTF-8).
fn assert_no_controls(what: &str, bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    if let Some(c) = text.chars().find(|&c| c.is_control() && c != '\n') {
        panic!("{what} holds the control character {c:?}:\n{text}");
    }
}

/// A binary, an argument list, a thread name and a file name full of
/// hostile characters: every SVG stays valid XML, every folded line one
/// stack, report.txt, `report` and stderr free of control characters,
/// report.json valid, and the names are there, escaped.
#[test]
fn hostile_names_never_break_an_output() {
    if !can_record() {
        return;
    }
    let dir = temp_dir("loud_hostile");
    let built = compile_c(&dir, "hostile_names.c", &[]);
    // The file name holds an escape sequence and a newline too.
    let exe = dir.join("hostile\x1b[7m\nbin");
    crate::util::write_patched(&built, &HOSTILE, &exe);

    let out_dir = dir.join("out");
    let output = run(pfprof()
        .arg("record")
        .arg("-o")
        .arg(&out_dir)
        .arg("--")
        .arg(&exe)
        .args(["a\x01b", "two\nlines", "\x1b]0;title\x07"]));
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_no_controls("record's stderr", &output.stderr);
    assert_no_controls("record's stdout", &output.stdout);

    assert_eq!(assert_svgs_valid(&out_dir), 9, "every SVG checked");
    let folded = files(&out_dir, ".folded");
    assert_eq!(folded.len(), 8, "all SVGs but the timeline's");
    let mut all_lines = String::new();
    for path in &folded {
        let text = std::fs::read_to_string(path).unwrap();
        for line in text.lines() {
            let count = line.rsplit_once(' ').map(|(_, n)| n);
            assert!(
                count.is_some_and(|n| n.parse::<u64>().is_ok()),
                "{}: a line that is not one stack and a count: {line:?}",
                path.display()
            );
        }
        assert_no_controls(&path.display().to_string(), text.as_bytes());
        all_lines.push_str(&text);
    }
    assert!(
        all_lines.contains(&format!(";{SHOWN_FUNCTION};")),
        "the hostile function is in the folded stacks, escaped:\n{all_lines}"
    );
    assert!(all_lines.contains(r"[hostile\x1b[7m\nbin .bss evil<&"));

    let text = std::fs::read(out_dir.join("report.txt")).unwrap();
    assert_no_controls("report.txt", &text);
    let report: Value = crate::util::read_report(&out_dir.join("report.json"));
    assert_eq!(
        report["command"].as_array().unwrap()[1..],
        [r"a\x01b", r"two\nlines", r"\x1b]0;title\x07"],
        "{}",
        report["command"]
    );
    let top = &report["sites"][0];
    assert_eq!(top["function"], SHOWN_FUNCTION, "{top}");
    assert_eq!(top["target"]["symbol"], r#"evil<&"]]>\x01\n\x1b[31mdata"#);
    assert_eq!(top["comm"], r"c<&\x01\n\x1b[31m", "prctl's thread name");
    assert_eq!(top["count"], 64, "{top}");

    let shown = run(pfprof().arg("report").arg("-i").arg(&out_dir));
    assert!(shown.status.success());
    assert_no_controls("`pfprof report`", &shown.stdout);
    assert!(String::from_utf8_lossy(&shown.stdout).contains(r"evil<&"));
}

/// The SVGs' subtitles in `dir` (flame graphs' `id="subtitle"`, the empty
/// graphs' and the timeline's second line).
fn subtitles(dir: &Path) -> Vec<(PathBuf, String)> {
    files(dir, ".svg")
        .into_iter()
        .map(|svg| {
            let text = std::fs::read_to_string(&svg).unwrap();
            // The text after the first `>` that follows the marker.
            let line = [
                r##"fill="#555">"##,
                r#"id="subtitle""#,
                r#"font-size="12">"#,
            ]
            .iter()
            .find_map(|marker| {
                let rest = &text[text.find(marker)?..];
                let rest = &rest[rest.find('>')? + 1..];
                Some(rest[..rest.find('<')?].to_string())
            })
            .unwrap_or_default();
            (svg, line)
        })
        .collect()
}

/// A one-page ring buffer loses (nearly) every fault: the loss is in
/// report.json (per class), report.txt, the subtitle of every SVG and on
/// stderr despite -q, and `--max-lost 5` exits 3 after writing everything.
/// A complete recording passes the same gate.
#[test]
fn tiny_ring_buffers_are_loud() {
    if !can_record() {
        return;
    }
    let dir = temp_dir("loud_tiny_ring");
    let exe = compile_c(&dir, "touch.c", &[]);
    // 64 MiB: 16,384 faults; a dwarf sample (32 KiB of stack) does not fit
    // a one-page ring at all.
    let (out, report) = record_with(
        &dir,
        &["--mmap-pages", "1", "--max-lost", "5"],
        &exe,
        &["64"],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("pfprof: warning: results incomplete"),
        "{stderr}"
    );
    assert!(stderr.contains("more than --max-lost 5%"), "{stderr}");
    let t = &report["totals"];
    // The kernel's lost-record count depends on when the ring had room to
    // say so; the faults missing from the recording do not.
    let lost = t["lost"].as_u64().unwrap();
    assert!(lost > 0, "{t}");
    let captured: u64 = ["minor", "major", "cow"]
        .iter()
        .map(|k| t[k].as_u64().unwrap())
        .sum();
    let kernel = t["kernel_minor"].as_u64().unwrap() + t["kernel_major"].as_u64().unwrap();
    assert!(kernel - captured > 10_000, "{t}");
    let by_class = &t["lost_by_class"];
    let sum: u64 = ["minor", "major", "entries", "memory_calls", "unattributed"]
        .iter()
        .map(|k| by_class[k].as_u64().unwrap())
        .sum();
    assert_eq!(sum, lost, "{by_class}");
    let warning = report["warnings"][0].as_str().unwrap();
    assert!(warning.starts_with("results incomplete"), "{warning}");
    let out_dir = dir.join("out");
    let text = std::fs::read_to_string(out_dir.join("report.txt")).unwrap();
    assert!(text.contains("INCOMPLETE"), "{text}");
    assert!(
        text.contains("results incomplete: the kernel dropped"),
        "{text}"
    );
    assert!(out_dir.join("pfprof.data").exists());
    assert_eq!(files(&out_dir, ".folded").len(), 8, "every output written");
    let shown = subtitles(&out_dir);
    assert_eq!(shown.len(), 9);
    for (svg, subtitle) in &shown {
        assert!(
            subtitle.contains(&format!("lost {} records", thousands(lost)))
                && subtitle.contains("results incomplete"),
            "{}: {subtitle:?}",
            svg.display()
        );
    }
    assert_svgs_valid(&out_dir);

    // The same gate on a complete recording: exit 0, nothing incomplete.
    let (out, report) = record_with(&dir, &["--max-lost", "5"], &exe, &["16"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(report["totals"]["lost"], 0);
    for (svg, subtitle) in subtitles(&out_dir) {
        assert!(
            subtitle.contains("captured") && !subtitle.contains("incomplete"),
            "{}: {subtitle:?}",
            svg.display()
        );
    }
}

fn thousands(n: u64) -> String {
    pfprof::text::thousands(n)
}

/// With `--call-graph fp`, a chain deeper than kernel.perf_event_max_stack
/// comes back cut at that many addresses: it ends (at the root) in a marked
/// `[unknown]` frame and is counted in truncated_stacks; shorter chains are
/// not marked.
#[test]
fn fp_chains_cut_at_the_frame_limit_are_marked() {
    if !can_record() {
        return;
    }
    let max: usize = std::fs::read_to_string("/proc/sys/kernel/perf_event_max_stack")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let depth = max + 73;
    assert!(depth <= 1024, "the fixture recurses at most 1024 levels");
    let dir = temp_dir("loud_deep_fp");
    let exe = compile_c(&dir, "deep_recursion.c", &[]);
    let (out, report) = record_with(
        &dir,
        &["--call-graph", "fp", "--no-tracepoints"],
        &exe,
        &[&depth.to_string()],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let folded = std::fs::read_to_string(dir.join("out/minor.folded")).unwrap();
    let (mut cut, mut whole) = (0u64, 0u64);
    for line in folded.lines() {
        let (stack, count) = line.rsplit_once(' ').unwrap();
        let frames: Vec<&str> = stack.split(';').collect();
        if frames.last() != Some(&"[deep_recursion .bss pages]") {
            continue;
        }
        // comm, code frames root first, target.
        let code = &frames[1..frames.len() - 1];
        let count: u64 = count.parse().unwrap();
        if code[0] == "[unknown]" {
            assert_eq!(code.len(), max + 1, "{max} addresses and the mark: {line}");
            cut += count;
        } else {
            assert!(code.len() < max, "an unmarked chain at the limit: {line}");
            whole += count;
        }
    }
    assert_eq!(cut + whole, depth as u64, "one fault per level");
    // Levels whose chain (dive × (depth - level), main, libc, _start) is
    // longer than the limit; a few more or less with libc's frames.
    assert!(
        cut >= 70 && whole >= (max as u64) - 10,
        "cut {cut}, whole {whole}"
    );
    let truncated = report["totals"]["truncated_stacks"].as_u64().unwrap();
    assert!(truncated >= cut, "{}", report["totals"]);
    assert!(
        report["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w.as_str().unwrap().contains("kernel.perf_event_max_stack")),
        "{}",
        report["warnings"]
    );
}
