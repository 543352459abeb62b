//! Guest and member checkouts from cart to order: session tokens, shipping rates, codes, gift
//! cards, payment sessions, and the one atomic completion (the last unit, concurrent
//! completions, nothing consumed on failure).

use hyper::Method;
use serde_json::{Value, json};
use shopcell::cells::pricing_version;
use shopcell::cells::storefront;

use crate::calculate::{Shop, amount};
use crate::carts::Guest;
use crate::support::*;

const CONTEXT: [(&str, &str); 3] = [
    ("user-agent", "Mozilla/5.0 (test)"),
    ("referer", "https://shop.example/cart"),
    ("x-forwarded-for", "203.0.113.9, 10.0.0.1"),
];

/// A zone for the US with a flat 8.00 rate; returns the rate id.
pub async fn us_shipping(c: &HttpClient, shop: &Shop) -> String {
    let zone = c
        .post(
            &shop.path("/shipping-zones"),
            Some(&shop.owner.token),
            json!({"name": "US", "countries": [{"code": "US"}], "rates": [
                {"name": "Ground", "price": 800, "estimatedDelivery": {"minDays": 2, "maxDays": 4}}]}),
        )
        .await
        .expect(201)
        .body;
    zone["rates"][0]["id"].as_str().unwrap().to_string()
}

pub fn address() -> Value {
    json!({"firstName": "Ada", "lastName": "Lovelace", "address1": "1 Main St", "city": "Portland", "province": "OR",
           "country": "US", "postalCode": "97201"})
}

/// An ACTIVE product whose one variant is tracked with `units` in stock; returns the variant id.
pub async fn stocked(c: &HttpClient, shop: &Shop, title: &str, price: i64, units: i64) -> String {
    let p = c
        .post(
            &shop.path("/products"),
            Some(&shop.owner.token),
            json!({"title": title, "status": "ACTIVE", "price": {"amount": price, "currency": "USD"},
                   "variants": [{"title": "Default", "inventoryTracked": true, "inventoryQuantity": units}]}),
        )
        .await
        .expect(201)
        .body;
    p["variants"][0]["id"].as_str().unwrap().to_string()
}

/// A variant's `inventoryQuantity` (its sellable sum) as the product list shows it.
pub async fn inventory(c: &HttpClient, shop: &Shop, variant: &str) -> i64 {
    let list = c.get(&shop.path("/products?limit=250"), Some(&shop.owner.token)).await.expect(200).body;
    list["data"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["variants"].as_array().unwrap().iter())
        .find(|v| v["id"] == variant)
        .and_then(|v| v["inventoryQuantity"].as_i64())
        .unwrap()
}

async fn order_count(c: &HttpClient, shop: &Shop) -> i64 {
    c.get(&shop.path("/orders"), Some(&shop.owner.token)).await.expect(200).body["total"].as_i64().unwrap()
}

/// A member's checkout of `lines`, ready to pay: email, US address, the ground rate.
pub async fn ready_checkout(c: &HttpClient, shop: &Shop, lines: Value, rate: &str) -> Value {
    ready_checkout_for(c, shop, lines, rate, "buyer@example.com").await
}

/// [`ready_checkout`] with the buyer's email.
async fn ready_checkout_for(c: &HttpClient, shop: &Shop, lines: Value, rate: &str, email: &str) -> Value {
    let t = Some(shop.owner.token.as_str());
    let co = c.post(&shop.path("/checkouts"), t, json!({"lineItems": lines, "email": email})).await.expect(201).body;
    let id = co["id"].as_str().unwrap();
    c.patch(&shop.path(&format!("/checkouts/{id}")), t, json!({"shippingAddress": address(), "shippingMethodId": rate}))
        .await
        .expect(200)
        .body
}

/// Opens a payment session for the whole payment due and confirms it with a test card.
pub async fn paid_intent(c: &HttpClient, shop: &Shop, co: &Value) -> String {
    let t = Some(shop.owner.token.as_str());
    let id = co["id"].as_str().unwrap();
    let session = c
        .post(
            &shop.path(&format!("/checkouts/{id}/payment-session")),
            t,
            json!({"amount": amount(co, "/paymentDue"), "currency": "USD"}),
        )
        .await
        .expect(201)
        .body;
    let intent = session["paymentIntentId"].as_str().unwrap().to_string();
    c.post(&shop.path(&format!("/payment-intents/{intent}/confirm")), t, json!({"paymentMethod": "pm_card_visa"}))
        .await
        .expect(200);
    intent
}

