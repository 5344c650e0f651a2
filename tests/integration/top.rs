//! `pfprof top` used as a person would: driven in tmux while a fixture
//! faults (its row, the refresh, a view switch, `q`), and `--batch`'s
//! figures against a fixture's known fault count.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::util::{can_record, compile_c, pfprof, temp_dir};

/// tmux, which the screen test drives; under CI it must be there.
fn have_tmux() -> bool {
    let ok = Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        assert!(
            std::env::var_os("CI").is_none(),
            "tmux is unavailable under CI (.ci/run installs it)"
        );
        eprintln!("SKIPPED: tmux unavailable here; the screen test skips");
    }
    ok
}

/// A tmux server of the test's own (`-L`), killed when dropped, with the
/// fixture's loop.
struct Session {
    socket: String,
    load: Child,
}

impl Session {
    /// The touch loop, and `command` in a 160x40 tmux window named `top`
    /// on a server of its own.
    fn start(name: &str, dir: &Path, command: &str) -> Session {
        let session = Session {
            socket: format!("pfprof-test-{name}-{}", std::process::id()),
            load: touch_loop(dir),
        };
        session.tmux(&[
            "new-session",
            "-d",
            "-s",
            "top",
            "-x",
            "160",
            "-y",
            "40",
            command,
        ]);
        session
    }

    fn tmux(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .args(["-L", &self.socket])
            .args(args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn screen(&self) -> String {
        self.tmux(&["capture-pane", "-p", "-t", "top"])
    }

    /// Waits (30 s at most) for the screen to satisfy `ok`.
    fn wait_for(&self, what: &str, ok: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let screen = self.screen();
            if ok(&screen) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "no {what} on the screen:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = self.load.kill();
        let _ = self.load.wait();
        let _ = Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .output();
    }
}

/// A loop of the touch fixture, named pf_top_touch (its row's command).
fn touch_loop(dir: &Path) -> Child {
    let built = compile_c(dir, "touch.c", &[]);
    let exe = dir.join("pf_top_touch");
    std::fs::rename(built, &exe).unwrap();
    Command::new("sh")
        .arg("-c")
        .arg(format!(
            "while :; do {} 16 >/dev/null; sleep 0.05; done",
            exe.display()
        ))
        .spawn()
        .unwrap()
}

/// The screen shows the faulting fixture's process row, refreshes, switches
/// to the code sites with `3` (the fixture's function there), and `q`
/// leaves at once with the terminal back to the shell, exit status 0.
#[test]
fn screen_in_tmux() {
    if !can_record() || !have_tmux() {
        return;
    }
    let _shared = crate::util::shared();
    let dir = temp_dir("top_tmux");
    let command = format!(
        "{} top; echo EXITED $?; sleep 60",
        env!("CARGO_BIN_EXE_pfprof")
    );
    let session = Session::start("screen", &dir, &command);
    let title = |screen: &str| screen.lines().next().unwrap_or("").to_string();
    // Waits for the whole frame: tmux's capture can catch one half drawn
    // (the row there, the keys line not yet: 1 run of the suite in 3).
    let first = session.wait_for("pf_top_touch row, the keys and the losses", |s| {
        s.contains("pf_top_touch")
            && s.contains("1 2 3/Tab view")
            && s.contains("q quit")
            && s.contains("lost records")
    });
    // Refreshed: the title's time moves on.
    let before = title(&first);
    session.wait_for("refresh", |s| title(s) != before);

    session.tmux(&["send-keys", "-t", "top", "3"]);
    session.wait_for("code sites view", |s| {
        s.contains("FUNCTION") && s.contains("touch_pages")
    });
    session.tmux(&["send-keys", "-t", "top", "q"]);
    let end = session.wait_for("exit", |s| s.contains("EXITED"));
    assert!(end.contains("EXITED 0"), "{end}");
    // The alternate screen is gone: nothing of the view is left.
    assert!(!end.contains("q quit"), "{end}");
}

/// A terminal that goes away (the tmux server killed: SIGHUP) ends top.
#[test]
fn hangup_ends_top() {
    if !can_record() || !have_tmux() {
        return;
    }
    let _shared = crate::util::shared();
    // SIGHUP caught, and SIGHUP ignored (nohup, some CI runners): then the
    // terminal's end of file is what tells top.
    for (name, ignore) in [("hup", ""), ("nohup", "trap '' HUP; ")] {
        let dir = temp_dir(&format!("top_{name}"));
        let pid_file = dir.join("pid");
        let command = format!(
            "{ignore}echo $$ > {}; exec {} top",
            pid_file.display(),
            env!("CARGO_BIN_EXE_pfprof")
        );
        let session = Session::start(name, &dir, &command);
        session.wait_for("the view", |s| s.contains("q quit"));
        let pid: u32 = std::fs::read_to_string(&pid_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        session.tmux(&["kill-server"]);
        let deadline = Instant::now() + Duration::from_secs(30);
        while Path::new(&format!("/proc/{pid}")).exists() {
            if Instant::now() >= deadline {
                // Not left running (and recording) for the rest of the suite.
                let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
                panic!("pfprof top {pid} outlived its terminal ({name})");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// `--batch -p PID` on wait_signal: the snapshots' rows of
/// touch_after_signal add up to its 64 faults, the process row holds them,
/// and top ends with the process.
#[test]
fn batch_counts_a_fixture() {
    if !can_record() {
        return;
    }
    let _shared = crate::util::shared();
    let dir = temp_dir("top_batch");
    let exe = compile_c(&dir, "wait_signal.c", &[]);
    let mut waiter = Command::new(&exe).stdout(Stdio::piped()).spawn().unwrap();
    let mut line = String::new();
    BufReader::new(waiter.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line, "ready\n");
    let pid = waiter.id().to_string();
    let mut top = pfprof()
        .args([
            "top", "--batch", "--top", "1000", "--delay", "0.5", "-p", &pid,
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(top.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    assert!(line.starts_with("pfprof: recording"), "{line}");
    assert!(crate::util::signal(waiter.id(), "USR1"));
    assert!(waiter.wait().unwrap().success());
    let out = top.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("pfprof top "), "{text}");

    let faults = |row: &str| -> u64 {
        let last = row.split_whitespace().last().unwrap();
        last.replace(',', "").parse().unwrap()
    };
    let site: u64 = text
        .lines()
        .filter(|l| l.starts_with("touch_after_signal "))
        .map(faults)
        .sum();
    assert_eq!(site, 64, "{text}");
    let process: u64 = text
        .lines()
        .filter(|l| l.starts_with(&format!("{pid} ")) && l.contains("wait_signal"))
        .map(faults)
        .sum();
    assert!((64..64 + 32).contains(&process), "{process}: {text}");
}

/// `-n 1` on an idle pid: one snapshot, then exit 0.
#[test]
fn batch_stops_after_n() {
    if !can_record() {
        return;
    }
    let _shared = crate::util::shared();
    let mut sleeper = Command::new("sleep").arg("60").spawn().unwrap();
    let out = crate::util::run(pfprof().args([
        "top",
        "--batch",
        "-n",
        "1",
        "-d",
        "0.2",
        "-p",
        &sleeper.id().to_string(),
    ]));
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text.matches("pfprof top ").count(), 1, "{text}");
}

/// A pid that does not exist: one line, exit 2, as `record -p`.
#[test]
fn missing_pid_is_2() {
    let out = crate::util::run(pfprof().args(["top", "--batch", "-p", "999999999"]));
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("999999999") && err.trim().lines().count() == 1,
        "{err}"
    );
}
