//! `profile.pb.gz`: the profile in pprof's format (a gzipped
//! `perftools.profiles.Profile`, `proto/profile.proto`), which `go tool
//! pprof`, Pyroscope, Parca and Datadog read.
//!
//! One pprof sample per counted row of the model (process, class, access,
//! stack, target), with two values, `faults/count` and
//! `latency/nanoseconds`, and what the folded stacks put in frames as
//! labels: `class`, `access`, `target_object`, `section`, `symbol`, `comm`
//! and the numeric `pid`, so that `-tagfocus=class=cow` selects a class.
//!
//! Addresses are file offsets: one module maps at different addresses in
//! different processes, so each mapping starts at 0 with file offset 0, and a
//! location's address is its (lookup) file offset in that file, which is what
//! a symbolizer needs. Kernel frames keep their kernel address.

use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::path::Path;

use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use flate2::Compression;
use prost::Message;
use rustc_hash::FxHashMap;

use crate::analysis::classify::{Access, FaultClass};
use crate::analysis::stacks::{FrameKey, StackId, Stacks};
use crate::format::outdir::OutDir;
use crate::model::report::{FrameKind, FrameRow, ModuleRow, NO_STACK};
use crate::model::{Model, SampleRow};

/// The types generated from `proto/profile.proto` by prost-build (build.rs).
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub mod proto {
    include!(concat!(env!("OUT_DIR"), "/perftools.profiles.rs"));
}

use proto::{Function, Label, Line, Location, Mapping, Profile, Sample, ValueType};

/// The output's name in the output directory.
pub const FILE_NAME: &str = crate::format::outdir::PROFILE_PB_GZ;

/// The string table: index 0 is "", as the format requires.
struct Strings {
    table: Vec<String>,
    index: FxHashMap<String, i64>,
}

impl Strings {
    fn new() -> Strings {
        let mut s = Strings {
            table: Vec::new(),
            index: FxHashMap::default(),
        };
        s.id("");
        s
    }

    fn id(&mut self, s: &str) -> i64 {
        if let Some(&id) = self.index.get(s) {
            return id;
        }
        let id = self.table.len() as i64;
        self.table.push(s.to_string());
        self.index.insert(s.to_string(), id);
        id
    }
}

/// Where a location is: one per raw frame, plus the pseudo-frame of a sample
/// without a stack.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum LocationKey {
    Frame(FrameKey),
    NoStack,
}

/// What the profile is made of: the model's rows and side tables.
pub struct Input<'a> {
    /// The counted rows.
    pub samples: &'a [SampleRow],
    /// Their stacks' raw frames.
    pub stacks: &'a Stacks,
    /// The functions of each frame, innermost first.
    pub frames: &'a FxHashMap<FrameKey, Vec<FrameRow>>,
    /// The modules, indexed by module id (path, hex build-id).
    pub modules: &'a [ModuleRow],
    /// The main executable's path (pprof wants its mapping first).
    pub main_exe: Option<&'a str>,
    /// A line for humans (`pprof -comments`).
    pub comment: String,
    /// One fault in `period` was recorded.
    pub period: u64,
    /// How long the recording took, ns.
    pub duration_ns: Option<u64>,
    /// When it started, ns since the epoch (0 when unknown).
    pub time_ns: i64,
    /// The resident pages by site (`record --resident`): two more sample
    /// types, `resident` and `resident_exit` in bytes.
    pub resident: Option<&'a crate::model::ResidentRows>,
}

impl Input<'_> {
    /// The model's view for `resolved`, recorded from `time_ns`.
    pub fn of(resolved: &Model, time_ns: i64) -> Input<'_> {
        let report = &resolved.report;
        Input {
            samples: &resolved.samples,
            stacks: &resolved.stacks,
            frames: &resolved.frames,
            modules: &report.modules,
            // The first process is the command pfprof started (or the
            // first attached one).
            main_exe: report.processes.iter().find_map(|p| p.exe.as_deref()),
            comment: format!(
                "pfprof {}: {}",
                report.pfprof_version,
                crate::output::text::command_line(&report.command)
            ),
            period: report.period,
            duration_ns: report.wall_ns,
            time_ns,
            resident: resolved.resident.as_ref(),
        }
    }
}

