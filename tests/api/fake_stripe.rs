//! A Stripe-compatible server on loopback for the Stripe client's tests. It serves the three
//! PaymentIntents endpoints the client calls, checks the Bearer key, the form encoding and the
//! `Idempotency-Key` (a repeated key is answered with the first response, as Stripe does), and
//! answers Stripe-shaped JSON, errors included. Every request is recorded for the test to check.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// The secret key the fake accepts.
pub const KEY: &str = "sk_test_shopcell_fake_4242";

/// One request as the fake saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub authorization: Option<String>,
    pub content_type: Option<String>,
    pub idempotency_key: Option<String>,
    pub form: Vec<(String, String)>,
}

impl Seen {
    pub fn field(&self, name: &str) -> Option<&str> {
        self.form.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }
}

#[derive(Default)]
struct State {
    intents: HashMap<String, Value>,
    /// Idempotency key → the first answer.
    answers: HashMap<String, (u16, Value)>,
    seen: Vec<Seen>,
    next: u32,
}

pub struct FakeStripe {
    pub url: String,
    state: Arc<Mutex<State>>,
    task: JoinHandle<()>,
}

impl Drop for FakeStripe {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeStripe {
    pub async fn start() -> FakeStripe {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("address"));
        let state = Arc::new(Mutex::new(State::default()));
        let shared = state.clone();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let state = shared.clone();
                tokio::spawn(async move {
                    let svc = service_fn(move |req| {
                        let state = state.clone();
                        async move { Ok::<_, Infallible>(handle(&state, req).await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), svc).await;
                });
            }
        });
        FakeStripe { url, state, task }
    }

    /// Every request so far, in order.
    pub fn seen(&self) -> Vec<Seen> {
        self.state.lock().unwrap().seen.clone()
    }

    /// Sets an intent's status as if the payer had acted (a PromptPay scan, a transfer).
    pub fn set_status(&self, id: &str, status: &str) {
        let mut s = self.state.lock().unwrap();
        let pi = s.intents.get_mut(id).expect("a known intent");
        pi["status"] = json!(status);
        pi["next_action"] = Value::Null;
    }
}

fn error(status: u16, kind: &str, code: Option<&str>, param: Option<&str>, message: &str) -> (u16, Value) {
    (status, json!({"error": {"type": kind, "code": code, "param": param, "message": message}}))
}

async fn handle(state: &Mutex<State>, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let header = |n: &str| req.headers().get(n).and_then(|v| v.to_str().ok()).map(str::to_string);
    let mut seen = Seen {
        method: req.method().to_string(),
        path: req.uri().path().to_string(),
        authorization: header("authorization"),
        content_type: header("content-type"),
        idempotency_key: header("idempotency-key"),
        form: Vec::new(),
    };
    let body = req.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
    seen.form = form_urlencoded::parse(&body).into_owned().collect();
    let (status, value) = answer(&mut state.lock().unwrap(), &seen);
    state.lock().unwrap().seen.push(seen);
    let mut res = Response::new(Full::new(Bytes::from(value.to_string())));
    *res.status_mut() = hyper::StatusCode::from_u16(status).expect("status");
    res.headers_mut().insert("content-type", "application/json".parse().expect("header"));
    res
}

fn answer(s: &mut State, req: &Seen) -> (u16, Value) {
    if req.authorization.as_deref() != Some(&format!("Bearer {KEY}")) {
        return error(401, "invalid_request_error", None, None, "Invalid API Key provided: sk_test_****4242");
    }
    if req.method == "POST" && req.content_type.as_deref() != Some("application/x-www-form-urlencoded") {
        return error(400, "invalid_request_error", Some("parameter_invalid"), None, "form bodies only");
    }
    let parts: Vec<&str> = req.path.trim_start_matches('/').split('/').collect();
    match (req.method.as_str(), parts.as_slice()) {
        ("POST", ["v1", "payment_intents"]) => {
            let Some(key) = req.idempotency_key.clone() else {
                return error(400, "invalid_request_error", Some("idempotency_key_missing"), None, "the fake wants a key");
            };
            if let Some(first) = s.answers.get(&key) {
                return first.clone();
            }
            let a = create(s, req);
            s.answers.insert(key, a.clone());
            a
        }
        ("GET", ["v1", "payment_intents", id]) => match s.intents.get(*id) {
            Some(pi) => (200, pi.clone()),
            None => error(404, "invalid_request_error", Some("resource_missing"), Some("intent"), "No such payment_intent"),
        },
        ("POST", ["v1", "payment_intents", id, "confirm"]) => {
            if req.idempotency_key.is_none() {
                return error(400, "invalid_request_error", Some("idempotency_key_missing"), None, "the fake wants a key");
            }
            confirm(s, id, req.field("payment_method").unwrap_or(""))
        }
        _ => error(404, "invalid_request_error", Some("resource_missing"), None, "Unrecognized request URL"),
    }
}

