//! Folded stacks (`comm;root;…;leaf;target count`, one line per unique
//! stack), per class, per class weighted by latency, and for the start-up:
//! what the flame graphs and `diff` draw.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::io::{self, Write};

use rustc_hash::FxHashMap;

use crate::analysis::classify::FaultClass;
use crate::analysis::stacks::StackId;
use crate::model::report::{FrameKind, Region, TargetRow};
use crate::model::{Model, SampleRow};

/// Folded stacks as `(stack line, count)`, stack root first.
pub type Folded = BTreeMap<String, u64>;

/// The frames of folded stacks drawn apart (what nothing named, JIT code
/// without a name), by their name in the lines.
pub type Special = BTreeMap<String, FrameKind>;

/// The model's faults, folded.
#[derive(Default)]
pub struct FoldedStacks {
    /// Faults per class.
    pub by_class: [Folded; 3],
    /// Nanoseconds in the kernel per class.
    pub latency: [Folded; 3],
    /// Start-up faults, class as the root frame.
    pub startup: Folded,
    /// Their frames drawn apart.
    pub special: Special,
}

/// What the rows of one line add up to: faults, their latency, the
/// start-up's faults.
#[derive(Default)]
struct LineSum {
    faults: u64,
    latency_ns: u64,
    startup: u64,
}

/// What makes a row's line: its class, comm, stack and target (the names
/// are shared, so their addresses stand for them).
type LineKey = (usize, usize, StackId, usize);

fn line_key(row: &SampleRow) -> LineKey {
    (
        row.class as usize,
        std::sync::Arc::as_ptr(&row.comm) as *const u8 as usize,
        row.stack,
        std::sync::Arc::as_ptr(&row.target) as usize,
    )
}

/// Faults per class as lines of interned parts (comm, frames root first,
/// target), each class's in the order the lines' text sorts: what an
/// interval writes, line by line, without holding the text. A deep
/// stack's line is kilobytes (rustc's averaged 2.8 KB): one interval of a
/// Rust build beside the mix held 260 MB of lines as text, here 4 bytes a
/// part.
pub struct ClassLines<'m> {
    /// Each part's text, `;` written `:`.
    parts: Vec<Cow<'m, str>>,
    /// Per class: the parts of each line, and its faults; sorted.
    by_class: [Vec<(Box<[u32]>, u64)>; 3],
}

/// Gives each distinct text a number, looking up the frames' own strings by
/// address first (a function's name is one string however many of its
/// addresses are on stacks).
#[derive(Default)]
struct Parts<'m> {
    texts: Vec<Cow<'m, str>>,
    by_text: FxHashMap<Cow<'m, str>, u32>,
    /// By address and length: a slice of another string would share its
    /// address.
    by_address: FxHashMap<(usize, usize), u32>,
}

impl<'m> Parts<'m> {
    /// The number of `text`, a part as the line spells it.
    fn of_text(&mut self, text: Cow<'m, str>) -> u32 {
        if let Some(&id) = self.by_text.get(&text) {
            return id;
        }
        let id = u32::try_from(self.texts.len()).unwrap_or(u32::MAX);
        self.texts.push(text.clone());
        self.by_text.insert(text, id);
        id
    }

    fn of_str(&mut self, text: &'m str) -> u32 {
        let address = (text.as_ptr() as usize, text.len());
        if let Some(&id) = self.by_address.get(&address) {
            return id;
        }
        let id = self.of_text(frame_name(text));
        self.by_address.insert(address, id);
        id
    }
}

