//! Fuzz targets for every parser the exporter feeds from outside: the UDP
//! echo packet together with the responder's answer to it
//! ([`crate::responder::udp::answer`]), the eBPF event
//! ([`crate::wire::discovery`]) and the configuration file
//! ([`crate::config`]). They run on the stable toolchain: a seeded
//! pseudo-random generator drives structure-aware mutations of valid seeds
//! (TLV lengths, event kinds and families, YAML lines and values) plus
//! plain byte mutations, and inputs the parser accepts join a bounded
//! corpus. A few thousand inputs each run inside `cargo test`; millions
//! through `cargo run --release -p skeletonhunter-exporter --example fuzz`
//! (docs/reliability.md). The top layer: it drives `wire`, `responder` and
//! `config` and nothing drives it.

pub mod mutate;
pub mod run;
pub mod targets;
pub mod yaml;

pub use run::{run, Stats};

skeletonhunter_common::labelled_enum! {
    /// One fuzz target.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Target {
        /// The UDP echo packet and the responder's reply to it.
        Probe,
        /// The eBPF ring-buffer event.
        Event,
        /// The YAML configuration file, parsed and merged into a `Config`.
        Config,
    }
}

impl Target {
    /// The targets a `--target` value names (`all` is every one).
    pub fn parse(s: &str) -> Option<Vec<Target>> {
        if s == "all" {
            return Some(Target::ALL.to_vec());
        }
        Target::from_label(s).map(|t| vec![t])
    }
}

/// What one input did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Outcome {
    /// The parser accepted it (it may join the corpus).
    pub accepted: bool,
    /// Probe target: reply length / request length of an answered request.
    pub ratio: Option<f64>,
    /// A broken invariant (a reply larger than its request, a round trip
    /// that differs): counted like a panic.
    pub violation: Option<String>,
}
