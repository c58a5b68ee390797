//! The skip-or-fail rule for privileged tests.

/// True when this process can run privileged tests (root, `ip netns` works).
/// Outside CI a missing privilege skips the test with a printed reason; under
/// `CI=true` it fails the test, so CI can never count a skip as a pass.
pub fn require_privileges(test: &str) -> bool {
    let reason = if crate::sys::geteuid() != 0 {
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
        Some(r) if std::env::var("CI").as_deref() == Ok("true") => {
            panic!("{test}: privileged test cannot run under CI=true: {r}")
        }
        Some(r) => {
            eprintln!("SKIPPED {test}: {r} (run as root; under CI=true this is a failure)");
            false
        }
    }
}
