//! `diff.folded` and `diff.svg`: the differential flame graph of two runs.
//!
//! Drawn here rather than by inferno: inferno's differential mode colours a
//! frame by the change of its *own* (leaf) count only, so a root that grew
//! from 1,086 to 2,869 faults stays white. Here every frame is coloured by
//! the change of its whole subtree (red: more faults after, blue: fewer), and
//! a frame's width is its faults in both runs together, so that frames that
//! vanished are drawn as well as frames that appeared.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{self, Write as _};

use crate::format::outdir::{graph, OutDir};
use crate::text::thousands;
use crate::text::xml_text;

/// What the colours compare.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compare {
    /// Raw fault counts: every fault is a real event (not a time sample),
    /// so more faults after is more work after.
    Counts,
    /// Shares of each run's total (`--normalize`): the first run's counts
    /// are scaled to the second's total, so only a change of mix shows.
    Shares,
}

/// One frame of the merged tree: faults of its subtree in each run.
#[derive(Debug, Default)]
struct Node {
    before: u64,
    after: u64,
    children: BTreeMap<String, Node>,
}

impl Node {
    fn add(&mut self, stack: &str, before: u64, after: u64) {
        self.before += before;
        self.after += after;
        let mut node = self;
        for frame in stack.split(';').filter(|f| !f.is_empty()) {
            node = node.children.entry(frame.to_string()).or_default();
            node.before += before;
            node.after += after;
        }
    }
}

/// `stack count` lines into a map (bad lines are skipped: they come from
/// pfprof itself, never from the user).
fn parse(lines: &[String]) -> BTreeMap<&str, u64> {
    let mut out = BTreeMap::new();
    for line in lines {
        if let Some((stack, n)) = line.rsplit_once(' ') {
            if let Ok(n) = n.trim().parse::<u64>() {
                *out.entry(stack).or_insert(0) += n;
            }
        }
    }
    out
}

/// The merged folded stacks, `stack before after` (inferno's differential
/// format), sorted.
pub fn merge(before: &[String], after: &[String]) -> Vec<(String, u64, u64)> {
    let (a, b) = (parse(before), parse(after));
    let mut merged: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    for (stack, n) in a {
        merged.entry(stack).or_default().0 += n;
    }
    for (stack, n) in b {
        merged.entry(stack).or_default().1 += n;
    }
    merged
        .into_iter()
        .map(|(s, (x, y))| (s.to_string(), x, y))
        .collect()
}

const WIDTH: f64 = 1200.0;
const PAD: f64 = 10.0;
const FRAME_H: f64 = 16.0;
const FONT: f64 = 12.0;
/// Average glyph width of Verdana at 12px, for fitting labels.
const CHAR_W: f64 = FONT * 0.59;
const HEADER_H: f64 = 112.0;
/// Frames narrower than this are not drawn (nor their children).
const MIN_W: f64 = 0.1;
/// The colour of a frame with no change.
pub const UNCHANGED: (u8, u8, u8) = (250, 250, 250);

/// The fill of a frame whose subtree changed by `delta` when the largest
/// change of any frame is `max`: red for more, blue for fewer, deeper for
/// larger changes (square root, so that small changes stay visible), and
/// never paler than a clear tint.
pub fn colour(delta: f64, max: f64) -> (u8, u8, u8) {
    if delta.abs() < 0.5 || max <= 0.0 {
        return UNCHANGED;
    }
    let s = 0.25 + 0.75 * (delta.abs() / max).min(1.0).sqrt();
    let c = (40.0 + 190.0 * (1.0 - s)).round() as u8;
    if delta > 0.0 {
        (255, c, c)
    } else {
        (c, c.saturating_add(20), 255)
    }
}

/// A signed number with thousands separators (`+1,783`, `-12`, `0`).
pub fn signed(n: i64) -> String {
    let sign = match n {
        0 => "",
        n if n > 0 => "+",
        _ => "-",
    };
    format!("{sign}{}", thousands(n.unsigned_abs()))
}

