//! Payment intents in a cell: created at the configured provider and stored (`payment_intents`),
//! confirmed with a payment method token, refreshed from the provider, and claimed by exactly one
//! order inside the order-creating write ([`claim_intent`]).
//!
//! A shopper proves an intent is theirs with its client secret; only the secret's SHA-256 is
//! stored. Every stored change bumps the intent's `version`: a confirmation that raced another
//! change is refused (409) instead of overwriting it.

use ring::digest::{SHA256, digest};
use serde::{Deserialize, Serialize};
use serde_json::json;
use uuid::Uuid;

use crate::cells::Cell;
use crate::cells::{orders, portable};
use crate::domain::money::Money;
use crate::domain::time::rfc3339;
use crate::error::{ApiError, ApiResult, Code};
use crate::payments::{CreateIntent, IntentRef, ProviderState, Providers, check_token, looks_like_card_number};
pub use crate::payments::{FinancialStatus, IntentStatus, NextAction, PaymentMethodKind};
use crate::storage::record::{self, List, Record};
use crate::storage::tables::{PAYMENT_INTENTS, StoreTable};
use crate::storage::tx::Tx;

/// Most metadata keys an intent takes from the caller (Stripe allows 50; two are ours).
pub const MAX_METADATA_KEYS: usize = 40;
/// Longest metadata key, in characters (Stripe's limit).
pub const MAX_METADATA_KEY_CHARS: usize = 40;
/// Longest metadata value as text, in characters (Stripe's limit).
pub const MAX_METADATA_VALUE_CHARS: usize = 500;

/// A payment intent: one attempt to collect a checkout's payment, at one provider.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PaymentIntent {
    pub id: Uuid,
    pub checkout_id: Uuid,
    /// `test` or `stripe`: the provider the intent lives at.
    pub provider: String,
    /// The provider's id of the intent (`pi_…`).
    pub provider_ref: String,
    pub amount: Money,
    pub method: PaymentMethodKind,
    pub status: IntentStatus,
    pub customer_email: Option<String>,
    /// A JSON object of the caller's values (stored as JSON text: bincode cannot hold a `Value`).
    #[serde(with = "json_text")]
    pub metadata: serde_json::Value,
    /// The provider's code for the last failed attempt (`card_declined`, …).
    pub last_error: Option<String>,
    pub next_action: Option<NextAction>,
    /// The order this intent paid for, once one claimed it.
    pub order_id: Option<Uuid>,
    /// SHA-256 of the client secret.
    pub secret_hash: [u8; 32],
    /// Grows with every stored change.
    pub version: u32,
    pub created_at: i64,
    pub updated_at: i64,
}

/// What the payment-session route asks for.
#[derive(Debug, Clone)]
pub struct NewIntent {
    pub checkout_id: Uuid,
    pub amount: Money,
    pub method: PaymentMethodKind,
    pub customer_email: Option<String>,
    /// A JSON object (or null); values are strings, numbers or booleans as Stripe keeps them.
    pub metadata: serde_json::Value,
}

/// A confirmation request (`POST S/payment-intents/{id}/confirm`).
#[derive(Debug, Clone, Copy)]
pub struct Confirmation<'a> {
    /// The provider token; optional for PromptPay and bank transfers (the payer paid).
    pub payment_method: Option<&'a str>,
    /// Required from shoppers, who are refused (404) without the right one.
    pub client_secret: Option<&'a str>,
    pub shopper: bool,
}

mod json_text {
    use serde::{Deserialize, Deserializer, Serializer, de::Error};

    pub fn serialize<S: Serializer>(v: &serde_json::Value, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&v.to_string())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<serde_json::Value, D::Error> {
        let text = String::deserialize(d)?;
        serde_json::from_str(&text).map_err(D::Error::custom)
    }
}

