//! The only place where pfprof talks to the kernel through raw system calls:
//! `perf_event_open` and its ioctls, counter reads, the paused fork/exec of the
//! profiled command (as the sudo user, tied to pfprof's life, with the signal
//! state pfprof was given), `waitpid`, signal flags, resource limits and the
//! tracefs mount.
//!
//! Every `unsafe` block of the binary lives here or in `ring.rs`, each with a
//! `// SAFETY:` comment. Callers get safe functions returning `io::Result`.

pub mod bpf;
pub mod maps;
pub mod procfs;
pub mod vdso;

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicI32, AtomicU32, Ordering};

pub use perf_event_open_sys::bindings::perf_event_attr as PerfEventAttr;
use perf_event_open_sys::bindings::PERF_FLAG_FD_CLOEXEC;

/// A system call's result: its value, or the errno it left when it
/// returned a negative value (-1, as libc's wrappers do on failure).
fn check<T: Default + PartialOrd>(r: T) -> io::Result<T> {
    if r < T::default() {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// Opens one perf event for `pid` on `cpu` (`pid` -1 = all tasks on `cpu`).
pub fn perf_event_open(attr: &PerfEventAttr, pid: i32, cpu: i32) -> io::Result<OwnedFd> {
    let mut attr = *attr;
    // SAFETY: `attr` is a valid, initialised perf_event_attr whose `size`
    // field matches the struct we pass; the kernel only reads it (and may
    // write back `size` on E2BIG, which our local copy absorbs).
    let fd = unsafe {
        perf_event_open_sys::perf_event_open(&mut attr, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC as _)
    };
    let fd = check(fd)?;
    // SAFETY: the kernel just returned this fd to us and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The kernel's id of an event, as it appears in `PERF_SAMPLE_IDENTIFIER`.
pub fn event_id(fd: &OwnedFd) -> io::Result<u64> {
    let mut id = 0u64;
    // SAFETY: PERF_EVENT_IOC_ID writes one u64 through the pointer, which
    // points at a live local.
    check(unsafe { perf_event_open_sys::ioctls::ID(fd.as_raw_fd(), &mut id) })?;
    Ok(id)
}

/// Sends the records of `fd` into the ring buffer of `target` (same CPU).
pub fn set_output(fd: &OwnedFd, target: &OwnedFd) -> io::Result<()> {
    // SAFETY: plain ioctl on two fds we own; no memory is passed.
    let r = unsafe { perf_event_open_sys::ioctls::SET_OUTPUT(fd.as_raw_fd(), target.as_raw_fd()) };
    check(r).map(drop)
}

/// Keeps only the samples of tracepoint event `fd` that match `filter`
/// (ftrace's filter syntax on the tracepoint's fields).
pub fn set_filter(fd: &OwnedFd, filter: &std::ffi::CStr) -> io::Result<()> {
    // SAFETY: the kernel reads the NUL-terminated string during the call
    // and keeps a copy; `filter` outlives it.
    let r = unsafe {
        perf_event_open_sys::ioctls::SET_FILTER(fd.as_raw_fd(), filter.as_ptr().cast_mut())
    };
    check(r).map(drop)
}

/// Starts an event that was opened disabled.
pub fn enable(fd: &OwnedFd) -> io::Result<()> {
    // SAFETY: plain ioctl on an fd we own; no memory is passed.
    let r = unsafe { perf_event_open_sys::ioctls::ENABLE(fd.as_raw_fd(), 0) };
    check(r).map(drop)
}

/// The effective user id of pfprof.
pub fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// The machine's page size.
pub fn page_size() -> u32 {
    // SAFETY: sysconf only reads a configuration value.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u32::try_from(size).unwrap_or(4096)
}

/// Gives the memory the allocator holds but no longer uses back to the
/// system (glibc keeps what a burst freed, in every thread's arena): a
/// long run's resident memory then follows what it keeps, not its peaks.
pub fn give_back_freed_memory() {
    // SAFETY: malloc_trim only walks the allocator's own free lists; it
    // takes the allocator's locks and touches no memory of ours.
    unsafe { libc::malloc_trim(0) };
}

/// Large blocks (1 MiB and up: the hash tables, symbol tables and stack
/// tables of an interval's end) get mappings of their own, which go back
/// to the system when freed. By default glibc raises that threshold to the
/// largest mapped block freed (up to 32 MiB); from then on such blocks come
/// from the arenas, where the pages one phase freed stay resident beside
/// what the next phase maps: a Rust build's `--interval 60` peaked at
/// 340 MB of RSS so, 297 MB with the threshold fixed (docs/performance.md).
pub fn map_large_blocks_apart() {
    // SAFETY: mallopt sets one of the allocator's parameters under its
    // lock; it reads or writes no memory of ours.
    unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20) };
}

/// The allocator's figures, in bytes: in use, in free chunks, and in
/// mappings of their own.
#[derive(Debug, Clone, Copy)]
pub struct HeapFigures {
    /// Bytes handed out and not freed.
    pub in_use: usize,
    /// Bytes of the arenas' free chunks, whose pages a trim may already
    /// have given back: not resident memory.
    pub held_free: usize,
    /// Bytes of blocks mapped on their own (large ones).
    pub mapped: usize,
}

/// What the allocator holds now (`PFPROF_TIMING`'s figures).
pub fn heap_figures() -> HeapFigures {
    // SAFETY: mallinfo2 only reads the allocator's counters under its
    // locks and returns a plain struct by value.
    let m = unsafe { libc::mallinfo2() };
    HeapFigures {
        in_use: m.uordblks,
        held_free: m.fordblks,
        mapped: m.hblkhd,
    }
}

/// What the calling thread has used so far (`PFPROF_TIMING`'s account of
/// a long drain pass: on the CPU, in page faults, or off it).
#[derive(Debug, Clone, Copy, Default)]
pub struct ThreadUsage {
    /// User CPU time, in microseconds.
    pub user_us: u64,
    /// System CPU time, in microseconds.
    pub sys_us: u64,
    /// Page faults that needed no I/O.
    pub minor_faults: u64,
    /// Page faults that waited for I/O.
    pub major_faults: u64,
    /// Times the thread gave up the CPU to wait (a lock, I/O, memory).
    pub waits: u64,
    /// Times the scheduler took the CPU from it.
    pub preempted: u64,
}

/// The calling thread's usage (`RUSAGE_THREAD`).
pub fn thread_usage() -> ThreadUsage {
    // SAFETY: an all-zero rusage is a valid value of the plain C struct.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes one rusage into a live local.
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut u) };
    let us = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    ThreadUsage {
        user_us: us(u.ru_utime),
        sys_us: us(u.ru_stime),
        minor_faults: u.ru_minflt as u64,
        major_faults: u.ru_majflt as u64,
        waits: u.ru_nvcsw as u64,
        preempted: u.ru_nivcsw as u64,
    }
}

