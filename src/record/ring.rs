//! The mmap'ed ring buffers of one CPU that the kernel fills and we drain:
//! perf's ([`Ring`]: a metadata page followed by 2^n data pages) and the BPF
//! collector's ([`BpfRing`]).
//!
//! The bytes between `data_tail` and `data_head` are whole records, in (at
//! most) two slices when they wrap; [`Ring::drain`] hands them out whole
//! (the one record cut by the wrap copied whole, see [`drain_whole`]), so no
//! reader downstream reassembles one. The `Acquire`
//! load of `data_head` pairs with the kernel's write barrier; the `Release`
//! store of `data_tail` tells the kernel the space may be reused only after
//! we copied it.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use perf_event_open_sys::bindings::perf_event_mmap_page;

use crate::format::events::stream::{drain_whole, Record};

/// One CPU's ring buffer. Unmapped on drop.
pub struct Ring {
    fd: std::os::fd::RawFd,
    base: *mut u8,
    map_len: usize,
    data_offset: usize,
    data_size: usize,
    /// The record cut by the wrap, copied whole.
    wrapped: Vec<u8>,
}

// SAFETY: the mapping is owned by this struct alone; moving it to another
// thread moves that ownership.
unsafe impl Send for Ring {}

/// What one [`Ring::drain`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Drained {
    /// Bytes given back to the kernel.
    pub bytes: usize,
    /// Records whose size was below a header's (what followed them in the
    /// ring was given up): never the kernel's.
    pub bad_records: u64,
}

impl Ring {
    /// Maps `data_pages` (a power of two) data pages of the event `fd`.
    pub fn new(fd: &OwnedFd, data_pages: usize) -> io::Result<Ring> {
        assert!(data_pages.is_power_of_two());
        let page = crate::sys::page_size() as usize;
        let map_len = (data_pages + 1) * page;
        // SAFETY: mapping a perf fd with the length the kernel expects
        // (1 + 2^n pages); the result is checked against MAP_FAILED.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base = base.cast::<u8>();
        // SAFETY: the first page of the mapping is the kernel's
        // perf_event_mmap_page; data_offset/data_size are set before mmap returns.
        let (data_offset, data_size) = unsafe {
            let meta = base.cast::<perf_event_mmap_page>();
            ((*meta).data_offset as usize, (*meta).data_size as usize)
        };
        let (data_offset, data_size) = if data_size == 0 {
            (page, data_pages * page) // kernels before 4.1 leave these 0
        } else {
            (data_offset, data_size)
        };
        Ok(Ring {
            fd: fd.as_raw_fd(),
            base,
            map_len,
            data_offset,
            data_size,
            wrapped: Vec::new(),
        })
    }

    /// The fd of the event that owns the buffer, for `poll`.
    pub fn raw_fd(&self) -> std::os::fd::RawFd {
        self.fd
    }

    fn head_tail(&self) -> (&AtomicU64, &AtomicU64) {
        // SAFETY: data_head and data_tail are naturally aligned u64 fields of
        // the metadata page, which lives as long as `self`; the kernel and we
        // access them atomically.
        unsafe {
            let meta = self.base.cast::<perf_event_mmap_page>();
            (
                AtomicU64::from_ptr(std::ptr::addr_of_mut!((*meta).data_head)),
                AtomicU64::from_ptr(std::ptr::addr_of_mut!((*meta).data_tail)),
            )
        }
    }

