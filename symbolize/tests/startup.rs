//! Start-up analysis against binutils: [`Symbolizer::relocations`] on
//! shared libraries compiled at test time (plain, `-z pack-relative-relocs`,
//! `-z now`) and on system libraries, compared with `readelf -r/-d/-l/-S`;
//! [`Symbolizer::function_ranges`] compared with `nm -S`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use pfprof_symbolize::{
    read_build_id, Options, PageRelocations, Reason, RelocType, RelocationInfo, Symbolizer,
};

/// Entries in the pointer table of the test library.
const TABLE_LEN: usize = 4096;

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 output")
}

struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "pfprof-symbolize-startup-{}-{}-{}",
            name,
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A shared library with a page-aligned table of `TABLE_LEN` pointers in
/// `.data.rel.ro` (RELATIVE relocations, packable into RELR), a GOT entry
/// for `environ` (GLOB_DAT) and a PLT call to `puts` (JUMP_SLOT).
fn library_source() -> String {
    let init = vec!["&x"; TABLE_LEN].join(",");
    format!(
        "#include <stdio.h>\n\
         extern char **environ;\n\
         static int x;\n\
         __attribute__((aligned(4096))) static const void *const tab[{TABLE_LEN}] = {{{init}}};\n\
         const void *get(int i) {{ puts(\"get\"); return environ ? tab[i] : 0; }}\n"
    )
}

const PROGRAM: &str = r#"
#include <stdio.h>
static __attribute__((noinline)) int helper(int x) { return x * 3 + 1; }
int main(int argc, char **argv) {
    (void)argv;
    printf("%d\n", helper(argc));
    return 0;
}
"#;

/// Compiles `source` with `cc` and `flags` into `dir/name`.
fn compile(dir: &TempDir, name: &str, source: &str, flags: &[&str]) -> PathBuf {
    let src = dir.0.join(format!("{name}.c"));
    std::fs::write(&src, source).expect("write source");
    let out = dir.0.join(name);
    run(Command::new("cc")
        .args(["-O1"])
        .args(flags)
        .arg("-o")
        .arg(&out)
        .arg(&src));
    out
}

fn hex(s: &str) -> Option<u64> {
    u64::from_str_radix(s.trim_start_matches("0x"), 16).ok()
}

/// What `readelf -r` lists: (target svma, type without prefix) of RELA/REL
/// entries, RELR addresses, and the "N offsets" RELR count it prints.
#[derive(Debug, Default)]
struct ReadelfRelocs {
    entries: Vec<(u64, String)>,
    relr: Vec<u64>,
    relr_count: u64,
}

fn readelf_relocs(path: &Path) -> ReadelfRelocs {
    let text = run(Command::new("readelf").arg("-rW").arg(path));
    let mut out = ReadelfRelocs::default();
    let mut in_relr = false;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("Relocation section '") {
            in_relr = rest.starts_with(".relr");
            continue;
        }
        let fields: Vec<&str> = line.split_whitespace().collect();
        if in_relr {
            if fields.len() == 2 && fields[1] == "offsets" {
                out.relr_count = fields[0].parse().expect("relr count");
            } else if let Some(addr) = fields
                .first()
                .filter(|f| f.len() == 16)
                .and_then(|f| hex(f))
            {
                out.relr.push(addr);
            }
            continue;
        }
        if fields.len() >= 3 && fields[0].len() == 16 && fields[2].starts_with("R_X86_64_") {
            let offset = hex(fields[0]).expect("offset");
            let kind = fields[2].to_string();
            out.entries.push((offset, kind));
        }
    }
    out
}

/// `readelf -d`: (bind_now, uses_relr).
fn readelf_dynamic(path: &Path) -> (bool, bool) {
    let text = run(Command::new("readelf").arg("-dW").arg(path));
    let mut bind_now = false;
    let mut relr = false;
    for line in text.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.get(1).copied() {
            Some("(BIND_NOW)") => bind_now = true,
            Some("(FLAGS)") if words.contains(&"BIND_NOW") => bind_now = true,
            Some("(FLAGS_1)") if words.contains(&"NOW") => bind_now = true,
            Some("(RELR)") => relr = true,
            _ => {}
        }
    }
    (bind_now, relr)
}

/// `readelf -l`: the PT_GNU_RELRO svma range.
fn readelf_relro(path: &Path) -> Option<std::ops::Range<u64>> {
    let text = run(Command::new("readelf").arg("-lW").arg(path));
    text.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.first() == Some(&"GNU_RELRO")).then(|| {
            let vaddr = hex(f[2]).expect("vaddr");
            vaddr..vaddr + hex(f[5]).expect("memsz")
        })
    })
}

