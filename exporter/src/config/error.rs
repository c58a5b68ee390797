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
    Topology(#[from] super::file::ListFileError),
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
