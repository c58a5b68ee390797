//! The localizer's online loop against real stores, without namespaces:
//! `synthetic` is the scrape target standing in for exporters, `run` starts
//! the stores, Alertmanager and the localizer, `alerts` reads the verdicts
//! back, `alone` times the cycle's queries one at a time, `flood` is a
//! hostile store streaming huge answers to every query.

mod alerts;
mod alone;
mod flood;
mod run;
mod synthetic;

pub use alerts::{
    describe, is_component, sh_alerts, tor, wait_for_alerts_among, wait_for_only_alert, ALERT,
};
pub use alone::{time_queries_alone, Alone};
pub use flood::FloodingStore;
pub use run::{
    run_once, start_alertmanager, start_prometheus_per_node, start_shipped_alertmanager,
    start_store, with_hosts_file, Localizer, OnceRun, Store, AM_CONFIG,
};
pub use synthetic::{FakeFabric, PROBE_RATE};
