//! `report.txt`: the report model as text for a person, within 100 columns;
//! and the lines index.html shows as they are (the command line, the
//! completeness line, how the call stacks were recorded).

use std::fmt::Write as _;

use crate::analysis::classify::FaultClass;
use crate::analysis::latency::LatencyStats;
use crate::format::call_graph::CallGraph;
use crate::format::perf_data::Exit;
use crate::format::recorder::Collector;
use crate::model::report::{FileRow, ProcessRow, Report, TargetRow};
use crate::text::{
    human_ns, short, short_ns, site_label, thousands, truncate, truncate_file_name, wrap,
};
use crate::unwind::{StackNeed, UnwindStats, MAX_DWARF_FRAMES, MAX_STACK_BYTES};

/// `report.txt`: the summary, then tables of `top` rows.
pub fn report_txt(report: &Report, top: usize) -> String {
    let mut s = String::new();
    summary(&mut s, report);
    access_table(&mut s, report);
    top_sites(&mut s, report, top);
    top_targets(&mut s, report, top);
    latency(&mut s, report);
    resident(&mut s, report, top);
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
                command_line(&report.command)
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
    for line in wrap(&completeness_line(report), 100, 2) {
        let _ = writeln!(s, "{line}");
    }
    let cow = if t.cow_available {
        thousands(t.faults.cow)
    } else {
        "unavailable".into()
    };
    let _ = writeln!(
        s,
        "faults: minor {}  major {} (file {}, swap {})  cow {}  | in kernel mode {}",
        thousands(t.faults.minor),
        thousands(t.faults.major),
        thousands(t.major_file),
        thousands(t.major_swap),
        cow,
        thousands(t.kernel_mode)
    );
    if let Some(line) = stacks_text(report) {
        let _ = writeln!(s, "{line}");
    }
}

/// The command as a shell would need it typed: arguments with spaces or
/// quotes are single-quoted.
pub fn command_line(command: &[String]) -> String {
    let quote = |arg: &String| {
        let plain = |c: char| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c);
        if !arg.is_empty() && arg.chars().all(plain) {
            arg.clone()
        } else {
            format!("'{}'", arg.replace('\'', r"'\''"))
        }
    };
    command.iter().map(quote).collect::<Vec<_>>().join(" ")
}

/// The completeness line: `captured 262,144 of 262,144 faults (100.0%);
/// lost records: 0`, with the stacks cut short and `INCOMPLETE` when so.
pub fn completeness_line(report: &Report) -> String {
    let t = &report.totals;
    let captured = report.captured();
    let mut line = match (report.kernel_sampled(), report.captured_pct()) {
        (Some(kernel), Some(pct)) => {
            let sampled = if report.period > 1 {
                format!(" (1 in {} sampled)", report.period)
            } else {
                String::new()
            };
            // pfprof's own faults (system-wide) are in the kernel's
            // count but left out: name them, so the gap has its reason.
            let own = match t.pfprof_faults {
                0 => String::new(),
                n => format!(
                    "; pfprof's own {} left out, so {:.1}% of the others",
                    thousands(n),
                    if kernel <= n {
                        100.0
                    } else {
                        captured as f64 * 100.0 / (kernel - n) as f64
                    }
                ),
            };
            // An interval's count was read while faults went on.
            let spread = t.kernel_spread.map_or(String::new(), |n| {
                format!("; the kernel's ±{} at the edges", thousands(n))
            });
            format!(
                "captured {} of {} faults ({pct:.1}%{own}{spread}){sampled}; lost records: {}",
                thousands(captured),
                thousands(kernel),
                thousands(t.lost)
            )
        }
        _ => format!(
            "captured {} faults; kernel count unavailable; lost records: {}",
            thousands(captured),
            thousands(t.lost)
        ),
    };
    if let Some(n) = report.skipped_by_kernel() {
        let _ = write!(line, "; skipped by the kernel: {}", thousands(n));
    }
    let dwarf = matches!(t.call_graph, Some(CallGraph::Dwarf { .. }));
    if dwarf || (t.call_graph == Some(CallGraph::Fp) && t.truncated_stacks > 0) {
        let _ = write!(
            line,
            "; truncated stacks: {}",
            thousands(t.truncated_stacks)
        );
    }
    if report.incomplete() {
        line.push_str(" — INCOMPLETE");
    }
    line
}

