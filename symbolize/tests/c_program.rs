//! Compiles a tiny C program at test time (`cc -g -O1`, PIE and non-PIE,
//! plus stripped copies with `.gnu_debuglink`) and checks the crate against
//! binutils (`addr2line -f -i`, `readelf`, `nm`) on the same addresses.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use pfprof_symbolize::{Options, Reason, Symbolizer};

const SOURCE: &str = r#"
char bss_buf[65536];
int data_var[64] = {1, 2, 3};
int *const ro_ptrs[4] = {&data_var[0], &data_var[1], &data_var[2], &data_var[3]};

static inline __attribute__((always_inline)) int inner(int x) {
    return bss_buf[x & 0xffff] * 3 + data_var[x & 63];
}

__attribute__((noinline)) int outer(int x) {
    int r = inner(x);
    r += inner(r + 7);
    return r + *ro_ptrs[x & 3];
}

int main(int argc, char **argv) {
    (void)argv;
    return outer(argc);
}
"#;

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 output")
}

/// A built variant of the test program.
struct Build {
    _dir: TempDir,
    /// The binary with symbols and DWARF.
    full: PathBuf,
    /// `strip --strip-all` copy with `.gnu_debuglink` to `<name>.debug`.
    stripped: PathBuf,
}

struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn build(name: &str, flags: &[&str]) -> Build {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "pfprof-symbolize-{}-{}-{}",
        name,
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    let source = dir.join("prog.c");
    std::fs::write(&source, SOURCE).expect("write source");
    let full = dir.join(name);
    run(Command::new("cc")
        .args(["-g", "-O1"])
        .args(flags)
        .arg("-o")
        .arg(&full)
        .arg(&source));
    let debug = dir.join(format!("{name}.debug"));
    run(Command::new("objcopy")
        .arg("--only-keep-debug")
        .arg(&full)
        .arg(&debug));
    let stripped = dir.join(format!("{name}.stripped"));
    // objcopy records the debuglink by file name; run it in the dir.
    run(Command::new("objcopy")
        .current_dir(&dir)
        .arg("--strip-all")
        .arg(format!("--add-gnu-debuglink={name}.debug"))
        .arg(&full)
        .arg(&stripped));
    Build {
        _dir: TempDir(dir),
        full,
        stripped,
    }
}

/// PT_LOAD (p_offset, p_vaddr, p_filesz, p_memsz) as readelf prints them.
fn loads(path: &Path) -> Vec<(u64, u64, u64, u64)> {
    let text = run(Command::new("readelf").arg("-lW").arg(path));
    text.lines()
        .filter(|l| l.trim_start().starts_with("LOAD"))
        .map(|l| {
            let f: Vec<u64> = l
                .split_whitespace()
                .skip(1)
                .take(5)
                .map(|x| u64::from_str_radix(x.trim_start_matches("0x"), 16).unwrap())
                .collect();
            (f[0], f[1], f[3], f[4])
        })
        .collect()
}

/// svma → file offset (virtual past p_filesz), computed from readelf output.
fn file_offset(path: &Path, svma: u64) -> u64 {
    loads(path)
        .into_iter()
        .find(|&(_, vaddr, _, memsz)| svma >= vaddr && svma < vaddr + memsz)
        .map(|(offset, vaddr, _, _)| svma - vaddr + offset)
        .unwrap_or_else(|| panic!("{svma:#x} in no PT_LOAD"))
}

/// `nm -S` symbols: name → (svma, size).
fn nm(path: &Path) -> HashMap<String, (u64, u64)> {
    let text = run(Command::new("nm").arg("-S").arg(path));
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() == 4).then(|| {
                (
                    f[3].to_string(),
                    (
                        u64::from_str_radix(f[0], 16).unwrap(),
                        u64::from_str_radix(f[1], 16).unwrap(),
                    ),
                )
            })
        })
        .collect()
}

