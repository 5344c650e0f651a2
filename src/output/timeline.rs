//! `timeline.svg`: faults per class over time since the start of the
//! recording, as stacked bars, with the top code site of each burst
//! labelled, so that start-up phases (loader, relocations, initializers,
//! steady state) show at a glance.

use std::cmp::Reverse;
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

use crate::analysis::classify::FaultClass;
use crate::analysis::Owner;
use crate::model::report::NO_STACK;
use crate::model::Model;
use crate::output::picture::{self, CLASS_COLORS};
use crate::text::{in_time_unit, thousands};

const WIDTH: f64 = 1200.0;
/// Left margin: y-axis numbers and the process lanes' names.
const LEFT: f64 = 130.0;
const RIGHT: f64 = 30.0;
/// Top of the bar plot (title, subtitle and legend above).
const TOP: f64 = 72.0;
const PLOT_H: f64 = 280.0;
const BINS: usize = 200;
/// Burst labels: monospace, so a label's box is known exactly (and
/// `textLength` holds the text to it).
const LABEL_FONT: f64 = 11.0;
const LABEL_CHAR_W: f64 = LABEL_FONT * 0.6;
/// A label's box around its baseline: ascent above, descent below.
const LABEL_ASCENT: f64 = 9.0;
const LABEL_DESCENT: f64 = 3.0;
const MAX_LABELS: usize = 6;
/// The latency lane: log scale, from 1 µs up.
const LANE_H: f64 = 80.0;
const LATENCY_FLOOR_NS: f64 = 1e3;
/// Processes with a lane of their own; the rest share one.
const PROCESS_LANES: usize = 6;
const PROCESS_LANE_H: f64 = 12.0;
const PROCESS_COLORS: [&str; PROCESS_LANES + 1] = [
    "#4c72b0", "#55a868", "#8172b2", "#c44e52", "#937860", "#da8bc3", "#8c8c8c",
];

/// Faults of one class and process at one time (ns).
pub struct Point {
    /// When they completed (ns, the recording's clock).
    pub time: u64,
    /// Class.
    pub class: FaultClass,
    /// Process.
    pub pid: i32,
    /// How many.
    pub faults: u64,
    /// The slowest whose latency was measured: (ns in the kernel, the time
    /// it completed).
    pub slowest: Option<(u32, u64)>,
}

/// Faults of one leaf code site at one time (ns), for labelling bursts.
pub struct Site<'a> {
    /// When they completed (ns, the recording's clock).
    pub time: u64,
    /// Leaf function.
    pub site: &'a str,
    /// How many.
    pub faults: u64,
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
    // A lane per process, or per program (system-wide): programs get
    // negative lane ids, pids are positive.
    let lane = |owner: Owner| match owner {
        Owner::Process(pid) => pid,
        Owner::Program(id) => -1 - id as i32,
    };
    let points: Vec<Point> = model
        .timeline
        .iter()
        .map(|p| Point {
            time: p.time,
            class: p.class,
            pid: lane(p.owner),
            faults: p.faults,
            slowest: p.slowest,
        })
        .collect();
    let sites: Vec<Site<'_>> = model
        .timeline_sites
        .iter()
        .map(|p| Site {
            time: p.time,
            site: p
                .leaf
                .and_then(|leaf| model.frame_function(leaf))
                .unwrap_or(NO_STACK),
            faults: p.faults,
        })
        .collect();
    let processes: Vec<(i32, String)> = (model.report.processes.iter())
        .map(|p| (p.pid, p.comm.clone()))
        .chain(
            (model.programs.iter().enumerate())
                .map(|(id, name)| (lane(Owner::Program(id as u32)), name.clone())),
        )
        .collect();
    let resident = model.resident.as_ref().map_or(&[][..], |r| &r.series[..]);
    svg(
        &points,
        &sites,
        model.timeline_origin,
        (&processes, resident),
        "Page faults over time",
        &picture::subtitle(&model.report),
    )
}

/// A box on the canvas: x0 ≤ x1, y0 ≤ y1 (y grows down).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Box2 {
    /// Left.
    pub x0: f64,
    /// Top.
    pub y0: f64,
    /// Right.
    pub x1: f64,
    /// Bottom.
    pub y1: f64,
}

impl Box2 {
    /// Whether two boxes share any area (touching edges do not).
    pub fn overlaps(&self, other: &Box2) -> bool {
        self.x0 < other.x1 && other.x0 < self.x1 && self.y0 < other.y1 && other.y0 < self.y1
    }
}

/// The box of a burst label: centred at `x`, baseline `y`, `chars` long.
pub fn label_box(x: f64, y: f64, chars: usize) -> Box2 {
    let half = chars as f64 * LABEL_CHAR_W / 2.0;
    Box2 {
        x0: x - half,
        y0: y - LABEL_ASCENT,
        x1: x + half,
        y1: y + LABEL_DESCENT,
    }
}

