//! Collections in a cell.
//!
//! A collection is a record of the record layer (`storage::record`): `record::write` keeps its
//! list orders, counters and claims (handle, smart rules, schedule, place under its parent) in
//! step; lists go through the one seam (`storage::list`). [`set_member`] is the one writer of a
//! membership (the ordered row and its reverse row). Smart collections follow product writes
//! through [`on_product_write`], called by `products::write_product` in the same transaction.
//! The cell's publisher (`cells::publisher`) publishes scheduled collections when they are due.

use std::sync::Arc;

use uuid::Uuid;

use crate::cells::Cell;
use crate::cells::handles::{handle_key, resolve_handle};
use crate::domain::collection::*;
use crate::domain::product::{Product, slugify, title_key};
use crate::error::{ApiError, ApiResult, Check, Code};
use crate::storage::codec::{decode, encode};
use crate::storage::keys::{Key, prefix_range, trailing_id};
use crate::storage::read;
use crate::storage::record::{self, Claim, Filter, FilterValue, List, Record, Search, Sort, row_key};
use crate::storage::tables::*;
use crate::storage::tx::Tx;

mod members;

pub use members::on_product_write;
use members::{
    add_member, load_live, load_product, members_in_order, placement, refresh_smart, remove_member, resort, reverse_key, segment,
    set_member,
};

/// Products embedded per collection by `includeProducts=true`.
pub const EMBEDDED_PRODUCTS: usize = 5;
/// Parent chains longer than this are refused (and cycle checks stay bounded).
const MAX_DEPTH: usize = 64;
/// Products read per chunk while a smart collection evaluates the whole store.
const CHUNK: usize = 1024;

impl Record for Collection {
    const TABLE: StoreTable = COLLECTIONS;
    const NAME: &'static str = "collections";
    const LIST: List<Self> = List {
        order: Some(COLLECTION_ORDER),
        sorts: &[
            Sort { name: "title", tag: 0, key: |c: &Collection, k| k.str(&title_key(&c.title)) },
            Sort { name: "productCount", tag: 1, key: |c: &Collection, k| k.u64(c.product_count) },
            Sort { name: "createdAt", tag: 2, key: |c: &Collection, k| k.i64(c.created_at) },
            Sort { name: "updatedAt", tag: 3, key: |c: &Collection, k| k.i64(c.updated_at) },
            Sort { name: "position", tag: 4, key: |c: &Collection, k| k.i64(c.position) },
        ],
        default_sort: "createdAt",
        summaries: "updatedAt",
        own_order: false,
        filters: &[
            Filter::hidden(
                "includeDeleted",
                |c: &Collection| FilterValue::shown(c.deleted_at.is_none()),
                "list soft-deleted collections too (with deletedAt)",
            ),
            Filter::enumerated::<CollectionType>(
                "collectionType",
                |c: &Collection| Some(FilterValue::Enum(c.collection_type.name())),
                "collections of these types",
            ),
            Filter::enumerated::<CollectionStatus>(
                "status",
                |c: &Collection| Some(FilterValue::Enum(c.status.name())),
                "collections in these states",
            ),
            Filter::reference(
                "parentId",
                |c: &Collection| Some(FilterValue::Reference(c.parent_id.unwrap_or(Uuid::nil()))),
                "children of these collections",
            )
            .or_none("null"),
        ],
        ranges: &[],
        search: Some(Search::new(
            |c: &Collection| c.title.to_lowercase(),
            |t, q, _| t.contains(q),
            "part of the title, any case",
        )),
    };

    fn id(&self) -> Uuid {
        self.id
    }

    /// A live collection claims its handle, files its rules (smart) or its publication time
    /// (scheduled), and is found under its parent.
    fn claims(&self, store: Uuid) -> ApiResult<Vec<Claim>> {
        if self.deleted_at.is_some() {
            return Ok(Vec::new());
        }
        let mut out = vec![(COLLECTION_HANDLES, handle_key(store, &self.handle), self.id.as_bytes().to_vec())];
        if self.is_live_smart() {
            out.push((COLLECTION_RULES, row_key(store, self.id), encode(&self.rules)?));
        }
        if let (CollectionStatus::Scheduled, Some(at)) = (self.status, self.publish_at) {
            out.push((COLLECTION_SCHEDULE, schedule_key(store, at, self.id), Vec::new()));
        }
        if let Some(parent) = self.parent_id {
            out.push((COLLECTION_CHILDREN, child_key(store, parent, self.id), Vec::new()));
        }
        Ok(out)
    }
}

