//! The HTTP endpoints: `/metrics`, `/healthz`, `/` and path tracing's
//! `/trace` and `/traces`. Every route is GET (or HEAD) only. Handlers get
//! their state explicitly ([`routes::State`]). May use every behaviour
//! layer below it.

pub mod routes;

pub use routes::{handler, Health, State};
