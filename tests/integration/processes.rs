//! The processes pfprof starts and the limits it runs under: the command
//! runs as the user who invoked `sudo`, dies with pfprof, gets the signal
//! state pfprof was given, and pfprof copes with (or clearly names) the
//! open-file and locked-memory limits.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::util::{
    assert_complete, can_record, compile_c, function_sites, pfprof, run, temp_dir, total,
};

fn stderr_of(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn stdout_of(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// `pfprof record -q -o DIR/out OPTIONS -- COMMAND` with extra environment.
fn record_command(dir: &Path, env: &[(&str, &str)], options: &[&str], command: &[&str]) -> Output {
    run(pfprof()
        .envs(env.iter().copied())
        .args(["record", "-q", "-o"])
        .arg(dir.join("out"))
        .args(options)
        .arg("--")
        .args(command))
}

fn is_root() -> bool {
    run(Command::new("id").arg("-u")).stdout == b"0\n"
}

/// An environment variable.
type Env = (&'static str, &'static str);

/// The sudo variables of user `nobody` (uid/gid 65534 on Debian and Fedora).
const SUDO_NOBODY: [Env; 3] = [
    ("SUDO_UID", "65534"),
    ("SUDO_GID", "65534"),
    ("SUDO_USER", "nobody"),
];

/// Under sudo the command runs as the invoking user with their groups (the
/// group database's list for SUDO_USER, or SUDO_GID alone without a name);
/// `--run-as-root` keeps root.
#[test]
fn sudo_command_runs_as_the_invoking_user() {
    if !can_record() {
        return;
    }
    if !is_root() {
        eprintln!("SKIPPED: needs root to act as sudo");
        return;
    }
    let dir = temp_dir("processes_sudo_id");
    // nobody's groups as the group database lists them.
    let nobody_groups = stdout_of(&run(Command::new("id").args(["-G", "nobody"])));
    let no_name = [("SUDO_UID", "65534"), ("SUDO_GID", "100")];
    let cases: [(&[Env], &[&str], &str, &str); 4] = [
        (&SUDO_NOBODY, &[], "65534\n", nobody_groups.as_str()),
        (&no_name, &[], "65534\n", "100\n"),
        (&SUDO_NOBODY, &["--run-as-root"], "0\n", "0\n"),
        // Not under sudo: root stays root.
        (&[], &[], "0\n", "0\n"),
    ];
    for (env, options, uid, groups) in cases {
        let out = record_command(&dir, env, options, &["id", "-u"]);
        assert_eq!(out.status.code(), Some(0), "{env:?}: {}", stderr_of(&out));
        assert_eq!(stdout_of(&out), uid, "{env:?} {options:?}");
        let out = record_command(&dir, env, options, &["id", "-G"]);
        assert_eq!(out.status.code(), Some(0), "{env:?}: {}", stderr_of(&out));
        assert_eq!(stdout_of(&out), groups, "{env:?} {options:?}");
    }
}

/// pfprof without the right to change groups (CAP_SETGID dropped): the
/// command does not run, as root or otherwise; the message says which step
/// failed and names --run-as-root; exit 126.
#[test]
fn failed_user_change_is_126() {
    if !can_record() {
        return;
    }
    if !is_root() {
        eprintln!("SKIPPED: needs root to act as sudo");
        return;
    }
    let dir = temp_dir("processes_sudo_fail");
    let marker = dir.join("ran");
    let out = run(Command::new("setpriv")
        .args(["--inh-caps=-setgid", "--bounding-set=-setgid"])
        .arg(env!("CARGO_BIN_EXE_pfprof"))
        .envs(SUDO_NOBODY)
        .args(["record", "-q", "-o"])
        .arg(dir.join("out"))
        .args(["--", "touch"])
        .arg(&marker));
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(126), "{err}");
    assert!(err.contains("setgroups failed"), "{err}");
    assert!(err.contains("--run-as-root"), "{err}");
    assert!(!marker.exists());
}

/// The events opened on the paused child follow it through its change of
/// user and its exec: every fault is recorded, as the kernel counted them.
#[test]
fn faults_are_recorded_after_the_uid_change() {
    if !can_record() {
        return;
    }
    if !is_root() {
        eprintln!("SKIPPED: needs root to act as sudo");
        return;
    }
    let dir = temp_dir("processes_sudo_faults");
    let exe = compile_c(&dir, "touch.c", &[]);
    let out = run(pfprof()
        .envs(SUDO_NOBODY)
        .args(["record", "-q", "-o"])
        .arg(dir.join("out"))
        .arg("--")
        .arg(&exe)
        .arg("4"));
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let report: serde_json::Value = crate::util::read_report(&dir.join("out/report.json"));
    assert_complete(&report);
    // 4 MiB, one write fault per 4 KiB page.
    assert_eq!(total(&function_sites(&report, "touch_pages")), 1024);
}

/// The state of a process from /proc: None once it is gone or a zombie.
fn running_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let state = stat.rsplit_once(')')?.1.trim_start().chars().next()?;
    (state != 'Z' && state != 'X').then_some(state)
}