/// Has the kernel drop `file`'s clean pages from the page cache (tests
/// that need a file not cached).
#[cfg(test)]
pub fn forget_cached(file: &std::fs::File) -> io::Result<()> {
    // SAFETY: advice on an fd we own; no memory is passed.
    let r = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(r))
    }
}

/// CLOCK_MONOTONIC in ns: the clock of the recorded events (`use_clockid`).
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into a live local.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Stops an event from counting (used before the final drain of a recording).
pub fn disable(fd: &OwnedFd) -> io::Result<()> {
    // SAFETY: plain ioctl on an fd we own; no memory is passed.
    let r = unsafe { perf_event_open_sys::ioctls::DISABLE(fd.as_raw_fd(), 0) };
    check(r).map(drop)
}

/// Reads the event's counter: every event the kernel counted, sampled or not,
/// including those of exited inherited children.
pub fn read_counter(fd: &OwnedFd) -> io::Result<u64> {
    read_values(fd).map(|(value, _)| value)
}

/// The records the event could not write to its ring (full), when it was
/// opened with `PERF_FORMAT_LOST` (kernels from 6.0); None otherwise.
pub fn read_lost(fd: &OwnedFd) -> io::Result<Option<u64>> {
    read_values(fd).map(|(_, lost)| lost)
}

/// The event's value and, with `PERF_FORMAT_LOST`, its lost count: the
/// kernel writes as many words as the read format asks for.
fn read_values(fd: &OwnedFd) -> io::Result<(u64, Option<u64>)> {
    let mut values = [0u64; 2];
    // SAFETY: reads at most 16 bytes into a live [u64; 2].
    let n = unsafe { libc::read(fd.as_raw_fd(), values.as_mut_ptr().cast(), 16) };
    match n {
        16 => Ok((values[0], Some(values[1]))),
        8 => Ok((values[0], None)),
        n if n < 0 => Err(io::Error::last_os_error()),
        _ => Err(io::ErrorKind::UnexpectedEof.into()),
    }
}

