//! C++ names as `c++filt` prints them. The C++ runtime's own demangler
//! (libstdc++'s `__cxa_demangle`, the libiberty code c++filt runs) gives
//! them, with c++filt's verbose spelling of the standard abbreviations;
//! cpp_demangle is the fallback where libstdc++ cannot be loaded or a name
//! is too long for it: against c++filt, cpp_demangle 0.5.1 drops
//! parameters (naming another overload) and prints literals its own way
//! (`(unsigned int)1` for `1u`).

/// `name` as `c++filt` prints it, `None` if it does not demangle.
pub(crate) fn cxx(name: &str) -> Option<String> {
    match crate::sys::cxa_demangle(name) {
        Some(text) => Some(verbose(&text)),
        None => special(name).or_else(|| ordinary(name)),
    }
}

/// The abbreviations `__cxa_demangle` prints for the standard
/// substitutions (`Ss`, `Si`, `So`, `Sd`) spelled out as c++filt
/// (DMGL_VERBOSE) does.
const EXPANSIONS: [(&str, &str); 4] = [
    (
        "std::string",
        "std::basic_string<char, std::char_traits<char>, std::allocator<char> >",
    ),
    (
        "std::istream",
        "std::basic_istream<char, std::char_traits<char> >",
    ),
    (
        "std::ostream",
        "std::basic_ostream<char, std::char_traits<char> >",
    ),
    (
        "std::iostream",
        "std::basic_iostream<char, std::char_traits<char> >",
    ),
];

/// `text` with each abbreviation of [`EXPANSIONS`] that stands as a whole
/// name spelled out; `> >` stays apart as c++filt writes it.
fn verbose(text: &str) -> String {
    if !text.contains("std::") {
        return text.to_string();
    }
    let is_name = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    'scan: while i < text.len() {
        let whole_start = i == 0 || !(is_name(bytes[i - 1]) || bytes[i - 1] == b':');
        if whole_start && bytes[i] == b's' {
            for (short, long) in EXPANSIONS {
                let end = i + short.len();
                if text[i..].starts_with(short) && !bytes.get(end).is_some_and(|&c| is_name(c)) {
                    out.push_str(long);
                    if bytes.get(end) == Some(&b'>') {
                        out.push(' ');
                    }
                    i = end;
                    continue 'scan;
                }
            }
        }
        let c = text[i..].chars().next().unwrap_or_default();
        out.push(c);
        i += c.len_utf8().max(1);
    }
    out
}

/// `c++filt`'s name for an Itanium special name (`_ZTV`, `_ZTT`, `_ZTh`,
/// `_ZTv`, `_ZTc`), `None` for every other name or when its parts do not
/// demangle.
fn special(name: &str) -> Option<String> {
    let rest = name.strip_prefix("_ZT")?;
    let (kind, rest) = rest.split_at_checked(1)?;
    match kind {
        // vtable and VTT take a type, as typeinfo (`_ZTI`) does, which
        // cpp_demangle prints in c++filt's words.
        "V" | "T" => {
            let as_typeinfo = ordinary(&format!("_ZTI{rest}"))?;
            let ty = as_typeinfo.strip_prefix("typeinfo for ")?;
            let what = if kind == "V" { "vtable" } else { "VTT" };
            Some(format!("{what} for {ty}"))
        }
        // Thunks: call offsets, then the encoding of the target function.
        "h" => Some(format!(
            "non-virtual thunk to {}",
            ordinary(&format!("_Z{}", skip_offset(rest, 1)?))?
        )),
        "v" => Some(format!(
            "virtual thunk to {}",
            ordinary(&format!("_Z{}", skip_offset(rest, 2)?))?
        )),
        "c" => {
            // Two call offsets, each `h <number> _` or `v <number> _ <number> _`.
            let mut rest = rest;
            for _ in 0..2 {
                let (kind, after) = rest.split_at_checked(1)?;
                rest = match kind {
                    "h" => skip_offset(after, 1)?,
                    "v" => skip_offset(after, 2)?,
                    _ => return None,
                };
            }
            Some(format!(
                "covariant return thunk to {}",
                ordinary(&format!("_Z{rest}"))?
            ))
        }
        _ => None,
    }
}

