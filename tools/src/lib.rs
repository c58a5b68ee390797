//! Tooling that runs the system on this machine without being a test: the
//! demo (`demo`) and the synthetic fleet (`fleet`), their binaries in
//! `src/bin`, and what they and the test suite share — network namespaces,
//! real servers, the namespace fabric.
//!
//! Every fabric lives in namespaces with no link to the machine's own
//! namespace; addresses come from 198.18.0.0/15. Namespaces, processes and
//! nftables state are torn down on drop, so a failing run leaves nothing
//! behind.
//!
//! Layers, lowest first (a module uses only its own layer or lower ones):
//! `sys` (the only `unsafe`); `http`, `repo`, `process`, `netns`, `tls`;
//! `servers`, `sink`, `deploy`; `fabric`, `fleet`; `demo`.

#[allow(unsafe_code)]
pub mod sys;

pub mod demo;
pub mod deploy;
pub mod fabric;
pub mod fleet;
pub mod http;
pub mod netns;
pub mod process;
pub mod repo;
pub mod servers;
pub mod sink;
pub mod tls;

pub use netns::Netns;
pub use process::{bin_path, http_get, wait_http_ok, wait_until, ChildGuard};
