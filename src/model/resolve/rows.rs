//! The report's tables from the counts: sites, files, targets,
//! processes, modules, totals, warnings, start-up and timeline.

use std::collections::BTreeMap;
use std::path::Path;

use pfprof_symbolize::Symbolizer;
use rustc_hash::FxHashMap;

use crate::analysis::classify::FaultClass;
use crate::analysis::stacks::StackTable;
use crate::analysis::{Owner, Profile};
use crate::model::report::{
    FileRow, FrameRow, ModuleRow, ProcessRow, Region, SiteRow, TargetRow, TargetSummaryRow, Totals,
    NO_STACK,
};
use crate::model::startup::{self, StartupFault};
use crate::model::warning::Warning;
use crate::model::{SitePoint, TimePoint};
use crate::text::safe;

use super::count::{program_of, Counted, Interned, KeptStacks, SiteAcc, SiteKey, StartupChoice};
use super::names::{expand, Names};
use super::Named;

/// The start-up analysis of the window shown in full.
pub(super) fn startup_report(
    profile: &Profile,
    symbolizer: &mut Symbolizer,
    names: &Names,
    rows: &[StartupFault],
    choice: &StartupChoice,
) -> Option<startup::StartupReport> {
    if rows.is_empty() {
        return None;
    }
    let first_touchers = first_touchers(profile, names, choice.chosen);
    let facts = object_facts(profile, symbolizer, names, rows);
    let window = &profile.startup.windows[choice.chosen_index?];
    let load_order: Vec<String> = window
        .load_order
        .iter()
        .map(|m| names.path_of(*m))
        .collect();
    let mut report = startup::build(
        window,
        program_of(names, window),
        profile.decode.last_time,
        rows,
        &first_touchers,
        &facts,
        &load_order,
    );
    report.window = choice.chosen_index;
    Some(report)
}

/// The first code to touch each start-up data symbol: (object, section,
/// symbol) to the innermost real (not inlined) function, which is
/// `_dl_relocate_object` rather than its inlined `elf_machine_rela_relative`.
pub(super) fn first_touchers(
    profile: &Profile,
    names: &Names,
    chosen: Option<u32>,
) -> BTreeMap<(String, String, String), String> {
    let mut first: BTreeMap<(String, String, String), (u64, String)> = BTreeMap::new();
    for (&(window, ref target), &(time, stack)) in &profile.first_touch {
        if Some(window) != chosen {
            continue;
        }
        let row = names.target(*target);
        let (Some(section), Some(symbol)) = (row.section, row.symbol) else {
            continue;
        };
        let toucher = expand(names, &profile.stacks, stack)
            .iter()
            .rev()
            .find(|n| !n.inlined)
            .map(|n| n.function.clone());
        let entry = first
            .entry((row.object, section, symbol))
            .or_insert((u64::MAX, String::new()));
        if time < entry.0 {
            *entry = (time, toucher.unwrap_or_default());
        }
    }
    first
        .into_iter()
        .filter(|(_, (_, f))| !f.is_empty())
        .map(|(k, (_, f))| (k, f))
        .collect()
}

/// Pages per section and relocations of each object with start-up faults.
pub(super) fn object_facts(
    profile: &Profile,
    symbolizer: &mut Symbolizer,
    names: &Names,
    rows: &[StartupFault],
) -> BTreeMap<String, startup::ObjectFacts> {
    let mut facts = BTreeMap::new();
    for (id, m) in profile.processes.modules.iter() {
        let shown = safe(&m.path);
        if !m.is_file() || names.stale.contains(&id) || !rows.iter().any(|r| r.object == shown) {
            continue;
        }
        let path = Path::new(&m.path);
        let mut f = startup::ObjectFacts::default();
        if let Ok(info) = symbolizer.module_info(path, m.build_id.as_deref()) {
            for s in &info.sections {
                if s.size > 0 {
                    let pages = (s.svma + s.size - 1) / 4096 - s.svma / 4096 + 1;
                    f.section_pages.insert(s.name.clone(), pages);
                }
            }
        }
        f.relocations = symbolizer.relocations(path, m.build_id.as_deref()).ok();
        facts.insert(shown, f);
    }
    facts
}