/// Percentage of `part` in `total` (0 when total is 0).
fn pct(part: f64, total: f64) -> f64 {
    if total > 0.0 {
        100.0 * part / total
    } else {
        0.0
    }
}

struct Scale {
    compare: Compare,
    /// What the counts count: `faults`, or `KiB` (resident memory).
    what: &'static str,
    /// Factor applied to before counts (1 for raw counts).
    factor: f64,
    total_before: u64,
    total_after: u64,
}

impl Scale {
    fn delta(&self, n: &Node) -> f64 {
        n.after as f64 - n.before as f64 * self.factor
    }

    fn weight(&self, n: &Node) -> f64 {
        n.before as f64 * self.factor + n.after as f64
    }

    /// The tooltip: before, after, and the change in counts and percent.
    fn tooltip(&self, name: &str, n: &Node) -> String {
        let (b, a) = (n.before, n.after);
        let mut t = format!(
            "{name}: before {} ({:.2}%), after {} ({:.2}%), ",
            thousands(b),
            pct(b as f64, self.total_before as f64),
            thousands(a),
            pct(a as f64, self.total_after as f64),
        );
        let expected = b as f64 * self.factor;
        let relative = if b == 0 && a > 0 {
            "new".to_string()
        } else if expected > 0.0 {
            format!("{:+.1}%", 100.0 * (a as f64 - expected) / expected)
        } else {
            "0%".to_string()
        };
        match self.compare {
            Compare::Counts => {
                let _ = write!(
                    t,
                    "change {} {} ({relative})",
                    signed(a as i64 - b as i64),
                    self.what
                );
            }
            Compare::Shares => {
                let points = pct(a as f64, self.total_after as f64)
                    - pct(b as f64, self.total_before as f64);
                let _ = write!(
                    t,
                    "share {points:+.2} points ({relative} against before's share)"
                );
            }
        }
        t
    }
}

fn max_delta(scale: &Scale, node: &Node, max: &mut f64) {
    *max = max.max(scale.delta(node).abs());
    for child in node.children.values() {
        max_delta(scale, child, max);
    }
}

struct Frames<'a> {
    scale: &'a Scale,
    max: f64,
    px_per_unit: f64,
    bottom: f64,
    out: String,
    depth: usize,
}

impl Frames<'_> {
    fn draw(&mut self, name: &str, node: &Node, x: f64, level: usize) {
        let w = self.scale.weight(node) * self.px_per_unit;
        if w < MIN_W {
            return;
        }
        self.depth = self.depth.max(level + 1);
        let y = self.bottom - (level as f64 + 1.0) * FRAME_H;
        let delta = self.scale.delta(node);
        let (r, g, b) = colour(delta, self.max);
        let title = xml_text(&self.scale.tooltip(name, node));
        let _ = write!(
            self.out,
            "<g class=\"f\" data-before=\"{}\" data-after=\"{}\"><title>{title}</title>\
             <rect x=\"{x:.2}\" y=\"{y:.1}\" width=\"{w:.2}\" height=\"{:.1}\" rx=\"2\" \
             fill=\"rgb({r},{g},{b})\"/>",
            node.before,
            node.after,
            FRAME_H - 1.0
        );
        let fits = ((w - 6.0) / CHAR_W).floor();
        if fits >= 3.0 {
            let fits = fits as usize;
            let label: String = if name.chars().count() <= fits {
                name.to_string()
            } else {
                let mut l: String = name.chars().take(fits - 2).collect();
                l.push_str("..");
                l
            };
            let _ = write!(
                self.out,
                "<text x=\"{:.2}\" y=\"{:.1}\">{}</text>",
                x + 3.0,
                y + FRAME_H - 4.5,
                xml_text(&label)
            );
        }
        self.out.push_str("</g>\n");
        let mut cx = x;
        for (child_name, child) in &node.children {
            self.draw(child_name, child, cx, level + 1);
            cx += self.scale.weight(child) * self.px_per_unit;
        }
    }
}

