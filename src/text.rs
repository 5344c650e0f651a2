//! Text shared by every stage that shows names and numbers: names from the
//! profiled world made safe to print, markup escaping, thousands
//! separators, shortening and wrapping, times, sizes, code sites, UTC dates.

use std::borrow::Cow;
use std::fmt::Write;

/// A name from the profiled world (symbol, `comm`, argument, path), made
/// safe to show anywhere: control characters (C0, DEL, C1), the Unicode
/// bidirectional overrides and isolates, and the non-characters U+FFFE and
/// U+FFFF are replaced by a visible escape (`\n`, `\t`, `\r`, `\x1b`,
/// `\u{9b}`). So a terminal receives no escape sequence, an SVG stays valid
/// XML (XML 1.0 forbids most C0 characters even as references) and a folded
/// line stays one stack. Everything else, `<>&"` included, is left to each
/// output's own escaping.
pub fn display_safe(name: &str) -> Cow<'_, str> {
    let unsafe_char = |c: char| {
        c.is_control()
            || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{fffe}' | '\u{ffff}')
    };
    if !name.chars().any(unsafe_char) {
        return Cow::Borrowed(name);
    }
    let mut out = String::with_capacity(name.len() + 8);
    for c in name.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if unsafe_char(c) && (c as u32) < 0x80 => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if unsafe_char(c) => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// [`display_safe`] into an owned `String`.
pub fn safe(name: &str) -> String {
    display_safe(name).into_owned()
}

/// `1234567` → `1,234,567`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `s` within `width` characters, cut in the middle with `…` where it
/// carries least: a path keeps its file name (`/usr/lib/py…/_ssl.so`),
/// anything else keeps a third of its start and two thirds of its end,
/// where a function's own name and a `file:line` are.
pub fn truncate(s: &str, width: usize) -> String {
    let chars: Vec<char> = s.chars().collect();
    if chars.len() <= width {
        return s.to_string();
    }
    if width == 0 {
        return String::new();
    }
    let room = width - 1;
    let name_len = chars.len() - chars.iter().rposition(|c| *c == '/').unwrap_or(0);
    let tail = if s.contains('/') && name_len < room {
        name_len
    } else {
        room - room / 3
    };
    let head = room - tail;
    let mut out: String = chars[..head].iter().collect();
    out.push('…');
    out.extend(&chars[chars.len() - tail..]);
    out
}

/// A file name within `width` characters: cut in the middle keeping two
/// thirds of its start, which tells files apart (`libplugin_wi…ion.so`).
pub fn truncate_file_name(name: &str, width: usize) -> String {
    let chars: Vec<char> = name.chars().collect();
    if chars.len() <= width || width == 0 {
        return truncate(name, width);
    }
    let room = width - 1;
    let head = room - room / 3;
    let mut out: String = chars[..head].iter().collect();
    out.push('…');
    out.extend(&chars[chars.len() - (room - head)..]);
    out
}

/// `text` wrapped at spaces into lines of at most `width` characters, the
/// lines after the first indented by `indent` spaces (a word longer than a
/// line stays whole: a path is not broken).
pub fn wrap(text: &str, width: usize, indent: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split(' ') {
        let len = line.chars().count();
        if len > 0 && len + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut line));
        }
        if line.is_empty() {
            if !lines.is_empty() {
                line.push_str(&" ".repeat(indent));
            }
        } else {
            line.push(' ');
        }
        line.push_str(word);
    }
    lines.push(line);
    lines
}