/// Where a label of `chars` characters for `bar` goes: the lowest free spot above its bar, inside
/// the plot (`plot`), clear of every bar (`tops`: each bin's top y, bins of
/// width `bin_w` from `plot.x0`) and of the labels `placed`. None if the
/// plot has no room.
fn place_label(
    chars: usize,
    bar: Box2,
    plot: Box2,
    tops: &[f64],
    bin_w: f64,
    placed: &[Box2],
) -> Option<Box2> {
    let width = chars as f64 * LABEL_CHAR_W;
    if width > plot.x1 - plot.x0 - 4.0 {
        return None;
    }
    let centre = ((bar.x0 + bar.x1) / 2.0)
        .max(plot.x0 + 2.0 + width / 2.0)
        .min(plot.x1 - 2.0 - width / 2.0);
    let mut y = bar.y0 - 2.0 - LABEL_DESCENT;
    while y - LABEL_ASCENT >= plot.y0 + 2.0 {
        let b = label_box(centre, y, chars);
        let first = (((b.x0 - plot.x0) / bin_w).floor().max(0.0)) as usize;
        let last = (((b.x1 - plot.x0) / bin_w).ceil() as usize).min(tops.len());
        let clear_of_bars = tops[first.min(tops.len())..last]
            .iter()
            .all(|top| *top >= b.y1 + 1.0);
        let padded = Box2 {
            x0: b.x0 - 3.0,
            y0: b.y0 - 1.0,
            x1: b.x1 + 3.0,
            y1: b.y1 + 1.0,
        };
        if clear_of_bars && !placed.iter().any(|p| p.overlaps(&padded)) {
            return Some(b);
        }
        y -= 4.0;
    }
    None
}

/// A bin's slowest fault per class: (latency ns, end time, pid).
type Slowest = [Option<(u32, u64, i32)>; 3];

/// `1µs`, `10µs`, …, `1s` for a power of ten in ns.
fn decade_label(ns: f64) -> String {
    let (n, unit) = in_time_unit(ns);
    format!("{}{unit}", trim_float(n))
}

/// A duration for a person: `11.4 ms`, `250 µs`.
fn duration(ns: f64) -> String {
    match in_time_unit(ns) {
        (s, "s") => format!("{s:.2} s"),
        (ms, "ms") => format!("{ms:.1} ms"),
        (n, unit) => format!("{n:.0} {unit}"),
    }
}

/// The SVG. `origin` is time zero (the exec, or the first record);
/// `processes` names pids for the process lanes; `subtitle` says what
/// was captured and lost ([`crate::output::picture::subtitle`]).
///
/// Top to bottom: faults per bar, stacked by class, the highest bursts
/// labelled with their top code site; a latency lane (each bar's slowest
/// fault per class, as a span from its entry to its completion on a log
/// scale, the slowest of all labelled), when latency was measured; one
/// lane per process (the busiest few; the rest share one) when several
/// processes faulted; the resident memory of `resident` (time, pages by
/// kind: `record --resident`), when not empty.
pub fn svg(
    points: &[Point],
    sites: &[Site<'_>],
    origin: u64,
    (processes, resident): (&[(i32, String)], &[crate::model::ResidentPoint]),
    title: &str,
    subtitle: &str,
) -> String {
    let time = TimeAxis::new(points, origin);
    let bins = Bins::collect(points, sites, &time);
    let count = CountAxis::new(&bins.counts);
    let has_latency = bins.slowest.iter().flatten().any(Option::is_some);
    let busiest = bins.busiest();
    let lanes = if busiest.len() > 1 {
        busiest.len().min(PROCESS_LANES) + usize::from(busiest.len() > PROCESS_LANES)
    } else {
        0
    };
    let has_resident = !resident.is_empty();
    let rows = Rows::new(has_latency, has_resident, lanes);

    let mut s = String::new();
    header(&mut s, rows.height, title, subtitle);
    legend(&mut s);
    time_grid(
        &mut s,
        &time,
        (has_latency || has_resident || lanes > 0).then_some(rows.lanes_bottom),
    );
    count_grid(&mut s, &count);
    bars(&mut s, &bins.counts, &time, &count);
    burst_labels(&mut s, &bins, &time, &count);
    if has_latency {
        latency_lane(&mut s, &bins.slowest, rows.lane_top, &time, processes);
    }
    if has_resident {
        resident_lane(&mut s, resident, rows.resident_top, &time);
    }
    if lanes > 0 {
        process_lanes(
            &mut s,
            points,
            (&busiest, lanes),
            rows.process_top,
            &time,
            processes,
        );
    }
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle">time since start ({}); {:.1} {} recorded, one bar = {:.3} {}</text>"#,
        LEFT + PLOT_W / 2.0,
        rows.caption_y,
        time.unit,
        time.span_ns / time.scale,
        time.unit,
        time.bin_ns / time.scale,
        time.unit
    );
    s.push_str("</svg>\n");
    s
}

/// Width of the bar plot.
const PLOT_W: f64 = WIDTH - LEFT - RIGHT;
/// The x axis's y (the bars' bottom).
const AXIS_Y: f64 = TOP + PLOT_H;
/// Width of one bar.
const BAR_W: f64 = PLOT_W / BINS as f64;

/// Time on the x axis: the recording's span from `origin`, in [`BINS`]
/// bins, and the unit its numbers are shown in.
struct TimeAxis {
    origin: u64,
    span_ns: f64,
    bin_ns: f64,
    unit: &'static str,
    /// ns per `unit`.
    scale: f64,
}

