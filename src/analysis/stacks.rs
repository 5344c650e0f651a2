//! Call stacks as raw, unsymbolized frames, interned into a prefix tree:
//! `(parent stack, frame) → StackId`. A sample costs one hash lookup per frame
//! (none for the frames it shares from the root with its thread's last
//! stack) and no allocation once its stack has been seen; names come at the
//! end, once per unique frame.

use std::hash::BuildHasher;

use hashbrown::HashTable;
use rustc_hash::FxBuildHasher;

use crate::analysis::process::ModuleId;

/// One frame before symbolization.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FrameKey {
    /// Code in a module, at the file offset used for lookup (return addresses
    /// already minus 1).
    Code {
        /// The module.
        module: ModuleId,
        /// File offset for lookup.
        lookup_file_offset: u64,
    },
    /// A kernel address (kept with `--kernel`).
    Kernel {
        /// Kernel address.
        avma: u64,
    },
    /// Code in anonymous memory: JIT-compiled code, named from the
    /// process's perf map when it wrote one, else by its address.
    Jit {
        /// The process (its perf map is `perf-PID.map`).
        pid: i32,
        /// The address (avma, the instruction itself).
        avma: u64,
    },
    /// An address in no known mapping (a corrupt chain), or the mark of a
    /// chain that stopped early.
    Unknown,
    /// A fault the kernel takes while executing `execve` (loading the new
    /// image: the partial `.bss` page, the new stack); its user registers
    /// still belong to the old image.
    Exec,
}

/// Index of an interned stack; [`StackTable::ROOT`] is the empty stack.
pub type StackId = u32;

/// A node of the prefix tree: 16 bytes where `(StackId, FrameKey)` took
/// 24 (an interval of a Rust build interns 500,000 of them, and the next
/// interval's table grows while the last one's is resolved).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Node {
    parent: StackId,
    /// The frame's kind and its 32-bit part: a module id (below [`JIT`]),
    /// [`JIT`] plus a pid, or [`KERNEL`], [`UNKNOWN`], [`EXEC`].
    kind: u32,
    /// The frame's 64-bit part: a file offset or an address.
    value: u64,
}

/// [`Node::kind`] of JIT code, its pid in the low 31 bits (pids stop at
/// 2^22, module ids are counted from 0 and never come near).
const JIT: u32 = 1 << 31;
const KERNEL: u32 = u32::MAX;
const UNKNOWN: u32 = u32::MAX - 1;
const EXEC: u32 = u32::MAX - 2;

impl Node {
    fn new(parent: StackId, frame: FrameKey) -> Node {
        let (kind, value) = match frame {
            FrameKey::Code {
                module,
                lookup_file_offset,
            } => {
                debug_assert!(module < JIT);
                (module, lookup_file_offset)
            }
            FrameKey::Kernel { avma } => (KERNEL, avma),
            FrameKey::Jit { pid, avma } => (JIT | (pid as u32 & !JIT), avma),
            FrameKey::Unknown => (UNKNOWN, 0),
            FrameKey::Exec => (EXEC, 0),
        };
        Node {
            parent,
            kind,
            value,
        }
    }

    fn frame(&self) -> FrameKey {
        match self.kind {
            KERNEL => FrameKey::Kernel { avma: self.value },
            UNKNOWN => FrameKey::Unknown,
            EXEC => FrameKey::Exec,
            kind if kind & JIT != 0 => FrameKey::Jit {
                pid: (kind & !JIT) as i32,
                avma: self.value,
            },
            module => FrameKey::Code {
                module,
                lookup_file_offset: self.value,
            },
        }
    }
}

/// Stacks as a prefix tree of frames, read-only: what the names of a
/// profile need of its [`StackTable`] (its frames by id), without the index
/// that interns new ones.
#[derive(Debug, Default, Clone)]
pub struct Stacks {
    nodes: Vec<Node>,
}

