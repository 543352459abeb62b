//! Catalogs in a cell. [`write_catalog`] is the one function that writes a catalog row and its
//! secondary rows (list orders, counter); [`set_entry`] is the one writer of a product entry.
//!
//! `products` on the record is the size of the effective set, kept in step by entry writes and,
//! through [`on_product_write`], by product creates and deletes in the same transaction.

use std::sync::Arc;

use uuid::Uuid;

use crate::cells::Cell;
use crate::cells::collections::check_products_exist;
use crate::domain::catalog::*;
use crate::domain::collection::{MAX_PRODUCT_IDS, check_product_ids};
use crate::domain::product::Product;
use crate::error::{ApiError, ApiResult};
use crate::storage::codec::{decode, encode};
use crate::storage::keys::{Key, trailing_id};
use crate::storage::read;
use crate::storage::tables::{CATALOG_ORDER, CATALOG_PRODUCTS, CATALOGS, COUNTERS, PRODUCTS};
use crate::storage::writer::{Rows, Tx};

/// The sortable fields of the catalog list, in index-field order.
pub const SORT_FIELDS: &[&str] = &["name", "updated", "products"];

/// Index scopes: every catalog of the store, and per market.
const EVERY: u8 = 0;
const BY_MARKET: u8 = 1;

fn row_key(store: Uuid, id: Uuid) -> Vec<u8> {
    Key::store(store).id(id).into_vec()
}

fn counter_key(store: Uuid) -> Vec<u8> {
    Key::store(store).str("catalogs").into_vec()
}

fn entry_key(store: Uuid, catalog: Uuid, product: Uuid) -> Vec<u8> {
    Key::store(store).id(catalog).id(product).into_vec()
}

fn scope_prefix(store: Uuid, field: u8, market: Option<Uuid>) -> Key {
    match market {
        Some(m) => Key::store(store).u8(field).u8(BY_MARKET).id(m),
        None => Key::store(store).u8(field).u8(EVERY),
    }
}

/// Every list row of a catalog; the value (status, selection, lower-cased name) filters walks.
fn order_rows(store: Uuid, c: &Catalog) -> Rows {
    let mut value = vec![c.status as u8, c.selection as u8];
    value.extend_from_slice(c.name.to_lowercase().as_bytes());
    let name: String = c.name.to_lowercase().chars().take(64).collect();
    let mut rows = Vec::with_capacity(SORT_FIELDS.len() * 2);
    for market in [None, Some(c.market_id)] {
        for field in 0..SORT_FIELDS.len() as u8 {
            let k = scope_prefix(store, field, market);
            let k = match field {
                0 => k.str(&name),
                1 => k.i64(c.updated_at),
                _ => k.u64(c.products),
            };
            rows.push((k.id(c.id).into_vec(), value.clone()));
        }
    }
    rows
}

/// Writes `new` in place of `old` (either may be absent) with every secondary row.
pub fn write_catalog(tx: &mut Tx, store: Uuid, old: Option<&Catalog>, new: Option<&Catalog>) -> ApiResult<()> {
    let rows = |c: Option<&Catalog>| c.map(|c| order_rows(store, c)).unwrap_or_default();
    tx.sync_rows(CATALOG_ORDER, &rows(old), &rows(new))?;
    match (old, new) {
        (None, Some(n)) => {
            tx.bump(COUNTERS, &counter_key(store), 1)?;
            tx.put(CATALOGS, &row_key(store, n.id), &encode(n)?)
        }
        (Some(_), Some(n)) => tx.put(CATALOGS, &row_key(store, n.id), &encode(n)?),
        (Some(o), None) => {
            tx.bump(COUNTERS, &counter_key(store), -1)?;
            tx.delete(CATALOGS, &row_key(store, o.id))
        }
        (None, None) => Ok(()),
    }
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

/// Whether any catalog names `market` (a market in use cannot be deleted).
pub(crate) fn market_in_use(tx: &Tx, store: Uuid, market: Uuid) -> ApiResult<bool> {
    Ok(!tx.scan_prefix(CATALOG_ORDER, scope_prefix(store, 0, Some(market)).bytes(), None, 1)?.is_empty())
}

/// Keeps every catalog's effective count in step with a product create or delete: ALL catalogs
/// gain a new product; a deleted product leaves every catalog along with its entries.
pub fn on_product_write(tx: &mut Tx, store: Uuid, old: Option<&Product>, new: Option<&Product>) -> ApiResult<()> {
    let (created, deleted) = match (old, new) {
        (None, Some(p)) => (Some(p.id), None),
        (Some(p), None) => (None, Some(p.id)),
        _ => return Ok(()),
    };
    for (_, bytes) in tx.scan_prefix(CATALOGS, &Key::store(store).into_vec(), None, usize::MAX)? {
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
            write_catalog(tx, store, Some(&before), Some(&c))?;
        }
    }
    Ok(())
}

fn load(tx: &Tx, store: Uuid, id: Uuid) -> ApiResult<Catalog> {
    let bytes = tx.get(CATALOGS, &row_key(store, id))?.ok_or_else(ApiError::not_found)?;
    decode(&bytes)
}

fn check_market(tx: &Tx, store: Uuid, market: Uuid) -> ApiResult<()> {
    if crate::storage::record::exists::<crate::domain::market::Market>(tx, store, market)? {
        Ok(())
    } else {
        Err(ApiError::field("marketId", "no such market in this store"))
    }
}

/// The filters of `GET S/catalogs`.
#[derive(Debug, Default, Clone)]
pub struct CatalogFilter {
    pub market: Option<Uuid>,
    /// `None` = every status (`status=all` or absent).
    pub status: Option<CatalogStatus>,
    /// Lower-cased substring of the name.
    pub search: Option<String>,
}

