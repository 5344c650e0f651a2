//! The `pfprof` binary: parse the command line, run, map errors to exit codes.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Parser;

use pfprof::analysis::{self, AnalyzeOptions};
use pfprof::cli::{Action, Cli, DiffArgs, FlamegraphArgs, Format, RecordArgs, ReportArgs};
use pfprof::format::outdir::{OutDir, Staging, DATA_FILE};
use pfprof::format::perf_data::Exit;
use pfprof::output::startup;
use pfprof::output::text as text_out;
use pfprof::output::{diff, diff_svg, flamegraph, html, picture, pprof};
use pfprof::recording::{
    analyze_and_resolve, build_id_caches, cache_root, data_path, recording_dir, Keep,
};
use pfprof::{error, record, text};

/// `--startup-of NAME` must name a program that has a start-up window.
fn startup_of_known(report: &pfprof::model::report::Report, of: Option<&str>) -> Result<()> {
    let Some(of) = of else { return Ok(()) };
    if report.startup.is_some() || report.startups.is_empty() {
        return Ok(());
    }
    let mut programs: Vec<String> = report
        .startups
        .iter()
        .map(|w| format!("{} [pid {}]", w.program, w.pid))
        .collect();
    programs.dedup();
    let more = programs.len().saturating_sub(10);
    programs.truncate(10);
    let more = if more > 0 {
        format!(" and {more} more")
    } else {
        String::new()
    };
    anyhow::bail!(
        "--startup-of {}: no start-up faults of such a program; the start-up windows are {}{more}",
        text::safe(of),
        programs.join(", ")
    )
}

/// The error, saying where the recording stays (same exit code).
fn kept_in(e: anyhow::Error, partial: &str) -> anyhow::Error {
    error::CodedError::new(
        error::exit_code(&e),
        format!(
            "{}; what was recorded stays in {partial} (`pfprof report -i {partial}` reads it)",
            error::one_line(&e)
        ),
    )
    .into()
}

/// `record --interval`: a profile per interval, written as the records
/// arrive, until Ctrl-C, SIGTERM or `--duration`.
fn record_intervals(
    args: &pfprof::cli::RecordArgs,
    target: record::Target,
    secs: f64,
) -> Result<u8> {
    pfprof::continuous::prepare_dir(&args.output)?;
    let data_path = args.keep_recording.then(|| args.output.join(DATA_FILE));
    let config = args.record_config(target, data_path);
    let mut tap = pfprof::continuous::Continuous::new(pfprof::continuous::Settings {
        destination: pfprof::continuous::Destination::Dir(args.output.clone()),
        interval: std::time::Duration::from_secs_f64(secs),
        keep: args.keep.map(|n| n as usize),
        options: AnalyzeOptions {
            kernel: args.analysis.kernel,
            symfs: args.analysis.symfs.clone(),
            ..AnalyzeOptions::default()
        },
        top: args.top,
        verbose: !args.quiet,
    });
    let recorded = record::record(&config, Some(&mut tap))?;
    let summary = tap.summary()?;
    let missing = if summary.lost > 0 {
        format!(", {} records lost", text::thousands(summary.lost))
    } else {
        String::new()
    };
    let kernel = summary.kernel.map_or(String::new(), |kernel| {
        format!(" of the kernel's {}", text::thousands(kernel))
    });
    eprintln!(
        "pfprof: wrote {} intervals into {} ({} faults{kernel}{missing}; {} older intervals deleted)",
        summary.written,
        args.output.display(),
        text::thousands(summary.faults),
        summary.deleted
    );
    if summary.lost > 0 {
        eprintln!(
            "pfprof: warning: {} records were lost (each interval's report counts its own)",
            text::thousands(summary.lost)
        );
    }
    if let Some(why) = &recorded.write_error {
        eprintln!("pfprof: error: the recording is partial: {why}");
        return Ok(error::exit::PROFILE_NOT_WRITTEN);
    }
    if summary.stretched > 0 {
        eprintln!(
            "pfprof: note: {} intervals ran longer than {secs} s: the thread writing them was still \
             busy with the one before (each names its length)",
            text::thousands(summary.stretched)
        );
    }
    if summary.failed > 0 {
        eprintln!(
            "pfprof: error: {} intervals could not be written",
            text::thousands(summary.failed)
        );
        return Ok(error::exit::PROFILE_NOT_WRITTEN);
    }
    Ok(0)
}