/// What a wait on a terminal found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TerminalInput {
    /// This many bytes were read.
    Read(usize),
    /// Nothing arrived in time (or a signal came first).
    Nothing,
    /// The terminal is gone (its emulator closed, `ssh` dropped): reads
    /// give end of file from now on, whether SIGHUP came or was ignored.
    HungUp,
}

/// Waits up to `timeout_ms` for input on the terminal `fd` and reads what
/// is there into `buf`.
pub fn read_terminal(fd: RawFd, buf: &mut [u8], timeout_ms: i32) -> io::Result<TerminalInput> {
    let mut pollfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: `pollfd` is one live, initialised entry.
    let r = unsafe { libc::poll(&mut pollfd, 1, timeout_ms) };
    if r < 0 {
        let e = io::Error::last_os_error();
        return match e.kind() {
            io::ErrorKind::Interrupted => Ok(TerminalInput::Nothing),
            _ => Err(e),
        };
    }
    if r == 0 {
        return Ok(TerminalInput::Nothing);
    }
    if pollfd.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0 {
        return Ok(TerminalInput::HungUp);
    }
    // SAFETY: reads at most `buf.len()` bytes into the live, exclusively
    // borrowed `buf`.
    let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
    match n {
        0 => Ok(TerminalInput::HungUp),
        n if n > 0 => Ok(TerminalInput::Read(n as usize)),
        _ => {
            let e = io::Error::last_os_error();
            match e.kind() {
                io::ErrorKind::Interrupted | io::ErrorKind::WouldBlock => {
                    Ok(TerminalInput::Nothing)
                }
                // A hung-up terminal's reads can also fail with EIO.
                _ if e.raw_os_error() == Some(libc::EIO) => Ok(TerminalInput::HungUp),
                _ => Err(e),
            }
        }
    }
}

/// Waits until one of `fds` is readable or `timeout_ms` passes; whether
/// they all hung up. EINTR is not an error.
pub fn poll_readable(fds: &[RawFd], timeout_ms: i32) -> io::Result<Polled> {
    let mut pollfds: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    // SAFETY: `pollfds` is a live array of `pollfds.len()` initialised entries.
    let r = unsafe {
        libc::poll(
            pollfds.as_mut_ptr(),
            pollfds.len() as libc::nfds_t,
            timeout_ms,
        )
    };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
        return Ok(Polled::Waited);
    }
    let hung_up = |p: &libc::pollfd| p.revents & libc::POLLHUP != 0;
    if r > 0 && !pollfds.is_empty() && pollfds.iter().all(hung_up) {
        Ok(Polled::HungUp)
    } else {
        Ok(Polled::Waited)
    }
}

/// How [`poll_readable`] returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Polled {
    /// Something was readable, or the time was up (or a signal came).
    Waited,
    /// Every fd hung up: a perf event's fd does once the task it was
    /// opened for exited, and polls readable at once from then on.
    HungUp,
}

/// A pid fd of process `pid` (Linux 5.3): it polls readable once the
/// process has exited.
pub fn pidfd_open(pid: i32) -> io::Result<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags, and returns a new fd or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    let fd = i32::try_from(fd).map_err(|_| io::Error::other("pidfd_open returned no fd"))?;
    // SAFETY: the kernel just returned this fd to us and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A forked child stopped before `execv`, waiting for [`PausedChild::release`].
pub struct PausedChild {
    /// The child's pid.
    pub pid: i32,
    go: Option<OwnedFd>,
    exec_error: OwnedFd,
}

/// How a child ended, from `waitpid`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitStatus {
    /// `exit(code)`.
    Exited(i32),
    /// Killed by this signal.
    Signaled(i32),
}

/// The user the command runs as (pfprof under `sudo`): computed before the
/// fork, applied by the child in the order setgroups, setgid, setuid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credentials {
    /// User id.
    pub uid: u32,
    /// Primary group id.
    pub gid: u32,
    /// Supplementary groups (the primary group included, as `initgroups` does).
    pub groups: Vec<libc::gid_t>,
}

