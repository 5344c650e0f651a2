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

/// The build-id of this process's vDSO (the running kernel's).
pub fn own_build_id() -> Option<Vec<u8>> {
    pfprof_symbolize::image_build_id(&own_image()?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    /// Our own vDSO, registered as `[vdso]`, names the code of
    /// `__vdso_clock_gettime` (readelf gives its offset); another build-id
    /// gets no names.
    #[test]
    fn own_vdso_names_clock_gettime() {
        let image = own_image().expect("a [vdso] mapping");
        let id = own_build_id().expect("a build-id");
        let dir = std::env::temp_dir().join(format!("pfprof-vdso-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let copy = dir.join("vdso.so");
        std::fs::write(&copy, &image).unwrap();
        let out = std::process::Command::new("readelf")
            .args(["-sW", "--dyn-syms"])
            .arg(&copy)
            .output()
            .expect("readelf");
        std::fs::remove_dir_all(&dir).unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let (value, size) = text
            .lines()
            .find_map(|line| {
                let f: Vec<&str> = line.split_whitespace().collect();
                let name = f.get(7)?.split('@').next()?;
                (name == "__vdso_clock_gettime" && f[3] == "FUNC").then(|| {
                    (
                        u64::from_str_radix(f[1], 16).unwrap(),
                        f[2].parse::<u64>().unwrap(),
                    )
                })
            })
            .expect("__vdso_clock_gettime in the vDSO's symbols");
        assert!(size > 4, "{size}");

        let mut symbolizer =
            pfprof_symbolize::Symbolizer::new(pfprof_symbolize::Options::default());
        symbolizer.add_image(Path::new(PATH), &image).unwrap();
        // The vDSO's PT_LOAD maps offset 0 at svma 0: offsets are svmas.
        let offsets = [value, value + size / 2, value + size - 1];
        for site in symbolizer.code(Path::new(PATH), Some(&id), &offsets) {
            let site = site.expect("named");
            // `clock_gettime` is its weak alias, at the same address.
            let name = &site.frames.last().unwrap().function;
            assert!(
                name == "__vdso_clock_gettime" || name == "clock_gettime",
                "{name}"
            );
        }
        let other = vec![0xee; id.len()];
        assert!(matches!(
            &symbolizer.code(Path::new(PATH), Some(&other), &offsets)[0],
            Err(pfprof_symbolize::Reason::BuildIdMismatch { .. })
        ));
    }
}
