//! Symbolization, once per unique address: code frames through the
//! `pfprof-symbolize` crate (one batch per module, cached by build-id) and
//! fault targets to section + data symbol. Produces the [`Report`] model and
//! the folded stacks that every renderer reads.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use pfprof_symbolize::{CodeBatch, KernelSymbols, Options, Reason, Symbolizer};
use rustc_hash::{FxHashMap, FxHashSet};

use crate::analysis::classify::{Access, FaultClass};
use crate::analysis::foreign::KernelMismatch;
use crate::analysis::latency::LatencyStats;
use crate::analysis::process::{ModuleId, ProgramId};
use crate::analysis::relocation_pages;
use crate::analysis::stacks::{FrameKey, StackId, StackTable};
use crate::analysis::startup::Window;
use crate::analysis::{Owner, Profile, TargetKey};
use crate::format::perf_data::FileStamp;
use crate::model::report::{
    ByAccess, ByClass, FileRow, FrameKind, FrameRow, ModuleRow, ProcessRow, Recorder, Region,
    Report, SiteRow, TargetRow, TargetSummaryRow, Totals, NO_STACK,
};
use crate::model::startup::{self, StartupFault, StartupPlace};
use crate::model::warning::{ModuleProblem, Warning};
use crate::model::{Model, SampleRow, SitePoint, TimePoint};
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

/// The model in its steps: names, counts, tables, warnings, start-up,
/// timeline.
fn resolve_with(profile: &Profile, symbolizer: &mut Symbolizer) -> Model {
    let names = Names::resolve(profile, symbolizer);
    let mut kept = KeptStacks::default();
    let startup = StartupChoice::of(profile, &names);
    let counted = count(profile, &names, &mut kept, startup.chosen);
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
        stacks: profile.stacks.stacks().clone(),
        frames: kept.frames,
        timeline,
        timeline_sites,
        timeline_origin: profile
            .startup
            .first_exec()
            .or(profile.decode.first_time)
            .unwrap_or(0),
    }
}

/// A data target's section, symbol and address in the file.
type DataName = (Option<String>, Option<String>, Option<u64>);

/// Every unique code address and fault target of the profile, named once;
/// and what went wrong with each module.
struct Names<'p> {
    profile: &'p Profile,
    /// The names of each frame of the profile's stacks, innermost
    /// (inlined) first.
    frames: FxHashMap<FrameKey, Vec<Named>>,
    /// The modules with code frames.
    code_modules: Vec<ModuleId>,
    data: FxHashMap<(ModuleId, u64), DataName>,
    kernel: Option<KernelSymbols>,
    /// Why the kernel's frames stay addresses: another kernel's recording.
    kernel_mismatch: Option<KernelMismatch>,
    /// Files without a build-id that are not the file recorded: their
    /// addresses stay unnamed rather than get another build's names.
    stale: FxHashSet<ModuleId>,
    /// The first problem met with each module.
    module_status: FxHashMap<ModuleId, ModuleProblem>,
}

