//! Social sign-in with OpenID Connect (Google, Apple): the authorization-code flow with `state`,
//! PKCE (S256) and `nonce`, and native sign-in with an ID token the app obtained itself.
//!
//! The state, PKCE verifier and nonce of a flow under way are kept server-side (10 minutes, one
//! use). ID tokens are checked against the provider's JWKS (RS256 only), issuer, audience (the
//! client id), expiry and, for the redirect flow, the nonce. A provider account is linked to a
//! user by `provider:subject`; the first sign-in links to the user with the same verified email
//! or creates one.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Method, Request};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use jsonwebtoken::{Algorithm, EncodingKey, Header, Validation, decode, decode_header};
use redb::{ReadableDatabase, ReadableTable};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::AccountService;
use super::keys::public_keys_from_jwks;
use super::model::{User, normalize_email};
use crate::error::{ApiError, ApiResult, Code};
use crate::http::auth::PublicKey;
use crate::storage::codec::{decode as decode_record, encode};
use crate::storage::tables::{OIDC_STATES, SOCIAL_CODES, SOCIAL_LINKS, USER_EMAILS, USERS};

/// How long a started sign-in may take at the provider.
const STATE_TTL_MS: i64 = 10 * 60 * 1000;
/// How long the one-time code handed to the client URL lives.
const GRANT_TTL_MS: i64 = 5 * 60 * 1000;
/// Provider keys are re-read this often, and sooner when a token names an unknown `kid`.
const JWKS_TTL: Duration = Duration::from_secs(3600);
/// A token with an unknown `kid` triggers at most one JWKS fetch per this interval.
const JWKS_MIN_REFETCH: Duration = Duration::from_secs(30);
/// Calls to a provider give up after this long (502).
const PROVIDER_TIMEOUT: Duration = Duration::from_secs(10);
/// Clock skew tolerated on provider tokens' `exp` and `iat`.
const LEEWAY_SECS: i64 = 60;

/// One OpenID Connect provider.
#[derive(Debug, Clone)]
pub struct Provider {
    pub client_id: String,
    pub client_secret: String,
    /// Signs the client secret per request instead (Apple).
    pub secret_key: Option<ClientSecretKey>,
    pub authorize_url: String,
    pub token_url: String,
    pub jwks_url: String,
    /// Accepted `iss` values (Google uses two spellings).
    pub issuers: Vec<String>,
    pub scopes: String,
    /// Extra audiences accepted for native sign-in (an iOS bundle id, an Android client id).
    pub native_client_ids: Vec<String>,
    /// `form_post` makes the provider POST the callback (Apple does when name or email is asked).
    pub response_mode: Option<String>,
}

/// One provider in the configuration file: every field optional, over the built-in defaults.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProviderFile {
    pub client_id: Option<String>,
    pub client_secret: Option<String>,
    /// Apple: the team id, the key id and the `.p8` key file the client secret is signed with.
    pub team_id: Option<String>,
    pub key_id: Option<String>,
    pub private_key_file: Option<std::path::PathBuf>,
    pub authorize_url: Option<String>,
    pub token_url: Option<String>,
    pub jwks_url: Option<String>,
    pub issuer: Option<String>,
    pub scopes: Option<String>,
    #[serde(default)]
    pub native_client_ids: Vec<String>,
    pub response_mode: Option<String>,
}

/// The `--oidc-config` file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OidcFile {
    /// Public base URL of the account API as the provider redirects to it, e.g.
    /// `https://accounts.example.com`; default: `http://` + the request's `Host`.
    pub redirect_base: Option<String>,
    /// Where the callback sends the browser with `?code=<one-time code>`; without it the callback
    /// answers the Login result as JSON.
    pub client_url: Option<String>,
    #[serde(default)]
    pub providers: BTreeMap<String, ProviderFile>,
}

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_default()
}

