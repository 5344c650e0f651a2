//! Debug files with their sections stored plain: the copy a build-id cache
//! keeps beside a compressed debug file (perf's `xx/yyyy…/debug` entry), so
//! that later runs map the DWARF instead of inflating it. Debian's
//! libc6-dbg holds libc's DWARF in 4 MB of zlib, 10 MB plain: about 20 ms
//! of inflate in every profile that names a libc frame, for a copy of
//! 10 MB written once.

use std::collections::HashMap;

use object::{Object, ObjectSection};

/// The file at `path` as [`with_plain_sections`] rewrites it; `None` also
/// when it cannot be read.
pub fn plain_copy(path: &std::path::Path) -> Option<Vec<u8>> {
    let map = crate::elf::map_file(path).ok()?;
    with_plain_sections(&map)
}

/// The most bytes a plain copy is made of (the file plus its sections
/// plain): it is built in memory. Larger debug files stay as they are.
pub const MAX_PLAIN_BYTES: u64 = 1 << 30;

/// `data` (an ELF file) rewritten with each of its compressed sections
/// stored plain, all else as it was (symbols, notes and build-id
/// included); `None` when no section is compressed, or when the file
/// cannot be read or rewritten, or would take more than
/// [`MAX_PLAIN_BYTES`] (then nothing is cached: lookups inflate).
pub fn with_plain_sections(data: &[u8]) -> Option<Vec<u8>> {
    let file = crate::elf::parse_elf(data)?;
    // Checked before anything is inflated: a header may claim any size.
    let plain_bytes = (file.sections())
        .filter_map(|s| s.compressed_data().ok())
        .map(|c| c.uncompressed_size)
        .fold(data.len() as u64, u64::saturating_add);
    if plain_bytes > MAX_PLAIN_BYTES {
        return None;
    }
    // By section index: names need not be unique.
    let mut plain: HashMap<usize, Vec<u8>> = HashMap::new();
    for section in file.sections().filter(crate::dwarf::is_compressed) {
        let bytes = section.uncompressed_data().ok()?.into_owned();
        plain.insert(section.index().0, bytes);
    }
    if plain.is_empty() {
        return None;
    }
    let mut builder = object::build::elf::Builder::read(data).ok()?;
    // The builder's sections are the file's in order, without the null
    // section at index 0.
    for (i, section) in builder.sections.iter_mut().enumerate() {
        if let Some(bytes) = plain.remove(&(i + 1)) {
            section.sh_size = bytes.len() as u64;
            let flags = section.sh_flags.0 & !object::elf::SHF_COMPRESSED.0;
            section.sh_flags = object::elf::SectionFlags(flags);
            section.data = object::build::elf::SectionData::Data(bytes.into());
        }
    }
    if !plain.is_empty() {
        return None;
    }
    let mut out = Vec::new();
    builder.write(&mut out).ok()?;
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use object::ObjectSymbol;

    /// A file with no compressed section is left alone.
    #[test]
    fn a_plain_file_is_not_rewritten() {
        let exe = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        assert_eq!(with_plain_sections(&exe), None);
        assert_eq!(with_plain_sections(b"not an ELF file"), None);
    }

    /// A copy of this test binary with its DWARF compressed (by binutils'
    /// objcopy), stored plain again: every section's bytes as they were
    /// before compression, none marked compressed, the build-id kept.
    #[test]
    fn compressed_sections_are_stored_plain() {
        let exe = std::env::current_exe().unwrap();
        let dir = std::env::temp_dir().join(format!("pfprof-plain-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let squeezed = dir.join("squeezed");
        let status = std::process::Command::new("objcopy")
            .arg("--compress-debug-sections=zlib")
            .arg(&exe)
            .arg(&squeezed)
            .status()
            .expect("objcopy (binutils) runs");
        assert!(status.success());
        let original = std::fs::read(&exe).unwrap();
        let squeezed = std::fs::read(&squeezed).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        let plain = with_plain_sections(&squeezed).expect("rewritten");
        let (before, after) = (
            crate::elf::parse_elf(&original).unwrap(),
            crate::elf::parse_elf(&plain).unwrap(),
        );
        assert_eq!(crate::elf::build_id(&after), crate::elf::build_id(&before));
        let mut debug_sections = 0;
        for section in before.sections() {
            let name = section.name().unwrap();
            let rewritten = after.section_by_name(name).expect(name);
            let range = rewritten.compressed_file_range().unwrap();
            assert_eq!(range.format, object::CompressionFormat::None, "{name}");
            // The builder writes the symbol and string tables anew (same
            // symbols, compared below); the DWARF is byte for byte.
            if name.starts_with(".debug_") {
                assert!(
                    rewritten.data().unwrap() == section.data().unwrap(),
                    "{name}"
                );
                debug_sections += 1;
            }
        }
        let symbols = |file: &object::File<'_>| -> Vec<(String, u64, u64)> {
            let mut out: Vec<_> = (file.symbols())
                .map(|s| (s.name().unwrap().to_string(), s.address(), s.size()))
                .collect();
            out.sort();
            out
        };
        assert!(symbols(&after) == symbols(&before), "symbols differ");
        assert!(debug_sections >= 4, "{debug_sections} DWARF sections");
    }
}
