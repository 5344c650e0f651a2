//! pfprof reads perf's recordings: the real `perf record` on the exact
//! fixtures, in each mode pfprof supports, against pfprof's own recording of
//! the same fixture (same classes, accesses, sections, functions, stacks and
//! exact counts: the fixtures fault identically in every run).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

use crate::util::{
    can_record, compile_c, function_sites, pfprof, record_with, run, show, stack_names, temp_dir,
    total,
};

/// Whether `perf record` works here; under CI it must.
fn can_perf() -> bool {
    if !can_record() {
        return false;
    }
    let ok = Command::new("perf")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok && std::env::var_os("CI").is_some() {
        panic!("perf is not installed under CI (.ci/run installs linux-perf)");
    }
    if !ok {
        eprintln!("SKIPPED: perf is not installed: the perf import tests");
    }
    ok
}

/// `perf record -q -o DIR/NAME.data OPTIONS -- PROGRAM ARGS`, with `HOME`
/// (perf's build-id cache, `~/.debug`) inside `dir`.
fn perf_record(dir: &Path, name: &str, options: &[&str], program: &Path, args: &[&str]) -> PathBuf {
    let data = dir.join(format!("{name}.data"));
    let output = run(Command::new("perf")
        .env("HOME", dir)
        .args(["record", "-q", "-o"])
        .arg(&data)
        .args(options)
        .arg("--")
        .arg(program)
        .args(args));
    assert!(
        output.status.success(),
        "perf record {options:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    data
}

/// `pfprof report -i DATA --format json EXTRA` (with `HOME` in `dir`).
fn report(dir: &Path, data: &Path, extra: &[&str]) -> Value {
    let output = pfprof_in(dir, &["report", "--format", "json", "-i"], data, extra);
    assert!(
        output.status.success(),
        "pfprof report {} failed: {}",
        data.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    crate::util::parse_report(&output.stdout)
}

fn pfprof_in(dir: &Path, args: &[&str], data: &Path, extra: &[&str]) -> Output {
    run(pfprof().env("HOME", dir).args(args).arg(data).args(extra))
}

/// A function's rows as (class, access, section, symbol, region, stack) →
/// count, to compare two reports.
fn rows_of(report: &Value, function: &str) -> Vec<(String, u64)> {
    let mut rows: Vec<(String, u64)> = function_sites(report, function)
        .iter()
        .map(|r| {
            let t = &r["target"];
            let key = format!(
                "{} {} {} {} {} {}",
                r["class"],
                r["access"],
                t["section"],
                t["symbol"],
                t["region"],
                stack_names(r).join(";")
            );
            (key, r["count"].as_u64().unwrap())
        })
        .collect();
    rows.sort();
    rows
}

fn warnings(report: &Value) -> Vec<&str> {
    report["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap())
        .collect()
}

fn has_warning(report: &Value, part: &str) -> bool {
    warnings(report).iter().any(|w| w.contains(part))
}

/// pfprof's own recording's report, `options` as given.
fn own(dir: &Path, options: &[&str], exe: &Path, args: &[&str]) -> Value {
    let sub = dir.join(format!(
        "own{}",
        options.join("").replace([' ', '-', ','], "")
    ));
    std::fs::create_dir_all(&sub).unwrap();
    let (output, report) = record_with(&sub, options, exe, args);
    assert!(output.status.success());
    report
}

/// bss_read_write (128 minor reads of the zero page in `read_pages`, then
/// 128 COW writes in `write_pages`) recorded by perf with frame-pointer
/// chains, with and without the fault-entry tracepoints: the same rows,
/// stacks and counts as pfprof's own `--call-graph fp` recording (with
/// `--no-tracepoints` for the file without them), and the missing COW and
/// access classes said.
#[test]
fn perf_frame_pointers_match_own() {
    if !can_perf() {
        return;
    }
    let dir = temp_dir("perf_import_fp");
    let exe = compile_c(&dir, "bss_read_write.c", &[]);
    let tracepoints =
        "minor-faults,major-faults,exceptions:page_fault_user,exceptions:page_fault_kernel";
    for (perf_events, own_options) in [
        (tracepoints, &["--call-graph", "fp"][..]),
        (
            "minor-faults,major-faults",
            &["--call-graph", "fp", "--no-tracepoints"][..],
        ),
    ] {
        let name = if own_options.len() == 2 { "tp" } else { "notp" };
        let data = perf_record(
            &dir,
            name,
            &["-c", "1", "-d", "-g", "-e", perf_events],
            &exe,
            &[],
        );
        let theirs = report(&dir, &data, &[]);
        let ours = own(&dir, own_options, &exe, &[]);
        for function in ["read_pages", "write_pages"] {
            let rows = rows_of(&theirs, function);
            assert_eq!(rows, rows_of(&ours, function), "{name} {function}");
            assert_eq!(total(&function_sites(&theirs, function)), 128, "{name}");
        }
        let cow = theirs["totals"]["cow"].as_u64().unwrap();
        if own_options.len() == 2 {
            assert!(cow >= 128, "{}", theirs["totals"]);
            assert_eq!(
                rows_of(&theirs, "write_pages")[0].0.split(' ').next(),
                Some("\"cow\"")
            );
            assert!(!has_warning(&theirs, "COW and access types unavailable"));
        } else {
            assert_eq!(cow, 0);
            assert_eq!(theirs["totals"]["cow_available"], false);
            assert!(
                has_warning(&theirs, "perf recorded no fault-entry tracepoints"),
                "{:?}",
                warnings(&theirs)
            );
        }
        assert_eq!(theirs["totals"]["bad_records"], 0, "{name}");
        assert_eq!(theirs["totals"]["lost"], 0, "{name}");
    }
}

/// `perf record --call-graph dwarf`: the user stacks are unwound when the
/// report is made, by the unwinder of pfprof's own dwarf recordings, into
/// the same stacks (touch_bss ← main ← __libc_start_call_main ← … _start).
#[test]
fn perf_dwarf_unwound_like_own() {
    if !can_perf() {
        return;
    }
    let dir = temp_dir("perf_import_dwarf");
    let exe = compile_c(&dir, "bss_write.c", &[]);
    // 16 MiB per CPU: every sample carries 8 KiB of stack.
    let data = perf_record(
        &dir,
        "dwarf",
        &[
            "-c",
            "1",
            "-d",
            "-m",
            "4096",
            "--call-graph",
            "dwarf",
            "-e",
            "minor-faults,major-faults",
        ],
        &exe,
        &[],
    );
    let theirs = report(&dir, &data, &[]);
    let ours = own(&dir, &["--no-tracepoints"], &exe, &[]);
    assert_eq!(theirs["totals"]["lost"], 0);
    let rows = rows_of(&theirs, "touch_bss");
    assert_eq!(rows, rows_of(&ours, "touch_bss"));
    assert_eq!(total(&function_sites(&theirs, "touch_bss")), 256);
    let stack = stack_names(function_sites(&theirs, "touch_bss")[0]);
    assert!(
        stack.starts_with(&[
            "_start",
            "__libc_start_main_impl",
            "__libc_start_call_main",
            "main"
        ]),
        "{stack:?}"
    );
    assert!(theirs["totals"]["unwind"]["complete"].as_u64().unwrap() >= 256);
}

/// Sampled recordings: `-c 16` counts each sample as 16 faults (touch's
/// 16,384 faults in touch_pages are 1,024 samples whatever the phase);
/// `-F` counts each as its period; both say so.
#[test]
fn perf_sampled_counts_scaled() {
    if !can_perf() {
        return;
    }
    let dir = temp_dir("perf_import_sampled");
    let exe = compile_c(&dir, "touch.c", &[]);
    let options = ["-d", "-g", "-e", "minor-faults,major-faults"];
    let every16 = perf_record(
        &dir,
        "c16",
        &[&["-c", "16"][..], &options].concat(),
        &exe,
        &["64"],
    );
    let theirs = report(&dir, &every16, &[]);
    let rows = function_sites(&theirs, "touch_pages");
    // The kernel's software-event sampling is one sample off now and then
    // (1,023 or 1,024 samples): within one period.
    let counted = total(&rows);
    assert!((16_368..=16_400).contains(&counted), "{}", show(&rows));
    assert_eq!(counted % 16, 0, "{}", show(&rows));
    assert_eq!(rows.len(), 1, "{}", show(&rows));
    assert_eq!(rows[0]["class"], "minor");
    assert_eq!(rows[0]["target"]["region"], "anon");
    assert!(
        has_warning(
            &theirs,
            "perf record -c 16): each sample counted as 16 faults"
        ),
        "{:?}",
        warnings(&theirs)
    );

    let freq = perf_record(
        &dir,
        "freq",
        &[&["-F", "20000"][..], &options].concat(),
        &exe,
        &["64"],
    );
    let theirs = report(&dir, &freq, &[]);
    assert!(
        has_warning(
            &theirs,
            "perf record -F 20000): each sample counted as its period"
        ),
        "{:?}",
        warnings(&theirs)
    );
    let rows = function_sites(&theirs, "touch_pages");
    let samples = rows
        .iter()
        .map(|r| r["count"].as_u64().unwrap())
        .sum::<u64>();
    assert!(samples > 0, "{}", show(&rows));
}

/// `-e page-faults` (minor and major together), a single event whose
/// records carry no id: counted as minor, with a warning.
#[test]
fn perf_page_faults_event() {
    if !can_perf() {
        return;
    }
    let dir = temp_dir("perf_import_page_faults");
    let exe = compile_c(&dir, "bss_write.c", &[]);
    let data = perf_record(
        &dir,
        "pf",
        &["-c", "1", "-d", "-g", "-e", "page-faults"],
        &exe,
        &[],
    );
    let theirs = report(&dir, &data, &[]);
    let ours = own(&dir, &["--call-graph", "fp", "--no-tracepoints"], &exe, &[]);
    assert_eq!(rows_of(&theirs, "touch_bss"), rows_of(&ours, "touch_bss"));
    assert_eq!(total(&function_sites(&theirs, "touch_bss")), 256);
    assert!(has_warning(
        &theirs,
        "page-faults event does not tell minor from major"
    ));
    // flamegraph and diff read it too.
    let out = dir.join("fg");
    let output = pfprof_in(
        &dir,
        &["flamegraph", "-o"],
        &out,
        &["-i", data.to_str().unwrap()],
    );
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let folded = std::fs::read_to_string(out.join("minor.folded")).unwrap();
    assert!(
        folded
            .lines()
            .any(|l| l.contains(";touch_bss;[bss_write .bss bss_buf] 256")),
        "{folded}"
    );
    let own_data = dir.join("owncallgraphfpnotracepoints/out/pfprof.data");
    let output = pfprof_in(
        &dir,
        &["diff", "--format", "json", "-o"],
        &dir.join("diff"),
        &[data.to_str().unwrap(), own_data.to_str().unwrap()],
    );
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let rows: Value = serde_json::from_slice(&output.stdout).unwrap();
    let bss = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["section"] == ".bss" && r["object"].as_str().unwrap().ends_with("bss_write"))
        .unwrap_or_else(|| panic!("{rows}"));
    assert!(bss["before"].as_u64().unwrap() >= 256, "{bss}");
    assert_eq!(bss["before"], bss["after"], "{bss}");
}

/// Another build: a binary replaced after perf recorded it (and no build-id
/// cache) gives addresses and a warning naming both build-ids, never the new
/// build's names, whether perf put the build-id in its header or (with
/// `--buildid-mmap`) in the mmap records; `--symfs DIR` with the recorded
/// build, or perf's build-id cache in `~/.debug`, gives the names back.
#[test]
fn perf_build_ids_choose_the_binary() {
    if !can_perf() {
        return;
    }
    let dir = temp_dir("perf_import_build_id");
    let exe = compile_c(&dir, "bss_write.c", &[]);
    let symfs = dir.join("symfs");
    let copy = symfs.join(exe.strip_prefix("/").unwrap());
    std::fs::create_dir_all(copy.parent().unwrap()).unwrap();
    std::fs::copy(&exe, &copy).unwrap();
    let options = ["-c", "1", "-d", "-g", "-e", "minor-faults,major-faults"];
    let uncached = perf_record(
        &dir,
        "uncached",
        &[&["--no-buildid-cache"][..], &options].concat(),
        &exe,
        &[],
    );
    // --buildid-mmap: the build-ids in the mmap records, not the header.
    let in_mmaps = perf_record(
        &dir,
        "in-mmaps",
        &[&["--no-buildid-cache", "--buildid-mmap"][..], &options].concat(),
        &exe,
        &[],
    );
    let cached = perf_record(&dir, "cached", &options, &exe, &[]);
    assert!(
        dir.join(".debug/.build-id").is_dir(),
        "perf wrote no build-id cache"
    );
    // Another build at the same path: the same functions, other addresses.
    let rebuilt = compile_c(&dir, "bss_write.c", &["-O2", "-DREBUILT=1"]);
    assert_eq!(rebuilt, exe);

    // Without perf's cache (another HOME): only the replaced file.
    let home = dir.join("home");
    std::fs::create_dir_all(&home).unwrap();
    for data in [&uncached, &in_mmaps] {
        let theirs = report(&home, data, &[]);
        assert!(
            function_sites(&theirs, "touch_bss").is_empty(),
            "{}: named with another build's symbols",
            data.display()
        );
        assert!(
            has_warning(&theirs, "build-id is"),
            "{:?}",
            warnings(&theirs)
        );
        let by_address: u64 = crate::util::sites(&theirs, |s| {
            s["function"].as_str().unwrap().starts_with("bss_write+0x")
        })
        .iter()
        .map(|r| r["count"].as_u64().unwrap())
        .sum();
        assert!(by_address >= 256, "{}: {by_address}", data.display());
    }

    for (data, home, extra) in [
        (&uncached, &home, &["--symfs", symfs.to_str().unwrap()][..]),
        (&in_mmaps, &home, &["--symfs", symfs.to_str().unwrap()][..]),
        (&cached, &dir, &[][..]),
    ] {
        let theirs = report(home, data, extra);
        let rows = function_sites(&theirs, "touch_bss");
        assert_eq!(total(&rows), 256, "{extra:?}: {}", show(&rows));
        assert_eq!(rows[0]["target"]["symbol"], "bss_buf");
        assert!(
            !has_warning(&theirs, "build-id is"),
            "{:?}",
            warnings(&theirs)
        );
    }
}

/// A perf recording with fault events but no fault sample is an error
/// naming the file, not an empty report.
#[test]
fn perf_without_fault_samples_is_an_error() {
    if !can_perf() {
        return;
    }
    let dir = temp_dir("perf_import_empty");
    // One sample per million faults: none in a program taking fifty.
    let options = ["-c", "1000000", "-d", "-e", "minor-faults"];
    let data = perf_record(&dir, "none", &options, Path::new("/bin/true"), &[]);
    let output = pfprof_in(&dir, &["report", "-i"], &data, &[]);
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("holds no fault sample"), "{stderr}");
    assert!(stderr.contains(data.to_str().unwrap()), "{stderr}");
}

/// `perf record -z`: the zstd-compressed records are read as the plain
/// ones (the same rows as pfprof's own recording).
#[test]
fn perf_compressed_records() {
    if !can_perf() {
        return;
    }
    let dir = temp_dir("perf_import_compressed");
    let exe = compile_c(&dir, "bss_write.c", &[]);
    let options = [
        "-z",
        "-c",
        "1",
        "-d",
        "-g",
        "-e",
        "minor-faults,major-faults",
    ];
    let data = perf_record(&dir, "z", &options, &exe, &[]);
    let bytes = std::fs::read(&data).unwrap();
    let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap()) as usize;
    let section = &bytes[u64_at(40)..u64_at(40) + u64_at(48)];
    assert!(
        pfprof::format::compressed::has_compressed(section),
        "perf wrote no compressed record"
    );
    let theirs = report(&dir, &data, &[]);
    let ours = own(&dir, &["--call-graph", "fp", "--no-tracepoints"], &exe, &[]);
    assert_eq!(rows_of(&theirs, "touch_bss"), rows_of(&ours, "touch_bss"));
    assert_eq!(total(&function_sites(&theirs, "touch_bss")), 256);
    // Only a header that announces compression (feature bit 27) has its
    // records searched for it; a compressed record met without it is one
    // clear line, not records silently skipped.
    let mut unannounced = bytes.clone();
    assert_ne!(
        unannounced[72 + 3] & (1 << 3),
        0,
        "perf set no compression bit"
    );
    unannounced[72 + 3] &= !(1 << 3);
    let hidden = dir.join("unannounced.data");
    std::fs::write(&hidden, &unannounced).unwrap();
    let output = pfprof_in(&dir, &["report", "-i"], &hidden, &[]);
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("compressed records"), "{stderr}");
}