/// The built-in providers: the real Google and Apple endpoints, client ids and secrets from
/// `SHOPCELL_GOOGLE_CLIENT_ID` / `_SECRET` and `SHOPCELL_APPLE_CLIENT_ID` / `_SECRET`.
fn builtin() -> BTreeMap<String, Provider> {
    let google = Provider {
        client_id: env("SHOPCELL_GOOGLE_CLIENT_ID"),
        client_secret: env("SHOPCELL_GOOGLE_CLIENT_SECRET"),
        secret_key: None,
        authorize_url: "https://accounts.google.com/o/oauth2/v2/auth".into(),
        token_url: "https://oauth2.googleapis.com/token".into(),
        jwks_url: "https://www.googleapis.com/oauth2/v3/certs".into(),
        issuers: vec!["https://accounts.google.com".into(), "accounts.google.com".into()],
        scopes: "openid email profile".into(),
        native_client_ids: Vec::new(),
        response_mode: None,
    };
    let apple = Provider {
        client_id: env("SHOPCELL_APPLE_CLIENT_ID"),
        client_secret: env("SHOPCELL_APPLE_CLIENT_SECRET"),
        secret_key: None,
        authorize_url: "https://appleid.apple.com/auth/authorize".into(),
        token_url: "https://appleid.apple.com/auth/token".into(),
        jwks_url: "https://appleid.apple.com/auth/keys".into(),
        issuers: vec!["https://appleid.apple.com".into()],
        scopes: "openid name email".into(),
        native_client_ids: Vec::new(),
        // Apple posts the callback as a form whenever name or email is requested.
        response_mode: Some("form_post".into()),
    };
    BTreeMap::from([("google".to_string(), google), ("apple".to_string(), apple)])
}

type HttpsClient = Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

/// An HTTP client for provider endpoints: HTTPS with the webpki roots and the ring provider,
/// plain HTTP allowed (local providers, tests).
fn https_client() -> Result<HttpsClient, rustls::Error> {
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_provider_and_webpki_roots(rustls::crypto::ring::default_provider())?
        .https_or_http()
        .enable_http1()
        .build();
    Ok(Client::builder(TokioExecutor::new()).build(https))
}

/// Apple's client secret: an ES256 JWT the client signs with its team key, made per request.
#[derive(Clone)]
pub struct ClientSecretKey {
    pub team_id: String,
    pub key_id: String,
    key: Arc<EncodingKey>,
}

impl std::fmt::Debug for ClientSecretKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientSecretKey").field("team_id", &self.team_id).field("key_id", &self.key_id).finish()
    }
}

/// Lifetime of a signed client secret (Apple allows up to six months; one call needs minutes).
const CLIENT_SECRET_TTL_SECS: i64 = 300;

impl ClientSecretKey {
    /// The client secret for `client_id`, addressed to the provider `audience`, issued at `now`
    /// (Unix seconds).
    pub fn sign(&self, client_id: &str, audience: &str, now: i64) -> ApiResult<String> {
        let mut header = Header::new(Algorithm::ES256);
        header.kid = Some(self.key_id.clone());
        let claims = serde_json::json!({
            "iss": self.team_id,
            "iat": now,
            "exp": now + CLIENT_SECRET_TTL_SECS,
            "aud": audience,
            "sub": client_id,
        });
        jsonwebtoken::encode(&header, &claims, &self.key).map_err(ApiError::internal)
    }
}

/// Social sign-in configuration and the state it caches (provider keys).
pub struct Social {
    pub providers: BTreeMap<String, Provider>,
    pub redirect_base: Option<String>,
    pub client_url: Option<String>,
    /// `None` only if TLS could not be set up (logged at start; provider calls answer 502).
    client: Option<HttpsClient>,
    jwks: Mutex<HashMap<String, (Vec<PublicKey>, Instant)>>,
}

impl Default for Social {
    fn default() -> Self {
        Social::build(builtin(), OidcFile::default())
    }
}

