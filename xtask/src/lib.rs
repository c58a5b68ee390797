//! Repository checks that no compiler lint expresses.
//!
//! `cargo xtask check` holds the code to the rules written in
//! `ARCHITECTURE.md`: no module cycle inside a crate, dependencies that point
//! down the declared layers, `unsafe` only behind a crate's `sys` door, and
//! no file over [`MAX_FILE_LINES`] or function over [`MAX_FN_LINES`] lines
//! unless `ARCHITECTURE.md` says why. The rules themselves (layers and
//! exceptions) are read from `ARCHITECTURE.md`, so the document and the check
//! cannot drift apart.

#![forbid(unsafe_code)]

pub mod check;
pub mod graph;
pub mod modules;
pub mod rules;
pub mod sizes;
pub mod unsafety;
pub mod violation;
pub mod workspace;

pub use check::check;
pub use violation::{CheckError, Rule, Violation, MAX_FILE_LINES, MAX_FN_LINES};