impl Stacks {
    /// Frames of `stack`, leaf first.
    pub fn frames(&self, mut stack: StackId) -> impl Iterator<Item = FrameKey> + '_ {
        std::iter::from_fn(move || {
            let node = self.nodes.get(stack as usize)?;
            stack = node.parent;
            Some(node.frame())
        })
    }

    /// `stack`'s caller (its stack less the leaf) and leaf frame; `None`
    /// for the empty stack.
    pub fn node(&self, stack: StackId) -> Option<(StackId, FrameKey)> {
        let node = self.nodes.get(stack as usize)?;
        Some((node.parent, node.frame()))
    }
}

/// Interned stacks.
#[derive(Default)]
pub struct StackTable {
    stacks: Stacks,
    /// The ids of `stacks`' nodes, hashed by node: 4 bytes an entry where a
    /// map from (parent, frame) to id took 32 (a system-wide recording
    /// interns hundreds of thousands of nodes).
    index: HashTable<StackId>,
    /// The last stack interned for a thread, in slots by thread (see
    /// [`StackTable::intern_for_thread`]).
    paths: Vec<Path>,
}

/// The nodes of a thread's last stack, root first.
#[derive(Default)]
struct Path {
    thread: i32,
    ids: Vec<StackId>,
}

/// Slots of [`StackTable::paths`] (a power of two): more than the threads
/// that fault at once on a busy host.
const PATH_SLOTS: usize = 256;

impl std::fmt::Debug for StackTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StackTable")
            .field("stacks", &self.stacks)
            .finish()
    }
}

impl StackTable {
    /// The empty stack.
    pub const ROOT: StackId = u32::MAX;

    /// The stack `parent` + `frame` (frame is the new leaf).
    pub fn push(&mut self, parent: StackId, frame: FrameKey) -> StackId {
        push_node(&mut self.stacks, &mut self.index, Node::new(parent, frame))
    }

    /// Interns a stack given leaf first, as [`StackTable::intern_leaf_first`],
    /// faulted by `thread`: the frames it shares, from the root, with the
    /// thread's last stack are taken from there without a lookup. A
    /// thread's faults mostly differ near the leaf (a compiler's passes
    /// below the same `main`): a deep stack's 40 lookups in a table of
    /// 500,000 nodes were a tenth of a busy host's drain.
    pub fn intern_for_thread(&mut self, thread: i32, frames: &[FrameKey]) -> StackId {
        if self.paths.is_empty() {
            self.paths.resize_with(PATH_SLOTS, Path::default);
        }
        let slot = path_slot(thread);
        let Self {
            stacks,
            index,
            paths,
        } = self;
        let path = &mut paths[slot];
        if path.thread != thread {
            path.thread = thread;
            path.ids.clear();
        }
        let mut parent = Self::ROOT;
        for (depth, &frame) in frames.iter().rev().enumerate() {
            let node = Node::new(parent, frame);
            if let Some(&id) = path.ids.get(depth) {
                if stacks.nodes[id as usize] == node {
                    parent = id;
                    continue;
                }
                path.ids.truncate(depth);
            }
            parent = push_node(stacks, index, node);
            path.ids.push(parent);
        }
        path.ids.truncate(frames.len());
        parent
    }

    /// Interns a stack given leaf first.
    pub fn intern_leaf_first(&mut self, frames: &[FrameKey]) -> StackId {
        frames
            .iter()
            .rev()
            .fold(Self::ROOT, |parent, &frame| self.push(parent, frame))
    }

    /// Frames of `stack`, leaf first.
    pub fn frames(&self, stack: StackId) -> impl Iterator<Item = FrameKey> + '_ {
        self.stacks.frames(stack)
    }

    /// The stacks, read-only.
    pub fn stacks(&self) -> &Stacks {
        &self.stacks
    }

    /// The stacks, without the index that interns new ones.
    pub fn into_stacks(self) -> Stacks {
        self.stacks
    }

    /// Every distinct frame of every stack.
    pub fn unique_frames(&self) -> impl Iterator<Item = FrameKey> + '_ {
        self.stacks.nodes.iter().map(Node::frame)
    }

    /// Number of interned stack nodes.
    pub fn len(&self) -> usize {
        self.stacks.nodes.len()
    }

    /// No stack interned yet.
    pub fn is_empty(&self) -> bool {
        self.stacks.nodes.is_empty()
    }
}