impl Credentials {
    /// The credentials of user `uid`/`gid`, with the supplementary groups
    /// of `name` from the group database (`getgrouplist`, as `initgroups`
    /// does); without a name, the primary group alone.
    pub fn of_user(uid: u32, gid: u32, name: Option<&str>) -> Credentials {
        let groups = name
            .and_then(|name| CString::new(name).ok())
            .map_or_else(|| vec![gid], |name| group_list(&name, gid));
        Credentials { uid, gid, groups }
    }
}

fn group_list(name: &CStr, gid: u32) -> Vec<libc::gid_t> {
    let mut groups: Vec<libc::gid_t> = vec![0; 64];
    // NGROUPS_MAX is 65536: a list that keeps growing past it is not believed.
    while groups.len() <= 65536 {
        let mut count = groups.len() as libc::c_int;
        // SAFETY: `name` is NUL-terminated; `groups` has room for `count`
        // entries, and getgrouplist writes at most that many (it stores the
        // needed count in `count` and returns -1 when they do not fit).
        let r = unsafe { libc::getgrouplist(name.as_ptr(), gid, groups.as_mut_ptr(), &mut count) };
        let count = usize::try_from(count).unwrap_or(0);
        if r >= 0 {
            groups.truncate(count);
            return groups;
        }
        groups.resize(count.max(groups.len() * 2), 0);
    }
    vec![gid]
}

/// What the command inherits from pfprof's own start, as opposed to what
/// Rust's runtime and pfprof changed: captured by
/// [`catch_termination_signals`], restored by the child before `execv`.
#[derive(Clone, Copy)]
pub struct InheritedSignals {
    /// The signal mask pfprof was started with.
    mask: libc::sigset_t,
}

/// How the command is started besides its argv.
pub struct SpawnOptions<'a> {
    /// Switch to this user before exec (None: keep pfprof's, root under sudo
    /// with `--run-as-root`).
    pub credentials: Option<&'a Credentials>,
    /// Signal state to hand on.
    pub signals: &'a InheritedSignals,
}

/// The step of starting the command that failed, with its `errno`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpawnError {
    /// What the child was doing.
    pub step: SpawnStep,
    /// The errno it got.
    pub errno: i32,
}

/// Steps of the child between `fork` and `execv` that can fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i32)]
pub enum SpawnStep {
    /// `execv` itself.
    Exec = 0,
    /// `setgroups`.
    SetGroups = 1,
    /// `setgid`.
    SetGid = 2,
    /// `setuid`.
    SetUid = 3,
    /// `prctl(PR_SET_PDEATHSIG)`.
    ParentDeathSignal = 4,
}

impl SpawnStep {
    fn from_raw(raw: i32) -> SpawnStep {
        match raw {
            1 => SpawnStep::SetGroups,
            2 => SpawnStep::SetGid,
            3 => SpawnStep::SetUid,
            4 => SpawnStep::ParentDeathSignal,
            _ => SpawnStep::Exec,
        }
    }
}

fn pipe_cloexec() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: pipe2 writes two fds into the live 2-element array.
    check(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) })?;
    // SAFETY: both fds were just created by pipe2 and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Forks a child that blocks until released, then `execv(path, argv)`.
