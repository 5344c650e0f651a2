//! Records as bytes: the 8-byte header (read and written), little-endian
//! fields, and whole records cut out of a buffer ([`records`]) or out of a
//! ring buffer's pending bytes, which may wrap ([`record_at`],
//! [`drain_whole`]). Every reader of a record stream walks it here, so a
//! size below the header's own 8 bytes is found, and counted, in one place.

/// Bytes of a record header.
pub const HEAD_BYTES: usize = 8;

/// The little-endian u16 at `at`; None past the end.
pub fn le_u16(bytes: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(
        bytes.get(at..at.checked_add(2)?)?.try_into().ok()?,
    ))
}

/// The little-endian u32 at `at`; None past the end.
pub fn le_u32(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(
        bytes.get(at..at.checked_add(4)?)?.try_into().ok()?,
    ))
}

/// The little-endian u64 at `at`; None past the end.
pub fn le_u64(bytes: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(
        bytes.get(at..at.checked_add(8)?)?.try_into().ok()?,
    ))
}

/// The little-endian u64s of `bytes`, in order (a trailing part of fewer
/// than 8 bytes is not one).
pub fn le_u64s(bytes: &[u8]) -> impl Iterator<Item = u64> + '_ {
    bytes
        .chunks_exact(8)
        .map(|word| u64::from_le_bytes(word.try_into().unwrap_or_default()))
}

/// The 8-byte header of a perf record: type, misc bits, size (header
/// included).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordHead {
    /// `PERF_RECORD_*`.
    pub record_type: u32,
    /// `PERF_RECORD_MISC_*` bits.
    pub misc: u16,
    /// Bytes of the whole record.
    pub size: usize,
}

impl RecordHead {
    /// The header at the start of `bytes`; None if fewer than 8 bytes.
    pub fn parse(bytes: &[u8]) -> Option<RecordHead> {
        let head: &[u8; HEAD_BYTES] = bytes.get(..HEAD_BYTES)?.try_into().ok()?;
        Some(RecordHead::from_bytes(head))
    }

    fn from_bytes(head: &[u8; HEAD_BYTES]) -> RecordHead {
        RecordHead {
            record_type: u32::from_le_bytes([head[0], head[1], head[2], head[3]]),
            misc: u16::from_le_bytes([head[4], head[5]]),
            size: usize::from(u16::from_le_bytes([head[6], head[7]])),
        }
    }

    /// The header's bytes. The size field holds 16 bits: a record is never
    /// larger (the kernel's are not, and pfprof writes none that is).
    pub fn encode(self) -> [u8; HEAD_BYTES] {
        debug_assert!(
            self.size <= usize::from(u16::MAX),
            "a record of {} bytes",
            self.size
        );
        let mut head = [0u8; HEAD_BYTES];
        head[..4].copy_from_slice(&self.record_type.to_le_bytes());
        head[4..6].copy_from_slice(&self.misc.to_le_bytes());
        head[6..].copy_from_slice(&(self.size as u16).to_le_bytes());
        head
    }

    /// Appends the header to `out`.
    pub fn write(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.encode());
    }

    /// Starts a record of unknown size at the end of `out` (its size is 0
    /// until [`RecordHead::end`]); returns where it starts.
    pub fn begin(record_type: u32, misc: u16, out: &mut Vec<u8>) -> usize {
        let start = out.len();
        RecordHead {
            record_type,
            misc,
            size: 0,
        }
        .write(out);
        start
    }

    /// Ends the record begun at `start` of `out`: its size is every byte
    /// written since.
    pub fn end(out: &mut [u8], start: usize) {
        RecordHead::patch_size(&mut out[start..]);
    }

    /// Sets the size field of `record` (a whole record, header first) to its
    /// length.
    pub fn patch_size(record: &mut [u8]) {
        debug_assert!(record.len() >= HEAD_BYTES && record.len() <= usize::from(u16::MAX));
        let size = record.len() as u16;
        record[6..HEAD_BYTES].copy_from_slice(&size.to_le_bytes());
    }
}

/// One whole record of a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record<'a> {
    /// Where it starts in the buffer.
    pub offset: usize,
    /// Its header.
    pub head: RecordHead,
    /// The whole record, header included.
    pub bytes: &'a [u8],
}

impl<'a> Record<'a> {
    /// The record after its header.
    pub fn body(&self) -> &'a [u8] {
        &self.bytes[HEAD_BYTES..]
    }
}

/// Where a buffer stops holding whole records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Broken {
    /// Where the record that is not whole starts.
    pub offset: usize,
    /// Its header; None when fewer than 8 bytes are left.
    pub head: Option<RecordHead>,
}

