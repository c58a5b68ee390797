//! The localizer binary against real servers (Prometheus,
//! VictoriaMetrics, Alertmanager; over TLS too) without the namespace
//! fabric: its one-shot commands, the online loop, outages of its
//! neighbours, incidents as a receiver sees them, its status page in a
//! browser. One test binary; a module per concern.

mod incidents;
mod native_histograms;
mod online;
mod outages;
mod rules;
mod status;
mod tls;
