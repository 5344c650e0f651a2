//! Measures code symbolization backends on one ELF file.
//!
//! ```text
//! cargo run --release -p pfprof-symbolize --features compare-blazesym \
//!     --example compare_backends -- BACKEND FILE [DEBUG_FILE] [COUNT]
//! ```
//!
//! BACKEND is one of:
//! - `blazesym`: `blazesym::symbolize::Symbolizer` with `Source::Elf`,
//!   code info and inlined functions on, addresses as virtual offsets;
//! - `addr2line`: a raw `addr2line::Context` over `object` + `gimli`
//!   (DWARF read from DEBUG_FILE if given, else FILE);
//! - `pfprof`: this crate's [`pfprof_symbolize::Symbolizer::code`] (file
//!   offsets, separate debug info found by itself).
//!
//! COUNT (default 10000) addresses are drawn with a fixed seed from inside
//! the function symbols (STT_FUNC with a size) of DEBUG_FILE or FILE, so that
//! every backend sees the same addresses. Each backend runs in its own
//! process so that the peak RSS (VmHWM) is its own. Results are compared with
//! `addr2line -f -i -C -e` (binutils) on the same addresses: the innermost
//! function, the outermost function and the innermost file:line.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use object::{Object, ObjectSection, ObjectSymbol};

/// One symbolized address, reduced to what all backends can report.
#[derive(Clone, Debug, Default, PartialEq)]
struct Answer {
    /// Function names, innermost first.
    functions: Vec<String>,
    /// Innermost file basename and line.
    location: Option<(String, u32)>,
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: compare_backends blazesym|addr2line|pfprof FILE [DEBUG_FILE] [COUNT]");
        std::process::exit(2);
    }
    let backend = args[1].as_str();
    let path = PathBuf::from(&args[2]);
    let debug_path = args
        .get(3)
        .filter(|s| !s.is_empty() && *s != "-")
        .map(PathBuf::from);
    let count: usize = args.get(4).and_then(|s| s.parse().ok()).unwrap_or(10_000);

    let svmas = pick_addresses(debug_path.as_deref().unwrap_or(&path), count);
    let rss_before = vm_hwm_kib();
    let start = Instant::now();
    let answers = match backend {
        "blazesym" => run_blazesym(&path, &svmas),
        "addr2line" => run_addr2line(debug_path.as_deref().unwrap_or(&path), &svmas),
        "pfprof" => run_pfprof(&path, &svmas),
        other => {
            eprintln!("unknown backend {other}");
            std::process::exit(2);
        }
    };
    let elapsed = start.elapsed();
    let rss_after = vm_hwm_kib();
    let reference = run_binutils(debug_path.as_deref().unwrap_or(&path), &svmas);

    let (mut same_inner, mut same_outer, mut same_depth, mut same_line) = (0, 0, 0, 0);
    let mut shown = 0;
    for ((svma, got), want) in svmas.iter().zip(&answers).zip(&reference) {
        let inner = got.functions.first() == want.functions.first();
        same_inner += usize::from(inner);
        same_outer += usize::from(got.functions.last() == want.functions.last());
        same_depth += usize::from(got.functions.len() == want.functions.len());
        let line = got.location == want.location;
        same_line += usize::from(line);
        if (!inner || !line) && shown < 5 && std::env::var_os("SHOW_DIFF").is_some() {
            shown += 1;
            eprintln!("{svma:#x}\n  got  {got:?}\n  want {want:?}");
        }
    }
    let n = svmas.len().max(1) as f64;
    let pct = |x: usize| 100.0 * x as f64 / n;
    println!(
        "{backend}: {} addrs in {:.1} ms, VmHWM {} MiB (before {} MiB); vs binutils: innermost fn {:.1}%, outer fn {:.1}%, depth {:.1}%, file:line {:.1}%",
        svmas.len(),
        elapsed.as_secs_f64() * 1e3,
        rss_after / 1024,
        rss_before / 1024,
        pct(same_inner),
        pct(same_outer),
        pct(same_depth),
        pct(same_line),
    );
}

