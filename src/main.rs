//! The `pfprof` binary: parse the command line, run, map errors to exit codes.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Parser;

use pfprof::analyze::{self, AnalyzeOptions};
use pfprof::cli::{Action, AnalysisArgs, Cli, Format};
use pfprof::perf_data::Exit;
use pfprof::{diff, error, record, render, resolve};

const DATA_FILE: &str = "pfprof.data";

/// `-i` takes a directory or the data file itself. A directory without a
/// recording is named as such (not as a missing `DIR/pfprof.data`).
fn data_path(input: &Path) -> Result<PathBuf> {
    if !input.is_dir() {
        return Ok(input.to_path_buf());
    }
    let path = input.join(DATA_FILE);
    if std::fs::symlink_metadata(&path).is_err() {
        anyhow::bail!(
            "{} is a directory without a recording (no {DATA_FILE} in it)",
            input.display()
        );
    }
    Ok(path)
}

/// Moves an existing output directory aside so runs are never mixed.
fn fresh_output_dir(dir: &Path) -> Result<()> {
    if dir.exists() {
        let mut old = dir.as_os_str().to_owned();
        old.push(".old");
        let old = PathBuf::from(old);
        if old.exists() {
            std::fs::remove_dir_all(&old)
                .with_context(|| format!("cannot remove {}", old.display()))?;
        }
        std::fs::rename(dir, &old)
            .with_context(|| format!("cannot move {} to {}", dir.display(), old.display()))?;
    }
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))
}

fn analyze_and_resolve(
    path: &Path,
    analysis: &AnalysisArgs,
    partial: bool,
) -> Result<resolve::Resolved> {
    // PFPROF_TIMING=1 prints how long each phase took (for benchmarks).
    let timing = std::env::var_os("PFPROF_TIMING").is_some();
    let start = std::time::Instant::now();
    let options = AnalyzeOptions {
        kernel: analysis.kernel,
        partial,
        until_ms: analysis.until_ms,
    };
    let mut profile = analyze::analyze(path, options)?;
    let analyzed = start.elapsed();
    let resolved = resolve::resolve(&mut profile);
    if timing {
        eprintln!(
            "pfprof: timing: replay+count {analyzed:.2?}, symbolize+model {:.2?}",
            start.elapsed() - analyzed
        );
    }
    Ok(resolved)
}

/// pfprof's own CPU time so far (user, system), from /proc/self/stat
/// (children not included).
fn own_cpu_seconds() -> Option<(f64, f64)> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the parenthesised command name; utime and stime are the
    // 14th and 15th fields of the line, in clock ticks (USER_HZ = 100).
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i)?.parse::<f64>().ok();
    Some((ticks(11)? / 100.0, ticks(12)? / 100.0))
}

/// The directory a recording lives in (`-i` takes the directory or the file).
fn recording_dir(input: &Path) -> PathBuf {
    if input.is_dir() {
        input.to_path_buf()
    } else {
        input
            .parent()
            .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
    }
}

