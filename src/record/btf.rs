//! The kernel's own type information (BTF, `/sys/kernel/btf/vmlinux`): where
//! a field lies in a kernel struct on this kernel, for the BPF programs
//! that read kernel memory by offset (`on_rss_stat` in fault.bpf.c), which
//! pfprof hands them in the `rss_config` map instead of relocating them.
//!
//! Only what that needs: the type section walked once, structs and unions
//! by name, a member's byte offset through anonymous members (`mm_struct`
//! keeps its fields in one), a struct's size. Every read is checked
//! against the section's size: a short or foreign file is an error.

use thiserror::Error;

/// Where the running kernel's BTF is.
pub(super) const VMLINUX: &str = "/sys/kernel/btf/vmlinux";

/// The running kernel's BTF: mapped where the kernel allows it (6.15 on),
/// else read. Reading its 5 MB cost 7 ms of every `record --resident`,
/// most of it faulting in the buffer; the mapping costs 0.3.
pub(super) enum VmlinuxBytes {
    /// Mapped in place.
    Mapped(crate::sys::MappedFile),
    /// Read into memory.
    Read(Vec<u8>),
}

impl VmlinuxBytes {
    /// Maps or reads [`VMLINUX`].
    pub(super) fn load() -> std::io::Result<VmlinuxBytes> {
        let file = std::fs::File::open(VMLINUX)?;
        match crate::sys::MappedFile::new(&file) {
            Ok(mapped) => Ok(VmlinuxBytes::Mapped(mapped)),
            Err(_) => std::fs::read(VMLINUX).map(VmlinuxBytes::Read),
        }
    }
}

impl std::ops::Deref for VmlinuxBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            VmlinuxBytes::Mapped(mapped) => mapped,
            VmlinuxBytes::Read(bytes) => bytes,
        }
    }
}

/// Why the type information could not be read.
#[derive(Debug, Error, PartialEq, Eq)]
pub(super) enum BtfError {
    /// Not BTF, or cut short.
    #[error("not a BTF file, or cut short")]
    Malformed,
    /// No struct or union of that name.
    #[error("no struct {0} in the kernel's BTF")]
    NoStruct(String),
    /// The struct has no such member.
    #[error("no member {member} in struct {name}")]
    NoMember {
        /// The struct.
        name: String,
        /// The member looked for.
        member: String,
    },
}

const MAGIC: u16 = 0xeb9f;
const KIND_INT: u32 = 1;
const KIND_ARRAY: u32 = 3;
const KIND_STRUCT: u32 = 4;
const KIND_UNION: u32 = 5;
const KIND_ENUM: u32 = 6;
const KIND_FUNC_PROTO: u32 = 13;
const KIND_VAR: u32 = 14;
const KIND_DATASEC: u32 = 15;
const KIND_DECL_TAG: u32 = 17;
const KIND_ENUM64: u32 = 19;

/// One type's place in the type section: where its 12-byte head is.
#[derive(Clone, Copy)]
struct TypeAt(usize);

/// A parsed BTF blob: its types (by id: id 0 is `void`) and strings.
pub(super) struct Btf<'a> {
    types: &'a [u8],
    strings: &'a [u8],
    /// Type id i + 1 starts at `heads[i]`.
    heads: Vec<TypeAt>,
}

fn u16_at(bytes: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(bytes.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(
        bytes.get(at..at.checked_add(4)?)?.try_into().ok()?,
    ))
}

/// Bytes that follow a type's head, by its kind and member count.
fn trailing_bytes(kind: u32, vlen: usize) -> Option<usize> {
    Some(match kind {
        KIND_INT | KIND_VAR | KIND_DECL_TAG => 4,
        KIND_ARRAY => 12,
        KIND_STRUCT | KIND_UNION | KIND_DATASEC | KIND_ENUM64 => 12 * vlen,
        KIND_ENUM | KIND_FUNC_PROTO => 8 * vlen,
        // PTR, FWD, TYPEDEF, VOLATILE, CONST, RESTRICT, FUNC, FLOAT,
        // TYPE_TAG: the head only.
        2 | 7..=12 | 16 | 18 => 0,
        _ => return None,
    })
}

