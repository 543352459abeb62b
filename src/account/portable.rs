//! The directory's part of a portable store: what an export takes from it (members by email and
//! role, publishable keys by digest; never a credential, which lives only here), and the one
//! write that records an imported store.

use redb::{ReadableDatabase, ReadableTable};
use uuid::Uuid;

use crate::account::membership::put_membership;
use crate::account::model::{Membership, StoreEntry, normalize_email};
use crate::account::publishable::{Environment, PublishableKey, digest_hex, parse_digest_hex, put_imported_keys};
use crate::account::{AccountService, count_in_cell, plans};
use crate::domain::role::Role;
use crate::error::{ApiError, ApiResult, Code};
use crate::portable::{Header, KeyRef, MemberRef};
use crate::storage::tables::{CLOSED_STORES, PUBLISHABLE_KEYS, STORE_DIRECTORY};

/// The directory's references of a store: its owner's email, its members, its keys.
pub struct Refs {
    pub owner_email: String,
    pub members: Vec<MemberRef>,
    pub keys: Vec<KeyRef>,
}

/// Who an import makes owner and members, resolved against this directory's accounts.
pub struct Mapping {
    pub owner: Uuid,
    pub owner_email: String,
    /// Members with an account here (the owner first), with their role here.
    pub joined: Vec<(Uuid, MemberRef)>,
    pub not_found: Vec<MemberRef>,
}

impl AccountService {
    /// The references an export of `store` carries; 404 for a store not in the directory (a
    /// closed one included).
    pub fn export_refs(&self, store: Uuid) -> ApiResult<Refs> {
        let entry = self.store_entry(store)?.ok_or_else(ApiError::not_found)?;
        let owner = self.user(entry.owner_id)?.ok_or_else(|| ApiError::internal("a store's owner has no account"))?;
        let members = self
            .members(store)?
            .into_iter()
            .filter(|m| m.status == "active")
            .map(|m| MemberRef { email: m.email, role: m.role })
            .collect();
        let keys = self
            .publishable_key_digests(store)?
            .into_iter()
            .map(|(digest, k)| KeyRef {
                digest: digest_hex(&digest),
                id: k.id,
                environment: k.environment.name().into(),
                last4: k.last4,
                created_at_ms: k.created_at,
                revoked_at_ms: k.revoked_at,
            })
            .collect();
        Ok(Refs { owner_email: owner.email, members, keys })
    }

    /// Everything an import is refused for, checked before anything is written: the store id
    /// taken here (409 naming it), no account with the owner's email (422 naming it), no room
    /// in the owner's plan (its 422), a key already admitting to another store (409). Answers
    /// who owns and who joins.
    pub fn check_import(&self, header: &Header, owner: Option<&str>) -> ApiResult<Mapping> {
        let store = header.store_id;
        {
            let txn = self.db.begin_read()?;
            if txn.open_table(STORE_DIRECTORY)?.get(store.as_u128())?.is_some() {
                return Err(ApiError::msg(Code::CONFLICT, format!("store {store} already exists here")));
            }
            if txn.open_table(CLOSED_STORES)?.get(store.as_u128())?.is_some() {
                return Err(ApiError::msg(
                    Code::CONFLICT,
                    format!("store {store} exists here, closed: reopen it (admin reopen-store) or wait until it is forgotten"),
                ));
            }
        }
        let owner_email = normalize_email(owner.unwrap_or(&header.owner_email));
        let owner_user = self.user_by_email(&owner_email)?.ok_or_else(|| {
            ApiError::field(
                "owner",
                format!("no account here has the email {owner_email}: create it first (admin create-user) or name another owner"),
            )
            .with_code(Code::BUSINESS_RULE)
        })?;
        self.ensure_store_allowed(owner_user.id)?;
        {
            let txn = self.db.begin_read()?;
            let known = txn.open_table(PUBLISHABLE_KEYS)?;
            for k in &header.publishable_keys {
                if known.get(digest_of(k)?.as_slice())?.is_some() {
                    return Err(ApiError::msg(Code::CONFLICT, format!("publishable key …{} is already in use here", k.last4)));
                }
            }
        }
        let mut joined = vec![(owner_user.id, MemberRef { email: owner_email.clone(), role: "owner".into() })];
        let mut not_found = Vec::new();
        for m in &header.members {
            let email = normalize_email(&m.email);
            if email == owner_email {
                continue;
            }
            // The owner there is an admin here when another account owns the store.
            let role = if m.role == "owner" { "admin".to_string() } else { m.role.clone() };
            if Role::parse(&role).is_none() {
                return Err(ApiError::field("header.members", format!("unknown role {:?}", m.role)));
            }
            match self.user_by_email(&email)? {
                Some(u) => joined.push((u.id, MemberRef { email, role })),
                None => not_found.push(MemberRef { email, role }),
            }
        }
        Ok(Mapping { owner: owner_user.id, owner_email, joined, not_found })
    }

    /// Records an imported store in one write: its entry in `cell`, its members, its keys. The
    /// checks of [`AccountService::check_import`] run again under the writer.
    pub async fn record_import(&self, header: &Header, cell: String, mapping: &Mapping) -> ApiResult<()> {
        let now = self.clock.now_ms();
        let store = header.store_id;
        let entry = StoreEntry { id: store, name: header.store_name.clone(), owner_id: mapping.owner, cell, created_at: now };
        let members: Vec<(Uuid, Role)> =
            mapping.joined.iter().filter_map(|(u, m)| Role::parse(&m.role).map(|r| (*u, r))).collect();
        let mut keys = Vec::new();
        for k in &header.publishable_keys {
            let digest = digest_of(k)?;
            let environment = Environment::parse(&k.environment)
                .ok_or_else(|| ApiError::field("header.publishableKeys", "environment is live or test"))?;
            let record = PublishableKey {
                id: k.id,
                store,
                environment,
                last4: k.last4.clone(),
                created_at: k.created_at_ms,
                created_by: mapping.owner,
                revoked_at: k.revoked_at_ms,
            };
            keys.push((digest, record));
        }
        let catalogue = self.plans.clone();
        self.writer
            .write(None, move |tx| {
                let txn = tx.raw();
                let mut dir = txn.open_table(STORE_DIRECTORY)?;
                if dir.get(store.as_u128())?.is_some() || txn.open_table(CLOSED_STORES)?.get(store.as_u128())?.is_some() {
                    return Err(ApiError::msg(Code::CONFLICT, format!("store {store} already exists here")));
                }
                plans::ensure_room(txn, &catalogue, entry.owner_id, now, "you own")?;
                dir.insert(store.as_u128(), crate::storage::codec::encode(&entry)?.as_slice())?;
                drop(dir);
                for (user, role) in &members {
                    put_membership(txn, store, *user, Some(&Membership { role: *role, added_at: now }))?;
                }
                put_imported_keys(txn, &keys)?;
                count_in_cell(txn, &entry.cell, 1)
            })
            .await
    }
}

fn digest_of(k: &KeyRef) -> ApiResult<[u8; 32]> {
    parse_digest_hex(&k.digest).ok_or_else(|| ApiError::field("header.publishableKeys", "a digest is not hex SHA-256"))
}