impl<'p> Names<'p> {
    fn resolve(profile: &'p Profile, symbolizer: &mut Symbolizer) -> Names<'p> {
        let mut module_status = stale_modules(profile);
        let stale: FxHashSet<ModuleId> = module_status.keys().copied().collect();
        let (by_module, kernel_needed) = code_offsets(profile);
        // Another kernel's frames stay addresses (a warning says why).
        let kernel_mismatch = kernel_needed
            .then(|| crate::analysis::foreign::kernel_mismatch(profile))
            .flatten();
        let (code, data, kernel) = std::thread::scope(|scope| {
            // kallsyms is read while the modules are (the kernel takes
            // ~40 ms to format its 120,000 lines).
            let kernel = (kernel_needed && kernel_mismatch.is_none())
                .then(|| scope.spawn(KernelSymbols::load));
            let code = name_code(profile, symbolizer, &by_module, &stale, &mut module_status);
            let data = name_data(profile, symbolizer, &stale, &mut module_status);
            let kernel = kernel.and_then(|reading| {
                reading
                    .join()
                    .unwrap_or_else(|p| std::panic::resume_unwind(p))
            });
            (code, data, kernel)
        });
        let mut names = Names {
            profile,
            frames: code,
            code_modules: by_module.into_keys().collect(),
            data,
            kernel,
            kernel_mismatch,
            stale,
            module_status,
        };
        // Frames named without a symbolizer, named once too.
        for frame in profile.stacks.unique_frames() {
            if !names.frames.contains_key(&frame) {
                let named = names.named(frame);
                names.frames.insert(frame, named);
            }
        }
        names
    }

    /// A module's path as shown. Names from the profiled world enter the
    /// model here, made safe to show (`text::safe`); paths stay raw only for
    /// opening files.
    fn path_of(&self, module: ModuleId) -> String {
        safe(&self.profile.processes.modules.get(module).path)
    }

    fn frame_row(&self, n: Named) -> FrameRow {
        FrameRow {
            function: n.function,
            kind: n.kind,
            file: n.file,
            line: n.line,
            inlined: n.inlined,
            object: n.object.map(|m| self.path_of(m)),
        }
    }

    /// The functions of a frame of the profile's stacks, innermost
    /// (inlined) first.
    fn frame(&self, frame: FrameKey) -> &[Named] {
        self.frames.get(&frame).map_or(&[], Vec::as_slice)
    }

    /// The functions of a frame no symbolizer names; a code frame's
    /// ([`Names::resolve`] named them).
    fn named(&self, frame: FrameKey) -> Vec<Named> {
        match frame {
            FrameKey::Code { .. } => self.frames.get(&frame).cloned().unwrap_or_default(),
            FrameKey::Kernel { avma } => vec![Named::bare(
                FrameKind::Kernel,
                match self.kernel.as_ref().and_then(|k| k.lookup(avma)) {
                    Some((name, _)) => format!("{}_[k]", safe(name)),
                    None => format!("{avma:#x}_[k]"),
                },
            )],
            FrameKey::Jit { pid, avma } => vec![jit_frame(self.profile, pid, avma)],
            FrameKey::Exec => vec![placeholder(FrameKind::Exec)],
            FrameKey::Unknown => vec![placeholder(FrameKind::Unknown)],
        }
    }

    /// A data target's address in its file, when it has one.
    fn svma(&self, module: ModuleId, file_offset: u64) -> Option<u64> {
        self.data.get(&(module, file_offset)).and_then(|d| d.2)
    }

    /// A fault's target: object, region, section, data symbol.
    fn target(&self, target: TargetKey) -> TargetRow {
        let (section, symbol, svma) = match target {
            TargetKey::Module {
                module,
                file_offset,
                ..
            } => self.data.get(&(module, file_offset)).cloned(),
            _ => None,
        }
        .unwrap_or((None, None, None));
        let region = match target {
            TargetKey::Module {
                bss_tail: false, ..
            } => Region::File,
            TargetKey::Module { bss_tail: true, .. } | TargetKey::Anon => Region::Anon,
            TargetKey::Pseudo(_) => Region::Special,
            TargetKey::Heap => Region::Heap,
            TargetKey::Stack => Region::Stack,
            TargetKey::Unknown => Region::Unknown,
        };
        // Section and symbol are None wherever the label applies (the
        // symbolizer placed the address nowhere).
        let object = match target.label(svma.is_some()) {
            Some(label) => label.to_string(),
            None => target.module().map(|m| self.path_of(m)).unwrap_or_default(),
        };
        TargetRow {
            object,
            region,
            section,
            symbol,
        }
    }

    /// The command name of a process or program, made safe to show.
    fn owner_name(&self, owner: Owner) -> String {
        match owner {
            Owner::Process(pid) => self.comm_of(pid),
            Owner::Program(id) => safe(self.profile.processes.programs.name(id)),
        }
    }

    /// A process's command name, made safe to show.
    fn comm_of(&self, pid: i32) -> String {
        self.profile
            .processes
            .by_pid
            .get(&pid)
            .map_or_else(|| "?".to_string(), |p| safe(&p.comm))
    }
}

/// The modules without a build-id whose file changed since recording, with
/// why.
fn stale_modules(profile: &Profile) -> FxHashMap<ModuleId, ModuleProblem> {
    let Some(meta) = &profile.meta else {
        return FxHashMap::default();
    };
    profile
        .processes
        .modules
        .iter()
        .filter(|(_, m)| m.build_id.is_none())
        .filter_map(|(id, m)| Some((id, changed_since(meta.files.get(&m.path)?, &m.path)?)))
        .collect()
}

/// The unique code offsets per module (one symbolizer batch each), and
/// whether any frame is the kernel's.
fn code_offsets(profile: &Profile) -> (BTreeMap<ModuleId, BTreeSet<u64>>, bool) {
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
    (by_module, kernel_needed)
}

/// Names each code offset, one batch per module; an offset without a name
/// is `module+0x…`, and a module's problem is noted once.
fn name_code(
    profile: &Profile,
    symbolizer: &mut Symbolizer,
    by_module: &BTreeMap<ModuleId, BTreeSet<u64>>,
    stale: &FxHashSet<ModuleId>,
    module_status: &mut FxHashMap<ModuleId, ModuleProblem>,
) -> FxHashMap<FrameKey, Vec<Named>> {
    let modules = &profile.processes.modules;
    let mut code_names = FxHashMap::default();
    // `[vdso]` frames are named from pfprof's own vDSO when the recording
    // says which one it was: the symbolizer checks the build-id.
    let own_vdso = by_module
        .keys()
        .any(|id| modules.get(*id).is_vdso() && modules.get(*id).build_id.is_some())
        && vdso::add_own_image(symbolizer);
    let offsets: Vec<(ModuleId, Vec<u64>)> = by_module
        .iter()
        .map(|(module, offsets)| (*module, offsets.iter().copied().collect()))
        .collect();
    let readable = |module: ModuleId| {
        let m = modules.get(module);
        (m.is_file() && !stale.contains(&module))
            || (own_vdso && m.is_vdso() && m.build_id.is_some())
    };
    // Each readable module's batch, looked up on every CPU at once.
    let batches: Vec<CodeBatch<'_>> = offsets
        .iter()
        .filter(|(module, _)| readable(*module))
        .map(|(module, offsets)| {
            let m = modules.get(*module);
            CodeBatch {
                path: Path::new(&m.path),
                expected_build_id: m.build_id.as_deref(),
                file_offsets: offsets,
            }
        })
        .collect();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut answers = symbolizer.code_batches(&batches, threads).into_iter();
    for (module, offsets) in &offsets {
        let m = modules.get(*module);
        let results = if readable(*module) {
            answers.next().unwrap_or_default()
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
                        kind: FrameKind::Code,
                        file: f.file.as_deref().map(safe),
                        line: f.line,
                        inlined: f.inlined,
                        object: Some(*module),
                    })
                    .collect(),
                Err(reason) => {
                    if m.is_file() && !matches!(reason, Reason::NoSymbol | Reason::NotInSegment) {
                        note(module_status, *module, &reason);
                    }
                    vec![Named {
                        object: Some(*module),
                        ..Named::bare(
                            FrameKind::Code,
                            safe(&format!("{}+{offset:#x}", m.short_name())),
                        )
                    }]
                }
            };
            let key = FrameKey::Code {
                module: *module,
                lookup_file_offset: *offset,
            };
            code_names.insert(key, names);
        }
    }
    code_names
}