/// Everything the child needs is allocated before `fork`, because only
/// async-signal-safe calls are allowed between `fork` and `execv`.
///
/// Before `execv` the child takes `options.credentials` (setgroups, setgid,
/// setuid, each checked), asks for SIGKILL when pfprof dies (set after the
/// credential change, which would clear it), and restores the signal state
/// pfprof was given: SIGPIPE back to default (Rust ignores it before `main`
/// and cannot tell what it was; `std::process::Command` does the same) and
/// the original mask. Termination signals that pfprof was started with
/// ignored were left ignored (see [`catch_termination_signals`]) and stay so
/// through `execv`.
pub fn spawn_paused(
    path: &CStr,
    argv: &[CString],
    options: &SpawnOptions,
) -> io::Result<PausedChild> {
    let mut argv_ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    argv_ptrs.push(std::ptr::null());
    let (go_read, go_write) = pipe_cloexec()?;
    let (err_read, err_write) = pipe_cloexec()?;
    let (go_write_raw, err_read_raw) = (go_write.as_raw_fd(), err_read.as_raw_fd());
    let credentials = options.credentials;
    let mask = options.signals.mask;
    // SAFETY: getpid has no preconditions.
    let parent = unsafe { libc::getpid() };
    // SAFETY: fork has no memory-safety preconditions; the child branch below
    // only calls async-signal-safe functions (read, setgroups, setgid,
    // setuid, prctl, getppid, sigaction, sigprocmask, execv, write, _exit)
    // on memory prepared before the fork.
    let pid = check(unsafe { libc::fork() })?;
    if pid == 0 {
        // SAFETY: child side of fork: async-signal-safe calls only, on fds and
        // buffers that were set up before the fork; never returns.
        unsafe {
            let fail = |step: SpawnStep, code: i32| -> ! {
                let report = [step as i32, *libc::__errno_location()];
                libc::write(err_write.as_raw_fd(), report.as_ptr().cast(), 8);
                libc::_exit(code)
            };
            // The parent's ends: closed here so that EOF means the parent is gone.
            libc::close(go_write_raw);
            libc::close(err_read_raw);
            let mut byte = 0u8;
            // Blocks until the parent has attached the perf events (or died:
            // then read returns 0 and we must not run the command untraced).
            if libc::read(go_read.as_raw_fd(), (&mut byte as *mut u8).cast(), 1) != 1 {
                libc::_exit(127);
            }
            if let Some(c) = credentials {
                // Groups first: once the uid is not root, neither can change.
                if libc::setgroups(c.groups.len(), c.groups.as_ptr()) != 0 {
                    fail(SpawnStep::SetGroups, 126);
                }
                if libc::setgid(c.gid) != 0 {
                    fail(SpawnStep::SetGid, 126);
                }
                if libc::setuid(c.uid) != 0 {
                    fail(SpawnStep::SetUid, 126);
                }
            }
            // After the credential change, which clears the parent-death
            // signal. It fires when the thread that forked exits: pfprof's
            // main thread, which lives as long as pfprof.
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) != 0 {
                fail(SpawnStep::ParentDeathSignal, 126);
            }
            // pfprof died before the prctl: we were reparented, and nobody
            // would trace the command.
            if libc::getppid() != parent {
                libc::_exit(127);
            }
            let mut dfl: libc::sigaction = std::mem::zeroed();
            dfl.sa_sigaction = libc::SIG_DFL;
            libc::sigaction(libc::SIGPIPE, &dfl, std::ptr::null_mut());
            libc::sigprocmask(libc::SIG_SETMASK, &mask, std::ptr::null_mut());
            libc::execv(path.as_ptr(), argv_ptrs.as_ptr());
            fail(SpawnStep::Exec, 127);
        }
    }
    drop(go_read);
    drop(err_write);
    Ok(PausedChild {
        pid,
        go: Some(go_write),
        exec_error: err_read,
    })
}

impl PausedChild {
    /// Lets the child `execv`. Returns the step that failed and its errno
    /// when the command could not be started.
    pub fn release(&mut self) -> Result<(), SpawnError> {
        if let Some(go) = self.go.take() {
            // SAFETY: writes one byte from a live local to a pipe we own.
            unsafe { libc::write(go.as_raw_fd(), b"g".as_ptr().cast(), 1) };
        }
        let mut report = [0i32; 2];
        // SAFETY: reads at most 8 bytes into a live [i32; 2]. The pipe is
        // close-on-exec, so a successful exec yields EOF (0 bytes); the
        // child writes its 8 bytes in one write (atomic on a pipe).
        let n = unsafe { libc::read(self.exec_error.as_raw_fd(), report.as_mut_ptr().cast(), 8) };
        if n == 8 {
            Err(SpawnError {
                step: SpawnStep::from_raw(report[0]),
                errno: report[1],
            })
        } else {
            Ok(())
        }
    }
}

/// A child that was never released (setup failed, on any path out of
/// `record`) ends here: closing the go pipe makes it `_exit(127)` without
/// running the command, and it is reaped, not left a zombie.
impl Drop for PausedChild {
    fn drop(&mut self) {
        if self.go.take().is_some() {
            let _ = wait(self.pid, false);
        }
    }
}

/// `waitpid(pid)`; with `nohang`, `Ok(None)` while the child runs.
pub fn wait(pid: i32, nohang: bool) -> io::Result<Option<ExitStatus>> {
    let mut status = 0;
    loop {
        // SAFETY: waitpid writes the status into a live local.
        let r = unsafe { libc::waitpid(pid, &mut status, if nohang { libc::WNOHANG } else { 0 }) };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if r == 0 {
            return Ok(None);
        }
        if libc::WIFEXITED(status) {
            return Ok(Some(ExitStatus::Exited(libc::WEXITSTATUS(status))));
        }
        if libc::WIFSIGNALED(status) {
            return Ok(Some(ExitStatus::Signaled(libc::WTERMSIG(status))));
        }
        // Stopped/continued: keep waiting.
        if nohang {
            return Ok(None);
        }
    }
}