/// `record`'s exit code when the profile was not written (or only in part):
/// the command's own failure, else [`error::exit::PROFILE_NOT_WRITTEN`].
fn not_written(command_status: u8) -> u8 {
    if command_status != 0 {
        command_status
    } else {
        error::exit::PROFILE_NOT_WRITTEN
    }
}

/// `pfprof archive DIR`: the binaries the recording names, copied into
/// `DIR/.build-id`. Exit 1 when one with a build-id could not be.
fn archive(args: &pfprof::cli::ArchiveArgs) -> Result<u8> {
    let data = data_path(&args.input)?;
    let dir = recording_dir(&args.input);
    if !pfprof::format::outdir::is_pfprof_recording(&data) {
        return Err(error::CodedError::new(
            error::exit::CONFIG,
            format!(
                "{} is not a pfprof recording directory (archive writes into the directory `record -o` made)",
                args.input.display()
            ),
        )
        .into());
    }
    let options = AnalyzeOptions {
        symfs: args.symfs.clone(),
        build_id_caches: build_id_caches(&data, args.buildid_dir.as_deref()),
        ..AnalyzeOptions::default()
    };
    let profile = analysis::analyze(&data, options)?;
    let sources = pfprof::archive::Sources {
        symfs: args.symfs.clone(),
        caches: cache_root(args.buildid_dir.as_deref())
            .into_iter()
            .collect(),
    };
    let archive_dir = dir.join(pfprof::format::outdir::ARCHIVE_DIR);
    let (kept, without_id) = pfprof::archive::archive(&dir, &profile, &sources)
        .with_context(|| format!("cannot write {}", archive_dir.display()))?;
    for warning in &kept.warnings {
        eprintln!("pfprof: warning: {warning}");
    }
    if !without_id.is_empty() {
        eprintln!(
            "pfprof: warning: {} files have no build-id and are not archived (a report elsewhere reads them by path): {}",
            without_id.len(),
            without_id.join(", ")
        );
    }
    eprintln!(
        "pfprof: archived {} files ({}) into {} ({} there already); {} now reports its names without them",
        kept.added,
        text::human_bytes(kept.added_bytes),
        archive_dir.display(),
        kept.present,
        dir.display()
    );
    Ok(if kept.warnings.is_empty() { 0 } else { 1 })
}

/// `pfprof top`: the recording of `record -a` (or `-p`), shown live.
fn top(args: pfprof::cli::TopArgs) -> Result<u8> {
    use std::io::IsTerminal as _;
    args.check()?;
    pfprof::top::run(pfprof::top::TopSettings {
        record: args.record_config(),
        delay: std::time::Duration::from_secs_f64(args.delay),
        batch: args.batch || !std::io::stdout().is_terminal(),
        iterations: args.iterations,
        rows: args.top,
        options: AnalyzeOptions::default(),
    })
}

/// One function per subcommand.
fn run(cli: Cli) -> Result<u8> {
    match cli.action {
        Action::Top(args) => top(args),
        Action::Record(args) => run_record(&args),
        Action::Report(args) => run_report(&args),
        Action::Flamegraph(args) => run_flamegraph(&args),
        Action::Archive(args) => archive(&args),
        Action::Diff(args) => run_diff(&args),
    }
}

/// `pfprof record`: records into `DIR.partial`, analyses, writes every
/// output, renames it to DIR, and prints the report. The exit code is the
/// command's, else 4 (the profile not written) or 3 (`--max-lost`).
fn run_record(args: &RecordArgs) -> Result<u8> {
    args.check()?;
    let target = args.target();
    if let Some(secs) = args.interval {
        return record_intervals(args, target, secs);
    }
    // Refuses, before the command starts, to replace what is not
    // pfprof's; everything is written into DIR.partial first.
    let staging = Staging::begin(&args.output)?;
    let partial = staging.out_dir().path().display().to_string();
    let data_file = staging.out_dir().path().join(DATA_FILE);
    let (staging, mut recorded) = record_staged(args, target, staging, &data_file, &partial)?;
    // Attached and system-wide recordings end normally by Ctrl-C or
    // --duration; the processes keep running.
    let status = command_status(recorded.exit.as_ref());
    if std::env::var_os("PFPROF_TIMING").is_some() {
        if let Some((user, sys)) = pfprof::sys::procfs::own_cpu_seconds() {
            eprintln!("pfprof: timing: recording used {user:.2}s user, {sys:.2}s sys of CPU");
        }
    }
    let resolved = match write_outputs(args, staging, &data_file, &mut recorded, &partial) {
        Ok(resolved) => resolved,
        // The command ran: its own failure comes first, else the
        // profile's.
        Err(e) => {
            eprintln!("pfprof: error: {}", error::one_line(&kept_in(e, &partial)));
            return Ok(not_written(status));
        }
    };
    let report = &resolved.report;
    print_recorded(args, report, recorded.write_error.as_deref());
    if recorded.write_error.is_some() {
        return Ok(not_written(status));
    }
    let (missing, pct) = report.missing();
    match args.max_lost {
        // A failing command's own status comes first.
        Some(max) if pct > max && status == 0 => {
            eprintln!(
                "pfprof: error: {} faults ({pct:.1}%) were lost, more than --max-lost {max}%; exit status {}",
                text::thousands(missing),
                error::exit::TOO_MANY_LOST
            );
            Ok(error::exit::TOO_MANY_LOST)
        }
        _ => Ok(status),
    }
}