/// Kernel frames (`--kernel`) of perf's recording are named from this
/// machine's kallsyms only when the recorded kernel (its build-id in perf's
/// header) is the running one; another kernel's stay addresses, with a
/// warning.
#[test]
fn perf_kernel_frames_need_the_recorded_kernel() {
    if !can_perf() {
        return;
    }
    let dir = temp_dir("perf_import_kernel");
    let exe = compile_c(&dir, "kernel_read.c", &[]);
    let options = ["-c", "1", "-d", "-g", "-e", "minor-faults,major-faults"];
    let data = perf_record(&dir, "k", &options, &exe, &[]);
    let listed = run(Command::new("perf")
        .env("HOME", &dir)
        .args(["buildid-list", "-i"])
        .arg(&data));
    let listed = String::from_utf8_lossy(&listed.stdout);
    let kernel_id: Vec<u8> = listed
        .lines()
        .find_map(|l| l.strip_suffix(" [kernel.kallsyms]"))
        .map(|hex| {
            (0..hex.len() / 2)
                .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap())
                .collect()
        })
        .unwrap_or_else(|| panic!("no kernel build-id listed: {listed}"));
    // The same file, its kernel's build-id changed.
    let mut bytes = std::fs::read(&data).unwrap();
    let at = bytes
        .windows(kernel_id.len())
        .rposition(|w| w == kernel_id)
        .unwrap();
    bytes[at] ^= 0xff;
    let other = dir.join("other-kernel.data");
    std::fs::write(&other, &bytes).unwrap();

    for (file, same) in [(&data, true), (&other, false)] {
        let theirs = report(&dir, file, &["--kernel"]);
        // With kernel frames, a site's function is the kernel's leaf.
        let rows = crate::util::sites(&theirs, |s| stack_names(s).contains(&"read_into"));
        assert_eq!(total(&rows), 32, "{}", show(&rows));
        for r in &rows {
            let stack = stack_names(r);
            let kernel: Vec<&&str> = stack.iter().filter(|f| f.ends_with("_[k]")).collect();
            assert!(!kernel.is_empty(), "{stack:?}");
            let named = kernel.iter().all(|f| !f.starts_with("0x"));
            let addresses = kernel.iter().all(|f| f.starts_with("0xffff"));
            assert!(if same { named } else { addresses }, "{same}: {stack:?}");
        }
        assert_eq!(
            has_warning(&theirs, "kernel frames stay addresses"),
            !same,
            "{:?}",
            warnings(&theirs)
        );
    }
}