impl Social {
    /// Reads the configuration file, if any, over the built-in providers.
    pub fn load(path: Option<&Path>) -> Result<Social, String> {
        let Some(path) = path else { return Ok(Social::default()) };
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let file: OidcFile = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        for name in file.providers.keys() {
            if !matches!(name.as_str(), "google" | "apple") {
                return Err(format!("{}: unknown provider {name:?} (google, apple)", path.display()));
            }
        }
        Social::new(file).map_err(|e| format!("{}: {e}", path.display()))
    }

    fn new(mut file: OidcFile) -> Result<Social, String> {
        let mut providers = builtin();
        for (name, f) in std::mem::take(&mut file.providers) {
            let Some(p) = providers.get_mut(&name) else { continue };
            let set = |slot: &mut String, v: Option<String>| {
                if let Some(v) = v {
                    *slot = v;
                }
            };
            set(&mut p.client_id, f.client_id);
            set(&mut p.client_secret, f.client_secret);
            set(&mut p.authorize_url, f.authorize_url);
            set(&mut p.token_url, f.token_url);
            set(&mut p.jwks_url, f.jwks_url);
            set(&mut p.scopes, f.scopes);
            if let Some(iss) = f.issuer {
                p.issuers = vec![iss];
            }
            if !f.native_client_ids.is_empty() {
                p.native_client_ids = f.native_client_ids;
            }
            if let Some(mode) = f.response_mode {
                p.response_mode = Some(mode).filter(|m| !m.is_empty() && m != "query");
            }
            match (f.team_id, f.key_id, f.private_key_file) {
                (Some(team_id), Some(key_id), Some(file)) => {
                    let pem = std::fs::read(&file).map_err(|e| format!("{}: {e}", file.display()))?;
                    let key =
                        EncodingKey::from_ec_pem(&pem).map_err(|e| format!("{}: not an EC private key: {e}", file.display()))?;
                    p.secret_key = Some(ClientSecretKey { team_id, key_id, key: Arc::new(key) });
                }
                (None, None, None) => {}
                _ => return Err(format!("{name}: teamId, keyId and privateKeyFile go together")),
            }
        }
        Ok(Social::build(providers, file))
    }

    fn build(providers: BTreeMap<String, Provider>, file: OidcFile) -> Social {
        let client = https_client().map_err(|e| tracing::error!(error = %e, "no TLS for identity providers")).ok();
        Social {
            providers,
            redirect_base: file.redirect_base.map(|b| b.trim_end_matches('/').to_string()),
            client_url: file.client_url,
            client,
            jwks: Mutex::new(HashMap::new()),
        }
    }

    /// A configured provider; unknown names are 404, known ones without a client id 503.
    pub fn provider(&self, name: &str) -> ApiResult<&Provider> {
        let p = self.providers.get(name).ok_or_else(ApiError::not_found)?;
        if p.client_id.is_empty() {
            return Err(ApiError::msg(Code::UNAVAILABLE, format!("{name} sign-in is not configured")));
        }
        Ok(p)
    }

    async fn send(&self, req: Request<Full<Bytes>>) -> ApiResult<(u16, Bytes)> {
        let call = async {
            let client = self.client.as_ref().ok_or_else(|| ApiError::new(Code::BAD_GATEWAY))?;
            let res = client.request(req).await.map_err(|e| {
                tracing::warn!(error = %e, "identity provider unreachable");
                ApiError::new(Code::BAD_GATEWAY)
            })?;
            let status = res.status().as_u16();
            let body = res.into_body().collect().await.map_err(|_| ApiError::new(Code::BAD_GATEWAY))?.to_bytes();
            Ok((status, body))
        };
        tokio::time::timeout(PROVIDER_TIMEOUT, call).await.map_err(|_| ApiError::new(Code::BAD_GATEWAY))?
    }

