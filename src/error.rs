//! Errors that carry a documented exit code. Anything else exits 1.

use std::fmt;

/// pfprof's own exit codes (otherwise it exits with the command's status,
/// 128+N when the command died of signal N), as `--help` documents them.
pub mod exit {
    /// Any other error.
    pub const OTHER: u8 = 1;
    /// A permission or configuration error.
    pub const CONFIG: u8 = 2;
    /// `--max-lost`: more of the faults lost than allowed (every output
    /// written).
    pub const TOO_MANY_LOST: u8 = 3;
    /// `record`'s when the command succeeded but its profile could not be
    /// written, or only in part (disk full, I/O error): a script must not
    /// believe a profile is there. A failing command's status comes first.
    pub const PROFILE_NOT_WRITTEN: u8 = 4;
    /// The command cannot be executed.
    pub const CANNOT_EXECUTE: u8 = 126;
    /// The command was not found.
    pub const NOT_FOUND: u8 = 127;
}

/// An error with the exit code pfprof must end with.
#[derive(Debug)]
pub struct CodedError {
    /// Exit code: 2 permission/config, 126 cannot execute, 127 not found.
    pub code: u8,
    message: String,
}

impl CodedError {
    /// A new error.
    pub fn new(code: u8, message: impl Into<String>) -> Self {
        CodedError {
            code,
            message: message.into(),
        }
    }
}

impl fmt::Display for CodedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for CodedError {}

/// The exit code for an error chain.
pub fn exit_code(error: &anyhow::Error) -> u8 {
    error
        .chain()
        .find_map(|e| e.downcast_ref::<CodedError>())
        .map_or(exit::OTHER, |e| e.code)
}

/// The error and its causes on one line, each said once: a cause whose
/// text an outer message already holds (a thiserror message that embeds its
/// `source`, which anyhow's `{:#}` would print again) is left out. Every
/// place that prints an error chain goes through here.
pub fn one_line(error: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in error.chain() {
        let text = cause.to_string();
        if text.is_empty() || line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    // One line, whatever a cause held.
    line.replace('\n', " ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context;

    /// An error that embeds its source's text and also exposes it as source.
    #[derive(Debug, thiserror::Error)]
    #[error("cannot read {path}: {source}")]
    struct Embeds {
        path: &'static str,
        source: std::io::Error,
    }

    /// Each cause is said once, whatever wraps it, and on one line.
    #[test]
    fn causes_said_once() {
        let io = || std::io::Error::from(std::io::ErrorKind::NotFound);
        let cases: Vec<(anyhow::Error, &str)> = vec![
            (
                anyhow::Error::new(Embeds {
                    path: "/x",
                    source: io(),
                }),
                "cannot read /x: entity not found",
            ),
            (
                Err::<(), _>(Embeds {
                    path: "/x",
                    source: io(),
                })
                .context("cannot analyse")
                .unwrap_err(),
                "cannot analyse: cannot read /x: entity not found",
            ),
            (
                Err::<(), _>(io()).context("cannot write a\nb").unwrap_err(),
                "cannot write a b: entity not found",
            ),
        ];
        for (error, want) in cases {
            assert_eq!(one_line(&error), want);
        }
        // What `{:#}` prints repeats the embedded source: the reason for
        // one_line.
        let error = anyhow::Error::new(Embeds {
            path: "/x",
            source: io(),
        });
        assert_eq!(format!("{error:#}").matches("entity not found").count(), 2);
    }
}
