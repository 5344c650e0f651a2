//! Names are never wrong silently: a file that is not the one the process
//! mapped (replaced, another mount namespace, changed without a build-id, a
//! debug file of another build, a mapping moved by mremap) gives addresses
//! and a warning naming it, never another build's function names.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::util::{
    can_record, compile_c, fault_line, function_sites, pfprof, record_with, run, show, sites,
    temp_dir, total,
};

/// Every function name in every stack of the report.
fn all_names(report: &Value) -> Vec<String> {
    report["sites"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| {
            s["stack"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| f.as_str().unwrap().to_string())
                .chain([s["function"].as_str().unwrap_or("").to_string()])
        })
        .collect()
}

fn warnings(report: &Value) -> Vec<String> {
    report["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap().to_string())
        .collect()
}

/// `pfprof report --format json` of a recording, again (after a file changed).
fn report_again(out_dir: &Path) -> Value {
    report_with(out_dir, &[])
}

/// [`report_again`] with options (a `--buildid-dir`).
fn report_with(out_dir: &Path, options: &[&str]) -> Value {
    let out = run(pfprof()
        .args(["report", "--format", "json", "-i"])
        .arg(out_dir)
        .args(options));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    crate::util::parse_report(&out.stdout)
}

/// `pfprof report` (text): the warnings reach report.txt's reader too.
/// `report`'s text with its lines joined (warnings wrap at 100 columns),
/// every line checked to fit.
fn report_text(out_dir: &Path) -> String {
    report_text_with(out_dir, &[])
}

/// [`report_text`] with options.
fn report_text_with(out_dir: &Path, options: &[&str]) -> String {
    let out = run(pfprof().args(["report", "-i"]).arg(out_dir).args(options));
    let text = String::from_utf8_lossy(&out.stdout);
    for line in text.lines() {
        assert!(line.chars().count() <= 100, "over 100 columns: {line}");
    }
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The GNU build-id of an ELF file, as readelf prints it.
fn build_id(path: &Path) -> String {
    let out = run(Command::new("readelf").arg("-n").arg(path));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.trim().strip_prefix("Build ID: ").map(str::to_string))
        .unwrap_or_else(|| panic!("{} has no build-id", path.display()))
}

/// wait_signal, and a decoy: the same code with `touch_after_signal`
/// renamed, so that the decoy's names at the real program's offsets are
/// recognisably wrong.
fn wait_signal_and_decoy(dir: &Path) -> (PathBuf, PathBuf) {
    let real = compile_c(dir, "wait_signal.c", &[]);
    let decoy_dir = dir.join("decoy");
    std::fs::create_dir_all(&decoy_dir).unwrap();
    let decoy = compile_c(
        &decoy_dir,
        "wait_signal.c",
        &["-Dtouch_after_signal=decoy_function"],
    );
    assert_ne!(build_id(&real), build_id(&decoy));
    (real, decoy)
}

/// Reads the child's "ready" line.
fn wait_ready(child: &mut Child) {
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line, "ready\n");
}

/// Waits for `recorder`'s "pfprof: recording" line (false, and the
/// recorder killed, if it never comes); the rest of its stderr is read by
/// a thread, joined for its text.
fn until_recording(recorder: &mut Child) -> bool {
    let mut reader = BufReader::new(recorder.stderr.take().unwrap());
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut line = String::new();
    while !line.starts_with("pfprof: recording") {
        line.clear();
        if Instant::now() > deadline || reader.read_line(&mut line).unwrap_or(0) == 0 {
            let _ = recorder.kill();
            eprintln!("last line of pfprof: {line:?}");
            return false;
        }
    }
    std::thread::spawn(move || for _ in reader.lines() {});
    true
}

/// Attaches to `pid` until it exits after SIGUSR1; returns report.json.
fn attach_and_signal(target: &mut Child, out_dir: &Path, options: &[&str]) -> Value {
    let mut recorder = pfprof()
        .arg("record")
        .args(["-q", "-o"])
        .arg(out_dir)
        .args(options)
        .args(["-p", &target.id().to_string()])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    if !until_recording(&mut recorder) {
        let _ = target.kill();
        panic!("pfprof did not start recording");
    }
    assert!(crate::util::signal(target.id(), "USR1"));
    assert!(target.wait().unwrap().success());
    assert_eq!(recorder.wait().unwrap().code(), Some(0));
    crate::util::read_report(&out_dir.join("report.json"))
}

