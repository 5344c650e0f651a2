//! Folded stacks (`<class>.folded`, `all.folded`) and SVG flame graphs
//! through inferno (one colour scheme per class; in `all`, the class is the
//! root frame).

use std::io::{self, Write};

use inferno::flamegraph::color::{BackgroundColor, BasicPalette, Palette, PaletteMap};
use inferno::flamegraph::{self, Options};

use crate::analysis::classify::FaultClass;
use crate::format::outdir::{self, OutDir};
use crate::model::Model;
use crate::output::folded::{ClassLines, Folded, FoldedStacks, Special};
use crate::output::picture;
use crate::text::{display_safe, thousands};

/// Which flame graphs to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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

fn palette_of(class: FaultClass) -> Palette {
    palette(match class {
        FaultClass::Minor => ClassSelection::Minor,
        FaultClass::Major => ClassSelection::Major,
        FaultClass::Cow => ClassSelection::Cow,
    })
}

impl ClassSelection {
    /// Every selection: each class's graph, then all of them in one.
    pub const ALL: [ClassSelection; 4] = [
        ClassSelection::Minor,
        ClassSelection::Major,
        ClassSelection::Cow,
        ClassSelection::All,
    ];

    /// Its flame graph.
    pub fn graph(self) -> Graph {
        match self {
            ClassSelection::Minor => Graph::Class(FaultClass::Minor),
            ClassSelection::Major => Graph::Class(FaultClass::Major),
            ClassSelection::Cow => Graph::Class(FaultClass::Cow),
            ClassSelection::All => Graph::All,
        }
    }
}

/// A flame graph pfprof draws, written as `<file_stem>.svg` and
/// `<file_stem>.folded`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Graph {
    /// Every class, the class as the root frame.
    All,
    /// One class.
    Class(FaultClass),
    /// The start-up windows' faults, the class as the root frame.
    Startup,
    /// One class's stacks weighted by their time in the kernel.
    Latency(FaultClass),
    /// KiB resident at the peak, by the stack that made them present.
    Resident,
    /// KiB still resident at each process's exit.
    ResidentExit,
}

impl Graph {
    /// Its files' name without the extension: `all`, `minor`, `startup`,
    /// `cow-latency` (named in [`outdir::graph`]).
    pub fn file_stem(self) -> &'static str {
        match self {
            Graph::All => outdir::graph::ALL,
            Graph::Class(FaultClass::Minor) => outdir::graph::MINOR,
            Graph::Class(FaultClass::Major) => outdir::graph::MAJOR,
            Graph::Class(FaultClass::Cow) => outdir::graph::COW,
            Graph::Startup => outdir::graph::STARTUP,
            Graph::Latency(FaultClass::Minor) => outdir::graph::MINOR_LATENCY,
            Graph::Latency(FaultClass::Major) => outdir::graph::MAJOR_LATENCY,
            Graph::Latency(FaultClass::Cow) => outdir::graph::COW_LATENCY,
            Graph::Resident => outdir::graph::RESIDENT,
            Graph::ResidentExit => outdir::graph::RESIDENT_EXIT,
        }
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

/// A flame graph as written: which one and its text, for the outputs
/// that embed it (index.html).
#[derive(Debug, Clone)]
pub struct Svg {
    /// Which graph.
    pub graph: Graph,
    /// The SVG document.
    pub text: String,
    /// Whether it has no faults (a placeholder saying so).
    pub empty: bool,
    /// When it is another graph under another title (a program that ends
    /// at its peak holds at exit what it held there): that graph.
    pub retitled: Option<Retitled>,
}

/// A graph drawn as another one, only its title changed: the page carries
/// the other's document once and changes the title as it shows this one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retitled {
    /// The graph whose document this is.
    pub of: Graph,
    /// Its title, written once in it, with no character to escape.
    pub was: String,
    /// This graph's title in its place.
    pub title: String,
}

