//! Paths and small reads of `/proc` and `/sys`: the processes that run and
//! what they map, where a mapped file can be read (its own mount namespace,
//! even deleted), pfprof's own CPU time and descriptors, kernel settings,
//! the online CPUs, tracefs and its tracepoints. Every stage asks here
//! instead of formatting `/proc` paths itself.

use std::ops::Range;
use std::os::fd::RawFd;
use std::path::{Path, PathBuf};

use super::maps::{self, MapsLine};

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

/// An open descriptor of pfprof's as a path (`/proc/self/fd/N`): opening it
/// opens the same file anew, with its own offset.
pub fn fd_path(fd: RawFd) -> PathBuf {
    PathBuf::from(format!("/proc/self/fd/{fd}"))
}

/// Where the file `path`, mapped at `avma` in `pid`, can be read, best
/// first: `/proc/PID/map_files/START-END` (the mapped inode itself, while
/// the mapping lives), the path under the process's root when it differs
/// from pfprof's, and the path itself. With `Reach::MappedInode` the first
/// is the mapped file itself; the others are only the same path.
pub fn mapped_file_candidates(pid: i32, path: &Path, avma: &Range<u64>) -> Vec<(PathBuf, Reach)> {
    let mut out = Vec::new();
    if pid > 0 {
        // The entry is named by the VMA's range: the mapping's own, unless
        // the kernel merged it with a neighbour (then /proc/PID/maps says).
        // Reading the whole maps file for every mapping cost chromium's
        // recording a tenth of its drain time and stalled its first passes.
        let direct = map_file(pid, avma.start, avma.end);
        if std::fs::symlink_metadata(&direct).is_ok() {
            out.push((direct, Reach::MappedInode));
        } else if let Some(m) = maps_of(pid)
            .into_iter()
            .find(|m| m.start_avma <= avma.start && avma.start < m.end_avma && m.inode != 0)
        {
            out.push((map_file(pid, m.start_avma, m.end_avma), Reach::MappedInode));
        }
        if other_root(pid) {
            out.push((in_root_of(pid, path), Reach::Path));
        }
    }
    out.push((path.to_path_buf(), Reach::Path));
    out
}

/// How a candidate of [`mapped_file_candidates`] reaches the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// Through `map_files`: the inode the process maps, whatever its path
    /// holds now.
    MappedInode,
    /// By path: whatever the path holds now (perhaps another file).
    Path,
}

/// Whether `pid` may see other files than pfprof under the same path: its
/// root directory (chroot) or its mount namespace differs (a container; a
/// bind mount in `unshare -m` keeps the root directory but not the files).
pub fn other_root(pid: i32) -> bool {
    use std::os::unix::fs::MetadataExt;
    let id = |p: &str| std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino()));
    let ns = |p: &str| std::fs::read_link(p).ok();
    let roots = (id(&format!("/proc/{pid}/root")), id("/proc/self/root"));
    let namespaces = (ns(&format!("/proc/{pid}/ns/mnt")), ns("/proc/self/ns/mnt"));
    matches!(roots, (Some(a), Some(b)) if a != b)
        || matches!(namespaces, (Some(a), Some(b)) if a != b)
}

/// The mappings of `pid` (none when it is gone or unreadable).
pub fn maps_of(pid: i32) -> Vec<MapsLine> {
    maps::parse(&std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default())
}

/// A process as `/proc` shows it.
#[derive(Debug, Clone)]
pub struct Process {
    /// Its pid.
    pub pid: i32,
    /// Its parent's pid.
    pub ppid: i32,
    /// Its name (`comm`).
    pub comm: String,
    /// Its threads, sorted.
    pub tids: Vec<i32>,
    /// Its mappings.
    pub maps: Vec<MapsLine>,
}

/// Process `pid`, or None when it is gone (or not readable).
pub fn process(pid: i32) -> Option<Process> {
    let dir = PathBuf::from(format!("/proc/{pid}"));
    let stat = std::fs::read_to_string(dir.join("stat")).ok()?;
    let ppid = stat_fields(&stat)?.get(1)?.parse().ok()?;
    let comm = std::fs::read_to_string(dir.join("comm"))
        .ok()?
        .trim_end()
        .to_string();
    let mut tids: Vec<i32> = std::fs::read_dir(dir.join("task"))
        .ok()?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    tids.sort_unstable();
    Some(Process {
        pid,
        ppid,
        comm,
        tids,
        maps: maps_of(pid),
    })
}

/// The fields of a `stat` line after the command name: "pid (comm) state
/// ppid ..." gives [state, ppid, ...]. The name may hold spaces and
/// parentheses, so the line is cut at its last `)`.
fn stat_fields(stat: &str) -> Option<Vec<&str>> {
    Some(stat.rsplit_once(')')?.1.split_whitespace().collect())
}

