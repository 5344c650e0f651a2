//! How user call chains were collected (`--call-graph`): chosen by
//! `record`, kept in the recording's metadata as perf writes it
//! (`dwarf,32768`, `fp`, `none`), read back by the analysis and the report.

use serde::{Deserialize, Serialize};

use crate::unwind::{DEFAULT_STACK_BYTES, MAX_STACK_BYTES};

/// How user call chains are collected.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum CallGraph {
    /// Copy this many bytes of user stack and the user registers per fault,
    /// and unwind them with the CFI while recording.
    Dwarf {
        /// Bytes of stack copied (a multiple of 8).
        stack_bytes: u32,
    },
    /// The kernel walks frame pointers.
    Fp,
    /// No user call chains (also a recording that does not say).
    #[default]
    None,
}

impl CallGraph {
    /// Parses `dwarf[,BYTES]`, `fp` or `none`.
    pub fn parse(text: &str) -> std::result::Result<CallGraph, String> {
        let (mode, size) = match text.split_once(',') {
            Some((mode, size)) => (mode, Some(size)),
            None => (text, None),
        };
        match (mode, size) {
            ("fp", None) => Ok(CallGraph::Fp),
            ("none", None) => Ok(CallGraph::None),
            ("dwarf", size) => {
                let bytes = match size {
                    None => DEFAULT_STACK_BYTES,
                    Some(size) => size
                        .parse::<u32>()
                        .ok()
                        .filter(|n| (8..=MAX_STACK_BYTES).contains(n))
                        .ok_or_else(|| {
                            format!("stack size must be 8..{MAX_STACK_BYTES} bytes, not {size:?}")
                        })?,
                };
                // The kernel wants a multiple of 8.
                Ok(CallGraph::Dwarf {
                    stack_bytes: bytes.next_multiple_of(8).min(MAX_STACK_BYTES),
                })
            }
            _ => Err(format!(
                "expected dwarf[,STACK_BYTES], fp or none, not {text:?}"
            )),
        }
    }

    /// As written in the recording's metadata.
    pub fn describe(self) -> String {
        match self {
            CallGraph::Dwarf { stack_bytes } => format!("dwarf,{stack_bytes}"),
            CallGraph::Fp => "fp".into(),
            CallGraph::None => "none".into(),
        }
    }
}

impl TryFrom<String> for CallGraph {
    type Error = String;
    fn try_from(text: String) -> Result<CallGraph, String> {
        CallGraph::parse(&text)
    }
}

impl From<CallGraph> for String {
    fn from(mode: CallGraph) -> String {
        mode.describe()
    }
}

impl std::fmt::Display for CallGraph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--call-graph` values, their round trip through the metadata, and
    /// the ones refused.
    #[test]
    fn call_graph_values() {
        let dwarf = |stack_bytes| Ok(CallGraph::Dwarf { stack_bytes });
        let cases = [
            ("dwarf", dwarf(32768)),
            ("dwarf,4096", dwarf(4096)),
            ("dwarf,100", dwarf(104)),
            ("dwarf,65528", dwarf(65528)),
            ("fp", Ok(CallGraph::Fp)),
            ("none", Ok(CallGraph::None)),
        ];
        for (text, want) in cases {
            assert_eq!(CallGraph::parse(text), want, "{text}");
            if let Ok(mode) = want {
                assert_eq!(
                    CallGraph::parse(&mode.describe()),
                    want,
                    "{text} round trip"
                );
            }
        }
        for bad in ["dwarf,0", "dwarf,70000", "dwarf,x", "fp,8", "lbr", ""] {
            assert!(CallGraph::parse(bad).is_err(), "{bad}");
        }
    }

    /// The metadata keeps the mode as its text.
    #[test]
    fn serialized_as_text() {
        let mode = CallGraph::Dwarf { stack_bytes: 8192 };
        assert_eq!(serde_json::to_string(&mode).unwrap(), "\"dwarf,8192\"");
        assert_eq!(
            serde_json::from_str::<CallGraph>("\"fp\"").unwrap(),
            CallGraph::Fp
        );
        assert!(serde_json::from_str::<CallGraph>("\"lbr\"").is_err());
    }
}