    /// Trades an authorization code for the provider's ID token; `now` (Unix seconds) dates a
    /// signed client secret.
    async fn redeem(&self, p: &Provider, code: &str, verifier: &str, redirect_uri: &str, now: i64) -> ApiResult<String> {
        let secret = match &p.secret_key {
            Some(k) => k.sign(&p.client_id, p.issuers.first().map(String::as_str).unwrap_or_default(), now)?,
            None => p.client_secret.clone(),
        };
        let form = form_urlencoded::Serializer::new(String::new())
            .append_pair("grant_type", "authorization_code")
            .append_pair("code", code)
            .append_pair("redirect_uri", redirect_uri)
            .append_pair("client_id", &p.client_id)
            .append_pair("client_secret", &secret)
            .append_pair("code_verifier", verifier)
            .finish();
        let req = Request::builder()
            .method(Method::POST)
            .uri(&p.token_url)
            .header(hyper::header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .header(hyper::header::ACCEPT, "application/json")
            .body(Full::new(Bytes::from(form)))
            .map_err(ApiError::internal)?;
        let (status, body) = self.send(req).await?;
        if !(200..300).contains(&status) {
            tracing::info!(status, "the identity provider refused an authorization code");
            return Err(ApiError::msg(Code::INVALID_TOKEN, "the provider refused the authorization code"));
        }
        let v: serde_json::Value = serde_json::from_slice(&body).map_err(|_| ApiError::new(Code::BAD_GATEWAY))?;
        v.get("id_token")
            .and_then(|t| t.as_str())
            .map(str::to_string)
            .ok_or_else(|| ApiError::msg(Code::BAD_GATEWAY, "the provider answered no ID token"))
    }

    /// The provider's signing keys, fetched when missing, stale, or lacking `kid`.
    async fn keys(&self, name: &str, p: &Provider, kid: &str) -> ApiResult<Vec<PublicKey>> {
        let cached = self.jwks.lock().ok().and_then(|c| c.get(name).cloned());
        if let Some((keys, at)) = &cached {
            let fresh = at.elapsed() < JWKS_TTL;
            if fresh && (keys.iter().any(|k| k.kid == kid) || at.elapsed() < JWKS_MIN_REFETCH) {
                return Ok(keys.clone());
            }
        }
        let req = Request::builder()
            .method(Method::GET)
            .uri(&p.jwks_url)
            .header(hyper::header::ACCEPT, "application/json")
            .body(Full::new(Bytes::new()))
            .map_err(ApiError::internal)?;
        let (status, body) = self.send(req).await?;
        let jwks: serde_json::Value = match ((200..300).contains(&status), serde_json::from_slice(&body)) {
            (true, Ok(v)) => v,
            _ => return Err(ApiError::msg(Code::BAD_GATEWAY, "the provider's keys could not be read")),
        };
        let keys = public_keys_from_jwks(&jwks);
        if let Ok(mut c) = self.jwks.lock() {
            c.insert(name.to_string(), (keys.clone(), Instant::now()));
        }
        Ok(keys)
    }

    /// Verifies a provider ID token: RS256 by a key of the provider's JWKS, issuer, audience
    /// (`audiences`), expiry at `now` (Unix seconds), and the nonce when one is expected.
    async fn verify(
        &self,
        name: &str,
        p: &Provider,
        token: &str,
        audiences: &[String],
        nonce: Option<&str>,
        now: i64,
    ) -> ApiResult<IdClaims> {
        let rejected = || ApiError::msg(Code::INVALID_TOKEN, "the provider's ID token was rejected");
        let header = decode_header(token).map_err(|_| rejected())?;
        if header.alg != Algorithm::RS256 {
            return Err(rejected());
        }
        let kid = header.kid.ok_or_else(rejected)?;
        let keys = self.keys(name, p, &kid).await?;
        let key = keys.iter().find(|k| k.kid == kid).ok_or_else(rejected)?;
        let mut validation = Validation::new(Algorithm::RS256);
        validation.set_issuer(&p.issuers);
        validation.set_audience(audiences);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        // `exp` is compared with the process's clock below; the library would read the system time.
        validation.validate_exp = false;
        let claims = decode::<IdClaims>(token, &key.key, &validation).map_err(|_| rejected())?.claims;
        if claims.exp < now - LEEWAY_SECS {
            return Err(rejected());
        }
        if let Some(expected) = nonce
            && !claims.nonce.as_deref().is_some_and(|n| crate::util::secret_eq(n, expected))
        {
            return Err(rejected());
        }
        Ok(claims)
    }
}

/// The claims of a provider ID token this service reads.
#[derive(Debug, Deserialize)]
struct IdClaims {
    sub: String,
    exp: i64,
    nonce: Option<String>,
    email: Option<String>,
    /// A boolean (Google) or the string `"true"` (Apple).
    email_verified: Option<serde_json::Value>,
    name: Option<String>,
}

impl IdClaims {
    fn verified_email(&self) -> Option<String> {
        let verified = match &self.email_verified {
            Some(serde_json::Value::Bool(b)) => *b,
            Some(serde_json::Value::String(s)) => s == "true",
            _ => false,
        };
        self.email.as_deref().filter(|_| verified).map(normalize_email).filter(|e| e.contains('@'))
    }
}

/// A sign-in under way at a provider (`OIDC_STATES` table).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OidcPending {
    pub provider: String,
    pub verifier: String,
    pub nonce: String,
    pub redirect_uri: String,
    pub expires_at: i64,
}

