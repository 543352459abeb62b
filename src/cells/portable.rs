//! A cell's side of one store as a portable file (`shopcell admin export-store` and
//! `import-store`, coordinated by the account service in `portable::serve`).
//!
//! An export holds one read transaction for its whole length, so the file is one consistent
//! image of the store while its writes go on; the rows are paged out of it with the move's own
//! reader ([`moves::export_rows`]). An import receives the rows with the move's own chunk
//! import (the copy is `Incoming`, not served, and discarded by the next start after a crash),
//! then [`finish_import`] makes it this installation's store in one write: the owner here, no
//! secret of the source live (webhooks disabled with new secrets, payments held), and every
//! product queued for the search index.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use redb::{ReadTransaction, TableHandle};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::cells::Cell;
use crate::cells::moves::{self, Chunk, Cursor, Row};
use crate::cells::webhooks::Webhook;
use crate::domain::store::StoreSettings;
use crate::error::{ApiError, ApiResult, Code};
use crate::storage::codec::{decode, encode};
use crate::storage::keys::{Key, bounds_after, prefix_range};
use crate::storage::record;
use crate::storage::tables::{IDEMPOTENCY, STORE_HOLDS, STORE_TABLES, STORES, StoreState, WEBHOOKS};
use crate::storage::tx::Tx;

/// An export no request has touched for this long is dropped with its read transaction.
pub const EXPORT_IDLE_MS: i64 = 60_000;

/// The feature name of the payments hold in `store_holds`.
pub const PAYMENTS: &str = "payments";

/// A feature of a store kept off until a member acts (`store_holds`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Hold {
    pub since: i64,
    /// What must be entered again before the feature is on, as the API names it.
    pub reason: String,
}

/// What a cell answers when an export opens: the rows of each table, the store's settings
/// and what a receiving installation must enter again.
#[derive(Debug, Serialize, Deserialize)]
pub struct Opened {
    pub counts: BTreeMap<String, u64>,
    pub settings: StoreSettings,
    /// The payment provider this cell sends the store's payments to (its keys stay here).
    pub payment_provider: String,
}

struct Session {
    store: Uuid,
    txn: ReadTransaction,
    last_used_ms: i64,
}

/// The exports a cell is serving, by export id.
#[derive(Default)]
pub struct ExportSessions(Mutex<HashMap<Uuid, Session>>);

impl ExportSessions {
    /// Opens export `id` of `store`: a served store only (a closed one is 404 like a missing
    /// one).
    pub fn open(&self, cell: &Cell, id: Uuid, store: Uuid) -> ApiResult<Opened> {
        let now = cell.clock.now_ms();
        self.sweep(now);
        if !cell.holds(store) {
            return Err(ApiError::not_found());
        }
        let txn = cell.read()?;
        let counts = count_rows(&txn, store)?;
        let settings: StoreSettings =
            crate::storage::read::get(&txn, STORES, Key::store(store).bytes())?.ok_or_else(ApiError::not_found)?;
        let payment_provider = cell.payments.default_provider().name().to_string();
        let mut sessions = self.0.lock().map_err(|_| ApiError::internal("export sessions poisoned"))?;
        if sessions.contains_key(&id) {
            return Err(ApiError::msg(Code::CONFLICT, "this export is already open"));
        }
        sessions.insert(id, Session { store, txn, last_used_ms: now });
        Ok(Opened { counts, settings, payment_provider })
    }

    /// The rows of export `id` from `from` on, as they were when it opened.
    pub fn read(&self, id: Uuid, store: Uuid, from: &Cursor, now: i64) -> ApiResult<Chunk> {
        let mut sessions = self.0.lock().map_err(|_| ApiError::internal("export sessions poisoned"))?;
        let s = sessions.get_mut(&id).filter(|s| s.store == store).ok_or_else(gone)?;
        s.last_used_ms = now;
        let mut chunk = moves::export_rows(&s.txn, store, from)?;
        chunk.rows.retain(|r| !LEFT_BEHIND.contains(&r.table));
        for row in &mut chunk.rows {
            scrub(row)?;
        }
        Ok(chunk)
    }

    /// Ends export `id`: its read transaction ends.
    pub fn close(&self, id: Uuid) {
        if let Ok(mut sessions) = self.0.lock() {
            sessions.remove(&id);
        }
    }

    /// Drops exports whose caller went away ([`EXPORT_IDLE_MS`]).
    fn sweep(&self, now: i64) {
        if let Ok(mut sessions) = self.0.lock() {
            sessions.retain(|_, s| now - s.last_used_ms < EXPORT_IDLE_MS);
        }
    }
}

/// Tables whose rows stay behind: idempotency records replay first answers for 24 hours, and
/// an answer may hold a secret shown once (a webhook's, a gift card's code).
const LEFT_BEHIND: &[u16] = &[IDEMPOTENCY.index];

/// Takes the secrets out of a row on its way out: a webhook's signing secret is blanked (the
/// import gives each subscription a new one).
fn scrub(row: &mut Row) -> ApiResult<()> {
    if row.table == WEBHOOKS.index
        && let Some(v) = &row.value
    {
        let mut w: Webhook = decode(v)?;
        w.secret.clear();
        row.value = Some(encode(&w)?);
    }
    Ok(())
}

