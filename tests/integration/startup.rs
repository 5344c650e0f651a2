//! Start-up analysis on real programs: the right object, section, symbol,
//! relocation type and count, checked against readelf and the fixtures'
//! measured counts (fixtures/README.md, "Start-up fixtures").

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::util::{can_record, compile_c, pfprof, record, run, temp_dir};

/// Builds libreloc.so (from `lib_source`, with `extra` link flags) and
/// reloc_main in `dir`.
fn build_reloc(dir: &Path, lib_source: &str, extra: &[&str]) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let mut args = vec!["-fPIC", "-shared"];
    args.extend_from_slice(extra);
    let lib = compile_c(dir, lib_source, &args);
    std::fs::rename(&lib, dir.join("libreloc.so")).unwrap();
    compile_c(
        dir,
        "reloc/reloc_main.c",
        &["-L", dir.to_str().unwrap(), "-lreloc", "-Wl,-rpath,$ORIGIN"],
    )
}

fn startup_object<'a>(report: &'a Value, suffix: &str) -> &'a Value {
    report["startup"]["objects"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["object"].as_str().unwrap().ends_with(suffix))
        .unwrap_or_else(|| panic!("no start-up object {suffix}: {}", report["startup"]))
}

fn section<'a>(object: &'a Value, name: &str) -> Option<&'a Value> {
    object["sections"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["section"] == name)
}

/// `readelf -rW` counts of a relocation type.
fn readelf_relocs(file: &Path, r_type: &str) -> u64 {
    let out = run(Command::new("readelf").arg("-rW").arg(file));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains(r_type))
        .count() as u64
}

/// The pages `readelf -rW` puts relocations on, by the kind pfprof's hints
/// credit them to: `relative` (RELATIVE and RELR), `lazy_binding`
/// (JUMP_SLOT, lazily bound objects) and `symbol` (the rest).
fn readelf_pages(file: &Path) -> BTreeMap<&'static str, BTreeSet<u64>> {
    let out = run(Command::new("readelf").arg("-rW").arg(file));
    let text = String::from_utf8_lossy(&out.stdout);
    let dynamic = run(Command::new("readelf").arg("-dW").arg(file));
    let dynamic = String::from_utf8_lossy(&dynamic.stdout);
    let bind_now = dynamic.contains("(BIND_NOW)") || dynamic.contains("Flags: NOW");
    let mut pages: BTreeMap<&'static str, BTreeSet<u64>> = BTreeMap::new();
    let mut in_relr = false;
    for line in text.lines() {
        if line.starts_with("Relocation section") {
            in_relr = line.contains(".relr");
            continue;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        let (offset, kind) = match words.as_slice() {
            [offset] if in_relr => (*offset, "relative"),
            [offset, _, r_type, ..] if r_type.starts_with("R_X86_64_") => {
                let kind = match *r_type {
                    "R_X86_64_NONE" => continue,
                    "R_X86_64_RELATIVE" => "relative",
                    "R_X86_64_JUMP_SLOT" if !bind_now => "lazy_binding",
                    _ => "symbol",
                };
                (*offset, kind)
            }
            _ => continue,
        };
        let Ok(offset) = u64::from_str_radix(offset, 16) else {
            continue;
        };
        // An 8-byte target on a page boundary writes both pages.
        for page in [offset >> 12, (offset + 7) >> 12] {
            pages.entry(kind).or_default().insert(page);
        }
    }
    pages
}

/// The start-up hints about relocations: (object, kind, hint).
fn relocation_hints(report: &Value) -> Vec<(String, String, &Value)> {
    report["startup"]["hints"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|h| h["relocations"].is_object())
        .map(|h| {
            (
                h["object"].as_str().unwrap().to_string(),
                h["relocations"]["kind"].as_str().unwrap().to_string(),
                h,
            )
        })
        .collect()
}