/// `collection_schedule` key: store ‖ publishAt ‖ collection id.
pub(crate) fn schedule_key(store: Uuid, at: i64, id: Uuid) -> Vec<u8> {
    Key::store(store).i64(at).id(id).into_vec()
}

/// `collection_children` key: store ‖ parent ‖ child.
fn child_key(store: Uuid, parent: Uuid, child: Uuid) -> Vec<u8> {
    Key::store(store).id(parent).id(child).into_vec()
}

// ---- checks inside the writer ---------------------------------------------------------------

/// The parent must be a live collection of the store, and the chain above it must not lead
/// back to `id`.
fn check_parent(tx: &Tx, store: Uuid, id: Uuid, parent: Option<Uuid>) -> ApiResult<()> {
    let Some(mut cur) = parent else { return Ok(()) };
    if cur == id {
        return Err(ApiError::field("parentId", "a collection cannot be its own parent"));
    }
    for depth in 0..MAX_DEPTH {
        let Some(c) = record::load::<Collection>(tx, store, cur)? else {
            return Err(ApiError::field("parentId", "no such collection in this store"));
        };
        if c.deleted_at.is_some() {
            return Err(ApiError::field("parentId", "no such collection in this store"));
        }
        match c.parent_id {
            Some(next) if next == id => {
                return Err(ApiError::field("parentId", "would make a cycle: the parent is inside this collection"));
            }
            Some(next) => cur = next,
            None => return Ok(()),
        }
        if depth + 1 == MAX_DEPTH {
            break;
        }
    }
    Err(ApiError::field("parentId", format!("collections nest at most {MAX_DEPTH} deep")))
}

/// One product id's change to a manual collection's members.
type MemberStep = fn(&mut Tx, Uuid, &mut Collection, Uuid) -> ApiResult<()>;

/// The collection's handle (see `handles::resolve_handle`); an untitled slug reads "collection".
fn collection_handle(tx: &Tx, store: Uuid, id: Uuid, requested: Option<&str>, title: &str) -> ApiResult<String> {
    let base = match slugify(title).as_str() {
        "product" => "collection".to_string(),
        s => s.to_string(),
    };
    resolve_handle(tx, COLLECTION_HANDLES, store, id, requested, &base, "collection")
}

/// Every id must name a product of this store; each one that does not is named `productIds[i]`,
/// so an id of another store is refused like an unknown one.
pub(crate) fn check_products_exist(tx: &Tx, store: Uuid, ids: &[Uuid]) -> ApiResult<()> {
    let mut c = Check::new();
    for (i, id) in ids.iter().enumerate() {
        if tx.get(PRODUCTS, &row_key(store, *id))?.is_none() {
            c.fail(&format!("productIds[{i}]"), "no such product in this store");
        }
    }
    c.finish()
}

fn manual_only(c: &Collection) -> ApiResult<()> {
    if c.collection_type == CollectionType::Smart {
        return Err(ApiError::msg(
            Code::BUSINESS_RULE,
            "the products of a smart collection follow its rules; change the rules instead",
        ));
    }
    Ok(())
}

// ---- what shoppers see ----------------------------------------------------------------------