/// Names each fault target in a module: section and data symbol, one batch
/// per module.
fn name_data(
    profile: &Profile,
    symbolizer: &mut Symbolizer,
    stale: &FxHashSet<ModuleId>,
    module_status: &mut FxHashMap<ModuleId, ModuleProblem>,
) -> FxHashMap<(ModuleId, u64), DataName> {
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
    let mut data_names = FxHashMap::default();
    for (module, offsets) in &data_offsets {
        let m = profile.processes.modules.get(*module);
        let offsets: Vec<u64> = offsets.iter().copied().collect();
        // A memfd names no file to read.
        let results = if stale.contains(module) || !m.is_file() {
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
                        note(module_status, *module, &reason);
                    }
                    (None, None, None)
                }
            };
            data_names.insert((*module, *offset), names);
        }
    }
    data_names
}

/// Keeps the first problem met with a module.
fn note(module_status: &mut FxHashMap<ModuleId, ModuleProblem>, module: ModuleId, reason: &Reason) {
    module_status
        .entry(module)
        .or_insert_with(|| ModuleProblem::Symbolizer(reason.clone()));
}

/// The names of a stack, root first (borrowed from [`Names`], which names
/// each frame once). Not kept: a busy interval has tens of thousands of
/// stacks, sixty frames deep.
fn expand<'n>(names: &'n Names, stacks: &StackTable, stack: StackId) -> Vec<&'n Named> {
    let mut leaf_first: Vec<&Named> = Vec::new();
    for frame in stacks.frames(stack) {
        leaf_first.extend(names.frame(frame));
    }
    leaf_first.reverse();
    leaf_first
}

/// The innermost function of a stack: the first name of its leaf frame.
fn leaf_of<'n>(names: &'n Names, stacks: &StackTable, stack: StackId) -> Option<&'n Named> {
    stacks
        .frames(stack)
        .next()
        .and_then(|frame| names.frame(frame).first())
}