impl TimeAxis {
    /// From `origin` to the last point (at least 1 ns).
    fn new(points: &[Point], origin: u64) -> TimeAxis {
        let end = points
            .iter()
            .map(|p| p.time)
            .max()
            .unwrap_or(origin)
            .max(origin + 1);
        let span_ns = (end - origin) as f64;
        let (unit, scale) = if span_ns >= 2e9 {
            ("s", 1e9)
        } else if span_ns >= 2e6 {
            ("ms", 1e6)
        } else {
            ("µs", 1e3)
        };
        TimeAxis {
            origin,
            span_ns,
            bin_ns: (span_ns / BINS as f64).max(1.0),
            unit,
            scale,
        }
    }

    /// The bin of a time (the recording's clock); the last holds the end.
    fn bin_of(&self, time: u64) -> usize {
        ((time.saturating_sub(self.origin) as f64 / self.bin_ns) as usize).min(BINS - 1)
    }

    /// The x of `ns` since the origin.
    fn x_of_ns(&self, ns: f64) -> f64 {
        LEFT + PLOT_W * ns / self.span_ns
    }

    /// The x of a time on the recording's clock.
    fn x_of_time(&self, time: f64) -> f64 {
        self.x_of_ns(time - self.origin as f64)
    }

    /// The left edge of a bin's bar.
    fn x_of(&self, bin: usize) -> f64 {
        LEFT + PLOT_W * bin as f64 / BINS as f64
    }
}

/// The points gathered per bin.
struct Bins<'a> {
    /// Faults per class.
    counts: Vec<[u64; 3]>,
    /// Faults per leaf code site.
    sites: Vec<HashMap<&'a str, u64>>,
    /// The slowest fault per class.
    slowest: Vec<Slowest>,
    /// Faults per process, over the whole recording.
    per_pid: BTreeMap<i32, u64>,
}

