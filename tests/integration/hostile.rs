//! Hostile input: `report`, `flamegraph` and `diff` on things that are not
//! usable recordings fail with exit 1 and one line naming the file (never a
//! hang, a panic, a signal, or "captured 0 faults" with exit 0); damaged
//! recordings say where; mutated recordings never crash pfprof.

use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::util::{can_record, pfprof, record_with, temp_dir};

/// Runs `cmd`, killing it if it is still running after a minute: a guard
/// against hangs (a FIFO opened for reading blocks forever), not a timing
/// assertion. The outputs are small, so reading them after the exit cannot
/// block the child.
fn run_guarded(cmd: &mut Command) -> Output {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > Duration::from_secs(60) {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("{cmd:?} hung (killed after 60 s)");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
    child
        .stdout
        .take()
        .unwrap()
        .read_to_end(&mut stdout)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_end(&mut stderr)
        .unwrap();
    Output {
        status,
        stdout,
        stderr,
    }
}

/// Exit 1 with exactly one line on stderr that names `file` once, says
/// `why`, and repeats none of its causes.
fn assert_one_line_error(output: &Output, file: &Path, why: &str, context: &str) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        output.status.code(),
        Some(1),
        "{context}: {stderr} (status {:?})",
        output.status
    );
    assert_eq!(stderr.lines().count(), 1, "{context}: {stderr}");
    assert!(stderr.starts_with("pfprof: error: "), "{context}: {stderr}");
    assert!(!stderr.contains("panicked"), "{context}: {stderr}");
    assert!(!stderr.contains("captured"), "{context}: {stderr}");
    let name = file.display().to_string();
    assert_eq!(
        stderr.matches(&name).count(),
        1,
        "{context}: the file is named once: {stderr}"
    );
    assert!(stderr.contains(why), "{context}: {why:?} in {stderr}");
    // No cause printed twice (anyhow's `{:#}` repeats a source whose text
    // the message already holds).
    let parts: Vec<&str> = stderr.trim().split(": ").collect();
    for (i, part) in parts.iter().enumerate() {
        assert!(
            !parts[i + 1..].contains(part) || part.len() < 8,
            "{context}: {part:?} repeated in {stderr}"
        );
    }
}

/// `report`, `flamegraph` and `diff` (as either side) on `input`.
fn commands(input: &Path, out: &Path, good: Option<&Path>) -> Vec<(String, Command)> {
    let mut list = Vec::new();
    let mut report = pfprof();
    report.arg("report").arg("-i").arg(input);
    list.push(("report".to_string(), report));
    let mut flamegraph = pfprof();
    flamegraph
        .arg("flamegraph")
        .arg("-i")
        .arg(input)
        .arg("-o")
        .arg(out);
    list.push(("flamegraph".to_string(), flamegraph));
    let other = good.unwrap_or(input);
    for (before, after, label) in [
        (input, other, "diff (before)"),
        (other, input, "diff (after)"),
    ] {
        if good.is_none() && label == "diff (after)" {
            continue;
        }
        let mut diff = pfprof();
        diff.arg("diff").arg(before).arg(after).arg("-o").arg(out);
        list.push((label.to_string(), diff));
    }
    list
}

