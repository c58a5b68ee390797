//! The HTTP endpoints: `/metrics`, `/-/healthy`, `/-/ready` (`/healthz`),
//! `/` and path tracing's `/traces`, GET (or HEAD) only; and
//! `POST /trace` and `POST /-/reload`. Handlers get
//! their state explicitly ([`routes::State`]). May use every behaviour
//! layer below it.

pub mod routes;

pub use routes::{handler, Health, Reload, State};
