//! `S/catalogs`: what a market sells and its price adjustment. Lists are offset style.

use serde::Serialize;

use crate::cells::catalogs::{CatalogFilter, SORT_FIELDS, Window};
use crate::domain::catalog::{CatalogStatus, CreateCatalog, UpdateCatalog};
use crate::domain::collection::ProductIds;
use crate::domain::money::Money;
use crate::domain::product::ProductView;
use crate::error::ApiResult;
use crate::handler;
use crate::http::context::Ctx;
use crate::http::query::{LIMIT_DEFAULT, LIMIT_MAX, Query};
use crate::http::route::{Access, Param, Route, Service, param};
use crate::http::{OffsetPage, Resp, created, no_content, ok};

/// Largest `offset` accepted: far beyond any real catalog page, and a bound on a walk's cost.
const MAX_OFFSET: i64 = 1_000_000;

const LIST_PARAMS: &[Param] = &[
    param("offset", "integer", "catalogs skipped, default 0"),
    param("limit", "integer", "page size, 1..250, default 20"),
    param("sortBy", "string", "name, updated (default), products"),
    param("sortOrder", "string", "asc or desc (default)"),
    param("marketId", "string", "only catalogs of this market"),
    param("status", "string", "active, inactive, draft, or all (default: no filter)"),
    param("search", "string", "part of the catalog name, any case"),
];

const PRODUCT_PARAMS: &[Param] = &[
    param("offset", "integer", "products skipped, default 0"),
    param("limit", "integer", "page size, 1..250, default 20"),
    param("sortOrder", "string", "desc (default, newest products first) or asc"),
];

pub fn routes() -> Vec<Route> {
    use Access::Member;
    use Service::Cell;
    let p = "/stores/{storeId}/catalogs";
    let one = "/stores/{storeId}/catalogs/{catalogId}";
    let products = "/stores/{storeId}/catalogs/{catalogId}/products";
    vec![
        Route::get(p, Cell, Member, handler!(list), "List catalogs (offset style)").query(LIST_PARAMS),
        Route::post(p, Cell, Member, handler!(create), "Create a catalog for a market").body::<CreateCatalog>(),
        Route::get(one, Cell, Member, handler!(get), "One catalog"),
        Route::patch(one, Cell, Member, handler!(update), "Change a catalog").body::<UpdateCatalog>(),
        Route::delete(one, Cell, Member, handler!(delete), "Delete a catalog"),
        Route::get(products, Cell, Member, handler!(list_products), "The catalog's effective products (offset style)")
            .query(PRODUCT_PARAMS),
        Route::post(
            products,
            Cell,
            Member,
            handler!(add_products),
            "Add products: SPECIFIC inserts inclusion entries, ALL deletes exclusion entries",
        )
        .body::<ProductIds>(),
        Route::post(
            "/stores/{storeId}/catalogs/{catalogId}/products/remove",
            Cell,
            Member,
            handler!(remove_products),
            "Remove products: SPECIFIC deletes inclusion entries, ALL inserts exclusion entries",
        )
        .body::<ProductIds>(),
    ]
}

/// `offset`, `limit`, `sortBy` and `sortOrder` of an offset-style list (`sortBy` only where
/// the list has sort fields).
fn window(q: &Query, sort: Option<(&[&'static str], &'static str)>) -> ApiResult<Window> {
    Ok(Window {
        offset: q.int("offset", 0, 0, MAX_OFFSET)? as usize,
        limit: q.int("limit", LIMIT_DEFAULT.into(), 1, LIMIT_MAX.into())? as usize,
        sort_by: match sort {
            Some((fields, default)) => q.one_of("sortBy", fields)?.unwrap_or(default),
            None => "",
        },
        desc: q.one_of("sortOrder", &["asc", "desc"])?.unwrap_or("desc") == "desc",
    })
}

fn envelope<T: Serialize>(data: Vec<T>, total: u64, w: &Window) -> OffsetPage<T> {
    OffsetPage::new(data, total, w.offset as u64, w.limit as u64)
}

async fn list(cx: Ctx) -> ApiResult<Resp> {
    let s = cx.scope()?;
    let q = &cx.query;
    let w = window(q, Some((SORT_FIELDS, "updated")))?;
    let status = match q.one_of("status", &["active", "inactive", "draft", "all"])? {
        Some("all") | None => None,
        Some(name) => CatalogStatus::parse(name),
    };
    let filter = CatalogFilter {
        market: q.uuid("marketId")?,
        status,
        search: q.str("search").map(|t| t.trim().to_lowercase()).filter(|t| !t.is_empty()),
    };
    let (catalogs, total) = s.cell.list_catalogs(s.id, &filter, &w)?;
    let data: Vec<_> = catalogs.iter().map(|c| c.view()).collect();
    Ok(ok(&envelope(data, total, &w)))
}

async fn create(cx: Ctx) -> ApiResult<Resp> {
    let s = cx.scope()?;
    let body: CreateCatalog = cx.json()?;
    let c = s.cell.create_catalog(s.id, body).await?;
    Ok(created(&c.view()))
}

async fn get(cx: Ctx) -> ApiResult<Resp> {
    let s = cx.scope()?;
    let c = s.cell.catalog(s.id, cx.path_id("catalogId")?)?;
    Ok(ok(&c.view()))
}

async fn update(cx: Ctx) -> ApiResult<Resp> {
    let s = cx.scope()?;
    let id = cx.path_id("catalogId")?;
    let body: UpdateCatalog = cx.json()?;
    let c = s.cell.update_catalog(s.id, id, body).await?;
    Ok(ok(&c.view()))
}

async fn delete(cx: Ctx) -> ApiResult<Resp> {
    let s = cx.scope()?;
    s.cell.delete_catalog(s.id, cx.path_id("catalogId")?).await?;
    Ok(no_content())
}

/// A product of a catalog: the product with its price after the catalog's adjustment.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct CatalogProduct<'a> {
    #[serde(flatten)]
    product: ProductView<'a>,
    catalog_price: Money,
}

async fn list_products(cx: Ctx) -> ApiResult<Resp> {
    let s = cx.scope()?;
    let c = s.cell.catalog(s.id, cx.path_id("catalogId")?)?;
    let w = window(&cx.query, None)?;
    let products = s.cell.catalog_products(s.id, &c, w.offset, w.limit, w.desc)?;
    let data: Vec<_> = products
        .iter()
        .map(|p| CatalogProduct {
            product: p.view(),
            catalog_price: c.price_of(Money { amount: p.price(), currency: p.currency }),
        })
        .collect();
    Ok(ok(&envelope(data, c.products, &w)))
}

async fn add_products(cx: Ctx) -> ApiResult<Resp> {
    let s = cx.scope()?;
    let id = cx.path_id("catalogId")?;
    let body: ProductIds = cx.json()?;
    let c = s.cell.add_catalog_products(s.id, id, body.product_ids).await?;
    Ok(ok(&c.view()))
}

async fn remove_products(cx: Ctx) -> ApiResult<Resp> {
    let s = cx.scope()?;
    let id = cx.path_id("catalogId")?;
    let body: ProductIds = cx.json()?;
    let c = s.cell.remove_catalog_products(s.id, id, body.product_ids).await?;
    Ok(ok(&c.view()))
}