/// How the call stacks were recorded, and how many stopped early (one line
/// or several), for report.txt and index.html.
pub fn stacks_text(report: &Report) -> Option<String> {
    Some(match report.totals.call_graph? {
        CallGraph::Dwarf { stack_bytes } => dwarf_stacks(report, stack_bytes),
        CallGraph::Fp => fp_stacks(report),
        mode @ CallGraph::None => format!("call stacks: {mode}"),
    })
}

/// Stacks unwound while recording: who copied how much, what 99% needed,
/// why stacks stopped early, frames found without CFI.
fn dwarf_stacks(report: &Report, stack_bytes: u32) -> String {
    let t = &report.totals;
    let copies = match t.collector {
        Some(Collector::Bpf) => format!("BPF copies ≤ {stack_bytes} bytes"),
        _ => format!("{stack_bytes}-byte stack copies"),
    };
    let mut line = format!(
        "call stacks: dwarf ({copies}, unwound while recording)\n\
         truncated stacks: {} of {}",
        thousands(t.truncated_stacks),
        thousands(report.captured())
    );
    if let Some(u) = t.unwind.as_ref().filter(|u| u.truncated() > 0) {
        truncation_reasons(&mut line, report, u, stack_bytes);
    }
    // How deep the stacks were, in words that say what to do.
    let needed = t.unwind.as_ref().and_then(|u| u.p99_stack_needed());
    match needed {
        Some(StackNeed::AtMost(n)) => {
            let _ = write!(
                line,
                "\nstack depth: 99% of stacks fit in their first {n} bytes"
            );
        }
        Some(StackNeed::MoreThanCopied)
            if t.unwind.as_ref().is_some_and(|u| u.pressed_copies > 0) =>
        {
            let _ = write!(
                line,
                "\nstack depth: over 1% of stacks are deeper than the copies held ({stack_bytes} \
                 bytes, 1 KiB while the ring was filling)"
            );
        }
        Some(StackNeed::MoreThanCopied) => {
            let _ = write!(
                line,
                "\nstack depth: over 1% of stacks are deeper than the {stack_bytes} bytes copied"
            );
        }
        None => {}
    }
    // A line of its own: beside the depth it passed 100 columns.
    if let Some(u) = t.unwind.as_ref().filter(|u| u.remembered > 0) {
        let _ = write!(
            line,
            "\nremembered stacks: {} (the collector's, not unwound again)",
            thousands(u.remembered)
        );
    }
    if let Some(u) = t
        .unwind
        .as_ref()
        .filter(|u| u.jit_frames + u.frame_pointer_steps > 0)
    {
        // Checked steps, but guesses all the same: say so.
        let _ = write!(
            line,
            "\nframes found by frame pointers (no CFI): {} in JIT code, {} in code \
             without an FDE",
            thousands(u.jit_frames),
            thousands(u.frame_pointer_steps)
        );
    }
    if let Some(bad) = t.unwind.as_ref().map(|u| u.bad_records).filter(|&n| n > 0) {
        let _ = write!(line, "\nsamples that did not parse: {}", thousands(bad));
    }
    line
}

