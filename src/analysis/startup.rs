//! Start-up windows: which faults of each program happen between its `exec`
//! and the moment it enters `main`.
//!
//! Every exec opens a window for the program it loads, in every process: a
//! wrapper (`env`, `sh -c`, a pyenv shim, `make`, a compiler driver) and each
//! program it runs get one each, and a process that execs several programs
//! gets one per program. A window closes at the uprobe on `main` where it
//! fired (`record` places it on the first program only), else at the first
//! fault of the process whose stack holds `main`, libc's
//! `__libc_start_call_main` (the frame that calls `main`; constructors run
//! from `__libc_start_main` before it) or the exit path (`exit`, `_dl_fini`);
//! at the process's next exec (a wrapper that execs without reaching `main`);
//! or, with `--until-ms N`, N ms after its exec. Faults are replayed in time
//! order, so every fault of the process before the closing one belongs to the
//! window. A forked child that has not exec'd is in no window.

use std::ops::Range;
use std::path::Path;

use pfprof_symbolize::Symbolizer;
use rustc_hash::FxHashMap;

use crate::analysis::classify::{ClassCounts, FaultClass};
use crate::analysis::process::{ModuleId, Modules};
use crate::analysis::stacks::FrameKey;

/// Functions whose presence on a stack means `main` has been entered: `main`
/// itself, libc's frame that calls it, and the exit path that runs after it
/// returns (libc has no frame pointers, so a fault in `exit` often shows no
/// caller at all).
const MAIN_MARKERS: [&str; 6] = [
    "main",
    "__libc_start_call_main",
    "exit",
    "__run_exit_handlers",
    "_dl_fini",
    "_exit",
];

/// How a window ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Cut {
    /// Still open (the recording ended before `main` was seen).
    Open,
    /// `main` was entered at this time.
    Main(u64),
    /// `--until-ms` elapsed at this time.
    UntilMs(u64),
    /// The process exec'd another program at this time, before `main`.
    Exec(u64),
}

/// One program's start-up: from an exec to its `main`.
#[derive(Debug, Clone)]
pub struct Window {
    /// The process.
    pub pid: i32,
    /// `comm` at the exec (the program's name when no file was mapped).
    pub comm: String,
    /// Time of the exec.
    pub exec_time: u64,
    /// How (and when) it closed.
    pub cut: Cut,
    /// Modules in the order the program mapped them (load order); the first
    /// is the program itself.
    pub load_order: Vec<ModuleId>,
    /// Faults in the window.
    pub faults: ClassCounts,
}

impl Window {
    /// Milliseconds from exec to the cut (or to `last_time` when still open).
    pub fn window_ms(&self, last_time: Option<u64>) -> Option<f64> {
        let end = match self.cut {
            Cut::Main(t) | Cut::UntilMs(t) | Cut::Exec(t) => t,
            Cut::Open => last_time?,
        };
        Some(end.saturating_sub(self.exec_time) as f64 / 1e6)
    }
}

/// Tracks the start-up windows during replay.
pub struct StartupTracker {
    until_ns: Option<u64>,
    /// Every window, in exec order.
    pub windows: Vec<Window>,
    /// Each process's open window.
    open: FxHashMap<i32, usize>,
    /// An exec record was seen (a perf recording may have none).
    saw_exec: bool,
    markers: FxHashMap<ModuleId, Vec<Range<u64>>>,
    disabled: bool,
    /// The program (path, file name or pid) whose window the report shows
    /// in full (`--startup-of`); by default the one with the most faults.
    pub startup_of: Option<String>,
}

impl StartupTracker {
    /// A tracker; `until_ms` replaces `main` detection; `startup_of` chooses
    /// the window shown in full.
    pub fn new(until_ms: Option<f64>, startup_of: Option<String>) -> Self {
        StartupTracker {
            until_ns: until_ms.map(|ms| (ms * 1e6) as u64),
            windows: Vec::new(),
            open: FxHashMap::default(),
            saw_exec: false,
            markers: FxHashMap::default(),
            disabled: false,
            startup_of,
        }
    }

