//! Shipping zones in a cell: one row per zone with its rates inline, so a calculation reads every
//! zone of a store in one short range scan; a store keeps at most [`MAX_ZONES`].

use redb::ReadTransaction;
use uuid::Uuid;

use crate::cells::Cell;
use crate::cells::pricing_version::pricing_changed;
use crate::domain::pricing::shipping::{ShippingZone, ShippingZoneInput};
use crate::error::{ApiError, ApiResult, Code};
use crate::storage::codec::decode;
use crate::storage::keys::Key;
use crate::storage::read;
use crate::storage::record::{self, List, Record, Sort};
use crate::storage::tables::{SHIPPING_ZONE_ORDER, SHIPPING_ZONES, StoreTable};
use crate::storage::tx::Tx;

/// Most zones in one store: every calculation with a shipping method reads them all.
pub const MAX_ZONES: usize = 250;

impl Record for ShippingZone {
    const TABLE: StoreTable = SHIPPING_ZONES;
    const NAME: &'static str = "shipping_zones";
    const LIST: List<Self> = List::sorted(
        SHIPPING_ZONE_ORDER,
        &[
            Sort { name: "created_at", tag: 0, key: |z, k| k.i64(z.created_at) },
            Sort { name: "updated_at", tag: 1, key: |z, k| k.i64(z.updated_at) },
            Sort { name: "name", tag: 2, key: |z, k| k.str(&z.name.to_lowercase()) },
        ],
        "created_at",
    );

    fn id(&self) -> Uuid {
        self.id
    }
}

/// Writes `new` in place of `old` through the record layer; calculations read the zones, so the
/// store's pricing version moves on too.
fn write_zone(tx: &mut Tx, store: Uuid, old: Option<&ShippingZone>, new: Option<&ShippingZone>) -> ApiResult<()> {
    pricing_changed(tx, store)?;
    record::write(tx, store, old, new)
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

pub async fn create(cell: &Cell, store: Uuid, input: ShippingZoneInput) -> ApiResult<ShippingZone> {
    let zone = ShippingZone::create(&input, cell.clock.new_id(), None, cell.clock.now_ms(), || cell.clock.new_id())?;
    cell.writer
        .write(Some(store), move |tx| {
            if record::count::<ShippingZone>(tx, store, None)? >= MAX_ZONES as u64 {
                return Err(ApiError::msg(Code::BUSINESS_RULE, format!("a store has at most {MAX_ZONES} shipping zones")));
            }
            write_zone(tx, store, None, Some(&zone))?;
            Ok(zone.clone())
        })
        .await
}

/// Replaces a zone by `input` (the whole zone). Rates named by an id the zone has keep it, so a
/// `shippingMethodId` already offered to a shopper stays valid across the edit.
pub async fn update(cell: &Cell, store: Uuid, id: Uuid, input: ShippingZoneInput) -> ApiResult<ShippingZone> {
    input.validate()?;
    let (now, clock) = (cell.clock.now_ms(), cell.clock.clone());
    cell.writer
        .write(Some(store), move |tx| {
            let old = record::must_load::<ShippingZone>(tx, store, id)?;
            let zone = ShippingZone::create(&input, id, Some(&old), now, || clock.new_id())?;
            write_zone(tx, store, Some(&old), Some(&zone))?;
            Ok(zone)
        })
        .await
}

pub async fn delete(cell: &Cell, store: Uuid, id: Uuid) -> ApiResult<()> {
    cell.writer
        .write(Some(store), move |tx| {
            let old = record::must_load::<ShippingZone>(tx, store, id)?;
            write_zone(tx, store, Some(&old), None)
        })
        .await
}