#[tokio::test]
async fn a_guest_checks_out_with_a_session_token_from_cart_to_order() {
    let app = spawn_app().await;
    let c = &app.client;
    let shop = Shop::new(c).await;
    let guest = Guest::new(c, &shop).await;
    let rate = us_shipping(c, &shop).await;
    let (_, shirt) = shop.product(c, "Shirt", 2500, 200).await;
    shop.discount(c, json!({"title": "Ten", "code": "TEN", "valueType": "percentage", "value": 1000, "usageLimit": 1})).await;

    // The storefront session needs the request context.
    let sessions = shop.path("/storefront/sessions");
    let missing = c.send(Method::POST, &sessions, None, &[("x-publishable-key", &guest.key), CONTEXT[0]], None).await.expect(400);
    let named: Vec<&str> =
        missing.body["error"]["fields"].as_array().unwrap().iter().map(|f| f["field"].as_str().unwrap()).collect();
    assert_eq!(named, ["referer"]);
    let mut headers = vec![("x-publishable-key", guest.key.as_str())];
    headers.extend(CONTEXT);
    let session = c.send(Method::POST, &sessions, None, &headers, None).await.expect(201).body;
    let token = session["sessionToken"].as_str().unwrap().to_string();
    assert!(token.starts_with("sst_") && token.len() > 40);

    let cart = guest.post(c, &shop.path("/carts/items"), json!({"variantId": shirt, "quantity": 2})).await.expect(201).body;
    let co = guest
        .post(c, &shop.path("/checkout"), json!({"cartId": cart["id"], "email": "guest@example.com", "sessionToken": token}))
        .await
        .expect(201)
        .body;
    let id = co["id"].as_str().unwrap().to_string();
    assert_eq!(co["sessionToken"], token.as_str(), "the session's token is echoed");
    assert_eq!(amount(&co, "/subtotal"), 5000);
    assert_eq!(co["status"], "OPEN");

    // Without the token, or with another checkout's, a guest is refused; members need none.
    let one = shop.path(&format!("/checkouts/{id}"));
    assert_eq!(guest.get(c, &one).await.expect(403).code(), "INVALID_SESSION_TOKEN");
    let other = guest
        .post(c, &shop.path("/checkouts"), json!({"lineItems": [{"variantId": shirt, "quantity": 1}]}))
        .await
        .expect(201)
        .body;
    let other_token = other["sessionToken"].as_str().unwrap();
    assert_ne!(other_token, token);
    guest.get(c, &format!("{one}?sessionToken={other_token}")).await.expect(403);
    guest.get(c, &format!("{one}?sessionToken={token}")).await.expect(200);
    c.get(&one, Some(&shop.owner.token)).await.expect(200);

    // Shipping rates for an address, in the spec's shape.
    let rates = guest
        .post(
            c,
            &shop.path(&format!("/checkout/{id}/shipping-rates")),
            json!({"shippingAddress": address(), "sessionToken": token}),
        )
        .await
        .expect(200)
        .body;
    assert_eq!(rates.as_array().unwrap().len(), 1);
    assert_eq!(rates[0]["id"], rate.as_str());
    assert_eq!(rates[0]["price"], json!({"amount": 800, "currency": "USD", "formatted": "8.00 USD"}));
    assert_eq!(rates[0]["estimatedDelivery"]["minDays"], 2);

    let patched = guest
        .send(
            c,
            Method::PATCH,
            &one,
            Some(json!({"sessionToken": token, "shippingAddress": address(), "shippingMethodId": rate, "tipAmount": 300,
                        "phone": "+1 503 555 0100", "acceptsEmailMarketing": true})),
        )
        .await
        .expect(200)
        .body;
    assert_eq!(patched["shippingLine"]["id"], rate.as_str());
    assert_eq!(amount(&patched, "/shipping"), 800);
    assert_eq!(amount(&patched, "/tipAmount"), 300);
    assert_eq!(amount(&patched, "/total"), 5000 + 800 + 300);

    let coded = guest
        .post(c, &shop.path(&format!("/checkouts/{id}/discount-codes")), json!({"code": "ten", "sessionToken": token}))
        .await
        .expect(200)
        .body;
    assert_eq!(coded["appliedDiscountCodes"], json!(["TEN"]));
    assert_eq!(amount(&coded, "/discount"), 500);
    let due = amount(&coded, "/paymentDue");
    assert_eq!(due, 5000 - 500 + 800 + 300);

    // The payment session must match the checkout exactly.
    let pay = shop.path(&format!("/checkouts/{id}/payment-session"));
    let e = guest.post(c, &pay, json!({"amount": due - 1, "currency": "USD", "sessionToken": token})).await.expect(422);
    assert!(e.body["error"]["message"].as_str().unwrap().contains("differs"));
    guest.post(c, &pay, json!({"amount": due, "currency": "EUR", "sessionToken": token})).await.expect(422);
    guest.post(c, &pay, json!({"amount": due, "currency": "USD"})).await.expect(403);
    let session = guest.post(c, &pay, json!({"amount": due, "currency": "USD", "sessionToken": token})).await.expect(201).body;
    let intent = session["paymentIntentId"].as_str().unwrap().to_string();
    let secret = session["clientSecret"].as_str().unwrap();
    guest
        .post(
            c,
            &shop.path(&format!("/payment-intents/{intent}/confirm")),
            json!({"paymentMethod": "pm_card_visa", "clientSecret": secret}),
        )
        .await
        .expect(200);

    let complete = shop.path(&format!("/checkout/{id}/complete"));
    let body = json!({"paymentMethodId": "pm_card_visa", "paymentIntentId": intent, "sessionToken": token});
    let order = guest.post(c, &complete, body.clone()).await.expect(201).body;
    assert_eq!(order["number"], 1001);
    assert_eq!(order["financialStatus"], "PAID");
    assert_eq!(order["fulfillmentStatus"], "UNFULFILLED");
    assert_eq!(amount(&order, "/total"), due);
    assert_eq!(amount(&order, "/tip"), 300);
    assert_eq!(order["discountCodes"], json!(["TEN"]));
    assert_eq!(order["lineItems"][0]["title"], "Shirt");
    assert_eq!(amount(&order, "/lineItems/0/discount"), 500);
    assert_eq!(order["shippingLine"]["title"], "Ground");
    assert_eq!(order["email"], "guest@example.com");

    // Completed once: again is 409, and the order is listed and readable.
    assert_eq!(guest.post(c, &complete, body).await.expect(409).code(), "CHECKOUT_COMPLETED");
    let read = c.get(&one, Some(&shop.owner.token)).await.expect(200).body;
    assert_eq!((read["status"].as_str(), read["orderId"].as_str()), (Some("COMPLETED"), order["id"].as_str()));
    let list = c.get(&shop.path("/orders"), Some(&shop.owner.token)).await.expect(200).body;
    assert_eq!(list["total"], 1);
    assert_eq!(list["data"][0]["id"], order["id"]);
    let fetched =
        c.get(&shop.path(&format!("/orders/{}", order["id"].as_str().unwrap())), Some(&shop.owner.token)).await.expect(200);
    assert_eq!(fetched.body, order);
    // Orders are the merchant's: a shopper's key does not open them.
    guest.get(c, &shop.path("/orders")).await.expect(401);

    // The code's only use is spent by the order.
    let v = c
        .post(
            &shop.path("/discounts/validate"),
            Some(&shop.owner.token),
            json!({"code": "TEN", "cart": {"lineItems": [{"variantId": shirt, "quantity": 1}]}}),
        )
        .await
        .expect(200)
        .body;
    assert_eq!(v["reasonCodes"], json!(["DISCOUNT_USAGE_LIMIT_REACHED"]));
}