impl Broken {
    /// The header's size is below the header's own 8 bytes: no record
    /// stream (more bytes would not complete it).
    pub fn bad_size(&self) -> bool {
        self.head.is_some_and(|head| head.size < HEAD_BYTES)
    }
}

/// The whole records of a buffer, in order, each checked against its size
/// once; ends with `Err(Broken)` where the buffer stops holding whole
/// records (cut short, or a size below a header), or with the buffer.
pub fn records(bytes: &[u8]) -> Records<'_> {
    Records {
        bytes,
        offset: 0,
        done: false,
    }
}

/// See [`records`].
#[derive(Debug, Clone)]
pub struct Records<'a> {
    bytes: &'a [u8],
    offset: usize,
    done: bool,
}

impl<'a> Records<'a> {
    /// The end of the whole records read so far.
    pub fn offset(&self) -> usize {
        self.offset
    }
}

impl<'a> Iterator for Records<'a> {
    type Item = Result<Record<'a>, Broken>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done || self.offset == self.bytes.len() {
            return None;
        }
        let offset = self.offset;
        let rest = &self.bytes[offset..];
        let head = RecordHead::parse(rest);
        match head {
            Some(head) if head.size >= HEAD_BYTES && head.size <= rest.len() => {
                self.offset += head.size;
                Some(Ok(Record {
                    offset,
                    head,
                    bytes: &rest[..head.size],
                }))
            }
            _ => {
                self.done = true;
                Some(Err(Broken { offset, head }))
            }
        }
    }
}

impl std::iter::FusedIterator for Records<'_> {}

/// A record whose size is below its header's own 8 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BadSize;

/// The whole record at `offset` of a ring's pending bytes (`first`, then
/// `second` after the wrap): borrowed from its slice, or copied into
/// `scratch` when it straddles the wrap; `Ok(None)` while it is not all
/// there.
pub fn record_at<'a>(
    first: &'a [u8],
    second: &'a [u8],
    offset: usize,
    scratch: &'a mut Vec<u8>,
) -> Result<Option<&'a [u8]>, BadSize> {
    let total = first.len() + second.len();
    let Some(head) = head_at(first, second, offset) else {
        return Ok(None);
    };
    if head.size < HEAD_BYTES {
        return Err(BadSize);
    }
    let end = offset + head.size;
    if end > total {
        return Ok(None);
    }
    if end <= first.len() {
        return Ok(Some(&first[offset..end]));
    }
    if offset >= first.len() {
        return Ok(Some(&second[offset - first.len()..end - first.len()]));
    }
    scratch.clear();
    scratch.extend_from_slice(&first[offset..]);
    scratch.extend_from_slice(&second[..end - first.len()]);
    Ok(Some(&scratch[..]))
}

/// The header at `offset` of `first` then `second`, read across the wrap.
fn head_at(first: &[u8], second: &[u8], offset: usize) -> Option<RecordHead> {
    if let Some(rest) = first.get(offset..).filter(|rest| !rest.is_empty()) {
        if rest.len() >= HEAD_BYTES {
            return RecordHead::parse(rest);
        }
        let mut head = [0u8; HEAD_BYTES];
        head[..rest.len()].copy_from_slice(rest);
        let more = second.get(..HEAD_BYTES - rest.len())?;
        head[rest.len()..].copy_from_slice(more);
        return Some(RecordHead::from_bytes(&head));
    }
    RecordHead::parse(second.get(offset.checked_sub(first.len())?..)?)
}

/// At most this many bytes of whole records go to a drain's sink at a
/// time, so that they are still in the cache when the sink copies them
/// (the walk that finds where records end has just read them).
pub const RUN_BYTES: usize = 16 << 10;