/// How a flame graph is drawn.
struct Look<'a> {
    colors: Palette,
    /// What the counts are (`faults`, `ns`).
    count_name: &'a str,
    /// Whether the root's children are the classes, each subtree in its
    /// class's palette.
    by_class: bool,
    /// The frames with a colour of their own.
    special: &'a Special,
    /// With `by_class`: the colours of each class's own graph, when drawn.
    class_maps: Option<&'a [PaletteMap; 3]>,
}

/// inferno's options for one of pfprof's flame graphs.
fn options<'a>(title: &str, subtitle: &str, colors: Palette, count_name: &str) -> Options<'a> {
    let mut options = Options::default();
    // inferno escapes <>&" itself; control characters it passes through.
    options.title = display_safe(title).into_owned();
    options.subtitle = Some(display_safe(subtitle).into_owned());
    options.count_name = count_name.into();
    options.colors = colors;
    options.hash = true;
    options.deterministic = true;
    options
}

/// The colours each class's own graph gives the names of `lines` (folded
/// lines whose root frame is the class): drawn once, thrown away (for
/// `startup.svg`, whose classes have no graph of their own).
fn learn_class_maps(
    lines: &[String],
    count_name: &str,
    special: &Special,
) -> io::Result<[PaletteMap; 3]> {
    let mut maps: [PaletteMap; 3] = Default::default();
    for class in FaultClass::ALL {
        let prefix = format!("{};", class.name());
        let class_lines: Vec<String> = lines
            .iter()
            .filter_map(|l| l.strip_prefix(&prefix).map(str::to_string))
            .collect();
        let map = &mut maps[class as usize];
        *map = picture::palette_map(special);
        if class_lines.is_empty() {
            continue;
        }
        let mut options = options("", "", palette_of(class), count_name);
        options.palette_map = Some(map);
        flamegraph::from_lines(
            &mut options,
            class_lines.iter().map(String::as_str),
            io::sink(),
        )?;
    }
    Ok(maps)
}

/// Writes `<base>.folded` of one selection straight from the folded stacks,
/// without the lines in memory first: the same bytes as
/// [`folded_lines`] then [`write_folded`] (with every class, each line
/// behind its class's name, the classes in name order).
pub fn write_selection(
    dir: &OutDir,
    base: &str,
    lines: &ClassLines<'_>,
    selection: ClassSelection,
) -> io::Result<()> {
    let mut classes: Vec<(FaultClass, &str)> = match selection {
        ClassSelection::Minor => vec![(FaultClass::Minor, "")],
        ClassSelection::Major => vec![(FaultClass::Major, "")],
        ClassSelection::Cow => vec![(FaultClass::Cow, "")],
        ClassSelection::All => FaultClass::ALL.iter().map(|c| (*c, c.name())).collect(),
    };
    classes.sort_by_key(|(class, _)| class.name());
    dir.write_with(&format!("{base}.folded"), |out| {
        for (class, prefix) in &classes {
            lines.write(*class, prefix, out)?;
        }
        Ok(())
    })
}

/// Writes `<base>.folded`: one stack and its count per line.
pub fn write_folded(dir: &OutDir, base: &str, lines: &[String]) -> io::Result<()> {
    dir.write_with(&format!("{base}.folded"), |out| {
        for line in lines {
            writeln!(out, "{line}")?;
        }
        Ok(())
    })
}

/// Writes `<graph>.folded` and `<graph>.svg` from folded lines; returns
/// the graph and the colours it gave each name (one class's graph: what
/// the mixed graphs colour that class's frames with).
fn write_folded_and_svg_counting(
    dir: &OutDir,
    graph: Graph,
    lines: &[String],
    title: String,
    subtitle: &str,
    look: Look<'_>,
) -> io::Result<(Svg, PaletteMap)> {
    let drawn = draw(dir, graph, lines, title, subtitle, &look)?;
    finish(dir, drawn, lines, &look)
}

