//! Inventory levels: a variant's quantities at a location, and [`apply`], the one function that
//! changes any quantity. Each change writes the level, its history row and an
//! `inventory.updated` event, and moves the variant's sellable sum (`inventoryQuantity`, kept on
//! the product so a product read stays one row) in the same write. Every area that moves stock
//! (orders, fulfillments, returns, transfers, purchase orders) calls it.

use std::collections::{BTreeMap, HashMap};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::cells::Cell;
use crate::cells::events;
use crate::cells::products;
use crate::cells::stock::history::InventoryChange;
use crate::cells::stock::locations::default_location;
use crate::domain::json_out::JsonOut;
use crate::domain::product::Product;
use crate::domain::stock::{Actor, Location, Quantities, Reason, Why};
use crate::error::{ApiError, ApiResult, Code};
use crate::storage::codec::decode;
use crate::storage::keys::Key;
use crate::storage::list::{ListQuery, Listed};
use crate::storage::record::{self, Filter, FilterValue, List, Record, Sort, partition_prefix};
use crate::storage::tables::{LEVEL_ORDER, LEVELS, StoreTable, VARIANTS};
use crate::storage::tx::Tx;

/// A variant's quantities at one location, kept at `store ‖ variant ‖ location` ([`level_key`]):
/// a variant's levels are one range.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Level {
    /// Derived from the variant and the location ([`level_id`]): the record's id, which no key
    /// holds (the level is found by the pair).
    pub id: Uuid,
    pub variant_id: Uuid,
    pub product_id: Uuid,
    pub location_id: Uuid,
    pub quantities: Quantities,
    pub created_at: i64,
    pub updated_at: i64,
}

/// A level as the API shows it (and as `inventory.updated` carries it).
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LevelView {
    pub variant_id: Uuid,
    pub product_id: Uuid,
    pub location_id: Uuid,
    pub available: i64,
    /// Ordered, not shipped.
    pub committed: i64,
    /// Set aside for transfers.
    pub reserved: i64,
    /// Expected (purchase orders, transfers on the way); not part of onHand.
    pub incoming: i64,
    /// available + committed + reserved.
    pub on_hand: i64,
    /// Absent for a location that never held the variant.
    #[serde(with = "crate::domain::time::stamp_opt")]
    #[schemars(with = "Option<String>")]
    pub updated_at: Option<i64>,
}

impl LevelView {
    /// Bytes a level's JSON takes, about: what a page's buffer is sized by.
    pub const JSON_BYTES: usize = 260;

    /// The level as JSON, byte for byte as its `Serialize` writes it: a variant's levels at 50
    /// locations are 12 KB, and serde took as long to write them as the read took to find them.
    pub fn write_json(&self, out: &mut JsonOut) {
        out.uuid(b"{\"variantId\":", &self.variant_id);
        out.uuid(b",\"productId\":", &self.product_id);
        out.uuid(b",\"locationId\":", &self.location_id);
        for (key, n) in [
            (&b",\"available\":"[..], self.available),
            (b",\"committed\":", self.committed),
            (b",\"reserved\":", self.reserved),
            (b",\"incoming\":", self.incoming),
            (b",\"onHand\":", self.on_hand),
        ] {
            out.raw(key);
            out.int(n);
        }
        match self.updated_at {
            Some(ms) => out.stamp(b",\"updatedAt\":", ms),
            None => out.raw(b",\"updatedAt\":null"),
        }
        out.raw(b"}");
    }

    /// The level of a variant at a location that never held it: zeros.
    pub fn never_held(variant_id: Uuid, product_id: Uuid, location_id: Uuid) -> LevelView {
        LevelView {
            variant_id,
            product_id,
            location_id,
            available: 0,
            committed: 0,
            reserved: 0,
            incoming: 0,
            on_hand: 0,
            updated_at: None,
        }
    }
}

impl Level {
    pub fn view(&self) -> LevelView {
        let q = &self.quantities;
        LevelView {
            variant_id: self.variant_id,
            product_id: self.product_id,
            location_id: self.location_id,
            available: q.available,
            committed: q.committed,
            reserved: q.reserved,
            incoming: q.incoming,
            on_hand: q.on_hand(),
            updated_at: Some(self.updated_at),
        }
    }
}

