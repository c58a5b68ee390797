//! Why a ping log could not be read, naming the file.

use super::fields::CsvError;
use std::path::PathBuf;

/// Why a ping log could not be read; names the file (or standard input).
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The file could not be opened.
    #[error("opening {}", path.display())]
    Open {
        /// The file.
        path: PathBuf,
        /// The operating system's reason.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a valid ping log.
    #[error("reading {}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// Where and why.
        #[source]
        source: CsvError,
    },
    /// Standard input is not a valid ping log.
    #[error("reading standard input")]
    Stdin {
        /// Where and why.
        #[source]
        source: CsvError,
    },
}
