//! `timeline.svg`: faults per class over time since the start of the
//! recording, as stacked bars, with the top code site of each burst
//! labelled, so that start-up phases (loader, relocations, initializers,
//! steady state) show at a glance.

use std::fmt::Write as _;

use crate::analysis::classify::FaultClass;
use crate::model::Model;
use crate::text::thousands;

const WIDTH: f64 = 1200.0;
const HEIGHT: f64 = 480.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 30.0;
const TOP: f64 = 60.0;
const BOTTOM: f64 = 70.0;
const BINS: usize = 200;
const COLORS: [(&str, &str); 3] = [
    ("minor", "#3fa7c4"),
    ("major", "#d7301f"),
    ("cow", "#f39c12"),
];

/// One fault: time (ns), class, and the name of its leaf code site.
pub struct Point<'a> {
    /// Time (ns, the recording's clock).
    pub time: u64,
    /// Class.
    pub class: FaultClass,
    /// Leaf function, for labelling bursts.
    pub site: &'a str,
}

use crate::text::xml_text as escape;

/// A "nice" step (1, 2, 5 × 10^k) giving about `target` ticks over `span`.
fn nice_step(span: f64, target: f64) -> f64 {
    let raw = (span / target).max(f64::MIN_POSITIVE);
    let magnitude = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * magnitude)
        .find(|step| *step >= raw)
        .unwrap_or(10.0 * magnitude)
}

/// `timeline.svg` of the model: bursts labelled with their leaf functions.
pub fn render(model: &Model) -> String {
    let points: Vec<Point<'_>> = model
        .timeline
        .iter()
        .map(|p| Point {
            time: p.time,
            class: p.class,
            site: model.leaf_function(p.stack).unwrap_or("[no stack]"),
        })
        .collect();
    svg(
        &points,
        model.timeline_origin,
        &format!("Page faults over time: {}", model.report.command_line()),
        &model.report.subtitle(),
    )
}

