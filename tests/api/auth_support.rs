//! Helpers of the identity tests: a server started from command-line flags, an independent TOTP
//! implementation (RFC 6238 over `ring`'s HMAC-SHA1), RSA keys and token crafting, and a real
//! OpenID Connect provider on loopback.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use aws_lc_rs::encoding::AsDer;
use aws_lc_rs::rsa::{KeyPair, KeySize};
use aws_lc_rs::signature::KeyPair as _;
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};
use shopcell::account::AccountService;
use shopcell::cli::{Cli, Command};

use crate::support::*;

/// Starts `shopcell serve FLAGS…` in this process with a fresh data directory, parsing the flags
/// exactly as the binary does.
pub async fn spawn_app_with_flags(flags: &[&str]) -> TestApp {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().to_string_lossy().into_owned();
    let mut argv = vec!["shopcell", "serve", "--data", &data, "--listen", "127.0.0.1:0"];
    argv.extend_from_slice(flags);
    let Command::Serve(args) = <Cli as clap::Parser>::try_parse_from(argv).expect("flags parse").command else {
        panic!("not a serve command");
    };
    serve(&args, dir, shopcell::clock::Clock::system()).await
}

/// The account service of an in-process app, to check stored state.
pub fn account_of(app: &TestApp) -> &AccountService {
    app.server.as_ref().expect("running").node.account.as_deref().expect("account service")
}

// ---- TOTP, written from RFC 6238 / RFC 4226 --------------------------------------------------

/// Decodes RFC 4648 base32 (upper case, padding optional).
pub fn base32_decode(s: &str) -> Vec<u8> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
    let mut out = Vec::new();
    let (mut buffer, mut bits) = (0u32, 0u32);
    for c in s.trim_end_matches('=').bytes() {
        let v = ALPHABET.iter().position(|&a| a == c.to_ascii_uppercase()).expect("base32 character") as u32;
        buffer = (buffer << 5) | v;
        bits += 5;
        if bits >= 8 {
            bits -= 8;
            out.push((buffer >> bits) as u8);
            buffer &= (1 << bits) - 1;
        }
    }
    out
}

/// The 6-digit TOTP of `key` at Unix time `t` (30-second steps, HMAC-SHA1).
pub fn totp_at(key: &[u8], t: u64) -> String {
    let k = ring::hmac::Key::new(ring::hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY, key);
    let mac = ring::hmac::sign(&k, &(t / 30).to_be_bytes());
    let h = mac.as_ref();
    let offset = (h[h.len() - 1] & 0x0f) as usize;
    let binary = (u32::from(h[offset]) & 0x7f) << 24
        | u32::from(h[offset + 1]) << 16
        | u32::from(h[offset + 2]) << 8
        | u32::from(h[offset + 3]);
    format!("{:06}", binary % 1_000_000)
}

pub fn unix_now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_secs()
}

// ---- RSA keys and tokens ---------------------------------------------------------------------

/// An RSA key pair with its JWK.
pub struct RsaKey {
    pub kid: String,
    pub encoding: EncodingKey,
    pub jwk: Value,
}

impl RsaKey {
    pub fn generate(kid: &str) -> RsaKey {
        let pair = KeyPair::generate(KeySize::Rsa2048).expect("rsa key");
        let der = pair.as_der().expect("der").as_ref().to_vec();
        let pem = format!("-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n", STANDARD.encode(&der));
        let encoding = EncodingKey::from_rsa_pem(pem.as_bytes()).expect("encoding key");
        let public = pair.public_key();
        let n = URL_SAFE_NO_PAD.encode(public.modulus().big_endian_without_leading_zero());
        let e = URL_SAFE_NO_PAD.encode(public.exponent().big_endian_without_leading_zero());
        let jwk = json!({"kty": "RSA", "use": "sig", "alg": "RS256", "kid": kid, "n": n, "e": e});
        RsaKey { kid: kid.to_string(), encoding, jwk }
    }

    /// The PEM key file of an account directory.
    pub fn from_pem_file(path: &std::path::Path, kid: &str) -> RsaKey {
        let pem = std::fs::read(path).expect("key file");
        RsaKey { kid: kid.to_string(), encoding: EncodingKey::from_rsa_pem(&pem).expect("pem"), jwk: Value::Null }
    }

    pub fn sign(&self, claims: &Value) -> String {
        let mut header = Header::new(Algorithm::RS256);
        header.kid = Some(self.kid.clone());
        jsonwebtoken::encode(&header, claims, &self.encoding).expect("sign")
    }
}

/// Decodes one base64url JWT segment as JSON.
pub fn jwt_part(token: &str, i: usize) -> Value {
    let part = token.split('.').nth(i).expect("segment");
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(part).expect("base64url")).expect("json")
}

