//! C++ special names that `cpp_demangle` prints in its own notation
//! (`{vtable(Foo)}`): named here as `c++filt` names them, so that data
//! symbols (vtables, VTTs) and code symbols (thunks) read alike.

/// `c++filt`'s name for an Itanium special name (`_ZTV`, `_ZTT`, `_ZTh`,
/// `_ZTv`, `_ZTc`), `None` for every other name or when its parts do not
/// demangle.
pub(crate) fn special(name: &str) -> Option<String> {
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
pub(crate) fn ordinary(name: &str) -> Option<String> {
    let symbol = cpp_demangle::Symbol::new(name.as_bytes()).ok()?;
    let text = symbol.demangle().ok()?;
    (!text.starts_with('{')).then_some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

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
