//! `/proc/PID/maps` lines, for processes that already run when pfprof
//! attaches (the kernel only reports mappings made after that).

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
