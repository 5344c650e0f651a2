//! A readable image of a recording whose end is missing.

use super::*;

/// Rebuilds a readable image of a recording whose end is missing: pfprof was
/// killed before writing the feature sections, or the file was cut. Keeps
/// every complete record and synthesizes `EVENT_DESC` from the attrs and
/// their ids (pfprof writes its events in a fixed order, which names the
/// tracepoints). Returns the image and the number of data bytes kept; None
/// when the header or the attrs do not hold together.
pub fn repair(bytes: &[u8]) -> Option<(Vec<u8>, u64)> {
    let facts = HeaderFacts::parse(bytes)?;
    let (attr_len, events) = events_from_attrs(bytes, &facts)?;
    let end = complete_records_end(bytes, &facts);
    let image = image_with_event_desc(bytes, facts, end, &events, attr_len);
    Some((image, end as u64 - facts.data.0))
}

/// The events of the attr section, checked as [`read_layout`] checks them,
/// named as pfprof names its own (see [`OwnEvent::of_attr`]); with the
/// attrs' length.
pub(super) fn events_from_attrs(
    bytes: &[u8],
    facts: &HeaderFacts,
) -> Option<(usize, Vec<EventDesc>)> {
    let (attr_len, attrs) = check_sections(bytes, facts).ok()?;
    let (mut events, _) = attr_section(bytes, facts, attr_len, attrs).ok()?;
    let mut tracepoints = 0;
    for e in &mut events {
        // attr: u32 type, u32 size, u64 config (attr_len is at least 64).
        let type_ = u32::from_le_bytes(e.attr[..4].try_into().unwrap_or_default());
        let config = le_u64(&e.attr, 8).unwrap_or_default();
        e.name = OwnEvent::of_attr(type_, config, tracepoints).map_or_else(
            || format!("tracepoint:{config}"),
            |own| own.name.to_string(),
        );
        if type_ == perf_event_open_sys::bindings::PERF_TYPE_TRACEPOINT {
            tracepoints += 1;
        }
    }
    Some((attr_len, events))
}

/// Where the last complete record ends: whole records from the data
/// section's start, up to its declared end in a finished file, else up to
/// the file's end.
pub(super) fn complete_records_end(bytes: &[u8], facts: &HeaderFacts) -> usize {
    // check_sections put the data's start inside the file.
    let data_start = facts.data.0 as usize;
    let limit = if facts.finished() {
        bytes
            .len()
            .min(data_start.saturating_add(facts.data.1 as usize))
    } else {
        bytes.len()
    };
    let mut whole = records(&bytes[data_start..limit]);
    whole.by_ref().take_while(Result::is_ok).for_each(drop);
    data_start + whole.offset()
}

/// The recording's bytes up to `end` (header, attrs, complete records),
/// then a feature section table with `EVENT_DESC` only and that section;
/// the header says so, and how many data bytes there are.
pub(super) fn image_with_event_desc(
    bytes: &[u8],
    mut facts: HeaderFacts,
    end: usize,
    events: &[EventDesc],
    attr_len: usize,
) -> Vec<u8> {
    let data_start = facts.data.0 as usize;
    let (features, tail) = feature_tail(
        end as u64,
        vec![(HEADER_EVENT_DESC, event_desc_section(events, attr_len))],
    );
    facts.data.1 = (end - data_start) as u64;
    facts.features = features;
    let mut image = Vec::with_capacity(end + tail.len());
    image.extend_from_slice(&bytes[..end]);
    image.extend_from_slice(&tail);
    facts.write_into(&mut image);
    image
}
