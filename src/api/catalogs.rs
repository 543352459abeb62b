//! `S/catalogs`: what a market sells and its price adjustment. Lists are offset style.

use schemars::JsonSchema;
use serde::Serialize;

use crate::cells::catalogs;
use crate::domain::catalog::{Catalog, CatalogView, CreateCatalog, UpdateCatalog};
use crate::domain::collection::ProductIds;
use crate::domain::money::Money;
use crate::domain::product::ProductView;
use crate::error::ApiResult;
use crate::handler;
use crate::http::OffsetPage;
use crate::http::list::{MAX_OFFSET, OffsetListOf};
use crate::http::query::{LIMIT_DEFAULT, LIMIT_MAX, Query};
use crate::http::reply::{Borrowed, Created, Json, NoContent, Rendered};
use crate::http::route::{Access, Param, QueryParams, Service, param};
use crate::node::context::{Ctx, Route};

pub fn routes() -> Vec<Route> {
    use Access::Member;
    use Service::Cell;
    let p = "/stores/{storeId}/catalogs";
    let one = "/stores/{storeId}/catalogs/{catalogId}";
    let products = "/stores/{storeId}/catalogs/{catalogId}/products";
    vec![
        Route::get(p, Cell, Member, handler!(list), "List catalogs (offset style)"),
        Route::post(p, Cell, Member, handler!(create), "Create a catalog for a market").body::<CreateCatalog>(),
        Route::get(one, Cell, Member, handler!(get), "One catalog"),
        Route::patch(one, Cell, Member, handler!(update), "Change a catalog").body::<UpdateCatalog>(),
        Route::delete(one, Cell, Member, handler!(delete), "Delete a catalog"),
        Route::get(products, Cell, Member, handler!(list_products), "The catalog's effective products (offset style)"),
        Route::post(
            products,
            Cell,
            Member,
            handler!(add_products),
            "Add products: SPECIFIC inserts inclusion entries, ALL deletes exclusion entries",
        )
        .errors(&[422])
        .body::<ProductIds>()
        .id("addCatalogProducts"),
        Route::post(
            "/stores/{storeId}/catalogs/{catalogId}/products/remove",
            Cell,
            Member,
            handler!(remove_products),
            "Remove products: SPECIFIC deletes inclusion entries, ALL inserts exclusion entries",
        )
        .errors(&[422])
        .id("removeCatalogProducts")
        .body::<ProductIds>(),
    ]
}

async fn list(cx: Ctx, q: OffsetListOf<Catalog>) -> ApiResult<Json<OffsetPage<CatalogView>>> {
    let s = cx.scope()?;
    let listed = s.cell.list::<Catalog>(s.id, &q.query).await?;
    Ok(Json(q.page(listed.map(|c| c.view()))))
}

async fn create(cx: Ctx) -> ApiResult<Created<CatalogView>> {
    let s = cx.scope()?;
    Ok(Created(catalogs::create(&s.cell, s.id, cx.json()?).await?.view()))
}

async fn get(cx: Ctx) -> ApiResult<Json<CatalogView>> {
    let s = cx.scope()?;
    Ok(Json(s.cell.get::<Catalog>(s.id, cx.path_id("catalogId")?)?.view()))
}

async fn update(cx: Ctx) -> ApiResult<Json<CatalogView>> {
    let s = cx.scope()?;
    let id = cx.path_id("catalogId")?;
    Ok(Json(catalogs::update(&s.cell, s.id, id, cx.json()?).await?.view()))
}

async fn delete(cx: Ctx) -> ApiResult<NoContent> {
    let s = cx.scope()?;
    catalogs::delete(&s.cell, s.id, cx.path_id("catalogId")?).await?;
    Ok(NoContent)
}

/// The window of a catalog's products: `offset`, `limit`, `sortOrder` (newest first by default).
pub struct ProductWindow {
    offset: usize,
    limit: usize,
    desc: bool,
}

impl QueryParams for ProductWindow {
    fn params() -> Vec<Param> {
        vec![
            param("offset", "integer", "products skipped, default 0").range(0, MAX_OFFSET),
            param("limit", "integer", "page size, 1..250, default 20").range(1, 250),
            param("sortOrder", "string", "desc (default, newest products first) or asc").one_of(&["asc", "desc"]),
        ]
    }

    fn parse(q: &Query) -> ApiResult<Self> {
        Ok(ProductWindow {
            offset: q.int("offset", 0, 0, MAX_OFFSET)? as usize,
            limit: q.int("limit", LIMIT_DEFAULT.into(), 1, LIMIT_MAX.into())? as usize,
            desc: q.one_of("sortOrder", &["asc", "desc"])?.unwrap_or("desc") == "desc",
        })
    }
}

/// A product of a catalog: the product with its price after the catalog's adjustment.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CatalogProduct<'a> {
    #[serde(flatten)]
    product: ProductView<'a>,
    catalog_price: Money,
}

impl Borrowed for CatalogProduct<'_> {
    type Static = CatalogProduct<'static>;
}

async fn list_products(cx: Ctx, w: ProductWindow) -> ApiResult<Rendered<OffsetPage<CatalogProduct<'static>>>> {
    let s = cx.scope()?;
    let c = s.cell.get::<Catalog>(s.id, cx.path_id("catalogId")?)?;
    let products = catalogs::products_of(&s.cell, s.id, &c, w.offset, w.limit, w.desc)?;
    let data: Vec<_> = products
        .iter()
        .map(|p| CatalogProduct {
            product: p.view(),
            catalog_price: c.price_of(Money { amount: p.price(), currency: p.currency }),
        })
        .collect();
    Rendered::view(&OffsetPage::new(data, c.products, w.offset as u64, w.limit as u64))
}

async fn add_products(cx: Ctx) -> ApiResult<Json<CatalogView>> {
    let s = cx.scope()?;
    let id = cx.path_id("catalogId")?;
    let body: ProductIds = cx.json()?;
    Ok(Json(catalogs::add_products(&s.cell, s.id, id, body.product_ids).await?.view()))
}

async fn remove_products(cx: Ctx) -> ApiResult<Json<CatalogView>> {
    let s = cx.scope()?;
    let id = cx.path_id("catalogId")?;
    let body: ProductIds = cx.json()?;
    Ok(Json(catalogs::remove_products(&s.cell, s.id, id, body.product_ids).await?.view()))
}
