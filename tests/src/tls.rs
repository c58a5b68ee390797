//! TLS for tests: a throw-away certificate authority with a server
//! certificate (for `127.0.0.1` and `localhost`) and a client certificate,
//! made by the `openssl` command line; the exporter-toolkit web
//! configuration (`--web.config.file`) that Prometheus and Alertmanager
//! read; and HTTPS requests through `curl`. All three tools are Debian
//! packages; nothing is mocked.

use anyhow::{bail, Context, Result};
use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// The user of the web configurations written here.
pub const TEST_USER: &str = "localizer";
/// Its password.
pub const TEST_PASSWORD: &str = "tls-test-password";
/// bcrypt of [`TEST_PASSWORD`] at cost 4 (the lowest bcrypt allows, so
/// every request is not a quarter-second of hashing on a busy machine).
pub const TEST_PASSWORD_BCRYPT: &str =
    "$2b$04$Nhy3HqhNfur9.w6w/as6se9DUOX4k22GaXTMpiNMZqxXBaUhxb6jG";

/// A CA, a server and a client certificate in PEM files of one directory:
/// `ca.pem`, `server.pem` + `server.key`, `client.pem` + `client.key`.
#[derive(Debug)]
pub struct Pki {
    dir: PathBuf,
}

impl Pki {
    /// Make the three certificates (P-256 keys, valid two days) in `dir`.
    pub fn create(dir: &Path) -> Result<Pki> {
        let pki = Pki {
            dir: dir.to_path_buf(),
        };
        let ca_subj = "/CN=skeletonhunter-test-ca";
        pki.run(
            pki.openssl(&["req", "-x509", "-newkey", "ec", "-pkeyopt"])
                .args([
                    "ec_paramgen_curve:prime256v1",
                    "-nodes",
                    "-days",
                    "2",
                    "-keyout",
                    "ca.key",
                    "-out",
                    "ca.pem",
                    "-subj",
                    ca_subj,
                ]),
        )?;
        pki.leaf(
            "server",
            "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n",
        )?;
        pki.leaf("client", "extendedKeyUsage=clientAuth\n")?;
        Ok(pki)
    }

    /// `name` in the directory (`ca.pem`, `client.key`, …).
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// A web configuration for the server: TLS with `server.pem`, basic
    /// auth for [`TEST_USER`], and when `require_client_cert` a client
    /// certificate signed by the CA.
    pub fn web_config(&self, require_client_cert: bool) -> String {
        let p = |n: &str| self.path(n).display().to_string();
        let mut y = format!(
            "tls_server_config:\n  cert_file: {}\n  key_file: {}\n",
            p("server.pem"),
            p("server.key")
        );
        if require_client_cert {
            y.push_str(&format!(
                "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: {}\n",
                p("ca.pem")
            ));
        }
        y.push_str(&format!(
            "basic_auth_users:\n  {TEST_USER}: '{TEST_PASSWORD_BCRYPT}'\n"
        ));
        y
    }

    /// How a test reaches a server using [`Pki::web_config`].
    pub fn access(&self) -> WebAccess {
        WebAccess {
            ca: self.path("ca.pem"),
            client: Some((self.path("client.pem"), self.path("client.key"))),
            user: TEST_USER.to_string(),
            password: TEST_PASSWORD.to_string(),
        }
    }

    fn openssl(&self, args: &[&str]) -> Command {
        let mut c = Command::new("openssl");
        c.args(args).current_dir(&self.dir);
        c
    }

    fn run(&self, c: &mut Command) -> Result<()> {
        let out = c.output().context("cannot run openssl")?;
        if !out.status.success() {
            bail!(
                "{c:?} failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(())
    }

    /// A key and a certificate signed by the CA with extensions `ext`.
    fn leaf(&self, name: &str, ext: &str) -> Result<()> {
        let ext_file = self.path(&format!("{name}.ext"));
        std::fs::write(&ext_file, format!("basicConstraints=CA:FALSE\n{ext}"))?;
        let (key, csr, pem) = (
            format!("{name}.key"),
            format!("{name}.csr"),
            format!("{name}.pem"),
        );
        let subj = format!("/CN={name}");
        self.run(self.openssl(&["req", "-newkey", "ec", "-pkeyopt"]).args([
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            &key,
            "-out",
            &csr,
            "-subj",
            &subj,
        ]))?;
        self.run(self.openssl(&["x509", "-req", "-in", &csr]).args([
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-out",
            &pem,
            "-extfile",
            &format!("{name}.ext"),
        ]))
    }
}

/// What a client needs to reach a server behind a web configuration.
#[derive(Debug, Clone)]
pub struct WebAccess {
    /// The CA that signed the server's certificate.
    pub ca: PathBuf,
    /// A client certificate and key, if the server asks for one.
    pub client: Option<(PathBuf, PathBuf)>,
    /// Basic-auth user.
    pub user: String,
    /// Basic-auth password.
    pub password: String,
}

/// `method https://addr/path` through `curl` with `access`'s CA,
/// certificate and credentials: (status, body). Fails only when curl gets
/// no HTTP answer.
pub fn curl_request(
    addr: SocketAddr,
    access: &WebAccess,
    method: &str,
    path: &str,
    body: Option<(&str, &[u8])>,
    timeout: Duration,
) -> Result<(u16, String)> {
    let mut c = Command::new("curl");
    c.args(["-sS", "-X", method, "-o", "-", "-w", "\n%{http_code}"])
        .arg("--max-time")
        .arg(format!("{}", timeout.as_secs().max(1)))
        .arg("--cacert")
        .arg(&access.ca)
        .arg("-u")
        .arg(format!("{}:{}", access.user, access.password));
    if let Some((cert, key)) = &access.client {
        c.arg("--cert").arg(cert).arg("--key").arg(key);
    }
    if let Some((ct, _)) = body {
        c.args(["-H", &format!("Content-Type: {ct}"), "--data-binary", "@-"]);
    }
    c.arg(format!("https://{addr}{path}"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = c.spawn().context("cannot run curl")?;
    if let (Some((_, data)), Some(mut stdin)) = (body, child.stdin.take()) {
        stdin.write_all(data)?;
    }
    drop(child.stdin.take());
    let out = child.wait_with_output()?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", &text));
    match code.trim().parse::<u16>() {
        Ok(status) if status > 0 => Ok((status, body.to_string())),
        _ => bail!(
            "curl {method} https://{addr}{path}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ),
    }
}
