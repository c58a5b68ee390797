//! The exporter behaves as Prometheus exporters do (docs/exporter.md,
//! "Flags and endpoints"): `--version`, `--check-config`, the `--web.*`
//! and `--log.*` flags (and the deprecated spellings, warned about once),
//! the HTML landing page, q-value negotiation, gzip, `process_*` and
//! `skeletonhunter_build_info`, info metrics, error counters at 0, and a
//! real Prometheus scraping it at a custom telemetry path. Loopback only,
//! no privileges needed.

use anyhow::{bail, Context, Result};
use skeletonhunter_tests::exposition::sample;
use skeletonhunter_tools::process::{bin_path, http_get, wait_http_ok, wait_until, ChildGuard};
use skeletonhunter_tools::servers::{self, free_loopback_addr, ServerOpts, TempDir};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(60);

/// A config file: no peers, UDP probing only, a loopback responder.
fn write_config(dir: &Path) -> Result<std::path::PathBuf> {
    let udp = free_loopback_addr()?;
    let cfg = dir.join("exporter.yaml");
    std::fs::write(
        &cfg,
        format!(
            "identity: {{node: \"conv-a\", host: \"host-a\", tor: \"tor1\", spine: \"s1\"}}\n\
             responder: {{udp: \"{udp}\", tcp: \"off\"}}\nprobe: {{protocols: [udp, tcp]}}\ndiscovery:\n  ebpf: false\n"
        ),
    )?;
    Ok(cfg)
}

fn exporter(cfg: &Path, flags: &[&str]) -> Command {
    let mut cmd = Command::new(bin_path("skeletonhunter-exporter"));
    cmd.arg("--config")
        .arg(cfg)
        .args(flags)
        .env_remove("RUST_LOG");
    cmd
}

/// Start the exporter and wait until `path` answers 200.
fn start(
    name: &str,
    cfg: &Path,
    listen: SocketAddr,
    flags: &[&str],
    path: &str,
) -> Result<ChildGuard> {
    let mut child = ChildGuard::spawn(name, exporter(cfg, flags))?;
    let up = wait_http_ok(name, listen, path, WAIT, Duration::from_millis(200));
    if up.is_err() {
        child.check_running()?;
        bail!("{name}: {path} not 200 in time; log:\n{}", child.log());
    }
    Ok(child)
}

/// GET `path` with extra request headers; (head, raw body bytes).
fn get_raw(addr: SocketAddr, path: &str, headers: &str) -> Result<(String, Vec<u8>)> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        s,
        "GET {path} HTTP/1.0\r\nHost: {addr}\r\n{headers}Connection: close\r\n\r\n"
    )?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf)?;
    let end = buf
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .context("no end of headers")?;
    let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
    Ok((head, buf[end + 4..].to_vec()))
}

/// `gzip -dc` of `data`.
fn gunzip(data: &[u8]) -> Result<String> {
    let mut child = Command::new("gzip")
        .arg("-dc")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .context("run gzip")?;
    let mut stdin = child.stdin.take().context("gzip stdin")?;
    let data = data.to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&data));
    let out = child.wait_with_output()?;
    writer
        .join()
        .map_err(|_| anyhow::anyhow!("writer panicked"))??;
    if !out.status.success() {
        bail!("gzip -dc failed: not gzip data");
    }
    Ok(String::from_utf8(out.stdout)?)
}

#[test]
fn version_and_check_config_print_and_exit() -> Result<()> {
    let out = Command::new(bin_path("skeletonhunter-exporter"))
        .arg("--version")
        .output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    for want in [
        "skeletonhunter-exporter version ",
        "revision: ",
        "branch: ",
        "build date: ",
        "rust version: ",
    ] {
        assert!(text.contains(want), "{want:?} missing in {text}");
    }
    let out = Command::new(bin_path("skeletonhunter-localizer"))
        .arg("--version")
        .output()?;
    assert!(String::from_utf8_lossy(&out.stdout).contains("revision: "));

    let dir = TempDir::new("conv-check")?;
    let cfg = write_config(dir.path())?;
    let out = exporter(
        &cfg,
        &["--web.listen-address=127.0.0.1:19465", "--check-config"],
    )
    .output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    for want in [
        "configuration OK",
        "listen-address: 127.0.0.1:19465",
        "node: conv-a",
        "protocols: udp, tcp",
    ] {
        assert!(text.contains(want), "{want:?} missing in {text}");
    }
    let out = exporter(&cfg, &["--web.telemetry-path=metrics", "--check-config"]).output()?;
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--web.telemetry-path"), "{err}");
    let out = exporter(&cfg, &["--log.format=colour", "--check-config"]).output()?;
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("logfmt or json"));
    Ok(())
}

