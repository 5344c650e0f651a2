//! Text shared by every stage that shows names and numbers: names from the
//! profiled world made safe to print, thousands separators, shortening.

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

/// `s` cut to `width` characters, `…` marking the cut.
pub fn truncate(s: &str, width: usize) -> String {
    if s.chars().count() <= width {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(width.saturating_sub(1)).collect();
        t.push('…');
        t
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

/// A path's file name; `[heap]` and other pseudo-paths stay whole.
pub fn short(path: &str) -> &str {
    if path.starts_with('[') {
        path
    } else {
        path.rsplit('/').next().unwrap_or(path)
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
}
