//! Records of the account directory and the rules on credentials.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::domain::role::Role;
use crate::domain::time::rfc3339;
use crate::error::{ApiResult, Check};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct User {
    pub id: Uuid,
    pub email: String,
    pub name: String,
    /// argon2id PHC string.
    pub password_hash: String,
    pub created_at: i64,
    pub updated_at: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Session {
    pub id: Uuid,
    pub user_id: Uuid,
    pub device: String,
    pub created_at: i64,
    pub last_active: i64,
    /// The `jti` of the one refresh token that may be used next (rotation).
    pub refresh_jti: Uuid,
    pub revoked_at: Option<i64>,
    /// The last rotation, so a second refresh of the token it spent (another tab) within the
    /// grace window gets the pair that rotation issued (format 9).
    pub rotated: Option<Rotation>,
}

/// What a refresh issued, kept to issue it again: a token's bytes follow from its claims and
/// the key alone (RS256 signatures are deterministic), so the claims that vary between pairs are
/// kept instead of the tokens, and nothing secret is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rotation {
    /// The `jti` of the refresh token that rotation spent.
    pub spent_jti: Uuid,
    /// When it happened (Unix ms): the grace window runs from here, and the pair's `iat` is its
    /// second.
    pub at: i64,
    /// The `jti` of the access token it issued (the refresh token's is the session's
    /// `refresh_jti` until the next rotation).
    pub access_jti: Uuid,
}

/// A store in the directory: where it lives and who owns it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StoreEntry {
    pub id: Uuid,
    pub name: String,
    pub owner_id: Uuid,
    pub cell: String,
    pub created_at: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Membership {
    pub role: Role,
    pub added_at: i64,
}

/// `POST /auth/register`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Register {
    pub email: String,
    pub password: String,
    pub name: String,
}

/// `POST /auth/login`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Login {
    pub email: String,
    pub password: String,
}

/// `POST /auth/refresh`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Refresh {
    pub refresh_token: Option<String>,
}

pub const PASSWORD_MIN: usize = 10;
pub const PASSWORD_MAX: usize = 256;

/// Normalizes an email for lookups: trimmed, lower-case.
pub fn normalize_email(email: &str) -> String {
    email.trim().to_lowercase()
}

/// Whether an email looks deliverable: one `@`, a dotted domain, no spaces.
pub fn valid_email(email: &str) -> bool {
    let Some((local, domain)) = email.split_once('@') else { return false };
    !local.is_empty()
        && local.len() <= 64
        && domain.len() <= 253
        && domain.contains('.')
        && !domain.starts_with('.')
        && !domain.ends_with('.')
        && !email.chars().any(|c| c.is_whitespace() || c.is_control())
        && !domain.contains('@')
}

/// The registration rules: a plausible email, a name, and a password of 10 to 256 characters
/// that is not the email.
pub fn validate_register(r: &Register) -> ApiResult<()> {
    let mut c = Check::new();
    let email = normalize_email(&r.email);
    c.ensure(valid_email(&email), "email", "must be a valid email address");
    crate::domain::fields::check_line(&mut c, "name", &r.name, 100, true);
    check_password(&mut c, "password", &r.password, &email);
    c.finish()
}

/// The password rules, for every way a password is chosen (register, change, reset, invitation):
/// 10 to 256 characters, not the account's email. Failures name `field`.
pub fn check_password(c: &mut Check, field: &str, password: &str, email: &str) {
    let len = password.chars().count();
    c.ensure(len >= PASSWORD_MIN, field, format!("must be at least {PASSWORD_MIN} characters"));
    c.ensure(len <= PASSWORD_MAX, field, format!("must be at most {PASSWORD_MAX} characters"));
    c.ensure(!password.trim().eq_ignore_ascii_case(email), field, "must not be the email address");
}

/// The user as the API shows it (spec: `{id, email, name}`).
#[derive(Serialize, JsonSchema)]
pub struct UserView {
    pub id: Uuid,
    pub email: String,
    pub name: String,
}

impl User {
    pub fn view(&self) -> UserView {
        UserView { id: self.id, email: self.email.clone(), name: self.name.clone() }
    }
}

/// The spec's login result.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LoginResult {
    pub user: UserView,
    pub access_token: String,
    pub refresh_token: String,
    /// Seconds the access token lives.
    pub expires_in: i64,
}

/// A session as `GET /auth/sessions` shows it.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionView {
    pub id: Uuid,
    /// The User-Agent it signed in from, shortened.
    pub device: String,
    pub last_active: String,
    pub created_at: String,
    /// Whether it is the session of the calling token.
    pub current: bool,
}

impl Session {
    pub fn view(&self, current: Uuid) -> SessionView {
        SessionView {
            id: self.id,
            device: self.device.clone(),
            last_active: rfc3339(self.last_active),
            created_at: rfc3339(self.created_at),
            current: self.id == current,
        }
    }
}