/// Records into `staging`, with the live stream when asked. An error
/// before the command ran (not found, permissions) leaves the previous
/// output where it was and no DIR.partial; a later one says where what was
/// recorded stays.
fn record_staged(
    args: &RecordArgs,
    target: record::Target,
    staging: Staging,
    data_file: &Path,
    partial: &str,
) -> Result<(Staging, record::Recorded)> {
    let config = args.record_config(target, Some(data_file.to_path_buf()));
    let mut live = args
        .stream
        .map(|kind| pfprof::live::Live::new(kind, args.fixed_ts, args.analysis.kernel));
    let tap = live.as_mut().map(|l| l as &mut dyn record::Tap);
    match record::record(&config, tap) {
        Ok(recorded) => Ok((staging, recorded)),
        Err(e) if error::exit_code(&e) != error::exit::OTHER || !staging.holds_records() => {
            if let Err(cleanup) = staging.discard() {
                eprintln!("pfprof: warning: {}", error::one_line(&cleanup));
            }
            Err(e)
        }
        Err(e) => Err(kept_in(e, partial)),
    }
}

/// The command's exit status as `record` passes it on: its code, 128 + the
/// signal that killed it, 0 when there was no command.
fn command_status(exit: Option<&Exit>) -> u8 {
    match exit {
        Some(Exit::Code(code)) => *code as u8,
        Some(Exit::Signal(sig)) => 128 + *sig as u8,
        None => 0,
    }
}

/// Analyses the recording (keeping its JIT maps and binaries), writes every
/// output into `staging` and commits it to DIR; warns of a `--startup-of`
/// that names no program, once the outputs are there.
fn write_outputs(
    args: &RecordArgs,
    staging: Staging,
    data_file: &Path,
    recorded: &mut record::Recorded,
    partial: &str,
) -> Result<pfprof::model::Model> {
    let stopped = recorded.write_error.is_some();
    let keep = Keep {
        out_dir: staging.out_dir(),
        held: std::mem::take(&mut recorded.held_files),
        not_held: recorded.not_held,
        cache: cache_root(args.analysis.buildid_dir.as_deref())
            .filter(|_| !args.no_buildid_cache)
            .map(|root| (root, args.buildid_cache_limit.saturating_mul(1 << 20))),
    };
    let resolved = analyze_and_resolve(data_file, &args.analysis, stopped, Some(keep))?;
    pfprof::output::write_all(staging.out_dir(), &resolved, data_file, args.top)
        .with_context(|| format!("cannot write the outputs in {partial}"))?;
    staging.commit()?;
    // The outputs are written; a wrong name only warns here.
    let of = args.analysis.startup_of.as_deref();
    if let Err(e) = startup_of_known(&resolved.report, of) {
        eprintln!("pfprof: warning: {e:#}");
    }
    Ok(resolved)
}

/// The end of `record` on stderr: the report (or its completeness line
/// with -q), where the outputs are, a write error, and what is missing.
fn print_recorded(
    args: &RecordArgs,
    report: &pfprof::model::report::Report,
    write_error: Option<&str>,
) {
    if args.quiet {
        eprintln!(
            "pfprof: {}",
            pfprof::output::text::completeness_line(report)
        );
    } else {
        eprint!("{}", pfprof::output::text::report_txt(report, args.top));
    }
    eprintln!(
        "pfprof: wrote {}/{{index.html,report.txt,report.json,*.folded,*.svg,profile.pb.gz}}",
        args.output.display()
    );
    if let Some(why) = write_error {
        eprintln!("pfprof: error: the profile is partial: {why}");
    }
    // Loud, also with -q: the last lines a user sees say what is missing.
    for warning in report.warnings.iter().filter(|w| w.is_completeness()) {
        eprintln!("pfprof: warning: {warning}");
    }
}