/// A graph drawn and not yet written: a graph by class has its frames
/// still grey (each class's colours come after, see [`finish`]).
struct Drawn {
    graph: Graph,
    text: String,
    /// The colours it gave each name (not by class).
    map: PaletteMap,
}

/// Writes `<graph>.folded` and draws its graph (`look.class_maps` aside).
fn draw(
    dir: &OutDir,
    graph: Graph,
    lines: &[String],
    title: String,
    subtitle: &str,
    look: &Look<'_>,
) -> io::Result<Drawn> {
    write_folded(dir, graph.file_stem(), lines)?;
    let mut map = picture::palette_map(look.special);
    if lines.is_empty() {
        let text = picture::empty_svg(&title, subtitle);
        return Ok(Drawn { graph, text, map });
    }
    let mut options = options(&title, subtitle, look.colors, look.count_name);
    if look.by_class {
        options.bgcolors = Some(BackgroundColor::Grey);
    } else {
        options.palette_map = Some(&mut map);
    }
    let mut text = Vec::new();
    flamegraph::from_lines(&mut options, lines.iter().map(String::as_str), &mut text)?;
    // inferno writes UTF-8 (names came in as &str).
    let text = String::from_utf8(text).map_err(io::Error::other)?;
    Ok(Drawn { graph, text, map })
}

/// Colours a graph by class (with `look.class_maps`, the colours each
/// class's own graph gave its names: else learnt by drawing those graphs
/// unseen) and writes `<graph>.svg`.
fn finish(
    dir: &OutDir,
    drawn: Drawn,
    lines: &[String],
    look: &Look<'_>,
) -> io::Result<(Svg, PaletteMap)> {
    let Drawn {
        graph,
        mut text,
        map,
    } = drawn;
    if look.by_class && !lines.is_empty() {
        let learnt;
        let maps = match look.class_maps {
            Some(maps) => maps,
            None => {
                learnt = learn_class_maps(lines, look.count_name, look.special)?;
                &learnt
            }
        };
        text = picture::recolor_by_class(&text, maps);
    }
    dir.write(&format!("{}.svg", graph.file_stem()), text.as_bytes())?;
    let svg = Svg {
        graph,
        text,
        empty: lines.is_empty(),
        retitled: None,
    };
    Ok((svg, map))
}

/// Writes `<name>.folded` and `<name>.svg` for one selection.
pub fn write_flamegraph(
    dir: &OutDir,
    folded: &FoldedStacks,
    selection: ClassSelection,
    subtitle: &str,
) -> io::Result<Svg> {
    let selected = Selected::new(folded, selection, subtitle);
    let drawn = selected.draw(dir)?;
    finish(dir, drawn, &selected.lines, &selected.look()).map(|(svg, _)| svg)
}

/// Writes the graph of each class, then `all` coloured by class with the
/// colours the class graphs gave (each graph drawn once, `all` on a thread
/// of its own beside the classes').
pub fn write_class_graphs(
    dir: &OutDir,
    folded: &FoldedStacks,
    subtitle: &str,
) -> io::Result<Vec<Svg>> {
    let all = Selected::new(folded, ClassSelection::All, subtitle);
    std::thread::scope(|scope| {
        let drawing_all = scope.spawn(|| all.draw(dir));
        let mut maps: [PaletteMap; 3] = Default::default();
        let mut svgs = Vec::new();
        for selection in ClassSelection::ALL {
            let Graph::Class(class) = selection.graph() else {
                continue;
            };
            let selected = Selected::new(folded, selection, subtitle);
            let drawn = selected.draw(dir)?;
            let (svg, map) = finish(dir, drawn, &selected.lines, &selected.look())?;
            maps[class as usize] = map;
            svgs.push(svg);
        }
        let drawn = drawing_all
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))?;
        let look = Look {
            class_maps: Some(&maps),
            ..all.look()
        };
        let (svg, _) = finish(dir, drawn, &all.lines, &look)?;
        // In the order of ClassSelection::ALL, `all` last.
        svgs.push(svg);
        Ok(svgs)
    })
}

