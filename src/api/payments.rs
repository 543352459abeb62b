//! `S/payment-intents/{id}`: read and confirm a payment intent. Intents are created by a
//! checkout's payment session (`cells::payments::Cell::create_payment_intent`). Shoppers (a
//! publishable key) present the intent's client secret; store members need not.

use schemars::JsonSchema;
use serde::Deserialize;

use crate::cells::payments::{self, Confirmation, PaymentIntentView};
use crate::error::{ApiError, ApiResult};
use crate::handler;
use crate::http::query::Query;
use crate::http::reply::Json;
use crate::http::route::{Access, Param, QueryParams, Service, param};
use crate::node::context::{Ctx, Route};

pub fn routes() -> Vec<Route> {
    let one = "/stores/{storeId}/payment-intents/{paymentIntentId}";
    vec![
        Route::get(
            one,
            Service::Cell,
            Access::Storefront,
            handler!(get),
            "A payment intent, refreshed from its provider: {id, checkoutId, amount, status, paymentMethod, nextAction, \
             lastError, orderId}",
        ),
        Route::post(
            "/stores/{storeId}/payment-intents/{paymentIntentId}/confirm",
            Service::Cell,
            Access::Storefront,
            handler!(confirm),
            "Confirm a payment intent with a payment method token (test provider: pm_card_visa succeeds, \
             pm_card_chargeDeclined declines, pm_card_authenticationRequired asks for authentication); \
             a decline answers 200 with status requires_payment_method and lastError",
        )
        .errors(&[409])
        .id("confirmPaymentIntent")
        .optional_body::<ConfirmBody>(),
        Route::get(
            "/stores/{storeId}/payment-settings",
            Service::Cell,
            Access::Admin,
            handler!(settings),
            "The store's payment provider and whether it takes payments (an imported store does not until they are entered)",
        )
        .id("getPaymentSettings"),
        Route::put(
            "/stores/{storeId}/payment-settings",
            Service::Cell,
            Access::Admin,
            handler!(enter_settings),
            "Enter the store's payment provider: the installation's own (per-store provider keys are not kept yet); lifts an import's hold",
        )
        .id("setPaymentSettings")
        .errors(&[409])
        .body::<SettingsBody>(),
    ]
}

/// `PUT S/payment-settings`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SettingsBody {
    /// Must be the provider this installation sends payments to (409 otherwise).
    pub provider: ProviderName,
}

/// A payment provider, as the settings name it.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ProviderName {
    Test,
    Stripe,
}

impl ProviderName {
    fn name(self) -> &'static str {
        match self {
            ProviderName::Test => "test",
            ProviderName::Stripe => "stripe",
        }
    }
}

async fn settings(cx: Ctx) -> ApiResult<Json<payments::PaymentSettingsView>> {
    let s = cx.scope()?;
    Ok(Json(payments::payment_settings(&s.cell, s.id)?))
}

async fn enter_settings(cx: Ctx) -> ApiResult<Json<payments::PaymentSettingsView>> {
    let s = cx.scope()?;
    let body: SettingsBody = cx.json()?;
    Ok(Json(payments::enter_payment_settings(&s.cell, s.id, body.provider.name()).await?))
}

/// `POST S/payment-intents/{paymentIntentId}/confirm`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConfirmBody {
    /// A payment method token (`pm_card_visa`, `tok_visa`, a Stripe `pm_…`); never a card number.
    /// Optional for PromptPay and bank transfer intents.
    pub payment_method: Option<String>,
    /// The intent's client secret: required from shoppers.
    pub client_secret: Option<String>,
}

/// `?clientSecret=` of a read: required from shoppers, checked before anything is shown.
pub struct SecretQuery(Option<String>);

impl QueryParams for SecretQuery {
    fn params() -> Vec<Param> {
        vec![param("clientSecret", "string", "the intent's client secret: required from shoppers")]
    }
    fn parse(q: &Query) -> ApiResult<Self> {
        Ok(SecretQuery(q.str("clientSecret").map(str::to_string)))
    }
}

async fn get(cx: Ctx, q: SecretQuery) -> ApiResult<Json<PaymentIntentView>> {
    let s = cx.scope()?;
    let id = cx.path_id("paymentIntentId")?;
    if cx.is_shopper() {
        // Refused exactly like a missing intent: the caller learns nothing without the secret.
        let secret = q.0.ok_or_else(|| ApiError::field("clientSecret", "is required"))?;
        payments::check_client_secret(&s.cell, s.id, id, &secret)?;
    }
    Ok(Json(payments::refresh_payment_intent(&s.cell, s.id, id).await?.view()))
}

async fn confirm(cx: Ctx) -> ApiResult<Json<PaymentIntentView>> {
    let s = cx.scope()?;
    let id = cx.path_id("paymentIntentId")?;
    let body: ConfirmBody = cx.json_or_default()?;
    let c = Confirmation {
        payment_method: body.payment_method.as_deref(),
        client_secret: body.client_secret.as_deref(),
        shopper: cx.is_shopper(),
    };
    Ok(Json(payments::confirm_payment_intent(&s.cell, s.id, id, c).await?.view()))
}