/// `pfprof report`: the text report (or report.json, or the start-up
/// windows) on stdout.
fn run_report(args: &ReportArgs) -> Result<u8> {
    let resolved =
        analyze_and_resolve(&data_path(&args.input)?, &args.analysis, args.partial, None)?;
    startup_of_known(&resolved.report, args.analysis.startup_of.as_deref())?;
    let report = &resolved.report;
    let mut stdout = std::io::stdout().lock();
    match (args.format, args.startup) {
        (Format::Text, false) => {
            stdout.write_all(pfprof::output::text::report_txt(report, args.top).as_bytes())?
        }
        (Format::Text, true) => {
            match &report.startup {
                Some(window) => stdout.write_all(startup::to_text(window, args.top).as_bytes())?,
                None => writeln!(stdout, "no start-up faults in this recording")?,
            }
            let shown = report.startup.as_ref().and_then(|s| s.window);
            let others = startup::others_text(&report.startups, shown, args.top);
            stdout.write_all(others.as_bytes())?
        }
        (Format::Json, false) => {
            serde_json::to_writer_pretty(&mut stdout, report)?;
            writeln!(stdout)?;
        }
        (Format::Json, true) => {
            serde_json::to_writer_pretty(
                &mut stdout,
                &serde_json::json!({
                    "startup": report.startup,
                    "startups": report.startups,
                }),
            )?;
            writeln!(stdout)?;
        }
    }
    Ok(0)
}

/// `pfprof flamegraph`: every picture `record` writes (or one class's
/// flame graph), and profile.pb.gz.
fn run_flamegraph(args: &FlamegraphArgs) -> Result<u8> {
    args.check()?;
    let input = data_path(&args.input)?;
    let resolved = analyze_and_resolve(&input, &args.analysis, args.partial, None)?;
    startup_of_known(&resolved.report, args.analysis.startup_of.as_deref())?;
    let out_dir = OutDir::open_or_create(
        &args
            .output
            .clone()
            .unwrap_or_else(|| recording_dir(&args.input)),
    )?;
    let context = || format!("cannot write flame graphs in {}", out_dir.path().display());
    // Every picture `record` writes, from the one list it uses.
    match args.class {
        Some(class) => flamegraph::write_flamegraph(
            &out_dir,
            &pfprof::output::folded::fold(&resolved),
            class,
            &pfprof::output::picture::subtitle(&resolved.report),
        )
        .map(drop),
        // index.html's tables show as many rows as report.txt's default.
        None => pfprof::output::write_pictures(&out_dir, &resolved, 10),
    }
    .with_context(context)?;
    pprof::write_recording(&out_dir, &resolved, &input).with_context(|| {
        format!(
            "cannot write {} in {}",
            pprof::FILE_NAME,
            out_dir.path().display()
        )
    })?;
    let page = match args.class {
        Some(_) => String::new(),
        None => format!("{}, ", html::FILE_NAME),
    };
    eprintln!(
        "pfprof: wrote {page}flame graphs and {} in {}",
        pprof::FILE_NAME,
        out_dir.path().display()
    );
    Ok(0)
}

/// `pfprof diff`: the comparison on stdout, and diff.{folded,svg}.
fn run_diff(args: &DiffArgs) -> Result<u8> {
    args.check()?;
    // Decode errors name the file; no context needed.
    let before = analyze_and_resolve(&data_path(&args.before)?, &args.analysis, false, None)?;
    let after = analyze_and_resolve(&data_path(&args.after)?, &args.analysis, false, None)?;
    for model in [&before, &after] {
        startup_of_known(&model.report, args.analysis.startup_of.as_deref())?;
    }
    let comparison = if args.resident {
        resident_comparison(args, &before, &after)?
    } else {
        fault_comparison(args, &before, &after)?
    };
    let mut stdout = std::io::stdout().lock();
    match args.format {
        Format::Text => stdout.write_all(comparison.text.as_bytes())?,
        Format::Json => {
            serde_json::to_writer_pretty(&mut stdout, &comparison.json)?;
            writeln!(stdout)?;
        }
    }
    let out_dir = OutDir::open_or_create(
        &args
            .output
            .clone()
            .unwrap_or_else(|| recording_dir(&args.after)),
    )?;
    let compare = if args.normalize {
        diff_svg::Compare::Shares
    } else {
        diff_svg::Compare::Counts
    };
    let (a, b) = &comparison.lines;
    let (title, subtitle) = (&comparison.title, &comparison.subtitle);
    diff_svg::write(
        &out_dir,
        (a, b),
        (compare, comparison.what),
        title,
        subtitle,
    )
    .with_context(|| format!("cannot write diff.svg in {}", out_dir.path().display()))?;
    eprintln!(
        "pfprof: wrote {}/diff.{{folded,svg}}",
        out_dir.path().display()
    );
    Ok(0)
}

