//! The resident-memory ledger on a fixture whose sites make known KiB
//! resident and give part back (fixtures/resident.c): exact per site at the
//! peak and at exit, and within 1% of the kernel's own counts.

use serde_json::Value;

use crate::util::{can_record, compile_c, pfprof, record_with, run, temp_dir};

/// KiB of the fixture's site `function` of `kind` at `moment` (`peak` or
/// `end`) in report.json's `resident`.
fn site_kib(resident: &Value, moment: &str, function: &str, kind: &str) -> u64 {
    resident[moment]["top"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["function"] == function && s["kind"] == kind)
        .map(|s| s["kib"].as_u64().unwrap())
        .sum()
}

/// Each (site, kind, KiB at the peak, KiB at exit) of `want` exactly, and
/// the totals near the kernel's at both moments.
fn assert_sites(resident: &Value, mode: &str, want: &[(&str, &str, u64, u64)]) {
    for &(function, kind, peak, end) in want {
        assert_eq!(
            site_kib(resident, "peak", function, kind),
            peak,
            "{mode} {function}: {resident:#}"
        );
        assert_eq!(
            site_kib(resident, "end", function, kind),
            end,
            "{mode} {function}: {resident:#}"
        );
    }
    assert_near_kernel(resident, "peak");
    assert_near_kernel(resident, "end");
}

/// pfprof's KiB of `kind` at `moment`, less what it reconciled, within 1%
/// (and a page) of the kernel's at the same moment (file and shared pages: the kernel's count
/// of anonymous ones is not recorded).
fn assert_near_kernel(resident: &Value, moment: &str) {
    for kind in ["file", "shmem"] {
        // Less what the kernel took back without a syscall (reclaim).
        let taken = resident[moment]["reconciled_kib"][kind]
            .as_u64()
            .unwrap_or(0);
        let ours = resident[moment]["kib"][kind].as_u64().unwrap() - taken;
        let kernel = resident[moment]["kernel_kib"][kind].as_u64().unwrap();
        let slack = kernel / 100 + 4;
        assert!(
            ours.abs_diff(kernel) <= slack,
            "{moment} {kind}: pfprof {ours} KiB, the kernel {kernel} KiB: {resident:#}"
        );
    }
}

/// Without `--resident`, no ledger: no events, no outputs.
#[test]
fn resident_memory_is_asked_for() {
    if !can_record() {
        return;
    }
    let dir = temp_dir("resident_off");
    let exe = compile_c(&dir, "resident.c", &[]);
    let data = dir.join("resident.dat");
    let (out, report) = record_with(&dir, &[], &exe, &[data.to_str().unwrap()]);
    assert!(out.status.success());
    assert!(report.get("resident").is_none(), "{report:#}");
    assert!(!dir.join("out/resident.svg").exists());
    let timeline = std::fs::read_to_string(dir.join("out/timeline.svg")).unwrap();
    assert!(!timeline.contains("class=\"resident\""));
}

