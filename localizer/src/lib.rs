//! The SkeletonHunter localizer: from per-pair probe aggregates to a short
//! list of blamed components, offline (`analyze` over a CSV ping log) and
//! online (`run` over PromQL, alerting through Alertmanager).
//!
//! Layers, lowest first; each uses only the same or lower layers, and
//! `ARCHITECTURE.md` at the repository root has the code map:
//!
//! 1. [`engine`]: the pure maths (model types, detection, path matrix,
//!    tomography, the voting baseline).
//! 2. [`input`] (CSV ping logs and PromQL results into `PairStats`),
//!    [`clients`] (Prometheus and Alertmanager over HTTP), [`sim`] (fabric
//!    simulator and benchmark).
//! 3. [`rulesgen`] (recording rules for a topology) and [`online`] (the
//!    `run` loop: cycle, confirmation, alerts, served metrics).
//! 4. [`commands`]: one module per subcommand, flags to layers.

#![forbid(unsafe_code)]

pub mod clients;
pub mod commands;
pub mod engine;
pub mod input;
pub mod jobs;
pub mod online;
pub mod rulesgen;
pub mod sim;

pub use engine::model::{Blame, Config, Fault, PairStats, Report, Symptom, Timings};
pub use engine::pipeline::{analyze, analyze_timed};
