//! One process's resident pages for the ledger (`resident.rs`): page number
//! → site id, in aligned chunks of [`CHUNK_PAGES`] pages.
//!
//! A fault asks for one page: the chunk is found by hash, the page by
//! index (a `BTreeMap` of pages cost ~100 ns a fault on a 1 GiB run, its
//! depth of cache misses). The syscalls that give memory back ask for
//! ranges, and a fork walks the pages in order: the chunks' numbers are
//! also kept sorted.
//!
//! Memory: a chunk holds its 16 ids (64 bytes) and costs ~40 more in the
//! two indexes, so pages that come in runs (files through fault-around,
//! heaps, huge pages) cost ~6.5 bytes each, and a page alone in its 64 KiB
//! ~100 bytes.

use std::collections::BTreeSet;

use rustc_hash::FxHashMap;

/// Pages of a chunk: fault-around's window, so that a file fault's pages
/// fill one.
pub(super) const CHUNK_PAGES: u64 = 16;

/// An empty slot (a site id is an index of the ledger's sites, which never
/// reach it).
const EMPTY: u32 = u32::MAX;

/// `CHUNK_PAGES` slots and how many hold a page.
#[derive(Clone)]
struct Chunk {
    ids: [u32; CHUNK_PAGES as usize],
    used: u32,
}

impl Chunk {
    const EMPTY: Chunk = Chunk {
        ids: [EMPTY; CHUNK_PAGES as usize],
        used: 0,
    };
}

/// Resident pages by page number, each with its site id.
#[derive(Default, Clone)]
pub(super) struct PageTable {
    chunks: FxHashMap<u64, Chunk>,
    /// The chunks' numbers, in order.
    order: BTreeSet<u64>,
    len: u64,
}

/// The chunk of `page` and the page's slot in it.
fn split(page: u64) -> (u64, usize) {
    (page / CHUNK_PAGES, (page % CHUNK_PAGES) as usize)
}

/// Chunk `key` of `chunks` (listed in `order`), made empty when there is
/// none.
fn chunk_mut<'a>(
    chunks: &'a mut FxHashMap<u64, Chunk>,
    order: &mut BTreeSet<u64>,
    key: u64,
) -> &'a mut Chunk {
    chunks.entry(key).or_insert_with(|| {
        order.insert(key);
        Chunk::EMPTY
    })
}

impl PageTable {
    /// How many pages are held.
    pub(super) fn len(&self) -> u64 {
        self.len
    }

    /// The site of `page`, if it is held.
    #[cfg(test)]
    pub(super) fn get(&self, page: u64) -> Option<u32> {
        let (chunk, slot) = split(page);
        let id = self.chunks.get(&chunk)?.ids[slot];
        (id != EMPTY).then_some(id)
    }

    /// Holds `page` for site `id`; the site it had, if it was held.
    pub(super) fn insert(&mut self, page: u64, id: u32) -> Option<u32> {
        debug_assert_ne!(id, EMPTY);
        let (key, slot) = split(page);
        let chunk = chunk_mut(&mut self.chunks, &mut self.order, key);
        let old = std::mem::replace(&mut chunk.ids[slot], id);
        if old == EMPTY {
            chunk.used += 1;
            self.len += 1;
            None
        } else {
            Some(old)
        }
    }

    /// The site of `page` if it is held; else holds it for site `id` (a
    /// fault's first touch: one probe).
    pub(super) fn get_or_insert(&mut self, page: u64, id: u32) -> Option<u32> {
        debug_assert_ne!(id, EMPTY);
        let (key, slot) = split(page);
        let chunk = chunk_mut(&mut self.chunks, &mut self.order, key);
        match chunk.ids[slot] {
            EMPTY => {
                chunk.ids[slot] = id;
                chunk.used += 1;
                self.len += 1;
                None
            }
            old => Some(old),
        }
    }

    /// Holds the first `n` pages of `pages` not held for site `id` (the
    /// kernel maps the pages beside a fault that it has and skips those
    /// mapped); how many. A chunk is found once, not once a page.
    pub(super) fn fill_vacant(&mut self, pages: std::ops::Range<u64>, id: u32, n: u64) -> u64 {
        debug_assert_ne!(id, EMPTY);
        let mut placed = 0;
        let mut page = pages.start;
        while page < pages.end && placed < n {
            let (key, first) = split(page);
            let chunk = chunk_mut(&mut self.chunks, &mut self.order, key);
            let last = (pages.end - key * CHUNK_PAGES).min(CHUNK_PAGES) as usize;
            for slot in &mut chunk.ids[first..last] {
                if placed == n {
                    break;
                }
                if *slot == EMPTY {
                    *slot = id;
                    chunk.used += 1;
                    placed += 1;
                }
            }
            page = (key + 1) * CHUNK_PAGES;
        }
        self.len += placed;
        placed
    }

