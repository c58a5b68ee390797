//! Scraping sharded over vmagent processes, as a large fleet is scraped:
//! `-promscrape.cluster.membersCount=N`, each member `memberNum=i` taking
//! its share of the targets (by a hash of their labels), all of them
//! remote-writing into one store.

use anyhow::{Context, Result};
use skeletonhunter_tools::servers::{free_loopback_addr, start_vmagent, Server, ServerOpts};
use std::collections::BTreeSet;

/// Start `members` vmagent shards of one cluster, each on its own loopback
/// port and temp dir, scraping with `scrape_config` and remote-writing to
/// `remote_write` (e.g. `http://127.0.0.1:8428/api/v1/write`).
pub fn start_vmagent_shards(
    scrape_config: &str,
    remote_write: &str,
    members: usize,
) -> Result<Vec<Server>> {
    (0..members)
        .map(|i| {
            let opts = ServerOpts::new(free_loopback_addr()?, scrape_config)
                .arg(&format!("-remoteWrite.url={remote_write}"))
                .arg(&format!("-promscrape.cluster.membersCount={members}"))
                .arg(&format!("-promscrape.cluster.memberNum={i}"));
            start_vmagent(opts).with_context(|| format!("vmagent shard {i} of {members}"))
        })
        .collect()
}

/// The scrape URLs of `server`'s active targets whose last scrape was up,
/// from its `/api/v1/targets` (Prometheus and vmagent answer alike).
pub fn up_targets(server: &Server) -> Result<BTreeSet<String>> {
    let v = server.prom_api("/api/v1/targets")?;
    let active = v["data"]["activeTargets"]
        .as_array()
        .context("/api/v1/targets: no data.activeTargets")?;
    Ok(active
        .iter()
        .filter(|t| t["health"] == "up")
        .filter_map(|t| t["scrapeUrl"].as_str().map(str::to_string))
        .collect())
}
