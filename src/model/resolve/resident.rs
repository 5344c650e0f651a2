//! The resident-page ledger's sites, named: the model's resident rows and
//! report.json's `resident`.

use std::sync::Arc;

use rustc_hash::FxHashMap;

use crate::analysis::resident::{MemoryKind, ResidentKey};
use crate::analysis::Profile;
use crate::format::perf_data::RecordMode;
use crate::model::report::{KernelKib, KindKib, ResidentMoment, ResidentReport, ResidentSite};
use crate::model::{ResidentRow, ResidentRows};

use super::count::{Interned, KeptStacks};
use super::names::Names;

/// The sites shown at each moment in report.json.
const TOP_SITES: usize = 20;

/// What the ledger cannot see, as report.json says it.
macro_rules! unseen {
    () => {
        "pages the kernel fills for a syscall (execve's stack, MAP_POPULATE, read into memory \
         not yet touched) belong to no fault; pages the kernel takes back without a syscall \
         (reclaim, MADV_PAGEOUT) stay with their sites, reconciled (reconciled_kib)"
    };
}
const UNSEEN: &str = unseen!();

/// [`UNSEEN`] of a recording of processes that ran before it (`-p`, `-a`).
const UNSEEN_ATTACHED: &str = concat!(
    "pages resident before the recording began belong to no fault it saw (only the kernel's \
     count has them); ",
    unseen!()
);

/// The resident rows of the model and the report's summary, when the
/// profile kept a ledger.
pub(super) fn resident(
    profile: &Profile,
    names: &Names,
    interned: &mut Interned,
    kept: &mut KeptStacks,
    origin: u64,
) -> Option<(ResidentRows, ResidentReport)> {
    let ledger = profile.resident.as_ref()?;
    let mut rows = |sites: &mut dyn Iterator<Item = (ResidentKey, u64)>| -> Vec<ResidentRow> {
        let mut rows: Vec<ResidentRow> = sites
            .map(|(key, pages)| {
                kept.keep(names, key.stack);
                let target = interned.target(names, key.target);
                ResidentRow {
                    owner: key.owner,
                    comm: interned.comm(names, key.owner),
                    stack: key.stack,
                    target: Arc::clone(&interned.targets[target as usize]),
                    kind: key.kind,
                    pages,
                }
            })
            .collect();
        rows.sort_by(|a, b| b.pages.cmp(&a.pages).then(a.stack.cmp(&b.stack)));
        rows
    };
    let peak = rows(&mut ledger.at_peak());
    let exit = rows(&mut ledger.at_exit());
    let kernel = ledger.kernel();
    let anon = ledger.kernel_counts_anon();
    let reconciled = |pages: [u64; 3]| (pages != [0; 3]).then(|| KindKib::of_pages(pages));
    let (reconciled_at_peak, reconciled_at_exit) = ledger.reconciled();
    let report = ResidentReport {
        peak: ResidentMoment {
            time_ns: Some(ledger.peak().time.saturating_sub(origin)),
            kib: KindKib::of_pages(ledger.peak().pages),
            kernel_kib: kernel.map(|(at_peak, _)| KernelKib::of_pages(at_peak, anon)),
            reconciled_kib: reconciled(reconciled_at_peak),
            top: top_sites(profile, names, interned, &peak),
        },
        end: ResidentMoment {
            time_ns: None,
            kib: KindKib::of_pages(pages_by_kind(&exit)),
            kernel_kib: kernel.map(|(_, at_exit)| KernelKib::of_pages(at_exit, anon)),
            reconciled_kib: reconciled(reconciled_at_exit),
            top: top_sites(profile, names, interned, &exit),
        },
        pages: ledger.counts(),
        unseen: match profile.meta.as_ref().map(|m| m.mode) {
            Some(RecordMode::Attach | RecordMode::System) => UNSEEN_ATTACHED,
            _ => UNSEEN,
        },
    };
    let series = ledger.series().to_vec();
    Some((ResidentRows { peak, exit, series }, report))
}

fn pages_by_kind(rows: &[ResidentRow]) -> [u64; 3] {
    let mut pages = [0; 3];
    for row in rows {
        pages[row.kind as usize] += row.pages;
    }
    pages
}

/// What rows summed in a site have alike: process name, innermost
/// function, target (its address), kind.
type SiteOfRow = (Arc<str>, Option<u32>, usize, MemoryKind);

/// The rows summed per (process name, innermost function, target, kind),
/// most KiB first; ties by function and target.
fn top_sites(
    profile: &Profile,
    names: &Names,
    interned: &mut Interned,
    rows: &[ResidentRow],
) -> Vec<ResidentSite> {
    let mut sums: FxHashMap<SiteOfRow, (u64, &ResidentRow)> = FxHashMap::default();
    for row in rows {
        let leaf = interned.leaf(names, &profile.stacks, row.stack);
        let target = Arc::as_ptr(&row.target) as usize;
        let key = (Arc::clone(&row.comm), leaf, target, row.kind);
        sums.entry(key).or_insert((0, row)).0 += row.pages;
    }
    let mut sites: Vec<ResidentSite> = sums
        .into_iter()
        .map(|((comm, leaf, _, kind), (pages, row))| ResidentSite {
            kib: pages * crate::analysis::resident::PAGE_BYTES / 1024,
            kind: kind.name(),
            comm: comm.to_string(),
            function: leaf.map_or_else(
                || "[unknown]".to_string(),
                |id| interned.leaves[id as usize].function.clone(),
            ),
            target: (*row.target).clone(),
        })
        .collect();
    sites.sort_by(|a, b| {
        (b.kib.cmp(&a.kib))
            .then_with(|| a.function.cmp(&b.function))
            .then_with(|| a.target.object.cmp(&b.target.object))
            .then_with(|| a.target.symbol.cmp(&b.target.symbol))
            .then_with(|| a.comm.cmp(&b.comm))
    });
    sites.truncate(TOP_SITES);
    sites
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_sum_by_kind() {
        let row = |kind, pages| ResidentRow {
            owner: crate::analysis::Owner::Process(1),
            comm: Arc::from("a"),
            stack: 0,
            target: Arc::new(crate::model::report::TargetRow {
                object: "[anon]".into(),
                region: crate::model::report::Region::Anon,
                section: None,
                symbol: None,
            }),
            kind,
            pages,
        };
        let rows = [
            row(MemoryKind::Anon, 3),
            row(MemoryKind::Shmem, 2),
            row(MemoryKind::Anon, 1),
        ];
        assert_eq!(pages_by_kind(&rows), [4, 0, 2]);
    }
}
