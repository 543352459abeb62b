//! `GET S/products/selection`: the simplified product list used to pick products for a catalog
//! or collection, offset style, newest first.
//!
//! It reads the search index, so its filters combine in one pass at any store size; like search
//! it trails writes by well under a second.

use std::collections::HashSet;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::Serialize;
use uuid::Uuid;

use crate::cells::Cell;
use crate::cells::collections;
use crate::cells::product_search;
use crate::domain::money::Money;
use crate::domain::product::Status;
use crate::error::{ApiError, ApiResult, Code};
use crate::handler;
use crate::http::OffsetPage;
use crate::http::query::{LIMIT_DEFAULT, LIMIT_MAX, Query};
use crate::http::reply::{Borrowed, Rendered};
use crate::http::route::{Access, Param, QueryParams, Service, param};
use crate::node::context::{Ctx, Route};
use crate::search::MAX_OFFSET;
use crate::search::query::{SearchBy, SearchRequest, Sort, fingerprint};

/// The query parameters it reads.
fn query_params() -> Vec<Param> {
    vec![
        param("offset", "integer", "products skipped, default 0 (offset + limit at most 10000)").range(0, MAX_OFFSET as i64 - 1),
        param("limit", "integer", "page size, 1..250, default 20").range(1, 250),
        param("status", "string", "DRAFT, ACTIVE or ARCHIVED (any case)").one_of(Status::NAMES),
        param("productType", "string", "exact product type, any case"),
        param("collection", "string", "a collection id: only its products").format("uuid"),
        param("search", "string", "part of the product name (typo-tolerant) or a SKU (exact or prefix)"),
    ]
}

pub fn routes() -> Vec<Route> {
    vec![
        Route::get(
            "/stores/{storeId}/products/selection",
            Service::Cell,
            Access::Member,
            handler!(selection),
            "Products for catalog selection (simplified)",
        )
        .id("listProductsForSelection"),
    ]
}

/// One product as the selection list shows it.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SelectionItem<'a> {
    pub id: Uuid,
    pub title: &'a str,
    /// `DRAFT`, `ACTIVE` or `ARCHIVED`.
    pub status: &'static str,
    pub product_type: &'a str,
    pub price: Money,
    /// Media are not attached to products yet; always `null` until they are.
    pub image_url: Option<&'a str>,
    pub variants_count: usize,
}

impl Borrowed for SelectionItem<'_> {
    type Static = SelectionItem<'static>;
}

/// The selection list's query.
pub struct SelectionQuery {
    limit: usize,
    offset: usize,
    status: Option<Status>,
    product_type: Option<String>,
    collection: Option<Uuid>,
    search: Option<String>,
}

impl QueryParams for SelectionQuery {
    fn params() -> Vec<Param> {
        query_params()
    }

    fn parse(q: &Query) -> ApiResult<Self> {
        let limit = q.int("limit", LIMIT_DEFAULT.into(), 1, LIMIT_MAX.into())? as usize;
        let offset = q.int("offset", 0, 0, (MAX_OFFSET - limit) as i64)? as usize;
        let status = q.one_of_any_case("status", Status::NAMES)?.and_then(Status::parse);
        let product_type = match q.str("productType").map(str::trim) {
            Some(t) if t.chars().count() > 255 => return Err(ApiError::field("productType", "must be at most 255 characters")),
            t => t.filter(|t| !t.is_empty()).map(str::to_string),
        };
        let collection = q.uuid("collection")?;
        let search = crate::api::search::term(q, "search")?.map(str::to_string);
        Ok(SelectionQuery { limit, offset, status, product_type, collection, search })
    }
}

/// The `collection` filter: the ids of the collection's products. An unknown collection is a
/// 400 naming the parameter (it is a filter value, not the resource addressed).
fn collection_members(cell: &Cell, store: Uuid, collection: Uuid) -> ApiResult<Arc<HashSet<u128>>> {
    match collections::collection_product_ids(cell, store, collection, 0, usize::MAX) {
        Ok(ids) => Ok(Arc::new(ids.into_iter().map(|id| id.as_u128()).collect())),
        Err(e) if e.code == Code::NOT_FOUND => Err(ApiError::field("collection", "no such collection in this store")),
        Err(e) => Err(e),
    }
}

async fn selection(cx: Ctx, q: SelectionQuery) -> ApiResult<Rendered<OffsetPage<SelectionItem<'static>>>> {
    let s = cx.scope()?;
    let SelectionQuery { limit, offset, status, product_type, collection, search } = q;
    let allowed = collection.map(|c| collection_members(&s.cell, s.id, c)).transpose()?;
    let req = SearchRequest {
        store: s.id,
        terms: search.map(|t| vec![(t, SearchBy::All)]).unwrap_or_default(),
        status,
        product_type,
        allowed,
        sort: Sort::CreatedDesc,
        offset,
        limit,
        after: None,
    };
    let (products, hits) = product_search::search_products(&s.cell, &req, fingerprint(&[]))?;
    let data: Vec<SelectionItem<'_>> = products
        .iter()
        .map(|p| SelectionItem {
            id: p.id,
            title: &p.title,
            status: p.status.name(),
            product_type: &p.product_type,
            price: Money { amount: p.price(), currency: p.currency },
            image_url: None,
            variants_count: p.variants.len(),
        })
        .collect();
    let limit = limit as u64;
    Rendered::view(&OffsetPage::new(data, hits.total, offset as u64, limit))
}
