//! Why a web configuration was refused; every error names the file and,
//! where there is one, the key.

use std::path::{Path, PathBuf};

/// Why a web configuration (or a file it names) could not be used.
#[derive(Debug, thiserror::Error)]
pub enum WebConfigError {
    /// The web configuration file itself could not be read.
    #[error("web config {}: cannot read: {source}", path.display())]
    Read {
        /// The `--web.config.file` path.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// Not YAML, or a key the format does not have (the message names it).
    #[error("web config {}: {message}", path.display())]
    Parse {
        /// The `--web.config.file` path.
        path: PathBuf,
        /// The YAML error with the key and line.
        message: String,
    },
    /// A value is wrong.
    #[error("web config {}: {key}: {message}", path.display())]
    Invalid {
        /// The `--web.config.file` path.
        path: PathBuf,
        /// e.g. `tls_server_config.min_version`.
        key: String,
        /// What is wrong with it.
        message: String,
    },
}

impl WebConfigError {
    /// The value at `key` of the file at `path` was refused for `why`.
    pub fn invalid(path: &Path, key: &str, why: impl std::fmt::Display) -> WebConfigError {
        WebConfigError::Invalid {
            path: path.to_path_buf(),
            key: key.to_string(),
            message: why.to_string(),
        }
    }
}