/// The 64 faults after SIGUSR1 were recorded (whatever their names).
fn assert_recorded_after_signal(report: &Value, pid: u32) {
    let rows = sites(report, move |s| {
        s["pids"][0] == pid && s["target"]["region"] == "anon" && s["access"] == "write"
    });
    assert!(total(&rows) >= 64, "{}", show(&rows));
}

/// A binary replaced on disk (a new build renamed over its path) after the
/// process started, then attached to: the recording carries the build-id of
/// the file the process runs, whose copy in the build-id cache names its
/// code, then and in a later report; without the cache, the report never
/// names it with the new build's functions: addresses plus a warning.
#[test]
fn replaced_binary_under_attach() {
    if !can_record() {
        return;
    }
    let _shared = crate::util::shared();
    let dir = temp_dir("names_replaced");
    let (real, decoy) = wait_signal_and_decoy(&dir);
    let real_id = build_id(&real);
    let mut target = Command::new(&real).stdout(Stdio::piped()).spawn().unwrap();
    wait_ready(&mut target);
    std::fs::rename(&decoy, &real).unwrap();
    let pid = target.id();
    let cache = dir.join("cache");
    let cache_option = ["--buildid-dir", cache.to_str().unwrap()];
    let report = attach_and_signal(&mut target, &dir.join("out"), &cache_option);
    assert_recorded_after_signal(&report, pid);
    assert_named(&report, "touch_after_signal", "decoy_function");
    assert!(
        cache.join(entry(&real_id)).is_file(),
        "the process's file is not in the cache"
    );
    assert_named(
        &report_with(&dir.join("out"), &cache_option),
        "touch_after_signal",
        "decoy_function",
    );
    // The mapping's build-id, read through /proc/PID/map_files at attach.
    let exe = real.to_str().unwrap();
    let module = report["modules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["path"].as_str().unwrap().starts_with(exe))
        .unwrap_or_else(|| panic!("no module {exe}: {}", report["modules"]));
    assert_eq!(module["build_id"], real_id.as_str(), "{module}");
    // The unwinder read the mapped file itself: stacks reach main.
    let leaf = sites(&report, move |s| {
        s["pids"][0] == pid && s["access"] == "write"
    });
    assert!(
        leaf.iter().any(|s| s["stack"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f == "__libc_start_call_main")),
        "{}",
        show(&leaf)
    );

    // Without the cache: addresses and a warning naming the file.
    let empty = dir.join("empty");
    let report = report_with(
        &dir.join("out"),
        &["--buildid-dir", empty.to_str().unwrap()],
    );
    let names = all_names(&report);
    assert!(
        !names
            .iter()
            .any(|n| n.contains("decoy_function") || n == "touch_after_signal"),
        "named without the recorded build: {names:?}"
    );
    let w = warnings(&report);
    assert!(w.iter().any(|w| w.starts_with(exe)), "{w:?}");
}

/// The cache entry of a build-id, in perf's layout.
fn entry(build_id: &str) -> PathBuf {
    PathBuf::from(format!(
        ".build-id/{}/{}/elf",
        &build_id[..2],
        &build_id[2..]
    ))
}

/// The 64 faults after the signal are at `right`, and `wrong` names nothing.
fn assert_named(report: &Value, right: &str, wrong: &str) {
    let rows = function_sites(report, right);
    assert_eq!(total(&rows), 64, "{}: {:?}", right, all_names(report));
    let names = all_names(report);
    assert!(!names.iter().any(|n| n == wrong), "{wrong} in {names:?}");
}

/// A process in its own mount namespace (`unshare -m`) where a bind mount
/// puts another build over the path: attached from outside, its code is
/// named from the file it maps (kept in the build-id cache), never with the
/// outside file's names, then and later; the unwinder reads that file.
#[test]
fn mount_namespace_under_attach() {
    if !can_record() {
        return;
    }
    let _shared = crate::util::shared();
    let dir = temp_dir("names_mntns");
    let (real, decoy) = wait_signal_and_decoy(&dir);
    // Outside: `real` at PATH; inside: `decoy` mounted over PATH.
    let path = real.to_str().unwrap();
    let mut target = Command::new("unshare")
        .args(["-m", "--propagation", "private", "sh", "-c"])
        .arg(format!(
            "mount --bind {} {path} && exec {path}",
            decoy.display()
        ))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    wait_ready(&mut target);
    let pid = target.id();
    let cache = dir.join("cache");
    let cache_option = ["--buildid-dir", cache.to_str().unwrap()];
    let report = attach_and_signal(&mut target, &dir.join("out"), &cache_option);
    assert_recorded_after_signal(&report, pid);
    // Named from the file the process mapped, kept in the cache.
    assert_named(&report, "decoy_function", "touch_after_signal");
    assert_named(
        &report_with(&dir.join("out"), &cache_option),
        "decoy_function",
        "touch_after_signal",
    );
    // The build-id of the file the process maps, read through map_files.
    let module = report["modules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["path"] == path)
        .unwrap_or_else(|| panic!("no module {path}: {}", report["modules"]));
    assert_eq!(module["build_id"], build_id(&decoy).as_str(), "{module}");
    let unreadable = &report["totals"]["unwind"]["unreadable_files"];
    assert!(
        !unreadable
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f.as_str().unwrap().starts_with(path)),
        "the unwinder could not read the process's own file: {unreadable}"
    );
}

/// A separate debug file found through `.gnu_debuglink` whose CRC no longer
/// matches (same build-id, a byte appended) is not used: the stripped
/// program's addresses stay unnamed and the warning names the debug file.
#[test]
fn debuglink_with_bad_crc_is_rejected() {
    if !can_record() {
        return;
    }
    let dir = temp_dir("names_debuglink");
    let exe = compile_c(&dir, "touch.c", &[]);
    let debug = dir.join("touch.debug");
    for args in [
        vec!["--only-keep-debug".into(), exe.clone(), debug.clone()],
        vec!["--strip-all".into(), exe.clone()],
        vec![
            format!("--add-gnu-debuglink={}", debug.display()).into(),
            exe.clone(),
        ],
    ] {
        let out = run(Command::new("objcopy").args(&args));
        assert!(out.status.success(), "objcopy {args:?}");
    }
    // Other tests' unstripped touch (the same build-id) may be in the test
    // run's build-id cache, and would name it.
    let empty = dir.join("empty");
    let no_cache = ["--buildid-dir", empty.to_str().unwrap()];
    let (_, report) = record_with(
        &dir,
        &[&["--no-buildid-cache"][..], &no_cache].concat(),
        &exe,
        &["4"],
    );
    // With the matching debug file, the names come from it.
    assert_eq!(total(&function_sites(&report, "touch_pages")), 1024);
    let debug_id = build_id(&debug);
    let mut bytes = std::fs::read(&debug).unwrap();
    bytes.push(0);
    std::fs::write(&debug, bytes).unwrap();
    assert_eq!(build_id(&debug), debug_id, "still the same build-id");

    let report = report_with(&dir.join("out"), &no_cache);
    assert!(
        function_sites(&report, "touch_pages").is_empty(),
        "{:?}",
        all_names(&report)
    );
    let debug_name = debug.to_str().unwrap();
    let w = warnings(&report);
    assert!(
        w.iter()
            .any(|w| w.starts_with(debug_name) && w.contains("CRC")),
        "{w:?}"
    );
    assert!(report_text_with(&dir.join("out"), &no_cache).contains(debug_name));
}

/// A program linked without a build-id and changed after recording (touch,
/// then rewritten with other code): addresses plus a warning naming it.
#[test]
fn file_without_build_id_changed_after_recording() {
    if !can_record() {
        return;
    }
    let dir = temp_dir("names_no_build_id");
    let exe = compile_c(&dir, "touch.c", &["-Wl,--build-id=none"]);
    let (_, report) = record_with(&dir, &[], &exe, &["4"]);
    assert_eq!(total(&function_sites(&report, "touch_pages")), 1024);
    assert!(warnings(&report).is_empty(), "{:?}", warnings(&report));
    let exe_name = exe.to_str().unwrap();

    // Same bytes, new mtime.
    let out = run(Command::new("touch").args(["-d", "2001-01-01"]).arg(&exe));
    assert!(out.status.success());
    let report = report_again(&dir.join("out"));
    assert!(function_sites(&report, "touch_pages").is_empty());
    let w = warnings(&report);
    assert!(
        w.iter()
            .any(|w| w.starts_with(exe_name) && w.contains("changed since recording")),
        "{w:?}"
    );
    assert!(report_text(&dir.join("out")).contains("changed since recording"));

    // Another program under the same name: its names never appear.
    compile_c(
        &dir,
        "touch.c",
        &["-Wl,--build-id=none", "-Dtouch_pages=decoy_function"],
    );
    let report = report_again(&dir.join("out"));
    let names = all_names(&report);
    assert!(
        !names
            .iter()
            .any(|n| n == "decoy_function" || n == "touch_pages"),
        "{names:?}"
    );
}

/// A file mapping moved with mremap (no mmap record) and faulted at its
/// new address: the faults are never attributed to the file (pfprof knows
/// the reserved anonymous mapping there; see the README's limits), and
/// are, where `--resident` records the syscall.
#[test]
fn mremap_moved_file_mapping_is_not_misattributed() {
    if !can_record() {
        return;
    }
    let dir = temp_dir("names_mremap");
    let exe = compile_c(&dir, "mremap_file.c", &[]);
    let data = dir.join("mapped.dat");
    let (output, report) = record_with(&dir, &[], &exe, &[data.to_str().unwrap()]);
    assert!(output.status.success());
    let rows = function_sites(&report, "read_moved");
    // Fault-around maps up to 16 pages per fault: 2-32 faults.
    assert!(total(&rows) >= 2, "{}", show(&rows));
    for r in &rows {
        assert_eq!(r["line"], fault_line("mremap_file.c", "moved"));
        assert_ne!(
            r["target"]["object"],
            data.to_str().unwrap(),
            "{}",
            show(&rows)
        );
        assert_eq!(r["target"]["region"], "anon", "{}", show(&rows));
    }
    // With --resident the syscall is recorded, and the mapping followed:
    // the faults at the new address are the file's.
    let resident = dir.join("resident");
    std::fs::create_dir_all(&resident).unwrap();
    let (output, report) = record_with(&resident, &["--resident"], &exe, &[data.to_str().unwrap()]);
    assert!(output.status.success());
    let rows = function_sites(&report, "read_moved");
    assert!(total(&rows) >= 2, "{}", show(&rows));
    for r in &rows {
        assert_eq!(
            r["target"]["object"],
            data.to_str().unwrap(),
            "{}",
            show(&rows)
        );
    }
}

/// A shell line that starts `exe` (wait_signal), waits until it is ready
/// and half a second more (the recorder opens a new mapping's file within
/// a poll interval), runs `meanwhile`, then signals it and waits: its 64
/// faults follow the signal.
fn signal_when_ready(exe: &Path, dir: &Path, meanwhile: &str) -> String {
    let ready = dir.join(format!("ready-{}", std::process::id()));
    format!(
        "rm -f {r}; {exe} > {r} & p=$!; until grep -q ready {r} 2>/dev/null; do sleep 0.05; done; \
         sleep 0.5; {meanwhile} kill -USR1 $p; wait $p",
        exe = exe.display(),
        r = ready.display()
    )
}

/// `sh -c LINE` in a private mount namespace where `over` is bind-mounted
/// on `path` first.
fn in_namespace(over: &Path, path: &Path, line: &str) -> Vec<String> {
    vec![
        "unshare".into(),
        "-m".into(),
        "--propagation".into(),
        "private".into(),
        "sh".into(),
        "-c".into(),
        format!(
            "mount --bind {} {} && {{ {line}; }}",
            over.display(),
            path.display()
        ),
    ]
}

/// A launched command whose binary is another build inside its mount
/// namespace, and one whose binary is deleted while it runs: both named
/// from the files they ran, in the recording's report and in a report after
/// the fact.
#[test]
fn launched_namespaced_and_deleted_binaries_are_named() {
    if !can_record() {
        return;
    }
    let dir = temp_dir("names_launched");
    let (real, decoy) = wait_signal_and_decoy(&dir);
    let cache = dir.join("cache");
    let cache_option = ["--buildid-dir", cache.to_str().unwrap()];
    let record = |out: &str, command: &[String]| {
        let output = run(pfprof()
            .args(["record", "-q", "-o"])
            .arg(dir.join(out))
            .args(cache_option)
            .arg("--")
            .args(command));
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        crate::util::read_report(&dir.join(out).join("report.json"))
    };

    let line = signal_when_ready(&real, &dir, "");
    let report = record("mntns", &in_namespace(&decoy, &real, &line));
    assert_named(&report, "decoy_function", "touch_after_signal");

    let line = signal_when_ready(&real, &dir, &format!("rm {};", real.display()));
    let report = record("deleted", &["sh".into(), "-c".into(), line]);
    assert!(!real.exists());
    assert_named(&report, "touch_after_signal", "decoy_function");

    for (out, right, wrong) in [
        ("mntns", "decoy_function", "touch_after_signal"),
        ("deleted", "touch_after_signal", "decoy_function"),
    ] {
        assert_named(&report_with(&dir.join(out), &cache_option), right, wrong);
    }
}

/// System-wide: a process in another mount namespace and a binary replaced
/// while it runs are named from the files they ran.
#[test]
fn system_wide_namespaced_and_replaced_binaries_are_named() {
    if !can_record() {
        return;
    }
    let _exclusive = crate::util::exclusive();
    let dir = temp_dir("names_system_wide");
    let (real, decoy) = wait_signal_and_decoy(&dir);
    let second_decoy = dir.join("decoy").join("second");
    std::fs::copy(&decoy, &second_decoy).unwrap();
    let cache = dir.join("cache");
    let mut recorder = pfprof()
        .args(["record", "-q", "-a", "--duration", "6", "-o"])
        .arg(dir.join("out"))
        .args(["--buildid-dir", cache.to_str().unwrap()])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    assert!(
        until_recording(&mut recorder),
        "pfprof did not start recording"
    );
    let inside = in_namespace(&decoy, &real, &signal_when_ready(&real, &dir, ""));
    let out = Command::new(&inside[0])
        .args(&inside[1..])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let replace = format!("mv {} {};", second_decoy.display(), real.display());
    let out = Command::new("sh")
        .args(["-c", &signal_when_ready(&real, &dir, &replace)])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(recorder.wait().unwrap().success());
    let report = crate::util::read_report(&dir.join("out").join("report.json"));
    // Each program's 64 faults, at its own function.
    for function in ["decoy_function", "touch_after_signal"] {
        let rows = function_sites(&report, function);
        assert_eq!(total(&rows), 64, "{function}: {}", show(&rows));
    }
}

/// `pfprof archive DIR` copies what the recording names into DIR: a copy
/// of DIR reports the same names with the binary and the cache gone; a
/// later `record -o DIR` moves the archived directory aside as usual.
#[test]
fn archive_reports_without_the_files() {
    if !can_record() {
        return;
    }
    let dir = temp_dir("names_archive");
    let real = compile_c(&dir, "wait_signal.c", &[]);
    let real_id = build_id(&real);
    let cache = dir.join("cache");
    let out_dir = dir.join("out");
    let line = signal_when_ready(&real, &dir, "");
    let output = run(pfprof().args(["record", "-q", "-o"]).arg(&out_dir).args([
        "--buildid-dir",
        cache.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        &line,
    ]));
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );

    let output = run(pfprof()
        .arg("archive")
        .arg(&out_dir)
        .args(["--buildid-dir", cache.to_str().unwrap()]));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("pfprof: archived "), "{stderr}");
    assert!(out_dir.join(entry(&real_id)).is_file(), "{stderr}");

    let copy = dir.join("copy");
    assert!(run(Command::new("cp").arg("-a").arg(&out_dir).arg(&copy))
        .status
        .success());
    std::fs::rename(&real, dir.join("away")).unwrap();
    std::fs::rename(&cache, dir.join("cache-away")).unwrap();
    let empty = dir.join("empty");
    let report = report_with(&copy, &["--buildid-dir", empty.to_str().unwrap()]);
    let rows = function_sites(&report, "touch_after_signal");
    assert_eq!(total(&rows), 64, "{:?}", all_names(&report));

    // The archived directory is pfprof's: moved to .old, then deleted.
    for _ in 0..2 {
        let output = run(pfprof()
            .args(["record", "-q", "--no-buildid-cache", "-o"])
            .arg(&out_dir)
            .args(["--", "true"]));
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    assert!(!dir.join("out.old").join(".build-id").exists());
}

