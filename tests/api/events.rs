//! The store's events: appended with the writes they report, listed newest first or replayed in
//! order, filtered by topic and time, with the resource as the API shows it.

use serde_json::{Value, json};

use crate::calculate::Shop;
use crate::checkout::{paid_intent, ready_checkout, stocked, us_shipping};
use crate::support::*;

/// The topics of a page of events, in the order listed.
fn topics(page: &Value) -> Vec<String> {
    page["data"].as_array().unwrap().iter().map(|e| e["type"].as_str().unwrap().to_string()).collect()
}

/// Makes a product, renames it, sells two of its five units and deletes another product;
/// answers (product id, order).
pub async fn a_day_of_trade(c: &HttpClient, shop: &Shop) -> (String, Value) {
    let t = Some(shop.owner.token.as_str());
    let rate = us_shipping(c, shop).await;
    let variant = stocked(c, shop, "Mug", 1200, 5).await;
    let listed = c.get(&shop.path("/products"), t).await.expect(200).body;
    let product = listed["data"][0]["id"].as_str().unwrap().to_string();
    c.patch(&shop.path(&format!("/products/{product}")), t, json!({"title": "Big mug"})).await.expect(200);
    let co = ready_checkout(c, shop, json!([{"variantId": variant, "quantity": 2}]), &rate).await;
    let intent = paid_intent(c, shop, &co).await;
    let id = co["id"].as_str().unwrap();
    let order = c
        .post(
            &shop.path(&format!("/checkouts/{id}/complete")),
            t,
            json!({"paymentMethodId": "pm_card_visa", "paymentIntentId": intent}),
        )
        .await
        .expect(201)
        .body;
    let gone = create_product(c, &shop.owner, &shop.store, "Gone", 100).await;
    c.delete(&shop.path(&format!("/products/{}", gone["id"].as_str().unwrap())), t).await.expect(204);
    (product, order)
}

#[tokio::test]
async fn every_write_leaves_its_event_in_order_with_the_resource_as_shown() {
    let app = spawn_app().await;
    let c = &app.client;
    let shop = Shop::new(c).await;
    let t = Some(shop.owner.token.as_str());
    let (product, order) = a_day_of_trade(c, &shop).await;

    let replay = c.get(&shop.path("/events?sortOrder=asc&limit=100"), t).await.expect(200).body;
    assert_eq!(
        topics(&replay),
        [
            "product.created",
            "inventory.updated",
            "product.updated",
            "checkout.created",
            "inventory.updated",
            "product.updated",
            "order.created",
            "order.paid",
            "product.created",
            "product.deleted",
        ]
    );
    assert_eq!(replay["total"], 10);
    let events = replay["data"].as_array().unwrap();
    let ids: Vec<&str> = events.iter().map(|e| e["id"].as_str().unwrap()).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids grow in the order the events happened: {ids:?}");
    for e in events {
        assert_eq!(e["storeId"], shop.store.as_str());
        assert!(e["timestamp"].as_str().unwrap().ends_with('Z'));
    }
    // The data is the resource as the API shows it.
    let renamed = c.get(&shop.path(&format!("/products/{product}")), t).await.expect(200).body;
    assert_eq!(events[2]["data"]["title"], "Big mug");
    assert_eq!(events[5]["data"], renamed, "the last update shows the product as it is now");
    assert_eq!(events[0]["data"]["title"], "Mug");
    // A level changed: the level as `GET S/inventory-levels` shows it.
    assert_eq!((events[1]["data"]["available"].as_i64(), events[1]["data"]["committed"].as_i64()), (Some(5), Some(0)));
    assert_eq!((events[4]["data"]["available"].as_i64(), events[4]["data"]["committed"].as_i64()), (Some(3), Some(2)));
    assert_eq!(events[4]["data"]["onHand"], 5);
    assert_eq!(events[4]["data"]["productId"], product.as_str());
    assert_eq!(events[6]["data"], order);
    assert_eq!(events[3]["data"]["lineItems"][0]["quantity"], 2);
    assert_eq!(events[9]["data"], json!({"id": events[8]["data"]["id"]}));

    // Newest first by default; a topic filter counts its own total.
    let newest = c.get(&shop.path("/events?limit=2"), t).await.expect(200).body;
    assert_eq!(topics(&newest), ["product.deleted", "product.created"]);
    assert_eq!((newest["total"].as_i64(), newest["totalPages"].as_i64()), (Some(10), Some(5)));
    let orders = c.get(&shop.path("/events?topic=order.created,order.paid&sortOrder=asc"), t).await.expect(200).body;
    assert_eq!((topics(&orders), orders["total"].as_i64()), (vec!["order.created".to_string(), "order.paid".into()], Some(2)));

    // Since a moment: the events at or after it.
    app.clock.advance(std::time::Duration::from_secs(1800));
    let since = shopcell::domain::time::rfc3339(app.clock.now_ms());
    c.patch(&shop.path(&format!("/products/{product}")), t, json!({"title": "Bigger mug"})).await.expect(200);
    let later = c.get(&shop.path(&format!("/events?since={since}")), t).await.expect(200).body;
    assert_eq!((topics(&later), later["total"].as_i64()), (vec!["product.updated".to_string()], Some(1)));
    assert_eq!(later["data"][0]["data"]["title"], "Bigger mug");

    // Bad input: an unknown topic or time is a 400 naming it; another store's events are not ours.
    let bad = c.get(&shop.path("/events?topic=order.shipped"), t).await.expect(400);
    assert!(bad.body.to_string().contains("topic"), "{}", bad.body);
    c.get(&shop.path("/events?since=yesterday"), t).await.expect(400);
    let other = Shop::new(c).await;
    let theirs = c.get(&other.path("/events"), Some(&other.owner.token)).await.expect(200).body;
    assert_eq!(theirs["total"], 0);
    c.get(&other.path("/events"), t).await.expect(404);
}

