//! Reading a recording's layout: the header, attrs and feature sections,
//! every size checked against the file, through one bounds-checked cursor
//! ([`Fields`]).

use super::*;

/// The parts of a perf.data header that decide how to read the file.
#[derive(Debug, Clone, Copy)]
pub struct HeaderFacts {
    /// `attr_size` (attr + ids section).
    pub attr_size: u64,
    /// Attr section (offset, size).
    pub attrs: (u64, u64),
    /// Data section (offset, size).
    pub data: (u64, u64),
    /// Feature bitmap.
    pub features: Features,
}

/// Where [`HeaderFacts`]' fields lie in the header: attr size, attr
/// section, data section (offset and size each), feature bitmap.
pub(super) const AT_ATTR_SIZE: usize = 16;
pub(super) const AT_ATTRS: usize = 24;
pub(super) const AT_DATA: usize = 40;
pub(super) const AT_FEATURES: usize = 72;

impl HeaderFacts {
    /// Parses the fixed header; None if it is not a little-endian PERFILE2.
    pub fn parse(bytes: &[u8]) -> Option<Self> {
        if bytes.get(..8)? != MAGIC {
            return None;
        }
        let u = |i: usize| le_u64(bytes, i);
        let f = AT_FEATURES;
        Some(HeaderFacts {
            attr_size: u(AT_ATTR_SIZE)?,
            attrs: (u(AT_ATTRS)?, u(AT_ATTRS + 8)?),
            data: (u(AT_DATA)?, u(AT_DATA + 8)?),
            features: Features([u(f)?, u(f + 8)?, u(f + 16)?, u(f + 24)?]),
        })
    }

    /// Writes the fields into `header` (at least [`HEADER_SIZE`] bytes),
    /// leaving the others (magic, header size, event types) as they are.
    pub(super) fn write_into(&self, header: &mut [u8]) {
        let mut put = |at: usize, v: u64| header[at..at + 8].copy_from_slice(&v.to_le_bytes());
        put(AT_ATTR_SIZE, self.attr_size);
        put(AT_ATTRS, self.attrs.0);
        put(AT_ATTRS + 8, self.attrs.1);
        put(AT_DATA, self.data.0);
        put(AT_DATA + 8, self.data.1);
        for (i, word) in self.features.0.iter().enumerate() {
            put(AT_FEATURES + 8 * i, *word);
        }
    }

    /// Whether the file was finished (feature sections written).
    pub fn finished(&self) -> bool {
        self.features.has(HEADER_EVENT_DESC)
    }

    /// The length of an attr without its ids' place (`attr_size` - 16),
    /// when it is one a `perf_event_attr` can have.
    pub fn attr_len(&self) -> Option<usize> {
        let len = usize::try_from(self.attr_size.checked_sub(16)?).ok()?;
        (ATTR_SIZE_MIN..=ATTR_SIZE_MAX)
            .contains(&len)
            .then_some(len)
    }
}

/// Where and why a recording's header, attributes or feature sections do
/// not hold together.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayoutError {
    /// Byte offset in the file of the field that is wrong.
    pub offset: u64,
    /// What is wrong, naming the part of the file.
    pub what: String,
}

impl std::fmt::Display for LayoutError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (at byte {})", self.what, self.offset)
    }
}

/// What a reader takes from a recording besides its records: the events
/// (attr bytes, name, ids), the command line, pfprof's metadata. Read here
/// rather than by `linux-perf-data`, which allocates whatever sizes the file
/// declares: every size, count and offset is checked against the file's
/// length before it is used, so nothing allocates more than the file holds.
#[derive(Debug)]
pub struct Layout {
    /// The fixed header.
    pub facts: HeaderFacts,
    /// Events from `EVENT_DESC` when present, else from the attr section
    /// (unnamed).
    pub events: Vec<EventDesc>,
    /// `CMDLINE` feature.
    pub cmdline: Option<Vec<String>>,
    /// Byte range of pfprof's metadata feature ([`PFPROF_META_FEATURE`]).
    pub meta: Option<std::ops::Range<usize>>,
    /// File offset of each event's attr (for errors).
    pub event_offsets: Vec<u64>,
    /// `BUILD_ID` feature (perf writes it): (path, build-id) of the files
    /// the samples hit. perf's mmap records carry inodes, not build-ids.
    pub build_ids: Vec<PathBuildId>,
}

