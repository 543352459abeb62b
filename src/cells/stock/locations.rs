//! Locations in a cell: the record declaration (list orders, the name and default claims) and
//! the rules of their writes. Every store has exactly one default location, made with it.

use uuid::Uuid;

use crate::cells::Cell;
use crate::cells::events;
use crate::cells::stock::levels;
use crate::domain::stock::{CreateLocation, Location, MAX_LOCATIONS, UpdateLocation};
use crate::error::{ApiError, ApiResult, Code};
use crate::storage::keys::{Key, trailing_id};
use crate::storage::record::{self, Claim, Filter, FilterValue, List, Record, Search, Sort, partition_prefix};
use crate::storage::row_cache::Cached;
use crate::storage::tables::{LOCATION_KEYS, LOCATION_ORDER, LOCATION_WORK, LOCATIONS, StoreTable};
use crate::storage::tx::Tx;

impl Record for Location {
    const TABLE: StoreTable = LOCATIONS;
    const NAME: &'static str = "locations";
    const LIST: List<Self> = List {
        order: Some(LOCATION_ORDER),
        sorts: &[
            // Ties go to the older location: ids are v7, in creation order.
            Sort { name: "priority", tag: 0, key: |l, k| k.i64(i64::from(l.priority)) },
            Sort { name: "name", tag: 1, key: |l, k| k.str(&l.name.to_lowercase().chars().take(64).collect::<String>()) },
            Sort { name: "created_at", tag: 2, key: |l, k| k.i64(l.created_at) },
        ],
        default_sort: "priority",
        summaries: "priority",
        own_order: false,
        filters: &[Filter::names(
            "active",
            &["true", "false"],
            |l| Some(FilterValue::Enum(if l.active { "true" } else { "false" })),
            "Only active (true) or inactive (false) locations",
        )],
        ranges: &[],
        search: Some(Search::new(|l| l.name.to_lowercase(), |text, q, _| text.contains(q), "text in the name")),
    };

    fn id(&self) -> Uuid {
        self.id
    }

    /// The name (unique without regard to case) and, for the default location, the default.
    fn claims(&self, store: Uuid) -> ApiResult<Vec<Claim>> {
        let mut claims = vec![(LOCATION_KEYS, name_key(store, &self.name), self.id.as_bytes().to_vec())];
        if self.default {
            claims.push((LOCATION_KEYS, default_key(store), self.id.as_bytes().to_vec()));
        }
        Ok(claims)
    }
}

fn name_key(store: Uuid, name: &str) -> Vec<u8> {
    Key::store(store).u8(0).str(&name.to_lowercase()).into_vec()
}

fn default_key(store: Uuid) -> Vec<u8> {
    Key::store(store).u8(1).into_vec()
}

/// The partition of the active locations in priority order (filter 0, `active`, is "true").
fn active_prefix(store: Uuid) -> Vec<u8> {
    partition_prefix(store, None, 0, b"true")
}

/// The store's default location, inside a write.
pub fn default_location(tx: &Tx, store: Uuid) -> ApiResult<Location> {
    let id = tx
        .get(LOCATION_KEYS, &default_key(store))?
        .and_then(|b| Uuid::from_slice(&b).ok())
        .ok_or_else(|| ApiError::internal("a store without a default location"))?;
    record::load::<Location>(tx, store, id)?.ok_or_else(|| ApiError::internal("the default location is missing"))
}

/// The locations whose available units are sold online, in priority order, inside a write.
pub fn sellable(tx: &Tx, store: Uuid) -> ApiResult<Vec<Location>> {
    let mut out = Vec::new();
    for (k, _) in tx.scan_prefix(LOCATION_ORDER, &active_prefix(store), None, MAX_LOCATIONS as usize)? {
        if let Some(l) = trailing_id(&k).map(|id| record::load::<Location>(tx, store, id)).transpose()?.flatten()
            && l.sellable()
        {
            out.push(l);
        }
    }
    Ok(out)
}

/// The ids of the active locations in priority order, in a read transaction: the index alone,
/// no record decoded (a variant's levels list one row per active location).
pub fn active_ids(txn: &redb::ReadTransaction, store: Uuid) -> ApiResult<Vec<Uuid>> {
    let mut ids = Vec::new();
    crate::storage::read::walk(txn, LOCATION_ORDER, &active_prefix(store), false, |k, _| {
        ids.extend(trailing_id(k));
        Ok(true)
    })?;
    Ok(ids)
}

/// The active locations of `store` in priority order, from the writer's cache ([`write`] drops
/// it), or read and kept: a variant's levels are listed without a location read.
pub fn active_cached(cell: &Cell, store: Uuid) -> ApiResult<Vec<Uuid>> {
    let cache = &cell.writer.locations;
    // The lookup comes before the read's snapshot: a fill is refused if a location was written
    // between the two.
    let epoch = match cache.get(store, Uuid::nil()) {
        Cached::Hit(ids) => return Ok(ids.chunks_exact(16).filter_map(|b| Uuid::from_slice(b).ok()).collect()),
        Cached::Miss(epoch) => epoch,
    };
    let ids = active_ids(&cell.read()?, store)?;
    let row: Vec<u8> = ids.iter().flat_map(|id| *id.as_bytes()).collect();
    cache.fill(store, Uuid::nil(), epoch, row.into());
    Ok(ids)
}

