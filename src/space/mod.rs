//! A process's mappings: the one model of an address space that the
//! unwinder (its code, with each file's CFI) and the analysis (every
//! mapping, as a fault's target and a frame's module) both read.
//!
//! Mappings are sorted by address and never overlap. A new mapping cuts
//! what it covers, and the parts of a mapping it leaves stay with their
//! file offsets, as the kernel leaves a VMA's rest after an `mmap` over
//! part of it or an `mprotect` of a page. What a mapping holds beside its
//! range and file offset is its reader's (`T`); a reader that derives more
//! from a mapping (the unwinder's CFI for a part) learns what was cut from
//! the [`Cut`]s a change returns.

use std::cell::Cell;
use std::ops::Range;

/// One mapping: `[start_avma, end_avma)` of the process, from
/// `file_offset` of what it maps, and what its reader keeps of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping<T> {
    /// First address (avma).
    pub start_avma: u64,
    /// End address (avma, exclusive).
    pub end_avma: u64,
    /// File offset of `start_avma` (a reader may keep a virtual one, as
    /// the analysis does for a `.bss` tail).
    pub file_offset: u64,
    /// What the reader keeps of it.
    pub value: T,
}

impl<T> Mapping<T> {
    /// Its addresses.
    pub fn avma_range(&self) -> Range<u64> {
        self.start_avma..self.end_avma
    }

    /// File offset of an address inside the mapping.
    pub fn file_offset_of(&self, avma: u64) -> u64 {
        self.file_offset + (avma - self.start_avma)
    }
}

/// A mapping a change cut into: as it was, and the parts of it that stay
/// in the address space (below the change and above it), each now a
/// mapping of its own with the same value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cut<T> {
    /// The mapping before the change.
    pub was: Mapping<T>,
    /// The parts of it that stay.
    pub kept: [Option<Range<u64>>; 2],
}

/// The mappings of one address space, sorted by address, non-overlapping.
#[derive(Debug, Clone)]
pub struct Mappings<T> {
    maps: Vec<Mapping<T>>,
    /// Where [`Mappings::find`] last found a mapping: lookups come in
    /// runs in one mapping (a loop's faults, a walk's frames in one
    /// library), so it is tried before the search.
    last_found: Cell<usize>,
}

impl<T> Default for Mappings<T> {
    fn default() -> Self {
        Mappings {
            maps: Vec::new(),
            last_found: Cell::new(0),
        }
    }
}

impl<T: Clone> Mappings<T> {
    /// Adds a mapping, cutting whatever it covers; what it cut. An empty
    /// mapping changes nothing.
    pub fn insert(&mut self, new: Mapping<T>) -> Vec<Cut<T>> {
        if new.end_avma <= new.start_avma {
            return Vec::new();
        }
        let (at, cuts) = self.cut(new.avma_range());
        self.maps.insert(at, new);
        cuts
    }

    /// Removes `range` from every mapping it covers; what it cut.
    pub fn remove(&mut self, range: Range<u64>) -> Vec<Cut<T>> {
        if range.is_empty() {
            return Vec::new();
        }
        self.cut(range).1
    }

    /// Cuts `range` out of the mappings: the index where a mapping of
    /// `range` now belongs, and what it cut.
    fn cut(&mut self, range: Range<u64>) -> (usize, Vec<Cut<T>>) {
        let first = self.maps.partition_point(|m| m.end_avma <= range.start);
        let count = self.maps[first..].partition_point(|m| m.start_avma < range.end);
        if count == 0 {
            return (first, Vec::new());
        }
        let mut below = None;
        let mut above = None;
        let cuts: Vec<Cut<T>> = (self.maps.drain(first..first + count))
            .map(|was| {
                let mut kept = [None, None];
                if was.start_avma < range.start {
                    kept[0] = Some(was.start_avma..range.start);
                    below = Some(Mapping {
                        end_avma: range.start,
                        ..was.clone()
                    });
                }
                if was.end_avma > range.end {
                    kept[1] = Some(range.end..was.end_avma);
                    above = Some(Mapping {
                        start_avma: range.end,
                        file_offset: was.file_offset_of(range.end),
                        ..was.clone()
                    });
                }
                Cut { was, kept }
            })
            .collect();
        // Only the first can reach below the range, only the last above.
        let at = first + usize::from(below.is_some());
        self.maps
            .splice(first..first, below.into_iter().chain(above));
        (at, cuts)
    }
}

impl<T> Mappings<T> {
    /// The mapping containing `avma`.
    pub fn find(&self, avma: u64) -> Option<&Mapping<T>> {
        if let Some(m) = self.maps.get(self.last_found.get()) {
            if m.avma_range().contains(&avma) {
                return Some(m);
            }
        }
        let i = self
            .maps
            .partition_point(|m| m.start_avma <= avma)
            .checked_sub(1)?;
        let m = &self.maps[i];
        self.last_found.set(i);
        (avma < m.end_avma).then_some(m)
    }

    /// The mapping that starts at `start_avma`, to change what its reader
    /// keeps of it.
    pub fn starting_at_mut(&mut self, start_avma: u64) -> Option<&mut Mapping<T>> {
        let i = self.maps.partition_point(|m| m.start_avma < start_avma);
        self.maps.get_mut(i).filter(|m| m.start_avma == start_avma)
    }