/// The ACTIVE members of `c` in its order, `skip` then `take`, and (when `count`) how many there
/// are. Each member's status is the first byte of its stored product view, so this reads index
/// rows and one short row per member, never a product record; without `count` the walk stops
/// at the end of the page.
fn active_members(
    txn: &redb::ReadTransaction,
    store: Uuid,
    c: &Collection,
    skip: usize,
    take: usize,
    count: bool,
) -> ApiResult<(Vec<Uuid>, u64)> {
    let views = txn.open_table(PRODUCT_VIEWS.def)?;
    let active = crate::domain::product::Status::Active as u8;
    let window = skip as u64..skip.saturating_add(take) as u64;
    let mut ids = Vec::with_capacity(take.min(256));
    let mut seen = 0u64;
    let members = txn.open_table(COLLECTION_PRODUCTS.def)?;
    let prefix = row_key(store, c.id);
    let (start, end) = prefix_range(&prefix);
    let range = match &end {
        Some(end) => members.range(start.as_slice()..end.as_slice())?,
        None => members.range(start.as_slice()..)?,
    };
    let rows: Box<dyn Iterator<Item = _>> = if c.sort_order.kind().1 { Box::new(range.rev()) } else { Box::new(range) };
    for row in rows {
        if !count && seen >= window.end {
            break;
        }
        let (k, _) = row?;
        let Some(pid) = trailing_id(k.value()) else { continue };
        let is_active = views.get(row_key(store, pid).as_slice())?.is_some_and(|v| v.value().first() == Some(&active));
        if is_active {
            if window.contains(&seen) {
                ids.push(pid);
            }
            seen += 1;
        }
    }
    Ok((ids, seen))
}

/// The product records of `ids`, in order (a member whose row is gone is left out).
fn load_products(txn: &redb::ReadTransaction, store: Uuid, ids: Vec<Uuid>) -> ApiResult<Vec<Product>> {
    read::get_each(txn, PRODUCTS, ids.into_iter().map(|id| row_key(store, id)))
}

// ---- the cell's operations ------------------------------------------------------------------

/// Creates a collection; a smart one is filled from every product of the store at once.
pub async fn create_collection(cell: &Cell, store: Uuid, input: CreateCollection) -> ApiResult<Collection> {
    let draft = build(&input, cell.clock.new_id(), cell.clock.now_ms())?;
    let requested = input.handle;
    let position = input.position;
    let c = cell
        .writer
        .write(Some(store), move |tx| {
            let mut c = draft.clone();
            check_parent(tx, store, c.id, c.parent_id)?;
            c.handle = collection_handle(tx, store, c.id, requested.as_deref(), &c.title)?;
            if position.is_none() {
                // After every collection ever made: a new one lands last in `sortBy=position`.
                let all = record::count::<Collection>(tx, store, None)?;
                c.position = i64::try_from(all).unwrap_or(MAX_POSITION).min(MAX_POSITION);
            }
            if c.collection_type == CollectionType::Smart {
                refresh_smart(tx, store, &mut c)?;
            }
            record::write(tx, store, None, Some(&c))?;
            Ok(c)
        })
        .await?;
    if c.status == CollectionStatus::Scheduled {
        cell.publisher.wake();
    }
    Ok(c)
}

/// One collection; a deleted one only when `include_deleted`.
pub fn collection(cell: &Cell, store: Uuid, id: Uuid, include_deleted: bool) -> ApiResult<Collection> {
    let c = cell.get::<Collection>(store, id)?;
    if c.deleted_at.is_some() && !include_deleted {
        return Err(ApiError::not_found());
    }
    Ok(c)
}

/// The products of a collection in its order: `skip` then `take`; with `active_only` (shoppers),
/// only its ACTIVE products, skipped and taken among themselves.
pub fn collection_products(
    cell: &Cell,
    store: Uuid,
    c: &Collection,
    skip: usize,
    take: usize,
    active_only: bool,
) -> ApiResult<Vec<Product>> {
    let txn = cell.read()?;
    let ids = if active_only {
        active_members(&txn, store, c, skip, take, false)?.0
    } else {
        let mut ids = Vec::with_capacity(take.min(256));
        read::scan(&txn, COLLECTION_PRODUCTS, &row_key(store, c.id), c.sort_order.kind().1, skip, take, |k, _| {
            ids.extend(trailing_id(k));
            Ok(())
        })?;
        ids
    };
    load_products(&txn, store, ids)
}

/// A page of a collection's ACTIVE products (what shoppers see) and how many there are.
pub fn active_collection_page(
    cell: &Cell,
    store: Uuid,
    c: &Collection,
    skip: usize,
    take: usize,
) -> ApiResult<(Vec<Product>, u64)> {
    let txn = cell.read()?;
    let (ids, total) = active_members(&txn, store, c, skip, take, true)?;
    Ok((load_products(&txn, store, ids)?, total))
}

