//! `pfprof top`'s full-screen view: the tables of [`super`] drawn with
//! ratatui, refreshed as each interval arrives, and the keys. The terminal
//! is restored on every way out: `q`, Ctrl-C, the end of the recording, a
//! hang-up, an error or a panic (ratatui's hook).
//!
//! Keys are read here, not through crossterm's event source: crossterm
//! 0.29 reads a hung-up terminal's end of file in an endless loop, so a
//! closed terminal with SIGHUP ignored (`nohup`, some CI runners) left top
//! spinning forever.

use std::os::fd::{AsRawFd, RawFd};
use std::sync::mpsc::{Receiver, TryRecvError};

use anyhow::{Context, Result};
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Paragraph, Row, Table, Tabs};
use ratatui::{DefaultTerminal, Frame};

use super::{summary_line, table, utc_now, CpuMeter, SortBy, View, Window};
use crate::commands::continuous::Interval;
use crate::sys::TerminalInput;

/// The keys, as the last line shows them.
const KEYS: &str = "1 2 3/Tab view · s sort · w window · space pause · r reset · q quit";

/// What the screen shows and counts.
struct State {
    view: View,
    sort: SortBy,
    /// Since the start (or the last reset), else the last interval.
    since_start: bool,
    paused: bool,
    last: Window,
    total: Window,
    refreshes: u64,
    cpu: Option<f64>,
    when: String,
}

impl State {
    fn new() -> State {
        State {
            view: View::Processes,
            sort: SortBy::Total,
            since_start: false,
            paused: false,
            last: Window::default(),
            total: Window::default(),
            refreshes: 0,
            cpu: None,
            when: String::new(),
        }
    }

    /// Counts go on while paused; only the picture stops.
    fn add(&mut self, window: Window, cpu: Option<f64>) {
        self.total.merge(&window);
        if !self.paused {
            self.last = window;
            self.cpu = cpu;
            self.when = utc_now();
            self.refreshes += 1;
        }
    }

    /// Applies a key; false to quit.
    fn key(&mut self, key: KeyEvent) -> bool {
        let ctrl_c =
            key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c');
        match key.code {
            _ if ctrl_c => return false,
            KeyCode::Char('q') | KeyCode::Esc => return false,
            KeyCode::Char('1') => self.view = View::Processes,
            KeyCode::Char('2') => self.view = View::Mappings,
            KeyCode::Char('3') => self.view = View::Sites,
            KeyCode::Tab => self.view = self.view.next(),
            KeyCode::Char('s') => self.sort = self.sort.next(),
            KeyCode::Char('w') => self.since_start = !self.since_start,
            KeyCode::Char(' ') | KeyCode::Char('p') => self.paused = !self.paused,
            KeyCode::Char('r') => {
                self.total = Window::default();
                self.last = Window::default();
            }
            _ => {}
        }
        true
    }

    fn shown(&self) -> &Window {
        if self.since_start {
            &self.total
        } else {
            &self.last
        }
    }
}

/// Shows the intervals arriving on `rx` until the user quits (then stops
/// the recording), the recording ends, or `iterations` refreshes.
pub fn show(rx: &Receiver<Interval>, iterations: Option<u64>) -> Result<()> {
    // The terminal crossterm puts in raw mode: standard input if it is
    // one, else the controlling terminal.
    let keyboard = Keyboard::open()?;
    let mut terminal = ratatui::try_init().context("cannot set the terminal up")?;
    let shown = run(&mut terminal, rx, iterations, &keyboard);
    // The terminal as it was, before anything else is said.
    let restored = ratatui::try_restore().context("cannot restore the terminal");
    crate::sys::request_stop();
    shown.and(restored)
}

