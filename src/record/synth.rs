//! Records pfprof writes itself, in the kernel's format, for what existed
//! before the events were enabled (attach and system-wide modes): FORK (the
//! parent), COMM (the name) and MMAP2 (each mapping). Their `sample_id`
//! trailer matches the first event's attr: pid/tid, time, cpu, identifier.

use super::maps::MapsLine;

const PERF_RECORD_COMM: u32 = 3;
const PERF_RECORD_FORK: u32 = 7;
const PERF_RECORD_MMAP2: u32 = 10;
const PERF_RECORD_MISC_USER: u16 = 2;
const PERF_RECORD_MISC_MMAP_DATA: u16 = 1 << 13;

fn record(
    record_type: u32,
    misc: u16,
    body: &[u8],
    pid: i32,
    tid: i32,
    time: u64,
    id: u64,
) -> Vec<u8> {
    let mut r = Vec::with_capacity(8 + body.len() + 32);
    r.extend_from_slice(&record_type.to_le_bytes());
    r.extend_from_slice(&misc.to_le_bytes());
    r.extend_from_slice(&0u16.to_le_bytes()); // size, set below
    r.extend_from_slice(body);
    // sample_id: TID, TIME, CPU, IDENTIFIER
    r.extend_from_slice(&pid.to_le_bytes());
    r.extend_from_slice(&tid.to_le_bytes());
    r.extend_from_slice(&time.to_le_bytes());
    r.extend_from_slice(&0u64.to_le_bytes());
    r.extend_from_slice(&id.to_le_bytes());
    let size = r.len() as u16;
    r[6..8].copy_from_slice(&size.to_le_bytes());
    r
}

/// NUL-terminated, padded to 8 bytes.
fn put_string(body: &mut Vec<u8>, s: &str) {
    body.extend_from_slice(s.as_bytes());
    body.push(0);
    while body.len() % 8 != 0 {
        body.push(0);
    }
}

/// `pid` is a process whose parent is `ppid`.
pub fn fork(pid: i32, ppid: i32, time: u64, id: u64) -> Vec<u8> {
    let mut body = Vec::new();
    for v in [pid, ppid, pid, ppid] {
        body.extend_from_slice(&v.to_le_bytes());
    }
    body.extend_from_slice(&time.to_le_bytes());
    record(PERF_RECORD_FORK, 0, &body, pid, pid, time, id)
}

/// Thread `tid` of `pid` is called `comm`.
pub fn comm(pid: i32, tid: i32, comm: &str, time: u64, id: u64) -> Vec<u8> {
    let mut body = Vec::new();
    body.extend_from_slice(&pid.to_le_bytes());
    body.extend_from_slice(&tid.to_le_bytes());
    put_string(&mut body, comm);
    record(PERF_RECORD_COMM, 0, &body, pid, tid, time, id)
}

/// A mapping of `pid`, from its maps file.
pub fn mmap2(pid: i32, m: &MapsLine, time: u64, id: u64) -> Vec<u8> {
    let mut body = Vec::new();
    body.extend_from_slice(&pid.to_le_bytes());
    body.extend_from_slice(&pid.to_le_bytes());
    body.extend_from_slice(&m.start_avma.to_le_bytes());
    body.extend_from_slice(&(m.end_avma - m.start_avma).to_le_bytes());
    body.extend_from_slice(&m.file_offset.to_le_bytes());
    body.extend_from_slice(&[0u8; 24]); // maj, min, ino, ino_generation: unknown
    body.extend_from_slice(&m.prot.to_le_bytes());
    body.extend_from_slice(&m.flags.to_le_bytes());
    put_string(&mut body, &m.path);
    let mut misc = PERF_RECORD_MISC_USER;
    if m.prot & libc::PROT_EXEC as u32 == 0 {
        misc |= PERF_RECORD_MISC_MMAP_DATA;
    }
    record(PERF_RECORD_MMAP2, misc, &body, pid, pid, time, id)
}