/// Hands the whole records of a ring's pending bytes (`first`, then
/// `second` after the wrap) to `each` one by one and to `sink` in runs (of
/// at most [`RUN_BYTES`], or one record), in order: each slice's records
/// borrowed, the one that straddles the wrap copied once into `scratch`.
/// A record not all there yet stays for the next time; at a size below a
/// header the rest is no record stream, and is given up (counted in
/// `bad`). Returns the bytes done with, to give back to the kernel.
pub fn drain_whole<E>(
    (first, second): (&[u8], &[u8]),
    scratch: &mut Vec<u8>,
    bad: &mut u64,
    mut each: impl FnMut(&Record<'_>),
    mut sink: impl FnMut(&[u8]) -> Result<(), E>,
) -> Result<usize, E> {
    let total = first.len() + second.len();
    let (mut offset, broken) = whole_runs(first, &mut each, &mut sink)?;
    if broken {
        *bad += 1;
        return Ok(total);
    }
    if offset < first.len() {
        match record_at(first, second, offset, scratch) {
            Ok(Some(bytes)) => {
                let head = RecordHead::parse(bytes).expect("a whole record");
                each(&Record {
                    offset,
                    head,
                    bytes,
                });
                sink(bytes)?;
                offset += bytes.len();
            }
            Ok(None) => return Ok(offset),
            Err(BadSize) => {
                *bad += 1;
                return Ok(total);
            }
        }
    }
    let second = &second[offset - first.len()..];
    let (run, broken) = whole_runs(second, &mut each, &mut sink)?;
    if broken {
        *bad += 1;
        return Ok(total);
    }
    Ok(offset + run)
}

/// Hands `each` the whole records `bytes` starts with, and `sink` the same
/// in runs of at most [`RUN_BYTES`] (or one record); returns where they
/// end, and whether a size below a header ends them.
fn whole_runs<E>(
    bytes: &[u8],
    each: &mut impl FnMut(&Record<'_>),
    sink: &mut impl FnMut(&[u8]) -> Result<(), E>,
) -> Result<(usize, bool), E> {
    let mut start = 0;
    let mut walk = records(bytes);
    let broken = loop {
        match walk.next() {
            Some(Ok(record)) => {
                each(&record);
                if walk.offset() - start >= RUN_BYTES {
                    sink(&bytes[start..walk.offset()])?;
                    start = walk.offset();
                }
            }
            Some(Err(broken)) => break broken.bad_size(),
            None => break false,
        }
    };
    if start < walk.offset() {
        sink(&bytes[start..walk.offset()])?;
    }
    Ok((walk.offset(), broken))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A record of `len` bytes filled with `tag` (its header's type and
    /// misc too).
    pub(crate) fn record(tag: u8, len: u16) -> Vec<u8> {
        let mut r = vec![tag; usize::from(len)];
        r[6..8].copy_from_slice(&len.to_le_bytes());
        r
    }

    /// The header's fields are little endian; fewer than 8 bytes is none;
    /// written back, the same bytes.
    #[test]
    fn reads_and_writes_record_heads() {
        let bytes = [9, 0, 0, 0, 2, 0x40, 48, 1, 0xaa];
        let head = RecordHead::parse(&bytes).unwrap();
        assert_eq!(
            head,
            RecordHead {
                record_type: 9,
                misc: 0x4002,
                size: 304
            }
        );
        assert_eq!(RecordHead::parse(&bytes[..7]), None);
        assert_eq!(head.encode(), bytes[..8]);
        let mut out = vec![0xee];
        let start = RecordHead::begin(3, 0x2000, &mut out);
        out.extend_from_slice(&[1; 16]);
        RecordHead::end(&mut out, start);
        assert_eq!(start, 1);
        assert_eq!(
            RecordHead::parse(&out[1..]),
            Some(RecordHead {
                record_type: 3,
                misc: 0x2000,
                size: 24
            })
        );
    }

    /// Little-endian fields at any offset; None where they would pass the
    /// end (also for an offset near usize::MAX).
    #[test]
    fn reads_little_endian_fields() {
        let bytes = [1, 2, 3, 4, 5, 6, 7, 8, 9];
        assert_eq!(le_u16(&bytes, 7), Some(0x0908));
        assert_eq!(le_u32(&bytes, 1), Some(0x05040302));
        assert_eq!(le_u64(&bytes, 1), Some(0x0908070605040302));
        assert_eq!(le_u64(&bytes, 2), None);
        assert_eq!(le_u32(&bytes, usize::MAX - 1), None);
        assert_eq!(le_u64s(&bytes).collect::<Vec<_>>(), [0x0807060504030201]);
    }

    /// A buffer's records come out whole, with their offsets; the walk ends
    /// where a record is cut short or its size is below a header, saying
    /// which.
    #[test]
    fn walks_whole_records() {
        let (a, b) = (record(1, 16), record(2, 8));
        let all = [&a[..], &b[..]].concat();
        let got: Vec<_> = records(&all).collect();
        assert_eq!(got.len(), 2);
        let Ok(second) = got[1] else { panic!() };
        assert_eq!(
            (second.offset, second.bytes, second.body()),
            (16, &b[..], &[][..])
        );
        for cut in 0..all.len() {
            let mut walk = records(&all[..cut]);
            let whole = walk.by_ref().take_while(Result::is_ok).count();
            assert_eq!(whole, usize::from(cut >= 16), "cut {cut}");
            let end = if cut >= 16 { 16 } else { 0 };
            assert_eq!(walk.offset(), end);
            assert_eq!(walk.next(), None, "fused");
            let broken = records(&all[..cut]).find_map(Result::err);
            assert_eq!(broken.map(|b| b.offset), (cut != end).then_some(end));
            assert!(!broken.is_some_and(|b| b.bad_size()));
        }
        let bad = [&a[..], &record(3, 8)[..6], &[4, 0]].concat();
        let broken = records(&bad).find_map(Result::err).unwrap();
        assert_eq!((broken.offset, broken.bad_size()), (16, true));
    }

    /// Records are cut out of a ring's pending bytes whole: borrowed from
    /// either slice, copied when they straddle the wrap (cut anywhere in
    /// the header or body), not at all while incomplete, and a size below a
    /// header is an error.
    #[test]
    fn records_across_the_wrap() {
        let (a, b, c) = (record(1, 16), record(2, 24), record(3, 8));
        let all = [&a[..], &b[..], &c[..]].concat();
        let mut scratch = Vec::new();
        for cut in 0..=all.len() {
            let (first, second) = all.split_at(cut);
            for (offset, want) in [(0, &a), (16, &b), (40, &c)] {
                let got = record_at(first, second, offset, &mut scratch);
                assert_eq!(got, Ok(Some(&want[..])), "cut {cut} offset {offset}");
            }
            assert_eq!(record_at(first, second, 48, &mut scratch), Ok(None));
        }
        for end in 16..40 {
            let (first, second) = all[..end].split_at(20.min(end));
            let got = record_at(first, second, 16, &mut scratch);
            assert_eq!(got, Ok(None), "incomplete at {end}");
        }
        let bad = record(4, 8)[..6]
            .iter()
            .chain(&[7, 0])
            .copied()
            .collect::<Vec<_>>();
        for cut in 0..=8 {
            let (first, second) = bad.split_at(cut);
            assert_eq!(record_at(first, second, 0, &mut scratch), Err(BadSize));
        }
    }

    /// A ring drained at any wrap hands out the same records, whole, in at
    /// most three runs (these are short), and gives back every byte; an
    /// incomplete last record stays; a size below a header is counted once
    /// and the rest given up, wherever it is.
    #[test]
    fn drains_whole_records_at_every_wrap() {
        let all = [record(1, 16), record(2, 24), record(3, 8), record(4, 32)].concat();
        let mut scratch = Vec::new();
        let drain = |bytes: &[u8], cut: usize, scratch: &mut Vec<u8>| {
            let (mut runs, mut bad, mut each) = (Vec::new(), 0, Vec::new());
            let done = drain_whole(
                bytes.split_at(cut),
                scratch,
                &mut bad,
                |record| each.extend_from_slice(record.bytes),
                |run: &[u8]| {
                    runs.push(run.to_vec());
                    Ok::<(), ()>(())
                },
            )
            .unwrap();
            // One by one, the same records as in runs.
            assert_eq!(each, runs.concat());
            (runs, bad, done)
        };
        // Long runs are cut at record ends after RUN_BYTES.
        let long = vec![record(5, 4096); 2 * RUN_BYTES / 4096 + 1].concat();
        let (runs, bad, done) = drain(&long, long.len(), &mut scratch);
        let lens: Vec<usize> = runs.iter().map(Vec::len).collect();
        assert_eq!(lens, [RUN_BYTES, RUN_BYTES, 4096]);
        assert_eq!((bad, done), (0, long.len()));
        for cut in 0..=all.len() {
            let (runs, bad, done) = drain(&all, cut, &mut scratch);
            assert!(runs.len() <= 3, "cut {cut}: {} runs", runs.len());
            for run in &runs {
                assert!(
                    records(run).all(|r| r.is_ok()),
                    "cut {cut}: a run not whole"
                );
            }
            assert_eq!(runs.concat(), all, "cut {cut}");
            assert_eq!((bad, done), (0, all.len()));
            // The last record not all written yet: it waits.
            let (runs, bad, done) =
                drain(&all[..all.len() - 5], cut.min(all.len() - 5), &mut scratch);
            assert_eq!(
                (runs.concat(), bad, done),
                (all[..48].to_vec(), 0, 48),
                "cut {cut}"
            );
        }
        let mut bad_size = all.clone();
        bad_size[40 + 6] = 4; // the third record says 4 bytes
        for cut in 0..=all.len() {
            let (runs, bad, done) = drain(&bad_size, cut, &mut scratch);
            assert_eq!(runs.concat(), all[..40], "cut {cut}");
            assert_eq!((bad, done), (1, all.len()), "cut {cut}");
        }
    }
}
