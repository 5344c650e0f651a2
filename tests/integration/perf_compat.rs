//! The real `perf` reads pfprof's recordings: `perf script`, `perf report
//! --stdio`, `--stats` and `--mem-mode` open them without a warning or an
//! error, and count the fault samples pfprof counted.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use crate::util::*;

/// Whether `perf` runs here; under CI it must.
fn perf_available() -> bool {
    let ok = Command::new("perf")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        if std::env::var_os("CI").is_some() {
            panic!("perf is not installed under CI (.ci/run installs linux-perf)");
        }
        eprintln!("SKIPPED: perf is not installed: perf reading pfprof recordings");
    }
    ok
}

/// Runs `perf ARGS -i DATA`: exit 0 and a clean stderr, or a panic naming
/// the command. Returns stdout.
fn perf(data: &Path, args: &[&str]) -> String {
    let out = run(Command::new("perf").args(args).arg("-i").arg(data));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "perf {args:?} exited with {}: {stderr}",
        out.status
    );
    let lower = stderr.to_lowercase();
    for word in ["warning", "error", "incompatible", "broken", "unknown"] {
        assert!(
            !lower.contains(word),
            "perf {args:?} says {word:?}: {stderr}"
        );
    }
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A file's GNU build-id in hex, as `readelf -n` prints it.
fn build_id(path: &Path) -> String {
    let out = run(Command::new("readelf").arg("-n").arg(path));
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| l.trim().strip_prefix("Build ID: "))
        .unwrap_or_else(|| panic!("no build-id in {}: {text}", path.display()))
        .to_string()
}

/// `perf report --stats`: event name → its SAMPLE events.
fn sample_stats(stats: &str) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    let mut event = None;
    for line in stats.lines() {
        if let Some(name) = line.strip_suffix(" stats:") {
            event = Some(name.trim().to_string());
        } else if let (Some(name), Some(n)) = (&event, line.trim().strip_prefix("SAMPLE events:")) {
            // `N` or `N  (P%)`
            let n = n.split_whitespace().next().unwrap_or_default();
            out.insert(name.clone(), n.parse().unwrap());
        }
    }
    out
}

/// `# Samples: N  of event 'NAME'` lines of `perf report --stdio`.
fn report_samples(report: &str) -> BTreeMap<String, u64> {
    report
        .lines()
        .filter_map(|line| {
            let rest = line.strip_prefix("# Samples: ")?;
            let (n, name) = rest.split_once(" of event ")?;
            Some((name.trim_matches('\'').to_string(), n.trim().parse().ok()?))
        })
        .collect()
}