#[tokio::test]
async fn two_shoppers_race_for_the_last_unit_and_one_checkout_completes_once() {
    let app = spawn_app().await;
    let c = &app.client;
    let shop = Shop::new(c).await;
    let rate = us_shipping(c, &shop).await;
    let lamp = stocked(c, &shop, "Lamp", 4000, 1).await;

    let a = ready_checkout(c, &shop, json!([{"variantId": lamp, "quantity": 1}]), &rate).await;
    let b = ready_checkout(c, &shop, json!([{"variantId": lamp, "quantity": 1}]), &rate).await;
    let (ia, ib) = (paid_intent(c, &shop, &a).await, paid_intent(c, &shop, &b).await);
    let complete = |co: &Value, intent: String| {
        let path = shop.path(&format!("/checkouts/{}/complete", co["id"].as_str().unwrap()));
        let t = shop.owner.token.clone();
        async move { c.post(&path, Some(&t), json!({"paymentMethodId": "pm_card_visa", "paymentIntentId": intent})).await }
    };
    let (ra, rb) = tokio::join!(complete(&a, ia), complete(&b, ib));
    let mut statuses = [ra.status.as_u16(), rb.status.as_u16()];
    statuses.sort();
    assert_eq!(statuses, [201, 409]);
    let loser = if ra.status == 409 { &ra } else { &rb };
    assert_eq!(loser.code(), "OUT_OF_STOCK");
    assert_eq!(inventory(c, &shop, &lamp).await, 0);
    assert_eq!(order_count(c, &shop).await, 1);

    // One checkout completed by eight concurrent requests: one order.
    let bulb = stocked(c, &shop, "Bulb", 500, 50).await;
    let co = ready_checkout(c, &shop, json!([{"variantId": bulb, "quantity": 2}]), &rate).await;
    let intent = paid_intent(c, &shop, &co).await;
    let answers = join_many((0..8).map(|_| complete(&co, intent.clone())).collect()).await;
    let created: Vec<&Answer> = answers.iter().filter(|a| a.status == 201).collect();
    assert_eq!(created.len(), 1, "{:?}", answers.iter().map(|a| a.status).collect::<Vec<_>>());
    assert!(answers.iter().filter(|a| a.status != 201).all(|a| a.code() == "CHECKOUT_COMPLETED"));
    assert_eq!(created[0].body["number"], 1002);
    assert_eq!(inventory(c, &shop, &bulb).await, 48);
    assert_eq!(order_count(c, &shop).await, 2);
}