/// Writes a location in place of `old`: the one writer of locations, which drops the store's
/// cached active locations when the write commits.
fn write(tx: &mut Tx, store: Uuid, old: Option<&Location>, new: &Location) -> ApiResult<()> {
    record::write(tx, store, old, Some(new))?;
    tx.locations_changed(store);
    Ok(())
}

/// Writes the default location of a store being made (its address the store's).
pub fn create_default(tx: &mut Tx, store: Uuid, l: &Location) -> ApiResult<()> {
    write(tx, store, None, l)
}

fn check_name_free(tx: &Tx, store: Uuid, l: &Location) -> ApiResult<()> {
    let holder = tx.get(LOCATION_KEYS, &name_key(store, &l.name))?.and_then(|b| Uuid::from_slice(&b).ok());
    match holder {
        Some(other) if other != l.id => {
            Err(ApiError::field("name", format!("another location is named {:?}", l.name)).with_code(Code::CONFLICT))
        }
        _ => Ok(()),
    }
}

fn event(tx: &mut Tx, store: Uuid, topic: &'static str, l: &Location, now: i64) -> ApiResult<()> {
    events::append_json(tx, store, topic, &l.view(), now)
}

/// Creates a location (at most [`MAX_LOCATIONS`] per store; names unique without regard to case).
pub async fn create(cell: &Cell, store: Uuid, input: CreateLocation) -> ApiResult<Location> {
    let now = cell.clock.now_ms();
    let l = input.location(cell.clock.new_id(), now)?;
    cell.writer
        .write(Some(store), move |tx| {
            if record::count::<Location>(tx, store, None)? >= MAX_LOCATIONS {
                return Err(ApiError::msg(Code::BUSINESS_RULE, format!("a store has at most {MAX_LOCATIONS} locations")));
            }
            check_name_free(tx, store, &l)?;
            write(tx, store, None, &l)?;
            event(tx, store, "location.created", &l, now)?;
            Ok(l.clone())
        })
        .await
}

/// Changes a location. Making it the default takes the flag from the former default; a location
/// with unfinished fulfillment orders or committed, reserved or incoming units stays active
/// (409 naming them); a change of whether its units are sold moves every variant's sellable sum.
pub async fn update(cell: &Cell, store: Uuid, id: Uuid, input: UpdateLocation) -> ApiResult<Location> {
    let now = cell.clock.now_ms();
    // Validate before queueing: a bad field never reaches the writer.
    input.apply(&mut cell.get::<Location>(store, id)?, now)?;
    cell.writer
        .write(Some(store), move |tx| {
            let old = record::must_load::<Location>(tx, store, id)?;
            let mut new = old.clone();
            input.apply(&mut new, now)?;
            check_name_free(tx, store, &new)?;
            if old.active && !new.active {
                ensure_idle(tx, store, &new)?;
            }
            if new.default && !old.default {
                let former = default_location(tx, store)?;
                let mut demoted = former.clone();
                demoted.default = false;
                demoted.updated_at = now;
                write(tx, store, Some(&former), &demoted)?;
                event(tx, store, "location.updated", &demoted, now)?;
            }
            write(tx, store, Some(&old), &new)?;
            if old.sellable() != new.sellable() {
                levels::resell_location(tx, store, id, new.sellable(), now)?;
            }
            event(tx, store, "location.updated", &new, now)?;
            Ok(new)
        })
        .await
}

/// A location being deactivated has no unfinished fulfillment orders and no committed, reserved
/// or incoming units: a 409 naming them otherwise.
fn ensure_idle(tx: &Tx, store: Uuid, l: &Location) -> ApiResult<()> {
    let at = Key::store(store).id(l.id).into_vec();
    let work = tx.scan_prefix(LOCATION_WORK, &at, None, 6)?;
    let mut problems = Vec::new();
    if !work.is_empty() {
        let ids: Vec<String> = work.iter().take(5).filter_map(|(k, _)| trailing_id(k)).map(|id| id.to_string()).collect();
        let more = if work.len() > 5 { ", …" } else { "" };
        problems.push(format!("unfinished fulfillment orders {}{more}", ids.join(", ")));
    }
    let busy = levels::busy_variants(tx, store, l.id, 5)?;
    if !busy.is_empty() {
        let names: Vec<String> = busy.iter().map(|v| v.to_string()).collect();
        problems.push(format!("committed, reserved or incoming units of variants {}", names.join(", ")));
    }
    if problems.is_empty() {
        return Ok(());
    }
    Err(ApiError::msg(Code::CONFLICT, format!("location {:?} cannot be deactivated: it has {}", l.name, problems.join(" and "))))
}
