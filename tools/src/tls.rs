//! TLS for tests: throw-away certificate authorities ([`Ca`]) issuing
//! server certificates (for `127.0.0.1` and `localhost`) and client
//! certificates, made by the `openssl` command line; [`Pki`], one CA with
//! one of each, and the exporter-toolkit web configuration
//! (`--web.config.file`) that Prometheus and Alertmanager read; and HTTPS
//! requests through `curl`. All three tools are Debian packages; nothing is
//! mocked.

use crate::process::run_tool;
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

/// A certificate and its key, as PEM files.
#[derive(Debug, Clone)]
pub struct Issued {
    /// The certificate (PEM).
    pub cert: PathBuf,
    /// Its private key (PKCS#8 PEM).
    pub key: PathBuf,
}

/// A certificate authority in `dir`, able to issue certificates.
#[derive(Debug, Clone)]
pub struct Ca {
    dir: PathBuf,
    name: String,
    /// The CA certificate (PEM): what clients or servers trust.
    pub cert: PathBuf,
    key: PathBuf,
}

fn openssl(dir: &Path, args: &[&str]) -> Result<()> {
    run_tool("openssl", args, Some(dir))?
        .ok()
        .map(|_| ())
        .with_context(|| format!("openssl {}", args.join(" ")))
}

fn path_str(p: &Path) -> Result<&str> {
    p.to_str().context("utf-8 path")
}

/// `openssl req` with a new P-256 key written to `key` and the request
/// (or, with `-x509` among `extra`, the self-signed certificate) to `out`,
/// for common name `cn`.
fn new_key_request(dir: &Path, (key, out): (&Path, &Path), cn: &str, extra: &[&str]) -> Result<()> {
    let subject = format!("/CN={cn}");
    let mut args = vec![
        "req",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
        "-keyout",
        path_str(key)?,
        "-out",
        path_str(out)?,
        "-subj",
        &subject,
    ];
    args.extend_from_slice(extra);
    openssl(dir, &args)
}

/// The file name of `p`, for configurations that resolve relative names
/// against their own directory.
pub fn file_name(p: &Path) -> Result<String> {
    Ok(p.file_name()
        .context("file name")?
        .to_string_lossy()
        .into_owned())
}

impl Ca {
    /// A new self-signed CA called `name` (its files are `dir/<name>.crt`
    /// and `.key`), valid for two days, P-256.
    pub fn new(dir: &Path, name: &str) -> Result<Ca> {
        let cert = dir.join(format!("{name}.crt"));
        let key = dir.join(format!("{name}.key"));
        new_key_request(
            dir,
            (&key, &cert),
            name,
            &[
                "-x509",
                "-days",
                "2",
                "-addext",
                "basicConstraints=critical,CA:TRUE",
                "-addext",
                "keyUsage=critical,keyCertSign,cRLSign",
            ],
        )?;
        Ok(Ca {
            dir: dir.to_path_buf(),
            name: name.to_string(),
            cert,
            key,
        })
    }

    /// A server certificate with common name `cn` for `127.0.0.1` and
    /// `localhost` (files `<ca name>-<cn>.crt` and `.key`).
    pub fn server(&self, cn: &str) -> Result<Issued> {
        self.issue(
            cn,
            "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n",
        )
    }

    /// A client certificate with common name `cn` (files as for
    /// [`Ca::server`]).
    pub fn client(&self, cn: &str) -> Result<Issued> {
        self.issue(
            cn,
            &format!(
                "subjectAltName=DNS:{cn}\nextendedKeyUsage=clientAuth\nbasicConstraints=CA:FALSE\n"
            ),
        )
    }

    fn issue(&self, cn: &str, extensions: &str) -> Result<Issued> {
        let base = self.dir.join(format!("{}-{cn}", self.name));
        let file = |ext: &str| base.with_extension(ext);
        let (key, csr, cert, ext) = (file("key"), file("csr"), file("crt"), file("ext"));
        std::fs::write(&ext, extensions)?;
        new_key_request(&self.dir, (&key, &csr), cn, &[])?;
        openssl(
            &self.dir,
            &[
                "x509",
                "-req",
                "-in",
                path_str(&csr)?,
                "-CA",
                path_str(&self.cert)?,
                "-CAkey",
                path_str(&self.key)?,
                "-CAcreateserial",
                "-out",
                path_str(&cert)?,
                "-days",
                "2",
                "-extfile",
                path_str(&ext)?,
            ],
        )?;
        Ok(Issued { cert, key })
    }
}

/// One CA (`ca`) with a server (`server`) and a client (`client`)
/// certificate: what a server behind [`Pki::web_config`] and its clients
/// need.
#[derive(Debug, Clone)]
pub struct Pki {
    /// The CA that signed both certificates.
    pub ca: Ca,
    /// The server's certificate, for `127.0.0.1` and `localhost`.
    pub server: Issued,
    /// A client certificate.
    pub client: Issued,
}

impl Pki {
    /// Make the CA and the two certificates in `dir`.
    pub fn create(dir: &Path) -> Result<Pki> {
        let ca = Ca::new(dir, "ca")?;
        Ok(Pki {
            server: ca.server("server")?,
            client: ca.client("client")?,
            ca,
        })
    }

    /// A web configuration for the server: TLS with the server
    /// certificate, basic auth for [`TEST_USER`], and when
    /// `require_client_cert` a client certificate signed by the CA.
    pub fn web_config(&self, require_client_cert: bool) -> String {
        let mut y = format!(
            "tls_server_config:\n  cert_file: {}\n  key_file: {}\n",
            self.server.cert.display(),
            self.server.key.display()
        );
        if require_client_cert {
            y.push_str(&format!(
                "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: {}\n",
                self.ca.cert.display()
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
            ca: self.ca.cert.clone(),
            client: Some((self.client.cert.clone(), self.client.key.clone())),
            user: TEST_USER.to_string(),
            password: TEST_PASSWORD.to_string(),
        }
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
