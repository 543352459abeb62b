//! A cell's product searches: the search index answers ids, the cell reads what they name.

use std::path::Path;

use uuid::Uuid;

use crate::cells::Cell;
use crate::cells::products::{self, ViewRow};
use crate::domain::product::Product;
use crate::error::{ApiResult, BoxError};
use crate::search::cache;
use crate::search::query::{Hits, SearchRequest};
use crate::storage::codec::decode;
use crate::storage::keys::Key;
use crate::storage::tables::PRODUCTS;

/// One page of a product search, with the products read from redb in hit order. A hit whose
/// row is gone (deleted, its document not yet dropped) is left out.
pub fn search_products(cell: &Cell, req: &SearchRequest, fingerprint: u32) -> ApiResult<(Vec<Product>, Hits)> {
    let hits = cell.search.search(req, fingerprint)?;
    let txn = cell.read()?;
    let table = txn.open_table(PRODUCTS.def)?;
    let mut products = Vec::with_capacity(hits.ids.len());
    for id in &hits.ids {
        if let Some(row) = table.get(Key::store(req.store).id(*id).bytes())? {
            products.push(decode(row.value())?);
        }
    }
    Ok((products, hits))
}

/// The hits of a search with their rendered product views, in hit order. With a status
/// filter, a hit whose product has since changed status (its document not yet refreshed) is
/// left out too: shoppers never see a product the moment it stops being ACTIVE.
pub fn search_product_views(cell: &Cell, req: &SearchRequest, fingerprint: u32) -> ApiResult<(Vec<ViewRow>, Hits)> {
    let hits = cell.search.search(req, fingerprint)?;
    let rows = products::view_rows(cell, req.store, &hits.ids)?;
    let views = rows.into_iter().flatten().map(ViewRow).filter(|v| req.status.is_none_or(|s| v.status() == Some(s))).collect();
    Ok((views, hits))
}

/// The versions a search answer of `store` is computed from (see [`crate::search::cache`]); read before
/// the search, so an answer is never older than its tag.
pub fn search_tag(cell: &Cell, store: Uuid) -> cache::Tag {
    (cell.writer.generations.get(store), cell.search.generation())
}

/// `shopcell admin reindex`: rebuilds the search index of the cell in `cell_dir` from its
/// `cell.redb`, offline (a running cell holds the database lock, so this fails rather than race
/// it). Answers how many products were indexed.
pub fn reindex_offline(cell_dir: &Path) -> Result<u64, BoxError> {
    let path = cell_dir.join("cell.redb");
    let db = crate::storage::open(&path, crate::cells::DATABASE, crate::storage::ONE_OFF_CACHE)
        .map_err(|e| format!("{}: {e} (a running shopcell serving this cell holds it: stop it first)", path.display()))?;
    crate::search::reindex_offline(&db, cell_dir)
}