/// The SVG. `origin` is time zero (the exec, or the first record);
/// `subtitle` says what was captured and lost ([`crate::model::report::Report::subtitle`]).
pub fn svg(points: &[Point<'_>], origin: u64, title: &str, subtitle: &str) -> String {
    let end = points
        .iter()
        .map(|p| p.time)
        .max()
        .unwrap_or(origin)
        .max(origin + 1);
    let span_ns = (end - origin) as f64;
    let bin_ns = (span_ns / BINS as f64).max(1.0);
    let mut bins = vec![[0u64; 3]; BINS];
    let mut sites: Vec<std::collections::HashMap<&str, u64>> = vec![Default::default(); BINS];
    for p in points {
        let bin = (((p.time.saturating_sub(origin)) as f64 / bin_ns) as usize).min(BINS - 1);
        bins[bin][p.class as usize] += 1;
        *sites[bin].entry(p.site).or_default() += 1;
    }
    let peak = bins
        .iter()
        .map(|b| b.iter().sum::<u64>())
        .max()
        .unwrap_or(0)
        .max(1);
    let plot_w = WIDTH - LEFT - RIGHT;
    let plot_h = HEIGHT - TOP - BOTTOM;
    let x_of = |bin: usize| LEFT + plot_w * bin as f64 / BINS as f64;
    let y_of = |count: f64| TOP + plot_h - plot_h * count / peak as f64;
    let (unit, scale) = if span_ns >= 2e9 {
        ("s", 1e9)
    } else if span_ns >= 2e6 {
        ("ms", 1e6)
    } else {
        ("µs", 1e3)
    };

    let mut s = String::new();
    let _ = writeln!(
        s,
        r##"<?xml version="1.0" standalone="no"?>
<svg version="1.1" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" xmlns="http://www.w3.org/2000/svg" font-family="Verdana, sans-serif" font-size="12">
<rect width="100%" height="100%" fill="#ffffff"/>
<text x="{}" y="24" text-anchor="middle" font-size="17">{}</text>
<text x="{}" y="44" text-anchor="middle" fill="#555">{}; {:.1} {unit}; bars: faults per {:.3} {unit}</text>"##,
        WIDTH / 2.0,
        escape(title),
        WIDTH / 2.0,
        escape(subtitle),
        span_ns / scale,
        bin_ns / scale
    );
    // Axes, ticks and grid.
    let _ = writeln!(
        s,
        r##"<line x1="{LEFT}" y1="{}" x2="{}" y2="{}" stroke="#000"/>"##,
        TOP + plot_h,
        LEFT + plot_w,
        TOP + plot_h
    );
    let _ = writeln!(
        s,
        r##"<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{}" stroke="#000"/>"##,
        TOP + plot_h
    );
    let x_step = nice_step(span_ns / scale, 10.0);
    let mut t = 0.0;
    while t <= span_ns / scale + 1e-9 {
        let x = LEFT + plot_w * (t * scale) / span_ns;
        let _ = writeln!(
            s,
            r##"<line x1="{x:.1}" y1="{}" x2="{x:.1}" y2="{}" stroke="#000"/><text x="{x:.1}" y="{}" text-anchor="middle">{}</text>"##,
            TOP + plot_h,
            TOP + plot_h + 5.0,
            TOP + plot_h + 18.0,
            trim_float(t)
        );
        t += x_step;
    }
    let y_step = nice_step(peak as f64, 5.0).max(1.0);
    let mut v = 0.0;
    while v <= peak as f64 + 1e-9 {
        let y = y_of(v);
        let _ = writeln!(
            s,
            r##"<line x1="{}" y1="{y:.1}" x2="{}" y2="{y:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
            LEFT,
            LEFT + plot_w,
            LEFT - 6.0,
            y + 4.0,
            thousands(v as u64)
        );
        v += y_step;
    }
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle">time since start ({unit})</text>"#,
        LEFT + plot_w / 2.0,
        HEIGHT - 30.0
    );
    let _ = writeln!(
        s,
        r#"<text x="18" y="{}" text-anchor="middle" transform="rotate(-90 18 {})">faults per bar</text>"#,
        TOP + plot_h / 2.0,
        TOP + plot_h / 2.0
    );
    // Stacked bars.
    let bar_w = plot_w / BINS as f64;
    for (bin, counts) in bins.iter().enumerate() {
        let mut base = 0.0;
        for (class, (name, color)) in COLORS.iter().enumerate() {
            let n = counts[class] as f64;
            if n == 0.0 {
                continue;
            }
            let (y_top, y_bottom) = (y_of(base + n), y_of(base));
            let _ = writeln!(
                s,
                r#"<rect x="{:.2}" y="{y_top:.2}" width="{:.2}" height="{:.2}" fill="{color}"><title>{} {name} faults at {:.3} {unit}</title></rect>"#,
                x_of(bin),
                bar_w.max(0.5),
                (y_bottom - y_top).max(0.5),
                n,
                bin as f64 * bin_ns / scale
            );
            base += n;
        }
    }
    // Label the bursts: the highest bars that stand well apart.
    let mut order: Vec<usize> = (0..BINS)
        .filter(|b| bins[*b].iter().sum::<u64>() > 0)
        .collect();
    order.sort_by_key(|b| std::cmp::Reverse(bins[*b].iter().sum::<u64>()));
    let mut labelled: Vec<usize> = Vec::new();
    for bin in order {
        if labelled.len() == 5 {
            break;
        }
        if labelled.iter().any(|l| l.abs_diff(bin) < BINS / 12) {
            continue;
        }
        let total: u64 = bins[bin].iter().sum();
        let Some((site, _)) = sites[bin]
            .iter()
            .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
        else {
            continue;
        };
        let x = x_of(bin) + bar_w / 2.0;
        let y = y_of(total as f64) - 6.0;
        let _ = writeln!(
            s,
            r##"<text x="{x:.1}" y="{:.1}" text-anchor="middle" font-size="11" fill="#222">{}</text>"##,
            y.max(TOP + 10.0),
            escape(&shorten(site, 32))
        );
        labelled.push(bin);
    }
    // Legend.
    for (i, (name, color)) in COLORS.iter().enumerate() {
        let x = LEFT + plot_w - 240.0 + 80.0 * i as f64;
        let _ = writeln!(
            s,
            r#"<rect x="{x}" y="{}" width="12" height="12" fill="{color}"/><text x="{}" y="{}">{name}</text>"#,
            TOP - 8.0,
            x + 16.0,
            TOP + 2.0
        );
    }
    s.push_str("</svg>\n");
    s
}

fn trim_float(v: f64) -> String {
    let text = format!("{v:.3}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

fn shorten(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        s.chars().take(max - 1).collect::<String>() + "…"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Axes, units, legend, one bar per class present, and a burst label.
    #[test]
    fn renders_bars_axes_and_labels() {
        let mut points = Vec::new();
        for i in 0..1000u64 {
            points.push(Point {
                time: 1_000_000 + i * 1000,
                class: FaultClass::Minor,
                site: "touch_pages",
            });
        }
        for i in 0..10u64 {
            points.push(Point {
                time: 1_500_000 + i,
                class: FaultClass::Major,
                site: "read_<file>",
            });
        }
        let svg = svg(
            &points,
            1_000_000,
            "Faults over time: ./app",
            "1,010 faults: captured 1,010 (100.0%), lost 0 records",
        );
        assert!(svg.starts_with("<?xml") && svg.ends_with("</svg>\n"));
        for needle in [
            "time since start (µs)",
            "faults per bar",
            ">minor<",
            ">major<",
            ">cow<",
            "touch_pages",
            "read_&lt;file&gt;",
            "1,010 faults: captured 1,010 (100.0%), lost 0 records; ",
        ] {
            assert!(svg.contains(needle), "missing {needle}");
        }
        assert!(svg.contains("#d7301f\"><title>10 major faults"));
    }

    /// Tick steps are 1, 2 or 5 times a power of ten.
    #[test]
    fn nice_steps() {
        for (span, target, want) in [
            (100.0, 10.0, 10.0),
            (7.3, 10.0, 1.0),
            (0.9, 5.0, 0.2),
            (1234.0, 5.0, 500.0),
        ] {
            assert!(
                (nice_step(span, target) - want).abs() < 1e-9,
                "{span} {target}"
            );
        }
    }
}