/// Per-object totals add up to the start-up total; the window ended at main.
fn assert_consistent(report: &Value) {
    let st = &report["startup"];
    assert_eq!(st["until"], "main", "{st}");
    for class in ["minor", "major", "cow"] {
        let sum: u64 = st["objects"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["faults"][class].as_u64().unwrap())
            .sum();
        assert_eq!(
            sum,
            st["faults"][class].as_u64().unwrap(),
            "{class}: objects do not add up"
        );
        for o in st["objects"].as_array().unwrap() {
            let by_section: u64 = o["sections"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s[class].as_u64().unwrap())
                .sum();
            assert_eq!(
                by_section,
                o["faults"][class].as_u64().unwrap(),
                "{}",
                o["object"]
            );
        }
    }
}

/// 8192 pointers in .data.rel.ro: 16 COW faults by the loader on 16 of 16
/// pages, RELATIVE count as readelf says, and a hint with those figures.
#[test]
fn pointer_table_relocations() {
    if !can_record() {
        return;
    }
    let dir = temp_dir("st_reloc_pointer");
    let exe = build_reloc(&dir, "reloc/libreloc.c", &[]);
    let (out, report) = record(&dir, &exe, &[]);
    assert!(out.status.success());
    assert_consistent(&report);
    let lib = startup_object(&report, "/libreloc.so");
    let table = section(lib, ".data.rel.ro").expect(".data.rel.ro faulted");
    assert_eq!(table["cow"], 16, "{lib}");
    assert_eq!(table["pages_touched"], 16);
    assert_eq!(table["pages_total"], 16);
    let relative = readelf_relocs(&dir.join("libreloc.so"), "R_X86_64_RELATIVE");
    assert_eq!(relative, 8195);
    assert_eq!(lib["relocations"]["R_X86_64_RELATIVE"], relative);
    assert_eq!(
        lib["relocations"]["R_X86_64_GLOB_DAT"],
        readelf_relocs(&dir.join("libreloc.so"), "R_X86_64_GLOB_DAT")
    );
    assert_eq!(lib["uses_relr"], false);
    assert_eq!(lib["bind_now"], false);
    assert_eq!(lib["relro"], true);
    assert_eq!(
        lib["loader"]["cow"], 17,
        "16 table pages + the .init_array page: {lib}"
    );
    let sym = report["startup"]["symbols"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["symbol"] == "reloc_table")
        .unwrap();
    assert_eq!(sym["faults"], 16);
    assert_eq!(sym["first_toucher"], "_dl_relocate_object");
    let hints = report["startup"]["hints"].to_string();
    assert!(
        // 8,194 of the 8,195: __dso_handle's page of .data is zeroed (its
        // .bss part) by the loader before relocation, not by a relocation.
        hints.contains(
            "libreloc.so: 8,194 RELATIVE relocations dirty 17 pages of .data.rel.ro, .fini_array, .init_array"
        ),
        "{hints}"
    );
    assert!(dir.join("out/startup.svg").exists());
}

