//! From [`TlsSettings`] to a rustls server configuration: read the PEM
//! files, restrict versions, suites and groups, and set up client
//! certificate verification. One crypto provider, `ring`, passed
//! explicitly so no process-wide default has to be installed.

use super::error::WebConfigError;
use super::file::{ClientAuth, Pem, TlsSettings, TlsVersion};
use rustls::crypto::{ring, CryptoProvider, SupportedKxGroup};
use rustls::server::WebPkiClientVerifier;
use rustls::{NamedGroup, RootCertStore, ServerConfig, SupportedCipherSuite};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use std::path::Path;
use std::sync::Arc;

type Result<T> = std::result::Result<T, WebConfigError>;

/// The rustls configuration `t` describes; `path` is the web config file
/// (for error messages).
pub fn server_config(path: &Path, t: &TlsSettings) -> Result<Arc<ServerConfig>> {
    let bad = |key: &str, why: String| WebConfigError::invalid(path, key, why);
    let provider = Arc::new(provider(t).map_err(|(k, why)| bad(&k, why))?);
    let certs = certificates(&t.cert).map_err(|why| bad(key_of(&t.cert, "cert"), why))?;
    if certs.is_empty() {
        return Err(bad(
            key_of(&t.cert, "cert"),
            "no CERTIFICATE block found".into(),
        ));
    }
    let key = private_key(&t.key).map_err(|why| bad(key_of(&t.key, "key"), why))?;
    let versions: Vec<_> = [
        (TlsVersion::Tls12, &rustls::version::TLS12),
        (TlsVersion::Tls13, &rustls::version::TLS13),
    ]
    .into_iter()
    .filter(|(v, _)| (t.min_version..=t.max_version).contains(v))
    .map(|(_, p)| p)
    .collect();
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)
        .map_err(|e| bad("tls_server_config", e.to_string()))?;
    let builder = match (&t.client_auth, &t.client_ca) {
        (ClientAuth::None, _) | (_, None) => builder.with_no_client_auth(),
        (auth, Some(ca)) => {
            let ca_key = key_of(ca, "client_ca");
            let mut roots = RootCertStore::empty();
            for c in certificates(ca).map_err(|why| bad(ca_key, why))? {
                roots
                    .add(c)
                    .map_err(|e| bad(ca_key, format!("unusable CA certificate: {e}")))?;
            }
            if roots.is_empty() {
                return Err(bad(ca_key, "no CERTIFICATE block found".into()));
            }
            let mut v = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            if *auth == ClientAuth::VerifyIfGiven {
                v = v.allow_unauthenticated();
            }
            let v = v.build().map_err(|e| bad(ca_key, e.to_string()))?;
            builder.with_client_cert_verifier(v)
        }
    };
    let mut cfg = builder.with_single_cert(certs, key).map_err(|e| {
        bad(
            key_of(&t.key, "key"),
            format!("does not fit the certificate: {e}"),
        )
    })?;
    cfg.ignore_client_order = t.prefer_server_cipher_suites;
    // HTTP/1.1 only: the server is hyper's http1 (see docs/operations.md).
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(cfg))
}

/// The key an error about `pem` should name: the `_file` key or the inline one.
fn key_of(pem: &Pem, inline: &'static str) -> &'static str {
    match (pem, inline) {
        (Pem::File(_), "cert") => "tls_server_config.cert_file",
        (Pem::File(_), "key") => "tls_server_config.key_file",
        (Pem::File(_), _) => "tls_server_config.client_ca_file",
        (Pem::Inline(_), "cert") => "tls_server_config.cert",
        (Pem::Inline(_), "key") => "tls_server_config.key",
        (Pem::Inline(_), _) => "tls_server_config.client_ca",
    }
}

fn read(pem: &Pem) -> std::result::Result<Vec<u8>, String> {
    match pem {
        Pem::Inline(s) => Ok(s.as_bytes().to_vec()),
        Pem::File(f) => std::fs::read(f).map_err(|e| format!("cannot read {}: {e}", f.display())),
    }
}

fn where_(pem: &Pem) -> String {
    match pem {
        Pem::File(f) => f.display().to_string(),
        Pem::Inline(_) => "the inline PEM".into(),
    }
}

fn certificates(pem: &Pem) -> std::result::Result<Vec<CertificateDer<'static>>, String> {
    let bytes = read(pem)?;
    CertificateDer::pem_slice_iter(&bytes)
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| format!("{}: not PEM certificates: {e}", where_(pem)))
}

fn private_key(pem: &Pem) -> std::result::Result<PrivateKeyDer<'static>, String> {
    let bytes = read(pem)?;
    PrivateKeyDer::from_pem_slice(&bytes)
        .map_err(|e| format!("{}: no usable private key: {e}", where_(pem)))
}

/// `ring`'s provider with `cipher_suites` and `curve_preferences` applied.
/// As in Go, `cipher_suites` governs TLS 1.2 only (TLS 1.3 suites are all
/// secure and not configurable).
fn provider(t: &TlsSettings) -> std::result::Result<CryptoProvider, (String, String)> {
    let mut p = ring::default_provider();
    if !t.cipher_suites.is_empty() {
        let available: Vec<String> = p
            .cipher_suites
            .iter()
            .map(|s| format!("{:?}", s.suite()))
            .collect();
        for name in &t.cipher_suites {
            if !available.contains(name) {
                return Err((
                    "tls_server_config.cipher_suites".into(),
                    format!(
                        "{name:?} is not available (available: {})",
                        available.join(", ")
                    ),
                ));
            }
        }
        p.cipher_suites.retain(|s| match s {
            SupportedCipherSuite::Tls13(_) => true,
            SupportedCipherSuite::Tls12(_) => t.cipher_suites.contains(&format!("{:?}", s.suite())),
        });
    }
    if !t.curve_preferences.is_empty() {
        let mut groups: Vec<&'static dyn SupportedKxGroup> = Vec::new();
        for name in &t.curve_preferences {
            let want = match name.as_str() {
                "CurveP256" => NamedGroup::secp256r1,
                "CurveP384" => NamedGroup::secp384r1,
                "X25519" => NamedGroup::X25519,
                other => {
                    return Err((
                        "tls_server_config.curve_preferences".into(),
                        format!(
                            "{other:?} is not available (available: CurveP256, CurveP384, X25519)"
                        ),
                    ))
                }
            };
            if let Some(g) = p.kx_groups.iter().find(|g| g.name() == want) {
                groups.push(*g);
            }
        }
        p.kx_groups = groups;
    }
    Ok(p)
}