/// Builds the tables as samples come.
struct Builder<'a> {
    input: &'a Input<'a>,
    strings: Strings,
    mappings: Vec<Mapping>,
    /// Code modules (by id) and the kernel (None) → index in `mappings`.
    mapping_index: BTreeMap<Option<u32>, usize>,
    locations: Vec<Location>,
    location_ids: FxHashMap<LocationKey, u64>,
    functions: Vec<Function>,
    function_ids: FxHashMap<(String, Option<String>), u64>,
    /// The labels but the pid of each class, access, target and command
    /// (the last two by their shared names).
    labels: FxHashMap<(FaultClass, Access, usize, usize), Vec<Label>>,
}

impl Builder<'_> {
    fn function_id(&mut self, row: &FrameRow) -> u64 {
        let key = (row.function.clone(), row.file.clone());
        if let Some(&id) = self.function_ids.get(&key) {
            return id;
        }
        let id = self.functions.len() as u64 + 1;
        let name = self.strings.id(&row.function);
        let filename = row.file.as_deref().map_or(0, |f| self.strings.id(f));
        self.functions.push(Function {
            id,
            name,
            // The symbolizer keeps only the demangled name.
            system_name: name,
            filename,
            start_line: 0,
        });
        self.function_ids.insert(key, id);
        id
    }

    /// The mapping of a code module (`Some(id)`) or of the kernel (`None`),
    /// its address range widened to cover `address`.
    fn mapping_id(&mut self, module: Option<u32>, address: u64) -> u64 {
        let index = match self.mapping_index.get(&module) {
            Some(&i) => i,
            None => {
                let (path, build_id) = match module {
                    Some(m) => match self.input.modules.get(m as usize) {
                        Some(row) => (row.path.clone(), row.build_id.clone()),
                        None => (format!("[module {m}]"), None),
                    },
                    None => ("[kernel.kallsyms]".to_string(), None),
                };
                let filename = self.strings.id(&path);
                let build_id = build_id.as_deref().map_or(0, |b| self.strings.id(b));
                self.mappings.push(Mapping {
                    id: self.mappings.len() as u64 + 1,
                    // File-offset space (module docs); the kernel's own
                    // addresses for the kernel.
                    memory_start: if module.is_some() { 0 } else { address },
                    memory_limit: 0,
                    file_offset: 0,
                    filename,
                    build_id,
                    has_functions: true,
                    has_filenames: false,
                    has_line_numbers: false,
                    has_inline_frames: false,
                });
                self.mapping_index.insert(module, self.mappings.len() - 1);
                self.mappings.len() - 1
            }
        };
        let m = &mut self.mappings[index];
        m.memory_start = m.memory_start.min(address);
        m.memory_limit = m.memory_limit.max(address.saturating_add(1));
        m.id
    }

    fn location_id(&mut self, key: LocationKey) -> u64 {
        if let Some(&id) = self.location_ids.get(&key) {
            return id;
        }
        let pseudo = |kind: FrameKind, name: &str| {
            vec![FrameRow {
                function: name.into(),
                kind,
                file: None,
                line: None,
                inlined: false,
                object: None,
            }]
        };
        let input = self.input;
        let owned;
        let functions: &[FrameRow] = match key {
            LocationKey::Frame(frame) => match input.frames.get(&frame) {
                Some(f) if !f.is_empty() => f,
                _ => {
                    let kind = FrameKind::Unknown;
                    owned = pseudo(kind, kind.placeholder().unwrap_or_default());
                    &owned
                }
            },
            LocationKey::NoStack => {
                owned = pseudo(FrameKind::Unknown, NO_STACK);
                &owned
            }
        };
        let (mapping_id, address) = match key {
            LocationKey::Frame(FrameKey::Code {
                module,
                lookup_file_offset,
            }) => (
                self.mapping_id(Some(module), lookup_file_offset),
                lookup_file_offset,
            ),
            LocationKey::Frame(FrameKey::Kernel { avma }) => (self.mapping_id(None, avma), avma),
            // JIT code: its address, in no mapping.
            LocationKey::Frame(FrameKey::Jit { avma, .. }) => (0, avma),
            LocationKey::Frame(FrameKey::Unknown | FrameKey::Exec) | LocationKey::NoStack => (0, 0),
        };
        // Innermost (inlined) function first, the real function last, as
        // pprof wants them.
        let line = functions
            .iter()
            .map(|f| Line {
                function_id: self.function_id(f),
                line: f.line.map_or(0, i64::from),
                column: 0,
            })
            .collect();
        if mapping_id != 0 {
            let m = &mut self.mappings[mapping_id as usize - 1];
            m.has_filenames |= functions.iter().any(|f| f.file.is_some());
            m.has_line_numbers |= functions.iter().any(|f| f.line.is_some());
            m.has_inline_frames |= functions.iter().any(|f| f.inlined);
        }
        let id = self.locations.len() as u64 + 1;
        self.locations.push(Location {
            id,
            mapping_id,
            address,
            line,
            is_folded: false,
        });
        self.location_ids.insert(key, id);
        id
    }

    /// The location ids of a stack, leaf first. Looked up again for each
    /// row (a frame's id is one lookup): kept per stack, a busy host's
    /// interval held 44 MB of them while it was written.
    fn stack(&mut self, stack: StackId) -> Vec<u64> {
        let input = self.input;
        let mut location_id: Vec<u64> = input
            .stacks
            .frames(stack)
            .map(|f| self.location_id(LocationKey::Frame(f)))
            .collect();
        if location_id.is_empty() {
            location_id.push(self.location_id(LocationKey::NoStack));
        }
        location_id
    }

    fn sample(&mut self, row: &SampleRow) -> Sample {
        let mut value = vec![
            i64::try_from(row.faults).unwrap_or(i64::MAX),
            i64::try_from(row.latency_ns).unwrap_or(i64::MAX),
        ];
        if self.input.resident.is_some() {
            value.extend([0, 0]);
        }
        let location_id = self.stack(row.stack);
        // Rows of a process share their labels but the pid's, which comes
        // last: built once per class, access, target and command.
        let key = (
            row.class,
            row.access,
            std::sync::Arc::as_ptr(&row.target) as usize,
            std::sync::Arc::as_ptr(&row.comm) as *const u8 as usize,
        );
        let mut label = match self.labels.get(&key) {
            Some(label) => label.clone(),
            None => {
                let label = self.labels_of(row);
                self.labels.insert(key, label.clone());
                label
            }
        };
        // A system-wide profile's rows are programs': no pid.
        label.extend(row.owner.pid().map(|pid| self.pid_label(pid)));
        Sample {
            location_id,
            value,
            label,
        }
    }

    /// The bytes one site held at the peak (`at_exit` false) or at exit,
    /// as a sample whose other values are 0, labelled by kind of memory,
    /// target, command and pid.
    fn resident_sample(&mut self, row: &crate::model::ResidentRow, at_exit: bool) -> Sample {
        let bytes = row
            .pages
            .saturating_mul(crate::analysis::resident::PAGE_BYTES);
        let bytes = i64::try_from(bytes).unwrap_or(i64::MAX);
        let value = if at_exit {
            vec![0, 0, 0, bytes]
        } else {
            vec![0, 0, bytes, 0]
        };
        let mut text = |key: &str, value: &str| self.text_label(key, value);
        let mut label = vec![
            text("memory", row.kind.name()),
            text("target_object", &row.target.object),
        ];
        if let Some(section) = &row.target.section {
            label.push(text("section", section));
        }
        label.push(text("comm", &row.comm));
        label.extend(row.owner.pid().map(|pid| self.pid_label(pid)));
        Sample {
            location_id: self.stack(row.stack),
            value,
            label,
        }
    }

    /// A label with a string value.
    fn text_label(&mut self, key: &str, value: &str) -> Label {
        Label {
            key: self.strings.id(key),
            str: self.strings.id(value),
            num: 0,
            num_unit: 0,
        }
    }

    /// The numeric `pid` label.
    fn pid_label(&mut self, pid: i32) -> Label {
        Label {
            key: self.strings.id("pid"),
            str: 0,
            num: i64::from(pid),
            num_unit: 0,
        }
    }

    /// A sample's labels but its pid.
    fn labels_of(&mut self, row: &SampleRow) -> Vec<Label> {
        let mut label = Vec::with_capacity(7);
        let mut text = |key: &str, value: &str| self.text_label(key, value);
        label.push(text("class", row.class.name()));
        label.push(text("access", row.access.name()));
        label.push(text("target_object", &row.target.object));
        if let Some(section) = &row.target.section {
            label.push(text("section", section));
        }
        if let Some(symbol) = &row.target.symbol {
            label.push(text("symbol", symbol));
        }
        label.push(text("comm", &row.comm));
        label
    }
}

