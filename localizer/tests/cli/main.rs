//! The `skeletonhunter-localizer` binary end to end: `analyze` on the real
//! production sample and on broken files (exit 2, line named, a 1 GB line
//! in bounded memory), `simulate` piped into `analyze`, `jobs` on good and
//! broken skeletons.

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

/// A file `name` in a directory of its own under the temp dir; the
/// directory goes when this is dropped (a test that fails leaves nothing).
struct Tmp {
    dir: PathBuf,
    file: PathBuf,
}

impl Drop for Tmp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl std::ops::Deref for Tmp {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.file
    }
}

impl AsRef<Path> for Tmp {
    fn as_ref(&self) -> &Path {
        &self.file
    }
}

impl AsRef<std::ffi::OsStr> for Tmp {
    fn as_ref(&self) -> &std::ffi::OsStr {
        self.file.as_os_str()
    }
}

fn tmp(name: &str) -> Tmp {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!(
        "skeletonhunter-localizer-cli-{}-{n}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(name);
    Tmp { dir, file }
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
    assert_eq!(out.status.code(), Some(2), "{name}: bad input must exit 2");
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

    // A column named twice (the sample's header with `latency` again).
    let twice = format!("{},latency\n{},1\n", lines[0], lines[1]);
    let err = broken("twice.csv", &twice);
    assert!(
        err.contains(
            "twice.csv: line 1, column `latency`: appears twice in the header (columns 22 and 46)"
        ),
        "{err}"
    );

    // Not a file; a directory.
    let out = analyze(Path::new("/nonexistent/pings.csv"));
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/pings.csv"));
    let dir = std::env::temp_dir();
    let out = analyze(&dir);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&*dir.to_string_lossy()) && err.contains("line 1"),
        "{err}"
    );
}

#[test]
fn bad_analyze_flags_and_stdin_exit_2_with_the_place() {
    let sample = data("skeletonhunter_samples.csv");
    let run = |args: &[&str]| {
        let out = bin().arg("analyze").args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        String::from_utf8(out.stderr).unwrap()
    };
    let p = sample.to_str().unwrap();
    let err = run(&["--pings", p, "--packets-per-round", "0"]);
    assert!(err.contains("--packets-per-round"), "{err}");
    let err = run(&["--pings", p, "--max-line-length", "zero"]);
    assert!(err.contains("--max-line-length"), "{err}");
    let err = run(&["--pings", p, "--no-such-flag"]);
    assert!(err.contains("--no-such-flag"), "{err}");

    use std::io::Write;
    let mut child = bin()
        .args(["analyze", "--pings", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"a,b\n1,2\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("standard input: line 1"), "{err}");
}

/// A ping log whose second line is 1 GiB of NUL bytes with no newline: a
/// sparse file, so it costs no disk.
fn gigabyte_line() -> Tmp {
    let sample = std::fs::read_to_string(data("skeletonhunter_samples.csv")).unwrap();
    let header = sample.lines().next().unwrap();
    let p = tmp("gigabyte-line.csv");
    let f = std::fs::File::create(&p).unwrap();
    use std::io::Write;
    writeln!(&f, "{header}").unwrap();
    f.set_len(1 << 30).unwrap();
    p
}

/// `analyze` with `args` under GNU time, which reports the child's peak
/// RSS and passes its exit status on: the output and the peak in KiB.
fn analyze_timed(args: &[&std::ffi::OsStr]) -> (Output, u64) {
    let out = Command::new("/usr/bin/time")
        .arg("-v")
        .arg(env!("CARGO_BIN_EXE_skeletonhunter-localizer"))
        .arg("analyze")
        .args(args)
        .output()
        .expect("/usr/bin/time (Debian package `time`)");
    let err = String::from_utf8_lossy(&out.stderr);
    let peak_kib: u64 = err
        .lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix("Maximum resident set size (kbytes): ")
        })
        .and_then(|v| v.parse().ok())
        .expect("peak RSS in the output of time -v");
    (out, peak_kib)
}

