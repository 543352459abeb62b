//! Inventory levels: a variant's quantities at a location, and [`apply`], the one function that
//! changes any quantity. Each change writes the level, its history row and an
//! `inventory.updated` event, and moves the variant's sellable sum (`inventoryQuantity`, kept on
//! the product so a product read stays one row) in the same write. Every area that moves stock
//! (orders, fulfillments, returns, transfers, purchase orders) calls it.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use bytes::Bytes;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::cells::Cell;
use crate::cells::events;
use crate::cells::products;
use crate::cells::stock::history::InventoryChange;
use crate::cells::stock::locations::{self, default_location};
use crate::domain::json_out::JsonOut;
use crate::domain::product::Product;
use crate::domain::stock::{Actor, Location, Quantities, Reason, Why};
use crate::error::{ApiError, ApiResult, Code};
use crate::http::compress::{self, Answer, Coding};
use crate::storage::codec::decode;
use crate::storage::keys::Key;
use crate::storage::list::{ListQuery, Listed};
use crate::storage::record::{self, Filter, FilterValue, List, Record, Sort, partition_prefix};
use crate::storage::row_cache::Cached;
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
fn variant_prefix(store: Uuid, variant: Uuid) -> Vec<u8> {
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
        // Written as the level page writes it (byte-equal to serde, tested): one event a level.
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
/// the variant's cached page ([`variant_page`]) when the write commits.
fn write(tx: &mut Tx, store: Uuid, old: Option<&Level>, new: Option<&Level>) -> ApiResult<()> {
    record::write(tx, store, old, new)?;
    if let Some(variant) = new.or(old).map(|l| l.variant_id) {
        tx.levels_changed(store, variant);
    }
    Ok(())
}

/// Removes every level of a deleted variant, and its cached page even if it held no level.
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

/// The variant a query asks for alone (`variantId` and paging, nothing else): the one shape of
/// `GET S/inventory-levels` whose answers are kept ([`variant_page`]).
pub fn variant_alone(q: &ListQuery) -> Option<Uuid> {
    match q.filters.as_slice() {
        [(0, values)] if q.ranges.is_empty() && q.search.is_none() => match values.as_slice() {
            [v] => Uuid::from_slice(v).ok(),
            _ => None,
        },
        _ => None,
    }
}

/// The answer to `q` asking for `variant` alone ([`variant_alone`]), as `render` writes it,
/// compressed in `coding` when the request accepts one, kept in the cell's level pages
/// ([`crate::storage::writer::Writer::levels`]) for the page last asked of the variant: a
/// variant read many times between its changes (a storefront's stock per store, a warehouse
/// screen) is answered without a read, a render or a compression. The writer drops a page with
/// any write of the variant's levels (and its deletion), and the store's every page with a
/// write of a location. A variant the store does not have is not kept (its making writes no
/// level). Kept answers are one switch (`--answer-cache`, which the product list pages' cache
/// holds): off, every page is read and rendered.
pub async fn variant_page(
    cell: &Cell,
    store: Uuid,
    variant: Uuid,
    q: &ListQuery,
    coding: Option<Coding>,
    render: impl FnOnce(Listed<LevelView>) -> Vec<u8>,
) -> ApiResult<Answer> {
    if !cell.pages.is_enabled() {
        return Ok(Answer { body: render(list(cell, store, q).await?).into(), coding: None });
    }
    let shape = KeptPage::shape(q);
    let cache = &cell.writer.levels;
    let epoch = match cache.get(store, variant) {
        Cached::Hit(kept) => match KeptPage::answer(kept, &shape, coding) {
            Some(answer) => return Ok(answer),
            // Another page of the variant: answered afresh, the kept one left as it is.
            None => None,
        },
        Cached::Miss(epoch) => Some(epoch),
    };
    // The read's snapshot is taken after the lookup, as a fill asks.
    let listed = list(cell, store, q).await?;
    let known = listed.total > 0;
    let plain = Bytes::from(render(listed));
    let packed = coding.and_then(|c| compress::pack(&plain, c).map(|p| (c, p)));
    if let Some(epoch) = epoch.filter(|_| known) {
        cache.fill(store, variant, epoch, KeptPage::bytes(&shape, &plain, packed.as_ref()));
    }
    Ok(match packed {
        Some((c, p)) => Answer { body: p, coding: Some(c) },
        None => Answer { body: plain, coding: None },
    })
}

/// A kept level page: the page it answers (offset and limit, u64 LE each), the coding of its
/// compressed body (0: none, 1: gzip, 2: brotli), the plain body's length (u64 LE), the plain
/// body, then the compressed one, made for the request that filled it.
struct KeptPage;

impl KeptPage {
    const HEAD: usize = 16 + 1 + 8;

    fn shape(q: &ListQuery) -> [u8; 16] {
        let mut shape = [0u8; 16];
        shape[..8].copy_from_slice(&(q.offset as u64).to_le_bytes());
        shape[8..].copy_from_slice(&(q.limit as u64).to_le_bytes());
        shape
    }

    fn bytes(shape: &[u8; 16], plain: &[u8], packed: Option<&(Coding, Bytes)>) -> Arc<[u8]> {
        let coding = match packed {
            None => 0,
            Some((Coding::Gzip, _)) => 1,
            Some((Coding::Brotli, _)) => 2,
        };
        let packed = packed.map_or(&[][..], |(_, p)| &p[..]);
        let mut out = Vec::with_capacity(Self::HEAD + plain.len() + packed.len());
        out.extend_from_slice(shape);
        out.push(coding);
        out.extend_from_slice(&(plain.len() as u64).to_le_bytes());
        out.extend_from_slice(plain);
        out.extend_from_slice(packed);
        out.into()
    }

    /// The answer `kept` gives a request for page `shape` accepting `coding`: its compressed
    /// body when made in that coding, else its plain one (compressed on the way out, as any
    /// answer); `None` when it is another page.
    fn answer(kept: Arc<[u8]>, shape: &[u8; 16], coding: Option<Coding>) -> Option<Answer> {
        if kept.len() < Self::HEAD || kept[..16] != shape[..] {
            return None;
        }
        let made = match kept[16] {
            1 => Some(Coding::Gzip),
            2 => Some(Coding::Brotli),
            _ => None,
        };
        let len = u64::from_le_bytes(kept[17..Self::HEAD].try_into().ok()?) as usize;
        let end = Self::HEAD.checked_add(len).filter(|end| *end <= kept.len())?;
        let all = Bytes::from_owner(kept);
        Some(match made.filter(|m| Some(*m) == coding) {
            Some(c) => Answer { body: all.slice(end..), coding: Some(c) },
            None => Answer { body: all.slice(Self::HEAD..end), coding: None },
        })
    }
}

/// `GET S/inventory-levels`. Asked for one variant, a row per active location (zeros included,
/// in priority order) and one per other location that holds a level; else the levels as kept.
/// A variant's page is one range of `levels` beside the store's active locations, which are
/// cached ([`locations::active_cached`]).
pub async fn list(cell: &Cell, store: Uuid, q: &ListQuery) -> ApiResult<Listed<LevelView>> {
    let variant = q.filters.iter().find(|(i, v)| *i == 0 && v.len() == 1).and_then(|(_, v)| v.first());
    let Some(variant) = variant.and_then(|b| Uuid::from_slice(b).ok()) else {
        return Ok(cell.list::<Level>(store, q).await?.map(|l| l.view()));
    };
    // Before the read begins: a cached list is never older than the read's snapshot.
    let active = locations::active_cached(cell, store)?;
    let txn = cell.read()?;
    let mut held: Vec<Level> = Vec::new();
    crate::storage::read::walk(&txn, LEVELS, &variant_prefix(store, variant), false, |_, v| {
        held.push(decode(v)?);
        Ok(true)
    })?;
    let product = match held.first() {
        Some(l) => l.product_id,
        // A variant without levels: known only if the store has it.
        None => match crate::storage::read::get_raw(&txn, VARIANTS, Key::store(store).id(variant).bytes())?
            .and_then(|b| Uuid::from_slice(&b).ok())
        {
            Some(p) => p,
            None => return Ok(Listed { items: Vec::new(), total: 0 }),
        },
    };
    // `held` is in location order: each active location finds its level by a binary search.
    // Rows are views only once the page is cut (a time written costs more than the search).
    let mut rows: Vec<(Uuid, Option<&Level>)> = Vec::with_capacity(active.len() + held.len());
    let mut shown = vec![false; held.len()];
    for loc in active.iter() {
        let found = held.binary_search_by(|l| l.location_id.cmp(loc)).ok();
        if let Some(i) = found {
            shown[i] = true;
        }
        rows.push((*loc, found.and_then(|i| held.get(i))));
    }
    // Levels at inactive locations follow, oldest first.
    let mut rest: Vec<&Level> = held.iter().zip(&shown).filter(|(_, s)| !**s).map(|(l, _)| l).collect();
    rest.sort_by_key(|l| (l.created_at, l.location_id));
    rows.extend(rest.into_iter().map(|l| (l.location_id, Some(l))));
    if let Some((_, locs)) = q.filters.iter().find(|(i, _)| *i == 1) {
        rows.retain(|(loc, _)| locs.iter().any(|b| b.as_slice() == loc.as_bytes()));
    }
    let total = rows.len() as u64;
    let items = rows
        .into_iter()
        .skip(q.offset)
        .take(q.limit)
        .map(|(loc, l)| l.map_or_else(|| LevelView::never_held(variant, product, loc), Level::view))
        .collect();
    Ok(Listed { items, total })
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use proptest::prelude::*;

    use super::{KeptPage, LevelView};
    use crate::http::Page;
    use crate::http::compress::{Answer, Coding};

    #[test]
    fn a_kept_page_answers_its_own_page_in_the_coding_it_was_made_in_else_plain() {
        let (page, other) = ([1u8; 16], [2u8; 16]);
        let plain = Bytes::from_static(b"{\"data\":[]}");
        let packed = (Coding::Gzip, Bytes::from_static(b"packed"));
        let kept = KeptPage::bytes(&page, &plain, Some(&packed));
        let gzip = Answer { body: packed.1.clone(), coding: Some(Coding::Gzip) };
        assert_eq!(KeptPage::answer(kept.clone(), &page, Some(Coding::Gzip)), Some(gzip));
        let as_is = Answer { body: plain.clone(), coding: None };
        assert_eq!(KeptPage::answer(kept.clone(), &page, Some(Coding::Brotli)), Some(as_is.clone()));
        assert_eq!(KeptPage::answer(kept.clone(), &page, None), Some(as_is.clone()));
        assert_eq!(KeptPage::answer(kept.clone(), &other, None), None, "another page");
        // Cut anywhere, it answers nothing rather than a wrong body.
        for cut in 0..KeptPage::HEAD + plain.len() {
            assert_eq!(KeptPage::answer(kept[..cut].into(), &page, None), None, "cut at {cut}");
        }
        let unpacked = KeptPage::bytes(&page, &plain, None);
        assert_eq!(KeptPage::answer(unpacked, &page, Some(Coding::Gzip)), Some(as_is));
    }

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