/// A file's path and its build-id.
pub type PathBuildId = (Vec<u8>, Vec<u8>);

/// Bounds-checked little-endian reads over a part of the file, reporting
/// failures at absolute file offsets: every reader of perf.data sections
/// (here, and perf_compat's) reads through it.
pub(crate) struct Fields<'a> {
    bytes: &'a [u8],
    /// Next read position (absolute).
    pub(super) at: usize,
    /// End of the part being read (absolute).
    end: usize,
    /// Names the part in errors.
    part: &'static str,
}

impl<'a> Fields<'a> {
    /// Reads `len` bytes of `bytes` from `start` (fewer if the bytes end
    /// first), the part named `part` in errors.
    pub(crate) fn new(bytes: &'a [u8], start: usize, len: usize, part: &'static str) -> Self {
        Fields {
            bytes,
            at: start,
            end: start.saturating_add(len).min(bytes.len()),
            part,
        }
    }

    /// An error at the next read's offset.
    pub(crate) fn error(&self, what: impl std::fmt::Display) -> LayoutError {
        LayoutError {
            offset: self.at as u64,
            what: format!("{}: {what}", self.part),
        }
    }

    /// Bytes not read yet.
    pub(crate) fn left(&self) -> usize {
        self.end.saturating_sub(self.at)
    }

    /// The next `n` bytes.
    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8], LayoutError> {
        match self.at.checked_add(n).filter(|&e| e <= self.end) {
            Some(end) => {
                let out = &self.bytes[self.at..end];
                self.at = end;
                Ok(out)
            }
            None => Err(self.error(format_args!(
                "{n} bytes declared, {} left",
                self.end.saturating_sub(self.at)
            ))),
        }
    }

    /// The next `n` bytes, `n` as a file states it.
    pub(crate) fn take_u64(&mut self, n: u64) -> Result<&'a [u8], LayoutError> {
        self.take(usize::try_from(n).unwrap_or(usize::MAX))
    }

    pub(crate) fn u32(&mut self) -> Result<u32, LayoutError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub(crate) fn u64(&mut self) -> Result<u64, LayoutError> {
        Ok(le_u64(self.take(8)?, 0).unwrap_or_default())
    }

    /// A NUL-terminated string (the NUL read too).
    pub(crate) fn cstring(&mut self) -> Result<String, LayoutError> {
        let rest = &self.bytes[self.at.min(self.end)..self.end];
        let len = rest
            .iter()
            .position(|&b| b == 0)
            .ok_or_else(|| self.error("unterminated string"))?;
        let text = String::from_utf8_lossy(&rest[..len]).into_owned();
        self.at += len + 1;
        Ok(text)
    }

    /// The header of the record that starts here.
    pub(super) fn record_head(&mut self) -> Result<RecordHead, LayoutError> {
        let bytes = self.take(8)?;
        RecordHead::parse(bytes).ok_or_else(|| self.error("a cut record header"))
    }

    /// The bytes read since `start`.
    pub(super) fn since(&self, start: usize) -> &'a [u8] {
        &self.bytes[start..self.at]
    }

    /// `perf_header_string`: u32 length, then that many bytes, NUL padded.
    pub(super) fn string(&mut self) -> Result<String, LayoutError> {
        let len = self.u32()? as usize;
        let raw = self.take(len)?;
        let text = raw.split(|&b| b == 0).next().unwrap_or_default();
        Ok(String::from_utf8_lossy(text).into_owned())
    }
}

/// perf's smallest `perf_event_attr` (`PERF_ATTR_SIZE_VER0`).
pub(super) const ATTR_SIZE_MIN: usize = 64;
/// Far above any kernel's `perf_event_attr` (144 bytes in 6.x).
pub(super) const ATTR_SIZE_MAX: usize = 4096;
/// Readers key records by attr index in 16 bits.
pub const MAX_EVENTS: usize = 0xffff;

pub(super) fn range_in(bytes: &[u8], offset: u64, size: u64) -> Option<std::ops::Range<usize>> {
    let end = offset.checked_add(size)?;
    (end <= bytes.len() as u64).then_some(offset as usize..end as usize)
}

