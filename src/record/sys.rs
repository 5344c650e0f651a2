//! The only place where pfprof talks to the kernel through raw system calls:
//! `perf_event_open` and its ioctls, counter reads, the paused fork/exec of the
//! profiled command, `waitpid`, signal flags and the tracefs mount.
//!
//! Every `unsafe` block of the binary lives here or in `ring.rs`, each with a
//! `// SAFETY:` comment. Callers get safe functions returning `io::Result`.

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicI32, AtomicU32, Ordering};

pub use perf_event_open_sys::bindings::perf_event_attr as PerfEventAttr;
use perf_event_open_sys::bindings::PERF_FLAG_FD_CLOEXEC;

/// Opens one perf event for `pid` on `cpu` (`pid` -1 = all tasks on `cpu`).
pub fn perf_event_open(attr: &PerfEventAttr, pid: i32, cpu: i32) -> io::Result<OwnedFd> {
    let mut attr = *attr;
    // SAFETY: `attr` is a valid, initialised perf_event_attr whose `size`
    // field matches the struct we pass; the kernel only reads it (and may
    // write back `size` on E2BIG, which our local copy absorbs).
    let fd = unsafe {
        perf_event_open_sys::perf_event_open(&mut attr, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC as _)
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just returned this fd to us and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The kernel's id of an event, as it appears in `PERF_SAMPLE_IDENTIFIER`.
pub fn event_id(fd: &OwnedFd) -> io::Result<u64> {
    let mut id = 0u64;
    // SAFETY: PERF_EVENT_IOC_ID writes one u64 through the pointer, which
    // points at a live local.
    let r = unsafe { perf_event_open_sys::ioctls::ID(fd.as_raw_fd(), &mut id) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(id)
}

/// Sends the records of `fd` into the ring buffer of `target` (same CPU).
pub fn set_output(fd: &OwnedFd, target: &OwnedFd) -> io::Result<()> {
    // SAFETY: plain ioctl on two fds we own; no memory is passed.
    let r = unsafe { perf_event_open_sys::ioctls::SET_OUTPUT(fd.as_raw_fd(), target.as_raw_fd()) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Starts an event that was opened disabled.
pub fn enable(fd: &OwnedFd) -> io::Result<()> {
    // SAFETY: plain ioctl on an fd we own; no memory is passed.
    let r = unsafe { perf_event_open_sys::ioctls::ENABLE(fd.as_raw_fd(), 0) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The effective user id of pfprof.
pub fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
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
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Reads the event's counter: every event the kernel counted, sampled or not,
/// including those of exited inherited children.
pub fn read_counter(fd: &OwnedFd) -> io::Result<u64> {
    let mut value = 0u64;
    // SAFETY: reads at most 8 bytes into a live u64.
    let n = unsafe { libc::read(fd.as_raw_fd(), (&mut value as *mut u64).cast(), 8) };
    if n != 8 {
        return Err(if n < 0 {
            io::Error::last_os_error()
        } else {
            io::ErrorKind::UnexpectedEof.into()
        });
    }
    Ok(value)
}

/// Waits until one of `fds` is readable or `timeout_ms` passes. EINTR is not an error.
pub fn poll_readable(fds: &[RawFd], timeout_ms: i32) -> io::Result<()> {
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
    }
    Ok(())
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

fn pipe_cloexec() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: pipe2 writes two fds into the live 2-element array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both fds were just created by pipe2 and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Forks a child that blocks until released, then `execv(path, argv)`.
/// Everything the child needs is allocated before `fork`, because only
/// async-signal-safe calls are allowed between `fork` and `execv`.
pub fn spawn_paused(path: &CStr, argv: &[CString]) -> io::Result<PausedChild> {
    let mut argv_ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    argv_ptrs.push(std::ptr::null());
    let (go_read, go_write) = pipe_cloexec()?;
    let (err_read, err_write) = pipe_cloexec()?;
    let (go_write_raw, err_read_raw) = (go_write.as_raw_fd(), err_read.as_raw_fd());
    // SAFETY: fork has no memory-safety preconditions; the child branch below
    // only calls async-signal-safe functions (read, execv, write, _exit) on
    // memory prepared before the fork.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    if pid == 0 {
        // SAFETY: child side of fork: async-signal-safe calls only, on fds and
        // buffers that were set up before the fork; never returns.
        unsafe {
            // The parent's ends: closed here so that EOF means the parent is gone.
            libc::close(go_write_raw);
            libc::close(err_read_raw);
            let mut byte = 0u8;
            // Blocks until the parent has attached the perf events (or died:
            // then read returns 0 and we must not run the command untraced).
            if libc::read(go_read.as_raw_fd(), (&mut byte as *mut u8).cast(), 1) != 1 {
                libc::_exit(127);
            }
            libc::execv(path.as_ptr(), argv_ptrs.as_ptr());
            let errno = *libc::__errno_location();
            libc::write(err_write.as_raw_fd(), (&errno as *const i32).cast(), 4);
            libc::_exit(127);
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
    /// Lets the child `execv`. Returns the `errno` of a failed exec.
    pub fn release(&mut self) -> Result<(), i32> {
        if let Some(go) = self.go.take() {
            // SAFETY: writes one byte from a live local to a pipe we own.
            unsafe { libc::write(go.as_raw_fd(), b"g".as_ptr().cast(), 1) };
        }
        let mut errno = 0i32;
        // SAFETY: reads at most 4 bytes into a live i32. The pipe is
        // close-on-exec, so a successful exec yields EOF (0 bytes).
        let n = unsafe {
            libc::read(
                self.exec_error.as_raw_fd(),
                (&mut errno as *mut i32).cast(),
                4,
            )
        };
        if n == 4 {
            Err(errno)
        } else {
            Ok(())
        }
    }

    /// Kills a child that was never released (setup failed): closing the go
    /// pipe makes it `_exit(127)` without running the command.
    pub fn abandon(mut self) {
        self.go.take();
        let _ = wait(self.pid, false);
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

static PENDING_SIGNAL: AtomicI32 = AtomicI32::new(0);
static SIGNAL_COUNT: AtomicU32 = AtomicU32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    PENDING_SIGNAL.store(sig, Ordering::SeqCst);
    SIGNAL_COUNT.fetch_add(1, Ordering::SeqCst);
}

/// Catches SIGINT, SIGTERM and SIGHUP into a flag so that a recording is
/// always flushed. Caught (not ignored) dispositions reset to default at
/// `execv`, so the profiled command still gets Ctrl-C normally.
pub fn catch_termination_signals() {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: installs an async-signal-safe handler (atomic stores only);
        // the sigaction struct is fully initialised by zeroed() + the fields set.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_signal as *const () as libc::sighandler_t;
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(sig, &action, std::ptr::null_mut());
        }
    }
}

/// The last termination signal received, and how many were received.
pub fn pending_signal() -> (i32, u32) {
    (
        PENDING_SIGNAL.load(Ordering::SeqCst),
        SIGNAL_COUNT.load(Ordering::SeqCst),
    )
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
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
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
