//! `S/carts`: shoppers with a publishable key and members; lines merge, quantities stay in
//! 1..100, and every answer carries the cart priced now.

use hyper::Method;
use serde_json::{Value, json};
use shopcell::cells::storefront;

use crate::calculate::{Shop, amount};
use crate::support::*;

/// A storefront client: the store's publishable key, no Bearer token.
pub struct Guest {
    pub key: String,
}

impl Guest {
    pub async fn new(c: &HttpClient, shop: &Shop) -> Guest {
        let k = c
            .post(&shop.path("/publishable-keys"), Some(&shop.owner.token), json!({"environment": "live"}))
            .await
            .expect(201)
            .body;
        Guest { key: k["key"].as_str().unwrap().to_string() }
    }

    pub async fn send(&self, c: &HttpClient, method: Method, path: &str, body: Option<Value>) -> Answer {
        let body = body.map(|b| hyper::body::Bytes::from(b.to_string()));
        c.send(method, path, None, &[("x-publishable-key", &self.key)], body).await
    }

    pub async fn post(&self, c: &HttpClient, path: &str, body: Value) -> Answer {
        self.send(c, Method::POST, path, Some(body)).await
    }

    pub async fn get(&self, c: &HttpClient, path: &str) -> Answer {
        self.send(c, Method::GET, path, None).await
    }
}

#[tokio::test]
async fn a_shopper_fills_a_cart_that_is_priced_on_every_answer() {
    let app = spawn_app().await;
    let c = &app.client;
    let shop = Shop::new(c).await;
    let guest = Guest::new(c, &shop).await;
    let (_, shirt) = shop.product(c, "Shirt", 2500, 200).await;
    let (_, mug) = shop.product(c, "Mug", 1200, 400).await;

    // No cartId: the cart is created, 201.
    let cart = guest
        .post(
            c,
            &shop.path("/carts/items"),
            json!({"variantId": shirt, "quantity": 2, "customAttributes": {"engraving": "AB", "gift": true}}),
        )
        .await
        .expect(201)
        .body;
    let id = cart["id"].as_str().unwrap().to_string();
    assert_eq!(cart["lineItems"][0]["title"], "Shirt");
    assert_eq!(cart["lineItems"][0]["quantity"], 2);
    assert_eq!(cart["lineItems"][0]["customAttributes"], json!({"engraving": "AB", "gift": "true"}));
    assert_eq!(amount(&cart, "/subtotal"), 5000);
    assert_eq!(amount(&cart, "/total"), 5000);

    // The same variant again adds to its line; another variant is a new line. 200 now.
    guest.post(c, &shop.path("/carts/items"), json!({"cartId": id, "variantId": shirt, "quantity": 3})).await.expect(200);
    let cart =
        guest.post(c, &shop.path("/carts/items"), json!({"cartId": id, "variantId": mug, "quantity": 1})).await.expect(200).body;
    assert_eq!(cart["lineItems"].as_array().unwrap().len(), 2);
    assert_eq!(cart["lineItems"][0]["quantity"], 5);
    assert_eq!(cart["lineItems"][0]["customAttributes"]["engraving"], "AB", "attributes kept when not given");
    assert_eq!(cart["itemCount"], 6);
    assert_eq!(amount(&cart, "/subtotal"), 5 * 2500 + 1200);

    // Over 100 after merging is 422 and changes nothing.
    let over =
        guest.post(c, &shop.path("/carts/items"), json!({"cartId": id, "variantId": shirt, "quantity": 96})).await.expect(422);
    assert_eq!(over.code(), "BUSINESS_RULE");
    let read = guest.get(c, &shop.path(&format!("/carts/{id}"))).await.expect(200).body;
    assert_eq!(read["lineItems"][0]["quantity"], 5);

    // Update and remove.
    let cart = guest
        .send(c, Method::PATCH, &shop.path(&format!("/carts/{id}/items")), Some(json!({"variantId": shirt, "quantity": 1})))
        .await
        .expect(200)
        .body;
    assert_eq!(amount(&cart, "/subtotal"), 2500 + 1200);
    let cart = guest.send(c, Method::DELETE, &shop.path(&format!("/carts/{id}/items/{mug}")), None).await.expect(200).body;
    assert_eq!(cart["lineItems"].as_array().unwrap().len(), 1);
    assert_eq!(amount(&cart, "/total"), 2500);
    let missing = guest.send(c, Method::DELETE, &shop.path(&format!("/carts/{id}/items/{mug}")), None).await.expect(404);
    assert_eq!(missing.code(), "NOT_FOUND");

    // An empty cart, and an unknown one.
    let empty = guest.send(c, Method::POST, &shop.path("/carts"), None).await.expect(201).body;
    assert_eq!(empty["lineItems"], json!([]));
    assert_eq!(amount(&empty, "/total"), 0);
    guest.get(c, &shop.path(&format!("/carts/{}", uuid::Uuid::now_v7()))).await.expect(404);
    // Without the key (and no token) carts are closed.
    c.get(&shop.path(&format!("/carts/{id}")), None).await.expect(401);
}