/// Reads and checks everything but the records (see [`Layout`]). The data
/// section itself may be cut short (the caller decides whether to repair),
/// but must start inside the file.
pub fn read_layout(bytes: &[u8]) -> Result<Layout, LayoutError> {
    check_magic(bytes)?;
    let facts = HeaderFacts::parse(bytes)
        .ok_or_else(|| layout_error(bytes.len() as u64, "the perf.data header is cut"))?;
    let (attr_len, attrs) = check_sections(bytes, &facts)?;
    let (events, event_offsets) = attr_section(bytes, &facts, attr_len, attrs)?;
    let mut layout = Layout {
        facts,
        events,
        cmdline: None,
        meta: None,
        event_offsets,
        build_ids: Vec::new(),
    };
    if facts.finished() {
        read_features(bytes, &mut layout)?;
    }
    Ok(layout)
}

/// A [`LayoutError`] at `offset`.
pub(super) fn layout_error(offset: u64, what: &str) -> LayoutError {
    LayoutError {
        offset,
        what: what.to_string(),
    }
}

/// Refuses anything but a little-endian PERFILE2 file, naming what it is.
pub(super) fn check_magic(bytes: &[u8]) -> Result<(), LayoutError> {
    match bytes.get(..8) {
        Some(b"PERFILE2") => Ok(()),
        Some(b"2ELIFREP") => Err(layout_error(
            0,
            "a big-endian perf.data file (not supported)",
        )),
        Some(magic) if magic.starts_with(b"PERFFILE") => Err(layout_error(
            0,
            "a perf.data file of the old format (PERFFILE)",
        )),
        _ => Err(layout_error(0, "not a perf.data file (no PERFILE2 magic)")),
    }
}

/// Checks the header's attr size and its attr and data sections against
/// the file; the attr's length (without its ids' place) and the attr
/// section's byte range.
pub(super) fn check_sections(
    bytes: &[u8],
    facts: &HeaderFacts,
) -> Result<(usize, std::ops::Range<usize>), LayoutError> {
    let at = |offset: u64, what: String| LayoutError { offset, what };
    let attr_len = facts
        .attr_len()
        .ok_or_else(|| at(16, format!("attr size {} is impossible", facts.attr_size)))?;
    let (attrs_offset, attrs_size) = facts.attrs;
    let attrs = range_in(bytes, attrs_offset, attrs_size).ok_or_else(|| {
        at(
            24,
            format!(
                "the attr section ({attrs_size} bytes at {attrs_offset}) ends past the file's {} bytes",
                bytes.len()
            ),
        )
    })?;
    if attrs_size == 0 {
        return Err(layout_error(32, "the attr section is empty (no events)"));
    }
    if attrs_size % facts.attr_size != 0 {
        return Err(at(
            32,
            format!(
                "the attr section's size {attrs_size} is not a multiple of the attr size {}",
                facts.attr_size
            ),
        ));
    }
    let data_offset = facts.data.0;
    if data_offset < HEADER_SIZE || data_offset > bytes.len() as u64 {
        return Err(at(
            40,
            format!(
                "the data section starts at byte {data_offset}, outside the file's {} bytes",
                bytes.len()
            ),
        ));
    }
    if attrs_size / facts.attr_size > MAX_EVENTS as u64 {
        return Err(at(
            32,
            format!(
                "{} events (at most {MAX_EVENTS} are supported)",
                attrs_size / facts.attr_size
            ),
        ));
    }
    Ok((attr_len, attrs))
}

/// The events of the attr section (unnamed) and each one's file offset.
/// Each attr points at its own id array; a file whose arrays add up to
/// more than the file is lying.
pub(super) fn attr_section(
    bytes: &[u8],
    facts: &HeaderFacts,
    attr_len: usize,
    attrs: std::ops::Range<usize>,
) -> Result<(Vec<EventDesc>, Vec<u64>), LayoutError> {
    let mut events = Vec::new();
    let mut event_offsets = Vec::new();
    let mut id_bytes = 0usize;
    for (i, entry) in bytes[attrs.clone()]
        .chunks_exact(facts.attr_size as usize)
        .enumerate()
    {
        let entry_offset = (attrs.start + i * facts.attr_size as usize) as u64;
        event_offsets.push(entry_offset);
        let ids_at = entry_offset + attr_len as u64;
        let (ids_offset, ids_size) = (
            le_u64(entry, attr_len).unwrap_or_default(),
            le_u64(entry, attr_len + 8).unwrap_or_default(),
        );
        let ids = range_in(bytes, ids_offset, ids_size)
            .filter(|r| r.len() % 8 == 0)
            .ok_or_else(|| LayoutError {
                offset: ids_at,
                what: format!(
                    "the event ids ({ids_size} bytes at {ids_offset}) are outside the file"
                ),
            })?;
        id_bytes += ids.len();
        if id_bytes > bytes.len() {
            return Err(layout_error(
                ids_at,
                "the event id arrays add up to more than the file",
            ));
        }
        events.push(EventDesc {
            attr: entry[..attr_len].to_vec(),
            name: String::new(),
            ids: le_u64s(&bytes[ids]).collect(),
        });
    }
    Ok((events, event_offsets))
}

