//! `profile.pb.gz` read by the real `go tool pprof` (Debian's `golang-go`):
//! its totals, traces, tag filters and diffs equal pfprof's own report.json.

use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;

use serde_json::Value;

use crate::util::{can_record, compile_c, function_sites, pfprof, record, run, temp_dir, total};

/// Whether `go tool pprof` runs here. Without it the tests skip with a
/// message, except under CI, where they must run.
fn have_go_pprof() -> bool {
    static OK: OnceLock<bool> = OnceLock::new();
    *OK.get_or_init(|| {
        let out = go_pprof_command(&temp_dir("go-pprof-probe"))
            .arg("-h")
            .output();
        // `pprof -h` prints its usage and exits 0 (or 2 on older Go).
        let ok = out.as_ref().is_ok_and(|o| {
            String::from_utf8_lossy(&o.stdout).contains("usage")
                || String::from_utf8_lossy(&o.stderr).contains("usage")
        });
        if ok {
            return true;
        }
        let why = match out {
            Ok(o) => String::from_utf8_lossy(&o.stderr).trim().to_string(),
            Err(e) => e.to_string(),
        };
        if std::env::var_os("CI").is_some() {
            panic!("go tool pprof is unavailable under CI (.ci/run installs golang-go): {why}");
        }
        eprintln!("SKIPPED: go tool pprof unavailable here ({why}); pprof tests skip");
        false
    })
}

/// `go tool pprof` with its caches and home in `dir` (the go command wants
/// one, and none of the user's settings), never symbolizing or downloading.
fn go_pprof_command(dir: &Path) -> Command {
    let mut cmd = Command::new("go");
    cmd.args(["tool", "pprof"])
        .env("HOME", dir)
        .env("GOCACHE", dir.join("gocache"))
        .env("GOPATH", dir.join("gopath"))
        .env("GOTOOLCHAIN", "local")
        .env("GOFLAGS", "")
        .env("PPROF_TMPDIR", dir)
        .env_remove("PPROF_BINARY_PATH");
    cmd
}