/// Polls the futures together (the completions reach the cell's writer at the same time) and
/// collects their answers in order.
async fn join_many<F: std::future::Future<Output = Answer>>(futures: Vec<F>) -> Vec<Answer> {
    let mut results: Vec<Option<Answer>> = (0..futures.len()).map(|_| None).collect();
    let mut pinned: Vec<_> = futures.into_iter().map(Box::pin).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (i, f) in pinned.iter_mut().enumerate() {
            if results[i].is_none() {
                match f.as_mut().poll(cx) {
                    std::task::Poll::Ready(a) => results[i] = Some(a),
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending { std::task::Poll::Pending } else { std::task::Poll::Ready(()) }
    })
    .await;
    results.into_iter().map(|r| r.expect("every future finished")).collect()
}

#[tokio::test]
async fn bad_input_is_refused_clearly_and_consumes_nothing() {
    let app = spawn_app().await;
    let c = &app.client;
    let shop = Shop::new(c).await;
    let t = Some(shop.owner.token.as_str());
    let rate = us_shipping(c, &shop).await;
    let vase = stocked(c, &shop, "Vase", 3000, 5).await;
    shop.discount(c, json!({"title": "Once", "code": "ONCE", "valueType": "fixedAmount", "value": 500, "usageLimit": 1})).await;
    let co = ready_checkout(c, &shop, json!([{"variantId": vase, "quantity": 2}]), &rate).await;
    let id = co["id"].as_str().unwrap();
    let one = shop.path(&format!("/checkouts/{id}"));
    let field = |a: &Answer| a.body["error"]["fields"][0]["field"].as_str().unwrap_or("").to_string();

    let e = c.patch(&one, t, json!({"tipAmount": -1})).await.expect(400);
    assert_eq!(field(&e), "tipAmount");
    let e = c.patch(&one, t, json!({"paymentMethod": {"type": "card", "number": "4242 4242 4242 4242"}})).await.expect(400);
    assert_eq!(field(&e), "paymentMethod.number");
    let e = c.patch(&one, t, json!({"shippingMethodId": "not-a-rate"})).await.expect(400);
    assert_eq!(field(&e), "shippingMethodId");
    let e = c.post(&shop.path("/checkouts"), t, json!({"lineItems": [{"variantId": vase, "quantity": 101}]})).await.expect(400);
    assert_eq!(field(&e), "lineItems[0].quantity");
    let e = c
        .post(
            &shop.path("/checkouts"),
            t,
            json!({"lineItems": [{"variantId": vase, "quantity": 1}], "presentmentCurrency": "EUR"}),
        )
        .await;
    assert_eq!((e.status.as_u16(), field(&e).as_str()), (400, "presentmentCurrency"));
    let e = c.post(&format!("{one}/discount-codes"), t, json!({"code": "NOPE"})).await.expect(422);
    assert_eq!(e.code(), "BUSINESS_RULE");
    for i in 0..10 {
        c.post(
            &shop.path("/discounts"),
            t,
            json!({"title": format!("D{i}"), "code": format!("CODE{i}"), "valueType": "fixedAmount", "value": 1}),
        )
        .await
        .expect(201);
    }
    c.post(&format!("{one}/discount-codes"), t, json!({"code": "ONCE"})).await.expect(200);
    let read = c.get(&one, t).await.expect(200).body;
    assert_eq!(read["tipAmount"]["amount"], 0, "nothing of the refused updates was kept");
    assert_eq!(read["paymentMethod"], json!({}));
    assert_eq!(read["shippingMethodId"], rate.as_str());

    // A payment intent of another checkout, and completing without one.
    let other = ready_checkout(c, &shop, json!([{"variantId": vase, "quantity": 1}]), &rate).await;
    let foreign = paid_intent(c, &shop, &other).await;
    let complete = format!("{one}/complete");
    let e = c.post(&complete, t, json!({"paymentMethodId": "pm_card_visa", "paymentIntentId": foreign})).await.expect(400);
    assert_eq!(field(&e), "paymentIntentId");
    let e = c.post(&complete, t, json!({"paymentMethodId": "pm_card_visa"})).await.expect(400);
    assert_eq!(field(&e), "paymentIntentId");
    let e = c.post(&complete, t, json!({"paymentMethodId": "4242424242424242", "paymentIntentId": foreign})).await.expect(400);
    assert_eq!(field(&e), "paymentMethodId");

    // An intent paid for the old total no longer matches once the checkout changed.
    let read = c.get(&one, t).await.expect(200).body;
    let intent = paid_intent(c, &shop, &read).await;
    c.patch(&one, t, json!({"tipAmount": 100})).await.expect(200);
    let e = c.post(&complete, t, json!({"paymentMethodId": "pm_card_visa", "paymentIntentId": intent})).await.expect(422);
    assert!(e.body["error"]["message"].as_str().unwrap().contains("differs"), "{}", e.body);

    // A declined card leaves the checkout open.
    let read = c.get(&one, t).await.expect(200).body;
    let session = c
        .post(&format!("{one}/payment-session"), t, json!({"amount": amount(&read, "/paymentDue"), "currency": "USD"}))
        .await
        .expect(201)
        .body;
    let declined = session["paymentIntentId"].as_str().unwrap();
    let e = c.post(&complete, t, json!({"paymentMethodId": "pm_card_chargeDeclined", "paymentIntentId": declined})).await;
    assert!(e.status.is_client_error(), "{}", e.body);

    // Nothing was consumed by any of it: stock, the code's one use, orders.
    assert_eq!(inventory(c, &shop, &vase).await, 5);
    assert_eq!(order_count(c, &shop).await, 0);
    let v = c
        .post(
            &shop.path("/discounts/validate"),
            t,
            json!({"code": "ONCE", "cart": {"lineItems": [{"variantId": vase, "quantity": 1}]}}),
        )
        .await
        .expect(200)
        .body;
    assert_eq!(v["valid"], true);
    // And the checkout still completes with a good payment.
    let read = c.get(&one, t).await.expect(200).body;
    let good = paid_intent(c, &shop, &read).await;
    let order = c.post(&complete, t, json!({"paymentMethodId": "pm_card_visa", "paymentIntentId": good})).await.expect(201).body;
    assert_eq!(amount(&order, "/total"), amount(&read, "/total"));
    assert_eq!(inventory(c, &shop, &vase).await, 3);
}

#[tokio::test]
async fn gift_cards_pay_part_or_all_of_a_checkout() {
    let app = spawn_app().await;
    let c = &app.client;
    let shop = Shop::new(c).await;
    let t = Some(shop.owner.token.as_str());
    let guest = Guest::new(c, &shop).await;
    let (_, shirt) = shop.product(c, "Shirt", 5000, 200).await;
    let card = c
        .post(
            &shop.path("/gift-cards"),
            t,
            json!({"initialValue": {"amount": 3000, "currency": "USD"}, "code": "GIFT-3000-ABCD"}),
        )
        .await
        .expect(201)
        .body;
    let big = c
        .post(&shop.path("/gift-cards"), t, json!({"initialValue": {"amount": 20000, "currency": "USD"}}))
        .await
        .expect(201)
        .body;

    let co = guest
        .post(c, &shop.path("/checkouts"), json!({"lineItems": [{"variantId": shirt, "quantity": 1}], "email": "g@example.com"}))
        .await
        .expect(201)
        .body;
    let (id, token) = (co["id"].as_str().unwrap().to_string(), co["sessionToken"].as_str().unwrap().to_string());
    let path = |rest: &str| shop.path(&format!("/checkouts/{id}{rest}"));

    // Lookup is read-only and needs the session.
    guest.post(c, &path("/gift-cards/lookup"), json!({"code": "gift3000abcd"})).await.expect(403);
    let found =
        guest.post(c, &path("/gift-cards/lookup"), json!({"code": "gift3000abcd", "sessionToken": token})).await.expect(200).body;
    assert_eq!((found["status"].as_str(), amount(&found, "/balance")), (Some("ACTIVE"), 3000));
    guest.post(c, &path("/gift-cards/lookup"), json!({"code": "NOSUCHCARD1", "sessionToken": token})).await.expect(404);

    // Applied through the code field: the card covers 30.00 of 50.00.
    let applied =
        guest.post(c, &path("/discount-codes"), json!({"code": "GIFT-3000-ABCD", "sessionToken": token})).await.expect(200).body;
    assert_eq!(applied["giftCards"][0]["lastCharacters"], "ABCD");
    assert_eq!(amount(&applied, "/giftCards/0/amountUsed"), 3000);
    assert_eq!(amount(&applied, "/giftCardTotal"), 3000);
    assert_eq!(amount(&applied, "/paymentDue"), 2000);
    assert!(!applied.to_string().contains("GIFT-3000-ABCD"), "the code is never echoed");

    let session = guest
        .post(c, &path("/payment-session"), json!({"amount": 2000, "currency": "USD", "sessionToken": token}))
        .await
        .expect(201)
        .body;
    let intent = session["paymentIntentId"].as_str().unwrap();
    let order = guest
        .post(c, &path("/complete"), json!({"paymentMethodId": "pm_card_visa", "paymentIntentId": intent, "sessionToken": token}))
        .await
        .expect(201)
        .body;
    assert_eq!((amount(&order, "/giftCardTotal"), amount(&order, "/paymentTotal")), (3000, 2000));
    assert_eq!(order["financialStatus"], "PAID");
    let spent = c.get(&shop.path(&format!("/gift-cards/{}", card["id"].as_str().unwrap())), t).await.expect(200).body;
    assert_eq!((spent["status"].as_str(), amount(&spent, "/balance")), (Some("DEPLETED"), 0));

    // A card that covers everything: no payment intent, partial redemption of the card.
    let co = c
        .post(&shop.path("/checkouts"), t, json!({"lineItems": [{"variantId": shirt, "quantity": 1}], "email": "m@example.com"}))
        .await
        .expect(201)
        .body;
    let id2 = co["id"].as_str().unwrap();
    let applied =
        c.post(&shop.path(&format!("/checkouts/{id2}/discount-codes")), t, json!({"code": big["code"]})).await.expect(200).body;
    assert_eq!(amount(&applied, "/paymentDue"), 0);
    c.post(&shop.path(&format!("/checkouts/{id2}/payment-session")), t, json!({"amount": 0, "currency": "USD"}))
        .await
        .expect(422);
    let order = c
        .post(&shop.path(&format!("/checkouts/{id2}/complete")), t, json!({"paymentMethodId": "gift_card"}))
        .await
        .expect(201)
        .body;
    assert_eq!((amount(&order, "/giftCardTotal"), amount(&order, "/paymentTotal")), (5000, 0));
    let left = c.get(&shop.path(&format!("/gift-cards/{}", big["id"].as_str().unwrap())), t).await.expect(200).body;
    assert_eq!((left["status"].as_str(), amount(&left, "/balance")), (Some("ACTIVE"), 15000));

    // Guessing codes is cut short: ten tries per checkout and minute, then 429.
    let co =
        c.post(&shop.path("/checkouts"), t, json!({"lineItems": [{"variantId": shirt, "quantity": 1}]})).await.expect(201).body;
    let lookup = shop.path(&format!("/checkouts/{}/gift-cards/lookup", co["id"].as_str().unwrap()));
    for i in 0..10 {
        c.post(&lookup, t, json!({"code": format!("GUESS{i:04}XYZ")})).await.expect(404);
    }
    let limited = c.post(&lookup, t, json!({"code": "GUESS0010XYZ"})).await.expect(429);
    assert!(limited.headers.get("retry-after").is_some());
}

#[tokio::test]
async fn storefront_events_are_counted_per_day_and_keep_the_session_alive() {
    let mut app = spawn_app().await;
    let c = &app.client;
    let shop = Shop::new(c).await;
    let guest = Guest::new(c, &shop).await;
    let mut headers = vec![("x-publishable-key", guest.key.as_str())];
    headers.extend(CONTEXT);
    let token =
        c.send(Method::POST, &shop.path("/storefront/sessions"), None, &headers, None).await.expect(201).body["sessionToken"]
            .as_str()
            .unwrap()
            .to_string();
    let events = shop.path("/storefront/events");
    let send = |body: Value| {
        let headers = headers.clone();
        let events = events.clone();
        async move { c.send(Method::POST, &events, None, &headers, Some(body.to_string().into())).await }
    };
    for _ in 0..3 {
        send(json!({"type": "page_view", "path": "/", "sessionToken": token})).await.expect(202);
    }
    send(json!({"type": "add_to_cart"})).await.expect(202);
    assert_eq!(send(json!({"type": "teleport"})).await.expect(400).body["error"]["fields"][0]["field"], "type");
    assert_eq!(
        send(json!({"type": "page_view", "sessionToken": "sst_forged"})).await.expect(403).code(),
        "INVALID_SESSION_TOKEN"
    );
    let no_context = c
        .send(
            Method::POST,
            &events,
            None,
            &[("x-publishable-key", &guest.key)],
            Some(json!({"type": "page_view"}).to_string().into()),
        )
        .await
        .expect(400);
    assert_eq!(no_context.body["error"]["fields"].as_array().unwrap().len(), 2);

    let store: uuid::Uuid = shop.store.parse().unwrap();
    let cell = app.cell();
    let now = app.clock.now_ms();
    assert_eq!(storefront::storefront_event_count(&cell, store, "page_view", now).unwrap(), 3);
    assert_eq!(storefront::storefront_event_count(&cell, store, "add_to_cart", now).unwrap(), 1);
    let session = storefront::storefront_session(&cell, store, &token).unwrap().expect("live");
    assert!(session.expires_at > now + 29 * 24 * 3600 * 1000);
    // The X-Forwarded-For the client sent is not believed: no trusted proxy is configured.
    assert_eq!(session.context.client_address, "127.0.0.1");
    app.stop().await;
}

#[tokio::test]
async fn a_completion_retried_with_its_idempotency_key_answers_the_same_order() {
    let app = spawn_app().await;
    let c = &app.client;
    let shop = Shop::new(c).await;
    let rate = us_shipping(c, &shop).await;
    let kettle = stocked(c, &shop, "Kettle", 3500, 10).await;
    let co = ready_checkout(c, &shop, json!([{"variantId": kettle, "quantity": 1}]), &rate).await;
    let intent = paid_intent(c, &shop, &co).await;
    let path = shop.path(&format!("/checkouts/{}/complete", co["id"].as_str().unwrap()));
    let body = json!({"paymentMethodId": "pm_card_visa", "paymentIntentId": intent}).to_string();
    let send = |key: &'static str| {
        let (path, body, token) = (path.clone(), body.clone(), shop.owner.token.clone());
        async move { c.send(Method::POST, &path, Some(&token), &[("idempotency-key", key)], Some(body.into())).await }
    };
    let first = send("order-attempt-1").await.expect(201);
    let again = send("order-attempt-1").await.expect(201);
    assert_eq!(again.body, first.body, "the lost answer is replayed, not a 409");
    assert_eq!(again.headers.get("idempotent-replayed").and_then(|v| v.to_str().ok()), Some("true"));
    assert_eq!(send("order-attempt-2").await.expect(409).code(), "CHECKOUT_COMPLETED");
    assert_eq!(order_count(c, &shop).await, 1);
    assert_eq!(inventory(c, &shop, &kettle).await, 9);
}

