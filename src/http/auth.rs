//! RS256 token verification: every service checks the same access token with the account
//! service's public key. Verified tokens are cached until they expire, so the signature check
//! (tens of microseconds) runs once per token, not once per request. Expiry is judged by the
//! process's clock, not by the JWT library's reading of the system time.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::RwLock;

use jsonwebtoken::{Algorithm, DecodingKey, Validation, decode, decode_header};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::clock::Clock;
use crate::error::{ApiError, Code};

/// Issuer and audience of every token the platform issues.
pub const ISSUER: &str = "shopcell";
pub const AUDIENCE: &str = "shopcell";
/// Access-token lifetime (spec §8).
pub const ACCESS_TTL_SECS: i64 = 3600;

/// The claims of access and refresh tokens.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Claims {
    pub iss: String,
    pub aud: String,
    /// The user id.
    pub sub: String,
    /// The session id.
    pub sid: String,
    pub iat: i64,
    /// Not before (seconds); tokens of ours carry none, a forged one may.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nbf: Option<i64>,
    pub exp: i64,
    pub jti: String,
    /// `access` or `refresh`: a refresh token is never accepted as an access token.
    pub typ: String,
}

/// Who is calling, from a verified access token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Principal {
    pub user_id: Uuid,
    pub session_id: Uuid,
    pub expires_at: i64,
}

/// A public key of the account service, as published in its JWKS.
#[derive(Clone)]
pub struct PublicKey {
    pub kid: String,
    pub key: DecodingKey,
}

/// Most verified tokens kept; the cache is cleared when full (tokens are re-verified then).
const CACHE_MAX: usize = 50_000;
/// Seconds a token is still accepted past its `exp`.
const LEEWAY_SECS: i64 = 0;
/// How far ahead of this process's clock a token may be dated (`iat`, `nbf`): the clocks of the
/// account service and of the processes checking its tokens may differ by this much.
pub const MAX_SKEW_SECS: i64 = 60;

pub struct TokenVerifier {
    keys: Vec<PublicKey>,
    validation: Validation,
    cache: RwLock<HashMap<Box<str>, Principal, BuildHasherDefault<SignatureTail>>>,
    clock: Clock,
}

/// Hashes a verified token by its last 16 bytes, the end of its RS256 signature: tokens do not
/// share it by chance, and no client chooses it (only tokens this process verified are kept;
/// any other lookup misses once whole keys are compared). SipHash over the whole token, some
/// 700 bytes, cost more than the rest of the lookup.
#[derive(Default)]
struct SignatureTail(u64);

impl Hasher for SignatureTail {
    fn write(&mut self, bytes: &[u8]) {
        self.0 = crate::storage::row_cache::fold_words(self.0, &bytes[bytes.len().saturating_sub(16)..]);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

impl TokenVerifier {
    /// A verifier of tokens signed by `keys`, judging expiry by `clock`.
    pub fn new(keys: Vec<PublicKey>, clock: Clock) -> Self {
        let mut validation = Validation::new(Algorithm::RS256);
        validation.set_issuer(&[ISSUER]);
        validation.set_audience(&[AUDIENCE]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        // `exp` is compared with the clock in `verify`; the library would read the system time.
        validation.validate_exp = false;
        TokenVerifier { keys, validation, cache: RwLock::new(HashMap::default()), clock }
    }

    /// Verifies an access token: RS256 with a known `kid`, issuer, audience, expiry, type.
    pub fn verify_access(&self, token: &str) -> Result<Principal, ApiError> {
        let now = self.clock.now_secs();
        if let Some(p) = self.cache.read().ok().and_then(|c| c.get(token).copied())
            && p.expires_at > now
        {
            return Ok(p);
        }
        let claims = self.verify(token, "access")?;
        let principal = Principal { user_id: parse_id(&claims.sub)?, session_id: parse_id(&claims.sid)?, expires_at: claims.exp };
        if let Ok(mut c) = self.cache.write() {
            if c.len() >= CACHE_MAX {
                c.clear();
            }
            c.insert(token.into(), principal);
        }
        Ok(principal)
    }

    /// Verifies a token of type `typ` and returns its claims: 401 `TOKEN_EXPIRED` once the
    /// clock is past its `exp`, 401 `INVALID_TOKEN` for anything else wrong with it.
    pub fn verify(&self, token: &str, typ: &str) -> Result<Claims, ApiError> {
        // The message names the token the caller sent: an access, refresh or MFA token.
        let what = match typ {
            "refresh" => "refresh token",
            "mfa" => "mfaToken",
            _ => "access token",
        };
        let invalid = || ApiError::msg(Code::INVALID_TOKEN, format!("the {what} is invalid"));
        let header = decode_header(token).map_err(|_| invalid())?;
        if header.alg != Algorithm::RS256 {
            return Err(invalid());
        }
        let kid = header.kid.ok_or_else(invalid)?;
        let key = self.keys.iter().find(|k| k.kid == kid).ok_or_else(invalid)?;
        let data = decode::<Claims>(token, &key.key, &self.validation).map_err(|_| invalid())?;
        // A token dated ahead of the clock was not issued by it (beyond a clock skew between
        // processes): refused, as is one not valid yet.
        let now = self.clock.now_secs();
        if data.claims.iat > now.saturating_add(MAX_SKEW_SECS)
            || data.claims.nbf.is_some_and(|nbf| nbf > now.saturating_add(MAX_SKEW_SECS))
        {
            return Err(invalid());
        }
        if data.claims.exp < now - LEEWAY_SECS {
            return Err(ApiError::msg(Code::TOKEN_EXPIRED, format!("the {what} has expired")));
        }
        if data.claims.typ != typ {
            return Err(invalid());
        }
        Ok(data.claims)
    }
}

fn parse_id(s: &str) -> Result<Uuid, ApiError> {
    Uuid::parse_str(s).map_err(|_| ApiError::new(Code::INVALID_TOKEN))
}

/// The bearer token of an `Authorization` header, if any.
pub fn bearer(headers: &hyper::HeaderMap) -> Option<&str> {
    let v = headers.get(hyper::header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = v.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then_some(token.trim()).filter(|t| !t.is_empty())
}