    /// No start-up window (attached or system-wide recordings).
    pub fn disable(&mut self) {
        self.disabled = true;
    }

    /// Time of the first exec.
    pub fn first_exec(&self) -> Option<u64> {
        self.windows.first().map(|w| w.exec_time)
    }

    fn open_window(&mut self, pid: i32, comm: &str, time: u64) {
        self.open.insert(pid, self.windows.len());
        self.windows.push(Window {
            pid,
            comm: comm.to_string(),
            exec_time: time,
            cut: Cut::Open,
            load_order: Vec::new(),
            faults: ClassCounts::default(),
        });
    }

    /// An exec by `pid`: the window of the program it ran before (if still
    /// open) closes, a new one opens.
    pub fn on_exec(&mut self, pid: i32, comm: &str, time: u64) {
        if self.disabled {
            return;
        }
        self.saw_exec = true;
        if let Some(i) = self.open.remove(&pid) {
            self.windows[i].cut = Cut::Exec(time);
        }
        self.open_window(pid, comm, time);
    }

    /// A new process `pid` (a fork): a window still open under that pid was
    /// an earlier process's, which died before `main`; it takes no more
    /// faults.
    pub fn on_new_process(&mut self, pid: i32) {
        self.open.remove(&pid);
    }

    /// The uprobe on `main` fired in `pid`: its start-up ends here, exactly.
    pub fn on_main(&mut self, pid: i32, time: u64) {
        if let Some(i) = self.open.remove(&pid) {
            self.windows[i].cut = Cut::Main(time);
        }
    }

    /// A module mapped by `pid`.
    pub fn on_module(&mut self, pid: i32, module: ModuleId) {
        if let Some(&i) = self.open.get(&pid) {
            let order = &mut self.windows[i].load_order;
            if !order.contains(&module) {
                order.push(module);
            }
        }
    }

    /// Decides whether a fault of `pid` at `time` with `frames` (leaf first)
    /// belongs to a start-up window, closing the window when it should, and
    /// counts it there. Returns the window's index.
    #[allow(clippy::too_many_arguments)]
    pub fn is_startup(
        &mut self,
        pid: i32,
        time: u64,
        frames: &[FrameKey],
        class: FaultClass,
        weight: u64,
        modules: &Modules,
        symbolizer: &mut Symbolizer,
    ) -> Option<u32> {
        if self.disabled {
            return None;
        }
        if !self.saw_exec && self.windows.is_empty() {
            // A perf recording without exec records: the first faulting process.
            self.open_window(pid, "", time);
        }
        let i = *self.open.get(&pid)?;
        let window = &mut self.windows[i];
        let closed = if let Some(until) = self.until_ns {
            let over = time.saturating_sub(window.exec_time) >= until;
            if over {
                window.cut = Cut::UntilMs(time);
            }
            over
        } else {
            let mut main = false;
            for frame in frames {
                let FrameKey::Code {
                    module,
                    lookup_file_offset,
                } = *frame
                else {
                    continue;
                };
                let ranges = self.markers.entry(module).or_insert_with(|| {
                    let m = modules.get(module);
                    if !m.is_file() {
                        return Vec::new();
                    }
                    symbolizer
                        .function_ranges(Path::new(&m.path), m.build_id.as_deref(), &MAIN_MARKERS)
                        .into_iter()
                        .map(|(_, range)| range)
                        .collect()
                });
                if ranges.iter().any(|r| r.contains(&lookup_file_offset)) {
                    main = true;
                    break;
                }
            }
            if main {
                window.cut = Cut::Main(time);
            }
            main
        };
        if closed {
            self.open.remove(&pid);
            return None;
        }
        window.faults.add(class, weight);
        u32::try_from(i).ok()
    }