/// `rest` after `count` `[n]<digits>_` numbers.
fn skip_offset(mut rest: &str, count: usize) -> Option<&str> {
    for _ in 0..count {
        let digits = rest.strip_prefix('n').unwrap_or(rest);
        let end = digits.find('_')?;
        if end == 0 || !digits[..end].bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        rest = &digits[end + 1..];
    }
    Some(rest)
}

/// cpp_demangle's answer, unless it is in its own `{...}` notation.
fn ordinary(name: &str) -> Option<String> {
    let symbol = cpp_demangle::Symbol::new(name.as_bytes()).ok()?;
    let text = symbol.demangle().ok()?;
    (!text.starts_with('{')).then_some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standard_abbreviations_spelled_out() {
        let s = "std::basic_string<char, std::char_traits<char>, std::allocator<char> >";
        assert_eq!(
            verbose("std::string::size() const"),
            format!("{s}::size() const")
        );
        assert_eq!(
            verbose("std::hash<std::string>::operator()(std::string) const"),
            format!("std::hash<{s} >::operator()({s}) const")
        );
        assert_eq!(
            verbose("std::istream::get()"),
            "std::basic_istream<char, std::char_traits<char> >::get()"
        );
        // Not abbreviations: longer names, names inside another namespace.
        for text in [
            "std::string_view_like()",
            "foo::std::string::f()",
            "mystd::string()",
            "std::__cxx11::basic_string<char>::f()",
            "f(é, std::stringy)",
        ] {
            assert_eq!(verbose(text), text);
        }
    }

    /// The cases, where cpp_demangle 0.5.1 differs from c++filt.
    #[test]
    fn as_cxxfilt_prints() {
        if crate::sys::cxa_demangle("_Z1fv").is_none() {
            return; // no libstdc++ here
        }
        assert_eq!(
            cxx("_ZNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEC1IS3_EEPKcRKS3_").as_deref(),
            Some("std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >::basic_string<std::allocator<char> >(char const*, std::allocator<char> const&)")
        );
        assert_eq!(
            cxx("_Z10push_blockP7rtx_def8poly_intILj1ElEi").as_deref(),
            Some("push_block(rtx_def*, poly_int<1u, long>, int)")
        );
        assert_eq!(cxx("_ZTV3Foo").as_deref(), Some("vtable for Foo"));
        assert_eq!(
            cxx("_ZN3foo3barEv.cold").as_deref(),
            Some("foo::bar() [clone .cold]")
        );
        // Hostile: too long for the runtime, a NUL, not a name.
        let long = format!("_ZN{}E", "3foo".repeat(10_000));
        let _ = cxx(&long);
        assert_eq!(cxx("_Z\0"), None);
        assert_eq!(cxx("_Zxx"), None);
    }

    /// The special names as `c++filt` (binutils 2.40) prints them.
    #[test]
    fn special_names_table() {
        let cases = [
            ("_ZTV3Foo", Some("vtable for Foo")),
            (
                "_ZTVN10__cxxabiv117__class_type_infoE",
                Some("vtable for __cxxabiv1::__class_type_info"),
            ),
            ("_ZTVSt9exception", Some("vtable for std::exception")),
            ("_ZTT3Foo", Some("VTT for Foo")),
            (
                "_ZThn8_N3Foo3barEv",
                Some("non-virtual thunk to Foo::bar()"),
            ),
            ("_ZTv0_n24_N3Foo3barEv", Some("virtual thunk to Foo::bar()")),
            (
                "_ZTch0_h16_N1D1fEv",
                Some("covariant return thunk to D::f()"),
            ),
            // Handled by cpp_demangle itself.
            ("_ZTI3Foo", None),
            ("_ZTS3Foo", None),
            // Malformed: no answer, never a panic.
            ("_ZTV", None),
            ("_ZT", None),
            ("_ZTh", None),
            ("_ZThx_N3Foo3barEv", None),
            ("_ZTv0_N3Foo3barEv", None),
            ("_ZTc", None),
            ("_ZTVé", None),
        ];
        for (raw, want) in cases {
            assert_eq!(special(raw).as_deref(), want, "{raw}");
        }
    }
}
