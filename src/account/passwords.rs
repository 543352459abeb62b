//! Passwords: changed by their signed-in owner, forgotten (a mailed one-use link, 1 h) and reset
//! with that link, or reset by the operator (`shopcell admin reset-password`).
//!
//! A change ends every other session of the user; a reset ends all of them (whoever knew the old
//! password is out). Either is followed by a notice mail, written with the change in one
//! transaction. MFA is left as it is: a reset proves the mailbox, not the second factor.

use redb::{ReadableDatabase, ReadableTable, WriteTransaction};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::links::{LinkToken, digest_of, invalid_token, letter, link, mail_time};
use super::model::{Session, User, check_password, normalize_email};
use super::{AccountService, hash_password, verify_password};
use crate::account::jobs::DIRECTORY;
use crate::error::{ApiError, ApiResult, Check};
use crate::mail::Template;
use crate::storage::codec::{decode, encode};
use crate::storage::tables::{PASSWORD_RESETS, SESSIONS, USER_EMAILS, USER_PASSWORD_RESETS, USER_SESSIONS, USERS};
use crate::storage::tx::Tx;

/// A reset link is valid for one hour.
pub const RESET_TTL_MS: i64 = 3_600_000;
/// The page of the admin app a reset link opens.
pub const RESET_PAGE: &str = "/admin/reset-password";
/// The page where a user asks for a reset link (the change notice points there).
pub const FORGOT_PAGE: &str = "/admin/forgot-password";

/// A live reset token (stored under its SHA-256).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PasswordReset {
    pub user_id: Uuid,
    pub created_at: i64,
    pub expires_at: i64,
}

/// `POST /auth/password`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ChangePassword {
    pub current_password: String,
    /// The password rules of registration apply.
    pub new_password: String,
}

/// `POST /auth/password/forgot`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ForgotPassword {
    pub email: String,
}

/// `POST /auth/password/reset`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResetPassword {
    /// The `token` of the mailed link's fragment.
    pub token: String,
    /// The new password (the rules of registration).
    pub password: String,
}

/// The answer of `POST /auth/password/forgot`: the same whether the email is known or not.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct ForgotAccepted {
    pub message: String,
}

impl Default for ForgotAccepted {
    fn default() -> Self {
        ForgotAccepted { message: "if an account uses this email, a link to reset its password is on its way".into() }
    }
}

/// What the operator's reset did.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdminReset {
    pub user_id: Uuid,
    /// Sessions ended.
    pub sessions_ended: u64,
    /// The one-use reset link, when no password was given.
    pub reset_url: Option<String>,
}

/// Revokes every live session of `user` but `keep`; answers how many ended.
pub(super) fn end_sessions(txn: &WriteTransaction, user: Uuid, keep: Option<Uuid>, now: i64) -> ApiResult<u64> {
    let links = txn.open_table(USER_SESSIONS)?;
    let mut sessions = txn.open_table(SESSIONS)?;
    let mut ended = 0;
    for item in links.range((user.as_u128(), 0)..=(user.as_u128(), u128::MAX))? {
        let sid = item?.0.value().1;
        if keep.is_some_and(|k| k.as_u128() == sid) {
            continue;
        }
        let Some(v) = sessions.get(sid)? else { continue };
        let mut s: Session = decode(v.value())?;
        drop(v);
        if s.revoked_at.is_none() {
            s.revoked_at = Some(now);
            sessions.insert(sid, encode(&s)?.as_slice())?;
            ended += 1;
        }
    }
    Ok(ended)
}

/// Removes `user`'s live reset token, if any (a new one, a reset or a change voids it).
fn void_reset(txn: &WriteTransaction, user: Uuid) -> ApiResult<()> {
    let old = txn.open_table(USER_PASSWORD_RESETS)?.remove(user.as_u128())?.map(|v| v.value().to_vec());
    if let Some(digest) = old {
        txn.open_table(PASSWORD_RESETS)?.remove(digest.as_slice())?;
    }
    Ok(())
}

