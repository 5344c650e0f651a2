//! `index.html` in a real browser (Debian's `chromium`, headless): the page
//! is self-contained, its tabs switch, inferno's search and zoom work inside
//! each flame graph's frame, its figures are report.json's, and hostile
//! names stay text.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::util::{
    can_record, compile_c, function_sites, pfprof, record, record_with, run, temp_dir, total,
};

/// The browser, or None (with a message) where it is missing and CI unset.
fn chromium() -> Option<PathBuf> {
    for name in ["chromium", "chromium-browser"] {
        if let Ok(out) = Command::new("sh")
            .args(["-c", &format!("command -v {name}")])
            .output()
        {
            let path = String::from_utf8_lossy(&out.stdout).trim().to_string();
            if out.status.success() && !path.is_empty() {
                return Some(PathBuf::from(path));
            }
        }
    }
    if std::env::var_os("CI").is_some() {
        panic!("chromium is missing under CI (.ci/run installs it)");
    }
    eprintln!("SKIPPED: chromium is not installed");
    None
}

/// Runs headless chromium on `page` with `args`, its own profile and HOME
/// under `dir`; virtual time lets the frames' scripts run to completion.
fn browse(browser: &Path, dir: &Path, page: &Path, args: &[&str]) -> String {
    let home = dir.join("chrome-home");
    std::fs::create_dir_all(&home).unwrap();
    let out = run(Command::new(browser)
        .env("HOME", &home)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--virtual-time-budget=20000",
        ])
        .arg(format!(
            "--user-data-dir={}",
            home.join("profile").display()
        ))
        .args(args)
        .arg(format!("file://{}", page.display())));
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A flame graph's document as the page carries it: gzipped, in base64.
fn inflate(b64: &str) -> String {
    use base64::Engine as _;
    use std::io::Read as _;
    let gz = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .expect("a graph in base64");
    let mut doc = String::new();
    flate2::read::GzDecoder::new(&gz[..])
        .read_to_string(&mut doc)
        .expect("a gzipped graph");
    doc
}

/// `&amp;` and friends back to text.
fn unescape(s: &str) -> String {
    s.replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&nbsp;", "\u{a0}")
        .replace("&amp;", "&")
}

/// The number in the cell marked `data-figure="name"` (None for "n/a").
fn figure(dom: &str, name: &str) -> Option<u64> {
    let marker = format!("data-figure=\"{name}\">");
    let at = dom
        .find(&marker)
        .unwrap_or_else(|| panic!("no figure {name} in the page"))
        + marker.len();
    let text = &dom[at..at + dom[at..].find('<').unwrap()];
    text.replace(',', "").parse().ok()
}

/// Nothing loaded from outside, checked in the page and in each flame
/// graph's document (its `data-gz`, inflated): no tag has a `src` or an `href` but to
/// `#id`; every `http(s)://` is an XML namespace name or in a script's text
/// (inferno's cites its web pages) and no script has a way to load
/// (`fetch`, `XMLHttpRequest`, `import()`, a `src`, `open`); no `@import`,
/// no `url()` but to `#id`; and the page's only script element is its own
/// (the flame graphs' are inert base64 in `data-gz`).
fn assert_self_contained(html: &str) {
    assert_eq!(
        html.to_ascii_lowercase().matches("<script").count(),
        1,
        "the page's own script only"
    );
    // The page without the frames' documents, then each of those.
    let mut documents = vec![String::new()];
    let mut rest = html;
    while let Some(at) = rest.find("data-gz=\"") {
        documents[0].push_str(&rest[..at + 9]);
        let value = &rest[at + 9..];
        let end = value.find('"').unwrap();
        documents.push(inflate(&value[..end]).to_ascii_lowercase());
        rest = &value[end..];
    }
    documents[0].push_str(rest);
    documents[0] = documents[0].to_ascii_lowercase();
    assert!(documents.len() > 1, "no flame graph in the page");
    for doc in &documents {
        assert_document_self_contained(doc);
    }
}