#[tokio::test]
async fn bad_lines_are_refused_naming_the_field_and_nothing_is_written() {
    let app = spawn_app().await;
    let c = &app.client;
    let shop = Shop::new(c).await;
    let guest = Guest::new(c, &shop).await;
    let (_, shirt) = shop.product(c, "Shirt", 2500, 200).await;
    let draft = c
        .post(
            &shop.path("/products"),
            Some(&shop.owner.token),
            json!({"title": "Secret", "price": {"amount": 900, "currency": "USD"}}),
        )
        .await
        .expect(201)
        .body;
    assert_eq!(draft["status"], "DRAFT");
    let draft_variant = draft["variants"][0]["id"].as_str().unwrap().to_string();
    let cart = guest.post(c, &shop.path("/carts/items"), json!({"variantId": shirt, "quantity": 1})).await.expect(201).body;
    let id = cart["id"].as_str().unwrap();

    for (body, field) in [
        (json!({"cartId": id, "variantId": shirt, "quantity": 0}), "quantity"),
        (json!({"cartId": id, "variantId": shirt, "quantity": 101}), "quantity"),
        (json!({"cartId": id, "variantId": uuid::Uuid::now_v7(), "quantity": 1}), "variantId"),
        (json!({"cartId": id, "variantId": draft_variant, "quantity": 1}), "variantId"),
        (
            json!({"cartId": id, "variantId": shirt, "quantity": 1, "customAttributes": {"x": {"nested": 1}}}),
            "customAttributes.x",
        ),
    ] {
        let e = guest.post(c, &shop.path("/carts/items"), body.clone()).await.expect(400);
        assert_eq!(e.body["error"]["fields"][0]["field"], field, "{body}");
    }
    let read = guest.get(c, &shop.path(&format!("/carts/{id}"))).await.expect(200).body;
    assert_eq!(read["lineItems"].as_array().unwrap().len(), 1);
    assert_eq!(read["lineItems"][0]["quantity"], 1);

    // A member may put a draft in a cart (a draft order in the making).
    let member = c
        .post(&shop.path("/carts/items"), Some(&shop.owner.token), json!({"variantId": draft_variant, "quantity": 1}))
        .await
        .expect(201)
        .body;
    assert_eq!(amount(&member, "/subtotal"), 900);
}

#[tokio::test]
async fn a_line_that_can_no_longer_be_bought_is_set_apart_and_discounts_read_carts() {
    let app = spawn_app().await;
    let c = &app.client;
    let shop = Shop::new(c).await;
    let guest = Guest::new(c, &shop).await;
    let (shirt_product, shirt) = shop.product(c, "Shirt", 2500, 200).await;
    let (_, mug) = shop.product(c, "Mug", 1000, 400).await;
    let cart = guest.post(c, &shop.path("/carts/items"), json!({"variantId": shirt, "quantity": 2})).await.expect(201).body;
    let id = cart["id"].as_str().unwrap();
    guest.post(c, &shop.path("/carts/items"), json!({"cartId": id, "variantId": mug, "quantity": 3})).await.expect(200);

    // The discount cart context reads the stored cart.
    shop.discount(c, json!({"title": "Ten", "code": "TEN", "valueType": "percentage", "value": 1000})).await;
    let v = c
        .post(&shop.path("/discounts/validate"), Some(&shop.owner.token), json!({"code": "TEN", "cart": {"cartId": id}}))
        .await
        .expect(200)
        .body;
    assert_eq!(v["valid"], true);
    assert_eq!(amount(&v, "/amount"), 800, "10 % of 50.00 + 30.00");

    c.patch(&shop.path(&format!("/products/{shirt_product}")), Some(&shop.owner.token), json!({"status": "ARCHIVED"}))
        .await
        .expect(200);
    let read = guest.get(c, &shop.path(&format!("/carts/{id}"))).await.expect(200).body;
    assert_eq!(read["lineItems"].as_array().unwrap().len(), 1);
    assert_eq!(read["unavailableLineItems"][0]["variantId"], shirt.as_str());
    assert_eq!(read["unavailableLineItems"][0]["reason"], "the product is archived");
    assert_eq!(amount(&read, "/subtotal"), 3000);
}

#[tokio::test]
async fn abandoned_carts_and_expired_sessions_are_swept() {
    let app = spawn_app().await;
    let c = &app.client;
    let shop = Shop::new(c).await;
    let guest = Guest::new(c, &shop).await;
    let (_, shirt) = shop.product(c, "Shirt", 2500, 200).await;
    let cart = guest.post(c, &shop.path("/carts/items"), json!({"variantId": shirt, "quantity": 1})).await.expect(201).body;
    let path = shop.path(&format!("/carts/{}", cart["id"].as_str().unwrap()));
    let headers = [
        ("x-publishable-key", guest.key.as_str()),
        ("user-agent", "test"),
        ("referer", "https://shop.example/"),
        ("x-forwarded-for", "198.51.100.7"),
    ];
    let session = c.send(Method::POST, &shop.path("/storefront/sessions"), None, &headers, None).await.expect(201).body;
    let token = session["sessionToken"].as_str().unwrap();
    let (cell, store) = (app.cell(), shop.store.parse().unwrap());
    let sweep = |at: i64| storefront::sweep_stale(&cell.db, &cell.writer, at);

    let now = app.clock.now_ms();
    assert_eq!(sweep(now + 29 * 24 * 3600 * 1000).await.unwrap(), 0, "a month has not passed");
    guest.get(c, &path).await.expect(200);
    assert!(storefront::storefront_session(&cell, store, token).unwrap().is_some());
    assert_eq!(sweep(now + 31 * 24 * 3600 * 1000).await.unwrap(), 2);
    guest.get(c, &path).await.expect(404);
    let e = guest
        .post(c, &shop.path("/checkouts"), json!({"lineItems": [{"variantId": shirt, "quantity": 1}], "sessionToken": token}))
        .await;
    assert_eq!(e.expect(403).code(), "INVALID_SESSION_TOKEN");
}
