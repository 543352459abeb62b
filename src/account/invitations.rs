//! Invitations: a store's owner or admin adds an email that has no account yet. The invitation
//! is listed among the members (`status: "invited"`) under the user id the account will have,
//! and mailed with a one-use link (7 days). Accepting it creates that account with the invited
//! email, makes it a member with the invited role (of every store that invited the email) and
//! signs it in. Inviting the email again re-sends: a new token, the old one void, still one
//! invitation.

use redb::{ReadableDatabase, ReadableTable, WriteTransaction};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::links::{LinkToken, digest_of, invalid_token, letter, link};
use super::membership::{MemberView, put_membership};
use super::model::{Membership, Register, StoreEntry, User, validate_register};
use super::{AccountService, hash_password, new_session, put_session};
use crate::account::jobs::DIRECTORY;
use crate::domain::role::Role;
use crate::domain::time::rfc3339;
use crate::error::{ApiError, ApiResult};
use crate::mail::Template;
use crate::storage::codec::{decode, encode};
use crate::storage::tables::{EMAIL_INVITATIONS, INVITATION_TOKENS, INVITATIONS, STORE_DIRECTORY, USERS};
use crate::storage::tx::Tx;

/// An invitation link is valid for seven days.
pub const INVITATION_TTL_MS: i64 = 7 * 24 * 3_600_000;
/// The page of the admin app an invitation link opens.
pub const ACCEPT_PAGE: &str = "/admin/accept-invite";

/// An invitation of an email without an account (stored under `(store, future user id)`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Invitation {
    /// Lower-cased.
    pub email: String,
    pub role: Role,
    pub invited_by: Uuid,
    pub invited_at: i64,
    pub expires_at: i64,
    /// SHA-256 of the live token (a re-send replaces it).
    pub token: [u8; 32],
}

impl Invitation {
    /// The invitation as `S/members` lists it, under its future user id.
    pub fn view(&self, user: Uuid) -> MemberView {
        MemberView {
            user_id: user,
            email: self.email.clone(),
            name: String::new(),
            role: self.role.name().to_string(),
            added_at: rfc3339(self.invited_at),
            status: "invited".into(),
        }
    }
}

/// `POST /auth/invites/accept`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AcceptInvite {
    /// The `token` of the mailed link's fragment.
    pub token: String,
    pub name: String,
    /// The password rules of registration apply.
    pub password: String,
}

/// What a write closure needs to mail a member (it must own what it uses).
pub(super) struct Mail {
    pub public_url: String,
    pub id: Uuid,
    pub now: i64,
}

fn store_name(txn: &WriteTransaction, store: Uuid) -> ApiResult<String> {
    let dir = txn.open_table(STORE_DIRECTORY)?;
    let v = dir.get(store.as_u128())?.ok_or_else(ApiError::not_found)?;
    Ok(decode::<StoreEntry>(v.value())?.name)
}

fn user_name(txn: &WriteTransaction, user: Uuid) -> ApiResult<String> {
    let users = txn.open_table(USERS)?;
    let v = users.get(user.as_u128())?.ok_or_else(ApiError::not_found)?;
    Ok(decode::<User>(v.value())?.name)
}

/// The invitation of `store` to `user`, if any.
pub(super) fn invitation(txn: &WriteTransaction, store: Uuid, user: Uuid) -> ApiResult<Option<Invitation>> {
    txn.open_table(INVITATIONS)?.get((store.as_u128(), user.as_u128()))?.map(|v| decode(v.value())).transpose()
}

/// Removes the invitation of `store` to `user` with its token and email rows.
pub(super) fn withdraw(txn: &WriteTransaction, store: Uuid, user: Uuid) -> ApiResult<bool> {
    let Some(inv) = invitation(txn, store, user)? else { return Ok(false) };
    txn.open_table(INVITATIONS)?.remove((store.as_u128(), user.as_u128()))?;
    txn.open_table(INVITATION_TOKENS)?.remove(inv.token.as_slice())?;
    txn.open_table(EMAIL_INVITATIONS)?.remove((inv.email.as_str(), store.as_u128()))?;
    Ok(true)
}