/// A lazily bound library with a pointer table: the table's 4 pages are
/// credited to RELATIVE relocations and the 2 pages of .got.plt slots to
/// lazy binding (each hint with its own advice), as `readelf -rW` puts the
/// relocations; none of the .got.plt pages is called RELATIVE.
#[test]
fn relative_and_lazy_binding_pages_credited() {
    if !can_record() {
        return;
    }
    let dir = temp_dir("st_reloc_plt");
    let exe = build_reloc(&dir, "reloc/libreloc_plt.c", &["-Wl,-z,lazy"]);
    let (out, report) = record(&dir, &exe, &[]);
    assert!(out.status.success());
    assert_consistent(&report);
    let lib = dir.join("libreloc.so");
    let pages = readelf_pages(&lib);
    assert_eq!(pages["lazy_binding"].len(), 2, "{pages:?}");
    assert_eq!(readelf_relocs(&lib, "R_X86_64_JUMP_SLOT"), 1024);
    let hints = relocation_hints(&report);
    let hint = |kind: &str| {
        hints
            .iter()
            .find(|(o, k, _)| o.ends_with("/libreloc.so") && k == kind)
            .map(|(_, _, h)| &h["relocations"])
            .unwrap_or_else(|| panic!("no {kind} hint: {}", report["startup"]["hints"]))
    };
    let lazy = hint("lazy_binding");
    assert_eq!(lazy["pages"], 2, "{lazy}");
    assert_eq!(lazy["sections"], serde_json::json!([".got.plt"]), "{lazy}");
    assert_eq!(lazy["relocations"]["R_X86_64_JUMP_SLOT"], 1024, "{lazy}");
    assert!(
        lazy["relocations"].get("R_X86_64_RELATIVE").is_none(),
        "{lazy}"
    );
    let relative = hint("relative");
    // The table's 4 pages, and the .init_array/.fini_array page; the page
    // of .data is zeroed (its .bss part) before relocation, not by it.
    let held = pages["relative"].len() as u64;
    assert!(
        (4..=held).contains(&relative["pages"].as_u64().unwrap()),
        "{relative}, readelf: {pages:?}"
    );
    assert!(
        relative["relocations"]["R_X86_64_RELATIVE"]
            .as_u64()
            .unwrap()
            >= 2048
    );
    assert!(
        relative["relocations"].get("R_X86_64_JUMP_SLOT").is_none(),
        "{relative}"
    );
    let sections = relative["sections"].to_string();
    assert!(
        sections.contains(".data.rel.ro") && !sections.contains(".got.plt"),
        "{relative}"
    );
    let text = report["startup"]["hints"].to_string();
    assert!(text.contains("-z now moves the writes"), "{text}");
    assert!(text.contains("tables of offsets"), "{text}");
}

