//! `report.txt`: the report model as text for a person, within 100 columns.

use std::fmt::Write as _;

use crate::analysis::classify::FaultClass;
use crate::analysis::latency::LatencyStats;
use crate::format::perf_data::Exit;
use crate::model::report::{FileRow, ProcessRow, Report, TargetRow};
use crate::text::{human_ns, short, short_ns, thousands, truncate, truncate_file_name, wrap};

/// `report.txt`: the summary, then tables of `top` rows.
pub fn report_txt(report: &Report, top: usize) -> String {
    let mut s = String::new();
    summary(&mut s, report);
    access_table(&mut s, report);
    top_sites(&mut s, report, top);
    top_targets(&mut s, report, top);
    latency(&mut s, report);
    startup(&mut s, report, top);
    files(&mut s, report, top);
    processes(&mut s, report, top);
    warnings(&mut s, report);
    s
}

/// The head: command line, exit, completeness, and the fault totals.
fn summary(s: &mut String, report: &Report) {
    let t = &report.totals;
    let _ = writeln!(
        s,
        "{}",
        truncate(
            &format!(
                "pfprof {}: {}",
                report.pfprof_version,
                report.command_line()
            ),
            100
        )
    );
    match &report.exit {
        Some(Exit::Code(c)) => {
            let _ = writeln!(s, "exit status {c}");
        }
        Some(Exit::Signal(sig)) => {
            let _ = writeln!(s, "killed by signal {sig}");
        }
        None => {}
    }
    for line in wrap(&report.completeness_line(), 100, 2) {
        let _ = writeln!(s, "{line}");
    }
    let cow = if t.cow_available {
        thousands(t.cow)
    } else {
        "unavailable".into()
    };
    let _ = writeln!(
        s,
        "faults: minor {}  major {} (file {}, swap {})  cow {}  | in kernel mode {}",
        thousands(t.minor),
        thousands(t.major),
        thousands(t.major_file),
        thousands(t.major_swap),
        cow,
        thousands(t.kernel_mode)
    );
    if let Some(line) = report.stacks_line() {
        let _ = writeln!(s, "{line}");
    }
}

/// Faults by class and access, then the faults that could not be fully read.
fn access_table(s: &mut String, report: &Report) {
    let t = &report.totals;
    let _ = writeln!(
        s,
        "\n{:<8}{:>12}{:>12}{:>12}{:>12}",
        "class", "read", "write", "exec", "unknown"
    );
    for class in FaultClass::ALL {
        if class == FaultClass::Cow && !t.cow_available {
            continue;
        }
        let row = report.by_access.class(class);
        let _ = writeln!(
            s,
            "{:<8}{:>12}{:>12}{:>12}{:>12}",
            class.name(),
            thousands(row.read),
            thousands(row.write),
            thousands(row.exec),
            thousands(row.unknown)
        );
    }
    if t.unpaired > 0 || t.bad_records > 0 || t.no_callchain > 0 {
        let _ = writeln!(
            s,
            "\nwithout error code: {}  bad records: {}  without call chain: {}",
            thousands(t.unpaired),
            thousands(t.bad_records),
            thousands(t.no_callchain)
        );
    }
}

/// Per class, the `top` code sites with the place they faulted on.
fn top_sites(s: &mut String, report: &Report, top: usize) {
    for class in FaultClass::ALL {
        let rows = report.top_sites(class, top);
        if rows.is_empty() {
            continue;
        }
        let _ = writeln!(s, "\nTop {} code sites ({}):", class.name(), rows.len());
        let _ = writeln!(
            s,
            "{:>9}  {:<5}  {:<44}  target",
            "faults", "acc", "function (file:line)"
        );
        for r in rows {
            let place = match (&r.file, r.line) {
                (Some(f), Some(l)) => format!("{} ({}:{l})", r.function, short(f)),
                _ => r.function.clone(),
            };
            let _ = writeln!(
                s,
                "{:>9}  {:<5}  {:<44}  {}",
                thousands(r.count),
                r.access.name(),
                truncate(&place, 44),
                target_column(&r.target)
            );
        }
    }
}