/// Completion checks, inside its write, that the store's pricing version is the one it priced
/// with: the version must move with every write a calculation reads besides products, and with
/// nothing an order itself writes (or concurrent completions would refuse each other).
#[tokio::test]
async fn the_pricing_version_moves_with_discounts_taxes_shipping_and_settings_only() {
    let app = spawn_app().await;
    let c = &app.client;
    let shop = Shop::new(c).await;
    let t = Some(shop.owner.token.as_str());
    let cell = app.cell();
    let store: uuid::Uuid = shop.store.parse().unwrap();
    let version = || pricing_version::pricing_version(&cell, store).unwrap();
    let seen = std::cell::Cell::new(version());
    let moved = |what: &str| {
        let now = version();
        assert!(now > seen.get(), "{what} moves the pricing version");
        seen.set(now);
    };

    let rate = us_shipping(c, &shop).await;
    moved("a new shipping zone");
    let tax = c.post(&shop.path("/tax-rates"), t, json!({"country": "US", "rate": 500, "name": "Sales"})).await.expect(201);
    moved("a new tax rate");
    let tax_path = shop.path(&format!("/tax-rates/{}", tax.body["id"].as_str().unwrap()));
    c.patch(&tax_path, t, json!({"country": "US", "rate": 600, "name": "Sales"})).await.expect(200);
    moved("a tax rate edit");
    let code = |value: i64| json!({"title": "Ten", "code": "TEN", "valueType": "percentage", "value": value});
    let d = c.post(&shop.path("/discounts"), t, code(1000)).await.expect(201);
    moved("a new discount");
    c.patch(&shop.path(&format!("/discounts/{}", d.body["id"].as_str().unwrap())), t, code(500)).await.expect(200);
    moved("a discount edit");
    c.patch(&shop.path(""), t, json!({"taxesIncluded": true})).await.expect(200);
    moved("a store settings edit");

    // An order (stock taken, the code's usage consumed) and a price change move nothing.
    let lamp = stocked(c, &shop, "Lamp", 4000, 5).await;
    let co = ready_checkout(c, &shop, json!([{"variantId": lamp, "quantity": 1}]), &rate).await;
    let id = co["id"].as_str().unwrap();
    c.post(&shop.path(&format!("/checkouts/{id}/discount-codes")), t, json!({"code": "TEN"})).await.expect(200);
    let co = c.get(&shop.path(&format!("/checkouts/{id}")), t).await.expect(200).body;
    let intent = paid_intent(c, &shop, &co).await;
    let order = c
        .post(
            &shop.path(&format!("/checkouts/{id}/complete")),
            t,
            json!({"paymentMethodId": "pm_card_visa", "paymentIntentId": intent}),
        )
        .await
        .expect(201);
    assert_eq!(order.body["discountCodes"], json!(["TEN"]));
    assert_eq!(version(), seen.get(), "an order leaves the pricing version as it is");
    c.delete(&tax_path, t).await.expect(204);
    moved("a deleted tax rate");
}