/// A payment intent as clients read it. Fields in key order, as the answer has always listed them.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PaymentIntentView {
    pub amount: Money,
    pub checkout_id: Uuid,
    pub created_at: String,
    pub id: Uuid,
    /// The provider's code for the last failed attempt (`card_declined`, …).
    pub last_error: Option<String>,
    /// What the payer has to do next: `{type, …}` as [`NextAction::view`] writes it.
    pub next_action: Option<serde_json::Value>,
    /// The order this intent paid for, once one claimed it.
    pub order_id: Option<Uuid>,
    pub payment_method: PaymentMethodKind,
    /// `test` or `stripe`.
    pub provider: String,
    pub status: IntentStatus,
    pub updated_at: String,
}

impl PaymentIntent {
    /// The intent as clients read it.
    pub fn view(&self) -> PaymentIntentView {
        PaymentIntentView {
            amount: self.amount,
            checkout_id: self.checkout_id,
            created_at: rfc3339(self.created_at),
            id: self.id,
            last_error: self.last_error.clone(),
            next_action: self.next_action.as_ref().map(NextAction::view),
            order_id: self.order_id,
            payment_method: self.method,
            provider: self.provider.clone(),
            status: self.status,
            updated_at: rfc3339(self.updated_at),
        }
    }

    fn state(&self) -> ProviderState {
        ProviderState { status: self.status, last_error: self.last_error.clone(), next_action: self.next_action.clone() }
    }

    fn provider_ref(&self) -> IntentRef {
        IntentRef {
            id: self.id,
            provider_ref: self.provider_ref.clone(),
            method: self.method,
            amount: self.amount,
            version: self.version,
            current: self.state(),
        }
    }
}

impl Record for PaymentIntent {
    const TABLE: StoreTable = PAYMENT_INTENTS;
    const NAME: &'static str = "payment_intents";
    const LIST: List<Self> = List::none();

    fn id(&self) -> Uuid {
        self.id
    }
}

fn sha256(s: &str) -> [u8; 32] {
    let mut out = [0u8; 32];
    out.copy_from_slice(digest(&SHA256, s.as_bytes()).as_ref());
    out
}

/// Compares two hashes without an early exit.
fn same_hash(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// An intent's metadata in the document, as [`check_new`] reads it: at most
/// [`MAX_METADATA_KEYS`] keys of 1 to [`MAX_METADATA_KEY_CHARS`] characters without `[` or `]`,
/// each a string, number or boolean of at most [`MAX_METADATA_VALUE_CHARS`] characters.
pub fn metadata_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": ["object", "null"],
        "maxProperties": MAX_METADATA_KEYS,
        "propertyNames": {"minLength": 1, "maxLength": MAX_METADATA_KEY_CHARS, "pattern": "^[^\\[\\]]*$"},
        "additionalProperties": {"type": ["string", "number", "boolean", "null"], "maxLength": MAX_METADATA_VALUE_CHARS}
    })
}

/// Checks a new intent; answers it with a trimmed email and metadata as an object.
fn check_new(mut new: NewIntent) -> ApiResult<NewIntent> {
    if new.amount.amount <= 0 {
        return Err(ApiError::field("amount", "must be a positive amount in minor units"));
    }
    if new.method == PaymentMethodKind::Promptpay && new.amount.currency.code() != "THB" {
        return Err(ApiError::msg(Code::BUSINESS_RULE, "PromptPay takes payments in THB only"));
    }
    new.customer_email = new.customer_email.map(|e| e.trim().to_string()).filter(|e| !e.is_empty());
    if let Some(e) = &new.customer_email
        && (e.chars().count() > 254 || !e.contains('@') || e.chars().any(char::is_whitespace))
    {
        return Err(ApiError::field("customerEmail", "must be an email address"));
    }
    if new.metadata.is_null() {
        new.metadata = json!({});
    }
    let Some(map) = new.metadata.as_object() else { return Err(ApiError::field("metadata", "must be an object")) };
    if map.len() > MAX_METADATA_KEYS {
        return Err(ApiError::field("metadata", format!("at most {MAX_METADATA_KEYS} keys")));
    }
    for (k, v) in map {
        let field = format!("metadata.{k}");
        if k.is_empty() || k.chars().count() > MAX_METADATA_KEY_CHARS || k.contains(['[', ']']) {
            return Err(ApiError::field(field, format!("keys are 1 to {MAX_METADATA_KEY_CHARS} characters, without [ or ]")));
        }
        let text = match v {
            serde_json::Value::String(s) => s.clone(),
            serde_json::Value::Array(_) | serde_json::Value::Object(_) => {
                return Err(ApiError::field(field, "values are strings, numbers or booleans"));
            }
            other => other.to_string(),
        };
        if text.chars().count() > MAX_METADATA_VALUE_CHARS {
            return Err(ApiError::field(field, format!("at most {MAX_METADATA_VALUE_CHARS} characters")));
        }
        if looks_like_card_number(&text) {
            return Err(ApiError::field(field, "card numbers are never accepted"));
        }
    }
    Ok(new)
}