/// The sites, most faults first, each with its heaviest stack; and
/// report.json's shared tables of those stacks and their frames.
pub(super) fn site_tables(
    names: &Names,
    stacks: &StackTable,
    counted: &Counted,
) -> (Vec<SiteRow>, Vec<Vec<u32>>, Vec<FrameRow>) {
    let interned = &counted.interned;
    let mut site_rows: Vec<(SiteRow, Option<&Named>, Vec<&Named>)> = counted
        .sites
        .iter()
        .map(|(key, acc)| site_row(names, stacks, interned, *key, acc))
        .collect();
    // Most faults first; ties in the order of (class, access, function,
    // the innermost frame, the target).
    site_rows.sort_by(|(a, a_leaf, _), (b, b_leaf, _)| {
        b.count
            .cmp(&a.count)
            .then_with(|| (a.class, a.access, &a.function).cmp(&(b.class, b.access, &b.function)))
            .then_with(|| a_leaf.cmp(b_leaf))
            .then_with(|| a.target.cmp(&b.target))
    });
    // Each frame and each stack once, numbered in the order of the sorted
    // sites.
    let mut frame_ids: FxHashMap<&Named, u32> = FxHashMap::default();
    let mut stack_ids: FxHashMap<Vec<u32>, u32> = FxHashMap::default();
    let mut frame_table: Vec<FrameRow> = Vec::new();
    let mut stack_table: Vec<Vec<u32>> = Vec::new();
    let site_rows = site_rows
        .into_iter()
        .map(|(mut row, _, stack)| {
            let frames: Vec<u32> = stack
                .into_iter()
                .map(|named| {
                    *frame_ids.entry(named).or_insert_with(|| {
                        frame_table.push(names.frame_row(named.clone()));
                        frame_table.len() as u32 - 1
                    })
                })
                .collect();
            row.stack_id = *stack_ids.entry(frames).or_insert_with_key(|frames| {
                stack_table.push(frames.clone());
                stack_table.len() as u32 - 1
            });
            row
        })
        .collect();
    (site_rows, stack_table, frame_table)
}

/// A site's row (its stack numbered later), its innermost frame, and its
/// heaviest stack by names (raw stacks that name the same frames count
/// together); ties go to the lowest pid and the first stack in name order.
pub(super) fn site_row<'e>(
    names: &'e Names,
    stacks: &StackTable,
    interned: &'e Interned,
    (class, access, leaf, target): SiteKey,
    acc: &SiteAcc,
) -> (SiteRow, Option<&'e Named>, Vec<&'e Named>) {
    let top_pid = acc
        .pids
        .iter()
        .max_by_key(|&(pid, n)| (n, -pid))
        .map(|(pid, _)| pid);
    let top_program = acc
        .programs
        .iter()
        .max_by_key(|&(id, n)| (n, std::cmp::Reverse(id)))
        .map(|(id, _)| id);
    let comm = match (top_pid, top_program) {
        (Some(pid), _) => names.comm_of(pid),
        (None, Some(program)) => names.owner_name(Owner::Program(program)),
        (None, None) => names.comm_of(0),
    };
    let mut by_names: FxHashMap<Vec<&Named>, u64> = FxHashMap::default();
    for (stack, count) in acc.stacks.iter() {
        *by_names.entry(expand(names, stacks, stack)).or_default() += count;
    }
    let stack = by_names
        .into_iter()
        .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))
        .map(|s| s.0)
        .unwrap_or_default();
    let leaf = leaf.map(|id| &interned.leaves[id as usize]);
    let (function, file, line, object) = match leaf {
        Some(n) => (
            n.function.clone(),
            n.file.clone(),
            n.line,
            n.object.map(|m| names.path_of(m)),
        ),
        None => (NO_STACK.to_string(), None, None, None),
    };
    let mut pids: Vec<i32> = acc.pids.iter().map(|(pid, _)| pid).collect();
    pids.sort_unstable();
    let row = SiteRow {
        class,
        access,
        count: acc.count,
        pids,
        comm,
        function,
        file,
        line,
        object,
        stack_id: 0,
        target: TargetRow::clone(&interned.targets[target as usize]),
    };
    (row, leaf, stack)
}