/// The attributes of the tag at the start of `text` (`<name ...>`), as
/// (name, value) pairs; quoted values may hold anything but their quote.
fn attributes(text: &str) -> (Vec<(String, String)>, usize) {
    let bytes = text.as_bytes();
    let mut i = 1;
    while i < bytes.len() && !b" \t\n/>".contains(&bytes[i]) {
        i += 1;
    }
    let mut attrs = Vec::new();
    loop {
        while i < bytes.len() && b" \t\n/".contains(&bytes[i]) {
            i += 1;
        }
        if i >= bytes.len() || bytes[i] == b'>' {
            return (attrs, i);
        }
        let start = i;
        while i < bytes.len() && !b" \t\n/>=".contains(&bytes[i]) {
            i += 1;
        }
        let name = text[start..i].to_string();
        let mut value = String::new();
        if i < bytes.len() && bytes[i] == b'=' {
            i += 1;
            if i < bytes.len() && (bytes[i] == b'"' || bytes[i] == b'\'') {
                let quote = bytes[i];
                let end = text[i + 1..]
                    .bytes()
                    .position(|b| b == quote)
                    .map_or(bytes.len(), |p| i + 1 + p);
                value = text[i + 1..end].to_string();
                i = end + 1;
            } else {
                let start = i;
                while i < bytes.len() && !b" \t\n>".contains(&bytes[i]) {
                    i += 1;
                }
                value = text[start..i].to_string();
            }
        }
        attrs.push((name, value));
    }
}

fn assert_document_self_contained(text: &str) {
    let mut scripts = Vec::new();
    for (start, _) in text.match_indices('<') {
        if !text[start + 1..].starts_with(|c: char| c.is_ascii_alphabetic()) {
            continue;
        }
        let (attrs, _) = attributes(&text[start..]);
        for (name, value) in &attrs {
            assert_ne!(name, "src", "a tag with src: {value}");
            if name.ends_with("href") {
                assert!(value.starts_with('#'), "a link to outside: {value}");
            }
        }
        if text[start..].starts_with("<script") {
            let end = text[start..]
                .find("</script")
                .map_or(text.len(), |i| start + i);
            scripts.push(start..end);
        }
    }
    for script in &scripts {
        let code = &text[script.clone()];
        for load in [
            "fetch(",
            "xmlhttprequest",
            "import(",
            "importscripts",
            ".src",
            "window.open",
            "location.href =",
            "location.assign",
            "sendbeacon",
            "websocket",
        ] {
            assert!(!code.contains(load), "a script that can load ({load})");
        }
    }
    for scheme in ["http://", "https://"] {
        for (at, _) in text.match_indices(scheme) {
            let attr = text[..at].rsplit(' ').next().unwrap_or("");
            let namespace = attr.starts_with("xmlns") && attr.ends_with("=\"");
            let in_script = scripts.iter().any(|r| r.contains(&at));
            assert!(
                namespace || in_script,
                "a URL that is not a namespace: {}",
                &text[at.saturating_sub(80)..(at + 80).min(text.len())]
            );
        }
    }
    assert!(!text.contains("@import"), "an @import");
    for (at, _) in text.match_indices("url(") {
        assert!(
            text[at + 4..]
                .trim_start_matches(['"', '\''])
                .starts_with('#'),
            "url() to outside: {}",
            &text[at..(at + 60).min(text.len())]
        );
    }
}

/// Appended to a copy of the page: once everything has loaded, switches a
/// tab, searches through the toolbar, zooms into a frame of the first graph
/// by clicking it, and writes what it saw as JSON into `<pre id="check">`.
const HARNESS: &str = r#"<script>
function whenGraphsLoaded(then) {
  if (document.body.dataset.graphs === 'loaded') setTimeout(then, 200);
  else setTimeout(whenGraphsLoaded.bind(null, then), 50);
}
window.addEventListener('load', function () { whenGraphsLoaded(function () {
  var out = { graphs: [], tabs: [] };
  var frames = document.querySelectorAll('[role=tabpanel] iframe');
  for (var i = 0; i < frames.length; i++) {
    var d = frames[i].contentDocument, g = d.getElementById('frames');
    var heading = d.getElementById('title');
    out.graphs.push({ panel: frames[i].parentNode.id, frames: g ? g.children.length : -1,
      heading: heading ? heading.textContent : null,
      imgs: d.querySelectorAll('img').length, scripts: d.querySelectorAll('script').length,
      titles: Array.prototype.map.call(d.querySelectorAll('#frames title'), function (t) { return t.textContent; }).join('\n') });
  }
  var tabs = document.querySelectorAll('[role=tab]');
  tabs[1].click();
  for (var j = 0; j < tabs.length; j++) {
    out.tabs.push({ name: tabs[j].getAttribute('data-graph'), selected: tabs[j].getAttribute('aria-selected'),
      active: document.querySelectorAll('[role=tabpanel]')[j].classList.contains('active') });
  }
  tabs[0].click();
  document.getElementById('term').value = 'TERM';
  document.getElementById('search').requestSubmit();
  out.matched = document.getElementById('matched').textContent;
  out.frame_matched = [];
  for (var k = 0; k < frames.length; k++) {
    var m = frames[k].contentDocument.getElementById('matched');
    out.frame_matched.push(m ? m.textContent : null);
  }
  var d0 = frames[0].contentDocument, w0 = frames[0].contentWindow;
  var target = null, gs = d0.querySelectorAll('#frames > g');
  for (var n = 0; n < gs.length; n++) {
    if (gs[n].querySelector('title').textContent.indexOf('TERM') === 0) { target = gs[n]; break; }
  }
  if (target) {
    var rect = target.querySelector('rect');
    out.zoom_before = parseFloat(rect.getAttribute('width'));
    target.dispatchEvent(new MouseEvent('click', { bubbles: true, view: w0 }));
    out.zoom_after = parseFloat(rect.getAttribute('width'));
    out.unzoom_hidden = d0.getElementById('unzoom').classList.contains('hide');
    document.getElementById('unzoom').click();
    out.zoom_reset = parseFloat(rect.getAttribute('width'));
  }
  var pre = document.createElement('pre');
  pre.id = 'check';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
}); });
</script>"#;

