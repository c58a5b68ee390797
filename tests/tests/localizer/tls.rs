//! The localizer against a Prometheus and an Alertmanager that are both
//! served over TLS with basic auth (`--web.config.file`, the real servers
//! from the Debian packages; certificates from `openssl`), configured with
//! `--prometheus.http-config-file` and `--alertmanager.http-config-file`
//! in the shape of Prometheus' own `http_config`.
//!
//! Prometheus also requires a client certificate; the Alertmanager URL is
//! `https://127.0.0.1:…` checked against the certificate name `localhost`
//! (`tls_config.server_name`). Missing credentials fail with a clear,
//! counted error; URLs the localizer cannot serve are refused at start
//! with exit status 2.

use anyhow::{Context, Result};
use skeletonhunter_tests::exposition::sample;
use skeletonhunter_tests::localizer::{tor, wait_for_only_alert, FakeFabric, Localizer, AM_CONFIG};
use skeletonhunter_tools::servers::{self, free_loopback_addr, Server, ServerOpts, TempDir};
use skeletonhunter_tools::tls::{file_name, Pki, TEST_PASSWORD, TEST_USER};
use skeletonhunter_tools::{bin_path, wait_until};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Prometheus (TLS, client certificate, basic auth) scraping `fabric`,
/// and Alertmanager (TLS, basic auth).
fn secured_stack(pki: &Pki, fabric: &FakeFabric) -> Result<(Server, Server)> {
    let prom = servers::start_prometheus(
        ServerOpts::new(free_loopback_addr()?, &fabric.scrape_config())
            .web_config(&pki.web_config(true), pki.access()),
    )?;
    let am = servers::start_alertmanager(
        ServerOpts::new(free_loopback_addr()?, AM_CONFIG)
            .web_config(&pki.web_config(false), pki.access()),
    )?;
    Ok((prom, am))
}

/// Write an http config file next to the certificates (relative paths in
/// it resolve there).
fn http_config(dir: &Path, name: &str, text: &str) -> Result<PathBuf> {
    let p = dir.join(name);
    std::fs::write(&p, text)?;
    Ok(p)
}

fn flag(name: &str, path: &Path) -> [String; 2] {
    [name.to_string(), path.display().to_string()]
}

/// Everything right: queries through TLS + client certificate + basic
/// auth, a ToR fault alerted in Alertmanager through TLS + basic auth.
/// Beside it, a localizer without Prometheus credentials and one without
/// Alertmanager credentials: each fails with HTTP 401, says so, and counts
/// it.
#[test]
fn localizer_queries_and_alerts_over_tls_with_auth() -> Result<()> {
    let dir = TempDir::new("localizer-tls")?;
    let d = dir.path();
    let pki = Pki::create(d)?;
    // Relative names: they resolve against the http config's directory.
    let ca = file_name(&pki.ca.cert)?;
    let client_tls = format!(
        "tls_config: {{ca_file: {ca}, cert_file: {}, key_file: {}}}\n",
        file_name(&pki.client.cert)?,
        file_name(&pki.client.key)?
    );
    std::fs::write(d.join("password"), format!("{TEST_PASSWORD}\n"))?;
    let prom_ok = http_config(
        d,
        "prom.yml",
        &format!("{client_tls}basic_auth: {{username: {TEST_USER}, password_file: password}}\n"),
    )?;
    let prom_anon = http_config(d, "prom-anon.yml", &client_tls)?;
    let am_ok = http_config(
        d,
        "am.yml",
        &format!(
            "tls_config: {{ca_file: {ca}, server_name: localhost, min_version: TLS13}}\n\
             basic_auth: {{username: {TEST_USER}, password: {TEST_PASSWORD}}}\n"
        ),
    )?;
    let am_anon = http_config(
        d,
        "am-anon.yml",
        &format!("tls_config: {{ca_file: {ca}, server_name: localhost}}\n"),
    )?;

    let fabric = FakeFabric::start()?;
    let (prom, am) = secured_stack(&pki, &fabric)?;
    assert!(prom.url().starts_with("https://") && am.url().starts_with("https://"));
    let start = |prom_cfg: &Path, am_cfg: &Path| {
        let mut extra = flag("--prometheus.http-config-file", prom_cfg).to_vec();
        extra.extend(flag("--alertmanager.http-config-file", am_cfg));
        Localizer::start_with(&prom.url(), Some(&am.url()), &extra)
    };
    let good = start(&prom_ok, &am_ok)?;
    let no_am_auth = start(&prom_ok, &am_anon)?;
    let no_prom_auth = start(&prom_anon, &am_ok)?;

    wait_until(
        "a successful cycle with all 30 pairs over TLS",
        Duration::from_secs(40),
        Duration::from_millis(250),
        || (good.metric("skeletonhunter_localizer_pairs_observed") == Some(30.0)).then_some(()),
    )
    .with_context(|| format!("localizer log:\n{}", good.child.log()))?;

    fabric.set_fault(Some((tor("t1"), 0.3)));
    let alert = wait_for_only_alert(&am, "tor", "t1", Duration::from_secs(60))
        .with_context(|| format!("localizer log:\n{}", good.child.log()))?;
    println!("alerted over TLS: {}", alert["labels"]);
    let posted = sample(
        &good.metrics(),
        "skeletonhunter_localizer_alerts_posted_total",
        &[],
    );
    assert!(posted.unwrap_or(0.0) > 0.0, "{}", good.metrics());

    // Without Alertmanager credentials: the same alert is refused, counted.
    wait_until(
        "alert posts refused with 401 and counted",
        Duration::from_secs(60),
        Duration::from_millis(250),
        || {
            let m = no_am_auth.metrics();
            (sample(&m, "skeletonhunter_localizer_alert_post_errors_total", &[]).unwrap_or(0.0)
                > 0.0)
                .then_some(())
        },
    )
    .with_context(|| format!("localizer log:\n{}", no_am_auth.child.log()))?;
    let log = no_am_auth.child.log();
    assert!(
        log.contains("HTTP 401") && log.contains("authentication required"),
        "{log}"
    );

    // Without Prometheus credentials: every query is refused, counted by reason.
    let m = no_prom_auth.metrics();
    let refused = sample(
        &m,
        "skeletonhunter_localizer_query_errors_total",
        &["reason=\"http_status\""],
    );
    assert!(refused.unwrap_or(0.0) > 0.0, "{m}");
    assert_eq!(
        no_prom_auth.metric("skeletonhunter_localizer_pairs_observed"),
        Some(0.0),
        "{m}"
    );
    let log = no_prom_auth.child.log();
    assert!(
        log.contains("HTTP 401") && log.contains("authentication required"),
        "{log}"
    );
    Ok(())
}

