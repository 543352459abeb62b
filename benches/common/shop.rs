//! A selling store made through the public API: an owner and their store, the discount, tax and
//! shipping a checkout prices with, checkouts prepared up to a confirmed payment, and their
//! completion into orders. The checkout and stock benchmarks share it.

use std::sync::Arc;
use std::time::Duration;

use hyper::StatusCode;
use serde_json::{Value, json};
use uuid::Uuid;

use super::{BoxError, Client, Endpoint, expect_json, run_batch};

/// Requests in flight while preparing and completing.
pub const CONCURRENCY: usize = 64;

/// A registered owner's endpoint and the path of their new store (`/api/v1/stores/{id}`).
pub struct Shop {
    pub owner: Endpoint,
    pub base: String,
    /// The shipping rate every prepared checkout chooses.
    pub rate: Value,
}

impl Shop {
    /// Registers an owner and creates a US store with a 10 % code `TEN`, a 5 % Oregon tax and a
    /// ground shipping rate.
    pub async fn open(endpoint: &Endpoint, name: &str) -> Result<Shop, BoxError> {
        let mut client = Client::new(endpoint.addr);
        let email = format!("shop-{}@example.com", Uuid::now_v7().simple());
        let register = endpoint.post_json(
            "/api/v1/auth/register",
            &json!({"email": email, "password": "bench-password-1234", "name": "Bench Owner"}),
        );
        let login = expect_json(client.send(register).await?, StatusCode::CREATED, "register")?;
        let owner = endpoint.with_bearer(login["accessToken"].as_str().ok_or("register: no accessToken")?)?;
        let store =
            owner.post_json("/api/v1/stores", &json!({"name": name, "currency": "USD", "country": "US", "timezone": "UTC"}));
        let store = expect_json(client.send(store).await?, StatusCode::CREATED, "create store")?;
        let base = format!("/api/v1/stores/{}", store["id"].as_str().ok_or("create store: no id")?);
        let mut shop = Shop { owner, base, rate: Value::Null };
        let code = json!({"title": "Ten", "code": "TEN", "valueType": "percentage", "value": 1000});
        shop.post(&mut client, "discounts", &code).await?;
        shop.post(&mut client, "tax-rates", &json!({"country": "US", "province": "OR", "rate": 500, "name": "State"})).await?;
        let zone = json!({"name": "US", "countries": [{"code": "US"}], "rates": [
            {"name": "Ground", "price": 800, "estimatedDelivery": {"minDays": 2, "maxDays": 4}}]});
        shop.rate = shop.post(&mut client, "shipping-zones", &zone).await?["rates"][0]["id"].clone();
        Ok(shop)
    }

    /// `POST {base}/{path}` expecting 201; answers the created resource.
    pub async fn post(&self, client: &mut Client, path: &str, body: &Value) -> Result<Value, BoxError> {
        let request = self.owner.post_json(&format!("{}/{path}", self.base), body);
        expect_json(client.send(request).await?, StatusCode::CREATED, path)
    }

    /// A tracked single-variant product priced `price` with `stock` units at the default
    /// location; answers its variant id.
    pub async fn product(&self, client: &mut Client, title: &str, price: u64, stock: usize) -> Result<String, BoxError> {
        let body = json!({"title": title, "status": "ACTIVE", "price": {"amount": price, "currency": "USD"},
                          "variants": [{"title": "Default", "inventoryTracked": true, "inventoryQuantity": stock}]});
        let product = self.post(client, "products", &body).await?;
        Ok(product["variants"][0]["id"].as_str().ok_or("product: no variant id")?.to_string())
    }

