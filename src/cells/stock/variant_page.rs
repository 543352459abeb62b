//! `GET S/inventory-levels?variantId=V`: a row per active location in priority order (zeros
//! where the variant was never held), then the variant's levels at inactive locations, oldest
//! first; `locationId` narrows the rows, and the page is cut from them.
//!
//! A storefront showing stock per shop and a warehouse screen ask for the same variants again
//! and again, and the page is 50 rows of 240 bytes at 50 locations: reading the levels and
//! writing them out cost more than all the rest of the request. So the page is composed for
//! each request from two record caches the writer keeps, both always on (they hold records,
//! not answers; the page, its order, filter and cut are made afresh every time):
//!
//! - the store's active locations in priority order ([`locations::active_cached`]);
//! - the variant's levels, each as its view's JSON, under `(store, variant)` in
//!   [`crate::storage::writer::Writer::levels`] ([`Kept`]), read on a miss from the one range of
//!   `levels` that holds them. Every write of a level goes through `levels::write`, which drops
//!   the variant's entry when the write commits, before the writer is answered; a location's
//!   write changes no level's view (it changes the active list, which has its own entry).
//!
//! A row of a location that never held the variant is written from the variant's prefix and the
//! location's id: each row is a copy or two, and a page costs no read, no decode and no render.

use uuid::Uuid;

use crate::cells::Cell;
use crate::cells::stock::levels::{Level, LevelView, variant_prefix};
use crate::cells::stock::locations;
use crate::domain::json_out::JsonOut;
use crate::error::ApiResult;
use crate::storage::codec::decode;
use crate::storage::keys::Key;
use crate::storage::list::ListQuery;
use crate::storage::row_cache::Cached;
use crate::storage::tables::{LEVELS, VARIANTS};

/// The variant a query lists the levels of: its one `variantId` (filter 0). Any other list of
/// levels is a list of records as kept (`levels::list`).
pub fn variant_of(q: &ListQuery) -> Option<Uuid> {
    let (_, values) = q.filters.iter().find(|(i, v)| *i == 0 && v.len() == 1)?;
    values.first().and_then(|v| Uuid::from_slice(v).ok())
}

/// The page of `q` (filters `variantId` = `variant` and maybe `locationId`; `offset`, `limit`)
/// as JSON in the list envelope, numbered `page` of `limit`. A variant the store does not have
/// has no rows.
pub fn page(cell: &Cell, store: Uuid, variant: Uuid, q: &ListQuery, page: u32, limit: u32) -> ApiResult<Vec<u8>> {
    // Both lookups come before any read's snapshot, as a fill asks.
    let active = locations::active_cached(cell, store)?;
    let kept = match cell.writer.levels.get(store, variant) {
        Cached::Hit(entry) => entry,
        Cached::Miss(epoch) => match read(cell, store, variant)? {
            Some(entry) => {
                let entry: std::sync::Arc<[u8]> = entry.into();
                cell.writer.levels.fill(store, variant, epoch, entry.clone());
                entry
            }
            None => return Ok(crate::http::page_json(&[], 0, page, limit, 0, |_, _: &Row| {})),
        },
    };
    let Some(kept) = Kept::parse(&kept) else {
        return Err(crate::error::ApiError::internal("a kept entry of levels does not parse"));
    };
    Ok(compose(variant, &kept, &active, q, page, limit))
}

/// The page of `q` over `kept` (the variant's levels) and `active` (the store's active
/// locations in priority order).
fn compose(variant: Uuid, kept: &Kept, active: &[Uuid], q: &ListQuery, page: u32, limit: u32) -> Vec<u8> {
    let mut rows: Vec<Row> = Vec::with_capacity(active.len() + kept.levels.len());
    let mut shown = vec![false; kept.levels.len()];
    // `kept.levels` is in location order: each active location finds its level by a search.
    for loc in active {
        rows.push(match kept.levels.binary_search_by(|l| l.location.cmp(loc)) {
            Ok(i) => {
                shown[i] = true;
                Row::Held(&kept.levels[i])
            }
            Err(_) => Row::Never(*loc),
        });
    }
    // Then the levels at inactive locations, oldest first.
    let mut rest: Vec<&HeldLevel> = kept.levels.iter().zip(&shown).filter(|(_, s)| !**s).map(|(l, _)| l).collect();
    rest.sort_by_key(|l| (l.created_at, l.location));
    rows.extend(rest.into_iter().map(Row::Held));
    if let Some((_, locs)) = q.filters.iter().find(|(i, _)| *i == 1) {
        rows.retain(|row| locs.iter().any(|b| b.as_slice() == row.location().as_bytes()));
    }
    let total = rows.len() as u64;
    let cut: Vec<Row> = rows.into_iter().skip(q.offset).take(q.limit).collect();
    let never = never_held_prefix(variant, kept.product);
    crate::http::page_json(&cut, total, page, limit, LevelView::JSON_BYTES, |out, row| match row {
        Row::Held(level) => out.raw(level.json),
        Row::Never(loc) => {
            out.raw(&never);
            out.uuid(b"", loc);
            out.raw(NEVER_HELD_REST);
        }
    })
}