fn create(s: &mut State, req: &Seen) -> (u16, Value) {
    let Some(amount) = req.field("amount").and_then(|a| a.parse::<i64>().ok()) else {
        return error(400, "invalid_request_error", Some("parameter_invalid_integer"), Some("amount"), "Invalid integer");
    };
    if amount < 50 {
        return error(400, "invalid_request_error", Some("amount_too_small"), Some("amount"), "Amount must be at least 50");
    }
    let currency = req.field("currency").unwrap_or("");
    if currency.len() != 3 || currency.chars().any(|c| !c.is_ascii_lowercase()) {
        return error(400, "invalid_request_error", Some("parameter_invalid"), Some("currency"), "Invalid currency");
    }
    s.next += 1;
    let id = format!("pi_fake{}", s.next);
    let metadata: serde_json::Map<String, Value> = req
        .form
        .iter()
        .filter_map(|(k, v)| k.strip_prefix("metadata[").and_then(|k| k.strip_suffix(']')).map(|k| (k.to_string(), json!(v))))
        .collect();
    let types: Vec<&str> = req.form.iter().filter(|(k, _)| k == "payment_method_types[]").map(|(_, v)| v.as_str()).collect();
    let pi = json!({
        "id": id, "object": "payment_intent", "amount": amount, "currency": currency,
        "client_secret": format!("{id}_secret_fake{}", s.next), "status": "requires_payment_method",
        "payment_method_types": types, "receipt_email": req.field("receipt_email"), "metadata": metadata,
        "last_payment_error": null, "next_action": null,
    });
    s.intents.insert(id, pi.clone());
    (200, pi)
}

fn confirm(s: &mut State, id: &str, payment_method: &str) -> (u16, Value) {
    let Some(pi) = s.intents.get_mut(id) else {
        return error(404, "invalid_request_error", Some("resource_missing"), Some("intent"), "No such payment_intent");
    };
    if matches!(pi["status"].as_str(), Some("succeeded" | "canceled" | "processing")) {
        return error(400, "invalid_request_error", Some("payment_intent_unexpected_state"), None, "cannot confirm");
    }
    let promptpay = pi["payment_method_types"] == json!(["promptpay"]);
    pi["last_payment_error"] = Value::Null;
    pi["next_action"] = Value::Null;
    match payment_method {
        "pm_card_visa" if !promptpay => pi["status"] = json!("succeeded"),
        "pm_card_threeDSecureRequired" if !promptpay => {
            pi["status"] = json!("requires_action");
            pi["next_action"] = json!({"type": "redirect_to_url", "redirect_to_url": {"url": "https://hooks.fake/3ds"}});
        }
        "pm_promptpay" if promptpay => {
            pi["status"] = json!("requires_action");
            pi["next_action"] = json!({"type": "promptpay_display_qr_code", "promptpay_display_qr_code": {"data": "00020101021229370016A000000677010111FAKE"}});
        }
        "pm_card_chargeDeclined" if !promptpay => {
            pi["status"] = json!("requires_payment_method");
            pi["last_payment_error"] = json!({"type": "card_error", "code": "card_declined", "decline_code": "generic_decline"});
            let (status, mut body) = error(402, "card_error", Some("card_declined"), None, "Your card was declined.");
            body["error"]["decline_code"] = json!("generic_decline");
            body["error"]["payment_intent"] = pi.clone();
            return (status, body);
        }
        _ => {
            return error(
                400,
                "invalid_request_error",
                Some("resource_missing"),
                Some("payment_method"),
                "No such PaymentMethod",
            );
        }
    }
    (200, pi.clone())
}