    /// Creates `count` checkouts of `lines(n)`, each addressed, with its shipping rate chosen and
    /// its payment intent confirmed: ready to complete. Answers (checkout id, intent id) pairs.
    pub async fn prepare<F>(&self, count: usize, lines: F) -> Result<Vec<(String, String)>, BoxError>
    where
        F: Fn(u64) -> Value + Send + Sync + 'static,
    {
        let address =
            json!({"address1": "1 Main St", "city": "Portland", "province": "OR", "country": "US", "postalCode": "97201"});
        let (a, b) = (self.owner.clone(), self.base.clone());
        let created = self
            .batch("create checkout", count, StatusCode::CREATED, move |n| {
                a.post_json(&format!("{b}/checkouts"), &json!({"lineItems": lines(n), "email": "buyer@example.com"}))
            })
            .await?;
        let ids: Arc<Vec<String>> = Arc::new(created.iter().map(|c| c["id"].as_str().unwrap_or_default().to_string()).collect());
        let (a, b, i) = (self.owner.clone(), self.base.clone(), ids.clone());
        let patch = json!({"shippingAddress": address, "shippingMethodId": self.rate});
        let updated = self
            .batch("update checkout", count, StatusCode::OK, move |n| {
                a.patch_json(&format!("{b}/checkouts/{}", i[n as usize]), &patch)
            })
            .await?;
        let (a, b, i) = (self.owner.clone(), self.base.clone(), ids.clone());
        let dues: Arc<Vec<Value>> = Arc::new(updated.iter().map(|u| u["paymentDue"]["amount"].clone()).collect());
        let sessions = self
            .batch("payment session", count, StatusCode::CREATED, move |n| {
                let session = json!({"amount": dues[n as usize], "currency": "USD"});
                a.post_json(&format!("{b}/checkouts/{}/payment-session", i[n as usize]), &session)
            })
            .await?;
        let intents: Arc<Vec<String>> =
            Arc::new(sessions.iter().map(|s| s["paymentIntentId"].as_str().unwrap_or_default().to_string()).collect());
        let (a, b, p) = (self.owner.clone(), self.base.clone(), intents.clone());
        let confirm = json!({"paymentMethod": "pm_card_visa"});
        self.batch("confirm", count, StatusCode::OK, move |n| {
            a.post_json(&format!("{b}/payment-intents/{}/confirm", p[n as usize]), &confirm)
        })
        .await?;
        Ok(ids.iter().cloned().zip(intents.iter().cloned()).collect())
    }

    /// Completes prepared checkouts from [`CONCURRENCY`] clients; answers the orders and the wall time.
    pub async fn complete(&self, prepared: Vec<(String, String)>) -> Result<(Vec<Value>, Duration), BoxError> {
        let (a, b, count, prepared) = (self.owner.clone(), self.base.clone(), prepared.len(), Arc::new(prepared));
        let (outcomes, elapsed) = run_batch(self.owner.addr, CONCURRENCY, count, move |n| {
            let (checkout, intent) = &prepared[n as usize];
            a.post_json(
                &format!("{b}/checkouts/{checkout}/complete"),
                &json!({"paymentMethodId": "pm_card_visa", "paymentIntentId": intent}),
            )
        })
        .await;
        Ok((check("complete", outcomes, StatusCode::CREATED)?, elapsed))
    }

    /// Sends `count` requests of `make` from [`CONCURRENCY`] clients, each expected to answer `status`.
    pub async fn batch<F>(&self, step: &str, count: usize, status: StatusCode, make: F) -> Result<Vec<Value>, BoxError>
    where
        F: Fn(u64) -> super::BenchRequest + Send + Sync + 'static,
    {
        check(step, run_batch(self.owner.addr, CONCURRENCY, count, make).await.0, status)
    }
}

/// Every outcome's body, or the count of failures with the first of them.
fn check(
    step: &str,
    outcomes: Vec<Result<(StatusCode, bytes::Bytes), String>>,
    status: StatusCode,
) -> Result<Vec<Value>, BoxError> {
    let mut bodies = Vec::with_capacity(outcomes.len());
    let mut failures = Vec::new();
    for outcome in outcomes {
        match outcome.map_err(BoxError::from).and_then(|o| expect_json(o, status, step)) {
            Ok(body) => bodies.push(body),
            Err(e) => failures.push(e.to_string()),
        }
    }
    match failures.first() {
        Some(first) => {
            Err(format!("{step}: {} of {} failed; first: {first}", failures.len(), bodies.len() + failures.len()).into())
        }
        None => Ok(bodies),
    }
}