/// The slot of [`StackTable::paths`] of a thread.
fn path_slot(thread: i32) -> usize {
    (FxBuildHasher.hash_one(thread) >> 56) as usize % PATH_SLOTS
}

/// Interns `node` into `stacks` through `index`.
fn push_node(stacks: &mut Stacks, index: &mut HashTable<StackId>, node: Node) -> StackId {
    let nodes = &mut stacks.nodes;
    let hash_of = |node: &Node| FxBuildHasher.hash_one(node);
    let entry = index.entry(
        hash_of(&node),
        |&id| nodes[id as usize] == node,
        |&id| hash_of(&nodes[id as usize]),
    );
    match entry {
        hashbrown::hash_table::Entry::Occupied(found) => *found.get(),
        hashbrown::hash_table::Entry::Vacant(vacant) => {
            let next = nodes.len() as StackId;
            vacant.insert(next);
            nodes.push(node);
            next
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(off: u64) -> FrameKey {
        FrameKey::Code {
            module: 0,
            lookup_file_offset: off,
        }
    }

    /// Equal stacks get equal ids, shared prefixes share nodes, and frames
    /// come back leaf first.
    #[test]
    fn interning() {
        let mut t = StackTable::default();
        let a = t.intern_leaf_first(&[code(3), code(2), code(1)]);
        let b = t.intern_leaf_first(&[code(4), code(2), code(1)]);
        let a2 = t.intern_leaf_first(&[code(3), code(2), code(1)]);
        assert_eq!(a, a2);
        assert_ne!(a, b);
        assert_eq!(t.len(), 4, "root-side prefix 1,2 is shared");
        assert_eq!(
            t.frames(a).collect::<Vec<_>>(),
            vec![code(3), code(2), code(1)]
        );
        assert_eq!(t.intern_leaf_first(&[]), StackTable::ROOT);
        assert_eq!(t.frames(StackTable::ROOT).count(), 0);
    }

    /// A thread's stacks get the ids the plain interning gives, whatever
    /// the thread's last stack was: longer, shorter, parted anywhere, or
    /// another thread's in the same slot.
    #[test]
    fn thread_paths_intern_the_same() {
        let mut plain = StackTable::default();
        let mut by_thread = StackTable::default();
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = |below: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % below
        };
        let sharing = (2..).find(|&t| path_slot(t) == path_slot(1)).unwrap();
        let threads = [1, 2, 3, sharing];
        for _ in 0..20_000 {
            // Few threads, two in one slot; short alphabets: stacks share
            // prefixes and part at every depth.
            let thread = threads[next(4) as usize];
            let depth = next(12) as usize;
            let frames: Vec<FrameKey> = (0..depth).map(|_| code(next(3))).collect();
            let want = plain.intern_leaf_first(&frames);
            assert_eq!(
                by_thread.intern_for_thread(thread, &frames),
                want,
                "{frames:?}"
            );
        }
        assert_eq!(by_thread.len(), plain.len());
    }

    /// Every kind of frame comes back as it went in, at the edges of its
    /// packed form too; a node takes 16 bytes.
    #[test]
    fn frames_round_trip() {
        assert_eq!(std::mem::size_of::<Node>(), 16);
        let frames = [
            code(0),
            FrameKey::Code {
                module: JIT - 1,
                lookup_file_offset: u64::MAX,
            },
            FrameKey::Kernel { avma: u64::MAX },
            FrameKey::Jit { pid: 0, avma: 1 },
            FrameKey::Jit {
                pid: 4_194_304,
                avma: 0x7fff_0000,
            },
            FrameKey::Unknown,
            FrameKey::Exec,
        ];
        let mut t = StackTable::default();
        let stack = t.intern_leaf_first(&frames);
        assert_eq!(t.frames(stack).collect::<Vec<_>>(), frames);
        assert_eq!(t.unique_frames().count(), frames.len());
    }
}
