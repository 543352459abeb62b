//! `S/collections`: manual and smart collections, their products, order and publish schedule.
//!
//! The three reads are storefront routes: shoppers (publishable key) see published collections
//! only, and in them only ACTIVE products (`productCount` counts those); a draft, scheduled or
//! deleted collection is a 404 to them, whatever they ask for.

use crate::cells::collections::{self, EMBEDDED_PRODUCTS};
use crate::domain::collection::{
    Collection, CollectionStatus, CollectionView, CreateCollection, ProductIds, Schedule, UpdateCollection,
};
use crate::domain::product::{Product, ProductView};
use crate::error::{ApiError, ApiResult};
use crate::handler;
use crate::http::Page;
use crate::http::list::{ListOf, PageWindow};
use crate::http::query::Query;
use crate::http::reply::{Borrowed, NoContent, Rendered};
use crate::http::route::{Access, Param, QueryParams, Service, param};
use crate::node::context::{Ctx, Route};
use crate::storage::record::SHOWN;

impl Borrowed for CollectionView<'_> {
    type Static = CollectionView<'static>;
}

/// `GET S/collections`: the list of the record, and whether to embed each one's first products.
pub struct CollectionList {
    list: ListOf<Collection>,
    include_products: bool,
}

impl QueryParams for CollectionList {
    fn params() -> Vec<Param> {
        let mut out = ListOf::<Collection>::params();
        out.push(param(
            "includeProducts",
            "boolean",
            "embed the first 5 products of each collection as {id, title, handle, status, price}",
        ));
        out
    }

    fn parse(q: &Query) -> ApiResult<Self> {
        Ok(CollectionList { list: ListOf::parse(q)?, include_products: q.bool("includeProducts", false)? })
    }
}

/// `includeDeleted` of one collection's read.
pub struct OneCollection {
    include_deleted: bool,
}

impl QueryParams for OneCollection {
    fn params() -> Vec<Param> {
        vec![param("includeDeleted", "boolean", "answer a soft-deleted collection too")]
    }

    fn parse(q: &Query) -> ApiResult<Self> {
        Ok(OneCollection { include_deleted: q.bool("includeDeleted", false)? })
    }
}

pub fn routes() -> Vec<Route> {
    use Access::{Member, Storefront};
    use Service::Cell;
    let p = "/stores/{storeId}/collections";
    let one = "/stores/{storeId}/collections/{id}";
    let products = "/stores/{storeId}/collections/{id}/products";
    vec![
        Route::get(p, Cell, Storefront, handler!(list), "List collections (shoppers: published ones only)"),
        Route::post(p, Cell, Member, handler!(create), "Create a manual or smart collection")
            .errors(&[409])
            .body::<CreateCollection>(),
        Route::get(one, Cell, Storefront, handler!(get), "One collection (shoppers: a published one)"),
        Route::patch(one, Cell, Member, handler!(update), "Change a collection").errors(&[409]).body::<UpdateCollection>(),
        Route::delete(one, Cell, Member, handler!(delete), "Soft-delete a collection"),
        Route::get(
            products,
            Cell,
            Storefront,
            handler!(list_products),
            "A collection's products in order (shoppers: ACTIVE ones of a published collection)",
        ),
        Route::post(products, Cell, Member, handler!(add_products), "Add products to a manual collection")
            .errors(&[422])
            .body::<ProductIds>()
            .id("addCollectionProducts"),
        Route::post(
            "/stores/{storeId}/collections/{id}/products/remove",
            Cell,
            Member,
            handler!(remove_products),
            "Remove products from a manual collection",
        )
        .errors(&[422])
        .id("removeCollectionProducts")
        .body::<ProductIds>(),
        Route::put(
            "/stores/{storeId}/collections/{id}/products/order",
            Cell,
            Member,
            handler!(reorder),
            "Set the order of a collection's products (every product, in order)",
        )
        .errors(&[422])
        .id("reorderCollectionProducts")
        .body::<ProductIds>(),
        Route::post(
            "/stores/{storeId}/collections/{id}/schedule",
            Cell,
            Member,
            handler!(schedule),
            "Publish a collection at publishAt",
        )
        .errors(&[422])
        .id("scheduleCollection")
        .body::<Schedule>(),
    ]
}

