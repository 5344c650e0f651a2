//! Prints what the crate says about file offsets of one ELF file.
//!
//! ```text
//! cargo run -p pfprof-symbolize --example symbolize_file -- FILE code|data|bench OFFSET...
//! ```
//! Offsets are hexadecimal (with or without `0x`). `bench` times the code
//! lookups: every other offset cold (the DWARF loaded on the way), then
//! their neighbours warm, and prints addresses per second.

use std::path::PathBuf;

use pfprof_symbolize::{Options, Symbolizer};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 2 {
        eprintln!("usage: symbolize_file FILE code|data|info [HEX_OFFSET...]");
        std::process::exit(2);
    }
    let path = PathBuf::from(&args[0]);
    let offsets: Vec<u64> = args[2..]
        .iter()
        .filter_map(|s| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok())
        .collect();
    let mut symbolizer = Symbolizer::new(Options::default());
    match args[1].as_str() {
        "code" => {
            for (offset, site) in offsets.iter().zip(symbolizer.code(&path, None, &offsets)) {
                match site {
                    Ok(site) => {
                        println!("{offset:#x} (svma {:#x})", site.svma);
                        for frame in site.frames {
                            println!(
                                "  {}{} at {}:{}",
                                if frame.inlined { "[inlined] " } else { "" },
                                frame.function,
                                frame.file.as_deref().unwrap_or("??"),
                                frame.line.unwrap_or(0)
                            );
                        }
                    }
                    Err(reason) => println!("{offset:#x}: {reason}"),
                }
            }
        }
        "bench" => {
            // Warm: the neighbours of the cold ones, in the same units.
            let cold: Vec<u64> = offsets.iter().step_by(2).copied().collect();
            let warm: Vec<u64> = offsets.iter().skip(1).step_by(2).copied().collect();
            for (name, part) in [("cold", &cold), ("warm", &warm)] {
                let start = std::time::Instant::now();
                let named = symbolizer.code(&path, None, part);
                let took = start.elapsed().as_secs_f64();
                let frames: usize = named.iter().flatten().map(|s| s.frames.len()).sum();
                println!(
                    "{name}: {} addresses in {:.1} ms, {:.0} per second ({frames} frames)",
                    part.len(),
                    took * 1e3,
                    part.len() as f64 / took
                );
            }
        }
        "data" => {
            for (offset, target) in offsets.iter().zip(symbolizer.data(&path, None, &offsets)) {
                match target {
                    Ok(t) => println!(
                        "{offset:#x} (svma {:#x}) {} {}+{:#x}",
                        t.svma,
                        t.section.as_deref().unwrap_or("?"),
                        t.symbol.as_deref().unwrap_or("?"),
                        t.symbol_offset
                    ),
                    Err(reason) => println!("{offset:#x}: {reason}"),
                }
            }
        }
        _ => match symbolizer.module_info(&path, None) {
            Ok(info) => println!("{info:#?}"),
            Err(reason) => println!("{reason}"),
        },
    }
}