/// Text or an attribute value (in double or single quotes) for an SVG or
/// HTML page: visible escapes for control characters (which XML 1.0
/// forbids, see [`display_safe`]), then `&<>"'` as entities.
pub fn xml_text(s: &str) -> String {
    let s = display_safe(s);
    let mut out = String::with_capacity(s.len() + s.len() / 8);
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Bytes in lower-case hex (build-ids, as readelf and perf print them):
/// the symbolizer's, so that a build-id reads the same in its messages
/// and in pfprof's.
pub use pfprof_symbolize::hex;

/// A path's file name; `[heap]` and other pseudo-paths stay whole.
pub fn short(path: &str) -> &str {
    if path.starts_with('[') {
        path
    } else {
        path.rsplit('/').next().unwrap_or(path)
    }
}

/// A time in ns in the unit that suits it: seconds from 1 s, ms from
/// 1 ms, else µs: `(11.4, "ms")`. Each output chooses the precision.
pub fn in_time_unit(ns: f64) -> (f64, &'static str) {
    if ns >= 1e9 {
        (ns / 1e9, "s")
    } else if ns >= 1e6 {
        (ns / 1e6, "ms")
    } else {
        (ns / 1e3, "µs")
    }
}

/// `1500` → `1.5µs`; below a µs in ns, seconds with two decimals.
pub fn human_ns(ns: u64) -> String {
    if ns < 1_000 {
        return format!("{ns}ns");
    }
    match in_time_unit(ns as f64) {
        (s, "s") => format!("{s:.2}s"),
        (n, unit) => format!("{n:.1}{unit}"),
    }
}

/// A size for a person: `64 MiB` when whole, else `1.5 MiB` from 1 MiB,
/// `12 KiB` below.
pub fn human_bytes(bytes: u64) -> String {
    const MIB: u64 = 1 << 20;
    if bytes >= MIB && bytes % MIB == 0 {
        format!("{} MiB", bytes / MIB)
    } else if bytes >= MIB {
        format!("{:.1} MiB", bytes as f64 / MIB as f64)
    } else {
        format!("{} KiB", bytes >> 10)
    }
}

/// A code site as a person reads it: `init_tables (main.c:21)`, or the
/// function alone without a file and line.
pub fn site_label(function: &str, file: Option<&str>, line: Option<u32>) -> String {
    match (file, line) {
        (Some(file), Some(line)) => format!("{function} ({}:{line})", short(file)),
        _ => function.to_string(),
    }
}

/// A UTC time to the second.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Utc {
    /// Year (proleptic Gregorian).
    pub year: i64,
    /// 1 to 12.
    pub month: u32,
    /// 1 to 31.
    pub day: u32,
    /// 0 to 23.
    pub hour: i64,
    /// 0 to 59.
    pub minute: i64,
    /// 0 to 59.
    pub second: i64,
}

impl Utc {
    /// The time `epoch_ns` ns after 1970-01-01 00:00 UTC.
    pub fn of_epoch_ns(epoch_ns: i64) -> Utc {
        let secs = epoch_ns.div_euclid(1_000_000_000);
        let (days, day_secs) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
        let (year, month, day) = civil_from_days(days);
        Utc {
            year,
            month,
            day,
            hour: day_secs / 3600,
            minute: day_secs / 60 % 60,
            second: day_secs % 60,
        }
    }

    /// Now, by the system clock.
    pub fn now() -> Utc {
        let ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX));
        Utc::of_epoch_ns(ns)
    }
}