/// A row of the page: a level's view as kept, or a location that never held the variant.
enum Row<'a> {
    Held(&'a HeldLevel<'a>),
    Never(Uuid),
}

impl Row<'_> {
    fn location(&self) -> Uuid {
        match self {
            Row::Held(level) => level.location,
            Row::Never(location) => *location,
        }
    }
}

/// The view of a level of the variant at a location that never held it, up to its location's
/// id (`LevelView::never_held`, written as `LevelView::write_json` writes it).
fn never_held_prefix(variant: Uuid, product: Uuid) -> Vec<u8> {
    let mut out = JsonOut::with_capacity(96);
    out.uuid(b"{\"variantId\":", &variant);
    out.uuid(b",\"productId\":", &product);
    out.raw(b",\"locationId\":");
    out.buf
}

/// What follows the location's id in such a view.
const NEVER_HELD_REST: &[u8] = b",\"available\":0,\"committed\":0,\"reserved\":0,\"incoming\":0,\"onHand\":0,\"updatedAt\":null}";

/// The variant's levels read from the store's file, as an entry to keep ([`Kept`]); `None` when
/// the store has no such variant (not kept: a variant is made without writing a level).
fn read(cell: &Cell, store: Uuid, variant: Uuid) -> ApiResult<Option<Vec<u8>>> {
    let txn = cell.read()?;
    let mut held: Vec<Level> = Vec::new();
    crate::storage::read::walk(&txn, LEVELS, &variant_prefix(store, variant), false, |_, v| {
        held.push(decode(v)?);
        Ok(true)
    })?;
    let product = match held.first() {
        Some(l) => l.product_id,
        None => match crate::storage::read::get_raw(&txn, VARIANTS, Key::store(store).id(variant).bytes())?
            .and_then(|b| Uuid::from_slice(&b).ok())
        {
            Some(p) => p,
            None => return Ok(None),
        },
    };
    Ok(Some(Kept::bytes(product, &held)))
}

/// A variant's kept levels: its product's id (16 bytes), then for each level in location order
/// its location's id (16), `created_at` (i64 LE), its view's length (u32 LE) and the view's JSON.
struct Kept<'a> {
    product: Uuid,
    levels: Vec<HeldLevel<'a>>,
}

struct HeldLevel<'a> {
    location: Uuid,
    created_at: i64,
    json: &'a [u8],
}

impl<'a> Kept<'a> {
    fn bytes(product: Uuid, levels: &[Level]) -> Vec<u8> {
        let mut out = JsonOut::with_capacity(16 + levels.len() * (28 + LevelView::JSON_BYTES));
        out.raw(product.as_bytes());
        for l in levels {
            out.raw(l.location_id.as_bytes());
            out.raw(&l.created_at.to_le_bytes());
            let at = out.buf.len();
            out.raw(&[0; 4]);
            l.view().write_json(&mut out);
            let len = (out.buf.len() - at - 4) as u32;
            out.buf[at..at + 4].copy_from_slice(&len.to_le_bytes());
        }
        out.buf
    }

