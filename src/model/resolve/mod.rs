//! Symbolization, once per unique address: code frames through the
//! `pfprof-symbolize` crate (one batch per module, cached by build-id) and
//! fault targets to section + data symbol. Produces the [`Report`] model and
//! the folded stacks that every renderer reads.

use pfprof_symbolize::{Options, Symbolizer};

use crate::analysis::latency::LatencyStats;
use crate::analysis::process::{ModuleId, ProgramId};
use crate::analysis::Profile;
use crate::model::report::{ByAccess, ByClass, FrameKind, Recorder, Report};
use crate::model::Model;
use crate::text::safe;

mod count;
mod names;
mod resident;
mod rows;

use count::*;
use names::*;
use rows::*;

/// A symbolized frame: function, file, line, inlined flag.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Named {
    function: String,
    file: Option<String>,
    line: Option<u32>,
    inlined: bool,
    object: Option<ModuleId>,
    /// Last: frames sort by their names as before.
    kind: FrameKind,
}

impl Named {
    /// A frame known by a name only (kernel, JIT, `[unknown]`).
    fn bare(kind: FrameKind, function: String) -> Named {
        Named {
            function,
            kind,
            file: None,
            line: None,
            inlined: false,
            object: None,
        }
    }
}

/// Symbolizes the profile and builds the model every output reads; the
/// profile's interned stacks move into the model (copying them doubled
/// them at an interval's end: 12 MB under a Rust build). Also returns the
/// profile's symbolizer, with every module it opened: the next interval of
/// `record --interval` or `top` reuses them (a fresh one each time re-read
/// libc's DWARF every second and fell behind the records).
pub fn resolve(mut profile: Profile) -> (Model, Symbolizer) {
    // The symbolizer already opened the modules that start-up detection needed.
    let mut symbolizer =
        std::mem::replace(&mut profile.symbolizer, Symbolizer::new(Options::default()));
    let mut model = resolve_with(&profile, &mut symbolizer);
    model.stacks = profile.stacks.into_stacks();
    (model, symbolizer)
}

/// The model in its steps: names, counts, tables, warnings, start-up,
/// timeline.
fn resolve_with(profile: &Profile, symbolizer: &mut Symbolizer) -> Model {
    let names = Names::resolve(profile, symbolizer);
    let mut kept = KeptStacks::default();
    let startup = StartupChoice::of(profile, &names);
    let mut counted = count(profile, &names, &mut kept, startup.chosen);
    let timeline_origin = profile
        .startup
        .first_exec()
        .or(profile.decode.first_time)
        .unwrap_or(0);
    let resident = resident::resident(
        profile,
        &names,
        &mut counted.interned,
        &mut kept,
        timeline_origin,
    );
    let startup_report =
        startup_report(profile, symbolizer, &names, &counted.startup_rows, &startup);
    let (sites, stacks, frames) = site_tables(&names, &profile.stacks, &counted);
    let target_sections = target_sections(&counted.targets, &counted.interned);
    let module_rows = module_rows(profile, &names);
    let warnings = warnings(profile, symbolizer, &names, &module_rows);
    let mut report = Report {
        pfprof_version: env!("CARGO_PKG_VERSION").to_string(),
        command: command(profile),
        exit: profile.meta.as_ref().and_then(|m| m.exit.clone()),
        period: profile.meta.as_ref().map_or(1, |m| m.period),
        sampled_class: profile
            .meta
            .as_ref()
            .map_or_else(Default::default, |m| m.class),
        recorder: if profile.meta.is_some() {
            Recorder::Pfprof
        } else {
            Recorder::Perf
        },
        totals: totals(profile),
        by_access: ByAccess::from_counts(&profile.totals.by_class_access),
        processes: process_rows(profile, &names),
        sites,
        stacks,
        frames,
        targets: target_summary_rows(&target_sections),
        files: file_rows(&target_sections),
        modules: module_rows,
        warnings,
        wall_ns: profile.meta.as_ref().map(|m| m.wall_ns),
        data_bytes: profile.meta.as_ref().map(|m| m.data_bytes),
        records: profile.decode.records,
        stack_frames: profile.stacks.len(),
        startup: startup_report,
        startups: startup.windows,
        latency: ByClass::from_fn(|class| {
            LatencyStats::from_counts(&profile.latencies[class as usize])
        }),
        resident: resident.as_ref().map(|(_, report)| report.clone()),
    };
    // What was lost comes first.
    let mut warnings = report.completeness_warnings();
    warnings.append(&mut report.warnings);
    report.warnings = warnings;
    let (timeline, timeline_sites) = timeline_points(profile, &names, &mut kept);
    Model {
        programs: (0..profile.processes.programs.len())
            .map(|id| safe(profile.processes.programs.name(id as ProgramId)))
            .collect(),
        startup_of_one: profile.startup.startup_of.is_some() && report.startup.is_some(),
        report,
        samples: counted.samples,
        // Moved in by `resolve`.
        stacks: crate::model::Stacks::default(),
        frames: kept.frames,
        timeline,
        timeline_sites,
        timeline_origin,
        resident: resident.map(|(rows, _)| rows),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::classify::FaultClass;
    use crate::analysis::{analyze, AnalyzeOptions};
    use crate::model::region::Region;

    /// The steps end to end on a recording of known faults: 40 minor
    /// faults of process 7 (`app`) on fresh anonymous pages, all from one
    /// three-frame stack in a file that is not there: one process row, one
    /// site with that stack (its frames each once in the frame table), one
    /// target and one file row, the totals.
    #[test]
    fn a_recording_of_known_faults_resolves_to_its_rows() {
        let dir = crate::test_dir("resolve");
        let path = dir.join("known.data");
        crate::analysis::tests::recording(&path, 40);
        let profile = analyze(&path, AnalyzeOptions::default()).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        let (model, _) = resolve(profile);
        let report = &model.report;
        assert_eq!(report.totals.faults.minor, 40);
        assert_eq!(report.totals.faults.total(), 40);
        let processes: Vec<_> = (report.processes.iter())
            .map(|p| (p.pid, &*p.comm, p.minor, p.major, p.cow))
            .collect();
        assert_eq!(processes, [(7, "app", 40, 0, 0)]);
        let [site] = &report.sites[..] else {
            panic!("{:?}", report.sites);
        };
        assert_eq!(
            (site.count, &site.pids[..], &*site.comm),
            (40, &[7][..], "app")
        );
        assert_eq!(site.target.region, Region::Anon);
        let stack = &report.stacks[site.stack_id as usize];
        assert_eq!(stack.len(), 3, "{:?}", report.frames);
        assert_eq!(report.frames.len(), 3);
        let targets: Vec<_> = (report.targets.iter())
            .map(|t| (t.class, t.region, t.count))
            .collect();
        assert_eq!(targets, [(FaultClass::Minor, Region::Anon, 40)]);
        let files: Vec<_> = (report.files.iter())
            .map(|f| (f.minor, f.major, f.cow))
            .collect();
        assert_eq!(files, [(40, 0, 0)]);
        assert_eq!(report.files[0].path, report.targets[0].object);
    }
}