fn gone() -> ApiError {
    ApiError::msg(Code::NOT_FOUND, "no such export here (it ended, or lapsed after a minute unused)")
}

/// The rows of each store table under `store` an export carries, by table name (tables
/// without rows left out).
pub fn count_rows(txn: &ReadTransaction, store: Uuid) -> ApiResult<BTreeMap<String, u64>> {
    let range = prefix_range(Key::store(store).bytes());
    let mut counts = BTreeMap::new();
    for t in STORE_TABLES.iter().filter(|t| !LEFT_BEHIND.contains(&t.index)) {
        let table = txn.open_table(t.def)?;
        let n = table.range::<&[u8]>(bounds_after(&range, None))?.count() as u64;
        if n > 0 {
            counts.insert(t.def.name().to_string(), n);
        }
    }
    Ok(counts)
}

/// What [`finish_import`] changed.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Finished {
    /// Subscriptions disabled, each with a new secret.
    pub webhooks_disabled: u64,
}

/// Makes the copy received as `Incoming` this installation's store, in one write: owned by
/// `owner`, its webhooks disabled with new secrets (the source's never sign here), payments
/// held until its payment settings are entered again (never sent to another provider
/// meanwhile), and then served and queued for search as a moved store is.
pub async fn finish_import(cell: &Cell, store: Uuid, owner: Uuid) -> ApiResult<Finished> {
    if cell.state_of(store) != Some(StoreState::Incoming) {
        return Err(ApiError::msg(Code::CONFLICT, "no copy of this store is being received"));
    }
    let now = cell.clock.now_ms();
    let done = cell
        .writer
        .write(Some(store), move |tx| {
            let key = Key::store(store).into_vec();
            let mut settings: StoreSettings =
                decode(&tx.get(STORES, &key)?.ok_or_else(|| ApiError::field("rows", "the file has no store settings"))?)?;
            settings.owner_id = owner;
            settings.updated_at = now;
            tx.put(STORES, &key, &encode(&settings)?)?;
            let webhooks_disabled = disable_webhooks(tx, store, now)?;
            put_hold(
                tx,
                store,
                PAYMENTS,
                &Hold {
                    since: now,
                    reason: "the store was imported from another installation: enter its payment settings here (PUT /stores/{storeId}/payment-settings) to take payments".into(),
                },
            )?;
            moves::serve_arrived(tx, store, now)?;
            Ok(Finished { webhooks_disabled })
        })
        .await?;
    cell.writer.forget_store(store);
    cell.set_state(store, Some(StoreState::Active));
    cell.jobs.wake();
    Ok(done)
}

/// Every subscription of the store, disabled with a new secret: a receiver trusts the new one
/// only once a member has given it over and enabled the subscription again.
fn disable_webhooks(tx: &mut Tx, store: Uuid, now: i64) -> ApiResult<u64> {
    let rows = tx.scan_prefix(WEBHOOKS, Key::store(store).bytes(), None, usize::MAX)?;
    let mut n = 0;
    for (_, v) in rows {
        let old: Webhook = decode(&v)?;
        let mut w = old.clone();
        w.secret = crate::domain::webhook::new_secret()?;
        w.enabled = false;
        w.disabled_reason = Some("imported from another installation with a new secret; enable it again".into());
        w.updated_at = now;
        record::write(tx, store, Some(&old), Some(&w))?;
        n += 1;
    }
    Ok(n)
}

fn hold_key(store: Uuid, feature: &str) -> Vec<u8> {
    let mut k = Key::store(store).into_vec();
    k.extend_from_slice(feature.as_bytes());
    k
}

fn put_hold(tx: &mut Tx, store: Uuid, feature: &str, hold: &Hold) -> ApiResult<()> {
    tx.put(STORE_HOLDS, &hold_key(store, feature), &encode(hold)?)
}

/// The hold on `feature` of `store`, if any.
pub fn hold(txn: &ReadTransaction, store: Uuid, feature: &str) -> ApiResult<Option<Hold>> {
    crate::storage::read::get(txn, STORE_HOLDS, &hold_key(store, feature))
}

/// Lifts the hold on `feature`; answers whether there was one.
pub fn lift_hold(tx: &mut Tx, store: Uuid, feature: &str) -> ApiResult<bool> {
    let key = hold_key(store, feature);
    let held = tx.get(STORE_HOLDS, &key)?.is_some();
    if held {
        tx.delete(STORE_HOLDS, &key)?;
    }
    Ok(held)
}

/// Drops a copy an import left (its directory entry could not be written, or the caller
/// went away): served or not, it is not this installation's store.
pub async fn abandon_import(cell: &Cell, store: Uuid) -> ApiResult<()> {
    match cell.state_of(store) {
        Some(StoreState::Closed) => return Err(ApiError::msg(Code::CONFLICT, "this cell holds a closed store with this id")),
        Some(StoreState::Active) => cell.set_state(store, None),
        _ => {}
    }
    moves::discard(cell, store).await
}
