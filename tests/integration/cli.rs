//! Bad input: clear one-line errors and documented exit codes, never a panic.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use crate::util::{can_record, compile_c, pfprof, record, run, temp_dir};

fn stderr_of(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn assert_no_panic(output: &std::process::Output) {
    let err = stderr_of(output);
    assert!(!err.contains("panicked"), "pfprof panicked: {err}");
}

/// A command that does not exist: 127, and the message names it.
#[test]
fn command_not_found_is_127() {
    let dir = temp_dir("cli_not_found");
    let out = run(pfprof()
        .arg("record")
        .arg("-o")
        .arg(dir.join("out"))
        .args(["--", "no-such-command-pfprof"]));
    assert_eq!(out.status.code(), Some(127), "{}", stderr_of(&out));
    assert!(
        stderr_of(&out).contains("no-such-command-pfprof"),
        "{}",
        stderr_of(&out)
    );
    let out = run(pfprof()
        .arg("record")
        .arg("-o")
        .arg(dir.join("out"))
        .args(["--", "./no/such/path"]));
    assert_eq!(out.status.code(), Some(127), "{}", stderr_of(&out));
}

/// A file that is not executable: 126.
#[test]
fn not_executable_is_126() {
    let dir = temp_dir("cli_not_exec");
    let script = dir.join("script.sh");
    std::fs::write(&script, "#!/bin/sh\nexit 0\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = run(pfprof()
        .arg("record")
        .arg("-o")
        .arg(dir.join("out"))
        .arg("--")
        .arg(&script));
    assert_eq!(out.status.code(), Some(126), "{}", stderr_of(&out));
    assert!(stderr_of(&out).contains("script.sh"));
    // A directory cannot be executed either.
    let out = run(pfprof()
        .arg("record")
        .arg("-o")
        .arg(dir.join("out"))
        .arg("--")
        .arg(&dir));
    assert_eq!(out.status.code(), Some(126), "{}", stderr_of(&out));
}

/// `record` exits with the command's status, and 128+N when signal N kills it.
#[test]
fn exit_status_is_passed_through() {
    if !can_record() {
        return;
    }
    let dir = temp_dir("cli_exit_status");
    let exit3 = compile_c(&dir, "exit_code.c", &[]);
    let (out, report) = record(&dir, &exit3, &[]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr_of(&out));
    assert_eq!(report["exit"]["code"], 3);

    let segv = compile_c(&dir, "segv.c", &[]);
    let (out, report) = record(&dir, &segv, &[]);
    assert_eq!(out.status.code(), Some(139), "{}", stderr_of(&out));
    assert_eq!(report["exit"]["signal"], 11);
    // The faults before the crash are all there.
    let touched = crate::util::function_sites(&report, "touch3");
    assert_eq!(
        crate::util::total(&touched),
        3,
        "{}",
        crate::util::show(&touched)
    );
}

/// Unreadable, garbage and truncated recordings: one-line error, exit 1.
#[test]
fn bad_recordings_are_errors() {
    let dir = temp_dir("cli_bad_recordings");
    let missing = run(pfprof().arg("report").arg("-i").arg(dir.join("nothing")));
    assert_eq!(missing.status.code(), Some(1));
    assert_no_panic(&missing);
    assert_eq!(
        stderr_of(&missing).trim().lines().count(),
        1,
        "{}",
        stderr_of(&missing)
    );

    let garbage = dir.join("garbage.data");
    std::fs::write(&garbage, b"this is not a perf.data file at all, not even close....................................................................................").unwrap();
    let out = run(pfprof().arg("report").arg("-i").arg(&garbage));
    assert_eq!(out.status.code(), Some(1));
    assert_no_panic(&out);
    assert_eq!(
        stderr_of(&out).trim().lines().count(),
        1,
        "{}",
        stderr_of(&out)
    );

    let empty = dir.join("empty.data");
    std::fs::write(&empty, b"").unwrap();
    let out = run(pfprof().arg("report").arg("-i").arg(&empty));
    assert_eq!(out.status.code(), Some(1));
    assert_no_panic(&out);

    if !can_record() {
        return;
    }
    let exit3 = compile_c(&dir, "exit_code.c", &[]);
    let (_, _) = record(&dir, &exit3, &[]);
    let data = std::fs::read(dir.join("out/pfprof.data")).unwrap();
    // Cut inside the data section, and inside the header.
    for cut in [data.len() / 2, 50] {
        let truncated = dir.join(format!("truncated-{cut}.data"));
        std::fs::write(&truncated, &data[..cut]).unwrap();
        let out = run(pfprof().arg("report").arg("-i").arg(&truncated));
        assert_eq!(
            out.status.code(),
            Some(1),
            "cut at {cut}: {}",
            stderr_of(&out)
        );
        assert_no_panic(&out);
        assert_eq!(
            stderr_of(&out).trim().lines().count(),
            1,
            "cut at {cut}: {}",
            stderr_of(&out)
        );
    }
    // --partial analyses what is intact.
    let truncated = dir.join(format!("truncated-{}.data", data.len() / 2));
    let out = run(pfprof()
        .arg("report")
        .arg("--partial")
        .arg("--format")
        .arg("json")
        .arg("-i")
        .arg(&truncated));
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let report: serde_json::Value = crate::util::parse_report(&out.stdout);
    assert!(
        report["warnings"].to_string().contains("damaged"),
        "{}",
        report["warnings"]
    );
}

/// Without permission: exit 2, and the message shows perf_event_paranoid and the fix.
#[test]
fn permission_denied_is_2() {
    if !can_record() {
        return;
    }
    let paranoid: i32 = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let is_root = run(Command::new("id").arg("-u")).stdout == b"0\n";
    if !is_root
        || paranoid < 2
        || run(Command::new("setpriv").arg("--help"))
            .status
            .code()
            .is_none()
    {
        eprintln!("SKIPPED: needs root and perf_event_paranoid >= 2 to run pfprof as an unprivileged user");
        return;
    }
    let dir = temp_dir("cli_permission");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let out = run(Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(env!("CARGO_BIN_EXE_pfprof"))
        .arg("record")
        .arg("-o")
        .arg(dir.join("out"))
        .args(["--", "true"]));
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    let err = stderr_of(&out);
    assert!(err.contains("perf_event_paranoid is"), "{err}");
    assert!(err.contains("sysctl kernel.perf_event_paranoid="), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

/// The previous output directory (pfprof's own) is moved aside, never mixed
/// (a directory that is not pfprof's: see safety.rs).
#[test]
fn output_dir_is_moved_to_old() {
    if !can_record() {
        return;
    }
    let _shared = crate::util::shared();
    let dir = temp_dir("cli_old_dir");
    let (out, _) = record(&dir, std::path::Path::new("/bin/true"), &[]);
    assert!(out.status.success());
    let first = std::fs::read(dir.join("out/pfprof.data")).unwrap();
    let (out, _) = record(&dir, std::path::Path::new("/bin/true"), &[]);
    assert!(out.status.success());
    assert!(std::fs::read(dir.join("out.old/pfprof.data")).unwrap() == first);
    for f in [
        "pfprof.data",
        "report.txt",
        "report.json",
        "minor.svg",
        "major.svg",
        "cow.svg",
        "all.svg",
        "all.folded",
    ] {
        assert!(dir.join("out").join(f).exists(), "{f} missing");
    }
}

/// `pfprof record -q -o DIR/out -- sleep 30`, running in the background.
fn record_sleep(dir: &std::path::Path) -> std::process::Child {
    pfprof()
        .args(["record", "-q", "-o"])
        .arg(dir.join("out"))
        .args(["--", "sleep", "30"])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

fn kill(pid: u32, sig: &str) {
    crate::util::signal(pid, sig);
}

/// SIGTERM to pfprof is passed on to the command; the recording and the
/// reports are finished and pfprof exits like the command (128+15).
#[test]
fn sigterm_finishes_the_recording() {
    if !can_record() {
        return;
    }
    let _shared = crate::util::shared();
    let dir = temp_dir("cli_sigterm");
    let child = record_sleep(&dir);
    std::thread::sleep(std::time::Duration::from_millis(500));
    kill(child.id(), "TERM");
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(143), "{}", stderr_of(&out));
    let report: serde_json::Value = crate::util::read_report(&dir.join("out/report.json"));
    assert_eq!(report["exit"]["signal"], 15);
    assert!(report["processes"]
        .as_array()
        .unwrap()
        .iter()
        .any(|p| p["comm"] == "sleep"));
    assert!(report["totals"]["minor"].as_u64().unwrap() > 0);
}

/// pfprof killed outright: what it had written (checkpointed every second)
/// stays in `out.partial` and is still readable, with a warning, and
/// nothing panics.
#[test]
fn killed_recording_is_readable() {
    if !can_record() {
        return;
    }
    let _shared = crate::util::shared();
    let dir = temp_dir("cli_sigkill");
    let mut child = record_sleep(&dir);
    // Killed once a checkpoint has put records in the header (every
    // second), however slowly the machine runs.
    let data = dir.join("out.partial/pfprof.data");
    let checkpointed = || {
        let bytes = std::fs::read(&data).unwrap_or_default();
        bytes.len() >= 56 && u64::from_le_bytes(bytes[48..56].try_into().unwrap()) > 0
    };
    for _ in 0..300 {
        if checkpointed() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(checkpointed(), "no checkpoint within 15 s");
    let grandchildren = std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", child.id()))
        .unwrap_or_default();
    kill(child.id(), "KILL");
    let _ = child.wait();
    for pid in grandchildren.split_whitespace() {
        if let Ok(pid) = pid.parse() {
            kill(pid, "KILL");
        }
    }
    let out = run(pfprof()
        .arg("report")
        .args(["--format", "json", "-i"])
        .arg(dir.join("out.partial")));
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(
        !dir.join("out").exists(),
        "only a finished set is named out"
    );
    let report: serde_json::Value = crate::util::parse_report(&out.stdout);
    assert!(
        report["warnings"].to_string().contains("not finished"),
        "{}",
        report["warnings"]
    );
    assert!(
        report["processes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["comm"] == "sleep"),
        "{}",
        report["processes"]
    );
    assert!(report["totals"]["minor"].as_u64().unwrap() > 0);
}

/// A stripped binary still records; its code shows as object+offset, its
/// targets keep their sections (section headers survive `strip`).
#[test]
fn stripped_binary() {
    if !can_record() {
        return;
    }
    let dir = temp_dir("cli_stripped");
    let exe = compile_c(&dir, "bss_write.c", &[]);
    assert!(run(Command::new("strip").arg(&exe)).status.success());
    // The unstripped build (the same build-id) may be in the test run's
    // build-id cache, and would name it.
    let empty = dir.join("empty");
    let (out, report) = crate::util::record_with(
        &dir,
        &[
            "--no-buildid-cache",
            "--buildid-dir",
            empty.to_str().unwrap(),
        ],
        &exe,
        &[],
    );
    assert!(out.status.success());
    let rows = crate::util::sites(&report, |s| {
        s["target"]["section"] == ".bss" && s["target"]["region"] == "anon" && s["count"] == 256
    });
    assert_eq!(
        rows.len(),
        1,
        "{}",
        crate::util::show(&crate::util::sites(&report, |_| true))
    );
    assert!(
        rows[0]["function"]
            .as_str()
            .unwrap()
            .starts_with("bss_write+0x"),
        "{}",
        rows[0]["function"]
    );
    assert_eq!(rows[0]["target"]["symbol"], serde_json::Value::Null);
}

/// A binary replaced since the recording is detected by its build-id: its
/// frames are not symbolized with the wrong file, and the report says why;
/// the copy `record` kept in the build-id cache names them.
#[test]
fn replaced_binary_is_detected() {
    if !can_record() {
        return;
    }
    let dir = temp_dir("cli_replaced");
    let exe = compile_c(&dir, "bss_write.c", &[]);
    let cache = dir.join("cache");
    let (out, _) =
        crate::util::record_with(&dir, &["--buildid-dir", cache.to_str().unwrap()], &exe, &[]);
    assert!(out.status.success());
    // Same source, different code: a different build-id.
    compile_c(&dir, "bss_write.c", &["-O2"]);
    let report_with = |cache: &Path| {
        let out = run(pfprof()
            .arg("report")
            .args(["--format", "json", "-i"])
            .arg(dir.join("out"))
            .arg("--buildid-dir")
            .arg(cache));
        assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
        crate::util::parse_report(&out.stdout)
    };
    let report = report_with(&dir.join("empty"));
    let warnings = report["warnings"].to_string();
    assert!(
        warnings.contains("bss_write") && warnings.to_lowercase().contains("build-id"),
        "{warnings}"
    );
    assert!(
        crate::util::function_sites(&report, "touch_bss").is_empty(),
        "symbolized with the replaced file"
    );
    let report = report_with(&cache);
    assert!(!crate::util::function_sites(&report, "touch_bss").is_empty());
    // Deleted: also reported, not fatal.
    std::fs::remove_file(&exe).unwrap();
    let out = run(pfprof().arg("report").arg("-i").arg(dir.join("out")));
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("bss_write"));
}

/// `record` with nothing to record shows its three forms.
#[test]
fn record_without_target_shows_every_form() {
    let out = run(pfprof().arg("record"));
    assert_eq!(out.status.code(), Some(2));
    let err = stderr_of(&out);
    for form in [
        "pfprof record [OPTIONS] -- COMMAND [ARGS]...",
        "pfprof record [OPTIONS] -p PID[,PID...]",
        "pfprof record [OPTIONS] -a",
    ] {
        assert!(err.contains(form), "{form:?} in {err}");
    }
}

/// A missing input, or a directory without a recording: one line, each
/// cause said once (anyhow's `{:#}` repeated an io error its context embeds).
#[test]
fn input_errors_are_said_once() {
    let dir = temp_dir("cli_said_once");
    let missing = dir.join("missing");
    let mut cases = vec![
        (
            vec!["report".into(), "-i".into(), missing.display().to_string()],
            "No such file or directory",
        ),
        (
            vec!["report".into(), "-i".into(), dir.display().to_string()],
            "is a directory without a recording",
        ),
        (
            vec![
                "flamegraph".into(),
                "-i".into(),
                missing.display().to_string(),
            ],
            "No such file or directory",
        ),
    ];
    cases.push((
        vec![
            "diff".into(),
            missing.display().to_string(),
            missing.display().to_string(),
        ],
        "No such file or directory",
    ));
    for (args, cause) in cases {
        let out = run(pfprof().args(&args));
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = stderr_of(&out);
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("pfprof: error: "), "{err}");
        assert_eq!(err.matches(cause).count(), 1, "{args:?}: {err}");
    }
}

/// Options that cannot apply are refused with the reason, never accepted
/// and ignored.
#[test]
fn options_that_cannot_apply_are_refused() {
    let dir = temp_dir("cli_refused");
    let input = dir.display().to_string();
    for (args, why) in [
        (
            vec!["flamegraph", "--top", "5"],
            "unexpected argument '--top'",
        ),
        (
            vec!["diff", "--until-ms", "1", &input, &input],
            "--until-ms ends the start-up window: diff uses it with --startup",
        ),
        (
            vec!["flamegraph", "--class", "minor", "--until-ms", "1"],
            "--until-ms shapes startup.svg",
        ),
        (
            vec!["record", "--class", "cow", "--no-tracepoints", "--", "true"],
            "--class cow needs the fault-entry tracepoints",
        ),
    ] {
        let out = run(pfprof().args(&args));
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr_of(&out));
        assert!(
            stderr_of(&out).contains(why),
            "{args:?}: {}",
            stderr_of(&out)
        );
    }
}

/// `--kernel` on a recording made without it says so (exit 2) instead of
/// printing the same output as without it.
#[test]
fn kernel_on_a_recording_without_kernel_frames() {
    if !can_record() {
        return;
    }
    let dir = temp_dir("cli_kernel");
    let (out, _) = record(&dir, std::path::Path::new("/bin/true"), &[]);
    assert!(out.status.success(), "{}", stderr_of(&out));
    let recording = dir.join("out");
    for sub in ["report", "flamegraph"] {
        let out = run(pfprof().args([sub, "--kernel", "-i"]).arg(&recording));
        assert_eq!(out.status.code(), Some(2), "{sub}: {}", stderr_of(&out));
        let err = stderr_of(&out);
        assert!(
            err.contains("holds no kernel frames (it was recorded without --kernel"),
            "{err}"
        );
        assert!(out.stdout.is_empty());
    }
    let out = run(pfprof().args(["report", "-i"]).arg(&recording));
    assert!(
        out.status.success(),
        "without --kernel it reads: {}",
        stderr_of(&out)
    );
}

/// Every long option of every subcommand's `--help` is on that
/// subcommand's page of docs/.
#[test]
fn every_option_is_documented() {
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs");
    let pages = [
        ("record", "record.md"),
        ("report", "report.md"),
        ("flamegraph", "report.md"),
        ("diff", "diff.md"),
        ("top", "top.md"),
        ("archive", "archive.md"),
    ];
    for (sub, page) in pages {
        let text = std::fs::read_to_string(docs.join(page)).unwrap();
        let out = run(pfprof().args([sub, "--help"]));
        assert!(out.status.success());
        let help = String::from_utf8(out.stdout).unwrap();
        // `  -o, --output <DIR>` or `      --top <N>`: (short, long).
        let options: Vec<(Option<&str>, &str)> = help
            .lines()
            .filter_map(|l| {
                let l = l.trim_start();
                let (short, long) = match l.split_once(", --") {
                    Some((s, rest)) if s.len() == 2 && s.starts_with('-') => (Some(s), rest),
                    _ => (None, l.strip_prefix("--")?),
                };
                let long = long
                    .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
                    .next()?;
                Some((short, long))
            })
            .filter(|(_, long)| !["help", "version"].contains(long))
            .collect();
        assert!(options.len() >= 2, "{sub}: {options:?}");
        let missing: Vec<String> = options
            .iter()
            .filter(|(short, long)| {
                !text.contains(&format!("--{long}"))
                    && !short.is_some_and(|s| text.contains(&format!("{s} ")))
            })
            .map(|(_, long)| format!("--{long}"))
            .collect();
        assert!(missing.is_empty(), "{sub}: not in docs/{page}: {missing:?}");
    }
}

/// The man pages (docs/man/) and shell completions (docs/completions/)
/// are what the command-line definition behind `--help` generates; run
/// with PFPROF_BLESS=1 to write them again.
#[test]
fn man_pages_and_completions_match_the_cli() {
    use clap::CommandFactory;
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs");
    let generated = temp_dir("cli_man");
    let man = generated.join("man");
    std::fs::create_dir_all(&man).unwrap();
    clap_mangen::generate_to(pfprof::commands::cli::Cli::command(), &man).unwrap();
    let completions = generated.join("completions");
    std::fs::create_dir_all(&completions).unwrap();
    for shell in [
        clap_complete::Shell::Bash,
        clap_complete::Shell::Zsh,
        clap_complete::Shell::Fish,
    ] {
        let mut cmd = pfprof::commands::cli::Cli::command();
        clap_complete::generate_to(shell, &mut cmd, "pfprof", &completions).unwrap();
    }
    let bless = std::env::var_os("PFPROF_BLESS").is_some();
    for dir in ["man", "completions"] {
        let names = |d: &Path| -> Vec<String> {
            let mut names: Vec<String> = std::fs::read_dir(d)
                .map(|entries| {
                    entries
                        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                        .collect()
                })
                .unwrap_or_default();
            names.sort();
            names
        };
        let want = names(&generated.join(dir));
        assert!(!want.is_empty());
        if bless {
            std::fs::create_dir_all(docs.join(dir)).unwrap();
            for old in names(&docs.join(dir)) {
                std::fs::remove_file(docs.join(dir).join(old)).unwrap();
            }
            for name in &want {
                std::fs::copy(generated.join(dir).join(name), docs.join(dir).join(name)).unwrap();
            }
            continue;
        }
        assert_eq!(
            names(&docs.join(dir)),
            want,
            "docs/{dir} (PFPROF_BLESS=1 writes them)"
        );
        for name in &want {
            let got = std::fs::read(docs.join(dir).join(name)).unwrap();
            let fresh = std::fs::read(generated.join(dir).join(name)).unwrap();
            assert!(
                got == fresh,
                "docs/{dir}/{name} is stale (PFPROF_BLESS=1 writes it)"
            );
        }
    }
}
