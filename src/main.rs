//! pfprof: a Linux page-fault profiler.
//!
//! Data flows one way: `record` (syscalls, ring buffers → pfprof.data) →
//! `decode` (perf.data records) → `process` (address spaces over time) →
//! `classify` → `stacks` (interned raw stacks) → `resolve` (symbolize each
//! unique address once) → `render` (folded, SVG, text, JSON). `report` and
//! `flamegraph` replay a recording through the same path that `record` uses.

mod analyze;
mod classify;
mod cli;
mod decode;
mod error;
mod perf_data;
mod process;
mod record;
mod render;
mod report;
mod resolve;
mod stacks;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Parser;

use analyze::AnalyzeOptions;
use cli::{Action, Cli, Format};
use perf_data::Exit;

const DATA_FILE: &str = "pfprof.data";

/// `-i` takes a directory or the data file itself.
fn data_path(input: &Path) -> PathBuf {
    if input.is_dir() {
        input.join(DATA_FILE)
    } else {
        input.to_path_buf()
    }
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
    kernel: bool,
    partial: bool,
) -> Result<(report::Report, [resolve::Folded; 3])> {
    // PFPROF_TIMING=1 prints how long each phase took (for benchmarks).
    let timing = std::env::var_os("PFPROF_TIMING").is_some();
    let start = std::time::Instant::now();
    let profile = analyze::analyze(path, AnalyzeOptions { kernel, partial })?;
    let analyzed = start.elapsed();
    let resolved = resolve::resolve(&profile);
    if timing {
        eprintln!(
            "pfprof: timing: replay+count {analyzed:.2?}, symbolize+model {:.2?}",
            start.elapsed() - analyzed
        );
    }
    Ok(resolved)
}

fn run(cli: Cli) -> Result<u8> {
    match cli.action {
        Action::Record(args) => {
            fresh_output_dir(&args.output)?;
            let config = record::RecordConfig {
                command: args.command.clone(),
                data_path: args.output.join(DATA_FILE),
                period: args.period,
                mmap_pages: args.mmap_pages.next_power_of_two(),
                kernel_callchains: args.analysis.kernel,
                tracepoints: !args.no_tracepoints,
            };
            let recorded = record::record(&config)?;
            let (report, folded) =
                analyze_and_resolve(&config.data_path, args.analysis.kernel, false)?;
            render::write_all(&args.output, &report, &folded, args.analysis.top).with_context(
                || format!("cannot write the outputs in {}", args.output.display()),
            )?;
            if args.quiet {
                eprintln!("pfprof: {}", report.completeness_line());
            } else {
                eprint!("{}", report.to_text(args.analysis.top));
            }
            eprintln!(
                "pfprof: wrote {}/{{report.txt,report.json,*.folded,*.svg}}",
                args.output.display()
            );
            Ok(match recorded.exit {
                Some(Exit::Code(code)) => code as u8,
                Some(Exit::Signal(sig)) => 128 + sig as u8,
                None => 1,
            })
        }
        Action::Report(args) => {
            let (report, _) =
                analyze_and_resolve(&data_path(&args.input), args.analysis.kernel, args.partial)?;
            let mut stdout = std::io::stdout().lock();
            match args.format {
                Format::Text => stdout.write_all(report.to_text(args.analysis.top).as_bytes())?,
                Format::Json => {
                    serde_json::to_writer_pretty(&mut stdout, &report)?;
                    writeln!(stdout)?;
                }
            }
            Ok(0)
        }
        Action::Flamegraph(args) => {
            let (report, folded) =
                analyze_and_resolve(&data_path(&args.input), args.analysis.kernel, args.partial)?;
            let out_dir = match &args.output {
                Some(dir) => dir.clone(),
                None if args.input.is_dir() => args.input.clone(),
                None => args
                    .input
                    .parent()
                    .map_or_else(|| PathBuf::from("."), Path::to_path_buf),
            };
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
            let command = report.command_line();
            for selection in selections {
                render::write_flamegraph(&out_dir, &folded, selection, &command).with_context(
                    || format!("cannot write flame graphs in {}", out_dir.display()),
                )?;
            }
            eprintln!("pfprof: wrote flame graphs in {}", out_dir.display());
            Ok(0)
        }
    }
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
            eprintln!("pfprof: error: {error:#}");
            ExitCode::from(error::exit_code(&error))
        }
    }
}