/// A code site's target column, 34 columns: object, section, symbol.
fn target_column(target: &TargetRow) -> String {
    // Section and symbol matter most: the object gets what they
    // leave (at least 12), then they share the rest, each cut once.
    let detail: usize = [&target.section, &target.symbol]
        .into_iter()
        .flatten()
        .map(|p| p.chars().count() + 1)
        .sum();
    let object_width = 34usize.saturating_sub(detail).max(12);
    let object = truncate_file_name(short(&target.object), object_width);
    // The section stays whole (sections are short); the symbol
    // takes what is left.
    let mut column = object;
    let mut room = 34usize.saturating_sub(column.chars().count());
    for part in [&target.section, &target.symbol].into_iter().flatten() {
        if room < 2 {
            break;
        }
        let part = truncate(part, room - 1);
        room -= part.chars().count() + 1;
        column.push(' ');
        column.push_str(&part);
    }
    column
}

/// Per class, the `top` targets (object, region, section) faulted on.
fn top_targets(s: &mut String, report: &Report, top: usize) {
    for class in FaultClass::ALL {
        let rows = report.top_targets(class, top);
        if rows.is_empty() {
            continue;
        }
        let _ = writeln!(s, "\nTop {} targets:", class.name());
        let _ = writeln!(
            s,
            "{:>9}  {:<50}  {:<6}  section",
            "faults", "object", "region"
        );
        for r in rows {
            let _ = writeln!(
                s,
                "{:>9}  {:<50}  {:<6}  {}",
                thousands(r.count),
                truncate_file_name(short(&r.object), 50),
                r.region,
                r.section.as_deref().unwrap_or("-")
            );
        }
    }
}

/// Per class with measured faults, their latency.
fn latency(s: &mut String, report: &Report) {
    for class in FaultClass::ALL {
        if let Some(stats) = report.latency.get(class.name()).filter(|s| s.count > 0) {
            let _ = writeln!(s);
            s.push_str(&latency_text(stats, class.name()));
        }
    }
}

/// The start-up window shown, then the other processes' start-ups.
fn startup(s: &mut String, report: &Report, top: usize) {
    if let Some(startup) = &report.startup {
        let _ = writeln!(s);
        s.push_str(&crate::output::startup::to_text(startup, top));
    }
    let shown = report.startup.as_ref().and_then(|s| s.window);
    s.push_str(&crate::output::startup::others_text(
        &report.startups,
        shown,
        top,
    ));
}

/// The `top` files by major faults (none if no file had one).
fn files(s: &mut String, report: &Report, top: usize) {
    let majors: Vec<&FileRow> = report
        .files
        .iter()
        .filter(|f| f.major > 0)
        .take(top)
        .collect();
    if majors.is_empty() {
        return;
    }
    let _ = writeln!(s, "\nFiles by major faults:");
    let _ = writeln!(
        s,
        "{:>9} {:>9} {:>9} {:>9}  path",
        "major", "swap-in", "minor", "cow"
    );
    for f in majors {
        let _ = writeln!(
            s,
            "{:>9} {:>9} {:>9} {:>9}  {}",
            thousands(f.major),
            thousands(f.swap),
            thousands(f.minor),
            thousands(f.cow),
            truncate(&f.path, 58)
        );
    }
}

