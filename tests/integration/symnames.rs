//! Names of code that has no symbol of its own: PLT entries (`getppid@plt`,
//! as objdump and perf name them), vDSO functions by their exported name
//! (`__vdso_time`, not its weak alias `time`) in the report and in the
//! live stream alike.

use std::process::Command;

use crate::util::{
    can_record, compile_c, fault_line, pfprof, read_report, record_with, run, show, sites, temp_dir,
};

/// `fixtures/plt_vdso.c`'s counts.
const PLT_CALLS: u64 = 32;
const VDSO_PAGES: u64 = 48;

/// plt_vdso under `record --stream=site`: its 32 faults in the PLT are one
/// site at `getppid@plt` in `.plt`, its 48 in the vDSO one site at
/// `__vdso_time` writing `fresh`; the stream names both the same way.
#[test]
fn plt_and_vdso_frames_are_named() {
    if !can_record() {
        return;
    }
    let dir = temp_dir("symnames_plt_vdso");
    let exe = compile_c(&dir, "plt_vdso.c", &["-Wl,-z,lazy"]);
    let out_dir = dir.join("out");
    let out = run(pfprof()
        .args(["record", "-q", "--stream=site", "-o"])
        .arg(&out_dir)
        .arg("--")
        .arg(&exe));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report = read_report(&out_dir.join("report.json"));
    let is_own = |s: &serde_json::Value| s["target"]["object"] == exe.to_str().unwrap();

    let plt = sites(&report, |s| s["function"] == "getppid@plt");
    assert_eq!(plt.len(), 1, "{}", show(&plt));
    assert!(is_own(plt[0]), "{}", show(&plt));
    assert_eq!(plt[0]["target"]["section"], ".plt", "{}", show(&plt));
    assert_eq!(plt[0]["access"], "exec", "{}", show(&plt));
    assert_eq!(plt[0]["count"], PLT_CALLS, "{}", show(&plt));

    let vdso = sites(&report, |s| {
        s["function"] == "__vdso_time" && s["target"]["symbol"] == "fresh"
    });
    assert_eq!(vdso.len(), 1, "{}", show(&vdso));
    assert_eq!(vdso[0]["count"], VDSO_PAGES, "{}", show(&vdso));
    // Its caller is main, at the marked line.
    let frames = vdso[0]["frames"].as_array().unwrap();
    let caller = &frames[frames.len() - 2];
    assert_eq!(caller["function"], "main", "{frames:?}");
    assert_eq!(
        caller["line"],
        fault_line("plt_vdso.c", "vdso_time"),
        "{frames:?}"
    );
    // No frame anywhere takes the weak alias.
    let weak = sites(&report, |s| {
        s["stack"].as_array().unwrap().iter().any(|f| f == "time")
    });
    assert!(weak.is_empty(), "{}", show(&weak));

    // The stream: `[stamp] MINOR 0x... plt_vdso .plt 3.8µs getppid@plt`.
    let text = String::from_utf8(out.stdout).unwrap();
    let count = |section: &str, function: &str| {
        text.lines()
            .filter(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                f.get(3) == Some(&"plt_vdso")
                    && f.get(4) == Some(&section)
                    && f.last() == Some(&function)
            })
            .count() as u64
    };
    assert_eq!(count(".plt", "getppid@plt"), PLT_CALLS, "{text}");
    assert_eq!(count(".bss", "__vdso_time"), VDSO_PAGES, "{text}");
    assert!(!text.contains("[vdso]+0x"), "{text}");
}

/// Faults of `touchPagesInJs` in `fixtures/jit_touch.js`.
const JS_PAGES: u64 = 400;

/// node, which the JIT test runs; under CI it must be there (.ci/run
/// installs it where it is missing).
fn have_node() -> bool {
    let ok = Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        assert!(
            std::env::var_os("CI").is_none(),
            "node is unavailable under CI (.ci/run installs nodejs)"
        );
        eprintln!("SKIPPED: node unavailable here; the JIT perf map test skips");
    }
    ok
}

/// The faults of folded lines whose function frame (the one before the
/// target frame) contains `name`.
fn folded_faults(folded: &str, name: &str) -> u64 {
    folded
        .lines()
        .filter_map(|line| {
            let (stack, count) = line.rsplit_once(' ')?;
            let frames: Vec<&str> = stack.split(';').collect();
            let function = frames.get(frames.len().checked_sub(2)?)?;
            function.contains(name).then(|| count.parse::<u64>().ok())?
        })
        .sum()
}