/// A JWT with any header and an HMAC-SHA256 signature under `secret` (or none when `None`).
pub fn forge(header: &Value, claims: &Value, secret: Option<&[u8]>) -> String {
    let signing_input = format!("{}.{}", URL_SAFE_NO_PAD.encode(header.to_string()), URL_SAFE_NO_PAD.encode(claims.to_string()));
    let sig = match secret {
        Some(s) => {
            URL_SAFE_NO_PAD.encode(ring::hmac::sign(&ring::hmac::Key::new(ring::hmac::HMAC_SHA256, s), signing_input.as_bytes()))
        }
        None => String::new(),
    };
    format!("{signing_input}.{sig}")
}

// ---- a real OpenID Connect provider on loopback ----------------------------------------------

/// How the provider bends the next ID tokens it issues (for the bad cases).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tweak {
    None,
    WrongNonce,
    WrongAudience,
    Expired,
    BadSignature,
}

struct Grant {
    client_id: String,
    redirect_uri: String,
    challenge: String,
    nonce: String,
    user: (String, String),
}

struct ProviderState {
    grants: HashMap<String, Grant>,
    /// The (subject, email) the next consent signs in as.
    user: (String, String),
    tweak: Tweak,
    token_calls: u32,
    /// The `client_secret` of the last token request.
    last_client_secret: Option<String>,
}

/// A small OpenID Connect provider: `/authorize` (consents at once), `/token` (checks PKCE,
/// redirect URI and client secret, issues RS256 ID tokens), `/jwks`.
#[derive(Clone)]
pub struct OidcProvider {
    pub base: String,
    pub client_id: String,
    pub client_secret: String,
    key: Arc<RsaKey>,
    rogue: Arc<RsaKey>,
    state: Arc<Mutex<ProviderState>>,
}

