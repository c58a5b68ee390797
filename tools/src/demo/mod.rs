//! The demo (`skeletonhunter-demo`): the whole system on a fabric of
//! network namespaces.
//!
//! Builds the end-to-end fabric (2 ToRs × 3 hosts × 2 containers, a spine,
//! a monitoring namespace; for `--fault link` the multipath fabric of 3
//! ToRs × 2 hosts under 3 spines, for `--fault overlay` the same fabric
//! with a VXLAN overlay between the hosts), starts an exporter per
//! container, Prometheus with the shipped rules, Alertmanager with the
//! shipped config and the localizer; waits for a healthy baseline, injects
//! a fault, prints the localization and the alert as Alertmanager holds
//! it, removes the fault, waits for the alert to resolve, and cleans up —
//! also on Ctrl-C or error.
//!
//! `args` is the command line, `fault` what each fault does and which
//! verdicts name it, `show` what is printed, `cleanup` the Ctrl-C path,
//! `run` drives the six steps.

mod args;
mod cleanup;
mod fault;
mod run;
mod show;

pub use args::{Args, FaultKind};
pub use cleanup::cleanup_on_signal;
pub use run::run;