/// Stores a new reset token for `user` (voiding the older one).
fn put_reset(txn: &WriteTransaction, user: Uuid, digest: &[u8; 32], now: i64) -> ApiResult<()> {
    void_reset(txn, user)?;
    let r = PasswordReset { user_id: user, created_at: now, expires_at: now + RESET_TTL_MS };
    txn.open_table(PASSWORD_RESETS)?.insert(digest.as_slice(), encode(&r)?.as_slice())?;
    txn.open_table(USER_PASSWORD_RESETS)?.insert(user.as_u128(), digest.as_slice())?;
    Ok(())
}

fn load_user(txn: &WriteTransaction, user: Uuid) -> ApiResult<User> {
    let users = txn.open_table(USERS)?;
    let v = users.get(user.as_u128())?.ok_or_else(ApiError::not_found)?;
    decode(v.value())
}

/// Writes `hash` as `user`'s password (read again under the writer).
fn set_hash(txn: &WriteTransaction, user: Uuid, hash: &str, now: i64) -> ApiResult<User> {
    let mut u = load_user(txn, user)?;
    u.password_hash = hash.to_string();
    u.updated_at = now;
    txn.open_table(USERS)?.insert(user.as_u128(), encode(&u)?.as_slice())?;
    Ok(u)
}

fn optional_name(u: &User) -> serde_json::Value {
    if u.name.is_empty() { serde_json::Value::Null } else { u.name.clone().into() }
}

impl AccountService {
    /// The base of links in mail (`--public-url`).
    pub fn public_url(&self) -> &str {
        self.public_url.get().map(String::as_str).unwrap_or("http://127.0.0.1:8080")
    }

    /// Sets the base of links in mail unless `--public-url` already did (the URL the process
    /// prints once it listens).
    pub fn default_public_url(&self, url: &str) {
        let _ = self.public_url.set(url.trim_end_matches('/').to_string());
    }

    /// Hashes `password` off the async workers.
    async fn hash(&self, password: String) -> ApiResult<String> {
        tokio::task::spawn_blocking(move || hash_password(&password))
            .await
            .map_err(ApiError::internal)?
            .map_err(ApiError::internal)
    }

    /// Changes the signed-in user's password: the current one must match (a 400 naming
    /// `currentPassword` otherwise); every session but `session` ends; a notice is mailed.
    pub async fn change_password(&self, user: Uuid, session: Uuid, body: ChangePassword) -> ApiResult<()> {
        let u = self.user(user)?.ok_or_else(ApiError::not_found)?;
        let mut c = Check::new();
        check_password(&mut c, "newPassword", &body.new_password, &u.email);
        c.finish()?;
        // An account without a password (social sign-in) is checked against the dummy hash, so
        // it fails as slowly as a wrong password.
        let hash = if u.password_hash.is_empty() { self.dummy_hash.clone() } else { u.password_hash.clone() };
        let current = body.current_password;
        let ok = tokio::task::spawn_blocking(move || verify_password(&current, &hash)).await.map_err(ApiError::internal)?;
        if !ok || u.password_hash.is_empty() {
            return Err(ApiError::field("currentPassword", "is not the account's password"));
        }
        let hash = self.hash(body.new_password).await?;
        let (now, id) = (self.clock.now_ms(), self.clock.new_id());
        let this = self.mail_parts();
        self.writer
            .write(None, move |tx| {
                let u = set_hash(tx.raw(), user, &hash, now)?;
                void_reset(tx.raw(), user)?;
                end_sessions(tx.raw(), user, Some(session), now)?;
                this.changed(tx, &u, id, now)
            })
            .await?;
        self.jobs.wake();
        Ok(())
    }

    /// Mails a one-use reset link when `email` belongs to an account, and does the same work
    /// (a token, its digest, one write) when it does not, so the answer tells nothing.
    pub async fn forgot_password(&self, email: &str) -> ApiResult<()> {
        let email = normalize_email(email);
        let token = LinkToken::fresh();
        let url = link(self.public_url(), RESET_PAGE, &token.text);
        let (now, id) = (self.clock.now_ms(), self.clock.new_id());
        let sent = self
            .writer
            .write(None, move |tx| {
                let user = tx.raw().open_table(USER_EMAILS)?.get(email.as_str())?.map(|v| Uuid::from_u128(v.value()));
                let Some(user) = user else { return Ok(false) };
                let u = load_user(tx.raw(), user)?;
                put_reset(tx.raw(), user, &token.digest, now)?;
                let values = serde_json::json!({ "reset_url": url, "name": optional_name(&u) });
                crate::mail::job::send(tx, DIRECTORY, id, letter(&u.email, Template::PasswordReset, values), now)?;
                Ok(true)
            })
            .await?;
        if sent {
            self.jobs.wake();
        }
        Ok(())
    }