impl<'m> ClassLines<'m> {
    /// The model's rows as lines; rows that make the same line (they differ
    /// in process, access or address within a function) are summed.
    pub fn of(model: &'m Model) -> ClassLines<'m> {
        let mut parts = Parts::default();
        let mut rows: FxHashMap<LineKey, (&SampleRow, u64)> = FxHashMap::default();
        for row in &model.samples {
            rows.entry(line_key(row)).or_insert((row, 0)).1 += row.faults;
        }
        let mut targets: FxHashMap<usize, u32> = FxHashMap::default();
        let mut lines: [FxHashMap<Box<[u32]>, u64>; 3] = Default::default();
        let mut line = Vec::with_capacity(64);
        for (row, faults) in rows.into_values() {
            line.clear();
            line.push(parts.of_str(&row.comm));
            for frame in model.functions_root_first(row.stack) {
                line.push(parts.of_str(&frame.function));
            }
            let target = std::sync::Arc::as_ptr(&row.target) as usize;
            let target = *targets
                .entry(target)
                .or_insert_with(|| parts.of_text(Cow::Owned(target_frame(&row.target))));
            line.push(target);
            let class = &mut lines[row.class as usize];
            match class.get_mut(&line[..]) {
                Some(n) => *n += faults,
                None => {
                    class.insert(line.as_slice().into(), faults);
                }
            }
        }
        let texts = parts.texts;
        let by_class = lines.map(|lines| {
            let mut lines: Vec<(Box<[u32]>, u64)> = lines.into_iter().collect();
            lines.sort_unstable_by(|(a, _), (b, _)| order(&texts, a, b));
            lines
        });
        ClassLines {
            parts: texts,
            by_class,
        }
    }

    /// Writes `class`'s lines, `PREFIX;line count` each (no `;` for an
    /// empty prefix).
    pub fn write(&self, class: FaultClass, prefix: &str, out: &mut dyn Write) -> io::Result<()> {
        for (line, n) in &self.by_class[class as usize] {
            out.write_all(prefix.as_bytes())?;
            for (i, &part) in line.iter().enumerate() {
                if i > 0 || !prefix.is_empty() {
                    out.write_all(b";")?;
                }
                out.write_all(self.parts[part as usize].as_bytes())?;
            }
            writeln!(out, " {n}")?;
        }
        Ok(())
    }
}

/// Two lines of parts in the order of their text (`a;b;c`), as a map of
/// the text would hold them: a part followed by another compares with its
/// `;`, which no part holds.
fn order(texts: &[Cow<'_, str>], a: &[u32], b: &[u32]) -> Ordering {
    for i in 0..a.len().min(b.len()) {
        let (a_more, b_more) = (i + 1 < a.len(), i + 1 < b.len());
        if a[i] == b[i] && a_more == b_more {
            continue;
        }
        let text = |id: u32, more: bool| {
            let sep: &[u8] = if more { b";" } else { b"" };
            texts[id as usize].as_bytes().iter().chain(sep)
        };
        let ordering = text(a[i], a_more).cmp(text(b[i], b_more));
        if ordering != Ordering::Equal {
            return ordering;
        }
    }
    a.len().cmp(&b.len())
}

/// Room for ` 18446744073709551615`.
const COUNT_ROOM: usize = 21;

/// `stack n`, a folded line with its count, allocated once at its size
/// (`format!` grows a kilobyte line by doubling).
pub fn counted_line(stack: &str, n: u64) -> String {
    let mut line = String::with_capacity(stack.len() + COUNT_ROOM);
    line.push_str(stack);
    push_count(&mut line, n);
    line
}

/// The lines of `folded` with their counts (`stack n`), each in the
/// string it had.
pub fn into_counted_lines(folded: Folded) -> Vec<String> {
    folded
        .into_iter()
        .map(|(mut line, n)| {
            push_count(&mut line, n);
            line
        })
        .collect()
}

fn push_count(line: &mut String, n: u64) {
    line.push(' ');
    let _ = std::fmt::Write::write_fmt(line, format_args!("{n}"));
}

/// Adds `n` to `line`'s count, copying the line only when it is new.
fn add(folded: &mut Folded, line: &str, n: u64) {
    match folded.get_mut(line) {
        Some(count) => *count += n,
        None => {
            folded.insert(line.to_string(), n);
        }
    }
}

/// Folds every counted row of the model: per class, by latency, start-up.
/// Rows that make the same line (they differ in process or access) are
/// summed first, on the names they share, so that each line is written and
/// placed once.
pub fn fold(model: &Model) -> FoldedStacks {
    let mut out = FoldedStacks::default();
    let mut sums: FxHashMap<LineKey, (&SampleRow, LineSum)> = FxHashMap::default();
    for row in &model.samples {
        let (_, sum) = sums
            .entry(line_key(row))
            .or_insert((row, LineSum::default()));
        sum.faults += row.faults;
        sum.latency_ns += row.latency_ns;
        if row.startup {
            sum.startup += row.faults;
        }
    }
    // The maps below order the lines: the order they come in does not
    // matter. A stack's names are joined for each line (a stack makes
    // about one line once rows of a process or access are summed).
    // One buffer for every line; each key is an exact-size copy (a deep
    // stack's line is a kilobyte, and a grown String's spare capacity
    // would double the memory of a busy interval's 25,000 lines).
    let mut line = String::with_capacity(4096);
    for (row, sum) in sums.into_values() {
        stack_line(
            &mut line,
            model,
            (&row.comm, row.stack, &row.target),
            &mut out.special,
        );
        if sum.startup > 0 {
            *out.startup
                .entry(format!("{};{line}", row.class.name()))
                .or_default() += sum.startup;
        }
        if sum.latency_ns > 0 {
            add(&mut out.latency[row.class as usize], &line, sum.latency_ns);
        }
        add(&mut out.by_class[row.class as usize], &line, sum.faults);
    }
    out
}

/// Writes into `line` the folded line of `comm`'s `stack` faulting on
/// `target` (`comm;root;…;leaf;[target]`), and adds to `special` its frames
/// drawn apart (nothing named them, `[execve]`, JIT code without a name,
/// memory nothing names).
fn stack_line(
    line: &mut String,
    model: &Model,
    (comm, stack, target): (&str, StackId, &TargetRow),
    special: &mut Special,
) {
    line.clear();
    push_frame_name(line, comm);
    for f in model.functions_root_first(stack) {
        line.push(';');
        let start = line.len();
        push_frame_name(line, &f.function);
        note_special(special, &line[start..], f.kind);
    }
    push_target(line, target, special);
}

/// Adds a frame's name as a line spells it to `special` when its kind is
/// drawn apart (nothing named it, `[execve]`, JIT code without a name).
fn note_special(special: &mut Special, spelled: &str, kind: FrameKind) {
    if matches!(
        kind,
        FrameKind::Unknown | FrameKind::Exec | FrameKind::UnnamedJit
    ) && !special.contains_key(spelled)
    {
        special.insert(spelled.to_string(), kind);
    }
}

/// Appends `;[target]`, the leaf frame of a folded line.
fn push_target(line: &mut String, target: &TargetRow, special: &mut Special) {
    let target_name = target_frame(target);
    if target.region == Region::Unknown {
        // Memory nothing names, drawn as a frame nothing names.
        special.insert(target_name.clone(), FrameKind::Unknown);
    }
    line.push(';');
    line.push_str(&target_name);
}

/// KiB resident per line (`comm;frames…;target`), at the peak and at
/// exit: what `resident.folded` and `resident-exit.folded` hold, with the
/// frames drawn apart.
pub fn fold_resident(rows: &[crate::model::ResidentRow], model: &Model) -> (Folded, Special) {
    // Lines are summed on ids (comm, frames' text, target's text) and each
    // one's text made once: python's exit holds 5,900 rows of 4,800 stacks
    // in 2,400 lines, whose text (kilobytes each, long shared prefixes)
    // joined and looked up row by row took 12 ms.
    let mut texts = StackTexts::new(model);
    let mut targets: FxHashMap<usize, u32> = FxHashMap::default();
    let mut target_texts = Parts::default();
    let mut sums: FxHashMap<(&str, u32, u32), u64> = FxHashMap::default();
    for row in rows {
        let target = *targets
            .entry(std::sync::Arc::as_ptr(&row.target) as usize)
            .or_insert_with(|| {
                let mut text = String::new();
                push_target(&mut text, &row.target, &mut texts.special);
                target_texts.of_text(Cow::Owned(text))
            });
        *sums
            .entry((&row.comm, texts.of(row.stack), target))
            .or_default() += row.pages;
    }
    let mut folded = Folded::new();
    let mut names = Vec::new();
    for ((comm, text, target), pages) in sums {
        let comm = frame_name(comm);
        let target = &target_texts.texts[target as usize];
        texts.names(text, &mut names);
        // At its size, with room for a count (see [`into_counted_lines`]):
        // grown by doubling, a kilobyte line's reallocations were a third
        // of this function's time.
        let len = comm.len() + names.iter().map(|n| n.len() + 1).sum::<usize>() + target.len();
        let mut line = String::with_capacity(len + COUNT_ROOM);
        line.push_str(&comm);
        for name in names.iter().rev() {
            line.push(';');
            line.push_str(name);
        }
        line.push_str(target);
        // Two names of the same text (from two modules) make two text
        // nodes and the same line.
        *folded.entry(line).or_default() += pages * crate::analysis::resident::PAGE_BYTES / 1024;
    }
    (folded, texts.special)
}

/// The frames' text of stacks (`;root;…;leaf`), as a tree of its own over
/// the stacks' prefix tree: a stack's node is its caller's plus the names
/// of its leaf (inlined functions first), made once per stack node and
/// shared by stacks whose names are the same strings (they differ in an
/// address within a function).
struct StackTexts<'m> {
    model: &'m Model,
    /// By stack: its text node.
    of_stack: FxHashMap<StackId, u32>,
    /// Text nodes: the parent's, and a name as lines spell it.
    nodes: Vec<(u32, Cow<'m, str>)>,
    /// By parent and a name's address and length.
    by_name: FxHashMap<(u32, usize, usize), u32>,
    /// The frames drawn apart met so far.
    special: Special,
}

/// The text node of the empty stack.
const NO_TEXT: u32 = u32::MAX;

impl<'m> StackTexts<'m> {
    fn new(model: &'m Model) -> StackTexts<'m> {
        StackTexts {
            model,
            of_stack: FxHashMap::default(),
            nodes: Vec::new(),
            by_name: FxHashMap::default(),
            special: Special::new(),
        }
    }

    /// The text node of `stack`.
    fn of(&mut self, stack: StackId) -> u32 {
        // The stack nodes up to the first whose text is known, leaf first.
        let mut path = Vec::new();
        let mut at = stack;
        let mut text = loop {
            if let Some(&text) = self.of_stack.get(&at) {
                break text;
            }
            match self.model.stacks.node(at) {
                Some((parent, frame)) => {
                    path.push((at, frame));
                    at = parent;
                }
                None => break NO_TEXT,
            }
        };
        let model = self.model;
        for (stack, frame) in path.into_iter().rev() {
            for f in model.frames.get(&frame).into_iter().flatten().rev() {
                text = self.child(text, f);
            }
            self.of_stack.insert(stack, text);
        }
        text
    }

    /// The node of `frame`'s name below `parent`.
    fn child(&mut self, parent: u32, frame: &'m crate::model::report::FrameRow) -> u32 {
        let name = frame.function.as_str();
        let key = (parent, name.as_ptr() as usize, name.len());
        if let Some(&node) = self.by_name.get(&key) {
            return node;
        }
        let spelled = frame_name(name);
        note_special(&mut self.special, &spelled, frame.kind);
        let node = u32::try_from(self.nodes.len()).unwrap_or(NO_TEXT);
        self.nodes.push((parent, spelled));
        self.by_name.insert(key, node);
        node
    }

    /// The names of node `text`, leaf first, into `names`.
    fn names<'a>(&'a self, text: u32, names: &mut Vec<&'a str>) {
        names.clear();
        let mut at = text;
        while let Some((parent, name)) = self.nodes.get(at as usize) {
            names.push(name);
            at = *parent;
        }
    }
}

/// Appends a frame's name as a line spells it (see [`frame_name`]).
fn push_frame_name(line: &mut String, name: &str) {
    line.push_str(&frame_name(name));
}

/// A frame's name as a line spells it: `;` (which separates frames)
/// written `:`.
fn frame_name(name: &str) -> Cow<'_, str> {
    match name.contains(';') {
        true => Cow::Owned(name.replace(';', ":")),
        false => Cow::Borrowed(name),
    }
}

/// The leaf frame of folded stacks, the target: `[libfoo.so .data.rel.ro
/// table]`.
fn target_frame(target: &TargetRow) -> String {
    let name = crate::text::short(&target.object);
    let mut s = String::from("[");
    s.push_str(name.trim_matches(|c| c == '[' || c == ']'));
    if let Some(section) = &target.section {
        s.push(' ');
        s.push_str(section);
    }
    if let Some(symbol) = &target.symbol {
        s.push(' ');
        s.push_str(symbol);
    }
    s.push(']');
    s.replace(';', ":")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::report::Region;

    /// A model of `samples` over `table`'s stacks, their frames named by
    /// `frames`.
    fn model_of(
        samples: Vec<SampleRow>,
        table: &crate::analysis::stacks::StackTable,
        frames: FxHashMap<crate::analysis::stacks::FrameKey, Vec<crate::model::report::FrameRow>>,
    ) -> Model {
        Model {
            report: crate::model::report::tests::sample_report(),
            samples,
            stacks: table.stacks().clone(),
            frames,
            timeline: Vec::new(),
            timeline_sites: Vec::new(),
            timeline_origin: 0,
            startup_of_one: false,
            programs: Vec::new(),
            resident: None,
        }
    }

    /// Frames nothing named, the exec and unnamed JIT code are marked
    /// special by their kind, as is memory nothing names; named frames are
    /// not, whatever their names.
    #[test]
    fn special_frames_by_kind() {
        use crate::analysis::classify::{Access, FaultClass};
        use crate::analysis::stacks::FrameKey;
        use crate::model::report::FrameRow;
        use crate::model::SampleRow;
        let frame = |kind, function: &str| FrameRow {
            function: function.into(),
            kind,
            file: None,
            line: None,
            inlined: false,
            object: None,
        };
        let keys = [
            FrameKey::Exec,
            FrameKey::Unknown,
            FrameKey::Jit { pid: 1, avma: 16 },
            FrameKey::Jit { pid: 1, avma: 32 },
        ];
        let rows = [
            frame(FrameKind::Exec, "[execve]"),
            frame(FrameKind::Unknown, "[unknown]"),
            frame(FrameKind::UnnamedJit, "[jit 0x10]"),
            // A perf map may name code anything: the name is not the kind.
            frame(FrameKind::Jit, "[unknown]x"),
        ];
        let target = TargetRow {
            object: "[unknown]".into(),
            region: Region::Unknown,
            section: None,
            symbol: None,
        };
        let mut table = crate::analysis::stacks::StackTable::default();
        let stack = table.intern_leaf_first(&keys);
        let model = model_of(
            vec![SampleRow {
                owner: crate::analysis::Owner::Process(1),
                comm: "app".into(),
                class: FaultClass::Minor,
                access: Access::Read,
                stack,
                target: target.into(),
                faults: 1,
                latency_ns: 0,
                startup: false,
            }],
            &table,
            keys.into_iter().zip(rows.map(|r| vec![r])).collect(),
        );
        let folded = fold(&model);
        let special: Vec<(&str, FrameKind)> = folded
            .special
            .iter()
            .map(|(name, kind)| (name.as_str(), *kind))
            .collect();
        assert_eq!(
            special,
            [
                ("[execve]", FrameKind::Exec),
                ("[jit 0x10]", FrameKind::UnnamedJit),
                ("[unknown]", FrameKind::Unknown),
            ]
        );
        assert_eq!(
            folded.by_class[0].keys().next().unwrap(),
            "app;[unknown]x;[jit 0x10];[unknown];[execve];[unknown]"
        );
    }

    /// Folded target frames are compact and never contain `;`.
    #[test]
    fn target_frames() {
        let t = TargetRow {
            object: "/usr/lib/libx.so".into(),
            region: Region::File,
            section: Some(".got".into()),
            symbol: Some("a;b".into()),
        };
        assert_eq!(target_frame(&t), "[libx.so .got a:b]");
        let t = TargetRow {
            object: "[heap]".into(),
            region: Region::Heap,
            section: None,
            symbol: None,
        };
        assert_eq!(target_frame(&t), "[heap]");
    }

    /// Resident rows fold to what joining each row's line and adding them
    /// up gives: rows of two processes and two kinds, stacks that differ
    /// only in an address, the same name in two strings, inlined frames,
    /// a `;` in a name, targets of the same text in two rows, and frames
    /// drawn apart.
    #[test]
    fn resident_rows_fold_as_their_lines_add_up() {
        use crate::analysis::resident::MemoryKind;
        use crate::analysis::stacks::FrameKey;
        use crate::model::report::FrameRow;
        use crate::model::ResidentRow;
        use std::sync::Arc;
        let frame = |function: &str, kind, inlined| FrameRow {
            function: function.into(),
            kind,
            file: None,
            line: None,
            inlined,
            object: None,
        };
        let key = |offset| FrameKey::Code {
            module: 0,
            lookup_file_offset: offset,
        };
        let mut frames = FxHashMap::default();
        frames.insert(key(1), vec![frame("main", FrameKind::Code, false)]);
        // Two addresses in `work`, named by two strings.
        frames.insert(key(2), vec![frame("work", FrameKind::Code, false)]);
        frames.insert(key(3), vec![frame("work", FrameKind::Code, false)]);
        // An inlined `fill` in `touch` (leaf first, as the model keeps them).
        frames.insert(
            key(4),
            vec![
                frame("fill", FrameKind::Code, true),
                frame("touch", FrameKind::Code, false),
            ],
        );
        frames.insert(key(5), vec![frame("a;b", FrameKind::Code, false)]);
        frames.insert(
            FrameKey::Unknown,
            vec![frame("[unknown]", FrameKind::Unknown, false)],
        );
        let target = |object: &str, region| {
            Arc::new(TargetRow {
                object: object.into(),
                region,
                section: None,
                symbol: None,
            })
        };
        let targets = [
            target("[heap]", Region::Heap),
            target("[heap]", Region::Heap),
            target("[anon]", Region::Unknown),
        ];
        let mut table = crate::analysis::stacks::StackTable::default();
        let stacks = [
            vec![key(4), key(2), key(1)],
            vec![key(4), key(3), key(1)],
            vec![key(5), key(2), key(1)],
            vec![key(2), key(1)],
            vec![FrameKey::Unknown, key(1)],
            vec![],
        ]
        .map(|s| table.intern_leaf_first(&s));
        let comms: [Arc<str>; 2] = ["app".into(), "other".into()];
        let mut rows = Vec::new();
        for (i, &stack) in stacks.iter().enumerate() {
            for (t, target) in targets.iter().enumerate() {
                for pid in 1..3 {
                    rows.push(ResidentRow {
                        owner: crate::analysis::Owner::Process(pid),
                        comm: comms[(i + pid as usize) % 2].clone(),
                        stack,
                        target: target.clone(),
                        kind: [MemoryKind::Anon, MemoryKind::File][(i + t) % 2],
                        pages: 1 + (i * 3 + t) as u64,
                    });
                }
            }
        }
        let model = model_of(Vec::new(), &table, frames);
        let mut want = Folded::new();
        let mut want_special = Special::new();
        let mut line = String::new();
        for row in &rows {
            stack_line(
                &mut line,
                &model,
                (&row.comm, row.stack, &row.target),
                &mut want_special,
            );
            add(&mut want, &line, row.pages * 4);
        }
        let (got, special) = fold_resident(&rows, &model);
        assert_eq!(got, want);
        assert_eq!(special, want_special);
        assert!(
            got.contains_key("app;main;work;touch;fill;[heap]"),
            "{got:?}"
        );
        assert!(got.contains_key("other;main;work;a:b;[anon]"), "{got:?}");
        assert_eq!(got.len(), 2 * 5 * 2, "{got:?}");
        assert_eq!(
            into_counted_lines(got)[0],
            format!(
                "{} {}",
                want.keys().next().unwrap(),
                want.values().next().unwrap()
            )
        );
    }

    /// An interval's lines come out as the text lines of [`fold`] would,
    /// in the same order: names that are prefixes of others, with
    /// characters before and after `;`, a `;` inside a name, the same name
    /// at two addresses, lines that end where others go on.
    #[test]
    fn class_lines_are_the_folded_text_in_order() {
        use crate::analysis::classify::{Access, FaultClass};
        use crate::analysis::stacks::FrameKey;
        use crate::model::report::FrameRow;
        let names = ["f", "f g", "f:g", "f;g", "f", "fa", "f<T>", "", "[unknown]"];
        let frame = |function: &str| FrameRow {
            function: function.into(),
            kind: FrameKind::Code,
            file: None,
            line: None,
            inlined: false,
            object: None,
        };
        let keys: Vec<FrameKey> = (0..names.len() as u64)
            .map(|i| FrameKey::Code {
                module: 0,
                lookup_file_offset: 0x1000 + i,
            })
            .collect();
        let target = |object: &str| {
            std::sync::Arc::new(TargetRow {
                object: object.into(),
                region: Region::Heap,
                section: None,
                symbol: None,
            })
        };
        let targets = [target("[heap]"), target("f"), target("f g")];
        let mut table = crate::analysis::stacks::StackTable::default();
        let mut samples = Vec::new();
        let comm: std::sync::Arc<str> = "app".into();
        // Every stack of up to three of the names, leaf first, onto each
        // target, in two classes.
        let n = names.len();
        let mut stacks = vec![vec![]];
        for a in 0..n {
            stacks.push(vec![keys[a]]);
            for b in (0..n).step_by(2) {
                stacks.push(vec![keys[a], keys[b]]);
                stacks.push(vec![keys[b], keys[a], keys[(a + b) % n]]);
            }
        }
        for (i, stack) in stacks.iter().enumerate() {
            for (t, target) in targets.iter().enumerate() {
                samples.push(SampleRow {
                    owner: crate::analysis::Owner::Process(1),
                    comm: comm.clone(),
                    class: [FaultClass::Minor, FaultClass::Cow][(i + t) % 2],
                    access: Access::Read,
                    stack: table.intern_leaf_first(stack),
                    target: target.clone(),
                    faults: 1 + (i * t) as u64,
                    latency_ns: 0,
                    startup: false,
                });
            }
        }
        let model = model_of(
            samples,
            &table,
            keys.iter()
                .zip(names)
                .map(|(key, name)| (*key, vec![frame(name)]))
                .collect(),
        );
        let folded = fold(&model);
        let lines = ClassLines::of(&model);
        for class in FaultClass::ALL {
            let want: String = folded.by_class[class as usize]
                .iter()
                .map(|(line, n)| format!("x;{line} {n}\n"))
                .collect();
            let mut got = Vec::new();
            lines.write(class, "x", &mut got).unwrap();
            assert_eq!(String::from_utf8(got).unwrap(), want, "{class:?}");
        }
        assert!(folded.by_class[FaultClass::Minor as usize].len() > 100);
    }
}