/// `readelf -S`: SHF_ALLOC sections (name, addr, size, tls).
fn readelf_sections(path: &Path) -> Vec<(String, u64, u64, bool)> {
    let text = run(Command::new("readelf").arg("-SW").arg(path));
    text.lines()
        .filter_map(|l| {
            let l = l.split_once(']')?.1;
            let f: Vec<&str> = l.split_whitespace().collect();
            let addr = hex(f.get(2)?)?;
            let size = hex(f.get(4)?)?;
            let flags = f.get(6)?;
            flags
                .contains('A')
                .then(|| (f[0].to_string(), addr, size, flags.contains('T')))
        })
        .collect()
}

/// `nm -S`: name → (svma, size) of text symbols (T/t/i).
fn nm_functions(path: &Path) -> HashMap<String, (u64, u64)> {
    let text = run(Command::new("nm").arg("-S").arg(path));
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() == 4 && matches!(f[2], "T" | "t" | "i" | "W")).then(|| {
                let name = f[3].split('@').next().unwrap_or_default().to_string();
                (name, (hex(f[0]).unwrap(), hex(f[1]).unwrap()))
            })
        })
        .collect()
}

/// `readelf -l`: svma → file offset through PT_LOAD.
fn file_offset(path: &Path, svma: u64) -> u64 {
    let text = run(Command::new("readelf").arg("-lW").arg(path));
    text.lines()
        .filter(|l| l.trim_start().starts_with("LOAD"))
        .find_map(|l| {
            let f: Vec<u64> = l
                .split_whitespace()
                .skip(1)
                .take(5)
                .filter_map(hex)
                .collect();
            (svma >= f[1] && svma < f[1] + f[4]).then(|| svma - f[1] + f[0])
        })
        .unwrap_or_else(|| panic!("{svma:#x} in no PT_LOAD"))
}

/// The type readelf names `name`.
fn reloc_type(name: &str) -> RelocType {
    (0..256)
        .map(RelocType)
        .find(|t| t.name() == name)
        .unwrap_or_else(|| panic!("{name}: no such x86_64 relocation type"))
}

/// The [`RelocationInfo`] binutils' output implies.
fn expected(path: &Path) -> RelocationInfo {
    let relocs = readelf_relocs(path);
    let (bind_now, uses_relr) = readelf_dynamic(path);
    let sections = readelf_sections(path);
    let mut by_type = BTreeMap::new();
    let mut lowest: BTreeMap<u64, u64> = BTreeMap::new();
    let mut lazy = BTreeSet::new();
    let mut touch = |svma: u64| {
        for page in (svma >> 12)..=((svma + 7) >> 12) {
            let at = svma.max(page << 12);
            let entry = lowest.entry(page).or_insert(at);
            *entry = (*entry).min(at);
        }
    };
    for (offset, kind) in &relocs.entries {
        *by_type.entry(reloc_type(kind)).or_insert(0) += 1;
        match kind.as_str() {
            "R_X86_64_NONE" => {}
            "R_X86_64_JUMP_SLOT" if !bind_now => {
                lazy.insert(offset >> 12);
            }
            _ => touch(*offset),
        }
    }
    for &addr in &relocs.relr {
        touch(addr);
    }
    assert_eq!(
        relocs.relr.len() as u64,
        relocs.relr_count,
        "readelf relr listing"
    );
    let section_at = |svma: u64| {
        sections
            .iter()
            .filter(|(_, addr, size, _)| svma >= *addr && svma - addr < *size)
            .min_by_key(|(_, _, size, tls)| (*tls, *size))
            .map(|(name, ..)| name.clone())
    };
    // What is on each page: every target but NONE, RELR as RELATIVE.
    let mut page_writes: BTreeMap<u64, PageRelocations> = BTreeMap::new();
    let targets = relocs
        .entries
        .iter()
        .filter(|(_, kind)| kind != "R_X86_64_NONE")
        .map(|(offset, kind)| (*offset, kind.as_str()))
        .chain(relocs.relr.iter().map(|&a| (a, "R_X86_64_RELATIVE")));
    for (svma, kind) in targets {
        for page in (svma >> 12)..=((svma + 7) >> 12) {
            let on_page = page_writes.entry(page).or_default();
            *on_page.by_type.entry(reloc_type(kind)).or_insert(0) += 1;
            on_page.sections.extend(section_at(svma.max(page << 12)));
        }
    }
    RelocationInfo {
        by_type,
        relr: relocs.relr_count,
        uses_relr,
        bind_now,
        relro: readelf_relro(path),
        pages: lowest.keys().copied().collect(),
        page_sections: lowest
            .iter()
            .filter_map(|(&page, &at)| Some((page, section_at(at)?)))
            .collect(),
        lazy_jump_slot_pages: lazy.into_iter().collect(),
        page_writes,
    }
}