impl CatalogFilter {
    fn accepts(&self, value: &[u8]) -> bool {
        let [status, _, name @ ..] = value else { return false };
        self.status.is_none_or(|s| s as u8 == *status)
            && self.search.as_deref().is_none_or(|q| String::from_utf8_lossy(name).contains(q))
    }
}

/// One page of an offset-style list.
#[derive(Debug, Clone, Copy)]
pub struct Window {
    pub offset: usize,
    pub limit: usize,
    pub sort_by: &'static str,
    pub desc: bool,
}

impl Cell {
    /// Creates a catalog for a market of the store; an ALL catalog starts with every product.
    pub async fn create_catalog(&self, store: Uuid, input: CreateCatalog) -> ApiResult<Catalog> {
        let draft = build(&input, self.clock.new_id(), self.clock.now_ms())?;
        self.writer
            .write(Some(store), move |tx| {
                check_market(tx, store, draft.market_id)?;
                let mut c = draft.clone();
                if c.selection == Selection::All {
                    c.products = count_products(tx, store)?;
                }
                write_catalog(tx, store, None, Some(&c))?;
                Ok(c)
            })
            .await
    }

    pub fn catalog(&self, store: Uuid, id: Uuid) -> ApiResult<Catalog> {
        read::get(&self.read()?, CATALOGS, &row_key(store, id))?.ok_or_else(ApiError::not_found)
    }

    /// A window of catalogs in the requested order, with the total, from the order index.
    /// Unfiltered totals come from the counter; status and name filters read the index rows'
    /// summaries (catalogs of the store, never its products).
    pub fn list_catalogs(&self, store: Uuid, f: &CatalogFilter, w: &Window) -> ApiResult<(Vec<Catalog>, u64)> {
        let txn = self.read()?;
        let field = SORT_FIELDS.iter().position(|s| *s == w.sort_by).unwrap_or(1) as u8;
        let prefix = scope_prefix(store, field, f.market);
        let mut ids = Vec::with_capacity(w.limit);
        let total = if f.market.is_none() && f.status.is_none() && f.search.is_none() {
            read::scan(&txn, CATALOG_ORDER, prefix.bytes(), w.desc, w.offset, w.limit, |k, _| {
                ids.extend(trailing_id(k));
                Ok(())
            })?;
            read::counter(&txn, COUNTERS, &counter_key(store))?
        } else {
            let (page, total) =
                read::filtered_page(&txn, CATALOG_ORDER, prefix.bytes(), w.desc, w.offset, w.limit, |v| f.accepts(v))?;
            ids = page;
            total
        };
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            if let Some(c) = read::get(&txn, CATALOGS, &row_key(store, id))? {
                out.push(c);
            }
        }
        Ok((out, total))
    }

    /// A window of the effective product set (newest first unless `desc` is false). SPECIFIC
    /// walks its inclusion entries; ALL walks the store's products and skips the exclusions, so a
    /// page costs its offset plus the exclusions passed, never the whole store.
    pub fn catalog_products(&self, store: Uuid, c: &Catalog, offset: usize, limit: usize, desc: bool) -> ApiResult<Vec<Product>> {
        let txn = self.read()?;
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
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            if let Some(p) = read::get(&txn, PRODUCTS, &row_key(store, id))? {
                out.push(p);
            }
        }
        Ok(out)
    }

    /// Changes a catalog. A new `selection` starts its entries afresh: ALL holds every product,
    /// SPECIFIC none.
    pub async fn update_catalog(&self, store: Uuid, id: Uuid, update: UpdateCatalog) -> ApiResult<Catalog> {
        let now = self.clock.now_ms();
        apply_update(&update, &self.catalog(store, id)?, now)?;
        let update = Arc::new(update);
        self.writer
            .write(Some(store), move |tx| {
                let old = load(tx, store, id)?;
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
                write_catalog(tx, store, Some(&old), Some(&c))?;
                Ok(c)
            })
            .await
    }

    /// Deletes a catalog with its entries.
    pub async fn delete_catalog(&self, store: Uuid, id: Uuid) -> ApiResult<()> {
        self.writer
            .write(Some(store), move |tx| {
                let old = load(tx, store, id)?;
                tx.delete_prefix(CATALOG_PRODUCTS, &row_key(store, id))?;
                write_catalog(tx, store, Some(&old), None)
            })
            .await
    }

    /// Adds products to the effective set: SPECIFIC inserts inclusion entries, ALL deletes
    /// exclusion entries. Products already in the set are skipped; an id that is not a product
    /// of this store fails the whole request.
    pub async fn add_catalog_products(&self, store: Uuid, id: Uuid, ids: Vec<Uuid>) -> ApiResult<Catalog> {
        self.change_catalog_products(store, id, ids, true).await
    }

    /// Removes products from the effective set: SPECIFIC deletes inclusion entries, ALL inserts
    /// exclusion entries.
    pub async fn remove_catalog_products(&self, store: Uuid, id: Uuid, ids: Vec<Uuid>) -> ApiResult<Catalog> {
        self.change_catalog_products(store, id, ids, false).await
    }

    async fn change_catalog_products(&self, store: Uuid, id: Uuid, ids: Vec<Uuid>, add: bool) -> ApiResult<Catalog> {
        check_product_ids(&ids, Some(MAX_PRODUCT_IDS))?;
        self.catalog(store, id)?;
        let ids = Arc::new(ids);
        let now = self.clock.now_ms();
        self.writer
            .write(Some(store), move |tx| {
                let old = load(tx, store, id)?;
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
                write_catalog(tx, store, Some(&old), Some(&c))?;
                Ok(c)
            })
            .await
    }
}
