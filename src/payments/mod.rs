//! Payment providers: the interface a cell creates, reads and confirms payment intents through,
//! the built-in offline test provider ([`test_provider`]) and a Stripe-compatible HTTP client
//! ([`stripe`]). The stored intents and the rules that turn one into an order's financial status
//! are in `cells::payments`.
//!
//! Card numbers never pass through here: a payment method is always a provider token
//! (`pm_…`, `tok_…`); anything that looks like a card number is refused before any provider sees it.

pub mod stripe;
pub mod test_provider;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::domain::money::Money;
use crate::error::{ApiError, ApiResult, Code};

/// How the shopper pays.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PaymentMethodKind {
    #[default]
    CreditCard,
    /// Thailand's PromptPay: the payer scans a QR code in their banking app (THB only).
    Promptpay,
    /// The payer transfers the amount quoting a reference.
    BankTransfer,
}

impl PaymentMethodKind {
    pub fn as_str(self) -> &'static str {
        match self {
            PaymentMethodKind::CreditCard => "credit_card",
            PaymentMethodKind::Promptpay => "promptpay",
            PaymentMethodKind::BankTransfer => "bank_transfer",
        }
    }

    /// Whether the payer completes the payment outside the checkout (scan, transfer): until then
    /// the intent waits for them and an order may be created as pending.
    pub fn paid_by_payer_later(self) -> bool {
        !matches!(self, PaymentMethodKind::CreditCard)
    }
}

/// The status of a payment intent, with Stripe's names and meanings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum IntentStatus {
    /// Created, or the last attempt failed (`last_error` says why): a payment method is needed.
    RequiresPaymentMethod,
    RequiresConfirmation,
    /// The payer must act: authenticate a card (3-D Secure), scan a QR code, make a transfer.
    RequiresAction,
    Processing,
    /// Authorized; the funds are held until captured.
    RequiresCapture,
    Succeeded,
    Canceled,
}

impl IntentStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            IntentStatus::RequiresPaymentMethod => "requires_payment_method",
            IntentStatus::RequiresConfirmation => "requires_confirmation",
            IntentStatus::RequiresAction => "requires_action",
            IntentStatus::Processing => "processing",
            IntentStatus::RequiresCapture => "requires_capture",
            IntentStatus::Succeeded => "succeeded",
            IntentStatus::Canceled => "canceled",
        }
    }

    /// Parses Stripe's status names.
    pub fn parse(s: &str) -> Option<IntentStatus> {
        Some(match s {
            "requires_payment_method" => IntentStatus::RequiresPaymentMethod,
            "requires_confirmation" => IntentStatus::RequiresConfirmation,
            "requires_action" => IntentStatus::RequiresAction,
            "processing" => IntentStatus::Processing,
            "requires_capture" => IntentStatus::RequiresCapture,
            "succeeded" => IntentStatus::Succeeded,
            "canceled" => IntentStatus::Canceled,
            _ => return None,
        })
    }
}

/// An order's financial status lives with the order (`domain::order`).
pub use crate::domain::order::FinancialStatus;

/// What the payer has to do next, when the intent waits for them.
///
/// Stored with the intent (bincode: plain fields, no tags); [`NextAction::view`] is the wire form.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum NextAction {
    /// Authenticate the card with its issuer (3-D Secure); `url` when the provider gives a page.
    Authenticate { url: Option<String> },
    /// Scan this EMVCo QR payload with a PromptPay banking app.
    PromptpayQr { payload: String },
    /// Transfer the amount quoting this reference.
    BankTransfer { reference: String },
}

impl NextAction {
    /// `{type, …}` as clients read it.
    pub fn view(&self) -> serde_json::Value {
        match self {
            NextAction::Authenticate { url } => serde_json::json!({"type": "authenticate", "redirectUrl": url}),
            NextAction::PromptpayQr { payload } => serde_json::json!({"type": "promptpay_qr", "qrPayload": payload}),
            NextAction::BankTransfer { reference } => serde_json::json!({"type": "bank_transfer", "reference": reference}),
        }
    }
}

/// What a provider reports about an intent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderState {
    pub status: IntentStatus,
    /// The provider's code for the last failed attempt (`card_declined`, …).
    pub last_error: Option<String>,
    pub next_action: Option<NextAction>,
}