/// A finished social sign-in waiting for `POST /auth/social-accounts/exchange` (`SOCIAL_CODES`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SocialGrant {
    pub user_id: Uuid,
    pub expires_at: i64,
}

/// Where the callback leaves the browser.
pub enum CallbackOutcome {
    /// The signed-in user, for a JSON Login result (no client URL configured).
    User(User),
    /// `302` to the client URL with the one-time code.
    Redirect(String),
}

fn random_token() -> String {
    URL_SAFE_NO_PAD.encode(crate::util::random_bytes::<32>())
}

fn sha256(s: &str) -> Vec<u8> {
    ring::digest::digest(&ring::digest::SHA256, s.as_bytes()).as_ref().to_vec()
}

/// Appends `?name=value` (or `&name=value`) to a URL.
fn with_query(url: &str, pairs: &[(&str, &str)]) -> String {
    let mut q = form_urlencoded::Serializer::new(String::new());
    for (k, v) in pairs {
        q.append_pair(k, v);
    }
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}{}", q.finish())
}

impl AccountService {
    /// Starts the redirect flow: records state, PKCE verifier and nonce, and answers the
    /// provider's authorize URL. `base` is the public base URL the callback is reached at.
    pub async fn social_connect(&self, provider: &str, base: &str) -> ApiResult<String> {
        let p = self.social.provider(provider)?;
        let state = random_token();
        let verifier = random_token();
        let nonce = random_token();
        let challenge = URL_SAFE_NO_PAD.encode(sha256(&verifier));
        let redirect_uri = format!("{base}/api/v1/auth/social-accounts/callback/{provider}");
        let mut pairs = vec![
            ("response_type", "code"),
            ("client_id", p.client_id.as_str()),
            ("redirect_uri", redirect_uri.as_str()),
            ("scope", p.scopes.as_str()),
            ("state", state.as_str()),
            ("nonce", nonce.as_str()),
            ("code_challenge", challenge.as_str()),
            ("code_challenge_method", "S256"),
        ];
        if let Some(mode) = &p.response_mode {
            pairs.push(("response_mode", mode.as_str()));
        }
        let url = with_query(&p.authorize_url, &pairs);
        let now = self.clock.now_ms();
        let pending =
            OidcPending { provider: provider.to_string(), verifier, nonce, redirect_uri, expires_at: now + STATE_TTL_MS };
        self.writer
            .write(None, move |tx| {
                let mut t = tx.raw().open_table(OIDC_STATES)?;
                // Abandoned flows are dropped here, so the table holds minutes of sign-ins at most.
                t.retain(|_, v| decode_record::<OidcPending>(v).is_ok_and(|p| p.expires_at > now))?;
                t.insert(state.as_str(), encode(&pending)?.as_slice())?;
                Ok(())
            })
            .await?;
        Ok(url)
    }