impl<'a> Bins<'a> {
    /// Sorts `points` and `sites` into the bins of `time`.
    fn collect(points: &[Point], sites: &[Site<'a>], time: &TimeAxis) -> Bins<'a> {
        let mut bins = Bins {
            counts: vec![[0u64; 3]; BINS],
            sites: vec![Default::default(); BINS],
            slowest: vec![[None; 3]; BINS],
            per_pid: Default::default(),
        };
        for p in points {
            let bin = time.bin_of(p.time);
            bins.counts[bin][p.class as usize] += p.faults;
            *bins.per_pid.entry(p.pid).or_default() += p.faults;
            if let Some((ns, end)) = p.slowest {
                let slot = &mut bins.slowest[bin][p.class as usize];
                if slot.map_or(true, |(old, _, _)| ns > old) {
                    *slot = Some((ns, end, p.pid));
                }
            }
        }
        for s in sites {
            *bins.sites[time.bin_of(s.time)].entry(s.site).or_default() += s.faults;
        }
        bins
    }

    /// Processes by faults, most first (then by pid).
    fn busiest(&self) -> Vec<(i32, u64)> {
        let mut busiest: Vec<(i32, u64)> = self.per_pid.iter().map(|(p, n)| (*p, *n)).collect();
        busiest.sort_by_key(|(pid, n)| (Reverse(*n), *pid));
        busiest
    }
}

/// Faults on the y axis: from 0 to `max` in ticks of `step`.
struct CountAxis {
    step: f64,
    max: f64,
}

impl CountAxis {
    /// Headroom above the tallest bar for its label: the axis runs to a
    /// tick at least a quarter above the peak.
    fn new(counts: &[[u64; 3]]) -> CountAxis {
        let peak = counts
            .iter()
            .map(|b| b.iter().sum::<u64>())
            .max()
            .unwrap_or(0)
            .max(1);
        let step = nice_step(peak as f64 * 1.25, 5.0).max(1.0);
        let max = ((peak as f64 * 1.25) / step).ceil() * step;
        CountAxis { step, max }
    }

    /// The y of a fault count.
    fn y_of(&self, count: f64) -> f64 {
        AXIS_Y - PLOT_H * count / self.max
    }
}

/// Where the rows below the bars go: the latency lane, the resident
/// memory, then the process lanes, then the caption.
struct Rows {
    lane_top: f64,
    resident_top: f64,
    process_top: f64,
    /// The bottom of the lanes (the time grid runs to it).
    lanes_bottom: f64,
    caption_y: f64,
    /// The whole picture's.
    height: f64,
}

impl Rows {
    /// With a latency lane or not, a resident-memory lane or not, and
    /// `lanes` process lanes.
    fn new(has_latency: bool, has_resident: bool, lanes: usize) -> Rows {
        let mut cursor = AXIS_Y + 34.0;
        let lane_top = cursor + 14.0;
        if has_latency {
            cursor = lane_top + LANE_H + 12.0;
        }
        let resident_top = cursor + 14.0;
        if has_resident {
            cursor = resident_top + LANE_H + 12.0;
        }
        let process_top = cursor + 14.0;
        if lanes > 0 {
            cursor = process_top + lanes as f64 * (PROCESS_LANE_H + 3.0) + 8.0;
        }
        let caption_y = cursor + 12.0;
        Rows {
            lane_top,
            resident_top,
            process_top,
            lanes_bottom: cursor,
            caption_y,
            height: caption_y + 16.0,
        }
    }
}

/// The SVG's head, background, title and subtitle.
fn header(s: &mut String, height: f64, title: &str, subtitle: &str) {
    let _ = writeln!(
        s,
        r##"<?xml version="1.0" standalone="no"?>
<svg version="1.1" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" xmlns="http://www.w3.org/2000/svg" font-family="Verdana, sans-serif" font-size="12">
<rect width="100%" height="100%" fill="#ffffff"/>
<text x="{}" y="24" text-anchor="middle" font-size="17">{}</text>
<text x="{}" y="44" text-anchor="middle" fill="#555">{}</text>"##,
        WIDTH / 2.0,
        escape(title),
        WIDTH / 2.0,
        escape(subtitle),
    );
}

/// The classes' colours, above the plot.
fn legend(s: &mut String) {
    for (i, name) in FaultClass::ALL.map(FaultClass::name).iter().enumerate() {
        let x = LEFT + PLOT_W - 240.0 + 80.0 * i as f64;
        let _ = writeln!(
            s,
            r#"<rect x="{x}" y="{}" width="12" height="12" fill="{}"/><text x="{}" y="{}">{name}</text>"#,
            TOP - 18.0,
            CLASS_COLORS[i],
            x + 16.0,
            TOP - 8.0
        );
    }
}

/// The time grid through the bars (and down to `lanes_bottom` through the
/// lanes, if any); the x axis's ticks and numbers.
fn time_grid(s: &mut String, time: &TimeAxis, lanes_bottom: Option<f64>) {
    let x_step = nice_step(time.span_ns / time.scale, 10.0);
    let mut t = 0.0;
    while t <= time.span_ns / time.scale + 1e-9 {
        let x = time.x_of_ns(t * time.scale);
        let _ = writeln!(
            s,
            r##"<line x1="{x:.1}" y1="{TOP}" x2="{x:.1}" y2="{AXIS_Y}" stroke="#eee"/><line x1="{x:.1}" y1="{AXIS_Y}" x2="{x:.1}" y2="{}" stroke="#000"/><text x="{x:.1}" y="{}" text-anchor="middle">{}</text>"##,
            AXIS_Y + 5.0,
            AXIS_Y + 18.0,
            trim_float(t)
        );
        if let Some(lanes_bottom) = lanes_bottom {
            let _ = writeln!(
                s,
                r##"<line x1="{x:.1}" y1="{}" x2="{x:.1}" y2="{lanes_bottom}" stroke="#eee"/>"##,
                AXIS_Y + 26.0
            );
        }
        t += x_step;
    }
}

/// The count grid and numbers, the plot's frame and axes, the y label.
fn count_grid(s: &mut String, count: &CountAxis) {
    let mut v = 0.0;
    while v <= count.max + 1e-9 {
        let y = count.y_of(v);
        let _ = writeln!(
            s,
            r##"<line x1="{}" y1="{y:.1}" x2="{}" y2="{y:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
            LEFT,
            LEFT + PLOT_W,
            LEFT - 6.0,
            y + 4.0,
            thousands(v as u64)
        );
        v += count.step;
    }
    let _ = writeln!(
        s,
        r##"<rect class="frame" x="{LEFT}" y="{TOP}" width="{PLOT_W}" height="{PLOT_H}" fill="none" stroke="#bbb"/>
<line class="axis" x1="{LEFT}" y1="{AXIS_Y}" x2="{}" y2="{AXIS_Y}" stroke="#000"/>
<line class="axis" x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{AXIS_Y}" stroke="#000"/>"##,
        LEFT + PLOT_W,
    );
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle" transform="rotate(-90 {} {})">faults per bar</text>"#,
        LEFT - 100.0,
        TOP + PLOT_H / 2.0,
        LEFT - 100.0,
        TOP + PLOT_H / 2.0
    );
}

/// The bars, stacked by class.
fn bars(s: &mut String, counts: &[[u64; 3]], time: &TimeAxis, count: &CountAxis) {
    for (bin, counts) in counts.iter().enumerate() {
        let mut base = 0.0;
        for (class, name) in FaultClass::ALL.map(FaultClass::name).iter().enumerate() {
            let n = counts[class] as f64;
            if n == 0.0 {
                continue;
            }
            let (y_top, y_bottom) = (count.y_of(base + n), count.y_of(base));
            let _ = writeln!(
                s,
                r#"<rect class="bar" x="{:.2}" y="{y_top:.2}" width="{:.2}" height="{:.2}" fill="{}"><title>{} {name} faults at {:.3} {}</title></rect>"#,
                time.x_of(bin),
                BAR_W,
                (y_bottom - y_top).max(0.5),
                CLASS_COLORS[class],
                n,
                bin as f64 * time.bin_ns / time.scale,
                time.unit
            );
            base += n;
        }
    }
}

/// Labels the bursts: the highest bars that stand apart, each label in
/// the lowest free spot above its bar (a leader line if lifted).
fn burst_labels(s: &mut String, bins: &Bins<'_>, time: &TimeAxis, count: &CountAxis) {
    let total = |bin: usize| bins.counts[bin].iter().sum::<u64>();
    let tops: Vec<f64> = (0..BINS)
        .map(|bin| match total(bin) {
            0 => AXIS_Y,
            n => count.y_of(n as f64).min(AXIS_Y - 0.5),
        })
        .collect();
    let plot = Box2 {
        x0: LEFT,
        y0: TOP,
        x1: LEFT + PLOT_W,
        y1: AXIS_Y,
    };
    let mut order: Vec<usize> = (0..BINS).filter(|b| total(*b) > 0).collect();
    order.sort_by_key(|b| (Reverse(total(*b)), *b));
    let mut labelled: Vec<usize> = Vec::new();
    let mut placed: Vec<Box2> = Vec::new();
    for bin in order.into_iter().take(4 * MAX_LABELS) {
        if labelled.len() == MAX_LABELS {
            break;
        }
        if labelled.iter().any(|l| l.abs_diff(bin) < BINS / 20) {
            continue;
        }
        let Some(site) = top_site(&bins.sites[bin]) else {
            continue;
        };
        let text = shorten(site, 32);
        let chars = text.chars().count();
        let bar = Box2 {
            x0: time.x_of(bin),
            y0: tops[bin],
            x1: time.x_of(bin) + BAR_W,
            y1: AXIS_Y,
        };
        let Some(b) = place_label(chars, bar, plot, &tops, BAR_W, &placed) else {
            continue;
        };
        let x = (b.x0 + b.x1) / 2.0;
        if tops[bin] - b.y1 > 6.0 {
            let bx = time.x_of(bin) + BAR_W / 2.0;
            let _ = writeln!(
                s,
                r##"<line class="leader" x1="{bx:.1}" y1="{:.1}" x2="{bx:.1}" y2="{:.1}" stroke="#888" stroke-width="0.7"/>"##,
                b.y1 + 1.0,
                tops[bin] - 1.0
            );
        }
        let _ = writeln!(
            s,
            r##"<text class="burst" x="{x:.2}" y="{:.2}" text-anchor="middle" font-family="monospace" font-size="{LABEL_FONT}" textLength="{:.2}" lengthAdjust="spacingAndGlyphs" fill="#222">{}</text>"##,
            b.y1 - LABEL_DESCENT,
            b.x1 - b.x0,
            escape(&text)
        );
        labelled.push(bin);
        placed.push(b);
    }
}

/// A bin's top code site: the most faults, the first name on a tie.
fn top_site<'a>(sites: &HashMap<&'a str, u64>) -> Option<&'a str> {
    sites
        .iter()
        .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
        .map(|(site, _)| *site)
}

