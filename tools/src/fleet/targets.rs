//! The fleet as scrape targets: a file_sd targets file (one group per node,
//! told apart by `__metrics_path__`, with its own `instance`, since many
//! nodes share an address) and the scrape config that reads it, which
//! Prometheus and vmagent both accept.

use super::serve::node_path;
use anyhow::{Context, Result};
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

/// The file_sd groups of `nodes` nodes, node `i` at `addrs[i % addrs.len()]`:
/// `[{"targets": ["127.0.0.1:PORT"], "labels": {"__metrics_path__":
/// "/node/I/metrics", "instance": "127.0.0.1:PORT/node/I"}}, ...]`.
pub fn file_sd(addrs: &[SocketAddr], nodes: usize) -> Value {
    let groups: Vec<Value> = (0..nodes)
        .filter_map(|i| {
            let addr = addrs.get(i % addrs.len().max(1))?;
            let path = node_path(i);
            Some(json!({
                "targets": [addr.to_string()],
                "labels": {
                    "__metrics_path__": path,
                    "instance": format!("{addr}{}", path.trim_end_matches("/metrics")),
                },
            }))
        })
        .collect();
    Value::Array(groups)
}

/// Write [`file_sd`] to `path` (whole, then renamed into place, so a
/// scraper watching it never reads half a file).
pub fn write_file_sd(path: &Path, addrs: &[SocketAddr], nodes: usize) -> Result<()> {
    let tmp = path.with_extension("json.tmp");
    let text = serde_json::to_vec(&file_sd(addrs, nodes))?;
    std::fs::write(&tmp, text).with_context(|| format!("write {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("rename to {}", path.display()))
}

/// A scrape config with one job `job` reading the targets file at
/// `targets` (absolute), every `interval`.
pub fn scrape_config(job: &str, targets: &Path, interval: Duration) -> String {
    let secs = interval.as_secs().max(1);
    format!(
        "global:\n  scrape_interval: {secs}s\n  scrape_timeout: {secs}s\nscrape_configs:\n  - job_name: {job}\n    file_sd_configs:\n      - files: ['{}']\n",
        targets.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_spread_nodes_over_ports() {
        let addrs: Vec<SocketAddr> = vec![
            "127.0.0.1:1".parse().unwrap(),
            "127.0.0.1:2".parse().unwrap(),
        ];
        let v = file_sd(&addrs, 3);
        let groups = v.as_array().unwrap();
        assert_eq!(groups.len(), 3);
        assert_eq!(groups[2]["targets"][0], "127.0.0.1:1");
        assert_eq!(groups[1]["labels"]["__metrics_path__"], "/node/1/metrics");
        assert_eq!(groups[1]["labels"]["instance"], "127.0.0.1:2/node/1");
        assert_eq!(file_sd(&[], 3), json!([]));
    }
}
