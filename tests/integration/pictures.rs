//! The pictures, read back as SVG: colours of placeholder frames and of
//! each class's subtree, subtitles, the empty graph's look, the timeline's
//! label boxes, latency lane and process lanes, and `flamegraph`
//! regenerating every picture `record` writes.

use std::collections::HashMap;
use std::path::Path;

use pfprof::analysis::classify::FaultClass;
use pfprof::format::outdir::OutDir;
use pfprof::model::report::FrameKind;
use pfprof::output::flamegraph::{write_flamegraph, ClassSelection};
use pfprof::output::folded::FoldedStacks;
use pfprof::output::picture::{CLASS_COLORS, GREY, JIT};
use pfprof::output::timeline::{self, label_box, Box2, Point, Site};
use quick_xml::events::Event;
use quick_xml::Reader;

use crate::util::{can_record, compile_c, pfprof, record, run, temp_dir};

/// One SVG element: name, attributes, and its own text.
#[derive(Debug, Default)]
struct El {
    name: String,
    attrs: HashMap<String, String>,
    text: String,
}

impl El {
    /// The box of a `rect` (x, y, width, height).
    fn rect(&self) -> Box2 {
        Box2 {
            x0: self.num("x"),
            y0: self.num("y"),
            x1: self.num("x") + self.num("width"),
            y1: self.num("y") + self.num("height"),
        }
    }

    fn get(&self, key: &str) -> &str {
        self.attrs.get(key).map_or("", String::as_str)
    }
    fn num(&self, key: &str) -> f64 {
        self.get(key)
            .trim_end_matches('%')
            .parse()
            .unwrap_or_else(|_| panic!("{key} of {self:?}"))
    }
}

/// Every element of `svg` in document order (the file must be well-formed).
fn elements(svg: &str) -> Vec<El> {
    let mut reader = Reader::from_str(svg);
    let mut out: Vec<El> = Vec::new();
    let mut open: Vec<usize> = Vec::new();
    let el = |e: &quick_xml::events::BytesStart| El {
        name: String::from_utf8_lossy(e.name().as_ref()).into_owned(),
        attrs: e
            .attributes()
            .map(|a| {
                let a = a.unwrap();
                (
                    String::from_utf8_lossy(a.key.as_ref()).into_owned(),
                    a.normalized_value(quick_xml::XmlVersion::Explicit1_0)
                        .unwrap()
                        .into_owned(),
                )
            })
            .collect(),
        text: String::new(),
    };
    loop {
        match reader.read_event().expect("well-formed SVG") {
            Event::Start(e) => {
                open.push(out.len());
                out.push(el(&e));
            }
            Event::Empty(e) => out.push(el(&e)),
            Event::End(_) => {
                open.pop();
            }
            Event::Text(t) => {
                if let Some(&i) = open.last() {
                    out[i].text.push_str(&t.decode().unwrap());
                }
            }
            Event::GeneralRef(r) => {
                if let Some(&i) = open.last() {
                    let s = match &*r.decode().unwrap() {
                        "lt" => "<",
                        "gt" => ">",
                        "amp" => "&",
                        "quot" => "\"",
                        "apos" => "'",
                        other => panic!("entity {other}"),
                    };
                    out[i].text.push_str(s);
                }
            }
            Event::Eof => break,
            _ => {}
        }
    }
    out
}

/// A flame graph's frames: (name, y, fill, fg:x) from each `<g>`'s title
/// and rect.
fn frames(svg: &str) -> Vec<(String, f64, String, u64)> {
    let els = elements(svg);
    let mut frames = Vec::new();
    let mut title: Option<&str> = None;
    for e in &els {
        match e.name.as_str() {
            "title" => title = Some(&e.text),
            "rect" if e.attrs.contains_key("fg:x") => {
                let name = title.unwrap().rsplit_once(" (").unwrap().0.to_string();
                frames.push((
                    name,
                    e.num("y"),
                    e.get("fill").to_string(),
                    e.num("fg:x") as u64,
                ));
            }
            _ => {}
        }
    }
    frames
}

fn rgb(c: inferno::flamegraph::color::Color) -> String {
    format!("rgb({},{},{})", c.r, c.g, c.b)
}

fn subtitle(svg: &str) -> String {
    elements(svg)
        .into_iter()
        .find(|e| e.get("id") == "subtitle")
        .map(|e| e.text)
        .unwrap_or_default()
}