/// A store's payment settings as this build keeps them: the provider is the installation's
/// (`--payment-provider`); a store imported from another installation holds its payments off
/// until an owner or admin enters them here ([`enter_payment_settings`]).
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PaymentSettingsView {
    /// `test` or `stripe`: where this installation sends payments.
    pub provider: String,
    /// Whether the store takes payments.
    pub payments_enabled: bool,
    /// Why it does not, and what to do.
    pub held_because: Option<String>,
}

pub fn payment_settings(cell: &Cell, store: Uuid) -> ApiResult<PaymentSettingsView> {
    let hold = portable::hold(&cell.read()?, store, portable::PAYMENTS)?;
    Ok(PaymentSettingsView {
        provider: cell.payments.default_provider().name().to_string(),
        payments_enabled: hold.is_none(),
        held_because: hold.map(|h| h.reason),
    })
}

/// Confirms the store's payment provider on this installation, which lifts an import's hold. A
/// provider other than the one this installation sends payments to is refused: a store's
/// payments never move to another provider unasked.
pub async fn enter_payment_settings(cell: &Cell, store: Uuid, provider: &str) -> ApiResult<PaymentSettingsView> {
    let here = cell.payments.default_provider().name();
    if provider != here {
        // Not a malformed request: the installation is configured otherwise.
        return Err(ApiError::field(
            "provider",
            format!("this installation sends payments to the {here} provider (its operator's --payment-provider)"),
        )
        .with_code(Code::CONFLICT));
    }
    cell.writer.write(Some(store), move |tx| portable::lift_hold(tx, store, portable::PAYMENTS)).await?;
    payment_settings(cell, store)
}

/// Payments of a store whose settings must be entered again are refused, never sent to
/// whatever provider this installation has.
fn payments_on(cell: &Cell, store: Uuid) -> ApiResult<()> {
    match portable::hold(&cell.read()?, store, portable::PAYMENTS)? {
        Some(h) => Err(ApiError::msg(Code::BUSINESS_RULE, format!("payments are off for this store: {}", h.reason))),
        None => Ok(()),
    }
}

/// When a provider's answer is stored.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Save {
    /// Only when it differs; a change made meanwhile wins (a refresh).
    IfChanged,
    /// Always, bumping the version; a change made meanwhile is a 409 (a confirmation).
    Always,
}

/// This cell with its payment providers (the offline test provider alone by default).
pub fn with_payments(mut cell: Cell, providers: Providers) -> Cell {
    cell.payments = providers;
    cell
}