/// A checkout without a customer id counts once-per-customer uses by its email: the code prices
/// and completes for a new email and is refused for one that used it.
#[tokio::test]
async fn once_per_customer_codes_count_a_guest_by_email() {
    let app = spawn_app().await;
    let c = &app.client;
    let shop = Shop::new(c).await;
    let t = Some(shop.owner.token.as_str());
    let rate = us_shipping(c, &shop).await;
    let mug = stocked(c, &shop, "Mug", 2000, 10).await;
    let once = json!({"title": "Welcome", "code": "WELCOME", "valueType": "fixedAmount", "value": 300, "oncePerCustomer": true});
    c.post(&shop.path("/discounts"), t, once).await.expect(201);
    let lines = json!([{"variantId": mug, "quantity": 1}]);
    let apply = |co: &Value| shop.path(&format!("/checkouts/{}/discount-codes", co["id"].as_str().unwrap()));
    let welcome = json!({"code": "WELCOME"});

    let first = ready_checkout_for(c, &shop, lines.clone(), &rate, "ada@example.com").await;
    let co = c.post(&apply(&first), t, welcome.clone()).await.expect(200).body;
    assert_eq!(amount(&co, "/discount"), 300);
    let intent = paid_intent(c, &shop, &co).await;
    let path = shop.path(&format!("/checkouts/{}/complete", co["id"].as_str().unwrap()));
    let order = c.post(&path, t, json!({"paymentMethodId": "pm_card_visa", "paymentIntentId": intent})).await.expect(201);
    assert_eq!(order.body["discountCodes"], json!(["WELCOME"]));

    let again = ready_checkout_for(c, &shop, lines.clone(), &rate, "ADA@example.com").await;
    let refused = c.post(&apply(&again), t, welcome.clone()).await.expect(422);
    assert!(refused.body["error"]["message"].as_str().unwrap().contains("once per customer"), "{}", refused.body);
    let other = ready_checkout_for(c, &shop, lines, &rate, "grace@example.com").await;
    assert_eq!(amount(&c.post(&apply(&other), t, welcome).await.expect(200).body, "/discount"), 300);
}