/// Faults per target file or region, most major faults first; major
/// faults outside files are swap-ins.
pub(super) fn file_rows(
    targets: &BTreeMap<(FaultClass, String, Region, Option<String>), u64>,
) -> Vec<FileRow> {
    let mut files: BTreeMap<String, FileRow> = BTreeMap::new();
    for ((class, object, region, _), count) in targets {
        let row = files.entry(object.clone()).or_insert_with(|| FileRow {
            path: object.clone(),
            major: 0,
            minor: 0,
            cow: 0,
            swap: 0,
        });
        match class {
            FaultClass::Minor => row.minor += count,
            FaultClass::Major => {
                row.major += count;
                if *region != Region::File {
                    row.swap += count;
                }
            }
            FaultClass::Cow => row.cow += count,
        }
    }
    let mut files: Vec<FileRow> = files.into_values().collect();
    files.sort_by(|a, b| {
        (b.major, b.minor + b.cow)
            .cmp(&(a.major, a.minor + a.cow))
            .then_with(|| a.path.cmp(&b.path))
    });
    files
}

/// Faults per class and target section, most first.
pub(super) fn target_summary_rows(
    targets: &BTreeMap<(FaultClass, String, Region, Option<String>), u64>,
) -> Vec<TargetSummaryRow> {
    let mut rows: Vec<TargetSummaryRow> = targets
        .iter()
        .map(
            |((class, object, region, section), count)| TargetSummaryRow {
                class: *class,
                object: object.clone(),
                region: *region,
                section: section.clone(),
                count: *count,
            },
        )
        .collect();
    rows.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.object.cmp(&b.object)));
    rows
}

/// Every process seen, most faults first; a system-wide run's idle
/// processes last. The profiled command's parent is pfprof.
pub(super) fn process_rows(profile: &Profile, names: &Names) -> Vec<ProcessRow> {
    let mut processes: Vec<ProcessRow> = profile
        .processes
        .by_pid
        .values()
        .map(|p| {
            let c = profile
                .process_counts
                .get(&p.pid)
                .cloned()
                .unwrap_or_default();
            let root = profile.meta.as_ref().filter(|m| m.root_pid == Some(p.pid));
            ProcessRow {
                pid: p.pid,
                ppid: root.and_then(|m| m.pfprof_pid).unwrap_or(p.ppid),
                comm: safe(&p.comm),
                exe: p.exe.map(|m| names.path_of(m)),
                minor: c.faults.minor,
                major: c.faults.major,
                cow: c.faults.cow,
                major_swap: c.major_swap,
                threads: p.threads,
                execs: if p.execs.len() > 1 {
                    p.execs.iter().map(|m| names.path_of(*m)).collect()
                } else {
                    Vec::new()
                },
            }
        })
        .collect();
    processes.sort_by_key(|p| (std::cmp::Reverse(p.minor + p.major + p.cow), p.pid));
    processes
}

/// Every module, with its build-id and the first problem met with it.
pub(super) fn module_rows(profile: &Profile, names: &Names) -> Vec<ModuleRow> {
    profile
        .processes
        .modules
        .iter()
        .map(|(id, m)| ModuleRow {
            path: safe(&m.path),
            build_id: m.build_id.as_deref().map(crate::text::hex),
            problem: names.module_status.get(&id).cloned(),
        })
        .collect()
}

