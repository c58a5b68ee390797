//! Real Prometheus, Alertmanager, VictoriaMetrics and vmagent servers for tests, and
//! runners for `promtool` / `amtool` / `vmalert`.
//!
//! Everything comes from the Debian packages (`prometheus`,
//! `prometheus-alertmanager`, `victoria-metrics`); nothing is mocked. Each
//! server gets its own temp directory (config, extra files, data), listens on
//! the address the test gives (loopback, or a namespace-internal address when
//! started inside a [`Netns`]), is killed on drop, and is waited for on
//! `/-/ready` with a bounded wait so a broken config fails fast with the
//! server's log.
//!
//! ```no_run
//! use skeletonhunter_tools::servers::{self, ServerOpts};
//! let prom = servers::start_prometheus(
//!     ServerOpts::new(servers::free_loopback_addr()?, "global: {scrape_interval: 1s}\n")
//!         .file("rules.yml", "groups: []\n"),
//! )?;
//! let result = prom.query("up")?; // the `data.result` array
//! # Ok::<(), anyhow::Error>(())
//! ```
//!
//! `server` starts and talks to the servers, `checkers` runs the config
//! checkers, `ports` picks free addresses, `dir` holds their directories.

mod checkers;
mod dir;
mod ports;
mod server;

pub use crate::process::{run_tool, ToolOutput};
pub use crate::repo::repo_root;
pub use checkers::{amtool, amtool_route, promtool, vmalert};
pub use dir::TempDir;
pub use ports::{free_addr_on, free_loopback_addr};
pub use server::{
    in_netns, start_alertmanager, start_prometheus, start_victoria_metrics, start_vmagent, Server,
    ServerKind, ServerOpts,
};

/// Binary names as the Debian packages install them.
pub const PROMETHEUS_BIN: &str = "prometheus";
/// Alertmanager, as Debian names it.
pub const ALERTMANAGER_BIN: &str = "prometheus-alertmanager";
/// VictoriaMetrics single-node.
pub const VICTORIA_METRICS_BIN: &str = "victoria-metrics";
/// VictoriaMetrics' scraping agent.
pub const VMAGENT_BIN: &str = "vmagent";
/// Prometheus's config and rule checker.
pub const PROMTOOL_BIN: &str = "promtool";
/// Alertmanager's config checker and route tester.
pub const AMTOOL_BIN: &str = "amtool";
/// VictoriaMetrics' rule evaluator, used with `-dryRun` as a checker.
pub const VMALERT_BIN: &str = "vmalert";
