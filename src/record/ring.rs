//! The mmap'ed perf ring buffer of one CPU: a metadata page followed by
//! 2^n data pages that the kernel fills and we drain.
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
use std::sync::atomic::{AtomicU64, Ordering};

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