    /// Finishes the redirect flow: consumes the state, redeems the code with the PKCE verifier,
    /// verifies the ID token (with the nonce), and links or creates the user.
    pub async fn social_callback(&self, provider: &str, code: &str, state: &str) -> ApiResult<CallbackOutcome> {
        let p = self.social.provider(provider)?.clone();
        let key = state.to_string();
        let pending: Option<OidcPending> = self
            .writer
            .write(None, move |tx| {
                let mut t = tx.raw().open_table(OIDC_STATES)?;
                let v = t.remove(key.as_str())?;
                v.map(|v| decode_record::<OidcPending>(v.value())).transpose()
            })
            .await?;
        let pending = pending
            .filter(|s| s.provider == provider && s.expires_at > self.clock.now_ms())
            .ok_or_else(|| ApiError::field("state", "is unknown, used or expired; start the sign-in again"))?;
        let id_token = self.social.redeem(&p, code, &pending.verifier, &pending.redirect_uri, self.clock.now_secs()).await?;
        let audiences = std::slice::from_ref(&p.client_id);
        let claims = self.social.verify(provider, &p, &id_token, audiences, Some(&pending.nonce), self.clock.now_secs()).await?;
        let user = self.social_user(provider, &claims).await?;
        let Some(client_url) = self.social.client_url.clone() else { return Ok(CallbackOutcome::User(user)) };
        let code = random_token();
        let now = self.clock.now_ms();
        let grant = SocialGrant { user_id: user.id, expires_at: now + GRANT_TTL_MS };
        let hash = sha256(&code);
        self.writer
            .write(None, move |tx| {
                let mut t = tx.raw().open_table(SOCIAL_CODES)?;
                t.retain(|_, v| decode_record::<SocialGrant>(v).is_ok_and(|g| g.expires_at > now))?;
                t.insert(hash.as_slice(), encode(&grant)?.as_slice())?;
                Ok(())
            })
            .await?;
        Ok(CallbackOutcome::Redirect(with_query(&client_url, &[("code", &code)])))
    }

    /// Redeems the one-time code of the callback's redirect: the user it signed in.
    pub async fn social_exchange(&self, code: &str) -> ApiResult<User> {
        let hash = sha256(code.trim());
        let grant: Option<SocialGrant> = self
            .writer
            .write(None, move |tx| {
                let mut t = tx.raw().open_table(SOCIAL_CODES)?;
                let v = t.remove(hash.as_slice())?;
                v.map(|v| decode_record::<SocialGrant>(v.value())).transpose()
            })
            .await?;
        let grant = grant
            .filter(|g| g.expires_at > self.clock.now_ms())
            .ok_or_else(|| ApiError::msg(Code::INVALID_TOKEN, "the code is unknown, used or expired"))?;
        self.user(grant.user_id)?.ok_or_else(|| ApiError::new(Code::INVALID_TOKEN))
    }

    /// Native sign-in: an ID token the app got from the provider's SDK (no nonce of ours).
    pub async fn social_native(&self, provider: &str, id_token: &str) -> ApiResult<User> {
        // The provider is a body field here, not a path: an unknown one is a bad field, not a 404.
        if !self.social.providers.contains_key(provider) {
            let known: Vec<&str> = self.social.providers.keys().map(String::as_str).collect();
            return Err(ApiError::field("provider", format!("unknown provider; one of: {}", known.join(", "))));
        }
        let p = self.social.provider(provider)?.clone();
        let mut audiences = vec![p.client_id.clone()];
        audiences.extend(p.native_client_ids.iter().cloned());
        let claims = self.social.verify(provider, &p, id_token, &audiences, None, self.clock.now_secs()).await?;
        self.social_user(provider, &claims).await
    }

