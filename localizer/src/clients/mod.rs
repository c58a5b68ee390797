//! HTTP clients of the services the localizer talks to: [`prometheus`]
//! (the query API and its JSON) and [`alertmanager`] (posting alerts, one
//! outbox per Alertmanager), with what they share in [`http`]. They know
//! the wire formats, not what the queries or alerts mean.

pub mod alertmanager;
pub mod http;
pub mod prometheus;
