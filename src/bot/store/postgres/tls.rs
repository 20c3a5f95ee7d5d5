//! TLS to PostgreSQL, configured the way libpq is: `sslmode` and `sslrootcert` in
//! `DATABASE_URL`'s query string, so a URL copied from a managed database's console
//! works as it is.
//!
//! | `sslmode` | encrypted | certificate checked | host name checked |
//! |---|---|---|---|
//! | `disable` | no | – | – |
//! | `prefer` (the default) | if the server offers it | no | no |
//! | `require` | yes | only if `sslrootcert` is given | no |
//! | `verify-ca` | yes | yes | no |
//! | `verify-full` | yes | yes | yes |
//!
//! The certificate is checked against `sslrootcert` (a PEM file of CA certificates) or,
//! without it (or with `sslrootcert=system`), the operating system's roots. TLS is
//! rustls (already in the build through reqwest) with the `ring` provider.
//!
//! tokio-postgres itself knows only `disable`, `prefer` and `require`, so the two
//! settings are taken out of the URL here and the rest is handed to it unchanged.

use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{
    CertificateError, DigitallySignedStruct, Error as TlsError, RootCertStore, SignatureScheme,
};
use tokio_postgres_rustls::MakeRustlsConnect;

/// libpq's `sslmode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TlsMode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl TlsMode {
    fn parse(value: &str) -> Result<Self, String> {
        Ok(match value {
            "disable" => Self::Disable,
            "prefer" => Self::Prefer,
            "require" => Self::Require,
            "verify-ca" => Self::VerifyCa,
            "verify-full" => Self::VerifyFull,
            other => {
                return Err(format!(
                    "sslmode={other} is not known: use disable, prefer, require, verify-ca or verify-full"
                ));
            }
        })
    }
}

/// Splits `sslmode` and `sslrootcert` off `url`: returns the URL for tokio-postgres and
/// the connector every connection uses, or what to fix (naming the setting).
pub(crate) fn from_url(url: &str) -> Result<(String, MakeRustlsConnect), String> {
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, query),
        None => (url, ""),
    };
    let mut mode = TlsMode::Prefer;
    let mut root_cert = None;
    let mut kept = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let value = percent_decode(value);
        match key {
            "sslmode" => mode = TlsMode::parse(&value)?,
            "sslrootcert" => root_cert = Some(value),
            _ => kept.push(pair),
        }
    }
    let verify = match mode {
        TlsMode::Disable | TlsMode::Prefer => Verify::Nothing,
        TlsMode::Require if root_cert.is_none() => Verify::Nothing,
        TlsMode::Require | TlsMode::VerifyCa => Verify::Chain,
        TlsMode::VerifyFull => Verify::ChainAndName,
    };
    let roots = match verify {
        Verify::Nothing => RootCertStore::empty(),
        _ => roots(root_cert.as_deref())?,
    };
    let config = client_config(verify, roots)?;
    // What tokio-postgres itself knows: whether to ask for TLS and whether to insist.
    kept.push(match mode {
        TlsMode::Disable => "sslmode=disable",
        TlsMode::Prefer => "sslmode=prefer",
        _ => "sslmode=require",
    });
    let url = format!("{base}?{}", kept.join("&"));
    Ok((url, MakeRustlsConnect::new(config)))
}

/// What the connection checks of the server's certificate.
#[derive(Clone, Copy)]
enum Verify {
    Nothing,
    Chain,
    ChainAndName,
}

fn roots(root_cert: Option<&str>) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    match root_cert {
        Some(path) if path != "system" => {
            let certificates: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
                .and_then(|certs| certs.collect::<Result<_, _>>())
                .map_err(|e| {
                    format!("sslrootcert={path} cannot be read as PEM CA certificates ({e}); point it at the CA file your database provider gives")
                })?;
            let (added, _) = roots.add_parsable_certificates(certificates);
            if added == 0 {
                return Err(format!(
                    "sslrootcert={path} holds no usable CA certificate; point it at the CA file your database provider gives"
                ));
            }
        }
        _ => {
            let found = rustls_native_certs::load_native_certs();
            roots.add_parsable_certificates(found.certs);
            if roots.is_empty() {
                return Err(
                    "no CA certificates were found on this system for sslmode=verify-ca/verify-full; set sslrootcert to your database provider's CA file"
                        .into(),
                );
            }
        }
    }
    Ok(roots)
}