/// How many of a collection's products are ACTIVE: its `productCount` as shoppers see it.
pub fn active_product_count(cell: &Cell, store: Uuid, c: &Collection) -> ApiResult<u64> {
    Ok(active_members(&cell.read()?, store, c, 0, 0, true)?.1)
}

/// Whether `product` is in `collection` (for the `collection` filter of product lists).
pub fn collection_contains(cell: &Cell, store: Uuid, collection: Uuid, product: Uuid) -> ApiResult<bool> {
    Ok(read::get_raw(&cell.read()?, PRODUCT_COLLECTIONS, &reverse_key(store, product, collection))?.is_some())
}

/// The ids of a collection's products in its order, `skip` then `take`, from the index alone.
pub fn collection_product_ids(cell: &Cell, store: Uuid, collection: Uuid, skip: usize, take: usize) -> ApiResult<Vec<Uuid>> {
    let c = self::collection(cell, store, collection, false)?;
    let mut ids = Vec::with_capacity(take.min(256));
    read::scan(&cell.read()?, COLLECTION_PRODUCTS, &row_key(store, c.id), c.sort_order.kind().1, skip, take, |k, _| {
        ids.extend(trailing_id(k));
        Ok(())
    })?;
    Ok(ids)
}

pub async fn update_collection(cell: &Cell, store: Uuid, id: Uuid, update: UpdateCollection) -> ApiResult<Collection> {
    let now = cell.clock.now_ms();
    apply_update(&update, &collection(cell, store, id, false)?, now)?;
    let update = Arc::new(update);
    let c = cell
        .writer
        .write(Some(store), move |tx| {
            let old = load_live(tx, store, id)?;
            let mut c = apply_update(&update, &old, now)?;
            if update.parent_id.is_some() {
                check_parent(tx, store, id, c.parent_id)?;
            }
            if let Some(h) = &update.handle {
                c.handle = collection_handle(tx, store, id, Some(h), &c.title)?;
            }
            // Rows keyed by another kind are re-keyed, read in the old display order.
            if c.sort_order.kind().0 != old.sort_order.kind().0 {
                let order = c.sort_order;
                c.sort_order = old.sort_order;
                resort(tx, store, &mut c, order)?;
            }
            if c.collection_type == CollectionType::Smart && c.rules != old.rules {
                refresh_smart(tx, store, &mut c)?;
            }
            record::write(tx, store, Some(&old), Some(&c))?;
            Ok(c)
        })
        .await?;
    if c.status == CollectionStatus::Scheduled {
        cell.publisher.wake();
    }
    Ok(c)
}

/// Soft delete: the collection keeps its row with `deletedAt`, leaves the lists, frees its
/// handle, lets go of its products, and its children move up to its parent.
pub async fn delete_collection(cell: &Cell, store: Uuid, id: Uuid) -> ApiResult<()> {
    let now = cell.clock.now_ms();
    cell.writer
        .write(Some(store), move |tx| {
            let old = load_live(tx, store, id)?;
            let mut c = old.clone();
            for pid in members_in_order(tx, store, &old)? {
                remove_member(tx, store, &mut c, pid)?;
            }
            c.deleted_at = Some(now);
            c.updated_at = now;
            let children = Key::store(store).id(id).into_vec();
            for (k, _) in tx.scan_prefix(COLLECTION_CHILDREN, &children, None, usize::MAX)? {
                let Some(child) = trailing_id(&k) else { continue };
                let before = record::must_load::<Collection>(tx, store, child)?;
                let mut moved = before.clone();
                moved.parent_id = old.parent_id;
                moved.updated_at = now;
                record::write(tx, store, Some(&before), Some(&moved))?;
            }
            record::write(tx, store, Some(&old), Some(&c))
        })
        .await
}