/// A new intent, as asked of a provider.
#[derive(Debug, Clone)]
pub struct CreateIntent {
    /// Our intent id: the provider's idempotency key, so a retried creation makes one intent.
    pub id: Uuid,
    pub checkout_id: Uuid,
    pub amount: Money,
    pub method: PaymentMethodKind,
    pub customer_email: Option<String>,
    /// A JSON object of string-renderable values (checked by the cell before).
    pub metadata: serde_json::Value,
}

/// A provider's answer to a creation.
#[derive(Debug, Clone)]
pub struct Created {
    pub provider_ref: String,
    /// Handed to the shopper once; only its SHA-256 is stored.
    pub client_secret: String,
    pub state: ProviderState,
}

/// An existing intent as a provider is asked about it: its reference and what is stored of it.
#[derive(Debug, Clone)]
pub struct IntentRef {
    pub id: Uuid,
    pub provider_ref: String,
    pub method: PaymentMethodKind,
    pub amount: Money,
    /// Grows with every stored change: part of idempotency keys of calls that change the intent.
    pub version: u32,
    pub current: ProviderState,
}

/// A future a provider answers with (boxed: the trait is used as `dyn PaymentProvider`).
pub type ProviderFuture<'a, T> = Pin<Box<dyn Future<Output = ApiResult<T>> + Send + 'a>>;

/// A payment provider. Errors are already API errors: a provider that cannot be reached or
/// refuses our credentials is 502 `BAD_GATEWAY`, a payment method it does not know is 400.
pub trait PaymentProvider: Send + Sync {
    /// The name stored with each intent (`test`, `stripe`).
    fn name(&self) -> &'static str;
    /// Creates an intent.
    fn create<'a>(&'a self, req: &'a CreateIntent) -> ProviderFuture<'a, Created>;
    /// The intent's current state at the provider.
    fn retrieve<'a>(&'a self, intent: &'a IntentRef) -> ProviderFuture<'a, ProviderState>;
    /// Confirms the intent with a payment method token. A declined payment is not an error: the
    /// state says `requires_payment_method` with `last_error`.
    fn confirm<'a>(&'a self, intent: &'a IntentRef, payment_method: &'a str) -> ProviderFuture<'a, ProviderState>;
}

/// The providers a cell reaches: the one new intents are created at, and every provider an
/// existing intent may name (the test provider is always there, so intents created before a
/// switch to Stripe stay readable).
#[derive(Clone)]
pub struct Providers {
    default: Arc<dyn PaymentProvider>,
    all: Vec<Arc<dyn PaymentProvider>>,
    /// How confirmations through these providers ended.
    pub outcomes: Arc<PaymentOutcomes>,
}

/// How payment confirmations ended, per provider and outcome, for `/metrics`: the intent's
/// status after the call (`succeeded`, `requires_action`, …), `declined` for a refused payment
/// method, `error` when the provider could not be asked.
#[derive(Default)]
pub struct PaymentOutcomes(std::sync::Mutex<std::collections::BTreeMap<(&'static str, &'static str), u64>>);

impl PaymentOutcomes {
    pub fn record(&self, provider: &'static str, result: &ApiResult<ProviderState>) {
        let outcome = match result {
            Ok(s) if s.status == IntentStatus::RequiresPaymentMethod && s.last_error.is_some() => "declined",
            Ok(s) => s.status.as_str(),
            Err(_) => "error",
        };
        if let Ok(mut m) = self.0.lock() {
            *m.entry((provider, outcome)).or_default() += 1;
        }
    }

    /// Writes the counts of the cell `owner`.
    pub fn collect(&self, out: &mut crate::metrics::Exposition, owner: &str) {
        const NAME: &str = "shopcell_payment_confirmations_total";
        const HELP: &str = "Payment confirmations, by cell, provider and outcome.";
        out.declare(NAME, crate::metrics::Kind::Counter, HELP);
        let counts = self.0.lock().map(|m| m.clone()).unwrap_or_default();
        for ((provider, outcome), n) in counts {
            out.counter(NAME, HELP, &[("cell", owner), ("provider", provider), ("outcome", outcome)], n);
        }
    }
}