/// The profile's totals, with the recording's own figures.
pub(super) fn totals(profile: &Profile) -> Totals {
    let t = &profile.totals;
    let meta = profile.meta.as_ref();
    Totals {
        faults: t.by_class,
        lost: t.lost,
        lost_by_class: t.lost_by_class,
        pfprof_faults: t.pfprof_faults,
        kernel_minor: meta.and_then(|m| m.kernel_minor),
        kernel_major: meta.and_then(|m| m.kernel_major),
        kernel_spread: meta.and_then(|m| m.kernel_spread),
        collector_skipped: meta.and_then(|m| m.collector_skipped),
        cow_available: profile.has_entries,
        major_file: t.major_file,
        major_swap: t.major_swap,
        kernel_mode: t.kernel_mode,
        unpaired: t.unpaired,
        entries_without_completion: t.entries_without_completion,
        bad_records: profile.decode.bad_records,
        no_callchain: t.no_callchain,
        call_graph: meta.map(|m| m.call_graph),
        collector: meta.and_then(|m| m.collector),
        truncated_stacks: t.truncated_stacks,
        unwind: meta
            .and_then(|m| m.unwind.clone())
            .or_else(|| profile.unwind.clone()),
    }
}

/// What the user should know beyond the figures: modules' problems, debug
/// files of another build, damage, unreadable unwind information, missing
/// tracepoints, a foreign recording, another kernel, JIT maps. The names
/// they quote are made safe to show when they are said.
pub(super) fn warnings(
    profile: &Profile,
    symbolizer: &mut Symbolizer,
    names: &Names,
    module_rows: &[ModuleRow],
) -> Vec<Warning> {
    let meta = profile.meta.as_ref();
    let mut warnings = Vec::new();
    for row in module_rows {
        if let Some(problem) = &row.problem {
            warnings.push(Warning::Module {
                path: row.path.clone(),
                problem: problem.clone(),
            });
        }
    }
    warnings.extend(rejected_debug_files(profile, symbolizer, names));
    if let Some(why) = &profile.decode.truncated {
        warnings.push(Warning::Damaged { why: why.clone() });
    }
    for file in meta
        .and_then(|m| m.unwind.as_ref())
        .map_or(&[][..], |u| &u.unreadable_files[..])
    {
        warnings.push(Warning::UnreadableUnwindInfo { file: file.clone() });
    }
    if let Some(note) = meta.and_then(|m| m.tracepoints_note.as_ref()) {
        warnings.push(Warning::NoTracepoints { note: note.clone() });
    }
    warnings.extend(
        crate::analysis::foreign::notes(profile)
            .into_iter()
            .map(Warning::Perf),
    );
    warnings.extend(names.kernel_mismatch.clone().map(Warning::KernelMismatch));
    warnings.extend(profile.jit_warnings.iter().cloned().map(Warning::JitMap));
    if let Some(ledger) = profile.resident.as_ref() {
        let advised = ledger.counts().huge_advised;
        if advised > 0 && !ledger.huge_pages_placed() {
            let advised_kib = advised * crate::analysis::resident::PAGE_BYTES / 1024;
            warnings.push(Warning::HugePagesUnseen { advised_kib });
        }
    }
    warnings
}

/// Debug files found for the modules named, but of another build.
pub(super) fn rejected_debug_files(
    profile: &Profile,
    symbolizer: &mut Symbolizer,
    names: &Names,
) -> Vec<Warning> {
    let mut warnings = Vec::new();
    for module in names
        .code_modules
        .iter()
        .filter(|m| !names.stale.contains(m))
    {
        let m = profile.processes.modules.get(*module);
        if !m.is_file() {
            continue;
        }
        if let Ok(info) = symbolizer.module_info(Path::new(&m.path), m.build_id.as_deref()) {
            for rejected in &info.rejected_debug_files {
                warnings.push(Warning::RejectedDebugFile {
                    path: rejected.path.display().to_string(),
                    module: m.path.clone(),
                    reason: rejected.reason.clone(),
                });
            }
        }
    }
    warnings
}

/// The profiled command line, made safe to show.
pub(super) fn command(profile: &Profile) -> Vec<String> {
    profile
        .meta
        .as_ref()
        .map(|m| m.command.clone())
        .or_else(|| profile.cmdline.clone())
        .unwrap_or_default()
        .iter()
        .map(|arg| safe(arg))
        .collect()
}

