//! The rustls client configuration of one endpoint, from its
//! [`TlsSettings`]: roots (a CA file, else the system's), an optional
//! client certificate, the lowest version, and the name checked in the
//! server's certificate. The crypto provider is *ring* (see the README's
//! dependency table for why).

use super::http_config::{MinTls, TlsSettings};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::{ring, WebPkiSupportedAlgorithms};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Why TLS for an endpoint cannot be set up; the caller adds the flag.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A PEM file has no usable certificate or key.
    #[error("{path}: {reason}")]
    Pem {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// An https URL, no `tls_config.ca_file`, and no system CA certificates.
    #[error("no system CA certificates found; give tls_config.ca_file")]
    NoRoots,
    /// `tls_config.server_name` is not a DNS name or IP address.
    #[error("tls_config.server_name {0:?}: not a DNS name or IP address")]
    ServerName(String),
    /// rustls refused the combination (e.g. a key that does not match).
    #[error("TLS set-up failed: {0}")]
    Rustls(#[from] rustls::Error),
}

/// Make *ring* the process' default provider (reqwest asks for one when it
/// builds a client); a provider installed before is kept.
pub fn install_provider() {
    let _ = ring::default_provider().install_default();
}

/// The client configuration for `s`.
pub fn client_config(s: &TlsSettings) -> Result<ClientConfig, TlsError> {
    let provider = Arc::new(ring::default_provider());
    let versions: &[&rustls::SupportedProtocolVersion] = match s.min_version {
        MinTls::Tls12 => &[&rustls::version::TLS13, &rustls::version::TLS12],
        MinTls::Tls13 => &[&rustls::version::TLS13],
    };
    let chain = if s.insecure_skip_verify {
        None
    } else {
        let roots = Arc::new(roots(s.ca_file.as_deref())?);
        let webpki = WebPkiServerVerifier::builder_with_provider(roots, provider.clone())
            .build()
            .map_err(|e| TlsError::Rustls(rustls::Error::General(e.to_string())))?;
        Some(webpki)
    };
    let name = match &s.server_name {
        Some(name) if chain.is_some() => Some(
            ServerName::try_from(name.clone()).map_err(|_| TlsError::ServerName(name.clone()))?,
        ),
        _ => None,
    };
    let verifier = Arc::new(Verifier {
        chain,
        name,
        algorithms: provider.signature_verification_algorithms,
    });
    let builder = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(versions)?
        .dangerous()
        .with_custom_certificate_verifier(verifier);
    let mut config = match &s.client {
        Some((cert, key)) => builder.with_client_auth_cert(certs(cert)?, private_key(key)?)?,
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// The CA file's certificates, else the system's.
fn roots(ca_file: Option<&Path>) -> Result<RootCertStore, TlsError> {
    let mut store = RootCertStore::empty();
    match ca_file {
        Some(p) => {
            for c in certs(p)? {
                store.add(c).map_err(|e| TlsError::Pem {
                    path: p.to_path_buf(),
                    reason: format!("not a usable CA certificate: {e}"),
                })?;
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            let (added, _ignored) = store.add_parsable_certificates(found.certs);
            if added == 0 {
                return Err(TlsError::NoRoots);
            }
        }
    }
    Ok(store)
}

/// Every certificate of a PEM file (at least one).
fn certs(p: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let pem_err = |reason: String| TlsError::Pem {
        path: p.to_path_buf(),
        reason,
    };
    let certs = CertificateDer::pem_file_iter(p)
        .map_err(|e| pem_err(e.to_string()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| pem_err(e.to_string()))?;
    if certs.is_empty() {
        return Err(pem_err("no PEM certificate in it".into()));
    }
    Ok(certs)
}

/// The first private key of a PEM file (PKCS#8, PKCS#1 or SEC1).
fn private_key(p: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    PrivateKeyDer::from_pem_file(p).map_err(|e| TlsError::Pem {
        path: p.to_path_buf(),
        reason: format!("no usable private key: {e}"),
    })
}

/// The one certificate verifier: the chain is checked by webpki (under
/// `tls_config.server_name` instead of the URL's host when set, as in
/// Prometheus), or not at all for `insecure_skip_verify: true`; the
/// handshake signatures are always checked, so the session is encrypted to
/// whoever holds the key the server showed.
#[derive(Debug)]
struct Verifier {
    /// `None`: any certificate is accepted.
    chain: Option<Arc<WebPkiServerVerifier>>,
    /// The name checked instead of the URL's host.
    name: Option<ServerName<'static>>,
    /// The provider's algorithms, which webpki checks signatures with too.
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let Some(chain) = &self.chain else {
            return Ok(ServerCertVerified::assertion());
        };
        let name = self.name.as_ref().unwrap_or(server_name);
        chain.verify_server_cert(end_entity, intermediates, name, ocsp_response, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_without_pem_are_refused_with_their_path() {
        let p = std::env::temp_dir().join(format!("sh-tls-notpem-{}", std::process::id()));
        std::fs::write(&p, "not a certificate\n").unwrap();
        let s = TlsSettings {
            ca_file: Some(p.clone()),
            ..Default::default()
        };
        let err = client_config(&s).unwrap_err().to_string();
        let _ = std::fs::remove_file(&p);
        assert!(err.contains("no PEM certificate"), "{err}");
        assert!(err.contains(&p.display().to_string()), "{err}");
    }

    #[test]
    fn skip_verify_needs_no_roots() {
        let s = TlsSettings {
            insecure_skip_verify: true,
            min_version: MinTls::Tls13,
            ..Default::default()
        };
        assert!(client_config(&s).is_ok());
    }
}