    /// Sets a new password with a mailed token: the token is spent, every session ends, a notice
    /// is mailed. Unknown, altered, spent or expired tokens are one 400 naming `token`.
    pub async fn reset_password(&self, body: ResetPassword) -> ApiResult<()> {
        let digest = digest_of(&body.token)?;
        let now = self.clock.now_ms();
        let reset: PasswordReset = {
            let txn = self.db.begin_read()?;
            let t = txn.open_table(PASSWORD_RESETS)?;
            let v = t.get(digest.as_slice())?.ok_or_else(invalid_token)?;
            decode(v.value())?
        };
        if reset.expires_at <= now {
            return Err(invalid_token());
        }
        let u = self.user(reset.user_id)?.ok_or_else(invalid_token)?;
        let mut c = Check::new();
        check_password(&mut c, "password", &body.password, &u.email);
        c.finish()?;
        let hash = self.hash(body.password).await?;
        let (now, id) = (self.clock.now_ms(), self.clock.new_id());
        let this = self.mail_parts();
        self.writer
            .write(None, move |tx| {
                // Checked again under the writer: two resets with one token, one wins.
                let found: Option<PasswordReset> =
                    tx.raw().open_table(PASSWORD_RESETS)?.get(digest.as_slice())?.map(|v| decode(v.value())).transpose()?;
                let Some(r) = found.filter(|r| r.expires_at > now) else { return Err(invalid_token()) };
                let u = set_hash(tx.raw(), r.user_id, &hash, now)?;
                void_reset(tx.raw(), r.user_id)?;
                end_sessions(tx.raw(), r.user_id, None, now)?;
                this.changed(tx, &u, id, now)
            })
            .await?;
        self.jobs.wake();
        Ok(())
    }

    /// The operator's reset of `email`'s account: every session ends; with `password` it is set
    /// (the rules of registration), otherwise a one-use reset link is made and answered (no mail:
    /// the operator hands it over).
    pub async fn admin_reset_password(&self, email: &str, password: Option<String>) -> ApiResult<AdminReset> {
        let email = normalize_email(email);
        let user = self.user_by_email(&email)?.ok_or_else(|| ApiError::field("email", "no account uses this email"))?;
        let hash = match password {
            Some(p) => {
                let mut c = Check::new();
                check_password(&mut c, "password", &p, &user.email);
                c.finish()?;
                Some(self.hash(p).await?)
            }
            None => None,
        };
        let token = LinkToken::fresh();
        let reset_url = hash.is_none().then(|| link(self.public_url(), RESET_PAGE, &token.text));
        let now = self.clock.now_ms();
        let id = user.id;
        let sessions_ended = self
            .writer
            .write(None, move |tx| {
                match &hash {
                    Some(h) => {
                        set_hash(tx.raw(), id, h, now)?;
                        void_reset(tx.raw(), id)?;
                    }
                    None => put_reset(tx.raw(), id, &token.digest, now)?,
                }
                end_sessions(tx.raw(), id, None, now)
            })
            .await?;
        Ok(AdminReset { user_id: id, sessions_ended, reset_url })
    }

    /// What a write closure needs to mail a change notice (it must own what it uses).
    fn mail_parts(&self) -> MailParts {
        MailParts { public_url: self.public_url().to_string() }
    }
}

/// The base of links, owned by a write closure.
struct MailParts {
    public_url: String,
}

impl MailParts {
    /// Writes the "your password was changed" notice to `u` in the write under way.
    fn changed(&self, tx: &mut Tx, u: &User, id: Uuid, now: i64) -> ApiResult<()> {
        let values = serde_json::json!({
            "changed_at": mail_time(now),
            "reset_url": format!("{}{FORGOT_PAGE}", self.public_url),
            "name": optional_name(u),
        });
        crate::mail::job::send(tx, DIRECTORY, id, letter(&u.email, Template::PasswordChanged, values), now)
    }
}
