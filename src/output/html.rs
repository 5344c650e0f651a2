//! `index.html`: the page a user opens first. One self-contained file (no
//! network: no external script, style, font or image) with the summary, the
//! flame graphs as tabs, the timeline, the start-up analysis and the top
//! sites and targets, read from the report model and the SVGs as rendered.
//!
//! Each flame graph lives in its own `<iframe srcdoc>`: inferno's SVG
//! carries a script that looks its elements up by id (`frames`, `matched`,
//! ...), so several inline in one document would find each other's. In its
//! own document each keeps its search and zoom, and the page, of the same
//! origin, calls them from its toolbar. The documents travel gzipped in
//! base64 ([`gzip_base64`]), a tenth of their size, and the page's
//! script inflates them into `srcdoc`.
//!
//! Everything from the profiled world (names, paths, arguments) is escaped:
//! text and attribute values through [`esc`] (`text::xml_text`); the SVG documents are inert
//! base64 in the page and only ever become a frame's own document, so the
//! page's only script is its own.

use std::fmt::Write as _;
use std::io;

use crate::analysis::classify::{Access, FaultClass};
use crate::format::outdir::OutDir;
use crate::format::perf_data::Exit;
use crate::model::report::{Report, SiteRow};
use crate::model::startup::StartupReport;
use crate::output::flamegraph::{Graph, Svg};
use crate::output::startup::place_label;
use crate::output::text::{command_line, completeness_line, stacks_text};
use crate::text::xml_text as esc;
use crate::text::{human_ns, thousands};

/// The page's file name.
pub const FILE_NAME: &str = crate::format::outdir::INDEX_HTML;

/// Writes `index.html` into `dir`.
pub fn write(
    dir: &OutDir,
    report: &Report,
    svgs: &[Svg],
    timeline: Option<&str>,
    top: usize,
) -> io::Result<()> {
    dir.write(FILE_NAME, page(report, svgs, timeline, top).as_bytes())
}

/// Lines of text, each through [`esc`] (a newline stays a newline).
fn esc_lines(s: &str) -> String {
    s.lines().map(esc).collect::<Vec<_>>().join("\n")
}

use crate::text::short;

/// The page's style.
const STYLE: &str = include_str!("html.css");

/// The tabs, the toolbar's search (every graph at once) and reset zoom.
/// The flame graphs' own functions (`search`, `unzoom`, `search_prompt`)
/// are inferno's.
const SCRIPT: &str = include_str!("html.js");

/// The flame graph's document for `srcdoc`: HTML around the SVG (without
/// its XML prologue and comments, which only name inferno's web pages).
fn frame_document(svg: &str) -> String {
    let body = &svg[svg.find("<svg").unwrap_or(0)..];
    let mut stripped = String::with_capacity(body.len());
    let mut rest = body;
    while let Some(start) = rest.find("<!--") {
        stripped.push_str(&rest[..start]);
        rest = match rest[start..].find("-->") {
            Some(end) => &rest[start + end + 3..],
            None => "",
        };
    }
    stripped.push_str(rest);
    // inferno keeps its search and zoom in the URL (history.replaceState),
    // which about:srcdoc cannot take: that would throw halfway through.
    format!(
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><style>html,body{{margin:0}}\
         svg{{display:block;width:100%}}</style><script>history.replaceState=function(){{}};\
         </script></head><body>{stripped}</body></html>"
    )
}

/// `text` gzipped, in base64: how a flame graph's document travels in the
/// page. inferno's SVGs repeat their markup for every frame, so they shrink
/// eightfold, which keeps a page of eight graphs small enough to attach to
/// a bug report; the page's script inflates them (`DecompressionStream`)
/// into each frame's `srcdoc`. Level 2: on python's nine graphs (4.7 MB)
/// zlib-rs took 8.6 ms at level 1 (14.9% of the size), 11.5 at 2 (12.1%),
/// 19.2 at 4 (10.6%), 30.7 at 6 (10.0%); every `record` pays it.
pub fn gzip_base64(text: &str) -> String {
    use base64::Engine as _;
    use std::io::Write as _;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(2));
    // Writing into a Vec cannot fail.
    let _ = gz.write_all(text.as_bytes());
    let bytes = gz.finish().unwrap_or_default();
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// The `height` of the SVG's root element, in pixels.
fn svg_height(svg: &str) -> u64 {
    let Some(root) = svg.find("<svg").map(|i| &svg[i..]) else {
        return 400;
    };
    let root = &root[..root.find('>').unwrap_or(root.len())];
    root.split_once(" height=\"")
        .and_then(|(_, h)| h.split('"').next())
        .and_then(|h| h.parse::<f64>().ok())
        .map_or(400, |h| h.max(0.0) as u64)
}