#[test]
fn resident_memory_by_site_at_peak_and_exit() {
    if !can_record() {
        return;
    }
    let dir = temp_dir("resident");
    let exe = compile_c(&dir, "resident.c", &[]);
    // On a disk-backed file system, as users' files are (the target dir).
    let data = dir.join("resident.dat");
    // The BPF collector writes the memory events; without it (`--no-bpf`,
    // as where the kernel refuses its programs) the tracepoints' events do.
    let runs = [
        ("dwarf", &["--call-graph", "dwarf"][..]),
        ("fp", &["--call-graph", "fp"][..]),
        ("no-bpf", &["--no-bpf"][..]),
    ];
    for (mode, options) in runs {
        let run_dir = dir.join(mode);
        std::fs::create_dir_all(&run_dir).unwrap();
        let args = [&["--resident"][..], options].concat();
        let (out, report) = record_with(&run_dir, &args, &exe, &[data.to_str().unwrap()]);
        assert!(out.status.success(), "{mode}");
        let resident = &report["resident"];
        assert_resident_fixture(resident, mode, &out.stdout);
        // The memory mremap moved is still the anonymous mapping's (no
        // mmap record says where it went; the syscall's does).
        let grown = (resident["peak"]["top"].as_array().unwrap().iter())
            .find(|s| s["function"] == "touch_grown")
            .unwrap_or_else(|| panic!("{mode}: {resident:#}"));
        assert_eq!(grown["target"]["object"], "[anon]", "{mode}: {grown}");
        // The flame graphs' lines: KiB per stack and target.
        let folded = std::fs::read_to_string(run_dir.join("out/resident.folded")).unwrap();
        assert!(
            folded
                .lines()
                .any(|l| l.contains(";touch_anon;[anon] ") && l.ends_with(" 1024")),
            "{folded}"
        );
        let exit = std::fs::read_to_string(run_dir.join("out/resident-exit.folded")).unwrap();
        assert!(
            exit.lines()
                .any(|l| l.contains(";touch_anon;[anon] ") && l.ends_with(" 640")),
            "{exit}"
        );
        let svg = std::fs::read_to_string(run_dir.join("out/resident.svg")).unwrap();
        assert!(svg.contains("touch_anon"), "{mode}");
        let exit_svg = std::fs::read_to_string(run_dir.join("out/resident-exit.svg")).unwrap();
        assert!(exit_svg.contains("Resident memory at exit"), "{mode}");
        assert!(!exit_svg.contains("at the peak"), "{mode}");
        let timeline = std::fs::read_to_string(run_dir.join("out/timeline.svg")).unwrap();
        assert!(timeline.contains("resident memory by kind"), "{mode}");
        let page = std::fs::read_to_string(run_dir.join("out/index.html")).unwrap();
        assert!(
            page.contains("<h2 id=\"resident\">Resident memory</h2>"),
            "{mode}"
        );
        assert!(page.contains("<td>touch_anon</td>"), "{mode}");
        let text = std::fs::read_to_string(run_dir.join("out/report.txt")).unwrap();
        assert!(
            text.contains("\nResident memory (KiB), by the fault that made it present:\n"),
            "{text}"
        );
    }
}

/// A program that ends at its peak (fixtures/bss_write.c frees nothing):
/// the exit graph holds the peak's lines, titled for exit (drawn once and
/// retitled), where resident.c's, which gives pages back, differ.
#[test]
fn a_program_that_ends_at_its_peak_draws_the_same_graph_twice() {
    if !can_record() {
        return;
    }
    let dir = temp_dir("resident_peak_at_exit");
    let exe = compile_c(&dir, "bss_write.c", &[]);
    let (out, _) = record_with(&dir, &["--resident"], &exe, &[]);
    assert!(out.status.success());
    let read = |name: &str| std::fs::read_to_string(dir.join("out").join(name)).unwrap();
    let (peak, exit) = (read("resident.folded"), read("resident-exit.folded"));
    assert_eq!(peak, exit);
    assert!(
        peak.lines()
            .any(|l| l.contains(";touch_bss;") && l.ends_with(" 1024")),
        "{peak}"
    );
    let peak_title = "Resident memory at the peak (KiB, by the fault that made it present)";
    let exit_title = "Resident memory at exit (KiB still held when each process ended)";
    let (peak_svg, exit_svg) = (read("resident.svg"), read("resident-exit.svg"));
    assert!(peak_svg.contains(peak_title) && !peak_svg.contains(exit_title));
    assert_eq!(exit_svg, peak_svg.replacen(peak_title, exit_title, 1));
}

/// fixtures/resident.c's sites: (function, kind, KiB at the peak, at exit).
const RESIDENT_SITES: [(&str, &str, u64, u64); 4] = [
    ("touch_anon", "anon", 1024, 640),
    ("touch_remap", "anon", 128, 128),
    ("touch_grown", "anon", 128, 128),
    ("read_file", "file", 256, 256),
];

/// fixtures/resident.c's sites at the peak and at exit (`read_folio`'s as
/// the fixture measured its own, on its `stdout`), and the pages its
/// munmap, madvise and mremap gave back.
fn assert_resident_fixture(resident: &Value, mode: &str, stdout: &[u8]) {
    assert_sites(resident, mode, &RESIDENT_SITES);
    let kib = folio_kib(stdout);
    for moment in ["peak", "end"] {
        assert_eq!(
            site_kib(resident, moment, "read_folio", "file"),
            kib,
            "{mode} read_folio at the {moment}: {resident:#}"
        );
    }
    assert_pages_given_back(resident);
}

