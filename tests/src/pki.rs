//! A throw-away PKI made with the real `openssl` command: a CA, server
//! certificates for 127.0.0.1 and client certificates, for tests of TLS
//! and mutual TLS between real servers and clients.

use crate::servers::run_tool;
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

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

impl Ca {
    /// A new self-signed CA called `name` (its files are `dir/<name>.crt`
    /// and `.key`), valid for two days, P-256.
    pub fn new(dir: &Path, name: &str) -> Result<Ca> {
        let cert = dir.join(format!("{name}.crt"));
        let key = dir.join(format!("{name}.key"));
        openssl(
            dir,
            &[
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
                "-nodes",
                "-keyout",
                path_str(&key)?,
                "-out",
                path_str(&cert)?,
                "-days",
                "2",
                "-subj",
                &format!("/CN={name}"),
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
    /// `localhost`.
    pub fn server(&self, cn: &str) -> Result<Issued> {
        self.issue(
            cn,
            "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n",
        )
    }

    /// A client certificate with common name `cn`.
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
        openssl(
            &self.dir,
            &[
                "req",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
                "-nodes",
                "-keyout",
                path_str(&key)?,
                "-out",
                path_str(&csr)?,
                "-subj",
                &format!("/CN={cn}"),
            ],
        )?;
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
