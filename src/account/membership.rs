//! A membership as stored and as shown: its one writer (the membership row and the user's
//! `user_stores` link together) and its view. Members and invitations both write memberships;
//! neither owns the other.

use redb::WriteTransaction;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::account::model::Membership;
use crate::error::ApiResult;
use crate::storage::codec::encode;
use crate::storage::tables::{MEMBERS, USER_STORES};

/// A member as `S/members` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemberView {
    pub user_id: Uuid,
    pub email: String,
    pub name: String,
    /// `owner`, `admin` or `staff`.
    pub role: String,
    /// When they were added, or invited.
    pub added_at: String,
    /// `active` for a member, `invited` for an email invited without an account (listed under
    /// the user id its account will have).
    pub status: String,
}

/// The one writer of a membership and its `user_stores` index: `None` removes both.
pub fn put_membership(txn: &WriteTransaction, store: Uuid, user: Uuid, m: Option<&Membership>) -> ApiResult<()> {
    let mut members = txn.open_table(MEMBERS)?;
    let mut links = txn.open_table(USER_STORES)?;
    match m {
        Some(m) => {
            members.insert((store.as_u128(), user.as_u128()), encode(m)?.as_slice())?;
            links.insert((user.as_u128(), store.as_u128()), ())?;
        }
        None => {
            members.remove((store.as_u128(), user.as_u128()))?;
            links.remove((user.as_u128(), store.as_u128()))?;
        }
    }
    Ok(())
}