    /// Hands every whole record written so far to `each` one by one and
    /// to `sink` in runs (see [`drain_whole`]), then frees their space.
    pub fn drain<E>(
        &mut self,
        each: impl FnMut(&Record<'_>),
        sink: impl FnMut(&[u8]) -> Result<(), E>,
    ) -> Result<Drained, E> {
        let mut wrapped = std::mem::take(&mut self.wrapped);
        let mut bad_records = 0;
        let done = drain_whole(self.pending(), &mut wrapped, &mut bad_records, each, sink);
        self.wrapped = wrapped;
        let bytes = done?;
        self.release(bytes);
        Ok(Drained { bytes, bad_records })
    }

    /// The bytes written and not yet released, as (at most) two slices in
    /// ring order (the second when they wrap). They stay put until
    /// [`release`](Self::release) gives them back to the kernel, so records
    /// of several rings can be merged by time before any is released.
    pub fn pending(&self) -> (&[u8], &[u8]) {
        let (head_atomic, tail_atomic) = self.head_tail();
        let head = head_atomic.load(Ordering::Acquire);
        let tail = tail_atomic.load(Ordering::Relaxed);
        let len = ((head - tail) as usize).min(self.data_size);
        let start = (tail as usize) % self.data_size;
        // SAFETY: the data area is `data_size` bytes at `data_offset` inside
        // the mapping, and the kernel does not write to [tail, head) until
        // `release` publishes a new tail; the slices borrow `self`, so they
        // end before `release` (which takes `&mut self`) runs.
        let data =
            unsafe { std::slice::from_raw_parts(self.base.add(self.data_offset), self.data_size) };
        let first = len.min(self.data_size - start);
        (&data[start..start + first], &data[..len - first])
    }

    /// Gives the first `len` pending bytes back to the kernel.
    pub fn release(&mut self, len: usize) {
        let (_, tail_atomic) = self.head_tail();
        let tail = tail_atomic.load(Ordering::Relaxed);
        tail_atomic.store(tail + len as u64, Ordering::Release);
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping created in `new`; no borrow of
        // it outlives `self` (`pending`'s slices borrow it).
        unsafe { libc::munmap(self.base.cast(), self.map_len) };
    }
}

/// A BPF ring buffer (`BPF_MAP_TYPE_RINGBUF`) of the collector, mapped: the
/// consumer page (ours to write), then the producer page and the data
/// pages. The kernel would map the data twice in a row, so that no record
/// wraps; it is mapped once (a mapped page counts in pfprof's RSS each time
/// it is mapped), and a record cut by the wrap is copied whole, as for
/// [`Ring`].
///
/// Each record is an 8-byte header (its length, with a busy bit while the
/// program writes it and a discard bit) and its data, padded to 8 bytes.
/// The producer position moves when a record is reserved, before it is
/// written, so [`BpfRing::scan`] hands out the records up to the first one
/// still busy, reading each header with `Acquire` (pairs with the kernel's
/// release of the busy bit).
pub struct BpfRing {
    consumer: *mut u8,
    producer: *mut u8,
    page: usize,
    data_size: usize,
    /// Position (as the kernel counts, from 0) up to which the records
    /// are whole: what [`BpfRing::pending`] hands out.
    committed: u64,
}

// SAFETY: as for `Ring`: the mappings are owned by this struct alone.
unsafe impl Send for BpfRing {}

/// `BPF_RINGBUF_BUSY_BIT`, `BPF_RINGBUF_DISCARD_BIT`, `BPF_RINGBUF_HDR_SZ`.
const BPF_BUSY: u32 = 1 << 31;
const BPF_DISCARD: u32 = 1 << 30;
const BPF_HEADER: usize = 8;

impl BpfRing {
    /// Maps the ring buffer map `fd` of `data_size` bytes (a power of two,
    /// whole pages).
    pub fn new(fd: &OwnedFd, data_size: usize) -> io::Result<BpfRing> {
        let page = crate::sys::page_size() as usize;
        let map = |len: usize, prot: libc::c_int, offset: usize| -> io::Result<*mut u8> {
            // SAFETY: mapping a ring buffer map's fd at the offsets and with
            // the protections the kernel allows (consumer page read-write,
            // the rest read-only, within its size); the result is checked
            // against MAP_FAILED.
            let base = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    prot,
                    libc::MAP_SHARED,
                    fd.as_raw_fd(),
                    offset as libc::off_t,
                )
            };
            if base == libc::MAP_FAILED {
                return Err(io::Error::last_os_error());
            }
            Ok(base.cast())
        };
        let consumer = map(page, libc::PROT_READ | libc::PROT_WRITE, 0)?;
        let producer = match map(page + data_size, libc::PROT_READ, page) {
            Ok(producer) => producer,
            Err(e) => {
                // SAFETY: unmaps the consumer page just mapped, not used since.
                unsafe { libc::munmap(consumer.cast(), page) };
                return Err(e);
            }
        };
        let mut ring = BpfRing {
            consumer,
            producer,
            page,
            data_size,
            committed: 0,
        };
        ring.committed = ring.consumer_pos().load(Ordering::Relaxed);
        Ok(ring)
    }

    fn consumer_pos(&self) -> &AtomicU64 {
        // SAFETY: the consumer position is the first, aligned u64 of the
        // consumer page, which lives as long as `self`.
        unsafe { AtomicU64::from_ptr(self.consumer.cast()) }
    }

    fn producer_pos(&self) -> &AtomicU64 {
        // SAFETY: the producer position is the first, aligned u64 of the
        // producer page, which lives as long as `self`.
        unsafe { AtomicU64::from_ptr(self.producer.cast()) }
    }

    /// Finds how far the records written so far are whole (not busy).
    pub fn scan(&mut self) {
        let producer = self.producer_pos().load(Ordering::Acquire);
        let mut pos = self.committed;
        while pos + BPF_HEADER as u64 <= producer {
            let at = self.page + (pos as usize & (self.data_size - 1));
            // SAFETY: `at` is within the producer mapping and 8-byte
            // aligned (records are, and the data size is whole pages), so
            // the header does not wrap; the kernel writes it atomically.
            let header = unsafe { AtomicU32::from_ptr(self.producer.add(at).cast()) };
            let len = header.load(Ordering::Acquire);
            if len & BPF_BUSY != 0 {
                break;
            }
            let step = ((len & !BPF_DISCARD) as u64 + BPF_HEADER as u64 + 7) & !7;
            if pos + step > producer || step as usize > self.data_size {
                break; // cannot happen: the kernel wrote it
            }
            pos += step;
        }
        self.committed = pos;
    }

    /// The whole records found by the last [`scan`](Self::scan), each with
    /// its 8-byte header, as (at most) two slices in ring order (the
    /// second after the wrap): see [`bpf_record_at`]. They stay put until
    /// [`release`](Self::release).
    pub fn pending(&self) -> (&[u8], &[u8]) {
        let consumer = self.consumer_pos().load(Ordering::Relaxed);
        let len = ((self.committed - consumer) as usize).min(self.data_size);
        let start = consumer as usize & (self.data_size - 1);
        // SAFETY: the data area is `data_size` bytes after the producer
        // page, and the kernel does not write to committed records until
        // `release` moves the consumer position; the slices borrow `self`,
        // so they end before `release` (`&mut self`) runs.
        let data =
            unsafe { std::slice::from_raw_parts(self.producer.add(self.page), self.data_size) };
        let first = len.min(self.data_size - start);
        (&data[start..start + first], &data[..len - first])
    }

    /// Gives the first `len` pending bytes back to the kernel.
    pub fn release(&mut self, len: usize) {
        let consumer = self.consumer_pos().load(Ordering::Relaxed);
        self.consumer_pos()
            .store(consumer + len as u64, Ordering::Release);
    }
}

