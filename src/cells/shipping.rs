//! Shipping zones in a cell: one row per zone with its rates inline, so a calculation reads every
//! zone of a store in one short range scan.

use std::sync::Arc;

use redb::ReadTransaction;
use uuid::Uuid;

use crate::cells::Cell;
use crate::cells::calculate::pricing_changed;
use crate::cells::collections::tx_scan;
use crate::domain::pricing::shipping::{ShippingZone, ShippingZoneInput};
use crate::error::{ApiError, ApiResult, Code};
use crate::http::query::Paging;
use crate::storage::codec::{decode, encode};
use crate::storage::keys::Key;
use crate::storage::read;
use crate::storage::tables::SHIPPING_ZONES;
use crate::storage::writer::Tx;

/// The sortable fields of the zone list.
pub const SORT_FIELDS: &[&str] = &["created_at", "updated_at", "name"];
/// Most zones in one store: every calculation with a shipping method reads them all.
pub const MAX_ZONES: usize = 250;

fn row_key(store: Uuid, id: Uuid) -> Vec<u8> {
    Key::store(store).id(id).into_vec()
}

/// Writes (with `None`, deletes) a zone: the one writer of the table. Calculations read the
/// zones, so the store's pricing version moves on too.
fn write_zone(tx: &mut Tx, store: Uuid, id: Uuid, zone: Option<&ShippingZone>) -> ApiResult<()> {
    pricing_changed(tx, store)?;
    match zone {
        Some(z) => tx.put(SHIPPING_ZONES, &row_key(store, id), &encode(z)?),
        None => tx.delete(SHIPPING_ZONES, &row_key(store, id)),
    }
}

fn load(tx: &Tx, store: Uuid, id: Uuid) -> ApiResult<ShippingZone> {
    let bytes = tx.get(SHIPPING_ZONES, &row_key(store, id))?.ok_or_else(ApiError::not_found)?;
    decode(&bytes)
}

/// Every zone of a store, in a read transaction (calculations, shipping rates).
pub fn all_zones(txn: &ReadTransaction, store: Uuid) -> ApiResult<Vec<ShippingZone>> {
    let mut out = Vec::new();
    read::scan(txn, SHIPPING_ZONES, Key::store(store).bytes(), false, 0, usize::MAX, |_, v| {
        out.push(decode(v)?);
        Ok(())
    })?;
    Ok(out)
}

/// Sorts `items` by the paging's field and order (ties by id) and cuts the page out: for the
/// small per-store configuration lists, read whole.
pub(crate) fn page_of<T>(mut items: Vec<T>, paging: &Paging, key: impl Fn(&T, &str) -> (String, i64, Uuid)) -> (Vec<T>, u64) {
    let total = items.len() as u64;
    items.sort_by_cached_key(|t| key(t, paging.sort_by));
    if paging.desc {
        items.reverse();
    }
    let page = items.into_iter().skip(paging.offset()).take(paging.limit as usize).collect();
    (page, total)
}

impl Cell {
    pub async fn create_shipping_zone(&self, store: Uuid, input: ShippingZoneInput) -> ApiResult<ShippingZone> {
        let zone = ShippingZone::create(&input, self.clock.new_id(), None, self.clock.now_ms(), || self.clock.new_id())?;
        self.writer
            .write(Some(store), move |tx| {
                if tx_scan(tx, SHIPPING_ZONES, Key::store(store).bytes(), None, MAX_ZONES)?.len() >= MAX_ZONES {
                    return Err(ApiError::msg(Code::BUSINESS_RULE, format!("a store has at most {MAX_ZONES} shipping zones")));
                }
                write_zone(tx, store, zone.id, Some(&zone))?;
                Ok(zone.clone())
            })
            .await
    }

    pub fn shipping_zone(&self, store: Uuid, id: Uuid) -> ApiResult<ShippingZone> {
        read::get(&self.read()?, SHIPPING_ZONES, &row_key(store, id))?.ok_or_else(ApiError::not_found)
    }

    pub fn list_shipping_zones(&self, store: Uuid, paging: &Paging) -> ApiResult<(Vec<ShippingZone>, u64)> {
        let zones = all_zones(&self.read()?, store)?;
        Ok(page_of(zones, paging, |z, field| match field {
            "name" => (z.name.to_lowercase(), 0, z.id),
            "updated_at" => (String::new(), z.updated_at, z.id),
            _ => (String::new(), z.created_at, z.id),
        }))
    }

    /// Replaces a zone by `input` (the whole zone). Rates named by an id the zone has keep it, so
    /// a `shippingMethodId` already offered to a shopper stays valid across the edit.
    pub async fn update_shipping_zone(&self, store: Uuid, id: Uuid, input: ShippingZoneInput) -> ApiResult<ShippingZone> {
        input.validate()?;
        let input = Arc::new(input);
        let (now, clock) = (self.clock.now_ms(), self.clock.clone());
        self.writer
            .write(Some(store), move |tx| {
                let old = load(tx, store, id)?;
                let zone = ShippingZone::create(&input, id, Some(&old), now, || clock.new_id())?;
                write_zone(tx, store, id, Some(&zone))?;
                Ok(zone)
            })
            .await
    }

    pub async fn delete_shipping_zone(&self, store: Uuid, id: Uuid) -> ApiResult<()> {
        self.writer
            .write(Some(store), move |tx| {
                load(tx, store, id)?;
                write_zone(tx, store, id, None)
            })
            .await
    }
}