/// Creates the intent at the configured provider, then stores it. Returns the intent and its
/// client secret (handed to the shopper once; only its hash is kept).
///
/// 400 for a non-positive amount, a malformed email or metadata (naming the field); 422 for
/// PromptPay in a currency other than THB; 502 when the provider fails.
pub async fn create_payment_intent(cell: &Cell, store: Uuid, new: NewIntent) -> ApiResult<(PaymentIntent, String)> {
    let new = check_new(new)?;
    payments_on(cell, store)?;
    let provider = cell.payments.default_provider();
    let req = CreateIntent {
        id: cell.clock.new_id(),
        checkout_id: new.checkout_id,
        amount: new.amount,
        method: new.method,
        customer_email: new.customer_email,
        metadata: new.metadata,
    };
    let created = provider.create(&req).await?;
    let now = cell.clock.now_ms();
    let intent = PaymentIntent {
        id: req.id,
        checkout_id: req.checkout_id,
        provider: provider.name().to_string(),
        provider_ref: created.provider_ref,
        amount: req.amount,
        method: req.method,
        status: created.state.status,
        customer_email: req.customer_email,
        metadata: req.metadata,
        last_error: created.state.last_error,
        next_action: created.state.next_action,
        order_id: None,
        secret_hash: sha256(&created.client_secret),
        version: 1,
        created_at: now,
        updated_at: now,
    };
    let row = intent.clone();
    cell.writer.write(Some(store), move |tx| record::put(tx, store, &row)).await?;
    Ok((intent, created.client_secret))
}

/// One stored intent; 404 when missing.
pub fn payment_intent(cell: &Cell, store: Uuid, id: Uuid) -> ApiResult<PaymentIntent> {
    cell.get::<PaymentIntent>(store, id)
}

/// The intent when `secret` is its client secret; a wrong secret is the 404 of a missing
/// intent, so a caller without it learns nothing.
pub fn check_client_secret(cell: &Cell, store: Uuid, id: Uuid, secret: &str) -> ApiResult<PaymentIntent> {
    let intent = payment_intent(cell, store, id)?;
    if same_hash(&sha256(secret), &intent.secret_hash) { Ok(intent) } else { Err(ApiError::not_found()) }
}

/// Asks the provider for the current state (Stripe) and stores it when it changed; the test
/// provider's state is already the stored one, so this costs it one read.
pub async fn refresh_payment_intent(cell: &Cell, store: Uuid, id: Uuid) -> ApiResult<PaymentIntent> {
    let intent = payment_intent(cell, store, id)?;
    let state = cell.payments.get(&intent.provider)?.retrieve(&intent.provider_ref()).await?;
    store_state(cell, store, intent, state, Save::IfChanged).await
}

/// Confirms an intent with a payment method token and stores the outcome. A shopper without
/// the intent's client secret gets the 404 of a missing intent; an intent that already
/// succeeded, is processing, awaits capture or was canceled is 409. A declined card is not an
/// error: the intent comes back `requires_payment_method` with `lastError`.
pub async fn confirm_payment_intent(cell: &Cell, store: Uuid, id: Uuid, c: Confirmation<'_>) -> ApiResult<PaymentIntent> {
    let intent = match (c.shopper, c.client_secret) {
        (true, None) => return Err(ApiError::field("clientSecret", "is required to confirm as a shopper")),
        (true, Some(secret)) => check_client_secret(cell, store, id, secret)?,
        (false, _) => payment_intent(cell, store, id)?,
    };
    payments_on(cell, store)?;
    let token = match c.payment_method {
        Some(t) => check_token(t)?,
        None if intent.method == PaymentMethodKind::CreditCard => {
            return Err(ApiError::field("paymentMethod", "is required to confirm a card payment"));
        }
        None => "",
    };
    if matches!(
        intent.status,
        IntentStatus::Succeeded | IntentStatus::Processing | IntentStatus::RequiresCapture | IntentStatus::Canceled
    ) {
        return Err(ApiError::msg(
            Code::CONFLICT,
            format!("the payment intent cannot be confirmed: its status is {}", intent.status.as_str()),
        ));
    }
    let provider = cell.payments.get(&intent.provider)?;
    let state = provider.confirm(&intent.provider_ref(), token).await;
    cell.payments.outcomes.record(provider.name(), &state);
    store_state(cell, store, intent, state?, Save::Always).await
}