/// The proleptic Gregorian date of a day since 1970-01-01 (Howard
/// Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// Powers of two as bpftrace prints them: `512`, `1K`, `4M`.
pub fn short_ns(ns: u64) -> String {
    match ns {
        u64::MAX => "inf".into(),
        n if n >= 1 << 30 && n % (1 << 30) == 0 => format!("{}G", n >> 30),
        n if n >= 1 << 20 && n % (1 << 20) == 0 => format!("{}M", n >> 20),
        n if n >= 1 << 10 && n % (1 << 10) == 0 => format!("{}K", n >> 10),
        n => n.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_safe_escapes() {
        for (name, want) in [
            ("main", "main"),
            ("evil<&\"]]>", "evil<&\"]]>"),
            ("a;b c", "a;b c"),
            ("f\u{1}g", "f\\x01g"),
            ("line\nbreak", "line\\nbreak"),
            ("tab\tcr\r", "tab\\tcr\\r"),
            ("\x1b[31mred\x1b[0m", "\\x1b[31mred\\x1b[0m"),
            ("nul\0", "nul\\x00"),
            ("del\u{7f}", "del\\x7f"),
            ("csi\u{9b}2J", "csi\\u{9b}2J"),
            ("rtl\u{202e}txt", "rtl\\u{202e}txt"),
            ("iso\u{2066}x", "iso\\u{2066}x"),
            ("non\u{fffe}\u{ffff}", "non\\u{fffe}\\u{ffff}"),
            ("lossy \u{fffd} µs 日本", "lossy \u{fffd} µs 日本"),
            ("", ""),
        ] {
            let got = display_safe(name);
            assert_eq!(got, want, "{name:?}");
            assert_eq!(
                matches!(got, Cow::Borrowed(_)),
                name == want,
                "{name:?} is copied only when it changes"
            );
            assert!(
                !got.chars().any(|c| c.is_control()),
                "{got:?} still holds a control character"
            );
        }
    }

    /// What is missing, the subtitle and the warnings, from the counts:
    /// complete; ring buffer overrun; faults missing with no lost record;
    /// no kernel counts (lost records stand for the faults).
    #[test]
    fn grouping() {
        for (n, want) in [
            (0, "0"),
            (999, "999"),
            (1000, "1,000"),
            (262144, "262,144"),
            (1234567, "1,234,567"),
        ] {
            assert_eq!(thousands(n), want);
        }
    }

    #[test]
    fn truncation_keeps_the_useful_end() {
        for (s, width, want) in [
            ("main", 10, "main"),
            ("exactly10!", 10, "exactly10!"),
            (
                "/usr/lib/python3.11/lib-dynload/_ssl.cpython-311-x86_64-linux-gnu.so",
                50,
                "/usr/lib/pyt…/_ssl.cpython-311-x86_64-linux-gnu.so",
            ),
            ("/a/very_long_library_name.so", 12, "/a/…_name.so"),
            (
                "std::vector<int>::_M_realloc_insert",
                20,
                "std::v…ealloc_insert",
            ),
            ("abcdef", 1, "…"),
            ("abcdef", 0, ""),
        ] {
            let got = truncate(s, width);
            assert_eq!(got, want, "{s} in {width}");
            assert!(got.chars().count() <= width);
        }
    }

    #[test]
    fn file_names_keep_their_start() {
        assert_eq!(truncate_file_name("libc.so.6", 20), "libc.so.6");
        assert_eq!(
            truncate_file_name("libplugin_with_a_very_long_name.so", 16),
            "libplugin_…me.so"
        );
    }

    #[test]
    fn wrapping() {
        assert_eq!(wrap("a bb ccc", 4, 2), ["a bb", "  ccc"]);
        assert_eq!(wrap("short", 100, 2), ["short"]);
        assert_eq!(
            wrap("x /a/path/longer/than/the/line y", 10, 2),
            ["x", "  /a/path/longer/than/the/line", "  y"]
        );
    }

    /// Sizes in binary units, whole where they are.
    #[test]
    fn sizes() {
        for (bytes, want) in [
            (64 << 20, "64 MiB"),
            (3 << 19, "1.5 MiB"),
            (32 << 10, "32 KiB"),
            (1000, "0 KiB"),
        ] {
            assert_eq!(human_bytes(bytes), want);
        }
    }

    /// A site with its file and line, or its function alone.
    #[test]
    fn site_labels() {
        assert_eq!(
            site_label("f", Some("/src/a/main.c"), Some(21)),
            "f (main.c:21)"
        );
        assert_eq!(site_label("f", Some("/src/a/main.c"), None), "f");
        assert_eq!(site_label("[unknown]", None, None), "[unknown]");
    }

    /// Markup and quotes become entities, control characters escapes.
    #[test]
    fn xml_escaping() {
        assert_eq!(
            xml_text("a<b>&\"c'\x1b"),
            "a&lt;b&gt;&amp;&quot;c&#39;\\x1b"
        );
    }

    /// Dates and times across leap years and before the epoch.
    #[test]
    fn utc_times() {
        let t = |y, mo, d, h, mi, s| Utc {
            year: y,
            month: mo,
            day: d,
            hour: h,
            minute: mi,
            second: s,
        };
        assert_eq!(Utc::of_epoch_ns(0), t(1970, 1, 1, 0, 0, 0));
        assert_eq!(
            Utc::of_epoch_ns(1_709_164_800_000_000_000 + 3_661_000_000_000),
            t(2024, 2, 29, 1, 1, 1)
        );
        assert_eq!(
            Utc::of_epoch_ns(-1_000_000_000),
            t(1969, 12, 31, 23, 59, 59)
        );
    }

    /// Human-readable durations and bucket bounds.
    #[test]
    fn formatting() {
        for (ns, want) in [
            (0, "0ns"),
            (999, "999ns"),
            (1500, "1.5µs"),
            (2_500_000, "2.5ms"),
            (3_000_000_000, "3.00s"),
        ] {
            assert_eq!(human_ns(ns), want);
        }
        for (ns, want) in [
            (512, "512"),
            (1024, "1K"),
            (4 << 20, "4M"),
            (1 << 30, "1G"),
            (u64::MAX, "inf"),
        ] {
            assert_eq!(short_ns(ns), want);
        }
    }
}
