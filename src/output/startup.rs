//! The start-up sections of `report.txt`: the window shown in full, and
//! the other windows in a few lines; and the start-up's words that
//! index.html and report.json share: the window's span, the hints, where
//! faults landed (`.bss`, `(none)`, `[heap]`).

use std::borrow::Cow;
use std::fmt::Write as _;

use serde::ser::{Serialize, SerializeStruct, Serializer};

use crate::analysis::classify::ClassCounts;

use crate::analysis::relocation_pages::RelocationKind;
use crate::model::startup::{
    Hint, HintKind, StartupObject, StartupPlace, StartupReport, StartupSection, StartupWindow,
    Until,
};
use crate::text::{short, thousands, truncate};

/// The compact list of the start-up windows other than `shown`, by faults,
/// at most `top` lines (and a line that sums the rest).
pub fn others_text(windows: &[StartupWindow], shown: Option<usize>, top: usize) -> String {
    let mut others: Vec<&StartupWindow> = windows
        .iter()
        .enumerate()
        .filter(|(i, _)| Some(*i) != shown)
        .map(|(_, w)| w)
        .collect();
    let mut s = String::new();
    if others.is_empty() {
        return s;
    }
    others.sort_by_key(|w| std::cmp::Reverse(w.faults.total()));
    let _ = writeln!(
        s,
        "\nOther start-up windows ({}, by faults; --startup-of NAME|PID shows one):",
        thousands(others.len() as u64)
    );
    let _ = writeln!(
        s,
        "{:<30}{:>9}{:>9}{:>8}{:>9}{:>12}  until",
        "program", "pid", "minor", "major", "cow", "window"
    );
    for w in others.iter().take(top) {
        let window = match w.end_ms {
            Some(end) => format!("{:.1} ms", (end - w.exec_ms).max(0.0)),
            None => "-".to_string(),
        };
        let _ = writeln!(
            s,
            "{:<30}{:>9}{:>9}{:>8}{:>9}{:>12}  {}",
            truncate(short(&w.program), 30),
            w.pid,
            thousands(w.faults.minor),
            thousands(w.faults.major),
            thousands(w.faults.cow),
            window,
            w.until.name()
        );
    }
    if others.len() > top {
        let rest: ClassCounts = others[top..].iter().map(|w| w.faults).sum();
        let _ = writeln!(
            s,
            "{:<39}{:>9}{:>8}{:>9}",
            format!("and {} more", thousands((others.len() - top) as u64)),
            thousands(rest.minor),
            thousands(rest.major),
            thousands(rest.cow)
        );
    }
    s
}

/// The shown window's span, as report.txt and index.html say it:
/// `exec → main entered after 1.2 ms`.
pub fn window_sentence(report: &StartupReport) -> String {
    match (report.until, report.until_ms) {
        (Until::Main, Some(ms)) => format!("exec → main entered after {ms:.1} ms"),
        (Until::UntilMs, Some(ms)) => format!("exec → +{ms:.1} ms (--until-ms)"),
        (Until::Exec, Some(ms)) => format!("exec → next exec after {ms:.1} ms, before main"),
        (Until::End, Some(ms)) => {
            format!("exec → end of recording ({ms:.1} ms; main was not seen)")
        }
        (_, None) => "exec → main".to_string(),
    }
}

/// The start-up section of `report.txt`: the window, its objects with
/// their busiest sections, the data symbols, the hints.
pub fn to_text(report: &StartupReport, top: usize) -> String {
    let mut s = String::new();
    window_head(&mut s, report);
    objects_table(&mut s, report, top);
    symbols_table(&mut s, report, top);
    if !report.hints.is_empty() {
        let _ = writeln!(s, "\nHints:");
        for h in &report.hints {
            wrap(&mut s, "  -", "   ", &hint_text(h));
        }
    }
    s
}

/// `Start-up of app [pid 42] (exec → main entered after 1.2 ms):` and the
/// window's faults.
fn window_head(s: &mut String, report: &StartupReport) {
    let f = &report.faults;
    let of = match (&report.program, report.pid) {
        (Some(program), Some(pid)) => format!(" of {} [pid {pid}]", truncate(short(program), 30)),
        _ => String::new(),
    };
    let _ = writeln!(
        s,
        "Start-up{of} ({}):\n{} faults (minor {}, major {}, cow {})",
        window_sentence(report),
        thousands(f.total()),
        thousands(f.minor),
        thousands(f.major),
        thousands(f.cow)
    );
}

