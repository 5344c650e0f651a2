//! The stacks of recent raw call chains, so that a chain seen again is not
//! turned into frames and interned again: on a busy host most faults repeat
//! a chain their process had a moment before (a loop touching pages, a
//! compiler's allocator), and placing each of a deep chain's addresses in
//! its mappings, then interning it frame by frame, cost the drain as much
//! as unwinding it.
//!
//! A chain's stack holds only under the mappings it was placed with, so an
//! entry is keyed by the process's [`stamp`](crate::analysis::process::Process::stamp),
//! which changes with every change of its address space. Entries are
//! compared in full: a hash collision is a miss, never a wrong stack.

use std::hash::{BuildHasher, Hasher};

use rustc_hash::FxBuildHasher;

use crate::analysis::stacks::StackId;
use crate::format::decode::Chain;

/// Slots in the memo (a power of two): enough for the distinct chains of a
/// busy two-core host over a few milliseconds; a chain's words are kept,
/// so about 2 MB at 30 frames a chain.
const SLOTS: usize = 1 << 13;

/// What a chain's stack depends on besides the chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct MemoKey {
    /// The process.
    pub pid: i32,
    /// Its address space's stamp (see the module docs).
    pub stamp: u64,
    /// The fault was taken in kernel mode (its first user address is a
    /// return address then).
    pub kernel_mode: bool,
}

/// One remembered chain.
struct Slot {
    key: Option<MemoKey>,
    chain: Vec<u64>,
    stack: StackId,
}

/// Recent chains and their stacks, direct-mapped by hash.
pub(super) struct ChainMemo {
    slots: Vec<Slot>,
    /// The chain asked about, its words read once for the hash and the
    /// compare (a record's chain is read word by word through its bytes).
    words: Vec<u64>,
    /// Lookups answered, and not.
    pub hits: u64,
    pub misses: u64,
}

/// Where a chain that was not found goes (see [`ChainMemo::put`]).
#[derive(Debug, Clone, Copy)]
pub(super) struct Vacancy(usize);

impl Default for ChainMemo {
    fn default() -> ChainMemo {
        ChainMemo {
            slots: (0..SLOTS)
                .map(|_| Slot {
                    key: None,
                    chain: Vec::new(),
                    stack: 0,
                })
                .collect(),
            words: Vec::new(),
            hits: 0,
            misses: 0,
        }
    }
}

impl ChainMemo {
    /// The stack of `chain` under `key`, or where to put it once known.
    pub(super) fn get(&mut self, key: MemoKey, chain: &Chain<'_>) -> Result<StackId, Vacancy> {
        self.words.clear();
        self.words.extend(chain.iter());
        let mut hasher = FxBuildHasher.build_hasher();
        hasher.write_i32(key.pid);
        hasher.write_u64(key.stamp);
        hasher.write_u8(key.kernel_mode as u8);
        for &word in &self.words {
            hasher.write_u64(word);
        }
        // Fx's high bits are its best mixed.
        let at = (hasher.finish() >> (64 - SLOTS.trailing_zeros())) as usize;
        let slot = &self.slots[at];
        if slot.key == Some(key) && slot.chain == self.words {
            self.hits += 1;
            return Ok(slot.stack);
        }
        self.misses += 1;
        Err(Vacancy(at))
    }

    /// Remembers the stack of `chain` under `key` where [`ChainMemo::get`]
    /// found no entry.
    pub(super) fn put(
        &mut self,
        Vacancy(at): Vacancy,
        key: MemoKey,
        chain: &Chain<'_>,
        stack: StackId,
    ) {
        let slot = &mut self.slots[at];
        slot.key = Some(key);
        slot.chain.clear();
        slot.chain.extend(chain.iter());
        slot.stack = stack;
    }

    /// Forgets every chain (their stacks' table was given away).
    pub(super) fn clear(&mut self) {
        for slot in &mut self.slots {
            slot.key = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: MemoKey = MemoKey {
        pid: 7,
        stamp: 3,
        kernel_mode: false,
    };

    /// A chain is found under its own key only, with the stack put there;
    /// a cleared memo finds nothing.
    #[test]
    fn found_under_its_key() {
        let mut memo = ChainMemo::default();
        let words = [0x1000, 0x2000, 0x3000];
        let chain = Chain::Words(&words);
        let vacancy = memo.get(KEY, &chain).unwrap_err();
        memo.put(vacancy, KEY, &chain, 42);
        assert_eq!(memo.get(KEY, &chain).ok(), Some(42));
        for other in [
            MemoKey { pid: 8, ..KEY },
            MemoKey { stamp: 4, ..KEY },
            MemoKey {
                kernel_mode: true,
                ..KEY
            },
        ] {
            assert!(memo.get(other, &chain).is_err(), "{other:?}");
        }
        assert!(memo.get(KEY, &Chain::Words(&words[..2])).is_err());
        assert!(memo
            .get(KEY, &Chain::Words(&[0x1000, 0x2000, 0x3001]))
            .is_err());
        assert_eq!((memo.hits, memo.misses), (1, 6));
        memo.clear();
        assert!(memo.get(KEY, &chain).is_err());
    }

    /// Two chains that land in one slot: the later one takes it, and the
    /// earlier is a miss, not the later's stack.
    #[test]
    fn a_taken_slot_is_a_miss() {
        let mut memo = ChainMemo::default();
        let first = [0x1000u64];
        let mut other = 0x2000u64;
        let at = memo.get(KEY, &Chain::Words(&first)).unwrap_err().0;
        while memo.get(KEY, &Chain::Words(&[other])).unwrap_err().0 != at {
            other += 1;
        }
        memo.put(Vacancy(at), KEY, &Chain::Words(&first), 1);
        memo.put(Vacancy(at), KEY, &Chain::Words(&[other]), 2);
        assert_eq!(memo.get(KEY, &Chain::Words(&[other])).ok(), Some(2));
        assert!(memo.get(KEY, &Chain::Words(&first)).is_err());
    }
}
