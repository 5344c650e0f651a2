//! The perf record types, header `misc` bits and call-chain context marks
//! pfprof reads and writes: one table, taken from the kernel's uapi as
//! `perf_event_open_sys` carries it (the `misc` bits as the 16-bit header
//! field holds them).

use perf_event_open_sys::bindings as b;

/// `PERF_RECORD_MMAP`.
pub const MMAP: u32 = b::PERF_RECORD_MMAP;
/// `PERF_RECORD_COMM`.
pub const COMM: u32 = b::PERF_RECORD_COMM;
/// `PERF_RECORD_EXIT`.
pub const EXIT: u32 = b::PERF_RECORD_EXIT;
/// `PERF_RECORD_FORK`.
pub const FORK: u32 = b::PERF_RECORD_FORK;
/// `PERF_RECORD_SAMPLE`.
pub const SAMPLE: u32 = b::PERF_RECORD_SAMPLE;
/// `PERF_RECORD_MMAP2`.
pub const MMAP2: u32 = b::PERF_RECORD_MMAP2;

/// `PERF_RECORD_MISC_KERNEL`.
pub const MISC_KERNEL: u16 = b::PERF_RECORD_MISC_KERNEL as u16;
/// `PERF_RECORD_MISC_USER`.
pub const MISC_USER: u16 = b::PERF_RECORD_MISC_USER as u16;
/// `PERF_RECORD_MISC_MMAP_DATA`: a mapping without `PROT_EXEC`.
pub const MISC_MMAP_DATA: u16 = b::PERF_RECORD_MISC_MMAP_DATA as u16;
/// `PERF_RECORD_MISC_MMAP_BUILD_ID`: the MMAP2 record holds a build-id.
pub const MISC_MMAP_BUILD_ID: u16 = b::PERF_RECORD_MISC_MMAP_BUILD_ID as u16;
/// `PERF_RECORD_MISC_BUILD_ID_SIZE`: a build-id table entry says its
/// build-id's length (perf's own header, not the kernel's uapi).
pub const MISC_BUILD_ID_SIZE: u16 = 1 << 15;

/// `PERF_CONTEXT_KERNEL`: kernel frames follow in a call chain.
pub const CONTEXT_KERNEL: u64 = b::PERF_CONTEXT_KERNEL;
/// `PERF_CONTEXT_USER`: user frames follow.
pub const CONTEXT_USER: u64 = b::PERF_CONTEXT_USER;
/// `PERF_CONTEXT_MAX`: every value from here up is a context mark.
pub const CONTEXT_MAX: u64 = b::PERF_CONTEXT_MAX;

/// The bytes an MMAP2 record (and perf's build-id table) has for a
/// build-id: `BUILD_ID_SIZE_MAX`, a SHA-1's.
pub const BUILD_ID_BYTES: usize = 20;
/// Record types from here on are perf's own (FINISHED_ROUND, the
/// HEADER_* records of its pipe mode), never the kernel's:
/// `PERF_RECORD_USER_TYPE_START`.
pub const USER_TYPE_START: u32 = 64;

#[cfg(test)]
mod tests {
    use super::*;

    /// The values perf.data files carry (the uapi is stable; a binding
    /// change would break every recording).
    #[test]
    fn values_of_the_file_format() {
        assert_eq!((MMAP, COMM, EXIT, FORK, SAMPLE, MMAP2), (1, 3, 4, 7, 9, 10));
        assert_eq!((MISC_KERNEL, MISC_USER), (1, 2));
        assert_eq!(
            (MISC_MMAP_DATA, MISC_MMAP_BUILD_ID, MISC_BUILD_ID_SIZE),
            (1 << 13, 1 << 14, 1 << 15)
        );
        assert_eq!(CONTEXT_USER, (-512i64) as u64);
        assert_eq!(CONTEXT_KERNEL, (-128i64) as u64);
        assert_eq!(CONTEXT_MAX, (-4095i64) as u64);
    }
}