/// The objects with most faults, each with its busiest sections; the rest
/// summed, so a big program's table stays readable.
fn objects_table(s: &mut String, report: &StartupReport, top: usize) {
    let _ = writeln!(
        s,
        "{:<38}{:>9}{:>8}{:>9}{:>9}{:>9}{:>8}",
        "object / section", "minor", "major", "cow", "pages", "of", "share"
    );
    let mut objects: Vec<&StartupObject> = report.objects.iter().collect();
    objects.sort_by_key(|o| std::cmp::Reverse(o.faults.total()));
    for o in objects.iter().take(top) {
        let _ = writeln!(
            s,
            "{:<38}{}{:>9}{:>9}{:>7.1}%",
            truncate(short(&o.object), 38),
            class_cells(&o.faults),
            "",
            "",
            o.share
        );
        sections_rows(s, o, top);
        if let Some(summary) = relocation_summary(o) {
            wrap(s, "  relocations:", "    ", &summary);
        }
    }
    if objects.len() > top {
        let rest = objects[top..].iter().map(|o| o.faults).sum();
        more_row(s, "objects", objects.len() - top, rest, 0);
    }
}

/// An object's `top` busiest sections, the rest summed.
fn sections_rows(s: &mut String, o: &StartupObject, top: usize) {
    let mut sections: Vec<&StartupSection> = o.sections.iter().collect();
    sections.sort_by_key(|sec| std::cmp::Reverse(sec.faults.total()));
    let shown = top.min(sections.len());
    let opt = |v: Option<u64>| v.map(thousands).unwrap_or_default();
    for sec in &sections[..shown] {
        let _ = writeln!(
            s,
            "  {:<36}{}{:>9}{:>9}",
            truncate(&place_label(&sec.section), 36),
            class_cells(&sec.faults),
            opt(sec.pages_touched),
            opt(sec.pages_total)
        );
    }
    if sections.len() > shown {
        let rest = sections[shown..].iter().map(|sec| sec.faults).sum();
        more_row(s, "sections", sections.len() - shown, rest, 2);
    }
}

/// The minor, major and cow columns of the objects table.
fn class_cells(c: &ClassCounts) -> String {
    format!(
        "{:>9}{:>8}{:>9}",
        thousands(c.minor),
        thousands(c.major),
        thousands(c.cow)
    )
}

/// `and 3 more sections` with their summed faults.
fn more_row(s: &mut String, what: &str, n: usize, c: ClassCounts, indent: usize) {
    let label = format!(
        "{}and {} more {what}",
        " ".repeat(indent),
        thousands(n as u64)
    );
    let _ = writeln!(s, "{label:<38}{}", class_cells(&c));
}

/// The data symbols with most faults, and what touched each first.
fn symbols_table(s: &mut String, report: &StartupReport, top: usize) {
    if report.symbols.is_empty() {
        return;
    }
    let _ = writeln!(s, "\nStart-up data symbols:");
    let _ = writeln!(
        s,
        "{:>9}  {:<22} {:<14} {:<24} first touched by",
        "faults", "object", "section", "symbol"
    );
    for sym in report.symbols.iter().take(top) {
        let _ = writeln!(
            s,
            "{:>9}  {:<22} {:<14} {:<24} {}",
            thousands(sym.faults),
            truncate(short(&sym.object), 22),
            truncate(&place_label(&sym.section), 14),
            truncate(&sym.symbol, 24),
            truncate(sym.first_toucher.as_deref().unwrap_or("-"), 24)
        );
    }
}

/// Where start-up faults landed, by name: the section, `(none)` for file
/// pages outside every section, the region (`[anon]`) for memory of no
/// file.
pub fn place_label(place: &StartupPlace) -> Cow<'_, str> {
    match place {
        StartupPlace::Section(name) => Cow::Borrowed(name),
        StartupPlace::NoSection => Cow::Borrowed("(none)"),
        StartupPlace::Region(region) => Cow::Owned(format!("[{region}]")),
    }
}

/// report.json's `section` of a start-up row: its label.
impl Serialize for StartupPlace {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&place_label(self))
    }
}

