//! perf's compressed recordings (`perf record -z`): the data section holds
//! `PERF_RECORD_COMPRESSED` (81) and `PERF_RECORD_COMPRESSED2` (83, whose
//! body starts with the compressed size) records, one zstd stream across
//! them, which decompresses into ordinary records. Replay reads the
//! decompressed copy as it reads a plain data section.

use crate::format::events::stream::Broken;
use crate::format::events::{le_u64, records, RecordHead};

/// `PERF_RECORD_COMPRESSED`.
pub const RECORD_COMPRESSED: u32 = 81;
/// `PERF_RECORD_COMPRESSED2`.
pub const RECORD_COMPRESSED2: u32 = 83;

/// Whether the data section holds compressed records (before its
/// records stop being whole).
pub fn has_compressed(data: &[u8]) -> bool {
    let compressed =
        |head: RecordHead| matches!(head.record_type, RECORD_COMPRESSED | RECORD_COMPRESSED2);
    for record in records(data) {
        match record {
            Ok(record) if compressed(record.head) => return true,
            Ok(_) => {}
            // A compressed record cut short is still one: decompress says
            // what is wrong with it.
            Err(broken) => return broken.head.is_some_and(compressed),
        }
    }
    false
}

/// The data section with every compressed record replaced by the records
/// it holds; at most `limit` bytes, else an error saying so.
pub fn decompress(data: &[u8], limit: usize) -> Result<Vec<u8>, String> {
    use zstd_safe::{DCtx, InBuffer, OutBuffer};
    let mut out = Vec::with_capacity(data.len().saturating_mul(4).min(limit));
    let mut dctx = DCtx::create();
    let mut buf = vec![0u8; 1 << 20];
    for record in records(data) {
        let record = match record {
            Ok(record) => record,
            // Fewer bytes than a header at the end: nothing more to read.
            Err(Broken { head: None, .. }) => break,
            Err(Broken {
                offset,
                head: Some(head),
            }) => {
                return Err(format!(
                    "a record of {} bytes at offset {offset} of the data section",
                    head.size
                ))
            }
        };
        let compressed = match record.head.record_type {
            RECORD_COMPRESSED => record.body(),
            RECORD_COMPRESSED2 => {
                let len = le_u64(record.bytes, 8).map(|len| len as usize);
                match len.and_then(|len| record.bytes.get(16..16usize.checked_add(len)?)) {
                    Some(c) => c,
                    None => return Err("a COMPRESSED2 record's size is wrong".into()),
                }
            }
            _ => {
                out.extend_from_slice(record.bytes);
                continue;
            }
        };
        let mut input = InBuffer::around(compressed);
        loop {
            let mut output = OutBuffer::around(&mut buf[..]);
            dctx.decompress_stream(&mut output, &mut input)
                .map_err(|code| format!("zstd: {}", zstd_safe::get_error_name(code)))?;
            let written = output.pos();
            if out.len() + written > limit {
                return Err(format!("decompressed, its records exceed {limit} bytes"));
            }
            out.extend_from_slice(&buf[..written]);
            if written < buf.len() && input.pos() == compressed.len() {
                break;
            }
        }
    }
    Ok(out)
}
