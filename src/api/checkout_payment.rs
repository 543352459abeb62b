//! Paying a checkout: gift-card lookup, the payment session, and completion into an order —
//! under both path forms of [`crate::api::checkouts::BASES`].

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::api::checkouts::{TokenQuery, at_both_bases, caller, code_try};
use crate::cells::checkouts;
use crate::cells::completion::{self, CompleteCheckout, PaymentSession};
use crate::cells::gift_cards;
use crate::cells::payments::PaymentIntentView;
use crate::domain::gift_card::GiftCardStatus;
use crate::domain::money::Money;
use crate::domain::order::Order;
use crate::error::{ApiError, ApiResult, Code};
use crate::handler;
use crate::http::reply::{Created, Json, Rendered};
use crate::http::route::{Access, Service};
use crate::node::context::{Ctx, Route};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct LookupBody {
    code: String,
    session_token: Option<String>,
}

pub fn routes() -> Vec<Route> {
    use Access::Storefront;
    use Service::Cell;
    at_both_bases(|base| {
        let one = format!("{base}/{{checkoutId}}");
        vec![
            Route::post(
                &format!("{one}/gift-cards/lookup"),
                Cell,
                Storefront,
                handler!(lookup),
                "A gift card's status and spendable balance; read-only, redeems nothing",
            )
            .errors(&[429])
            .body::<LookupBody>()
            .id("lookupCheckoutGiftCard"),
            Route::post(
                &format!("{one}/payment-session"),
                Cell,
                Storefront,
                handler!(payment_session),
                "Open a payment session for the checkout's payment due → {clientSecret, paymentIntentId}",
            )
            .secret()
            .body::<PaymentSession>()
            .id("createCheckoutPaymentSession"),
            Route::post(&format!("{one}/complete"), Cell, Storefront, handler!(complete), "Complete the checkout → 201 Order")
                .errors(&[409, 429])
                .body::<CompleteCheckout>()
                .id("completeCheckout"),
        ]
    })
}

/// A gift card as a lookup shows it. Fields in key order, as the answer has always listed them.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GiftCardLookup {
    /// Spendable now on this checkout: 0 in another currency.
    pub balance: Money,
    pub last_characters: String,
    pub status: GiftCardStatus,
}

/// The payment session: the intent, its client secret (shown only here) and its id again.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PaymentSessionView {
    #[serde(flatten)]
    pub intent: PaymentIntentView,
    pub client_secret: String,
    pub payment_intent_id: Uuid,
}

async fn lookup(cx: Ctx, q: TokenQuery) -> ApiResult<Json<GiftCardLookup>> {
    let s = cx.scope()?;
    let id = cx.path_id("checkoutId")?;
    let body: LookupBody = cx.json()?;
    let co = checkouts::checkout(&s.cell, s.id, id, &caller(&cx, body.session_token, q))?;
    code_try(&cx, id)?;
    let now = cx.node.clock.now_ms();
    let card = gift_cards::find_gift_card(&s.cell.read()?, s.id, &body.code)?
        .ok_or_else(|| ApiError::msg(Code::NOT_FOUND, "no gift card of this store has this code"))?;
    let spendable = if card.currency() == co.currency { card.spendable(now) } else { 0 };
    Ok(Json(GiftCardLookup {
        balance: Money { amount: spendable, currency: card.currency() },
        last_characters: card.last_characters().to_string(),
        status: card.status(now),
    }))
}

async fn payment_session(cx: Ctx, q: TokenQuery) -> ApiResult<Rendered<PaymentSessionView, 201>> {
    let s = cx.scope()?;
    let mut body: PaymentSession = cx.json()?;
    let who = caller(&cx, body.session_token.take(), q);
    let (intent, secret) = completion::checkout_payment_session(&s.cell, s.id, cx.path_id("checkoutId")?, &who, body).await?;
    Rendered::sorted(&PaymentSessionView { intent: intent.view(), client_secret: secret, payment_intent_id: intent.id })
}

async fn complete(cx: Ctx, q: TokenQuery) -> ApiResult<Created<Order>> {
    let s = cx.scope()?;
    let mut body: CompleteCheckout = cx.json()?;
    let who = caller(&cx, body.session_token.take(), q);
    let order = completion::complete_checkout(&s.cell, s.id, cx.path_id("checkoutId")?, &who, body).await?;
    Ok(Created(order))
}