/// Every process's pid, sorted.
pub fn pids() -> Vec<i32> {
    let mut pids: Vec<i32> = std::fs::read_dir("/proc")
        .map(|dir| {
            dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    pids.sort_unstable();
    pids
}

/// Whether process `pid` exists (a zombie still does).
pub fn alive(pid: i32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// pfprof's own CPU time so far (user, system), from /proc/self/stat
/// (children not included).
pub fn own_cpu_seconds() -> Option<(f64, f64)> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let fields = stat_fields(&stat)?;
    // utime and stime are the 14th and 15th fields of the line, in clock
    // ticks (USER_HZ = 100).
    let ticks = |i: usize| fields.get(i)?.parse::<f64>().ok();
    Some((ticks(11)? / 100.0, ticks(12)? / 100.0))
}

/// How many file descriptors pfprof holds open (None when /proc is not
/// readable). Listing holds one more, counted here.
pub fn open_fds() -> Option<u64> {
    Some(std::fs::read_dir("/proc/self/fd").ok()?.count() as u64)
}

/// `MemAvailable` of /proc/meminfo, in bytes.
pub fn mem_available_bytes() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// A kernel setting, `/proc/sys/kernel/NAME` (`perf_event_paranoid`,
/// `perf_event_mlock_kb`, ...), trimmed; None when unreadable.
pub fn kernel_setting(name: &str) -> Option<String> {
    std::fs::read_to_string(format!("/proc/sys/kernel/{name}"))
        .ok()
        .map(|s| s.trim().to_string())
}

/// The host's name ("" when unreadable).
pub fn hostname() -> String {
    kernel_setting("hostname").unwrap_or_default()
}

/// The kernel's release ("" when unreadable).
pub fn os_release() -> String {
    kernel_setting("osrelease").unwrap_or_default()
}

/// Whether the running kernel's release is `major.minor` or later (false
/// when it does not parse).
pub fn kernel_at_least(major: u32, minor: u32) -> bool {
    release_at_least(&os_release(), (major, minor))
}

fn release_at_least(release: &str, want: (u32, u32)) -> bool {
    let mut parts = release
        .split(|c: char| !c.is_ascii_digit())
        .map(|p| p.parse::<u32>().ok());
    match (parts.next().flatten(), parts.next().flatten()) {
        (Some(major), Some(minor)) => (major, minor) >= want,
        _ => false,
    }
}

/// Whether an anonymous fault may make more than one page resident
/// without its process asking (`madvise(MADV_HUGEPAGE)`): transparent huge
/// pages on for all anonymous memory (`/sys/kernel/mm/transparent_hugepage/
/// enabled` says `[always]`: 512 pages at once), or one of the sizes of
/// multi-size THP (`hugepages-64kB/enabled` and the like: `[always]`, or
/// `[inherit]` where the first says `[always]`; 16 pages at once for
/// 64 KiB).
pub fn anon_folios_unasked() -> bool {
    let dir = Path::new("/sys/kernel/mm/transparent_hugepage");
    let read = |path: &Path| std::fs::read_to_string(path).unwrap_or_default();
    let top = read(&dir.join("enabled"));
    let sizes: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|entry| {
            entry
                .file_name()
                .to_string_lossy()
                .starts_with("hugepages-")
        })
        .map(|entry| read(&entry.path().join("enabled")))
        .collect();
    thp_modes_unasked(&top, sizes.iter().map(String::as_str))
}

/// Whether the THP `enabled` files' texts (the first's, then each size's)
/// map large anonymous folios without `madvise`.
fn thp_modes_unasked<'a>(top: &str, sizes: impl IntoIterator<Item = &'a str>) -> bool {
    let selected = |text: &str, mode: &str| text.split_whitespace().any(|m| m == mode);
    let top_always = selected(top, "[always]");
    top_always
        || sizes
            .into_iter()
            .any(|size| selected(size, "[always]") || (top_always && selected(size, "[inherit]")))
}

/// The kernel's symbol table (`/proc/kallsyms`), None when unreadable.
pub fn kallsyms() -> Option<String> {
    std::fs::read_to_string("/proc/kallsyms").ok()
}

/// The first whole lines of `/proc/kallsyms`, at most `limit` bytes: the
/// kernel formats only the lines read.
pub fn kallsyms_head(limit: usize) -> Option<String> {
    use std::io::Read;
    let mut bytes = Vec::with_capacity(limit);
    std::fs::File::open("/proc/kallsyms")
        .ok()?
        .take(limit as u64)
        .read_to_end(&mut bytes)
        .ok()?;
    let whole = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    bytes.truncate(whole);
    String::from_utf8(bytes).ok()
}