/// Folded stacks with a name (`shared_fn`) under two classes, and the
/// placeholders.
fn folded() -> FoldedStacks {
    let mut stacks = FoldedStacks::default();
    let f = &mut stacks.by_class;
    let minor = &mut f[FaultClass::Minor as usize];
    minor.insert("app;main;shared_fn;[anon]".into(), 500);
    minor.insert("app;[unknown];[anon]".into(), 100);
    minor.insert("app;[jit 0x7f0000001000];[anon]".into(), 60);
    minor.insert("app;[execve];[stack]".into(), 40);
    f[FaultClass::Cow as usize].insert("app;main;shared_fn;[libx.so .data]".into(), 300);
    // The frames the model marks as nothing named and unnamed JIT code.
    stacks.special = [
        ("[unknown]", FrameKind::Unknown),
        ("[execve]", FrameKind::Exec),
        ("[jit 0x7f0000001000]", FrameKind::UnnamedJit),
    ]
    .into_iter()
    .map(|(name, kind)| (name.to_string(), kind))
    .collect();
    stacks
}

const SUBTITLE: &str =
    "./app · 1,000 faults: captured 1,000 (100.0%), lost 0 records · truncated stacks 10.0%";

/// In all.svg each class's subtree has its class's colours (the ones the
/// class's own graph gives the same names), each class root its class
/// colour; `[unknown]` and `[execve]` are grey and JIT frames violet-grey
/// in every graph; the subtitle is the one given.
#[test]
fn flame_graph_colours_by_class_and_grey_placeholders() {
    let dir = temp_dir("pictures_colours");
    let out = OutDir::open_or_create(&dir).unwrap();
    for selection in [
        ClassSelection::Minor,
        ClassSelection::Cow,
        ClassSelection::All,
    ] {
        write_flamegraph(&out, &folded(), selection, SUBTITLE).unwrap();
    }
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).unwrap();
    let (all, minor, cow) = (read("all.svg"), read("minor.svg"), read("cow.svg"));
    for svg in [&all, &minor, &cow] {
        assert_eq!(subtitle(svg), SUBTITLE);
    }
    let colour_in = |svg: &str, name: &str| -> Vec<String> {
        frames(svg)
            .into_iter()
            .filter(|f| f.0 == name)
            .map(|f| f.2)
            .collect()
    };
    for svg in [&all, &minor] {
        assert_eq!(colour_in(svg, "[unknown]"), [rgb(GREY)]);
        assert_eq!(colour_in(svg, "[execve]"), [rgb(GREY)]);
        assert_eq!(colour_in(svg, "[jit 0x7f0000001000]"), [rgb(JIT)]);
    }
    // In all.svg: which class's subtree a frame is in, by its fg:x.
    let all_frames = frames(&all);
    let root = |class: &str| {
        let f = all_frames.iter().find(|f| f.0 == class).unwrap();
        assert_eq!(
            f.2,
            CLASS_COLORS[FaultClass::ALL
                .iter()
                .position(|c| c.name() == class)
                .unwrap()]
        );
        f.3
    };
    let (cow_x, minor_x) = (root("cow"), root("minor"));
    assert!(cow_x < minor_x, "cow sorts first");
    let shared: Vec<&(String, f64, String, u64)> =
        all_frames.iter().filter(|f| f.0 == "shared_fn").collect();
    assert_eq!(shared.len(), 2);
    for f in shared {
        let own = if f.3 >= minor_x { &minor } else { &cow };
        assert_eq!(vec![f.2.clone()], colour_in(own, "shared_fn"), "{f:?}");
    }
    // The two colours differ (aqua and orange), so the test can fail.
    assert_ne!(colour_in(&minor, "shared_fn"), colour_in(&cow, "shared_fn"));
}

/// A class without faults gets an SVG like the others: the same width,
/// font and title lines, "no faults" centred.
#[test]
fn empty_class_looks_like_the_others() {
    let dir = temp_dir("pictures_empty");
    let out = OutDir::open_or_create(&dir).unwrap();
    for selection in [ClassSelection::Major, ClassSelection::Minor] {
        write_flamegraph(&out, &folded(), selection, SUBTITLE).unwrap();
    }
    let major = std::fs::read_to_string(dir.join("major.svg")).unwrap();
    let minor = std::fs::read_to_string(dir.join("minor.svg")).unwrap();
    let (e_major, e_minor) = (elements(&major), elements(&minor));
    assert_eq!(e_major[0].get("width"), e_minor[0].get("width"));
    let style = |els: &[El]| -> String {
        let css = &els.iter().find(|e| e.name == "style").unwrap().text;
        css.lines()
            .flat_map(|l| l.split("} "))
            .find(|rule| rule.trim_start().starts_with("text {"))
            .unwrap()
            .trim()
            .trim_end_matches('}')
            .trim()
            .to_string()
    };
    assert_eq!(style(&e_major), style(&e_minor));
    let title = |els: &[El]| {
        let t = els.iter().find(|e| e.get("id") == "title").unwrap();
        (t.get("y").to_string(), t.text.clone())
    };
    assert_eq!(title(&e_major).0, title(&e_minor).0);
    assert_eq!(title(&e_major).1, "MAJOR page faults");
    assert_eq!(subtitle(&major), SUBTITLE);
    let none = e_major.iter().find(|e| e.text == "no faults").unwrap();
    assert_eq!(none.get("x"), "50%");
    assert!(major.contains("#nofaults { text-anchor:middle;"));
}

