//! `pfprof record`: record into `DIR.partial`, analyse, write every output,
//! rename it to DIR, print the report; `--interval` profiles.

use std::path::Path;

use anyhow::{Context, Result};

use super::cli::RecordArgs;
use super::paths::cache_root;
use super::recording::{analyze_and_resolve, Keep};
use super::startup_of_known;
use crate::analysis::AnalyzeOptions;
use crate::format::outdir::{Staging, DATA_FILE};
use crate::format::perf_data::Exit;
use crate::text;
use crate::{error, record};

/// `pfprof record`: records into `DIR.partial`, analyses, writes every
/// output, renames it to DIR, and prints the report. The exit code is the
/// command's, else 4 (the profile not written) or 3 (`--max-lost`).
pub(super) fn run(args: &RecordArgs) -> Result<u8> {
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
        if let Some((user, sys)) = crate::sys::procfs::own_cpu_seconds() {
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
    args: &crate::commands::cli::RecordArgs,
    target: record::Target,
    secs: f64,
) -> Result<u8> {
    crate::commands::continuous::prepare_dir(&args.output)?;
    let data_path = args.keep_recording.then(|| args.output.join(DATA_FILE));
    let config = args.record_config(target, data_path);
    let mut tap =
        crate::commands::continuous::Continuous::new(crate::commands::continuous::Settings {
            destination: crate::commands::continuous::Destination::Dir(args.output.clone()),
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
    let mut live = args.stream.map(|kind| {
        crate::commands::live::Live::new(kind.into(), args.fixed_ts, args.analysis.kernel)
    });
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
) -> Result<crate::model::Model> {
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
    crate::output::write_all(staging.out_dir(), &resolved, data_file, args.top)
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
    report: &crate::model::report::Report,
    write_error: Option<&str>,
) {
    if args.quiet {
        eprintln!("pfprof: {}", crate::output::text::completeness_line(report));
    } else {
        eprint!("{}", crate::output::text::report_txt(report, args.top));
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
