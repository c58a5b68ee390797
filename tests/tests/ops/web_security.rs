//! `--web.config.file` on real servers over loopback: a real Prometheus
//! scrapes the exporter over mutual TLS with basic auth; requests without
//! credentials get 401, a client certificate from another CA is refused at
//! the handshake; a rotated certificate and a changed password take effect
//! without a restart; the localizer's server honours the same file; a bad
//! file stops either binary with exit code 2 naming the file and the key.
//! Certificates come from the real `openssl`, requests from `curl`.

use anyhow::{bail, Context, Result};
use skeletonhunter_tests::exporter::Launch;
use skeletonhunter_tools::servers::{self, free_loopback_addr, run_tool, ServerOpts, TempDir};
use skeletonhunter_tools::tls::{file_name, Ca, Issued};
use skeletonhunter_tools::{bin_path, wait_until, ChildGuard};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const USER: &str = "prometheus";
const PASSWORD: &str = "s3cret";

/// How a `curl` request went: its exit code (0: a response came), the
/// HTTP status (0: none) and the response headers.
#[derive(Debug)]
struct Curl {
    exit: i32,
    status: u16,
    headers: String,
    body: String,
}

/// `curl` against `url` with `extra` options (TLS files, `-u`, `-X`).
fn curl(dir: &Path, url: &str, extra: &[&str]) -> Result<Curl> {
    let headers = dir.join("curl.headers");
    let body = dir.join("curl.body");
    let _ = std::fs::remove_file(&headers);
    let _ = std::fs::remove_file(&body);
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "10", "-o"])
        .arg(&body)
        .arg("-D")
        .arg(&headers)
        .args(["-w", "%{http_code}"])
        .args(extra)
        .arg(url)
        .output()
        .context("run curl")?;
    Ok(Curl {
        exit: out.status.code().unwrap_or(-1),
        status: String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .unwrap_or(0),
        headers: std::fs::read_to_string(&headers).unwrap_or_default(),
        body: std::fs::read_to_string(&body).unwrap_or_default(),
    })
}

/// curl options for trusting `ca` and presenting `client` (if any).
fn tls_opts<'a>(ca: &'a Path, client: Option<&'a Issued>) -> Vec<&'a str> {
    let mut v = vec!["--cacert", ca.to_str().unwrap_or("")];
    if let Some(c) = client {
        v.extend([
            "--cert",
            c.cert.to_str().unwrap_or(""),
            "--key",
            c.key.to_str().unwrap_or(""),
        ]);
    }
    v
}

/// The common name of the certificate the server at `addr` presents.
fn served_certificate(dir: &Path, addr: SocketAddr, ca: &Path, client: &Issued) -> Result<String> {
    let out = run_tool(
        "openssl",
        &[
            "s_client",
            "-connect",
            &addr.to_string(),
            "-CAfile",
            ca.to_str().unwrap_or(""),
            "-cert",
            client.cert.to_str().unwrap_or(""),
            "-key",
            client.key.to_str().unwrap_or(""),
            "-brief",
        ],
        Some(dir),
    )?;
    let text = format!("{}{}", out.stdout, out.stderr);
    text.lines()
        .find_map(|l| l.strip_prefix("Peer certificate: "))
        .map(str::to_string)
        .with_context(|| format!("no peer certificate in: {text}"))
}

/// Replace `to` by `from` atomically (a rename, as cert-manager does).
fn replace(from: &Path, to: &Path) -> Result<()> {
    let tmp = to.with_extension("new");
    std::fs::copy(from, &tmp)?;
    std::fs::rename(&tmp, to)?;
    Ok(())
}

fn bcrypt_hash(password: &str) -> Result<String> {
    // Cost 10, as `htpasswd -nBC 10` makes: what operators use.
    Ok(bcrypt::hash(password, 10)?)
}

/// The web config: mutual TLS against `ca` with `server`'s files, and
/// basic auth for [`USER`] with `hash`.
fn mtls_web_config(server: &Issued, ca: &Path, hash: &str) -> String {
    format!(
        "tls_server_config:\n  cert_file: {}\n  key_file: {}\n  client_auth_type: RequireAndVerifyClientCert\n  \
         client_ca_file: {}\n  min_version: TLS12\nhttp_server_config:\n  headers:\n    X-Content-Type-Options: nosniff\n\
         basic_auth_users:\n  {USER}: '{hash}'\n",
        server.cert.display(),
        server.key.display(),
        ca.display()
    )
}

