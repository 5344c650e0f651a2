//! What every flame graph shares: a subtitle saying what ran, how much was
//! captured and how much of it is whole; grey for frames that carry no
//! name; one palette per fault class, also inside `all.svg` and
//! `startup.svg` (each class's subtree in its class's palette); and the
//! look of a graph without faults.
//!
//! inferno colours a frame by its name only, so a name under two classes
//! would get one colour. The class colours of a mixed graph are therefore
//! set after inferno has drawn it ([`recolor_by_class`]), from the colours
//! inferno gives the same names in each class's own graph.

use std::fmt::Write as _;

use inferno::flamegraph::color::{Color, PaletteMap};
use inferno::flamegraph::Options;

use crate::analysis::classify::FaultClass;
use crate::model::report::FrameKind;
use crate::model::report::Report;
use crate::output::folded::Special;
use crate::output::text::command_line;
use crate::text::{thousands, xml_text};

/// Frames pfprof could not name: a lost or cut stack, the exec itself.
pub const GREY: Color = Color {
    r: 180,
    g: 180,
    b: 180,
};

/// JIT code (executed anonymous memory): real code without a name, a
/// paler violet-grey so it is told apart from a lost frame.
pub const JIT: Color = Color {
    r: 200,
    g: 190,
    b: 222,
};

/// Each class's own colour (`minor`, `major`, `cow`), for the class root
/// frames of a mixed flame graph and for the timeline.
pub const CLASS_COLORS: [&str; 3] = ["#3fa7c4", "#d7301f", "#f39c12"];

/// The root frame (`all`) of a mixed graph.
const ROOT_COLOR: &str = "rgb(214,214,206)";

/// Longest command shown in a subtitle (the graph is 1200 pixels wide).
const COMMAND_CHARS: usize = 56;

/// The fixed colour of a kind of frame, if it has one: grey for what
/// nothing named, violet-grey for JIT code without a name.
pub fn fixed_color(kind: FrameKind) -> Option<Color> {
    match kind {
        FrameKind::Unknown | FrameKind::Exec => Some(GREY),
        FrameKind::UnnamedJit => Some(JIT),
        FrameKind::Code | FrameKind::Kernel | FrameKind::Jit => None,
    }
}

/// A palette map that holds the fixed colours of the `special` frames;
/// inferno adds the other names as it draws.
pub fn palette_map(special: &Special) -> PaletteMap {
    let mut map = PaletteMap::default();
    for (name, kind) in special {
        if let Some(color) = fixed_color(*kind) {
            map.insert(name, color);
        }
    }
    map
}

/// `s` cut in the middle to at most `max` characters, keeping both ends.
fn cut_middle(s: &str, max: usize) -> String {
    let n = s.chars().count();
    if n <= max {
        return s.to_string();
    }
    let head = (max - 1) / 2;
    let tail = max - 1 - head;
    let start: String = s.chars().take(head).collect();
    let end: String = s.chars().skip(n - tail).collect();
    format!("{start}…{end}")
}

/// The totals and what was lost, e.g. `12,344 faults: captured 0 (0.0%),
/// lost 12,344 records — results incomplete` (every picture's subtitle
/// has it, `diff`'s one per recording).
pub fn totals_line(report: &Report) -> String {
    let captured = report.captured();
    let lost = thousands(report.totals.lost);
    let mut s = match (report.expected(), report.captured_pct()) {
        (Some(expected), Some(pct)) => {
            let sampled = if report.period > 1 { " sampled" } else { "" };
            format!(
                "{} faults{sampled}: captured {} ({pct:.1}%), lost {lost} records",
                thousands(expected),
                thousands(captured)
            )
        }
        _ => format!(
            "captured {} faults (kernel count unavailable), lost {lost} records",
            thousands(captured)
        ),
    };
    if let Some(n) = report.skipped_by_kernel() {
        let _ = write!(s, ", {} skipped by the kernel", thousands(n));
    }
    if report.incomplete() {
        s.push_str(" — results incomplete");
    }
    s
}