/// A directory without a recording, a FIFO, an empty file, a text file, an
/// ELF binary, a perf.data of other events, of faults without addresses or
/// without any fault sample: exit 1, one line naming the file, for each
/// command; the FIFO does not hang.
#[test]
fn not_a_recording_is_one_line() {
    let _shared = crate::util::shared();
    let dir = temp_dir("hostile_not_a_recording");
    let good = can_record().then(|| {
        let rec = dir.join("rec");
        std::fs::create_dir_all(&rec).unwrap();
        record_with(&rec, &["--no-tracepoints"], Path::new("/bin/true"), &[]);
        rec.join("out")
    });

    let empty_dir = dir.join("empty-dir");
    std::fs::create_dir_all(&empty_dir).unwrap();
    let fifo = dir.join("fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let empty = dir.join("empty.data");
    std::fs::write(&empty, b"").unwrap();
    let text = dir.join("notes.txt");
    std::fs::write(&text, "not a recording\n".repeat(20)).unwrap();
    let elf = dir.join("true-copy");
    std::fs::copy("/bin/true", &elf).unwrap();
    let missing = dir.join("missing.data");

    let mut cases: Vec<(PathBuf, &str)> = vec![
        (empty_dir.clone(), "a directory without a recording"),
        (fifo.clone(), "a FIFO"),
        (empty.clone(), "the file is empty"),
        (text.clone(), "not a perf.data file"),
        (elf.clone(), "not a perf.data file"),
        (missing.clone(), "No such file or directory"),
    ];
    // perf's own recording of another event, where perf can record.
    let cycles = dir.join("perf-cpu-clock.data");
    let perf = Command::new("perf")
        .args(["record", "-q", "-e", "cpu-clock", "-o"])
        .arg(&cycles)
        .args(["--", "/bin/true"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    // perf's recording of minor faults without -d: fault samples without
    // a data address, nothing to analyse.
    let no_addr = dir.join("perf-minor-faults.data");
    let perf_minor = Command::new("perf")
        .args(["record", "-q", "-e", "minor-faults", "-o"])
        .arg(&no_addr)
        .args(["--", "/bin/true"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    // perf's recording of fault events with no sample in it (one in a
    // million): pfprof reads perf's files, but an empty one is no profile.
    let no_sample = dir.join("perf-no-sample.data");
    let perf_none = Command::new("perf")
        .args([
            "record",
            "-q",
            "-c",
            "1000000",
            "-d",
            "-e",
            "minor-faults",
            "-o",
        ])
        .arg(&no_sample)
        .args(["--", "/bin/true"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    if [perf, perf_minor, perf_none]
        .into_iter()
        .all(|s| s.is_ok_and(|s| s.success()))
    {
        cases.push((cycles, "no minor-faults or major-faults event"));
        cases.push((no_addr, "fault samples could be decoded"));
        cases.push((no_sample, "holds no fault sample"));
    } else if std::env::var_os("CI").is_some() {
        panic!("perf cannot record under CI: the foreign perf.data cases must run");
    } else {
        eprintln!("SKIPPED: perf cannot record here: the foreign perf.data cases");
    }

    let out = dir.join("svg-out");
    for (input, why) in &cases {
        for (label, mut cmd) in commands(input, &out, good.as_deref()) {
            let output = run_guarded(&mut cmd);
            assert_one_line_error(&output, input, why, &format!("{label} {}", input.display()));
        }
    }
}

/// The offset of the `n`-th record of a recording's data section.
fn record_offset(bytes: &[u8], n: usize) -> usize {
    let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap()) as usize;
    let mut at = u64_at(40);
    for _ in 0..n {
        at += u16::from_le_bytes([bytes[at + 6], bytes[at + 7]]) as usize;
    }
    at
}

/// A record with an impossible size: the line gives the byte offset and the
/// record type; a recording with no decodable record is an error, not an
/// empty profile.
#[test]
fn damaged_recording_names_offset_and_type() {
    if !can_record() {
        return;
    }
    let _shared = crate::util::shared();
    let dir = temp_dir("hostile_damaged");
    record_with(&dir, &["--no-tracepoints"], Path::new("/bin/true"), &[]);
    let data = std::fs::read(dir.join("out/pfprof.data")).unwrap();

    let bad_size = dir.join("bad-size.data");
    let mut bytes = data.clone();
    let at = record_offset(&bytes, 3);
    let record_type = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
    bytes[at + 6..at + 8].copy_from_slice(&3u16.to_le_bytes());
    std::fs::write(&bad_size, &bytes).unwrap();
    let output = run_guarded(pfprof().arg("report").arg("-i").arg(&bad_size));
    assert_one_line_error(
        &output,
        &bad_size,
        &format!("at byte {at} (record type {record_type}, "),
        "bad record size",
    );

    // An unfinished recording (no feature sections) cut at its data
    // section: nothing to decode.
    let no_records = dir.join("no-records.data");
    let start = record_offset(&data, 0);
    let mut bytes = data[..start].to_vec();
    bytes[72..104].fill(0);
    std::fs::write(&no_records, &bytes).unwrap();
    for partial in [false, true] {
        let mut cmd = pfprof();
        cmd.arg("report").arg("-i").arg(&no_records);
        if partial {
            cmd.arg("--partial");
        }
        let output = run_guarded(&mut cmd);
        assert_one_line_error(
            &output,
            &no_records,
            "no record could be decoded",
            &format!("no records, partial {partial}"),
        );
    }
}

/// A deterministic pseudo-random sequence (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Some hundred truncations, bit flips and size-field mutations of a small
/// real recording: pfprof ends with 0 or 1, never by a signal or a panic,
/// and an error is one line.
#[test]
fn mutated_recordings_never_crash() {
    if !can_record() {
        return;
    }
    let _shared = crate::util::shared();
    let dir = temp_dir("hostile_mutated");
    record_with(&dir, &["--no-tracepoints"], Path::new("/bin/true"), &[]);
    let data = std::fs::read(dir.join("out/pfprof.data")).unwrap();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut mutations: Vec<(String, Vec<u8>)> = Vec::new();
    // Truncations: inside the header, the attrs, the data, the features.
    for _ in 0..60 {
        let cut = rng.below(data.len());
        mutations.push((format!("cut at {cut}"), data[..cut].to_vec()));
    }
    // Bit flips, one to eight at a time.
    for _ in 0..120 {
        let mut bytes = data.clone();
        let mut flipped = Vec::new();
        for _ in 0..1 + rng.below(8) {
            let at = rng.below(bytes.len());
            let bit = rng.below(8);
            bytes[at] ^= 1 << bit;
            flipped.push((at, bit));
        }
        mutations.push((format!("bits flipped {flipped:?}"), bytes));
    }
    // Size, count and offset fields: the header's, the attr ids', the
    // records', and the feature table's, set to extreme values.
    let values = [
        0u64,
        1,
        7,
        8,
        0xffff,
        0x7fff_ffff,
        u32::MAX as u64,
        u64::MAX / 2,
        u64::MAX,
    ];
    let mut fields: Vec<(usize, usize)> = (16..104).step_by(8).map(|at| (at, 8)).collect();
    let attrs = u64::from_le_bytes(data[24..32].try_into().unwrap()) as usize;
    let attr_size = u64::from_le_bytes(data[16..24].try_into().unwrap()) as usize;
    fields.push((attrs + 4, 4)); // attr.size
    fields.push((attrs + attr_size - 16, 8)); // ids offset
    fields.push((attrs + attr_size - 8, 8)); // ids size
    for n in [0, 1, 2, 5] {
        fields.push((record_offset(&data, n) + 6, 2));
    }
    let table =
        record_offset(&data, 0) + u64::from_le_bytes(data[48..56].try_into().unwrap()) as usize;
    for entry in 0..5 {
        fields.push((table + 16 * entry, 8));
        fields.push((table + 16 * entry + 8, 8));
    }
    for &(at, width) in &fields {
        for value in values {
            let mut bytes = data.clone();
            if at + width > bytes.len() {
                continue;
            }
            bytes[at..at + width].copy_from_slice(&value.to_le_bytes()[..width]);
            mutations.push((format!("{width} bytes at {at} set to {value:#x}"), bytes));
        }
    }
    assert!(mutations.len() > 300, "{}", mutations.len());

    let path = dir.join("mutated.data");
    let mut outcomes = [0usize; 2];
    for (index, (what, bytes)) in mutations.iter().enumerate() {
        std::fs::write(&path, bytes).unwrap();
        let mut cmd = pfprof();
        cmd.arg("report").arg("-i").arg(&path);
        if index % 3 == 0 {
            cmd.arg("--partial");
        }
        let output = run_guarded(&mut cmd);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(
            output.status.signal(),
            None,
            "{what}: killed by a signal: {stderr}"
        );
        assert!(!stderr.contains("panicked"), "{what}: {stderr}");
        match output.status.code() {
            Some(0) => outcomes[0] += 1,
            Some(1) => {
                outcomes[1] += 1;
                assert_eq!(stderr.lines().count(), 1, "{what}: {stderr}");
            }
            code => panic!("{what}: exit {code:?}: {stderr}"),
        }
    }
    eprintln!(
        "{} mutations: {} read, {} refused",
        mutations.len(),
        outcomes[0],
        outcomes[1]
    );
    assert!(
        outcomes[1] > 0,
        "no mutation was refused: the test is blind"
    );
}
