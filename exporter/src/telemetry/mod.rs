//! Telemetry: every metric family ([`families`]) and the [`Metrics`]
//! handle that renders `/metrics` and is the one owner of per-peer series
//! (created on first use by the probers' targets, removed only through
//! [`Metrics::forget_peer`] / [`Metrics::forget_name`], which the probe
//! scheduler calls when a peer leaves or is renamed), and the host-side
//! loss counters ([`host`]); [`budget`] counts the series a peer costs. May use `model/` and `sys/` (`/proc/net/snmp`).

pub mod budget;
pub mod families;
pub mod host;
mod metrics;
pub mod repeats;
mod series;

pub use families::{rtt_buckets, FloatGauge, PathFamilies};
pub use host::SocketDrops;
pub use metrics::Metrics;
pub use repeats::{Repeats, Verdict};
pub use series::{DialSeries, FlowSeries, RdmaSeries, Series};
