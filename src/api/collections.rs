//! `S/collections`: manual and smart collections, their products, order and publish schedule.
//!
//! The three reads are storefront routes: shoppers (publishable key) see published collections
//! only, and in them only ACTIVE products (`productCount` counts those); a draft, scheduled or
//! deleted collection is a 404 to them, whatever they ask for.

use uuid::Uuid;

use crate::cells::collections::{CollectionFilter, EMBEDDED_PRODUCTS, SORT_FIELDS};
use crate::domain::collection::{
    Collection, CollectionStatus, CollectionType, CreateCollection, ProductIds, Schedule, UpdateCollection,
};
use crate::domain::product::Product;
use crate::error::{ApiError, ApiResult};
use crate::handler;
use crate::http::context::Ctx;
use crate::http::query::{LIMIT_DEFAULT, LIMIT_MAX, Paging};
use crate::http::route::{Access, Param, Route, Service, param};
use crate::http::{Page, Resp, created, no_content, ok};

const LIST_PARAMS: &[Param] = &[
    param("page", "integer", "1-based page, default 1"),
    param("limit", "integer", "page size, 1..250, default 20"),
    param("search", "string", "part of the title, any case"),
    param("collectionType", "string", "MANUAL or SMART"),
    param("status", "string", "published, draft or scheduled"),
    param("parentId", "string", "a collection id: its children; null: root collections only; absent: any"),
    param("sortBy", "string", "title, productCount, createdAt (default), updatedAt, position"),
    param("sortOrder", "string", "asc or desc (default)"),
    param("includeProducts", "boolean", "embed the first 5 products of each collection as {id, title, handle, status, price}"),
    param("includeDeleted", "boolean", "list soft-deleted collections too (with deletedAt)"),
];

const ONE_PARAMS: &[Param] = &[param("includeDeleted", "boolean", "answer a soft-deleted collection too")];

const PRODUCT_PARAMS: &[Param] =
    &[param("page", "integer", "1-based page, default 1"), param("limit", "integer", "page size, 1..250, default 20")];

pub fn routes() -> Vec<Route> {
    use Access::{Member, Storefront};
    use Service::Cell;
    let p = "/stores/{storeId}/collections";
    let one = "/stores/{storeId}/collections/{id}";
    let products = "/stores/{storeId}/collections/{id}/products";
    vec![
        Route::get(p, Cell, Storefront, handler!(list), "List collections (shoppers: published ones only)").query(LIST_PARAMS),
        Route::post(p, Cell, Member, handler!(create), "Create a manual or smart collection").body::<CreateCollection>(),
        Route::get(one, Cell, Storefront, handler!(get), "One collection (shoppers: a published one)").query(ONE_PARAMS),
        Route::patch(one, Cell, Member, handler!(update), "Change a collection").body::<UpdateCollection>(),
        Route::delete(one, Cell, Member, handler!(delete), "Soft-delete a collection"),
        Route::get(
            products,
            Cell,
            Storefront,
            handler!(list_products),
            "A collection's products in order (shoppers: ACTIVE ones of a published collection)",
        )
        .query(PRODUCT_PARAMS),
        Route::post(products, Cell, Member, handler!(add_products), "Add products to a manual collection").body::<ProductIds>(),
        Route::post(
            "/stores/{storeId}/collections/{id}/products/remove",
            Cell,
            Member,
            handler!(remove_products),
            "Remove products from a manual collection",
        )
        .body::<ProductIds>(),
        Route::put(
            "/stores/{storeId}/collections/{id}/products/order",
            Cell,
            Member,
            handler!(reorder),
            "Set the order of a collection's products (every product, in order)",
        )
        .body::<ProductIds>(),
        Route::post(
            "/stores/{storeId}/collections/{id}/schedule",
            Cell,
            Member,
            handler!(schedule),
            "Publish a collection at publishAt",
        )
        .body::<Schedule>(),
    ]
}

/// `parentId`: absent = any parent, `null` = root collections, an id = that collection's children.
fn parent_filter(cx: &Ctx) -> ApiResult<Option<Option<Uuid>>> {
    match cx.query.str("parentId") {
        None => Ok(None),
        Some(v) if v.eq_ignore_ascii_case("null") => Ok(Some(None)),
        Some(v) => Uuid::parse_str(v).map(|id| Some(Some(id))).map_err(|_| ApiError::field("parentId", "must be a UUID or null")),
    }
}

