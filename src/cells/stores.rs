//! Store settings in the cell: the one writer of the `stores` row.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use redb::ReadableTable;
use uuid::Uuid;

use crate::cells::Cell;
use crate::cells::pricing_version;
use crate::cells::stock::locations;
use crate::domain::stock::Location;
use crate::domain::store::{StoreSettings, UpdateStore, apply_update};
use crate::error::{ApiError, ApiResult, Code};
use crate::memory::Meter;
use crate::storage::codec::encode;
use crate::storage::keys::Key;
use crate::storage::read;
use crate::storage::tables::StoreState;
use crate::storage::tables::{STORE_CLOSED, STORE_STATE, STORES};

/// What one kept store's settings cost: the map slot, the settings and their strings
/// (name, address), estimated.
const SETTINGS_COST: usize =
    std::mem::size_of::<(Uuid, (u64, Arc<StoreSettings>))>() + std::mem::size_of::<StoreSettings>() + 256;

/// Recently read store settings, each tagged with the store's write generation at the time of
/// the read: hot paths (product creates, calculations) skip a read transaction and a decode
/// while nothing has written the store since. Within a byte budget: emptied when full.
pub struct SettingsCache {
    map: RwLock<HashMap<Uuid, (u64, Arc<StoreSettings>)>>,
    pub meter: Meter,
}

impl SettingsCache {
    pub fn new(budget: u64) -> SettingsCache {
        SettingsCache { map: RwLock::default(), meter: Meter::new(budget) }
    }
}

/// A store's settings, from the cache while the store's write generation is unchanged.
pub fn store_settings_cached(cell: &Cell, store: Uuid) -> ApiResult<Arc<StoreSettings>> {
    // Read before the transaction begins: a cached copy is never older than its tag.
    let generation = cell.writer.generations.get(store);
    let cache = &cell.settings;
    let cached = cache.map.read().ok().and_then(|m| m.get(&store).cloned());
    if let Some((tag, settings)) = cached
        && tag == generation
    {
        cache.meter.hit();
        return Ok(settings);
    }
    cache.meter.miss();
    let settings = Arc::new(store_settings(cell, store)?);
    if let Ok(mut m) = cache.map.write() {
        if (m.len() + 1) * SETTINGS_COST > cache.meter.budget() as usize && !m.contains_key(&store) {
            m.clear();
        }
        m.insert(store, (generation, settings.clone()));
        cache.meter.holds((m.len() * SETTINGS_COST) as u64, m.len() as u64);
    }
    Ok(settings)
}

/// Creates a store in this cell (called by the account service when it places a store).
/// Creating the same store again with the same settings is accepted, so the call can be
/// retried safely.
pub async fn create_store(cell: &Cell, settings: StoreSettings) -> ApiResult<()> {
    let id = settings.id;
    let default = Location::default_for(cell.clock.new_id(), settings.address.clone(), cell.clock.now_ms());
    cell.writer
        .write(Some(id), move |tx| {
            let key = Key::store(settings.id).into_vec();
            if tx.get(STORES, &key)?.is_some() {
                return Err(ApiError::msg(Code::CONFLICT, "the store already exists in this cell"));
            }
            tx.put(STORES, &key, &encode(&settings)?)?;
            locations::create_default(tx, id, &default)?;
            tx.raw().open_table(STORE_STATE)?.insert(settings.id.as_u128(), StoreState::Active as u8)?;
            Ok(())
        })
        .await?;
    cell.set_state(id, Some(StoreState::Active));
    Ok(())
}

pub fn store_settings(cell: &Cell, store: Uuid) -> ApiResult<StoreSettings> {
    read::get(&cell.read()?, STORES, Key::store(store).bytes())?.ok_or_else(ApiError::not_found)
}

/// Follows an ownership transfer made in the directory (the owner `GET S` shows).
pub async fn set_store_owner(cell: &Cell, store: Uuid, owner: Uuid) -> ApiResult<()> {
    let now = cell.clock.now_ms();
    cell.writer
        .write(Some(store), move |tx| {
            let key = Key::store(store).into_vec();
            let current = tx.get(STORES, &key)?.ok_or_else(ApiError::not_found)?;
            let mut settings: StoreSettings = crate::storage::codec::decode(&current)?;
            settings.owner_id = owner;
            settings.updated_at = now;
            tx.put(STORES, &key, &encode(&settings)?)
        })
        .await
}

pub async fn update_store(cell: &Cell, store: Uuid, update: UpdateStore) -> ApiResult<StoreSettings> {
    let update = std::sync::Arc::new(update);
    let now = cell.clock.now_ms();
    cell.writer
        .write(Some(store), move |tx| {
            let key = Key::store(store).into_vec();
            let current = tx.get(STORES, &key)?.ok_or_else(ApiError::not_found)?;
            let current: StoreSettings = crate::storage::codec::decode(&current)?;
            let next = apply_update(&update, &current, now)?;
            // The currency and whether prices include tax are inputs of every calculation.
            pricing_version::pricing_changed(tx, store)?;
            tx.put(STORES, &key, &encode(&next)?)?;
            Ok(next)
        })
        .await
}

/// Closes a store here on its owner's word: no longer served, its scheduled work stopped, its
/// rows kept until [`closed_due`] names it. A store being moved is refused (409): the move
/// decides where it lives first.
pub async fn close_store(cell: &Cell, store: Uuid, now: i64) -> ApiResult<()> {
    if cell.writer.gate.is_tracked(store) || cell.writer.gate.is_frozen(store) {
        return Err(ApiError::msg(Code::CONFLICT, "the store is being moved; close it once the move is done"));
    }
    if !cell.holds(store) {
        return Err(ApiError::not_found());
    }
    cell.writer
        .write(Some(store), move |tx| {
            tx.raw().open_table(STORE_STATE)?.insert(store.as_u128(), StoreState::Closed as u8)?;
            tx.raw().open_table(STORE_CLOSED)?.insert(store.as_u128(), now)?;
            Ok(())
        })
        .await?;
    cell.set_state(store, Some(StoreState::Closed));
    Ok(())
}

/// Serves a closed store again (an operator's reopen, or a close the directory refused).
pub async fn reopen_store(cell: &Cell, store: Uuid) -> ApiResult<()> {
    if cell.state_of(store) != Some(StoreState::Closed) {
        return Err(ApiError::msg(Code::NOT_FOUND, "this cell holds no closed store with this id"));
    }
    cell.writer
        .write(Some(store), move |tx| {
            tx.raw().open_table(STORE_STATE)?.insert(store.as_u128(), StoreState::Active as u8)?;
            tx.raw().open_table(STORE_CLOSED)?.remove(store.as_u128())?;
            Ok(())
        })
        .await?;
    cell.set_state(store, Some(StoreState::Active));
    Ok(())
}

/// The stores closed at or before `before` (Unix ms): those whose grace period has ended.
pub fn closed_due(cell: &Cell, before: i64) -> ApiResult<Vec<Uuid>> {
    let txn = cell.read()?;
    let mut due = Vec::new();
    for item in txn.open_table(STORE_CLOSED)?.iter()? {
        let (k, v) = item?;
        if v.value() <= before {
            due.push(Uuid::from_u128(k.value()));
        }
    }
    Ok(due)
}
