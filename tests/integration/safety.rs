//! pfprof never harms the user's files: `record -o` replaces only its own
//! outputs, nothing is written through a planted link, pfprof.data is 0600,
//! files belong to the sudo user, and read-only or full file systems end
//! with a clear message (and, when full, a readable partial recording and
//! the command's own exit status).

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

use crate::util::{can_record, compile_c, pfprof, run, temp_dir};

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `record -q -o dir -- sh -c SCRIPT`.
fn record_sh(dir: &Path, script: &str) -> Output {
    run(pfprof()
        .args(["record", "-q", "-o"])
        .arg(dir)
        .args(["--", "sh", "-c", script]))
}

/// A refusal: exit 2, one line on stderr naming the reason.
fn assert_refused(out: &Output, reason: &str) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(err.contains(reason), "{reason:?} in {err}");
}

/// A tmpfs mounted for one test, unmounted when dropped (even on failure).
struct Mount(PathBuf);

impl Mount {
    /// None when mounting is not possible here (not root), except under CI.
    fn tmpfs(at: &Path, size: &str) -> Option<Mount> {
        std::fs::create_dir_all(at).unwrap();
        let out = run(Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(at));
        if !out.status.success() {
            assert!(
                std::env::var_os("CI").is_none(),
                "cannot mount a tmpfs under CI: {}",
                stderr(&out)
            );
            eprintln!("SKIPPED: cannot mount a tmpfs: {}", stderr(&out));
            return None;
        }
        Some(Mount(at.to_path_buf()))
    }