/// file_major's recording (major faults on a file, minor ones on its own
/// pages) in each call-graph mode, with and without the tracepoints, with
/// kernel frames: perf
/// opens it cleanly, counts as many fault samples as pfprof's report, and
/// `--mem-mode` names the file the major faults read.
#[test]
fn perf_reads_pfprof_recordings() {
    if !can_record() || !perf_available() {
        return;
    }
    let dir = temp_dir("perf-compat");
    let exe = compile_c(&dir, "file_major.c", &[]);
    for (name, options) in [
        ("dwarf", &[][..]),
        ("fp", &["--call-graph", "fp"][..]),
        ("no-tracepoints", &["--no-tracepoints"][..]),
        ("kernel", &["--kernel"][..]),
    ] {
        let sub = dir.join(name);
        std::fs::create_dir_all(&sub).unwrap();
        let file = sub.join("pages.bin");
        let (output, report) = record_with(&sub, options, &exe, &[file.to_str().unwrap()]);
        assert!(output.status.success(), "{name}: {output:?}");
        let data = sub.join("out/pfprof.data");
        let t = &report["totals"];
        let (minor, major, cow) = (
            t["minor"].as_u64().unwrap(),
            t["major"].as_u64().unwrap(),
            t["cow"].as_u64().unwrap(),
        );
        // The fixture's 64 on its file, and what else the kernel read in
        // for the process (a library page no longer cached, while other
        // tests fill memory): pfprof's count is the kernel's.
        let on_file = report["files"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| {
                f["path"]
                    .as_str()
                    .is_some_and(|p| p.ends_with("/pages.bin"))
            })
            .map(|f| f["major"].as_u64().unwrap())
            .sum::<u64>();
        assert_eq!(on_file, 64, "{name}: {}", report["files"]);
        assert_eq!(major, t["kernel_major"].as_u64().unwrap(), "{name}: {t}");

        let stats = sample_stats(&perf(&data, &["report", "--stats"]));
        assert_eq!(
            (stats.get("minor-faults"), stats.get("major-faults")),
            (Some(&(minor + cow)), Some(&major)),
            "{name}: perf's samples {stats:?}, pfprof's totals {t}"
        );
        let tracepoints = ["exceptions:page_fault_user", "exceptions:page_fault_kernel"]
            .iter()
            .filter_map(|e| stats.get(*e))
            .sum::<u64>();
        if name == "no-tracepoints" {
            assert_eq!(tracepoints, 0, "{stats:?}");
        } else {
            // One fault entry per fault at least (a retried fault enters twice).
            assert!(tracepoints >= minor + major + cow, "{name}: {stats:?} {t}");
        }

        // The build-id table names the program with its own build-id, and
        // the kernel.
        let ids = perf(&data, &["buildid-list"]);
        // (The kernel names the file by its resolved path.)
        let exe_line = format!(
            "{} {}",
            build_id(&exe),
            exe.canonicalize().unwrap().display()
        );
        assert!(ids.lines().any(|l| l == exe_line), "{name}: {ids}");
        assert!(ids.contains(" [kernel.kallsyms]"), "{name}: {ids}");

        let script = perf(&data, &["script"]);
        let read_pages = script.matches("read_file_pages").count() as u64;
        assert!(
            read_pages >= on_file,
            "{name}: {read_pages} frames of read_file_pages"
        );

        if name == "kernel" {
            // The faults the kernel took on user memory (exec's, at least)
            // have kernel frames, named through the kernel's text mapping.
            assert!(t["kernel_mode"].as_u64().unwrap() > 0, "{t}");
            let kernel_frames: Vec<&str> = script
                .lines()
                .filter(|l| l.ends_with("([kernel.kallsyms])"))
                .collect();
            assert!(!kernel_frames.is_empty(), "no kernel frames: {script}");
            assert!(
                kernel_frames.iter().all(|l| !l.contains("[unknown]")),
                "{kernel_frames:?}"
            );
        }

        let samples = report_samples(&perf(&data, &["report", "--stdio"]));
        assert_eq!(
            samples.get("major-faults"),
            Some(&major),
            "{name}: {samples:?}"
        );

        let mem = perf(
            &data,
            &[
                "report",
                "--mem-mode",
                "--sort",
                "symbol_daddr,dso_daddr",
                "--stdio",
            ],
        );
        assert_eq!(
            report_samples(&mem).get("major-faults"),
            Some(&major),
            "{name}: {mem}"
        );
        assert!(
            mem.contains("pages.bin"),
            "{name}: no data object pages.bin in {mem}"
        );
    }
}