/// The section readelf -S says contains `svma` (SHF_ALLOC, non-TLS).
fn readelf_section(path: &Path, svma: u64) -> Option<String> {
    let text = run(Command::new("readelf").arg("-SW").arg(path));
    text.lines()
        .filter_map(|l| {
            let l = l.split_once(']')?.1;
            let f: Vec<&str> = l.split_whitespace().collect();
            let addr = u64::from_str_radix(f.get(2)?, 16).ok()?;
            let size = u64::from_str_radix(f.get(4)?, 16).ok()?;
            let flags = f.get(6)?;
            (flags.contains('A') && !flags.contains('T') && svma >= addr && svma < addr + size)
                .then(|| f[0].to_string())
        })
        .next()
}

/// binutils `addr2line -f -i`: per svma, (function, "file:line") innermost first.
fn binutils(path: &Path, svmas: &[u64]) -> Vec<Vec<(String, String)>> {
    let mut cmd = Command::new("addr2line");
    cmd.args(["-f", "-i", "-a", "-e"]).arg(path);
    for svma in svmas {
        cmd.arg(format!("{svma:#x}"));
    }
    let text = run(&mut cmd);
    let mut out: Vec<Vec<(String, String)>> = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if line.starts_with("0x") {
            out.push(Vec::new());
        } else {
            let location = lines.next().unwrap_or_default();
            // Drop " (discriminator N)".
            let location = location.split(" (").next().unwrap_or_default();
            out.last_mut()
                .expect("address line first")
                .push((line.to_string(), location.to_string()));
        }
    }
    out
}

/// Every address of `outer` symbolized by us and by binutils, same answers;
/// and some of them are inside the inlined `inner`.
fn check_code(symbolized: &Path, reference: &Path) {
    let symbols = nm(reference);
    let (start, size) = symbols["outer"];
    assert!(size > 0);
    let svmas: Vec<u64> = (start..start + size).collect();
    let offsets: Vec<u64> = svmas.iter().map(|&a| file_offset(reference, a)).collect();
    let want = binutils(reference, &svmas);
    let mut symbolizer = Symbolizer::new(Options::default());
    let got = symbolizer.code(symbolized, None, &offsets);
    let mut inlined_seen = 0;
    for ((svma, got), want) in svmas.iter().zip(&got).zip(&want) {
        let site = got.as_ref().unwrap_or_else(|e| panic!("{svma:#x}: {e}"));
        assert_eq!(site.svma, *svma);
        let got: Vec<(String, String)> = site
            .frames
            .iter()
            .map(|f| {
                (
                    f.function.clone(),
                    format!(
                        "{}:{}",
                        f.file.as_deref().unwrap_or("??"),
                        f.line.unwrap_or(0)
                    ),
                )
            })
            .collect();
        assert_eq!(&got, want, "svma {svma:#x}");
        let last = site.frames.last().expect("frames never empty");
        assert_eq!(last.function, "outer");
        assert!(!last.inlined);
        assert!(site.frames[..site.frames.len() - 1]
            .iter()
            .all(|f| f.inlined));
        if site.frames.len() > 1 {
            assert_eq!(site.frames[0].function, "inner");
            assert!(site.frames[0].file.as_deref().unwrap().ends_with("/prog.c"));
            inlined_seen += 1;
        }
    }
    assert!(inlined_seen > 0, "no inlined frame of `inner` found");
}

fn check_data(symbolized: &Path, reference: &Path, expect_data_rel_ro: bool) {
    let symbols = nm(reference);
    let cases = [
        ("bss_buf", 0x3000, ".bss"),
        ("bss_buf", 0xffff, ".bss"),
        ("data_var", 8, ".data"),
        (
            "ro_ptrs",
            16,
            if expect_data_rel_ro {
                ".data.rel.ro"
            } else {
                ""
            },
        ),
    ];
    let mut symbolizer = Symbolizer::new(Options::default());
    for (name, offset, section) in cases {
        let svma = symbols[name].0 + offset;
        let file_offset = file_offset(reference, svma);
        let got = symbolizer
            .data(symbolized, None, &[file_offset])
            .pop()
            .unwrap()
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(got.svma, svma, "{name}");
        assert_eq!(got.symbol.as_deref(), Some(name));
        assert_eq!(got.symbol_offset, offset, "{name}");
        let want_section = readelf_section(reference, svma);
        assert_eq!(got.section, want_section, "{name}");
        if !section.is_empty() {
            assert_eq!(got.section.as_deref(), Some(section), "{name}");
        }
    }
}

