//! A client of the Stripe PaymentIntents API (or any server speaking it) at a configurable base
//! URL: create (`POST /v1/payment_intents`, with our intent id as `Idempotency-Key`), retrieve
//! (`GET /v1/payment_intents/{id}`) and confirm (`POST /v1/payment_intents/{id}/confirm`).
//!
//! Requests are form-encoded with the secret key as Bearer token; amounts are sent in minor units
//! as stored (Stripe counts JPY in yen and USD in cents too). Stripe's refusals become API errors
//! that never carry Stripe's own message (it may quote part of the key): a payment method Stripe
//! does not know is 400, a card decline on confirmation is a normal answer (the intent's
//! `lastError`), credentials or outages are 502.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Method, Request};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde::Deserialize;

use super::{
    CreateIntent, Created, IntentRef, IntentStatus, NextAction, PaymentMethodKind, PaymentProvider, ProviderFuture, ProviderState,
};
use crate::error::{ApiError, ApiResult, Code};

/// Calls to Stripe give up after this long (502).
const TIMEOUT: Duration = Duration::from_secs(15);

type HttpsClient = Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

/// The Stripe-compatible provider.
pub struct StripeClient {
    base: String,
    secret_key: String,
    client: HttpsClient,
}

impl std::fmt::Debug for StripeClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StripeClient").field("base", &self.base).finish_non_exhaustive()
    }
}

impl StripeClient {
    /// A client of the API at `base` (e.g. `https://api.stripe.com`) with a secret key.
    pub fn new(base: &str, secret_key: &str) -> Result<StripeClient, String> {
        let base = base.trim().trim_end_matches('/');
        if !(base.starts_with("https://") || base.starts_with("http://")) || base.parse::<hyper::Uri>().is_err() {
            return Err(format!("the Stripe API base must be an http(s) URL, got {base:?}"));
        }
        let secret_key = secret_key.trim();
        if secret_key.is_empty() || !secret_key.bytes().all(|b| b.is_ascii_graphic()) {
            return Err("the Stripe secret key is missing or malformed (set --stripe-secret-key)".into());
        }
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_provider_and_webpki_roots(rustls::crypto::ring::default_provider())
            .map_err(|e| format!("no TLS for the payment provider: {e}"))?
            .https_or_http()
            .enable_http1()
            .build();
        let client = Client::builder(TokioExecutor::new()).build(https);
        Ok(StripeClient { base: base.to_string(), secret_key: secret_key.to_string(), client })
    }

    async fn send(
        &self,
        method: Method,
        path: &str,
        form: Option<String>,
        idempotency_key: Option<String>,
    ) -> ApiResult<(u16, Bytes)> {
        let mut req = Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base))
            .header(hyper::header::AUTHORIZATION, format!("Bearer {}", self.secret_key))
            .header(hyper::header::ACCEPT, "application/json");
        if form.is_some() {
            req = req.header(hyper::header::CONTENT_TYPE, "application/x-www-form-urlencoded");
        }
        if let Some(k) = idempotency_key {
            req = req.header("idempotency-key", k);
        }
        let req = req.body(Full::new(Bytes::from(form.unwrap_or_default()))).map_err(ApiError::internal)?;
        let unreachable = || ApiError::msg(Code::BAD_GATEWAY, "the payment provider did not answer");
        let call = async {
            let res = self.client.request(req).await.map_err(|e| {
                tracing::warn!(error = %e, "payment provider unreachable");
                unreachable()
            })?;
            let status = res.status().as_u16();
            let body = res.into_body().collect().await.map_err(|_| unreachable())?.to_bytes();
            Ok((status, body))
        };
        tokio::time::timeout(TIMEOUT, call).await.map_err(|_| unreachable())?
    }
}

/// `payment_method_types[]` of a method.
fn method_type(method: PaymentMethodKind) -> &'static str {
    match method {
        PaymentMethodKind::CreditCard => "card",
        PaymentMethodKind::Promptpay => "promptpay",
        PaymentMethodKind::BankTransfer => "customer_balance",
    }
}

