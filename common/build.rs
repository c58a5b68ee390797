//! Captures the build's version details for `--version` and
//! `skeletonhunter_build_info`: git revision and branch when the source is
//! a git checkout with git installed, the build date and the compiler.
//! Anything unavailable is "unknown"; this script never fails the build.

use std::process::Command;

#[path = "src/civil.rs"]
mod civil;

fn main() {
    let git = |args: &[&str]| run("git", args);
    let revision = git(&["rev-parse", "--short=12", "HEAD"]);
    let branch = git(&["rev-parse", "--abbrev-ref", "HEAD"]);
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let rust =
        run(&rustc, &["--version"]).and_then(|v| v.split_whitespace().nth(1).map(str::to_string));
    println!(
        "cargo:rustc-env=SKELETONHUNTER_REVISION={}",
        revision.unwrap_or_else(|| "unknown".into())
    );
    println!(
        "cargo:rustc-env=SKELETONHUNTER_BRANCH={}",
        branch.unwrap_or_else(|| "unknown".into())
    );
    println!("cargo:rustc-env=SKELETONHUNTER_BUILD_DATE={}", build_date());
    println!(
        "cargo:rustc-env=SKELETONHUNTER_RUST_VERSION={}",
        rust.unwrap_or_else(|| "unknown".into())
    );
    // Run again when the checked-out commit or branch moves.
    for path in ["HEAD", "packed-refs"] {
        if let Some(p) = git(&["rev-parse", "--git-path", path]) {
            println!("cargo:rerun-if-changed={p}");
        }
    }
    if let Some(r) = git(&["symbolic-ref", "-q", "HEAD"]) {
        if let Some(p) = git(&["rev-parse", "--git-path", &r]) {
            println!("cargo:rerun-if-changed={p}");
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=SOURCE_DATE_EPOCH");
}

/// A command's trimmed standard output, if it ran and succeeded.
fn run(cmd: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(cmd).args(args).output().ok()?;
    let s = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !s.is_empty()).then_some(s)
}

/// `YYYYMMDD-HH:MM:SS` in UTC (Prometheus' format), from
/// `SOURCE_DATE_EPOCH` for reproducible builds, else the clock.
fn build_date() -> String {
    let secs = std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|s| s.trim().parse::<i64>().ok())
        .or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .ok()
                .map(|d| d.as_secs() as i64)
        });
    let Some(secs) = secs else {
        return "unknown".into();
    };
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (year, month, day) = civil::civil_from_days(days);
    format!(
        "{year:04}{month:02}{day:02}-{:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}
