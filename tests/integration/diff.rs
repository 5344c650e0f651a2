//! `pfprof diff`: the text rows, the JSON, and diff.svg's colours, tooltips
//! and legend, over two runs of `diff_pages` whose changes are known.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::util::{can_record, compile_c, pfprof, record, run, temp_dir};

/// One frame of diff.svg: tooltip, fill, and the counts it carries.
#[derive(Debug)]
struct Frame {
    title: String,
    fill: (u8, u8, u8),
    before: u64,
    after: u64,
}

fn between<'a>(s: &'a str, start: &str, end: &str) -> Option<&'a str> {
    let from = s.find(start)? + start.len();
    Some(&s[from..from + s[from..].find(end)?])
}

/// The frames of a diff.svg, parsed from its markup.
fn frames(svg: &str) -> Vec<Frame> {
    svg.split("<g class=\"f\"")
        .skip(1)
        .map(|g| {
            let rgb: Vec<u8> = between(g, "fill=\"rgb(", ")")
                .unwrap()
                .split(',')
                .map(|c| c.parse().unwrap())
                .collect();
            Frame {
                title: between(g, "<title>", "</title>").unwrap().to_string(),
                fill: (rgb[0], rgb[1], rgb[2]),
                before: between(g, "data-before=\"", "\"").unwrap().parse().unwrap(),
                after: between(g, "data-after=\"", "\"").unwrap().parse().unwrap(),
            }
        })
        .collect()
}

fn frame<'a>(frames: &'a [Frame], name: &str) -> &'a Frame {
    let named: Vec<&Frame> = frames
        .iter()
        .filter(|f| f.title.starts_with(&format!("{name}: ")))
        .collect();
    assert_eq!(named.len(), 1, "one {name} frame: {named:?}");
    named[0]
}

fn is_red((r, g, b): (u8, u8, u8)) -> bool {
    r == 255 && g < 200 && b < 200
}

fn is_blue((r, g, b): (u8, u8, u8)) -> bool {
    b == 255 && r < 200 && g < 220
}

/// Records `diff_pages 1200 400` and `diff_pages 2400 100` (grow_pages
/// +1,200 anonymous pages, shrink_pages -300 .bss pages, same_pages 8 both
/// times); returns the two output directories.
fn two_runs(dir: &Path) -> (PathBuf, PathBuf) {
    let exe = compile_c(dir, "diff_pages.c", &[]);
    let mut outs = Vec::new();
    for (name, args) in [("before", ["1200", "400"]), ("after", ["2400", "100"])] {
        let run_dir = dir.join(name);
        std::fs::create_dir_all(&run_dir).unwrap();
        let (out, _) = record(&run_dir, &exe, &args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        outs.push(run_dir.join("out"));
    }
    (outs[0].clone(), outs[1].clone())
}

fn diff(before: &Path, after: &Path, options: &[&str], out: &Path) -> String {
    let output = run(pfprof()
        .arg("diff")
        .arg(before)
        .arg(after)
        .args(options)
        .arg("-o")
        .arg(out));
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// diff.svg: the frame that grew and its callers are red, the one that
/// shrank blue, the unchanged one near-white; tooltips give before, after
/// and the change; the legend says what is compared. `--normalize` compares
/// shares: the unchanged count, a smaller share of a larger total, turns blue.
/// The text shows `--top` rows with thousands separators; the JSON says
/// `null` for no section.
#[test]
fn diff_colours_rows_and_json() {
    if !can_record() {
        return;
    }
    let dir = temp_dir("diff_pages");
    let (before, after) = two_runs(&dir);

    let text = diff(&before, &after, &["--top", "1"], &dir.join("counts"));
    let svg = std::fs::read_to_string(dir.join("counts/diff.svg")).unwrap();
    let all = frames(&svg);
    let grow = frame(&all, "grow_pages");
    assert_eq!((grow.before, grow.after), (1200, 2400));
    assert!(is_red(grow.fill), "{grow:?}");
    assert!(
        grow.title.contains("before 1,200 (")
            && grow.title.contains("after 2,400 (")
            && grow.title.ends_with("change +1,200 faults (+100.0%)"),
        "{}",
        grow.title
    );
    let shrink = frame(&all, "shrink_pages");
    assert_eq!(shrink.before - shrink.after, 300, "{shrink:?}");
    assert!(is_blue(shrink.fill), "{shrink:?}");
    assert!(
        shrink.title.contains("change -300 faults (-"),
        "{}",
        shrink.title
    );
    let same = frame(&all, "same_pages");
    assert_eq!((same.before, same.after), (8, 8));
    assert_eq!(same.fill, (250, 250, 250), "{same:?}");
    assert!(
        same.title.ends_with("change 0 faults (+0.0%)"),
        "{}",
        same.title
    );
    // The whole path to the growth is coloured, down to the root.
    for name in ["main", "all"] {
        let f = frame(&all, name);
        assert!(f.after > f.before && is_red(f.fill), "{f:?}");
    }
    // Near-white only where nothing changed.
    for f in &all {
        assert_eq!(f.fill == (250, 250, 250), f.before == f.after, "{f:?}");
    }
    let legend = between(&svg, "<g id=\"legend\">", "</g>\n").unwrap();
    assert!(
        legend.contains("red more, blue fewer, near-white unchanged")
            && legend.contains("Compared: raw fault counts"),
        "{legend}"
    );

    // --top 1: the largest change, the rest summed in one line.
    let lines: Vec<&str> = text.lines().collect();
    let header = lines.iter().position(|l| l.starts_with("object ")).unwrap();
    let anon: Vec<&str> = lines[header + 1].split_whitespace().collect();
    assert_eq!(anon[..3], ["[anon]", "-", "minor"], "{text}");
    let plain = |s: &str| s.replace(',', "").parse::<i64>().unwrap();
    assert!(anon[3].contains(',') && anon[4].contains(','), "{text}");
    assert_eq!(plain(anon[4]) - plain(anon[3]), 1200, "{text}");
    assert_eq!(anon[5], "+1,200", "{text}");
    assert!(lines[header + 2].starts_with("and "), "{text}");
    assert!(lines[header + 2].contains(" more changed rows"), "{text}");

    // The JSON holds every row; no section is null, as in report.json.
    let json = diff(&before, &after, &["--format", "json"], &dir.join("json"));
    let rows: Value = serde_json::from_str(&json).unwrap();
    let rows = rows.as_array().unwrap();
    let anon = rows.iter().find(|r| r["object"] == "[anon]").unwrap();
    assert!(anon["section"].is_null(), "{anon}");
    let bss = rows
        .iter()
        .find(|r| r["object"] == "diff_pages" && r["section"] == ".bss")
        .unwrap();
    assert_eq!(bss["delta"], -300, "{bss}");
    assert!(rows.iter().all(|r| r["section"] != "-"));

    // Shares: the same 8 faults are a smaller share of the larger run.
    diff(&before, &after, &["--normalize"], &dir.join("shares"));
    let svg = std::fs::read_to_string(dir.join("shares/diff.svg")).unwrap();
    let same = frames(&svg)
        .into_iter()
        .find(|f| f.title.starts_with("same_pages: "))
        .unwrap();
    assert!(is_blue(same.fill), "{same:?}");
    assert!(same.title.contains("share -"), "{}", same.title);
    assert!(svg.contains("Compared: shares of each run"), "legend");
}