impl OidcProvider {
    pub async fn start() -> OidcProvider {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr: SocketAddr = listener.local_addr().expect("addr");
        let p = OidcProvider {
            base: format!("http://{addr}"),
            client_id: "shopcell-test-client".into(),
            client_secret: "provider-secret".into(),
            key: Arc::new(RsaKey::generate("provider-key-1")),
            // Same kid, another key: a token it signs must fail the signature check.
            rogue: Arc::new(RsaKey::generate("provider-key-1")),
            state: Arc::new(Mutex::new(ProviderState {
                grants: HashMap::new(),
                user: ("subject-1".into(), "social@example.com".into()),
                tweak: Tweak::None,
                token_calls: 0,
                last_client_secret: None,
            })),
        };
        let server = p.clone();
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else { break };
                let server = server.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |req| {
                        let server = server.clone();
                        async move { Ok::<_, Infallible>(server.answer(req).await) }
                    });
                    let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        p
    }

    /// The `--oidc-config` file for a shopcell using this provider as `google` and `apple`.
    pub fn config(&self, client_url: Option<&str>) -> Value {
        let provider = |issuer: &str| {
            json!({
                "clientId": self.client_id,
                "clientSecret": self.client_secret,
                "authorizeUrl": format!("{}/authorize", self.base),
                "tokenUrl": format!("{}/token", self.base),
                "jwksUrl": format!("{}/jwks", self.base),
                "issuer": issuer,
                "nativeClientIds": ["com.example.ios"],
                "responseMode": "query",
            })
        };
        let mut c = json!({"providers": {"google": provider(&self.base), "apple": provider(&self.base)}});
        if let Some(u) = client_url {
            c["clientUrl"] = json!(u);
        }
        c
    }

    pub fn set_user(&self, subject: &str, email: &str) {
        self.state.lock().unwrap().user = (subject.into(), email.into());
    }

    pub fn set_tweak(&self, t: Tweak) {
        self.state.lock().unwrap().tweak = t;
    }

    pub fn token_calls(&self) -> u32 {
        self.state.lock().unwrap().token_calls
    }

    pub fn last_client_secret(&self) -> Option<String> {
        self.state.lock().unwrap().last_client_secret.clone()
    }

    /// An ID token as the provider issues it, bent by the current tweak.
    pub fn id_token(&self, audience: &str, nonce: Option<&str>) -> String {
        let (tweak, (sub, email)) = {
            let s = self.state.lock().unwrap();
            (s.tweak, s.user.clone())
        };
        let now = unix_now() as i64;
        let mut claims = json!({
            "iss": self.base,
            "aud": if tweak == Tweak::WrongAudience { "someone-else" } else { audience },
            "sub": sub,
            "email": email,
            "email_verified": true,
            "name": "Social User",
            "iat": now,
            "exp": if tweak == Tweak::Expired { now - 600 } else { now + 600 },
        });
        if let Some(n) = nonce {
            claims["nonce"] = json!(if tweak == Tweak::WrongNonce { "not-the-nonce" } else { n });
        }
        if tweak == Tweak::BadSignature { self.rogue.sign(&claims) } else { self.key.sign(&claims) }
    }

    /// The shared secret, or a signed JWT (Apple's form; the test checks its signature itself).
    fn client_secret_ok(&self, secret: Option<&String>) -> bool {
        secret.is_some_and(|s| *s == self.client_secret || s.split('.').count() == 3)
    }

    async fn answer(&self, req: Request<Incoming>) -> Response<Full<Bytes>> {
        let query: HashMap<String, String> =
            form_urlencoded::parse(req.uri().query().unwrap_or("").as_bytes()).into_owned().collect();
        match (req.method().clone(), req.uri().path()) {
            (Method::GET, "/jwks") => reply(StatusCode::OK, &json!({"keys": [self.key.jwk]}), None),
            (Method::GET, "/authorize") => {
                let code = uuid::Uuid::now_v7().simple().to_string();
                let grant = Grant {
                    client_id: query["client_id"].clone(),
                    redirect_uri: query["redirect_uri"].clone(),
                    challenge: query["code_challenge"].clone(),
                    nonce: query["nonce"].clone(),
                    user: self.state.lock().unwrap().user.clone(),
                };
                assert_eq!(query["code_challenge_method"], "S256");
                assert_eq!(query["response_type"], "code");
                let location = format!(
                    "{}?{}",
                    grant.redirect_uri,
                    form_urlencoded::Serializer::new(String::new())
                        .append_pair("code", &code)
                        .append_pair("state", &query["state"])
                        .finish()
                );
                self.state.lock().unwrap().grants.insert(code, grant);
                reply(StatusCode::FOUND, &Value::Null, Some(location))
            }
            (Method::POST, "/token") => {
                let body = req.into_body().collect().await.expect("body").to_bytes();
                let form: HashMap<String, String> = form_urlencoded::parse(&body).into_owned().collect();
                let grant = {
                    let mut s = self.state.lock().unwrap();
                    s.token_calls += 1;
                    s.last_client_secret = form.get("client_secret").cloned();
                    s.grants.remove(form.get("code").map(String::as_str).unwrap_or(""))
                };
                let invalid = |why: &str| reply(StatusCode::BAD_REQUEST, &json!({"error": "invalid_grant", "why": why}), None);
                let Some(g) = grant else { return invalid("unknown or used code") };
                let verifier = form.get("code_verifier").cloned().unwrap_or_default();
                let challenge = URL_SAFE_NO_PAD.encode(ring::digest::digest(&ring::digest::SHA256, verifier.as_bytes()));
                if challenge != g.challenge {
                    return invalid("PKCE verifier does not match");
                }
                if form.get("redirect_uri") != Some(&g.redirect_uri) || form.get("client_id") != Some(&g.client_id) {
                    return invalid("redirect_uri or client_id differs");
                }
                if !self.client_secret_ok(form.get("client_secret"))
                    || form.get("grant_type").map(String::as_str) != Some("authorization_code")
                {
                    return invalid("bad client secret or grant type");
                }
                let previous = std::mem::replace(&mut self.state.lock().unwrap().user, g.user.clone());
                let id_token = self.id_token(&g.client_id, Some(&g.nonce));
                self.state.lock().unwrap().user = previous;
                reply(StatusCode::OK, &json!({"access_token": "opaque", "token_type": "Bearer", "id_token": id_token}), None)
            }
            _ => reply(StatusCode::NOT_FOUND, &json!({"error": "not_found"}), None),
        }
    }
}

fn reply(status: StatusCode, body: &Value, location: Option<String>) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(if body.is_null() { Vec::new() } else { body.to_string().into_bytes() })));
    *r.status_mut() = status;
    r.headers_mut().insert("content-type", "application/json".parse().unwrap());
    if let Some(l) = location {
        r.headers_mut().insert("location", l.parse().unwrap());
    }
    r
}

/// Path and query of an absolute URL (to replay a redirect against the app's client).
pub fn path_and_query(url: &str) -> String {
    let uri: hyper::Uri = url.parse().expect("uri");
    uri.path_and_query().map(|p| p.as_str().to_string()).unwrap_or_default()
}

/// The query parameters of a URL.
pub fn query_of(url: &str) -> HashMap<String, String> {
    let q = url.split_once('?').map(|(_, q)| q).unwrap_or("");
    form_urlencoded::parse(q.as_bytes()).into_owned().collect()
}
