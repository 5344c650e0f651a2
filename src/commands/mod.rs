//! The face: one module per subcommand (`record`, `report`, `flamegraph`,
//! `diff`, `archive`, `top`), the command line they share (`cli`, the only
//! home of clap's types), and what runs between the stages for them
//! (`recording`: analyse and symbolize a recording; `continuous`: the
//! `--interval` profiles; `live`: the `--stream` lines). The binary only
//! parses the command line, calls [`run`] and maps errors to exit codes.

pub mod archive;
pub mod cli;
pub mod continuous;
mod diff;
mod flamegraph;
pub mod live;
pub mod paths;
mod record;
pub mod recording;
mod report;
pub mod top;

use anyhow::Result;

use crate::text;
use cli::{Action, Cli};

/// Runs the subcommand `cli` names; its exit code.
pub fn run(cli: Cli) -> Result<u8> {
    match cli.action {
        Action::Top(args) => top::command(args),
        Action::Record(args) => record::run(&args),
        Action::Report(args) => report::run(&args),
        Action::Flamegraph(args) => flamegraph::run(&args),
        Action::Archive(args) => archive::command(&args),
        Action::Diff(args) => diff::run(&args),
    }
}

/// `--startup-of NAME` must name a program that has a start-up window.
fn startup_of_known(report: &crate::model::report::Report, of: Option<&str>) -> Result<()> {
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