    /// The user linked to the provider account; on first sign-in, the user with the same
    /// verified email (then linked), or a new user without a password.
    async fn social_user(&self, provider: &str, claims: &IdClaims) -> ApiResult<User> {
        let link = format!("{provider}:{}", claims.sub);
        let email = claims.verified_email();
        let (now, signup) = (self.clock.now_ms(), self.signup);
        let fresh = User {
            id: self.clock.new_id(),
            email: email.clone().unwrap_or_default(),
            name: claims
                .name
                .clone()
                .filter(|n| !n.trim().is_empty())
                .or_else(|| email.as_deref().and_then(|e| e.split('@').next()).map(str::to_string))
                .unwrap_or_default()
                .chars()
                .take(100)
                .collect(),
            // No PHC string verifies against an empty hash: password login stays closed until
            // the user sets a password.
            password_hash: String::new(),
            created_at: now,
            updated_at: now,
        };
        self.writer
            .write(None, move |tx| {
                let txn = tx.raw();
                let mut links = txn.open_table(SOCIAL_LINKS)?;
                let mut users = txn.open_table(USERS)?;
                if let Some(id) = links.get(link.as_str())?.map(|v| v.value())
                    && let Some(v) = users.get(id)?
                {
                    return decode_record::<User>(v.value());
                }
                let Some(email) = &email else {
                    return Err(ApiError::msg(Code::BUSINESS_RULE, "the provider did not share a verified email address"));
                };
                let mut emails = txn.open_table(USER_EMAILS)?;
                let existing = emails.get(email.as_str())?.map(|v| v.value());
                let found: Option<User> = match existing {
                    Some(id) => users.get(id)?.map(|v| decode_record(v.value())).transpose()?,
                    None => None,
                };
                let user = match found {
                    Some(u) => u,
                    None => {
                        // A stranger's first sign-in creates an account: only where sign-up is open.
                        signup.check()?;
                        emails.insert(email.as_str(), fresh.id.as_u128())?;
                        users.insert(fresh.id.as_u128(), encode(&fresh)?.as_slice())?;
                        fresh.clone()
                    }
                };
                links.insert(link.as_str(), user.id.as_u128())?;
                Ok(user)
            })
            .await
    }

    /// The user a provider account is linked to, if any (tests and support).
    pub fn social_link(&self, provider: &str, subject: &str) -> ApiResult<Option<Uuid>> {
        let txn = self.db.begin_read()?;
        let t = txn.open_table(SOCIAL_LINKS)?;
        Ok(t.get(format!("{provider}:{subject}").as_str())?.map(|v| Uuid::from_u128(v.value())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_is_set_up_for_providers() {
        assert!(https_client().is_ok());
        assert!(Social::default().client.is_some());
    }

    #[test]
    fn the_built_in_providers_are_the_real_google_and_apple() {
        let p = builtin();
        assert_eq!(p["google"].token_url, "https://oauth2.googleapis.com/token");
        assert_eq!(p["google"].jwks_url, "https://www.googleapis.com/oauth2/v3/certs");
        assert!(p["google"].issuers.contains(&"https://accounts.google.com".to_string()));
        assert_eq!(p["apple"].authorize_url, "https://appleid.apple.com/auth/authorize");
        assert_eq!(p["apple"].issuers, ["https://appleid.apple.com"]);
        assert_eq!(p["apple"].response_mode.as_deref(), Some("form_post"));
    }

    #[test]
    fn the_file_overrides_only_what_it_names() {
        let file: OidcFile =
            serde_json::from_str(r#"{"clientUrl": "https://app.example/x", "providers": {"google": {"clientId": "id-1"}}}"#)
                .unwrap();
        let s = Social::new(file).unwrap();
        assert_eq!(s.providers["google"].client_id, "id-1");
        assert_eq!(s.providers["google"].token_url, "https://oauth2.googleapis.com/token");
        assert_eq!(s.client_url.as_deref(), Some("https://app.example/x"));
        assert!(s.provider("google").is_ok());
        assert_eq!(s.provider("nope").unwrap_err().code, Code::NOT_FOUND);
        assert_eq!(with_query("https://a/b?x=1", &[("code", "a b")]), "https://a/b?x=1&code=a+b");
    }
}
