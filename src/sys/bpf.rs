//! The `bpf()` system call, as far as pfprof's collector needs it: create a
//! map, look up, update and delete an element, load a program (and ask how
//! long the verifier's walk of it was), and attach it to a perf event or a
//! raw tracepoint.
//! The argument structs are prefixes of the kernel's `union bpf_attr`: the
//! kernel zero-fills what a shorter struct leaves out.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// `BPF_MAP_CREATE`, `BPF_MAP_LOOKUP_ELEM`, `BPF_MAP_UPDATE_ELEM`,
/// `BPF_MAP_DELETE_ELEM`, `BPF_PROG_LOAD`.
const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_MAP_LOOKUP_ELEM: libc::c_long = 1;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_MAP_DELETE_ELEM: libc::c_long = 3;
const BPF_PROG_LOAD: libc::c_long = 5;
/// `BPF_MAP_UPDATE_BATCH`.
const BPF_MAP_UPDATE_BATCH: libc::c_long = 26;
/// `BPF_RAW_TRACEPOINT_OPEN`, `BPF_LINK_CREATE`.
const BPF_RAW_TRACEPOINT_OPEN: libc::c_long = 17;
const BPF_LINK_CREATE: libc::c_long = 28;
const BPF_OBJ_GET_INFO_BY_FD: libc::c_long = 15;
/// `BPF_PERF_EVENT`, the attach type of a link to a perf event.
const ATTACH_PERF_EVENT: u32 = 41;

/// `BPF_PROG_TYPE_TRACEPOINT`.
pub const PROG_TYPE_TRACEPOINT: u32 = 5;
/// `BPF_PROG_TYPE_PERF_EVENT`.
pub const PROG_TYPE_PERF_EVENT: u32 = 7;
/// `BPF_PROG_TYPE_RAW_TRACEPOINT`.
pub const PROG_TYPE_RAW_TRACEPOINT: u32 = 17;

/// `BPF_LINK_CREATE`'s part of `union bpf_attr`, for a perf event.
#[repr(C)]
#[derive(Default)]
struct LinkCreate {
    prog_fd: u32,
    target_fd: u32,
    attach_type: u32,
    flags: u32,
    bpf_cookie: u64,
}

/// `BPF_RAW_TRACEPOINT_OPEN`'s part of `union bpf_attr`.
#[repr(C)]
#[derive(Default)]
struct RawTracepointOpen {
    name: u64,
    prog_fd: u32,
    _pad: u32,
}

#[repr(C)]
#[derive(Default)]
struct MapCreate {
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
    inner_map_fd: u32,
    numa_node: u32,
    map_name: [u8; 16],
}

/// The element commands' part of `union bpf_attr` (lookup, update, delete).
#[repr(C)]
#[derive(Default)]
struct MapElem {
    map_fd: u32,
    _pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}

/// The batch commands' part of `union bpf_attr`.
#[repr(C)]
#[derive(Default)]
struct MapBatch {
    in_batch: u64,
    out_batch: u64,
    keys: u64,
    values: u64,
    count: u32,
    map_fd: u32,
    elem_flags: u64,
    flags: u64,
}

#[repr(C)]
#[derive(Default)]
struct ProgLoad {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
}

/// The kernel's object name: up to 15 bytes of `name`.
fn object_name(name: &str) -> [u8; 16] {
    let mut out = [0u8; 16];
    for (slot, byte) in out.iter_mut().zip(name.bytes().take(15)) {
        *slot = byte;
    }
    out
}