/// Withdraws every invitation of `store` (a closed store forgotten for good).
pub(super) fn withdraw_store(txn: &WriteTransaction, store: Uuid) -> ApiResult<()> {
    let users: Vec<u128> = {
        let t = txn.open_table(INVITATIONS)?;
        let range = t.range((store.as_u128(), 0)..=(store.as_u128(), u128::MAX))?;
        range.map(|item| item.map(|(k, _)| k.value().1)).collect::<Result<_, _>>()?
    };
    for user in users {
        withdraw(txn, store, Uuid::from_u128(user))?;
    }
    Ok(())
}

/// Withdraws `email`'s invitation to `store`, if any (the email now has an account of its own).
pub(super) fn withdraw_email(txn: &WriteTransaction, store: Uuid, email: &str) -> ApiResult<()> {
    let found = txn.open_table(EMAIL_INVITATIONS)?.get((email, store.as_u128()))?.map(|v| v.value());
    if let Some(user) = found {
        withdraw(txn, store, Uuid::from_u128(user))?;
    }
    Ok(())
}

/// Invites `email` (no account) to `store` as `role`, or re-sends its invitation: a new token,
/// the old one void. Every invitation of one email shares one future user id (`fresh` for the
/// first). Mails the link.
#[allow(clippy::too_many_arguments)] // one write's inputs, all owned by the closure
pub(super) fn invite(
    tx: &mut Tx,
    mail: &Mail,
    store: Uuid,
    actor: Uuid,
    email: &str,
    role: Role,
    fresh: Uuid,
    token: &LinkToken,
) -> ApiResult<MemberView> {
    let txn = tx.raw();
    let user = {
        let emails = txn.open_table(EMAIL_INVITATIONS)?;
        let mut any = emails.range((email, 0u128)..=(email, u128::MAX))?;
        match any.next() {
            Some(item) => Uuid::from_u128(item?.1.value()),
            None => fresh,
        }
    };
    withdraw(txn, store, user)?;
    let inv = Invitation {
        email: email.to_string(),
        role,
        invited_by: actor,
        invited_at: mail.now,
        expires_at: mail.now + INVITATION_TTL_MS,
        token: token.digest,
    };
    txn.open_table(INVITATIONS)?.insert((store.as_u128(), user.as_u128()), encode(&inv)?.as_slice())?;
    txn.open_table(INVITATION_TOKENS)?.insert(token.digest.as_slice(), (store.as_u128(), user.as_u128()))?;
    txn.open_table(EMAIL_INVITATIONS)?.insert((email, store.as_u128()), user.as_u128())?;
    let values = serde_json::json!({
        "store_name": store_name(txn, store)?,
        "inviter_name": user_name(txn, actor)?,
        "role": role.name(),
        "accept_url": link(&mail.public_url, ACCEPT_PAGE, &token.text),
    });
    crate::mail::job::send(tx, DIRECTORY, mail.id, letter(email, Template::Invitation, values), mail.now)?;
    Ok(inv.view(user))
}

/// Tells an existing user they were added to `store` as `role`.
pub(super) fn mail_added(tx: &mut Tx, mail: &Mail, store: Uuid, to: &str, role: Role) -> ApiResult<()> {
    let values = serde_json::json!({
        "store_name": store_name(tx.raw(), store)?,
        "role": role.name(),
        "admin_url": format!("{}/admin/stores/{store}", mail.public_url),
    });
    crate::mail::job::send(tx, DIRECTORY, mail.id, letter(to, Template::MemberAdded, values), mail.now)
}

impl AccountService {
    /// The parts of a member mail written in the next write.
    pub(super) fn member_mail(&self) -> Mail {
        Mail { public_url: self.public_url().to_string(), id: self.clock.new_id(), now: self.clock.now_ms() }
    }