/// The faults an SVG's frame titles give `name` (`NAME (399 faults, ...)`),
/// summed over its frames.
fn svg_faults(svg: &str, name: &str) -> u64 {
    svg.split("<title>")
        .skip(1)
        .filter_map(|rest| {
            let title = rest.split("</title>").next()?;
            let (function, numbers) = title.rsplit_once(" (")?;
            function.contains(name).then_some(())?;
            numbers
                .split(' ')
                .next()?
                .replace(",", "")
                .parse::<u64>()
                .ok()
        })
        .sum()
}

/// The faults of profile.pb.gz's samples whose leaf function contains `name`.
fn pprof_faults(path: &std::path::Path, name: &str) -> u64 {
    let profile = pfprof::output::pprof::decode(&std::fs::read(path).unwrap()).unwrap();
    let string = |i: i64| profile.string_table[i as usize].as_str();
    profile
        .sample
        .iter()
        .filter(|s| {
            let Some(&leaf) = s.location_id.first() else {
                return false;
            };
            let location = &profile.location[leaf as usize - 1];
            location.line.iter().any(|line| {
                let function = &profile.function[line.function_id as usize - 1];
                string(function.name).contains(name)
            })
        })
        .map(|s| s.value[0] as u64)
        .sum()
}

/// `record -- node --perf-basic-prof jit_touch.js`: at least 90% of
/// touchPagesInJs's 400 faults are named after it (V8's perf map line
/// `JS:*touchPagesInJs .../jit_touch.js:11:24`) in report.json, the folded
/// stacks, the flame graph and pprof; the map is kept in the recording,
/// and `report` names them from it with `/tmp`'s copy gone.
#[test]
fn jit_frames_are_named_from_perf_maps() {
    if !can_record() || !have_node() {
        return;
    }
    let dir = temp_dir("symnames_jit");
    let out_dir = dir.join("out");
    let script = crate::util::fixtures().join("jit_touch.js");
    // node may write V8 logs (isolate-*.log) into its working directory.
    let out = run(pfprof()
        .current_dir(&dir)
        .args(["record", "-q", "--stream=site", "-o"])
        .arg(&out_dir)
        .args(["--", "node", "--perf-basic-prof", "--allow-natives-syntax"])
        .arg(&script));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let name = "touchPagesInJs";
    let at_least = JS_PAGES * 9 / 10;
    let report = read_report(&out_dir.join("report.json"));
    let named = sites(&report, |s| s["function"].as_str().unwrap().contains(name));
    let in_json = crate::util::total(&named);
    // The live stream names them too, from the map node writes as it runs.
    let stream = String::from_utf8_lossy(&out.stdout);
    let streamed = stream
        .lines()
        .filter(|l| l.contains(" JS:") && l.contains(name))
        .count() as u64;
    assert_eq!(streamed, in_json, "stream lines naming {name}");
    assert!(
        (at_least..=JS_PAGES).contains(&in_json),
        "{in_json} faults named {name}:\n{}",
        show(&named)
    );
    assert!(named
        .iter()
        .all(|s| s["function"].as_str().unwrap().starts_with("JS:")));

    let folded = std::fs::read_to_string(out_dir.join("all.folded")).unwrap();
    assert_eq!(folded_faults(&folded, name), in_json, "all.folded");
    let svg = std::fs::read_to_string(out_dir.join("all.svg")).unwrap();
    assert_eq!(svg_faults(&svg, name), in_json, "all.svg");
    assert_eq!(
        pprof_faults(&out_dir.join("profile.pb.gz"), name),
        in_json,
        "profile.pb.gz"
    );

    // The map is kept with the recording; `report` needs nothing in /tmp.
    let kept: Vec<String> = std::fs::read_dir(&out_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("perf-") && n.ends_with(".map"))
        .collect();
    assert_eq!(kept.len(), 1, "{kept:?}");
    let _ = std::fs::remove_file(std::path::Path::new("/tmp").join(&kept[0]));
    let again = run(pfprof()
        .args(["report", "--format", "json", "-i"])
        .arg(&out_dir));
    assert!(again.status.success());
    let again = crate::util::parse_report(&again.stdout);
    let named_again = sites(&again, |s| s["function"].as_str().unwrap().contains(name));
    assert_eq!(crate::util::total(&named_again), in_json);
}