/// A metadata value as Stripe stores it (strings only): strings as they are, anything else as
/// its JSON text.
fn metadata_text(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The form of `POST /v1/payment_intents`.
pub fn create_form(req: &CreateIntent) -> String {
    let mut f = form_urlencoded::Serializer::new(String::new());
    f.append_pair("amount", &req.amount.amount.to_string());
    f.append_pair("currency", &req.amount.currency.code().to_ascii_lowercase());
    f.append_pair("payment_method_types[]", method_type(req.method));
    if req.method == PaymentMethodKind::BankTransfer {
        f.append_pair("payment_method_options[customer_balance][funding_type]", "bank_transfer");
    }
    if let Some(email) = &req.customer_email {
        f.append_pair("receipt_email", email);
    }
    f.append_pair("metadata[shopcell_payment_intent]", &req.id.to_string());
    f.append_pair("metadata[shopcell_checkout]", &req.checkout_id.to_string());
    if let Some(map) = req.metadata.as_object() {
        for (k, v) in map.iter().filter(|(_, v)| !v.is_null()) {
            f.append_pair(&format!("metadata[{k}]"), &metadata_text(v));
        }
    }
    f.finish()
}

/// A Stripe PaymentIntent, as much of it as we read.
#[derive(Debug, Deserialize)]
struct StripeIntent {
    id: String,
    #[serde(default)]
    client_secret: Option<String>,
    status: String,
    #[serde(default)]
    last_payment_error: Option<StripeError>,
    #[serde(default)]
    next_action: Option<serde_json::Value>,
}

/// Stripe's `error` object (and `last_payment_error`).
#[derive(Debug, Default, Deserialize)]
struct StripeError {
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    code: Option<String>,
    #[serde(default)]
    decline_code: Option<String>,
    #[serde(default)]
    param: Option<String>,
    #[serde(default)]
    payment_intent: Option<Box<StripeIntent>>,
}

#[derive(Debug, Deserialize)]
struct ErrorBody {
    error: StripeError,
}

/// A code from Stripe, kept only when it looks like one (`card_declined`): it reaches clients.
fn clean_code(code: Option<&str>) -> Option<String> {
    code.filter(|c| {
        !c.is_empty() && c.len() <= 64 && c.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
    })
    .map(str::to_string)
}

impl StripeError {
    /// The most telling code: the decline reason when there is a specific one, else the error code.
    fn reason(&self) -> Option<String> {
        let decline = self.decline_code.as_deref().filter(|d| *d != "generic_decline");
        clean_code(decline).or_else(|| clean_code(self.code.as_deref()))
    }
}

/// Stripe's `next_action`, in our terms; kinds we do not show are dropped.
fn next_action(v: &serde_json::Value) -> Option<NextAction> {
    let s = |p: &str| v.pointer(p).and_then(|x| x.as_str()).map(str::to_string);
    match v.get("type")?.as_str()? {
        "redirect_to_url" => Some(NextAction::Authenticate { url: s("/redirect_to_url/url") }),
        "use_stripe_sdk" => Some(NextAction::Authenticate { url: None }),
        "promptpay_display_qr_code" => Some(NextAction::PromptpayQr { payload: s("/promptpay_display_qr_code/data")? }),
        "display_bank_transfer_instructions" => {
            Some(NextAction::BankTransfer { reference: s("/display_bank_transfer_instructions/reference")? })
        }
        _ => None,
    }
}

/// The state of a Stripe intent; an unknown status is a provider failure.
fn state_of(i: &StripeIntent) -> ApiResult<ProviderState> {
    let status = IntentStatus::parse(&i.status).ok_or_else(|| {
        tracing::warn!(status = %i.status, "the payment provider answered an unknown status");
        ApiError::msg(Code::BAD_GATEWAY, "the payment provider answered an unknown status")
    })?;
    Ok(ProviderState {
        status,
        last_error: i.last_payment_error.as_ref().and_then(StripeError::reason),
        next_action: i.next_action.as_ref().and_then(next_action),
    })
}

/// What an answer from Stripe means.
#[derive(Debug)]
enum Answer {
    Intent(StripeIntent),
    /// A card declined on confirmation (402 without the intent attached): the reason code.
    Declined(Option<String>),
}

/// Reads a response: a 2xx intent, a declined card, or the error it stands for.
fn read_answer(status: u16, body: &[u8]) -> ApiResult<Answer> {
    let garbled = || ApiError::msg(Code::BAD_GATEWAY, "the payment provider answered an unreadable response");
    if (200..300).contains(&status) {
        return serde_json::from_slice(body).map(Answer::Intent).map_err(|_| garbled());
    }
    let err = serde_json::from_slice::<ErrorBody>(body).map(|b| b.error).unwrap_or_default();
    let code = clean_code(err.code.as_deref());
    tracing::info!(
        status,
        code = code.as_deref().unwrap_or(""),
        kind = err.kind.as_deref().unwrap_or(""),
        "the payment provider refused a request"
    );
    let about_method = err.param.as_deref().is_some_and(|p| p.starts_with("payment_method"));
    let with_code = |text: &str| match &code {
        Some(c) => format!("{text} ({c})"),
        None => text.to_string(),
    };
    if status == 402 {
        let reason = err.reason();
        return Ok(match err.payment_intent {
            Some(pi) => Answer::Intent(*pi),
            None => Answer::Declined(reason),
        });
    }
    Err(match status {
        400 | 404 if about_method => {
            ApiError::field("paymentMethod", with_code("the payment provider does not accept this payment method"))
        }
        400 if code.as_deref() == Some("payment_intent_unexpected_state") => {
            ApiError::msg(Code::CONFLICT, "the payment intent cannot be confirmed in its current state")
        }
        400 if matches!(code.as_deref(), Some("amount_too_small" | "amount_too_large")) => {
            ApiError::msg(Code::BUSINESS_RULE, with_code("the payment provider does not accept this amount"))
        }
        401 | 403 => ApiError::msg(Code::BAD_GATEWAY, "the payment provider refused our credentials"),
        409 => ApiError::msg(Code::CONFLICT, "the payment provider is handling the same request; retry"),
        429 => ApiError::msg(Code::UNAVAILABLE, "the payment provider is busy; retry shortly").retry_after(1),
        400..500 => ApiError::msg(Code::BAD_GATEWAY, with_code("the payment provider refused the request")),
        _ => ApiError::msg(Code::BAD_GATEWAY, "the payment provider failed"),
    })
}

/// A provider reference as a path segment: Stripe ids are letters, digits and `_`.
fn path_ref(provider_ref: &str) -> ApiResult<&str> {
    if !provider_ref.is_empty() && provider_ref.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        Ok(provider_ref)
    } else {
        Err(ApiError::internal(format!("malformed provider reference {provider_ref:?}")))
    }
}