/// Runs `go tool pprof -symbolize=none ARGS`, returning its stdout.
fn go_pprof(dir: &Path, args: &[&str]) -> String {
    let out = run(go_pprof_command(dir).arg("-symbolize=none").args(args));
    assert!(
        out.status.success(),
        "go tool pprof {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn report_total(report: &Value) -> u64 {
    let t = &report["totals"];
    ["minor", "major", "cow"]
        .iter()
        .map(|c| t[c].as_u64().unwrap())
        .sum()
}

/// `-top`'s "Total samples = N".
fn top_total(top: &str) -> u64 {
    let (_, rest) = top
        .split_once("Total samples = ")
        .unwrap_or_else(|| panic!("no total in:\n{top}"));
    rest.split_whitespace().next().unwrap().parse().unwrap()
}

/// `-top`'s flat value of `function`.
fn top_flat(top: &str, function: &str) -> i64 {
    top.lines()
        .find(|l| l.split_whitespace().last() == Some(function))
        .and_then(|l| l.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no {function} in:\n{top}"))
}

/// `-raw`'s samples: the first value of each sample line summed.
fn raw_faults(raw: &str) -> u64 {
    let samples = raw
        .split_once("Samples:\n")
        .unwrap_or_else(|| panic!("no samples in:\n{raw}"))
        .1;
    samples
        .lines()
        .skip(1) // the value types
        .take_while(|l| !l.starts_with(|c: char| c.is_ascii_alphabetic()))
        .filter(|l| l.contains(':') && !l.trim_start().starts_with(|c: char| c.is_alphabetic()))
        .filter_map(|l| l.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

/// One `-traces` block: its labels, its count, its functions (leaf first).
struct Trace {
    labels: Vec<(String, String)>,
    count: u64,
    functions: Vec<String>,
}

fn traces(text: &str) -> Vec<Trace> {
    text.split("-----------+-------------------------------------------------------")
        .skip(1)
        // The listing ends with a separator too.
        .filter(|block| !block.trim().is_empty())
        .map(|block| {
            let mut t = Trace {
                labels: Vec::new(),
                count: 0,
                functions: Vec::new(),
            };
            for line in block.lines().filter(|l| !l.trim().is_empty()) {
                let first = line.split_whitespace().next().unwrap();
                if t.functions.is_empty() && first.ends_with(':') {
                    let value = line.trim_start()[first.len()..].trim();
                    t.labels
                        .push((first.trim_end_matches(':').to_string(), value.to_string()));
                } else if let (true, Ok(n)) = (t.functions.is_empty(), first.parse::<u64>()) {
                    t.count = n;
                    t.functions
                        .push(line.trim_start()[first.len()..].trim().to_string());
                } else {
                    t.functions.push(line.trim().to_string());
                }
            }
            t
        })
        .collect()
}

impl Trace {
    fn label(&self, key: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// data_cow's 64 COW faults in `write_data` (on `.data` `data_buf`), and
/// every other fault of the run, as go tool pprof reads them from
/// profile.pb.gz: `-top`'s total, `-traces` with their labels, and
/// `-tagfocus=class=cow` equal report.json's counts.
#[test]
fn go_pprof_reads_what_report_json_says() {
    if !can_record() || !have_go_pprof() {
        return;
    }
    let dir = temp_dir("pprof-data-cow");
    let exe = compile_c(&dir, "data_cow.c", &[]);
    let (out, report) = record(&dir, &exe, &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let profile = dir.join("out/profile.pb.gz");
    let profile = profile.to_str().unwrap();
    let all = report_total(&report);
    let cow = report["totals"]["cow"].as_u64().unwrap();
    let write_data = function_sites(&report, "write_data");
    assert_eq!(total(&write_data), 64, "the fixture's documented count");

    let top = go_pprof(&dir, &["-top", "-nodefraction=0", profile]);
    assert_eq!(top_total(&top), all, "{top}");
    assert_eq!(top_flat(&top, "write_data"), 64, "{top}");
    assert!(top.contains("Type: faults"), "{top}");
    // The main binary's mapping comes first: pprof names it.
    assert!(top.starts_with("File: data_cow"), "{top}");

    let latency = go_pprof(
        &dir,
        &["-top", "-nodefraction=0", "-sample_index=latency", profile],
    );
    assert!(latency.contains("Type: latency"), "{latency}");

    // Every trace once, with its labels; their counts add up.
    let t = traces(&go_pprof(&dir, &["-traces", profile]));
    assert_eq!(t.iter().map(|t| t.count).sum::<u64>(), all);
    for trace in &t {
        for key in ["class", "access", "target_object", "comm", "pid"] {
            assert!(trace.label(key).is_some(), "no {key}: {:?}", trace.labels);
        }
    }
    let in_write_data: Vec<&Trace> = t
        .iter()
        .filter(|t| t.functions.first().is_some_and(|f| f == "write_data"))
        .collect();
    assert_eq!(in_write_data.iter().map(|t| t.count).sum::<u64>(), 64);
    for trace in in_write_data {
        let labels = [
            ("class", "cow"),
            ("access", "write"),
            ("section", ".data"),
            ("symbol", "data_buf"),
            ("target_object", exe.to_str().unwrap()),
            ("comm", "data_cow"),
        ];
        for (key, want) in labels {
            assert_eq!(trace.label(key), Some(want), "{:?}", trace.labels);
        }
        assert_eq!(trace.functions[1], "main", "{:?}", trace.functions);
    }

    // The class label selects: COW faults only, as many as report.json has.
    let raw = go_pprof(&dir, &["-raw", "-tagfocus=class=cow", profile]);
    assert_eq!(raw_faults(&raw), cow, "{raw}");
    assert_eq!(
        raw_faults(&go_pprof(&dir, &["-raw", profile])),
        all,
        "unfiltered"
    );
    let top_cow = go_pprof(
        &dir,
        &["-top", "-nodefraction=0", "-tagfocus=class=cow", profile],
    );
    assert_eq!(top_flat(&top_cow, "write_data"), 64, "{top_cow}");
    let top_minor = go_pprof(
        &dir,
        &["-top", "-nodefraction=0", "-tagfocus=class=minor", profile],
    );
    assert!(
        !top_minor.lines().any(|l| l.ends_with(" write_data")),
        "{top_minor}"
    );
}

/// `-diff_base` between two recordings of `touch` (1 MiB, then 4 MiB):
/// `touch_pages` grew by the difference of the two reports' counts; and
/// `flamegraph` writes profile.pb.gz too, the same on every run.
#[test]
fn go_pprof_diff_base_between_two_recordings() {
    if !can_record() || !have_go_pprof() {
        return;
    }
    let dir = temp_dir("pprof-diff");
    let exe = compile_c(&dir, "touch.c", &[]);
    let mut counts = Vec::new();
    for (name, mib) in [("before", "1"), ("after", "4")] {
        let run_dir = dir.join(name);
        std::fs::create_dir_all(&run_dir).unwrap();
        let (out, report) = record(&run_dir, &exe, &[mib]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        counts.push(total(&function_sites(&report, "touch_pages")));
    }
    assert_eq!(counts, [256, 1024], "the fixture's documented counts");
    let before = dir.join("before/out/profile.pb.gz");
    let after = dir.join("after/out/profile.pb.gz");
    let diff = go_pprof(
        &dir,
        &[
            "-top",
            "-nodefraction=0",
            &format!("-diff_base={}", before.display()),
            after.to_str().unwrap(),
        ],
    );
    assert_eq!(top_flat(&diff, "touch_pages"), 1024 - 256, "{diff}");

    // flamegraph over the recording writes the same profile, byte for byte
    // each time (and one pprof reads as record's).
    let again = dir.join("again");
    let mut written = Vec::new();
    for _ in 0..2 {
        let out = run(pfprof()
            .args(["flamegraph", "-i"])
            .arg(dir.join("after/out"))
            .arg("-o")
            .arg(&again));
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        written.push(std::fs::read(again.join("profile.pb.gz")).unwrap());
    }
    assert!(
        written[0] == written[1],
        "flamegraph's profile.pb.gz differs between runs"
    );
    let report: Value = crate::util::read_report(&dir.join("after/out/report.json"));
    let top = go_pprof(
        &dir,
        &[
            "-top",
            "-nodefraction=0",
            again.join("profile.pb.gz").to_str().unwrap(),
        ],
    );
    assert_eq!(top_total(&top), report_total(&report), "{top}");
    assert_eq!(top_flat(&top, "touch_pages"), 1024, "{top}");
}

/// `record --resident`: profile.pb.gz carries the bytes each site held at
/// the peak (`resident`) and at exit (`resident_exit`) as two more sample
/// types, which go tool pprof reads; faults stay the default.
#[test]
fn go_pprof_reads_resident_bytes() {
    if !can_record() || !have_go_pprof() {
        return;
    }
    let dir = temp_dir("pprof-resident");
    let exe = compile_c(&dir, "resident.c", &[]);
    let data = dir.join("resident.dat");
    let (out, _) = crate::util::record_with(&dir, &["--resident"], &exe, &[data.to_str().unwrap()]);
    assert!(out.status.success());
    let profile = dir.join("out/profile.pb.gz");
    let profile = profile.to_str().unwrap();
    let kib = |index: &str, function: &str| {
        let top = go_pprof(
            &dir,
            &[
                "-top",
                "-nodefraction=0",
                "-unit=kB",
                &format!("-sample_index={index}"),
                profile,
            ],
        );
        let line = (top.lines())
            .find(|l| l.split_whitespace().last() == Some(function))
            .unwrap_or_else(|| panic!("no {function} in:\n{top}"));
        line.split_whitespace().next().unwrap().to_string()
    };
    // The fixture's own accounting (see resident.c).
    assert_eq!(kib("resident", "touch_anon"), "1024kB");
    assert_eq!(kib("resident_exit", "touch_anon"), "640kB");
    assert_eq!(kib("resident", "read_file"), "256kB");
    let top = go_pprof(&dir, &["-top", profile]);
    assert!(top.contains("Type: faults"), "{top}");
    // Each resident sample names its process, as the faults' do.
    let decoded = pfprof::output::pprof::decode(&std::fs::read(profile).unwrap()).unwrap();
    let pid_key = decoded
        .string_table
        .iter()
        .position(|s| s == "pid")
        .unwrap() as i64;
    let resident: Vec<_> = (decoded.sample.iter())
        .filter(|s| s.value[2] > 0 || s.value[3] > 0)
        .collect();
    assert!(!resident.is_empty());
    for sample in resident {
        assert!(
            sample.label.iter().any(|l| l.key == pid_key && l.num > 0),
            "{sample:?}"
        );
    }
}
