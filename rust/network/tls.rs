//! TLS for the SSL and SASL_SSL listeners: the server configuration built once from PEM (Kafka's
//! `ssl.keystore.type=PEM` and `ssl.truststore.type=PEM` settings), and one connection's TLS
//! state over its socket, so that records are sealed and opened in the network thread.
//!
//! rustls with the ring provider; TLS 1.2 and 1.3 as `ssl.enabled.protocols` allows. Client
//! certificates (`ssl.client.auth`): `none` asks for none, `requested` verifies one if sent,
//! `required` refuses a handshake without one. A verified client certificate names the principal,
//! "User:" + its subject DN in RFC 4514 text, as Kafka's default principal builder does.

use std::io::{self, Read, Write};
use std::sync::Arc;

use bytes::{Buf, Bytes};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig, ServerConnection};
use x509_cert::der::Decode;

use crate::network::principal_mapping::PrincipalMapper;

/// A listener's TLS server configuration, checked when it is made (at startup).
#[pyclass(frozen, module = "corral._core")]
#[derive(Clone)]
pub struct TlsServerConfig {
    pub config: Arc<ServerConfig>,
    pub principal_mapper: Arc<PrincipalMapper>,
}

#[pymethods]
impl TlsServerConfig {
    /// `certificate_chain` and `private_key`: PEM (the key unencrypted: PKCS#8, PKCS#1 or SEC1).
    /// `trusted`: PEM certificates that sign client certificates (None: no client certificates).
    /// `client_auth`: "none", "requested" or "required". `protocols`: "TLSv1.2" and/or "TLSv1.3".
    /// `principal_mapping_rules`: Kafka's `ssl.principal.mapping.rules` text.
    #[new]
    #[pyo3(signature = (certificate_chain, private_key, trusted, client_auth, protocols, principal_mapping_rules = "DEFAULT"))]
    fn new(
        certificate_chain: &[u8],
        private_key: &[u8],
        trusted: Option<&[u8]>,
        client_auth: &str,
        protocols: Vec<String>,
        principal_mapping_rules: &str,
    ) -> PyResult<Self> {
        let bad = |what: String| PyValueError::new_err(what);
        let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(certificate_chain)
            .collect::<Result<_, _>>()
            .map_err(|e| bad(format!("the certificate chain is not PEM: {e}")))?;
        if chain.is_empty() {
            return Err(bad("the certificate chain has no certificate".into()));
        }
        let key = PrivateKeyDer::from_pem_slice(private_key).map_err(|e| {
            bad(format!("no unencrypted private key in PEM ({e}); corral does not decrypt keys (ssl.key.password)"))
        })?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut versions = Vec::new();
        for protocol in &protocols {
            match protocol.as_str() {
                "TLSv1.2" => versions.push(&rustls::version::TLS12),
                "TLSv1.3" => versions.push(&rustls::version::TLS13),
                other => {
                    return Err(bad(format!(
                        "TLS protocol {other:?} is not supported (TLSv1.2, TLSv1.3)"
                    )))
                }
            }
        }
        if versions.is_empty() {
            return Err(bad("no TLS protocol enabled".into()));
        }
        let builder = ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&versions)
            .map_err(|e| bad(e.to_string()))?;
        let builder = match client_auth {
            "none" => builder.with_no_client_auth(),
            "requested" | "required" => {
                let trusted = trusted.ok_or_else(|| {
                    bad(format!("ssl.client.auth={client_auth} needs a truststore (ssl.truststore.location)"))
                })?;
                let mut roots = RootCertStore::empty();
                for cert in CertificateDer::pem_slice_iter(trusted) {
                    let cert = cert.map_err(|e| bad(format!("the truststore is not PEM: {e}")))?;
                    roots
                        .add(cert)
                        .map_err(|e| bad(format!("a truststore certificate: {e}")))?;
                }
                if roots.is_empty() {
                    return Err(bad("the truststore has no certificate".into()));
                }
                let verifier =
                    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
                let verifier = if client_auth == "requested" {
                    verifier.allow_unauthenticated()
                } else {
                    verifier
                };
                builder.with_client_cert_verifier(verifier.build().map_err(|e| bad(e.to_string()))?)
            }
            other => {
                return Err(bad(format!(
                    "ssl.client.auth must be none, requested or required, not {other:?}"
                )))
            }
        };
        let config = builder
            .with_single_cert(chain, key)
            .map_err(|e| bad(format!("the keystore: {e}")))?;
        let principal_mapper = PrincipalMapper::parse(principal_mapping_rules)
            .map_err(|e| bad(format!("ssl.principal.mapping.rules: {e}")))?;
        Ok(TlsServerConfig {
            config: Arc::new(config),
            principal_mapper: Arc::new(principal_mapper),
        })
    }
}

/// One connection's TLS session over its socket.
pub struct Tls {
    session: ServerConnection,
    /// The principal of a verified client certificate was looked at (once, after the handshake).
    peer_checked: bool,
}

impl Tls {
    pub fn new(config: &Arc<ServerConfig>) -> io::Result<Self> {
        let session = ServerConnection::new(config.clone()).map_err(io::Error::other)?;
        Ok(Tls {
            session,
            peer_checked: false,
        })
    }

