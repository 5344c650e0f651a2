//! C++ names against `c++filt` (binutils): every `_Z` symbol of the C++
//! programs this machine has (gdb, cc1, cc1plus, libstdc++) demangles to
//! exactly what c++filt prints.

use std::collections::BTreeSet;
use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};

/// The defined `_Z` symbols of `path`, dynamic and static, without
/// versions.
fn mangled_symbols(path: &Path) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for dynamic in [true, false] {
        let mut nm = Command::new("nm");
        if dynamic {
            nm.arg("-D");
        }
        let out = nm.arg("--defined-only").arg(path).output().expect("nm");
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            if let Some(name) = line.split_whitespace().nth(2) {
                let name = name.split('@').next().unwrap_or(name);
                if name.starts_with("_Z") {
                    names.insert(name.to_string());
                }
            }
        }
    }
    names
}

fn cxxfilt(names: &[&String]) -> Vec<String> {
    let mut child = Command::new("c++filt")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("c++filt");
    let mut input = String::new();
    for name in names {
        input.push_str(name);
        input.push('\n');
    }
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child.wait_with_output().expect("c++filt output");
    writer.join().unwrap().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn cxx_names_match_cxxfilt() {
    let candidates = [
        "/usr/bin/gdb",
        "/usr/lib/gcc/x86_64-linux-gnu/12/cc1",
        "/usr/lib/gcc/x86_64-linux-gnu/12/cc1plus",
        "/usr/lib/x86_64-linux-gnu/libstdc++.so.6",
    ];
    let mut checked = 0;
    for path in candidates.iter().map(Path::new).filter(|p| p.exists()) {
        let names = mangled_symbols(path);
        let names: Vec<&String> = names.iter().collect();
        let want = cxxfilt(&names);
        assert_eq!(want.len(), names.len(), "{}", path.display());
        let wrong: Vec<String> = names
            .iter()
            .zip(&want)
            .filter(|(name, want)| pfprof_symbolize::demangle(name) != **want)
            .map(|(name, want)| {
                format!(
                    "{name}\n  c++filt: {want}\n  pfprof:  {}",
                    pfprof_symbolize::demangle(name)
                )
            })
            .collect();
        assert!(
            wrong.is_empty(),
            "{}: {} of {} names differ from c++filt:\n{}",
            path.display(),
            wrong.len(),
            names.len(),
            wrong[..wrong.len().min(10)].join("\n")
        );
        checked += names.len();
    }
    // gcc is installed wherever the tests run (they compile fixtures).
    assert!(checked > 10_000, "only {checked} names checked");
}
