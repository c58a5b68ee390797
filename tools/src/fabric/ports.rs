//! Ports used inside the fabric. Every namespace has its own port space, so
//! fixed ports cannot collide with anything else on the machine.

/// Exporter `/metrics`, on each container's management address.
pub const EXPORTER_METRICS: u16 = 9477;
/// Exporter UDP echo responder, on the data plane.
pub const EXPORTER_UDP: u16 = 7477;
/// Exporter TCP dial port, on the data plane.
pub const EXPORTER_TCP: u16 = 7478;
/// Prometheus, on the monitoring namespace's loopback.
pub const PROMETHEUS: u16 = 9090;
/// Alertmanager, on the monitoring namespace's loopback.
pub const ALERTMANAGER: u16 = 9093;
/// The localizer's `/metrics` and `/report`, on the monitoring namespace's loopback.
pub const LOCALIZER: u16 = 9478;
/// The pager: the shipped Alertmanager receivers' placeholder port, on the
/// monitoring namespace's loopback, where a sink records every notification
/// (the shipped config runs unchanged).
pub const PAGER: u16 = 9095;
