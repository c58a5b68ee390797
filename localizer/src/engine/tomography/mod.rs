//! Network tomography after Deepview: path health is the product of
//! component health, so `log(1 - loss_i) = Σ_{j ∈ path(i)} β_j` with
//! `β_j ≤ 0`.
//!
//! Per symptom:
//! 1. a non-positive, weighted Lasso (coordinate descent over the sparse
//!    path matrix) selects candidates; each column's penalty is a multiple
//!    of the null standard deviation of its score, so a candidate enters only
//!    when its pairs together deviate from noise (an absolute, not relative,
//!    penalty: a large fault does not hide a small one);
//! 2. candidates are confirmed greedily, strongest first (unless a
//!    sub-component explains the strongest), each against a
//!    model holding the faults accepted so far (explaining away): a one-sided
//!    likelihood-ratio test (binomial for loss / unreachable, Gaussian for
//!    latency) on the candidate's pairs, plus a coverage test — a fault on a
//!    node/nic/host/ToR hits all its pairs, so enough of them must show the
//!    symptom for the fitted size; a spine (ECMP) may hit only some flows, so
//!    there the share of its pairs showing the symptom is tested against the
//!    share elsewhere in the fabric (this is what separates a partial spine
//!    fault from noisy single pairs).
//!
//! One file per step: [`solver`] (Lasso screening), [`family`] (the
//! binomial and Gaussian models of a symptom), [`hypothesis`] (the LR and
//! coverage tests of one candidate), [`ecmp`] (a spine's partial-fault
//! rule), [`greedy`] (forward / backward
//! confirmation), [`equivalence`] (what cannot be told apart) and
//! [`localize`] (the orchestration and the report).

mod ecmp;
mod equivalence;
mod family;
mod greedy;
mod hypothesis;
pub mod localize;
pub mod solver;

pub use localize::localize;
pub use solver::nonpositive_lasso;