/// The lowest address of a loaded module's core (`/proc/modules`' last
/// column; zeros when kptr_restrict hides them, then None).
pub fn lowest_module_address() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/modules").ok()?;
    lowest_module_in(&text)
}

fn lowest_module_in(text: &str) -> Option<u64> {
    text.lines()
        .filter_map(|line| line.split_ascii_whitespace().nth(5))
        .filter_map(|a| u64::from_str_radix(a.trim_start_matches("0x"), 16).ok())
        .filter(|&a| a != 0)
        .min()
}

/// Online CPUs, from `/sys/devices/system/cpu/online` ("0-3,5"); when that
/// cannot be read, as many as the CPUs available from 0.
pub fn online_cpus() -> Vec<i32> {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap_or_default();
    let cpus = parse_cpu_list(text.trim());
    if cpus.is_empty() {
        (0..std::thread::available_parallelism().map_or(1, |n| n.get() as i32)).collect()
    } else {
        cpus
    }
}

/// How many CPU ids the kernel may use (the highest possible CPU, from
/// `/sys/devices/system/cpu/possible`, plus one): the size of per-CPU
/// tables. None when unreadable.
pub fn possible_cpu_ids() -> Option<u32> {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/possible").ok()?;
    let highest = parse_cpu_list(text.trim()).into_iter().max()?;
    u32::try_from(highest).ok()?.checked_add(1)
}

/// A kernel CPU list ("0-3,5"); parts that do not parse are left out.
fn parse_cpu_list(text: &str) -> Vec<i32> {
    let mut cpus = Vec::new();
    for part in text.split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.parse::<i32>(), b.parse::<i32>()) {
                    cpus.extend(a..=b);
                }
            }
            None => cpus.extend(part.parse::<i32>().ok()),
        }
    }
    cpus
}