/// The name of a lane: `comm[pid]` of a process (the name cut to 10), or
/// a program's (`processes` names both: programs have negative lanes).
fn process_name(processes: &[(i32, String)], lane: i32) -> String {
    let name = processes
        .iter()
        .find(|(l, _)| *l == lane)
        .map_or("?", |(_, name)| name.as_str());
    if lane < 0 {
        shorten(name, 14)
    } else {
        format!("{}[{lane}]", shorten(name, 10))
    }
}

/// The process lanes at `top`: one per busiest process, the rest (past
/// [`PROCESS_LANES`]) sharing the last of `lanes`; each bar shaded by the
/// faults in it.
fn process_lanes(
    s: &mut String,
    points: &[Point],
    (busiest, lanes): (&[(i32, u64)], usize),
    top: f64,
    time: &TimeAxis,
    processes: &[(i32, String)],
) {
    let unit = time.unit;
    let _ = writeln!(
        s,
        r##"<text x="{LEFT}" y="{}" fill="#555">processes (shade: faults per bar)</text>"##,
        top - 4.0
    );
    let lane_of: HashMap<i32, usize> = busiest
        .iter()
        .enumerate()
        .map(|(i, (pid, _))| (*pid, i.min(PROCESS_LANES)))
        .collect();
    let mut counts = vec![vec![0u64; BINS]; lanes];
    for p in points {
        counts[lane_of[&p.pid]][time.bin_of(p.time)] += p.faults;
    }
    for (lane, row) in counts.iter().enumerate() {
        let y = top + lane as f64 * (PROCESS_LANE_H + 3.0);
        let name = if lane < PROCESS_LANES {
            process_name(processes, busiest[lane].0)
        } else {
            format!("{} others", busiest.len() - PROCESS_LANES)
        };
        let faults: u64 = row.iter().sum();
        let _ = writeln!(
            s,
            r##"<text class="lane" x="{}" y="{:.1}" text-anchor="end" font-size="10">{}</text>"##,
            LEFT - 6.0,
            y + PROCESS_LANE_H - 2.0,
            escape(&name)
        );
        let max = row.iter().copied().max().unwrap_or(1).max(1) as f64;
        for (bin, n) in row.iter().enumerate().filter(|(_, n)| **n > 0) {
            let _ = writeln!(
                s,
                r#"<rect class="proc" x="{:.2}" y="{y:.1}" width="{BAR_W:.2}" height="{PROCESS_LANE_H}" fill="{}" fill-opacity="{:.2}"><title>{}: {n} of its {} faults at {:.3} {unit}</title></rect>"#,
                time.x_of(bin),
                PROCESS_COLORS[lane],
                0.3 + 0.7 * *n as f64 / max,
                escape(&name),
                thousands(faults),
                bin as f64 * time.bin_ns / time.scale
            );
        }
    }
}