fn run(
    terminal: &mut DefaultTerminal,
    rx: &Receiver<Interval>,
    iterations: Option<u64>,
    keyboard: &Keyboard,
) -> Result<()> {
    let mut bytes = [0u8; 256];
    let mut state = State::new();
    let mut cpu = CpuMeter::new();
    let mut drawn_once = false;
    loop {
        terminal.draw(|frame| draw(frame, &state))?;
        loop {
            match rx.try_recv() {
                Ok(interval) => {
                    let window = Window::from_model(&interval.model, interval.wall_ns);
                    state.add(window, cpu.percent());
                }
                Err(TryRecvError::Empty) => break,
                // The recording has ended (the processes followed are gone).
                Err(TryRecvError::Disconnected) => return Ok(()),
            }
        }
        if !drawn_once && state.refreshes > 0 {
            // Whatever the recorder said on stderr is gone.
            terminal.clear()?;
            drawn_once = true;
        }
        if iterations.is_some_and(|n| state.refreshes >= n) {
            terminal.draw(|frame| draw(frame, &state))?;
            return Ok(());
        }
        // SIGTERM, or SIGHUP from a terminal that went away: the recording
        // stops too.
        if crate::sys::pending_signal().1 > 0 {
            return Ok(());
        }
        match crate::sys::read_terminal(keyboard.fd(), &mut bytes, 100)
            .context("cannot read the terminal")?
        {
            TerminalInput::Read(n) => {
                if !keys_of(&bytes[..n]).into_iter().all(|key| state.key(key)) {
                    return Ok(());
                }
            }
            TerminalInput::Nothing => {}
            TerminalInput::HungUp => return Ok(()),
        }
    }
}

/// Where keys are read from.
enum Keyboard {
    Stdin,
    Tty(std::fs::File),
}

impl Keyboard {
    fn open() -> Result<Keyboard> {
        use std::io::IsTerminal as _;
        if std::io::stdin().is_terminal() {
            return Ok(Keyboard::Stdin);
        }
        let tty = std::fs::File::open("/dev/tty")
            .context("no terminal to read keys from (use --batch)")?;
        Ok(Keyboard::Tty(tty))
    }

    fn fd(&self) -> RawFd {
        match self {
            Keyboard::Stdin => std::io::stdin().as_raw_fd(),
            Keyboard::Tty(file) => file.as_raw_fd(),
        }
    }
}

/// The keys in bytes read from a terminal in raw mode. An escape sequence
/// (an arrow, a function key) is skipped whole, so that it is not taken
/// for Esc, which quits; ESC at the end of a read is Esc.
fn keys_of(bytes: &[u8]) -> Vec<KeyEvent> {
    let mut keys = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let byte = bytes[i];
        i += 1;
        let key = match byte {
            0x03 => KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL),
            0x1b if i == bytes.len() => KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE),
            0x1b => {
                i = after_escape(bytes, i);
                continue;
            }
            b'\t' => KeyEvent::new(KeyCode::Tab, KeyModifiers::NONE),
            0x20..=0x7e => KeyEvent::new(KeyCode::Char(char::from(byte)), KeyModifiers::NONE),
            _ => continue,
        };
        keys.push(key);
    }
    keys
}

/// The index after the escape sequence whose ESC precedes `i`: CSI
/// (`ESC [` parameters, one final byte), SS3 (`ESC O` and one byte), or
/// ESC and one byte (Alt and a key).
fn after_escape(bytes: &[u8], i: usize) -> usize {
    let end = match bytes[i] {
        b'[' => bytes[i + 1..]
            .iter()
            .position(|b| (0x40..=0x7e).contains(b))
            .map_or(bytes.len(), |p| i + 1 + p + 1),
        b'O' => i + 2,
        _ => i + 1,
    };
    end.min(bytes.len())
}

fn draw(frame: &mut Frame, state: &State) {
    let [title, summary, tabs, body, keys] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Min(1),
        Constraint::Length(1),
    ])
    .areas(frame.area());
    let window = state.shown();
    let which = if state.since_start {
        format!("since start, {:.0} s", window.seconds)
    } else {
        format!("last {:.1} s", window.seconds)
    };
    let paused = if state.paused { " · PAUSED" } else { "" };
    let when = if state.when.is_empty() {
        "waiting for the first interval".to_string()
    } else {
        state.when.clone()
    };
    let cpu = state
        .cpu
        .map_or(String::new(), |p| format!(" · pfprof CPU {p:.0}%"));
    frame.render_widget(
        Paragraph::new(format!(
            "pfprof top · {when} · {which} · sort: {}{cpu}{paused}",
            state.sort.name()
        ))
        .style(Style::default().add_modifier(Modifier::BOLD)),
        title,
    );
    frame.render_widget(Paragraph::new(summary_line(window, None)), summary);
    let selected = View::ALL.iter().position(|v| *v == state.view).unwrap_or(0);
    let titles = View::ALL
        .iter()
        .enumerate()
        .map(|(i, v)| format!("{} {}", i + 1, v.title()));
    frame.render_widget(
        Tabs::new(titles)
            .select(selected)
            .highlight_style(Style::default().add_modifier(Modifier::REVERSED)),
        tabs,
    );
    let rows = usize::from(body.height.saturating_sub(1));
    frame.render_widget(
        table_widget(&table(window, state.view, state.sort, rows)),
        body,
    );
    frame.render_widget(
        Line::from(KEYS).style(Style::default().add_modifier(Modifier::DIM)),
        keys,
    );
}

