//! The crate's only `unsafe`: mapping a file, and calling the C++ runtime's
//! demangler.

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::fs::File;
use std::sync::OnceLock;

use memmap2::Mmap;

/// Maps `file` read-only.
pub(crate) fn map(file: &File) -> std::io::Result<Mmap> {
    // SAFETY: the mapping is private and read-only; we never hand out
    // references that outlive it. If another process truncates the file while
    // it is mapped, reads past the new end raise SIGBUS: this is the usual
    // caveat of mapping files and is documented in the crate docs.
    unsafe { Mmap::map(file) }
}

/// Lets the kernel take back the pages of `map` that reads brought in:
/// they stay in the page cache, but leave this process's RSS until read
/// again (a minor fault each). A long run keeps its files mapped; after a
/// whole symbol table was read once, only the names asked for are read
/// again.
pub(crate) fn release_pages(map: &Mmap) {
    // SAFETY: the mapping is private, read-only and never written, so
    // MADV_DONTNEED only drops its page-table entries: the next read of a
    // page maps the file's page again, with the same bytes (the caveat of
    // `map` about truncation stays as it was). No reference into the
    // mapping is invalidated.
    let _ = unsafe { map.unchecked_advise(memmap2::UncheckedAdvice::DontNeed) };
}

/// `abi::__cxa_demangle`'s signature (the Itanium C++ ABI).
type CxaDemangle = unsafe extern "C" fn(
    mangled: *const c_char,
    buffer: *mut c_char,
    length: *mut usize,
    status: *mut c_int,
) -> *mut c_char;

/// The longest name given to the C++ runtime. Its demangler keeps two
/// arrays sized by the name's length on the stack (about 70 bytes per byte
/// of name), so a hostile name of a megabyte would overflow a thread's
/// stack; 8 KiB needs about 600 KiB, and is 15 times the longest name in
/// libLLVM. Longer names go to cpp_demangle.
pub(crate) const MAX_CXA_NAME: usize = 8 * 1024;

/// The C++ runtime's demangler (libstdc++'s `__cxa_demangle`, the code
/// `c++filt` runs), if libstdc++ can be loaded.
fn cxa_demangle_fn() -> Option<CxaDemangle> {
    static FN: OnceLock<Option<CxaDemangle>> = OnceLock::new();
    *FN.get_or_init(|| {
        // SAFETY: dlopen and dlsym get NUL-terminated literals. The handle
        // is never closed, so the function pointer stays valid for the
        // process's life; the symbol has the ABI's signature above.
        unsafe {
            let handle = libc::dlopen(
                c"libstdc++.so.6".as_ptr(),
                libc::RTLD_NOW | libc::RTLD_LOCAL,
            );
            if handle.is_null() {
                return None;
            }
            let symbol = libc::dlsym(handle, c"__cxa_demangle".as_ptr());
            if symbol.is_null() {
                return None;
            }
            Some(std::mem::transmute::<*mut c_void, CxaDemangle>(symbol))
        }
    })
}

/// `name` demangled by the C++ runtime, `None` when it is not a valid
/// mangled name, holds a NUL, is longer than [`MAX_CXA_NAME`], or
/// libstdc++ is not there.
pub(crate) fn cxa_demangle(name: &str) -> Option<String> {
    if name.len() > MAX_CXA_NAME {
        return None;
    }
    let demangle = cxa_demangle_fn()?;
    let mangled = CString::new(name).ok()?;
    let mut status: c_int = -1;
    // SAFETY: `mangled` is NUL-terminated and outlives the call; a null
    // buffer asks for a fresh malloc'd result, and `status` is a live
    // local. The function is reentrant (it keeps no state).
    let out = unsafe {
        demangle(
            mangled.as_ptr(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            &mut status,
        )
    };
    if out.is_null() {
        return None;
    }
    // SAFETY: on success `out` is a NUL-terminated string malloc'd by the
    // runtime, read once here and then freed with the matching free.
    let text = unsafe {
        let text = CStr::from_ptr(out).to_string_lossy().into_owned();
        libc::free(out.cast());
        text
    };
    (status == 0).then_some(text)
}
