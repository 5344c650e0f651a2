//! `pfprof flamegraph`: the pictures and the page of a recording.

use anyhow::{Context, Result};

use super::cli::FlamegraphArgs;
use super::paths::{data_path, output_dir};
use super::recording::analyze_and_resolve;
use super::startup_of_known;
use crate::output::{flamegraph, html, pprof};

/// `pfprof flamegraph`: every picture `record` writes (or one class's
/// flame graph), and profile.pb.gz.
pub(super) fn run(args: &FlamegraphArgs) -> Result<u8> {
    args.check()?;
    let input = data_path(&args.input)?;
    let resolved = analyze_and_resolve(&input, &args.analysis, args.partial, None)?;
    startup_of_known(&resolved.report, args.analysis.startup_of.as_deref())?;
    let out_dir = output_dir(args.output.as_deref(), &args.input)?;
    let context = || format!("cannot write flame graphs in {}", out_dir.path().display());
    // Every picture `record` writes, from the one list it uses.
    match args.class {
        Some(class) => flamegraph::write_flamegraph(
            &out_dir,
            &crate::output::folded::fold(&resolved),
            class.into(),
            &crate::output::picture::subtitle(&resolved.report),
        )
        .map(drop),
        // index.html's tables show as many rows as report.txt's default.
        None => crate::output::write_pictures(&out_dir, &resolved, 10),
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