    /// Takes away the pages of `pages`; (page, site) of each, in order.
    pub(super) fn take_range(&mut self, pages: std::ops::Range<u64>) -> Vec<(u64, u32)> {
        let mut taken = Vec::new();
        self.take_each(pages, |page, id| taken.push((page, id)));
        taken
    }

    /// Takes away the pages of `pages`; the runs of equal sites among
    /// them, in order: (site, pages), what [`runs`] makes of
    /// [`PageTable::take_range`]'s sites, folded as they are taken. An
    /// `munmap` of a loop's buffer is one run, not a list of its pages.
    pub(super) fn take_runs(&mut self, pages: std::ops::Range<u64>) -> Vec<(u32, u64)> {
        let mut runs: Vec<(u32, u64)> = Vec::new();
        self.take_each(pages, |_, id| match runs.last_mut() {
            Some((last, n)) if *last == id => *n += 1,
            _ => runs.push((id, 1)),
        });
        runs
    }

    /// Takes away the pages of `pages`, telling `f` each (page, site) in
    /// order. A chunk inside the range goes whole.
    fn take_each(&mut self, pages: std::ops::Range<u64>, mut f: impl FnMut(u64, u32)) {
        if pages.is_empty() {
            return;
        }
        let first_chunk = pages.start / CHUNK_PAGES;
        let last_chunk = (pages.end - 1) / CHUNK_PAGES;
        let keys: Vec<u64> = self
            .order
            .range(first_chunk..=last_chunk)
            .copied()
            .collect();
        let mut taken = 0;
        for key in keys {
            let base = key * CHUNK_PAGES;
            let whole = pages.start <= base
                && base
                    .checked_add(CHUNK_PAGES)
                    .is_some_and(|end| end <= pages.end);
            if whole {
                let Some(chunk) = self.chunks.remove(&key) else {
                    continue;
                };
                self.order.remove(&key);
                for (slot, &id) in chunk.ids.iter().enumerate() {
                    if id != EMPTY {
                        f(base + slot as u64, id);
                    }
                }
                taken += u64::from(chunk.used);
                continue;
            }
            let Some(chunk) = self.chunks.get_mut(&key) else {
                continue;
            };
            for (slot, id) in chunk.ids.iter_mut().enumerate() {
                let page = base + slot as u64;
                if *id != EMPTY && pages.contains(&page) {
                    f(page, std::mem::replace(id, EMPTY));
                    chunk.used -= 1;
                    taken += 1;
                }
            }
            if chunk.used == 0 {
                self.chunks.remove(&key);
                self.order.remove(&key);
            }
        }
        self.len -= taken;
    }

    /// (page, site) of the pages of `pages`, in order.
    pub(super) fn range(
        &self,
        pages: std::ops::Range<u64>,
    ) -> impl Iterator<Item = (u64, u32)> + '_ {
        let chunks = if pages.is_empty() {
            self.order.range(1..1)
        } else {
            self.order
                .range(pages.start / CHUNK_PAGES..=(pages.end - 1) / CHUNK_PAGES)
        };
        chunks
            .flat_map(move |key| self.chunk_pages(*key))
            .filter(move |(page, _)| pages.contains(page))
    }

    /// (page, site) of every page held, in order.
    pub(super) fn iter(&self) -> impl Iterator<Item = (u64, u32)> + '_ {
        self.order.iter().flat_map(|key| self.chunk_pages(*key))
    }

    /// The site of every page held, in no order.
    pub(super) fn ids(&self) -> impl Iterator<Item = u32> + '_ {
        (self.chunks.values())
            .flat_map(|chunk| chunk.ids.iter().copied())
            .filter(|&id| id != EMPTY)
    }

    /// Gives each page the site `renumbered` maps its site to.
    pub(super) fn renumber(&mut self, renumbered: impl Fn(u32) -> u32) {
        for chunk in self.chunks.values_mut() {
            for id in chunk.ids.iter_mut().filter(|id| **id != EMPTY) {
                *id = renumbered(*id);
            }
        }
    }

    /// (page, site) of the pages held in chunk `key`.
    fn chunk_pages(&self, key: u64) -> impl Iterator<Item = (u64, u32)> + '_ {
        let ids = self.chunks.get(&key).map(|chunk| &chunk.ids[..]);
        (ids.unwrap_or_default().iter().enumerate())
            .filter(|(_, &id)| id != EMPTY)
            .map(move |(slot, &id)| (key * CHUNK_PAGES + slot as u64, id))
    }
}

