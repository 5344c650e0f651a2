//! The live stream of `record --stream`: the recorder's [`Tap`] fed to the
//! same stages a replay takes (analysis → the stream output), so that
//! recording itself imports nothing from the later stages.

use anyhow::Result;

use crate::analysis::LiveAnalyzer;
use crate::format::decode::Event;
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
    fn start(&mut self, _events: &[EventDesc], _meta: &RecordingMeta) -> Result<()> {
        self.running = Some(Running {
            analyzer: LiveAnalyzer::new(self.kernel_callchains),
            streamer: Streamer::spawn(self.kind, self.fixed_ts, crate::sys::monotonic_ns()),
        });
        Ok(())
    }

    fn event(&mut self, _time: u64, event: Event<'_>) {
        let Some(Running { analyzer, streamer }) = &mut self.running else {
            return;
        };
        if let Some(fault) = analyzer.feed(event) {
            streamer.send(&fault, analyzer);
        }
    }

    fn settled(&mut self, _cutoff: u64) {}

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
