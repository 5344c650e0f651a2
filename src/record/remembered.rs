//! The stacks the BPF collector remembers (its `unwound` map, see
//! [`super::bpf`]): which it holds, by process, so that they are forgotten
//! when they may no longer hold; when a stack goes in (the second time it
//! is unwound); and the drain's copy of what the map holds, which serves
//! the records the kernel wrote before a stack went in.

use std::collections::VecDeque;
use std::hash::BuildHasher;

use rustc_hash::{FxBuildHasher, FxHashMap};

use super::bpf::{FaultCollector, Unwound, UnwoundKey, CACHE_ENTRIES};
use crate::format::events::le_u64;

/// Which unwindings the collector's `unwound` map holds, by process, so
/// that they are forgotten when they may no longer hold: the process
/// exec'd, exited, or replaced code it had mapped.
pub(super) struct Remembered {
    /// Stacks unwound once, by a fingerprint of their registers in a slot
    /// of their own: remembered the second time. A fingerprint lost to
    /// another in its slot only delays remembering; two that agree only
    /// remember early: either way no chain is wrong.
    seen: Vec<u64>,
    /// The keys in the map, by process, with what each holds: so that a
    /// fault the kernel recorded before its stack was remembered (the
    /// drain runs milliseconds behind: a loop faults thousands of times
    /// meanwhile) is not unwound again either.
    by_pid: FxHashMap<i32, FxHashMap<UnwoundKey, Held>>,
    /// The keys in the order they went in (with some forgotten since),
    /// the oldest first: when the map is full, the oldest quarter goes.
    order: VecDeque<UnwoundKey>,
    /// Keys in the map.
    count: usize,
    /// The kernel refused to keep one for a reason other than room: no
    /// more are tried.
    off: bool,
}

/// What the collector's map holds for a stack: the words its unwinding
/// read ((offset, value)) and the chain it found.
struct Held {
    words: Box<[(u32, u64)]>,
    frames: Box<[u64]>,
}

/// Slots of [`Remembered::seen`] (2 MiB): a busy host unwinds 60,000
/// stacks a second that the collector did not know, and a stack's second
/// time may come seconds after its first.
const SEEN_SLOTS: usize = 1 << 18;

impl Default for Remembered {
    fn default() -> Remembered {
        Remembered {
            seen: vec![0; SEEN_SLOTS],
            by_pid: FxHashMap::default(),
            order: VecDeque::new(),
            count: 0,
            off: false,
        }
    }
}

impl Remembered {
    /// The unwinding of the stack `key` found `frames` from what it read.
    pub(super) fn learn(
        &mut self,
        collector: &FaultCollector,
        key: UnwoundKey,
        unwound: Unwound<'_>,
    ) {
        if self.off || !unwound.fits() {
            return;
        }
        // Never 0, the empty slot's.
        let print = FxBuildHasher.hash_one(key) | 1;
        let slot = &mut self.seen[(print >> 46) as usize % SEEN_SLOTS];
        if *slot != print {
            *slot = print;
            return;
        }
        if self.count >= CACHE_ENTRIES {
            self.forget_oldest(collector, CACHE_ENTRIES / 4);
        }
        match collector.remember(&key, &unwound) {
            Ok(()) => {
                let held = Held {
                    words: unwound.words.into(),
                    frames: unwound.frames.into(),
                };
                if self
                    .by_pid
                    .entry(key.pid)
                    .or_default()
                    .insert(key, held)
                    .is_none()
                {
                    self.count += 1;
                    self.order.push_back(key);
                }
            }
            Err(_) => self.off = true,
        }
    }

    /// The chain remembered for `key`, when the words its unwinding read
    /// are the same in `stack` (as the collector checks them); and the
    /// stack they span.
    pub(super) fn chain_of(&self, key: &UnwoundKey, stack: &[u8]) -> Option<(&[u64], usize)> {
        let held = self.by_pid.get(&key.pid)?.get(key)?;
        let mut span = 0;
        for &(offset, value) in &held.words {
            let at = offset as usize;
            if le_u64(stack, at)? != value {
                return None;
            }
            span = span.max(at + 8);
        }
        Some((&held.frames, span))
    }

    /// Forgets the unwindings of process `pid`.
    pub(super) fn forget_pid(&mut self, collector: &FaultCollector, pid: i32) {
        for key in self.by_pid.remove(&pid).unwrap_or_default().into_keys() {
            let _ = collector.forget(&key);
            self.count -= 1;
        }
        // Keys of processes gone stay in `order` until their turn, or
        // until they are most of it.
        if self.order.len() > 2 * CACHE_ENTRIES {
            let by_pid = &self.by_pid;
            self.order.retain(|key| {
                by_pid
                    .get(&key.pid)
                    .is_some_and(|keys| keys.contains_key(key))
            });
        }
    }

    /// Forgets the `n` oldest unwindings still in the map (the map is full:
    /// the stacks of now take the place of old ones).
    fn forget_oldest(&mut self, collector: &FaultCollector, n: usize) {
        let mut forgotten = 0;
        while forgotten < n {
            let Some(key) = self.order.pop_front() else {
                break;
            };
            let Some(keys) = self.by_pid.get_mut(&key.pid) else {
                continue;
            };
            if keys.remove(&key).is_some() {
                let _ = collector.forget(&key);
                self.count -= 1;
                forgotten += 1;
            }
            if keys.is_empty() {
                self.by_pid.remove(&key.pid);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stack the collector's map holds serves the records the kernel
    /// wrote before it was remembered, when the words its unwinding read
    /// are the same; not when one changed, the copy is too short, or the
    /// registers differ.
    #[test]
    fn remembered_chains_serve_records_written_before() {
        let mut remembered = Remembered::default();
        let key = UnwoundKey {
            pid: 7,
            ip: 0x1000,
            sp: 0x7000,
            bp: 0,
        };
        let held = Held {
            words: vec![(8, 0xaa)].into(),
            frames: vec![0x10, 0x20].into(),
        };
        remembered.by_pid.entry(7).or_default().insert(key, held);
        let mut stack = [0u8; 16];
        stack[8..].copy_from_slice(&0xaau64.to_le_bytes());
        assert_eq!(
            remembered.chain_of(&key, &stack),
            Some((&[0x10u64, 0x20][..], 16))
        );
        assert!(remembered.chain_of(&key, &stack[..12]).is_none());
        assert!(remembered
            .chain_of(&UnwoundKey { bp: 1, ..key }, &stack)
            .is_none());
        stack[8] = 0xab;
        assert!(remembered.chain_of(&key, &stack).is_none());
    }
}
