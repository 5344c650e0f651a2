//! Names of code that has no symbol of its own: PLT entries (`getppid@plt`,
//! as objdump and perf name them), vDSO functions by their exported name
//! (`__vdso_time`, not its weak alias `time`) in the report and in the
//! live stream alike.

use crate::util::{
    can_record, compile_c, fault_line, pfprof, read_report, run, show, sites, temp_dir,
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