/// One selection's folded lines and how its graph looks.
struct Selected<'a> {
    folded: &'a FoldedStacks,
    selection: ClassSelection,
    subtitle: &'a str,
    lines: Vec<String>,
}

impl<'a> Selected<'a> {
    fn new(folded: &'a FoldedStacks, selection: ClassSelection, subtitle: &'a str) -> Self {
        let lines = folded_lines(&folded.by_class, selection);
        Selected {
            folded,
            selection,
            subtitle,
            lines,
        }
    }

    fn title(&self) -> String {
        match self.selection.graph() {
            Graph::Class(class) => format!("{} page faults", class.name().to_uppercase()),
            _ => "Page faults by class: minor, major, cow".to_string(),
        }
    }

    fn look(&self) -> Look<'a> {
        Look {
            colors: palette(self.selection),
            count_name: "faults",
            by_class: self.selection == ClassSelection::All,
            special: &self.folded.special,
            class_maps: None,
        }
    }

    fn draw(&self, dir: &OutDir) -> io::Result<Drawn> {
        let graph = self.selection.graph();
        draw(
            dir,
            graph,
            &self.lines,
            self.title(),
            self.subtitle,
            &self.look(),
        )
    }
}

/// Whose start-up `startup.svg` shows: `the program`, `every program, 3
/// windows`, or under `--startup-of` the one's, `/bin/app [pid 42]`.
pub fn startup_scope(model: &Model) -> String {
    let report = &model.report;
    match &report.startup {
        Some(s) if model.startup_of_one => format!(
            "{} [pid {}]",
            s.program.as_deref().unwrap_or("?"),
            s.pid.unwrap_or(0)
        ),
        _ => match report.startups.len() {
            1 => "the program".to_string(),
            n => format!("every program, {} windows", thousands(n as u64)),
        },
    }
}

/// Writes `startup.folded` and `startup.svg`: the faults from exec to `main`
/// of `scope` (every program's windows, or one), class as the root frame.
pub fn write_startup(
    dir: &OutDir,
    folded: &FoldedStacks,
    scope: &str,
    subtitle: &str,
) -> io::Result<Svg> {
    let lines: Vec<String> = folded
        .startup
        .iter()
        .map(|(stack, n)| crate::output::folded::counted_line(stack, *n))
        .collect();
    let title = format!("Start-up page faults (exec to main) of {scope}");
    write_folded_and_svg_counting(
        dir,
        Graph::Startup,
        &lines,
        title,
        subtitle,
        Look {
            colors: palette(ClassSelection::All),
            count_name: "faults",
            by_class: true,
            special: &folded.special,
            class_maps: None,
        },
    )
    .map(|(svg, _)| svg)
}