/// A stripped build kept in the build-id cache does not hide the same build
/// with its symbols and DWARF at the path: the richer file names the code.
#[test]
fn cached_stripped_copy_yields_to_the_whole_build() {
    if !can_record() {
        return;
    }
    let dir = temp_dir("names_cached_stripped");
    let exe = compile_c(&dir, "touch.c", &[]);
    let whole = dir.join("whole");
    std::fs::copy(&exe, &whole).unwrap();
    assert!(run(Command::new("strip").arg(&exe)).status.success());
    let cache = dir.join("cache");
    let cache_option = ["--buildid-dir", cache.to_str().unwrap()];
    let (output, report) = record_with(&dir, &cache_option, &exe, &["4"]);
    assert!(output.status.success());
    assert!(function_sites(&report, "touch_pages").is_empty());
    std::fs::rename(&whole, &exe).unwrap();
    let report = report_with(&dir.join("out"), &cache_option);
    assert_eq!(total(&function_sites(&report, "touch_pages")), 1024);
}

/// `record` keeps a plain copy of libc's compressed debug file (Debian's
/// libc6-dbg) in the build-id cache, as `debug` beside `elf`: the same
/// build-id, no section compressed. A report read through the copy names
/// every frame as one read through the compressed file does.
#[test]
fn compressed_debug_files_are_cached_plain() {
    if !can_record() {
        return;
    }
    let dir = temp_dir("names_plain_debug");
    let exe = compile_c(&dir, "touch.c", &[]);
    let cache = dir.join("cache");
    let cache_option = ["--buildid-dir", cache.to_str().unwrap()];
    let (_, report) = record_with(&dir, &cache_option, &exe, &["16"]);
    let libc = report["modules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["path"].as_str().unwrap().ends_with("/libc.so.6"))
        .unwrap_or_else(|| panic!("no libc: {}", report["modules"]));
    let id = libc["build_id"].as_str().unwrap();
    let packaged = PathBuf::from(format!(
        "/usr/lib/debug/.build-id/{}/{}.debug",
        &id[..2],
        &id[2..]
    ));
    let sections = |path: &Path| {
        let out = run(Command::new("readelf").arg("-SW").arg(path));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    // readelf's flag column: C for SHF_COMPRESSED.
    let compressed = |listing: &str| {
        (listing.lines())
            .filter(|l| l.contains(".debug_info") || l.contains(".debug_line "))
            .any(|l| {
                l.split_whitespace()
                    .rev()
                    .nth(3)
                    .is_some_and(|f| f.contains('C'))
            })
    };
    assert!(
        compressed(&sections(&packaged)),
        "{} is not compressed (or missing: libc6-dbg is installed by .ci/run)",
        packaged.display()
    );
    let copy = cache.join(format!(".build-id/{}/{}/debug", &id[..2], &id[2..]));
    assert!(copy.is_file(), "no {}", copy.display());
    assert!(!compressed(&sections(&copy)), "{}", sections(&copy));
    assert_eq!(build_id(&copy), id);

    let out_dir = dir.join("out");
    let empty = dir.join("empty-cache");
    let through_copy = report_with(&out_dir, &cache_option);
    let through_package = report_with(&out_dir, &["--buildid-dir", empty.to_str().unwrap()]);
    let names = all_names(&through_copy);
    assert!(
        names.iter().any(|n| n == "__libc_start_call_main"),
        "{names:?}"
    );
    assert_eq!(names, all_names(&through_package));
}