    /// The window a report shows in full: the one of the program named `of`
    /// (its path, file name, the name it was exec'd by, or pid) with the most faults, else (no `of`)
    /// the one with the most faults; the earliest on a tie. `name` gives a
    /// window's program path.
    pub fn choose(&self, of: Option<&str>, name: impl Fn(&Window) -> String) -> Option<usize> {
        let matches = |w: &Window| match of {
            None => true,
            Some(of) => {
                let path = name(w);
                // The name it was exec'd by (`sh` for /usr/bin/dash) too.
                path == of
                    || path.rsplit('/').next() == Some(of)
                    || w.comm == of
                    || w.pid.to_string() == of
            }
        };
        self.windows
            .iter()
            .enumerate()
            .filter(|(_, w)| matches(w))
            .max_by_key(|(i, w)| (w.faults.total(), std::cmp::Reverse(*i)))
            .map(|(i, _)| i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pfprof_symbolize::Options;

    /// One step of a replay: what happened, and (for a fault) the window the
    /// tracker must put it in.
    enum Step {
        Exec(i32, &'static str, u64),
        Main(i32, u64),
        Fork(i32),
        Module(i32, &'static str),
        Fault(i32, u64, FaultClass, Option<u32>),
    }
    use Step::*;

    fn replay(tracker: &mut StartupTracker, steps: &[Step]) -> Modules {
        let mut modules = Modules::default();
        let mut symbolizer = Symbolizer::new(Options::default());
        for (i, step) in steps.iter().enumerate() {
            match *step {
                Exec(pid, comm, t) => tracker.on_exec(pid, comm, t),
                Main(pid, t) => tracker.on_main(pid, t),
                Fork(pid) => tracker.on_new_process(pid),
                Module(pid, path) => {
                    let id = modules.intern(path, None);
                    tracker.on_module(pid, id);
                }
                Fault(pid, t, class, want) => {
                    let got = tracker.is_startup(pid, t, &[], class, 1, &modules, &mut symbolizer);
                    assert_eq!(got, want, "step {i}");
                }
            }
        }
        modules
    }

    const MS: u64 = 1_000_000;

    #[test]
    fn a_window_per_exec_in_every_process() {
        use FaultClass::{Cow, Minor};
        let mut t = StartupTracker::new(None, None);
        let modules = replay(
            &mut t,
            &[
                // sh: exec, faults, main (the uprobe), no more start-up.
                Exec(1, "sh", MS),
                Module(1, "/usr/bin/dash"),
                Module(1, "/usr/lib/ld.so"),
                Module(1, "/usr/bin/dash"),
                Fault(1, 2 * MS, Minor, Some(0)),
                Fault(1, 3 * MS, Cow, Some(0)),
                Main(1, 4 * MS),
                Fault(1, 5 * MS, Minor, None),
                // Its forked child: no window until it execs.
                Fault(2, 6 * MS, Cow, None),
                Exec(2, "env", 7 * MS),
                Module(2, "/usr/bin/env"),
                Fault(2, 8 * MS, Minor, Some(1)),
                // env execs the program before main: its window closes there.
                Exec(2, "app", 9 * MS),
                Module(2, "/opt/app"),
                Fault(2, 10 * MS, Minor, Some(2)),
                Fault(2, 11 * MS, Minor, Some(2)),
                // Another process's main does not close it.
                Main(1, 12 * MS),
                Fault(2, 13 * MS, Cow, Some(2)),
                // pid 2 reused by a new process: the old window takes no more.
                Fork(2),
                Fault(2, 14 * MS, Cow, None),
            ],
        );
        let w = &t.windows;
        assert_eq!(w.len(), 3);
        let pids: Vec<i32> = w.iter().map(|w| w.pid).collect();
        assert_eq!(pids, [1, 2, 2]);
        let cuts: Vec<&Cut> = w.iter().map(|w| &w.cut).collect();
        assert_eq!(cuts, [&Cut::Main(4 * MS), &Cut::Exec(9 * MS), &Cut::Open]);
        let counts: Vec<(u64, u64)> = w.iter().map(|w| (w.faults.minor, w.faults.cow)).collect();
        assert_eq!(counts, [(1, 1), (1, 0), (2, 1)]);
        let load: Vec<Vec<&str>> = w
            .iter()
            .map(|w| {
                w.load_order
                    .iter()
                    .map(|m| modules.get(*m).path.as_str())
                    .collect()
            })
            .collect();
        assert_eq!(
            load,
            [
                vec!["/usr/bin/dash", "/usr/lib/ld.so"],
                vec!["/usr/bin/env"],
                vec!["/opt/app"]
            ]
        );
        assert_eq!(w[1].window_ms(None), Some(2.0));
        assert_eq!(w[2].window_ms(Some(20 * MS)), Some(11.0));
        assert_eq!(w[2].window_ms(None), None);
        assert_eq!(t.first_exec(), Some(MS));
    }

    #[test]
    fn until_ms_closes_each_window_after_its_exec() {
        use FaultClass::Minor;
        let mut t = StartupTracker::new(Some(2.0), None);
        replay(
            &mut t,
            &[
                Exec(1, "a", 0),
                Fault(1, MS, Minor, Some(0)),
                Exec(2, "b", 2 * MS),
                Fault(1, 2 * MS, Minor, None),
                Fault(1, MS, Minor, None),
                Fault(2, 3 * MS, Minor, Some(1)),
                Fault(2, 4 * MS, Minor, None),
            ],
        );
        let cuts: Vec<&Cut> = t.windows.iter().map(|w| &w.cut).collect();
        assert_eq!(cuts, [&Cut::UntilMs(2 * MS), &Cut::UntilMs(4 * MS)]);
    }

    #[test]
    fn without_exec_records_the_first_faulting_process() {
        use FaultClass::Minor;
        let mut t = StartupTracker::new(None, None);
        replay(
            &mut t,
            &[
                Fault(7, 5, Minor, Some(0)),
                Fault(8, 6, Minor, None),
                Fault(7, 7, Minor, Some(0)),
            ],
        );
        assert_eq!(t.windows.len(), 1);
        assert_eq!(t.windows[0].exec_time, 5);

        let mut off = StartupTracker::new(None, None);
        off.disable();
        replay(
            &mut off,
            &[
                Exec(1, "a", 0),
                Fault(1, 1, Minor, None),
                Fault(2, 2, Minor, None),
            ],
        );
        assert!(off.windows.is_empty());
    }

    #[test]
    fn choose_by_faults_name_or_pid() {
        use FaultClass::Minor;
        let mut t = StartupTracker::new(None, None);
        replay(
            &mut t,
            &[
                Exec(1, "sh", 0),
                Fault(1, 1, Minor, Some(0)),
                Fault(1, 2, Minor, Some(0)),
                Exec(2, "app", 3),
                Fault(2, 4, Minor, Some(1)),
                Fault(2, 5, Minor, Some(1)),
                Fault(2, 6, Minor, Some(1)),
                Exec(3, "app", 7),
                Fault(3, 8, Minor, Some(2)),
                Exec(4, "cc1", 9),
                Fault(4, 10, Minor, Some(3)),
                Fault(4, 11, Minor, Some(3)),
                Fault(4, 12, Minor, Some(3)),
            ],
        );
        let path = |w: &Window| match w.comm.as_str() {
            "sh" => "/usr/bin/dash".to_string(),
            c => format!("/opt/{c}"),
        };
        for (of, want) in [
            // The most faults; the earliest of a tie.
            (None, Some(1)),
            (Some("sh"), Some(0)),
            (Some("dash"), Some(0)),
            (Some("/usr/bin/dash"), Some(0)),
            (Some("app"), Some(1)),
            (Some("/opt/cc1"), Some(3)),
            (Some("3"), Some(2)),
            (Some("opt/app"), None),
            (Some("ls"), None),
        ] {
            assert_eq!(t.choose(of, path), want, "{of:?}");
        }
    }
}