/// Reads the feature sections pfprof uses into `layout`: a table of
/// (offset, size) at the data section's end, one entry per bit set, in
/// bit order.
pub(super) fn read_features(bytes: &[u8], layout: &mut Layout) -> Result<(), LayoutError> {
    let facts = layout.facts;
    let (data_offset, data_size) = facts.data;
    let table = data_offset
        .checked_add(data_size)
        .filter(|&end| end <= bytes.len() as u64)
        .ok_or_else(|| LayoutError {
            offset: 48,
            what: format!(
                "the data section ({data_size} bytes at {data_offset}) ends past the file's {} bytes",
                bytes.len()
            ),
        })?;
    let mut entries = Fields::new(bytes, table as usize, usize::MAX, "feature section table");
    for bit in facts.features.bits() {
        let entry_at = entries.at as u64;
        let entry = entries.take(16)?;
        let (offset, size) = (
            le_u64(entry, 0).unwrap_or_default(),
            le_u64(entry, 8).unwrap_or_default(),
        );
        let range = range_in(bytes, offset, size).ok_or_else(|| LayoutError {
            offset: entry_at,
            what: format!(
                "feature {bit}'s section ({size} bytes at {offset}) ends past the file's {} bytes",
                bytes.len()
            ),
        })?;
        match bit {
            HEADER_CMDLINE => layout.cmdline = Some(cmdline(bytes, range)?),
            HEADER_EVENT_DESC => {
                (layout.events, layout.event_offsets) = event_desc(bytes, range)?;
            }
            PFPROF_META_FEATURE => layout.meta = Some(range),
            HEADER_BUILD_ID => layout.build_ids = build_ids(bytes, range)?,
            _ => {}
        }
    }
    Ok(())
}

/// The `CMDLINE` feature: u32 count, then each argument as a
/// `perf_header_string`.
pub(super) fn cmdline(
    bytes: &[u8],
    range: std::ops::Range<usize>,
) -> Result<Vec<String>, LayoutError> {
    let mut f = Fields::new(bytes, range.start, range.len(), "CMDLINE feature");
    let n = f.u32()?;
    let mut args = Vec::new();
    for _ in 0..n {
        args.push(f.string()?);
    }
    Ok(args)
}

/// The `EVENT_DESC` feature: u32 count, u32 attr size, then per event the
/// attr, u32 id count, the name (`perf_header_string`) and the ids.
pub(super) fn event_desc(
    bytes: &[u8],
    range: std::ops::Range<usize>,
) -> Result<(Vec<EventDesc>, Vec<u64>), LayoutError> {
    let mut f = Fields::new(bytes, range.start, range.len(), "EVENT_DESC feature");
    let n = f.u32()?;
    if n as usize > MAX_EVENTS {
        return Err(f.error(format_args!(
            "{n} events (at most {MAX_EVENTS} are supported)"
        )));
    }
    let attr_len = f.u32()? as usize;
    if !(ATTR_SIZE_MIN..=ATTR_SIZE_MAX).contains(&attr_len) {
        return Err(f.error(format_args!("attr size {attr_len} is impossible")));
    }
    let mut events = Vec::new();
    let mut offsets = Vec::new();
    for _ in 0..n {
        offsets.push(f.at as u64);
        let attr = f.take(attr_len)?.to_vec();
        let n_ids = f.u32()? as usize;
        let name = f.string()?;
        let ids = le_u64s(f.take(n_ids.saturating_mul(8))?).collect();
        events.push(EventDesc { attr, name, ids });
    }
    Ok((events, offsets))
}
