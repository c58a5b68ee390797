//! Parsers from the two input formats to the engine's [`PairStats`]: one
//! file per format. [`csv`] reads SkeletonHunter ping logs (offline
//! `analyze`, over [`lines`], which caps the line length); [`promql`] holds
//! the queries of an online cycle and turns their results into pairs and a
//! topology; [`paths`] adds the per-path rows of multi-flow exporters;
//! [`histograms`] says which RTT histogram series the queries read;
//! [`hoststack`] reads the exporters' own stack delays.
//!
//! [`PairStats`]: crate::engine::model::PairStats

pub mod csv;
pub mod histograms;
pub mod hoststack;
pub mod lines;
pub mod paths;
pub mod probes;
pub mod promql;