/// The timeline's geometry: burst labels (boxes from x, y, textLength and
/// the font) inside the plot frame, clear of the axes, the bars and each
/// other; every bar inside the plot. Returns the labels.
fn check_timeline(svg: &str) -> Vec<String> {
    let els = elements(svg);
    let frame = els.iter().find(|e| e.get("class") == "frame").unwrap();
    let plot = frame.rect();
    let bars: Vec<Box2> = els
        .iter()
        .filter(|e| e.get("class") == "bar")
        .map(El::rect)
        .collect();
    assert!(!bars.is_empty());
    for b in &bars {
        assert!(
            b.y0 > plot.y0 + 1.0 && b.y1 <= plot.y1 + 0.01,
            "bar {b:?} outside {plot:?}"
        );
    }
    let mut labels: Vec<(Box2, String)> = Vec::new();
    for e in els.iter().filter(|e| e.get("class") == "burst") {
        let chars = e.text.chars().count();
        let b = label_box(e.num("x"), e.num("y"), chars);
        assert!(
            (e.num("textLength") - (b.x1 - b.x0)).abs() < 0.01,
            "{e:?}: text held to its box"
        );
        assert!(
            b.x0 > plot.x0 && b.x1 < plot.x1 && b.y0 > plot.y0 && b.y1 < plot.y1,
            "label {:?} {b:?} crosses the frame or an axis {plot:?}",
            e.text
        );
        for bar in &bars {
            assert!(!b.overlaps(bar), "label {:?} on a bar {bar:?}", e.text);
        }
        for (other, text) in &labels {
            assert!(
                !b.overlaps(other),
                "labels {:?} and {text:?} overlap",
                e.text
            );
        }
        labels.push((b, e.text.clone()));
    }
    // The slowest fault's duration: clear of every latency mark.
    let marks: Vec<Box2> = els
        .iter()
        .filter(|e| e.get("class") == "latency")
        .map(El::rect)
        .collect();
    for e in els.iter().filter(|e| e.get("class") == "slowest") {
        let b = label_box(e.num("x"), e.num("y"), e.text.chars().count());
        for m in &marks {
            assert!(!b.overlaps(m), "{:?} {b:?} on a latency mark {m:?}", e.text);
        }
    }
    labels.into_iter().map(|(_, t)| t).collect()
}