impl Drop for BpfRing {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the two mappings created in `new`; no
        // borrow of them outlives `self`.
        unsafe {
            libc::munmap(self.consumer.cast(), self.page);
            libc::munmap(self.producer.cast(), self.page + self.data_size);
        }
    }
}

/// The record at `offset` of a BPF ring's pending bytes (`first`, then
/// `second` after the wrap), without its header: borrowed, or copied into
/// `scratch` when the wrap cuts it; and the bytes it takes in the ring.
/// `None` at the end. A discarded record is empty (nothing to read;
/// pfprof discards none).
pub fn bpf_record_at<'a>(
    (first, second): (&'a [u8], &'a [u8]),
    offset: usize,
    scratch: &'a mut Vec<u8>,
) -> Option<(&'a [u8], usize)> {
    // Headers are 8-byte aligned and the ring whole pages: none is cut.
    let header_at = |at: usize| match at.checked_sub(first.len()) {
        None => first.get(at..at + 4),
        Some(at) => second.get(at..at + 4),
    };
    let word = u32::from_le_bytes(header_at(offset)?.try_into().ok()?);
    let len = (word & !(BPF_BUSY | BPF_DISCARD)) as usize;
    let step = (len + BPF_HEADER + 7) & !7;
    let (start, end) = (offset + BPF_HEADER, offset + BPF_HEADER + len);
    if end > first.len() + second.len() {
        return None;
    }
    let data = if end <= first.len() {
        &first[start..end]
    } else if start >= first.len() {
        &second[start - first.len()..end - first.len()]
    } else {
        scratch.clear();
        scratch.extend_from_slice(&first[start..]);
        scratch.extend_from_slice(&second[..end - first.len()]);
        &scratch[..]
    };
    Some((if word & BPF_DISCARD != 0 { &[] } else { data }, step))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A BPF ring's record: its length (with the busy and discard bits)
    /// and a page offset, then the data padded to 8 bytes.
    fn bpf_record(out: &mut Vec<u8>, data: &[u8], flags: u32) {
        out.extend_from_slice(&(data.len() as u32 | flags).to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(data);
        out.resize(out.len().next_multiple_of(8), 0xee);
    }

    /// Records step over their padding; a discarded one is empty; the end
    /// (or a record cut short) is None; a record the wrap cuts is copied
    /// whole.
    #[test]
    fn bpf_records_step_over_padding_and_discards() {
        let mut pending = Vec::new();
        bpf_record(&mut pending, b"thirteen byte", 0);
        bpf_record(&mut pending, b"gone", BPF_DISCARD);
        bpf_record(&mut pending, &[7; 16], 0);
        let mut scratch = Vec::new();
        let mut at = |offset: usize, cut: usize| {
            let (first, second) = pending.split_at(cut);
            bpf_record_at((first, second), offset, &mut scratch).map(|(r, step)| (r.to_vec(), step))
        };
        assert_eq!(at(0, 64), Some((b"thirteen byte".to_vec(), 24)));
        assert_eq!(at(24, 64), Some((Vec::new(), 16)));
        assert_eq!(at(40, 64), Some((vec![7; 16], 24)));
        assert_eq!(at(64, 64), None);
        assert_eq!(at(40, 48), Some((vec![7; 16], 24)));
        assert_eq!(at(40, 56), Some((vec![7; 16], 24)));
        assert_eq!(at(0, 24), Some((b"thirteen byte".to_vec(), 24)));
    }
}