    /// The mapping ending exactly at `avma`.
    pub fn ending_at(&self, avma: u64) -> Option<&Mapping<T>> {
        let i = self.maps.partition_point(|m| m.start_avma < avma);
        let m = self.maps.get(i.checked_sub(1)?)?;
        (m.end_avma == avma).then_some(m)
    }

    /// Every mapping, by address.
    pub fn iter(&self) -> std::slice::Iter<'_, Mapping<T>> {
        self.maps.iter()
    }

    /// How many mappings there are.
    pub fn len(&self) -> usize {
        self.maps.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.maps.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(start: u64, end: u64, file_offset: u64, value: char) -> Mapping<char> {
        Mapping {
            start_avma: start,
            end_avma: end,
            file_offset,
            value,
        }
    }

    fn layout(maps: &Mappings<char>) -> Vec<(u64, u64, u64, char)> {
        (maps.iter())
            .map(|m| (m.start_avma, m.end_avma, m.file_offset, m.value))
            .collect()
    }

    /// A mapping over the middle of another leaves both ends, the upper
    /// one at its file offset; one over several trims the outer two and
    /// takes the rest; each cut says what was and what stays.
    #[test]
    fn a_new_mapping_cuts_what_it_covers() {
        let mut maps = Mappings::default();
        assert!(maps.insert(map(0x1000, 0x5000, 0x100, 'a')).is_empty());
        let cuts = maps.insert(map(0x2000, 0x3000, 0, 'b'));
        assert_eq!(
            cuts,
            [Cut {
                was: map(0x1000, 0x5000, 0x100, 'a'),
                kept: [Some(0x1000..0x2000), Some(0x3000..0x5000)],
            }]
        );
        assert_eq!(
            layout(&maps),
            [
                (0x1000, 0x2000, 0x100, 'a'),
                (0x2000, 0x3000, 0, 'b'),
                (0x3000, 0x5000, 0x2100, 'a')
            ]
        );
        let cuts = maps.insert(map(0x1800, 0x4000, 0, 'c'));
        let kept: Vec<_> = cuts.iter().map(|c| (c.was.value, c.kept.clone())).collect();
        assert_eq!(
            kept,
            [
                ('a', [Some(0x1000..0x1800), None]),
                ('b', [None, None]),
                ('a', [None, Some(0x4000..0x5000)])
            ]
        );
        assert_eq!(
            layout(&maps),
            [
                (0x1000, 0x1800, 0x100, 'a'),
                (0x1800, 0x4000, 0, 'c'),
                (0x4000, 0x5000, 0x3100, 'a')
            ]
        );
        // An empty mapping changes nothing.
        assert!(maps.insert(map(0x4800, 0x4800, 0, 'd')).is_empty());
        assert_eq!(maps.len(), 3);
    }

    /// A removal leaves a hole; one of nothing cuts nothing.
    #[test]
    fn a_removal_leaves_a_hole() {
        let mut maps = Mappings::default();
        maps.insert(map(0x1000, 0x4000, 0, 'a'));
        maps.insert(map(0x6000, 0x7000, 0, 'b'));
        assert!(maps.remove(0x4000..0x6000).is_empty());
        let cuts = maps.remove(0x3000..0x6800);
        assert_eq!(cuts.len(), 2);
        assert_eq!(
            layout(&maps),
            [(0x1000, 0x3000, 0, 'a'), (0x6800, 0x7000, 0x800, 'b')]
        );
        assert!(maps.find(0x3000).is_none() && maps.find(0x6000).is_none());
        assert_eq!(maps.ending_at(0x3000).map(|m| m.value), Some('a'));
        assert!(maps.ending_at(0x7001).is_none());
        maps.starting_at_mut(0x6800).unwrap().value = 'c';
        assert!(maps.starting_at_mut(0x6000).is_none());
        assert_eq!(maps.find(0x6fff).map(|m| m.value), Some('c'));
    }

    /// Against a model of one value per page, through random inserts and
    /// removals: every page finds what the model holds, and file offsets
    /// follow their mapping's.
    #[test]
    fn behaves_as_a_map_of_pages() {
        const PAGES: u64 = 64;
        let mut maps = Mappings::default();
        let mut model: Vec<Option<(u64, char)>> = vec![None; PAGES as usize];
        let mut next = crate::test_numbers(0x9e37_79b9_7f4a_7c15);
        for round in 0..2000 {
            let start = next() % PAGES;
            let end = (start + next() % 12).min(PAGES);
            let value = char::from(b'a' + (round % 26) as u8);
            let file_offset = next() % 100;
            if next() % 4 == 0 {
                maps.remove(start * 0x1000..end * 0x1000);
                model[start as usize..end as usize].fill(None);
            } else {
                maps.insert(map(
                    start * 0x1000,
                    end * 0x1000,
                    file_offset * 0x1000,
                    value,
                ));
                for page in start..end {
                    model[page as usize] = Some((file_offset + page - start, value));
                }
            }
            for page in 0..PAGES {
                let avma = page * 0x1000 + 0x10;
                let found = maps
                    .find(avma)
                    .map(|m| (m.file_offset_of(avma) / 0x1000, m.value));
                assert_eq!(found, model[page as usize], "round {round}, page {page}");
            }
            let sorted = maps.iter().zip(maps.iter().skip(1));
            assert!(sorted.clone().all(|(a, b)| a.end_avma <= b.start_avma));
            assert!(maps.iter().all(|m| m.start_avma < m.end_avma));
        }
    }
}