#[tokio::test]
async fn an_event_exists_exactly_when_its_write_committed() {
    let app = spawn_app().await;
    let c = &app.client;
    let shop = Shop::new(c).await;
    let t = Some(shop.owner.token.as_str());
    let p = create_product(c, &shop.owner, &shop.store, "Lamp", 4000).await;
    // A write refused (a variant the product cannot lose) leaves no event.
    let variant = p["variants"][0]["id"].as_str().unwrap();
    c.delete(&shop.path(&format!("/products/{}/variants/{variant}", p["id"].as_str().unwrap())), t).await.expect(422);
    let page = c.get(&shop.path("/events"), t).await.expect(200).body;
    assert_eq!(topics(&page), ["product.created"]);

    // Across a restart, what committed is there.
    let data = app.dir.path().to_path_buf();
    let mut app = app;
    app.stop().await;
    let again = spawn_app_in_on(&data, app.clock.clone()).await;
    let page = again.client.get(&shop.path("/events"), t).await.expect(200).body;
    assert_eq!(topics(&page), ["product.created"]);
    assert_eq!(page["data"][0]["data"]["id"], p["id"]);
}

#[tokio::test]
async fn events_are_kept_thirty_days() {
    let app = spawn_app().await;
    let c = &app.client;
    let shop = Shop::new(c).await;
    create_product(c, &shop.owner, &shop.store, "Old", 100).await;
    app.clock.advance(std::time::Duration::from_secs(20 * 24 * 3600));
    let fresh = c.post("/api/v1/auth/login", None, json!({"email": shop.owner.email, "password": PASSWORD})).await.expect(200);
    let t = fresh.body["accessToken"].as_str().unwrap().to_string();
    let p = c
        .post(&shop.path("/products"), Some(&t), json!({"title": "New", "price": {"amount": 100, "currency": "USD"}}))
        .await
        .expect(201)
        .body;
    // Eleven days on, the first event is past its 30 days: the sweep removes it, not the second.
    app.clock.advance(std::time::Duration::from_secs(11 * 24 * 3600));
    let cell = app.cell();
    let store: uuid::Uuid = shop.store.parse().unwrap();
    let q = shopcell::storage::list::ListQuery { sort: "created_at", limit: 10, ..Default::default() };
    let left = eventually(|| async {
        Some(cell.list::<shopcell::cells::events::Event>(store, &q).await.unwrap()).filter(|l| l.total == 1)
    })
    .await
    .expect("the sweep removes the old event");
    assert_eq!(left.items.len(), 1);
    assert!(left.items[0].data.contains(p["id"].as_str().unwrap()), "the newer event stays");
}

/// The `checkout.abandoned` events of the app's first cell for `store`, read below HTTP (the
/// clock moves past token lifetimes here).
async fn abandoned(app: &TestApp, store: &str) -> Vec<Value> {
    let q = shopcell::storage::list::ListQuery {
        sort: "created_at",
        limit: 10,
        filters: vec![(0, vec![b"checkout.abandoned".to_vec()])],
        ..Default::default()
    };
    let listed = app.cell().list::<shopcell::cells::events::Event>(store.parse().unwrap(), &q).await.unwrap();
    listed.items.iter().map(|e| serde_json::from_str(&e.data).unwrap()).collect()
}

#[tokio::test]
async fn a_checkout_left_an_hour_after_its_last_change_is_reported_abandoned_once() {
    let app = spawn_app().await;
    let c = &app.client;
    let shop = Shop::new(c).await;
    let t = Some(shop.owner.token.as_str());
    let variant = stocked(c, &shop, "Scarf", 2000, 10).await;
    let lines = json!([{"variantId": variant, "quantity": 1}]);
    let left =
        c.post(&shop.path("/checkouts"), t, json!({"lineItems": lines, "email": "left@example.com"})).await.expect(201).body;
    let anonymous = c.post(&shop.path("/checkouts"), t, json!({"lineItems": lines})).await.expect(201).body;
    let id = left["id"].as_str().unwrap();
    let minutes = |m: u64| std::time::Duration::from_secs(m * 60);

    // A change half an hour in starts the hour again.
    app.clock.advance(minutes(30));
    c.patch(&shop.path(&format!("/checkouts/{id}")), t, json!({"note": "gift wrap"})).await.expect(200);
    app.clock.advance(minutes(45));
    app.cell().jobs.wake();
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert!(abandoned(&app, &shop.store).await.is_empty(), "75 minutes after the start, 45 after the change");

    app.clock.advance(minutes(16));
    let reported = eventually(|| async { Some(abandoned(&app, &shop.store).await).filter(|a| a.len() == 1) })
        .await
        .expect("the checkout is reported abandoned");
    let reported = &reported[0];
    assert_eq!(reported["id"], id);
    assert_eq!(reported["email"], "left@example.com");
    assert_eq!(reported["note"], "gift wrap");

    // Once: later hours add nothing, and the checkout without an email is never reported.
    app.clock.advance(minutes(180));
    app.cell().jobs.wake();
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let all = abandoned(&app, &shop.store).await;
    assert_eq!(all.len(), 1);
    assert_ne!(all[0]["id"], anonymous["id"]);
}