/// Polls `done` every 20 ms for up to `limit`; whether it became true.
fn wait_until(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    done()
}

/// `kill -9` of pfprof takes the command with it (PR_SET_PDEATHSIG), also
/// when it runs as another user: it is never left running untraced.
#[test]
fn kill_9_of_pfprof_kills_the_command() {
    if !can_record() {
        return;
    }
    let _shared = crate::util::shared();
    let dir = temp_dir("processes_kill9");
    let sudo: &[(&str, &str)] = if is_root() { &SUDO_NOBODY } else { &[] };
    // A killed run leaves its recording in OUT.partial, which a later run
    // into the same OUT refuses to touch: one output per run.
    for (run, env) in [&[][..], sudo].into_iter().enumerate() {
        let mut pfprof_child = pfprof()
            .envs(env.iter().copied())
            .args(["record", "-q", "-o"])
            .arg(dir.join(format!("out{run}")))
            .args(["--", "sleep", "30"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let pf = pfprof_child.id();
        // The command, once it has exec'd sleep (and so is traced).
        let mut command = None;
        let started = wait_until(Duration::from_secs(20), || {
            let children = std::fs::read_to_string(format!("/proc/{pf}/task/{pf}/children"))
                .unwrap_or_default();
            command = children
                .split_whitespace()
                .next()
                .and_then(|p| p.parse().ok());
            command.is_some_and(|pid: u32| {
                std::fs::read_to_string(format!("/proc/{pid}/comm"))
                    .is_ok_and(|comm| comm.trim() == "sleep")
            })
        });
        assert!(started, "{env:?}: the command did not start");
        let command = command.unwrap();
        assert!(crate::util::signal(pf, "KILL"));
        let _ = pfprof_child.wait();
        let gone = wait_until(Duration::from_secs(10), || running_state(command).is_none());
        if !gone {
            crate::util::signal(command, "KILL");
        }
        assert!(gone, "{env:?}: the command {command} outlived pfprof");
    }
}

/// The command gets the signal state pfprof was given, not Rust's: SIGPIPE
/// is not ignored (a pipeline ends quietly), nothing else is ignored unless
/// pfprof was started with it ignored (`nohup`: SIGHUP stays ignored).
#[test]
fn the_command_gets_the_signal_state_pfprof_was_given() {
    if !can_record() {
        return;
    }
    let dir = temp_dir("processes_signals");
    let out = record_command(&dir, &[], &[], &["sh", "-c", "yes | head -1"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(stdout_of(&out), "y\n");
    assert!(
        !stderr_of(&out).contains("Broken pipe"),
        "{}",
        stderr_of(&out)
    );

    let sig_ign = |out: &Output| {
        let line = stdout_of(out)
            .lines()
            .find_map(|l| l.strip_prefix("SigIgn:").map(|v| v.trim().to_string()))
            .unwrap_or_else(|| panic!("no SigIgn line: {}", stderr_of(out)));
        u64::from_str_radix(&line, 16).unwrap()
    };
    let grep = ["grep", "SigIgn", "/proc/self/status"];
    // What pfprof is given here is what any command started the same way
    // gets (glibc's posix_spawn, behind std's Command, leaves its internal
    // signals 32 and 33 ignored): the command under pfprof must get the same.
    let given = sig_ign(&run(Command::new(grep[0]).args(&grep[1..])));
    let out = record_command(&dir, &[], &[], &grep);
    assert_eq!(sig_ign(&out), given, "{:x} {given:x}", sig_ign(&out));
    assert_eq!(
        given & (1 << (13 - 1)),
        0,
        "SIGPIPE ignored by the test itself"
    );

    // Started with SIGHUP ignored, as under nohup.
    let nohup = |command: &mut Command| {
        run(Command::new("sh")
            .arg("-c")
            .arg("trap '' HUP; exec \"$@\"")
            .arg("sh")
            .args([command.get_program()])
            .args(command.get_args()))
    };
    let given = sig_ign(&nohup(Command::new(grep[0]).args(&grep[1..])));
    assert_eq!(given & 1, 1, "SIGHUP (bit 0) ignored by the wrapper");
    let out = nohup(
        pfprof()
            .args(["record", "-q", "-o"])
            .arg(dir.join("out"))
            .arg("--")
            .args(grep),
    );
    assert_eq!(sig_ign(&out), given, "{:x} {given:x}", sig_ign(&out));

    // Started with SIGUSR1 blocked: the command's mask is the same.
    if Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        let blocked = |command: &mut Command| {
            let out = run(Command::new("python3")
                .arg("-c")
                .arg(
                    "import os, signal, sys\n\
                     signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR1])\n\
                     os.execvp(sys.argv[1], sys.argv[1:])",
                )
                .args([command.get_program()])
                .args(command.get_args()));
            stdout_of(&out)
                .lines()
                .find_map(|l| l.strip_prefix("SigBlk:").map(|v| v.trim().to_string()))
                .unwrap_or_else(|| panic!("no SigBlk line: {}", stderr_of(&out)))
        };
        let status = ["grep", "SigBlk", "/proc/self/status"];
        let given = blocked(Command::new(status[0]).args(&status[1..]));
        assert_eq!(
            given, "0000000000000200",
            "SIGUSR1 (bit 9) blocked by the wrapper"
        );
        let out = blocked(
            pfprof()
                .args(["record", "-q", "-o"])
                .arg(dir.join("out"))
                .arg("--")
                .args(status),
        );
        assert_eq!(out, given);
    } else {
        eprintln!("SKIPPED: the signal-mask case needs python3");
    }
}

/// Too few file descriptors: a low soft limit is raised to the hard one
/// (the command keeps the limit it was given); a low hard limit is one
/// line naming the count and `ulimit -n`, exit 2.
#[test]
fn open_file_limit() {
    if !can_record() {
        return;
    }
    let _shared = crate::util::shared();
    let dir = temp_dir("processes_nofile");
    let prlimit = |limits: &str, command: &[&str]| {
        run(Command::new("prlimit")
            .arg(format!("--nofile={limits}"))
            .arg(env!("CARGO_BIN_EXE_pfprof"))
            .args(["record", "-q", "-o"])
            .arg(dir.join("out"))
            .arg("--")
            .args(command))
    };
    // 4-5 events on every CPU plus pfprof's own files need more than 16.
    let out = prlimit("16:4096", &["sh", "-c", "ulimit -n"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(stdout_of(&out), "16\n");

    let out = prlimit("16:16", &["true"]);
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("file descriptors"), "{err}");
    assert!(err.contains("limit is 16 (hard limit 16)"), "{err}");
    let needed: u64 = err
        .split("needs about ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count: {err}"));
    assert!(needed > 16, "{err}");
    assert!(err.contains(&format!("ulimit -n {needed}")), "{err}");

    // Attached, every thread has its events: 20 of them need more than 100.
    let mut sleepers: Vec<_> = (0..20)
        .map(|_| Command::new("sleep").arg("30").spawn().unwrap())
        .collect();
    let pids: Vec<String> = sleepers.iter().map(|c| c.id().to_string()).collect();
    let out = run(Command::new("prlimit")
        .arg("--nofile=100:100")
        .arg(env!("CARGO_BIN_EXE_pfprof"))
        .args(["record", "-q", "--duration", "0.2", "-o"])
        .arg(dir.join("out"))
        .arg("-p")
        .arg(pids.join(",")));
    for sleeper in &mut sleepers {
        let _ = sleeper.kill();
        let _ = sleeper.wait();
    }
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("× 20 task(s)"), "{err}");
    assert!(err.contains("limit is 100 (hard limit 100)"), "{err}");
}

/// The ring-buffer size kept in the recording's metadata.
fn ring_bytes_per_cpu(data: &Path) -> u64 {
    let bytes = std::fs::read(data).unwrap();
    let key = b"\"ring_bytes_per_cpu\":";
    let at = bytes
        .windows(key.len())
        .position(|w| w == key)
        .expect("ring_bytes_per_cpu in the metadata")
        + key.len();
    let digits: String = bytes[at..]
        .iter()
        .take_while(|b| b.is_ascii_digit())
        .map(|&b| b as char)
        .collect();
    digits.parse().unwrap()
}

/// Locked-memory limits (root without CAP_IPC_LOCK): the default ring
/// buffers shrink with a warning that gives the figures and the fix, and the
/// recording keeps the size obtained; a ring asked for with --mmap-pages that
/// the limits refuse is an error naming memlock, not perf_event_paranoid.
#[test]
fn locked_memory_limit() {
    if !can_record() {
        return;
    }
    let paranoid: i32 = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    if !is_root() || paranoid < 0 {
        eprintln!(
            "SKIPPED: needs root, and perf_event_paranoid >= 0 (else memlock is not checked)"
        );
        return;
    }
    let dir = temp_dir("processes_memlock");
    let limited = |memlock: &str, options: &[&str]| {
        run(Command::new("prlimit")
            .arg(format!("--memlock={memlock}"))
            .args([
                "setpriv",
                "--inh-caps=-ipc_lock",
                "--bounding-set=-ipc_lock",
            ])
            .arg(env!("CARGO_BIN_EXE_pfprof"))
            .args(["record", "-q", "-o"])
            .arg(dir.join("out"))
            .args(options)
            .args(["--", "true"]))
    };
    // 1 MiB of RLIMIT_MEMLOCK alone holds two rings of 64 data pages, above
    // the smallest default ring, whatever root's perf_event_mlock_kb share
    // still holds; the default (16 MiB or more per CPU) does not fit.
    let out = limited("1048576", &[]);
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("ring buffers shrunk to"), "{err}");
    assert!(err.contains("RLIMIT_MEMLOCK is 1024 KiB"), "{err}");
    assert!(err.contains("kernel.perf_event_mlock_kb is"), "{err}");
    assert!(err.contains("ulimit -l"), "{err}");
    let ring = ring_bytes_per_cpu(&dir.join("out/pfprof.data"));
    if err.contains("side-band ring buffers shrunk to") {
        // The BPF collector's rings (where the faults go, as the recording
        // says) are maps, which the limits do not cover: each CPU's 32 MiB
        // share as asked.
        assert_eq!(ring, 32 << 20, "{err}");
    } else {
        // As record prints sizes: whole MiB as MiB, the rest in KiB.
        let shown = if ring >= 1 << 20 && ring % (1 << 20) == 0 {
            format!("{} MiB", ring >> 20)
        } else {
            format!("{} KiB", ring >> 10)
        };
        assert!(
            err.contains(&format!("shrunk to {shown} per CPU")),
            "{ring}: {err}"
        );
    }

    // A ring larger than a CPU's share of perf_event_mlock_kb, with no
    // RLIMIT_MEMLOCK at all.
    let mlock_kb: usize = std::fs::read_to_string("/proc/sys/kernel/perf_event_mlock_kb")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let pages = (mlock_kb / 4 + 1).next_power_of_two();
    let out = limited("0", &["--mmap-pages", &pages.to_string()]);
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("RLIMIT_MEMLOCK is 0 KiB"), "{err}");
    assert!(err.contains("locked-memory limit"), "{err}");
    assert!(!err.contains("paranoid"), "{err}");
}