/// Writes `resident.folded`/`.svg` and `resident-exit.folded`/`.svg`: KiB
/// resident at the peak, and at each process's exit, by the stack whose
/// fault made them present. Nothing when the model has no ledger.
pub fn write_resident(dir: &OutDir, model: &Model, subtitle: &str) -> io::Result<Vec<Svg>> {
    let Some(resident) = &model.resident else {
        return Ok(Vec::new());
    };
    let mut svgs: Vec<Svg> = Vec::new();
    let mut peak: Option<(Vec<String>, &str)> = None;
    // Rows the same at exit as at the peak make the same lines: folded once.
    let same_rows = same_resident_rows(&resident.peak, &resident.exit);
    for (graph, rows, title) in [
        (
            Graph::Resident,
            &resident.peak,
            "Resident memory at the peak (KiB, by the fault that made it present)",
        ),
        (
            Graph::ResidentExit,
            &resident.exit,
            "Resident memory at exit (KiB still held when each process ended)",
        ),
    ] {
        // A program that ends at its peak holds at exit what it held
        // there: the same graph, retitled (drawing it is half the cost of
        // these two graphs).
        let retitled = peak
            .as_ref()
            .zip(svgs.first())
            .filter(|_| same_rows)
            .and_then(|((lines_at, title_at), svg)| {
                retitle(svg, graph, title_at, title).map(|svg| (svg, lines_at))
            });
        if let Some((svg, lines)) = retitled {
            write_folded(dir, graph.file_stem(), lines)?;
            dir.write(&format!("{}.svg", graph.file_stem()), svg.text.as_bytes())?;
            svgs.push(svg);
            continue;
        }
        let (lines, special) = resident_lines(rows, model);
        let look = Look {
            colors: Palette::Basic(BasicPalette::Mem),
            count_name: "KiB",
            by_class: false,
            special: &special,
            class_maps: None,
        };
        svgs.push(
            write_folded_and_svg_counting(dir, graph, &lines, title.into(), subtitle, look)?.0,
        );
        peak.get_or_insert((lines, title));
    }
    Ok(svgs)
}

/// Writes `resident.folded` and `resident-exit.folded` only (an
/// interval's: the peak within it, and each process's pages at its exit
/// in it or at its end), when the model has resident rows.
pub fn write_resident_folded(dir: &OutDir, model: &Model) -> io::Result<()> {
    let Some(resident) = &model.resident else {
        return Ok(());
    };
    for (graph, rows) in [
        (Graph::Resident, &resident.peak),
        (Graph::ResidentExit, &resident.exit),
    ] {
        write_folded(dir, graph.file_stem(), &resident_lines(rows, model).0)?;
    }
    Ok(())
}

/// The folded lines (`stack KiB`) of resident rows, and their special
/// frames.
fn resident_lines(rows: &[crate::model::ResidentRow], model: &Model) -> (Vec<String>, Special) {
    let (folded, special) = crate::output::folded::fold_resident(rows, model);
    (crate::output::folded::into_counted_lines(folded), special)
}

/// Whether two lists of resident rows are the same, row by row (then
/// their lines are too).
fn same_resident_rows(a: &[crate::model::ResidentRow], b: &[crate::model::ResidentRow]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(a, b)| {
            a.owner == b.owner
                && a.comm == b.comm
                && a.stack == b.stack
                && std::sync::Arc::ptr_eq(&a.target, &b.target)
                && a.kind == b.kind
                && a.pages == b.pages
        })
}

/// `svg` as graph `graph` under `title` instead of `was`, when `was` is
/// the text of its title element and comes first in it (as inferno writes
/// a title with no character to escape, before any frame): the first `was`
/// is what the page's script replaces too. Only the head is searched, not
/// the whole document (a megabyte for a real program).
fn retitle(svg: &Svg, graph: Graph, was: &str, title: &str) -> Option<Svg> {
    let plain = |t: &str| !t.contains(['&', '<', '>', '"', '\'']);
    let at = svg.text.find(was)?;
    let element = svg.text[..at].rfind('<')?;
    let is_title = svg.text[element..at].contains("id=\"title\"")
        && svg.text[at + was.len()..].starts_with("</text>");
    (plain(was) && plain(title) && is_title).then(|| Svg {
        graph,
        text: svg.text.replacen(was, title, 1),
        empty: svg.empty,
        retitled: Some(Retitled {
            of: svg.graph,
            was: was.into(),
            title: title.into(),
        }),
    })
}

