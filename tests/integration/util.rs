//! Test helpers: compile fixtures, run pfprof, read its JSON report.

use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{OnceLock, RwLock, RwLockReadGuard, RwLockWriteGuard};

use serde_json::Value;

/// The pfprof binary under test, with a HOME of its own: its build-id cache
/// (`~/.debug`) is the test run's, not the machine's. A test that needs
/// names never to come from a cached copy passes `--no-buildid-cache` and
/// an empty `--buildid-dir`.
pub(crate) fn pfprof() -> Command {
    let home = Path::new(env!("CARGO_TARGET_TMPDIR")).join("home");
    std::fs::create_dir_all(&home).unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_pfprof"));
    command.env("HOME", home);
    command
}

/// The repository's fixtures directory.
pub(crate) fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

/// A fresh directory under the target dir, unique per test.
pub(crate) fn temp_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs a command, panicking with its output if it cannot start.
pub(crate) fn run(cmd: &mut Command) -> Output {
    // Compilers and recordings of other tests wait while an exclusive test
    // runs (see `exclusive`).
    let _shared = (!HOLDS_LOCK.get()).then(|| {
        TEST_LOCK
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    });
    cmd.output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"))
}

/// Compiles a C fixture with the documented flags into `dir`.
pub(crate) fn compile_c(dir: &Path, source: &str, extra: &[&str]) -> PathBuf {
    let src = fixtures().join(source);
    let out = dir.join(Path::new(source).file_stem().unwrap());
    let output = run(Command::new("cc")
        .args([
            "-g",
            "-O1",
            "-fno-omit-frame-pointer",
            "-mno-omit-leaf-frame-pointer",
            "-o",
        ])
        .arg(&out)
        .arg(&src)
        .args(extra));
    assert!(
        output.status.success(),
        "cc {source} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    out
}

/// Compiles the `rust_pages` fixture into `dir`, with or without frame
/// pointers (std has none either way).
pub(crate) fn compile_rust_pages(dir: &Path, frame_pointers: bool) -> PathBuf {
    let exe = dir.join("rust_pages");
    let fp: &[&str] = if frame_pointers {
        &["-C", "force-frame-pointers=yes"]
    } else {
        &[]
    };
    let out = run(Command::new("rustc")
        .args([
            "--edition",
            "2021",
            "-g",
            "-O",
            "--crate-name",
            "rust_pages",
        ])
        .args(fp)
        .arg("-o")
        .arg(&exe)
        .arg(fixtures().join("rust_pages/main.rs")));
    assert!(
        out.status.success(),
        "rustc rust_pages failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

/// The 1-based line of the `/* FAULT: tag */` marker in a fixture source.
pub(crate) fn fault_line(source: &str, tag: &str) -> u64 {
    let text = std::fs::read_to_string(fixtures().join(source)).unwrap();
    let marker = format!("FAULT: {tag} */");
    text.lines()
        .position(|l| l.contains(&marker))
        .unwrap_or_else(|| panic!("no marker {marker:?} in {source}")) as u64
        + 1
}

/// Whether perf events can be opened here. Without them, recording tests
/// skip with a message, except under CI, where they must run.
pub(crate) fn can_record() -> bool {
    static OK: OnceLock<bool> = OnceLock::new();
    *OK.get_or_init(|| {
        let dir = temp_dir("probe");
        let out = run(pfprof()
            .arg("record")
            .arg("-q")
            .arg("-o")
            .arg(dir.join("out"))
            .args(["--", "true"]));
        if out.status.success() {
            return true;
        }
        let why = String::from_utf8_lossy(&out.stderr);
        if std::env::var_os("CI").is_some() {
            panic!("perf events are unavailable under CI: {why}");
        }
        eprintln!(
            "SKIPPED: perf events unavailable here ({}); recording tests skip",
            why.trim()
        );
        false
    })
}

/// Records `program args` into `dir/out`, returning the process output and the parsed report.
pub(crate) fn record(dir: &Path, program: &Path, args: &[&str]) -> (Output, Value) {
    record_with(dir, &[], program, args)
}

/// [`record`] with pfprof options.
pub(crate) fn record_with(
    dir: &Path,
    options: &[&str],
    program: &Path,
    args: &[&str],
) -> (Output, Value) {
    let out_dir = dir.join("out");
    let output = run(pfprof()
        .arg("record")
        .arg("-q")
        .arg("-o")
        .arg(&out_dir)
        .args(options)
        .arg("--")
        .arg(program)
        .args(args));
    let json = std::fs::read(out_dir.join("report.json")).unwrap_or_else(|e| {
        panic!(
            "no report.json ({e}); stderr: {}",
            String::from_utf8_lossy(&output.stderr)
        )
    });
    (output, parse_report(&json))
}

/// Reads a report.json; see [`parse_report`].
pub(crate) fn read_report(path: &Path) -> Value {
    parse_report(&std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
}

/// Parses report.json and gives each site the `stack` (function names) and
/// `frames` its `stack_id` stands for in the shared `stacks` and `frames`
/// tables, checking that every index is in range.
pub(crate) fn parse_report(json: &[u8]) -> Value {
    let mut report: Value = serde_json::from_slice(json).unwrap();
    let frames = report["frames"].as_array().cloned().unwrap_or_default();
    let stacks = report["stacks"].as_array().cloned().unwrap_or_default();
    for site in report["sites"].as_array_mut().into_iter().flatten() {
        let id = site["stack_id"].as_u64().expect("site without stack_id") as usize;
        let stack: Vec<Value> = stacks[id]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| frames[i.as_u64().unwrap() as usize].clone())
            .collect();
        site["stack"] = stack.iter().map(|f| f["function"].clone()).collect();
        site["frames"] = Value::Array(stack);
    }
    report
}

/// The completeness line's numbers agree: nothing lost, captured = kernel.
pub(crate) fn assert_complete(report: &Value) {
    let t = &report["totals"];
    assert_eq!(t["lost"], 0, "{t}");
    let captured =
        t["minor"].as_u64().unwrap() + t["major"].as_u64().unwrap() + t["cow"].as_u64().unwrap();
    let kernel = t["kernel_minor"].as_u64().unwrap() + t["kernel_major"].as_u64().unwrap();
    assert_eq!(captured, kernel, "{t}");
    assert_eq!(t["cow_available"], true, "{t}");
    // The collector ran for every fault the kernel counted (its own count
    // of them, major faults' too, agrees).
    if t["collector"] == "bpf" {
        assert_eq!(t["collector_skipped"], 0, "{t}");
    }
}

/// A site's stack as function names, root first.
pub(crate) fn stack_names(row: &Value) -> Vec<&str> {
    row["stack"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect()
}

/// Sites of a report matching a predicate.
pub(crate) fn sites<'a>(report: &'a Value, pred: impl Fn(&Value) -> bool + 'a) -> Vec<&'a Value> {
    report["sites"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| pred(s))
        .collect()
}

/// Sum of `count` over sites.
pub(crate) fn total(rows: &[&Value]) -> u64 {
    rows.iter().map(|r| r["count"].as_u64().unwrap()).sum()
}

/// The site rows of one function.
pub(crate) fn function_sites<'a>(report: &'a Value, function: &str) -> Vec<&'a Value> {
    let function = function.to_string();
    sites(report, move |s| s["function"] == function.as_str())
}

/// Pretty-prints the site rows for assertion messages.
pub(crate) fn show(rows: &[&Value]) -> String {
    rows.iter()
        .map(|r| {
            format!(
                "{} {} {} {}:{} -> {} {} {} {} (pids {})",
                r["count"],
                r["class"],
                r["access"],
                r["function"],
                r["line"],
                r["target"]["object"],
                r["target"]["region"],
                r["target"]["section"],
                r["target"]["symbol"],
                r["pids"]
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

static TEST_LOCK: RwLock<()> = RwLock::new(());

thread_local! {
    /// This test thread holds [`exclusive`] or [`shared`]: its own commands
    /// run without taking the lock again (a second read lock behind a
    /// waiting writer would deadlock).
    static HOLDS_LOCK: Cell<bool> = const { Cell::new(false) };
}

/// Held by a test that must run alone.
pub(crate) struct Exclusive {
    _guard: RwLockWriteGuard<'static, ()>,
}

impl Drop for Exclusive {
    fn drop(&mut self) {
        HOLDS_LOCK.set(false);
    }
}

/// Runs the calling test alone: the 1 GiB touch (262k faults/s, a recorder
/// that must keep pace on a 2-CPU machine) and the system-wide recording (it
/// records everything). Every command other tests start through [`run`]
/// (compilers, recordings) waits meanwhile.
pub(crate) fn exclusive() -> Exclusive {
    let guard = TEST_LOCK
        .write()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    HOLDS_LOCK.set(true);
    Exclusive { _guard: guard }
}

/// Held for its whole run by a test that starts processes outside [`run`]
/// (a recorder or a target left running while it works): an exclusive
/// test then waits for it, as for any command started through [`run`].
pub(crate) struct Shared {
    _guard: RwLockReadGuard<'static, ()>,
}

impl Drop for Shared {
    fn drop(&mut self) {
        HOLDS_LOCK.set(false);
    }
}

/// See [`Shared`].
pub(crate) fn shared() -> Shared {
    let guard = TEST_LOCK
        .read()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    HOLDS_LOCK.set(true);
    Shared { _guard: guard }
}

/// Sends signal `sig` (`TERM`, `INT`, `KILL`, `USR1`...) to `pid` with the
/// shell's built-in kill (no procps needed). Returns whether it was delivered.
pub(crate) fn signal(pid: u32, sig: &str) -> bool {
    run(Command::new("sh")
        .arg("-c")
        .arg(format!("kill -{sig} {pid}")))
    .status
    .success()
}

/// Writes `built` to `exe` (mode 755) with each placeholder replaced by its
/// same-length substitute everywhere it occurs (each must occur).
pub(crate) fn write_patched(built: &Path, replacements: &[(&[u8], &[u8])], exe: &Path) {
    let mut binary = std::fs::read(built).unwrap();
    for (placeholder, substitute) in replacements {
        assert_eq!(placeholder.len(), substitute.len());
        let at: Vec<usize> = binary
            .windows(placeholder.len())
            .enumerate()
            .filter(|(_, w)| w == placeholder)
            .map(|(i, _)| i)
            .collect();
        assert!(!at.is_empty(), "{placeholder:?} not in the binary");
        for i in at {
            binary[i..i + substitute.len()].copy_from_slice(substitute);
        }
    }
    std::fs::write(exe, &binary).unwrap();
    let mut perms = std::fs::metadata(exe).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(exe, perms).unwrap();
}