/// Samples perf lost (dwarf samples of 8 KiB in 16 KiB buffers) are counted
/// once, as perf counts them: perf writes a PERF_RECORD_LOST of the ring and
/// a PERF_RECORD_LOST_SAMPLES of the event for the same samples. With 8 KiB
/// buffers it loses every sample: an error saying so.
#[test]
fn perf_lost_samples_counted_once() {
    if !can_perf() {
        return;
    }
    let dir = temp_dir("perf_import_lost");
    let exe = compile_c(&dir, "bss_write.c", &[]);
    let perf_lost = |data: &Path| -> u64 {
        let out = run(Command::new("perf")
            .env("HOME", &dir)
            .args(["report", "--stdio", "-i"])
            .arg(data));
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .find_map(|l| l.strip_prefix("# Total Lost Samples: "))
            .map_or(0, |n| n.trim().parse().unwrap())
    };
    for pages in ["2", "4"] {
        let options = [
            "-c",
            "1",
            "-d",
            "-m",
            pages,
            "--call-graph",
            "dwarf",
            "-e",
            "minor-faults,major-faults",
        ];
        let data = perf_record(&dir, &format!("m{pages}"), &options, &exe, &[]);
        let lost = perf_lost(&data);
        let output = pfprof_in(&dir, &["report", "--format", "json", "-i"], &data, &[]);
        if output.status.success() {
            let theirs: Value = crate::util::parse_report(&output.stdout);
            assert_eq!(theirs["totals"]["lost"], lost, "{pages} pages");
            let l = &theirs["totals"]["lost_by_class"];
            assert_eq!(l["minor"], lost, "{pages} pages: {l}");
            assert_eq!(l["unattributed"], 0, "{pages} pages: {l}");
        } else {
            // perf's own report of such a file says only "no samples".
            let stderr = String::from_utf8_lossy(&output.stderr);
            let all: u64 = stderr
                .split("perf lost all ")
                .nth(1)
                .and_then(|rest| rest.split(' ').next())
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("{pages} pages: {stderr}"));
            assert!(lost == 0 || lost == all, "{pages} pages: {lost} {stderr}");
            // bss_write takes some 300 faults.
            assert!((290..=330).contains(&all), "{pages} pages: {stderr}");
        }
    }
}