/// The tab's label and, for an empty graph, what to say instead.
fn label(report: &Report, graph: Graph) -> (String, String) {
    let t = &report.totals;
    let count = |n: u64| format!(" · {}", thousands(n));
    match graph {
        Graph::All => (
            format!("All classes{}", count(report.captured())),
            "No faults in this recording.".into(),
        ),
        Graph::Class(FaultClass::Cow) if !t.cow_available => (
            "COW · unavailable".into(),
            "Copy-on-write faults cannot be told apart in this recording (it was made without \
             the page-fault tracepoints); they count as minor."
                .into(),
        ),
        Graph::Class(class) => {
            let what = match class {
                FaultClass::Cow => "copy-on-write",
                other => other.name(),
            };
            (
                format!("{}{}", class_title(class), count(t.faults.of(class))),
                format!("No {what} faults in this recording."),
            )
        }
        Graph::Startup => (
            format!(
                "Start-up{}",
                count(report.startup.as_ref().map_or(0, |s| s.faults.total()))
            ),
            "No start-up faults in this recording.".into(),
        ),
        Graph::Resident | Graph::ResidentExit => {
            let exit = graph == Graph::ResidentExit;
            let kib = report.resident.as_ref().map_or_else(String::new, |r| {
                let moment = if exit { &r.end } else { &r.peak };
                format!(" · {} KiB", thousands(moment.kib.total))
            });
            match exit {
                false => (
                    format!("Resident at peak{kib}"),
                    "No resident memory recorded.".into(),
                ),
                true => (
                    format!("Resident at exit{kib}"),
                    "Nothing was resident when the processes ended.".into(),
                ),
            }
        }
        Graph::Latency(class) => (
            format!("{} latency", class_title(class)),
            format!(
                "No latency measured for {} faults (it needs the tracepoints).",
                class.name()
            ),
        ),
    }
}

/// A class as a title: `Minor`, `Major`, `COW`.
fn class_title(class: FaultClass) -> &'static str {
    match class {
        FaultClass::Minor => "Minor",
        FaultClass::Major => "Major",
        FaultClass::Cow => "COW",
    }
}

/// A number cell whose figure a test can find: `data-figure="NAME"`.
fn figure(name: &str, n: u64) -> String {
    format!(
        "<td class=\"n\" data-figure=\"{name}\">{}</td>",
        thousands(n)
    )
}

fn opt_figure(name: &str, n: Option<u64>) -> String {
    match n {
        Some(n) => figure(name, n),
        None => format!("<td class=\"n\" data-figure=\"{name}\">n/a</td>"),
    }
}

/// The summary: the classes, the other figures, the latency, and how the
/// call stacks were recorded.
fn summary(s: &mut String, report: &Report) {
    let _ = writeln!(s, "<h2 id=\"summary\">Summary</h2>\n<div class=\"cards\">");
    classes_table(s, report);
    figures_table(s, report);
    latency_table(s, report);
    let _ = writeln!(s, "</div>");
    if let Some(line) = stacks_text(report) {
        let _ = writeln!(s, "<pre>{}</pre>", esc_lines(&line));
    }
}

