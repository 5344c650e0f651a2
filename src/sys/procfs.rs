//! Paths and small reads of `/proc`: a mapping's file as the process sees
//! it, a process's root, the host's name and kernel release, free memory.

use std::path::{Path, PathBuf};

/// The file mapped at `[start, end)` in `pid`, through
/// `/proc/PID/map_files`: the file the process runs, in its own mount
/// namespace, even deleted or replaced since.
pub fn map_file(pid: impl std::fmt::Display, start: u64, end: u64) -> PathBuf {
    PathBuf::from(format!("/proc/{pid}/map_files/{start:x}-{end:x}"))
}

/// `path` (absolute) as process `pid` sees it, through its root
/// (`/proc/PID/root`): its container's file, not the host's.
pub fn in_root_of(pid: impl std::fmt::Display, path: &Path) -> PathBuf {
    let relative = path.strip_prefix("/").unwrap_or(path);
    Path::new(&format!("/proc/{pid}/root")).join(relative)
}

/// `MemAvailable` of /proc/meminfo, in bytes.
pub fn mem_available_bytes() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// The host's name ("" when unreadable).
pub fn hostname() -> String {
    kernel_string("hostname")
}

/// The kernel's release ("" when unreadable).
pub fn os_release() -> String {
    kernel_string("osrelease")
}

fn kernel_string(name: &str) -> String {
    std::fs::read_to_string(format!("/proc/sys/kernel/{name}"))
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// The running kernel's GNU build-id, from its notes
/// (`/sys/kernel/notes`); None when unreadable or absent.
pub fn kernel_build_id() -> Option<Vec<u8>> {
    pfprof_symbolize::gnu_build_id_in_notes(&std::fs::read("/sys/kernel/notes").ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths() {
        assert_eq!(
            map_file(42, 0x7f00_0000_1000, 0x7f00_0000_3000),
            Path::new("/proc/42/map_files/7f0000001000-7f0000003000")
        );
        assert_eq!(
            in_root_of(7, Path::new("/usr/lib/libc.so.6")),
            Path::new("/proc/7/root/usr/lib/libc.so.6")
        );
        assert!(mem_available_bytes().is_some_and(|b| b > 0));
        assert!(!os_release().is_empty());
    }

    /// The running kernel has a build-id (SHA-1, as kbuild links it with
    /// `--build-id=sha1`), when its notes are readable at all.
    #[test]
    fn running_kernel_build_id() {
        if std::fs::metadata("/sys/kernel/notes").is_ok() {
            assert_eq!(kernel_build_id().map(|id| id.len()), Some(20));
        }
    }
}