/// One `bpf()` call with `attr` (a prefix of `union bpf_attr`).
fn bpf<T>(cmd: libc::c_long, attr: &mut T) -> io::Result<libc::c_long> {
    // SAFETY: `attr` is a live, initialised #[repr(C)] prefix of
    // `union bpf_attr` and its size is passed with it: the kernel reads (and
    // for some commands writes) at most that many bytes. Pointers inside it
    // point at buffers the caller keeps alive for the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            (attr as *mut T).cast::<libc::c_void>(),
            std::mem::size_of::<T>() as libc::c_uint,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// A fd the kernel just returned, owned by the caller.
fn owned(fd: libc::c_long) -> io::Result<OwnedFd> {
    let fd = i32::try_from(fd).map_err(|_| io::Error::other("bpf() returned no fd"))?;
    // SAFETY: the kernel just returned this fd to us and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// What a map is: its type, key and value sizes, entries and flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MapShape {
    /// `BPF_MAP_TYPE_*`.
    pub map_type: u32,
    /// Bytes of a key.
    pub key_size: u32,
    /// Bytes of a value.
    pub value_size: u32,
    /// Entries at most.
    pub max_entries: u32,
    /// `BPF_F_*`.
    pub map_flags: u32,
}

/// Creates a map.
pub fn map_create(shape: MapShape, name: &str) -> io::Result<OwnedFd> {
    create(shape, None, name)
}

/// Creates a map of maps (`BPF_MAP_TYPE_ARRAY_OF_MAPS`) whose values are
/// maps like `inner`.
pub fn map_create_of_maps(shape: MapShape, inner: &OwnedFd, name: &str) -> io::Result<OwnedFd> {
    create(shape, Some(inner), name)
}

fn create(shape: MapShape, inner: Option<&OwnedFd>, name: &str) -> io::Result<OwnedFd> {
    let mut attr = MapCreate {
        map_type: shape.map_type,
        key_size: shape.key_size,
        value_size: shape.value_size,
        max_entries: shape.max_entries,
        map_flags: shape.map_flags,
        inner_map_fd: inner.map_or(0, |fd| fd.as_raw_fd() as u32),
        map_name: object_name(name),
        ..MapCreate::default()
    };
    owned(bpf(BPF_MAP_CREATE, &mut attr)?)
}

/// An element command on `map` with `key` (and `value`, which the kernel
/// reads for an update and writes for a lookup).
fn elem(cmd: libc::c_long, map: &OwnedFd, key: &[u8], value: Option<&mut [u8]>) -> io::Result<()> {
    let mut attr = MapElem {
        map_fd: map.as_raw_fd() as u32,
        key: key.as_ptr() as u64,
        value: value.map_or(0, |v| v.as_mut_ptr() as u64),
        ..MapElem::default()
    };
    bpf(cmd, &mut attr).map(drop)
}

/// Sets `map[key] = value` (the sizes must be the map's).
pub fn map_update(map: &OwnedFd, key: &[u8], value: &[u8]) -> io::Result<()> {
    // The kernel only reads the value of an update.
    let mut attr = MapElem {
        map_fd: map.as_raw_fd() as u32,
        key: key.as_ptr() as u64,
        value: value.as_ptr() as u64,
        ..MapElem::default()
    };
    bpf(BPF_MAP_UPDATE_ELEM, &mut attr).map(drop)
}

/// Sets `map[key] = value` for each pair of a map whose keys and values
/// are 4 bytes (an array of maps: the values are the inner maps' fds), in
/// one call. An update of a map of maps waits for the BPF programs running
/// to finish (an RCU grace period, 12-16 ms here) once a call, not once an
/// element. A kernel without batches (before 5.6) gets one call a pair.
pub fn map_update_u32s(map: &OwnedFd, pairs: &[(u32, u32)]) -> io::Result<()> {
    let keys: Vec<u32> = pairs.iter().map(|&(key, _)| key).collect();
    let values: Vec<u32> = pairs.iter().map(|&(_, value)| value).collect();
    let mut attr = MapBatch {
        keys: keys.as_ptr() as u64,
        values: values.as_ptr() as u64,
        count: u32::try_from(pairs.len()).map_err(io::Error::other)?,
        map_fd: map.as_raw_fd() as u32,
        ..MapBatch::default()
    };
    match bpf(BPF_MAP_UPDATE_BATCH, &mut attr) {
        Ok(_) => Ok(()),
        // ENOTSUPP (524): the map type has no batch (the kernel's code).
        Err(e) if matches!(e.raw_os_error(), Some(libc::EINVAL | 524)) => {
            for (key, value) in pairs {
                map_update(map, &key.to_le_bytes(), &value.to_le_bytes())?;
            }
            Ok(())
        }
        Err(e) => Err(e),
    }
}

/// Reads `map[key]` into `value` (for a per-CPU map, one value per possible
/// CPU, each rounded up to 8 bytes).
pub fn map_lookup(map: &OwnedFd, key: &[u8], value: &mut [u8]) -> io::Result<()> {
    elem(BPF_MAP_LOOKUP_ELEM, map, key, Some(value))
}

/// Removes `map[key]` (ENOENT when it is not there).
pub fn map_delete(map: &OwnedFd, key: &[u8]) -> io::Result<()> {
    elem(BPF_MAP_DELETE_ELEM, map, key, None)
}

/// Loads a program of `prog_type` (instructions as 8-byte little-endian
/// words). On failure the error carries the verifier's last log lines.
pub fn prog_load(prog_type: u32, insns: &[u64], license: &str, name: &str) -> io::Result<OwnedFd> {
    let license = std::ffi::CString::new(license).map_err(io::Error::other)?;
    let load = |log: &mut [u8], level: u32| {
        let mut attr = ProgLoad {
            prog_type,
            insn_cnt: insns.len() as u32,
            insns: insns.as_ptr() as u64,
            license: license.as_ptr() as u64,
            log_level: level,
            log_size: log.len() as u32,
            log_buf: if log.is_empty() {
                0
            } else {
                log.as_mut_ptr() as u64
            },
            prog_name: object_name(name),
            ..ProgLoad::default()
        };
        // The verifier gives up with EAGAIN when a signal is pending for
        // the loading thread (a child's SIGCHLD to the process), more
        // likely the longer it verifies (the dwarf program: ~20 ms); as
        // libbpf does, try again a few times.
        let mut attempts = 5;
        loop {
            match bpf(BPF_PROG_LOAD, &mut attr) {
                Err(e) if e.raw_os_error() == Some(libc::EAGAIN) && attempts > 1 => attempts -= 1,
                done => break done,
            }
        }
    };
    match load(&mut [], 0) {
        Ok(fd) => owned(fd),
        Err(e) => {
            // Again with the verifier's log, to say why.
            let mut log = vec![0u8; 1 << 20];
            let _ = load(&mut log, 1);
            let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
            let text = String::from_utf8_lossy(&log[..end]);
            let tail: Vec<&str> = text.lines().rev().take(3).collect();
            if tail.is_empty() {
                Err(e)
            } else {
                let tail: Vec<&str> = tail.into_iter().rev().collect();
                Err(io::Error::new(
                    e.kind(),
                    format!("{e}; verifier: {}", tail.join(" / ")),
                ))
            }
        }
    }
}

/// `BPF_OBJ_GET_INFO_BY_FD`'s arguments.
#[repr(C)]
struct ObjInfo {
    bpf_fd: u32,
    info_len: u32,
    info: u64,
}

/// Where `struct bpf_prog_info` holds `verified_insns` (kernels from 5.16).
const VERIFIED_INSNS_AT: usize = 216;

/// How many instructions the verifier processed when it loaded `prog`
/// (what its log's "processed N insns" says); `None` where the kernel
/// does not say.
pub fn verified_insns(prog: &OwnedFd) -> io::Result<Option<u32>> {
    let mut info = [0u8; 256];
    let mut attr = ObjInfo {
        bpf_fd: prog.as_raw_fd() as u32,
        info_len: info.len() as u32,
        info: info.as_mut_ptr() as u64,
    };
    bpf(BPF_OBJ_GET_INFO_BY_FD, &mut attr)?;
    let end = VERIFIED_INSNS_AT + 4;
    Ok((attr.info_len as usize >= end)
        .then(|| u32::from_le_bytes(info[VERIFIED_INSNS_AT..end].try_into().unwrap_or_default())))
}

/// Runs `prog` (a raw tracepoint program) at each hit of the tracepoint
/// `name`, on every CPU, until the returned descriptor is closed.
pub fn attach_raw_tracepoint(name: &str, prog: &OwnedFd) -> io::Result<OwnedFd> {
    let name = std::ffi::CString::new(name).map_err(io::Error::other)?;
    let mut attr = RawTracepointOpen {
        name: name.as_ptr() as u64,
        prog_fd: prog.as_raw_fd() as u32,
        ..RawTracepointOpen::default()
    };
    owned(bpf(BPF_RAW_TRACEPOINT_OPEN, &mut attr)?)
}

/// Runs `prog` at each sample of the perf event `event` until the
/// returned link is closed (kernel 5.15 and later). No cookie: an event
/// the kernel inherits into a child gets the program but not the cookie.
pub fn link_to_event(event: &OwnedFd, prog: &OwnedFd) -> io::Result<OwnedFd> {
    let mut attr = LinkCreate {
        prog_fd: prog.as_raw_fd() as u32,
        target_fd: event.as_raw_fd() as u32,
        attach_type: ATTACH_PERF_EVENT,
        flags: 0,
        bpf_cookie: 0,
    };
    owned(bpf(BPF_LINK_CREATE, &mut attr)?)
}

/// Runs `prog` at each sample of the perf event `event`
/// (`PERF_EVENT_IOC_SET_BPF`).
pub fn attach_to_event(event: &OwnedFd, prog: &OwnedFd) -> io::Result<()> {
    // SAFETY: plain ioctl on two fds we own; no memory is passed.
    let r =
        unsafe { perf_event_open_sys::ioctls::SET_BPF(event.as_raw_fd(), prog.as_raw_fd() as u32) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}
