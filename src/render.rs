//! Writes the outputs: folded stacks (`<class>.folded`, `all.folded`), SVG
//! flame graphs through inferno (one colour scheme per class; in `all`, the
//! class is the root frame), `report.txt` and `report.json`.

use std::io::{self, Write};

use inferno::flamegraph::color::{BasicPalette, Palette};
use inferno::flamegraph::{self, Options};

use crate::classify::FaultClass;
use crate::outdir::OutDir;
use crate::report::display_safe;
use crate::resolve::{Folded, Resolved};

/// Which flame graphs to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ClassSelection {
    /// Minor faults.
    Minor,
    /// Major faults.
    Major,
    /// Copy-on-write faults.
    Cow,
    /// All classes, class as the root frame.
    All,
}

fn palette(selection: ClassSelection) -> Palette {
    Palette::Basic(match selection {
        ClassSelection::Minor => BasicPalette::Aqua,
        ClassSelection::Major => BasicPalette::Red,
        ClassSelection::Cow => BasicPalette::Orange,
        ClassSelection::All => BasicPalette::Hot,
    })
}

fn name(selection: ClassSelection) -> &'static str {
    match selection {
        ClassSelection::Minor => "minor",
        ClassSelection::Major => "major",
        ClassSelection::Cow => "cow",
        ClassSelection::All => "all",
    }
}

/// The folded lines of one selection, sorted (as inferno expects for speed).
pub fn folded_lines(folded: &[Folded; 3], selection: ClassSelection) -> Vec<String> {
    let one = |class: FaultClass, prefix: &str| -> Vec<String> {
        folded[class as usize]
            .iter()
            .map(|(stack, n)| format!("{prefix}{stack} {n}"))
            .collect()
    };
    match selection {
        ClassSelection::Minor => one(FaultClass::Minor, ""),
        ClassSelection::Major => one(FaultClass::Major, ""),
        ClassSelection::Cow => one(FaultClass::Cow, ""),
        ClassSelection::All => {
            let mut lines: Vec<String> = FaultClass::ALL
                .iter()
                .flat_map(|c| one(*c, &format!("{};", c.name())))
                .collect();
            lines.sort();
            lines
        }
    }
}

