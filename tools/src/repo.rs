//! Where the shipped files are: the repository root and its YAML config
//! directories, found at compile time so tests run from any directory.

use std::path::{Path, PathBuf};

/// Root of the source tree (where `rules/`, `alertmanager/`, `dashboards/`
/// live), found from this crate's manifest directory at compile time.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// Absolute path (as text, for command lines) of `rel` in the repository.
pub fn repo_file(rel: &str) -> String {
    repo_root().join(rel).display().to_string()
}

/// Every YAML file of `dir` (relative to the repository root), sorted, as
/// absolute paths. Panics when there is none: a test reading an empty
/// directory would check nothing.
pub fn yaml_files(dir: &str) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(repo_root().join(dir))
        .unwrap_or_else(|e| panic!("read {dir}: {e}"))
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "yml" || x == "yaml"))
        .map(|p| p.display().to_string())
        .collect();
    out.sort();
    assert!(!out.is_empty(), "no YAML files in {dir}");
    out
}

/// The opt-in rule files of the per-pair detail, beside the default
/// `rules/*.yml` (see mixin/README.md).
pub const PAIR_DETAIL_RULES: &str = "rules/pair-detail";

/// Every shipped rule file as absolute paths: the default `rules/*.yml`,
/// then the opt-in `rules/pair-detail/*.yml`. Loaded together, as a
/// deployment that opts in does.
pub fn rule_files() -> Vec<String> {
    let mut out = yaml_files("rules");
    out.extend(yaml_files(PAIR_DETAIL_RULES));
    out
}

/// GitHub's anchor of a Markdown heading: lower case, spaces to `-`,
/// punctuation other than `-` and `_` dropped.
pub fn markdown_anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors ([`markdown_anchor`]) of the headings of the Markdown file
/// `rel`. A file that cannot be read has none.
pub fn markdown_anchors(rel: &str) -> std::collections::BTreeSet<String> {
    std::fs::read_to_string(repo_root().join(rel))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.strip_prefix('#'))
        .map(|h| markdown_anchor(h.trim_start_matches('#')))
        .collect()
}