/// Sends `sig` to `pid`; errors (the process is gone) are ignored.
pub fn kill(pid: i32, sig: i32) {
    // SAFETY: kill has no memory-safety preconditions.
    unsafe { libc::kill(pid, sig) };
}

/// Raises the calling thread's scheduling priority to nice `nice` (needs
/// CAP_SYS_NICE); false when refused.
pub fn raise_priority(nice: i32) -> bool {
    // SAFETY: setpriority has no memory-safety preconditions; who = 0 is
    // the calling thread on Linux.
    unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, nice) == 0 }
}

/// Moves the calling thread to the real-time class `SCHED_FIFO` at
/// `priority` (needs CAP_SYS_NICE or an RLIMIT_RTPRIO); false when refused.
pub fn realtime_priority(priority: i32) -> bool {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: sched_setscheduler reads one live sched_param; pid 0 is the
    // calling thread.
    unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) == 0 }
}

/// Moves the calling thread back to the ordinary class (`SCHED_OTHER`).
pub fn ordinary_priority() -> bool {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: as in `realtime_priority`.
    unsafe { libc::sched_setscheduler(0, libc::SCHED_OTHER, &param) == 0 }
}

static PENDING_SIGNAL: AtomicI32 = AtomicI32::new(0);
static SIGNAL_COUNT: AtomicU32 = AtomicU32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    PENDING_SIGNAL.store(sig, Ordering::SeqCst);
    SIGNAL_COUNT.fetch_add(1, Ordering::SeqCst);
}

/// Catches SIGINT, SIGTERM and SIGHUP into a flag so that a recording is
/// always flushed. Caught (not ignored) dispositions reset to default at
/// `execv`, so the profiled command still gets Ctrl-C normally. A signal
/// pfprof was started with ignored (`nohup`, a background job of a
/// non-interactive shell) stays ignored, for pfprof and through `execv` for
/// the command, as the caller meant. Returns the signal state the command
/// must inherit.
pub fn catch_termination_signals() -> InheritedSignals {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: reads the current disposition into a live local, then
        // installs an async-signal-safe handler (atomic stores only); the
        // sigaction structs are fully initialised by zeroed() + the fields set.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_signal as *const () as libc::sighandler_t;
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            let mut old: libc::sigaction = std::mem::zeroed();
            libc::sigaction(sig, std::ptr::null(), &mut old);
            if old.sa_sigaction != libc::SIG_IGN {
                libc::sigaction(sig, &action, std::ptr::null_mut());
            }
        }
    }
    // SAFETY: with a null new set, sigprocmask only writes the current mask
    // into the live local.
    let mask = unsafe {
        let mut mask: libc::sigset_t = std::mem::zeroed();
        libc::sigprocmask(libc::SIG_SETMASK, std::ptr::null(), &mut mask);
        mask
    };
    InheritedSignals { mask }
}

/// Stops a recording of running processes as Ctrl-C would (`pfprof top`'s
/// `q`, read as a key in raw mode, where the terminal sends no signal).
pub fn request_stop() {
    PENDING_SIGNAL.store(libc::SIGINT, Ordering::SeqCst);
    SIGNAL_COUNT.fetch_add(1, Ordering::SeqCst);
}

/// The last termination signal received, and how many were received.
pub fn pending_signal() -> (i32, u32) {
    (
        PENDING_SIGNAL.load(Ordering::SeqCst),
        SIGNAL_COUNT.load(Ordering::SeqCst),
    )
}

/// The resource limits pfprof checks before it opens its events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// `RLIMIT_NOFILE`: open file descriptors (each perf event is one).
    OpenFiles,
    /// `RLIMIT_MEMLOCK`: bytes of locked memory (the ring buffers beyond
    /// `kernel.perf_event_mlock_kb` are charged to it).
    LockedMemory,
}

impl Limit {
    fn resource(self) -> libc::__rlimit_resource_t {
        match self {
            Limit::OpenFiles => libc::RLIMIT_NOFILE,
            Limit::LockedMemory => libc::RLIMIT_MEMLOCK,
        }
    }
}