fn run(cli: Cli) -> Result<u8> {
    match cli.action {
        Action::Record(args) => {
            fresh_output_dir(&args.output)?;
            let target = if !args.pids.is_empty() {
                record::Target::Pids(args.pids.clone())
            } else if args.all_cpus {
                record::Target::System
            } else {
                record::Target::Command(args.command.clone())
            };
            if args.duration.is_some_and(|d| !(d > 0.0 && d.is_finite())) {
                return Err(error::CodedError::new(
                    2,
                    "--duration must be a positive number of seconds",
                )
                .into());
            }
            let config = record::RecordConfig {
                target,
                duration: args.duration.map(std::time::Duration::from_secs_f64),
                data_path: args.output.join(DATA_FILE),
                period: args.period,
                mmap_pages: args
                    .mmap_pages
                    .unwrap_or_else(|| record::default_mmap_pages(args.call_graph))
                    .next_power_of_two(),
                kernel_callchains: args.analysis.kernel,
                call_graph: args.call_graph,
                tracepoints: !args.no_tracepoints,
                class: args.class,
                stream: args.stream,
                fixed_ts: args.fixed_ts,
            };
            let recorded = record::record(&config)?;
            if std::env::var_os("PFPROF_TIMING").is_some() {
                if let Some((user, sys)) = own_cpu_seconds() {
                    eprintln!(
                        "pfprof: timing: recording used {user:.2}s user, {sys:.2}s sys of CPU"
                    );
                }
            }
            let resolved = analyze_and_resolve(&config.data_path, &args.analysis, false)?;
            render::write_all(&args.output, &resolved, args.analysis.top).with_context(|| {
                format!("cannot write the outputs in {}", args.output.display())
            })?;
            if args.quiet {
                eprintln!("pfprof: {}", resolved.report.completeness_line());
            } else {
                eprint!("{}", resolved.report.to_text(args.analysis.top));
            }
            eprintln!(
                "pfprof: wrote {}/{{report.txt,report.json,*.folded,*.svg}}",
                args.output.display()
            );
            // Attached and system-wide recordings end normally by Ctrl-C or
            // --duration; the processes keep running.
            Ok(match recorded.exit {
                Some(Exit::Code(code)) => code as u8,
                Some(Exit::Signal(sig)) => 128 + sig as u8,
                None => 0,
            })
        }
        Action::Report(args) => {
            let resolved =
                analyze_and_resolve(&data_path(&args.input)?, &args.analysis, args.partial)?;
            let report = &resolved.report;
            let mut stdout = std::io::stdout().lock();
            match (args.format, args.startup) {
                (Format::Text, false) => {
                    stdout.write_all(report.to_text(args.analysis.top).as_bytes())?
                }
                (Format::Text, true) => match &report.startup {
                    Some(startup) => {
                        stdout.write_all(startup.to_text(args.analysis.top).as_bytes())?
                    }
                    None => writeln!(stdout, "no start-up faults in this recording")?,
                },
                (Format::Json, false) => {
                    serde_json::to_writer_pretty(&mut stdout, report)?;
                    writeln!(stdout)?;
                }
                (Format::Json, true) => {
                    serde_json::to_writer_pretty(
                        &mut stdout,
                        &serde_json::json!({ "startup": report.startup }),
                    )?;
                    writeln!(stdout)?;
                }
            }
            Ok(0)
        }
        Action::Flamegraph(args) => {
            let resolved =
                analyze_and_resolve(&data_path(&args.input)?, &args.analysis, args.partial)?;
            let out_dir = args
                .output
                .clone()
                .unwrap_or_else(|| recording_dir(&args.input));
            std::fs::create_dir_all(&out_dir)
                .with_context(|| format!("cannot create {}", out_dir.display()))?;
            let selections = match args.class {
                Some(class) => vec![class],
                None => vec![
                    render::ClassSelection::Minor,
                    render::ClassSelection::Major,
                    render::ClassSelection::Cow,
                    render::ClassSelection::All,
                ],
            };
            let command = resolved.report.command_line();
            let context = || format!("cannot write flame graphs in {}", out_dir.display());
            for selection in selections {
                render::write_flamegraph(&out_dir, &resolved.folded, selection, &command)
                    .with_context(context)?;
            }
            if args.class.is_none() {
                render::write_startup(&out_dir, &resolved.startup_folded, &command)
                    .with_context(context)?;
            }
            eprintln!("pfprof: wrote flame graphs in {}", out_dir.display());
            Ok(0)
        }
        Action::Diff(args) => {
            // Decode errors name the file; no context needed.
            let before = analyze_and_resolve(&data_path(&args.before)?, &args.analysis, false)?;
            let after = analyze_and_resolve(&data_path(&args.after)?, &args.analysis, false)?;
            let rows = diff::compare(&before, &after, args.startup);
            let mut stdout = std::io::stdout().lock();
            match args.format {
                Format::Text => stdout.write_all(
                    diff::to_text(&rows, &before.report, &after.report, args.startup).as_bytes(),
                )?,
                Format::Json => {
                    serde_json::to_writer_pretty(&mut stdout, &rows)?;
                    writeln!(stdout)?;
                }
            }
            let out_dir = args
                .output
                .clone()
                .unwrap_or_else(|| recording_dir(&args.after));
            std::fs::create_dir_all(&out_dir)
                .with_context(|| format!("cannot create {}", out_dir.display()))?;
            let (a, b) = (
                diff::folded_lines(&before, args.startup),
                diff::folded_lines(&after, args.startup),
            );
            let title = format!(
                "Page faults{}: {} → {}",
                if args.startup { " at start-up" } else { "" },
                before.report.command_line(),
                after.report.command_line()
            );
            render::write_diff(&out_dir, &a, &b, title)
                .with_context(|| format!("cannot write diff.svg in {}", out_dir.display()))?;
            eprintln!("pfprof: wrote {}/diff.{{folded,svg}}", out_dir.display());
            Ok(0)
        }
    }
}

/// The error and its causes on one line, each said once: a cause whose
/// text its context already holds (thiserror messages embed their source;
/// anyhow's `{:#}` would print it again) is left out.
fn one_line(error: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in error.chain() {
        let text = cause.to_string();
        if text.is_empty() || line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    // One line, whatever a cause held.
    line.replace('\n', " ")
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => ExitCode::from(code),
        Err(error) => {
            if error.chain().any(|e| {
                e.downcast_ref::<std::io::Error>()
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            }) {
                return ExitCode::SUCCESS;
            }
            eprintln!("pfprof: error: {}", one_line(&error));
            ExitCode::from(error::exit_code(&error))
        }
    }
}