/// Why dwarf stacks stopped early, and where the unwinder's counts (over
/// every sample) and the report's part; the advice to copy more stack.
fn truncation_reasons(line: &mut String, report: &Report, u: &UnwindStats, stack_bytes: u32) {
    let truncated = report.totals.truncated_stacks;
    let _ = write!(
        line,
        "\n  stack copy too small {}, stack not readable {}, no unwind info {}, \
         bad unwind info {}",
        thousands(u.stack_copy),
        thousands(u.stack_unreadable),
        thousands(u.no_unwind_info),
        thousands(u.corrupt)
    );
    if u.too_deep > 0 {
        let _ = write!(
            line,
            ", deeper than {MAX_DWARF_FRAMES} frames {}",
            thousands(u.too_deep)
        );
    }
    // The reasons are counted while unwinding, over every sample (pfprof's
    // own included); say where they and the report's total part.
    match truncated.cmp(&u.truncated()) {
        std::cmp::Ordering::Greater => {
            let _ = write!(
                line,
                ", cut after unwinding {} (no known image for the \
                 registers, or the kernel's frame limit)",
                thousands(truncated - u.truncated())
            );
        }
        std::cmp::Ordering::Less => {
            let _ = write!(
                line,
                " (reasons over all {} samples unwound, of which {} \
                 were left out of this profile)",
                thousands(u.samples),
                thousands(u.samples.saturating_sub(report.captured()))
            );
        }
        std::cmp::Ordering::Equal => {}
    }
    if u.pressed_copies > 0 {
        let _ = write!(
            line,
            "\n  stack copies cut to 1 KiB while the ring was more than half full (the \
             recorder behind; the faults kept): {}",
            thousands(u.pressed_copies)
        );
    }
    // Chains cut by copies the ring's pressure shortened need no more stack.
    if u.stack_copy > 0 && u.pressed_copies == 0 && stack_bytes < MAX_STACK_BYTES {
        let _ = write!(
            line,
            "\n  copy more stack with --call-graph dwarf,{}",
            (stack_bytes * 2).min(MAX_STACK_BYTES)
        );
    }
}

