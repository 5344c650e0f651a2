//! perf's compressed recordings (`perf record -z`): the data section holds
//! `PERF_RECORD_COMPRESSED` (81) and `PERF_RECORD_COMPRESSED2` (83, whose
//! body starts with the compressed size) records, one zstd stream across
//! them, which decompresses into ordinary records. Replay reads the
//! decompressed copy as it reads a plain data section.

/// `PERF_RECORD_COMPRESSED`.
pub const RECORD_COMPRESSED: u32 = 81;
/// `PERF_RECORD_COMPRESSED2`.
pub const RECORD_COMPRESSED2: u32 = 83;

/// Whether the data section holds compressed records.
pub fn has_compressed(data: &[u8]) -> bool {
    let mut offset = 0usize;
    while let Some(head) = data.get(offset..offset + 8) {
        let record_type = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
        let size = u16::from_le_bytes([head[6], head[7]]) as usize;
        if matches!(record_type, RECORD_COMPRESSED | RECORD_COMPRESSED2) {
            return true;
        }
        if size < 8 {
            return false;
        }
        offset += size;
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
    let mut offset = 0usize;
    while let Some(head) = data.get(offset..offset + 8) {
        let record_type = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
        let size = u16::from_le_bytes([head[6], head[7]]) as usize;
        let Some(record) = data.get(offset..offset + size).filter(|_| size >= 8) else {
            return Err(format!(
                "a record of {size} bytes at offset {offset} of the data section"
            ));
        };
        offset += size;
        let compressed = match record_type {
            RECORD_COMPRESSED => &record[8..],
            RECORD_COMPRESSED2 => {
                let len = record
                    .get(8..16)
                    .map(|b| u64::from_le_bytes(b.try_into().unwrap_or_default()) as usize);
                match len.and_then(|len| record.get(16..16usize.checked_add(len)?)) {
                    Some(c) => c,
                    None => return Err("a COMPRESSED2 record's size is wrong".into()),
                }
            }
            _ => {
                out.extend_from_slice(record);
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