/// `--mmap-pages`: 0 and absurd sizes are refused by the parser; other
/// sizes are rounded up to a power of two and mapped as asked.
#[test]
fn mmap_pages_values() {
    let dir = temp_dir("processes_mmap_pages");
    for bad in ["0", "-1", "x", "262145", "99999999999999999999"] {
        let out = record_command(&dir, &[], &[&format!("--mmap-pages={bad}")], &["true"]);
        assert_eq!(out.status.code(), Some(2), "{bad}: {}", stderr_of(&out));
        assert!(stderr_of(&out).contains("--mmap-pages"), "{bad}");
        assert!(!dir.join("out").exists(), "{bad}");
    }
    if !can_record() {
        return;
    }
    let out = record_command(&dir, &[], &["--mmap-pages", "3"], &["true"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(ring_bytes_per_cpu(&dir.join("out/pfprof.data")), 4 * 4096);
}

/// pfprof in a pid namespace of its own (a container's): the BPF
/// collector's records carry the pids of that namespace, as the kernel's
/// records do, so every fault is attributed to its process and site.
#[test]
fn records_inside_a_pid_namespace() {
    if !can_record() || !is_root() {
        return;
    }
    let dir = temp_dir("processes_pidns");
    let exe = compile_c(&dir, "touch.c", &[]);
    let out = run(Command::new("unshare")
        .args(["--pid", "--fork", "--mount-proc"])
        .arg(env!("CARGO_BIN_EXE_pfprof"))
        .args(["record", "-q", "-o"])
        .arg(dir.join("out"))
        .arg("--")
        .arg(&exe)
        .arg("16"));
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let report = crate::util::read_report(&dir.join("out/report.json"));
    assert_complete(&report);
    let rows = function_sites(&report, "touch_pages");
    assert_eq!(total(&rows), 16 * 256);
}