#[test]
fn a_gigabyte_line_is_an_error_at_its_line_in_bounded_memory() {
    let p = gigabyte_line();
    let (out, peak_kib) = analyze_timed(&["--pings".as_ref(), p.as_os_str()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("gigabyte-line.csv: line 2: line longer than 65536 bytes (--max-line-length)"),
        "{err}"
    );
    eprintln!("a 1 GiB line: exit 2, peak RSS {peak_kib} KiB");
    assert!(peak_kib < 64 * 1024, "peak RSS {peak_kib} KiB");
}

/// The reproduction: 1,000,000 valid rows between random pairs of
/// 10,000 nodes (about 995,000 distinct pairs, 57 MB). Memory grew with
/// the pairs (673 MiB peak in a debug build); now the row that brings the
/// 250,001st pair (`--max-pairs`' default) is an error naming its line,
/// in bounded memory.
#[test]
fn distinct_pairs_past_the_limit_are_an_error_at_their_row_in_bounded_memory() {
    use std::io::Write;
    let p = tmp("many-pairs.csv");
    let mut f = std::io::BufWriter::new(std::fs::File::create(&p).unwrap());
    writeln!(
        f,
        "src_node_id,dst_node_id,dial,latency,loss_rate,ping_time"
    )
    .unwrap();
    let mut seen = std::collections::HashSet::new();
    let mut crossing = None;
    let mut x: u64 = 29;
    for row in 0..1_000_000u64 {
        // A 64-bit LCG (Knuth's MMIX constants): the same file every run.
        let mut next = || {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) % 10_000
        };
        let (s, d) = (next(), next());
        if seen.insert((s, d)) && seen.len() == 250_001 {
            crossing = Some(row + 2);
        }
        writeln!(
            f,
            "node-{s:05},node-{d:05},success,42.5,0,{}",
            1_700_000_000_000_000_000u64 + row
        )
        .unwrap();
    }
    f.flush().unwrap();
    drop(f);
    let crossing = crossing.unwrap();
    let (out, peak_kib) = analyze_timed(&["--pings".as_ref(), p.as_os_str()]);
    let err = String::from_utf8_lossy(&out.stderr);
    eprintln!(
        "{} distinct pairs in 1,000,000 rows: exit {:?} at line {crossing}, peak RSS {peak_kib} KiB",
        seen.len(),
        out.status.code()
    );
    assert_eq!(out.status.code(), Some(2), "{err}");
    let want = format!(
        "many-pairs.csv: line {crossing}: more than 250000 distinct (src_node_id, dst_node_id) pairs (--max-pairs)"
    );
    assert!(err.contains(&want), "want {want:?} in {err}");
    assert!(peak_kib < 128 * 1024, "peak RSS {peak_kib} KiB");
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
    assert_eq!(
        keys,
        ["id", "jobs", "kind", "p_value", "pairs", "score", "symptom"]
    );
    assert!(v["pairs_anomalous"].as_u64().unwrap() > 10);
    // The simulator puts every rank in one job; its ToRs are per rail, so
    // the ToR's 8 hosts give 8 ranks under it, of 32 hosts x 4 rails.
    let jobs = faults[0]["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 1, "{jobs:?}");
    assert_eq!(jobs[0]["ranks_under"], 8, "{jobs:?}");
    assert_eq!(jobs[0]["ranks"], 128, "{jobs:?}");
    let (hit, all) = (jobs[0]["pairs_hit"].as_u64(), jobs[0]["pairs"].as_u64());
    assert!(hit > Some(0) && hit < all, "{jobs:?}");
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

/// A log of both planes (`agent_type`), with RDMA pings and traceroutes
/// (`task_type`): six hosts under three ToRs, two containers on each,
/// overlay rows between containers and underlay rows between the hosts'
/// RNICs. `lossy(plane, src_host, dst_host, src_node, dst_node)` gives a
/// row's loss rate.
fn two_plane_log(lossy: impl Fn(&str, usize, usize, &str, &str) -> f64) -> String {
    let mut s = String::from(
        "agent_type,task_type,src_node_id,dst_node_id,dial,latency,loss_rate,ping_time,\
         src_real_ip,dst_real_ip,src_node_sn,dst_node_sn,src_asw,dst_asw,src_dsw,dst_dsw,\
         src_tenant_id,dst_tenant_id\n",
    );
    let hosts = 6;
    let mut row = |plane: &str, task: &str, a: (usize, String), b: (usize, String), t: u64| {
        let loss = if task == "TRACEROUTE" {
            0.0
        } else {
            lossy(plane, a.0, b.0, &a.1, &b.1)
        };
        let tenant = if plane == "overlay" { "job-a" } else { "" };
        s.push_str(&format!(
            "{plane},{task},{},{},success,12.5,{loss},{t},10.0.0.{},10.0.0.{},h{},h{},t{},t{},s0,s0,{tenant},{tenant}\n",
            a.1, b.1, a.0, b.0, a.0, b.0, a.0 / 2, b.0 / 2
        ));
    };
    for round in 0..10u64 {
        let t = 1_700_000_000_000_000_000 + round * 10_000_000_000;
        for ha in 0..hosts {
            for hb in (0..hosts).filter(|&hb| hb != ha) {
                for c in 0..2 {
                    let (a, b) = (format!("h{ha}-c{c}"), format!("h{hb}-c{c}"));
                    row("overlay", "RDMA_PING", (ha, a.clone()), (hb, b.clone()), t);
                    if round == 0 {
                        row("overlay", "TRACEROUTE", (ha, a), (hb, b), t);
                    }
                }
                let (a, b) = (format!("h{ha}-rnic"), format!("h{hb}-rnic"));
                row("underlay", "RDMA_PING", (ha, a), (hb, b), t);
            }
        }
    }
    s
}

#[test]
fn a_log_of_both_planes_tells_an_overlay_fault_from_an_underlay_fault() {
    let run = |name: &str, log: String| {
        let p = tmp(name);
        std::fs::write(&p, log).unwrap();
        let out = bin()
            .args(["analyze", "--packets-per-round", "100", "--pings"])
            .arg(&p)
            .output()
            .unwrap();
        json(&out)
    };
    // Host 3's virtual switch: its containers lose on the overlay, the
    // host is clean on the underlay.
    let v = run(
        "planes-overlay.csv",
        two_plane_log(|plane, a, b, _, _| {
            if plane == "overlay" && (a == 3 || b == 3) {
                0.2
            } else {
                0.0
            }
        }),
    );
    let faults = v["faults"].as_array().unwrap();
    assert_eq!(faults.len(), 1, "{v}");
    assert_eq!(
        (&faults[0]["kind"], &faults[0]["id"], &faults[0]["layer"]),
        (&"vswitch".into(), &"h3".into(), &"overlay".into()),
        "{v}"
    );
    assert_eq!(faults[0]["basis"], "underlay_clean");
    assert_eq!(faults[0]["jobs"][0]["job"], "job-a", "{v}");
    assert_eq!(v["plane_pairs"]["overlay"], 60);
    assert_eq!(v["plane_pairs"]["underlay"], 30);
    assert_eq!(v["task_rows"]["traceroute"], 60);
    assert_eq!(v["task_rows"]["probes"]["rdma"], 900);

    // The same host failing on both planes: the underlay's, once.
    let v = run(
        "planes-underlay.csv",
        two_plane_log(|_, a, b, _, _| if a == 3 || b == 3 { 0.2 } else { 0.0 }),
    );
    let faults = v["faults"].as_array().unwrap();
    assert_eq!(faults.len(), 1, "{v}");
    assert_eq!(faults[0]["layer"], "underlay", "{v}");
    assert_eq!(faults[0]["basis"], "both_planes", "{v}");
    assert!(
        ["h3", "10.0.0.3"].contains(&faults[0]["id"].as_str().unwrap()),
        "{v}"
    );
    assert_eq!(
        faults[0]["planes"],
        serde_json::json!(["underlay", "overlay"])
    );

    // One container's virtual port.
    let v = run(
        "planes-vport.csv",
        two_plane_log(|plane, _, _, a, b| {
            if plane == "overlay" && (a == "h4-c1" || b == "h4-c1") {
                0.2
            } else {
                0.0
            }
        }),
    );
    let faults = v["faults"].as_array().unwrap();
    assert_eq!(faults.len(), 1, "{v}");
    assert_eq!(
        (&faults[0]["kind"], &faults[0]["id"]),
        (&"vport".into(), &"h4-c1".into()),
        "{v}"
    );

    // A plane that is neither is refused at its line.
    let p = tmp("planes-bad.csv");
    std::fs::write(&p, "agent_type,src_node_id,dst_node_id,dial,latency,loss_rate,ping_time\nvpc,a,b,success,1,0,1\n").unwrap();
    let out = bin().args(["analyze", "--pings"]).arg(&p).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("line 2") && err.contains("agent_type") && err.contains("\"vpc\""),
        "{err}"
    );
}

mod jobs;
