//! Sessions: one per sign-in, listed and revoked by their user. A revoked session's refresh
//! token stops working at once; its access tokens are refused by `serve` at once (every request
//! checks [`AccountService::session_active`]) and by separate cells within their access-cache TTL.
//!
//! Each refresh rotates the refresh token, and a spent one presented again revokes the session
//! (a stolen token and its owner cannot both keep using it), with one exception: browser tabs
//! sharing a token refresh together, so within [`DEFAULT_REFRESH_GRACE`] (`--refresh-grace`) of
//! a rotation the token it spent gets the very pair it issued, and no second branch of the
//! session appears.

use redb::{ReadableDatabase, ReadableTable};
use uuid::Uuid;

use super::model::{Rotation, Session, User};
use super::{AccountService, new_session, parse_uuid, put_session};
use crate::error::{ApiError, ApiResult, Code};
use crate::http::auth::Claims;
use crate::storage::codec::{decode, encode};
use crate::storage::tables::{SESSIONS, USER_SESSIONS};

/// `lastActive` is written at most this often per session: requests only note the time in
/// memory, so using a token never waits for a disk write.
pub const TOUCH_INTERVAL_MS: i64 = 60_000;
/// Entries of the in-memory touch map before it is cleared (sessions are then written once more).
const TOUCH_MAP_MAX: usize = 100_000;

/// How long after a rotation the refresh token it spent still answers the pair it issued: long
/// enough for tabs refreshing together, short enough that a stolen token replayed later still
/// ends the session.
pub const DEFAULT_REFRESH_GRACE: std::time::Duration = std::time::Duration::from_secs(10);
/// The longest `--refresh-grace` accepted.
pub const MAX_REFRESH_GRACE: std::time::Duration = std::time::Duration::from_secs(60);

/// What presenting a refresh token led to, decided under the writer.
enum Refreshed {
    /// The session's current token: rotated now.
    Rotated(Session),
    /// The token the last rotation spent, within the grace window: that rotation's pair again.
    Again(Session, Rotation),
    /// A spent token past the window: the session is revoked.
    Reused,
}

/// What a successful password (or social) check leads to.
pub enum LoginOutcome {
    /// A new session and its tokens.
    Tokens { user: User, access: String, refresh: String },
    /// The user has MFA on: a short-lived, single-use token to complete with a code.
    Mfa { token: String },
}

impl AccountService {
    /// Finishes a sign-in whose first factor is proven: tokens, or an MFA challenge.
    pub async fn complete_login(&self, user: User, device: String) -> ApiResult<LoginOutcome> {
        if self.mfa_enabled(user.id)? {
            let token = self.mfa_challenge(&user).await?;
            return Ok(LoginOutcome::Mfa { token });
        }
        let (access, refresh) = self.start_session(user.id, device).await?;
        Ok(LoginOutcome::Tokens { user, access, refresh })
    }

    /// Creates a session for `user` and answers its (access, refresh) tokens.
    pub async fn start_session(&self, user: Uuid, device: String) -> ApiResult<(String, String)> {
        let session = new_session(user, device, &self.clock);
        let s = session.clone();
        self.writer.write(None, move |tx| put_session(tx.raw(), &s)).await?;
        self.note_touched(session.id, session.last_active);
        self.issue(&session)
    }

    /// Rotates a refresh token (see the module's note on reuse and its grace window).
    pub async fn refresh(&self, claims: Claims) -> ApiResult<(String, String)> {
        let sid = parse_uuid(&claims.sid)?;
        let jti = parse_uuid(&claims.jti)?;
        let next_jti = self.clock.new_id();
        let access_jti = self.clock.new_id();
        let now = self.clock.now_ms();
        let grace = i64::try_from(self.refresh_grace.as_millis()).unwrap_or(i64::MAX);
        let outcome = self
            .writer
            .write(None, move |tx| {
                let mut sessions = tx.raw().open_table(SESSIONS)?;
                let ended = || ApiError::msg(Code::INVALID_TOKEN, "the refresh token's session has ended; sign in again");
                let mut s: Session = match sessions.get(sid.as_u128())? {
                    Some(v) => decode(v.value())?,
                    None => return Err(ended()),
                };
                if s.revoked_at.is_some() {
                    return Err(ended());
                }
                if s.refresh_jti == jti {
                    s.refresh_jti = next_jti;
                    s.last_active = now;
                    s.rotated = Some(Rotation { spent_jti: jti, at: now, access_jti });
                    sessions.insert(sid.as_u128(), encode(&s)?.as_slice())?;
                    return Ok(Refreshed::Rotated(s));
                }
                // A clock stepped back counts as within the window: the tab is no less real.
                if let Some(r) = s.rotated.filter(|r| r.spent_jti == jti && now.saturating_sub(r.at) < grace) {
                    return Ok(Refreshed::Again(s, r));
                }
                s.revoked_at = Some(now);
                sessions.insert(sid.as_u128(), encode(&s)?.as_slice())?;
                Ok(Refreshed::Reused)
            })
            .await?;
        match outcome {
            Refreshed::Rotated(s) => {
                self.note_touched(s.id, s.last_active);
                self.sign_pair(&s, now.div_euclid(1000), access_jti)
            }
            Refreshed::Again(s, r) => self.sign_pair(&s, r.at.div_euclid(1000), r.access_jti),
            Refreshed::Reused => {
                Err(ApiError::msg(Code::INVALID_TOKEN, "this refresh token was already used; the session is revoked"))
            }
        }
    }

