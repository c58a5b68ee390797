//! One logging set-up for every binary, so operators get the same format and
//! the same `RUST_LOG` / `--log-level` behaviour everywhere.

use tracing_subscriber::EnvFilter;

/// Initialise stderr logging. `RUST_LOG` wins over `default_level` when set.
pub fn init(default_level: &str) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_level));
    // A second init (tests) is harmless: ignore the error.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .try_init();
}
