//! `S/checkouts` (and the spec's singular `S/checkout`): create, read, update, shipping rates
//! and codes. Guests (publishable key, no Bearer token) show the checkout's `sessionToken` on
//! every call: in the body, or the query on GET and DELETE. Payment and completion are in
//! [`crate::api::checkout_payment`].

use std::sync::LazyLock;

use schemars::JsonSchema;
use serde::Deserialize;
use uuid::Uuid;

use crate::cells::checkouts::{self, Caller, CheckoutView};
use crate::domain::checkout::{CreateCheckout, UpdateCheckout, check_address, normalize_address};
use crate::domain::fields;
use crate::domain::pricing::shipping::{Address, ShippingRate};
use crate::error::{ApiResult, Check};
use crate::handler;
use crate::http::parse::parse_path_id;
use crate::http::query::Query;
use crate::http::ratelimit::Limiter;
use crate::http::reply::{Created, Json};
use crate::http::route::{Access, Param, QueryParams, Service, param};
use crate::node::context::{Ctx, Route};

/// Code tries (gift-card lookups and codes applied) per checkout and minute: enough for a
/// shopper's typos, far too few to guess a gift card's code.
static TRIES_PER_CHECKOUT: LazyLock<Limiter> = LazyLock::new(|| Limiter::per_minute(10));
/// Shoppers' tries per client address and minute, against guessing across many checkouts; high
/// enough for a storefront server whose shoppers all arrive from its one address.
static TRIES_PER_ADDRESS: LazyLock<Limiter> = LazyLock::new(|| Limiter::per_minute(300));

/// Spends one code try of `checkout` and, for a shopper, of the client address (429 when either
/// is used up).
pub fn code_try(cx: &Ctx, checkout: Uuid) -> ApiResult<()> {
    if let (true, Some(ip)) = (cx.is_shopper(), cx.client) {
        TRIES_PER_ADDRESS.take(&ip.to_string(), cx.node.clock.now_ms())?;
    }
    TRIES_PER_CHECKOUT.take(&checkout.to_string(), cx.node.clock.now_ms())
}

