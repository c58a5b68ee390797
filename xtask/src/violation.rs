//! What the checks report: the rules, one violation, and why a check could
//! not run at all.

use std::fmt;
use std::path::PathBuf;

/// Longest source file allowed without an exception.
pub const MAX_FILE_LINES: usize = 600;
/// Longest function allowed without an exception (`#[test]` functions are
/// exempt: a scenario reads best in one piece).
pub const MAX_FN_LINES: usize = 80;

/// Which rule a [`Violation`] breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Rule {
    /// Modules of one crate that depend on each other in a circle.
    Cycle,
    /// A dependency that points up the declared layers.
    Layer,
    /// A top-level module that `ARCHITECTURE.md` places in no layer.
    Unplaced,
    /// `unsafe` (or an `allow(unsafe_code)`) outside a `sys` module.
    Unsafe,
    /// A file longer than allowed.
    FileSize,
    /// A function longer than allowed.
    FnSize,
    /// An exception in `ARCHITECTURE.md` that no longer matches the code.
    StaleException,
    /// A file that could not be read or parsed.
    Unreadable,
}

impl Rule {
    /// Short name used in the report.
    pub fn as_str(self) -> &'static str {
        match self {
            Rule::Cycle => "cycle",
            Rule::Layer => "layer",
            Rule::Unplaced => "unplaced",
            Rule::Unsafe => "unsafe",
            Rule::FileSize => "file-size",
            Rule::FnSize => "fn-size",
            Rule::StaleException => "stale-exception",
            Rule::Unreadable => "unreadable",
        }
    }
}

/// One broken rule, at a place in the tree.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Violation {
    /// The file, relative to the repository root.
    pub file: PathBuf,
    /// 1-based line, 0 when the whole file is meant.
    pub line: usize,
    /// The rule broken.
    pub rule: Rule,
    /// What is wrong, for a person.
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}: [{}] {}",
            self.file.display(),
            self.line,
            self.rule.as_str(),
            self.message
        )
    }
}

/// Why the check could not run at all (as opposed to finding violations).
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// The root has no workspace manifest or no `ARCHITECTURE.md`.
    #[error("{path}: {source}")]
    Io {
        /// The file that could not be read.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// `ARCHITECTURE.md` does not state its rules in the expected form.
    #[error("ARCHITECTURE.md:{line}: {message}")]
    Rules {
        /// 1-based line of the document.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// The workspace manifest lists no members.
    #[error("{0}: no `members = [...]` list found")]
    Members(PathBuf),
}
