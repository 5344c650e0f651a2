//! PLT entries named `name@plt` compared with binutils: every entry
//! `objdump -d` names in `.plt`, `.plt.sec` and `.plt.got` (`<getppid@plt>:`)
//! of system binaries and of programs compiled at test time in each PLT
//! layout (lazy, `-z now`, IBT lazy and now, `-fno-plt`) must get the same
//! name from [`Symbolizer::code`], at every byte of the entry. objdump's
//! `*ABS*+0x<resolver>@plt` (an IRELATIVE slot) is named after a function
//! symbol at the resolver's address when there is one.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;

use pfprof_symbolize::{Options, Symbolizer};

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 output")
}

/// A program with PLT calls to libc, a local IFUNC (an IRELATIVE
/// slot) and a call through the GOT (`.plt.got` for `__cxa_finalize`).
const SOURCE: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
static int impl(void) { return 7; }
static void *resolve_local(void) { return (void *)impl; }
int local_ifunc(void) __attribute__((ifunc("resolve_local")));
int main(int argc, char **argv) {
    void *p = malloc(argc);
    printf("%d %zu %d\n", getppid(), strlen(argv[0]), local_ifunc());
    free(p);
    return 0;
}
"#;

struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The test program built in every PLT layout, by name.
fn build_layouts() -> (TempDir, Vec<PathBuf>) {
    let dir = std::env::temp_dir().join(format!("pfprof-symbolize-plt-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    let source = dir.join("prog.c");
    std::fs::write(&source, SOURCE).expect("write source");
    let layouts: [(&str, &[&str]); 5] = [
        ("lazy", &["-Wl,-z,lazy"]),
        ("now", &["-Wl,-z,now"]),
        (
            "ibt_lazy",
            &["-fcf-protection=full", "-Wl,-z,ibtplt", "-Wl,-z,lazy"],
        ),
        (
            "ibt_now",
            &["-fcf-protection=full", "-Wl,-z,ibtplt", "-Wl,-z,now"],
        ),
        ("noplt", &["-fno-plt"]),
    ];
    let mut out = Vec::new();
    for (name, flags) in layouts {
        let binary = dir.join(name);
        run(Command::new("cc")
            .args(["-O1"])
            .args(flags)
            .arg("-o")
            .arg(&binary)
            .arg(&source));
        out.push(binary);
    }
    (TempDir(dir), out)
}

/// `objdump -d`'s PLT entries: svma → (name without `@plt`, size up to
/// the next label or the section's end).
fn objdump_plt(path: &Path) -> BTreeMap<u64, String> {
    let text = run(Command::new("objdump")
        .args(["-d", "-j", ".plt", "-j", ".plt.sec", "-j", ".plt.got"])
        .arg(path));
    text.lines()
        .filter_map(|line| {
            let (address, rest) = line.split_once(" <")?;
            let name = rest.strip_suffix("@plt>:")?;
            Some((u64::from_str_radix(address, 16).ok()?, name.to_string()))
        })
        .collect()
}

/// svma → every function name starting there (`nm` and `nm -D`).
fn function_names(path: &Path) -> HashMap<u64, Vec<String>> {
    let mut out: HashMap<u64, Vec<String>> = HashMap::new();
    for dynamic in [false, true] {
        let mut cmd = Command::new("nm");
        if dynamic {
            cmd.arg("-D");
        }
        let Ok(text) = cmd.arg(path).output() else {
            continue;
        };
        for line in String::from_utf8_lossy(&text.stdout).lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            let [address, kind, name] = f[..] else {
                continue;
            };
            if !matches!(kind, "T" | "t" | "i" | "W" | "w") {
                continue;
            }
            let Ok(address) = u64::from_str_radix(address, 16) else {
                continue;
            };
            let name = name.split('@').next().unwrap_or(name);
            out.entry(address).or_default().push(name.to_string());
        }
    }
    out
}

/// The names objdump's `*ABS*+0x<resolver>` entry may take.
fn allowed_names(objdump_name: &str, functions: &HashMap<u64, Vec<String>>) -> Vec<String> {
    let Some(resolver) = objdump_name.strip_prefix("*ABS*+0x") else {
        return vec![objdump_name.to_string()];
    };
    let resolver = u64::from_str_radix(resolver, 16).expect("hex resolver");
    match functions.get(&resolver) {
        Some(names) => names.clone(),
        None => vec![objdump_name.to_string()],
    }
}

/// Checks every byte of every entry objdump names in `path`; returns the
/// number of entries.
fn check(path: &Path) -> usize {
    let entries = objdump_plt(path);
    let functions = function_names(path);
    let options = Options {
        demangle: false,
        ..Options::default()
    };
    let mut symbolizer = Symbolizer::new(options);
    let info = symbolizer.module_info(path, None).expect("module").clone();
    let mut mismatches = Vec::new();
    for (&svma, objdump_name) in &entries {
        let section = info
            .sections
            .iter()
            .find(|s| svma >= s.svma && svma - s.svma < s.size)
            .expect("entry in a section");
        // objdump's entries are 16 bytes, but 8 in an 8-byte .plt.got.
        let next = entries.range(svma + 1..).next().map(|(&a, _)| a);
        let end = next
            .unwrap_or(u64::MAX)
            .min(section.svma + section.size)
            .min(svma + 16);
        let offsets: Vec<u64> = (svma..end)
            .map(|a| info.svma_to_file_offset(a).expect("file offset"))
            .collect();
        let allowed: Vec<String> = allowed_names(objdump_name, &functions)
            .into_iter()
            .map(|n| format!("{n}@plt"))
            .collect();
        for (offset, result) in offsets.iter().zip(symbolizer.code(path, None, &offsets)) {
            let got = result.map(|site| site.frames[0].function.clone());
            if !got.as_ref().is_ok_and(|name| allowed.contains(name)) {
                mismatches.push(format!(
                    "{offset:#x} (entry {svma:#x}): {got:?}, want {allowed:?}"
                ));
            }
        }
    }
    assert!(
        mismatches.is_empty(),
        "{}: {} of the bytes of {} PLT entries named otherwise than objdump:\n{}",
        path.display(),
        mismatches.len(),
        entries.len(),
        mismatches[..mismatches.len().min(20)].join("\n")
    );
    entries.len()
}

/// Every layout the toolchain makes, including an IRELATIVE slot.
#[test]
fn compiled_layouts_match_objdump() {
    let (_dir, binaries) = build_layouts();
    for binary in &binaries {
        let entries = check(binary);
        // main's calls (getppid, strlen, printf, local_ifunc; -O1 drops
        // malloc and free), plus __cxa_finalize in .plt.got; -fno-plt
        // calls go through the GOT without a PLT entry.
        let want_at_least = if binary.ends_with("noplt") { 1 } else { 5 };
        assert!(
            entries >= want_at_least,
            "{}: {entries} PLT entries",
            binary.display()
        );
    }
    // The IFUNC's slot is IRELATIVE: named after the IFUNC symbol, global,
    // at its resolver's address (over the resolver's own local symbol).
    let lazy = &binaries[0];
    let entries = objdump_plt(lazy);
    let (svma, _) = entries
        .iter()
        .find(|(_, name)| name.starts_with("*ABS*"))
        .expect("an IRELATIVE entry");
    let mut symbolizer = Symbolizer::new(Options::default());
    let offset = symbolizer
        .module_info(lazy, None)
        .unwrap()
        .svma_to_file_offset(*svma)
        .unwrap();
    let site = symbolizer
        .code(lazy, None, &[offset])
        .pop()
        .unwrap()
        .unwrap();
    assert_eq!(site.frames[0].function, "local_ifunc@plt");
}

/// System binaries and libraries: git and gdb (hundreds of entries in
/// `.plt` and `.plt.got`), libc (IRELATIVE slots of its own IFUNCs) and
/// ld.so (four `.plt` entries into libc).
#[test]
fn system_binaries_match_objdump() {
    let candidates = [
        "/usr/bin/git",
        "/usr/bin/gdb",
        "/lib/x86_64-linux-gnu/libc.so.6",
        "/lib64/ld-linux-x86-64.so.2",
    ];
    let mut checked = 0;
    for path in candidates.iter().map(Path::new).filter(|p| p.exists()) {
        checked += check(path);
    }
    assert!(checked >= 50, "only {checked} PLT entries checked");
}
