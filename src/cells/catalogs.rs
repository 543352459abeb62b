//! Catalogs in a cell: the record declaration (list orders, the market, status and name filters)
//! and the rules of their writes; [`set_entry`] is the one writer of a product entry.
//!
//! `products` on the record is the size of the effective set, kept in step by entry writes and,
//! through [`on_product_write`], by product creates and deletes in the same transaction.

use uuid::Uuid;

use crate::cells::Cell;
use crate::cells::collections::check_products_exist;
use crate::domain::catalog::*;
use crate::domain::collection::{MAX_PRODUCT_IDS, check_product_ids};
use crate::domain::product::Product;
use crate::error::{ApiError, ApiResult};
use crate::storage::codec::decode;
use crate::storage::keys::{Key, trailing_id};
use crate::storage::read;
use crate::storage::record::{self, Filter, FilterValue, List, Record, Search, Sort, row_key};
use crate::storage::tables::{CATALOG_ORDER, CATALOG_PRODUCTS, CATALOGS, PRODUCTS, StoreTable};
use crate::storage::tx::Tx;

impl Record for Catalog {
    const TABLE: StoreTable = CATALOGS;
    const NAME: &'static str = "catalogs";
    const LIST: List<Self> = List {
        order: Some(CATALOG_ORDER),
        sorts: &[
            Sort { name: "name", tag: 0, key: |c, k| k.str(&c.name.to_lowercase().chars().take(64).collect::<String>()) },
            Sort { name: "updated", tag: 1, key: |c, k| k.i64(c.updated_at) },
            Sort { name: "products", tag: 2, key: |c, k| k.u64(c.products) },
        ],
        default_sort: "updated",
        summaries: "updated",
        own_order: false,
        filters: &[
            Filter::reference("marketId", |c: &Catalog| Some(FilterValue::Reference(c.market_id)), "catalogs of these markets"),
            Filter::enumerated::<CatalogStatus>("status", |c: &Catalog| Some(FilterValue::Enum(c.status.name())), "status")
                .any("all"),
        ],
        ranges: &[],
        search: Some(Search::new(
            |c: &Catalog| c.name.to_lowercase(),
            |name, q, _| name.contains(q),
            "part of the catalog name, any case",
        )),
    };

    fn id(&self) -> Uuid {
        self.id
    }
}

fn entry_key(store: Uuid, catalog: Uuid, product: Uuid) -> Vec<u8> {
    Key::store(store).id(catalog).id(product).into_vec()
}

/// Writes one entry (inclusion for SPECIFIC, exclusion for ALL); answers whether it changed.
fn set_entry(tx: &mut Tx, store: Uuid, catalog: Uuid, product: Uuid, present: bool) -> ApiResult<bool> {
    let key = entry_key(store, catalog, product);
    let was = tx.get(CATALOG_PRODUCTS, &key)?.is_some();
    match (was, present) {
        (false, true) => tx.put(CATALOG_PRODUCTS, &key, &[])?,
        (true, false) => tx.delete(CATALOG_PRODUCTS, &key)?,
        _ => return Ok(false),
    }
    Ok(true)
}

/// How many products the store has, for an ALL catalog's starting count. Counted from the
/// product rows' keys: a rare write (creating or switching a catalog) pays it, never a read.
fn count_products(tx: &Tx, store: Uuid) -> ApiResult<u64> {
    Ok(tx.keys_with_prefix(PRODUCTS, Key::store(store).bytes())?.len() as u64)
}

/// Whether any catalog names `market` (a market in use cannot be deleted): its counter.
pub(crate) fn market_in_use(tx: &Tx, store: Uuid, market: Uuid) -> ApiResult<bool> {
    Ok(record::count_value::<Catalog>(tx, store, "marketId", &FilterValue::Reference(market))? > 0)
}

/// Keeps every catalog's effective count in step with a product create or delete: ALL catalogs
/// gain a new product; a deleted product leaves every catalog along with its entries.
pub fn on_product_write(tx: &mut Tx, store: Uuid, old: Option<&Product>, new: Option<&Product>) -> ApiResult<()> {
    let (created, deleted) = match (old, new) {
        (None, Some(p)) => (Some(p.id), None),
        (Some(p), None) => (None, Some(p.id)),
        _ => return Ok(()),
    };
    for (_, bytes) in tx.scan_prefix(CATALOGS, Key::store(store).bytes(), None, usize::MAX)? {
        let before: Catalog = decode(&bytes)?;
        let mut c = before.clone();
        if created.is_some() && c.selection == Selection::All {
            c.products += 1;
        }
        if let Some(pid) = deleted {
            let had_entry = set_entry(tx, store, c.id, pid, false)?;
            // In an ALL catalog an entry excluded the product, so it was not counted.
            let counted = match c.selection {
                Selection::All => !had_entry,
                Selection::Specific => had_entry,
            };
            if counted {
                c.products = c.products.saturating_sub(1);
            }
        }
        if c != before {
            record::write(tx, store, Some(&before), Some(&c))?;
        }
    }
    Ok(())
}

fn check_market(tx: &Tx, store: Uuid, market: Uuid) -> ApiResult<()> {
    if crate::storage::record::exists::<crate::domain::market::Market>(tx, store, market)? {
        Ok(())
    } else {
        Err(ApiError::field("marketId", "no such market in this store"))
    }
}