/// What fixtures/resident.c's `read_folio` made resident by its own count
/// (its RssFile's growth, on its stdout): the whole large folio where the
/// kernel maps one at a fault (Linux 6.18, when the page cache has one),
/// else fault-around's 64 KiB a fault.
fn folio_kib(stdout: &[u8]) -> u64 {
    let stdout = String::from_utf8_lossy(stdout);
    let kib = (stdout.lines())
        .find_map(|l| l.strip_prefix("read_folio "))
        .and_then(|n| n.trim().parse::<u64>().ok())
        .unwrap_or_else(|| panic!("no read_folio figure in {stdout:?}"));
    assert!(kib >= 4, "read_folio {kib} KiB");
    kib
}

/// The pages fixtures/resident.c's munmap, madvise and mremap gave back.
fn assert_pages_given_back(resident: &Value) {
    let pages = &resident["pages"];
    assert!(pages["munmap"].as_u64().unwrap() >= 64, "{pages}");
    assert_eq!(pages["madvise"], 32, "{pages}");
    assert_eq!(pages["mremap_moved"], 32, "{pages}");
}

/// The same figures from a recording that ran a while before the fixture
/// started: the collector has moved the syscalls' records from the raw
/// tracepoints on every syscall to the syscalls' own (after 2 s; see
/// record/bpf.rs's `MemoryWatch`).
#[test]
fn resident_memory_after_the_syscalls_move_to_their_tracepoints() {
    if !can_record() {
        return;
    }
    let dir = temp_dir("resident_moved");
    let exe = compile_c(&dir, "resident.c", &[]);
    let data = dir.join("resident.dat");
    let out_dir = dir.join("out");
    let out = run(pfprof()
        .env("PFPROF_TIMING", "1")
        .args(["record", "-q", "--resident", "-o"])
        .arg(&out_dir)
        .args(["--", "sh", "-c", "sleep 3; exec \"$0\" \"$1\""])
        .arg(&exe)
        .arg(&data));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("the syscalls' records come from their own tracepoints"),
        "{stderr}"
    );
    let report = crate::util::read_report(&out_dir.join("report.json"));
    let resident = &report["resident"];
    // At exit: the peak of all three processes' pages may be sh's and
    // sleep's.
    for (function, kind, _, end) in RESIDENT_SITES {
        assert_eq!(
            site_kib(resident, "end", function, kind),
            end,
            "{function}: {resident:#}"
        );
    }
    assert_eq!(
        site_kib(resident, "end", "read_folio", "file"),
        folio_kib(&out.stdout),
        "read_folio: {resident:#}"
    );
    assert_pages_given_back(resident);
    assert_near_kernel(resident, "peak");
    assert_near_kernel(resident, "end");
}

/// A recording whose syscalls' records have moved to their tracepoints'
/// programs leaves those tracepoints to everyone else: a `--no-bpf`
/// recording beside it (its records come from perf events on the same
/// tracepoints) still sees every `munmap`, `madvise` and `mremap` of
/// fixtures/resident.c. (The programs returned 0, which drops a hit for
/// every perf event on the tracepoint: this test then lost the madvise
/// and the mremap.)
#[test]
fn a_moved_recording_leaves_the_tracepoints_to_others() {
    if !can_record() {
        return;
    }
    let _shared = crate::util::shared();
    let dir = temp_dir("resident_beside_moved");
    let exe = compile_c(&dir, "resident.c", &[]);
    let data = dir.join("resident.dat");
    let mut moved = pfprof()
        .env("PFPROF_TIMING", "1")
        .args(["record", "-q", "--resident", "-o"])
        .arg(dir.join("moved"))
        .args(["--", "sleep", "8"])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = moved.stderr.take().unwrap();
    let said = std::io::BufRead::lines(std::io::BufReader::new(stderr))
        .map_while(Result::ok)
        .any(|line| line.contains("the syscalls' records come from their own tracepoints"));
    assert!(
        said,
        "the first recording did not move its syscalls' records"
    );
    let beside = dir.join("beside");
    std::fs::create_dir_all(&beside).unwrap();
    let (out, report) = record_with(
        &beside,
        &["--resident", "--no-bpf"],
        &exe,
        &[data.to_str().unwrap()],
    );
    let _ = moved.kill();
    let _ = moved.wait();
    assert!(out.status.success());
    let resident = &report["resident"];
    assert_resident_fixture(resident, "beside a moved recording", &out.stdout);
    let pages = &resident["pages"];
    assert_eq!(pages["madvise"], 32, "{pages}");
    assert_eq!(pages["mremap_moved"], 32, "{pages}");
}

