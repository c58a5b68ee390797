//! Configuration errors; every one names the key (or file) at fault.

use std::path::PathBuf;

/// Why the configuration was refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config file {}: {source}", path.display())]
    Read {
        /// The `-c` path.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not valid YAML for the schema.
    #[error("config file {}: {message}", path.display())]
    Parse {
        /// The `-c` path.
        path: PathBuf,
        /// The YAML error with its path and line.
        message: String,
    },
    /// `identity.topology_file` could not be read, is too large or is
    /// not valid for its schema (the error names the file and the line).
    #[error(transparent)]
    Topology(#[from] ListFileError),
    /// YAML text that does not fit the schema (no file involved).
    #[error("{0}")]
    Yaml(String),
    /// `--web.config.file` does not load (the error names file and key).
    #[error(transparent)]
    Web(#[from] skeletonhunter_common::web::WebConfigError),
    /// A value is wrong; `key` is its YAML path or flag.
    #[error("{key}: {message}")]
    Invalid {
        /// e.g. `probe.interval` or `--peers entry 2`.
        key: String,
        /// What is wrong with it.
        message: String,
    },
}

impl ConfigError {
    /// A value at `key` was refused for `why`.
    pub fn invalid(key: impl Into<String>, why: impl std::fmt::Display) -> ConfigError {
        ConfigError::Invalid {
            key: key.into(),
            message: why.to_string(),
        }
    }
}

/// Why a list file (the topology map, a ToR-mesh peer list) was not
/// read; each message names the file by `what` and its path.
#[derive(Debug, thiserror::Error)]
pub enum ListFileError {
    /// Missing, unreadable or not UTF-8.
    #[error("cannot read {what} {}: {source}", path.display())]
    Read {
        /// What the file is, e.g. "topology file".
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// Larger than the limit (only that much was read).
    #[error("{what} {}: larger than {} MiB", path.display(), max_bytes >> 20)]
    TooLarge {
        /// What the file is.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The limit.
        max_bytes: u64,
    },
    /// Not valid for its schema.
    #[error("{what} {}: {message}", path.display())]
    Parse {
        /// What the file is.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The YAML error with its line.
        message: String,
    },
}