impl Record for Level {
    const TABLE: StoreTable = LEVELS;
    const NAME: &'static str = "levels";
    const LIST: List<Self> = List {
        order: Some(LEVEL_ORDER),
        // A level's sort values never change: a quantity change rewrites the level row alone.
        sorts: &[Sort { name: "created_at", tag: 0, key: |l, k| k.i64(l.created_at) }],
        default_sort: "created_at",
        summaries: "created_at",
        own_order: false,
        filters: &[
            Filter::reference("variantId", |l| Some(FilterValue::Reference(l.variant_id)), "The levels of this variant"),
            Filter::reference("locationId", |l| Some(FilterValue::Reference(l.location_id)), "The levels at this location"),
        ],
        ranges: &[],
        search: None,
    };

    fn id(&self) -> Uuid {
        self.id
    }

    const TAIL: usize = 32;

    /// The variant, then the location: a variant's levels are one range of `levels`.
    fn tail(&self, k: Key) -> Key {
        k.id(self.variant_id).id(self.location_id)
    }
}

/// The key of the level of `variant` at `location`.
pub fn level_key(store: Uuid, variant: Uuid, location: Uuid) -> Vec<u8> {
    Key::store(store).id(variant).id(location).into_vec()
}

/// Where the levels of `variant` start: every level of the variant is under it.
pub(super) fn variant_prefix(store: Uuid, variant: Uuid) -> Vec<u8> {
    Key::store(store).id(variant).into_vec()
}

/// The id of the level of `variant` at `location`: the first 16 bytes of
/// `sha256(variant ‖ location)`: a level has one id however often it is written.
pub fn level_id(variant: Uuid, location: Uuid) -> Uuid {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    ctx.update(variant.as_bytes());
    ctx.update(location.as_bytes());
    let digest = ctx.finish();
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(digest.as_ref().get(..16).unwrap_or(&[0; 16]));
    Uuid::from_bytes(bytes)
}

/// A change of one level's quantities.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Change {
    pub variant: Uuid,
    pub location: Uuid,
    pub delta: Quantities,
}

impl Change {
    pub fn available(variant: Uuid, location: Uuid, n: i64) -> Change {
        Change { variant, location, delta: Quantities { available: n, ..Default::default() } }
    }

    /// `n` units move from available to committed (negative: back).
    pub fn commit(variant: Uuid, location: Uuid, n: i64) -> Change {
        let delta = Quantities { available: n.saturating_neg(), committed: n, ..Default::default() };
        Change { variant, location, delta }
    }
}

/// The product of `variant`, inside a write.
pub fn product_of(tx: &Tx, store: Uuid, variant: Uuid) -> ApiResult<Option<Uuid>> {
    Ok(tx.get(VARIANTS, Key::store(store).id(variant).bytes())?.and_then(|b| Uuid::from_slice(&b).ok()))
}

/// The level of `variant` at `location`, inside a write.
pub fn level(tx: &Tx, store: Uuid, variant: Uuid, location: Uuid) -> ApiResult<Option<Level>> {
    tx.get(LEVELS, &level_key(store, variant, location))?.map(|b| decode(&b)).transpose()
}

/// Units of `variant` available at `location` (0 without a level), inside a write.
pub fn available(tx: &Tx, store: Uuid, variant: Uuid, location: Uuid) -> ApiResult<i64> {
    Ok(level(tx, store, variant, location)?.map_or(0, |l| l.quantities.available))
}

/// Applies `changes` (each to its level, in order) for `why`: levels, history rows, events and
/// the variants' sellable sums, all in the caller's write. A quantity that would leave
/// `0..=1,000,000,000` is a 422 naming the variant and the location; an unknown variant or
/// location a 400 naming `variantId` or `locationId`. Answers the new levels.
pub fn apply(tx: &mut Tx, store: Uuid, changes: &[Change], why: &Why, note: Option<&str>, now: i64) -> ApiResult<Vec<Level>> {
    let (levels, sellable) = apply_levels(tx, store, changes, why, note, now)?;
    for (product, deltas) in sellable {
        products::move_sellable(tx, store, product, &deltas, now)?;
    }
    Ok(levels)
}

/// Sellable deltas by product: `(variant, units)`.
type Sellable = BTreeMap<Uuid, Vec<(Uuid, i64)>>;