impl Default for Providers {
    /// The offline test provider alone.
    fn default() -> Self {
        let test: Arc<dyn PaymentProvider> = Arc::new(test_provider::TestProvider);
        Providers { default: test.clone(), all: vec![test], outcomes: Arc::default() }
    }
}

impl Providers {
    /// New intents go to Stripe; test intents stay reachable.
    pub fn with_stripe(stripe: stripe::StripeClient) -> Self {
        let stripe: Arc<dyn PaymentProvider> = Arc::new(stripe);
        let mut p = Providers::default();
        p.all.push(stripe.clone());
        p.default = stripe;
        p
    }

    /// The providers the flags configure; Stripe needs its secret key.
    pub fn from_args(args: &crate::cli::PaymentArgs) -> Result<Providers, String> {
        match args.payment_provider {
            crate::cli::PaymentProviderKind::Test => Ok(Providers::default()),
            crate::cli::PaymentProviderKind::Stripe => {
                let key = args.stripe_secret_key.as_deref().unwrap_or_default();
                Ok(Providers::with_stripe(stripe::StripeClient::new(&args.stripe_api_base, key)?))
            }
        }
    }

    /// Where new intents are created.
    pub fn default_provider(&self) -> &dyn PaymentProvider {
        self.default.as_ref()
    }

    /// The provider an intent names; one that is not configured here is 503.
    pub fn get(&self, name: &str) -> ApiResult<&dyn PaymentProvider> {
        self.all
            .iter()
            .find(|p| p.name() == name)
            .map(|p| p.as_ref())
            .ok_or_else(|| ApiError::msg(Code::UNAVAILABLE, format!("the payment provider {name:?} is not configured")))
    }
}

/// Longest payment method token accepted.
pub const MAX_TOKEN_CHARS: usize = 255;

/// Card-number detection lives with the other field checks (`domain::fields`).
pub use crate::domain::fields::looks_like_card_number;

/// Checks a payment method token given by a client: present, short, printable, and never a card
/// number (400 naming `paymentMethod`).
pub fn check_token(token: &str) -> ApiResult<&str> {
    let token = token.trim();
    if token.is_empty() {
        return Err(ApiError::field("paymentMethod", "must not be empty"));
    }
    if looks_like_card_number(token) {
        return Err(ApiError::field(
            "paymentMethod",
            "card numbers are not accepted: send a payment method token from the payment provider",
        ));
    }
    if token.chars().count() > MAX_TOKEN_CHARS || !token.chars().all(|c| c.is_ascii_graphic()) {
        return Err(ApiError::field("paymentMethod", "must be a payment method token (printable ASCII, at most 255 characters)"));
    }
    Ok(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn card_numbers_are_recognised_in_any_spelling() {
        for s in ["4242424242424242", "4242 4242 4242 4242", "4242-4242-4242-4242", "pm_4242424242424242", "378282246310005"] {
            assert!(looks_like_card_number(s), "{s}");
            assert_eq!(check_token(s).unwrap_err().fields[0].field, "paymentMethod");
        }
        for s in ["pm_card_visa", "tok_chargeDeclined", "pm_1NqQ2x2eZvKYlo2C", "12345678901"] {
            assert!(!looks_like_card_number(s), "{s}");
        }
        assert!(check_token("  ").is_err());
        assert!(check_token("pm card").is_err());
        assert_eq!(check_token(" pm_card_visa ").unwrap(), "pm_card_visa");
    }

    #[test]
    fn statuses_use_stripe_names_both_ways() {
        for s in [
            IntentStatus::RequiresPaymentMethod,
            IntentStatus::RequiresConfirmation,
            IntentStatus::RequiresAction,
            IntentStatus::Processing,
            IntentStatus::RequiresCapture,
            IntentStatus::Succeeded,
            IntentStatus::Canceled,
        ] {
            assert_eq!(IntentStatus::parse(s.as_str()), Some(s));
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
        }
        assert_eq!(IntentStatus::parse("requires_source"), None);
        assert_eq!(serde_json::to_value(FinancialStatus::Authorized).unwrap(), "AUTHORIZED");
        assert_eq!(serde_json::from_str::<PaymentMethodKind>("\"bank_transfer\"").unwrap(), PaymentMethodKind::BankTransfer);
        assert_eq!(PaymentMethodKind::default(), PaymentMethodKind::CreditCard);
    }
}