async fn list(cx: Ctx) -> ApiResult<Resp> {
    let s = cx.scope()?;
    let q = &cx.query;
    let paging = Paging::from_query(q, SORT_FIELDS, "createdAt")?;
    let shopper = cx.is_shopper();
    let status = q.one_of("status", CollectionStatus::NAMES)?.and_then(CollectionStatus::parse);
    let include_deleted = q.bool("includeDeleted", false)?;
    let filter = CollectionFilter {
        search: q.str("search").map(|t| t.trim().to_lowercase()).filter(|t| !t.is_empty()),
        collection_type: q.one_of("collectionType", CollectionType::NAMES)?.and_then(CollectionType::parse),
        // Shoppers see what the store publishes, whatever they ask for.
        status: if shopper { Some(CollectionStatus::Published) } else { status },
        parent: parent_filter(&cx)?,
        include_deleted: include_deleted && !shopper,
    };
    let include_products = q.bool("includeProducts", false)?;
    let (mut collections, total) = s.cell.list_collections(s.id, &filter, &paging)?;
    if shopper {
        for c in &mut collections {
            shopper_count(&cx, c)?;
        }
    }
    let embedded: Vec<Option<Vec<Product>>> = collections
        .iter()
        .map(|c| include_products.then(|| s.cell.collection_products(s.id, c, 0, EMBEDDED_PRODUCTS, shopper)).transpose())
        .collect::<ApiResult<_>>()?;
    let data: Vec<_> = collections.iter().zip(&embedded).map(|(c, p)| c.view(p.as_deref())).collect();
    Ok(ok(&Page::new(data, total, paging.page, paging.limit)))
}

async fn create(cx: Ctx) -> ApiResult<Resp> {
    let s = cx.scope()?;
    let body: CreateCollection = cx.json()?;
    let c = s.cell.create_collection(s.id, body).await?;
    Ok(created(&c.view(None)))
}

/// A collection as the caller may see it: any live one (or deleted, when asked) for members; a
/// published one, counting its ACTIVE products, for shoppers.
fn visible(cx: &Ctx, include_deleted: bool) -> ApiResult<Collection> {
    let s = cx.scope()?;
    let id = cx.path_id("id")?;
    if !cx.is_shopper() {
        return s.cell.collection(s.id, id, include_deleted);
    }
    let mut c = s.cell.collection(s.id, id, false)?;
    if c.status != CollectionStatus::Published {
        return Err(ApiError::not_found());
    }
    shopper_count(cx, &mut c)?;
    Ok(c)
}

/// `productCount` as a shopper sees it: the collection's ACTIVE products.
fn shopper_count(cx: &Ctx, c: &mut Collection) -> ApiResult<()> {
    let s = cx.scope()?;
    c.product_count = s.cell.active_product_count(s.id, c)?;
    Ok(())
}

async fn get(cx: Ctx) -> ApiResult<Resp> {
    let c = visible(&cx, cx.query.bool("includeDeleted", false)?)?;
    Ok(ok(&c.view(None)))
}

async fn update(cx: Ctx) -> ApiResult<Resp> {
    let s = cx.scope()?;
    let id = cx.path_id("id")?;
    let body: UpdateCollection = cx.json()?;
    let c = s.cell.update_collection(s.id, id, body).await?;
    Ok(ok(&c.view(None)))
}

async fn delete(cx: Ctx) -> ApiResult<Resp> {
    let s = cx.scope()?;
    s.cell.delete_collection(s.id, cx.path_id("id")?).await?;
    Ok(no_content())
}

async fn list_products(cx: Ctx) -> ApiResult<Resp> {
    let s = cx.scope()?;
    let page = cx.query.int("page", 1, 1, i64::from(u32::MAX))? as u32;
    let limit = cx.query.int("limit", LIMIT_DEFAULT.into(), 1, LIMIT_MAX.into())? as u32;
    let skip = (page as usize - 1).saturating_mul(limit as usize);
    let c = s.cell.collection(s.id, cx.path_id("id")?, false)?;
    let (products, total) = if cx.is_shopper() {
        if c.status != CollectionStatus::Published {
            return Err(ApiError::not_found());
        }
        s.cell.active_collection_page(s.id, &c, skip, limit as usize)?
    } else {
        (s.cell.collection_products(s.id, &c, skip, limit as usize, false)?, c.product_count)
    };
    let data: Vec<_> = products.iter().map(Product::view).collect();
    Ok(ok(&Page::new(data, total, page, limit)))
}

async fn add_products(cx: Ctx) -> ApiResult<Resp> {
    let s = cx.scope()?;
    let id = cx.path_id("id")?;
    let body: ProductIds = cx.json()?;
    let c = s.cell.add_collection_products(s.id, id, body.product_ids).await?;
    Ok(ok(&c.view(None)))
}

async fn remove_products(cx: Ctx) -> ApiResult<Resp> {
    let s = cx.scope()?;
    let id = cx.path_id("id")?;
    let body: ProductIds = cx.json()?;
    let c = s.cell.remove_collection_products(s.id, id, body.product_ids).await?;
    Ok(ok(&c.view(None)))
}

async fn reorder(cx: Ctx) -> ApiResult<Resp> {
    let s = cx.scope()?;
    let id = cx.path_id("id")?;
    let body: ProductIds = cx.json()?;
    let c = s.cell.reorder_collection_products(s.id, id, body.product_ids).await?;
    Ok(ok(&c.view(None)))
}

async fn schedule(cx: Ctx) -> ApiResult<Resp> {
    let s = cx.scope()?;
    let id = cx.path_id("id")?;
    let body: Schedule = cx.json()?;
    let c = s.cell.schedule_collection(s.id, id, body.publish_at).await?;
    Ok(ok(&c.view(None)))
}
