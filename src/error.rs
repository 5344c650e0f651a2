//! Errors that carry a documented exit code. Anything else exits 1.

use std::fmt;

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
        .map_or(1, |e| e.code)
}