/// Writes the profile of `input`, encoded, to `out`: the bytes prost
/// writes for the whole [`Profile`], with each sample encoded and written
/// as it is built instead of all of them held first (an interval of a busy
/// host has tens of thousands, each a few hundred bytes of vectors, and
/// their encoding was 17 MB). A message's fields are written in field
/// order and a repeated field's elements one after the other, so
/// `sample_type` (1) is written, then the samples (2), then the rest with
/// those two empty (prost skips empty repeated fields).
pub fn write_encoded(input: &Input<'_>, out: &mut impl Write) -> io::Result<()> {
    let mut b = Builder {
        input,
        strings: Strings::new(),
        mappings: Vec::new(),
        mapping_index: BTreeMap::new(),
        locations: Vec::new(),
        location_ids: FxHashMap::default(),
        functions: Vec::new(),
        function_ids: FxHashMap::default(),
        labels: FxHashMap::default(),
    };
    let mut value_type = |type_: &str, unit: &str| ValueType {
        r#type: b.strings.id(type_),
        unit: b.strings.id(unit),
    };
    let mut sample_type = vec![
        value_type("faults", "count"),
        value_type("latency", "nanoseconds"),
    ];
    if input.resident.is_some() {
        sample_type.push(value_type("resident", "bytes"));
        sample_type.push(value_type("resident_exit", "bytes"));
    }
    let period_type = Some(value_type("faults", "count"));
    // "mapping[0] will be the main binary": pprof names it in its header.
    let main = input
        .main_exe
        .and_then(|exe| input.modules.iter().position(|m| m.path == exe));
    if let Some(main) = main {
        b.mapping_id(Some(main as u32), 0);
    }
    let mut bytes = Vec::new();
    for value_type in &sample_type {
        prost::encoding::message::encode(1, value_type, &mut bytes);
    }
    out.write_all(&bytes)?;
    // The rows come from a hash map: sorted, the file is the same every time.
    let mut rows: Vec<&SampleRow> = input.samples.iter().collect();
    rows.sort_by(|a, b| {
        (a.owner, a.class, a.access, a.stack, &a.target)
            .cmp(&(b.owner, b.class, b.access, b.stack, &b.target))
    });
    for row in rows {
        bytes.clear();
        prost::encoding::message::encode(2, &b.sample(row), &mut bytes);
        out.write_all(&bytes)?;
    }
    if let Some(resident) = input.resident {
        let moments = [(&resident.peak, false), (&resident.exit, true)];
        for (rows, at_exit) in moments {
            for row in rows {
                bytes.clear();
                let sample = b.resident_sample(row, at_exit);
                prost::encoding::message::encode(2, &sample, &mut bytes);
                out.write_all(&bytes)?;
            }
        }
    }
    let comment = vec![b.strings.id(&input.comment)];
    let default_sample_type = b.strings.id("faults");
    let int = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    let rest = Profile {
        sample_type: Vec::new(),
        sample: Vec::new(),
        mapping: b.mappings,
        location: b.locations,
        function: b.functions,
        string_table: b.strings.table,
        drop_frames: 0,
        keep_frames: 0,
        time_nanos: input.time_ns,
        duration_nanos: input.duration_ns.map_or(0, int),
        period_type,
        period: int(input.period.max(1)),
        comment,
        default_sample_type,
        doc_url: 0,
    };
    bytes.clear();
    rest.encode(&mut bytes).map_err(io::Error::other)?;
    out.write_all(&bytes)
}