/// The names of the frames of the model's stacks, each frame named once.
#[derive(Default)]
struct KeptStacks {
    frames: FxHashMap<FrameKey, Vec<FrameRow>>,
    /// The stacks kept already.
    kept: FxHashSet<StackId>,
}

impl KeptStacks {
    fn keep(&mut self, names: &Names, stack: StackId) {
        if !self.kept.insert(stack) {
            return;
        }
        for frame in names.profile.stacks.frames(stack) {
            self.keep_frame(names, frame);
        }
    }

    fn keep_frame(&mut self, names: &Names, frame: FrameKey) {
        self.frames.entry(frame).or_insert_with(|| {
            names
                .frame(frame)
                .iter()
                .map(|n| names.frame_row(n.clone()))
                .collect()
        });
    }
}

/// The start-up windows, one per exec'd program, and the one shown in full.
struct StartupChoice {
    windows: Vec<startup::StartupWindow>,
    /// Index into the profile's windows of the one shown in full.
    chosen_index: Option<usize>,
    chosen: Option<u32>,
}

impl StartupChoice {
    fn of(profile: &Profile, names: &Names) -> StartupChoice {
        let chosen_index = profile
            .startup
            .choose(profile.startup.startup_of.as_deref(), |w| {
                program_of(names, w)
            });
        let origin = profile.startup.first_exec().unwrap_or(0);
        let ms = |t: u64| t.saturating_sub(origin) as f64 / 1e6;
        let last = profile.decode.last_time;
        let windows = profile
            .startup
            .windows
            .iter()
            .map(|w| startup::StartupWindow {
                program: program_of(names, w),
                pid: w.pid,
                exec_ms: ms(w.exec_time),
                end_ms: w.window_ms(last).map(|d| ms(w.exec_time) + d),
                until: startup::Until::of(&w.cut),
                faults: w.faults,
            })
            .collect();
        StartupChoice {
            windows,
            chosen_index,
            chosen: chosen_index.and_then(|i| u32::try_from(i).ok()),
        }
    }
}

/// A start-up window's program: its first module, else its command name.
fn program_of(names: &Names, w: &Window) -> String {
    match w.load_order.first() {
        Some(&module) => names.path_of(module),
        None => safe(&w.comm),
    }
}

/// A site: class, access, innermost function, target (the last two as
/// [`Interned`] ids).
type SiteKey = (FaultClass, Access, Option<u32>, u32);

/// What is counted under a site: faults, per process (or program,
/// system-wide), per raw stack.
#[derive(Default)]
struct SiteAcc {
    count: u64,
    pids: FxHashMap<i32, u64>,
    programs: FxHashMap<ProgramId, u64>,
    stacks: FxHashMap<StackId, u64>,
}

/// Faults per class and target (its [`Interned`] id).
type TargetCounts = FxHashMap<(FaultClass, u32), u64>;

/// Names and targets numbered as they are met, so that the counting keys
/// on numbers and each name or target is built and compared once.
#[derive(Default)]
struct Interned {
    /// Each distinct target, by id.
    targets: Vec<Arc<TargetRow>>,
    target_ids: FxHashMap<Arc<TargetRow>, u32>,
    /// The id of each raw target met.
    of_key: FxHashMap<TargetKey, u32>,
    /// Each distinct innermost function, by id.
    leaves: Vec<Named>,
    leaf_ids: FxHashMap<Named, u32>,
    /// The id of each stack's innermost function (None: no stack).
    leaf_of: FxHashMap<StackId, Option<u32>>,
    /// Each process's (or program's) command name, made safe once.
    comms: FxHashMap<Owner, Arc<str>>,
}

impl Interned {
    /// The id of the target `key`, named once.
    fn target(&mut self, names: &Names, key: TargetKey) -> u32 {
        if let Some(&id) = self.of_key.get(&key) {
            return id;
        }
        let row = Arc::new(names.target(key));
        let next = self.targets.len() as u32;
        let id = *self.target_ids.entry(Arc::clone(&row)).or_insert(next);
        if id == next {
            self.targets.push(row);
        }
        self.of_key.insert(key, id);
        id
    }