/// gcc's start-up (cc1 loads libisl, which is bound lazily): no hint
/// claims more pages for a kind of relocation than `readelf -rW` puts
/// relocations of that kind on.
#[test]
fn hints_claim_no_more_pages_than_hold_the_relocations() {
    if !can_record() {
        return;
    }
    let dir = temp_dir("st_reloc_gcc");
    std::fs::write(dir.join("small.c"), "int f(int x) { return 2 * x; }\n").unwrap();
    let gcc = Path::new("/usr/bin/gcc");
    let small = dir.join("small.c");
    let object = dir.join("small.o");
    let (out, report) = record(
        &dir,
        gcc,
        &[
            "-c",
            small.to_str().unwrap(),
            "-o",
            object.to_str().unwrap(),
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let hints = relocation_hints(&report);
    assert!(
        !hints.is_empty(),
        "no relocation hint: {}",
        report["startup"]
    );
    for (object, kind, hint) in &hints {
        let pages = readelf_pages(Path::new(object));
        let held = pages.get(kind.as_str()).map_or(0, BTreeSet::len) as u64;
        let claimed = hint["relocations"]["pages"].as_u64().unwrap();
        assert!(
            (1..=held).contains(&claimed),
            "{object}: {claimed} {kind} pages claimed, {held} hold such relocations: {}",
            hint["text"]
        );
    }
}

/// The same table as offsets: no relocation writes, no hint; `pfprof diff`
/// shows the 16 COW faults gone.
#[test]
fn offset_table_and_diff() {
    if !can_record() {
        return;
    }
    let dir = temp_dir("st_reloc_offsets");
    let pointer = build_reloc(&dir.join("pointer"), "reloc/libreloc.c", &[]);
    let offsets = build_reloc(&dir.join("offsets"), "reloc/libreloc_offsets.c", &[]);
    let (_, before) = record(&dir.join("pointer"), &pointer, &[]);
    let (_, after) = record(&dir.join("offsets"), &offsets, &[]);
    assert_consistent(&after);
    let lib = startup_object(&after, "/libreloc.so");
    assert_eq!(lib["loader"]["cow"], 0, "{lib}");
    assert!(
        section(lib, ".data.rel.ro").is_none_or(|s| s["cow"] == 0),
        "{lib}"
    );
    assert!(
        lib["relocations"]["R_X86_64_RELATIVE"]
            .as_u64()
            .unwrap_or(0)
            <= 3
    );
    assert!(
        !after["startup"]["hints"]
            .to_string()
            .contains("libreloc.so"),
        "{}",
        after["startup"]["hints"]
    );
    let _ = before;

    let out = run(pfprof()
        .args(["diff", "--startup", "--format", "json"])
        .arg(dir.join("pointer/out"))
        .arg(dir.join("offsets/out")));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: Value = serde_json::from_slice(&out.stdout).unwrap();
    let row = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|r| {
            r["object"] == "libreloc.so" && r["section"] == ".data.rel.ro" && r["class"] == "cow"
        })
        .unwrap_or_else(|| panic!("{rows}"));
    assert_eq!(
        (
            row["before"].as_u64(),
            row["after"].as_u64(),
            row["delta"].as_i64()
        ),
        (Some(16), Some(0), Some(-16))
    );
    assert!(dir.join("offsets/out/diff.svg").exists());
    let text = run(pfprof()
        .args(["diff", "--startup"])
        .arg(dir.join("pointer/out"))
        .arg(dir.join("offsets/out")));
    assert!(String::from_utf8_lossy(&text.stdout).contains("-16"));
}

/// DT_RELR shrinks the table the loader reads, not the pages it writes: the
/// same 16 COW faults, and the hint says so.
#[test]
fn relr_still_dirties_pages() {
    if !can_record() {
        return;
    }
    let dir = temp_dir("st_reloc_relr");
    let exe = build_reloc(&dir, "reloc/libreloc.c", &["-Wl,-z,pack-relative-relocs"]);
    let (out, report) = record(&dir, &exe, &[]);
    assert!(out.status.success());
    assert_consistent(&report);
    let lib = startup_object(&report, "/libreloc.so");
    assert_eq!(lib["uses_relr"], true);
    assert_eq!(
        lib["relr"],
        8192 + 3
            - lib["relocations"]["R_X86_64_RELATIVE"]
                .as_u64()
                .unwrap_or(0)
    );
    assert_eq!(section(lib, ".data.rel.ro").unwrap()["cow"], 16);
    let hints = report["startup"]["hints"].to_string();
    assert!(hints.contains("DT_RELR already shrinks"), "{hints}");
}

/// A constructor zeroing 512 .bss pages before main: the symbol, its first
/// toucher, and the hint.
#[test]
fn bss_tables_initialised_at_startup() {
    if !can_record() {
        return;
    }
    let dir = temp_dir("st_bss_init");
    let exe = compile_c(&dir, "bss_init.c", &[]);
    let (_, report) = record(&dir, &exe, &[]);
    assert_consistent(&report);
    let sym = report["startup"]["symbols"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["symbol"] == "tables")
        .unwrap();
    assert_eq!(sym["faults"], 512);
    assert_eq!(sym["section"], ".bss");
    assert_eq!(sym["first_toucher"], "init_tables");
    let exe_obj = startup_object(&report, "/bss_init");
    assert_eq!(
        section(exe_obj, ".bss").unwrap()["minor"].as_u64().unwrap(),
        512
    );
    let hints = report["startup"]["hints"].to_string();
    assert!(
        hints.contains("512 .bss pages of tables zeroed by init_tables()"),
        "{hints}"
    );
}

/// C++ static constructors: 64 objects, one page each, before main.
#[test]
fn cxx_static_constructors() {
    if !can_record() {
        return;
    }
    let dir = temp_dir("st_cxx");
    let exe = dir.join("cxx_ctors");
    let out = run(Command::new("g++")
        .args(["-g", "-O1", "-fno-omit-frame-pointer", "-o"])
        .arg(&exe)
        .arg(crate::util::fixtures().join("cxx_ctors.cpp")));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (_, report) = record(&dir, &exe, &[]);
    assert_consistent(&report);
    let ctor_syms: Vec<&Value> = report["startup"]["symbols"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| {
            s["object"].as_str().unwrap().ends_with("/cxx_ctors")
                && s["first_toucher"] == "Table::Table()"
        })
        .collect();
    assert_eq!(ctor_syms.len(), 64, "{}", report["startup"]["symbols"]);
    assert!(ctor_syms
        .iter()
        .all(|s| s["faults"] == 1 && s["section"] == ".bss"));
}

/// The .bss hint's fix, checked: the same table filled on first use (after
/// main) removes its 512 start-up faults, and the hint goes away.
#[test]
fn bss_hint_fix_reduces_startup_faults() {
    if !can_record() {
        return;
    }
    let dir = temp_dir("st_bss_pair");
    std::fs::create_dir_all(dir.join("eager")).unwrap();
    std::fs::create_dir_all(dir.join("lazy")).unwrap();
    let eager = compile_c(&dir.join("eager"), "bss_init.c", &[]);
    let lazy = compile_c(&dir.join("lazy"), "bss_init.c", &["-DLAZY"]);
    let (_, before) = record(&dir.join("eager"), &eager, &[]);
    let (_, after) = record(&dir.join("lazy"), &lazy, &[]);
    assert!(before["startup"]["hints"]
        .to_string()
        .contains(".bss pages of tables"));
    assert!(
        !after["startup"]["hints"]
            .to_string()
            .contains(".bss pages of tables"),
        "{}",
        after["startup"]["hints"]
    );
    // The faults moved after main: the whole run still has them.
    let in_main: u64 = crate::util::function_sites(&after, "init_tables")
        .iter()
        .map(|r| r["count"].as_u64().unwrap())
        .sum();
    assert_eq!(in_main, 512);
    let out = run(pfprof()
        .args(["diff", "--startup", "--format", "json"])
        .arg(dir.join("eager/out"))
        .arg(dir.join("lazy/out")));
    assert!(out.status.success());
    let rows: Value = serde_json::from_slice(&out.stdout).unwrap();
    let row = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["object"] == "bss_init" && r["section"] == ".bss" && r["class"] == "minor")
        .unwrap_or_else(|| panic!("{rows}"));
    assert_eq!(
        (row["before"].as_u64(), row["after"].as_u64()),
        (Some(512), Some(0)),
        "{row}"
    );
}

