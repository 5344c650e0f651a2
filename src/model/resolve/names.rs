//! Names, once per unique code address and fault target: the
//! symbolizer's frames by module, data targets by section and symbol.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use pfprof_symbolize::{CodeBatch, KernelSymbols, Reason, Symbolizer};
use rustc_hash::{FxHashMap, FxHashSet};

use crate::analysis::foreign::KernelMismatch;
use crate::analysis::process::ModuleId;
use crate::analysis::stacks::{FrameKey, StackId, StackTable};
use crate::analysis::{Owner, Profile, TargetKey};
use crate::format::perf_data::FileStamp;
use crate::model::report::{FrameKind, FrameRow, Region, TargetRow};
use crate::model::warning::ModuleProblem;
use crate::sys::vdso;
use crate::text::safe;

use super::Named;

/// A data target's section, symbol and address in the file.
pub(super) type DataName = (Option<String>, Option<String>, Option<u64>);

/// Every unique code address and fault target of the profile, named once;
/// and what went wrong with each module.
pub(super) struct Names<'p> {
    pub(super) profile: &'p Profile,
    /// The names of each frame of the profile's stacks, innermost
    /// (inlined) first.
    pub(super) frames: FxHashMap<FrameKey, Vec<Named>>,
    /// The modules with code frames.
    pub(super) code_modules: Vec<ModuleId>,
    pub(super) data: FxHashMap<(ModuleId, u64), DataName>,
    pub(super) kernel: Option<KernelSymbols>,
    /// Why the kernel's frames stay addresses: another kernel's recording.
    pub(super) kernel_mismatch: Option<KernelMismatch>,
    /// Files without a build-id that are not the file recorded: their
    /// addresses stay unnamed rather than get another build's names.
    pub(super) stale: FxHashSet<ModuleId>,
    /// The first problem met with each module.
    pub(super) module_status: FxHashMap<ModuleId, ModuleProblem>,
}

impl<'p> Names<'p> {
    pub(super) fn resolve(profile: &'p Profile, symbolizer: &mut Symbolizer) -> Names<'p> {
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
    pub(super) fn path_of(&self, module: ModuleId) -> String {
        safe(&self.profile.processes.modules.get(module).path)
    }

    pub(super) fn frame_row(&self, n: Named) -> FrameRow {
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
    pub(super) fn frame(&self, frame: FrameKey) -> &[Named] {
        self.frames.get(&frame).map_or(&[], Vec::as_slice)
    }

    /// The functions of a frame no symbolizer names; a code frame's
    /// ([`Names::resolve`] named them).
    pub(super) fn named(&self, frame: FrameKey) -> Vec<Named> {
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
    pub(super) fn svma(&self, module: ModuleId, file_offset: u64) -> Option<u64> {
        self.data.get(&(module, file_offset)).and_then(|d| d.2)
    }

    /// A fault's target: object, region, section, data symbol.
    pub(super) fn target(&self, target: TargetKey) -> TargetRow {
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
    pub(super) fn owner_name(&self, owner: Owner) -> String {
        match owner {
            Owner::Process(pid) => self.comm_of(pid),
            Owner::Program(id) => safe(self.profile.processes.programs.name(id)),
        }
    }

    /// A process's command name, made safe to show.
    pub(super) fn comm_of(&self, pid: i32) -> String {
        self.profile
            .processes
            .by_pid
            .get(&pid)
            .map_or_else(|| "?".to_string(), |p| safe(&p.comm))
    }
}

/// The modules without a build-id whose file changed since recording, with
/// why.
pub(super) fn stale_modules(profile: &Profile) -> FxHashMap<ModuleId, ModuleProblem> {
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
pub(super) fn code_offsets(profile: &Profile) -> (BTreeMap<ModuleId, BTreeSet<u64>>, bool) {
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
pub(super) fn name_code(
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
pub(super) fn name_data(
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
    // The symbol tables read for data leave this process's RSS.
    symbolizer.release_pages();
    data_names
}

/// Keeps the first problem met with a module.
pub(super) fn note(
    module_status: &mut FxHashMap<ModuleId, ModuleProblem>,
    module: ModuleId,
    reason: &Reason,
) {
    module_status
        .entry(module)
        .or_insert_with(|| ModuleProblem::Symbolizer(reason.clone()));
}

/// The names of a stack, root first (borrowed from [`Names`], which names
/// each frame once). Not kept: a busy interval has tens of thousands of
/// stacks, sixty frames deep.
pub(super) fn expand<'n>(names: &'n Names, stacks: &StackTable, stack: StackId) -> Vec<&'n Named> {
    let mut leaf_first: Vec<&Named> = Vec::new();
    for frame in stacks.frames(stack) {
        leaf_first.extend(names.frame(frame));
    }
    leaf_first.reverse();
    leaf_first
}

/// The innermost function of a stack: the first name of its leaf frame.
pub(super) fn leaf_of<'n>(
    names: &'n Names,
    stacks: &StackTable,
    stack: StackId,
) -> Option<&'n Named> {
    stacks
        .frames(stack)
        .next()
        .and_then(|frame| names.frame(frame).first())
}

/// A JIT frame: named by the perf map's line covering it (made safe to
/// show), else `[jit 0x…]`.
pub(super) fn jit_frame(profile: &Profile, pid: i32, avma: u64) -> Named {
    match profile.jit_maps.get(&pid).and_then(|map| map.lookup(avma)) {
        Some(name) => Named::bare(FrameKind::Jit, safe(name)),
        None => Named::bare(FrameKind::UnnamedJit, format!("[jit {avma:#x}]")),
    }
}

/// A frame nothing names: `[execve]`, `[unknown]`.
pub(super) fn placeholder(kind: FrameKind) -> Named {
    Named::bare(kind, kind.placeholder().unwrap_or_default().to_string())
}

/// Why the file at `path` is not the one recorded with these stamps, if it
/// is not: its size or modification time differ, or several files were
/// mapped under the path and nothing tells which one an address was in.
pub(super) fn changed_since(recorded: &[FileStamp], path: &str) -> Option<ModuleProblem> {
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
        let dir = crate::test_dir("stamps");
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
