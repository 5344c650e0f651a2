//! The outputs: each module reads the symbolized model and writes one thing.

use std::io;
use std::path::Path;

use crate::format::outdir::{self, OutDir};
use crate::model::Model;
use folded::fold;

pub mod diff;
pub mod diff_svg;
pub mod flamegraph;
pub mod folded;
pub mod html;
pub mod picture;
pub mod pprof;
pub mod startup;
pub mod stream;
pub mod text;
pub mod timeline;
pub mod warning;

/// Writes every picture of a recording (`record` and `flamegraph` both
/// call this, so they write the same set): the flame graphs of each class
/// and of all, start-up, latency, the timeline, and `index.html` that shows
/// them with the report. The class graphs are drawn on this thread (`all`
/// beside them), the rest on another (the page needs them all).
pub fn write_pictures(dir: &OutDir, model: &Model, top: usize) -> io::Result<()> {
    let subtitle = picture::subtitle(&model.report);
    let folded = fold(model);
    let (svgs, timeline) = std::thread::scope(|scope| {
        let others = scope.spawn(|| -> io::Result<(Vec<flamegraph::Svg>, String)> {
            let mut svgs = vec![flamegraph::write_startup(
                dir,
                &folded,
                &flamegraph::startup_scope(model),
                &subtitle,
            )?];
            svgs.extend(flamegraph::write_latency(dir, &folded, &subtitle)?);
            svgs.extend(flamegraph::write_resident(dir, model, &subtitle)?);
            let timeline = timeline::render(model);
            dir.write(outdir::TIMELINE_SVG, timeline.as_bytes())?;
            Ok((svgs, timeline))
        });
        let classes = flamegraph::write_class_graphs(dir, &folded, &subtitle);
        // A panic is a bug: it goes on as one, not as an I/O error.
        let (others, timeline) = others
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))?;
        let mut svgs = classes?;
        svgs.extend(others);
        Ok::<_, io::Error>((svgs, timeline))
    })?;
    html::write(dir, &model.report, &svgs, Some(&timeline), top)
}

/// Writes every output of the recording at `data_path` into its directory:
/// the pictures, the reports and `profile.pb.gz`, the reports and pprof on
/// a thread of their own.
pub fn write_all(dir: &OutDir, model: &Model, data_path: &Path, top: usize) -> io::Result<()> {
    std::thread::scope(|scope| {
        let reports = scope.spawn(|| {
            write_reports(dir, model, top)?;
            pprof::write_recording(dir, model, data_path)
        });
        let pictures = write_pictures(dir, model, top);
        let reports = reports
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        pictures.and(reports)
    })
}

/// Writes what an interval of `record --interval` keeps: the folded stacks
/// of each class and of all, `report.json`, `report.txt` and
/// `profile.pb.gz` (stamped with the interval's start, `time_ns` since the
/// epoch, and its length), without the pictures, which a fleet profiler
/// draws from the pprof.
pub fn write_interval(dir: &OutDir, model: &Model, time_ns: i64, top: usize) -> io::Result<()> {
    let lines = folded::ClassLines::of(model);
    for selection in flamegraph::ClassSelection::ALL {
        let stem = selection.graph().file_stem();
        flamegraph::write_selection(dir, stem, &lines, selection)?;
    }
    // Each output's memory goes before the next is built: a long run's
    // peak is the largest one, not their sum.
    drop(lines);
    flamegraph::write_resident_folded(dir, model)?;
    write_reports(dir, model, top)?;
    pprof::write(dir, model, time_ns)?;
    Ok(())
}

/// Writes `report.txt` and `report.json`.
fn write_reports(dir: &OutDir, model: &Model, top: usize) -> io::Result<()> {
    let report = &model.report;
    dir.write(outdir::REPORT_TXT, text::report_txt(report, top).as_bytes())?;
    let json = serde_json::to_vec_pretty(report).map_err(io::Error::other)?;
    dir.write(outdir::REPORT_JSON, &json)
}
