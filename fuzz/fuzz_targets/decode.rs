//! The recording decoder and the analysis behind `report`, on arbitrary
//! bytes: must never panic, abort or allocate beyond the input's size.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    pfprof::fuzzing::recording(data);
});
