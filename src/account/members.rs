//! Store members and their roles in the directory.
//!
//! Every change re-reads the acting member's role inside the write transaction: a separate cell
//! process may act on a role up to two seconds old, the directory never does.
//!
//! The rules: owners and admins add members (as admin or staff) and change or remove staff; only
//! the owner changes or removes an admin, but an admin may step down or leave; the owner is
//! neither demoted nor removed — ownership moves only by transfer, which makes the old owner an
//! admin.

use redb::{ReadableDatabase, ReadableTable, WriteTransaction};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::account::links::LinkToken;
use crate::account::membership::{MemberView, put_membership};
use crate::account::model::{Membership, StoreEntry, User, normalize_email, valid_email};
use crate::account::plans::ensure_room;
use crate::account::{AccountService, invitations};
use crate::domain::role::Role;
use crate::domain::time::rfc3339;
use crate::error::{ApiError, ApiResult, Code};
use crate::storage::codec::{decode, encode};
use crate::storage::tables::{MEMBERS, STORE_DIRECTORY, USER_EMAILS, USERS};

/// `POST S/members`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AddMember {
    /// An email: a registered user is added at once; any other is invited by mail.
    #[schemars(length(max = 254), pattern(crate::domain::fields::EMAIL))]
    pub email: String,
    /// `admin` or `staff`.
    #[schemars(schema_with = "role_schema")]
    pub role: String,
}

fn role_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    crate::domain::fields::one_of(&["admin", "staff"], "ownership moves by transfer-ownership alone")
}

/// `PATCH S/members/{userId}`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ChangeRole {
    /// `admin` or `staff`.
    #[schemars(schema_with = "role_schema")]
    pub role: String,
}

/// The answer of an ownership transfer: the new owner and the previous one (now an admin).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Transferred {
    pub owner: MemberView,
    pub previous_owner: MemberView,
}

/// A role that can be given through `S/members`: the owner changes only by transfer.
pub fn assignable_role(role: &str) -> ApiResult<Role> {
    match role {
        "admin" => Ok(Role::Admin),
        "staff" => Ok(Role::Staff),
        "owner" => Err(ApiError::field("role", "ownership moves only by POST /members/{userId}/transfer-ownership")),
        _ => Err(ApiError::field("role", "must be admin or staff")),
    }
}

fn view(user: &User, m: &Membership) -> MemberView {
    MemberView {
        user_id: user.id,
        email: user.email.clone(),
        name: user.name.clone(),
        role: m.role.name().to_string(),
        added_at: rfc3339(m.added_at),
        status: "active".into(),
    }
}

fn membership(txn: &WriteTransaction, store: Uuid, user: Uuid) -> ApiResult<Option<Membership>> {
    txn.open_table(MEMBERS)?.get((store.as_u128(), user.as_u128()))?.map(|v| decode(v.value())).transpose()
}

fn user_row(txn: &WriteTransaction, user: Uuid) -> ApiResult<User> {
    let users = txn.open_table(USERS)?;
    let v = users.get(user.as_u128())?.ok_or_else(|| ApiError::internal(format!("member {user} has no user row")))?;
    decode(v.value())
}

/// The acting member's role, re-read under the writer; a store that is gone or an actor who is
/// no longer a member is a 404, exactly as the dispatcher would have answered.
fn actor_role(txn: &WriteTransaction, store: Uuid, actor: Uuid) -> ApiResult<Role> {
    if txn.open_table(STORE_DIRECTORY)?.get(store.as_u128())?.is_none() {
        return Err(ApiError::not_found());
    }
    membership(txn, store, actor)?.map(|m| m.role).ok_or_else(ApiError::not_found)
}

fn require_admin(role: Role) -> ApiResult<()> {
    if role.is_admin() { Ok(()) } else { Err(ApiError::new(Code::FORBIDDEN)) }
}