/// Through fork (the child's copies at its own site, its parent's pages it
/// inherited), a thread that exits, glibc's malloc (a mapped block freed,
/// heap pages trimmed), the program break lowered and a shared memfd
/// (fixtures/resident_share.c): exact per site at the peak and at each
/// process's exit, and within 1% of the kernel's count.
#[test]
fn resident_memory_through_fork_threads_malloc_and_memfd() {
    if !can_record() {
        return;
    }
    let dir = temp_dir("resident_share");
    let exe = compile_c(&dir, "resident_share.c", &["-pthread"]);
    for mode in ["dwarf", "fp"] {
        let run_dir = dir.join(mode);
        std::fs::create_dir_all(&run_dir).unwrap();
        let (out, report) = record_with(&run_dir, &["--resident", "--call-graph", mode], &exe, &[]);
        assert!(out.status.success(), "{mode}");
        let resident = &report["resident"];
        // (site, kind, KiB at the peak, KiB at the processes' exits: the
        // child's 384 + 128 KiB and the parent's 512 at parent_touch).
        let want = [
            ("parent_touch", "anon", 512, 896),
            ("child_write", "anon", 0, 128),
            ("big_touch", "anon", 2044, 0),
            ("heap_touch", "anon", 512, 0),
            ("brk_touch", "anon", 256, 0),
            ("memfd_touch", "shmem", 256, 256),
            ("thread_touch", "anon", 128, 128),
        ];
        assert_sites(resident, mode, &want);
        let pages = &resident["pages"];
        assert!(pages["forked"].as_u64().unwrap() >= 128, "{pages}");
        assert_eq!(pages["shrunk"], 64, "the break lowered: {pages}");
    }
}

/// `diff --resident` of two builds of resident_share (the second's
/// big_touch writes 255 pages, not 511): the anonymous memory at the peak
/// 1,024 KiB lower, on big_touch's stack in diff.folded; a recording
/// without `--resident` is refused (exit 2).
#[test]
fn diff_compares_resident_memory() {
    if !can_record() {
        return;
    }
    let dir = temp_dir("resident_diff");
    let runs = [("before", "-DBIG_PAGES=511"), ("after", "-DBIG_PAGES=255")];
    for (name, define) in runs {
        let run_dir = dir.join(name);
        std::fs::create_dir_all(&run_dir).unwrap();
        let exe = compile_c(&run_dir, "resident_share.c", &["-pthread", define]);
        let (out, _) = record_with(&run_dir, &["--resident"], &exe, &[]);
        assert!(out.status.success(), "{name}");
    }
    let out = run(pfprof()
        .args(["diff", "--resident", "--format", "json", "-o"])
        .arg(dir.join("diff"))
        .arg(dir.join("before/out"))
        .arg(dir.join("after/out")));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: Value = serde_json::from_slice(&out.stdout).unwrap();
    let anon = (rows.as_array().unwrap().iter())
        .find(|r| r["object"] == "[anon]" && r["kind"] == "anon")
        .unwrap_or_else(|| panic!("{rows:#}"));
    assert_eq!(anon["delta_kib"], -1024, "{rows:#}");
    let folded = std::fs::read_to_string(dir.join("diff/diff.folded")).unwrap();
    assert!(
        folded
            .lines()
            .any(|l| l.contains(";big_touch;[anon] ") && l.ends_with(" 2044 1020")),
        "{folded}"
    );
    let svg = std::fs::read_to_string(dir.join("diff/diff.svg")).unwrap();
    assert!(svg.contains("Resident memory at the peak"), "{svg}");
    assert!(svg.contains("change of each frame's KiB"), "{svg}");

    let plain = dir.join("plain");
    std::fs::create_dir_all(&plain).unwrap();
    let exe = compile_c(&plain, "resident_share.c", &["-pthread"]);
    let (out, _) = record_with(&plain, &[], &exe, &[]);
    assert!(out.status.success());
    let out = run(pfprof()
        .args(["diff", "--resident", "-o"])
        .arg(dir.join("diff"))
        .arg(dir.join("before/out"))
        .arg(plain.join("out")));
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("was recorded without --resident"),
        "{stderr}"
    );
}

