//! `pfprof diff`: two recordings compared, as text or JSON and diff.svg.

use std::io::Write;

use anyhow::{Context, Result};

use super::cli::{DiffArgs, Format};
use super::paths::{data_path, output_dir};
use super::recording::analyze_and_resolve;
use super::startup_of_known;
use crate::output::text as text_out;
use crate::output::{diff, diff_svg, picture};
use crate::{error, text};

/// `pfprof diff`: the comparison on stdout, and diff.{folded,svg}.
pub(super) fn run(args: &DiffArgs) -> Result<u8> {
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
    let out_dir = output_dir(args.output.as_deref(), &args.after)?;
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
    before: &crate::model::Model,
    after: &crate::model::Model,
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
    before: &crate::model::Model,
    after: &crate::model::Model,
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
    let kib = |m: &crate::model::Model| m.report.resident.as_ref().map_or(0, |r| r.peak.kib.total);
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
