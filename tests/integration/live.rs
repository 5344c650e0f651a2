//! Attaching to running processes (`record -p`) and system-wide recording
//! (`record -a`), for real.

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::util::{
    can_record, compile_c, fault_line, function_sites, pfprof, run, show, temp_dir, total,
};

/// Starts wait_signal and waits until it says it is ready.
pub(crate) fn start_waiter(exe: &std::path::Path) -> Child {
    let mut child = Command::new(exe).stdout(Stdio::piped()).spawn().unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line, "ready\n");
    child
}

/// The names in `dir` (interval directories), in order.
fn sorted_names(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

/// Starts `pfprof record ARGS` and waits for its "recording ..." line.
pub(crate) fn start_pfprof(args: &[&str]) -> Child {
    let mut command = pfprof();
    command.arg("record").args(args).stderr(Stdio::piped());
    // The tests stop it with SIGINT, as Ctrl-C would. A test run started in
    // the background of a non-interactive shell has SIGINT ignored, and
    // pfprof keeps an ignored signal ignored (as for nohup): it would never
    // stop, so it gets SIGINT at its default.
    // SAFETY: signal(2) is async-signal-safe, and only this one call runs
    // between fork and exec.
    unsafe {
        command.pre_exec(|| {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            Ok(())
        });
    }
    let mut child = command.spawn().unwrap();
    let mut reader = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    let started = loop {
        line.clear();
        if Instant::now() > deadline || reader.read_line(&mut line).unwrap_or(0) == 0 {
            break false;
        }
        if line.starts_with("pfprof: recording") {
            break true;
        }
    };
    if !started {
        let _ = child.kill();
        let _ = child.wait();
        panic!("pfprof did not start recording (last line: {line:?})");
    }
    // Keep draining stderr so pfprof never blocks on a full pipe.
    std::thread::spawn(move || for _ in reader.lines() {});
    child
}

fn signal(pid: u32, sig: &str) {
    assert!(crate::util::signal(pid, sig), "kill -{sig} {pid} failed");
}

fn report(dir: &std::path::Path) -> Value {
    crate::util::read_report(&dir.join("report.json"))
}

/// Attached by pid: the faults after attaching are recorded with their code
/// site, and pfprof stops when the process exits.
#[test]
fn attach_to_running_process() {
    if !can_record() {
        return;
    }
    let _shared = crate::util::shared();
    let dir = temp_dir("live_attach");
    let exe = compile_c(&dir, "wait_signal.c", &[]);
    let mut waiter = start_waiter(&exe);
    let out_dir = dir.join("out");
    let waiter_pid = waiter.id();
    let pid = waiter_pid.to_string();
    let recorder = start_pfprof(&["-q", "-o", out_dir.to_str().unwrap(), "-p", &pid]);
    signal(waiter.id(), "USR1");
    assert!(waiter.wait().unwrap().success());
    let status = recorder.wait_with_output().unwrap().status;
    assert_eq!(
        status.code(),
        Some(0),
        "pfprof stops by itself when its targets exit"
    );
    let report = report(&out_dir);
    let rows = function_sites(&report, "touch_after_signal");
    assert_eq!(total(&rows), 64, "{}", show(&rows));
    for r in &rows {
        assert_eq!(r["class"], "minor");
        assert_eq!(r["access"], "write");
        assert_eq!(r["target"]["region"], "anon");
        assert_eq!(r["pids"][0], waiter_pid);
        assert_eq!(r["line"], fault_line("wait_signal.c", "after_signal"));
    }
    assert_eq!(
        report["startup"],
        Value::Null,
        "no start-up window when attaching"
    );
    let procs = report["processes"].as_array().unwrap();
    assert!(
        procs
            .iter()
            .any(|p| p["pid"] == waiter_pid && p["comm"] == "wait_signal"),
        "{procs:?}"
    );
}

/// Ctrl-C (SIGINT to pfprof) ends an attached recording cleanly; the target
/// keeps running untouched and exits normally later.
#[test]
fn attach_stops_on_sigint_and_leaves_target_running() {
    if !can_record() {
        return;
    }
    let _shared = crate::util::shared();
    let dir = temp_dir("live_sigint");
    let exe = compile_c(&dir, "wait_signal.c", &[]);
    let mut waiter = start_waiter(&exe);
    let out_dir = dir.join("out");
    let recorder = start_pfprof(&[
        "-q",
        "-o",
        out_dir.to_str().unwrap(),
        "-p",
        &waiter.id().to_string(),
    ]);
    signal(recorder.id(), "INT");
    let status = recorder.wait_with_output().unwrap().status;
    assert_eq!(status.code(), Some(0));
    assert!(
        report(&out_dir)["totals"].is_object(),
        "a complete, readable recording"
    );
    // Still alive, and still behaves: exits 0 on SIGUSR2.
    assert!(waiter.try_wait().unwrap().is_none());
    signal(waiter.id(), "USR2");
    assert!(waiter.wait().unwrap().success());
}

/// A pid that does not exist: one-line error, exit 2.
#[test]
fn attach_to_missing_pid_is_2() {
    let dir = temp_dir("live_missing");
    let out = run(pfprof()
        .arg("record")
        .arg("-o")
        .arg(dir.join("out"))
        .args(["-p", "999999999"]));
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("999999999") && err.trim().lines().count() == 1,
        "{err}"
    );
}