/// The latency lane's vertical scale: log, in decades from
/// [`LATENCY_FLOOR_NS`], the lane's top at `top`.
struct LatencyScale {
    top: f64,
    decades: f64,
}

impl LatencyScale {
    /// Decades from 1 µs to the first power of ten above the slowest.
    fn new(slowest: &[Slowest], top: f64) -> LatencyScale {
        let max_ns = slowest
            .iter()
            .flatten()
            .flatten()
            .map(|(ns, _, _)| f64::from(*ns))
            .fold(LATENCY_FLOOR_NS, f64::max);
        LatencyScale {
            top,
            decades: (max_ns / LATENCY_FLOOR_NS).log10().floor().max(0.0) + 1.0,
        }
    }

    /// The y of a latency.
    fn y_of(&self, ns: f64) -> f64 {
        let at = (ns.max(LATENCY_FLOOR_NS) / LATENCY_FLOOR_NS).log10() / self.decades;
        // 6 pixels inside the lane's frame at either end.
        self.top + LANE_H - 6.0 - (LANE_H - 12.0) * at.min(1.0)
    }
}

/// The latency lane at `top`: each bin's slowest fault per class as a span
/// from its entry to its completion, at its latency on a log scale; the
/// slowest of all labelled with its duration.
fn latency_lane(
    s: &mut String,
    slowest: &[Slowest],
    top: f64,
    time: &TimeAxis,
    processes: &[(i32, String)],
) {
    let scale = LatencyScale::new(slowest, top);
    let (x0, x1) = (LEFT, WIDTH - RIGHT);
    let _ = writeln!(
        s,
        r##"<text x="{x0}" y="{}" fill="#555">fault latency (slowest per bar and class; a span from entry to completion)</text>
<rect x="{x0}" y="{top}" width="{}" height="{LANE_H}" fill="none" stroke="#bbb"/>"##,
        top - 4.0,
        x1 - x0
    );
    for d in 0..=scale.decades as u32 {
        let ns = LATENCY_FLOOR_NS * 10f64.powi(d as i32);
        let y = scale.y_of(ns);
        let _ = writeln!(
            s,
            r##"<line x1="{x0}" y1="{y:.1}" x2="{x1}" y2="{y:.1}" stroke="#eee"/><text x="{}" y="{:.1}" text-anchor="end" font-size="10">{}</text>"##,
            x0 - 6.0,
            y + 3.0,
            decade_label(ns)
        );
    }
    let (marks, longest) = latency_marks(s, slowest, &scale, time, processes);
    // The slowest fault's duration beside its mark.
    if let Some((ns, mark)) = longest {
        let text = duration(ns);
        let lane = Box2 {
            x0: x0 + 1.0,
            y0: top + 1.0,
            x1: x1 - 1.0,
            y1: top + LANE_H - 1.0,
        };
        if let Some(b) = slowest_label(mark, text.chars().count(), lane, &marks) {
            let _ = writeln!(
                s,
                r##"<text class="slowest" x="{:.2}" y="{:.2}" text-anchor="middle" font-family="monospace" font-size="{LABEL_FONT}" textLength="{:.2}" lengthAdjust="spacingAndGlyphs" fill="#222">{}</text>"##,
                (b.x0 + b.x1) / 2.0,
                b.y1 - LABEL_DESCENT,
                b.x1 - b.x0,
                escape(&text)
            );
        }
    }
}

/// The colours of the resident lane's kinds (anon, file, shmem).
const RESIDENT_COLORS: [&str; 3] = ["#dd8452", "#4c72b0", "#55a868"];