#[test]
fn endpoints_metrics_and_logs_follow_exporter_conventions() -> Result<()> {
    let dir = TempDir::new("conv-run")?;
    let cfg = write_config(dir.path())?;
    let listen = free_loopback_addr()?;
    let flags = [
        format!("--web.listen-address={listen}"),
        "--web.telemetry-path=/probe-metrics".to_string(),
        "--log.format=json".to_string(),
        "--log.level=info".to_string(),
    ];
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let mut child = start("conv-exporter", &cfg, listen, &flags, "/probe-metrics")?;

    let (status, body) = http_get(listen, "/probe-metrics", Duration::from_secs(5))?;
    assert_eq!(status, 200);
    for series in [
        "process_cpu_seconds_total",
        "process_resident_memory_bytes",
        "process_virtual_memory_bytes",
        "process_open_fds",
        "process_max_fds",
        "process_start_time_seconds",
    ] {
        let v = sample(&body, series, &[]).with_context(|| format!("{series} missing"))?;
        assert!(v >= 0.0, "{series} = {v}");
    }
    assert!(sample(&body, "process_resident_memory_bytes", &[]).unwrap() > 1e6);
    let build = body
        .lines()
        .find(|l| l.starts_with("skeletonhunter_build_info{"))
        .context("skeletonhunter_build_info missing")?;
    for label in [
        "version=\"",
        "revision=\"",
        "branch=\"",
        "builddate=\"",
        "rustversion=\"",
    ] {
        assert!(build.contains(label), "{build}");
    }
    assert!(build.ends_with(" 1"), "{build}");
    // Error counters exist at 0 before any error.
    for (name, labels) in [
        (
            "skeletonhunter_probe_errors_total",
            ["protocol=\"udp\"", "reason=\"send_failed\""],
        ),
        (
            "skeletonhunter_probe_errors_total",
            ["protocol=\"udp\"", "reason=\"bad_magic\""],
        ),
        (
            "skeletonhunter_probe_errors_total",
            ["protocol=\"tcp\"", "reason=\"connect_refused\""],
        ),
        (
            "skeletonhunter_responder_dropped_total",
            ["reason=\"not_request\"", "reason=\"not_request\""],
        ),
    ] {
        assert_eq!(sample(&body, name, &labels), Some(0.0), "{name}{labels:?}");
    }
    assert_eq!(
        sample(
            &body,
            "skeletonhunter_discovery_info",
            &["mode=\"off\"", "configured=\"off\""]
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(&body, "skeletonhunter_rdma_info", &["status=\"off\""]),
        Some(1.0)
    );
    assert_eq!(http_get(listen, "/metrics", Duration::from_secs(5))?.0, 404);

    // Landing page: HTML linking the telemetry path.
    let (head, page) = get_raw(listen, "/", "")?;
    assert!(head.contains("content-type: text/html"), "{head}");
    assert!(String::from_utf8_lossy(&page).contains("href=\"/probe-metrics\""));

    // q-values: text preferred over OpenMetrics; then OpenMetrics preferred.
    let (head, _) = get_raw(
        listen,
        "/probe-metrics",
        "Accept: application/openmetrics-text;version=1.0.0;q=0.5,text/plain;q=0.9\r\n",
    )?;
    assert!(
        head.contains("content-type: text/plain; version=0.0.4"),
        "{head}"
    );
    let (head, om) = get_raw(
        listen,
        "/probe-metrics",
        "Accept: text/plain;q=0.2,application/openmetrics-text;version=1.0.0;q=0.8\r\n",
    )?;
    assert!(head.contains("application/openmetrics-text"), "{head}");
    assert!(String::from_utf8_lossy(&om).ends_with("# EOF\n"));

    // gzip when asked, identity otherwise.
    let (head, zipped) = get_raw(listen, "/probe-metrics", "Accept-Encoding: gzip\r\n")?;
    assert!(head.contains("content-encoding: gzip"), "{head}");
    let text = gunzip(&zipped)?;
    assert!(text.contains("process_open_fds"), "{text}");
    assert!(
        zipped.len() * 2 < text.len(),
        "{} -> {}",
        zipped.len(),
        text.len()
    );
    let (head, _) = get_raw(listen, "/probe-metrics", "")?;
    assert!(!head.contains("content-encoding"), "{head}");

    // JSON logs, one object a line, no colour codes.
    child.terminate(Duration::from_secs(20))?;
    let log = child.log();
    let json_lines: Vec<&str> = log.lines().filter(|l| l.starts_with('{')).collect();
    assert!(!json_lines.is_empty(), "{log}");
    for l in &json_lines {
        let v: serde_json::Value = serde_json::from_str(l).with_context(|| l.to_string())?;
        assert!(
            v.get("level").is_some() && v.get("timestamp").is_some(),
            "{l}"
        );
    }
    assert!(!log.contains('\u{1b}'), "colour codes in a log file");
    Ok(())
}

#[test]
fn deprecated_flags_still_work_and_warn_once() -> Result<()> {
    let dir = TempDir::new("conv-old")?;
    let cfg = write_config(dir.path())?;
    let listen = free_loopback_addr()?;
    let addr = listen.to_string();
    let mut child = start(
        "conv-old-exporter",
        &cfg,
        listen,
        &["--listen", &addr, "--log-level", "info"],
        "/metrics",
    )?;
    child.terminate(Duration::from_secs(20))?;
    let log = child.log();
    for (old, new) in [
        ("--listen", "--web.listen-address"),
        ("--log-level", "--log.level"),
    ] {
        let warned: Vec<&str> = log
            .lines()
            .filter(|l| l.contains(&format!("flag {old} is deprecated")))
            .collect();
        assert_eq!(warned.len(), 1, "{old}: {log}");
        assert!(
            warned[0].contains(new) && warned[0].contains("level=warn"),
            "{}",
            warned[0]
        );
        assert!(
            warned[0].starts_with("ts="),
            "logfmt by default: {}",
            warned[0]
        );
    }
    Ok(())
}

#[test]
fn prometheus_scrapes_the_custom_path_with_its_own_negotiation() -> Result<()> {
    let dir = TempDir::new("conv-prom")?;
    let cfg = write_config(dir.path())?;
    let listen = free_loopback_addr()?;
    let addr = format!("--web.listen-address={listen}");
    let _child = start(
        "conv-prom-exporter",
        &cfg,
        listen,
        &[&addr, "--web.telemetry-path=/m"],
        "/m",
    )?;
    let prom_cfg = format!(
        "global: {{scrape_interval: 1s, scrape_timeout: 1s}}\nscrape_configs:\n  - job_name: exporter\n    metrics_path: /m\n    static_configs: [{{targets: ['{listen}']}}]\n"
    );
    let prom = servers::start_prometheus(ServerOpts::new(free_loopback_addr()?, &prom_cfg))?;
    // Prometheus asks for OpenMetrics and gzip: both answered, all parsed.
    for q in [
        "up{job=\"exporter\"} == 1",
        "skeletonhunter_build_info{job=\"exporter\",rustversion!=\"\"}",
        "process_cpu_seconds_total{job=\"exporter\"}",
        "skeletonhunter_probe_errors_total{job=\"exporter\",reason=\"connect_timeout\"} == 0",
    ] {
        wait_until(q, WAIT, Duration::from_millis(500), || {
            prom.query(q).ok().filter(|v| !v.is_empty())
        })?;
    }
    Ok(())
}
