//! Closing a store in the directory: its entry and memberships leave the live tables for
//! `closed_stores`, so every store route 404s to everyone, `GET /stores` omits it, its
//! publishable keys admit no one and its owner's plan has a place free. Reopening puts them back;
//! after the grace period the cell's rows are removed first, then the directory forgets it.

use redb::{ReadableDatabase, ReadableTable};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::account::AccountService;
use crate::account::count_in_cell;
use crate::account::membership::put_membership;
use crate::account::model::{Membership, StoreEntry};
use crate::domain::role::Role;
use crate::error::{ApiError, ApiResult, Code};
use crate::storage::codec::{decode, encode};
use crate::storage::tables::{CLOSED_STORES, MEMBERS, PUBLISHABLE_KEYS, STORE_DIRECTORY, STORE_PUBLISHABLE_KEYS};

/// What the directory keeps of a closed store, to reopen it as it was.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ClosedStore {
    pub entry: StoreEntry,
    pub members: Vec<(Uuid, Membership)>,
    pub closed_at: i64,
}

impl AccountService {
    /// Takes `store` out of the directory on its owner's word (`actor`, checked again here);
    /// answers the cell that holds it.
    pub async fn close_store(&self, store: Uuid, actor: Uuid) -> ApiResult<String> {
        let now = self.clock.now_ms();
        self.writer
            .write(None, move |tx| {
                let txn = tx.raw();
                let mut dir = txn.open_table(STORE_DIRECTORY)?;
                let entry: StoreEntry = match dir.remove(store.as_u128())? {
                    Some(v) => decode(v.value())?,
                    None => return Err(ApiError::not_found()),
                };
                let members: Vec<(Uuid, Membership)> = {
                    let t = txn.open_table(MEMBERS)?;
                    let mut out = Vec::new();
                    for item in t.range((store.as_u128(), 0)..=(store.as_u128(), u128::MAX))? {
                        let (k, v) = item?;
                        out.push((Uuid::from_u128(k.value().1), decode::<Membership>(v.value())?));
                    }
                    out
                };
                if !members.iter().any(|(u, m)| *u == actor && m.role == Role::Owner) {
                    return Err(ApiError::msg(Code::FORBIDDEN, "only the store's owner can close it"));
                }
                for (user, _) in &members {
                    put_membership(txn, store, *user, None)?;
                }
                count_in_cell(txn, &entry.cell, -1)?;
                let cell = entry.cell.clone();
                let closed = ClosedStore { entry, members, closed_at: now };
                txn.open_table(CLOSED_STORES)?.insert(store.as_u128(), encode(&closed)?.as_slice())?;
                Ok(cell)
            })
            .await
    }

    /// Puts a closed store back as it was (entry, members, keys); answers its cell. A 404 when
    /// the store is not closed (open, unknown, or already forgotten).
    pub async fn reopen_store(&self, store: Uuid) -> ApiResult<String> {
        self.writer
            .write(None, move |tx| {
                let txn = tx.raw();
                let closed: ClosedStore = match txn.open_table(CLOSED_STORES)?.remove(store.as_u128())? {
                    Some(v) => decode(v.value())?,
                    None => return Err(ApiError::msg(Code::NOT_FOUND, "no closed store has this id")),
                };
                txn.open_table(STORE_DIRECTORY)?.insert(store.as_u128(), encode(&closed.entry)?.as_slice())?;
                for (user, m) in &closed.members {
                    put_membership(txn, store, *user, Some(m))?;
                }
                count_in_cell(txn, &closed.entry.cell, 1)?;
                Ok(closed.entry.cell)
            })
            .await
    }

    /// Forgets a closed store for good once its cell has removed its rows: the closed record
    /// its publishable keys and invitations. Forgetting one already forgotten is accepted (a retried call).
    pub async fn forget_store(&self, store: Uuid) -> ApiResult<()> {
        self.writer
            .write(None, move |tx| {
                let txn = tx.raw();
                if txn.open_table(STORE_DIRECTORY)?.get(store.as_u128())?.is_some() {
                    return Err(ApiError::msg(Code::CONFLICT, "the store is open"));
                }
                txn.open_table(CLOSED_STORES)?.remove(store.as_u128())?;
                let mut index = txn.open_table(STORE_PUBLISHABLE_KEYS)?;
                let mut keys = txn.open_table(PUBLISHABLE_KEYS)?;
                let range = (store.as_u128(), 0)..=(store.as_u128(), u128::MAX);
                let hashes: Vec<Vec<u8>> =
                    index.range(range.clone())?.map(|r| r.map(|(_, v)| v.value().to_vec())).collect::<Result<_, _>>()?;
                for h in &hashes {
                    keys.remove(h.as_slice())?;
                }
                index.retain_in(range, |_, _| false)?;
                // Its pending invitations could never be accepted: their rows go too.
                super::invitations::withdraw_store(txn, store)
            })
            .await
    }

    /// The closed record of `store`, if it is closed.
    pub fn closed_store(&self, store: Uuid) -> ApiResult<Option<ClosedStore>> {
        let txn = self.db.begin_read()?;
        let t = txn.open_table(CLOSED_STORES)?;
        t.get(store.as_u128())?.map(|v| decode(v.value())).transpose()
    }
}