    /// Plaintext received, into `buf`: Ok(0) at the end of the stream, WouldBlock when the socket
    /// has nothing more. Handshake messages are consumed on the way (answer them with `flush`).
    pub fn read(&mut self, socket: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match self.session.reader().read(buf) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
            if self.session.read_tls(socket)? == 0 {
                return Ok(0);
            }
            if let Err(e) = self.session.process_new_packets() {
                // The alert rustls queued is sent by `flush` before the connection closes.
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("TLS: {e}"),
                ));
            }
        }
    }

    /// Seals as much of `out` as the session buffers and writes records until the socket is full.
    /// Returns the plaintext bytes taken from `out` (Err: the connection is gone).
    pub fn flush(
        &mut self,
        socket: &mut impl Write,
        out: &mut std::collections::VecDeque<Bytes>,
    ) -> io::Result<usize> {
        let mut taken = 0;
        loop {
            while let Some(front) = out.front_mut() {
                let n = self.session.writer().write(front)?;
                if n == 0 {
                    break;
                }
                taken += n;
                if n == front.len() {
                    out.pop_front();
                } else {
                    front.advance(n);
                }
            }
            if !self.session.wants_write() {
                return Ok(taken);
            }
            match self.session.write_tls(socket) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(taken),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Records written but not yet sent (the socket was full).
    pub fn pending(&self) -> bool {
        self.session.wants_write()
    }

    /// Once the handshake is done: the subject DN of a verified client certificate, if any.
    /// Some(None) means done, without certificate; None means not done yet or already asked.
    pub fn peer_subject(&mut self) -> Option<Option<String>> {
        if self.peer_checked || self.session.is_handshaking() {
            return None;
        }
        self.peer_checked = true;
        let cert = self
            .session
            .peer_certificates()
            .and_then(|certs| certs.first());
        Some(cert.and_then(|der| subject_dn(der)))
    }
}

/// Attribute types Java's X500Principal.getName() (RFC 2253) writes by keyword; any other type is
/// written as its OID and the value's DER in hex ("1.2.840.113549.1.9.1=#16...").
const JAVA_KEYWORDS: &[(&str, &str)] = &[
    ("2.5.4.3", "CN"),
    ("2.5.4.6", "C"),
    ("2.5.4.7", "L"),
    ("2.5.4.8", "ST"),
    ("2.5.4.9", "STREET"),
    ("2.5.4.10", "O"),
    ("2.5.4.11", "OU"),
    ("0.9.2342.19200300.100.1.1", "UID"),
    ("0.9.2342.19200300.100.1.25", "DC"),
];

/// The certificate's subject as Kafka's default principal builder reads it: Java's
/// X500Principal.getName(), most specific RDN first ("CN=alice,OU=eng,O=Corral\\, Inc.,C=US"), so
/// ACLs, super.users and ssl.principal.mapping.rules written for Kafka match.
pub fn subject_dn(der: &[u8]) -> Option<String> {
    use std::fmt::Write as _;
    use x509_cert::der::Encode;

    let cert = x509_cert::Certificate::from_der(der).ok()?;
    let mut out = String::new();
    for (i, rdn) in cert.tbs_certificate.subject.0.iter().rev().enumerate() {
        if i > 0 {
            out.push(',');
        }
        for (j, atv) in rdn.0.iter().enumerate() {
            if j > 0 {
                out.push('+');
            }
            let oid = atv.oid.to_string();
            match JAVA_KEYWORDS.iter().find(|(known, _)| *known == oid) {
                Some((_, keyword)) => {
                    // x509-cert writes "NAME=value" with RFC 4514's escapes: keep the value.
                    let text = atv.to_string();
                    let value = text.split_once('=').map_or("", |(_, value)| value);
                    let _ = write!(out, "{keyword}={value}");
                }
                None => {
                    let _ = write!(out, "{oid}=#");
                    for byte in atv.value.to_der().ok()? {
                        let _ = write!(out, "{byte:02x}");
                    }
                }
            }
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Subject C=US, ST=CA, O="Corral, Inc.", OU=eng, CN=alice, emailAddress=alice@corral.dev.
    const CERT: &str = r"-----BEGIN CERTIFICATE-----
MIIBzTCCAXOgAwIBAgIBATAKBggqhkjOPQQDAjBwMQswCQYDVQQGEwJVUzELMAkG
A1UECAwCQ0ExFTATBgNVBAoMDENvcnJhbCwgSW5jLjEMMAoGA1UECwwDZW5nMQ4w
DAYDVQQDDAVhbGljZTEfMB0GCSqGSIb3DQEJARYQYWxpY2VAY29ycmFsLmRldjAe
Fw0yNjAxMDEwMDAwMDBaFw0zNTEyMzAwMDAwMDBaMHAxCzAJBgNVBAYTAlVTMQsw
CQYDVQQIDAJDQTEVMBMGA1UECgwMQ29ycmFsLCBJbmMuMQwwCgYDVQQLDANlbmcx
DjAMBgNVBAMMBWFsaWNlMR8wHQYJKoZIhvcNAQkBFhBhbGljZUBjb3JyYWwuZGV2
MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEV78AJCKpuZmPjikCBvS/CcOL2hVU
Jw4RWTwXAZvw6j7YGz6v5YesjnzTKEQZP/DuphKAMYsoVcwD1uzB5bq0TzAKBggq
hkjOPQQDAgNIADBFAiEAmJvTQPIoTMmzRnSGtT5d+88vmpr5FYRI8TNeaCwpedEC
IFDD+UiIttOs1ULC4OusL57F3PufwrB8kX2g8d+tNiLO
-----END CERTIFICATE-----";

    #[test]
    fn principals_are_javas_rfc2253_names() {
        let der = CertificateDer::from_pem_slice(CERT.as_bytes()).unwrap();
        // What java.security.cert.X509Certificate.getSubjectX500Principal().getName() prints.
        assert_eq!(
            subject_dn(&der).unwrap(),
            "1.2.840.113549.1.9.1=#1610616c69636540636f7272616c2e646576,CN=alice,OU=eng,O=Corral\\, Inc.,ST=CA,C=US"
        );
        assert_eq!(subject_dn(b"not a certificate"), None);
    }
}