/// Both path forms: the route table's plural and the spec's singular.
pub const BASES: [&str; 2] = ["/stores/{storeId}/checkouts", "/stores/{storeId}/checkout"];

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RatesBody {
    shipping_address: Address,
    session_token: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CodeBody {
    /// A discount code, or a gift card's code.
    #[schemars(length(min = 1, max = 255), pattern(fields::NOT_BLANK))]
    code: String,
    session_token: Option<String>,
}

/// The rows `at` builds for a base path, under both spellings: the plural paths, then the
/// singular ones (the spec's) as aliases of the same operations.
pub fn at_both_bases(at: impl Fn(&str) -> Vec<Route>) -> Vec<Route> {
    let (plural, singular) = (at(BASES[0]), at(BASES[1]));
    plural.into_iter().chain(singular.into_iter().map(Route::alias)).collect()
}

pub fn routes() -> Vec<Route> {
    use Access::Storefront;
    use Service::Cell;
    at_both_bases(|base| {
        let one = format!("{base}/{{checkoutId}}");
        vec![
            Route::post(
                base,
                Cell,
                Storefront,
                handler!(create),
                "Create a checkout from a cart or line items (guests get a sessionToken)",
            )
            .secret()
            .body::<CreateCheckout>()
            .id("createCheckout"),
            Route::get(&one, Cell, Storefront, handler!(get), "One checkout, priced now").id("getCheckout"),
            Route::patch(
                &one,
                Cell,
                Storefront,
                handler!(update),
                "Update contact, addresses, shipping method, note, tip, payment method",
            )
            .body::<UpdateCheckout>()
            .id("updateCheckout"),
            Route::post(
                &format!("{one}/shipping-rates"),
                Cell,
                Storefront,
                handler!(shipping_rates),
                "The shipping rates offered for the checkout shipped to an address",
            )
            .body::<RatesBody>()
            .id("listCheckoutShippingRates"),
            Route::post(
                &format!("{one}/discount-codes"),
                Cell,
                Storefront,
                handler!(add_code),
                "Apply a discount code (422 when it does not apply) or a gift card's code",
            )
            // Code tries are limited per checkout and address (`spend_try`).
            .errors(&[409, 429])
            .body::<CodeBody>()
            .id("applyCheckoutCode"),
            Route::delete(
                &format!("{one}/discount-codes/{{code}}"),
                Cell,
                Storefront,
                handler!(remove_code),
                "Remove a discount code",
            )
            .id("removeCheckoutDiscountCode"),
            Route::delete(
                &format!("{one}/gift-cards/{{giftCardId}}"),
                Cell,
                Storefront,
                handler!(remove_gift_card),
                "Take a gift card off the checkout",
            )
            .id("removeCheckoutGiftCard"),
        ]
    })
}

/// `?sessionToken=`: a guest's checkout session token, where the request has no body to carry it
/// (a body's `sessionToken` comes first).
pub struct TokenQuery(Option<String>);

impl QueryParams for TokenQuery {
    fn params() -> Vec<Param> {
        vec![param("sessionToken", "string", "the checkout's session token (guests)")]
    }
    fn parse(q: &Query) -> ApiResult<Self> {
        Ok(TokenQuery(q.str("sessionToken").map(str::to_string)))
    }
}

/// The caller of a checkout operation, with the session token it presented.
pub fn caller(cx: &Ctx, body_token: Option<String>, query: TokenQuery) -> Caller {
    Caller { shopper: cx.is_shopper(), session_token: body_token.or(query.0) }
}

async fn create(cx: Ctx) -> ApiResult<Created<CheckoutView>> {
    let s = cx.scope()?;
    let body: CreateCheckout = cx.json()?;
    let shopper = cx.is_shopper();
    let (co, token) = checkouts::create_checkout(&s.cell, s.id, body, shopper).await?;
    Ok(Created(checkouts::checkout_view(&s.cell, s.id, &co, shopper, token)?))
}

async fn get(cx: Ctx, q: TokenQuery) -> ApiResult<Json<CheckoutView>> {
    let s = cx.scope()?;
    let who = caller(&cx, None, q);
    let co = checkouts::checkout(&s.cell, s.id, cx.path_id("checkoutId")?, &who)?;
    Ok(Json(checkouts::checkout_view(&s.cell, s.id, &co, who.shopper, None)?))
}

async fn update(cx: Ctx, q: TokenQuery) -> ApiResult<Json<CheckoutView>> {
    let s = cx.scope()?;
    let mut body: UpdateCheckout = cx.json()?;
    let who = caller(&cx, body.session_token.take(), q);
    let co = checkouts::update_checkout(&s.cell, s.id, cx.path_id("checkoutId")?, &who, body).await?;
    Ok(Json(checkouts::checkout_view(&s.cell, s.id, &co, who.shopper, None)?))
}

async fn shipping_rates(cx: Ctx, q: TokenQuery) -> ApiResult<Json<Vec<ShippingRate>>> {
    let s = cx.scope()?;
    let body: RatesBody = cx.json()?;
    let mut c = Check::new();
    check_address(&mut c, "shippingAddress", &body.shipping_address);
    c.finish()?;
    let who = caller(&cx, body.session_token, q);
    let co = checkouts::checkout(&s.cell, s.id, cx.path_id("checkoutId")?, &who)?;
    let address = normalize_address(body.shipping_address);
    Ok(Json(checkouts::checkout_shipping_rates(&s.cell, s.id, &co, &address, who.shopper)?))
}

async fn add_code(cx: Ctx, q: TokenQuery) -> ApiResult<Json<CheckoutView>> {
    let s = cx.scope()?;
    let body: CodeBody = cx.json()?;
    let who = caller(&cx, body.session_token, q);
    let id = cx.path_id("checkoutId")?;
    checkouts::checkout(&s.cell, s.id, id, &who)?;
    code_try(&cx, id)?;
    let co = checkouts::apply_checkout_code(&s.cell, s.id, id, &who, &body.code).await?;
    Ok(Json(checkouts::checkout_view(&s.cell, s.id, &co, who.shopper, None)?))
}

async fn remove_code(cx: Ctx, q: TokenQuery) -> ApiResult<Json<CheckoutView>> {
    let s = cx.scope()?;
    let who = caller(&cx, None, q);
    let co = checkouts::remove_checkout_code(&s.cell, s.id, cx.path_id("checkoutId")?, &who, cx.param("code")).await?;
    Ok(Json(checkouts::checkout_view(&s.cell, s.id, &co, who.shopper, None)?))
}

async fn remove_gift_card(cx: Ctx, q: TokenQuery) -> ApiResult<Json<CheckoutView>> {
    let s = cx.scope()?;
    let who = caller(&cx, None, q);
    let card = parse_path_id("giftCardId", cx.param("giftCardId"))?;
    let co = checkouts::remove_checkout_gift_card(&s.cell, s.id, cx.path_id("checkoutId")?, &who, card).await?;
    Ok(Json(checkouts::checkout_view(&s.cell, s.id, &co, who.shopper, None)?))
}