/// Per class: captured, the kernel's count, and by access; the totals.
fn classes_table(s: &mut String, report: &Report) {
    let t = &report.totals;
    let _ = writeln!(
        s,
        "<table><tr><th>class</th><th class=\"n\">captured</th><th class=\"n\">kernel count</th>\
         <th class=\"n\">read</th><th class=\"n\">write</th><th class=\"n\">exec</th>\
         <th class=\"n\">unknown</th></tr>"
    );
    for class in FaultClass::ALL {
        let name = class.name();
        let captured = t.faults.of(class);
        let kernel = match class {
            FaultClass::Minor => opt_figure("kernel-minor", t.kernel_minor),
            FaultClass::Major => opt_figure("kernel-major", t.kernel_major),
            // The kernel counts COW faults as minor ones.
            FaultClass::Cow => "<td class=\"n\">(in minor)</td>".into(),
        };
        let captured = if class == FaultClass::Cow && !t.cow_available {
            "<td class=\"n\" data-figure=\"captured-cow\">unavailable</td>".into()
        } else {
            figure(&format!("captured-{name}"), captured)
        };
        let _ = write!(s, "<tr><td>{name}</td>{captured}{kernel}");
        for access in Access::ALL {
            let n = report.by_access.of(class).of(access);
            let _ = write!(s, "{}", figure(&format!("{name}-{}", access.name()), n));
        }
        let _ = writeln!(s, "</tr>");
    }
    let _ = writeln!(
        s,
        "<tr><th>total</th>{}{}<td colspan=\"4\"></td></tr></table>",
        figure("captured-total", report.captured()),
        opt_figure("kernel-total", report.kernel_sampled())
    );
}

/// Lost records, truncated stacks, majors by backing, and the like.
fn figures_table(s: &mut String, report: &Report) {
    let t = &report.totals;
    let _ = writeln!(s, "<table>");
    let row = |s: &mut String, what: &str, cell: String| {
        let _ = writeln!(s, "<tr><td>{}</td>{cell}</tr>", esc(what));
    };
    let l = &t.lost_by_class;
    row(s, "lost records", figure("lost", t.lost));
    if t.lost > 0 {
        row(
            s,
            "… minor / major / entries / unattributed",
            format!(
                "<td class=\"n\">{} / {} / {} / {}</td>",
                thousands(l.minor),
                thousands(l.major),
                thousands(l.entries),
                thousands(l.unattributed)
            ),
        );
    }
    if let Some(n) = report.skipped_by_kernel() {
        row(s, "skipped by the kernel", figure("skipped", n));
    }
    row(
        s,
        "truncated stacks",
        figure("truncated", t.truncated_stacks),
    );
    row(s, "major on files", figure("major-file", t.major_file));
    row(s, "major on swap", figure("major-swap", t.major_swap));
    row(
        s,
        "taken in kernel mode",
        figure("kernel-mode", t.kernel_mode),
    );
    if t.pfprof_faults > 0 {
        row(
            s,
            "pfprof's own (left out)",
            figure("pfprof", t.pfprof_faults),
        );
    }
    if t.unpaired + t.bad_records + t.no_callchain > 0 {
        row(s, "without error code", figure("unpaired", t.unpaired));
        row(s, "bad records", figure("bad-records", t.bad_records));
        row(
            s,
            "without call chain",
            figure("no-callchain", t.no_callchain),
        );
    }
    if let Some(ns) = report.wall_ns {
        row(
            s,
            "wall time",
            format!("<td class=\"n\">{}</td>", human_ns(ns)),
        );
    }
    if report.period > 1 {
        row(
            s,
            "sampled",
            format!("<td class=\"n\">1 in {}</td>", thousands(report.period)),
        );
    }
    let _ = writeln!(s, "</table>");
}

/// Each measured class's time in the kernel.
fn latency_table(s: &mut String, report: &Report) {
    if FaultClass::ALL
        .iter()
        .any(|c| report.latency.of(*c).count > 0)
    {
        let _ = writeln!(
            s,
            "<table><tr><th>time in the kernel</th><th class=\"n\">faults</th>\
             <th class=\"n\">p50</th><th class=\"n\">p90</th><th class=\"n\">p99</th>\
             <th class=\"n\">max</th></tr>"
        );
        for class in FaultClass::ALL {
            let l = report.latency.of(class);
            if l.count == 0 {
                continue;
            }
            let _ = writeln!(
                s,
                "<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
                 <td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
                class.name(),
                thousands(l.count),
                human_ns(l.p50_ns),
                human_ns(l.p90_ns),
                human_ns(l.p99_ns),
                human_ns(l.max_ns)
            );
        }
        let _ = writeln!(s, "</table>");
    }
}