/// Frame-pointer stacks walked by the kernel, and those cut at its limit.
fn fp_stacks(report: &Report) -> String {
    let t = &report.totals;
    let mut line = "call stacks: fp (frame pointers walked by the kernel: callers of code\n  \
                    without frame pointers are lost; --call-graph dwarf keeps them)"
        .to_string();
    if t.truncated_stacks > 0 {
        let _ = write!(
            line,
            "\ntruncated stacks: {} of {} (cut at the kernel's frame limit, \
             kernel.perf_event_max_stack)",
            thousands(t.truncated_stacks),
            thousands(report.captured())
        );
    }
    line
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
        let row = report.by_access.of(class);
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
            let place = site_label(&r.function, r.file.as_deref(), r.line);
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

/// Resident memory at the peak and at exit (beside the kernel's own
/// count), with the sites that hold most.
fn resident(s: &mut String, report: &Report, top: usize) {
    let Some(r) = &report.resident else {
        return;
    };
    let _ = writeln!(
        s,
        "\nResident memory (KiB), by the fault that made it present:"
    );
    let _ = writeln!(
        s,
        "  {:<24}  {:>11}  {:>11}  {:>11}  {:>11}",
        "", "total", "anon", "file", "shmem"
    );
    let row = |s: &mut String, what: &str, k: &crate::model::report::KindKib| {
        let _ = writeln!(
            s,
            "  {:<24}  {:>11}  {:>11}  {:>11}  {:>11}",
            what,
            thousands(k.total),
            thousands(k.anon),
            thousands(k.file),
            thousands(k.shmem)
        );
    };
    let peak = r.peak.time_ns.map_or_else(
        || "at the peak".to_string(),
        |ns| format!("at the peak ({:.1} ms)", ns as f64 / 1e6),
    );
    for (what, moment) in [(peak.as_str(), &r.peak), ("at exit", &r.end)] {
        row(s, what, &moment.kib);
        if let Some(k) = &moment.kernel_kib {
            let _ = writeln!(
                s,
                "  {:<24}  {:>11}  {:>11}  {:>11}  {:>11}",
                "  the kernel's count",
                "",
                k.anon.map(thousands).unwrap_or_default(),
                thousands(k.file),
                thousands(k.shmem)
            );
        }
        if let Some(k) = &moment.reconciled_kib {
            row(s, "  of which taken back", k);
        }
    }
    if r.peak.reconciled_kib.is_some() || r.end.reconciled_kib.is_some() {
        let _ = writeln!(
            s,
            "  (taken back: what the kernel reclaimed without a syscall that frees memory\n   \
             (memory pressure, MADV_PAGEOUT); the sites below still count it)"
        );
    }
    for line in crate::text::wrap(&format!("(not seen: {})", r.unseen), 78, 3) {
        let _ = writeln!(s, "  {}", line.trim_start());
    }
    for (title, moment) in [("at the peak", &r.peak), ("at exit", &r.end)] {
        if moment.top.is_empty() {
            continue;
        }
        let _ = writeln!(
            s,
            "{:>9}  {:<5}  {:<44}  target ({title})",
            "KiB", "kind", "function"
        );
        for site in moment.top.iter().take(top) {
            let _ = writeln!(
                s,
                "{:>9}  {:<5}  {:<44}  {}",
                thousands(site.kib),
                site.kind,
                truncate(&site.function, 44),
                target_column(&site.target)
            );
        }
    }
}

/// Per class with measured faults, their latency.
fn latency(s: &mut String, report: &Report) {
    for class in FaultClass::ALL {
        let stats = report.latency.of(class);
        if stats.count > 0 {
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

    /// report.txt layout, 100 columns at most.
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

    /// Commands are shown as they would be typed.
    #[test]
    fn command_quoting() {
        for (args, want) in [
            (
                vec!["python3", "-c", "import json, sqlite3"],
                "python3 -c 'import json, sqlite3'",
            ),
            (vec!["sh", "-c", "echo 'hi'"], r"sh -c 'echo '\''hi'\'''"),
            (vec!["./app", "--size=1G", ""], "./app --size=1G ''"),
        ] {
            let command: Vec<String> = args.into_iter().map(String::from).collect();
            assert_eq!(command_line(&command), want);
        }
    }

    /// The completeness line and the pictures' totals from the counts:
    /// complete; ring buffer overrun; faults missing with no lost record;
    /// pfprof's own left out; no kernel counts.
    #[test]
    fn completeness_lines() {
        let cases = [
            ((1000, 0, 0, Some(1000)), "captured 1,000 of 1,000 faults (100.0%); lost records: 0; truncated stacks: 0",
             "1,000 faults: captured 1,000 (100.0%), lost 0 records"),
            ((0, 12_344, 0, Some(12_344)), "captured 0 of 12,344 faults (0.0%); lost records: 12,344; truncated stacks: 0 — INCOMPLETE",
             "12,344 faults: captured 0 (0.0%), lost 12,344 records — results incomplete"),
            ((900, 0, 0, Some(1000)), "captured 900 of 1,000 faults (90.0%); lost records: 0; truncated stacks: 0 — INCOMPLETE",
             "1,000 faults: captured 900 (90.0%), lost 0 records — results incomplete"),
            ((900, 0, 100, Some(1000)), "captured 900 of 1,000 faults (90.0%; pfprof's own 100 left out, so 100.0% of the others); lost records: 0; truncated stacks: 0",
             "1,000 faults: captured 900 (90.0%), lost 0 records"),
            ((900, 100, 0, None), "captured 900 faults; kernel count unavailable; lost records: 100; truncated stacks: 0 — INCOMPLETE",
             "captured 900 faults (kernel count unavailable), lost 100 records — results incomplete"),
        ];
        for ((captured, lost, own, kernel), line, totals) in cases {
            let r = crate::model::report::tests::completeness_case(captured, lost, own, kernel);
            assert_eq!(completeness_line(&r), line);
            assert_eq!(crate::output::picture::totals_line(&r), totals);
        }
        // An interval's count, read while faults went on.
        let mut r = crate::model::report::tests::completeness_case(995, 0, 0, Some(1000));
        r.totals.kernel_spread = Some(7);
        assert_eq!(
            completeness_line(&r),
            "captured 995 of 1,000 faults (99.5%; the kernel's ±7 at the edges); lost records: 0; truncated stacks: 0"
        );
        // Faults the kernel counted without running the collector.
        let mut r = crate::model::report::tests::completeness_case(997, 0, 0, Some(1000));
        r.totals.collector_skipped = Some(3);
        assert_eq!(
            completeness_line(&r),
            "captured 997 of 1,000 faults (99.7%); lost records: 0; skipped by the kernel: 3; truncated stacks: 0 — INCOMPLETE"
        );
        assert_eq!(
            crate::output::picture::totals_line(&r),
            "1,000 faults: captured 997 (99.7%), lost 0 records, 3 skipped by the kernel — results incomplete"
        );
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
