//! The `skeletonhunter-localizer` binary end to end: `analyze` on the real
//! production sample and on broken files, `simulate` piped into `analyze`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_skeletonhunter-localizer"))
}

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "skeletonhunter-localizer-cli-{}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

fn analyze(path: &Path) -> Output {
    bin()
        .arg("analyze")
        .arg("--pings")
        .arg(path)
        .output()
        .unwrap()
}

fn json(out: &Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn analyzes_the_production_sample() {
    let out = analyze(&data("skeletonhunter_samples.csv"));
    let v = json(&out);
    // Three rows, two (src, dst) pairs, all healthy.
    assert_eq!(v["pairs_observed"], 2);
    assert_eq!(v["pairs_anomalous"], 0);
    assert_eq!(v["faults"], serde_json::json!([]));
}

fn broken(name: &str, body: &str) -> String {
    let p = tmp(name);
    std::fs::write(&p, body).unwrap();
    let out = analyze(&p);
    let _ = std::fs::remove_file(&p);
    assert!(!out.status.success(), "{name} was accepted");
    assert!(out.stdout.is_empty());
    String::from_utf8(out.stderr).unwrap()
}

#[test]
fn broken_files_get_errors_naming_line_and_column() {
    let sample = std::fs::read_to_string(data("skeletonhunter_samples.csv")).unwrap();
    let mut lines: Vec<String> = sample.lines().map(str::to_string).collect();

    // A row with a field missing.
    let mut short = lines.clone();
    short[2] = short[2].rsplit_once(',').unwrap().0.to_string();
    let err = broken("short.csv", &short.join("\n"));
    assert!(err.contains("line 3") && err.contains("44 fields"), "{err}");

    // A latency that is not a number (column 22 of the header).
    let mut fields: Vec<&str> = lines[3].split(',').collect();
    fields[21] = "fast";
    lines[3] = fields.join(",");
    let err = broken("latency.csv", &lines.join("\n"));
    assert!(err.contains("line 4, column `latency`"), "{err}");
    assert!(err.contains("\"fast\""), "{err}");

    // No required columns at all.
    let err = broken("header.csv", "a,b,c\n1,2,3\n");
    assert!(
        err.contains("line 1") && err.contains("src_node_id"),
        "{err}"
    );

    // Not a file.
    let out = analyze(Path::new("/nonexistent/pings.csv"));
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/pings.csv"));
}

#[test]
fn simulated_fault_is_localized_through_the_cli() {
    let csv = tmp("sim.csv");
    let out = bin()
        .args([
            "simulate",
            "--hosts",
            "32",
            "--rails",
            "4",
            "--hosts-per-tor",
            "8",
        ])
        .args(["--fault", "tor=2:loss:0.03", "--seed", "9", "--out"])
        .arg(&csv)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let truth: serde_json::Value = serde_json::from_slice(&out.stderr).unwrap();
    let v = json(&analyze(&csv));
    let _ = std::fs::remove_file(&csv);
    let faults = v["faults"].as_array().unwrap();
    assert_eq!(faults.len(), 1, "{v}");
    assert_eq!(faults[0]["kind"], "tor");
    assert_eq!(faults[0]["id"], truth[0]["component"]["id"]);
    assert_eq!(faults[0]["symptom"], "loss");
    // The documented JSON fields, nothing else.
    let mut keys: Vec<&str> = faults[0]
        .as_object()
        .unwrap()
        .keys()
        .map(std::string::String::as_str)
        .collect();
    keys.sort();
    assert_eq!(keys, ["id", "kind", "p_value", "pairs", "score", "symptom"]);
    assert!(v["pairs_anomalous"].as_u64().unwrap() > 10);
}

#[test]
fn bad_simulate_flags_are_rejected() {
    let out = bin()
        .args(["simulate", "--fault", "router=1:loss"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("router"));
    let out = bin().args(["simulate", "--hosts", "0"]).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--hosts"));
}