/// Appends `text` word-wrapped at 98 columns: `first` starts the first line,
/// `rest` the following ones.
fn wrap(out: &mut String, first: &str, rest: &str, text: &str) {
    let mut line = String::from(first);
    for word in text.split(' ') {
        if line.chars().count() + 1 + word.chars().count() > 98 && line.len() > rest.len() {
            out.push_str(&line);
            out.push('\n');
            line = String::from(rest);
        }
        line.push(' ');
        line.push_str(word);
    }
    out.push_str(&line);
    out.push('\n');
}

/// Its relocations in one line (types, pages, BIND_NOW, RELRO, the
/// loader's faults), as report.txt and index.html show them; None when
/// it has none.
pub fn relocation_summary(o: &StartupObject) -> Option<String> {
    if o.relocations.is_empty() && o.relr == 0 {
        return None;
    }
    let mut types: Vec<String> = o
        .relocations
        .iter()
        .map(|(t, n)| format!("{t} {}", thousands(*n)))
        .collect();
    if o.uses_relr {
        types.push(format!("RELR {}", thousands(o.relr)));
    }
    let yes = |b: bool| if b { "yes" } else { "no" };
    Some(format!(
        "{} on {} pages; BIND_NOW {}, RELRO {}; loader faults: cow {}, minor {}",
        types.join(", "),
        thousands(o.relocation_pages),
        yes(o.bind_now),
        yes(o.relro),
        thousands(o.loader.cow),
        thousands(o.loader.minor)
    ))
}

/// A hint's sentence, naming its object first.
pub fn hint_text(hint: &Hint) -> String {
    let object = short(&hint.object);
    match &hint.kind {
        HintKind::Relocations {
            of_kind,
            uses_relr,
            pages: p,
        } => {
            let head = match p.kind {
                RelocationKind::Relative => format!("{} RELATIVE relocations", thousands(*of_kind)),
                RelocationKind::LazyBinding => format!(
                    "lazy binding of {} functions (JUMP_SLOT)",
                    thousands(*of_kind)
                ),
                RelocationKind::Symbol => format!("{} symbol relocations", thousands(*of_kind)),
            };
            let types: Vec<String> = p
                .relocations
                .iter()
                .map(|(t, n)| format!("{} {}", t.short_name(), thousands(*n)))
                .collect();
            let mut text = format!(
                "{object}: {head} dirty {} {} of {} at start-up ({} on them), one COW fault per \
                 page in every process; {}",
                thousands(p.pages),
                if p.pages == 1 { "page" } else { "pages" },
                if p.sections.is_empty() {
                    "its data".to_string()
                } else {
                    p.sections.join(", ")
                },
                types.join(", "),
                advice(p.kind),
            );
            if p.kind == RelocationKind::Relative && *uses_relr {
                text.push_str(
                    " (DT_RELR already shrinks the table the loader reads, not the pages it \
                     writes)",
                );
            }
            text
        }
        HintKind::TextMajor { faults } => format!(
            "{object}: {} major faults on .text at start-up read code from disk; a smaller or \
             better-laid-out binary (-Os, PGO, BOLT) reads fewer pages",
            thousands(*faults)
        ),
        HintKind::BssZeroed { symbol, faults, by } => {
            let by = by
                .as_deref()
                .map(|f| format!(" by {f}()"))
                .unwrap_or_default();
            format!(
                "{object}: {} .bss pages of {symbol} zeroed{by} at start-up; consider allocating \
                 them lazily, on first use (or MAP_POPULATE when all of them are needed)",
                thousands(*faults)
            )
        }
        HintKind::DataCopied { symbol, faults } => format!(
            "{object}: {} pages of .data ({symbol}) copied at start-up (COW), in every process; \
             data that is never written belongs in .rodata (const)",
            thousands(*faults)
        ),
    }
}

/// What removes the pages a kind of relocation writes.
fn advice(kind: RelocationKind) -> &'static str {
    match kind {
        RelocationKind::Relative => {
            "they are pointers in data: tables of offsets (or indices) instead of pointers avoid them"
        }
        RelocationKind::LazyBinding => {
            "ld.so rebases each .got.plt slot at start-up and rewrites it at the function's first call; \
             -z now moves the writes to start-up and makes them read-only (RELRO), -fno-plt or prelinking \
             remove them"
        }
        RelocationKind::Symbol => {
            "each looks a symbol up: hidden visibility (-fvisibility=hidden), -Bsymbolic or fewer \
             exported variables avoid them, and -fPIE avoids COPY relocations"
        }
    }
}

