//! The engine: from per-pair probe aggregates to a short list of blamed
//! components. Pure computation: no I/O, no clock other than the stage
//! timings, no async runtime.
//!
//! The pipeline is the same offline (`analyze` over a CSV ping log) and
//! online (`run` over PromQL results), see [`pipeline`]:
//!
//! 1. [`detect`]: per-pair statistical tests against the fabric's own
//!    baseline (binomial tests for loss and failed dials against the
//!    background rates; a robust median/MAD baseline per path class for RTT).
//! 2. [`topology`]: the pair × component path matrix from the shared path
//!    model (`skeletonhunter_common::topology::path`), with components that
//!    no observed pair can tell apart merged into one column.
//! 3. [`tomography`]: a non-positive Lasso (coordinate descent) per symptom
//!    selects candidates, a refit without penalty removes the shrinkage, and
//!    a one-sided likelihood-ratio test plus a coverage test per candidate
//!    turn estimates into blame or clear.
//!
//! Before them, when pairs carry per-path data (multi-flow probing),
//! [`links`] blames ECMP member links from the within-pair contrast of
//! [`contrast`] over the per-path rows of [`paths`] and takes the pairs a blamed link explains out of the
//! tomography; [`evenness`] holds a ToR verdict that the per-path rows of
//! its pairs do not bear out (loss on some paths only, or not shown yet).
//!
//! With host-stack evidence (the exporters' own delays), [`hoststack`]
//! first keeps the pairs of a busy or paused host out of all of it and
//! gives that host a `host_stack` verdict instead
//! ([`pipeline::analyze_with`]).
//!
//! [`voting`] is the baseline the benchmark compares against; [`model`]
//! holds the types everything else speaks; [`stats`] the distributions.

pub mod contrast;
pub mod detect;
pub mod evenness;
pub mod hoststack;
pub mod links;
pub mod model;
pub mod paths;
pub mod persistence;
pub mod pipeline;
pub mod planes;
pub mod stats;
pub mod tomography;
pub mod topology;
pub mod voting;