#[tokio::test]
async fn a_promptpay_order_stays_pending_until_the_payer_pays() {
    let app = spawn_app().await;
    let c = &app.client;
    let owner = create_user(c).await;
    let t = Some(owner.token.as_str());
    let store = c
        .post("/api/v1/stores", t, json!({"name": "Bangkok", "currency": "THB", "country": "TH", "timezone": "Asia/Bangkok"}))
        .await
        .expect(201)
        .body;
    let base = format!("/api/v1/stores/{}", store["id"].as_str().unwrap());
    let p = c
        .post(
            &format!("{base}/products"),
            t,
            json!({"title": "Tea", "status": "ACTIVE", "price": {"amount": 15000, "currency": "THB"}}),
        )
        .await
        .expect(201)
        .body;
    let co = c
        .post(
            &format!("{base}/checkouts"),
            t,
            json!({"lineItems": [{"variantId": p["variants"][0]["id"], "quantity": 2}], "email": "p@example.com"}),
        )
        .await
        .expect(201)
        .body;
    let id = co["id"].as_str().unwrap();
    assert_eq!(amount(&co, "/paymentDue"), 30000);
    let session = c
        .post(
            &format!("{base}/checkouts/{id}/payment-session"),
            t,
            json!({"amount": 30000, "currency": "thb", "paymentMethod": "promptpay"}),
        )
        .await
        .expect(201)
        .body;
    assert!(session["clientSecret"].as_str().is_some_and(|s| !s.is_empty()));
    let intent = session["paymentIntentId"].as_str().unwrap();
    let order = c
        .post(&format!("{base}/checkouts/{id}/complete"), t, json!({"paymentMethodId": "promptpay", "paymentIntentId": intent}))
        .await
        .expect(201)
        .body;
    assert_eq!(order["financialStatus"], "PENDING");
    assert_eq!(order["payment"]["amount"], json!({"amount": 30000, "currency": "THB"}));
    let pending = c.get(&format!("{base}/orders?financialStatus=pending"), t).await.expect(200).body;
    assert_eq!((pending["total"].as_i64(), pending["data"][0]["id"].as_str()), (Some(1), order["id"].as_str()));
    assert_eq!(c.get(&format!("{base}/orders?financialStatus=PAID"), t).await.expect(200).body["total"], 0);
    let e = c.get(&format!("{base}/orders?financialStatus=SETTLED"), t).await.expect(400);
    assert_eq!(e.body["error"]["fields"][0]["field"], "financialStatus");

    // The payer scans the QR code and pays: the order is settled.
    c.post(&format!("{base}/payment-intents/{intent}/confirm"), t, json!({})).await.expect(200);
    let paid = c.get(&format!("{base}/orders/{}", order["id"].as_str().unwrap()), t).await.expect(200).body;
    assert_eq!(paid["financialStatus"], "PAID");
    assert_eq!(c.get(&format!("{base}/orders?financialStatus=PAID"), t).await.expect(200).body["total"], 1);
}