/// Bursts next to each other and a peak at the edges: every label that
/// is drawn keeps clear of bars, axes, frame and the other labels; a long
/// fault (11.4 ms) is a labelled span in the latency lane; with three
/// processes, each busy one has a lane of its own.
#[test]
fn timeline_labels_lanes_and_long_faults() {
    let names: Vec<String> = (0..8)
        .map(|i| format!("a_rather_long_function_name_{i}"))
        .collect();
    let mut points = Vec::new();
    let mut sites = Vec::new();
    let mut site = |time, site| {
        sites.push(Site {
            time,
            site,
            faults: 1,
        })
    };
    // Burst i at 1 ms × i, i+1 hundred faults; the tallest at the very end.
    for (i, name) in names.iter().enumerate() {
        for k in 0..(100 * (i as u64 + 1)) {
            let time = 1_000_000 * (i as u64 + 1) + k;
            points.push(Point {
                time,
                class: if k % 3 == 0 {
                    FaultClass::Cow
                } else {
                    FaultClass::Minor
                },
                pid: 100 + (i as i32 % 3),
                faults: 1,
                slowest: Some((800 + k as u32, time)),
            });
            site(time, name.as_str());
        }
    }
    points.push(Point {
        time: 20_000_000,
        class: FaultClass::Major,
        pid: 100,
        faults: 1,
        slowest: Some((11_400_000, 20_000_000)),
    });
    site(20_000_000, "_dl_relocate_object");
    for k in 0..900 {
        points.push(Point {
            time: 20_000_000 + k,
            class: FaultClass::Minor,
            pid: 101,
            faults: 1,
            slowest: None,
        });
        site(20_000_000 + k, "last");
    }
    points.sort_by_key(|p| p.time);
    let processes: Vec<(i32, String)> =
        vec![(100, "app".into()), (101, "cc1".into()), (102, "as".into())];
    let svg = timeline::svg(
        &points,
        &sites,
        0,
        (&processes, &[]),
        "Page faults over time",
        SUBTITLE,
    );
    let labels = check_timeline(&svg);
    assert!(labels.len() >= 3, "{labels:?}");
    assert!(labels.contains(&"last".to_string()), "{labels:?}");
    let els = elements(&svg);
    let slowest = els.iter().find(|e| e.get("class") == "slowest").unwrap();
    assert_eq!(slowest.text, "11.4 ms");
    // The span runs from the fault's entry (8.6 ms) to its end (20 ms):
    // about 11.4 / 20 of the plot's width.
    let frame = els.iter().find(|e| e.get("class") == "frame").unwrap();
    let span = els
        .iter()
        .filter(|e| e.get("class") == "latency")
        .map(|e| e.num("width"))
        .fold(0.0, f64::max);
    let want = frame.num("width") * 11.4 / 20.0;
    assert!((span - want).abs() < 2.0, "span {span}, want {want}");
    let lanes: Vec<&str> = els
        .iter()
        .filter(|e| e.get("class") == "lane")
        .map(|e| e.text.as_str())
        .collect();
    // By faults: 2,400, 1,201, 900.
    assert_eq!(lanes, ["cc1[101]", "app[100]", "as[102]"]);

    // One process, no latency: neither lane.
    let one: Vec<Point> = points
        .iter()
        .map(|p| Point {
            pid: 1,
            slowest: None,
            ..*p
        })
        .collect();
    let svg = timeline::svg(&one, &sites, 0, (&processes, &[]), "t", "s");
    check_timeline(&svg);
    assert!(!svg.contains("class=\"lane\"") && !svg.contains("class=\"latency\""));
}

/// The SVG names in a directory.
fn svgs(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".svg"))
        .collect();
    names.sort();
    names
}

/// A multi-process recording: `flamegraph -i DIR -o OUT` writes every
/// picture `record` wrote (the timeline and latency graphs included), the
/// same bytes; the timeline's labels keep clear and each process has a lane;
/// every flame graph's subtitle starts with the command.
#[test]
fn flamegraph_regenerates_every_picture() {
    if !can_record() {
        return;
    }
    let dir = temp_dir("pictures_regenerate");
    let exe = compile_c(&dir, "spawn_children.c", &[]);
    let (out, _) = record(&dir, &exe, &["3"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let recorded = dir.join("out");
    let again = dir.join("again");
    let out = run(pfprof()
        .args(["flamegraph", "-i"])
        .arg(&recorded)
        .arg("-o")
        .arg(&again));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let names = svgs(&recorded);
    for want in [
        "timeline.svg",
        "minor-latency.svg",
        "all.svg",
        "startup.svg",
    ] {
        assert!(names.iter().any(|n| n == want), "{want} in {names:?}");
    }
    assert_eq!(svgs(&again), names);
    for name in &names {
        let a = std::fs::read_to_string(recorded.join(name)).unwrap();
        let b = std::fs::read_to_string(again.join(name)).unwrap();
        assert!(a == b, "{name} differs between record and flamegraph");
        if name != "timeline.svg" {
            // The command, cut in the middle when long.
            let s = subtitle(&a);
            assert!(
                s.starts_with(&exe.display().to_string()[..20])
                    && s.contains("spawn_children 3 · "),
                "{name}: {s:?}"
            );
        }
    }
    let timeline = std::fs::read_to_string(recorded.join("timeline.svg")).unwrap();
    check_timeline(&timeline);
    let lanes = elements(&timeline)
        .into_iter()
        .filter(|e| e.get("class") == "lane")
        .count();
    assert_eq!(lanes, 4, "the parent and its 3 children");

    // `-i pfprof.data` in the recording's own directory: the pictures go
    // there (its parent is "", which was no directory to write into).
    std::fs::copy(recorded.join("pfprof.data"), again.join("pfprof.data")).unwrap();
    std::fs::remove_file(again.join("all.svg")).unwrap();
    let out = run(pfprof()
        .current_dir(&again)
        .args(["flamegraph", "-i", "pfprof.data"]));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(again.join("all.svg").is_file());
}
