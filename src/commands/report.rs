//! `pfprof report`: the text or JSON report of a recording.

use std::io::Write;

use anyhow::Result;

use super::cli::{Format, ReportArgs};
use super::paths::data_path;
use super::recording::analyze_and_resolve;
use super::startup_of_known;
use crate::output::startup;

/// `pfprof report`: the text report (or report.json, or the start-up
/// windows) on stdout.
pub(super) fn run(args: &ReportArgs) -> Result<u8> {
    let resolved =
        analyze_and_resolve(&data_path(&args.input)?, &args.analysis, args.partial, None)?;
    startup_of_known(&resolved.report, args.analysis.startup_of.as_deref())?;
    let report = &resolved.report;
    let mut stdout = std::io::stdout().lock();
    match (args.format, args.startup) {
        (Format::Text, false) => {
            stdout.write_all(crate::output::text::report_txt(report, args.top).as_bytes())?
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