    /// The id of the innermost function of `stack`.
    fn leaf(&mut self, names: &Names, stacks: &StackTable, stack: StackId) -> Option<u32> {
        if let Some(&id) = self.leaf_of.get(&stack) {
            return id;
        }
        let id = leaf_of(names, stacks, stack).map(|leaf| {
            let next = self.leaves.len() as u32;
            let id = *self.leaf_ids.entry(Named::clone(leaf)).or_insert(next);
            if id == next {
                self.leaves.push(Named::clone(leaf));
            }
            id
        });
        self.leaf_of.insert(stack, id);
        id
    }

    fn comm(&mut self, names: &Names, owner: Owner) -> Arc<str> {
        Arc::clone(
            self.comms
                .entry(owner)
                .or_insert_with(|| Arc::from(names.owner_name(owner))),
        )
    }
}

/// The profile's counts, named and summed per site, target and row.
struct Counted {
    samples: Vec<SampleRow>,
    sites: FxHashMap<SiteKey, SiteAcc>,
    targets: TargetCounts,
    interned: Interned,
    /// The faults of the start-up window shown in full.
    startup_rows: Vec<StartupFault>,
}

/// One pass over the profile's counts (one per distinct key): the model's
/// sample rows, the sites, the targets, the chosen start-up's faults.
fn count(profile: &Profile, names: &Names, kept: &mut KeptStacks, chosen: Option<u32>) -> Counted {
    let mut counted = Counted {
        samples: Vec::with_capacity(profile.counts.len()),
        sites: FxHashMap::default(),
        targets: FxHashMap::default(),
        interned: Interned::default(),
        startup_rows: Vec::new(),
    };
    let interned = &mut counted.interned;
    // Keys that differ only in the page of a target name one row: the
    // pages of a file's `.text` are one target.
    let mut rows: FxHashMap<(Owner, FaultClass, Access, StackId, u32, bool), usize> =
        FxHashMap::default();
    for (key, tally) in &profile.counts {
        let count = tally.faults;
        let target_id = interned.target(names, key.target);
        let leaf = interned.leaf(names, &profile.stacks, key.stack);
        // startup.svg: every window, or the chosen one's.
        let startup = key.startup.is_some()
            && (profile.startup.startup_of.is_none() || key.startup == chosen);
        let row_key = (
            key.owner, key.class, key.access, key.stack, target_id, startup,
        );
        match rows.get(&row_key) {
            Some(&at) => {
                let row = &mut counted.samples[at];
                row.faults += count;
                row.latency_ns += tally.latency_ns;
            }
            None => {
                kept.keep(names, key.stack);
                rows.insert(row_key, counted.samples.len());
                let comm = interned.comm(names, key.owner);
                let target = &interned.targets[target_id as usize];
                counted.samples.push(SampleRow {
                    owner: key.owner,
                    comm,
                    class: key.class,
                    access: key.access,
                    stack: key.stack,
                    target: Arc::clone(target),
                    faults: count,
                    latency_ns: tally.latency_ns,
                    startup,
                });
            }
        }
        let acc = counted
            .sites
            .entry((key.class, key.access, leaf, target_id))
            .or_default();
        acc.count += count;
        if let Some(pid) = key.owner.pid() {
            *acc.pids.entry(pid).or_default() += count;
        }
        if let Owner::Program(program) = key.owner {
            *acc.programs.entry(program).or_default() += count;
        }
        *acc.stacks.entry(key.stack).or_default() += count;
        *counted.targets.entry((key.class, target_id)).or_default() += count;
        if key.startup.is_some() && key.startup == chosen {
            let target = &interned.targets[target_id as usize];
            let stack_names = expand(names, &profile.stacks, key.stack);
            let row = startup_fault(names, key.target, target, key.class, count, &stack_names);
            counted.startup_rows.push(row);
        }
    }
    counted
}

/// Faults per class, object, region and section, in that order.
fn target_sections(
    targets: &TargetCounts,
    interned: &Interned,
) -> BTreeMap<(FaultClass, String, Region, Option<String>), u64> {
    let mut sections = BTreeMap::new();
    for (&(class, id), &count) in targets {
        let t = &interned.targets[id as usize];
        *sections
            .entry((class, t.object.clone(), t.region, t.section.clone()))
            .or_default() += count;
    }
    sections
}