impl PaymentProvider for StripeClient {
    fn name(&self) -> &'static str {
        "stripe"
    }

    fn create<'a>(&'a self, req: &'a CreateIntent) -> ProviderFuture<'a, Created> {
        Box::pin(async move {
            let (status, body) =
                self.send(Method::POST, "/v1/payment_intents", Some(create_form(req)), Some(req.id.to_string())).await?;
            let Answer::Intent(pi) = read_answer(status, &body)? else {
                return Err(ApiError::msg(Code::BAD_GATEWAY, "the payment provider declined to create the payment"));
            };
            let client_secret = pi
                .client_secret
                .clone()
                .filter(|s| !s.is_empty())
                .ok_or_else(|| ApiError::msg(Code::BAD_GATEWAY, "the payment provider answered no client secret"))?;
            path_ref(&pi.id).map_err(|_| ApiError::msg(Code::BAD_GATEWAY, "the payment provider answered a malformed id"))?;
            Ok(Created { provider_ref: pi.id.clone(), client_secret, state: state_of(&pi)? })
        })
    }

    fn retrieve<'a>(&'a self, intent: &'a IntentRef) -> ProviderFuture<'a, ProviderState> {
        Box::pin(async move {
            let path = format!("/v1/payment_intents/{}", path_ref(&intent.provider_ref)?);
            let (status, body) = self.send(Method::GET, &path, None, None).await?;
            match read_answer(status, &body)? {
                Answer::Intent(pi) => state_of(&pi),
                Answer::Declined(_) => Err(ApiError::msg(Code::BAD_GATEWAY, "the payment provider answered a decline to a read")),
            }
        })
    }

    fn confirm<'a>(&'a self, intent: &'a IntentRef, payment_method: &'a str) -> ProviderFuture<'a, ProviderState> {
        Box::pin(async move {
            let path = format!("/v1/payment_intents/{}/confirm", path_ref(&intent.provider_ref)?);
            // Built before any await: the serializer is not `Send`.
            let form = {
                let mut f = form_urlencoded::Serializer::new(String::new());
                if !payment_method.is_empty() {
                    f.append_pair("payment_method", payment_method);
                }
                f.finish()
            };
            // One key per stored version and token: a retry of the same attempt is answered once,
            // a new attempt (after a decline, or with another token) is a new request.
            let token = ring::digest::digest(&ring::digest::SHA256, payment_method.as_bytes());
            let token: String = token.as_ref()[..8].iter().map(|b| format!("{b:02x}")).collect();
            let key = format!("{}-confirm-{}-{token}", intent.id, intent.version);
            let (status, body) = self.send(Method::POST, &path, Some(form), Some(key)).await?;
            match read_answer(status, &body)? {
                Answer::Intent(pi) => state_of(&pi),
                Answer::Declined(reason) => Ok(ProviderState {
                    status: IntentStatus::RequiresPaymentMethod,
                    last_error: reason.or_else(|| Some("card_declined".into())),
                    next_action: None,
                }),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use uuid::Uuid;

    use super::*;
    use crate::domain::money::{Currency, Money};

    fn pairs(form: &str) -> Vec<(String, String)> {
        form_urlencoded::parse(form.as_bytes()).into_owned().collect()
    }

    #[test]
    fn the_create_form_carries_minor_units_lower_case_currency_and_metadata() {
        let id = Uuid::now_v7();
        let checkout = Uuid::now_v7();
        let req = CreateIntent {
            id,
            checkout_id: checkout,
            amount: Money { amount: 1500, currency: Currency::parse("JPY").unwrap() },
            method: PaymentMethodKind::CreditCard,
            customer_email: Some("a+b@example.com".into()),
            metadata: serde_json::json!({"cart": "c 1&2", "items": 3, "gift": true, "skip": null}),
        };
        let form = create_form(&req);
        assert!(form.contains("receipt_email=a%2Bb%40example.com"), "{form}");
        let p = pairs(&form);
        let get = |k: &str| p.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("amount"), Some("1500"), "JPY is sent in yen, unconverted");
        assert_eq!(get("currency"), Some("jpy"));
        assert_eq!(get("payment_method_types[]"), Some("card"));
        assert_eq!(get("metadata[shopcell_payment_intent]"), Some(id.to_string().as_str()));
        assert_eq!(get("metadata[shopcell_checkout]"), Some(checkout.to_string().as_str()));
        assert_eq!(
            (get("metadata[cart]"), get("metadata[items]"), get("metadata[gift]")),
            (Some("c 1&2"), Some("3"), Some("true"))
        );
        assert_eq!(get("metadata[skip]"), None);

        let transfer =
            create_form(&CreateIntent { method: PaymentMethodKind::BankTransfer, customer_email: None, ..req.clone() });
        let p = pairs(&transfer);
        assert!(p.contains(&("payment_method_types[]".into(), "customer_balance".into())));
        assert!(p.contains(&("payment_method_options[customer_balance][funding_type]".into(), "bank_transfer".into())));
        assert!(!p.iter().any(|(k, _)| k == "receipt_email"));
        let pp = create_form(&CreateIntent { method: PaymentMethodKind::Promptpay, ..req });
        assert!(pairs(&pp).contains(&("payment_method_types[]".into(), "promptpay".into())));
    }

    #[test]
    fn stripe_intents_map_to_states() {
        let body = br#"{"id":"pi_1","object":"payment_intent","status":"requires_action","client_secret":"pi_1_secret_x",
            "next_action":{"type":"promptpay_display_qr_code","promptpay_display_qr_code":{"data":"000201abc"}}}"#;
        let Answer::Intent(pi) = read_answer(200, body).unwrap() else { panic!("an intent") };
        let s = state_of(&pi).unwrap();
        assert_eq!(s.status, IntentStatus::RequiresAction);
        assert_eq!(s.next_action, Some(NextAction::PromptpayQr { payload: "000201abc".into() }));

        let body = br#"{"id":"pi_1","status":"requires_payment_method",
            "last_payment_error":{"type":"card_error","code":"card_declined","decline_code":"insufficient_funds"}}"#;
        let Answer::Intent(pi) = read_answer(200, body).unwrap() else { panic!("an intent") };
        assert_eq!(state_of(&pi).unwrap().last_error.as_deref(), Some("insufficient_funds"));
        let body = br#"{"id":"pi_1","status":"requires_action","next_action":{"type":"redirect_to_url","redirect_to_url":{"url":"https://hooks.example/3ds"}}}"#;
        let Answer::Intent(pi) = read_answer(200, body).unwrap() else { panic!("an intent") };
        assert_eq!(
            state_of(&pi).unwrap().next_action,
            Some(NextAction::Authenticate { url: Some("https://hooks.example/3ds".into()) })
        );

        let odd = br#"{"id":"pi_1","status":"requires_source"}"#;
        let Answer::Intent(pi) = read_answer(200, odd).unwrap() else { panic!("an intent") };
        assert_eq!(state_of(&pi).unwrap_err().code, Code::BAD_GATEWAY);
    }

    #[test]
    fn stripe_errors_map_to_clear_api_errors() {
        let err = |status: u16, body: &str| read_answer(status, body.as_bytes()).unwrap_err();
        let e = err(
            400,
            r#"{"error":{"type":"invalid_request_error","code":"resource_missing","param":"payment_method","message":"No such PaymentMethod: 'pm_x'"}}"#,
        );
        assert_eq!((e.code, e.fields[0].field.as_str()), (Code::VALIDATION_FAILED, "paymentMethod"));
        assert!(!e.message.contains("No such"), "Stripe's own message is not passed on");
        let e = err(401, r#"{"error":{"type":"invalid_request_error","message":"Invalid API Key provided: sk_test_****abcd"}}"#);
        assert_eq!(e.code, Code::BAD_GATEWAY);
        assert!(!e.message.contains("sk_"));
        assert_eq!(err(400, r#"{"error":{"code":"payment_intent_unexpected_state"}}"#).code, Code::CONFLICT);
        assert_eq!(err(400, r#"{"error":{"code":"amount_too_small"}}"#).code, Code::BUSINESS_RULE);
        assert_eq!(
            err(400, r#"{"error":{"code":"parameter_unknown"}}"#).message,
            "the payment provider refused the request (parameter_unknown)"
        );
        assert_eq!(err(429, "{}").retry_after, Some(1));
        assert_eq!(err(500, "<html>").code, Code::BAD_GATEWAY);
        assert_eq!(err(400, r#"{"error":{"code":"Weird Code <script>"}}"#).message, "the payment provider refused the request");
        assert_eq!(read_answer(200, b"not json").unwrap_err().code, Code::BAD_GATEWAY);

        let declined = r#"{"error":{"type":"card_error","code":"card_declined","decline_code":"generic_decline"}}"#;
        match read_answer(402, declined.as_bytes()).unwrap() {
            Answer::Declined(reason) => assert_eq!(reason.as_deref(), Some("card_declined")),
            other => panic!("{other:?}"),
        }
        let with_intent = r#"{"error":{"type":"card_error","code":"expired_card",
            "payment_intent":{"id":"pi_1","status":"requires_payment_method","last_payment_error":{"code":"expired_card"}}}}"#;
        let Answer::Intent(pi) = read_answer(402, with_intent.as_bytes()).unwrap() else { panic!("an intent") };
        assert_eq!(state_of(&pi).unwrap().last_error.as_deref(), Some("expired_card"));
    }

    #[test]
    fn the_client_checks_its_configuration_and_never_shows_the_key() {
        assert!(StripeClient::new("ftp://x", "sk_test_1").is_err());
        assert!(StripeClient::new("https://api.stripe.com", " ").is_err());
        let c = StripeClient::new("https://api.stripe.com/", "sk_test_secret").unwrap();
        assert_eq!(c.base, "https://api.stripe.com");
        assert!(!format!("{c:?}").contains("sk_test_secret"));
        assert!(path_ref("pi_123").is_ok());
        assert!(path_ref("../v1/customers").is_err());
    }
}