/// perf reads pfprof's build-id cache: a binary rebuilt after the recording
/// is named from the copy `record` kept (`perf --buildid-dir`), not from
/// the new build at its path.
#[test]
fn perf_reads_pfprofs_build_id_cache() {
    if !can_record() || !perf_available() {
        return;
    }
    let dir = temp_dir("perf_compat_cache");
    let exe = compile_c(&dir, "bss_write.c", &[]);
    let cache = dir.join("cache");
    let (out, _) = record_with(&dir, &["--buildid-dir", cache.to_str().unwrap()], &exe, &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let id = build_id(&exe);
    assert!(cache
        .join(format!(".build-id/{}/{}/elf", &id[..2], &id[2..]))
        .is_file());
    compile_c(&dir, "bss_write.c", &["-O2", "-Dtouch_bss=decoy_function"]);
    let data = dir.join("out").join("pfprof.data");
    let report = perf(
        &data,
        &[
            "--buildid-dir",
            cache.to_str().unwrap(),
            "report",
            "--stdio",
            "--sort",
            "sym",
        ],
    );
    assert!(report.contains("touch_bss"), "{report}");
    assert!(!report.contains("decoy_function"), "{report}");
}

/// perf can profile pfprof: `perf record -- pfprof record -- true` exits 0
/// and `perf report` reads what it wrote. When pfprof asked the kernel for
/// build-ids in its mmap records, the kernel left the build-id flag set in
/// the header of the next event's record (perf's), and perf 6.1 read
/// device and inode as a build-id of 254 bytes and died ("assertion failed
/// at util/build-id.c:1010", then a smashed stack).
#[test]
fn perf_records_pfprof_recording() {
    if !can_record() || !perf_available() {
        return;
    }
    let dir = temp_dir("perf_records_pfprof");
    let data = dir.join("perf.data");
    let out = run(Command::new("perf")
        .args(["record", "-q", "-e", "cpu-clock", "-o"])
        .arg(&data)
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_pfprof"))
        .args(["record", "-q", "-o"])
        .arg(dir.join("out"))
        .args(["--", "true"]));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "perf record: {}: {stderr}",
        out.status
    );
    assert!(!stderr.contains("assertion failed"), "{stderr}");
    let report = perf(&data, &["report", "--stdio", "--sort", "comm"]);
    assert!(report.contains("pfprof"), "{report}");
    // pfprof's own recording still names its files by build-id.
    let recorded = perf(&dir.join("out/pfprof.data"), &["buildid-list"]);
    let libc = build_id(Path::new("/lib/x86_64-linux-gnu/libc.so.6"));
    assert!(recorded.contains(&libc), "{recorded}");
}

/// `record --resident`: the collector writes the `kmem:rss_stat` records
/// (its own `on_rss_stat`, not the tracepoint's perf event: `mm_id` 0
/// where the kernel writes a hash) and the syscalls', and perf reads them
/// as the tracepoints', each `rss_stat` the process's own count, in whole
/// pages.
#[test]
fn perf_reads_the_collectors_rss_stat_records() {
    if !can_record() || !perf_available() {
        return;
    }
    let dir = temp_dir("perf-compat-rss");
    let exe = compile_c(&dir, "resident.c", &[]);
    let data = dir.join("resident.dat");
    let (output, report) = record_with(&dir, &["--resident"], &exe, &[data.to_str().unwrap()]);
    assert!(output.status.success(), "{output:?}");
    let script = perf(
        &dir.join("out/pfprof.data"),
        &["script", "-F", "trace:event,trace"],
    );
    let stats: Vec<&str> = script
        .lines()
        .filter(|l| l.contains("kmem:rss_stat"))
        .collect();
    assert!(stats.len() >= 4, "{script}");
    for line in &stats {
        assert!(line.contains("mm_id=0 curr=1 type=MM_"), "{line}");
        let bytes: u64 = line
            .rsplit("size=")
            .next()
            .and_then(|b| b.trim().strip_suffix('B'))
            .and_then(|b| b.parse().ok())
            .unwrap_or_else(|| panic!("{line}"));
        assert_eq!(bytes % 4096, 0, "{line}");
    }
    // The syscalls that give memory back, written by the collector too.
    assert!(
        script.contains("syscalls:sys_enter_munmap: addr: 0x"),
        "{script}"
    );
    let kernel = &report["resident"]["end"]["kernel_kib"]["file"];
    assert!(kernel.as_u64() > Some(0), "{}", report["resident"]);
}