/// Writes the gzipped encoding of `input`'s profile (pprof's on-disk form)
/// to `out`.
pub fn write_gzipped(input: &Input<'_>, out: &mut impl Write) -> io::Result<()> {
    // The fastest level: on the busy host the pprof of each 10 s interval
    // (5.5 MB raw) took its writer 59 ms at the default level, 25 ms at 1
    // (17% larger); its deflate was a tenth of fp-mode pfprof's CPU.
    let mut gz = GzEncoder::new(out, Compression::fast());
    // Fed a few hundred bytes a sample, the compressor writes 1% more.
    let mut buffered = io::BufWriter::with_capacity(1 << 16, &mut gz);
    write_encoded(input, &mut buffered)?;
    buffered.flush()?;
    drop(buffered);
    gz.finish().map(drop)
}

/// The gzipped encoding of `input`'s profile.
pub fn encode(input: &Input<'_>) -> io::Result<Vec<u8>> {
    let mut gz = Vec::new();
    write_gzipped(input, &mut gz)?;
    Ok(gz)
}

/// Reads a gzipped (or plain) profile.
pub fn decode(bytes: &[u8]) -> io::Result<Profile> {
    let raw;
    let bytes = if bytes.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        GzDecoder::new(bytes).read_to_end(&mut out)?;
        raw = out;
        &raw[..]
    } else {
        bytes
    };
    Profile::decode(bytes).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// When the recording at `data_path` started, ns since the epoch: its last