fn variants() -> Vec<(&'static str, Vec<&'static str>, bool)> {
    vec![
        ("pie", vec!["-fPIE", "-pie"], true),
        ("nopie", vec!["-fno-PIE", "-no-pie"], false),
        (
            "pie-nobuildid",
            vec!["-fPIE", "-pie", "-Wl,--build-id=none"],
            true,
        ),
    ]
}

#[test]
fn code_matches_binutils() {
    for (name, flags, _) in variants() {
        let build = build(name, &flags);
        check_code(&build.full, &build.full);
        // Stripped: symbols and DWARF come from the debuglinked file.
        check_code(&build.stripped, &build.full);
    }
}

#[test]
fn data_matches_readelf_and_nm() {
    for (name, flags, rel_ro) in variants() {
        let build = build(name, &flags);
        check_data(&build.full, &build.full, rel_ro);
        check_data(&build.stripped, &build.full, rel_ro);
    }
}

#[test]
fn module_info_of_stripped_copy_names_the_debug_file() {
    let build = build("info", &["-fPIE", "-pie"]);
    let mut symbolizer = Symbolizer::new(Options::default());
    let info = symbolizer
        .module_info(&build.stripped, None)
        .unwrap()
        .clone();
    let debug = build.stripped.with_file_name("info.debug");
    assert_eq!(info.debug_file.as_deref(), Some(debug.as_path()));
    assert!(info.has_dwarf && info.has_symbols);
    assert_eq!(
        info.build_id,
        pfprof_symbolize::read_build_id(&build.full),
        "stripped copy keeps the build-id"
    );
    assert!(info.build_id.is_some());
    let bss = info.sections.iter().find(|s| s.name == ".bss").unwrap();
    assert!(bss.nobits);
    assert!(bss.size >= 65536);
    // A fresh symbolizer: the same build-id would share the cached module.
    let full = Symbolizer::new(Options::default())
        .module_info(&build.full, None)
        .unwrap()
        .clone();
    assert_eq!(full.debug_file, None);
    assert!(full.has_dwarf);
}

#[test]
fn build_id_mismatch_and_missing_files() {
    let build = build("mismatch", &["-fPIE", "-pie"]);
    let real = pfprof_symbolize::read_build_id(&build.full).expect("build-id");
    let mut symbolizer = Symbolizer::new(Options::default());
    let got = symbolizer.code(&build.full, Some(b"\x01\x02"), &[0, 1, 2]);
    let want = Reason::BuildIdMismatch {
        expected: vec![1, 2],
        found: Some(real.clone()),
    };
    assert_eq!(
        got,
        vec![Err(want.clone()), Err(want.clone()), Err(want.clone())]
    );
    assert_eq!(
        symbolizer.data(&build.full, Some(b"\x01\x02"), &[0]),
        vec![Err(want)]
    );
    // The right build-id is accepted.
    let outer = nm(&build.full)["outer"].0;
    let ok = symbolizer.code(&build.full, Some(&real), &[file_offset(&build.full, outer)]);
    assert_eq!(
        ok[0].as_ref().unwrap().frames.last().unwrap().function,
        "outer"
    );
    // Missing file and offsets outside every segment.
    let missing = build.full.with_file_name("does-not-exist");
    assert_eq!(
        symbolizer.code(&missing, None, &[0]),
        vec![Err(Reason::MissingFile)]
    );
    assert_eq!(
        symbolizer.code(&build.full, None, &[u64::MAX / 2]),
        vec![Err(Reason::NotInSegment)]
    );
    // The debuglinked file with the wrong CRC/build-id is not used.
    std::fs::write(
        build.stripped.with_file_name("mismatch.debug"),
        std::fs::read(&build.full)
            .unwrap()
            .iter()
            .rev()
            .copied()
            .collect::<Vec<u8>>(),
    )
    .unwrap();
    let mut fresh = Symbolizer::new(Options::default());
    let info = fresh.module_info(&build.stripped, None).unwrap();
    assert_eq!(info.debug_file, None);
    assert!(!info.has_dwarf);
    assert_eq!(
        fresh.code(&build.stripped, None, &[file_offset(&build.full, outer)]),
        vec![Err(Reason::NoSymbol)]
    );
}