/// Peak resident set size of this process in KiB.
fn vm_hwm_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

/// Draws `count` svmas inside sized function symbols, with a fixed seed.
fn pick_addresses(path: &Path, count: usize) -> Vec<u64> {
    let data = std::fs::read(path).expect("read file");
    let file = object::File::parse(&*data).expect("parse ELF");
    let mut functions: Vec<(u64, u64)> = file
        .symbols()
        .chain(file.dynamic_symbols())
        .filter(|s| s.kind() == object::SymbolKind::Text && s.size() > 0 && s.address() > 0)
        .map(|s| (s.address(), s.size()))
        .collect();
    functions.sort_unstable();
    functions.dedup();
    assert!(!functions.is_empty(), "no sized function symbols");
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        // xorshift64*
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        state.wrapping_mul(0x2545_f491_4f6c_dd1d)
    };
    (0..count)
        .map(|_| {
            let (start, size) = functions[(next() % functions.len() as u64) as usize];
            start + next() % size
        })
        .collect()
}

fn basename(path: &str) -> String {
    path.rsplit('/').next().unwrap_or(path).to_string()
}

#[cfg(feature = "compare-blazesym")]
fn run_blazesym(path: &Path, svmas: &[u64]) -> Vec<Answer> {
    use blazesym::symbolize::source::{Elf, Source};
    use blazesym::symbolize::{Input, Symbolized, Symbolizer};
    let symbolizer = Symbolizer::builder()
        .enable_code_info(true)
        .enable_inlined_fns(true)
        .enable_demangling(true)
        .build();
    let src = Source::Elf(Elf::new(path));
    let results = symbolizer
        .symbolize(&src, Input::VirtOffset(svmas))
        .expect("blazesym symbolize");
    results
        .into_iter()
        .map(|sym| match sym {
            Symbolized::Sym(sym) => {
                // blazesym: `sym` is the outer function, `inlined` lists the
                // inlined callees outermost first; the innermost location is
                // the last inlined function's code_info, else sym.code_info.
                let mut functions: Vec<String> = sym
                    .inlined
                    .iter()
                    .rev()
                    .map(|f| f.name.to_string())
                    .collect();
                functions.push(sym.name.to_string());
                let info = sym
                    .inlined
                    .last()
                    .and_then(|f| f.code_info.as_ref())
                    .or(sym.code_info.as_deref());
                let location = info
                    .and_then(|info| Some((basename(&info.file.to_string_lossy()), info.line?)));
                Answer {
                    functions,
                    location,
                }
            }
            Symbolized::Unknown(_) => Answer::default(),
        })
        .collect()
}

