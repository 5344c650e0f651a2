//! The ELF/section/symbol/DWARF/debuglink/relocation/unwind reader of
//! pfprof-symbolize, on arbitrary bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    pfprof::fuzzing::elf(data);
});