/// The legend: a gradient from the largest decrease through white to the
/// largest increase, and what is compared.
fn legend(scale: &Scale, max: f64, y: f64) -> String {
    let (x0, w) = (PAD, 300.0);
    let stops: Vec<String> = [-1.0, -0.5, -0.1, 0.0, 0.1, 0.5, 1.0]
        .iter()
        .map(|f: &f64| {
            let (r, g, b) = colour(f * max.max(1.0), max.max(1.0));
            format!(
                "<stop offset=\"{:.0}%\" stop-color=\"rgb({r},{g},{b})\"/>",
                (f + 1.0) * 50.0
            )
        })
        .collect();
    // The scale's ends: the largest change of any frame.
    let counted = scale.what;
    let unit = format!("{} {counted}", thousands(max.round() as u64));
    let what = match scale.compare {
        Compare::Counts => format!(
            "raw {} ({} before, {} after; --normalize compares shares)",
            if counted == "faults" {
                "fault counts"
            } else {
                counted
            },
            thousands(scale.total_before),
            thousands(scale.total_after)
        ),
        Compare::Shares => format!(
            "shares of each run's total (before's {} {counted} scaled to after's {})",
            thousands(scale.total_before),
            thousands(scale.total_after)
        ),
    };
    format!(
        "<g id=\"legend\"><defs><linearGradient id=\"change\">{}</linearGradient></defs>\
         <rect x=\"{x0}\" y=\"{y}\" width=\"{w}\" height=\"12\" fill=\"url(#change)\" stroke=\"#999\" stroke-width=\"0.5\"/>\
         <text x=\"{x0}\" y=\"{:.0}\" font-size=\"11\">−{unit}</text>\
         <text x=\"{:.0}\" y=\"{:.0}\" font-size=\"11\" text-anchor=\"middle\">0</text>\
         <text x=\"{:.0}\" y=\"{:.0}\" font-size=\"11\" text-anchor=\"end\">+{unit}</text>\
         <text x=\"{:.0}\" y=\"{:.0}\" font-size=\"11\">Colour: change of each frame's {counted} (with its callees) from before to after; red more, blue fewer, near-white unchanged.</text>\
         <text x=\"{:.0}\" y=\"{:.0}\" font-size=\"11\">Compared: {}. Width: both runs' {counted} together.</text>\
         <text x=\"{:.0}\" y=\"{:.0}\" font-size=\"11\">Hover a frame for its counts; click a frame to zoom, click all to go back.</text></g>\n",
        stops.join(""),
        y + 24.0,
        x0 + w / 2.0,
        y + 24.0,
        x0 + w,
        y + 24.0,
        x0 + w + 16.0,
        y + 8.0,
        x0 + w + 16.0,
        y + 21.0,
        xml_text(&what),
        x0 + w + 16.0,
        y + 34.0,
    )
}

/// Click a frame to widen it and its callees to the full width (its
/// callers stay, full width); click `all` to go back. Labels are refitted.
const ZOOM_JS: &str = r#"
var X0 = 10, W = 1180, CW = 7.08;
function frames() { return document.querySelectorAll('g.f'); }
function name(g) {
  var t = g.querySelector('title').textContent;
  return t.slice(0, t.lastIndexOf(': before '));
}
function place(g, x, w) {
  var r = g.querySelector('rect');
  r.setAttribute('x', x); r.setAttribute('width', w);
  var t = g.querySelector('text');
  if (!t) {
    t = document.createElementNS('http://www.w3.org/2000/svg', 'text');
    t.setAttribute('y', +r.getAttribute('y') + 11.5);
    g.appendChild(t);
  }
  t.setAttribute('x', x + 3);
  var n = Math.floor((w - 6) / CW), s = name(g);
  t.textContent = n < 3 ? '' : s.length <= n ? s : s.slice(0, n - 2) + '..';
}
function zoom(e) {
  var r = this.querySelector('rect'), x0 = +r.dataset.x, w0 = +r.dataset.w,
      y0 = +r.getAttribute('y'), eps = 1e-6;
  frames().forEach(function (g) {
    var q = g.querySelector('rect'), x = +q.dataset.x, w = +q.dataset.w,
        y = +q.getAttribute('y'), show = false;
    if (y > y0 && x <= x0 + eps && x + w >= x0 + w0 - eps) {
      show = true; place(g, X0, W);
    } else if (y <= y0 && x >= x0 - eps && x + w <= x0 + w0 + eps) {
      show = true; place(g, X0 + (x - x0) * W / w0, w * W / w0);
    }
    g.style.display = show ? '' : 'none';
  });
}
window.addEventListener('load', function () {
  frames().forEach(function (g) {
    var r = g.querySelector('rect');
    r.dataset.x = r.getAttribute('x'); r.dataset.w = r.getAttribute('width');
    g.addEventListener('click', zoom);
  });
});
"#;