/// The `top` processes by faults, the rest summed in one line; those
/// without any (kernel threads, idle processes of a system-wide run)
/// only counted.
fn processes(s: &mut String, report: &Report, top: usize) {
    let faulting: Vec<_> = report
        .processes
        .iter()
        .filter(|p| p.minor + p.major + p.cow > 0)
        .collect();
    let _ = writeln!(
        s,
        "\nProcesses by faults ({} of {} had faults):",
        thousands(faulting.len() as u64),
        thousands(report.processes.len() as u64)
    );
    let _ = writeln!(
        s,
        "{:>8} {:>8}  {:<16} {:>10} {:>10} {:>10} {:>8}",
        "pid", "ppid", "comm", "minor", "major", "cow", "threads"
    );
    for p in faulting.iter().take(top) {
        let _ = writeln!(
            s,
            "{:>8} {:>8}  {:<16} {:>10} {:>10} {:>10} {:>8}",
            p.pid,
            p.ppid,
            truncate(&p.comm, 16),
            thousands(p.minor),
            thousands(p.major),
            thousands(p.cow),
            p.threads
        );
        if !p.execs.is_empty() {
            // One pid ran several programs (a wrapper that exec'd the next).
            let names: Vec<&str> = p.execs.iter().map(|e| crate::text::short(e)).collect();
            let _ = writeln!(s, "{:>19}exec'd {}", "", truncate(&names.join(" → "), 74));
        }
    }
    if faulting.len() > top {
        let rest = &faulting[top..];
        let sum = |f: fn(&&ProcessRow) -> u64| rest.iter().map(f).sum::<u64>();
        let _ = writeln!(
            s,
            "{:>8} {:>8}  {:<16} {:>10} {:>10} {:>10}",
            "",
            "",
            format!("and {} more", thousands(rest.len() as u64)),
            thousands(sum(|p| p.minor)),
            thousands(sum(|p| p.major)),
            thousands(sum(|p| p.cow)),
        );
    }
}

/// The warnings, wrapped.
fn warnings(s: &mut String, report: &Report) {
    if report.warnings.is_empty() {
        return;
    }
    let _ = writeln!(s, "\nWarnings:");
    for w in &report.warnings {
        for line in wrap(&w.to_string(), 98, 4) {
            let _ = writeln!(s, "  {line}");
        }
    }
}
/// `minor latency: 262,144 faults, p50 1.1µs p90 1.6µs p99 4.2µs max 1.2ms`
/// and the histogram.
fn latency_text(stats: &LatencyStats, class: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{class} latency: {} faults, p50 {} p90 {} p99 {} max {}",
        thousands(stats.count),
        human_ns(stats.p50_ns),
        human_ns(stats.p90_ns),
        human_ns(stats.p99_ns),
        human_ns(stats.max_ns)
    );
    let widest = stats
        .log2_hist
        .iter()
        .map(|b| b.count)
        .max()
        .unwrap_or(0)
        .max(1);
    for b in &stats.log2_hist {
        let bar = "@".repeat(((b.count * 52).div_ceil(widest)) as usize);
        let _ = writeln!(
            s,
            "[{:>6}, {:>6}) {:>10} |{bar:<52}|",
            short_ns(b.lo_ns),
            short_ns(b.hi_ns),
            thousands(b.count)
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::report::tests::{golden, sample_report};

    #[test]
    fn golden_text() {
        let text = report_txt(&sample_report(), 10);
        for line in text.lines() {
            assert!(
                line.chars().count() <= 100,
                "line over 100 columns: {line:?}"
            );
        }
        golden("report.txt", &text);
    }

    /// The target column keeps section and symbol, cutting the object
    /// first (to 12 at least), then the symbol; never over 34 columns.
    #[test]
    fn target_column_widths() {
        let target = |object: &str, section: Option<&str>, symbol: Option<&str>| TargetRow {
            object: object.into(),
            region: crate::model::report::Region::File,
            section: section.map(Into::into),
            symbol: symbol.map(Into::into),
        };
        assert_eq!(
            target_column(&target("/usr/lib/libc.so.6", Some(".data"), Some("x"))),
            "libc.so.6 .data x"
        );
        assert_eq!(target_column(&target("[heap]", None, None)), "[heap]");
        let long = target_column(&target(
            "/usr/lib/libsomething-with-a-very-long-name.so.1",
            Some(".data.rel.ro"),
            Some("a_rather_long_symbol_name_that_goes_on"),
        ));
        assert!(long.chars().count() <= 34, "{long}");
        assert!(long.contains(" .data.rel.ro "), "{long}");
    }
}