/// What `diff` prints (as text, or its rows as JSON) and draws in diff.svg
/// (the folded lines of each run, what they count, title and subtitle).
struct Comparison {
    text: String,
    json: serde_json::Value,
    lines: (Vec<String>, Vec<String>),
    what: &'static str,
    title: String,
    subtitle: String,
}

/// Faults per object, section and class (of the start-up windows with
/// `--startup`), and `after`'s stacks coloured by their change.
fn fault_comparison(
    args: &DiffArgs,
    before: &pfprof::model::Model,
    after: &pfprof::model::Model,
) -> Result<Comparison> {
    let rows = diff::compare(before, after, args.startup);
    Ok(Comparison {
        text: diff::to_text(&rows, &before.report, &after.report, args.startup, args.top),
        json: serde_json::to_value(&rows)?,
        lines: (
            diff::folded_lines(before, args.startup),
            diff::folded_lines(after, args.startup),
        ),
        what: "faults",
        title: format!(
            "Page faults{}: {} → {}",
            if args.startup { " at start-up" } else { "" },
            text_out::command_line(&before.report.command),
            text_out::command_line(&after.report.command)
        ),
        subtitle: format!(
            "before: {}; after: {}",
            picture::totals_line(&before.report),
            picture::totals_line(&after.report)
        ),
    })
}

/// `diff --resident`: KiB at the peak per object, section and kind, and
/// the stacks that made them resident; a recording made without
/// `--resident` is a configuration error.
fn resident_comparison(
    args: &DiffArgs,
    before: &pfprof::model::Model,
    after: &pfprof::model::Model,
) -> Result<Comparison> {
    let rows = diff::compare_resident(before, after).map_err(|which| {
        let path = [&args.before, &args.after][which];
        error::CodedError::new(
            error::exit::CONFIG,
            format!(
                "{} was recorded without --resident: it has no resident memory to compare",
                path.display()
            ),
        )
    })?;
    let kib = |m: &pfprof::model::Model| m.report.resident.as_ref().map_or(0, |r| r.peak.kib.total);
    Ok(Comparison {
        text: diff::resident_to_text(&rows, before, after, args.top),
        json: serde_json::to_value(&rows)?,
        lines: (diff::resident_lines(before), diff::resident_lines(after)),
        what: "KiB",
        title: format!(
            "Resident memory at the peak: {} → {}",
            text_out::command_line(&before.report.command),
            text_out::command_line(&after.report.command)
        ),
        subtitle: format!(
            "before: {} KiB at the peak; after: {} KiB",
            text::thousands(kib(before)),
            text::thousands(kib(after))
        ),
    })
}

/// A broken pipe (`pfprof report | head`) is no error.
fn is_broken_pipe(error: &anyhow::Error) -> bool {
    // serde_json keeps its io error to itself: asked apart.
    error.chain().any(|e| {
        e.downcast_ref::<std::io::Error>().map(std::io::Error::kind)
            == Some(std::io::ErrorKind::BrokenPipe)
            || e.downcast_ref::<serde_json::Error>()
                .and_then(serde_json::Error::io_error_kind)
                == Some(std::io::ErrorKind::BrokenPipe)
    })
}

fn main() -> ExitCode {
    pfprof::sys::map_large_blocks_apart();
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => ExitCode::from(code),
        Err(error) if is_broken_pipe(&error) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("pfprof: error: {}", error::one_line(&error));
            ExitCode::from(error::exit_code(&error))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The command's code passes through; a signal is 128 + N.
    #[test]
    fn command_statuses() {
        assert_eq!(command_status(None), 0);
        assert_eq!(command_status(Some(&Exit::Code(3))), 3);
        assert_eq!(command_status(Some(&Exit::Signal(15))), 143);
    }

    /// A failing command's status comes before the profile's 4.
    #[test]
    fn not_written_codes() {
        assert_eq!(not_written(0), error::exit::PROFILE_NOT_WRITTEN);
        assert_eq!(not_written(2), 2);
    }
}