/// Start the exporter on `listen` (no peers, UDP probing only, loopback
/// responder) with `flags`.
fn start_exporter(dir: &Path, listen: SocketAddr, flags: &[&str]) -> Result<ChildGuard> {
    let udp = free_loopback_addr()?;
    let cfg = format!(
        "listen: \"{listen}\"\nidentity: {{node: \"web-a\", host: \"host-a\", tor: \"tor1\", spine: \"s1\"}}\n\
         responder: {{udp: \"{udp}\", tcp: \"off\"}}\nprobe: {{protocols: [udp]}}\ndiscovery:\n  ebpf: false\n"
    );
    Launch::new("web-exporter").flags(flags).spawn(dir, &cfg)
}

/// Wait until `url` answers 200 to a request with `opts`.
fn wait_ok(dir: &Path, what: &str, url: &str, opts: &[&str], child: &mut ChildGuard) -> Result<()> {
    let r = wait_until(
        what,
        Duration::from_secs(30),
        Duration::from_millis(200),
        || curl(dir, url, opts).ok().filter(|c| c.status == 200),
    );
    if r.is_err() {
        child.check_running()?;
        bail!("{what}: not 200 in time; log:\n{}", child.log());
    }
    Ok(())
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// The Prometheus scrape job of the exporter at `target`, over TLS with
/// `client`'s certificate and the given basic auth (`None`: none).
fn scrape_job(
    name: &str,
    target: SocketAddr,
    ca: &Path,
    client: &Issued,
    auth: Option<&str>,
) -> String {
    let auth = auth
        .map(|p| format!("\n    basic_auth: {{username: {USER}, password: '{p}'}}"))
        .unwrap_or_default();
    format!(
        "  - job_name: {name}\n    scheme: https\n    static_configs: [{{targets: ['{target}']}}]\n    \
         tls_config: {{ca_file: '{}', cert_file: '{}', key_file: '{}'}}{auth}\n",
        ca.display(),
        client.cert.display(),
        client.key.display()
    )
}

/// The `lastError` of the active target of `job`.
fn target_error(prom: &servers::Server, job: &str) -> Option<String> {
    let v = prom.prom_api("/api/v1/targets").ok()?;
    v["data"]["activeTargets"]
        .as_array()?
        .iter()
        .find(|t| t["labels"]["job"] == job)
        .and_then(|t| t["lastError"].as_str().map(str::to_string))
        .filter(|e| !e.is_empty())
}

#[test]
fn prometheus_scrapes_over_mutual_tls_with_basic_auth_and_rotation_needs_no_restart() -> Result<()>
{
    let tmp = TempDir::new("websec")?;
    let dir = tmp.path();
    let ca = Ca::new(dir, "ca")?;
    let server1 = ca.server("server-1")?;
    let server2 = ca.server("server-2")?;
    let client = ca.client("prometheus")?;
    let rogue = Ca::new(dir, "rogue-ca")?.client("prometheus")?;
    // The files the exporter reads, replaced in place on rotation.
    let live = Issued {
        cert: dir.join("live.crt"),
        key: dir.join("live.key"),
    };
    replace(&server1.cert, &live.cert)?;
    replace(&server1.key, &live.key)?;
    let web = dir.join("web.yml");
    std::fs::write(
        &web,
        mtls_web_config(&live, &ca.cert, &bcrypt_hash(PASSWORD)?),
    )?;

    let listen = free_loopback_addr()?;
    let mut exporter = start_exporter(
        dir,
        listen,
        &["--web.config.file", web.to_str().context("path")?],
    )?;
    let base = format!("https://{listen}");
    let mut good = tls_opts(&ca.cert, Some(&client));
    let credentials = format!("{USER}:{PASSWORD}");
    good.extend(["-u", &credentials]);
    wait_ok(
        dir,
        "the exporter over mutual TLS",
        &format!("{base}/-/ready"),
        &good,
        &mut exporter,
    )?;

    // Right client certificate, right password: the metrics.
    let r = curl(dir, &format!("{base}/metrics"), &good)?;
    assert_eq!(r.status, 200, "{r:?}");
    assert!(r.body.contains("skeletonhunter_node_info"), "{}", r.body);
    assert!(
        r.headers
            .to_ascii_lowercase()
            .contains("x-content-type-options: nosniff"),
        "{}",
        r.headers
    );

    // Right certificate, no or wrong credentials: 401 with a Basic challenge.
    for auth in [
        vec![],
        vec!["-u", "prometheus:wrong"],
        vec!["-u", "nobody:s3cret"],
    ] {
        let mut opts = tls_opts(&ca.cert, Some(&client));
        opts.extend(auth.iter().copied());
        for path in ["/metrics", "/-/healthy"] {
            let r = curl(dir, &format!("{base}{path}"), &opts)?;
            assert_eq!(r.status, 401, "{path} with {auth:?}: {r:?}");
            assert!(
                r.headers.contains("www-authenticate: Basic"),
                "{}",
                r.headers
            );
            assert!(!r.body.contains("skeletonhunter_"), "{}", r.body);
        }
    }
    // Starting a trace is a POST and behind the same auth.
    let mut post = tls_opts(&ca.cert, Some(&client));
    post.extend(["-X", "POST"]);
    assert_eq!(
        curl(dir, &format!("{base}/trace?target=198.18.9.9"), &post)?.status,
        401
    );
    let r = curl(dir, &format!("{base}/trace?target=198.18.9.9"), &good)?;
    assert_eq!(r.status, 405, "GET /trace: {r:?}");
    assert!(r.headers.contains("allow: POST"), "{}", r.headers);

    // A client certificate from another CA, or none, fails the handshake.
    for (what, opts) in [
        (
            "a certificate from another CA",
            tls_opts(&ca.cert, Some(&rogue)),
        ),
        ("no certificate", tls_opts(&ca.cert, None)),
    ] {
        let mut opts = opts;
        opts.extend(["-u", &credentials]);
        let r = curl(dir, &format!("{base}/metrics"), &opts)?;
        assert!(
            r.exit != 0 && r.status == 0,
            "{what} must be refused at the handshake: {r:?}"
        );
    }
    // Plain HTTP on the TLS port gets no metrics.
    let r = curl(
        dir,
        &format!("http://{listen}/metrics"),
        &["-u", &credentials],
    )?;
    assert_ne!(r.status, 200, "{r:?}");

    // A real Prometheus: the right job is up and its series queryable; the
    // job without credentials is down with the 401 in its error.
    let prom_cfg = format!(
        "global: {{scrape_interval: 1s, scrape_timeout: 1s}}\nscrape_configs:\n{}{}",
        scrape_job("exporter", listen, &ca.cert, &client, Some(PASSWORD)),
        scrape_job("no-credentials", listen, &ca.cert, &client, None),
    );
    let prom = servers::start_prometheus(ServerOpts::new(free_loopback_addr()?, &prom_cfg))?;
    wait_until(
        "Prometheus scraping the exporter over TLS",
        Duration::from_secs(60),
        Duration::from_millis(500),
        || {
            prom.query("skeletonhunter_node_info{job=\"exporter\",node_id=\"web-a\"}")
                .ok()
                .filter(|r| r.len() == 1)
        },
    )?;
    let err = wait_until(
        "the no-credentials job to fail",
        Duration::from_secs(60),
        Duration::from_millis(500),
        || target_error(&prom, "no-credentials"),
    )?;
    assert!(err.contains("401"), "{err}");
    assert_eq!(prom.targets_up()?, 1, "only the job with credentials is up");

    // Rotation: new certificate and key under the same names; the next
    // handshake presents it, with no restart, and Prometheus keeps scraping.
    assert!(served_certificate(dir, listen, &ca.cert, &client)?.contains("server-1"));
    let pid = exporter.pid();
    let rotated_at = unix_now();
    replace(&server2.key, &live.key)?;
    replace(&server2.cert, &live.cert)?;
    wait_until(
        "the rotated certificate to be served",
        Duration::from_secs(30),
        Duration::from_millis(200),
        || {
            served_certificate(dir, listen, &ca.cert, &client)
                .ok()
                .filter(|cn| cn.contains("server-2"))
        },
    )?;
    wait_until(
        "a scrape after the rotation",
        Duration::from_secs(60),
        Duration::from_millis(500),
        || {
            let r = prom.query("timestamp(up{job=\"exporter\"} == 1)").ok()?;
            let ts: f64 = r.first()?["value"][1].as_str()?.parse().ok()?;
            (ts > rotated_at + 1.0).then_some(())
        },
    )?;
    exporter.check_running()?;
    assert_eq!(exporter.pid(), pid, "no restart");
    Ok(())
}

/// Start the localizer's online loop (its Prometheus is unreachable: its
/// cycles fail, its HTTP server still serves) with `flags`.
fn start_localizer(listen: SocketAddr, flags: &[&str]) -> Result<ChildGuard> {
    let mut cmd = Command::new(bin_path("skeletonhunter-localizer"));
    cmd.args([
        "run",
        "--prometheus",
        "http://127.0.0.1:9",
        "--web.listen-address",
        &listen.to_string(),
    ])
    .args(flags)
    .env("RUST_LOG", "info");
    ChildGuard::spawn("web-localizer", cmd)
}

#[test]
fn the_localizer_honours_a_web_config_and_a_new_password_needs_no_restart() -> Result<()> {
    let tmp = TempDir::new("websec-loc")?;
    let dir = tmp.path();
    let ca = Ca::new(dir, "ca")?;
    let server = ca.server("localizer")?;
    let web = dir.join("web.yml");
    let write = |hash: &str| -> Result<()> {
        // Relative file names are taken from the web config's directory.
        let text = format!(
            "tls_server_config:\n  cert_file: {}\n  key_file: {}\nbasic_auth_users:\n  {USER}: '{hash}'\n",
            file_name(&server.cert)?,
            file_name(&server.key)?
        );
        let tmp = web.with_extension("new");
        std::fs::write(&tmp, text)?;
        Ok(std::fs::rename(&tmp, &web)?)
    };
    write(&bcrypt_hash(PASSWORD)?)?;
    let listen = free_loopback_addr()?;
    let mut loc = start_localizer(
        listen,
        &["--web.config.file", web.to_str().context("path")?],
    )?;
    let url = format!("https://{listen}/metrics");
    let mut opts = tls_opts(&ca.cert, None);
    let credentials = format!("{USER}:{PASSWORD}");
    opts.extend(["-u", &credentials]);
    wait_ok(dir, "the localizer over TLS", &url, &opts, &mut loc)?;
    let r = curl(dir, &url, &opts)?;
    assert!(r.body.contains("skeletonhunter_"), "{}", r.body);
    let r = curl(dir, &url, &tls_opts(&ca.cert, None))?;
    assert_eq!(r.status, 401, "{r:?}");
    assert!(
        r.headers.contains("www-authenticate: Basic"),
        "{}",
        r.headers
    );

    // A new password in the file: the old one stops working, the new one
    // works, and the process is the same.
    let pid = loc.pid();
    write(&bcrypt_hash("n3w-secret")?)?;
    wait_until(
        "the old password to be refused",
        Duration::from_secs(30),
        Duration::from_millis(200),
        || curl(dir, &url, &opts).ok().filter(|r| r.status == 401),
    )?;
    let mut new = tls_opts(&ca.cert, None);
    new.extend(["-u", "prometheus:n3w-secret"]);
    assert_eq!(curl(dir, &url, &new)?.status, 200);
    loc.check_running()?;
    assert_eq!(loc.pid(), pid, "no restart");
    Ok(())
}

/// Run `bin` with `args` to completion (it must not start serving).
fn run_to_exit(bin: &str, args: &[&str]) -> Result<(Option<i32>, String)> {
    let out = Command::new(bin_path(bin))
        .args(args)
        .output()
        .with_context(|| format!("run {bin}"))?;
    Ok((
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

#[test]
fn a_bad_web_config_stops_either_binary_with_exit_2_naming_file_and_key() -> Result<()> {
    let tmp = TempDir::new("websec-bad")?;
    let dir = tmp.path();
    let cases: [(&str, &str, &str); 4] = [
        (
            "typo.yml",
            "tls_server_config:\n  cert_fille: x\n",
            "cert_fille",
        ),
        (
            "missing.yml",
            "tls_server_config:\n  cert_file: nope.crt\n  key_file: nope.key\n",
            "tls_server_config.cert_file",
        ),
        (
            "hash.yml",
            "basic_auth_users:\n  bob: plaintext\n",
            "basic_auth_users.bob",
        ),
        (
            "tls10.yml",
            "tls_server_config:\n  cert_file: a\n  key_file: b\n  min_version: TLS10\n",
            "min_version",
        ),
    ];
    for (name, text, key) in cases {
        let path: PathBuf = dir.join(name);
        std::fs::write(&path, text)?;
        let p = path.to_str().context("path")?;
        let listen = free_loopback_addr()?.to_string();
        for (bin, args) in [
            (
                "skeletonhunter-exporter",
                vec![
                    "--web.listen-address",
                    &listen,
                    "--web.config.file",
                    p,
                    "--check-config",
                ],
            ),
            (
                "skeletonhunter-localizer",
                vec![
                    "run",
                    "--prometheus",
                    "http://127.0.0.1:9",
                    "--web.listen-address",
                    &listen,
                    "--web.config.file",
                    p,
                ],
            ),
        ] {
            let (code, stderr) = run_to_exit(bin, &args)?;
            assert_eq!(code, Some(2), "{bin} {name}: {stderr}");
            assert!(
                stderr.contains(p) && stderr.contains(key),
                "{bin} {name}: {stderr}"
            );
        }
    }
    Ok(())
}