/// A program that asks for huge pages (fixtures/huge_advised.c): the
/// huge page's 2 MiB count at the site that faulted it (checked by hand:
/// touch_huge 2048 KiB, anon 2,140 against the kernel's 2,148). Where
/// transparent huge pages are always on, the kernel's anonymous count is
/// recorded from the start; elsewhere the collector writes it from the
/// program's `madvise(MADV_HUGEPAGE)` on (the kernel's anonymous total is
/// then not known), and `--no-bpf`, whose tracepoint leaves anonymous
/// counts out, warns that anonymous KiB may be low.
#[test]
fn huge_pages_are_counted_or_warned_about() {
    if !can_record() {
        return;
    }
    let dir = temp_dir("resident_huge");
    let exe = compile_c(&dir, "huge_advised.c", &[]);
    let always = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
        .is_ok_and(|t| t.contains("[always]"));
    for (mode, options) in [
        ("bpf", &["--resident"][..]),
        ("no-bpf", &["--resident", "--no-bpf"]),
    ] {
        let run_dir = dir.join(mode);
        std::fs::create_dir_all(&run_dir).unwrap();
        let (out, report) = record_with(&run_dir, options, &exe, &[]);
        assert!(out.status.success(), "{mode}");
        let resident = &report["resident"];
        assert_eq!(
            resident["pages"]["huge_advised"], 512,
            "{mode}: {resident:#}"
        );
        let warned = (report["warnings"].as_array().unwrap().iter()).any(|w| {
            w.as_str()
                .unwrap()
                .contains("asked for huge pages on 2,048 KiB")
        });
        let kernel_anon = resident["peak"]["kernel_kib"].get("anon").is_some();
        assert_eq!(kernel_anon, always, "{mode}: {resident:#}");
        if always || mode == "bpf" {
            assert_eq!(
                site_kib(resident, "peak", "touch_huge", "anon"),
                2048,
                "{mode}: {resident:#}"
            );
            assert!(!warned, "{mode}: {report:#}");
        } else {
            assert!(warned, "{mode}: {report:#}");
        }
    }
}