/// The timeline's cells in time order, and the busiest leaf frames of its
/// buckets (their names join the model's).
pub(super) fn timeline_points(
    profile: &Profile,
    names: &Names,
    kept: &mut KeptStacks,
) -> (Vec<TimePoint>, Vec<SitePoint>) {
    let mut timeline: Vec<TimePoint> = profile
        .timeline
        .cells()
        .map(|(time, cell, tally)| TimePoint {
            time,
            class: cell.class,
            owner: cell.owner,
            faults: tally.faults,
            slowest: tally.slowest,
        })
        .collect();
    timeline.sort_unstable_by_key(|p| (p.time, p.class, p.owner));
    let mut sites: Vec<SitePoint> = profile
        .timeline
        .sites()
        .map(|(time, leaf, faults)| {
            if let Some(leaf) = leaf {
                kept.keep_frame(names, leaf);
            }
            SitePoint { time, leaf, faults }
        })
        .collect();
    sites.sort_unstable_by_key(|p| (p.time, p.leaf));
    (timeline, sites)
}

#[cfg(test)]
mod tests {
    use super::*;

    type Targets = BTreeMap<(FaultClass, String, Region, Option<String>), u64>;

    /// Counts by (class, object, region, section).
    fn targets(rows: &[(FaultClass, &str, Region, Option<&str>, u64)]) -> Targets {
        rows.iter()
            .map(|&(class, object, region, section, n)| {
                ((class, object.into(), region, section.map(Into::into)), n)
            })
            .collect()
    }

    /// A file's row sums its sections and classes; a major fault outside a
    /// file's pages is a swap-in; most major faults first, then most
    /// others, then by path.
    #[test]
    fn file_rows_sum_sections_and_order_by_major_faults() {
        use FaultClass::{Cow, Major, Minor};
        let rows = file_rows(&targets(&[
            (Minor, "/lib/libc.so.6", Region::File, Some(".text"), 40),
            (Major, "/lib/libc.so.6", Region::File, Some(".text"), 3),
            (Cow, "/lib/libc.so.6", Region::File, Some(".data"), 5),
            (Major, "/lib/libc.so.6", Region::Anon, Some(".bss"), 2),
            (Minor, "[heap]", Region::Heap, None, 900),
            (Major, "[anon]", Region::Anon, None, 5),
            (Minor, "/usr/bin/b", Region::File, None, 7),
            (Minor, "/usr/bin/a", Region::File, None, 7),
        ]));
        let got: Vec<_> = rows
            .iter()
            .map(|r| (&*r.path, r.major, r.minor, r.cow, r.swap))
            .collect();
        assert_eq!(
            got,
            [
                ("/lib/libc.so.6", 5, 40, 5, 2),
                ("[anon]", 5, 0, 0, 5),
                ("[heap]", 0, 900, 0, 0),
                ("/usr/bin/a", 0, 7, 0, 0),
                ("/usr/bin/b", 0, 7, 0, 0),
            ]
        );
    }

    /// One row per class, object and section, most faults first, ties by
    /// object.
    #[test]
    fn target_summary_rows_by_count() {
        use FaultClass::{Cow, Minor};
        let rows = target_summary_rows(&targets(&[
            (Minor, "/usr/bin/b", Region::File, Some(".text"), 3),
            (Cow, "/usr/bin/b", Region::Anon, Some(".bss"), 9),
            (Minor, "/usr/bin/a", Region::File, Some(".text"), 3),
            (Minor, "[stack]", Region::Stack, None, 1),
        ]));
        let got: Vec<_> = rows
            .iter()
            .map(|r| (r.class, &*r.object, r.region, r.section.as_deref(), r.count))
            .collect();
        assert_eq!(
            got,
            [
                (Cow, "/usr/bin/b", Region::Anon, Some(".bss"), 9),
                (Minor, "/usr/bin/a", Region::File, Some(".text"), 3),
                (Minor, "/usr/bin/b", Region::File, Some(".text"), 3),
                (Minor, "[stack]", Region::Stack, None, 1),
            ]
        );
    }
}
