//! Paying a checkout: gift-card lookup, the payment session, and completion into an order —
//! under both path forms of [`crate::api::checkouts::BASES`].

use std::sync::LazyLock;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use crate::api::checkouts::{BASES, caller};
use crate::cells::completion::{CompleteCheckout, PaymentSession};
use crate::error::{ApiError, ApiResult, Code};
use crate::handler;
use crate::http::context::Ctx;
use crate::http::ratelimit::Limiter;
use crate::http::route::{Access, Route, Service};
use crate::http::{Resp, created, ok};

/// Code tries (gift-card lookups and codes applied) per checkout and minute: enough for a
/// shopper's typos, far too few to guess a gift card's code.
static TRIES_PER_CHECKOUT: LazyLock<Limiter> = LazyLock::new(|| Limiter::per_minute(10));
/// Shoppers' tries per client address and minute, against guessing across many checkouts; high
/// enough for a storefront server whose shoppers all arrive from its one address.
static TRIES_PER_ADDRESS: LazyLock<Limiter> = LazyLock::new(|| Limiter::per_minute(300));

/// Spends one code try of `checkout` and, for a shopper, of the client address (429 when either
/// is used up).
pub fn code_try(cx: &Ctx, checkout: uuid::Uuid) -> ApiResult<()> {
    if let (true, Some(ip)) = (cx.is_shopper(), cx.client) {
        TRIES_PER_ADDRESS.take(&ip.to_string(), cx.node.clock.now_ms())?;
    }
    TRIES_PER_CHECKOUT.take(&checkout.to_string(), cx.node.clock.now_ms())
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct LookupBody {
    code: String,
    session_token: Option<String>,
}

pub fn routes() -> Vec<Route> {
    use Access::Storefront;
    use Service::Cell;
    let mut rows = Vec::new();
    for base in BASES {
        let one = format!("{base}/{{checkoutId}}");
        rows.extend([
            Route::post(
                &format!("{one}/gift-cards/lookup"),
                Cell,
                Storefront,
                handler!(lookup),
                "A gift card's status and spendable balance; read-only, redeems nothing",
            )
            .body::<LookupBody>(),
            Route::post(
                &format!("{one}/payment-session"),
                Cell,
                Storefront,
                handler!(payment_session),
                "Open a payment session for the checkout's payment due → {clientSecret, paymentIntentId}",
            )
            .body::<PaymentSession>(),
            Route::post(&format!("{one}/complete"), Cell, Storefront, handler!(complete), "Complete the checkout → 201 Order")
                .body::<CompleteCheckout>(),
        ]);
    }
    rows
}

async fn lookup(cx: Ctx) -> ApiResult<Resp> {
    let s = cx.scope()?;
    let id = cx.path_id("checkoutId")?;
    let body: LookupBody = cx.json()?;
    let co = s.cell.checkout(s.id, id, &caller(&cx, body.session_token))?;
    code_try(&cx, id)?;
    let now = cx.node.clock.now_ms();
    let card = crate::cells::gift_cards::find_gift_card(&s.cell.read()?, s.id, &body.code)?
        .ok_or_else(|| ApiError::msg(Code::NOT_FOUND, "no gift card of this store has this code"))?;
    let spendable = if card.currency() == co.currency { card.spendable(now) } else { 0 };
    Ok(ok(&json!({
        "status": card.status(now),
        "balance": { "amount": spendable, "currency": card.currency() },
        "lastCharacters": card.last_characters(),
    })))
}

async fn payment_session(cx: Ctx) -> ApiResult<Resp> {
    let s = cx.scope()?;
    let mut body: PaymentSession = cx.json()?;
    let who = caller(&cx, body.session_token.take());
    let (intent, secret) = s.cell.checkout_payment_session(s.id, cx.path_id("checkoutId")?, &who, body).await?;
    let mut view = intent.view();
    view["clientSecret"] = json!(secret);
    view["paymentIntentId"] = json!(intent.id);
    Ok(created(&view))
}

async fn complete(cx: Ctx) -> ApiResult<Resp> {
    let s = cx.scope()?;
    let mut body: CompleteCheckout = cx.json()?;
    let who = caller(&cx, body.session_token.take());
    let order = s.cell.complete_checkout(s.id, cx.path_id("checkoutId")?, &who, body).await?;
    Ok(created(&order))
}