async fn store_state(
    cell: &Cell,
    store: Uuid,
    before: PaymentIntent,
    state: ProviderState,
    when: Save,
) -> ApiResult<PaymentIntent> {
    if when == Save::IfChanged && before.state() == state {
        return Ok(before);
    }
    let (id, version) = (before.id, before.version);
    let now = cell.clock.now_ms();
    cell.writer
        .write(Some(store), move |tx| {
            let mut row = record::load::<PaymentIntent>(tx, store, id)?.ok_or_else(ApiError::not_found)?;
            if row.version != version {
                return match when {
                    Save::IfChanged => Ok(row),
                    Save::Always => Err(ApiError::msg(
                        Code::CONFLICT,
                        "the payment intent changed while it was being confirmed; read it again",
                    )),
                };
            }
            row.status = state.status;
            row.last_error = state.last_error.clone();
            row.next_action = state.next_action.clone();
            row.version += 1;
            row.updated_at = now;
            record::put(tx, store, &row)?;
            // A payer who pays after the order was placed (PromptPay, bank transfer) settles it.
            if let (Some(order), IntentStatus::Succeeded) = (row.order_id, row.status) {
                orders::mark_paid(tx, store, order, row.updated_at)?;
            }
            Ok(row)
        })
        .await
}

/// Claims an intent for an order, inside the order-creating write job (on the writer thread;
/// repeatable: it reads the row again each time).
///
/// The intent must exist and belong to `checkout` (400 naming `paymentIntentId` otherwise: another
/// checkout's intent is not told apart from a missing one), its amount must equal `amount` (422
/// `BUSINESS_RULE`), no other order may have claimed it (409 `CONFLICT`), and its status must allow
/// an order: `succeeded` → PAID, `requires_capture` → AUTHORIZED, `processing` or a PromptPay /
/// bank transfer awaiting the payer → PENDING. A declined payment is 422 `PAYMENT_DECLINED`; one
/// never confirmed, a card awaiting authentication or a canceled intent is 422 `BUSINESS_RULE`.
/// Then the intent is marked as `order_id`'s, updated at `now`.
pub fn claim_intent(
    tx: &mut Tx,
    store: Uuid,
    id: Uuid,
    checkout: Uuid,
    amount: Money,
    order_id: Uuid,
    now: i64,
) -> ApiResult<FinancialStatus> {
    let mut intent = match record::load::<PaymentIntent>(tx, store, id)? {
        Some(i) if i.checkout_id == checkout => i,
        _ => return Err(ApiError::field("paymentIntentId", "no payment intent of this checkout has this id")),
    };
    if intent.amount != amount {
        return Err(ApiError::msg(Code::BUSINESS_RULE, "the payment amount differs from the checkout total"));
    }
    if intent.order_id.is_some_and(|o| o != order_id) {
        return Err(ApiError::msg(Code::CONFLICT, "the payment intent already paid for another order"));
    }
    let awaiting_payer = intent.method.paid_by_payer_later() && intent.status == IntentStatus::RequiresAction;
    let status = match intent.status {
        IntentStatus::Succeeded => FinancialStatus::Paid,
        IntentStatus::RequiresCapture => FinancialStatus::Authorized,
        IntentStatus::Processing => FinancialStatus::Pending,
        _ if awaiting_payer => FinancialStatus::Pending,
        IntentStatus::RequiresPaymentMethod if intent.last_error.is_some() => {
            let reason = intent.last_error.as_deref().unwrap_or("declined");
            return Err(ApiError::msg(
                Code::PAYMENT_DECLINED,
                format!("the payment was declined ({reason}); try another payment method"),
            ));
        }
        IntentStatus::RequiresAction => {
            return Err(ApiError::msg(Code::BUSINESS_RULE, "the payment awaits the customer's authentication: confirm it first"));
        }
        IntentStatus::Canceled => return Err(ApiError::msg(Code::BUSINESS_RULE, "the payment intent was canceled")),
        IntentStatus::RequiresPaymentMethod | IntentStatus::RequiresConfirmation => {
            return Err(ApiError::msg(Code::BUSINESS_RULE, "the payment intent has not been confirmed"));
        }
    };
    if intent.order_id.is_none() {
        intent.order_id = Some(order_id);
        intent.version += 1;
        intent.updated_at = now;
        record::put(tx, store, &intent)?;
    }
    Ok(status)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::money::Currency;
    use crate::storage::codec::{decode, encode};

    fn new(method: PaymentMethodKind, currency: &str, metadata: serde_json::Value) -> NewIntent {
        NewIntent {
            checkout_id: Uuid::now_v7(),
            amount: Money { amount: 1000, currency: Currency::parse(currency).unwrap() },
            method,
            customer_email: Some("  buyer@example.com ".into()),
            metadata,
        }
    }

    #[test]
    fn new_intents_are_checked() {
        let ok = check_new(new(PaymentMethodKind::CreditCard, "USD", serde_json::Value::Null)).unwrap();
        assert_eq!((ok.customer_email.as_deref(), ok.metadata.clone()), (Some("buyer@example.com"), json!({})));
        let field = |n: NewIntent| check_new(n).unwrap_err().fields[0].field.clone();
        assert_eq!(field(new(PaymentMethodKind::CreditCard, "USD", json!([1]))), "metadata");
        assert_eq!(field(new(PaymentMethodKind::CreditCard, "USD", json!({"a": {"b": 1}}))), "metadata.a");
        assert_eq!(field(new(PaymentMethodKind::CreditCard, "USD", json!({"a[b]": "x"}))), "metadata.a[b]");
        assert_eq!(field(new(PaymentMethodKind::CreditCard, "USD", json!({"card": "4242 4242 4242 4242"}))), "metadata.card");
        assert_eq!(field(new(PaymentMethodKind::CreditCard, "USD", json!({"long": "x".repeat(501)}))), "metadata.long");
        let many: serde_json::Map<String, serde_json::Value> = (0..41).map(|i| (format!("k{i}"), json!(i))).collect();
        assert_eq!(field(new(PaymentMethodKind::CreditCard, "USD", serde_json::Value::Object(many))), "metadata");
        let mut zero = new(PaymentMethodKind::CreditCard, "USD", json!({}));
        zero.amount.amount = 0;
        assert_eq!(field(zero), "amount");
        let mut bad_email = new(PaymentMethodKind::CreditCard, "USD", json!({}));
        bad_email.customer_email = Some("not an email".into());
        assert_eq!(field(bad_email), "customerEmail");
        assert_eq!(check_new(new(PaymentMethodKind::Promptpay, "USD", json!({}))).unwrap_err().code, Code::BUSINESS_RULE);
        assert!(check_new(new(PaymentMethodKind::Promptpay, "THB", json!({"n": 1, "b": true}))).is_ok());
    }

    #[test]
    fn the_record_round_trips_with_its_metadata() {
        let now = 1_795_000_000_000;
        let i = PaymentIntent {
            id: Uuid::now_v7(),
            checkout_id: Uuid::now_v7(),
            provider: "test".into(),
            provider_ref: "pi_test_1".into(),
            amount: Money { amount: 500, currency: Currency::parse("JPY").unwrap() },
            method: PaymentMethodKind::Promptpay,
            status: IntentStatus::RequiresAction,
            customer_email: None,
            metadata: json!({"cart": "c1", "n": 2}),
            last_error: None,
            next_action: Some(NextAction::PromptpayQr { payload: "0002".into() }),
            order_id: Some(Uuid::now_v7()),
            secret_hash: sha256("s"),
            version: 3,
            created_at: now,
            updated_at: now,
        };
        assert_eq!(decode::<PaymentIntent>(&encode(&i).unwrap()).unwrap(), i);
        let v = serde_json::to_value(i.view()).unwrap();
        assert_eq!((v["status"].as_str(), v["paymentMethod"].as_str()), (Some("requires_action"), Some("promptpay")));
        assert_eq!(v["nextAction"], json!({"type": "promptpay_qr", "qrPayload": "0002"}));
        assert_eq!(v["amount"], json!({"amount": 500, "currency": "JPY"}));
        assert!(v.get("secretHash").is_none() && v.get("metadata").is_none());
        assert!(same_hash(&sha256("s"), &i.secret_hash) && !same_hash(&sha256("t"), &i.secret_hash));
    }
}