/// Writes `<class>-latency.folded` and `.svg`: stacks weighted by the time
/// their faults spent in the kernel, so a user sees where time goes.
pub fn write_latency(dir: &OutDir, folded: &FoldedStacks, subtitle: &str) -> io::Result<Vec<Svg>> {
    let mut svgs = Vec::new();
    for class in FaultClass::ALL {
        let lines: Vec<String> = folded.latency[class as usize]
            .iter()
            .map(|(stack, ns)| crate::output::folded::counted_line(stack, *ns))
            .collect();
        let title = format!(
            "{} page-fault latency (ns in the kernel)",
            class.name().to_uppercase()
        );
        svgs.push(
            write_folded_and_svg_counting(
                dir,
                Graph::Latency(class),
                &lines,
                title,
                subtitle,
                Look {
                    colors: palette_of(class),
                    count_name: "ns",
                    by_class: false,
                    special: &folded.special,
                    class_maps: None,
                },
            )?
            .0,
        );
    }
    Ok(svgs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folded() -> FoldedStacks {
        let mut stacks = FoldedStacks::default();
        let f = &mut stacks.by_class;
        f[FaultClass::Minor as usize].insert("app;main;touch_pages;[anon]".into(), 262_144);
        f[FaultClass::Minor as usize]
            .insert("app;_dl_start;_dl_map_object;[libc.so.6 .text]".into(), 9);
        f[FaultClass::Cow as usize].insert(
            "app;_dl_start;_dl_relocate_object;[libx.so .data.rel.ro table]".into(),
            16,
        );
        stacks
    }

    /// `all` has the class as the root frame; lines are sorted; classes
    /// without faults yield nothing.
    #[test]
    fn folded_selection() {
        let f = folded().by_class;
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

    /// Each graph's file name, as the outputs and index.html's tabs name
    /// them.
    #[test]
    fn file_stems() {
        for (graph, stem) in [
            (ClassSelection::All.graph(), "all"),
            (ClassSelection::Cow.graph(), "cow"),
            (Graph::Startup, "startup"),
            (Graph::Latency(FaultClass::Major), "major-latency"),
        ] {
            assert_eq!(graph.file_stem(), stem);
        }
    }

    /// startup.svg's title names one program under `--startup-of`, else
    /// how many windows it sums.
    #[test]
    fn startup_scopes() {
        let mut model = Model {
            report: crate::model::report::tests::sample_report(),
            samples: Vec::new(),
            stacks: Default::default(),
            frames: Default::default(),
            timeline: Vec::new(),
            timeline_sites: Vec::new(),
            timeline_origin: 0,
            startup_of_one: false,
            programs: Vec::new(),
            resident: None,
        };
        assert_eq!(startup_scope(&model), "every program, 2 windows");
        model.report.startups.truncate(1);
        assert_eq!(startup_scope(&model), "the program");
        model.startup_of_one = true;
        assert_eq!(startup_scope(&model), "/opt/app/bin/app [pid 4242]");
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
                "./app · 262,822 faults: captured 262,822 (100.0%), lost 0 records · truncated stacks 0.0%",
            )
            .unwrap();
            let name = format!("{}.svg", selection.graph().file_stem());
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

    /// The exit graph of a program that ended at its peak is the peak's,
    /// retitled; not when the title could be mistaken for a frame's name
    /// or would need escaping.
    #[test]
    fn retitles_only_a_title_written_once() {
        let svg = |text: &str| Svg {
            graph: Graph::Resident,
            text: text.into(),
            empty: false,
            retitled: None,
        };
        let once = svg("<text id=\"title\">At the peak</text><g>main</g>");
        let exit = retitle(&once, Graph::ResidentExit, "At the peak", "At exit").unwrap();
        assert_eq!(exit.text, "<text id=\"title\">At exit</text><g>main</g>");
        assert_eq!(exit.graph, Graph::ResidentExit);
        let of = exit.retitled.unwrap();
        assert_eq!(
            (of.of, &*of.was, &*of.title),
            (Graph::Resident, "At the peak", "At exit")
        );
        let twice = svg("<text>At the peak</text><g>At the peak</g>");
        assert!(retitle(&twice, Graph::ResidentExit, "At the peak", "At exit").is_none());
        assert!(retitle(&once, Graph::ResidentExit, "At the peak", "At <exit>").is_none());
    }
}