fn run_addr2line(path: &Path, svmas: &[u64]) -> Vec<Answer> {
    let file = std::fs::File::open(path).expect("open file");
    // SAFETY: the file is opened read-only and only read while mapped; a
    // concurrent truncation would fault, which is acceptable for a benchmark.
    let map = unsafe { memmap2::Mmap::map(&file) }.expect("mmap");
    let file = object::File::parse(&*map).expect("parse ELF");
    let endian = gimli::RunTimeEndian::Little;
    // Compressed sections are decompressed into this arena; the others are
    // borrowed from the mapping.
    let mut arena: Vec<(gimli::SectionId, std::borrow::Cow<'_, [u8]>)> = Vec::new();
    let _ = gimli::DwarfSections::load(|id| -> Result<(), gimli::Error> {
        let data = file
            .section_by_name(id.name())
            .and_then(|s| s.uncompressed_data().ok())
            .unwrap_or_default();
        arena.push((id, data));
        Ok(())
    });
    let dwarf = gimli::Dwarf::load(|id| -> Result<_, gimli::Error> {
        let data = arena
            .iter()
            .find(|(x, _)| *x == id)
            .map_or(&[][..], |(_, d)| &**d);
        Ok(gimli::EndianSlice::new(data, endian))
    })
    .expect("load dwarf");
    let ctx = addr2line::Context::from_dwarf(dwarf).expect("context");
    let symbols = file.symbol_map();
    svmas
        .iter()
        .map(|&svma| {
            let mut answer = Answer::default();
            let mut frames = ctx.find_frames(svma).skip_all_loads().expect("frames");
            while let Ok(Some(frame)) = frames.next() {
                if answer.functions.is_empty() {
                    answer.location = frame
                        .location
                        .as_ref()
                        .and_then(|l| Some((basename(l.file?), l.line?)));
                }
                let name = frame
                    .function
                    .as_ref()
                    .and_then(|f| f.raw_name().ok().map(|n| n.into_owned()));
                if let Some(name) = name {
                    answer.functions.push(demangle(&name));
                }
            }
            if answer.functions.is_empty() {
                if let Some(sym) = symbols.containing(svma) {
                    answer.functions.push(demangle(sym.name()));
                }
            }
            answer
        })
        .collect()
}

fn demangle(name: &str) -> String {
    pfprof_symbolize::demangle(name)
}

fn run_pfprof(path: &Path, svmas: &[u64]) -> Vec<Answer> {
    let mut symbolizer = pfprof_symbolize::Symbolizer::new(Default::default());
    let info = symbolizer.module_info(path, None).expect("module info");
    let file_offsets: Vec<u64> = svmas
        .iter()
        .map(|&svma| info.svma_to_file_offset(svma).expect("svma in a segment"))
        .collect();
    symbolizer
        .code(path, None, &file_offsets)
        .into_iter()
        .map(|site| match site {
            Ok(site) => Answer {
                location: site
                    .frames
                    .first()
                    .and_then(|f| Some((basename(f.file.as_deref()?), f.line?))),
                functions: site.frames.into_iter().map(|f| f.function).collect(),
            },
            Err(_) => Answer::default(),
        })
        .collect()
}

/// Runs binutils `addr2line -f -i -C -a` once over all addresses.
fn run_binutils(path: &Path, svmas: &[u64]) -> Vec<Answer> {
    let mut child = Command::new("addr2line")
        .args(["-f", "-i", "-C", "-a", "-e"])
        .arg(path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("run addr2line");
    let mut stdin = child.stdin.take().expect("stdin");
    let input: String = svmas.iter().map(|a| format!("{a:#x}\n")).collect();
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let output = child.wait_with_output().expect("addr2line output");
    writer.join().expect("join").expect("write");
    let text = String::from_utf8_lossy(&output.stdout);
    let mut answers: HashMap<u64, Answer> = HashMap::new();
    let mut current: Option<(u64, Answer)> = None;
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if let Some(hex) = line.strip_prefix("0x") {
            if let Some((svma, answer)) = current.take() {
                answers.insert(svma, answer);
            }
            current = Some((u64::from_str_radix(hex, 16).unwrap_or(0), Answer::default()));
            continue;
        }
        let location = lines.next().unwrap_or("??:0");
        if let Some((_, answer)) = current.as_mut() {
            if line != "??" {
                if answer.functions.is_empty() {
                    let (file, rest) = location.rsplit_once(':').unwrap_or((location, "0"));
                    let line_no: u32 = rest
                        .split_whitespace()
                        .next()
                        .and_then(|s| s.parse().ok())
                        .unwrap_or(0);
                    if file != "??" && line_no != 0 {
                        answer.location = Some((basename(file), line_no));
                    }
                }
                answer.functions.push(line.to_string());
            }
        }
    }
    if let Some((svma, answer)) = current.take() {
        answers.insert(svma, answer);
    }
    svmas
        .iter()
        .map(|a| answers.get(a).cloned().unwrap_or_default())
        .collect()
}