    fn read_only(&self) {
        let out = run(Command::new("mount")
            .args(["-o", "remount,ro"])
            .arg(&self.0));
        assert!(out.status.success(), "remount ro: {}", stderr(&out));
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// A directory holding a user's file is never moved or deleted: `record`
/// refuses before the command runs, twice in a row; likewise a `DIR.old`
/// that holds a user's file, and a `DIR` that is a plain file.
#[test]
fn refuses_directories_that_are_not_pfprof_outputs() {
    let dir = temp_dir("safety-refuse");
    let project = dir.join("project");
    std::fs::create_dir(&project).unwrap();
    std::fs::write(project.join("main.c"), "int main;").unwrap();
    let marker = dir.join("ran");
    let script = format!("touch {}", marker.display());
    for _ in 0..2 {
        let out = record_sh(&project, &script);
        assert_refused(&out, "holds main.c, which pfprof does not write");
        assert!(!marker.exists(), "the command must not run");
        assert_eq!(
            std::fs::read_to_string(project.join("main.c")).unwrap(),
            "int main;"
        );
        for left in ["project.old", "project.partial"] {
            assert!(!dir.join(left).exists(), "{left}");
        }
    }
    let file = dir.join("file");
    std::fs::write(&file, "data").unwrap();
    assert_refused(&record_sh(&file, &script), "is not a directory");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "data");
    let empty = dir.join("empty");
    std::fs::create_dir(&empty).unwrap();
    assert_refused(&record_sh(&empty, &script), "holds no pfprof.data");
    assert!(!marker.exists(), "the command must not run");

    if !can_record() {
        return;
    }
    // A pfprof output whose DIR.old is the user's.
    let out_dir = dir.join("out");
    assert!(record_sh(&out_dir, "true").status.success());
    std::fs::create_dir(dir.join("out.old")).unwrap();
    std::fs::write(dir.join("out.old/notes"), "mine").unwrap();
    assert_refused(&record_sh(&out_dir, &script), "holds notes, which");
    assert!(!marker.exists(), "the command must not run");
    assert_eq!(
        std::fs::read_to_string(dir.join("out.old/notes")).unwrap(),
        "mine"
    );
    // A file the user added to a pfprof output: that output is theirs now.
    std::fs::remove_dir_all(dir.join("out.old")).unwrap();
    std::fs::write(out_dir.join("notes"), "mine").unwrap();
    assert_refused(&record_sh(&out_dir, &script), "holds notes, which");
    assert_eq!(
        std::fs::read_to_string(out_dir.join("notes")).unwrap(),
        "mine"
    );
}

/// pfprof's own outputs rotate: DIR → DIR.old (the previous DIR.old is
/// deleted), the new set appears whole; pfprof.data is 0600; a run that
/// fails before the command starts changes nothing and leaves no
/// DIR.partial.
#[test]
fn rotates_its_own_outputs() {
    if !can_record() {
        return;
    }
    let dir = temp_dir("safety-rotate");
    let out_dir = dir.join("out");
    let data = |d: &str| std::fs::read(dir.join(d).join("pfprof.data")).unwrap();
    let mut previous: Option<Vec<u8>> = None;
    for i in 0..3 {
        let out = record_sh(&out_dir, &format!("exit {}", 10 + i));
        assert_eq!(out.status.code(), Some(10 + i), "{}", stderr(&out));
        let current = data("out");
        if let Some(previous) = &previous {
            assert!(
                previous == &data("out.old"),
                "run {i}: out.old is the previous run"
            );
            assert!(previous != &current);
        }
        assert!(!dir.join("out.partial").exists());
        let report: Value = crate::util::read_report(&out_dir.join("report.json"));
        assert_eq!(report["exit"]["code"], 10 + i, "{}", report["exit"]);
        let mode = std::fs::metadata(out_dir.join("pfprof.data"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "pfprof.data mode {mode:o}");
        previous = Some(current);
    }
    let before = (data("out"), data("out.old"));
    let out = run(pfprof()
        .args(["record", "-q", "-o"])
        .arg(&out_dir)
        .args(["--", "/nonexistent/program"]));
    assert_eq!(out.status.code(), Some(127), "{}", stderr(&out));
    assert!(before == (data("out"), data("out.old")), "unchanged");
    assert!(!dir.join("out.partial").exists(), "no DIR.partial left");
}

/// Links planted where pfprof writes are never followed: a pfprof output
/// with a link in it, `DIR` or `DIR.partial` being a link, and the outputs
/// of `flamegraph -o` and `diff -o` being links.
#[test]
fn planted_links_are_never_followed() {
    if !can_record() {
        return;
    }
    let dir = temp_dir("safety-links");
    let victim = dir.join("victim");
    std::fs::write(&victim, "precious").unwrap();
    let intact = || assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    let run_dir = dir.join("run");
    assert!(record_sh(&run_dir, "true").status.success());

    // record -o DIR, DIR/report.txt -> victim.
    let planted = dir.join("planted");
    std::fs::create_dir(&planted).unwrap();
    std::fs::copy(run_dir.join("pfprof.data"), planted.join("pfprof.data")).unwrap();
    std::os::unix::fs::symlink(&victim, planted.join("report.txt")).unwrap();
    assert_refused(
        &record_sh(&planted, "true"),
        "holds report.txt, which is not a regular file",
    );
    intact();

    // record -o LINK, LINK -> a pfprof output; and LINK.partial -> victim.
    let link = dir.join("link");
    std::os::unix::fs::symlink(&run_dir, &link).unwrap();
    assert_refused(&record_sh(&link, "true"), "is a symbolic link");
    assert!(run_dir.join("report.txt").exists() && !dir.join("run.old").exists());
    std::os::unix::fs::symlink(&victim, dir.join("fresh.partial")).unwrap();
    assert_refused(
        &record_sh(&dir.join("fresh"), "true"),
        "fresh.partial exists",
    );
    intact();

    // flamegraph -o OUT and diff -o OUT with OUT/<output> -> victim.
    let graphs = dir.join("graphs");
    std::fs::create_dir(&graphs).unwrap();
    for name in ["minor.svg", "all.folded", "diff.svg", "diff.folded"] {
        std::os::unix::fs::symlink(&victim, graphs.join(name)).unwrap();
    }
    let out = run(pfprof()
        .args(["flamegraph", "-i"])
        .arg(&run_dir)
        .arg("-o")
        .arg(&graphs));
    assert!(out.status.success(), "{}", stderr(&out));
    let out = run(pfprof()
        .arg("diff")
        .args([&run_dir, &run_dir])
        .arg("-o")
        .arg(&graphs));
    assert!(out.status.success(), "{}", stderr(&out));
    intact();
    for name in ["minor.svg", "all.folded", "diff.svg", "diff.folded"] {
        let meta = std::fs::symlink_metadata(graphs.join(name)).unwrap();
        assert!(meta.is_file(), "{name} replaced by a regular file");
    }
    assert!(std::fs::read_to_string(graphs.join("minor.svg"))
        .unwrap()
        .contains("<svg"));
    // flamegraph -o LINK: refused.
    let graphs_link = dir.join("graphs-link");
    std::os::unix::fs::symlink(&graphs, &graphs_link).unwrap();
    let out = run(pfprof()
        .args(["flamegraph", "-i"])
        .arg(&run_dir)
        .arg("-o")
        .arg(&graphs_link));
    assert_refused(&out, "is a symbolic link");
}

/// Under sudo (SUDO_UID/SUDO_GID set while root) the output directory and
/// every file in it belong to the invoking user; pfprof.data stays 0600.
#[test]
fn outputs_belong_to_the_sudo_user() {
    if !can_record() || not_root() {
        return;
    }
    let dir = temp_dir("safety-sudo");
    let out_dir = dir.join("nested/out");
    let sudo = |cmd: &mut Command| {
        cmd.env("SUDO_UID", "65534")
            .env("SUDO_GID", "65534")
            .env("SUDO_USER", "nobody");
    };
    let mut cmd = pfprof();
    cmd.args(["record", "-q", "-o"])
        .arg(&out_dir)
        .args(["--", "true"]);
    sudo(&mut cmd);
    let out = run(&mut cmd);
    assert!(out.status.success(), "{}", stderr(&out));
    let mut cmd = pfprof();
    cmd.args(["flamegraph", "-i"])
        .arg(&out_dir)
        .arg("-o")
        .arg(dir.join("graphs"));
    sudo(&mut cmd);
    let out = run(&mut cmd);
    assert!(out.status.success(), "{}", stderr(&out));
    let mut checked = 0;
    for d in [dir.join("nested"), out_dir.clone(), dir.join("graphs")] {
        let paths = std::fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().path())
            .chain([d.clone()]);
        for path in paths {
            let meta = std::fs::symlink_metadata(&path).unwrap();
            assert_eq!(
                (meta.uid(), meta.gid()),
                (65534, 65534),
                "{}",
                path.display()
            );
            checked += 1;
        }
    }
    assert!(checked > 20, "{checked} files checked");
    let meta = std::fs::metadata(out_dir.join("pfprof.data")).unwrap();
    assert_eq!(meta.mode() & 0o777, 0o600);
}

/// Whether the tests run without root (the sudo case needs root).
fn not_root() -> bool {
    let uid = std::fs::metadata("/proc/self").map_or(1, |m| m.uid());
    if uid != 0 {
        eprintln!("SKIPPED: not root");
    }
    uid != 0
}

/// A read-only output file system: one line, exit 2, the command does not
/// run, and the previous output is untouched.
#[test]
fn read_only_file_system() {
    let dir = temp_dir("safety-ro");
    let Some(mount) = Mount::tmpfs(&dir.join("mnt"), "4m") else {
        return;
    };
    let out_dir = mount.0.join("out");
    let recorded = can_record() && record_sh(&out_dir, "true").status.success();
    let before = recorded.then(|| std::fs::read(out_dir.join("pfprof.data")).unwrap());
    mount.read_only();
    let marker = dir.join("ran");
    let out = record_sh(&out_dir, &format!("touch {}", marker.display()));
    assert_refused(&out, "Read-only file system");
    assert!(!marker.exists(), "the command must not run");
    if let Some(before) = before {
        assert!(before == std::fs::read(out_dir.join("pfprof.data")).unwrap());
    }
}

/// A full output file system: the recording stops with a message saying
/// where, the command runs to its end and its failing exit status passes
/// through (a succeeding one becomes 4), and what was written is a readable
/// recording.
#[test]
fn full_file_system() {
    if !can_record() {
        return;
    }
    let dir = temp_dir("safety-full");
    let touch = compile_c(&dir, "touch.c", &[]);
    let Some(mount) = Mount::tmpfs(&dir.join("mnt"), "256k") else {
        return;
    };
    let out_dir = mount.0.join("out");
    let marker = dir.join("finished");
    // 16 MiB: 4096 faults, far more than 256 KiB of recording holds.
    let out = record_sh(
        &out_dir,
        &format!(
            "{} 16 && touch {}; exit 7",
            touch.display(),
            marker.display()
        ),
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(7), "{err}");
    assert!(marker.exists(), "the command ran to its end");
    assert!(err.contains("No space left on device"), "{err}");
    assert!(err.contains("the recording stops after"), "{err}");
    // The message says what becomes of the command (which branch depends on
    // when the ring buffers were drained).
    assert!(
        err.contains("the command keeps running, untraced, until it exits")
            || err.contains("the command has ended"),
        "{err}"
    );
    let partial = mount.0.join("out.partial");
    assert!(err.contains(&partial.display().to_string()), "{err}");
    for args in [&[][..], &["--partial"][..]] {
        let report = run(pfprof()
            .args(["report", "--format", "json", "-i"])
            .arg(&partial)
            .args(args));
        assert!(report.status.success(), "{}", stderr(&report));
        let report: Value = serde_json::from_slice(&report.stdout).unwrap();
        let minor = report["totals"]["minor"].as_u64().unwrap();
        assert!(minor > 0 && minor < 4096, "a part of the faults: {minor}");
    }
    // The next run into the same DIR is refused while DIR.partial is there.
    assert_refused(&record_sh(&out_dir, "true"), "out.partial exists");

    // A command that succeeded: not 0, since no whole profile was written.
    std::fs::remove_dir_all(&partial).unwrap();
    let out = record_sh(&out_dir, &format!("{} 16", touch.display()));
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(4), "{err}");
    assert!(err.contains("No space left on device"), "{err}");
}
