//! End to end on a namespace fabric (see `skeletonhunter_tools::fabric`):
//! the whole system — exporters, Prometheus with the shipped rules,
//! Alertmanager with the shipped config, the localizer — through injected
//! faults, each alerted on the right component only and resolved. Runs
//! alone, one test at a time, after the rest of the suite.

mod multipath;
mod routed;
mod scenario;
