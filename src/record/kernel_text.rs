//! Where the kernel's text lies, for the MMAP record perf reads first in a
//! recording (`[kernel.kallsyms]_text`, [`super::synth::kernel_mmap`]).
//!
//! perf takes `_text` and `_etext` from `/proc/kallsyms`. `_text` is on its
//! first lines, but `_etext` comes after every text symbol (line 117,000 of
//! 122,000 on Debian's 6.x kernels), and the kernel formats each line it
//! passes: reading that far took 50-60 ms of CPU in every recording, a fifth
//! of `pfprof record` of python's imports. On x86_64 the module area's start
//! bounds the image instead (see [`image_bound`]); elsewhere, and when
//! kallsyms' first lines do not name `_text`, the whole file is read.

use crate::sys::procfs;

/// Bytes of kallsyms read for `_text`: the kernel formats only what is read.
const HEAD_BYTES: usize = 4096;

/// The kernel's text: `_text`, and `_etext` or a bound on it. None when the
/// addresses are hidden (kptr_restrict) or kallsyms cannot be read.
pub(super) fn read() -> Option<(u64, u64)> {
    let head = procfs::kallsyms_head(HEAD_BYTES).and_then(|h| pfprof_symbolize::kernel_text(&h));
    if let Some((start, _)) = head {
        if let Some(end) = image_bound(start, procfs::lowest_module_address()) {
            return Some((start, end));
        }
    }
    procfs::kallsyms().and_then(|k| pfprof_symbolize::kernel_text(&k))
}

/// An end for the kernel's image that starts at `text`: on x86_64 the
/// image lies in the gigabyte from `__START_KERNEL_map` and the module
/// area starts where that room ends (`MODULES_VADDR`: 0xffffffffc0000000
/// with `CONFIG_RANDOMIZE_BASE`, Debian's and most kernels'; 512 MiB
/// earlier without it, where the lowest loaded module bounds it instead).
/// No IP lies between `_etext` and the bound (only the image's data), so
/// perf names kernel frames from this mapping as from its own. None on
/// other architectures or for a `text` outside that room.
fn image_bound(text: u64, lowest_module: Option<u64>) -> Option<u64> {
    const START_KERNEL_MAP: u64 = 0xffff_ffff_8000_0000;
    const MODULES_VADDR: u64 = 0xffff_ffff_c000_0000;
    if !cfg!(target_arch = "x86_64") || !(START_KERNEL_MAP..MODULES_VADDR).contains(&text) {
        return None;
    }
    Some(
        lowest_module
            .filter(|&m| m > text)
            .map_or(MODULES_VADDR, |m| m.min(MODULES_VADDR)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_module_area_bounds_the_image() {
        if !cfg!(target_arch = "x86_64") {
            assert_eq!(image_bound(0xffffffff81000000, None), None);
            return;
        }
        let text = 0xffffffff81000000;
        assert_eq!(image_bound(text, None), Some(0xffffffffc0000000));
        assert_eq!(
            image_bound(text, Some(0xffffffffa0400000)),
            Some(0xffffffffa0400000)
        );
        // A module above the area or below the text bounds nothing.
        assert_eq!(
            image_bound(text, Some(0xffffffffc0a00000)),
            Some(0xffffffffc0000000)
        );
        assert_eq!(image_bound(text, Some(0x1000)), Some(0xffffffffc0000000));
        // Not where x86_64 puts a kernel: read kallsyms to `_etext`.
        assert_eq!(image_bound(0xffffffffc1000000, None), None);
        assert_eq!(image_bound(0xffff800000000000, None), None);
    }

    /// On this machine: `_text` as the whole of kallsyms gives it, and the
    /// bound at or past its `_etext`.
    #[test]
    fn the_running_kernels_text() {
        let Some(whole) = procfs::kallsyms().and_then(|k| pfprof_symbolize::kernel_text(&k)) else {
            return; // hidden addresses (not root)
        };
        let (start, end) = read().unwrap();
        assert_eq!(start, whole.0);
        assert!(end >= whole.1, "{end:#x} < {:#x}", whole.1);
    }
}
