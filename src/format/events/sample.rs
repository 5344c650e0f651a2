//! SAMPLE records read in place: the fields pfprof uses, borrowed from the
//! record's bytes, with every length checked against the record.
//!
//! `linux-perf-event-reader` parses every field into a `SampleRecord` of
//! some 500 bytes, which is then copied by value at each step: a quarter of
//! a replay's time on a frame-pointer recording. pfprof's samples (and
//! perf's) carry no READ group or branch stack, the two fields whose
//! layout needs more than the sample type; samples that do are read by the
//! library instead ([`read`] says which).

use linux_perf_data::linux_perf_event_reader::{
    CpuMode, RawData, RawDataU64, RecordParseInfo, Regs, SampleFormat, SampleRecord,
};

use byteorder::LittleEndian;

/// The fields of a sample pfprof uses.
#[derive(Clone)]
pub struct Sample<'a> {
    /// Process and thread (`PERF_SAMPLE_TID`).
    pub pid: Option<i32>,
    /// Thread.
    pub tid: Option<i32>,
    /// The data address (`PERF_SAMPLE_ADDR`).
    pub addr: Option<u64>,
    /// The sample's period (`PERF_SAMPLE_PERIOD`).
    pub period: Option<u64>,
    /// The CPU mode of the header's misc.
    pub cpu_mode: CpuMode,
    /// The call chain, leaf first, with perf's context markers.
    pub callchain: Option<RawDataU64<'a>>,
    /// The tracepoint's raw data (`PERF_SAMPLE_RAW`).
    pub raw: Option<RawData<'a>>,
    /// The user registers, when the sample has them (abi not none).
    pub user_regs: Option<Regs<'a>>,
    /// The bytes of the user stack copy the kernel filled (its dyn_size);
    /// empty without a copy.
    pub user_stack: &'a [u8],
}

/// The sample types read in place: the others have a field whose length
/// is not in the sample type alone before the last field pfprof uses.
fn in_place(info: &RecordParseInfo) -> bool {
    !info
        .sample_format
        .intersects(SampleFormat::READ | SampleFormat::BRANCH_STACK)
}

/// A SAMPLE record's body (after its header) as a [`Sample`], by its
/// event's layout; None when it is shorter than its fields say.
// Inlined into the replay's loop: returned by value, the ~200-byte
// result was a memmove per fault (see `decode::tests::an_event_is_small`).
#[inline(always)]
pub fn read<'a>(info: &RecordParseInfo, misc: u16, body: &'a [u8]) -> Option<Sample<'a>> {
    if !in_place(info) {
        let raw = RawData::Single(body);
        let s = SampleRecord::parse::<LittleEndian>(raw, misc, info).ok()?;
        return Some(Sample::of(s));
    }
    let format = info.sample_format;
    let mut r = Reader { body, at: 0 };
    let mut sample = Sample {
        pid: None,
        tid: None,
        addr: None,
        period: None,
        cpu_mode: CpuMode::from_misc(misc),
        callchain: None,
        raw: None,
        user_regs: None,
        user_stack: &[],
    };
    let words_before_tid = [SampleFormat::IDENTIFIER, SampleFormat::IP]
        .iter()
        .filter(|f| format.contains(**f))
        .count();
    r.skip(8 * words_before_tid)?;
    if format.contains(SampleFormat::TID) {
        sample.pid = Some(r.u32()? as i32);
        sample.tid = Some(r.u32()? as i32);
    }
    if format.contains(SampleFormat::TIME) {
        r.skip(8)?;
    }
    if format.contains(SampleFormat::ADDR) {
        sample.addr = Some(r.u64()?);
    }
    let words_before_period = [SampleFormat::ID, SampleFormat::STREAM_ID, SampleFormat::CPU]
        .iter()
        .filter(|f| format.contains(**f))
        .count();
    r.skip(8 * words_before_period)?;
    if format.contains(SampleFormat::PERIOD) {
        sample.period = Some(r.u64()?);
    }
    if format.contains(SampleFormat::CALLCHAIN) {
        let entries = usize::try_from(r.u64()?).ok()?;
        let bytes = r.bytes(entries.checked_mul(8)?)?;
        sample.callchain = Some(RawDataU64::from_raw_data::<LittleEndian>(RawData::Single(
            bytes,
        )));
    }
    if format.contains(SampleFormat::RAW) {
        let size = r.u32()? as usize;
        sample.raw = Some(RawData::Single(r.bytes(size)?));
    }
    if format.contains(SampleFormat::REGS_USER) {
        let abi = r.u64()?;
        if abi != 0 {
            let bytes = r.bytes(8 * usize::from(info.user_regs_count))?;
            let words = RawDataU64::from_raw_data::<LittleEndian>(RawData::Single(bytes));
            sample.user_regs = Some(Regs::new(info.sample_regs_user, words));
        }
    }
    if format.contains(SampleFormat::STACK_USER) {
        let size = usize::try_from(r.u64()?).ok()?;
        if size > 0 {
            let stack = r.bytes(size)?;
            let dyn_size = usize::try_from(r.u64()?).unwrap_or(usize::MAX);
            sample.user_stack = &stack[..dyn_size.min(size)];
        }
    }
    Some(sample)
}