/// Text for an SVG: visible escapes for control characters (which XML 1.0
/// forbids), then XML's own escaping.
pub fn xml_text(s: &str) -> String {
    display_safe(s)
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn empty_svg(title: &str, subtitle: &str) -> String {
    format!(
        "<?xml version=\"1.0\" standalone=\"no\"?>\n<svg version=\"1.1\" width=\"1200\" height=\"140\" \
         xmlns=\"http://www.w3.org/2000/svg\"><rect width=\"100%\" height=\"100%\" fill=\"#eeeeee\"/>\
         <text x=\"600\" y=\"40\" text-anchor=\"middle\" font-family=\"Verdana\" font-size=\"17\">{}</text>\
         <text x=\"600\" y=\"66\" text-anchor=\"middle\" font-family=\"Verdana\" font-size=\"12\">{}</text>\
         <text x=\"600\" y=\"100\" text-anchor=\"middle\" font-family=\"Verdana\" font-size=\"14\">no faults</text></svg>\n",
        xml_text(title),
        xml_text(subtitle)
    )
}

/// A flame graph as written: `<name>.svg` and its text, for the outputs
/// that embed it (index.html).
#[derive(Debug, Clone)]
pub struct Svg {
    /// File name without `.svg`: `all`, `minor`, `startup`, `cow-latency`.
    pub name: String,
    /// The SVG document.
    pub text: String,
    /// Whether it has no faults (a placeholder saying so).
    pub empty: bool,
}

/// Writes `<base>.folded` and `<base>.svg` from folded lines.
fn write_folded_and_svg(
    dir: &OutDir,
    base: &str,
    lines: &[String],
    title: String,
    subtitle: &str,
    colors: Palette,
) -> io::Result<Svg> {
    write_folded_and_svg_counting(dir, base, lines, title, subtitle, colors, "faults")
}

fn write_folded_and_svg_counting(
    dir: &OutDir,
    base: &str,
    lines: &[String],
    title: String,
    subtitle: &str,
    colors: Palette,
    count_name: &str,
) -> io::Result<Svg> {
    dir.write_with(&format!("{base}.folded"), |out| {
        for line in lines {
            writeln!(out, "{line}")?;
        }
        Ok(())
    })?;
    let svg_name = format!("{base}.svg");
    let svg = |text: String| Svg {
        name: base.to_string(),
        text,
        empty: lines.is_empty(),
    };
    if lines.is_empty() {
        let text = empty_svg(&title, subtitle);
        dir.write(&svg_name, text.as_bytes())?;
        return Ok(svg(text));
    }
    let mut options = Options::default();
    // inferno escapes <>&" itself; control characters it passes through.
    options.title = display_safe(&title).into_owned();
    options.subtitle = Some(display_safe(subtitle).into_owned());
    options.count_name = count_name.into();
    options.colors = colors;
    options.hash = true;
    options.deterministic = true;
    let mut text = Vec::new();
    flamegraph::from_lines(&mut options, lines.iter().map(String::as_str), &mut text)?;
    dir.write(&svg_name, &text)?;
    // inferno writes UTF-8 (names came in as &str).
    Ok(svg(String::from_utf8_lossy(&text).into_owned()))
}

/// Writes `<name>.folded` and `<name>.svg` for one selection.
pub fn write_flamegraph(
    dir: &OutDir,
    folded: &[Folded; 3],
    selection: ClassSelection,
    command: &str,
    subtitle: &str,
) -> io::Result<Svg> {
    let base = name(selection);
    let title = match selection {
        ClassSelection::All => format!("Page faults (all classes): {command}"),
        _ => format!("{} page faults: {command}", base.to_uppercase()),
    };
    write_folded_and_svg(
        dir,
        base,
        &folded_lines(folded, selection),
        title,
        subtitle,
        palette(selection),
    )
}

/// Writes `startup.folded` and `startup.svg`: the faults from exec to `main`,
/// class as the root frame.
pub fn write_startup(
    dir: &OutDir,
    startup: &Folded,
    command: &str,
    subtitle: &str,
) -> io::Result<Svg> {
    let lines: Vec<String> = startup
        .iter()
        .map(|(stack, n)| format!("{stack} {n}"))
        .collect();
    let title = format!("Start-up page faults (exec to main): {command}");
    write_folded_and_svg(
        dir,
        "startup",
        &lines,
        title,
        subtitle,
        palette(ClassSelection::All),
    )
}

/// Writes `<class>-latency.folded` and `.svg`: stacks weighted by the time
/// their faults spent in the kernel, so a user sees where time goes.
pub fn write_latency(
    dir: &OutDir,
    folded_latency: &[Folded; 3],
    command: &str,
    subtitle: &str,
) -> io::Result<Vec<Svg>> {
    let mut svgs = Vec::new();
    for class in FaultClass::ALL {
        let lines: Vec<String> = folded_latency[class as usize]
            .iter()
            .map(|(stack, ns)| format!("{stack} {ns}"))
            .collect();
        let base = format!("{}-latency", class.name());
        let title = format!(
            "{} page-fault latency (ns in the kernel): {command}",
            class.name().to_uppercase()
        );
        let selection = match class {
            FaultClass::Minor => ClassSelection::Minor,
            FaultClass::Major => ClassSelection::Major,
            FaultClass::Cow => ClassSelection::Cow,
        };
        svgs.push(write_folded_and_svg_counting(
            dir,
            &base,
            &lines,
            title,
            subtitle,
            palette(selection),
            "ns",
        )?);
    }
    Ok(svgs)
}

/// Writes `diff.folded` and `diff.svg`, a differential flame graph of two
/// runs' folded stacks (red: more faults in the second run, blue: fewer).
pub fn write_diff(
    dir: &OutDir,
    before: &[String],
    after: &[String],
    title: String,
    subtitle: &str,
) -> io::Result<Svg> {
    let mut diff = Vec::new();
    inferno::differential::from_readers(
        inferno::differential::Options::default(),
        before.join("\n").as_bytes(),
        after.join("\n").as_bytes(),
        &mut diff,
    )?;
    let text = String::from_utf8_lossy(&diff);
    let lines: Vec<String> = text.lines().map(str::to_string).collect();
    write_folded_and_svg(
        dir,
        "diff",
        &lines,
        title,
        subtitle,
        palette(ClassSelection::All),
    )
}

/// Writes every output of a recording directory.
pub fn write_all(dir: &OutDir, resolved: &Resolved, top: usize) -> io::Result<()> {
    let report = &resolved.report;
    let command = report.command_line();
    let subtitle = report.subtitle();
    let mut svgs = Vec::new();
    for selection in [
        ClassSelection::Minor,
        ClassSelection::Major,
        ClassSelection::Cow,
        ClassSelection::All,
    ] {
        svgs.push(write_flamegraph(
            dir,
            &resolved.folded,
            selection,
            &command,
            &subtitle,
        )?);
    }
    svgs.push(write_startup(
        dir,
        &resolved.startup_folded,
        &command,
        &subtitle,
    )?);
    svgs.extend(write_latency(
        dir,
        &resolved.folded_latency,
        &command,
        &subtitle,
    )?);
    dir.write("timeline.svg", resolved.timeline_svg.as_bytes())?;
    dir.write("report.txt", report.to_text(top).as_bytes())?;
    let json = serde_json::to_vec_pretty(report).map_err(io::Error::other)?;
    dir.write("report.json", &json)?;
    crate::html::write(dir, report, &svgs, Some(&resolved.timeline_svg), top)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folded() -> [Folded; 3] {
        let mut f: [Folded; 3] = Default::default();
        f[FaultClass::Minor as usize].insert("app;main;touch_pages;[anon]".into(), 262_144);
        f[FaultClass::Minor as usize]
            .insert("app;_dl_start;_dl_map_object;[libc.so.6 .text]".into(), 9);
        f[FaultClass::Cow as usize].insert(
            "app;_dl_start;_dl_relocate_object;[libx.so .data.rel.ro table]".into(),
            16,
        );
        f
    }

    /// `all` has the class as the root frame; lines are sorted; classes
    /// without faults yield nothing.
    #[test]
    fn folded_selection() {
        let f = folded();
        assert_eq!(
            folded_lines(&f, ClassSelection::All),
            [
                "cow;app;_dl_start;_dl_relocate_object;[libx.so .data.rel.ro table] 16",
                "minor;app;_dl_start;_dl_map_object;[libc.so.6 .text] 9",
                "minor;app;main;touch_pages;[anon] 262144",
            ]
        );
        assert_eq!(folded_lines(&f, ClassSelection::Minor).len(), 2);
        assert!(folded_lines(&f, ClassSelection::Major).is_empty());
    }

    /// The SVGs are deterministic: compared with tests/golden (PFPROF_BLESS=1 rewrites).
    #[test]
    fn golden_svgs() {
        let dir = std::env::temp_dir().join(format!("pfprof-render-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let out = OutDir::open_or_create(&dir).unwrap();
        for selection in [ClassSelection::All, ClassSelection::Major] {
            write_flamegraph(
                &out,
                &folded(),
                selection,
                "./app",
                "262,822 faults: captured 262,822 (100.0%), lost 0 records",
            )
            .unwrap();
            let name = format!("{}.svg", name(selection));
            let actual = std::fs::read_to_string(dir.join(&name)).unwrap();
            let golden = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/golden")
                .join(&name);
            if std::env::var_os("PFPROF_BLESS").is_some() {
                std::fs::write(&golden, &actual).unwrap();
                continue;
            }
            let expected = std::fs::read_to_string(&golden).unwrap_or_default();
            assert!(
                actual == expected,
                "{} differs from the golden file; PFPROF_BLESS=1 updates it",
                golden.display()
            );
        }
        assert!(std::fs::read_to_string(dir.join("major.svg"))
            .unwrap()
            .contains("no faults"));
        assert!(std::fs::read_to_string(dir.join("all.svg"))
            .unwrap()
            .contains("touch_pages"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
