//! The live stream of `record --stream`: the recorder's [`Tap`] fed to the
//! same stages a replay takes (decode → analysis → the stream output), so
//! that recording itself imports nothing from the later stages.

use anyhow::{Context, Result};

use crate::analysis::LiveAnalyzer;
use crate::format::decode::LiveDecoder;
use crate::format::perf_data::{EventDesc, RecordingMeta};
use crate::output::stream::{StreamKind, Streamer};
use crate::record::Tap;

/// Decodes, classifies and prints each fault while recording.
pub struct Live {
    kind: StreamKind,
    fixed_ts: bool,
    kernel_callchains: bool,
    running: Option<Running>,
}

struct Running {
    decoder: LiveDecoder,
    analyzer: LiveAnalyzer,
    streamer: Streamer,
}

impl Live {
    /// A stream of `kind`; `fixed_ts` prints sequence numbers instead of
    /// times; `kernel_callchains` keeps kernel frames.
    pub fn new(kind: StreamKind, fixed_ts: bool, kernel_callchains: bool) -> Live {
        Live {
            kind,
            fixed_ts,
            kernel_callchains,
            running: None,
        }
    }
}

impl Tap for Live {
    fn start(&mut self, events: &[EventDesc], _meta: &RecordingMeta) -> Result<()> {
        self.running = Some(Running {
            decoder: LiveDecoder::new(events).context("an event attribute did not parse")?,
            analyzer: LiveAnalyzer::new(self.kernel_callchains),
            streamer: Streamer::spawn(self.kind, self.fixed_ts, crate::sys::monotonic_ns()),
        });
        Ok(())
    }

    fn record(&mut self, bytes: &[u8]) {
        if let Some(r) = &mut self.running {
            r.decoder.push(bytes);
        }
    }

    fn settled(&mut self, cutoff: u64) {
        let Some(Running {
            decoder,
            analyzer,
            streamer,
        }) = &mut self.running
        else {
            return;
        };
        decoder.flush_before(cutoff, |event| {
            if let Some(fault) = analyzer.feed(event) {
                streamer.send(&fault, analyzer);
            }
        });
    }

    fn finish(&mut self) {
        let Some(r) = self.running.take() else {
            return;
        };
        let dropped = r.streamer.dropped;
        let printed = r.streamer.finish();
        if dropped > 0 {
            eprintln!("pfprof: stream: {printed} lines printed, {dropped} dropped (the terminal could not keep up; the recording has them all)");
        }
    }
}
