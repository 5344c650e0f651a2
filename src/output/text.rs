//! `report.txt`: the report model as text for a person, within 100 columns.

use std::fmt::Write as _;

use crate::analysis::classify::FaultClass;
use crate::format::perf_data::Exit;
use crate::model::report::{FileRow, Report};
use crate::text::{short, thousands, truncate, truncate_file_name, wrap};

/// `report.txt`: the summary, then tables of `top` rows.
pub fn report_txt(report: &Report, top: usize) -> String {
    let mut s = String::new();
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
            // Section and symbol matter most: the object gets what they
            // leave (at least 12), then they share the rest, each cut once.
            let detail: usize = [&r.target.section, &r.target.symbol]
                .into_iter()
                .flatten()
                .map(|p| p.chars().count() + 1)
                .sum();
            let object_width = 34usize.saturating_sub(detail).max(12);
            let object = truncate_file_name(short(&r.target.object), object_width);
            // The section stays whole (sections are short); the symbol
            // takes what is left.
            let mut target = object;
            let mut room = 34usize.saturating_sub(target.chars().count());
            for part in [&r.target.section, &r.target.symbol].into_iter().flatten() {
                if room < 2 {
                    break;
                }
                let part = truncate(part, room - 1);
                room -= part.chars().count() + 1;
                target.push(' ');
                target.push_str(&part);
            }
            let _ = writeln!(
                s,
                "{:>9}  {:<5}  {:<44}  {}",
                thousands(r.count),
                r.access.name(),
                truncate(&place, 44),
                target
            );
        }
    }
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
    for class in FaultClass::ALL {
        if let Some(stats) = report.latency.get(class.name()).filter(|s| s.count > 0) {
            let _ = writeln!(s);
            s.push_str(&stats.to_text(class.name()));
        }
    }
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
    let majors: Vec<&FileRow> = report
        .files
        .iter()
        .filter(|f| f.major > 0)
        .take(top)
        .collect();
    if !majors.is_empty() {
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
    // Processes by faults; those without any (kernel threads, idle
    // processes of a system-wide run) only counted.
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
        let sum =
            |f: fn(&&crate::model::report::ProcessRow) -> u64| rest.iter().map(f).sum::<u64>();
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
    if !report.warnings.is_empty() {
        let _ = writeln!(s, "\nWarnings:");
        for w in &report.warnings {
            for line in wrap(w, 98, 4) {
                let _ = writeln!(s, "  {line}");
            }
        }
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
}
