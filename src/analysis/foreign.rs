//! What a report of perf's own recording (`perf record`, not `pfprof
//! record`) cannot say, as facts the report warns of: pfprof reads such a
//! file as it reads its own, but perf's options decide what is in it.

use crate::analysis::Profile;
use crate::format::decode::Sampling;

/// What a recording perf made cannot say (the outputs word it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PerfNote {
    /// `perf record -c N`: each sample counted as N faults.
    SampledPeriod(u64),
    /// `perf record -F HZ`: each sample counted as its period.
    SampledFrequency(u64),
    /// perf's `page-faults` event: minor and major not told apart.
    AnyFaultEvent,
    /// No fault-entry tracepoints: no COW, no access types.
    NoEntries,
    /// Entries sampled too: COW and access only where both ends were.
    EntriesSampled,
}

/// What a recording written by perf cannot say (nothing for pfprof's own).
pub fn notes(profile: &Profile) -> Vec<PerfNote> {
    if profile.meta.is_some() {
        return Vec::new();
    }
    let mut out = Vec::new();
    match profile.sampling {
        Some(Sampling::Period(n)) => out.push(PerfNote::SampledPeriod(n)),
        Some(Sampling::Frequency(hz)) => out.push(PerfNote::SampledFrequency(hz)),
        None => {}
    }
    if profile.any_fault_event {
        out.push(PerfNote::AnyFaultEvent);
    }
    if !profile.has_entries {
        out.push(PerfNote::NoEntries);
    } else if profile.sampling.is_some() {
        out.push(PerfNote::EntriesSampled);
    }
    out
}

/// The recorded kernel is not the running one: its frames cannot be named
/// from this machine's `/proc/kallsyms`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelMismatch {
    /// The recorded kernel's build-id.
    pub recorded: Vec<u8>,
    /// The running kernel's, when it can be read.
    pub running: Option<Vec<u8>>,
}

/// Whether the recording's kernel frames cannot be named here: the
/// recorded kernel's build-id is not the running kernel's. None when they
/// match or the recording does not say.
pub fn kernel_mismatch(profile: &Profile) -> Option<KernelMismatch> {
    let recorded = profile.kernel_build_id.as_deref()?;
    let notes = std::fs::read("/sys/kernel/notes").ok();
    let running = notes.as_deref().and_then(gnu_build_id);
    if running.as_deref() == Some(recorded) {
        return None;
    }
    Some(KernelMismatch {
        recorded: recorded.to_vec(),
        running,
    })
}

/// The NT_GNU_BUILD_ID of a sequence of ELF notes (`/sys/kernel/notes`):
/// u32 name size, u32 descriptor size, u32 type, then the name and the
/// descriptor, each padded to 4 bytes.
fn gnu_build_id(notes: &[u8]) -> Option<Vec<u8>> {
    const NT_GNU_BUILD_ID: u32 = 3;
    let u32_at = |at: usize| {
        Some(u32::from_le_bytes(
            notes.get(at..at.checked_add(4)?)?.try_into().ok()?,
        ))
    };
    let mut at = 0usize;
    while at + 12 <= notes.len() {
        let name_size = u32_at(at)? as usize;
        let desc_size = u32_at(at + 4)? as usize;
        let kind = u32_at(at + 8)?;
        let name_at = at + 12;
        let desc_at = name_at.checked_add(name_size.next_multiple_of(4))?;
        let end = desc_at.checked_add(desc_size.next_multiple_of(4))?;
        let name = notes.get(name_at..name_at + name_size)?;
        if kind == NT_GNU_BUILD_ID && name == b"GNU\0" {
            return notes.get(desc_at..desc_at + desc_size).map(<[u8]>::to_vec);
        }
        at = end;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A note list: a non-GNU note first, then the build-id; cut lists and
    /// lying sizes give None.
    #[test]
    fn kernel_notes() {
        let note = |name: &[u8], kind: u32, desc: &[u8]| {
            let mut out = Vec::new();
            out.extend_from_slice(&(name.len() as u32).to_le_bytes());
            out.extend_from_slice(&(desc.len() as u32).to_le_bytes());
            out.extend_from_slice(&kind.to_le_bytes());
            out.extend_from_slice(name);
            out.resize(out.len().next_multiple_of(4), 0);
            out.extend_from_slice(desc);
            out.resize(out.len().next_multiple_of(4), 0);
            out
        };
        let id = [0x4a, 0x5a, 0x9b, 0x0a, 0xff];
        let both = [note(b"Linux\0", 6, &[1, 2, 3]), note(b"GNU\0", 3, &id)].concat();
        let mut lying = note(b"GNU\0", 3, &id);
        lying[4..8].copy_from_slice(&1000u32.to_le_bytes());
        let cases: [(&[u8], Option<Vec<u8>>); 5] = [
            (&both, Some(id.to_vec())),
            (&both[..both.len() - 4], None),
            (&lying, None),
            (&[], None),
            (&note(b"GNU\0", 1, &id), None),
        ];
        for (notes, want) in cases {
            assert_eq!(gnu_build_id(notes), want, "{notes:?}");
        }
    }
}