/// write (the end of the recording) minus the recording's wall time; 0 when
/// unknown.
fn recording_start_ns(data_path: &Path, wall_ns: Option<u64>) -> i64 {
    let end = std::fs::metadata(data_path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .and_then(|d| i64::try_from(d.as_nanos()).ok());
    match (end, wall_ns.and_then(|w| i64::try_from(w).ok())) {
        (Some(end), Some(wall)) => end.saturating_sub(wall).max(0),
        (Some(end), None) => end,
        _ => 0,
    }
}

/// Writes `profile.pb.gz` of the recording at `data_path` into `dir`,
/// stamped with the recording's start.
pub fn write_recording(dir: &OutDir, resolved: &Model, data_path: &Path) -> io::Result<()> {
    let time_ns = recording_start_ns(data_path, resolved.report.wall_ns);
    write(dir, resolved, time_ns)
}

/// Writes `profile.pb.gz` into `dir`.
pub fn write(dir: &OutDir, resolved: &Model, time_nanos: i64) -> io::Result<()> {
    let input = Input::of(resolved, time_nanos);
    dir.write_with(FILE_NAME, |out| write_gzipped(&input, out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::classify::{Access, FaultClass};
    use crate::analysis::stacks::StackTable;
    use crate::model::report::TargetRow;

    fn function(name: &str, line: u32, inlined: bool) -> FrameRow {
        FrameRow {
            function: name.into(),
            kind: FrameKind::Code,
            file: Some("/src/app.c".into()),
            line: Some(line),
            inlined,
            object: Some("/opt/app/bin/app".into()),
        }
    }

    fn target(object: &str, section: Option<&str>, symbol: Option<&str>) -> TargetRow {
        TargetRow {
            object: object.into(),
            region: crate::model::report::Region::File,
            section: section.map(Into::into),
            symbol: symbol.map(Into::into),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn row(
        pid: i32,
        class: FaultClass,
        access: Access,
        stack: StackId,
        target: TargetRow,
        faults: u64,
        latency_ns: u64,
    ) -> SampleRow {
        SampleRow {
            owner: crate::analysis::Owner::Process(pid),
            comm: format!("app{pid}").into(),
            class,
            access,
            stack,
            target: target.into(),
            faults,
            latency_ns,
            startup: false,
        }
    }

    /// Two modules (the main one listed second), a stack with an inlined
    /// frame, one through the kernel, one without a stack.
    struct StackFrame {
        frame: FrameKey,
        functions: Vec<FrameRow>,
    }

    type Frames = FxHashMap<FrameKey, Vec<FrameRow>>;

    fn fixture() -> (Vec<SampleRow>, Stacks, Frames, Vec<ModuleRow>) {
        let code = |module, offset| FrameKey::Code {
            module,
            lookup_file_offset: offset,
        };
        let leaf = StackFrame {
            frame: code(1, 0x1130),
            functions: vec![
                function("helper", 14, true),
                function("touch_pages", 20, false),
            ],
        };
        let libc = StackFrame {
            frame: code(0, 0x2a000),
            functions: vec![FrameRow {
                function: "__libc_start_main".into(),
                kind: FrameKind::Code,
                file: None,
                line: None,
                inlined: false,
                object: Some("/usr/lib/libc.so.6".into()),
            }],
        };
        let unknown = StackFrame {
            frame: FrameKey::Unknown,
            functions: vec![FrameRow {
                function: "[unknown]".into(),
                kind: FrameKind::Unknown,
                file: None,
                line: None,
                inlined: false,
                object: None,
            }],
        };
        let kernel = StackFrame {
            frame: FrameKey::Kernel {
                avma: 0xffff_ffff_8100_1000,
            },
            functions: vec![FrameRow {
                function: "clear_page_[k]".into(),
                kind: FrameKind::Kernel,
                file: None,
                line: None,
                inlined: false,
                object: None,
            }],
        };
        let mut table = StackTable::default();
        let first = table.intern_leaf_first(&[leaf.frame, libc.frame, unknown.frame]);
        let second = table.intern_leaf_first(&[kernel.frame, leaf.frame, libc.frame]);
        let stacks = table.stacks().clone();
        let frames: Frames = [leaf, libc, unknown, kernel]
            .into_iter()
            .map(|f| (f.frame, f.functions))
            .collect();
        let modules = vec![
            ModuleRow {
                path: "/usr/lib/libc.so.6".into(),
                build_id: None,
                problem: None,
            },
            ModuleRow {
                path: "/opt/app/bin/app".into(),
                build_id: Some("abcd".into()),
                problem: None,
            },
        ];
        let samples = vec![
            row(
                11,
                FaultClass::Major,
                Access::Read,
                StackTable::ROOT,
                target("/data/index", None, None),
                3,
                9_000,
            ),
            row(
                10,
                FaultClass::Minor,
                Access::Write,
                first,
                target("[anon]", None, None),
                256,
                1_000,
            ),
            row(
                10,
                FaultClass::Cow,
                Access::Write,
                second,
                target("/opt/app/bin/app", Some(".data"), Some("data_buf")),
                64,
                500,
            ),
        ];
        (samples, stacks, frames, modules)
    }

    /// The fixture's profile: what `encode` writes, and its bytes unzipped.
    fn profile() -> (Profile, Vec<u8>, Vec<u8>) {
        let (samples, stacks, frames, modules) = fixture();
        let input = Input {
            samples: &samples,
            stacks: &stacks,
            frames: &frames,
            modules: &modules,
            main_exe: Some("/opt/app/bin/app"),
            comment: "pfprof test".into(),
            period: 1,
            duration_ns: Some(5_000_000),
            time_ns: 1_700_000_000_000_000_000,
            resident: None,
        };
        let mut raw = Vec::new();
        write_encoded(&input, &mut raw).unwrap();
        let gzipped = encode(&input).unwrap();
        (Profile::decode(&raw[..]).unwrap(), raw, gzipped)
    }

    /// The gzip + proto round trip gives back the profile, and pprof's
    /// invariants hold: string 0 is "", ids are non-zero and unique, every
    /// reference resolves.
    #[test]
    fn tables_are_consistent() {
        let (built, raw, bytes) = profile();
        // Samples encoded one by one make the bytes prost makes of the
        // whole profile.
        assert_eq!(built.encode_to_vec(), raw);
        assert_eq!(&bytes[..2], &[0x1f, 0x8b], "gzipped");
        let p = decode(&bytes).unwrap();
        assert_eq!(p, built);
        assert_eq!(p.string_table[0], "");
        let string = |i: i64| p.string_table[usize::try_from(i).unwrap()].as_str();
        for (i, m) in p.mapping.iter().enumerate() {
            assert_eq!(m.id, i as u64 + 1, "mapping ids are 1..");
            assert!(m.memory_start < m.memory_limit, "{m:?}");
        }
        for (i, f) in p.function.iter().enumerate() {
            assert_eq!(f.id, i as u64 + 1, "function ids are 1..");
            assert!(!string(f.name).is_empty());
        }
        for (i, l) in p.location.iter().enumerate() {
            assert_eq!(l.id, i as u64 + 1, "location ids are 1..");
            if l.mapping_id != 0 {
                let m = &p.mapping[l.mapping_id as usize - 1];
                assert!((m.memory_start..m.memory_limit).contains(&l.address));
            }
            assert!(!l.line.is_empty());
            for line in &l.line {
                assert!((1..=p.function.len() as u64).contains(&line.function_id));
            }
        }
        for s in &p.sample {
            assert_eq!(s.value.len(), p.sample_type.len());
            for &id in &s.location_id {
                assert!((1..=p.location.len() as u64).contains(&id));
            }
        }
        let types: Vec<(&str, &str)> = p
            .sample_type
            .iter()
            .map(|t| (string(t.r#type), string(t.unit)))
            .collect();
        assert_eq!(types, [("faults", "count"), ("latency", "nanoseconds")]);
        let period_type = p.period_type.unwrap();
        assert_eq!(
            (
                string(period_type.r#type),
                string(period_type.unit),
                p.period
            ),
            ("faults", "count", 1)
        );
        assert_eq!(p.duration_nanos, 5_000_000);
        assert_eq!(p.time_nanos, 1_700_000_000_000_000_000);
        // The main executable first, with its build-id.
        assert_eq!(string(p.mapping[0].filename), "/opt/app/bin/app");
        assert_eq!(string(p.mapping[0].build_id), "abcd");
        let files: Vec<&str> = p.mapping.iter().map(|m| string(m.filename)).collect();
        assert_eq!(
            files,
            [
                "/opt/app/bin/app",
                "/usr/lib/libc.so.6",
                "[kernel.kallsyms]"
            ]
        );
    }

    /// Each sample carries its values, labels and stack (leaf first; an
    /// inlined function before the function it is inlined into).
    #[test]
    fn samples_labels_and_stacks() {
        let (p, _, _) = profile();
        let string = |i: i64| p.string_table[usize::try_from(i).unwrap()].as_str();
        let stack = |s: &Sample| -> Vec<String> {
            s.location_id
                .iter()
                .map(|&id| {
                    let l = &p.location[id as usize - 1];
                    l.line
                        .iter()
                        .map(|line| {
                            let f = &p.function[line.function_id as usize - 1];
                            format!("{}:{}", string(f.name), line.line)
                        })
                        .collect::<Vec<_>>()
                        .join("+")
                })
                .collect()
        };
        let labels = |s: &Sample| -> Vec<String> {
            s.label
                .iter()
                .map(|l| match l.str {
                    0 => format!("{}={}", string(l.key), l.num),
                    v => format!("{}={}", string(l.key), string(v)),
                })
                .collect()
        };
        // Sorted by pid, class, access, stack.
        let want: [(&[i64], &[&str], &[&str]); 3] = [
            (
                &[256, 1_000],
                &[
                    "helper:14+touch_pages:20",
                    "__libc_start_main:0",
                    "[unknown]:0",
                ],
                &[
                    "class=minor",
                    "access=write",
                    "target_object=[anon]",
                    "comm=app10",
                    "pid=10",
                ],
            ),
            (
                &[64, 500],
                &[
                    "clear_page_[k]:0",
                    "helper:14+touch_pages:20",
                    "__libc_start_main:0",
                ],
                &[
                    "class=cow",
                    "access=write",
                    "target_object=/opt/app/bin/app",
                    "section=.data",
                    "symbol=data_buf",
                    "comm=app10",
                    "pid=10",
                ],
            ),
            (
                &[3, 9_000],
                &["[no stack]:0"],
                &[
                    "class=major",
                    "access=read",
                    "target_object=/data/index",
                    "comm=app11",
                    "pid=11",
                ],
            ),
        ];
        assert_eq!(p.sample.len(), want.len());
        for (s, (values, frames, want_labels)) in p.sample.iter().zip(want) {
            assert_eq!(s.value, values);
            assert_eq!(stack(s), frames);
            assert_eq!(labels(s), want_labels);
        }
        // One location per raw frame, shared by the stacks that hold it.
        assert_eq!(p.location.len(), 5);
        let kernel = p.location.iter().find(|l| l.address > 1 << 63).unwrap();
        let m = &p.mapping[kernel.mapping_id as usize - 1];
        assert_eq!(string(m.filename), "[kernel.kallsyms]");
        assert!(p.mapping[0].has_inline_frames && p.mapping[0].has_line_numbers);
        assert!(!p.mapping[1].has_line_numbers);
    }

    /// Not a profile: an error, not a panic.
    #[test]
    fn decode_rejects_garbage() {
        for bytes in [&b"\x1f\x8b\x08garbage"[..], b"\xff\xff\xff\xff\xff"] {
            assert!(decode(bytes).is_err(), "{bytes:?}");
        }
    }
}
