//! One module per subcommand: its clap flags and a small `run` that turns
//! them into calls on the layers below. [`flags`] holds what several
//! subcommands share (engine tuning, value parsers).

pub mod analyze;
pub mod bench;
pub mod flags;
pub mod jobs;
pub mod rules;
pub mod run;
pub mod simulate;