impl<'a> Sample<'a> {
    /// The library's parse of a sample, for the sample types not read in
    /// place.
    pub fn of(s: SampleRecord<'a>) -> Sample<'a> {
        let user_stack = crate::unwind::copied_stack(&s.user_stack);
        Sample {
            pid: s.pid,
            tid: s.tid,
            addr: s.addr,
            period: s.period,
            cpu_mode: s.cpu_mode,
            callchain: s.callchain,
            raw: s.raw,
            user_regs: s.user_regs,
            user_stack,
        }
    }
}

/// Reads a record's fields in order, each checked against its end.
struct Reader<'a> {
    body: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn bytes(&mut self, len: usize) -> Option<&'a [u8]> {
        let end = self.at.checked_add(len)?;
        let bytes = self.body.get(self.at..end)?;
        self.at = end;
        Some(bytes)
    }

    fn skip(&mut self, len: usize) -> Option<()> {
        self.bytes(len).map(|_| ())
    }

    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.bytes(8)?.try_into().ok()?))
    }

    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.bytes(4)?.try_into().ok()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use linux_perf_data::linux_perf_event_reader::{Endianness, PerfEventAttr};

    /// A sample's fields read in place equal the library's parse, for the
    /// sample types of pfprof's fp and dwarf recordings; a body cut short
    /// anywhere reads as None, never past its end.
    #[test]
    fn reads_what_the_library_reads() {
        let format = SampleFormat::IDENTIFIER
            | SampleFormat::IP
            | SampleFormat::TID
            | SampleFormat::TIME
            | SampleFormat::ADDR
            | SampleFormat::CPU
            | SampleFormat::PERIOD
            | SampleFormat::CALLCHAIN
            | SampleFormat::RAW
            | SampleFormat::REGS_USER
            | SampleFormat::STACK_USER;
        let mut attr_bytes = [0u8; 120];
        attr_bytes[4..8].copy_from_slice(&120u32.to_le_bytes());
        attr_bytes[24..32].copy_from_slice(&format.bits().to_le_bytes());
        // sample_regs_user: ip (8), sp (7), bp (6).
        attr_bytes[80..88].copy_from_slice(&((1u64 << 8) | (1 << 7) | (1 << 6)).to_le_bytes());
        attr_bytes[88..92].copy_from_slice(&64u32.to_le_bytes());
        let (attr, _) = PerfEventAttr::parse::<_, LittleEndian>(&attr_bytes[..]).unwrap();
        let info = RecordParseInfo::new(&attr, Endianness::LittleEndian);
        assert_eq!(info.user_regs_count, 3);

        let mut body = Vec::new();
        let mut word = |v: u64| body.extend_from_slice(&v.to_le_bytes());
        word(7); // identifier
        word(0x401000); // ip
        word((42u64 << 32) | 41); // pid 41, tid 42
        word(1_000); // time
        word(0xdead_b000); // addr
        word(1); // cpu
        word(3); // period
        word(2); // callchain: 2 entries
        word(0x401000);
        word(0x402000);
        body.extend_from_slice(&12u32.to_le_bytes()); // raw: 12 bytes
        body.extend_from_slice(&[9u8; 12]);
        let mut word = |v: u64| body.extend_from_slice(&v.to_le_bytes());
        word(2); // abi 64
        word(0x7ff0); // bp
        word(0x7fe0); // sp
        word(0x401000); // ip
        word(16); // stack: 16 bytes, 8 filled
        word(0x1111);
        word(0x2222);
        word(8);
        let misc = 2; // user mode

        let ours = read(&info, misc, &body).expect("reads");
        let theirs =
            SampleRecord::parse::<LittleEndian>(RawData::Single(&body), misc, &info).unwrap();
        assert_eq!((ours.pid, ours.tid), (theirs.pid, theirs.tid));
        assert_eq!((ours.addr, ours.period), (theirs.addr, theirs.period));
        assert_eq!(ours.cpu_mode, theirs.cpu_mode);
        assert_eq!(ours.callchain, theirs.callchain);
        assert_eq!(ours.raw, theirs.raw);
        let regs = |r: &Option<Regs<'_>>| r.as_ref().map(|r| [6, 7, 8].map(|i| r.get(i)));
        assert_eq!(regs(&ours.user_regs), regs(&theirs.user_regs));
        assert_eq!(
            ours.user_stack,
            crate::unwind::copied_stack(&theirs.user_stack)
        );
        assert_eq!(ours.user_stack, &0x1111u64.to_le_bytes());

        for len in 0..body.len() {
            assert!(read(&info, misc, &body[..len]).is_none(), "cut at {len}");
        }
    }
}