fn client_config(verify: Verify, roots: RootCertStore) -> Result<rustls::ClientConfig, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("cannot set up TLS: {e}"))?;
    let chain = match verify {
        Verify::Nothing => None,
        Verify::Chain | Verify::ChainAndName => Some(
            WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                .build()
                .map_err(|e| format!("cannot set up TLS certificate checks: {e}"))?,
        ),
    };
    let verifier = Checks {
        provider,
        chain,
        name: matches!(verify, Verify::ChainAndName),
    };
    Ok(builder
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth())
}

/// The server-certificate checks one `sslmode` asks for. The handshake's signatures are
/// verified in every mode; the chain only when `chain` is set (verify-ca, verify-full,
/// require with a CA), the host name only when `name` is (verify-full).
#[derive(Debug)]
struct Checks {
    provider: Arc<rustls::crypto::CryptoProvider>,
    chain: Option<Arc<WebPkiServerVerifier>>,
    name: bool,
}

/// The handshake-signature check's types, named short for the two methods that share them.
type Cert<'a> = CertificateDer<'a>;
type Dss = DigitallySignedStruct;
type Signature = Result<HandshakeSignatureValid, TlsError>;

impl Checks {
    fn algorithms(&self) -> &rustls::crypto::WebPkiSupportedAlgorithms {
        &self.provider.signature_verification_algorithms
    }
}

impl ServerCertVerifier for Checks {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, TlsError> {
        let Some(chain) = &self.chain else {
            return Ok(ServerCertVerified::assertion());
        };
        match chain.verify_server_cert(end_entity, intermediates, server_name, ocsp, now) {
            Err(TlsError::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) if !self.name => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(&self, message: &[u8], cert: &Cert<'_>, dss: &Dss) -> Signature {
        rustls::crypto::verify_tls12_signature(message, cert, dss, self.algorithms())
    }

    fn verify_tls13_signature(&self, message: &[u8], cert: &Cert<'_>, dss: &Dss) -> Signature {
        rustls::crypto::verify_tls13_signature(message, cert, dss, self.algorithms())
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms().supported_schemes()
    }
}

/// `%XX` escapes in a query value (a path with spaces, say).
fn percent_decode(value: &str) -> String {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(byte) = value
                .get(i + 1..i + 3)
                .and_then(|hex| u8::from_str_radix(hex, 16).ok())
        {
            out.push(byte);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// What to fix when a connection failed in its TLS handshake, or `None` when it did not.
pub(crate) fn explain(error: &tokio_postgres::Error) -> Option<String> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(error);
    while let Some(cause) = source {
        let tls = cause.downcast_ref::<TlsError>().or_else(|| {
            cause
                .downcast_ref::<std::io::Error>()
                .and_then(|io| io.get_ref())
                .and_then(|inner| inner.downcast_ref::<TlsError>())
        });
        if let Some(tls) = tls {
            let fix = match tls {
                TlsError::InvalidCertificate(
                    CertificateError::NotValidForName
                    | CertificateError::NotValidForNameContext { .. },
                ) => {
                    "the server's certificate does not name the host in DATABASE_URL: connect by a host name the certificate holds, or use sslmode=verify-ca (which checks the CA only)"
                }
                TlsError::InvalidCertificate(_) => {
                    "the server's certificate is not signed by a CA this bot trusts: set sslrootcert in DATABASE_URL to your database provider's CA file"
                }
                _ => {
                    "check sslmode in DATABASE_URL (disable, prefer, require, verify-ca, verify-full) against what the server offers"
                }
            };
            return Some(format!("the TLS handshake failed ({tls}); {fix}"));
        }
        source = cause.source();
    }
    None
}
