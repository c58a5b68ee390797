//! `skeletonhunter-localizer jobs`: groups from skeletons between ranks
//! or containers, and bad input refused by place.

use super::*;

/// `jobs` on `doc` with `args`.
fn jobs(doc: &str, args: &[&str]) -> Output {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path = tmp(&format!("jobs-{n}.json"));
    std::fs::write(&path, doc).unwrap();
    bin()
        .arg("jobs")
        .arg("--input")
        .arg(&path)
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn jobs_finds_the_groups_of_a_ring_and_chain_skeleton() {
    // 16 DP × 2 stages, each GPU its own container: DP rings (beyond a
    // host's 8 GPUs, so not TP), stage chains.
    let mut edges = Vec::new();
    for p in 0..2 {
        for d in 0..16 {
            let r = p * 16 + d;
            edges.push(format!("[{r}, {}, 0.9]", p * 16 + (d + 1) % 16));
            if p < 1 {
                edges.push(format!("[{r}, {}, 1.0]", r + 16));
            }
        }
    }
    let doc = format!(
        r#"{{"jobs": [{{"job": "j", "ranks": 32, "edges": [{}]}}]}}"#,
        edges.join(",")
    );
    let v = json(&jobs(&doc, &[]));
    let job = &v["jobs"][0];
    assert_eq!(job["job"], "j");
    let grid = &job["grid"];
    assert_eq!(
        (
            grid["tp"].as_u64(),
            grid["dp"].as_u64(),
            grid["pp"].as_u64()
        ),
        (Some(1), Some(16), Some(2)),
        "{job}"
    );
    assert_eq!(
        job["groups"]["dp"][0],
        serde_json::json!((0..16).collect::<Vec<_>>())
    );
    assert_eq!(job["groups"]["pp"][0], serde_json::json!([0, 16]));
    // Connections seen too rarely are not the skeleton: nothing left.
    let v = json(&jobs(&doc, &["--min-steadiness", "1.0"]));
    assert_ne!(
        v["jobs"][0]["groups"]["dp"][0],
        serde_json::json!([0, 1, 2, 3])
    );
}

#[test]
fn jobs_reads_skeletons_between_containers() {
    // 8 containers of 8 ranks: TP 8 inside each, DP rings of 4 containers
    // across, two pipeline stages (containers c and c + 4).
    let mut edges = Vec::new();
    for p in 0..2 {
        for d in 0..4 {
            let c = p * 4 + d;
            edges.push(format!("[{c}, {}]", p * 4 + (d + 1) % 4));
            if p == 0 {
                edges.push(format!("[{c}, {}]", c + 4));
            }
        }
    }
    let doc = format!(
        r#"{{"jobs": [{{"job": "j", "ranks": 64, "ranks_per_container": 8, "edges": [{}]}}]}}"#,
        edges.join(",")
    );
    let v = json(&jobs(&doc, &[]));
    let grid = &v["jobs"][0]["grid"];
    assert_eq!(
        (
            grid["tp"].as_u64(),
            grid["dp"].as_u64(),
            grid["pp"].as_u64(),
            grid["gpus_per_host"].as_u64()
        ),
        (Some(8), Some(4), Some(2), Some(8)),
        "{v}"
    );
    assert_eq!(v["jobs"][0]["groups"]["pp"][0], serde_json::json!([0, 32]));
}

#[test]
fn jobs_refuses_broken_skeletons_naming_the_place() {
    for (doc, args, says) in [
        (
            r#"{"jobs": [{"job": "x", "ranks": 4, "edges": [[0, 9, 1]]}]}"#,
            &[][..],
            "job 0 (\"x\"), edge 0: rank 9",
        ),
        (
            r#"{"jobs": [{"job": "x", "ranks": 4, "edges": [[0, 1, 2]]}]}"#,
            &[],
            "steadiness 2",
        ),
        (
            r#"{"jobs": [{"job": "x", "ranks": 4, "edges": [[0]]}]}"#,
            &[],
            "1 numbers",
        ),
        (
            r#"{"jobs": [{"job": "x", "ranks": 4, "edges": [[0.5, 1]]}]}"#,
            &[],
            "rank 0.5",
        ),
        (
            r#"{"jobs": [{"job": "x", "ranks": 4294967295, "edges": []}]}"#,
            &[],
            "more than",
        ),
        (
            r#"{"jobs": [{"job": "x", "ranks": 16, "ranks_per_container": 8, "edges": [[0, 2]]}]}"#,
            &[],
            "container 2 is not one of 0..2",
        ),
        (
            r#"{"jobs": [{"job": "x", "ranks": 16, "ranks_per_container": 0, "edges": []}]}"#,
            &[],
            "ranks_per_container 0, want at least 1",
        ),
        ("not json", &[], "--input"),
        (
            r#"{"jobs": []}"#,
            &["--max-input", "4B"][..],
            "larger than --max-input",
        ),
    ] {
        let out = jobs(doc, args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{doc}: {err}");
        assert!(err.contains(says), "{doc}: {err}");
    }
}