#[tokio::test]
async fn orders_are_listed_sorted_filtered_and_annotated() {
    let app = spawn_app().await;
    let c = &app.client;
    let shop = Shop::new(c).await;
    let t = Some(shop.owner.token.as_str());
    let (_, pen) = shop.product(c, "Pen", 300, 10).await;
    // No shipping zones: nothing to ship, so no address is needed.
    let mut orders = Vec::new();
    for (quantity, email) in [(3, "ann@example.com"), (1, "bob@example.com"), (2, "cy@example.com")] {
        let co = c
            .post(&shop.path("/checkouts"), t, json!({"lineItems": [{"variantId": pen, "quantity": quantity}], "email": email}))
            .await
            .expect(201)
            .body;
        let intent = paid_intent(c, &shop, &co).await;
        let path = shop.path(&format!("/checkouts/{}/complete", co["id"].as_str().unwrap()));
        orders
            .push(c.post(&path, t, json!({"paymentMethodId": "pm_card_visa", "paymentIntentId": intent})).await.expect(201).body);
    }
    let numbers =
        |v: &Value| -> Vec<i64> { v["data"].as_array().unwrap().iter().map(|o| o["number"].as_i64().unwrap()).collect() };
    let list = c.get(&shop.path("/orders"), t).await.expect(200).body;
    assert_eq!((numbers(&list), list["total"].as_i64(), list["totalPages"].as_i64()), (vec![1003, 1002, 1001], Some(3), Some(1)));
    let by_total = c.get(&shop.path("/orders?sortBy=total&sortOrder=asc"), t).await.expect(200).body;
    assert_eq!(numbers(&by_total), [1002, 1003, 1001]);
    let page = c.get(&shop.path("/orders?sortBy=order_number&sortOrder=asc&limit=2&page=2"), t).await.expect(200).body;
    assert_eq!((numbers(&page), page["total"].as_i64(), page["totalPages"].as_i64()), (vec![1003], Some(3), Some(2)));
    let found = c.get(&shop.path("/orders?search=%231002"), t).await.expect(200).body;
    assert_eq!((numbers(&found), found["total"].as_i64()), (vec![1002], Some(1)));
    let found = c.get(&shop.path("/orders?search=ANN@"), t).await.expect(200).body;
    assert_eq!(numbers(&found), [1001]);
    let unfulfilled = c.get(&shop.path("/orders?fulfillmentStatus=unfulfilled&status=open"), t).await.expect(200).body;
    assert_eq!(unfulfilled["total"], 3);
    for bad in ["limit=251", "sortBy=price", "status=closed", "customerId=nope"] {
        c.get(&shop.path(&format!("/orders?{bad}")), t).await.expect(400);
    }

    let id = orders[0]["id"].as_str().unwrap();
    let patched = c
        .patch(&shop.path(&format!("/orders/{id}")), t, json!({"note": " Gift wrap ", "tags": ["vip", "VIP", " rush "]}))
        .await
        .expect(200)
        .body;
    assert_eq!((patched["note"].as_str(), patched["tags"].clone()), (Some("Gift wrap"), json!(["vip", "rush"])));
    assert_eq!(patched["total"], orders[0]["total"], "amounts never change");
    let e = c.patch(&shop.path(&format!("/orders/{id}")), t, json!({"tags": [""], "note": "kept?"})).await.expect(400);
    assert_eq!(e.body["error"]["fields"][0]["field"], "tags[0]");
    assert_eq!(c.get(&shop.path(&format!("/orders/{id}")), t).await.expect(200).body["note"], "Gift wrap");
    let by_updated = c.get(&shop.path("/orders?sortBy=updated_at"), t).await.expect(200).body;
    assert_eq!(numbers(&by_updated)[0], 1001, "the updated order moves to the front");
    c.get(&shop.path(&format!("/orders/{}", uuid::Uuid::now_v7())), t).await.expect(404);
}
