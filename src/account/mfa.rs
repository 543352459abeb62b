//! Multi-factor sign-in with TOTP (RFC 6238: HMAC-SHA1, 6 digits, 30-second steps, ±1 step of
//! clock skew). Each code is accepted once: the last accepted step is remembered per user.
//! Recovery codes are random and high-entropy, so a plain SHA-256 of each is stored; each works once.
//!
//! A login whose password is right but whose user has MFA on gets an `mfaToken`: an RS256 JWT of
//! type `mfa` (5 minutes) whose `jti` names a challenge row. Completing the login removes the row,
//! so the token works once; too many wrong codes remove it too.

use redb::{ReadableDatabase, ReadableTable};
use serde::{Deserialize, Serialize};
use totp_rs::{Algorithm, Builder, Totp};
use uuid::Uuid;

use super::model::User;
use super::{AccountService, new_session, put_session};
use crate::error::{ApiError, ApiResult, Code};
use crate::http::auth::{AUDIENCE, Claims, ISSUER};
use crate::storage::codec::{decode, encode};
use crate::storage::tables::{MFA, MFA_CHALLENGES};

/// Lifetime of an `mfaToken`.
pub const MFA_TOKEN_TTL_SECS: i64 = 300;
/// Wrong codes one challenge survives; then the password must be given again.
const MAX_FAILURES: u32 = 5;
/// Recovery codes handed out when MFA is enabled.
pub const RECOVERY_CODES: usize = 10;
/// The issuer shown by authenticator apps.
const TOTP_ISSUER: &str = "shopcell";

/// A user's MFA record (`MFA` table).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct MfaState {
    /// A secret handed out by setup, not yet confirmed with a code.
    pub pending: Option<Vec<u8>>,
    /// The confirmed secret: MFA is on while this is set.
    pub secret: Option<Vec<u8>>,
    /// The TOTP step of the last accepted code; codes of this step or earlier are refused.
    pub last_step: u64,
    /// SHA-256 of each unused recovery code.
    pub recovery: Vec<[u8; 32]>,
}

/// A password-verified login waiting for its second factor (`MFA_CHALLENGES` table).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MfaChallenge {
    pub user_id: Uuid,
    pub expires_at: i64,
    pub failures: u32,
}

/// The answer of `POST /auth/mfa/setup`.
pub struct MfaSetup {
    pub secret: String,
    pub otpauth_url: String,
}

fn totp(secret: &[u8], account: &str) -> ApiResult<Totp> {
    Builder::new()
        .with_algorithm(Algorithm::SHA1)
        .with_digits(6)
        .with_step_duration(30)
        .with_skew(1)
        .with_secret(secret.to_vec())
        // Labels may not hold ':' (it separates issuer and account).
        .with_account_name(account.replace(':', "_"))
        .with_issuer(Some(TOTP_ISSUER))
        .build()
        .map_err(ApiError::internal)
}

fn is_totp_code(code: &str) -> bool {
    code.len() == 6 && code.bytes().all(|b| b.is_ascii_digit())
}

fn recovery_hash(code: &str) -> [u8; 32] {
    let normalized: String = code.chars().filter(|c| c.is_ascii_alphanumeric()).map(|c| c.to_ascii_lowercase()).collect();
    let d = ring::digest::digest(&ring::digest::SHA256, normalized.as_bytes());
    let mut out = [0u8; 32];
    out.copy_from_slice(d.as_ref());
    out
}

/// A recovery code: 80 random bits as `xxxxx-xxxxx-xxxxx-xxxxx` over a 32-letter alphabet.
fn new_recovery_code() -> String {
    const ALPHABET: &[u8; 32] = b"abcdefghjkmnpqrstuvwxyz234567890";
    let bytes = crate::util::random_bytes::<10>();
    let mut bits: u128 = 0;
    for b in bytes {
        bits = (bits << 8) | u128::from(b);
    }
    let mut out = String::new();
    for i in 0..16 {
        if i > 0 && i % 4 == 0 {
            out.push('-');
        }
        out.push(ALPHABET[((bits >> (5 * i)) & 31) as usize] as char);
    }
    out
}