/// Creates a catalog for a market of the store; an ALL catalog starts with every product.
pub async fn create(cell: &Cell, store: Uuid, input: CreateCatalog) -> ApiResult<Catalog> {
    let draft = build(&input, cell.clock.new_id(), cell.clock.now_ms())?;
    cell.writer
        .write(Some(store), move |tx| {
            check_market(tx, store, draft.market_id)?;
            let mut c = draft.clone();
            if c.selection == Selection::All {
                c.products = count_products(tx, store)?;
            }
            record::write(tx, store, None, Some(&c))?;
            Ok(c)
        })
        .await
}

/// A window of the effective product set (newest first unless `desc` is false). SPECIFIC
/// walks its inclusion entries; ALL walks the store's products and skips the exclusions, so a
/// page costs its offset plus the exclusions passed, never the whole store.
pub fn products_of(cell: &Cell, store: Uuid, c: &Catalog, offset: usize, limit: usize, desc: bool) -> ApiResult<Vec<Product>> {
    let txn = cell.read()?;
    let mut ids = Vec::with_capacity(limit.min(256));
    match c.selection {
        Selection::Specific => {
            read::scan(&txn, CATALOG_PRODUCTS, &row_key(store, c.id), desc, offset, limit, |k, _| {
                ids.extend(trailing_id(k));
                Ok(())
            })?;
        }
        Selection::All => {
            let entries = txn.open_table(CATALOG_PRODUCTS.def)?;
            let mut seen = 0usize;
            read::scan(&txn, PRODUCTS, Key::store(store).bytes(), desc, 0, usize::MAX, |k, _| {
                if ids.len() >= limit {
                    return Ok(());
                }
                let Some(pid) = trailing_id(k) else { return Ok(()) };
                if entries.get(entry_key(store, c.id, pid).as_slice())?.is_some() {
                    return Ok(());
                }
                if seen >= offset {
                    ids.push(pid);
                }
                seen += 1;
                Ok(())
            })?;
        }
    }
    read::get_each(&txn, PRODUCTS, ids.into_iter().map(|id| row_key(store, id)))
}

/// Changes a catalog. A new `selection` starts its entries afresh: ALL holds every product,
/// SPECIFIC none.
pub async fn update(cell: &Cell, store: Uuid, id: Uuid, update: UpdateCatalog) -> ApiResult<Catalog> {
    let now = cell.clock.now_ms();
    apply_update(&update, &cell.get::<Catalog>(store, id)?, now)?;
    cell.writer
        .write(Some(store), move |tx| {
            let old = record::must_load::<Catalog>(tx, store, id)?;
            let mut c = apply_update(&update, &old, now)?;
            if c.market_id != old.market_id {
                check_market(tx, store, c.market_id)?;
            }
            if c.selection != old.selection {
                tx.delete_prefix(CATALOG_PRODUCTS, &row_key(store, id))?;
                c.products = match c.selection {
                    Selection::All => count_products(tx, store)?,
                    Selection::Specific => 0,
                };
            }
            record::write(tx, store, Some(&old), Some(&c))?;
            Ok(c)
        })
        .await
}

/// Deletes a catalog with its entries.
pub async fn delete(cell: &Cell, store: Uuid, id: Uuid) -> ApiResult<()> {
    cell.writer
        .write(Some(store), move |tx| {
            let old = record::must_load::<Catalog>(tx, store, id)?;
            tx.delete_prefix(CATALOG_PRODUCTS, &row_key(store, id))?;
            record::write(tx, store, Some(&old), None)
        })
        .await
}

/// Adds products to the effective set: SPECIFIC inserts inclusion entries, ALL deletes
/// exclusion entries. Products already in the set are skipped; an id that is not a product
/// of this store fails the whole request.
pub async fn add_products(cell: &Cell, store: Uuid, id: Uuid, ids: Vec<Uuid>) -> ApiResult<Catalog> {
    change_products(cell, store, id, ids, true).await
}

/// Removes products from the effective set: SPECIFIC deletes inclusion entries, ALL inserts
/// exclusion entries.
pub async fn remove_products(cell: &Cell, store: Uuid, id: Uuid, ids: Vec<Uuid>) -> ApiResult<Catalog> {
    change_products(cell, store, id, ids, false).await
}

async fn change_products(cell: &Cell, store: Uuid, id: Uuid, ids: Vec<Uuid>, add: bool) -> ApiResult<Catalog> {
    check_product_ids(&ids, Some(MAX_PRODUCT_IDS))?;
    cell.get::<Catalog>(store, id)?;
    let now = cell.clock.now_ms();
    cell.writer
        .write(Some(store), move |tx| {
            let old = record::must_load::<Catalog>(tx, store, id)?;
            check_products_exist(tx, store, &ids)?;
            // The entry is present exactly when the product is out of an ALL catalog or in a
            // SPECIFIC one.
            let entry = match old.selection {
                Selection::Specific => add,
                Selection::All => !add,
            };
            let mut changed = 0u64;
            for pid in ids.iter() {
                if set_entry(tx, store, id, *pid, entry)? {
                    changed += 1;
                }
            }
            let mut c = old.clone();
            c.products = if add { c.products + changed } else { c.products.saturating_sub(changed) };
            if changed > 0 {
                c.updated_at = now;
            }
            record::write(tx, store, Some(&old), Some(&c))?;
            Ok(c)
        })
        .await
}
