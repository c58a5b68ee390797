//! What build this binary is (captured by `build.rs` at compile time):
//! `--version` prints it and `skeletonhunter_build_info` carries the
//! same values, as Prometheus' exporters do.

/// The crate version, git revision and branch, build date (UTC,
/// `YYYYMMDD-HH:MM:SS`) and the Rust compiler's version; "unknown" where
/// the build had no git.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuildInfo {
    /// The workspace version (`Cargo.toml`).
    pub version: &'static str,
    /// Short git commit id.
    pub revision: &'static str,
    /// Git branch (`HEAD` when detached).
    pub branch: &'static str,
    /// When the build ran (or `SOURCE_DATE_EPOCH`).
    pub build_date: &'static str,
    /// `rustc` version, the analogue of client_golang's `goversion`.
    pub rust_version: &'static str,
}

/// This build.
pub const BUILD: BuildInfo = BuildInfo {
    version: env!("CARGO_PKG_VERSION"),
    revision: env!("SKELETONHUNTER_REVISION"),
    branch: env!("SKELETONHUNTER_BRANCH"),
    build_date: env!("SKELETONHUNTER_BUILD_DATE"),
    rust_version: env!("SKELETONHUNTER_RUST_VERSION"),
};

/// The `--version` text after the program name, in Prometheus' layout:
/// `version 0.1.0 (branch: main, revision: 1a2b3c)`, then the build date
/// and the compiler on their own lines.
pub const VERSION_TEXT: &str = concat!(
    "version ",
    env!("CARGO_PKG_VERSION"),
    " (branch: ",
    env!("SKELETONHUNTER_BRANCH"),
    ", revision: ",
    env!("SKELETONHUNTER_REVISION"),
    ")\n  build date: ",
    env!("SKELETONHUNTER_BUILD_DATE"),
    "\n  rust version: ",
    env!("SKELETONHUNTER_RUST_VERSION"),
);

/// Labels of `skeletonhunter_build_info` (client_golang's `goversion`
/// becomes `rustversion`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet)]
struct BuildLabels {
    version: &'static str,
    revision: &'static str,
    branch: &'static str,
    builddate: &'static str,
    rustversion: &'static str,
}

/// Register `skeletonhunter_build_info` (always 1, labelled with
/// [`BUILD`]) in `registry`, as every Prometheus exporter serves its
/// `*_build_info`.
pub fn register(registry: &mut prometheus_client::registry::Registry) {
    use prometheus_client::metrics::{family::Family, gauge::Gauge};
    let family = Family::<BuildLabels, Gauge>::default();
    family
        .get_or_create(&BuildLabels {
            version: BUILD.version,
            revision: BUILD.revision,
            branch: BUILD.branch,
            builddate: BUILD.build_date,
            rustversion: BUILD.rust_version,
        })
        .set(1);
    registry.register(
        "skeletonhunter_build_info",
        "A metric with a constant '1' value labeled by version, revision, branch, builddate and rustversion from which SkeletonHunter was built",
        family,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_info_carries_the_version_text_values() {
        let mut r = prometheus_client::registry::Registry::default();
        register(&mut r);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &r).unwrap();
        let line = format!(
            "skeletonhunter_build_info{{version=\"{}\",revision=\"{}\",branch=\"{}\",builddate=\"{}\",rustversion=\"{}\"}} 1",
            BUILD.version, BUILD.revision, BUILD.branch, BUILD.build_date, BUILD.rust_version
        );
        assert!(text.contains(&line), "{text}");
        assert!(VERSION_TEXT.contains(BUILD.revision) && VERSION_TEXT.contains(BUILD.build_date));
        // Built from a git checkout here, so the revision is known.
        assert!(
            BUILD.revision.chars().all(|c| c.is_ascii_hexdigit()) || BUILD.revision == "unknown"
        );
        assert_eq!(BUILD.build_date.len(), "20240101-00:00:00".len());
    }
}
