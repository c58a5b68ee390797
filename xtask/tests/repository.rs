//! The repository itself obeys the rules of its `ARCHITECTURE.md`: this is
//! how CI runs `cargo xtask check`.

#[test]
fn repository_obeys_architecture_rules() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives inside the workspace");
    let violations = xtask::check(root).expect("the check runs");
    let listing: Vec<String> = violations.iter().map(ToString::to_string).collect();
    assert!(
        violations.is_empty(),
        "{} violation(s):\n{}",
        violations.len(),
        listing.join("\n")
    );
}