/// Pages the kernel takes back without a syscall that frees them
/// (fixtures/resident_pageout.c: its own madvise(MADV_PAGEOUT) of 64 of
/// 256 file pages, a child's process_madvise of 64 more, another task's
/// change as kswapd's reclaim is) are reconciled, not absorbed: read_file
/// keeps its 1,024 KiB, about 512 KiB of them are said taken back at
/// exit, and the totals less them match the kernel's. Also with pfprof in
/// a pid namespace of its own, where the other task's change is written
/// with the owner's pid of that namespace.
#[test]
fn pages_the_kernel_takes_back_are_reconciled() {
    if !can_record() {
        return;
    }
    let dir = temp_dir("resident_pageout");
    let exe = compile_c(&dir, "resident_pageout.c", &[]);
    let data = dir.join("pageout.dat");
    std::fs::write(&data, vec![1u8; 1 << 20]).unwrap();
    let (out, report) = record_with(&dir, &["--resident"], &exe, &[data.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_reconciled(&report["resident"]);
    let text = std::fs::read_to_string(dir.join("out/report.txt")).unwrap();
    assert!(text.contains("    of which taken back"), "{text}");

    let ns_out = dir.join("pidns");
    let out = run(std::process::Command::new("unshare")
        .args(["--pid", "--fork", "--mount-proc"])
        .arg(env!("CARGO_BIN_EXE_pfprof"))
        .args(["record", "-q", "--resident", "-o"])
        .arg(&ns_out)
        .arg("--")
        .arg(&exe)
        .arg(&data));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report = crate::util::read_report(&ns_out.join("report.json"));
    assert_reconciled(&report["resident"]);
}

/// resident_pageout's figures: read_file's 1,024 KiB at both moments, the
/// pages taken back (up to the 128 asked for: the kernel leaves what it
/// cannot reclaim at once, 114 in one CI run under the whole suite, 126-128
/// alone), what the ledger reconciled matching them, and the totals less
/// them near the kernel's.
fn assert_reconciled(resident: &Value) {
    assert_eq!(
        site_kib(resident, "peak", "read_file", "file"),
        1024,
        "{resident:#}"
    );
    assert_eq!(
        site_kib(resident, "end", "read_file", "file"),
        1024,
        "{resident:#}"
    );
    let taken = resident["pages"]["taken_back"].as_u64().unwrap();
    assert!((32..=130).contains(&taken), "{resident:#}");
    // What the ledger holds beyond the kernel's count: the pages taken
    // back less the one or two the process faults in again (seen: 128
    // taken, 504 KiB), and on a machine short of memory perhaps a few the
    // process's own allocations reclaimed from it (its count drops in its
    // own context, outside a syscall the ledger follows; one failure of
    // 480..=520 under the whole suite, figures not kept): up to 2% of its
    // file pages.
    let reconciled = resident["end"]["reconciled_kib"]["file"].as_u64().unwrap();
    let file_kib = resident["end"]["kib"]["file"].as_u64().unwrap();
    let taken_kib = taken * 4;
    assert!(
        (taken_kib - 16..=taken_kib + file_kib / 50).contains(&reconciled),
        "{resident:#}"
    );
    assert_near_kernel(resident, "peak");
    assert_near_kernel(resident, "end");
}

/// `record --interval --resident -p` (fixtures/resident_phases.c, 1 s
/// intervals): the ledger goes on across intervals, each with its own
/// peak and end. An interval in the first sleep ends with touch_first's
/// 1,024 KiB; one in the second with touch_second's 512 and none of
/// touch_first's (munmap gave them back); phase 2's interval peaks at
/// both. Each interval writes its resident.folded and resident-exit.folded.
#[test]
fn intervals_keep_the_ledger_and_see_their_own_peak_and_end() {
    if !can_record() {
        return;
    }
    let _shared = crate::util::shared();
    let dir = temp_dir("resident_intervals");
    let exe = compile_c(&dir, "resident_phases.c", &[]);
    let mut phases = crate::live::start_waiter(&exe);
    let out_dir = dir.join("out");
    let pid = phases.id().to_string();
    let args = [
        "-o",
        out_dir.to_str().unwrap(),
        "--interval",
        "1",
        "--resident",
    ];
    let recorder = crate::live::start_pfprof(&[&args[..], &["-p", &pid]].concat());
    assert!(crate::util::signal(phases.id(), "USR1"));
    assert!(phases.wait().unwrap().success());
    let out = recorder.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));

    let mut names: Vec<String> = std::fs::read_dir(&out_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    let mut ends = Vec::new();
    let mut peaks = Vec::new();
    for name in &names {
        let interval = out_dir.join(name);
        for file in ["resident.folded", "resident-exit.folded"] {
            assert!(interval.join(file).is_file(), "{name}/{file}");
        }
        let report = crate::util::read_report(&interval.join("report.json"));
        let resident = &report["resident"];
        assert!(resident.is_object(), "{name}: {report:#}");
        let kib = |moment: &str, function: &str| site_kib(resident, moment, function, "anon");
        ends.push((kib("end", "touch_first"), kib("end", "touch_second")));
        peaks.push((kib("peak", "touch_first"), kib("peak", "touch_second")));
    }
    assert!(ends.contains(&(1024, 0)), "{names:?}: ends {ends:?}");
    assert!(ends.contains(&(0, 512)), "{names:?}: ends {ends:?}");
    assert!(peaks.contains(&(1024, 512)), "{names:?}: peaks {peaks:?}");
    // Once given back, touch_first's pages are in no later interval.
    let gone = ends.iter().position(|&end| end == (0, 512)).unwrap();
    assert!(
        ends[gone..].iter().all(|&(first, _)| first == 0),
        "{ends:?}"
    );
}

/// `record -a --resident`: every process's pages first touched while it
/// records, by program. fixtures/resident.c (under a name of its own) run
/// meanwhile holds its sites' KiB exactly in the exit graph (each process
/// at its exit), and at the peak, which is the fixture's while it runs
/// alone; pfprof's own pages are in neither; the report says that pages
/// resident before the recording began are the kernel's count's only.
#[test]
fn the_hosts_resident_memory_by_program() {
    if !can_record() {
        return;
    }
    let dir = temp_dir("resident_system");
    let built = compile_c(&dir, "resident.c", &[]);
    let exe = dir.join("rsd_host");
    std::fs::copy(&built, &exe).unwrap();
    let data = dir.join("resident.dat");
    let out_dir = dir.join("out");
    // Alone: the peak of the host's followed processes is the fixture's.
    let _alone = crate::util::exclusive();
    let args = ["-q", "-a", "--resident", "--duration", "60", "-o"];
    let recorder = crate::live::start_pfprof(&[&args[..], &[out_dir.to_str().unwrap()]].concat());
    let fixture = std::process::Command::new(&exe)
        .arg(&data)
        .output()
        .unwrap();
    assert!(fixture.status.success());
    assert!(crate::util::signal(recorder.id(), "INT"));
    let out = recorder.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));

    let read = |name: &str| std::fs::read_to_string(out_dir.join(name)).unwrap();
    let kib = |folded: &str, site: &str| -> u64 {
        folded
            .lines()
            .filter(|l| l.starts_with("rsd_host;") && l.contains(site))
            .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
            .sum()
    };
    let (peak, exit) = (read("resident.folded"), read("resident-exit.folded"));
    for (site, at_peak, at_exit) in [
        (";touch_anon;[anon] ", 1024, 640),
        (";touch_remap;[anon] ", 128, 128),
        (";touch_grown;", 128, 128),
        (";read_file;[resident.dat] ", 256, 256),
    ] {
        assert_eq!(kib(&exit, site), at_exit, "{site}: {exit}");
        assert_eq!(kib(&peak, site), at_peak, "{site}: {peak}");
    }
    for folded in [&peak, &exit] {
        assert!(
            !folded.lines().any(|l| l.starts_with("pfprof;")),
            "{folded}"
        );
    }
    let report = crate::util::read_report(&out_dir.join("report.json"));
    let resident = &report["resident"];
    assert!(
        resident["unseen"]
            .as_str()
            .unwrap()
            .starts_with("pages resident before the recording began"),
        "{resident:#}"
    );
    // On the recording's clock, from its start (not the kernel's uptime).
    let peak_ns = resident["peak"]["time_ns"].as_u64().unwrap();
    assert!(peak_ns < 60_000_000_000, "{peak_ns}");
}

/// An address space's memory is reused once it is freed: a child's fork
/// copy (its parent's doing) at the address another child's first address
/// space had before that one exec'd is no change of that child's pages
/// (fixtures/resident_reuse.c, twenty times). The collector named the
/// earlier owner for it: 430 of its pages "taken back" from the running
/// child and as many unattributed when it counted them again (chromium's
/// zygote: up to 80,000).
#[test]
fn a_reused_address_space_is_not_its_earlier_owners() {
    if !can_record() {
        return;
    }
    let dir = temp_dir("resident_reuse");
    let exe = compile_c(&dir, "resident_reuse.c", &[]);
    let (out, report) = record_with(&dir, &["--resident"], &exe, &["/bin/sleep", "0.1"]);
    assert!(out.status.success(), "{out:?}");
    let pages = &report["resident"]["pages"];
    // Nothing here reclaims, or gives pages back without a syscall.
    assert_eq!(pages["taken_back"], 0, "{pages}");
    assert_near_kernel(&report["resident"], "peak");
}
