//! Probing from every training container on the host, one exporter per
//! host: the containers the `containers` section selects ([`find`]) are
//! looked for every `rescan`, and each gets a prober inside its own
//! network namespace ([`prober`]) — its own identity (`src_node` is the
//! container), its own skeleton peers, its own responders. A container
//! that ends takes its prober and its series with it; one that appears is
//! probed from within one rescan. The host's own probes (host to host, the
//! underlay) run beside them as before. See docs/containers.md.

pub mod find;
pub mod prober;
mod ranks;
mod supervisor;

pub use supervisor::{plan, run, Running};