/// The three link variants of the pointer-table library match readelf exactly.
#[test]
fn test_library_relocations_match_readelf() {
    let dir = TempDir::new("lib");
    let source = library_source();
    // (name, link flags, uses RELR, bind now)
    let cases: &[(&str, &[&str], bool, bool)] = &[
        ("plain", &[], false, false),
        ("relr", &["-Wl,-z,pack-relative-relocs"], true, false),
        ("now", &["-Wl,-z,now"], false, true),
        (
            "relr-now",
            &["-Wl,-z,pack-relative-relocs", "-Wl,-z,now"],
            true,
            true,
        ),
    ];
    let mut symbolizer = Symbolizer::new(Options::default());
    for &(name, flags, relr, bind_now) in cases {
        let mut all = vec!["-shared", "-fPIC"];
        all.extend_from_slice(flags);
        let lib = compile(&dir, &format!("lib{name}.so"), &source, &all);
        let got = symbolizer.relocations(&lib, None).expect(name);
        let want = expected(&lib);
        assert_eq!(got, want, "{name}");
        assert_eq!(got.uses_relr, relr, "{name}");
        assert_eq!(got.bind_now, bind_now, "{name}");
        assert!(got.relro.is_some(), "{name}");

        // The table: TABLE_LEN RELATIVE relocations, either as RELA or RELR.
        let relative = got.by_type.get(&RelocType::RELATIVE).copied().unwrap_or(0);
        if relr {
            assert_eq!(relative, 0, "{name}");
            assert!(got.relr >= TABLE_LEN as u64, "{name}: {}", got.relr);
        } else {
            assert_eq!(got.relr, 0, "{name}");
            assert!(relative >= TABLE_LEN as u64, "{name}: {relative}");
        }
        // crt1/crti add GLOB_DATs of their own; environ is one more.
        assert!(
            got.by_type.get(&reloc_type("R_X86_64_GLOB_DAT")) >= Some(&1),
            "{name}: environ"
        );
        assert_eq!(
            got.by_type.get(&RelocType::JUMP_SLOT),
            Some(&1),
            "{name}: puts"
        );
        // The page-aligned table fills exactly 8 pages of .data.rel.ro.
        let table_pages = got
            .page_sections
            .values()
            .filter(|s| *s == ".data.rel.ro")
            .count();
        assert_eq!(table_pages, TABLE_LEN * 8 / 4096, "{name}");
        // The JUMP_SLOT page is written at start-up only with -z now.
        let slot_page = readelf_relocs(&lib)
            .entries
            .iter()
            .find(|(_, k)| k == "R_X86_64_JUMP_SLOT")
            .map(|(offset, _)| offset >> 12)
            .unwrap();
        assert_eq!(
            got.lazy_jump_slot_pages.contains(&slot_page),
            !bind_now,
            "{name}"
        );
        assert!(!bind_now || got.pages.contains(&slot_page), "{name}");
        // Cached: a second call gives the same answer.
        assert_eq!(symbolizer.relocations(&lib, None).as_ref(), Ok(&got));
    }
}

/// System libraries and a test PIE match readelf exactly.
#[test]
fn system_and_program_relocations_match_readelf() {
    let dir = TempDir::new("sys");
    let pie = compile(&dir, "pie", PROGRAM, &["-fPIE", "-pie"]);
    let non_pie = compile(&dir, "nopie", PROGRAM, &["-fno-PIE", "-no-pie"]);
    let mut paths = vec![pie, non_pie];
    for lib in [
        "/lib/x86_64-linux-gnu/libc.so.6",
        "/lib64/ld-linux-x86-64.so.2",
        "/lib/x86_64-linux-gnu/libm.so.6",
    ] {
        if Path::new(lib).exists() {
            paths.push(PathBuf::from(lib));
        }
    }
    let mut symbolizer = Symbolizer::new(Options::default());
    for path in &paths {
        let got = symbolizer.relocations(path, read_build_id(path).as_deref());
        let got = got.unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(got, expected(path), "{}", path.display());
        assert!(!got.pages.is_empty(), "{}", path.display());
    }
    // libc: the counts readelf prints, spelled out.
    let libc = Path::new("/lib/x86_64-linux-gnu/libc.so.6");
    let got = symbolizer.relocations(libc, None).unwrap();
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    for (_, kind) in readelf_relocs(libc).entries {
        *counts.entry(kind).or_insert(0) += 1;
    }
    let by_name: BTreeMap<String, u64> = got
        .by_type
        .iter()
        .map(|(t, n)| (t.to_string(), *n))
        .collect();
    assert_eq!(by_name, counts);
    // Debian's glibc 2.36 is linked with RELR, older ones are not.
    let relative = got.by_type.get(&RelocType::RELATIVE).copied().unwrap_or(0);
    assert!(relative + got.relr > 1000, "{:?} {}", got.by_type, got.relr);
    assert!(
        got.by_type.contains_key(&reloc_type("R_X86_64_IRELATIVE")),
        "{:?}",
        got.by_type
    );
    assert!(got.page_sections.values().any(|s| s == ".data.rel.ro"));
}