/// The member `user` of `store`, or 404.
fn target(txn: &WriteTransaction, store: Uuid, user: Uuid) -> ApiResult<Membership> {
    membership(txn, store, user)?.ok_or_else(|| ApiError::msg(Code::NOT_FOUND, "this user is not a member of the store"))
}

/// May `actor` (with `actor_role`) change or remove the member `user` who has `role`?
fn may_manage(actor: Uuid, actor_role: Role, user: Uuid, role: Role) -> ApiResult<()> {
    match role {
        Role::Owner => Err(ApiError::msg(
            Code::BUSINESS_RULE,
            "the owner cannot be demoted or removed; transfer ownership to another member first",
        )),
        Role::Admin if actor_role != Role::Owner && actor != user => {
            Err(ApiError::msg(Code::FORBIDDEN, "only the owner can change or remove another admin"))
        }
        _ => Ok(()),
    }
}

impl AccountService {
    /// Every member of a store with their user details, in the order they were added.
    pub fn members(&self, store: Uuid) -> ApiResult<Vec<MemberView>> {
        let txn = self.db.begin_read()?;
        if txn.open_table(STORE_DIRECTORY)?.get(store.as_u128())?.is_none() {
            return Err(ApiError::not_found());
        }
        let members = txn.open_table(MEMBERS)?;
        let users = txn.open_table(USERS)?;
        let mut out = Vec::new();
        for item in members.range((store.as_u128(), 0)..=(store.as_u128(), u128::MAX))? {
            let (k, v) = item?;
            let m: Membership = decode(v.value())?;
            let Some(u) = users.get(k.value().1)? else { continue };
            out.push((m.added_at, view(&decode(u.value())?, &m)));
        }
        out.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.user_id.cmp(&b.1.user_id)));
        drop((members, users, txn));
        let mut list: Vec<MemberView> = out.into_iter().map(|(_, v)| v).collect();
        // Invitations follow the members, oldest first (their `addedAt` is when they were sent).
        list.extend(self.invitations(store)?);
        Ok(list)
    }

    /// Adds a registered user to a store and tells them by mail; an email without an account is
    /// invited (or its invitation re-sent). An existing member is a 409.
    pub async fn add_member(&self, store: Uuid, actor: Uuid, body: AddMember) -> ApiResult<MemberView> {
        let role = assignable_role(&body.role)?;
        let email = normalize_email(&body.email);
        if !valid_email(&email) {
            return Err(ApiError::field("email", "must be a valid email address"));
        }
        let mail = self.member_mail();
        let (fresh, token) = (self.clock.new_id(), LinkToken::fresh());
        let added = self
            .writer
            .write(None, move |tx| {
                let txn = tx.raw();
                require_admin(actor_role(txn, store, actor)?)?;
                let user = txn.open_table(USER_EMAILS)?.get(email.as_str())?.map(|v| v.value());
                let Some(user) = user.map(Uuid::from_u128) else {
                    return invitations::invite(tx, &mail, store, actor, &email, role, fresh, &token);
                };
                if membership(txn, store, user)?.is_some() {
                    return Err(ApiError::msg(Code::CONFLICT, "this user is already a member of the store"));
                }
                // An invitation of the email from before its account was made is void now.
                invitations::withdraw_email(txn, store, &email)?;
                let m = Membership { role, added_at: mail.now };
                put_membership(txn, store, user, Some(&m))?;
                let u = user_row(txn, user)?;
                invitations::mail_added(tx, &mail, store, &u.email, role)?;
                Ok(view(&u, &m))
            })
            .await?;
        self.jobs.wake();
        Ok(added)
    }

    /// Changes a member's role to admin or staff.
    pub async fn change_role(&self, store: Uuid, actor: Uuid, user: Uuid, body: ChangeRole) -> ApiResult<MemberView> {
        let role = assignable_role(&body.role)?;
        self.writer
            .write(None, move |tx| {
                let txn = tx.raw();
                let actor_role = actor_role(txn, store, actor)?;
                require_admin(actor_role)?;
                let mut m = target(txn, store, user)?;
                may_manage(actor, actor_role, user, m.role)?;
                if m.role != role {
                    m.role = role;
                    put_membership(txn, store, user, Some(&m))?;
                }
                Ok(view(&user_row(txn, user)?, &m))
            })
            .await
    }

    /// Removes a member from a store, or withdraws an invitation.
    pub async fn remove_member(&self, store: Uuid, actor: Uuid, user: Uuid) -> ApiResult<()> {
        self.writer
            .write(None, move |tx| {
                let txn = tx.raw();
                let actor_role = actor_role(txn, store, actor)?;
                require_admin(actor_role)?;
                if membership(txn, store, user)?.is_none() && invitations::withdraw(txn, store, user)? {
                    return Ok(());
                }
                let m = target(txn, store, user)?;
                may_manage(actor, actor_role, user, m.role)?;
                put_membership(txn, store, user, None)
            })
            .await
    }

    /// Makes the member `user` the owner of `store`; the acting owner becomes an admin. The
    /// directory's owner follows, so plan limits count the store for its new owner.
    /// The new owner's plan must have room for one more store, as if they created it.
    pub async fn transfer_ownership(&self, store: Uuid, actor: Uuid, user: Uuid) -> ApiResult<Transferred> {
        let catalogue = self.plans.clone();
        let now = self.clock.now_ms();
        self.writer
            .write(None, move |tx| {
                let txn = tx.raw();
                if actor_role(txn, store, actor)? != Role::Owner {
                    return Err(ApiError::msg(Code::FORBIDDEN, "only the owner can transfer ownership"));
                }
                let mut next = target(txn, store, user)?;
                if user == actor {
                    return Err(ApiError::msg(Code::BUSINESS_RULE, "you already own this store"));
                }
                ensure_room(txn, &catalogue, user, now, "the new owner owns")?;
                let mut prev = target(txn, store, actor)?;
                next.role = Role::Owner;
                prev.role = Role::Admin;
                put_membership(txn, store, user, Some(&next))?;
                put_membership(txn, store, actor, Some(&prev))?;
                let mut dir = txn.open_table(STORE_DIRECTORY)?;
                let Some(v) = dir.get(store.as_u128())? else { return Err(ApiError::not_found()) };
                let mut e: StoreEntry = decode(v.value())?;
                drop(v);
                e.owner_id = user;
                dir.insert(store.as_u128(), encode(&e)?.as_slice())?;
                drop(dir);
                Ok(Transferred { owner: view(&user_row(txn, user)?, &next), previous_owner: view(&user_row(txn, actor)?, &prev) })
            })
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_admin_and_staff_are_assignable() {
        assert_eq!(assignable_role("admin").unwrap(), Role::Admin);
        assert_eq!(assignable_role("staff").unwrap(), Role::Staff);
        assert_eq!(assignable_role("owner").unwrap_err().fields[0].field, "role");
        assert!(assignable_role("Admin").is_err());
    }

    #[test]
    fn admins_manage_staff_and_themselves_but_not_other_admins_or_the_owner() {
        let (a, b) = (Uuid::now_v7(), Uuid::now_v7());
        assert!(may_manage(a, Role::Admin, b, Role::Staff).is_ok());
        assert!(may_manage(a, Role::Admin, a, Role::Admin).is_ok());
        assert_eq!(may_manage(a, Role::Admin, b, Role::Admin).unwrap_err().code, Code::FORBIDDEN);
        assert!(may_manage(a, Role::Owner, b, Role::Admin).is_ok());
        assert_eq!(may_manage(a, Role::Owner, b, Role::Owner).unwrap_err().code, Code::BUSINESS_RULE);
        assert_eq!(may_manage(a, Role::Owner, a, Role::Owner).unwrap_err().code, Code::BUSINESS_RULE);
    }
}