/// The recorded processes' resident memory over time, stacked by kind
/// (anonymous at the bottom), each point held until the next, on a linear
/// scale up to the highest total.
fn resident_lane(
    s: &mut String,
    series: &[crate::model::ResidentPoint],
    top: f64,
    time: &TimeAxis,
) {
    let (x0, x1) = (LEFT, WIDTH - RIGHT);
    let highest = series
        .iter()
        .map(|p| p.1.iter().sum::<u64>())
        .max()
        .unwrap_or(0);
    let bytes = highest * crate::analysis::resident::PAGE_BYTES;
    let _ = writeln!(
        s,
        r##"<text x="{x0}" y="{}" fill="#555">resident memory by kind (<tspan fill="{}">anon</tspan>, <tspan fill="{}">file</tspan>, <tspan fill="{}">shmem</tspan>), up to {}</text>
<rect x="{x0}" y="{top}" width="{}" height="{LANE_H}" fill="none" stroke="#bbb"/>
<text x="{}" y="{:.1}" text-anchor="end" font-size="10">{}</text>"##,
        top - 4.0,
        RESIDENT_COLORS[0],
        RESIDENT_COLORS[1],
        RESIDENT_COLORS[2],
        crate::text::human_bytes(bytes),
        x1 - x0,
        x0 - 6.0,
        top + 8.0,
        crate::text::human_bytes(bytes)
    );
    if highest == 0 {
        return;
    }
    let y_of = |pages: u64| top + LANE_H - LANE_H * pages as f64 / highest as f64;
    // One value per 2 px column (its highest), held until the next column.
    let mut columns: Vec<(f64, [u64; 3])> = Vec::new();
    for &(t, pages) in series {
        let x = (time.x_of_time(t as f64).clamp(x0, x1) / 2.0).floor() * 2.0;
        match columns.last_mut() {
            Some(last) if last.0 == x => {
                if pages.iter().sum::<u64>() >= last.1.iter().sum::<u64>() {
                    last.1 = pages;
                }
            }
            _ => columns.push((x, pages)),
        }
    }
    // Stacked from the bottom, anonymous first: each kind's area reaches
    // the sum of the kinds up to it, drawn from the highest down so that
    // the lower ones cover theirs.
    for kind in (0..3).rev() {
        let upto = |p: &[u64; 3]| p[..=kind].iter().sum::<u64>();
        let bottom = top + LANE_H;
        let mut points = format!("{:.1},{bottom:.1} ", columns[0].0);
        for (i, (x, pages)) in columns.iter().enumerate() {
            let next = columns.get(i + 1).map_or(x1, |c| c.0);
            let y = y_of(upto(pages));
            let _ = write!(points, "{x:.1},{y:.1} {next:.1},{y:.1} ");
        }
        let _ = write!(points, "{x1:.1},{bottom:.1}");
        let _ = writeln!(
            s,
            r##"<polygon class="resident" points="{points}" fill="{}"/>"##,
            RESIDENT_COLORS[kind]
        );
    }
}

/// Draws each bin's slowest fault per class as a span; returns the spans'
/// boxes and the slowest fault (its ns and box; the first on a tie).
fn latency_marks(
    s: &mut String,
    slowest: &[Slowest],
    scale: &LatencyScale,
    time: &TimeAxis,
    processes: &[(i32, String)],
) -> (Vec<Box2>, Option<(f64, Box2)>) {
    let mut longest: Option<(f64, Box2)> = None;
    let mut marks: Vec<Box2> = Vec::new();
    for per_class in slowest {
        for (class, slot) in per_class.iter().enumerate() {
            let Some((ns, end, pid)) = *slot else {
                continue;
            };
            let ns = f64::from(ns);
            let end_x = time.x_of_time(end as f64);
            let start_x = time.x_of_time(end as f64 - ns).max(LEFT).min(end_x - 2.0);
            let y = scale.y_of(ns);
            let mark = Box2 {
                x0: start_x,
                y0: y - 2.0,
                x1: start_x + (end_x - start_x).max(2.0),
                y1: y + 2.0,
            };
            let _ = writeln!(
                s,
                r#"<rect class="latency" x="{:.2}" y="{:.1}" width="{:.2}" height="4" fill="{}"><title>{} fault of {}: {} in the kernel, ending at {:.3} {}</title></rect>"#,
                mark.x0,
                mark.y0,
                mark.x1 - mark.x0,
                CLASS_COLORS[class],
                FaultClass::ALL[class].name(),
                escape(&process_name(processes, pid)),
                duration(ns),
                (end as f64 - time.origin as f64) / time.scale,
                time.unit
            );
            if longest.map_or(true, |(old, _)| ns > old) {
                longest = Some((ns, mark));
            }
            marks.push(mark);
        }
    }
    (marks, longest)
}