/// The window of `program` (path suffix) in report.json's `startups`.
fn window_of<'a>(report: &'a Value, suffix: &str) -> &'a Value {
    report["startups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["program"].as_str().unwrap().ends_with(suffix))
        .unwrap_or_else(|| panic!("no start-up window of {suffix}: {}", report["startups"]))
}

/// The .bss fixture behind a wrapper (`sh -c 'FIXTURE; true'`, `env
/// FIXTURE`): its own start-up window holds its 512 .bss faults, it is the
/// one shown (the most start-up faults), the wrapper has a window too, and
/// `--startup-of` chooses either.
#[test]
fn startup_through_wrappers() {
    if !can_record() {
        return;
    }
    let dir = temp_dir("st_wrappers");
    let exe = compile_c(&dir, "bss_init.c", &[]);
    let sh = std::fs::canonicalize("/bin/sh").unwrap();
    let env = std::fs::canonicalize("/usr/bin/env").unwrap();
    let script = format!("{}; true", exe.display());
    for (name, program, args, wrapper) in [
        ("sh", Path::new("/bin/sh"), vec!["-c", script.as_str()], &sh),
        (
            "env",
            Path::new("/usr/bin/env"),
            vec![exe.to_str().unwrap()],
            &env,
        ),
    ] {
        let run_dir = dir.join(name);
        std::fs::create_dir_all(&run_dir).unwrap();
        let (out, report) = record(&run_dir, program, &args);
        assert!(out.status.success(), "{name}");
        // Shown by default: the fixture, with its exact known faults.
        assert_consistent(&report);
        let st = &report["startup"];
        assert!(
            st["program"].as_str().unwrap().ends_with("/bss_init"),
            "{name}: {}",
            st["program"]
        );
        let tables = st["symbols"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["symbol"] == "tables")
            .unwrap_or_else(|| panic!("{name}: {}", st["symbols"]));
        assert_eq!(tables["faults"], 512, "{name}");
        assert_eq!(tables["first_toucher"], "init_tables", "{name}");
        let exe_obj = startup_object(&report, "/bss_init");
        assert_eq!(section(exe_obj, ".bss").unwrap()["minor"], 512, "{name}");
        // Its entry in `startups` is the one shown and carries its counts.
        let mine = window_of(&report, "/bss_init");
        let index = st["window"].as_u64().unwrap() as usize;
        assert_eq!(&report["startups"][index], mine, "{name}");
        assert_eq!(mine["faults"], st["faults"], "{name}");
        assert_eq!(mine["until"], "main", "{name}");
        // The wrapper's own window, before it, ended at main (it exec'd or
        // forked after main) with fewer faults.
        let theirs = window_of(&report, wrapper.to_str().unwrap());
        assert_eq!(theirs["until"], "main", "{name}: {theirs}");
        let total = |w: &Value| -> u64 {
            ["minor", "major", "cow"]
                .iter()
                .map(|c| w["faults"][c].as_u64().unwrap())
                .sum()
        };
        assert!(total(theirs) > 0 && total(theirs) < total(mine), "{name}");
        assert!(
            theirs["exec_ms"].as_f64().unwrap() < mine["exec_ms"].as_f64().unwrap(),
            "{name}"
        );
        // env execs the fixture in its own pid; sh forks a child for it.
        let processes = report["processes"].as_array().unwrap();
        let row = processes.iter().find(|p| p["pid"] == mine["pid"]).unwrap();
        if name == "env" {
            assert_eq!(mine["pid"], theirs["pid"]);
            let execs: Vec<&str> = row["execs"]
                .as_array()
                .unwrap_or_else(|| panic!("{row}"))
                .iter()
                .map(|e| e.as_str().unwrap())
                .collect();
            assert_eq!(execs.len(), 2, "{row}");
            assert_eq!(execs[0], env.to_str().unwrap());
            assert!(execs[1].ends_with("/bss_init"), "{row}");
        } else {
            assert_ne!(mine["pid"], theirs["pid"]);
            assert!(row.get("execs").is_none(), "{row}");
        }

        // --startup-of chooses the wrapper's window, by the name it was
        // exec'd by, and the text lists the other one.
        let out_dir = run_dir.join("out");
        let json = run(pfprof()
            .args([
                "report",
                "--startup",
                "--format",
                "json",
                "--startup-of",
                name,
                "-i",
            ])
            .arg(&out_dir));
        assert!(
            json.status.success(),
            "{}",
            String::from_utf8_lossy(&json.stderr)
        );
        let chosen: Value = serde_json::from_slice(&json.stdout).unwrap();
        assert_eq!(chosen["startup"]["program"], theirs["program"], "{name}");
        assert_eq!(chosen["startup"]["faults"], theirs["faults"], "{name}");
        assert_eq!(chosen["startups"], report["startups"]);
        let text = run(pfprof()
            .args(["report", "--startup", "--startup-of", "bss_init", "-i"])
            .arg(&out_dir));
        let text = String::from_utf8_lossy(&text.stdout);
        assert!(text.starts_with("Start-up of bss_init [pid "), "{text}");
        assert!(text.contains("\nOther start-up windows ("), "{text}");
        // A name without a window is an error that lists the windows.
        let none = run(pfprof()
            .args(["report", "--startup-of", "no-such-program", "-i"])
            .arg(&out_dir));
        assert_eq!(none.status.code(), Some(1));
        let err = String::from_utf8_lossy(&none.stderr);
        assert!(
            err.contains("no-such-program") && err.contains("bss_init [pid"),
            "{err}"
        );
    }
}