/// The perf type number of a dynamic PMU (`uprobe`, `kprobe`...), from
/// `/sys/bus/event_source/devices/NAME/type`; None without it.
pub fn pmu_type(name: &str) -> Option<u32> {
    let path = format!("/sys/bus/event_source/devices/{name}/type");
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// Where tracefs is mounted (or its older place under debugfs), mounting it
/// at `/sys/kernel/tracing` if it is nowhere; the error says why not.
pub fn find_or_mount_tracefs() -> Result<PathBuf, String> {
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    if let Some(found) = tracefs_in_mounts(&mounts, |dir| dir.join("tracing/events").is_dir()) {
        return Ok(found);
    }
    let target = Path::new("/sys/kernel/tracing");
    super::mount_tracefs(c"/sys/kernel/tracing")
        .map(|()| target.to_path_buf())
        .map_err(|e| {
            format!(
                "tracefs is not mounted and mounting it at {} failed: {e}",
                target.display()
            )
        })
}

/// tracefs in a `/proc/mounts` text: a tracefs mount, or `tracing` in a
/// debugfs mount that has its events (`has_events`).
fn tracefs_in_mounts(mounts: &str, has_events: impl Fn(&Path) -> bool) -> Option<PathBuf> {
    mounts.lines().find_map(|line| {
        let mut fields = line.split_whitespace();
        let (_, dir, fstype) = (fields.next(), fields.next()?, fields.next()?);
        match fstype {
            "tracefs" => Some(PathBuf::from(dir)),
            "debugfs" if has_events(Path::new(dir)) => Some(Path::new(dir).join("tracing")),
            _ => None,
        }
    })
}

/// The id of tracepoint `name` ("exceptions/page_fault_user") under
/// `tracefs`; the error says which file could not be read.
pub fn tracepoint_id(tracefs: &Path, name: &str) -> Result<u64, String> {
    let path = tracefs.join("events").join(name).join("id");
    std::fs::read_to_string(&path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?
        .trim()
        .parse()
        .map_err(|e| format!("bad tracepoint id in {}: {e}", path.display()))
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
    fn releases_compared() {
        assert!(release_at_least("6.18.0-1-amd64", (6, 0)));
        assert!(release_at_least("6.0.0", (6, 0)));
        assert!(!release_at_least("5.19.17-cloud", (6, 0)));
        assert!(release_at_least("10.1", (6, 0)));
        assert!(!release_at_least("", (6, 0)));
        assert!(!release_at_least("6", (6, 0)));
    }

    #[test]
    fn lowest_module_of_the_modules_file() {
        let text = "ext4 1011712 2 - Live 0xffffffffc0a00000\n\
                    crc16 12288 1 ext4, Live 0xffffffffc0400000 (E)\n\
                    hidden 4096 0 - Live 0x0000000000000000\n\
                    short line\n";
        assert_eq!(lowest_module_in(text), Some(0xffffffffc0400000));
        assert_eq!(
            lowest_module_in("hidden 4096 0 - Live 0x0000000000000000\n"),
            None
        );
        assert_eq!(lowest_module_in(""), None);
    }

    /// The THP mode in brackets is the one in force; a size's `inherit`
    /// is the first file's.
    #[test]
    fn huge_pages_mode() {
        let never = "always inherit madvise [never]\n";
        let inherit = "always [inherit] madvise never\n";
        let always = "[always] inherit madvise never\n";
        assert!(thp_modes_unasked("[always] madvise never\n", []));
        assert!(!thp_modes_unasked(
            "always [madvise] never\n",
            [never, inherit]
        ));
        assert!(!thp_modes_unasked("always madvise [never]\n", [inherit]));
        assert!(!thp_modes_unasked("", []));
        // This machine's default but one size: 64 KiB folios on a fault.
        assert!(thp_modes_unasked(
            "always [madvise] never\n",
            [never, always]
        ));
        assert!(thp_modes_unasked(
            "[always] madvise never\n",
            [never, inherit]
        ));
    }

    /// The /proc paths are spelled as the kernel names them.
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
        assert_eq!(fd_path(5), Path::new("/proc/self/fd/5"));
    }

    /// pfprof's own process reads back: itself, its threads, its maps, its
    /// descriptors and CPU time; the kernel settings it needs are there.
    #[test]
    fn own_process() {
        let me = std::process::id() as i32;
        let p = process(me).unwrap();
        assert_eq!(p.pid, me);
        assert!(p.tids.contains(&me) && p.tids.windows(2).all(|w| w[0] < w[1]));
        assert!(p.ppid > 0 && !p.comm.is_empty() && !p.maps.is_empty());
        assert!(alive(me) && pids().contains(&me));
        assert!(!alive(i32::MAX));
        assert!(process(i32::MAX).is_none());
        assert!(open_fds().unwrap() >= 3);
        assert!(own_cpu_seconds().is_some());
        assert!(mem_available_bytes().is_some_and(|b| b > 0));
        assert!(!os_release().is_empty());
        assert!(kernel_setting("perf_event_paranoid").is_some());
        assert!(kernel_setting("no_such_setting").is_none());
        assert!(!online_cpus().is_empty());
        assert!(possible_cpu_ids().unwrap() as usize >= online_cpus().len());
        assert!(pmu_type("no such pmu").is_none());
    }

    /// The stat line is cut at the last parenthesis: a name with spaces and
    /// parentheses does not shift the fields.
    #[test]
    fn stat_with_a_hostile_name() {
        let fields = stat_fields("42 (a) b (c) d) S 7 42 42 0").unwrap();
        assert_eq!(&fields[..2], ["S", "7"]);
        assert!(stat_fields("no parenthesis").is_none());
    }

    /// CPU lists as the kernel writes them; garbage is left out.
    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0-3,5"), [0, 1, 2, 3, 5]);
        assert_eq!(parse_cpu_list("0"), [0]);
        assert_eq!(parse_cpu_list(""), Vec::<i32>::new());
        assert_eq!(parse_cpu_list("x,2-y,4"), [4]);
    }

    /// tracefs is found where it is mounted, or under a debugfs that has
    /// its events; a debugfs without them is not it.
    #[test]
    fn tracefs_mounts() {
        let mounts = "proc /proc proc rw 0 0\nnodev /sys/kernel/tracing tracefs rw 0 0\n";
        assert_eq!(
            tracefs_in_mounts(mounts, |_| false),
            Some(PathBuf::from("/sys/kernel/tracing"))
        );
        let debugfs = "debugfs /sys/kernel/debug debugfs rw 0 0\n";
        assert_eq!(
            tracefs_in_mounts(debugfs, |_| true),
            Some(PathBuf::from("/sys/kernel/debug/tracing"))
        );
        assert_eq!(tracefs_in_mounts(debugfs, |_| false), None);
        assert_eq!(tracefs_in_mounts("short\n", |_| true), None);
    }

    /// A mapping of pfprof's own is reached through map_files first, then
    /// by its path; a pid of 0 (unknown) only by path.
    #[test]
    fn candidates_of_a_mapping() {
        let me = std::process::id() as i32;
        let exe = maps_of(me)
            .into_iter()
            .find(|m| m.inode != 0 && m.path.starts_with('/'))
            .unwrap();
        let path = Path::new(&exe.path);
        let found = mapped_file_candidates(me, path, &(exe.start_avma..exe.end_avma));
        assert_eq!(found[0].1, Reach::MappedInode);
        assert_eq!(found.last().unwrap(), &(path.to_path_buf(), Reach::Path));
        assert!(!other_root(me));
        assert_eq!(
            mapped_file_candidates(0, path, &(1..2)),
            [(path.to_path_buf(), Reach::Path)]
        );
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
