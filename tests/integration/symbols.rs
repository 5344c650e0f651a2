//! Names of issue 12 on a real program (fixtures/names.cpp): C++ special
//! names demangled as c++filt prints them, TLS offsets and unsized linker
//! markers never naming a target, ld.so's `_start` rooting start-up
//! stacks, vDSO functions named, and file pages outside every section
//! named for what they are.

use std::process::Command;

use serde_json::Value;

use crate::util::{can_record, fixtures, record, run, show, sites, temp_dir};

/// The sites of an object whose path ends with `name`.
fn of(name: &str) -> impl Fn(&Value) -> bool + '_ {
    move |s: &Value| {
        s["target"]["object"]
            .as_str()
            .is_some_and(|o| o.ends_with(name))
    }
}

#[test]
fn names_of_data_code_and_headers() {
    if !can_record() {
        return;
    }
    let dir = temp_dir("sym_names");
    let exe = dir.join("names");
    let out = run(Command::new("g++")
        .args(["-g", "-O1", "-fno-omit-frame-pointer", "-o"])
        .arg(&exe)
        .arg(fixtures().join("names.cpp")));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (_, report) = record(&dir, &exe, &[]);
    let all = sites(&report, |_| true);
    let ours = sites(&report, of("/names"));

    // ld.so relocates the vtable's pages: COW faults on `vtable for Big`.
    let vtable: Vec<&Value> = ours
        .iter()
        .copied()
        .filter(|s| s["target"]["symbol"] == "vtable for Big")
        .collect();
    assert!(!vtable.is_empty(), "{}", show(&ours));
    assert!(vtable
        .iter()
        .all(|s| s["class"] == "cow" && s["target"]["section"] == ".data.rel.ro"));

    // .tbss overlaps .init_array and .data.rel.ro in svma space; tls_block's
    // value is an offset in the TLS block and names neither. Unsized
    // linker markers name nothing.
    let init_array: Vec<&Value> = ours
        .iter()
        .copied()
        .filter(|s| s["target"]["section"] == ".init_array")
        .collect();
    assert!(!init_array.is_empty(), "{}", show(&ours));
    assert!(
        init_array.iter().all(|s| s["target"]["symbol"].is_null()),
        "{}",
        show(&init_array)
    );
    let markers = ["tls_block", "__bss_start", "_edata", "_end", "__data_start"];
    let named: Vec<&Value> = all
        .iter()
        .copied()
        .filter(|s| {
            s["target"]["symbol"]
                .as_str()
                .is_some_and(|n| markers.contains(&n))
        })
        .collect();
    assert!(named.is_empty(), "{}", show(&named));

    // Every ELF file page is named: a section, or the headers ld.so reads
    // (`_dl_map_object_from_fd`, `rtld_setup_main_map`).
    let elf = |s: &&Value| {
        s["target"]["region"] == "file"
            && s["target"]["object"]
                .as_str()
                .and_then(|o| o.rsplit('/').next())
                .is_some_and(|f| f == "names" || f.starts_with("lib") || f.starts_with("ld-linux"))
    };
    let unnamed: Vec<&Value> = all
        .iter()
        .copied()
        .filter(elf)
        .filter(|s| s["target"]["section"].is_null())
        .collect();
    assert!(unnamed.is_empty(), "{}", show(&unnamed));
    let headers = all
        .iter()
        .copied()
        .filter(elf)
        .filter(|s| s["target"]["section"] == "[program-headers]")
        .count();
    assert!(headers >= 2, "{}", show(&all));

    // Start-up stacks are rooted in ld.so's `_start` (an unsized label in
    // its debug file, the entry point without it), never an address.
    let loader: Vec<&Value> = all
        .iter()
        .copied()
        .filter(|s| {
            s["stack"]
                .as_array()
                .unwrap()
                .iter()
                .any(|f| f == "_dl_start")
        })
        .collect();
    assert!(!loader.is_empty());
    let unrooted: Vec<&Value> = loader
        .iter()
        .copied()
        .filter(|s| s["stack"][0] != "_start")
        .collect();
    let stacks: Vec<&Value> = unrooted.iter().map(|s| &s["stack"]).collect();
    assert!(
        unrooted.is_empty(),
        "{}\n{stacks:?}\n{}",
        show(&unrooted),
        report["totals"]["unwind"]
    );

    // clock_gettime runs in the vDSO; its first read of [vvar] faults.
    let vdso_frames: Vec<&Value> = all
        .iter()
        .flat_map(|s| s["frames"].as_array().unwrap())
        .filter(|f| f["object"] == "[vdso]")
        .collect();
    assert!(!vdso_frames.is_empty(), "{}", show(&all));
    for frame in vdso_frames {
        let name = frame["function"].as_str().unwrap();
        // The exported name, not its weak alias `clock_gettime` (as perf).
        assert_eq!(name, "__vdso_clock_gettime", "{frame}");
    }
}