/// A recording's page, ready for the browser.
struct Page {
    browser: PathBuf,
    dir: PathBuf,
    index: PathBuf,
    html: String,
    report: Value,
}

/// With chromium and the right to record: `fixture` (with `args`) recorded
/// with `options` into a new directory `name`, and its index.html, checked
/// self-contained.
fn recorded_page(name: &str, fixture: &str, options: &[&str], args: &[&str]) -> Option<Page> {
    if !can_record() {
        return None;
    }
    let browser = chromium()?;
    let dir = temp_dir(name);
    let exe = compile_c(&dir, fixture, &[]);
    let (output, report) = record_with(&dir, options, &exe, args);
    let (index, html) = checked_page(&dir, &output);
    Some(Page {
        browser,
        dir,
        index,
        html,
        report,
    })
}

/// A recording's index.html in `dir/out` (the recording a success),
/// checked self-contained: its path and its text.
fn checked_page(dir: &Path, output: &std::process::Output) -> (PathBuf, String) {
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let index = dir.join("out/index.html");
    let html = std::fs::read_to_string(&index).unwrap();
    assert_self_contained(&html);
    (index, html)
}

/// Runs [`HARNESS`] on a copy of `index` searching for `term` and returns its findings.
fn check_in_browser(browser: &Path, dir: &Path, index: &Path, term: &str) -> Value {
    let page = std::fs::read_to_string(index).unwrap();
    let harness = HARNESS.replace("TERM", term);
    let copy = dir.join("check.html");
    std::fs::write(&copy, page.replace("</body>", &format!("{harness}</body>"))).unwrap();
    let dom = browse(browser, dir, &copy, &["--dump-dom"]);
    let start = dom
        .find("<pre id=\"check\">")
        .unwrap_or_else(|| panic!("the harness did not finish:\n{dom}"))
        + "<pre id=\"check\">".len();
    let json = unescape(&dom[start..start + dom[start..].find("</pre>").unwrap()]);
    serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}: {json}"))
}

