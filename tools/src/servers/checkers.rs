//! The servers' own config checkers: `promtool`, `amtool`, `vmalert`,
//! run from the repository root so `rules/...` paths work.

use super::{AMTOOL_BIN, PROMTOOL_BIN, VMALERT_BIN};
use crate::process::{run_tool, ToolOutput};
use crate::repo::repo_root;
use anyhow::Result;

/// `promtool args...` run from the repository root (so `rules/...` paths work).
pub fn promtool(args: &[&str]) -> Result<ToolOutput> {
    run_tool(PROMTOOL_BIN, args, Some(&repo_root()))
}

/// `amtool args...` run from the repository root.
pub fn amtool(args: &[&str]) -> Result<ToolOutput> {
    run_tool(AMTOOL_BIN, args, Some(&repo_root()))
}

/// The receiver `amtool config routes test` picks in Alertmanager config
/// `config` for an alert with `labels` (`name=value` each).
pub fn amtool_route(config: &str, labels: &[&str]) -> Result<String> {
    let mut args = vec!["config", "routes", "test", "--config.file", config];
    args.extend_from_slice(labels);
    Ok(amtool(&args)?.ok()?.stdout.trim().to_string())
}

/// `vmalert args...` (VictoriaMetrics' rule evaluator; `-dryRun` checks
/// rule files as MetricsQL) run from the repository root.
pub fn vmalert(args: &[&str]) -> Result<ToolOutput> {
    run_tool(VMALERT_BIN, args, Some(&repo_root()))
}
