//! The TLS side of outbound calls: Mozilla's roots plus the operator's `--outbound-ca` files,
//! ring as the crypto provider, HTTP/1.1 only.

use std::path::PathBuf;
use std::sync::Arc;

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use rustls::{ClientConfig, RootCertStore};

/// The client configuration every outbound TLS connection uses; a CA file that cannot be read or
/// holds no certificate is an error naming it.
pub fn client_config(ca_files: &[PathBuf]) -> Result<Arc<ClientConfig>, String> {
    let mut roots = RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() };
    for file in ca_files {
        let pem = std::fs::read(file).map_err(|e| format!("--outbound-ca {}: {e}", file.display()))?;
        let mut added = 0;
        for cert in CertificateDer::pem_slice_iter(&pem) {
            let cert = cert.map_err(|e| format!("--outbound-ca {}: {e}", file.display()))?;
            roots.add(cert).map_err(|e| format!("--outbound-ca {}: {e}", file.display()))?;
            added += 1;
        }
        if added == 0 {
            return Err(format!("--outbound-ca {}: no PEM certificate in the file", file.display()));
        }
    }
    let mut config = ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS configuration: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    // The request is written as HTTP/1.1; say so, so a server never picks h2 for us.
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}