/// System-wide: a program's major faults show up under its process and the
/// file it read, while pfprof's own faults do not.
#[test]
fn system_wide_major_faults() {
    if !can_record() {
        return;
    }
    let dir = temp_dir("live_system");
    let exe = compile_c(&dir, "file_major.c", &[]);
    let out_dir = dir.join("out");
    // Not while the 1 GiB touch test floods every CPU.
    let _alone = crate::util::exclusive();
    // --class major: what a busy host's major-fault alert needs, and cheap.
    let recorder = start_pfprof(&[
        "-q",
        "-a",
        "--class",
        "major",
        "-o",
        out_dir.to_str().unwrap(),
        "--duration",
        "30",
    ]);
    let recorder_pid = recorder.id();
    let data = dir.join("major.bin");
    let fixture = run(Command::new(&exe).arg(&data));
    assert!(fixture.status.success());
    signal(recorder.id(), "INT");
    assert_eq!(recorder.wait_with_output().unwrap().status.code(), Some(0));
    let report = report(&out_dir);
    let totals = &report["totals"];
    assert_eq!(
        (totals["minor"].as_u64(), totals["cow"].as_u64()),
        (Some(0), Some(0)),
        "only major faults sampled"
    );
    // pfprof's own faults (all major here) are counted apart.
    assert_eq!(
        totals["major"].as_u64().unwrap() + totals["pfprof_faults"].as_u64().unwrap(),
        totals["kernel_major"].as_u64().unwrap(),
        "every major fault of the host captured: {totals}"
    );
    let rows = function_sites(&report, "read_file_pages");
    assert_eq!(total(&rows), 64, "{}", show(&rows));
    assert!(rows
        .iter()
        .all(|r| r["class"] == "major" && r["comm"] == "file_major"));
    let files = report["files"].as_array().unwrap();
    let file = files
        .iter()
        .find(|f| f["path"] == data.to_str().unwrap())
        .expect("the data file in files");
    assert!(file["major"].as_u64().unwrap() >= 64, "{file}");
    let procs = report["processes"].as_array().unwrap();
    let p = procs
        .iter()
        .find(|p| p["comm"] == "file_major")
        .expect("file_major in processes");
    assert!(p["major"].as_u64().unwrap() >= 64);
    assert!(p["exe"].as_str().unwrap().ends_with("/file_major"), "{p}");
    let own = report["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["pid"] == recorder_pid);
    assert!(
        own.is_none_or(|p| p["minor"] == 0 && p["major"] == 0),
        "pfprof's own faults are left out: {own:?}"
    );
}

/// `--stream --fixed-ts` under `setarch -R`: two runs of a deterministic
/// program print byte-identical streams, one line per recorded fault. Run
/// alone: another test's program starting at the same moment reads the
/// same files (ld.so.cache), and a fault that waits for a page another
/// process holds locked is counted major (one CI run saw MAJOR for one
/// run's ld.so.cache fault, MINOR for the other's).
#[test]
fn fixed_ts_streams_are_identical() {
    if !can_record() {
        return;
    }
    let _alone = crate::util::exclusive();
    let dir = temp_dir("live_stream_fixed");
    let exe = compile_c(&dir, "bss_read_write.c", &[]);
    // A first run warms the page cache, so that the compared runs match.
    assert!(run(&mut Command::new(&exe)).status.success());
    let mut streams = Vec::new();
    for i in 0..2 {
        let out_dir = dir.join(format!("out{i}"));
        let out = run(Command::new("setarch")
            .arg("-R")
            .arg(env!("CARGO_BIN_EXE_pfprof"))
            .args(["record", "-q", "--stream", "--fixed-ts", "-o"])
            .arg(&out_dir)
            .arg("--")
            .arg(&exe));
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let captured = report(&out_dir)["totals"].clone();
        let faults = captured["minor"].as_u64().unwrap()
            + captured["major"].as_u64().unwrap()
            + captured["cow"].as_u64().unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        // The stream ends with the summary line of the report's totals.
        let (text, summary) = text
            .trim_end_matches('\n')
            .rsplit_once('\n')
            .expect("lines then a summary");
        assert_eq!(
            summary,
            format!(
                "Summary: major={} minor={} cow={}",
                captured["major"], captured["minor"], captured["cow"]
            )
        );
        let text = format!("{text}\n");
        assert_eq!(text.lines().count() as u64, faults, "one line per fault");
        // The live shape, one millisecond per fault:
        // `[000000.001] MINOR 0x7f2c7b100000 libc.so.6 .text`.
        for (i, line) in text.lines().enumerate() {
            let seq = i + 1;
            let stamp = format!("[{:06}.{:03}] ", seq / 1000, seq % 1000);
            assert!(line.starts_with(&stamp), "line {seq}: {line}");
            let fields: Vec<&str> = line.split_whitespace().collect();
            assert_eq!(fields.len(), 5, "no latency under --fixed-ts: {line}");
            assert!(["MINOR", "MAJOR", "COW"].contains(&fields[1]), "{line}");
            assert!(fields[2].starts_with("0x"), "{line}");
        }
        let cow_lines = text.lines().filter(|l| l.contains(" COW ")).count() as u64;
        assert_eq!(
            cow_lines,
            captured["cow"].as_u64().unwrap(),
            "the stream classifies like the report"
        );
        // The stream names every target as the report does: faults per
        // (class, object, section) agree.
        let mut from_stream = std::collections::BTreeMap::new();
        for line in text.lines() {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let key = (
                fields[1].to_lowercase(),
                fields[3].to_string(),
                fields[4].to_string(),
            );
            *from_stream.entry(key).or_insert(0u64) += 1;
        }
        let mut from_report = std::collections::BTreeMap::new();
        for t in report(&out_dir)["targets"].as_array().unwrap() {
            let object = t["object"].as_str().unwrap();
            let short = if object.starts_with('[') {
                object
            } else {
                object.rsplit('/').next().unwrap()
            };
            let key = (
                t["class"].as_str().unwrap().to_string(),
                short.to_string(),
                t["section"].as_str().unwrap_or("-").to_string(),
            );
            *from_report.entry(key).or_insert(0u64) += t["count"].as_u64().unwrap();
        }
        assert_eq!(from_stream, from_report, "stream vs report targets");
        // 128 zero-page COW writes on zbuf, plus the exe's own .bss page at exit.
        let zbuf = text
            .lines()
            .filter(|l| l.contains(" COW ") && l.contains("bss_read_write .bss"))
            .count();
        assert!(zbuf >= 128, "{zbuf}");
        streams.push(text);
    }
    if streams[0] != streams[1] {
        let (a, b): (Vec<&str>, Vec<&str>) =
            (streams[0].lines().collect(), streams[1].lines().collect());
        let first = a
            .iter()
            .zip(&b)
            .position(|(x, y)| x != y)
            .unwrap_or(a.len().min(b.len()));
        panic!(
            "the streams differ from line {} ({} and {} lines):\n{}\n{}",
            first + 1,
            a.len(),
            b.len(),
            a[first.saturating_sub(2)..(first + 3).min(a.len())].join("\n"),
            b[first.saturating_sub(2)..(first + 3).min(b.len())].join("\n"),
        );
    }
    assert!(streams[0].starts_with("[000000.001] "));
}

/// `--stream=site` shows latency and the code site of each fault.
#[test]
fn stream_with_sites() {
    if !can_record() {
        return;
    }
    let dir = temp_dir("live_stream_site");
    let exe = compile_c(&dir, "file_major.c", &[]);
    let data = dir.join("major.bin");
    let out = run(pfprof()
        .args(["record", "-q", "--stream=site", "-o"])
        .arg(dir.join("out"))
        .arg("--")
        .arg(&exe)
        .arg(&data));
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let majors: Vec<&str> = text
        .lines()
        .filter(|l| l.contains(" MAJOR ") && l.contains("read_file_pages (file_major.c:"))
        .collect();
    assert_eq!(majors.len(), 64, "{text}");
    // Faults the kernel takes inside execve have a site, as in report.json.
    let report = crate::util::read_report(&dir.join("out/report.json"));
    let in_exec = crate::util::total(&crate::util::function_sites(&report, "[execve]"));
    assert!(in_exec > 0, "no [execve] site in report.json");
    let streamed = text.lines().filter(|l| l.ends_with(" [execve]")).count() as u64;
    assert_eq!(streamed, in_exec, "{text}");
    // [000000.007] MAJOR 0x7f22b6a9c000 major.bin - 43.9µs read_file_pages (file_major.c:21)
    let fields: Vec<&str> = majors[0].split_whitespace().collect();
    assert!(
        fields[0].starts_with('[') && fields[0].ends_with(']') && fields[0].contains('.'),
        "{}",
        majors[0]
    );
    assert!(
        fields[2].starts_with("0x") && fields[3] == "major.bin" && fields[5].ends_with('s'),
        "{}",
        majors[0]
    );
    // The live stream ends with the summary too, counting its lines' classes.
    let last = text.lines().last().unwrap();
    let count = |class: &str| text.lines().filter(|l| l.contains(class)).count();
    assert_eq!(
        last,
        format!(
            "Summary: major={} minor={} cow={}",
            count(" MAJOR "),
            count(" MINOR "),
            count(" COW ")
        )
    );
}

/// `record -p PID --interval 1 --keep 2`: one directory per interval, named
/// by its start (UTC), each with the folded stacks, report.json and a pprof
/// stamped with its time and length; the newest two kept; the faults of the
/// attached process counted exactly in the interval they happened in, the
/// partial last one written when the process exits.
#[test]
fn intervals_of_an_attached_process() {
    if !can_record() {
        return;
    }
    let _shared = crate::util::shared();
    let dir = temp_dir("live_intervals");
    let exe = compile_c(&dir, "wait_signal.c", &[]);
    let mut waiter = start_waiter(&exe);
    let out_dir = dir.join("out");
    let pid = waiter.id().to_string();
    let args = [
        "-o",
        out_dir.to_str().unwrap(),
        "--interval",
        "1",
        "--keep",
        "2",
    ];
    let recorder = start_pfprof(&[&args[..], &["-p", &pid]].concat());
    // Past the first interval, so that one is written empty and deleted.
    std::thread::sleep(Duration::from_millis(2500));
    signal(waiter.id(), "USR1");
    assert!(waiter.wait().unwrap().success());
    let status = recorder.wait_with_output().unwrap().status;
    assert_eq!(status.code(), Some(0));

    let names = sorted_names(&out_dir);
    assert_eq!(names.len(), 2, "the newest two intervals: {names:?}");
    for name in &names {
        assert!(
            pfprof::commands::continuous::is_interval_name(name),
            "{name}"
        );
    }
    let mut faults = 0;
    let mut starts = Vec::new();
    for name in &names {
        let interval = out_dir.join(name);
        for file in [
            "minor.folded",
            "major.folded",
            "cow.folded",
            "all.folded",
            "report.txt",
        ] {
            assert!(interval.join(file).is_file(), "{name}/{file}");
        }
        let report = report(&interval);
        assert_eq!(report["totals"]["lost"], 0);
        faults += total(&function_sites(&report, "touch_after_signal"));
        let pb = std::fs::read(interval.join("profile.pb.gz")).unwrap();
        let profile = pfprof::output::pprof::decode(&pb).unwrap();
        assert!(profile.duration_nanos > 0, "{name}: no duration");
        assert!(
            profile.duration_nanos <= 1_100_000_000,
            "{name}: {}",
            profile.duration_nanos
        );
        // The name is the start, to the second.
        assert_eq!(
            pfprof::commands::continuous::interval_name(profile.time_nanos),
            *name,
            "{name}: time_nanos {}",
            profile.time_nanos
        );
        starts.push(profile.time_nanos);
    }
    assert_eq!(faults, 64, "every fault, once, in the kept intervals");
    assert!(starts[0] < starts[1]);
}

/// `record -a --interval 1` beside a steady stream of faults (the touch
/// fixture, again and again): each interval ends where the kernel's count
/// was read (the middle of the read), so its records and that count cover
/// the same faults, but for the few of the read's microseconds (an IPI per
/// CPU). With a count read
/// at any pass up to 250 ms from the edge, busy intervals read 110%
/// captured and their neighbours 90%.
#[test]
fn intervals_end_where_the_kernels_count_was_read() {
    if !can_record() {
        return;
    }
    let dir = temp_dir("live_interval_edges");
    let exe = compile_c(&dir, "touch.c", &[]);
    let out_dir = dir.join("out");
    let _alone = crate::util::exclusive();
    let mut load = Command::new("sh")
        .arg("-c")
        .arg("end=$(($(date +%s) + 5)); while [ $(date +%s) -lt $end ]; do \"$0\" 32; done")
        .arg(&exe)
        .spawn()
        .unwrap();
    let args = [
        "-q",
        "-a",
        "--interval",
        "1",
        "--keep",
        "10",
        "--duration",
        "3",
    ];
    let recorder = start_pfprof(&[&args[..], &["-o", out_dir.to_str().unwrap()]].concat());
    let status = recorder.wait_with_output().unwrap().status;
    let _ = load.kill();
    let _ = load.wait();
    assert_eq!(status.code(), Some(0));
    let names = sorted_names(&out_dir);
    assert!(names.len() >= 3, "{names:?}");
    for name in &names {
        let totals = &report(&out_dir.join(name))["totals"];
        let n = |key: &str| totals[key].as_u64().unwrap();
        let captured = n("minor") + n("major") + n("cow") + n("pfprof_faults") + n("lost");
        let kernel = n("kernel_minor") + n("kernel_major");
        // Intervals of 8,192-fault runs: tens of thousands of faults each.
        assert!(
            captured.abs_diff(kernel) <= kernel / 200 + 10,
            "{name}: {captured} captured, the kernel counted {kernel}: {totals}"
        );
    }
}

/// `--interval` needs processes that run already, a second or more, and a
/// directory that holds nothing but intervals: one line, exit 2.
#[test]
fn interval_refusals() {
    let dir = temp_dir("live_interval_refusals");
    let foreign = dir.join("foreign");
    std::fs::create_dir_all(&foreign).unwrap();
    std::fs::write(foreign.join("notes.txt"), "mine").unwrap();
    let out = dir.join("out");
    let out = out.to_str().unwrap();
    let foreign = foreign.to_str().unwrap();
    for (args, says) in [
        (
            &["--interval", "1", "-o", out, "--", "true"][..],
            "with -a or -p",
        ),
        (
            &["--interval", "0.5", "-o", out, "-a"][..],
            "at least 1 second",
        ),
        (&["--interval", "1", "-o", foreign, "-a"][..], "notes.txt"),
    ] {
        let output = run(pfprof().arg("record").args(args));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
    }
    assert_eq!(
        std::fs::read_to_string(dir.join("foreign/notes.txt")).unwrap(),
        "mine"
    );
}
