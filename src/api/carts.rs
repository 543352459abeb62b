//! `S/carts`: carts for shoppers (publishable key) and store members. Every answer is the cart
//! priced now.

use schemars::JsonSchema;
use serde::Deserialize;

use crate::cells::carts::{self, CartView};
use crate::domain::cart::{AddItem, UpdateItem, check_attributes, check_quantity};
use crate::error::{ApiResult, Check};
use crate::handler;
use crate::http::Resp;
use crate::http::parse::parse_path_id;
use crate::http::reply::{Created, Json, Reply};
use crate::http::route::{Access, Service};
use crate::node::context::{Ctx, Route};

/// `POST S/carts`: an empty cart (the body may be empty).
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct NewCart {}

pub fn routes() -> Vec<Route> {
    use Access::Storefront;
    use Service::Cell;
    vec![
        Route::post("/stores/{storeId}/carts", Cell, Storefront, handler!(create), "Create an empty cart")
            .optional_body::<NewCart>(),
        Route::get("/stores/{storeId}/carts/{cartId}", Cell, Storefront, handler!(get), "A cart with its computed totals"),
        Route::post(
            "/stores/{storeId}/carts/items",
            Cell,
            Storefront,
            handler!(add),
            "Add a variant (quantity 1..100): creates the cart when cartId is absent (then 201); the same variant again \
             adds to its line (over 100 is 422)",
        )
        .id("addCartItem")
        .body::<AddItem>()
        .answers::<Json<CartView>>()
        .answers::<Created<CartView>>(),
        Route::patch("/stores/{storeId}/carts/{cartId}/items", Cell, Storefront, handler!(update), "Set a line's quantity")
            .id("updateCartItem")
            .body::<UpdateItem>(),
        Route::delete("/stores/{storeId}/carts/{cartId}/items/{variantId}", Cell, Storefront, handler!(remove), "Remove a line")
            .id("removeCartItem"),
    ]
}

async fn create(cx: Ctx) -> ApiResult<Created<CartView>> {
    let s = cx.scope()?;
    let _: NewCart = cx.json_or_default()?;
    let cart = carts::create_cart(&s.cell, s.id).await?;
    Ok(Created(carts::cart_view(&s.cell, s.id, cart, cx.is_shopper())?))
}

async fn get(cx: Ctx) -> ApiResult<Json<CartView>> {
    let s = cx.scope()?;
    let cart = carts::cart(&s.cell, s.id, cx.path_id("cartId")?)?;
    Ok(Json(carts::cart_view(&s.cell, s.id, cart, cx.is_shopper())?))
}

/// 201 when it created the cart, else 200: two statuses, so the row declares the usual one.
async fn add(cx: Ctx) -> ApiResult<Resp> {
    let s = cx.scope()?;
    let body: AddItem = cx.json()?;
    let mut c = Check::new();
    let quantity = check_quantity(&mut c, "quantity", body.quantity);
    let attributes =
        body.custom_attributes.is_some().then(|| check_attributes(&mut c, "customAttributes", body.custom_attributes));
    c.finish()?;
    let shopper = cx.is_shopper();
    let (cart, was_created) =
        carts::add_cart_item(&s.cell, s.id, body.cart_id, body.variant_id, quantity, attributes, shopper).await?;
    let view = carts::cart_view(&s.cell, s.id, cart, shopper)?;
    Ok(if was_created { Created(view).into_resp() } else { Json(view).into_resp() })
}

async fn update(cx: Ctx) -> ApiResult<Json<CartView>> {
    let s = cx.scope()?;
    let cart = cx.path_id("cartId")?;
    let body: UpdateItem = cx.json()?;
    let mut c = Check::new();
    let quantity = check_quantity(&mut c, "quantity", body.quantity);
    let attributes =
        body.custom_attributes.is_some().then(|| check_attributes(&mut c, "customAttributes", body.custom_attributes));
    c.finish()?;
    let cart = carts::update_cart_item(&s.cell, s.id, cart, body.variant_id, quantity, attributes).await?;
    Ok(Json(carts::cart_view(&s.cell, s.id, cart, cx.is_shopper())?))
}

async fn remove(cx: Ctx) -> ApiResult<Json<CartView>> {
    let s = cx.scope()?;
    let cart = cx.path_id("cartId")?;
    let variant = parse_path_id("variantId", cx.param("variantId"))?;
    let cart = carts::remove_cart_item(&s.cell, s.id, cart, variant).await?;
    Ok(Json(carts::cart_view(&s.cell, s.id, cart, cx.is_shopper())?))
}
