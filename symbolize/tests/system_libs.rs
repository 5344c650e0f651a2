//! Separate debug info of system libraries (Debian's `libc6-dbg`), found
//! through `/usr/lib/debug/.build-id/`. Skipped, with a message, when the
//! package is not installed (`apt-get install libc6-dbg`).

use std::path::{Path, PathBuf};
use std::process::Command;

use pfprof_symbolize::{read_build_id, Options, Symbolizer};

fn debug_file_of(path: &Path) -> Option<PathBuf> {
    let id = read_build_id(path)?;
    let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
    let debug = PathBuf::from(format!(
        "/usr/lib/debug/.build-id/{}/{}.debug",
        &hex[..2],
        &hex[2..]
    ));
    debug.exists().then_some(debug)
}

/// svma of `name` from `nm` on the debug file.
fn nm_svma(debug: &Path, name: &str) -> u64 {
    let out = Command::new("nm").arg(debug).output().expect("nm");
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() == 3 && f[2] == name).then(|| u64::from_str_radix(f[0], 16).unwrap())
        })
        .unwrap_or_else(|| panic!("{name} not in {}", debug.display()))
}

#[test]
fn libc6_dbg_names_stripped_system_libraries() {
    let cases = [
        ("/lib64/ld-linux-x86-64.so.2", "_dl_relocate_object"),
        (
            "/usr/lib/x86_64-linux-gnu/libc.so.6",
            "__memset_avx2_unaligned_erms",
        ),
        (
            "/usr/lib/x86_64-linux-gnu/libc.so.6",
            "__memset_sse2_unaligned",
        ),
    ];
    // Not the user's build-id cache, which may hold a plain copy of the
    // debug file (`record` keeps one) that would be read instead.
    let options = Options {
        build_id_caches: Vec::new(),
        ..Options::default()
    };
    let mut symbolizer = Symbolizer::new(options);
    for (path, function) in cases {
        let path = Path::new(path);
        let Some(debug) = debug_file_of(path) else {
            eprintln!("skipped: no libc6-dbg debug file for {}", path.display());
            continue;
        };
        let svma = nm_svma(&debug, function) + 4;
        let info = symbolizer.module_info(path, None).unwrap().clone();
        assert_eq!(info.debug_file.as_deref(), Some(debug.as_path()));
        assert!(info.has_dwarf);
        let file_offset = info.svma_to_file_offset(svma).unwrap();
        let site = symbolizer
            .code(path, None, &[file_offset])
            .pop()
            .unwrap()
            .unwrap();
        assert_eq!(site.svma, svma);
        let outer = site.frames.last().unwrap();
        assert_eq!(outer.function, function, "{}", path.display());
        assert!(outer.line.is_some() && outer.file.is_some(), "{outer:?}");
    }
}
