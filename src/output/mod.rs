//! The outputs: each module reads the symbolized model and writes one thing.

use std::io;

use crate::format::outdir::OutDir;
use crate::model::Model;
use folded::fold;

pub mod diff;
pub mod flamegraph;
pub mod folded;
pub mod pprof;
pub mod stream;
pub mod text;
pub mod timeline;

/// Writes every output of a recording directory.
pub fn write_all(dir: &OutDir, model: &Model, top: usize) -> io::Result<()> {
    let report = &model.report;
    let command = report.command_line();
    let subtitle = report.subtitle();
    let folded = fold(model);
    for selection in [
        flamegraph::ClassSelection::Minor,
        flamegraph::ClassSelection::Major,
        flamegraph::ClassSelection::Cow,
        flamegraph::ClassSelection::All,
    ] {
        flamegraph::write_flamegraph(dir, &folded.by_class, selection, &command, &subtitle)?;
    }
    let scope = &model.startup_scope;
    flamegraph::write_startup(dir, &folded.startup, scope, &command, &subtitle)?;
    flamegraph::write_latency(dir, &folded.latency, &command, &subtitle)?;
    dir.write("timeline.svg", timeline::render(model).as_bytes())?;
    dir.write("report.txt", text::report_txt(report, top).as_bytes())?;
    let json = serde_json::to_vec_pretty(report).map_err(io::Error::other)?;
    dir.write("report.json", &json)
}