/// [`apply`] without the product write: answers the new levels and, by product, how much each
/// variant's sellable sum moves. For the product writes themselves.
fn apply_levels(
    tx: &mut Tx,
    store: Uuid,
    changes: &[Change],
    why: &Why,
    note: Option<&str>,
    now: i64,
) -> ApiResult<(Vec<Level>, Sellable)> {
    let mut places: HashMap<Uuid, Location> = HashMap::new();
    let mut out = Vec::with_capacity(changes.len());
    let mut sellable: Sellable = BTreeMap::new();
    for c in changes {
        if c.delta.is_zero() {
            continue;
        }
        let place = match places.entry(c.location) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => e.insert(
                record::load::<Location>(tx, store, c.location)?
                    .ok_or_else(|| ApiError::field("locationId", "no such location"))?,
            ),
        };
        let place = &*place;
        let old = level(tx, store, c.variant, c.location)?;
        let product = match &old {
            Some(l) => l.product_id,
            None => product_of(tx, store, c.variant)?.ok_or_else(|| ApiError::field("variantId", "no such variant"))?,
        };
        let before = old.as_ref().map(|l| l.quantities).unwrap_or_default();
        let after = before.moved(&c.delta).map_err(|name| {
            ApiError::msg(
                Code::BUSINESS_RULE,
                format!(
                    "{name} of variant {} at location {:?} would be {} (0 to 1,000,000,000)",
                    c.variant,
                    place.name,
                    describe(before, c.delta, name)
                ),
            )
        })?;
        let new = Level {
            id: level_id(c.variant, c.location),
            variant_id: c.variant,
            product_id: product,
            location_id: c.location,
            quantities: after,
            created_at: old.as_ref().map_or(now, |l| l.created_at),
            updated_at: now,
        };
        write(tx, store, old.as_ref(), Some(&new))?;
        let change = InventoryChange {
            id: tx.commit_id(now),
            variant_id: c.variant,
            product_id: product,
            location_id: c.location,
            reason: why.reason,
            actor: why.actor,
            reference: why.reference,
            delta: c.delta,
            after,
            note: note.map(str::to_string),
            created_at: now,
        };
        record::write(tx, store, None, Some(&change))?;
        // Written as a page of levels writes it (byte-equal to serde, tested): one event a level.
        let mut data = JsonOut::with_capacity(LevelView::JSON_BYTES);
        new.view().write_json(&mut data);
        events::append(tx, store, "inventory.updated", data.buf, now)?;
        if place.sellable() && c.delta.available != 0 {
            sellable.entry(product).or_default().push((c.variant, c.delta.available));
        }
        out.push(new);
    }
    Ok((out, sellable))
}

/// What a quantity would become, for the message (saturating: it is out of range anyway).
fn describe(before: Quantities, delta: Quantities, name: &str) -> i64 {
    let i = crate::domain::stock::QUANTITY_NAMES.iter().position(|n| *n == name).unwrap_or(0);
    let (b, d) = (before.as_array(), delta.as_array());
    b.get(i).copied().unwrap_or(0).saturating_add(d.get(i).copied().unwrap_or(0))
}

/// Inside a product write, before the product is written: a variant whose `inventoryQuantity`
/// was written (a new variant, or a changed number) has its default location's available set
/// to it, with its history. Answers the sellable sums of changed variants, which the product is
/// written with (a new variant's is the number written). The levels of variants that are gone
/// are removed; their history stays.
pub fn sync_written(
    tx: &mut Tx,
    store: Uuid,
    old: Option<&Product>,
    new: Option<&Product>,
    actor: Actor,
    now: i64,
) -> ApiResult<Vec<(Uuid, i64)>> {
    let kept = |id: Uuid| new.is_some_and(|n| n.variants.iter().any(|w| w.id == id));
    for v in old.map(|o| o.variants.as_slice()).unwrap_or_default() {
        if !kept(v.id) {
            remove_variant(tx, store, v.id)?;
        }
    }
    let Some(new) = new else { return Ok(Vec::new()) };
    let (mut changes, mut sums) = (Vec::new(), Vec::new());
    let mut default = None;
    for v in &new.variants {
        let before = old.and_then(|o| o.variants.iter().find(|w| w.id == v.id));
        let written = match before {
            None => v.inventory_quantity != 0,
            Some(b) => b.inventory_quantity != v.inventory_quantity,
        };
        if !written {
            continue;
        }
        let at = match default {
            Some(id) => id,
            None => *default.insert(default_location(tx, store)?.id),
        };
        let held = if before.is_some() { available(tx, store, v.id, at)? } else { 0 };
        let delta = v.inventory_quantity.saturating_sub(held);
        changes.push(Change::available(v.id, at, delta));
        let was = before.map_or(0, |b| b.inventory_quantity);
        sums.push((v.id, was.saturating_add(delta)));
        // The product's variant rows are written with it; a new variant's must be there first.
        tx.put(VARIANTS, Key::store(store).id(v.id).bytes(), new.id.as_bytes())?;
    }
    apply_levels(tx, store, &changes, &Why { reason: Reason::Correction, actor, reference: None }, None, now)?;
    Ok(sums)
}

