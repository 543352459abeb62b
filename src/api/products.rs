//! `S/products` and `S/products/{productId}/variants`.

use crate::cells::products;
use crate::domain::product::{
    CreateProduct, ProductSorts, ProductView, Status, UpdateProduct, UpdateVariant, VariantInput, VariantView,
};
use crate::error::{ApiError, ApiResult};
use crate::handler;
use crate::http::list::{ListOf, PageWindow};
use crate::http::reply::{Borrowed, NoContent, Rendered};
use crate::http::route::{Access, Service};
use crate::http::{Page, page_body};
use crate::node::context::{Ctx, Route};

pub fn routes() -> Vec<Route> {
    use Access::{Member, Storefront};
    use Service::Cell;
    let p = "/stores/{storeId}/products";
    vec![
        Route::get(p, Cell, Storefront, handler!(list), "List products (shoppers: ACTIVE ones only)"),
        Route::post(p, Cell, Member, handler!(create), "Create a product").errors(&[409]).body::<CreateProduct>(),
        Route::get(
            "/stores/{storeId}/products/{productId}",
            Cell,
            Storefront,
            handler!(get),
            "One product with its variants (shoppers: ACTIVE ones only)",
        ),
        Route::patch("/stores/{storeId}/products/{productId}", Cell, Member, handler!(update), "Change a product")
            .errors(&[409])
            .body::<UpdateProduct>(),
        Route::delete("/stores/{storeId}/products/{productId}", Cell, Member, handler!(delete), "Delete a product"),
        Route::get(
            "/stores/{storeId}/products/{productId}/variants",
            Cell,
            Member,
            handler!(list_variants),
            "A product's variants",
        ),
        Route::post("/stores/{storeId}/products/{productId}/variants", Cell, Member, handler!(create_variant), "Add a variant")
            .errors(&[409])
            .body::<VariantInput>(),
        Route::get(
            "/stores/{storeId}/products/{productId}/variants/{variantId}",
            Cell,
            Member,
            handler!(get_variant),
            "One variant",
        ),
        Route::patch(
            "/stores/{storeId}/products/{productId}/variants/{variantId}",
            Cell,
            Member,
            handler!(update_variant),
            "Change a variant",
        )
        .errors(&[409])
        .body::<UpdateVariant>(),
        Route::delete(
            "/stores/{storeId}/products/{productId}/variants/{variantId}",
            Cell,
            Member,
            handler!(delete_variant),
            "Delete a variant",
        )
        .errors(&[422]),
    ]
}

impl Borrowed for ProductView<'_> {
    type Static = ProductView<'static>;
}

impl Borrowed for VariantView<'_> {
    type Static = VariantView<'static>;
}

async fn list(cx: Ctx, mut q: ListOf<ProductSorts>) -> ApiResult<Rendered<Page<ProductView<'static>>>> {
    let s = cx.scope()?;
    // Shoppers see only what the store sells, whatever they ask for.
    if cx.is_shopper() {
        q.query.restrict::<ProductSorts>("status", Status::Active.name());
    }
    // A page depends on the store's rows alone: kept under the store's write generation, read
    // before the page is (see `search::cache`).
    let l = &q.query;
    let key = format!("{}|{:?}|{}|{}|{}|{}", s.id, l.filters, l.sort, l.desc, q.page, q.limit);
    let tag = (s.cell.writer.generations.get(s.id), 0);
    let coding = cx.accepted_coding();
    if let Some(kept) = s.cell.pages.get(&key, tag, coding) {
        return Ok(Rendered::answer(kept));
    }
    let listed = products::list_product_views(&s.cell, s.id, l).await?;
    let body = bytes::Bytes::from(page_body(&listed.items, listed.total, q.page, q.limit));
    Ok(Rendered::answer(s.cell.pages.put(key, tag, body, coding)))
}

async fn create(cx: Ctx) -> ApiResult<Rendered<ProductView<'static>, 201>> {
    let s = cx.scope()?;
    let body: CreateProduct = cx.json()?;
    let (_, view) = products::create_product(&s.cell, s.id, body, cx.actor()).await?;
    Ok(Rendered::new(view))
}

async fn get(cx: Ctx) -> ApiResult<Rendered<ProductView<'static>>> {
    let s = cx.scope()?;
    let (status, view) = products::product_view(&s.cell, s.id, cx.path_id("productId")?)?;
    if cx.is_shopper() && status != Status::Active {
        return Err(ApiError::not_found());
    }
    // Answered from the row itself, without copying it (the JSON follows the status byte).
    Ok(Rendered::new(bytes::Bytes::from_owner(view)))
}

async fn update(cx: Ctx) -> ApiResult<Rendered<ProductView<'static>>> {
    let s = cx.scope()?;
    let id = cx.path_id("productId")?;
    let body: UpdateProduct = cx.json()?;
    let p = products::update_product(&s.cell, s.id, id, body).await?;
    Rendered::view(&p.view())
}

async fn delete(cx: Ctx) -> ApiResult<NoContent> {
    let s = cx.scope()?;
    products::delete_product(&s.cell, s.id, cx.path_id("productId")?).await?;
    Ok(NoContent)
}

/// A product's variants in their order, in the list envelope (a product has at most
/// [`MAX_VARIANTS`](crate::domain::product::MAX_VARIANTS), so a page is read from the product row).
async fn list_variants(cx: Ctx, w: PageWindow) -> ApiResult<Rendered<Page<VariantView<'static>>>> {
    let s = cx.scope()?;
    let p = products::product(&s.cell, s.id, cx.path_id("productId")?)?;
    let data: Vec<_> =
        p.variants.iter().enumerate().skip(w.offset()).take(w.limit as usize).map(|(i, v)| p.variant_view(v, i)).collect();
    Rendered::view(&w.page(data, p.variants.len() as u64))
}

async fn create_variant(cx: Ctx) -> ApiResult<Rendered<VariantView<'static>, 201>> {
    let s = cx.scope()?;
    let body: VariantInput = cx.json()?;
    let (p, vid) = products::add_variant(&s.cell, s.id, cx.path_id("productId")?, body, cx.actor()).await?;
    let (i, v) = p.variants.iter().enumerate().find(|(_, v)| v.id == vid).ok_or_else(|| ApiError::internal("variant lost"))?;
    Rendered::view(&p.variant_view(v, i))
}

async fn get_variant(cx: Ctx) -> ApiResult<Rendered<VariantView<'static>>> {
    let s = cx.scope()?;
    let p = products::product(&s.cell, s.id, cx.path_id("productId")?)?;
    let vid = cx.path_id("variantId")?;
    let (i, v) = p.variants.iter().enumerate().find(|(_, v)| v.id == vid).ok_or_else(ApiError::not_found)?;
    Rendered::view(&p.variant_view(v, i))
}

async fn update_variant(cx: Ctx) -> ApiResult<Rendered<VariantView<'static>>> {
    let s = cx.scope()?;
    let vid = cx.path_id("variantId")?;
    let body: UpdateVariant = cx.json()?;
    let p = products::update_variant(&s.cell, s.id, cx.path_id("productId")?, vid, body, cx.actor()).await?;
    let (i, v) = p.variants.iter().enumerate().find(|(_, v)| v.id == vid).ok_or_else(ApiError::not_found)?;
    Rendered::view(&p.variant_view(v, i))
}

async fn delete_variant(cx: Ctx) -> ApiResult<NoContent> {
    let s = cx.scope()?;
    products::delete_variant(&s.cell, s.id, cx.path_id("productId")?, cx.path_id("variantId")?).await?;
    Ok(NoContent)
}