/// Where a label of `chars` goes beside `mark`: right, left, below or
/// above it (shifted sideways into the lane when it sticks out), the first
/// spot inside `lane` clear of every one of `marks`.
fn slowest_label(mark: Box2, chars: usize, lane: Box2, marks: &[Box2]) -> Option<Box2> {
    let half = chars as f64 * LABEL_CHAR_W / 2.0;
    let (cx, cy) = ((mark.x0 + mark.x1) / 2.0, (mark.y0 + mark.y1) / 2.0);
    let baseline = cy + (LABEL_ASCENT - LABEL_DESCENT) / 2.0;
    let inside =
        |b: &Box2| b.x0 >= lane.x0 && b.x1 <= lane.x1 && b.y0 >= lane.y0 && b.y1 <= lane.y1;
    let candidates = [
        label_box(mark.x1 + 4.0 + half, baseline, chars),
        label_box(mark.x0 - 4.0 - half, baseline, chars),
        label_box(cx, mark.y1 + 2.0 + LABEL_ASCENT, chars),
        label_box(cx, mark.y0 - 2.0 - LABEL_DESCENT, chars),
    ];
    candidates
        .iter()
        .map(|b| {
            let dx = (lane.x0 - b.x0).max(0.0) - (b.x1 - lane.x1).max(0.0);
            Box2 {
                x0: b.x0 + dx,
                x1: b.x1 + dx,
                ..*b
            }
        })
        .find(|b| inside(b) && !marks.iter().any(|m| m.overlaps(b)))
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
        let mut sites = Vec::new();
        for i in 0..1000u64 {
            let time = 1_000_000 + i * 1000;
            points.push(Point {
                time,
                class: FaultClass::Minor,
                pid: 1,
                faults: 1,
                slowest: None,
            });
            sites.push(Site {
                time,
                site: "touch_pages",
                faults: 1,
            });
        }
        for i in 0..10u64 {
            let time = 1_500_000 + i;
            points.push(Point {
                time,
                class: FaultClass::Major,
                pid: 1,
                faults: 1,
                slowest: None,
            });
            sites.push(Site {
                time,
                site: "read_<file>",
                faults: 1,
            });
        }
        let svg = svg(
            &points,
            &sites,
            1_000_000,
            (&[], &[]),
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
            ">1,010 faults: captured 1,010 (100.0%), lost 0 records<",
            "999.0 µs recorded, one bar = 4.995 µs",
        ] {
            assert!(svg.contains(needle), "missing {needle}");
        }
        assert!(svg.contains("#d7301f\"><title>10 major faults"));
        assert!(!svg.contains("class=\"lane\"") && !svg.contains("class=\"latency\""));
        assert!(!svg.contains("class=\"resident\""));

        // With the resident memory (record --resident): a lane of three
        // areas, anonymous (drawn last) reaching 1 MiB of the 1.5 MiB high.
        let series = [
            (1_000_000, [0, 128, 0]),
            (1_500_000, [256, 128, 0]),
            (1_900_000, [256, 128, 0]),
        ];
        let with = super::svg(&points, &sites, 1_000_000, (&[], &series), "t", "s");
        assert!(with.contains("resident memory by kind"), "{with}");
        assert!(with.contains("up to 1.5 MiB"), "{with}");
        let areas: Vec<&str> = with
            .lines()
            .filter(|l| l.contains("class=\"resident\""))
            .collect();
        assert_eq!(areas.len(), 3);
        assert!(
            areas[2].contains(RESIDENT_COLORS[0]),
            "anonymous last: {}",
            areas[2]
        );
        // The lane runs from y = top to top + LANE_H: anonymous memory
        // reaches two thirds of its height.
        let ys: Vec<f64> = (areas[2].split('"').nth(3).unwrap().split_whitespace())
            .map(|p| p.split_once(',').unwrap().1.parse().unwrap())
            .collect();
        let (low, high) = ys
            .iter()
            .fold((f64::MAX, f64::MIN), |(l, h), &y| (l.min(y), h.max(y)));
        assert!(
            ((high - low) - LANE_H * 2.0 / 3.0).abs() < 0.2,
            "{low} {high}"
        );
    }

    /// A bin's top site has the most faults; a tie goes to the first name.
    #[test]
    fn top_site_of_a_bin() {
        let sites: HashMap<&str, u64> = [("b", 3), ("a", 3), ("c", 1)].into_iter().collect();
        assert_eq!(top_site(&sites), Some("a"));
        assert_eq!(top_site(&HashMap::new()), None);
    }

    /// The time axis: its unit follows the span; the last bin holds the end.
    #[test]
    fn time_axis_units_and_bins() {
        let at = |time| Point {
            time,
            class: FaultClass::Minor,
            pid: 1,
            faults: 1,
            slowest: None,
        };
        for (end, unit) in [(1_000u64, "µs"), (3_000_000, "ms"), (5_000_000_000, "s")] {
            let time = TimeAxis::new(&[at(100 + end)], 100);
            assert_eq!(time.unit, unit, "{end}");
            assert_eq!(time.bin_of(100 + end), BINS - 1);
            assert_eq!(time.bin_of(0), 0);
            assert!((time.x_of_time((100 + end) as f64) - (LEFT + PLOT_W)).abs() < 1e-6);
        }
    }

    /// The slowest fault's label goes right of its mark, else left, below
    /// or above, inside the lane and clear of the other marks.
    #[test]
    fn slowest_label_spots() {
        let lane = Box2 {
            x0: 100.0,
            y0: 0.0,
            x1: 500.0,
            y1: 80.0,
        };
        let mark = |x0: f64, y: f64| Box2 {
            x0,
            y0: y - 2.0,
            x1: x0 + 20.0,
            y1: y + 2.0,
        };
        // The marks include the slowest's own.
        let m = mark(200.0, 40.0);
        let right = slowest_label(m, 6, lane, &[m]).unwrap();
        assert!(right.x0 > 220.0);
        let m = mark(470.0, 40.0);
        let left = slowest_label(m, 6, lane, &[m]).unwrap();
        assert!(left.x1 < 470.0);
        // Marks on both sides: below.
        let m = mark(200.0, 40.0);
        let crowded = [m, mark(230.0, 40.0), mark(160.0, 40.0)];
        let below = slowest_label(m, 6, lane, &crowded).unwrap();
        assert!(below.y0 > 42.0);
        // No room anywhere in a lane too small.
        let tiny = Box2 { y1: 5.0, ..lane };
        let m = mark(200.0, 2.0);
        assert_eq!(slowest_label(m, 6, tiny, &[m]), None);
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