    /// The user's live sessions, most recently active first.
    pub fn sessions_of(&self, user: Uuid) -> ApiResult<Vec<Session>> {
        let txn = self.db.begin_read()?;
        let links = txn.open_table(USER_SESSIONS)?;
        let sessions = txn.open_table(SESSIONS)?;
        let mut out = Vec::new();
        for item in links.range((user.as_u128(), 0)..=(user.as_u128(), u128::MAX))? {
            let (k, _) = item?;
            let Some(v) = sessions.get(k.value().1)? else { continue };
            let s: Session = decode(v.value())?;
            if s.revoked_at.is_none() {
                out.push(s);
            }
        }
        out.sort_by(|a, b| b.last_active.cmp(&a.last_active).then(b.id.cmp(&a.id)));
        Ok(out)
    }

    /// Revokes one of `user`'s live sessions; another user's or an ended one is a 404.
    pub async fn revoke_session(&self, user: Uuid, sid: Uuid) -> ApiResult<()> {
        let now = self.clock.now_ms();
        self.writer
            .write(None, move |tx| {
                let mut sessions = tx.raw().open_table(SESSIONS)?;
                let mut s: Session = match sessions.get(sid.as_u128())? {
                    Some(v) => decode(v.value())?,
                    None => return Err(ApiError::not_found()),
                };
                if s.user_id != user || s.revoked_at.is_some() {
                    return Err(ApiError::not_found());
                }
                s.revoked_at = Some(now);
                sessions.insert(sid.as_u128(), encode(&s)?.as_slice())?;
                Ok(())
            })
            .await
    }

    /// Revokes every live session of `user` but `keep`; answers how many ended.
    pub async fn revoke_other_sessions(&self, user: Uuid, keep: Uuid) -> ApiResult<u64> {
        let now = self.clock.now_ms();
        self.writer.write(None, move |tx| super::passwords::end_sessions(tx.raw(), user, Some(keep), now)).await
    }

    /// Notes that a session was just used. At most once a [`TOUCH_INTERVAL_MS`] per session this
    /// queues a write of `lastActive` that nobody waits for.
    pub fn touch(&self, sid: Uuid) {
        let now = self.clock.now_ms();
        {
            let Ok(mut touched) = self.touched.lock() else { return };
            if touched.get(&sid).is_some_and(|&at| now - at < TOUCH_INTERVAL_MS) {
                return;
            }
            if touched.len() >= TOUCH_MAP_MAX {
                touched.clear();
            }
            touched.insert(sid, now);
        }
        let Ok(rt) = tokio::runtime::Handle::try_current() else { return };
        let writer = self.writer.clone();
        rt.spawn(async move {
            let written = writer
                .write(None, move |tx| {
                    let mut sessions = tx.raw().open_table(SESSIONS)?;
                    let Some(v) = sessions.get(sid.as_u128())? else { return Ok(()) };
                    let mut s: Session = decode(v.value())?;
                    drop(v);
                    if s.revoked_at.is_none() && s.last_active < now {
                        s.last_active = now;
                        sessions.insert(sid.as_u128(), encode(&s)?.as_slice())?;
                    }
                    Ok(())
                })
                .await;
            if let Err(e) = written {
                tracing::debug!(error = %e, "lastActive not recorded");
            }
        });
    }

    /// Records that `sid`'s `lastActive` was just written by someone else (login, refresh).
    pub(super) fn note_touched(&self, sid: Uuid, at: i64) {
        if let Ok(mut touched) = self.touched.lock() {
            if touched.len() >= TOUCH_MAP_MAX {
                touched.clear();
            }
            touched.insert(sid, at);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::account::model::Register;

    #[tokio::test]
    async fn use_writes_last_active_at_most_once_per_interval() {
        let dir = tempfile::tempdir().unwrap();
        let a = AccountService::open(
            dir.path(),
            crate::clock::Clock::system(),
            &crate::memory::Shares::of_one_cell(256 << 20).account,
        )
        .unwrap();
        let r = Register { email: "touch@example.com".into(), password: "correct horse battery".into(), name: "T".into() };
        let (user, _, _) = a.register(r, "test".into()).await.unwrap();
        let last = |a: &AccountService| a.sessions_of(user.id).unwrap()[0].last_active;
        let sid = a.sessions_of(user.id).unwrap()[0].id;
        let created = last(&a);
        // Just written by the sign-in itself: use within the interval writes nothing.
        a.touch(sid);
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(last(&a), created);
        // Once the interval has passed, the next use writes, without the caller waiting.
        a.clock.advance(Duration::from_millis(TOUCH_INTERVAL_MS as u64 + 1));
        a.touch(sid);
        for _ in 0..100 {
            if last(&a) > created {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(last(&a) > created);
        // And not again right after.
        let written = last(&a);
        a.touch(sid);
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(last(&a), written);
        a.close();
    }
}