    /// The entry's parts; `None` if it is cut short (it never is: the cell made it).
    fn parse(bytes: &'a [u8]) -> Option<Kept<'a>> {
        let (product, mut rest) = bytes.split_at_checked(16)?;
        let mut levels = Vec::new();
        while !rest.is_empty() {
            let (location, tail) = rest.split_at_checked(16)?;
            let (created_at, tail) = tail.split_at_checked(8)?;
            let (len, tail) = tail.split_at_checked(4)?;
            let len = u32::from_le_bytes(len.try_into().ok()?) as usize;
            let (json, tail) = tail.split_at_checked(len)?;
            levels.push(HeldLevel {
                location: Uuid::from_slice(location).ok()?,
                created_at: i64::from_le_bytes(created_at.try_into().ok()?),
                json,
            });
            rest = tail;
        }
        Some(Kept { product: Uuid::from_slice(product).ok()?, levels })
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use uuid::Uuid;

    use super::{Kept, compose};
    use crate::cells::stock::levels::{Level, LevelView};
    use crate::domain::stock::Quantities;
    use crate::http::Page;
    use crate::storage::list::ListQuery;

    /// The page as the levels' views would be listed one by one: a row per active location in
    /// its order (the level there, or zeros), then the levels elsewhere by age, filtered, cut.
    fn by_views(variant: Uuid, product: Uuid, levels: &[Level], active: &[Uuid], q: &ListQuery, page: u32) -> Vec<u8> {
        let at = |loc: &Uuid| levels.iter().find(|l| l.location_id == *loc);
        let mut rows: Vec<LevelView> =
            active.iter().map(|loc| at(loc).map_or_else(|| LevelView::never_held(variant, product, *loc), Level::view)).collect();
        let mut rest: Vec<&Level> = levels.iter().filter(|l| !active.contains(&l.location_id)).collect();
        rest.sort_by_key(|l| (l.created_at, l.location_id));
        rows.extend(rest.into_iter().map(Level::view));
        if let Some((_, locs)) = q.filters.iter().find(|(i, _)| *i == 1) {
            rows.retain(|r| locs.iter().any(|b| b.as_slice() == r.location_id.as_bytes()));
        }
        let total = rows.len() as u64;
        let data = rows.into_iter().skip(q.offset).take(q.limit).collect();
        serde_json::to_vec(&Page::new(data, total, page, q.limit as u32)).unwrap()
    }

    proptest! {
        /// Composed from the kept views, the page is byte for byte the page of the views.
        #[test]
        fn a_page_composed_from_kept_levels_is_the_page_of_their_views(
            places in proptest::collection::vec(any::<u128>(), 0..10),
            held in proptest::collection::vec((any::<bool>(), 0i64..1_000, 0i64..1_000, 0i64..3, 0i64..253_402_300_800_000), 10),
            active in proptest::collection::vec(any::<prop::sample::Index>(), 0..10),
            only in proptest::option::of(proptest::collection::vec(any::<prop::sample::Index>(), 0..3)),
            offset in 0usize..12,
            limit in 1usize..12,
        ) {
            let (variant, product) = (Uuid::from_u128(1), Uuid::from_u128(2));
            let mut places: Vec<Uuid> = places.into_iter().map(Uuid::from_u128).collect();
            places.sort();
            places.dedup();
            // Levels in location order, as the range holds them.
            let levels: Vec<Level> = places
                .iter()
                .zip(&held)
                .filter(|(_, h)| h.0)
                .map(|(loc, &(_, available, committed, created_at, updated_at))| Level {
                    id: Uuid::from_u128(3),
                    variant_id: variant,
                    product_id: product,
                    location_id: *loc,
                    quantities: Quantities { available, committed, ..Default::default() },
                    created_at,
                    updated_at,
                })
                .collect();
            let mut order: Vec<Uuid> = Vec::new();
            if !places.is_empty() {
                for i in &active {
                    let loc = places[i.index(places.len())];
                    if !order.contains(&loc) {
                        order.push(loc);
                    }
                }
            }
            let mut filters = vec![(0, vec![variant.as_bytes().to_vec()])];
            if let Some(only) = only.filter(|_| !places.is_empty()) {
                filters.push((1, only.iter().map(|i| places[i.index(places.len())].as_bytes().to_vec()).collect()));
            }
            let q = ListQuery { offset, limit, filters, ..Default::default() };
            let page = (offset / limit) as u32 + 1;
            let bytes = Kept::bytes(product, &levels);
            let kept = Kept::parse(&bytes).unwrap();
            let composed = compose(variant, &kept, &order, &q, page, limit as u32);
            let expected = by_views(variant, product, &levels, &order, &q, page);
            prop_assert_eq!(String::from_utf8_lossy(&composed), String::from_utf8_lossy(&expected));
        }
    }

    #[test]
    fn a_kept_entry_cut_short_does_not_parse() {
        let level = Level {
            id: Uuid::from_u128(3),
            variant_id: Uuid::from_u128(1),
            product_id: Uuid::from_u128(2),
            location_id: Uuid::from_u128(4),
            quantities: Quantities { available: 5, ..Default::default() },
            created_at: 7,
            updated_at: 9,
        };
        let bytes = Kept::bytes(Uuid::from_u128(2), &[level]);
        assert_eq!(Kept::parse(&bytes).map(|k| k.levels.len()), Some(1));
        for cut in 1..bytes.len() {
            assert!(Kept::parse(&bytes[..cut]).is_none_or(|k| k.levels.is_empty() && cut == 16), "cut at {cut}");
        }
    }
}
