//! Symbolization, once per unique address: code frames through the
//! `pfprof-symbolize` crate (one batch per module, cached by build-id) and
//! fault targets to section + data symbol. Produces the [`Report`] model and
//! the folded stacks that every renderer reads.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use pfprof_symbolize::{KernelSymbols, Options, Reason, Symbolizer};
use rustc_hash::{FxHashMap, FxHashSet};

use crate::analysis::classify::{Access, FaultClass};
use crate::analysis::latency::LatencyStats;
use crate::analysis::process::ModuleId;
use crate::analysis::relocation_pages;
use crate::analysis::stacks::{FrameKey, StackId, StackTable};
use crate::analysis::startup::{self, StartupFault};
use crate::analysis::{Profile, TargetKey};
use crate::format::perf_data::FileStamp;
use crate::model::report::{
    FileRow, FrameRow, ModuleRow, ProcessRow, Report, SiteRow, TargetRow, TargetSummaryRow, Totals,
};
use crate::model::{Model, SampleRow, TimePoint};
use crate::sys::vdso;
use crate::text::safe;

/// A symbolized frame: function, file, line, inlined flag.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Named {
    function: String,
    file: Option<String>,
    line: Option<u32>,
    inlined: bool,
    object: Option<ModuleId>,
}

/// Symbolizes the profile and builds the model every output reads. The
/// profile keeps its symbolizer, with every module it opened: the next
/// interval of `record --interval` or `top` reuses them (a fresh one each
/// time re-read libc's DWARF every second and fell behind the records).
pub fn resolve(profile: &mut Profile) -> Model {
    // The symbolizer already opened the modules that start-up detection needed.
    let mut symbolizer =
        std::mem::replace(&mut profile.symbolizer, Symbolizer::new(Options::default()));
    let model = resolve_with(profile, &mut symbolizer);
    profile.symbolizer = symbolizer;
    model
}