impl<'a> Btf<'a> {
    /// Parses the header and indexes the types (little-endian only, as
    /// the machines pfprof runs on).
    pub(super) fn parse(bytes: &'a [u8]) -> Result<Btf<'a>, BtfError> {
        Self::parse_checked(bytes).ok_or(BtfError::Malformed)
    }

    fn parse_checked(bytes: &'a [u8]) -> Option<Btf<'a>> {
        if u16_at(bytes, 0)? != MAGIC {
            return None;
        }
        let header_len = u32_at(bytes, 4)? as usize;
        let section = |at: usize| -> Option<&'a [u8]> {
            let off = header_len.checked_add(u32_at(bytes, at)? as usize)?;
            let len = u32_at(bytes, at + 4)? as usize;
            bytes.get(off..off.checked_add(len)?)
        };
        let types = section(8)?;
        let strings = section(16)?;
        let mut heads = Vec::new();
        let mut at = 0;
        while at < types.len() {
            let info = u32_at(types, at + 4)?;
            let kind = (info >> 24) & 0x1f;
            let vlen = (info & 0xffff) as usize;
            heads.push(TypeAt(at));
            at = at.checked_add(12 + trailing_bytes(kind, vlen)?)?;
        }
        (at == types.len()).then_some(Btf {
            types,
            strings,
            heads,
        })
    }

    /// Whether the string at `name_off` is `name`: compared in place, as
    /// the lookups ask it of each of the kernel's ~150,000 types (finding
    /// each one's end first took 10 ms of every `record --resident`).
    fn name_is(&self, name_off: u32, name: &[u8]) -> bool {
        let start = name_off as usize;
        start
            .checked_add(name.len())
            .and_then(|end| Some((self.strings.get(start..end)?, self.strings.get(end)?)))
            .is_some_and(|(bytes, &terminator)| bytes == name && terminator == 0)
    }

    /// (name offset, kind, member count, size or type) of type `id`.
    fn head(&self, id: u32) -> Option<(u32, u32, usize, u32, usize)> {
        let TypeAt(at) = *self.heads.get((id as usize).checked_sub(1)?)?;
        let info = u32_at(self.types, at + 4)?;
        Some((
            u32_at(self.types, at)?,
            (info >> 24) & 0x1f,
            (info & 0xffff) as usize,
            u32_at(self.types, at + 8)?,
            at + 12,
        ))
    }

    /// The id of the struct (or union) called `name`, with members (not a
    /// forward declaration).
    fn struct_id(&self, name: &str) -> Result<u32, BtfError> {
        (1..=self.heads.len() as u32)
            .find(|&id| {
                self.head(id).is_some_and(|(name_off, kind, vlen, _, _)| {
                    matches!(kind, KIND_STRUCT | KIND_UNION)
                        && vlen > 0
                        && self.name_is(name_off, name.as_bytes())
                })
            })
            .ok_or_else(|| BtfError::NoStruct(name.to_string()))
    }

    /// The size in bytes of struct `name`.
    pub(super) fn struct_size(&self, name: &str) -> Result<u32, BtfError> {
        let id = self.struct_id(name)?;
        Ok(self.head(id).ok_or(BtfError::Malformed)?.3)
    }

    /// The byte offset of `member` in struct `name`, found through its
    /// anonymous struct and union members.
    pub(super) fn member_offset(&self, name: &str, member: &str) -> Result<u32, BtfError> {
        let id = self.struct_id(name)?;
        self.find_member(id, member.as_bytes(), 0)
            .ok_or_else(|| BtfError::NoMember {
                name: name.to_string(),
                member: member.to_string(),
            })
    }

    /// `member`'s bit offset in struct `id`, depth levels of anonymous
    /// members down at most (a cycle cannot recurse for ever).
    fn find_member(&self, id: u32, member: &[u8], depth: u32) -> Option<u32> {
        let (_, kind, vlen, _, members) = self.head(self.resolved(id)?)?;
        if !matches!(kind, KIND_STRUCT | KIND_UNION) || depth > 8 {
            return None;
        }
        let bitfields = u32_at(self.types, members.checked_sub(8)?)? >> 31 == 1;
        for i in 0..vlen {
            let at = members + 12 * i;
            let name_off = u32_at(self.types, at)?;
            let bits = u32_at(self.types, at + 8)?;
            let bit_offset = if bitfields { bits & 0xff_ffff } else { bits };
            let byte_offset = bit_offset / 8;
            if name_off == 0 {
                let inner = u32_at(self.types, at + 4)?;
                if let Some(found) = self.find_member(inner, member, depth + 1) {
                    return byte_offset.checked_add(found);
                }
            } else if self.name_is(name_off, member) {
                return Some(byte_offset);
            }
        }
        None
    }

    /// Type `id` through typedefs and qualifiers.
    fn resolved(&self, mut id: u32) -> Option<u32> {
        for _ in 0..16 {
            let (_, kind, _, size_or_type, _) = self.head(id)?;
            // TYPEDEF, VOLATILE, CONST, RESTRICT, TYPE_TAG.
            if matches!(kind, 8..=11 | 18) {
                id = size_or_type;
            } else {
                return Some(id);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A BTF blob of the given types (each a head and its members) and
    /// strings.
    fn blob(types: &[u8], strings: &[u8]) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&MAGIC.to_le_bytes());
        b.extend_from_slice(&[1, 0]);
        b.extend_from_slice(&24u32.to_le_bytes());
        for v in [
            0,
            types.len() as u32,
            types.len() as u32,
            strings.len() as u32,
        ] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(types);
        b.extend_from_slice(strings);
        b
    }

    fn words(ws: &[u32]) -> Vec<u8> {
        ws.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    /// struct outer { int a; struct { int pad; struct inner b; }; } with
    /// inner { long x; long y; }: `b` is found through the anonymous
    /// member, `y` in inner.
    fn sample() -> Vec<u8> {
        let strings = b"\0int\0outer\0a\0inner\0b\0x\0y\0pad\0";
        let name = |s: &str| {
            let at = strings
                .windows(s.len() + 2)
                .position(|w| w[0] == 0 && &w[1..=s.len()] == s.as_bytes() && w[s.len() + 1] == 0);
            at.unwrap() as u32 + 1
        };
        let types = [
            // 1: int
            words(&[name("int"), KIND_INT << 24, 4, 32]),
            // 2: struct outer, 2 members
            words(&[name("outer"), KIND_STRUCT << 24 | 2, 24]),
            words(&[name("a"), 1, 0]),
            words(&[0, 3, 32]),
            // 3: anonymous struct, 2 members at outer + 4
            words(&[0, KIND_STRUCT << 24 | 2, 20]),
            words(&[name("pad"), 1, 0]),
            words(&[name("b"), 5, 32]),
            // 4: typedef nothing (a kind without members)
            words(&[0, 8 << 24, 1]),
            // 5: struct inner
            words(&[name("inner"), KIND_STRUCT << 24 | 2, 16]),
            words(&[name("x"), 1, 0]),
            words(&[name("y"), 1, 64]),
        ]
        .concat();
        blob(&types, strings)
    }

    #[test]
    fn members_through_anonymous_structs() {
        let bytes = sample();
        let btf = Btf::parse(&bytes).unwrap();
        assert_eq!(btf.member_offset("outer", "a"), Ok(0));
        assert_eq!(btf.member_offset("outer", "b"), Ok(8));
        assert_eq!(btf.member_offset("inner", "y"), Ok(8));
        assert_eq!(btf.struct_size("inner"), Ok(16));
        assert_eq!(
            btf.member_offset("outer", "z"),
            Err(BtfError::NoMember {
                name: "outer".into(),
                member: "z".into()
            })
        );
        assert_eq!(
            btf.struct_size("nothing"),
            Err(BtfError::NoStruct("nothing".into()))
        );
        // Names are whole strings: not a prefix, not an extension.
        for name in ["inn", "inners", "int"] {
            assert_eq!(btf.struct_size(name), Err(BtfError::NoStruct(name.into())));
        }
        assert!(btf.member_offset("outer", "pa").is_err());
    }

    #[test]
    fn short_or_foreign_blobs_are_refused() {
        let bytes = sample();
        for len in [0, 3, 24, bytes.len() - 1] {
            assert!(Btf::parse(&bytes[..len]).is_err(), "{len} bytes");
        }
        let mut foreign = bytes.clone();
        foreign[0] = 0;
        assert_eq!(Btf::parse(&foreign).err(), Some(BtfError::Malformed));
    }

    /// The running kernel's, mapped as read: the fields fault.bpf.c's
    /// `on_rss_stat` reads.
    #[test]
    fn the_running_kernels_mm_struct() {
        let Ok(read) = std::fs::read(VMLINUX) else {
            return;
        };
        let bytes = VmlinuxBytes::load().unwrap();
        assert!(*bytes == *read);
        let btf = Btf::parse(&bytes).unwrap();
        assert!(btf.member_offset("mm_struct", "rss_stat").unwrap() > 0);
        assert!(btf.member_offset("task_struct", "mm").unwrap() > 0);
        assert!(btf.member_offset("percpu_counter", "counters").unwrap() > 0);
        assert!(btf.struct_size("percpu_counter").unwrap() >= 16);
    }
}