fn graphs(s: &mut String, report: &Report, svgs: &[Svg]) {
    if svgs.is_empty() {
        return;
    }
    // `all` first: the overview.
    let mut order: Vec<&Svg> = svgs.iter().filter(|g| g.graph == Graph::All).collect();
    order.extend(svgs.iter().filter(|g| g.graph != Graph::All));
    // Compressing is most of the page's time: each graph on a thread.
    let documents: Vec<String> = std::thread::scope(|scope| {
        let compressing: Vec<_> = order
            .iter()
            .map(|svg| {
                scope.spawn(|| {
                    (!svg.empty && svg.retitled.is_none())
                        .then(|| gzip_base64(&frame_document(&svg.text)))
                })
            })
            .collect();
        compressing
            .into_iter()
            .map(|c| {
                c.join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .map(Option::unwrap_or_default)
            .collect()
    });
    let _ = writeln!(
        s,
        "<h2 id=\"flamegraphs\">Flame graphs</h2>\n<p class=\"meta\">Click a frame to zoom, \
         Ctrl-F or the search box to highlight frames by regular expression (every graph at \
         once). The same graphs are the <code>*.svg</code> files beside this page.</p>"
    );
    let _ = writeln!(s, "<div role=\"tablist\">");
    for (i, svg) in order.iter().enumerate() {
        let (label, _) = label(report, svg.graph);
        let _ = writeln!(
            s,
            "<button role=\"tab\" id=\"tab-{name}\" data-graph=\"{name}\" aria-selected=\"{sel}\"{class}>{label}</button>",
            name = esc(svg.graph.file_stem()),
            sel = i == 0,
            class = if svg.empty { " class=\"empty\"" } else { "" },
            label = esc(&label)
        );
    }
    let _ = writeln!(s, "</div>");
    let _ = writeln!(
        s,
        "<form class=\"toolbar\" id=\"search\"><input id=\"term\" type=\"search\" \
         placeholder=\"regular expression, e.g. ^_dl_ or \\.data\">\
         <button type=\"submit\">Search</button><button type=\"button\" id=\"unzoom\">Reset zoom\
         </button><span id=\"matched\"></span></form>"
    );
    for (i, (svg, document)) in order.iter().zip(&documents).enumerate() {
        let (label, empty_text) = label(report, svg.graph);
        let active = if i == 0 { " active" } else { "" };
        let _ = write!(
            s,
            "<div role=\"tabpanel\" class=\"panel{active}\" id=\"graph-{}\">",
            esc(svg.graph.file_stem())
        );
        if svg.empty {
            let _ = write!(s, "<p class=\"empty-graph\">{}</p>", esc(&empty_text));
        } else if let Some(of) = &svg.retitled {
            // The other graph's document, compressed once for both.
            let height = svg_height(&svg.text) + 4;
            let _ = write!(
                s,
                "<iframe title=\"{}\" style=\"height:min({height}px,80vh)\" data-same=\"{}\" \
                 data-was=\"{}\" data-title=\"{}\"></iframe>",
                esc(&label),
                esc(of.of.file_stem()),
                esc(&of.was),
                esc(&of.title)
            );
        } else {
            let height = svg_height(&svg.text) + 4;
            let _ = write!(
                s,
                "<iframe title=\"{}\" style=\"height:min({height}px,80vh)\" data-gz=\"{}\"></iframe>",
                esc(&label),
                document
            );
        }
        let _ = writeln!(s, "</div>");
    }
}

fn timeline(s: &mut String, svg: &str) {
    let Some(start) = svg.find("<svg") else {
        return;
    };
    let _ = writeln!(
        s,
        "<h2 id=\"timeline\">Timeline</h2>\n<div class=\"timeline\">{}</div>",
        &svg[start..]
    );
}

/// The start-up window shown in full: its span and faults, the hints,
/// the objects and the data symbols.
fn startup(s: &mut String, report: &Report, top: usize) {
    let Some(st) = &report.startup else {
        return;
    };
    let window = crate::output::startup::window_sentence(st);
    let f = &st.faults;
    let _ = writeln!(
        s,
        "<h2 id=\"startup\">Start-up</h2>\n<p>{}: {} faults (minor {}, major {}, cow {})</p>",
        esc(&window),
        thousands(f.total()),
        thousands(f.minor),
        thousands(f.major),
        thousands(f.cow)
    );
    if !st.hints.is_empty() {
        let _ = writeln!(s, "<h3>Hints</h3><ul>");
        for h in &st.hints {
            // The text names the object.
            let _ = writeln!(
                s,
                "<li class=\"hint\">{}</li>",
                esc(&crate::output::startup::hint_text(h))
            );
        }
        let _ = writeln!(s, "</ul>");
    }
    startup_objects(s, st);
    startup_symbols(s, st, top);
}

/// The start-up's objects, each with its sections.
fn startup_objects(s: &mut String, st: &StartupReport) {
    let _ = writeln!(
        s,
        "<table><tr><th>object / section</th><th class=\"n\">minor</th><th class=\"n\">major</th>\
         <th class=\"n\">cow</th><th class=\"n\">pages touched</th><th class=\"n\">of</th>\
         <th class=\"n\">share</th><th>relocations</th></tr>"
    );
    let opt = |v: Option<u64>| v.map(thousands).unwrap_or_default();
    for o in &st.objects {
        let relocations = crate::output::startup::relocation_summary(o).unwrap_or_default();
        let _ = writeln!(
            s,
            "<tr><td title=\"{}\"><b>{}</b></td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
             <td class=\"n\">{}</td><td></td><td></td><td class=\"n\">{:.1}%</td><td>{}</td></tr>",
            esc(&o.object),
            esc(short(&o.object)),
            thousands(o.faults.minor),
            thousands(o.faults.major),
            thousands(o.faults.cow),
            o.share,
            esc(&relocations)
        );
        for sec in &o.sections {
            let _ = writeln!(
                s,
                "<tr class=\"sec\"><td>&nbsp;&nbsp;{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
                 <td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td></td>\
                 <td></td></tr>",
                esc(&place_label(&sec.section)),
                thousands(sec.faults.minor),
                thousands(sec.faults.major),
                thousands(sec.faults.cow),
                opt(sec.pages_touched),
                opt(sec.pages_total)
            );
        }
    }
    let _ = writeln!(s, "</table>");
}

/// The start-up's data symbols with most faults.
fn startup_symbols(s: &mut String, st: &StartupReport, top: usize) {
    if !st.symbols.is_empty() {
        let _ = writeln!(
            s,
            "<h3>Start-up data symbols</h3><table><tr><th class=\"n\">faults</th><th>object</th>\
             <th>section</th><th>symbol</th><th>first touched by</th></tr>"
        );
        for sym in st.symbols.iter().take(top) {
            let _ = writeln!(
                s,
                "<tr><td class=\"n\">{}</td><td title=\"{}\">{}</td><td>{}</td>\
                 <td class=\"mono\">{}</td><td class=\"mono\">{}</td></tr>",
                thousands(sym.faults),
                esc(&sym.object),
                esc(short(&sym.object)),
                esc(&place_label(&sym.section)),
                esc(&sym.symbol),
                esc(sym.first_toucher.as_deref().unwrap_or("-"))
            );
        }
        let _ = writeln!(s, "</table>");
    }
}

fn target_text(r: &SiteRow) -> String {
    let mut target = short(&r.target.object).to_string();
    for part in [&r.target.section, &r.target.symbol].into_iter().flatten() {
        target.push(' ');
        target.push_str(part);
    }
    target
}

fn sites(s: &mut String, report: &Report, top: usize) {
    if report.sites.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "<h2 id=\"sites\">Top code sites</h2>\n<p class=\"meta\">Where the faults were taken \
         (innermost function) and where they landed (object, section, symbol); a row opens to \
         its most common stack.</p>"
    );
    for class in FaultClass::ALL {
        let rows = report.top_sites(class, top);
        if rows.is_empty() {
            continue;
        }
        let _ = writeln!(
            s,
            "<h3>{} faults</h3><table class=\"sites\"><tr><th class=\"n\">faults</th><th>access</th>\
             <th>function (file:line)</th><th>target</th><th>process</th></tr>",
            class_title(class)
        );
        for r in rows {
            let place = crate::text::site_label(&r.function, r.file.as_deref(), r.line);
            let mut stack = String::new();
            // Innermost first, as a debugger shows it.
            for frame in report.site_frames(r).rev() {
                let at = match (&frame.file, frame.line) {
                    (Some(f), Some(l)) => format!(" {}:{l}", short(f)),
                    _ => String::new(),
                };
                let inlined = if frame.inlined { " (inlined)" } else { "" };
                let _ = write!(
                    stack,
                    "<li>{}{}{}</li>",
                    esc(&frame.function),
                    esc(&at),
                    inlined
                );
            }
            let function = if stack.is_empty() {
                format!("<span class=\"mono\">{}</span>", esc(&place))
            } else {
                format!(
                    "<details><summary class=\"mono\">{}</summary><ol class=\"stack mono\">{stack}</ol></details>",
                    esc(&place)
                )
            };
            let _ = writeln!(
                s,
                "<tr><td class=\"n\">{}</td><td>{}</td><td>{function}</td>\
                 <td class=\"mono\" title=\"{}\">{}</td><td>{}</td></tr>",
                thousands(r.count),
                r.access.name(),
                esc(&r.target.object),
                esc(&target_text(r)),
                esc(&r.comm)
            );
        }
        let _ = writeln!(s, "</table>");
    }
}

fn targets(s: &mut String, report: &Report, top: usize) {
    if report.targets.is_empty() && report.files.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "<h2 id=\"targets\">Top targets</h2>\n<div class=\"cards\">"
    );
    if !report.targets.is_empty() {
        let _ = writeln!(
            s,
            "<table><tr><th class=\"n\">faults</th><th>class</th><th>object</th><th>region</th>\
             <th>section</th></tr>"
        );
        for t in report.targets.iter().take(top) {
            let _ = writeln!(
                s,
                "<tr><td class=\"n\">{}</td><td>{}</td><td title=\"{}\">{}</td><td>{}</td>\
                 <td>{}</td></tr>",
                thousands(t.count),
                t.class.name(),
                esc(&t.object),
                esc(short(&t.object)),
                esc(t.region.name()),
                esc(t.section.as_deref().unwrap_or("-"))
            );
        }
        let _ = writeln!(s, "</table>");
    }
    if !report.files.is_empty() {
        let _ = writeln!(
            s,
            "<table><tr><th>file or region</th><th class=\"n\">major</th><th class=\"n\">swap-ins</th>\
             <th class=\"n\">minor</th><th class=\"n\">cow</th></tr>"
        );
        for f in report.files.iter().take(top) {
            let _ = writeln!(
                s,
                "<tr><td title=\"{}\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
                 <td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
                esc(&f.path),
                esc(short(&f.path)),
                thousands(f.major),
                thousands(f.swap),
                thousands(f.minor),
                thousands(f.cow)
            );
        }
        let _ = writeln!(s, "</table>");
    }
    let _ = writeln!(s, "</div>");
}