/// The (soft, hard) values of a limit; `u64::MAX` is unlimited.
pub fn get_limit(limit: Limit) -> io::Result<(u64, u64)> {
    let mut rlim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into a live local.
    check(unsafe { libc::getrlimit(limit.resource(), &mut rlim) })?;
    Ok((rlim.rlim_cur, rlim.rlim_max))
}

/// Sets the soft value of a limit, keeping the hard one.
pub fn set_soft_limit(limit: Limit, soft: u64) -> io::Result<()> {
    let (_, hard) = get_limit(limit)?;
    let rlim = libc::rlimit {
        rlim_cur: soft,
        rlim_max: hard,
    };
    // SAFETY: setrlimit reads one rlimit from a live local.
    check(unsafe { libc::setrlimit(limit.resource(), &rlim) }).map(drop)
}

/// Mounts tracefs at `target`.
pub fn mount_tracefs(target: &CStr) -> io::Result<()> {
    // SAFETY: all pointers are valid NUL-terminated strings; data is null.
    let r = unsafe {
        libc::mount(
            c"nodev".as_ptr(),
            target.as_ptr(),
            c"tracefs".as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    check(r).map(drop)
}

/// A zeroed attr with `size` set, ready to fill in.
pub fn new_attr() -> PerfEventAttr {
    // SAFETY: perf_event_attr is plain old data (integers, unions of integers,
    // bitfields); all-zero is its documented default.
    let mut attr: PerfEventAttr = unsafe { std::mem::zeroed() };
    attr.size = std::mem::size_of::<PerfEventAttr>() as u32;
    attr
}

/// The raw bytes of an attr, as they go into a perf.data file.
pub fn attr_bytes(attr: &PerfEventAttr) -> &[u8] {
    // SAFETY: perf_event_attr is repr(C) plain old data without padding that
    // could be uninitialised (bindgen lays it out with explicit fields and
    // `new_attr` zeroes it), so viewing it as bytes is sound.
    unsafe {
        std::slice::from_raw_parts(
            (attr as *const PerfEventAttr).cast::<u8>(),
            std::mem::size_of::<PerfEventAttr>(),
        )
    }
}

/// A read-only, private mapping of a whole file: recordings are replayed in
/// place instead of being copied into memory. Unmapped on drop. (If another
/// process truncates the file while it is mapped, reading the lost part
/// raises SIGBUS; pfprof only maps its own finished recordings.)
pub struct MappedFile {
    ptr: *mut libc::c_void,
    len: usize,
}

impl MappedFile {
    /// Maps `file` (length 0 gives an empty slice without a mapping).
    pub fn new(file: &std::fs::File) -> io::Result<MappedFile> {
        let len = usize::try_from(file.metadata()?.len()).map_err(io::Error::other)?;
        if len == 0 {
            return Ok(MappedFile {
                ptr: std::ptr::null_mut(),
                len: 0,
            });
        }
        // SAFETY: maps `len` bytes of a file we hold open, read-only and
        // private; the result is checked against MAP_FAILED.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_PRIVATE,
                file.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(MappedFile { ptr, len })
    }
}

impl MappedFile {
    /// Whether the file's first page is in the page cache, asked without
    /// reading it (`mincore` before anything touches the mapping). A read,
    /// even `preadv2` with `RWF_NOWAIT`, starts readahead: pfprof looks at
    /// the traced programs' files this way first, since bringing their
    /// pages in would turn the program's major faults minor. The kernel
    /// answers for files the caller owns or may write (root: all); for
    /// others it says "not cached" unless the page is mapped: callers check
    /// that. An empty file has no first page.
    pub fn first_page_cached(&self) -> io::Result<bool> {
        if self.len == 0 {
            return Ok(false);
        }
        let mut resident = 0u8;
        // SAFETY: `ptr` is a live page-aligned mapping of `len` bytes; the
        // range asked for is within its first page, for which mincore
        // writes one byte into `resident`.
        let r =
            unsafe { libc::mincore(self.ptr, self.len.min(page_size() as usize), &mut resident) };
        if r == 0 {
            Ok(resident & 1 != 0)
        } else {
            Err(io::Error::last_os_error())
        }
    }
}

impl std::ops::Deref for MappedFile {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: `ptr` is a live read-only mapping of `len` bytes owned by
        // self; the returned slice borrows self, so it cannot outlive it.
        unsafe { std::slice::from_raw_parts(self.ptr.cast::<u8>(), self.len) }
    }
}

impl Drop for MappedFile {
    fn drop(&mut self) {
        if self.len > 0 {
            // SAFETY: unmaps exactly the mapping created in `new`.
            unsafe { libc::munmap(self.ptr, self.len) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A negative result is the errno; zero and positive ones are values.
    #[test]
    fn results_of_system_calls() {
        assert_eq!(check(0).unwrap(), 0);
        assert_eq!(check(7i64).unwrap(), 7);
        // SAFETY: close of an fd that cannot be open fails with EBADF and
        // touches no memory.
        let r = check(unsafe { libc::close(-1) });
        assert_eq!(r.unwrap_err().raw_os_error(), Some(libc::EBADF));
    }

    /// Supplementary groups: the group database's list for a known user
    /// (with the primary group), the primary group alone otherwise.
    #[test]
    fn credentials_of_user() {
        let no_name = Credentials::of_user(1000, 1000, None);
        assert_eq!(no_name.groups, [1000]);
        let unknown = Credentials::of_user(1000, 50, Some("no-such-user-pfprof"));
        assert_eq!(unknown.groups, [50]);
        let root = Credentials::of_user(0, 0, Some("root"));
        assert!(root.groups.contains(&0), "{root:?}");
        let bad = Credentials::of_user(1000, 7, Some("a\0b"));
        assert_eq!(bad.groups, [7]);
    }

    /// A pipe whose writer closed polls hung up (as a perf event's fd does
    /// once its task exited); one with data, or with its writer open, not;
    /// a pid fd polls readable once its process exited.
    #[test]
    fn polls_tell_a_hang_up_and_an_exit() {
        let (read, write) = pipe_cloexec().unwrap();
        let fds = [read.as_raw_fd()];
        assert_eq!(poll_readable(&fds, 0).unwrap(), Polled::Waited);
        // SAFETY: writes one byte from a live buffer to an open pipe.
        let written = unsafe { libc::write(write.as_raw_fd(), b"x".as_ptr().cast(), 1) };
        assert_eq!(written, 1);
        assert_eq!(poll_readable(&fds, 0).unwrap(), Polled::Waited);
        drop(write);
        let mut byte = [0u8];
        // SAFETY: reads one byte into a live buffer from an open pipe.
        let got = unsafe { libc::read(read.as_raw_fd(), byte.as_mut_ptr().cast(), 1) };
        assert_eq!(got, 1);
        assert_eq!(poll_readable(&fds, 0).unwrap(), Polled::HungUp);
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let exited = pidfd_open(child.id() as i32).unwrap();
        assert_eq!(
            poll_readable(&[exited.as_raw_fd()], 5_000).unwrap(),
            Polled::Waited
        );
        let mut one = libc::pollfd {
            fd: exited.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: polls one live, initialised pollfd without waiting.
        let ready = unsafe { libc::poll(&mut one, 1, 0) };
        assert_eq!(ready, 1, "the exit is readable");
        child.wait().unwrap();
    }
}

/// Counts the heap allocations of threads that ask for it, so that a test
/// can prove the per-sample path allocates nothing.
#[cfg(test)]
pub mod alloc_counter {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::Cell;

    thread_local! {
        static COUNTING: Cell<bool> = const { Cell::new(false) };
        static COUNT: Cell<u64> = const { Cell::new(0) };
    }

    struct Counting;

    // SAFETY: forwards every call to the system allocator unchanged; the
    // counter is a const-initialised thread-local, which never allocates.
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            if COUNTING.with(Cell::get) {
                COUNT.with(|c| c.set(c.get() + 1));
            }
            // SAFETY: same contract as our caller's.
            unsafe { System.alloc(layout) }
        }
        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            // SAFETY: `ptr` came from System.alloc with this layout.
            unsafe { System.dealloc(ptr, layout) }
        }
        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            if COUNTING.with(Cell::get) {
                COUNT.with(|c| c.set(c.get() + 1));
            }
            // SAFETY: same contract as our caller's.
            unsafe { System.realloc(ptr, layout, new_size) }
        }
    }

    #[global_allocator]
    static GLOBAL: Counting = Counting;

    /// Allocations (and reallocations) made by this thread while running `f`.
    pub fn count<T>(f: impl FnOnce() -> T) -> (T, u64) {
        COUNT.with(|c| c.set(0));
        COUNTING.with(|c| c.set(true));
        let out = f();
        COUNTING.with(|c| c.set(false));
        (out, COUNT.with(Cell::get))
    }
}