/// A recording's index.html: self-contained; tabs for every flame graph,
/// each frame holding inferno's graph, search (from the page's toolbar)
/// and zoom (a click) working; the figures equal report.json's; the
/// screenshot is not blank. `flamegraph` writes the page too.
#[test]
fn index_html_in_chromium() {
    let Some(Page {
        browser,
        dir,
        index,
        report,
        ..
    }) = recorded_page("html_index", "touch.c", &[], &["4"])
    else {
        return;
    };

    let found = check_in_browser(&browser, &dir, &index, "touch_pages");
    let graphs = found["graphs"].as_array().unwrap();
    let panels: Vec<&str> = graphs
        .iter()
        .map(|g| g["panel"].as_str().unwrap())
        .collect();
    assert_eq!(panels[0], "graph-all", "{found}");
    for name in ["minor", "startup", "minor-latency"] {
        assert!(
            panels.contains(&format!("graph-{name}").as_str()),
            "{found}"
        );
    }
    for g in graphs {
        assert!(g["frames"].as_u64().unwrap() > 0, "an empty graph: {g}");
    }
    let tabs = found["tabs"].as_array().unwrap();
    assert!(tabs.len() >= 8, "{found}");
    assert_eq!(tabs[1]["selected"], "true", "{found}");
    assert_eq!(tabs[1]["active"], true, "{found}");
    assert_eq!(tabs[0]["active"], false, "{found}");

    // The share of touch_pages's faults in all of them.
    let touch_pages = total(&function_sites(&report, "touch_pages"));
    assert!(touch_pages > 0, "{}", report["sites"]);
    let matched = found["matched"].as_str().unwrap();
    let pct: f64 = matched
        .trim_start_matches("Matched: ")
        .trim_end_matches('%')
        .parse()
        .unwrap_or_else(|_| panic!("no match shown: {found}"));
    let captured = report["totals"]["minor"].as_u64().unwrap()
        + report["totals"]["major"].as_u64().unwrap()
        + report["totals"]["cow"].as_u64().unwrap();
    let expected = touch_pages as f64 * 100.0 / captured as f64;
    assert!(
        (pct - expected).abs() < 0.1,
        "search matched {pct}%, touch_pages has {expected:.1}%: {found}"
    );
    assert_eq!(found["frame_matched"][0], matched, "{found}");
    let (before, after) = (
        found["zoom_before"].as_f64().unwrap(),
        found["zoom_after"].as_f64().unwrap(),
    );
    assert!(before < 100.0 && after == 100.0, "zoom: {found}");
    assert_eq!(found["unzoom_hidden"], false, "{found}");
    assert_eq!(found["zoom_reset"].as_f64().unwrap(), before, "{found}");

    // The figures, as the browser shows them, are report.json's.
    let dom = browse(&browser, &dir, &index, &["--dump-dom"]);
    let t = &report["totals"];
    for (name, value) in [
        ("captured-minor", &t["minor"]),
        ("captured-major", &t["major"]),
        ("captured-cow", &t["cow"]),
        ("kernel-minor", &t["kernel_minor"]),
        ("kernel-major", &t["kernel_major"]),
        ("lost", &t["lost"]),
        ("truncated", &t["truncated_stacks"]),
    ] {
        assert_eq!(figure(&dom, name), value.as_u64(), "{name}");
    }
    assert_eq!(figure(&dom, "captured-total"), Some(captured));
    assert!(dom.contains("touch_pages"), "the top site is on the page");

    // A screenshot of the page as a user first sees it: a PNG of the
    // window's size, not blank (a blank page compresses to about 6 kB).
    let png = dir.join("index.png");
    browse(
        &browser,
        &dir,
        &index,
        &[
            &format!("--screenshot={}", png.display()),
            "--window-size=1400,1000",
        ],
    );
    let bytes = std::fs::read(&png).unwrap();
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    let size = |at: usize| u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap());
    assert_eq!((size(16), size(20)), (1400, 1000));
    assert!(
        bytes.len() > 30_000,
        "a blank screenshot: {} bytes",
        bytes.len()
    );

    // `flamegraph` writes the page too, with its graphs.
    let fg = dir.join("fg");
    let out = run(pfprof()
        .args(["flamegraph", "-i"])
        .arg(dir.join("out"))
        .arg("-o")
        .arg(&fg));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let page = std::fs::read_to_string(fg.join("index.html")).unwrap();
    assert_self_contained(&page);
    for name in ["all", "minor", "major", "cow", "startup"] {
        assert!(page.contains(&format!("data-graph=\"{name}\"")), "{name}");
    }
}