/// Adds products to a manual collection (at the end, or in its sort place). Ids already in
/// it are skipped; an id that is not a product of this store fails the whole request.
pub async fn add_collection_products(cell: &Cell, store: Uuid, id: Uuid, ids: Vec<Uuid>) -> ApiResult<Collection> {
    edit_members(cell, store, id, ids, |tx, store, c, pid| match load_product(tx, store, pid)? {
        Some(p) => add_member(tx, store, c, &p).map(|_| ()),
        None => Ok(()),
    })
    .await
}

/// Removes products from a manual collection; products of the store that are not in it are
/// skipped, ids that are not products of this store fail the whole request.
pub async fn remove_collection_products(cell: &Cell, store: Uuid, id: Uuid, ids: Vec<Uuid>) -> ApiResult<Collection> {
    edit_members(cell, store, id, ids, |tx, store, c, pid| remove_member(tx, store, c, pid).map(|_| ())).await
}

/// The frame of an add or remove: checks, then `step` for each id, in one write.
async fn edit_members(cell: &Cell, store: Uuid, id: Uuid, ids: Vec<Uuid>, step: MemberStep) -> ApiResult<Collection> {
    check_product_ids(&ids, Some(MAX_PRODUCT_IDS))?;
    manual_only(&collection(cell, store, id, false)?)?;
    let ids = Arc::new(ids);
    let now = cell.clock.now_ms();
    cell.writer
        .write(Some(store), move |tx| {
            let old = load_live(tx, store, id)?;
            manual_only(&old)?;
            check_products_exist(tx, store, &ids)?;
            let mut c = old.clone();
            for pid in ids.iter() {
                step(tx, store, &mut c, *pid)?;
            }
            if c.product_count != old.product_count {
                c.updated_at = now;
            }
            record::write(tx, store, Some(&old), Some(&c))?;
            Ok(c)
        })
        .await
}

/// Sets the manual order: `ids` must be exactly the collection's products, in the new order.
pub async fn reorder_collection_products(cell: &Cell, store: Uuid, id: Uuid, ids: Vec<Uuid>) -> ApiResult<Collection> {
    check_product_ids(&ids, None)?;
    let ids = Arc::new(ids);
    let now = cell.clock.now_ms();
    cell.writer
        .write(Some(store), move |tx| {
            let old = load_live(tx, store, id)?;
            if old.sort_order != ProductOrder::Manual {
                return Err(ApiError::msg(
                    Code::BUSINESS_RULE,
                    format!("the collection is sorted {}; set sortOrder to manual to order it by hand", old.sort_order.name()),
                ));
            }
            let mut c = Check::new();
            let mut places = Vec::with_capacity(ids.len());
            for (i, pid) in ids.iter().enumerate() {
                match placement(tx, store, id, *pid)? {
                    Some(at) => places.push(at),
                    None => c.fail(&format!("productIds[{i}]"), "is not a product of this collection"),
                }
            }
            if places.len() == ids.len() && ids.len() as u64 != old.product_count {
                c.fail("productIds", format!("must list all {} products of the collection", old.product_count));
            }
            c.finish()?;
            for (i, (pid, at)) in ids.iter().zip(&places).enumerate() {
                let new = (SortKind::Position, segment(SortKind::Position, None, i as i64));
                if &new != at {
                    set_member(tx, store, id, *pid, Some(at), Some(&new))?;
                }
            }
            let mut next = old.clone();
            next.next_position = ids.len() as i64;
            next.updated_at = now;
            record::write(tx, store, Some(&old), Some(&next))?;
            Ok(next)
        })
        .await
}

/// Schedules publication at `publish_at` (RFC 3339, in the future).
pub async fn schedule_collection(cell: &Cell, store: Uuid, id: Uuid, publish_at: String) -> ApiResult<Collection> {
    let now = cell.clock.now_ms();
    schedule(&collection(cell, store, id, false)?, &publish_at, now)?;
    let c = cell
        .writer
        .write(Some(store), move |tx| {
            let old = load_live(tx, store, id)?;
            let c = schedule(&old, &publish_at, now)?;
            record::write(tx, store, Some(&old), Some(&c))?;
            Ok(c)
        })
        .await?;
    cell.publisher.wake();
    Ok(c)
}