/// The subtitle of every picture: the command, the totals and lost
/// records, and the share of stacks cut short (when stacks were recorded):
/// `./app · 1,086 faults: captured 1,086 (100.0%), lost 0 records · truncated stacks 0.4%`.
pub fn subtitle(report: &Report) -> String {
    let mut s = format!(
        "{} · {}",
        cut_middle(&command_line(&report.command), COMMAND_CHARS),
        totals_line(report)
    );
    if report.totals.call_graph.is_some() {
        let captured = report.captured();
        let pct = if captured == 0 {
            0.0
        } else {
            report.totals.truncated_stacks as f64 * 100.0 / captured as f64
        };
        s.push_str(&format!(" · truncated stacks {pct:.1}%"));
    }
    s
}

/// One frame of an inferno SVG: its name, row, sample range and where
/// its `fill` value is.
struct Frame {
    name: String,
    y: f64,
    x: u64,
    w: u64,
    fill: std::ops::Range<usize>,
}

/// The value of attribute `name` in `tag` (an element's text), and its
/// byte range in `tag`.
fn attribute(tag: &str, name: &str) -> Option<(String, std::ops::Range<usize>)> {
    let needle = format!(" {name}=\"");
    let start = tag.find(&needle)? + needle.len();
    let len = tag[start..].find('"')?;
    Some((tag[start..start + len].to_string(), start..start + len))
}

fn unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&amp;", "&")
}

/// The frames of an SVG inferno wrote (`<g><title>NAME (…)</title><rect …/>`).
fn frames(svg: &str) -> Vec<Frame> {
    let mut frames = Vec::new();
    let Some(mut at) = svg.find("<svg id=\"frames\"") else {
        return frames;
    };
    while let Some(g) = svg[at..].find("<g><title>") {
        let title_start = at + g + "<g><title>".len();
        let Some(title_len) = svg[title_start..].find("</title>") else {
            break;
        };
        let title = &svg[title_start..title_start + title_len];
        let rect_start = title_start + title_len;
        let Some(rect_len) = svg[rect_start..].find("/>") else {
            break;
        };
        let rect = &svg[rect_start..rect_start + rect_len];
        at = rect_start + rect_len;
        let name = title.rsplit_once(" (").map_or(title, |(n, _)| n);
        let (Some((y, _)), Some((x, _)), Some((w, _)), Some((_, fill))) = (
            attribute(rect, "y"),
            attribute(rect, "fg:x"),
            attribute(rect, "fg:w"),
            attribute(rect, "fill"),
        ) else {
            continue;
        };
        let (Ok(y), Ok(x), Ok(w)) = (y.parse(), x.parse(), w.parse()) else {
            continue;
        };
        frames.push(Frame {
            name: unescape(name),
            y,
            x,
            w,
            fill: rect_start + fill.start..rect_start + fill.end,
        });
    }
    frames
}

/// Recolours a mixed flame graph whose second row holds the class roots
/// (`minor`, `major`, `cow`): each root in its class colour, every frame
/// above it in the colour `maps[class]` gives its name (the class's own
/// graph's colours), fixed colours kept.
pub fn recolor_by_class(svg: &str, maps: &[PaletteMap; 3]) -> String {
    let frames = frames(svg);
    let bottom = frames.iter().map(|f| f.y).fold(f64::MIN, f64::max);
    let second = frames
        .iter()
        .map(|f| f.y)
        .filter(|&y| y < bottom)
        .fold(f64::MIN, f64::max);
    let roots: Vec<(FaultClass, u64, u64)> = frames
        .iter()
        .filter(|f| f.y == second)
        .filter_map(|f| {
            let class = FaultClass::ALL.into_iter().find(|c| c.name() == f.name)?;
            Some((class, f.x, f.x + f.w))
        })
        .collect();
    let mut out = String::with_capacity(svg.len());
    let mut copied = 0;
    for frame in &frames {
        if frame.y >= bottom {
            // The root: neutral, under the class colours.
            out.push_str(&svg[copied..frame.fill.start]);
            out.push_str(ROOT_COLOR);
            copied = frame.fill.end;
            continue;
        }
        let Some(&(class, _, _)) = roots
            .iter()
            .find(|(_, start, end)| (*start..*end).contains(&frame.x))
        else {
            continue;
        };
        let fill = if frame.y == second {
            CLASS_COLORS[class as usize].to_string()
        } else {
            // The fixed colours are in every class's map.
            match maps[class as usize].get(&frame.name) {
                Some(c) => format!("rgb({},{},{})", c.r, c.g, c.b),
                None => continue,
            }
        };
        out.push_str(&svg[copied..frame.fill.start]);
        out.push_str(&fill);
        copied = frame.fill.end;
    }
    out.push_str(&svg[copied..]);
    out
}