/// `record -a --interval 1`: node started while it runs has its JIT frames
/// named in the intervals, from `/tmp/perf-PID.map` read again at each
/// interval's end (`pfprof top` shares that path).
#[test]
fn jit_frames_are_named_in_intervals() {
    if !can_record() || !have_node() {
        return;
    }
    let dir = temp_dir("symnames_jit_intervals");
    let out_dir = dir.join("out");
    // Not while the 1 GiB touch test floods every CPU.
    let _alone = crate::util::exclusive();
    let recorder = crate::live::start_pfprof(&[
        "-q",
        "-a",
        "--interval",
        "1",
        "--duration",
        "5",
        "-o",
        out_dir.to_str().unwrap(),
    ]);
    let script = crate::util::fixtures().join("jit_touch.js");
    let node = Command::new("node")
        .current_dir(&dir)
        .args(["--perf-basic-prof", "--allow-natives-syntax"])
        .arg(&script)
        .spawn()
        .unwrap();
    let node_pid = node.id();
    let node_ok = node.wait_with_output().unwrap().status.success();
    let recorded = recorder.wait_with_output().unwrap().status;
    let _ = std::fs::remove_file(format!("/tmp/perf-{node_pid}.map"));
    assert!(node_ok);
    assert_eq!(recorded.code(), Some(0));
    let name = "touchPagesInJs";
    let reports: Vec<_> = std::fs::read_dir(&out_dir)
        .unwrap()
        .map(|entry| read_report(&entry.unwrap().path().join("report.json")))
        .collect();
    let all: Vec<_> = reports
        .iter()
        .flat_map(|report| sites(report, |s| s["function"].as_str().unwrap().contains(name)))
        .collect();
    assert!(all
        .iter()
        .all(|s| s["function"].as_str().unwrap().starts_with("JS:")));
    let named = crate::util::total(&all);
    assert!(
        (JS_PAGES * 9 / 10..=JS_PAGES).contains(&named),
        "{named} faults named {name} in the intervals:\n{}",
        show(&all)
    );
}

/// `fixtures/memfd_jit.c`: code in a memfd (`/memfd:pfprof-jit (deleted)`)
/// is JIT code, as the unwinder takes it: its frame is named from the
/// process's perf map (`memfd_jit_code`), never `memfd:…+0x5`, and no
/// module problem or warning says the memfd's "file" is missing (its path
/// names no file to open). Its own page's instruction fetch is a fault in
/// the memfd, at `memfd_jit_code`. With dwarf and frame-pointer stacks;
/// the dwarf unwinder steps through the memfd's first page though the
/// mapping's second page was made read-only.
#[test]
fn memfd_code_is_named_from_the_perf_map() {
    if !can_record() {
        return;
    }
    let dir = temp_dir("symnames_memfd");
    let exe = compile_c(&dir, "memfd_jit.c", &[]);
    for mode in ["dwarf", "fp"] {
        let mode_dir = dir.join(mode);
        std::fs::create_dir_all(&mode_dir).unwrap();
        let (out, report) = record_with(&mode_dir, &["--call-graph", mode], &exe, &[]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let out_dir = mode_dir.join("out");
        let pid = &report["processes"][0]["pid"];
        let map = format!("perf-{pid}.map");
        let _ = std::fs::remove_file(std::path::Path::new("/tmp").join(&map));
        // The map is kept with the recording (the process has JIT frames).
        assert!(out_dir.join(&map).is_file(), "{mode}: no {map} kept");
        let touches = sites(&report, |s| s["function"] == "touch_from_memfd");
        assert_eq!(
            crate::util::total(&touches),
            16,
            "{mode}: {}",
            show(&touches)
        );
        // touch_from_memfd sets up no frame (a leaf, at -O1), so the
        // kernel's frame-pointer walk skips its caller: dwarf only.
        for s in touches.iter().filter(|_| mode == "dwarf") {
            let stack: Vec<&str> = s["stack"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| f.as_str().unwrap())
                .collect();
            let main = stack.iter().position(|f| *f == "main").expect("main");
            assert_eq!(
                stack[main + 1..],
                ["memfd_jit_code", "touch_from_memfd"],
                "{mode}: {stack:?}"
            );
        }
        let fetch = sites(&report, |s| {
            s["target"]["object"]
                .as_str()
                .unwrap()
                .starts_with("/memfd:pfprof-jit")
        });
        assert_eq!(fetch.len(), 1, "{mode}: {}", show(&fetch));
        assert_eq!(fetch[0]["function"], "memfd_jit_code", "{mode}");
        assert_eq!(fetch[0]["access"], "exec", "{mode}");

        let memfd = report["modules"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["path"].as_str().unwrap().starts_with("/memfd:"))
            .expect("the memfd's module");
        assert!(memfd["problem"].is_null(), "{mode}: {memfd}");
        let warnings = report["warnings"].to_string();
        assert!(!warnings.contains("memfd"), "{mode}: {warnings}");
    }
}