/// Writes a level in place of `old` (`None`: removed): the one writer of levels, which drops
/// the variant's kept levels (`variant_page`) when the write commits.
fn write(tx: &mut Tx, store: Uuid, old: Option<&Level>, new: Option<&Level>) -> ApiResult<()> {
    record::write(tx, store, old, new)?;
    if let Some(variant) = new.or(old).map(|l| l.variant_id) {
        tx.levels_changed(store, variant);
    }
    Ok(())
}

/// Removes every level of a deleted variant, and its kept levels even if it held none.
fn remove_variant(tx: &mut Tx, store: Uuid, variant: Uuid) -> ApiResult<()> {
    for l in of_variant(tx, store, variant)? {
        write(tx, store, Some(&l), None)?;
    }
    tx.levels_changed(store, variant);
    Ok(())
}

/// Every level at `location` (through the list's partition of the location: filter 1), inside
/// a write.
fn at_location(tx: &Tx, store: Uuid, location: Uuid) -> ApiResult<Vec<Level>> {
    let prefix = partition_prefix(store, None, 1, location.as_bytes());
    let mut out = Vec::new();
    for k in tx.keys_with_prefix(LEVEL_ORDER, &prefix)? {
        out.extend(record::load_listed::<Level>(tx, store, None, &k)?);
    }
    Ok(out)
}

/// Every level of `variant`, by location, inside a write: one range.
pub fn of_variant(tx: &Tx, store: Uuid, variant: Uuid) -> ApiResult<Vec<Level>> {
    let rows = tx.scan_prefix(LEVELS, &variant_prefix(store, variant), None, usize::MAX)?;
    rows.iter().map(|(_, v)| decode(v)).collect()
}

/// A location's units start or stop being sold: each variant with units available there has
/// its sellable sum moved by them, one product write per product.
pub fn resell_location(tx: &mut Tx, store: Uuid, location: Uuid, sold: bool, now: i64) -> ApiResult<()> {
    let mut by_product: Sellable = BTreeMap::new();
    for l in at_location(tx, store, location)? {
        if l.quantities.available != 0 {
            let n = if sold { l.quantities.available } else { l.quantities.available.saturating_neg() };
            by_product.entry(l.product_id).or_default().push((l.variant_id, n));
        }
    }
    for (product, deltas) in by_product {
        products::move_sellable(tx, store, product, &deltas, now)?;
    }
    Ok(())
}

/// Up to `max` variants with committed, reserved or incoming units at `location`.
pub fn busy_variants(tx: &Tx, store: Uuid, location: Uuid, max: usize) -> ApiResult<Vec<Uuid>> {
    let mut out = Vec::new();
    for l in at_location(tx, store, location)? {
        let q = l.quantities;
        if q.committed != 0 || q.reserved != 0 || q.incoming != 0 {
            out.push(l.variant_id);
            if out.len() >= max {
                break;
            }
        }
    }
    Ok(out)
}

/// `GET S/inventory-levels` without one `variantId` (which `variant_page` answers): the levels
/// as kept, by the list's filters and sort.
pub async fn list(cell: &Cell, store: Uuid, q: &ListQuery) -> ApiResult<Listed<LevelView>> {
    Ok(cell.list::<Level>(store, q).await?.map(|l| l.view()))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::LevelView;
    use crate::http::Page;

    fn level() -> impl Strategy<Value = LevelView> {
        // Any millisecond, the years outside 0 to 9999 too (written as an empty string).
        let time = proptest::option::of(prop_oneof![any::<i64>(), 0i64..253_402_300_800_000]);
        (any::<[u128; 3]>(), any::<[i64; 5]>(), time).prop_map(|(ids, q, updated_at)| LevelView {
            variant_id: uuid::Uuid::from_u128(ids[0]),
            product_id: uuid::Uuid::from_u128(ids[1]),
            location_id: uuid::Uuid::from_u128(ids[2]),
            available: q[0],
            committed: q[1],
            reserved: q[2],
            incoming: q[3],
            on_hand: q[4],
            updated_at,
        })
    }

    proptest! {
        /// The page written by hand is the page serde writes, whatever the levels and paging.
        #[test]
        fn a_page_of_levels_is_written_as_serde_writes_it(
            levels in proptest::collection::vec(level(), 0..8),
            total in any::<u64>(),
            page in 1u32..,
            limit in 1u32..=100,
        ) {
            let page = Page::new(levels, total, page, limit);
            let by_hand = page.to_json_with(LevelView::JSON_BYTES, |out, l| l.write_json(out));
            let by_serde = serde_json::to_vec(&page).unwrap();
            prop_assert_eq!(String::from_utf8_lossy(&by_hand), String::from_utf8_lossy(&by_serde));
        }
    }
}