/// The runs of equal sites in `ids`: (site, pages). Pages of one mapping
/// come in long runs of one site (a loop's), which are then subtracted
/// once, not page by page.
pub(super) fn runs(ids: impl IntoIterator<Item = u32>) -> impl Iterator<Item = (u32, u64)> {
    let mut ids = ids.into_iter().peekable();
    std::iter::from_fn(move || {
        let id = ids.next()?;
        let mut n = 1;
        while ids.next_if_eq(&id).is_some() {
            n += 1;
        }
        Some((id, n))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// Against a `BTreeMap`, through inserts, replacements, first touches,
    /// vacant pages filled, and ranges taken (page by page and as runs) that
    /// start, end and lie inside chunks, cover whole ones, and hold nothing.
    #[test]
    fn behaves_as_a_sorted_map() {
        let mut table = PageTable::default();
        let mut model = BTreeMap::new();
        let mut next = crate::test_numbers(0x2545_f491_4f6c_dd1d);
        for round in 0..4000u64 {
            let page = next() % 300 + if round % 3 == 0 { 1 << 30 } else { 0 };
            let id = (next() % 50) as u32;
            match next() % 6 {
                0 | 1 => assert_eq!(table.insert(page, id), model.insert(page, id)),
                2 => {
                    let held = model.get(&page).copied();
                    model.entry(page).or_insert(id);
                    assert_eq!(table.get_or_insert(page, id), held);
                }
                5 => {
                    let (end, n) = (page + next() % 40, next() % 20);
                    let vacant: Vec<u64> = (page..end)
                        .filter(|p| !model.contains_key(p))
                        .take(n as usize)
                        .collect();
                    for &p in &vacant {
                        model.insert(p, id);
                    }
                    assert_eq!(table.fill_vacant(page..end, id, n), vacant.len() as u64);
                }
                3 => {
                    let end = page + next() % 40;
                    let want: Vec<(u64, u32)> =
                        model.range(page..end).map(|(&p, &i)| (p, i)).collect();
                    for (p, _) in &want {
                        model.remove(p);
                    }
                    if round % 2 == 0 {
                        assert_eq!(table.take_range(page..end), want);
                    } else {
                        let runs: Vec<(u32, u64)> = runs(want.iter().map(|&(_, id)| id)).collect();
                        assert_eq!(table.take_runs(page..end), runs);
                    }
                }
                _ => {
                    let end = page + next() % 40;
                    let want: Vec<(u64, u32)> =
                        model.range(page..end).map(|(&p, &i)| (p, i)).collect();
                    assert_eq!(table.range(page..end).collect::<Vec<_>>(), want);
                }
            }
            assert_eq!(table.len(), model.len() as u64);
            assert_eq!(table.get(page), model.get(&page).copied());
        }
        let all: Vec<(u64, u32)> = model.iter().map(|(&p, &i)| (p, i)).collect();
        assert_eq!(table.iter().collect::<Vec<_>>(), all);
        let mut ids: Vec<u32> = table.ids().collect();
        ids.sort_unstable();
        let mut want: Vec<u32> = model.values().copied().collect();
        want.sort_unstable();
        assert_eq!(ids, want);
        // Emptied chunks go: taking everything leaves nothing to walk.
        table.take_runs(0..u64::MAX);
        assert!(table.len() == 0 && table.chunks.is_empty() && table.order.is_empty());
    }

    /// A range past the last page of the address space, and an empty one.
    #[test]
    fn ranges_at_the_edges() {
        let mut table = PageTable::default();
        table.insert(u64::MAX / CHUNK_PAGES * CHUNK_PAGES, 7);
        table.insert(3, 1);
        assert_eq!(table.range(5..5).count(), 0);
        let (start, end) = (9, 2);
        assert_eq!(table.take_range(start..end), vec![]);
        assert_eq!(table.range(0..u64::MAX).count(), 2);
        assert_eq!(table.take_range(0..4), vec![(3, 1)]);
        assert_eq!(table.take_runs(0..u64::MAX), vec![(7, 1)]);
        assert_eq!(table.len(), 0);
    }
}