/// `run` with `args`: exit status and stderr, bounded by `--once` and a
/// short timeout should the start-up check let it through.
fn run_localizer(args: &[&str]) -> Result<(Option<i32>, String)> {
    let out = Command::new(bin_path("skeletonhunter-localizer"))
        .args([
            "run",
            "--once",
            "--timeout",
            "1s",
            "--web.listen-address",
            "127.0.0.1:0",
        ])
        .args(args)
        .output()?;
    Ok((
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

/// A URL or http config the localizer cannot serve is refused at start
/// with exit status 2 and a message naming the flag and the problem.
#[test]
fn urls_it_cannot_serve_are_refused_at_start() -> Result<()> {
    let dir = TempDir::new("localizer-tls-refused")?;
    let d = dir.path();
    let missing_ca = http_config(d, "missing-ca.yml", "tls_config: {ca_file: nope.pem}\n")?;
    let not_pem = http_config(d, "not-pem.yml", "tls_config: {ca_file: not.pem}\n")?;
    std::fs::write(d.join("not.pem"), "hello\n")?;
    let tls_on_http = http_config(d, "tls.yml", "tls_config: {insecure_skip_verify: true}\n")?;
    let no_password = http_config(
        d,
        "nopass.yml",
        "basic_auth: {username: u, password_file: absent}\n",
    )?;
    let typo = http_config(d, "typo.yml", "tls_config: {ca_fil: ca.pem}\n")?;
    let s = |p: &PathBuf| p.display().to_string();
    let cases: Vec<(Vec<String>, Vec<&str>)> = vec![
        (
            vec!["--prometheus".into(), "ftp://127.0.0.1:1".into()],
            vec!["--prometheus", "scheme"],
        ),
        (
            vec![
                "--prometheus".into(),
                "https://127.0.0.1:1".into(),
                "--prometheus.http-config-file".into(),
                s(&missing_ca),
            ],
            vec![
                "--prometheus.http-config-file",
                "tls_config.ca_file",
                "nope.pem",
            ],
        ),
        (
            vec![
                "--prometheus".into(),
                "https://127.0.0.1:1".into(),
                "--prometheus.http-config-file".into(),
                s(&not_pem),
            ],
            vec!["--prometheus", "no PEM certificate"],
        ),
        (
            vec![
                "--prometheus".into(),
                "http://127.0.0.1:1".into(),
                "--prometheus.http-config-file".into(),
                s(&tls_on_http),
            ],
            vec!["--prometheus", "use https"],
        ),
        (
            vec![
                "--prometheus".into(),
                "http://127.0.0.1:1".into(),
                "--alertmanager".into(),
                "https://127.0.0.1:2".into(),
                "--alertmanager.http-config-file".into(),
                s(&no_password),
            ],
            vec![
                "--alertmanager.http-config-file",
                "basic_auth.password",
                "absent",
            ],
        ),
        (
            vec![
                "--prometheus".into(),
                "http://127.0.0.1:1".into(),
                "--prometheus.http-config-file".into(),
                s(&typo),
            ],
            vec!["--prometheus.http-config-file", "ca_fil"],
        ),
    ];
    for (args, wants) in cases {
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, stderr) = run_localizer(&argv)?;
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        for w in wants {
            assert!(stderr.contains(w), "{args:?}: want {w:?} in: {stderr}");
        }
    }
    Ok(())
}

/// Credentials written into the URLs (`https://user:password@host`) are
/// used — queries and alerts get through basic auth — but no password
/// shows anywhere: not in `/metrics` labels (the `alertmanager` label),
/// log lines (the start-up line, refusals naming the URL), the status
/// page or `/report`. One warning at start points to the http config
/// file instead.
#[test]
fn credentials_in_urls_are_used_and_never_shown() -> Result<()> {
    let dir = TempDir::new("localizer-url-credentials")?;
    let d = dir.path();
    let pki = Pki::create(d)?;
    let ca = file_name(&pki.ca.cert)?;
    // TLS only: the credentials come from the URLs.
    let prom_tls = http_config(
        d,
        "prom.yml",
        &format!(
            "tls_config: {{ca_file: {ca}, cert_file: {}, key_file: {}}}\n",
            file_name(&pki.client.cert)?,
            file_name(&pki.client.key)?
        ),
    )?;
    let am_tls = http_config(
        d,
        "am.yml",
        &format!("tls_config: {{ca_file: {ca}, server_name: localhost}}\n"),
    )?;
    let fabric = FakeFabric::start()?;
    let (prom, am) = secured_stack(&pki, &fabric)?;
    let with = |url: &str, password: &str| {
        url.replacen("https://", &format!("https://{TEST_USER}:{password}@"), 1)
    };
    const WRONG: &str = "wrong-url-secret";
    let mut extra = flag("--prometheus.http-config-file", &prom_tls).to_vec();
    extra.extend(flag("--alertmanager.http-config-file", &am_tls));
    let start = |prom_pw: &str, am_pw: &str| {
        Localizer::start_with(
            &with(&prom.url(), prom_pw),
            Some(&with(&am.url(), am_pw)),
            &extra,
        )
    };
    let good = start(TEST_PASSWORD, TEST_PASSWORD)?;
    let am_refuses = start(TEST_PASSWORD, WRONG)?;
    let prom_refuses = start(WRONG, TEST_PASSWORD)?;

    wait_until(
        "a successful cycle with the URL's credentials",
        Duration::from_secs(40),
        Duration::from_millis(250),
        || (good.metric("skeletonhunter_localizer_pairs_observed") == Some(30.0)).then_some(()),
    )
    .with_context(|| format!("localizer log:\n{}", good.child.log()))?;
    fabric.set_fault(Some((tor("t1"), 0.3)));
    wait_for_only_alert(&am, "tor", "t1", Duration::from_secs(60))
        .with_context(|| format!("localizer log:\n{}", good.child.log()))?;
    wait_until(
        "alert posts refused with 401 and counted",
        Duration::from_secs(60),
        Duration::from_millis(250),
        || {
            let m = am_refuses.metrics();
            (sample(&m, "skeletonhunter_localizer_alert_post_errors_total", &[]).unwrap_or(0.0)
                > 0.0)
                .then_some(())
        },
    )
    .with_context(|| format!("localizer log:\n{}", am_refuses.child.log()))?;
    let m = prom_refuses.metrics();
    let refused = sample(
        &m,
        "skeletonhunter_localizer_query_errors_total",
        &["reason=\"http_status\""],
    );
    assert!(refused.unwrap_or(0.0) > 0.0, "{m}");

    let shown_am = with(&am.url(), "***");
    for (name, l) in [
        ("good", &good),
        ("am_refuses", &am_refuses),
        ("prom_refuses", &prom_refuses),
    ] {
        let metrics = l.metrics();
        assert!(
            metrics.contains(&format!("alertmanager=\"{shown_am}\"")),
            "{name}: {metrics}"
        );
        let (_, page) = l.request("GET", "/")?;
        let (_, report) = l.request("GET", "/report")?;
        let log = l.child.log();
        assert_eq!(
            log.matches("the URL carries credentials").count(),
            2,
            "{name}: one warning per URL: {log}"
        );
        for (what, text) in [
            ("/metrics", &metrics),
            ("/", &page),
            ("/report", &report),
            ("log", &log),
        ] {
            for secret in [TEST_PASSWORD, WRONG] {
                assert!(
                    !text.contains(secret),
                    "{name}: {what} shows {secret}:\n{text}"
                );
            }
        }
    }
    let log = am_refuses.child.log();
    assert!(log.contains("HTTP 401") && log.contains(&shown_am), "{log}");
    let log = prom_refuses.child.log();
    assert!(
        log.contains("HTTP 401") && log.contains(&with(&prom.url(), "***")),
        "{log}"
    );
    Ok(())
}
