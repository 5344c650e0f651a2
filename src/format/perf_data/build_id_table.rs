//! The `BUILD_ID` feature section: written from the recording's files,
//! read back into (path, build-id) pairs.

use super::*;

/// One file of the build-id table.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct BuildIdEntry {
    /// The kernel image rather than a user-space file.
    pub kernel: bool,
    /// The GNU build-id (at most [`BUILD_ID_SIZE_MAX`] bytes).
    pub build_id: Vec<u8>,
    /// The path as the mappings name it (`[kernel.kallsyms]` for the kernel).
    pub path: String,
}

/// A build-id table entry (perf's `perf_record_header_build_id`): a record
/// header, then, at these offsets from the entry's start, i32 pid, the
/// build-id in a field of [`BUILD_ID_SIZE_MAX`] bytes, u8 its length (valid
/// with [`MISC_BUILD_ID_SIZE`]; else the whole field), 3 reserved bytes, and
/// the NUL-padded path, up to the header's size.
pub(super) const ENTRY_PID: usize = 8;
pub(super) const ENTRY_ID: usize = ENTRY_PID + 4;
pub(super) const ENTRY_ID_LEN: usize = ENTRY_ID + BUILD_ID_SIZE_MAX;
pub(super) const ENTRY_PATH: usize = ENTRY_ID_LEN + 4;
/// perf's pid for the host machine (`HOST_KERNEL_ID`).
pub(super) const HOST: i32 = -1;

/// The `BUILD_ID` section: one entry per file, its path NUL-padded to 64
/// bytes. Ids longer than [`BUILD_ID_SIZE_MAX`] are left out (the entry
/// has no room for them), and paths longer than an entry can hold.
pub fn build_id_section(entries: &[BuildIdEntry]) -> Vec<u8> {
    let mut out = Vec::new();
    for e in entries {
        let id_len = e.build_id.len();
        if id_len == 0 || id_len > BUILD_ID_SIZE_MAX {
            continue;
        }
        let path_len = name_padded(e.path.len());
        let Ok(size) = u16::try_from(ENTRY_PATH + path_len) else {
            continue; // a path perf could not store either
        };
        let misc = MISC_BUILD_ID_SIZE | if e.kernel { MISC_KERNEL } else { MISC_USER };
        let mut entry = vec![0u8; ENTRY_PATH + path_len];
        // A record header whose type is unused here.
        let head = RecordHead {
            record_type: 0,
            misc,
            size: usize::from(size),
        };
        entry[..8].copy_from_slice(&head.encode());
        entry[ENTRY_PID..ENTRY_ID].copy_from_slice(&HOST.to_le_bytes());
        entry[ENTRY_ID..ENTRY_ID + id_len].copy_from_slice(&e.build_id);
        entry[ENTRY_ID_LEN] = id_len as u8;
        entry[ENTRY_PATH..ENTRY_PATH + e.path.len()].copy_from_slice(e.path.as_bytes());
        out.extend_from_slice(&entry);
    }
    out
}

/// The `BUILD_ID` feature's (path, build-id) pairs, entries laid out as
/// [`build_id_section`] writes them; entries without a path or an id are
/// skipped.
pub(crate) fn build_ids(
    bytes: &[u8],
    range: std::ops::Range<usize>,
) -> Result<Vec<PathBuildId>, LayoutError> {
    let mut f = Fields::new(bytes, range.start, range.len(), "BUILD_ID feature");
    let mut out = Vec::new();
    while f.left() > 0 {
        let start = f.at;
        let head = f.record_head()?;
        if head.size < ENTRY_PATH {
            return Err(f.error(format_args!("an entry of {} bytes", head.size)));
        }
        f.take(head.size - 8)?;
        let entry = f.since(start);
        let len = if head.misc & MISC_BUILD_ID_SIZE != 0 {
            usize::from(entry[ENTRY_ID_LEN]).min(BUILD_ID_SIZE_MAX)
        } else {
            BUILD_ID_SIZE_MAX
        };
        let path = entry[ENTRY_PATH..]
            .split(|&b| b == 0)
            .next()
            .unwrap_or_default();
        if len > 0 && !path.is_empty() {
            out.push((path.to_vec(), entry[ENTRY_ID..ENTRY_ID + len].to_vec()));
        }
    }
    Ok(out)
}