/// A program that ends at its peak: the page carries the resident graph
/// once (no second `data-gz`) and shows it under both tabs, the exit's
/// under its own title, as resident-exit.svg has it.
#[test]
fn a_graph_the_same_at_exit_is_carried_once() {
    let Some(Page {
        browser,
        dir,
        index,
        html,
        ..
    }) = recorded_page("html_same_at_exit", "bss_write.c", &["--resident"], &[])
    else {
        return;
    };
    assert_eq!(html.matches("data-same=\"resident\"").count(), 1);
    let found = check_in_browser(&browser, &dir, &index, "touch_bss");
    let graph = |panel: &str| {
        found["graphs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["panel"] == panel)
            .unwrap_or_else(|| panic!("no {panel}: {found}"))
            .clone()
    };
    let (peak, exit) = (graph("graph-resident"), graph("graph-resident-exit"));
    assert!(peak["frames"].as_u64().unwrap() > 0, "{peak}");
    assert_eq!(peak["frames"], exit["frames"]);
    assert_eq!(peak["titles"], exit["titles"]);
    assert!(
        peak["titles"].as_str().unwrap().contains("touch_bss"),
        "{peak}"
    );
    let svg_title = |name: &str| {
        let svg = std::fs::read_to_string(dir.join("out").join(name)).unwrap();
        let at = svg.find("id=\"title\"").unwrap();
        let text = &svg[at..];
        let text = &text[text.find('>').unwrap() + 1..];
        text[..text.find('<').unwrap()].to_string()
    };
    assert_eq!(peak["heading"], svg_title("resident.svg").as_str());
    assert_eq!(exit["heading"], svg_title("resident-exit.svg").as_str());
    assert_ne!(peak["heading"], exit["heading"]);
}

/// The placeholders of `fixtures/hostile_names.c` (the function's renamed
/// at compile time to make room) and the markup written over them.
const HOSTILE: [(&[u8], &[u8]); 2] = [
    (
        b"html_placeholder_function_name_xyz",
        b"</script><script>alert(1)</script>",
    ),
    (b"evil_placeholder_data", b"<img src=x onerror=a>"),
];

/// A function named `</script><script>alert(1)</script>` and a data
/// symbol named `<img src=x onerror=a>`: the page shows both as text, in
/// its tables and inside the flame graphs' frames, and runs no script of
/// theirs.
#[test]
fn hostile_names_stay_text_in_index_html() {
    if !can_record() {
        return;
    }
    let Some(browser) = chromium() else {
        return;
    };
    let dir = temp_dir("html_hostile");
    let built = compile_c(
        &dir,
        "hostile_names.c",
        &["-Devil_placeholder_name=html_placeholder_function_name_xyz"],
    );
    let exe = dir.join("hostile");
    crate::util::write_patched(&built, &HOSTILE, &exe);
    let (output, _) = record(&dir, &exe, &["</script><u>arg"]);
    let (index, _) = checked_page(&dir, &output);

    let dom = browse(&browser, &dir, &index, &["--dump-dom"]);
    let lower = dom.to_ascii_lowercase();
    assert_eq!(lower.matches("<script").count(), 1, "one script element");
    assert!(!lower.contains("<img"), "an img element from a name");
    assert!(!lower.contains("<u>"), "a u element from an argument");
    assert!(
        dom.contains("&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;"),
        "the function is shown as text"
    );
    assert!(
        dom.contains("&lt;img src=x onerror=a&gt;"),
        "the symbol is text"
    );
    assert!(
        dom.contains("&lt;/script&gt;&lt;u&gt;arg"),
        "the argument is text"
    );

    let found = check_in_browser(&browser, &dir, &index, "alert");
    let all = &found["graphs"][0];
    assert_eq!(all["panel"], "graph-all", "{found}");
    assert_eq!(all["imgs"], 0, "{found}");
    // history.replaceState's shim and inferno's own.
    assert_eq!(all["scripts"], 2, "{found}");
    let titles = all["titles"].as_str().unwrap();
    assert!(
        titles.contains("</script><script>alert(1)</script> ("),
        "the function is a frame's text: {titles}"
    );
    assert!(titles.contains("<img src=x onerror=a>"), "{titles}");
    assert!(
        found["matched"].as_str().unwrap().starts_with("Matched: "),
        "{found}"
    );
}

/// The page of a real program's start-up (python importing three modules:
/// about 3,000 faults, eight graphs) stays small enough to attach to a bug
/// report or a CI run, at most 3 MiB, though its SVGs beside it are several
/// times that; each graph in it inflates to the SVG file's own graph.
#[test]
fn index_html_of_python_fits_an_attachment() {
    if !can_record() {
        return;
    }
    let dir = temp_dir("html_size");
    let python = PathBuf::from("/usr/bin/python3");
    let (output, report) = record(&dir, &python, &["-c", "import json, sqlite3, asyncio"]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let t = &report["totals"];
    let faults = ["minor", "major", "cow"].map(|c| t[c].as_u64().unwrap());
    assert!(faults.iter().sum::<u64>() > 2_000, "{t}");
    let out = dir.join("out");
    let page = std::fs::read_to_string(out.join("index.html")).unwrap();
    let svgs: u64 = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "svg"))
        .map(|p| std::fs::metadata(p).unwrap().len())
        .sum();
    assert!(
        page.len() <= 3 << 20,
        "index.html is {} bytes (the SVGs {svgs})",
        page.len()
    );
    assert!(
        svgs > 2 * page.len() as u64,
        "SVGs {svgs}, page {}",
        page.len()
    );
    // The all-classes graph in the page is all.svg's.
    let at = page.find("data-gz=\"").unwrap() + 9;
    let doc = inflate(&page[at..at + page[at..].find('"').unwrap()]);
    let svg = std::fs::read_to_string(out.join("all.svg")).unwrap();
    let titles = |text: &str| text.matches("<title>").count();
    assert_eq!(titles(&doc), titles(&svg));
    assert!(titles(&svg) > 1_000, "{}", titles(&svg));
}