/// A fault of the start-up window shown in full, for `startup::build`.
fn startup_fault(
    names: &Names,
    key: TargetKey,
    target: &TargetRow,
    class: FaultClass,
    count: u64,
    stack_names: &[&Named],
) -> StartupFault {
    let (page, section) = match key {
        TargetKey::Module {
            module,
            file_offset,
            ..
        } => (
            names.svma(module, file_offset).map(|a| a >> 12),
            target
                .section
                .clone()
                .map_or(StartupPlace::NoSection, StartupPlace::Section),
        ),
        _ => (None, StartupPlace::Region(target.region)),
    };
    StartupFault {
        object: target.object.clone(),
        section,
        symbol: target.symbol.clone(),
        class,
        page,
        count,
        loader: relocation_pages::loader_write(
            stack_names.iter().rev().map(|n| n.function.as_str()),
        ),
    }
}

/// The start-up analysis of the window shown in full.
fn startup_report(
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
fn first_touchers(
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
fn object_facts(
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
fn site_tables(
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
fn site_row<'e>(
    names: &'e Names,
    stacks: &StackTable,
    interned: &'e Interned,
    (class, access, leaf, target): SiteKey,
    acc: &SiteAcc,
) -> (SiteRow, Option<&'e Named>, Vec<&'e Named>) {
    let top_pid = acc
        .pids
        .iter()
        .max_by_key(|(pid, n)| (**n, -**pid))
        .map(|(pid, _)| *pid);
    let top_program = acc
        .programs
        .iter()
        .max_by_key(|(id, n)| (**n, std::cmp::Reverse(**id)))
        .map(|(id, _)| *id);
    let comm = match (top_pid, top_program) {
        (Some(pid), _) => names.comm_of(pid),
        (None, Some(program)) => names.owner_name(Owner::Program(program)),
        (None, None) => names.comm_of(0),
    };
    let mut by_names: FxHashMap<Vec<&Named>, u64> = FxHashMap::default();
    for (stack, count) in &acc.stacks {
        *by_names.entry(expand(names, stacks, *stack)).or_default() += count;
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
    let mut pids: Vec<i32> = acc.pids.keys().copied().collect();
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
fn file_rows(
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
fn target_summary_rows(
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
fn process_rows(profile: &Profile, names: &Names) -> Vec<ProcessRow> {
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
fn module_rows(profile: &Profile, names: &Names) -> Vec<ModuleRow> {
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
fn totals(profile: &Profile) -> Totals {
    let t = &profile.totals;
    let meta = profile.meta.as_ref();
    Totals {
        faults: t.by_class,
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
fn warnings(
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
    warnings
}

/// Debug files found for the modules named, but of another build.
fn rejected_debug_files(
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
fn command(profile: &Profile) -> Vec<String> {
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
fn timeline_points(
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

/// A JIT frame: named by the perf map's line covering it (made safe to
/// show), else `[jit 0x…]`.
fn jit_frame(profile: &Profile, pid: i32, avma: u64) -> Named {
    match profile.jit_maps.get(&pid).and_then(|map| map.lookup(avma)) {
        Some(name) => Named::bare(FrameKind::Jit, safe(name)),
        None => Named::bare(FrameKind::UnnamedJit, format!("[jit {avma:#x}]")),
    }
}

/// A frame nothing names: `[execve]`, `[unknown]`.
fn placeholder(kind: FrameKind) -> Named {
    Named::bare(kind, kind.placeholder().unwrap_or_default().to_string())
}

/// Why the file at `path` is not the one recorded with these stamps, if it
/// is not: its size or modification time differ, or several files were
/// mapped under the path and nothing tells which one an address was in.
fn changed_since(recorded: &[FileStamp], path: &str) -> Option<ModuleProblem> {
    if recorded.len() > 1 {
        return Some(ModuleProblem::SeveralFiles {
            files: recorded.len(),
        });
    }
    let was = *recorded.first()?;
    // A missing file is the symbolizer's to report.
    let now = FileStamp::of(&std::fs::metadata(path).ok()?);
    (now != was).then_some(ModuleProblem::Changed { was, now })
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
        let changed = |was| Some(ModuleProblem::Changed { was, now });
        let cases: [(&str, Vec<FileStamp>, Option<ModuleProblem>); 6] = [
            ("same", vec![now], None),
            ("nothing recorded", vec![], None),
            ("touched", vec![older], changed(older)),
            ("rewritten", vec![smaller], changed(smaller)),
            (
                "two files",
                vec![now, older],
                Some(ModuleProblem::SeveralFiles { files: 2 }),
            ),
            ("missing file", vec![older], None),
        ];
        for (what, recorded, want) in cases {
            let path = if what == "missing file" {
                "/nonexistent/app"
            } else {
                path
            };
            assert_eq!(changed_since(&recorded, path), want, "{what}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