fn processes(s: &mut String, report: &Report, top: usize) {
    if report.processes.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "<h2 id=\"processes\">Processes</h2>\n<table><tr><th class=\"n\">pid</th>\
         <th class=\"n\">ppid</th><th>comm</th><th>executable</th><th class=\"n\">minor</th>\
         <th class=\"n\">major</th><th class=\"n\">cow</th><th class=\"n\">threads</th></tr>"
    );
    let mut rows: Vec<_> = report.processes.iter().collect();
    rows.sort_by_key(|p| std::cmp::Reverse(p.minor + p.major + p.cow));
    for p in rows.iter().take(top) {
        let _ = writeln!(
            s,
            "<tr><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td><td>{}</td>\
             <td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
             <td class=\"n\">{}</td></tr>",
            p.pid,
            p.ppid,
            esc(&p.comm),
            esc(p.exe.as_deref().unwrap_or("-")),
            thousands(p.minor),
            thousands(p.major),
            thousands(p.cow),
            p.threads
        );
    }
    if rows.len() > top {
        let _ = writeln!(
            s,
            "<tr><td colspan=\"8\">… {} more in report.json</td></tr>",
            rows.len() - top
        );
    }
    let _ = writeln!(s, "</table>");
}

/// KiB resident at the peak and at exit by kind, the kernel's count beside,
/// and the sites that hold most (`--resident`).
fn resident(s: &mut String, report: &Report, top: usize) {
    let Some(r) = &report.resident else {
        return;
    };
    let _ = writeln!(
        s,
        "<h2 id=\"resident\">Resident memory</h2>\n<p>KiB resident, by the fault that made \
         each page present (<code>resident.svg</code>, <code>resident-exit.svg</code>). What it \
         cannot see: {}.</p>",
        esc(r.unseen)
    );
    let _ = writeln!(
        s,
        "<table><tr><th></th><th class=\"n\">total</th><th class=\"n\">anon</th>\
         <th class=\"n\">file</th><th class=\"n\">shmem</th></tr>"
    );
    for (what, moment) in [("at the peak", &r.peak), ("at exit", &r.end)] {
        let k = &moment.kib;
        let _ = writeln!(
            s,
            "<tr><td>{what}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
             <td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
            thousands(k.total),
            thousands(k.anon),
            thousands(k.file),
            thousands(k.shmem)
        );
        if let Some(kernel) = &moment.kernel_kib {
            let _ = writeln!(
                s,
                "<tr><td>&nbsp;&nbsp;the kernel's count</td><td></td><td class=\"n\">{}</td>\
                 <td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
                kernel.anon.map(thousands).unwrap_or_default(),
                thousands(kernel.file),
                thousands(kernel.shmem)
            );
        }
        if let Some(k) = &moment.reconciled_kib {
            let _ = writeln!(
                s,
                "<tr><td title=\"pages the kernel reclaimed without a syscall that frees them; \
                 their sites still count them\">&nbsp;&nbsp;of which taken back</td>\
                 <td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
                 <td class=\"n\">{}</td></tr>",
                thousands(k.total),
                thousands(k.anon),
                thousands(k.file),
                thousands(k.shmem)
            );
        }
    }
    let _ = writeln!(s, "</table>");
    for (what, moment) in [("at the peak", &r.peak), ("at exit", &r.end)] {
        let _ = writeln!(
            s,
            "<table><tr><th class=\"n\">KiB {what}</th><th>kind</th><th>process</th>\
             <th>function</th><th>target</th></tr>"
        );
        for site in moment.top.iter().take(top) {
            let t = &site.target;
            let target = [Some(&t.object), t.section.as_ref(), t.symbol.as_ref()]
                .into_iter()
                .flatten()
                .map(|part| esc(part))
                .collect::<Vec<_>>()
                .join(" ");
            let _ = writeln!(
                s,
                "<tr><td class=\"n\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{target}</td></tr>",
                thousands(site.kib),
                site.kind,
                esc(&site.comm),
                esc(&site.function)
            );
        }
        let _ = writeln!(s, "</table>");
    }
}