/// Static executables have no dynamic relocations; missing and non-ELF files give reasons.
#[test]
fn relocation_edge_cases() {
    let dir = TempDir::new("edge");
    let text = dir.0.join("text");
    std::fs::write(&text, "not an ELF file").unwrap();
    let mut symbolizer = Symbolizer::new(Options::default());
    let cases: &[(PathBuf, Result<(), Reason>)] = &[
        (dir.0.join("missing"), Err(Reason::MissingFile)),
        (text, Err(Reason::NotElf)),
    ];
    for (path, want) in cases {
        let got = symbolizer.relocations(path, None).map(|_| ());
        assert_eq!(&got, want, "{}", path.display());
    }
    let libc = Path::new("/lib/x86_64-linux-gnu/libc.so.6");
    assert!(matches!(
        symbolizer.relocations(libc, Some(&[0xde, 0xad])),
        Err(Reason::BuildIdMismatch { .. })
    ));
    // A static executable, when libc.a is installed.
    let src = dir.0.join("static.c");
    std::fs::write(&src, PROGRAM).unwrap();
    let exe = dir.0.join("static");
    let built = Command::new("cc")
        .args(["-O1", "-static", "-o"])
        .arg(&exe)
        .arg(&src)
        .status()
        .is_ok_and(|s| s.success());
    if built {
        let got = symbolizer.relocations(&exe, None).unwrap();
        assert_eq!(got.by_type, BTreeMap::new());
        assert_eq!((got.relr, got.uses_relr, got.pages.len()), (0, false, 0));
    } else {
        eprintln!("skipped: cannot link statically (no libc.a)");
    }
}

/// `main` and a static helper of a test program, full and stripped (via the debug file), match `nm -S`.
#[test]
fn function_ranges_match_nm() {
    let dir = TempDir::new("fn");
    let exe = compile(&dir, "prog", PROGRAM, &["-g"]);
    let symbols = nm_functions(&exe);
    // A stripped copy that finds its symbols through .gnu_debuglink.
    run(Command::new("objcopy").current_dir(&dir.0).args([
        "--only-keep-debug",
        "prog",
        "prog.debug",
    ]));
    run(Command::new("objcopy").current_dir(&dir.0).args([
        "--strip-all",
        "--add-gnu-debuglink=prog.debug",
        "prog",
        "prog.stripped",
    ]));
    let stripped = dir.0.join("prog.stripped");
    let mut symbolizer = Symbolizer::new(Options::default());
    let names = ["main", "helper", "no_such_function", "main", "stdout"];
    for path in [&exe, &stripped] {
        let got = symbolizer.function_ranges(path, None, &names);
        let want: Vec<(String, std::ops::Range<u64>)> = ["main", "helper"]
            .iter()
            .map(|&name| {
                let (svma, size) = symbols[name];
                let start = file_offset(&exe, svma);
                (name.to_string(), start..start + size)
            })
            .collect();
        assert_eq!(got, want, "{}", path.display());
        assert!(got.iter().all(|(_, r)| !r.is_empty()));
    }
    // Bad inputs: nothing, no panic.
    let cases: &[(&Path, Option<&[u8]>)] = &[
        (Path::new("/nonexistent/prog"), None),
        (&exe, Some(&[1, 2, 3])),
    ];
    for &(path, build_id) in cases {
        assert_eq!(symbolizer.function_ranges(path, build_id, &names), vec![]);
    }
    assert_eq!(symbolizer.function_ranges(&exe, None, &[]), vec![]);
}

/// libc's `__libc_start_call_main` (local, only in libc6-dbg) and `__libc_start_main` match `nm -S` of the debug file.
#[test]
fn libc_start_functions_match_nm() {
    let libc = Path::new("/lib/x86_64-linux-gnu/libc.so.6");
    let mut symbolizer = Symbolizer::new(Options::default());
    let info = symbolizer.module_info(libc, None).unwrap().clone();
    let Some(debug) = info.debug_file.clone() else {
        eprintln!("skipped: libc6-dbg is not installed");
        return;
    };
    let symbols = nm_functions(&debug);
    let names = ["__libc_start_call_main", "__libc_start_main", "environ"];
    let got = symbolizer.function_ranges(libc, info.build_id.as_deref(), &names);
    let want: Vec<(String, std::ops::Range<u64>)> = ["__libc_start_call_main", "__libc_start_main"]
        .iter()
        .map(|&name| {
            let (svma, size) = symbols[name];
            let start = file_offset(libc, svma);
            (name.to_string(), start..start + size)
        })
        .collect();
    assert_eq!(got, want);
}
