//! The vDSO image of this process. The kernel maps the same image into
//! every process, so pfprof's own copy stands for the recorded processes':
//! the recorder writes its build-id into the recording (as perf does), and
//! a report names `[vdso]` frames from its own copy only when that
//! build-id matches (the same kernel), never with another kernel's names.

/// The path perf and pfprof give the vDSO's mappings.
pub const PATH: &str = "[vdso]";

/// The bytes of this process's `[vdso]` mapping, `None` without one.
pub fn own_image() -> Option<Vec<u8>> {
    use std::io::{Read, Seek, SeekFrom};
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    let vdso = super::maps::parse(&maps)
        .into_iter()
        .find(|m| m.path == PATH)?;
    let mut mem = std::fs::File::open("/proc/self/mem").ok()?;
    mem.seek(SeekFrom::Start(vdso.start_avma)).ok()?;
    let len = vdso.end_avma.checked_sub(vdso.start_avma)?;
    let mut image = vec![0; usize::try_from(len).ok()?];
    mem.read_exact(&mut image).ok()?;
    Some(image)
}

/// Makes this process's vDSO answer for [`PATH`] in `symbolizer` (checked
/// against each module's recorded build-id like a file); false without
/// one.
pub fn add_own_image(symbolizer: &mut pfprof_symbolize::Symbolizer) -> bool {
    own_image().is_some_and(|image| {
        symbolizer
            .add_image(std::path::Path::new(PATH), &image)
            .is_ok()
    })
}

/// The build-id of this process's vDSO (the running kernel's).
pub fn own_build_id() -> Option<Vec<u8>> {
    pfprof_symbolize::image_build_id(&own_image()?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    /// Our own vDSO, registered as `[vdso]`, names the code of each
    /// exported `__vdso_*` function (readelf gives their offsets) by that
    /// name, never by its weak alias (`clock_gettime`, `time`), as perf
    /// does; another build-id gets no names.
    #[test]
    fn own_vdso_names_exported_functions() {
        let image = own_image().expect("a [vdso] mapping");
        let id = own_build_id().expect("a build-id");
        let dir = crate::test_dir("vdso");
        let copy = dir.join("vdso.so");
        std::fs::write(&copy, &image).unwrap();
        let out = std::process::Command::new("readelf")
            .args(["-sW", "--dyn-syms"])
            .arg(&copy)
            .output()
            .expect("readelf");
        std::fs::remove_dir_all(&dir).unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        // (value, size, name) of the global `__vdso_*` functions.
        let exported: Vec<(u64, u64, String)> = text
            .lines()
            .filter_map(|line| {
                let f: Vec<&str> = line.split_whitespace().collect();
                let name = f.get(7)?.split('@').next()?;
                (name.starts_with("__vdso_") && f[3] == "FUNC" && f[4] == "GLOBAL").then(|| {
                    (
                        u64::from_str_radix(f[1], 16).unwrap(),
                        f[2].parse::<u64>().unwrap(),
                        name.to_string(),
                    )
                })
            })
            .collect();
        let names: Vec<&str> = exported.iter().map(|e| e.2.as_str()).collect();
        assert!(names.contains(&"__vdso_clock_gettime"), "{names:?}");
        assert!(names.contains(&"__vdso_time"), "{names:?}");

        let mut symbolizer =
            pfprof_symbolize::Symbolizer::new(pfprof_symbolize::Options::default());
        symbolizer.add_image(Path::new(PATH), &image).unwrap();
        for (value, size, name) in &exported {
            assert!(*size > 4, "{name} {size}");
            // The vDSO's PT_LOAD maps offset 0 at svma 0: offsets are svmas.
            let offsets = [*value, value + size / 2, value + size - 1];
            for site in symbolizer.code(Path::new(PATH), Some(&id), &offsets) {
                let site = site.expect("named");
                assert_eq!(&site.frames.last().unwrap().function, name);
            }
        }
        let offsets = [exported[0].0];
        let other = vec![0xee; id.len()];
        assert!(matches!(
            &symbolizer.code(Path::new(PATH), Some(&other), &offsets)[0],
            Err(pfprof_symbolize::Reason::BuildIdMismatch { .. })
        ));
    }
}