fn resolve_with(profile: &Profile, symbolizer: &mut Symbolizer) -> Model {
    let modules = &profile.processes.modules;
    // Names from the profiled world enter the model here, made safe to show
    // (report::display_safe); paths stay raw only for opening files.
    let path_of = |module: ModuleId| safe(&modules.get(module).path);
    let frame_row = |n: Named| FrameRow {
        function: n.function,
        file: n.file,
        line: n.line,
        inlined: n.inlined,
        object: n.object.map(path_of),
    };
    let mut module_status: FxHashMap<ModuleId, String> = FxHashMap::default();
    // Files without a build-id that are not the file recorded: their
    // addresses stay unnamed rather than get another build's names.
    let stale: FxHashSet<ModuleId> = match &profile.meta {
        Some(meta) => modules
            .iter()
            .filter(|(_, m)| m.build_id.is_none())
            .filter_map(|(id, m)| Some((id, changed_since(meta.files.get(&m.path)?, &m.path)?)))
            .map(|(id, why)| {
                module_status.insert(id, why);
                id
            })
            .collect(),
        None => FxHashSet::default(),
    };
    let mut note = |module: ModuleId, reason: &Reason| {
        module_status
            .entry(module)
            .or_insert_with(|| reason.to_string());
    };

    // Code frames: group unique offsets by module, one batch each.
    let mut by_module: BTreeMap<ModuleId, BTreeSet<u64>> = BTreeMap::new();
    let mut kernel_needed = false;
    for frame in profile.stacks.unique_frames() {
        match frame {
            FrameKey::Code {
                module,
                lookup_file_offset,
            } => {
                by_module
                    .entry(module)
                    .or_default()
                    .insert(lookup_file_offset);
            }
            FrameKey::Kernel { .. } => kernel_needed = true,
            FrameKey::Jit { .. } | FrameKey::Unknown | FrameKey::Exec => {}
        }
    }
    let mut code_names: FxHashMap<FrameKey, Vec<Named>> = FxHashMap::default();
    // `[vdso]` frames are named from pfprof's own vDSO when the recording
    // says which one it was: the symbolizer checks the build-id.
    let own_vdso = by_module
        .keys()
        .any(|id| modules.get(*id).path == vdso::PATH && modules.get(*id).build_id.is_some())
        && vdso::add_own_image(symbolizer);
    for (module, offsets) in &by_module {
        let m = modules.get(*module);
        let offsets: Vec<u64> = offsets.iter().copied().collect();
        let readable = (m.path.starts_with('/') && !stale.contains(module))
            || (own_vdso && m.path == vdso::PATH && m.build_id.is_some());
        let results = if readable {
            symbolizer.code(Path::new(&m.path), m.build_id.as_deref(), &offsets)
        } else {
            offsets.iter().map(|_| Err(Reason::MissingFile)).collect()
        };
        for (offset, result) in offsets.iter().zip(results) {
            let names = match result {
                Ok(site) => site
                    .frames
                    .into_iter()
                    .map(|f| Named {
                        function: safe(&f.function),
                        file: f.file.as_deref().map(safe),
                        line: f.line,
                        inlined: f.inlined,
                        object: Some(*module),
                    })
                    .collect(),
                Err(reason) => {
                    if m.path.starts_with('/')
                        && !matches!(reason, Reason::NoSymbol | Reason::NotInSegment)
                    {
                        note(*module, &reason);
                    }
                    vec![Named {
                        function: safe(&format!("{}+{offset:#x}", m.short_name())),
                        file: None,
                        line: None,
                        inlined: false,
                        object: Some(*module),
                    }]
                }
            };
            code_names.insert(
                FrameKey::Code {
                    module: *module,
                    lookup_file_offset: *offset,
                },
                names,
            );
        }
    }
    // Another kernel's frames stay addresses (a warning says why).
    let kernel_mismatch = kernel_needed
        .then(|| crate::analysis::foreign::kernel_mismatch(profile))
        .flatten();
    let kernel_symbols = if kernel_needed && kernel_mismatch.is_none() {
        KernelSymbols::load()
    } else {
        None
    };
    let frame_names = |frame: FrameKey| -> Vec<Named> {
        match frame {
            FrameKey::Code { .. } => code_names.get(&frame).cloned().unwrap_or_default(),
            FrameKey::Kernel { avma } => vec![Named {
                function: match kernel_symbols.as_ref().and_then(|k| k.lookup(avma)) {
                    Some((name, _)) => format!("{}_[k]", safe(name)),
                    None => format!("{avma:#x}_[k]"),
                },
                file: None,
                line: None,
                inlined: false,
                object: None,
            }],
            FrameKey::Jit { pid, avma } => vec![Named {
                function: jit_name(profile, pid, avma),
                file: None,
                line: None,
                inlined: false,
                object: None,
            }],
            FrameKey::Exec => vec![Named {
                function: "[execve]".into(),
                file: None,
                line: None,
                inlined: false,
                object: None,
            }],
            FrameKey::Unknown => vec![Named {
                function: "[unknown]".into(),
                file: None,
                line: None,
                inlined: false,
                object: None,
            }],
        }
    };

    // Targets: section and data symbol of each unique module offset.
    let mut data_offsets: BTreeMap<ModuleId, BTreeSet<u64>> = BTreeMap::new();
    for key in profile.counts.keys() {
        if let TargetKey::Module {
            module,
            file_offset,
            ..
        } = key.target
        {
            data_offsets.entry(module).or_default().insert(file_offset);
        }
    }
    type DataName = (Option<String>, Option<String>, Option<u64>);
    let mut data_names: FxHashMap<(ModuleId, u64), DataName> = FxHashMap::default();
    for (module, offsets) in &data_offsets {
        let m = modules.get(*module);
        let offsets: Vec<u64> = offsets.iter().copied().collect();
        let results = if stale.contains(module) {
            offsets.iter().map(|_| Err(Reason::NoSymbol)).collect()
        } else {
            symbolizer.data(Path::new(&m.path), m.build_id.as_deref(), &offsets)
        };
        for (offset, result) in offsets.iter().zip(results) {
            let names = match result {
                Ok(t) => (
                    t.section.as_deref().map(safe),
                    t.symbol.as_deref().map(safe),
                    Some(t.svma),
                ),
                Err(reason) => {
                    if !matches!(
                        reason,
                        Reason::NoSymbol | Reason::NotInSegment | Reason::NotElf
                    ) {
                        note(*module, &reason);
                    }
                    (None, None, None)
                }
            };
            data_names.insert((*module, *offset), names);
        }
    }
    let target_row = |target: TargetKey| -> TargetRow {
        let (object, region, section, symbol) = match target {
            TargetKey::Module {
                module,
                file_offset,
                bss_tail,
            } => {
                let (section, symbol, svma) = data_names
                    .get(&(module, file_offset))
                    .cloned()
                    .unwrap_or((None, None, None));
                match (bss_tail, svma) {
                    // Anonymous memory that merely follows the object's data
                    // but lies beyond its last segment: not its .bss.
                    (true, None) => ("[anon]".into(), "anon", None, None),
                    (true, Some(_)) => (path_of(module), "anon", section, symbol),
                    (false, _) => (path_of(module), "file", section, symbol),
                }
            }
            TargetKey::Pseudo(module) => (path_of(module), "special", None, None),
            TargetKey::Heap => ("[heap]".into(), "heap", None, None),
            TargetKey::Stack => ("[stack]".into(), "stack", None, None),
            TargetKey::Anon => ("[anon]".into(), "anon", None, None),
            TargetKey::Unknown => ("[unknown]".into(), "unknown", None, None),
        };
        TargetRow {
            object,
            region: region.into(),
            section,
            symbol,
        }
    };

    // Expand each interned stack once: names root first.
    let mut stack_cache: FxHashMap<u32, Vec<Named>> = FxHashMap::default();
    let mut expand = |stacks: &StackTable, stack: u32| -> Vec<Named> {
        stack_cache
            .entry(stack)
            .or_insert_with(|| {
                let mut leaf_first: Vec<Named> = Vec::new();
                for frame in stacks.frames(stack) {
                    leaf_first.extend(frame_names(frame));
                }
                leaf_first.reverse();
                leaf_first
            })
            .clone()
    };

    // Sites and folded stacks.
    #[derive(Default)]
    struct SiteAcc {
        count: u64,
        pids: BTreeMap<i32, u64>,
        stacks: BTreeMap<Vec<Named>, u64>,
    }
    type SiteKey = (FaultClass, Access, Option<Named>, TargetRow);
    let mut sites: BTreeMap<SiteKey, SiteAcc> = BTreeMap::new();
    let mut startup_rows: Vec<StartupFault> = Vec::new();
    // Start-up windows: one per exec'd program; one is shown in full.
    let program_of = |w: &startup::Window| match w.load_order.first() {
        Some(&module) => path_of(module),
        None => safe(&w.comm),
    };
    let chosen_index = profile
        .startup
        .choose(profile.startup.startup_of.as_deref(), program_of);
    let chosen = chosen_index.and_then(|i| u32::try_from(i).ok());
    let startups: Vec<startup::StartupWindow> = {
        let origin = profile.startup.first_exec().unwrap_or(0);
        let ms = |t: u64| t.saturating_sub(origin) as f64 / 1e6;
        let last = profile.decode.last_time;
        profile
            .startup
            .windows
            .iter()
            .map(|w| startup::StartupWindow {
                program: program_of(w),
                pid: w.pid,
                exec_ms: ms(w.exec_time),
                end_ms: w.window_ms(last).map(|d| ms(w.exec_time) + d),
                until: w.cut.name().to_string(),
                faults: w.faults,
            })
            .collect()
    };
    let mut targets: BTreeMap<(FaultClass, String, String, Option<String>), u64> = BTreeMap::new();
    let comm_of = |pid: i32| -> String {
        profile
            .processes
            .by_pid
            .get(&pid)
            .map_or_else(|| "?".to_string(), |p| safe(&p.comm))
    };
    let mut samples: Vec<SampleRow> = Vec::with_capacity(profile.counts.len());
    let mut stacks: FxHashMap<StackId, Vec<FrameKey>> = FxHashMap::default();
    let mut frames: FxHashMap<FrameKey, Vec<FrameRow>> = FxHashMap::default();
    // The model's stacks: raw frames leaf first, each frame named once.
    let mut keep_stack = |stack: StackId| {
        stacks.entry(stack).or_insert_with(|| {
            let raw: Vec<FrameKey> = profile.stacks.frames(stack).collect();
            for frame in &raw {
                frames
                    .entry(*frame)
                    .or_insert_with(|| frame_names(*frame).into_iter().map(frame_row).collect());
            }
            raw
        });
    };
    for (key, tally) in &profile.counts {
        let count = tally.faults;
        let names = expand(&profile.stacks, key.stack);
        let target = target_row(key.target);
        keep_stack(key.stack);
        samples.push(SampleRow {
            pid: key.pid,
            comm: comm_of(key.pid),
            class: key.class,
            access: key.access,
            stack: key.stack,
            target: target.clone(),
            faults: count,
            latency_ns: tally.latency_ns,
            // startup.svg: every window, or the chosen one's.
            startup: key.startup.is_some()
                && (profile.startup.startup_of.is_none() || key.startup == chosen),
        });
        let leaf = names.last().cloned();
        let acc = sites
            .entry((key.class, key.access, leaf, target.clone()))
            .or_default();
        acc.count += count;
        *acc.pids.entry(key.pid).or_default() += count;
        *acc.stacks.entry(names.clone()).or_default() += count;
        *targets
            .entry((
                key.class,
                target.object.clone(),
                target.region.clone(),
                target.section.clone(),
            ))
            .or_default() += count;

        if key.startup.is_some() && key.startup == chosen {
            let (page, section) = match key.target {
                TargetKey::Module {
                    module,
                    file_offset,
                    ..
                } => {
                    let svma = data_names.get(&(module, file_offset)).and_then(|d| d.2);
                    (
                        svma.map(|a| a >> 12),
                        target.section.clone().unwrap_or_else(|| "(none)".into()),
                    )
                }
                _ => (None, format!("[{}]", target.region)),
            };
            startup_rows.push(StartupFault {
                object: target.object.clone(),
                section,
                symbol: target.symbol.clone(),
                class: key.class,
                page,
                count,
                loader: relocation_pages::loader_write(
                    names.iter().rev().map(|n| n.function.as_str()),
                ),
            });
        }
    }

    let startup_report = (!startup_rows.is_empty())
        .then(|| {
            // The first code to touch each start-up data symbol.
            let mut first: BTreeMap<(String, String, String), (u64, String)> = BTreeMap::new();
            for (&(window, ref target), &(time, stack)) in &profile.first_touch {
                if Some(window) != chosen {
                    continue;
                }
                let row = target_row(*target);
                let (Some(section), Some(symbol)) = (row.section, row.symbol) else {
                    continue;
                };
                // The innermost real (not inlined) function: `_dl_relocate_object`
                // rather than its inlined `elf_machine_rela_relative`.
                let toucher = expand(&profile.stacks, stack)
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
            let first_touchers = first
                .into_iter()
                .filter(|(_, (_, f))| !f.is_empty())
                .map(|(k, (_, f))| (k, f))
                .collect();
            let mut facts: BTreeMap<String, startup::ObjectFacts> = BTreeMap::new();
            for (id, m) in modules.iter() {
                let shown = safe(&m.path);
                if !m.path.starts_with('/')
                    || stale.contains(&id)
                    || !startup_rows.iter().any(|r| r.object == shown)
                {
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
                let _ = id;
                facts.insert(shown, f);
            }
            let window = &profile.startup.windows[chosen_index?];
            let load_order: Vec<String> = window.load_order.iter().map(|m| path_of(*m)).collect();
            let mut report = startup::build(
                window,
                program_of(window),
                profile.decode.last_time,
                &startup_rows,
                &first_touchers,
                &facts,
                &load_order,
            );
            report.window = chosen_index;
            Some(report)
        })
        .flatten();

    let mut site_rows: Vec<(SiteRow, Vec<Named>)> = sites
        .into_iter()
        .map(|((class, access, leaf, target), acc)| {
            let top_pid = acc
                .pids
                .iter()
                .max_by_key(|(pid, n)| (**n, -**pid))
                .map(|(pid, _)| *pid)
                .unwrap_or(0);
            let stack = acc
                .stacks
                .into_iter()
                .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))
                .map(|s| s.0)
                .unwrap_or_default();
            let (function, file, line, object) = match leaf {
                Some(n) => (n.function, n.file, n.line, n.object.map(path_of)),
                None => ("[no stack]".to_string(), None, None, None),
            };
            let row = SiteRow {
                class,
                access,
                count: acc.count,
                pids: acc.pids.keys().copied().collect(),
                comm: comm_of(top_pid),
                function,
                file,
                line,
                object,
                stack_id: 0,
                target,
            };
            (row, stack)
        })
        .collect();
    site_rows.sort_by(|(a, _), (b, _)| {
        b.count
            .cmp(&a.count)
            .then_with(|| (a.class, a.access, &a.function).cmp(&(b.class, b.access, &b.function)))
    });
    // report.json's shared tables: each frame and each stack once, numbered
    // in the order of the sorted sites.
    let mut frame_ids: FxHashMap<Named, u32> = FxHashMap::default();
    let mut stack_ids: FxHashMap<Vec<u32>, u32> = FxHashMap::default();
    let mut frame_table: Vec<FrameRow> = Vec::new();
    let mut stack_table: Vec<Vec<u32>> = Vec::new();
    let site_rows: Vec<SiteRow> = site_rows
        .into_iter()
        .map(|(mut row, stack)| {
            let frames: Vec<u32> = stack
                .into_iter()
                .map(|named| {
                    *frame_ids.entry(named).or_insert_with_key(|named| {
                        frame_table.push(frame_row(named.clone()));
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

    let mut files: BTreeMap<String, FileRow> = BTreeMap::new();
    for ((class, object, region, _), count) in &targets {
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
                if region != "file" {
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
    let mut target_rows: Vec<TargetSummaryRow> = targets
        .into_iter()
        .map(
            |((class, object, region, section), count)| TargetSummaryRow {
                class,
                object,
                region,
                section,
                count,
            },
        )
        .collect();
    target_rows.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.object.cmp(&b.object)));

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
                exe: p.exe.map(path_of),
                minor: c.minor,
                major: c.major,
                cow: c.cow,
                threads: p.threads,
                execs: if p.execs.len() > 1 {
                    p.execs.iter().map(|m| path_of(*m)).collect()
                } else {
                    Vec::new()
                },
            }
        })
        .collect();
    // Most faults first; a system-wide run's idle processes last.
    processes.sort_by_key(|p| (std::cmp::Reverse(p.minor + p.major + p.cow), p.pid));

    let module_rows: Vec<ModuleRow> = modules
        .iter()
        .map(|(id, m)| ModuleRow {
            path: safe(&m.path),
            build_id: m.build_id.as_deref().map(crate::text::hex),
            problem: module_status.get(&id).map(|p| safe(p)),
        })
        .collect();

    let t = &profile.totals;
    let meta = profile.meta.as_ref();
    let totals = Totals {
        minor: t.by_class[FaultClass::Minor as usize],
        major: t.by_class[FaultClass::Major as usize],
        cow: t.by_class[FaultClass::Cow as usize],
        lost: t.lost,
        lost_by_class: t.lost_by_class,
        pfprof_faults: t.pfprof_faults,
        kernel_minor: meta.and_then(|m| m.kernel_minor),
        kernel_major: meta.and_then(|m| m.kernel_major),
        cow_available: profile.has_entries,
        major_file: t.major_file,
        major_swap: t.major_swap,
        kernel_mode: t.kernel_mode,
        unpaired: t.unpaired,
        entries_without_completion: t.entries_without_completion,
        bad_records: profile.decode.bad_records,
        no_callchain: t.no_callchain,
        call_graph: meta.map(|m| m.call_graph.clone()),
        collector: meta.and_then(|m| m.collector.clone()),
        truncated_stacks: t.truncated_stacks,
        unwind: meta
            .and_then(|m| m.unwind.clone())
            .or_else(|| profile.unwind.clone()),
    };
    let by_access = crate::model::report::ByAccess::from_counts(&t.by_class_access);
    let mut warnings = Vec::new();
    for row in &module_rows {
        if let Some(problem) = &row.problem {
            warnings.push(format!("{}: {problem}", row.path));
        }
    }
    // Debug files found for the modules named, but of another build.
    for module in by_module.keys().filter(|m| !stale.contains(m)) {
        let m = modules.get(*module);
        if !m.path.starts_with('/') {
            continue;
        }
        if let Ok(info) = symbolizer.module_info(Path::new(&m.path), m.build_id.as_deref()) {
            for rejected in &info.rejected_debug_files {
                warnings.push(format!(
                    "{}: not used as the debug file of {}: {}",
                    rejected.path.display(),
                    m.path,
                    rejected.reason
                ));
            }
        }
    }
    if let Some(why) = &profile.decode.truncated {
        warnings.push(format!(
            "recording damaged, analysed the intact part: {why}"
        ));
    }
    for file in meta
        .and_then(|m| m.unwind.as_ref())
        .map_or(&[][..], |u| &u.unreadable_files[..])
    {
        warnings.push(format!(
            "{file}: no unwind information could be read while recording; stacks through it end in [unknown]"
        ));
    }
    if let Some(note) = meta.and_then(|m| m.tracepoints_note.as_ref()) {
        warnings.push(format!("COW and access types unavailable: {note}"));
    }
    warnings.extend(crate::analysis::foreign::warnings(profile));
    warnings.extend(kernel_mismatch);
    warnings.extend(profile.jit_warnings.iter().cloned());
    // Problems quote file names and the recording's own notes.
    let warnings: Vec<String> = warnings.iter().map(|w| safe(w)).collect();
    let command: Vec<String> = meta
        .map(|m| m.command.clone())
        .or_else(|| profile.cmdline.clone())
        .unwrap_or_default()
        .iter()
        .map(|arg| safe(arg))
        .collect();
    let mut report = Report {
        pfprof_version: env!("CARGO_PKG_VERSION").to_string(),
        command,
        exit: meta.and_then(|m| m.exit.clone()),
        period: meta.map_or(1, |m| m.period),
        sampled_class: meta.map_or_else(Default::default, |m| m.class),
        totals,
        by_access,
        processes,
        sites: site_rows,
        stacks: stack_table,
        frames: frame_table,
        targets: target_rows,
        files,
        modules: module_rows,
        warnings,
        wall_ns: meta.map(|m| m.wall_ns),
        data_bytes: meta.map(|m| m.data_bytes),
        records: profile.decode.records,
        stack_frames: profile.stacks.len(),
        startup: startup_report,
        startups,
        latency: FaultClass::ALL
            .iter()
            .map(|c| {
                (
                    c.name().to_string(),
                    LatencyStats::from_counts(&profile.latencies[*c as usize]),
                )
            })
            .collect(),
    };
    // What was lost comes first.
    let mut warnings = report.completeness_warnings();
    if profile.meta.is_none() {
        // perf's recording: perf's buffers were too small, not pfprof's.
        for w in &mut warnings {
            *w = w.replace("with --mmap-pages", "with perf record -m PAGES");
        }
    }
    warnings.append(&mut report.warnings);
    report.warnings = warnings;
    let mut timeline: Vec<TimePoint> = profile
        .timeline
        .cells()
        .map(|(time, cell, tally)| {
            keep_stack(cell.stack);
            TimePoint {
                time,
                class: cell.class,
                stack: cell.stack,
                pid: cell.pid,
                faults: tally.faults,
                slowest: tally.slowest,
            }
        })
        .collect();
    timeline.sort_unstable_by_key(|p| (p.time, p.class, p.pid, p.stack));
    let timeline_origin = profile
        .startup
        .first_exec()
        .or(profile.decode.first_time)
        .unwrap_or(0);
    let startup_scope = match (&profile.startup.startup_of, &report.startup) {
        (Some(_), Some(s)) => format!(
            "{} [pid {}]",
            s.program.as_deref().unwrap_or("?"),
            s.pid.unwrap_or(0)
        ),
        _ => match report.startups.len() {
            1 => "the program".to_string(),
            n => format!(
                "every program, {} windows",
                crate::text::thousands(n as u64)
            ),
        },
    };
    Model {
        startup_scope,
        report,
        samples,
        stacks,
        frames,
        timeline,
        timeline_origin,
    }
}

/// A JIT frame's name: the perf map's line covering it (made safe to
/// show), else `[jit 0x…]`.
fn jit_name(profile: &Profile, pid: i32, avma: u64) -> String {
    match profile.jit_maps.get(&pid).and_then(|map| map.lookup(avma)) {
        Some(name) => safe(name),
        None => format!("[jit {avma:#x}]"),
    }
}

/// Why the file at `path` is not the one recorded with these stamps, if it
/// is not: its size or modification time differ, or several files were
/// mapped under the path and nothing tells which one an address was in.
fn changed_since(recorded: &[FileStamp], path: &str) -> Option<String> {
    if recorded.len() > 1 {
        return Some(format!(
            "{} different files without a build-id were mapped under this path while recording \
             (a file replaced, or containers); its addresses are shown unnamed",
            recorded.len()
        ));
    }
    let was = recorded.first()?;
    // A missing file is the symbolizer's to report.
    let now = FileStamp::of(&std::fs::metadata(path).ok()?);
    (now != *was).then(|| {
        format!(
            "The file has no build-id and changed since recording (size {} -> {} bytes, \
             mtime {} -> {} ns); its addresses are shown unnamed",
            was.size, now.size, was.mtime_ns, now.mtime_ns
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file is trusted only with the one stamp it had when recorded; a
    /// missing file is left to the symbolizer.
    #[test]
    fn changed_since_table() {
        let dir = std::env::temp_dir().join(format!("pfprof-stamps-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("app");
        std::fs::write(&file, b"0123456789").unwrap();
        let now = FileStamp::of(&std::fs::metadata(&file).unwrap());
        let path = file.to_str().unwrap();
        let older = FileStamp {
            mtime_ns: now.mtime_ns - 1,
            ..now
        };
        let smaller = FileStamp {
            size: now.size - 1,
            ..now
        };
        let cases: [(&str, Vec<FileStamp>, Option<&str>); 6] = [
            ("same", vec![now], None),
            ("nothing recorded", vec![], None),
            ("touched", vec![older], Some("changed since recording")),
            ("rewritten", vec![smaller], Some("size 9 -> 10 bytes")),
            ("two files", vec![now, older], Some("2 different files")),
            ("missing file", vec![older], None),
        ];
        for (what, recorded, want) in cases {
            let path = if what == "missing file" {
                "/nonexistent/app"
            } else {
                path
            };
            let got = changed_since(&recorded, path);
            match (want, &got) {
                (None, None) => {}
                (Some(want), Some(got)) => assert!(got.contains(want), "{what}: {got}"),
                _ => panic!("{what}: {got:?}"),
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