/// The whole page.
pub fn page(report: &Report, svgs: &[Svg], timeline_svg: Option<&str>, top: usize) -> String {
    let mut s = String::with_capacity(svgs.iter().map(|g| g.text.len() * 5 / 4).sum::<usize>());
    let command = command_line(&report.command);
    let _ = writeln!(
        s,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width\">\
         <title>pfprof: {}</title><style>{STYLE}</style></head><body>",
        esc(&command)
    );
    let _ = writeln!(s, "<h1>Page faults of <code>{}</code></h1>", esc(&command));
    let exit = match report.exit {
        Some(Exit::Code(c)) => format!("; exit status {c}"),
        Some(Exit::Signal(sig)) => format!("; killed by signal {sig}"),
        None => String::new(),
    };
    let _ = writeln!(
        s,
        "<p class=\"meta\">pfprof {}{}. Also in this directory: report.txt, report.json, the \
         flame graphs as SVG and folded stacks, profile.pb.gz (for <code>go tool pprof</code>).</p>",
        esc(&report.pfprof_version),
        esc(&exit)
    );
    let class = if report.incomplete() {
        "incomplete"
    } else {
        "complete"
    };
    let _ = writeln!(
        s,
        "<p class=\"{class}\" id=\"completeness\">{}</p>",
        esc(&completeness_line(report))
    );
    if !report.warnings.is_empty() {
        let _ = writeln!(s, "<ul class=\"warnings\" id=\"warnings\">");
        for w in &report.warnings {
            let _ = writeln!(s, "<li>{}</li>", esc(&w.to_string()));
        }
        let _ = writeln!(s, "</ul>");
    }
    let mut nav = vec![("summary", "Summary")];
    if !svgs.is_empty() {
        nav.push(("flamegraphs", "Flame graphs"));
    }
    if timeline_svg.is_some() {
        nav.push(("timeline", "Timeline"));
    }
    if report.resident.is_some() {
        nav.push(("resident", "Resident memory"));
    }
    if report.startup.is_some() {
        nav.push(("startup", "Start-up"));
    }
    if !report.sites.is_empty() {
        nav.push(("sites", "Code sites"));
    }
    if !report.targets.is_empty() || !report.files.is_empty() {
        nav.push(("targets", "Targets"));
    }
    if !report.processes.is_empty() {
        nav.push(("processes", "Processes"));
    }
    s.push_str("<nav>");
    for (id, title) in nav {
        let _ = write!(s, "<a href=\"#{id}\">{title}</a>");
    }
    s.push_str("</nav>\n");
    summary(&mut s, report);
    graphs(&mut s, report, svgs);
    if let Some(svg) = timeline_svg {
        timeline(&mut s, svg);
    }
    resident(&mut s, report, top);
    startup(&mut s, report, top);
    sites(&mut s, report, top);
    targets(&mut s, report, top);
    processes(&mut s, report, top);
    let _ = writeln!(s, "<script>{SCRIPT}</script>\n</body></html>");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Markup, quotes and control characters never reach the page raw.
    #[test]
    fn escaping() {
        for (name, shown) in [
            ("main", "main"),
            (
                "</script><script>alert(1)",
                "&lt;/script&gt;&lt;script&gt;alert(1)",
            ),
            ("a\"b'c&d", "a&quot;b&#39;c&amp;d"),
            ("x\ny\x1b[31m", "x\\ny\\x1b[31m"),
            ("\u{202e}evil", "\\u{202e}evil"),
        ] {
            assert_eq!(esc(name), shown, "{name:?}");
        }
        assert_eq!(esc_lines("a<b\n  c"), "a&lt;b\n  c");
    }

    /// A window that ended at the next exec says so, as report.txt does
    /// (the page said "end of recording … main was not seen").
    #[test]
    fn startup_window_ended_by_exec() {
        let mut report = crate::model::report::tests::sample_report();
        let st = report.startup.as_mut().unwrap();
        st.until = crate::model::startup::Until::Exec;
        st.until_ms = Some(0.9);
        let mut page = String::new();
        startup(&mut page, &report, 10);
        assert!(
            page.contains("exec → next exec after 0.9 ms, before main"),
            "{page}"
        );
        let text = crate::output::startup::to_text(report.startup.as_ref().unwrap(), 10);
        assert!(
            text.contains("(exec → next exec after 0.9 ms, before main)"),
            "{text}"
        );
    }

    /// The root element's height, and a fallback without one.
    #[test]
    fn svg_heights() {
        for (svg, height) in [
            (
                "<?xml version=\"1.0\"?><svg version=\"1.1\" width=\"1200\" height=\"1582\">",
                1582,
            ),
            ("<svg height=\"140\"><rect height=\"9\"/></svg>", 140),
            ("<svg width=\"1\"><rect height=\"9\"/></svg>", 400),
            ("not svg", 400),
        ] {
            assert_eq!(svg_height(svg), height, "{svg}");
        }
    }

    /// The frame's document: the SVG without prologue and comments, after
    /// the replaceState shim.
    #[test]
    fn frame_documents() {
        let doc = frame_document(
            "<?xml version=\"1.0\"?><!DOCTYPE svg PUBLIC \"x\" \"http://a/b.dtd\"><svg><!--See \
             https://example.com--><text>a &lt; b</text><!--NOTES: --></svg>",
        );
        assert!(doc.starts_with("<!DOCTYPE html>"), "{doc}");
        assert!(
            doc.ends_with("</head><body><svg><text>a &lt; b</text></svg></body></html>"),
            "{doc}"
        );
        assert!(!doc.contains("http"), "{doc}");
        assert!(doc.contains("history.replaceState=function(){};"));
    }
}
