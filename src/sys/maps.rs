//! `/proc/PID/maps` lines, for processes that already run when pfprof
//! attaches (the kernel only reports mappings made after that).

/// What a mapping's path (as MMAP2 records and `/proc/PID/maps` give it)
/// says the memory is. The address-space tracker of the analysis and the
/// unwinder's both ask here, so they agree on every kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MappingPath {
    /// No name: `//anon`, an empty path, `/dev/zero (deleted)`,
    /// `/anon_hugepage (deleted)`.
    Anon,
    /// Anonymous memory named with prctl: `[anon:NAME]`, `[anon_shmem:NAME]`.
    NamedAnon,
    /// A memfd (`/memfd:NAME (deleted)`): memory with a name but no file
    /// to read, where JITs double-map their code.
    Memfd,
    /// `[heap]`.
    Heap,
    /// `[stack]` (`[stack:TID]` on old kernels).
    Stack,
    /// A file on disk.
    File,
    /// The kernel's own images: `[vdso]`, `[vvar]`, `[vsyscall]`, `[uprobes]`.
    Special,
}

impl MappingPath {
    /// Classifies `path`.
    pub fn of(path: &[u8]) -> MappingPath {
        match path {
            b"" | b"/dev/zero (deleted)" | b"/anon_hugepage (deleted)" => MappingPath::Anon,
            b"[heap]" => MappingPath::Heap,
            p if p.starts_with(b"//anon") => MappingPath::Anon,
            p if p.starts_with(b"[anon") => MappingPath::NamedAnon,
            p if p.starts_with(b"[stack") => MappingPath::Stack,
            p if p.starts_with(b"/memfd:") => MappingPath::Memfd,
            p if p.starts_with(b"//") => MappingPath::Anon,
            p if p.starts_with(b"/") => MappingPath::File,
            _ => MappingPath::Special,
        }
    }

    /// Memory without a file to read code or unwind tables from, where JIT
    /// compilers put their code.
    pub fn is_anonymous(self) -> bool {
        !matches!(self, MappingPath::File | MappingPath::Special)
    }
}

/// One mapping.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapsLine {
    /// Start address.
    pub start_avma: u64,
    /// End address (exclusive).
    pub end_avma: u64,
    /// PROT_* bits.
    pub prot: u32,
    /// MAP_SHARED or MAP_PRIVATE.
    pub flags: u32,
    /// File offset.
    pub file_offset: u64,
    /// Device (major, minor) and inode of the mapped file; 0 for anonymous
    /// memory.
    pub dev: (u32, u32),
    /// Inode of the mapped file.
    pub inode: u64,
    /// Path as perf names it: a file, `[heap]`, `[stack]`, `[vdso]`, or `//anon`.
    pub path: String,
}

#[cfg(test)]
impl MapsLine {
    /// A private read-execute mapping of `path` (inode `inode`) at
    /// 0x1000-0x2000, from the file's start: the tests' usual mapping.
    pub fn of_file(path: &std::path::Path, inode: u64) -> MapsLine {
        MapsLine {
            start_avma: 0x1000,
            end_avma: 0x2000,
            prot: 5,
            flags: 2,
            file_offset: 0,
            dev: (0, 0),
            inode,
            path: path.to_str().unwrap().into(),
        }
    }
}

/// Parses the text of a maps file; lines that do not parse are skipped.
pub fn parse(text: &str) -> Vec<MapsLine> {
    text.lines().filter_map(parse_line).collect()
}

fn parse_line(line: &str) -> Option<MapsLine> {
    // start-end perms offset dev inode [path]
    let mut fields = line.splitn(6, ' ');
    let (start, end) = fields.next()?.split_once('-')?;
    let perms = fields.next()?.as_bytes();
    let file_offset = u64::from_str_radix(fields.next()?, 16).ok()?;
    let (major, minor) = fields.next()?.split_once(':')?;
    let dev = (
        u32::from_str_radix(major, 16).ok()?,
        u32::from_str_radix(minor, 16).ok()?,
    );
    let inode = fields.next()?.parse().ok()?;
    let path = fields.next().unwrap_or("").trim_start();
    if perms.len() < 4 {
        return None;
    }
    let mut prot = 0;
    for (byte, bit) in [
        (perms[0], libc::PROT_READ),
        (perms[1], libc::PROT_WRITE),
        (perms[2], libc::PROT_EXEC),
    ] {
        if byte != b'-' {
            prot |= bit as u32;
        }
    }
    let flags = if perms[3] == b's' {
        libc::MAP_SHARED
    } else {
        libc::MAP_PRIVATE
    } as u32;
    Some(MapsLine {
        start_avma: u64::from_str_radix(start, 16).ok()?,
        end_avma: u64::from_str_radix(end, 16).ok()?,
        prot,
        flags,
        file_offset,
        dev,
        inode,
        path: if path.is_empty() {
            "//anon".to_string()
        } else {
            path.to_string()
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every kind of path, as both trackers classify it.
    #[test]
    fn mapping_paths() {
        use MappingPath::*;
        for (path, want) in [
            (&b""[..], Anon),
            (b"//anon", Anon),
            (b"/dev/zero (deleted)", Anon),
            (b"/anon_hugepage (deleted)", Anon),
            (b"[anon:v8 code]", NamedAnon),
            (b"[anon_shmem:x]", NamedAnon),
            (b"/memfd:jit (deleted)", Memfd),
            (b"[heap]", Heap),
            (b"[stack]", Stack),
            (b"[stack:42]", Stack),
            (b"/usr/lib/libc.so.6", File),
            (b"/tmp/app (deleted)", File),
            (b"[vdso]", Special),
            (b"[vsyscall]", Special),
        ] {
            assert_eq!(
                MappingPath::of(path),
                want,
                "{}",
                String::from_utf8_lossy(path)
            );
        }
        assert!(Memfd.is_anonymous() && NamedAnon.is_anonymous() && Stack.is_anonymous());
        assert!(!File.is_anonymous() && !Special.is_anonymous());
    }

    /// Real lines: files, anonymous memory, named regions, odd paths; junk is skipped.
    #[test]
    fn lines() {
        let text = "\
55d0c0a00000-55d0c0a02000 r--p 00000000 fe:01 1049 /usr/bin/cat
55d0c0a02000-55d0c0a07000 r-xp 00002000 fe:01 1049 /usr/bin/cat
7f0000000000-7f0000021000 rw-p 00000000 00:00 0 
7ffd5a4e1000-7ffd5a502000 rw-p 00000000 00:00 0                          [stack]
7f1111000000-7f1111001000 rw-s 00000000 00:05 77 /dev/shm/with space (deleted)
garbage line
";
        let got = parse(text);
        assert_eq!(got.len(), 5);
        assert_eq!(
            got[0],
            MapsLine {
                start_avma: 0x55d0c0a00000,
                end_avma: 0x55d0c0a02000,
                prot: 1,
                flags: 2,
                file_offset: 0,
                dev: (0xfe, 1),
                inode: 1049,
                path: "/usr/bin/cat".into()
            }
        );
        assert_eq!((got[1].prot, got[1].file_offset), (5, 0x2000));
        assert_eq!(got[2].path, "//anon");
        assert_eq!((got[2].dev, got[2].inode), ((0, 0), 0));
        assert_eq!(got[3].path, "[stack]");
        assert_eq!(
            (got[4].flags, got[4].path.as_str()),
            (1, "/dev/shm/with space (deleted)")
        );
    }
}