/// The text columns take what the figures leave.
fn table_widget(t: &super::Table) -> Table<'static> {
    let widths: Vec<Constraint> = (0..t.header.len())
        .map(|i| {
            if i < t.text_columns {
                let longest = t
                    .rows
                    .iter()
                    .map(|r| r[i].chars().count())
                    .chain([t.header[i].len()])
                    .max()
                    .unwrap_or(8);
                Constraint::Max(longest as u16)
            } else {
                Constraint::Length(t.header[i].len().max(7) as u16)
            }
        })
        .collect();
    let align = |i: usize, s: String| {
        if i < t.text_columns {
            Line::from(s)
        } else {
            Line::from(s).right_aligned()
        }
    };
    let header = Row::new(
        t.header
            .iter()
            .enumerate()
            .map(|(i, h)| align(i, h.to_string())),
    )
    .style(Style::default().add_modifier(Modifier::REVERSED));
    let rows = t
        .rows
        .iter()
        .map(|r| Row::new(r.iter().enumerate().map(|(i, c)| align(i, c.clone()))));
    Table::new(rows, widths).header(header).column_spacing(2)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn press(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    #[test]
    fn keys_from_terminal_bytes() {
        let codes =
            |bytes: &[u8]| -> Vec<KeyCode> { keys_of(bytes).into_iter().map(|k| k.code).collect() };
        assert_eq!(
            codes(b"2s\t q"),
            [
                KeyCode::Char('2'),
                KeyCode::Char('s'),
                KeyCode::Tab,
                KeyCode::Char(' '),
                KeyCode::Char('q')
            ]
        );
        // Arrows, a function key and Alt-x are not Esc.
        assert_eq!(codes(b"\x1b[A\x1b[15~\x1bOP\x1bxw"), [KeyCode::Char('w')]);
        assert_eq!(codes(b"\x1b[1;5"), []);
        assert_eq!(codes(b"\x1b"), [KeyCode::Esc]);
        let ctrl_c = keys_of(b"\x03");
        assert_eq!(ctrl_c[0].code, KeyCode::Char('c'));
        assert!(ctrl_c[0].modifiers.contains(KeyModifiers::CONTROL));
        assert_eq!(codes("é".as_bytes()), []);
    }

    #[test]
    fn keys_switch_views_sort_window_pause_and_quit() {
        let mut s = State::new();
        assert!(s.key(press(KeyCode::Char('2'))));
        assert_eq!(s.view, View::Mappings);
        assert!(s.key(press(KeyCode::Tab)));
        assert_eq!(s.view, View::Sites);
        assert!(s.key(press(KeyCode::Char('s'))));
        assert_eq!(s.sort, SortBy::Major);
        assert!(s.key(press(KeyCode::Char('w'))));
        assert!(s.since_start);
        assert!(s.key(press(KeyCode::Char(' '))));
        assert!(s.paused);
        // Paused: counted, not shown.
        let mut w = Window {
            seconds: 1.0,
            ..Window::default()
        };
        w.totals.faults.minor = 5;
        s.add(w, None);
        assert_eq!(s.total.totals.faults.minor, 5);
        assert_eq!(s.last.totals.faults.minor, 0);
        assert!(s.key(press(KeyCode::Char('r'))));
        assert_eq!(s.total.totals.faults.minor, 0);
        assert!(!s.key(press(KeyCode::Char('q'))));
        assert!(!s.key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL)));
    }
}