    /// A store's live invitations (expired ones are not listed), as members.
    pub fn invitations(&self, store: Uuid) -> ApiResult<Vec<MemberView>> {
        let now = self.clock.now_ms();
        let txn = self.db.begin_read()?;
        let t = txn.open_table(INVITATIONS)?;
        let mut out = Vec::new();
        for item in t.range((store.as_u128(), 0)..=(store.as_u128(), u128::MAX))? {
            let (k, v) = item?;
            let inv: Invitation = decode(v.value())?;
            if inv.expires_at > now {
                out.push(inv.view(Uuid::from_u128(k.value().1)));
            }
        }
        Ok(out)
    }

    /// Accepts an invitation: creates the account (the invited email, the invitation's user id),
    /// makes it a member of every store whose live invitation of that email it holds, and signs
    /// it in. A spent, expired, unknown or altered token is a 400 naming `token`.
    pub async fn accept_invite(&self, body: AcceptInvite, device: String) -> ApiResult<(User, String, String)> {
        let digest = digest_of(&body.token)?;
        let now = self.clock.now_ms();
        let (store, user) = {
            let txn = self.db.begin_read()?;
            let key = txn.open_table(INVITATION_TOKENS)?.get(digest.as_slice())?.map(|v| v.value());
            key.ok_or_else(invalid_token)?
        };
        let inv: Invitation = {
            let txn = self.db.begin_read()?;
            let t = txn.open_table(INVITATIONS)?;
            let v = t.get((store, user))?.ok_or_else(invalid_token)?;
            decode(v.value())?
        };
        if inv.expires_at <= now {
            return Err(invalid_token());
        }
        let r = Register { email: inv.email.clone(), password: body.password, name: body.name };
        validate_register(&r)?;
        let password = r.password.clone();
        let hash = tokio::task::spawn_blocking(move || hash_password(&password))
            .await
            .map_err(ApiError::internal)?
            .map_err(ApiError::internal)?;
        let u = User {
            id: Uuid::from_u128(user),
            email: inv.email.clone(),
            name: r.name.trim().to_string(),
            password_hash: hash,
            created_at: now,
            updated_at: now,
        };
        let session = new_session(u.id, device, &self.clock);
        let (nu, s) = (u.clone(), session.clone());
        self.writer
            .write(None, move |tx| {
                let txn = tx.raw();
                // Checked again under the writer: the token may have been spent or re-sent since.
                let found = txn.open_table(INVITATION_TOKENS)?.get(digest.as_slice())?.map(|v| v.value());
                if found != Some((store, user)) {
                    return Err(invalid_token());
                }
                super::put_new_user(txn, &nu)?;
                let stores: Vec<u128> = {
                    let t = txn.open_table(EMAIL_INVITATIONS)?;
                    let range = t.range((nu.email.as_str(), 0u128)..=(nu.email.as_str(), u128::MAX))?;
                    range.map(|item| item.map(|(k, _)| k.value().1)).collect::<Result<_, _>>()?
                };
                let mut joined = false;
                for s in stores {
                    let s = Uuid::from_u128(s);
                    let Some(inv) = invitation(txn, s, nu.id)? else { continue };
                    withdraw(txn, s, nu.id)?;
                    let open = txn.open_table(STORE_DIRECTORY)?.get(s.as_u128())?.is_some();
                    if inv.expires_at > now && open {
                        put_membership(txn, s, nu.id, Some(&Membership { role: inv.role, added_at: now }))?;
                        joined |= s.as_u128() == store;
                    }
                }
                if !joined {
                    // The store was closed since: nothing to accept.
                    return Err(invalid_token());
                }
                put_session(txn, &s)?;
                Ok(())
            })
            .await?;
        self.note_touched(session.id, session.last_active);
        let (access, refresh) = self.issue(&session)?;
        Ok((u, access, refresh))
    }
}
