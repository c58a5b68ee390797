//! The skip-or-fail rule for privileged tests.

/// True when this process can run privileged tests (root, `ip netns` works).
/// Outside CI a missing privilege skips the test with a printed reason; under
/// `CI=true` it fails the test, so CI can never count a skip as a pass.
pub fn require_privileges(test: &str) -> bool {
    let reason = if skeletonhunter_tools::sys::geteuid() != 0 {
        Some("not running as root".to_string())
    } else {
        match std::process::Command::new("ip")
            .args(["netns", "list"])
            .output()
        {
            Ok(o) if o.status.success() => None,
            Ok(o) => Some(format!(
                "`ip netns list` failed: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            )),
            Err(e) => Some(format!("cannot run `ip` (install iproute2): {e}")),
        }
    };
    match reason {
        None => true,
        Some(r) => skip_or_fail(test, &format!("privileged test: {r} (run as root)")),
    }
}

/// A test that cannot run for `reason`: under `CI=true` it fails (panics);
/// otherwise it is skipped with the reason printed. Returns `false`.
pub fn skip_or_fail(test: &str, reason: &str) -> bool {
    if std::env::var("CI").as_deref() == Ok("true") {
        panic!("{test}: cannot run under CI=true: {reason}");
    }
    eprintln!("SKIPPED {test}: {reason} (under CI=true this is a failure)");
    false
}