/// Checks `code` against the enabled state: a fresh TOTP code (advancing `last_step`) or an
/// unused recovery code (removing it). `false` changes nothing.
fn accept(state: &mut MfaState, secret: &[u8], code: &str, now: u64) -> ApiResult<bool> {
    let code = code.trim();
    if is_totp_code(code) {
        let Some(step) = totp(secret, "user")?.check(code, now) else { return Ok(false) };
        if step <= state.last_step {
            return Ok(false);
        }
        state.last_step = step;
        return Ok(true);
    }
    let hash = recovery_hash(code);
    // Compared without early exit: the stored hashes are secrets of their own.
    let same = |h: &[u8; 32]| h.iter().zip(hash.iter()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0;
    match state.recovery.iter().position(same) {
        Some(i) => {
            state.recovery.remove(i);
            Ok(true)
        }
        None => Ok(false),
    }
}

fn wrong_code() -> ApiError {
    ApiError::field("code", "is wrong or was already used")
}

fn load(txn: &redb::WriteTransaction, user: Uuid) -> ApiResult<MfaState> {
    let t = txn.open_table(MFA)?;
    Ok(t.get(user.as_u128())?.map(|v| decode(v.value())).transpose()?.unwrap_or_default())
}

fn store(txn: &redb::WriteTransaction, user: Uuid, state: &MfaState) -> ApiResult<()> {
    txn.open_table(MFA)?.insert(user.as_u128(), encode(state)?.as_slice())?;
    Ok(())
}

impl AccountService {
    /// Whether `user` has MFA on.
    pub fn mfa_enabled(&self, user: Uuid) -> ApiResult<bool> {
        let txn = self.db.begin_read()?;
        let t = txn.open_table(MFA)?;
        let state: Option<MfaState> = t.get(user.as_u128())?.map(|v| decode(v.value())).transpose()?;
        Ok(state.is_some_and(|s| s.secret.is_some()))
    }

    /// Starts enrolment: a new secret, kept pending until a code confirms it.
    pub async fn mfa_setup(&self, user: &User) -> ApiResult<MfaSetup> {
        let secret = crate::util::random_bytes::<20>().to_vec();
        let t = totp(&secret, &user.email)?;
        let setup = MfaSetup { secret: t.secret().to_base32(), otpauth_url: t.to_url().map_err(ApiError::internal)? };
        let id = user.id;
        self.writer
            .write(None, move |tx| {
                let mut state = load(tx.raw(), id)?;
                if state.secret.is_some() {
                    return Err(ApiError::msg(Code::CONFLICT, "MFA is already enabled; disable it first"));
                }
                state.pending = Some(secret.clone());
                store(tx.raw(), id, &state)
            })
            .await?;
        Ok(setup)
    }

    /// Confirms the pending secret with a code; answers the recovery codes (shown once).
    pub async fn mfa_enable(&self, user: Uuid, code: String) -> ApiResult<Vec<String>> {
        let codes: Vec<String> = (0..RECOVERY_CODES).map(|_| new_recovery_code()).collect();
        let hashes: Vec<[u8; 32]> = codes.iter().map(|c| recovery_hash(c)).collect();
        let now = self.clock.now_secs().max(0) as u64;
        self.writer
            .write(None, move |tx| {
                let mut state = load(tx.raw(), user)?;
                if state.secret.is_some() {
                    return Err(ApiError::msg(Code::CONFLICT, "MFA is already enabled"));
                }
                let Some(pending) = state.pending.clone() else {
                    return Err(ApiError::msg(Code::CONFLICT, "start with POST /auth/mfa/setup"));
                };
                if !is_totp_code(code.trim()) {
                    return Err(ApiError::field("code", "must be the 6-digit code of the authenticator app"));
                }
                let Some(step) = totp(&pending, "user")?.check(code.trim(), now) else { return Err(wrong_code()) };
                state = MfaState { pending: None, secret: Some(pending), last_step: step, recovery: hashes.clone() };
                store(tx.raw(), user, &state)
            })
            .await?;
        Ok(codes)
    }

    /// Turns MFA off; needs a current code or a recovery code.
    pub async fn mfa_disable(&self, user: Uuid, code: String) -> ApiResult<()> {
        let now = self.clock.now_secs().max(0) as u64;
        self.writer
            .write(None, move |tx| {
                let mut state = load(tx.raw(), user)?;
                let Some(secret) = state.secret.clone() else {
                    return Err(ApiError::msg(Code::CONFLICT, "MFA is not enabled"));
                };
                if !accept(&mut state, &secret, &code, now)? {
                    return Err(wrong_code());
                }
                tx.raw().open_table(MFA)?.remove(user.as_u128())?;
                Ok(())
            })
            .await
    }

    /// Records a challenge for a password-verified login and answers its `mfaToken`.
    pub(super) async fn mfa_challenge(&self, user: &User) -> ApiResult<String> {
        let id = self.clock.new_id();
        let now = self.clock.now_secs();
        let challenge = MfaChallenge { user_id: user.id, expires_at: (now + MFA_TOKEN_TTL_SECS) * 1000, failures: 0 };
        let now_ms = self.clock.now_ms();
        self.writer
            .write(None, move |tx| {
                let mut t = tx.raw().open_table(MFA_CHALLENGES)?;
                // Abandoned challenges are dropped here, so the table holds minutes of logins at most.
                t.retain(|_, v| decode::<MfaChallenge>(v).is_ok_and(|c| c.expires_at > now_ms))?;
                t.insert(id.as_u128(), encode(&challenge)?.as_slice())?;
                Ok(())
            })
            .await?;
        let claims = Claims {
            iss: ISSUER.into(),
            aud: AUDIENCE.into(),
            sub: user.id.to_string(),
            sid: Uuid::nil().to_string(),
            iat: now,
            nbf: None,
            exp: now + MFA_TOKEN_TTL_SECS,
            jti: id.to_string(),
            typ: "mfa".into(),
        };
        self.key.sign(&claims).map_err(ApiError::internal)
    }

    /// Completes an MFA login: the verified `mfaToken`'s claims and a TOTP or recovery code.
    /// Answers the user and the new session's tokens.
    pub async fn mfa_verify(&self, claims: Claims, code: String, device: String) -> ApiResult<(User, String, String)> {
        let invalid = || ApiError::msg(Code::INVALID_TOKEN, "the mfaToken was already used or has expired; sign in again");
        let challenge_id = Uuid::parse_str(&claims.jti).map_err(|_| invalid())?;
        let user_id = Uuid::parse_str(&claims.sub).map_err(|_| invalid())?;
        let user = self.user(user_id)?.ok_or_else(invalid)?;
        let session = new_session(user_id, device, &self.clock);
        let s = session.clone();
        let now = self.clock.now_secs().max(0) as u64;
        let now_ms = self.clock.now_ms();
        // Failures are answered inside `Ok` so that the failure count they raise is committed.
        let outcome: Result<(), ApiError> = self
            .writer
            .write(None, move |tx| {
                let txn = tx.raw();
                let mut challenges = txn.open_table(MFA_CHALLENGES)?;
                let mut c: MfaChallenge = match challenges.get(challenge_id.as_u128())? {
                    Some(v) => decode(v.value())?,
                    None => return Ok(Err(invalid())),
                };
                if c.user_id != user_id || c.expires_at <= now_ms {
                    challenges.remove(challenge_id.as_u128())?;
                    return Ok(Err(invalid()));
                }
                let mut state = load(txn, user_id)?;
                let Some(secret) = state.secret.clone() else {
                    challenges.remove(challenge_id.as_u128())?;
                    return Ok(Err(invalid()));
                };
                if !accept(&mut state, &secret, &code, now)? {
                    c.failures += 1;
                    if c.failures >= MAX_FAILURES {
                        challenges.remove(challenge_id.as_u128())?;
                    } else {
                        challenges.insert(challenge_id.as_u128(), encode(&c)?.as_slice())?;
                    }
                    return Ok(Err(ApiError::new(Code::INVALID_MFA_CODE)));
                }
                challenges.remove(challenge_id.as_u128())?;
                drop(challenges);
                store(txn, user_id, &state)?;
                put_session(txn, &s)?;
                Ok(Ok(()))
            })
            .await?;
        outcome?;
        self.note_touched(session.id, session.last_active);
        let (access, refresh) = self.issue(&session)?;
        Ok((user, access, refresh))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recovery_codes_are_distinct_and_normalized() {
        let a = new_recovery_code();
        let b = new_recovery_code();
        assert_ne!(a, b);
        assert_eq!(a.len(), 19);
        assert_eq!(recovery_hash(&a), recovery_hash(&a.to_uppercase().replace('-', " ")));
    }

    #[test]
    fn a_code_is_accepted_once() {
        let secret = [7u8; 20];
        let t = totp(&secret, "a@example.com").unwrap();
        let now = 1_800_000_000;
        let code = t.generate(now).to_string();
        let mut state = MfaState { secret: Some(secret.to_vec()), ..MfaState::default() };
        assert!(accept(&mut state, &secret, &code, now).unwrap());
        assert!(!accept(&mut state, &secret, &code, now).unwrap());
        let next = t.generate(now + 30).to_string();
        assert!(accept(&mut state, &secret, &next, now).unwrap(), "one step of skew ahead");
    }
}