/// The whole SVG.
/// `what` names what the counts count (`faults`, `KiB`).
pub fn svg(
    merged: &[(String, u64, u64)],
    (compare, what): (Compare, &'static str),
    title: &str,
    subtitle: &str,
) -> String {
    let mut root = Node::default();
    for (stack, b, a) in merged {
        root.add(stack, *b, *a);
    }
    let factor = match compare {
        Compare::Shares if root.before > 0 => root.after as f64 / root.before as f64,
        _ => 1.0,
    };
    let scale = Scale {
        compare,
        what,
        factor,
        total_before: root.before,
        total_after: root.after,
    };
    let mut max = 0.0;
    max_delta(&scale, &root, &mut max);
    let total = scale.weight(&root);
    let mut depth = 0;
    fn deepest(n: &Node, level: usize, depth: &mut usize) {
        *depth = (*depth).max(level);
        for c in n.children.values() {
            deepest(c, level + 1, depth);
        }
    }
    deepest(&root, 1, &mut depth);
    let plot_h = depth.max(1) as f64 * FRAME_H;
    let height = HEADER_H + plot_h + 2.0 * PAD;
    let bottom = height - PAD;
    let mut frames = Frames {
        scale: &scale,
        max,
        px_per_unit: if total > 0.0 {
            (WIDTH - 2.0 * PAD) / total
        } else {
            0.0
        },
        bottom,
        out: String::new(),
        depth: 0,
    };
    if total > 0.0 {
        frames.draw("all", &root, PAD, 0);
    }
    let body = if total > 0.0 {
        frames.out
    } else {
        format!(
            "<text x=\"{}\" y=\"{:.0}\" text-anchor=\"middle\" font-size=\"14\">no {what}</text>\n",
            WIDTH / 2.0,
            HEADER_H + 20.0
        )
    };
    format!(
        "<?xml version=\"1.0\" standalone=\"no\"?>\n\
         <svg version=\"1.1\" width=\"{WIDTH}\" height=\"{height:.0}\" viewBox=\"0 0 {WIDTH} {height:.0}\" \
         xmlns=\"http://www.w3.org/2000/svg\" font-family=\"Verdana, 'DejaVu Sans', sans-serif\" font-size=\"{FONT}\">\n\
         <style>.f{{cursor:pointer}} .f:hover rect{{stroke:#000;stroke-width:0.8}} .f rect{{stroke:#ccc;stroke-width:0.4}}</style>\n\
         <script><![CDATA[{ZOOM_JS}]]></script>\n\
         <rect width=\"100%\" height=\"100%\" fill=\"#f4f4f4\"/>\n\
         <text x=\"{:.0}\" y=\"24\" text-anchor=\"middle\" font-size=\"17\">{}</text>\n\
         <text x=\"{:.0}\" y=\"46\" text-anchor=\"middle\" font-size=\"12\" fill=\"#333\">{}</text>\n\
         {}\
         <g id=\"frames\">\n{body}</g>\n</svg>\n",
        WIDTH / 2.0,
        xml_text(&crate::text::truncate(title, 140)),
        WIDTH / 2.0,
        xml_text(&crate::text::truncate(subtitle, 190)),
        legend(&scale, max, 62.0),
    )
}

/// Writes `diff.folded` (`stack before after` per line) and `diff.svg`.
pub fn write(
    dir: &OutDir,
    (before, after): (&[String], &[String]),
    compare: (Compare, &'static str),
    title: &str,
    subtitle: &str,
) -> io::Result<()> {
    let merged = merge(before, after);
    dir.write_with(&format!("{}.folded", graph::DIFF), |out| {
        for (stack, b, a) in &merged {
            writeln!(out, "{stack} {b} {a}")?;
        }
        Ok(())
    })?;
    let svg = svg(&merged, compare, title, subtitle);
    dir.write(&format!("{}.svg", graph::DIFF), svg.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    /// Colours: sign picks red or blue, no change is near-white, any change
    /// is clearly tinted, larger changes are deeper.
    #[test]
    fn colours() {
        assert_eq!(colour(0.0, 100.0), UNCHANGED);
        let (r, g, b) = colour(1.0, 1000.0);
        assert!(r == 255 && g < 200 && b < 200, "{r},{g},{b}");
        let (r, g, b) = colour(-1.0, 1000.0);
        assert!(b == 255 && r < 200 && g < 220, "{r},{g},{b}");
        assert!(colour(1000.0, 1000.0).1 < colour(10.0, 1000.0).1);
        assert!(colour(-1000.0, 1000.0).0 < colour(-10.0, 1000.0).0);
    }

    #[test]
    fn signed_numbers() {
        for (n, s) in [
            (0, "0"),
            (12, "+12"),
            (-1783, "-1,783"),
            (1_234_567, "+1,234,567"),
        ] {
            assert_eq!(signed(n), s);
        }
    }

    /// Stacks of either run are merged; totals are carried up the tree.
    #[test]
    fn merged_tree() {
        let merged = merge(&lines(&["a;b 3", "a;c 2"]), &lines(&["a;b 5", "d 1"]));
        assert_eq!(
            merged,
            vec![
                ("a;b".into(), 3, 5),
                ("a;c".into(), 2, 0),
                ("d".into(), 0, 1)
            ]
        );
        let mut root = Node::default();
        for (s, b, a) in &merged {
            root.add(s, *b, *a);
        }
        assert_eq!((root.before, root.after), (5, 6));
        assert_eq!(
            (root.children["a"].before, root.children["a"].after),
            (5, 5)
        );
    }

    /// No faults in either run: a titled SVG saying so; names from the
    /// profiled world are escaped.
    #[test]
    fn empty_and_escaped() {
        let empty = svg(&[], (Compare::Counts, "faults"), "t", "s");
        assert!(empty.contains(">no faults</text>") && !empty.contains("class=\"f\""));
        let merged = merge(&lines(&["a<b>&c 2"]), &lines(&["a<b>&c 1"]));
        let one = svg(&merged, (Compare::Counts, "faults"), "t", "s");
        assert!(one.contains("<title>a&lt;b&gt;&amp;c: before 2 "), "{one}");
        assert!(!one.contains("a<b>"));
    }

    /// Counts compare raw counts; shares scale before to after's total.
    #[test]
    fn tooltips() {
        let node = Node {
            before: 100,
            after: 300,
            children: BTreeMap::new(),
        };
        let counts = Scale {
            compare: Compare::Counts,
            what: "faults",
            factor: 1.0,
            total_before: 1000,
            total_after: 2000,
        };
        assert_eq!(
            counts.tooltip("f", &node),
            "f: before 100 (10.00%), after 300 (15.00%), change +200 faults (+200.0%)"
        );
        let shares = Scale {
            compare: Compare::Shares,
            factor: 2.0,
            ..counts
        };
        assert_eq!(
            shares.tooltip("f", &node),
            "f: before 100 (10.00%), after 300 (15.00%), share +5.00 points (+50.0% against before's share)"
        );
        assert_eq!(shares.delta(&node), 100.0);
    }
}