/// The SVG of a graph without faults, drawn as inferno draws the others:
/// same width, fonts, background and title lines, "no faults" centred.
pub fn empty_svg(title: &str, subtitle: &str) -> String {
    let options = Options::default();
    let width = options.image_width.unwrap_or(1200);
    let font = options.font_size;
    // inferno's padding above (title, subtitle) and below (details line),
    // around three rows of frames.
    let frames_height = 3 * options.frame_height;
    let top = font * 3 + font * 2;
    let height = top + frames_height + font * 2 + 10;
    format!(
        "<?xml version=\"1.0\" standalone=\"no\"?>\n\
         <svg version=\"1.1\" width=\"{width}\" height=\"{height}\" viewBox=\"0 0 {width} {height}\" \
         xmlns=\"http://www.w3.org/2000/svg\">\
         <defs><linearGradient id=\"background\" y1=\"0\" y2=\"1\" x1=\"0\" x2=\"0\">\
         <stop stop-color=\"#f8f8f8\" offset=\"5%\"/><stop stop-color=\"#e8e8e8\" offset=\"95%\"/>\
         </linearGradient></defs>\
         <style type=\"text/css\">text {{ font-family:{family}; font-size:{font}px }} \
         #title {{ text-anchor:middle; font-size:17px; }} #subtitle {{ text-anchor:middle; }} \
         #nofaults {{ text-anchor:middle; font-size:17px; fill:rgb(120,120,120); }}</style>\
         <rect x=\"0\" y=\"0\" width=\"100%\" height=\"{height}\" fill=\"url(#background)\"/>\
         <text id=\"title\" x=\"50.0000%\" y=\"{title_y:.2}\">{title}</text>\
         <text id=\"subtitle\" x=\"50.0000%\" y=\"{subtitle_y:.2}\">{subtitle}</text>\
         <text id=\"nofaults\" x=\"50%\" y=\"{middle}\">no faults</text></svg>\n",
        family = xml_text(&options.font_type),
        title_y = (font * 2) as f64,
        subtitle_y = (font * 4) as f64,
        middle = top + frames_height / 2 + 6,
        title = xml_text(title),
        subtitle = xml_text(subtitle),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Placeholders are grey, JIT frames without a name violet-grey, the
    /// rest inferno's.
    #[test]
    fn fixed_colors() {
        for (kind, want) in [
            (FrameKind::Unknown, Some(GREY)),
            (FrameKind::Exec, Some(GREY)),
            (FrameKind::UnnamedJit, Some(JIT)),
            (FrameKind::Jit, None),
            (FrameKind::Kernel, None),
            (FrameKind::Code, None),
        ] {
            assert_eq!(fixed_color(kind), want, "{kind:?}");
        }
        let special: Special = [
            ("[unknown]".to_string(), FrameKind::Unknown),
            ("[jit 0x10]".to_string(), FrameKind::UnnamedJit),
        ]
        .into_iter()
        .collect();
        let map = palette_map(&special);
        assert_eq!(map.get("[unknown]"), Some(GREY));
        assert_eq!(map.get("[jit 0x10]"), Some(JIT));
        assert_eq!(map.get("main"), None);
    }

    /// Long commands are cut in the middle, both ends kept.
    #[test]
    fn cuts_in_the_middle() {
        for (s, max, want) in [
            ("./app", 10, "./app"),
            ("abcdefghij", 5, "ab…ij"),
            ("abcdefghij", 6, "ab…hij"),
        ] {
            assert_eq!(cut_middle(s, max), want);
        }
    }

    /// Frames are read with their names unescaped and fill ranges exact.
    #[test]
    fn reads_frames() {
        let svg = r#"<svg id="frames" x="10"><g><title>a&lt;b&gt; (3 faults, 100%)</title><rect x="0%" y="61" width="100%" height="15" fill="rgb(1,2,3)" fg:x="0" fg:w="3"/><text>x</text></g></svg>"#;
        let f = frames(svg);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].name, "a<b>");
        assert_eq!((f[0].y, f[0].x, f[0].w), (61.0, 0, 3));
        assert_eq!(&svg[f[0].fill.clone()], "rgb(1,2,3)");
    }
}