async fn list(cx: Ctx, q: CollectionList) -> ApiResult<Rendered<Page<CollectionView<'static>>>> {
    let s = cx.scope()?;
    let shopper = cx.is_shopper();
    let mut query = q.list.query.clone();
    if shopper {
        // Shoppers see what the store publishes, whatever they ask for.
        query.restrict::<Collection>("status", CollectionStatus::Published.name());
        query.restrict::<Collection>("includeDeleted", SHOWN);
    }
    let mut collections = s.cell.list::<Collection>(s.id, &query).await?;
    if shopper {
        for c in &mut collections.items {
            shopper_count(&cx, c)?;
        }
    }
    let embedded: Vec<Option<Vec<Product>>> = collections
        .items
        .iter()
        .map(|c| {
            q.include_products
                .then(|| collections::collection_products(&s.cell, s.id, c, 0, EMBEDDED_PRODUCTS, shopper))
                .transpose()
        })
        .collect::<ApiResult<_>>()?;
    let data: Vec<_> = collections.items.iter().zip(&embedded).map(|(c, p)| c.view(p.as_deref())).collect();
    Rendered::view(&Page::new(data, collections.total, q.list.page, q.list.limit))
}

async fn create(cx: Ctx) -> ApiResult<Rendered<CollectionView<'static>, 201>> {
    let s = cx.scope()?;
    let c = collections::create_collection(&s.cell, s.id, cx.json()?).await?;
    Rendered::view(&c.view(None))
}

/// A collection as the caller may see it: any live one (or deleted, when asked) for members; a
/// published one, counting its ACTIVE products, for shoppers.
fn visible(cx: &Ctx, include_deleted: bool) -> ApiResult<Collection> {
    let s = cx.scope()?;
    let id = cx.path_id("id")?;
    if !cx.is_shopper() {
        return collections::collection(&s.cell, s.id, id, include_deleted);
    }
    let mut c = collections::collection(&s.cell, s.id, id, false)?;
    if c.status != CollectionStatus::Published {
        return Err(ApiError::not_found());
    }
    shopper_count(cx, &mut c)?;
    Ok(c)
}

/// `productCount` as a shopper sees it: the collection's ACTIVE products.
fn shopper_count(cx: &Ctx, c: &mut Collection) -> ApiResult<()> {
    let s = cx.scope()?;
    c.product_count = collections::active_product_count(&s.cell, s.id, c)?;
    Ok(())
}

async fn get(cx: Ctx, q: OneCollection) -> ApiResult<Rendered<CollectionView<'static>>> {
    Rendered::view(&visible(&cx, q.include_deleted)?.view(None))
}

async fn update(cx: Ctx) -> ApiResult<Rendered<CollectionView<'static>>> {
    let s = cx.scope()?;
    let body: UpdateCollection = cx.json()?;
    let c = collections::update_collection(&s.cell, s.id, cx.path_id("id")?, body).await?;
    Rendered::view(&c.view(None))
}

async fn delete(cx: Ctx) -> ApiResult<NoContent> {
    let s = cx.scope()?;
    collections::delete_collection(&s.cell, s.id, cx.path_id("id")?).await?;
    Ok(NoContent)
}

async fn list_products(cx: Ctx, w: PageWindow) -> ApiResult<Rendered<Page<ProductView<'static>>>> {
    let s = cx.scope()?;
    let (skip, take) = (w.offset(), w.limit as usize);
    let c = collections::collection(&s.cell, s.id, cx.path_id("id")?, false)?;
    let (products, total) = if cx.is_shopper() {
        if c.status != CollectionStatus::Published {
            return Err(ApiError::not_found());
        }
        collections::active_collection_page(&s.cell, s.id, &c, skip, take)?
    } else {
        (collections::collection_products(&s.cell, s.id, &c, skip, take, false)?, c.product_count)
    };
    Rendered::view(&w.page(products.iter().map(Product::view).collect(), total))
}

async fn add_products(cx: Ctx) -> ApiResult<Rendered<CollectionView<'static>>> {
    let s = cx.scope()?;
    let body: ProductIds = cx.json()?;
    let c = collections::add_collection_products(&s.cell, s.id, cx.path_id("id")?, body.product_ids).await?;
    Rendered::view(&c.view(None))
}

async fn remove_products(cx: Ctx) -> ApiResult<Rendered<CollectionView<'static>>> {
    let s = cx.scope()?;
    let body: ProductIds = cx.json()?;
    let c = collections::remove_collection_products(&s.cell, s.id, cx.path_id("id")?, body.product_ids).await?;
    Rendered::view(&c.view(None))
}

async fn reorder(cx: Ctx) -> ApiResult<Rendered<CollectionView<'static>>> {
    let s = cx.scope()?;
    let body: ProductIds = cx.json()?;
    let c = collections::reorder_collection_products(&s.cell, s.id, cx.path_id("id")?, body.product_ids).await?;
    Rendered::view(&c.view(None))
}

async fn schedule(cx: Ctx) -> ApiResult<Rendered<CollectionView<'static>>> {
    let s = cx.scope()?;
    let body: Schedule = cx.json()?;
    let c = collections::schedule_collection(&s.cell, s.id, cx.path_id("id")?, body.publish_at).await?;
    Rendered::view(&c.view(None))
}
