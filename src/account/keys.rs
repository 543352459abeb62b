//! The account service's RS256 signing key and the platform service key.
//!
//! The RSA key pair is generated on first start into the account directory (PKCS#8 PEM, mode
//! 0600) and its public half is published as a JWKS. The service key is a random secret that
//! the account service, cells, routers and operators present to each other on internal calls.

use std::path::Path;

use aws_lc_rs::encoding::AsDer;
use aws_lc_rs::rsa::{KeyPair, KeySize};
use aws_lc_rs::signature::KeyPair as _;
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header};
use serde::Serialize;

use crate::http::auth::PublicKey;
use crate::private_files::create_private;

const KEY_FILE: &str = "jwt-rs256.pem";
const SERVICE_KEY_FILE: &str = "service.key";
/// The key files of the account directory, which a backup carries.
pub const KEY_FILES: [&str; 2] = [KEY_FILE, SERVICE_KEY_FILE];

/// The signing half, held by the account service only.
pub struct SigningKey {
    pub kid: String,
    encoding: EncodingKey,
    /// Public modulus and exponent, big-endian.
    n: Vec<u8>,
    e: Vec<u8>,
}

/// One public key of a JWKS (RFC 7517).
#[derive(Serialize, schemars::JsonSchema)]
pub struct Jwk {
    pub kty: &'static str,
    #[serde(rename = "use")]
    pub use_: &'static str,
    pub alg: &'static str,
    pub kid: String,
    pub n: String,
    pub e: String,
}

/// The issuer's public keys, as `GET /.well-known/jwks.json` publishes them.
#[derive(Serialize, schemars::JsonSchema)]
pub struct Jwks {
    pub keys: Vec<Jwk>,
}

impl SigningKey {
    /// Loads the key pair from `dir`, generating it on first start.
    pub fn load_or_create(dir: &Path) -> std::io::Result<SigningKey> {
        let path = dir.join(KEY_FILE);
        let der = if path.exists() {
            pem_to_der(&std::fs::read_to_string(&path)?)
                .ok_or_else(|| std::io::Error::other(format!("{} is not a PKCS#8 PEM key", path.display())))?
        } else {
            let pair = KeyPair::generate(KeySize::Rsa2048).map_err(|_| std::io::Error::other("RSA key generation failed"))?;
            let der = pair.as_der().map_err(|_| std::io::Error::other("RSA key encoding failed"))?.as_ref().to_vec();
            create_private(&path, der_to_pem(&der).as_bytes())?;
            der
        };
        let pair = KeyPair::from_pkcs8(&der).map_err(|e| std::io::Error::other(format!("RSA key rejected: {e}")))?;
        let public = pair.public_key();
        let n = public.modulus().big_endian_without_leading_zero().to_vec();
        let e = public.exponent().big_endian_without_leading_zero().to_vec();
        let pem = der_to_pem(&der);
        let encoding = EncodingKey::from_rsa_pem(pem.as_bytes()).map_err(std::io::Error::other)?;
        let digest = ring::digest::digest(&ring::digest::SHA256, &[n.as_slice(), e.as_slice()].concat());
        let kid = hex(&digest.as_ref()[..8]);
        Ok(SigningKey { kid, encoding, n, e })
    }

    /// Signs claims with RS256 and this key's `kid`.
    pub fn sign<T: Serialize>(&self, claims: &T) -> Result<String, jsonwebtoken::errors::Error> {
        let mut header = Header::new(Algorithm::RS256);
        header.kid = Some(self.kid.clone());
        jsonwebtoken::encode(&header, claims, &self.encoding)
    }

    pub fn jwks(&self) -> Jwks {
        Jwks {
            keys: vec![Jwk {
                kty: "RSA",
                use_: "sig",
                alg: "RS256",
                kid: self.kid.clone(),
                n: URL_SAFE_NO_PAD.encode(&self.n),
                e: URL_SAFE_NO_PAD.encode(&self.e),
            }],
        }
    }

    pub fn public_key(&self) -> PublicKey {
        PublicKey { kid: self.kid.clone(), key: DecodingKey::from_rsa_raw_components(&self.n, &self.e) }
    }
}

/// Public keys from a JWKS document (what cells and routers fetch from the account service).
pub fn public_keys_from_jwks(jwks: &serde_json::Value) -> Vec<PublicKey> {
    let keys = jwks.get("keys").and_then(|k| k.as_array()).cloned().unwrap_or_default();
    keys.iter()
        .filter(|k| k.get("kty").and_then(|v| v.as_str()) == Some("RSA"))
        .filter_map(|k| {
            let kid = k.get("kid")?.as_str()?.to_string();
            let key = DecodingKey::from_rsa_components(k.get("n")?.as_str()?, k.get("e")?.as_str()?).ok()?;
            Some(PublicKey { kid, key })
        })
        .collect()
}

/// Loads the service key from `dir`, generating it on first start.
pub fn load_or_create_service_key(dir: &Path) -> std::io::Result<String> {
    let path = dir.join(SERVICE_KEY_FILE);
    if path.exists() {
        return read_service_key(&path);
    }
    let key = hex(&crate::util::random_bytes::<32>());
    create_private(&path, key.as_bytes())?;
    Ok(key)
}

/// Reads a service key file (one hex line).
pub fn read_service_key(path: &Path) -> std::io::Result<String> {
    let key = std::fs::read_to_string(path)
        .map_err(|e| std::io::Error::new(e.kind(), format!("cannot read the service key file {}: {e}", path.display())))?
        .trim()
        .to_string();
    if key.len() < 32 {
        return Err(std::io::Error::other(format!("{} does not hold a service key", path.display())));
    }
    Ok(key)
}

fn der_to_pem(der: &[u8]) -> String {
    let b64 = STANDARD.encode(der);
    let mut pem = String::from("-----BEGIN PRIVATE KEY-----\n");
    for chunk in b64.as_bytes().chunks(64) {
        pem.push_str(std::str::from_utf8(chunk).unwrap_or_default());
        pem.push('\n');
    }
    pem.push_str("-----END PRIVATE KEY-----\n");
    pem
}

fn pem_to_der(pem: &str) -> Option<Vec<u8>> {
    let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    STANDARD.decode(body.trim()).ok()
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
