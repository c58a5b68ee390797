use super::*;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A throw-away crate `k` under the system temp dir, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(files: &[(&str, &str)]) -> Self {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "xtask-modules-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        for (path, text) in files {
            let p = dir.join("k/src").join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        Scratch(dir)
    }

    fn check(&self, layers: &str) -> Vec<Violation> {
        let doc = format!("```layers\nk: {layers}\n```\n");
        let rules = Rules::parse(&doc).unwrap();
        check_crate(&self.0, Path::new("k"), &rules)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn rules_of(v: &[Violation]) -> Vec<Rule> {
    let mut r: Vec<Rule> = v.iter().map(|v| v.rule).collect();
    r.sort();
    r
}

#[test]
fn sibling_cycle_is_found_with_its_lines() {
    let s = Scratch::new(&[
        ("lib.rs", "pub mod a;\npub mod b;\n"),
        ("a.rs", "use crate::b::B;\npub struct A;\n"),
        (
            "b.rs",
            "pub struct B;\nfn f() -> crate::a::A { crate::a::A }\n",
        ),
    ]);
    let v = s.check("a b");
    assert_eq!(rules_of(&v), vec![Rule::Cycle], "{v:?}");
    assert!(
        v[0].message.contains("k/src/a.rs:1 uses b"),
        "{}",
        v[0].message
    );
    assert!(
        v[0].message.contains("k/src/b.rs:2 uses a"),
        "{}",
        v[0].message
    );
}

#[test]
fn parent_calling_its_child_that_uses_the_parent_is_a_cycle() {
    let s = Scratch::new(&[
        ("lib.rs", "pub mod probe;\n"),
        (
            "probe/mod.rs",
            "pub mod udp;\npub trait P {}\npub fn go() { udp::run() }\n",
        ),
        ("probe/udp.rs", "use super::P;\npub fn run() {}\n"),
    ]);
    assert_eq!(rules_of(&s.check("probe")), vec![Rule::Cycle]);
}

#[test]
fn facade_reexports_and_test_code_are_not_dependencies() {
    let s = Scratch::new(&[
        ("lib.rs", "pub mod probe;\npub mod sim;\n"),
        (
            "probe/mod.rs",
            "pub mod udp;\npub use udp::run;\npub trait P {}\n",
        ),
        (
            "probe/udp.rs",
            "use super::P;\npub fn run() {}\n#[cfg(test)]\nmod tests { use crate::sim::S; }\n",
        ),
        ("sim.rs", "use crate::probe::run;\npub struct S;\n"),
    ]);
    assert!(s.check("probe < sim").is_empty());
}

#[test]
fn upward_dependency_and_unplaced_module_are_reported() {
    let s = Scratch::new(&[
        ("lib.rs", "pub mod model;\npub mod app;\npub mod stray;\n"),
        (
            "model.rs",
            "pub fn f() { tracing::info!(\"{}\", crate::app::NAME); }\n",
        ),
        ("app.rs", "pub const NAME: &str = \"x\";\n"),
        ("stray.rs", "\n"),
    ]);
    let v = s.check("model < app");
    assert_eq!(rules_of(&v), vec![Rule::Layer, Rule::Unplaced], "{v:?}");
    let layer = v.iter().find(|v| v.rule == Rule::Layer).unwrap();
    assert_eq!(
        (layer.file.to_str(), layer.line),
        (Some("k/src/model.rs"), 1)
    );
}

#[test]
fn module_aliases_are_followed() {
    let s = Scratch::new(&[
        ("lib.rs", "pub mod a;\npub mod b;\n"),
        ("a.rs", "use crate::b;\npub fn f() { b::g() }\n"),
        ("b.rs", "pub fn g() {}\n"),
    ]);
    assert_eq!(rules_of(&s.check("b < a")), Vec::<Rule>::new());
    assert_eq!(rules_of(&s.check("a < b")), vec![Rule::Layer]);
}