/// report.json's hint: its object, its sentence, and for a relocation hint
/// the pages it counts.
impl Serialize for Hint {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let relocations = match &self.kind {
            HintKind::Relocations { pages, .. } => Some(pages),
            _ => None,
        };
        let fields = 2 + usize::from(relocations.is_some());
        let mut out = serializer.serialize_struct("Hint", fields)?;
        out.serialize_field("object", &self.object)?;
        out.serialize_field("text", &hint_text(self))?;
        if let Some(relocations) = relocations {
            out.serialize_field("relocations", relocations)?;
        }
        out.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn others_are_listed_by_faults_up_to_top() {
        let window = |program: &str, minor| StartupWindow {
            program: program.to_string(),
            pid: 10,
            exec_ms: 1.0,
            end_ms: Some(3.5),
            until: Until::Main,
            faults: ClassCounts {
                minor,
                major: 0,
                cow: 1,
            },
        };
        let all = vec![
            window("/bin/a", 5),
            window("/bin/b", 50),
            window("/bin/c", 500),
            window("/bin/d", 7),
        ];
        let text = others_text(&all, Some(2), 2);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 6, "{text}");
        assert!(lines[1].starts_with("Other start-up windows (3,"), "{text}");
        assert!(lines[3].starts_with("b ") && lines[3].contains("2.5 ms  main"));
        assert!(lines[4].starts_with("d "));
        assert!(
            lines[5].starts_with("and 1 more") && lines[5].contains(" 5 "),
            "{text}"
        );
        assert_eq!(others_text(&all[..1], Some(0), 10), "");
    }

    /// Places are named as report.json always named them, and sort in the
    /// order of those names.
    #[test]
    fn place_labels() {
        use crate::model::report::Region;
        let places = [
            (StartupPlace::NoSection, "(none)"),
            (StartupPlace::Section(".bss".into()), ".bss"),
            (StartupPlace::Section(".data".into()), ".data"),
            (StartupPlace::Region(Region::Anon), "[anon]"),
            (StartupPlace::Region(Region::Heap), "[heap]"),
            (StartupPlace::Region(Region::Stack), "[stack]"),
        ];
        for (place, label) in &places {
            assert_eq!(place_label(place), *label);
            assert_eq!(serde_json::to_value(place).unwrap(), *label);
        }
        assert!(places
            .windows(2)
            .all(|w| w[0].0 < w[1].0 && w[0].1 < w[1].1));
    }

    /// Every kind of hint in words, and in report.json.
    #[test]
    fn hint_sentences() {
        let before = [
            r#"{"object":"/usr/lib/libbig.so.1","text":"libbig.so.1: 8,195 RELATIVE relocations dirty 5 pages of .data.rel.ro, .init_array at start-up (R_X86_64_64 3, RELATIVE 8,195 on them), one COW fault per page in every process; they are pointers in data: tables of offsets (or indices) instead of pointers avoid them (DT_RELR already shrinks the table the loader reads, not the pages it writes)","relocations":{"kind":"relative","pages":5,"sections":[".data.rel.ro",".init_array"],"relocations":{"R_X86_64_64":3,"R_X86_64_RELATIVE":8195}}}"#,
            r#"{"object":"/usr/lib/libbig.so.1","text":"libbig.so.1: lazy binding of 1,200 functions (JUMP_SLOT) dirty 1 page of .got.plt at start-up (JUMP_SLOT 1,200 on them), one COW fault per page in every process; ld.so rebases each .got.plt slot at start-up and rewrites it at the function's first call; -z now moves the writes to start-up and makes them read-only (RELRO), -fno-plt or prelinking remove them","relocations":{"kind":"lazy_binding","pages":1,"sections":[".got.plt"],"relocations":{"R_X86_64_JUMP_SLOT":1200}}}"#,
            r#"{"object":"/usr/lib/libbig.so.1","text":"libbig.so.1: 42 symbol relocations dirty 3 pages of its data at start-up (R_X86_64_64 2, GLOB_DAT 40 on them), one COW fault per page in every process; each looks a symbol up: hidden visibility (-fvisibility=hidden), -Bsymbolic or fewer exported variables avoid them, and -fPIE avoids COPY relocations","relocations":{"kind":"symbol","pages":3,"sections":[],"relocations":{"R_X86_64_64":2,"R_X86_64_GLOB_DAT":40}}}"#,
            r#"{"object":"/usr/lib/libbig.so.1","text":"libbig.so.1: 7 major faults on .text at start-up read code from disk; a smaller or better-laid-out binary (-Os, PGO, BOLT) reads fewer pages"}"#,
            r#"{"object":"/usr/lib/libbig.so.1","text":"libbig.so.1: 1,024 .bss pages of arena zeroed by init_arena() at start-up; consider allocating them lazily, on first use (or MAP_POPULATE when all of them are needed)"}"#,
            r#"{"object":"/usr/lib/libbig.so.1","text":"libbig.so.1: 64 .bss pages of pool zeroed at start-up; consider allocating them lazily, on first use (or MAP_POPULATE when all of them are needed)"}"#,
            r#"{"object":"/usr/lib/libbig.so.1","text":"libbig.so.1: 16 pages of .data (table) copied at start-up (COW), in every process; data that is never written belongs in .rodata (const)"}"#,
        ];
        let hints = crate::model::startup::tests::hints_of_input();
        let json: Vec<String> = hints
            .iter()
            .map(|h| serde_json::to_string(h).unwrap())
            .collect();
        assert_eq!(json, before);
    }

    /// Each way a window ends has its own sentence; without a length it
    /// is the plain span.
    #[test]
    fn window_sentences() {
        let mut report = crate::model::report::tests::sample_report()
            .startup
            .unwrap();
        for (until, ms, want) in [
            (Until::Main, Some(1.25), "exec → main entered after 1.2 ms"),
            (Until::UntilMs, Some(5.0), "exec → +5.0 ms (--until-ms)"),
            (
                Until::Exec,
                Some(0.9),
                "exec → next exec after 0.9 ms, before main",
            ),
            (
                Until::End,
                Some(3.0),
                "exec → end of recording (3.0 ms; main was not seen)",
            ),
            (Until::End, None, "exec → main"),
        ] {
            (report.until, report.until_ms) = (until, ms);
            assert_eq!(window_sentence(&report), want);
        }
    }

    /// `--top` bounds the objects and each object's sections; the rest is
    /// summed, never dropped.
    #[test]
    fn objects_and_sections_are_bounded_by_top() {
        let counts = |minor, cow| ClassCounts {
            minor,
            major: 0,
            cow,
        };
        let object = |name: &str, minor: u64| StartupObject {
            object: name.into(),
            faults: counts(minor * 3, 0),
            share: 0.0,
            sections: [".data", ".bss", ".text"]
                .iter()
                .enumerate()
                .map(|(i, sec)| StartupSection {
                    section: StartupPlace::Section(sec.to_string()),
                    faults: counts(minor + i as u64, 0),
                    pages_touched: None,
                    pages_total: None,
                })
                .collect(),
            relocations: BTreeMap::new(),
            relr: 0,
            uses_relr: false,
            bind_now: false,
            relro: false,
            relocation_pages: 0,
            loader: ClassCounts::default(),
        };
        let report = StartupReport {
            program: None,
            pid: None,
            window: None,
            until: Until::Main,
            until_ms: Some(1.0),
            faults: counts(66, 0),
            objects: vec![
                object("/lib/a.so", 1),
                object("/lib/b.so", 10),
                object("/lib/c.so", 11),
            ],
            symbols: Vec::new(),
            hints: Vec::new(),
        };
        let text = to_text(&report, 2);
        let lines: Vec<&str> = text.lines().collect();
        // The two busiest objects, each with its two busiest sections.
        let c = lines.iter().position(|l| l.starts_with("c.so")).unwrap();
        let b = lines.iter().position(|l| l.starts_with("b.so")).unwrap();
        assert!(c < b, "{text}");
        assert!(lines[c + 1].trim_start().starts_with(".text"), "{text}");
        assert!(lines[c + 2].trim_start().starts_with(".bss"), "{text}");
        assert!(lines[c + 3].contains("and 1 more sections"), "{text}");
        assert!(lines[c + 3].split_whitespace().any(|w| w == "11"), "{text}");
        assert!(!text.contains("a.so"), "{text}");
        let more = lines
            .iter()
            .find(|l| l.starts_with("and 1 more objects"))
            .unwrap();
        assert!(more.split_whitespace().any(|w| w == "3"), "{text}");
    }
}
