//! `S/collections`: manual and smart collections, their products, order and publish schedule.

use uuid::Uuid;

use crate::cells::collections::{CollectionFilter, EMBEDDED_PRODUCTS, SORT_FIELDS};
use crate::domain::collection::{CollectionStatus, CollectionType, CreateCollection, ProductIds, Schedule, UpdateCollection};
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
    use Access::Member;
    use Service::Cell;
    let p = "/stores/{storeId}/collections";
    let one = "/stores/{storeId}/collections/{id}";
    let products = "/stores/{storeId}/collections/{id}/products";
    vec![
        Route::get(p, Cell, Member, handler!(list), "List collections").query(LIST_PARAMS),
        Route::post(p, Cell, Member, handler!(create), "Create a manual or smart collection").body::<CreateCollection>(),
        Route::get(one, Cell, Member, handler!(get), "One collection").query(ONE_PARAMS),
        Route::patch(one, Cell, Member, handler!(update), "Change a collection").body::<UpdateCollection>(),
        Route::delete(one, Cell, Member, handler!(delete), "Soft-delete a collection"),
        Route::get(products, Cell, Member, handler!(list_products), "A collection's products in order").query(PRODUCT_PARAMS),
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
    let filter = CollectionFilter {
        search: q.str("search").map(|t| t.trim().to_lowercase()).filter(|t| !t.is_empty()),
        collection_type: q.one_of("collectionType", CollectionType::NAMES)?.and_then(CollectionType::parse),
        status: q.one_of("status", CollectionStatus::NAMES)?.and_then(CollectionStatus::parse),
        parent: parent_filter(&cx)?,
        include_deleted: q.bool("includeDeleted", false)?,
    };
    let include_products = q.bool("includeProducts", false)?;
    let (collections, total) = s.cell.list_collections(s.id, &filter, &paging)?;
    let embedded: Vec<Option<Vec<Product>>> = collections
        .iter()
        .map(|c| include_products.then(|| s.cell.collection_products(s.id, c, 0, EMBEDDED_PRODUCTS)).transpose())
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

async fn get(cx: Ctx) -> ApiResult<Resp> {
    let s = cx.scope()?;
    let c = s.cell.collection(s.id, cx.path_id("id")?, cx.query.bool("includeDeleted", false)?)?;
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
    let c = s.cell.collection(s.id, cx.path_id("id")?, false)?;
    let page = cx.query.int("page", 1, 1, i64::from(u32::MAX))? as u32;
    let limit = cx.query.int("limit", LIMIT_DEFAULT.into(), 1, LIMIT_MAX.into())? as u32;
    let skip = (page as usize - 1).saturating_mul(limit as usize);
    let products = s.cell.collection_products(s.id, &c, skip, limit as usize)?;
    let data: Vec<_> = products.iter().map(Product::view).collect();
    Ok(ok(&Page::new(data, c.product_count, page, limit)))
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
