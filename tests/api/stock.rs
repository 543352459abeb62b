//! Locations, inventory levels and their history; orders placed across locations.

use serde_json::{Value, json};

use crate::calculate::Shop;
use crate::checkout::{inventory, paid_intent, ready_checkout, stocked, us_shipping};
use crate::support::*;

/// The store's locations, by priority (lower first).
async fn locations(c: &HttpClient, shop: &Shop) -> Vec<Value> {
    c.get(&shop.path("/locations?sortOrder=asc"), Some(&shop.owner.token)).await.expect(200).body["data"]
        .as_array()
        .unwrap()
        .clone()
}

pub async fn create_location(c: &HttpClient, shop: &Shop, name: &str, priority: i32) -> String {
    let l = c
        .post(&shop.path("/locations"), Some(&shop.owner.token), json!({"name": name, "priority": priority}))
        .await
        .expect(201)
        .body;
    l["id"].as_str().unwrap().to_string()
}

/// Each level of `variant` as (location id, available, committed).
pub async fn levels(c: &HttpClient, shop: &Shop, variant: &str) -> Vec<(String, i64, i64)> {
    let body =
        c.get(&shop.path(&format!("/inventory-levels?variantId={variant}")), Some(&shop.owner.token)).await.expect(200).body;
    body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            assert_eq!(
                l["onHand"].as_i64().unwrap(),
                l["available"].as_i64().unwrap() + l["committed"].as_i64().unwrap() + l["reserved"].as_i64().unwrap()
            );
            (l["locationId"].as_str().unwrap().to_string(), l["available"].as_i64().unwrap(), l["committed"].as_i64().unwrap())
        })
        .collect()
}

pub async fn adjust(c: &HttpClient, shop: &Shop, variant: &str, location: &str, delta: i64) -> Answer {
    let body = json!({"variantId": variant, "locationId": location, "delta": delta, "reason": "received"});
    c.post(&shop.path("/inventory-levels/adjust"), Some(&shop.owner.token), body).await
}

pub async fn complete(c: &HttpClient, shop: &Shop, lines: Value, rate: &str) -> Answer {
    let co = ready_checkout(c, shop, lines, rate).await;
    let intent = paid_intent(c, shop, &co).await;
    let path = shop.path(&format!("/checkouts/{}/complete", co["id"].as_str().unwrap()));
    c.post(&path, Some(&shop.owner.token), json!({"paymentMethodId": "pm_card_visa", "paymentIntentId": intent})).await
}

#[tokio::test]
async fn a_store_keeps_stock_per_location_and_every_change_in_its_history() {
    let app = spawn_app().await;
    let c = &app.client;
    let shop = Shop::new(c).await;
    let t = Some(shop.owner.token.as_str());

    // Made with the store: one default location, active and fulfilling online orders.
    let made = locations(c, &shop).await;
    assert_eq!(made.len(), 1);
    assert_eq!(
        (made[0]["name"].as_str(), made[0]["default"].as_bool(), made[0]["active"].as_bool()),
        (Some("Default location"), Some(true), Some(true))
    );
    let home = made[0]["id"].as_str().unwrap().to_string();

    // A product's written quantity is the default location's available.
    let mug = stocked(c, &shop, "Mug", 1200, 5).await;
    assert_eq!(levels(c, &shop, &mug).await, vec![(home.clone(), 5, 0)]);

    // A second location: zeros until it holds some; its units are sold too.
    let shed = create_location(c, &shop, "Shed", 5).await;
    let one = c.get(&shop.path(&format!("/locations/{shed}")), t).await.expect(200).body;
    assert_eq!((one["name"].as_str(), one["priority"].as_i64(), one["default"].as_bool()), (Some("Shed"), Some(5), Some(false)));
    assert_eq!(levels(c, &shop, &mug).await, vec![(home.clone(), 5, 0), (shed.clone(), 0, 0)]);
    let level = adjust(c, &shop, &mug, &shed, 4).await.expect(200).body;
    assert_eq!((level["available"].as_i64(), level["onHand"].as_i64()), (Some(4), Some(4)));
    assert_eq!(inventory(c, &shop, &mug).await, 9);

    // Names are unique without regard to case; below zero is refused, naming variant and location.
    let dup = c.post(&shop.path("/locations"), t, json!({"name": "shed"})).await.expect(409);
    assert_eq!(dup.body["error"]["fields"][0]["field"], "name");
    let low = adjust(c, &shop, &mug, &shed, -5).await.expect(422);
    let msg = low.body["error"]["message"].as_str().unwrap();
    assert!(msg.contains(&mug) && msg.contains("Shed"), "{msg}");
    let bad = c
        .post(
            &shop.path("/inventory-levels/adjust"),
            t,
            json!({"variantId": mug, "locationId": shed, "delta": 1, "reason": "order_placed"}),
        )
        .await
        .expect(400);
    assert_eq!(bad.body["error"]["fields"][0]["field"], "reason");

    // Set with a stale compareQuantity is a 409 and changes nothing.
    let set = json!({"variantId": mug, "locationId": shed, "available": 2, "compareQuantity": 3, "reason": "cycle_count"});
    c.post(&shop.path("/inventory-levels/set"), t, set).await.expect(409);
    let set = json!({"variantId": mug, "locationId": shed, "available": 2, "compareQuantity": 4, "reason": "cycle_count"});
    c.post(&shop.path("/inventory-levels/set"), t, set).await.expect(200);
    assert_eq!(inventory(c, &shop, &mug).await, 7);

    // An order of 6: no location covers it, so it is split by priority (5 at home, 1 at the shed).
    let rate = us_shipping(c, &shop).await;
    let order = complete(c, &shop, json!([{"variantId": mug, "quantity": 6}]), &rate).await.expect(201).body;
    assert_eq!(order["fulfillmentStatus"], "UNFULFILLED");
    assert_eq!(
        (order["lineItems"][0]["fulfillableQuantity"].as_i64(), order["lineItems"][0]["fulfilledQuantity"].as_i64()),
        (Some(6), Some(0))
    );
    assert_eq!(levels(c, &shop, &mug).await, vec![(home.clone(), 0, 5), (shed.clone(), 1, 1)]);
    assert_eq!(inventory(c, &shop, &mug).await, 1);
    let fos = c
        .get(&shop.path(&format!("/orders/{}/fulfillment-orders?sortOrder=asc", order["id"].as_str().unwrap())), t)
        .await
        .expect(200)
        .body;
    let placed: Vec<(String, i64)> = fos["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["locationId"].as_str().unwrap().to_string(), f["lineItems"][0]["quantity"].as_i64().unwrap()))
        .collect();
    assert_eq!(placed.len(), 2);
    assert!(placed.contains(&(home.clone(), 5)) && placed.contains(&(shed.clone(), 1)), "{placed:?}");
    assert!(fos["data"].as_array().unwrap().iter().all(|f| f["status"] == "OPEN"));

    // A location with committed units stays active; an idle one can be deactivated, and its
    // units stop being sold (they stay there).
    let busy = c.patch(&shop.path(&format!("/locations/{shed}")), t, json!({"active": false})).await.expect(409);
    assert!(busy.body["error"]["message"].as_str().unwrap().contains(&mug), "{}", busy.body);
    let spare = create_location(c, &shop, "Spare", 9).await;
    adjust(c, &shop, &mug, &spare, 3).await.expect(200);
    assert_eq!(inventory(c, &shop, &mug).await, 4);
    c.patch(&shop.path(&format!("/locations/{spare}")), t, json!({"active": false})).await.expect(200);
    assert_eq!(inventory(c, &shop, &mug).await, 1);
    let kept = c.get(&shop.path(&format!("/inventory-levels?locationId={spare}")), t).await.expect(200).body;
    assert_eq!((kept["total"].as_i64(), kept["data"][0]["available"].as_i64()), (Some(1), Some(3)));
    // The default location moves; it is always active.
    c.patch(&shop.path(&format!("/locations/{shed}")), t, json!({"default": true})).await.expect(200);
    let now: Vec<(String, bool)> = locations(c, &shop)
        .await
        .iter()
        .map(|l| (l["name"].as_str().unwrap().to_string(), l["default"].as_bool().unwrap()))
        .collect();
    assert_eq!(now, [("Default location".to_string(), false), ("Shed".into(), true), ("Spare".into(), false)]);
    c.patch(&shop.path(&format!("/locations/{shed}")), t, json!({"active": false})).await.expect(422);

    // The history: newest first, each change with its reason, actor, deltas and results.
    let h = c.get(&shop.path(&format!("/inventory-history?variantId={mug}&locationId={shed}")), t).await.expect(200).body;
    let reasons: Vec<&str> = h["data"].as_array().unwrap().iter().map(|c| c["reason"].as_str().unwrap()).collect();
    assert_eq!(reasons, ["order_placed", "cycle_count", "received"]);
    assert_eq!(h["data"][0]["reference"], json!({"type": "order", "id": order["id"]}));
    assert_eq!(h["data"][0]["actor"], json!({"type": "system", "id": null}));
    assert_eq!(h["data"][2]["actor"]["type"], "member");
    assert_eq!(
        h["data"][1]["changes"],
        json!([{"name": "available", "delta": -2, "quantity": 2}, {"name": "onHand", "delta": -2, "quantity": 2}])
    );
    let placed = c.get(&shop.path("/inventory-history?reason=order_placed"), t).await.expect(200).body;
    assert_eq!(placed["total"], 2);
    // A span of time, tested on what the changes themselves say (no list row of their own).
    let at = h["data"][1]["createdAt"].as_str().unwrap().to_string();
    assert!(h["data"].as_array().unwrap().iter().any(|c| c["createdAt"] != at.as_str()), "changes at other times");
    let span = format!("/inventory-history?locationId={shed}&dateFrom={at}&dateTo={at}");
    let within = c.get(&shop.path(&span), t).await.expect(200).body;
    let times: Vec<&str> = within["data"].as_array().unwrap().iter().map(|c| c["createdAt"].as_str().unwrap()).collect();
    assert!(!times.is_empty() && times.iter().all(|c| *c == at), "{times:?}");
    assert_eq!(within["total"].as_u64(), Some(times.len() as u64));
    assert!(within["data"].as_array().unwrap().iter().any(|c| c["id"] == h["data"][1]["id"]));
}

/// Cache `name`'s (entries, bytes, hits, misses) in `/metrics`.
async fn cache(app: &TestApp, name: &str) -> (u64, u64, u64, u64) {
    let text = app.metrics().await;
    let cell = app.server.as_ref().unwrap().node.cells.keys().next().unwrap().clone();
    let key = (cell, name.to_string());
    let of = |family: &str| crate::system::family(&text, family)[&key];
    (of("shopcell_cache_entries"), of("shopcell_cache_bytes"), of("shopcell_cache_hits_total"), of("shopcell_cache_misses_total"))
}

/// A shop whose one location holds 5 of a mug: the app, the shop, the location, the variant.
async fn shop_with_a_mug() -> (TestApp, Shop, String, String) {
    let app = spawn_app().await;
    let shop = Shop::new(&app.client).await;
    let home = locations(&app.client, &shop).await[0]["id"].as_str().unwrap().to_string();
    let mug = stocked(&app.client, &shop, "Mug", 1200, 5).await;
    (app, shop, home, mug)
}

#[tokio::test]
async fn a_variant_s_levels_take_the_active_locations_from_a_cache_every_location_write_refreshes() {
    let (app, shop, home, mug) = shop_with_a_mug().await;
    let (c, t) = (&app.client, Some(shop.owner.token.as_str()));
    let row = |loc: &str, available: i64| (loc.to_string(), available, 0);

    // The first page reads the locations and keeps them (16 bytes each behind the entry's
    // counts, and its shard's map and fill order at their first capacity); the second, of
    // another page size, finds them kept.
    let (_, _, hits, misses) = cache(&app, "locations").await;
    assert_eq!(levels(c, &shop, &mug).await, vec![row(&home, 5)]);
    c.get(&shop.path(&format!("/inventory-levels?variantId={mug}&limit=5")), t).await.expect(200);
    type Key = (uuid::Uuid, uuid::Uuid);
    // The shard's tables when its fill order holds up to `keys` keys (it keeps a dropped key
    // until that comes up, and grows by doubling from four).
    let shard = |keys: usize| {
        shopcell::memory::map_bytes::<Key, std::sync::Arc<[u8]>>(3) + shopcell::memory::allocated(keys * size_of::<Key>())
    };
    let kept = |locations: usize, keys: usize| (shopcell::memory::shared_bytes(16 * locations) + shard(keys)) as u64;
    assert_eq!(cache(&app, "locations").await, (1, kept(1, 4), hits + 1, misses + 1));

    // Every write of a location is seen by the next page: a new one, a priority changed (the
    // order), one deactivated; a level written is not a location write and keeps the entry.
    let shed = create_location(c, &shop, "Shed", 5).await;
    assert_eq!(levels(c, &shop, &mug).await, vec![row(&home, 5), row(&shed, 0)]);
    let front = create_location(c, &shop, "Front", 1).await;
    assert_eq!(levels(c, &shop, &mug).await, vec![row(&home, 5), row(&front, 0), row(&shed, 0)]);
    c.patch(&shop.path(&format!("/locations/{front}")), t, json!({"priority": 9})).await.expect(200);
    assert_eq!(levels(c, &shop, &mug).await, vec![row(&home, 5), row(&shed, 0), row(&front, 0)]);
    adjust(c, &shop, &mug, &shed, 2).await.expect(200);
    let (_, _, hits, misses) = cache(&app, "locations").await;
    assert_eq!(levels(c, &shop, &mug).await, vec![row(&home, 5), row(&shed, 2), row(&front, 0)]);
    // Four fills so far, each after a location write.
    assert_eq!(cache(&app, "locations").await, (1, kept(3, 4), hits + 1, misses), "an adjustment leaves the locations kept");
    c.patch(&shop.path(&format!("/locations/{front}")), t, json!({"active": false})).await.expect(200);
    assert_eq!(levels(c, &shop, &mug).await, vec![row(&home, 5), row(&shed, 2)]);
    assert_eq!(cache(&app, "locations").await.1, kept(2, 8), "the fifth fill: the order's ring doubled");

    // A level at an inactive location follows the active ones: activated again, it takes its
    // place by priority.
    c.patch(&shop.path(&format!("/locations/{shed}")), t, json!({"priority": 20})).await.expect(200);
    c.patch(&shop.path(&format!("/locations/{front}")), t, json!({"active": true})).await.expect(200);
    adjust(c, &shop, &mug, &front, 1).await.expect(200);
    c.patch(&shop.path(&format!("/locations/{front}")), t, json!({"active": false})).await.expect(200);
    assert_eq!(levels(c, &shop, &mug).await, vec![row(&home, 5), row(&shed, 2), row(&front, 1)]);
    c.patch(&shop.path(&format!("/locations/{front}")), t, json!({"active": true})).await.expect(200);
    assert_eq!(levels(c, &shop, &mug).await, vec![row(&home, 5), row(&front, 1), row(&shed, 2)]);
}

/// A variant's levels page, its body as answered.
async fn level_page(c: &HttpClient, shop: &Shop, query: &str) -> Value {
    c.get(&shop.path(&format!("/inventory-levels?{query}")), Some(&shop.owner.token)).await.expect(200).body
}

#[tokio::test]
async fn a_variant_s_levels_are_kept_until_they_change_and_every_page_is_composed_from_them() {
    let (app, shop, home, mug) = shop_with_a_mug().await;
    let (c, t) = (&app.client, Some(shop.owner.token.as_str()));
    let row = |loc: &str, available: i64, committed: i64| (loc.to_string(), available, committed);

    // Read twice: the first reads and keeps the variant's levels, the second finds them.
    let (entries, _, hits, misses) = cache(&app, "levels").await;
    let first = level_page(c, &shop, &format!("variantId={mug}")).await;
    let again = level_page(c, &shop, &format!("variantId={mug}")).await;
    assert_eq!(first, again);
    assert_eq!(first["total"], 1);
    let (now_entries, bytes, now_hits, now_misses) = cache(&app, "levels").await;
    assert_eq!((now_entries, now_hits, now_misses), (entries + 1, hits + 1, misses + 1));
    let view = first["data"][0].to_string().len() as u64;
    assert!(bytes > view, "the level's view is counted in the cache's share");

    // Every write of the variant's levels is seen by the next read: an adjustment, an order's
    // commitment.
    adjust(c, &shop, &mug, &home, 2).await.expect(200);
    assert_eq!(levels(c, &shop, &mug).await, vec![row(&home, 7, 0)]);
    complete(c, &shop, json!([{"variantId": mug, "quantity": 3}]), &us_shipping(c, &shop).await).await.expect(201);
    assert_eq!(levels(c, &shop, &mug).await, vec![row(&home, 4, 3)]);
    // A location's write changes no level: the kept levels answer, and the page gains or loses
    // the location's row.
    let (_, _, hits, misses) = cache(&app, "levels").await;
    let shed = create_location(c, &shop, "Shed", 5).await;
    assert_eq!(levels(c, &shop, &mug).await, vec![row(&home, 4, 3), row(&shed, 0, 0)]);
    // Any page of the variant is cut from them.
    let one = level_page(c, &shop, &format!("variantId={mug}&limit=1&page=2")).await;
    assert_eq!((one["total"].as_u64(), one["data"][0]["locationId"].as_str()), (Some(2), Some(shed.as_str())));
    assert_eq!(one["data"][0]["updatedAt"], Value::Null, "the shed never held the mug");
    let at_home = level_page(c, &shop, &format!("variantId={mug}&locationId={home}")).await;
    assert_eq!((at_home["total"].as_u64(), at_home["data"][0]["committed"].as_i64()), (Some(1), Some(3)));
    c.patch(&shop.path(&format!("/locations/{shed}")), t, json!({"active": false})).await.expect(200);
    assert_eq!(levels(c, &shop, &mug).await, vec![row(&home, 4, 3)]);
    assert_eq!(cache(&app, "levels").await.2 - hits, 4, "four pages, each from the kept levels");
    assert_eq!(cache(&app, "levels").await.3, misses, "and none read afresh");

    // A variant holding no level shows zeros, kept too; deleting its product drops them.
    let cup = c
        .post(
            &shop.path("/products"),
            t,
            json!({"title": "Cup", "status": "ACTIVE", "price": {"amount": 300, "currency": "USD"},
                   "variants": [{"title": "Default", "inventoryTracked": true, "inventoryQuantity": 0}]}),
        )
        .await
        .expect(201)
        .body;
    let cup_variant = cup["variants"][0]["id"].as_str().unwrap().to_string();
    assert_eq!(levels(c, &shop, &cup_variant).await, vec![row(&home, 0, 0)]);
    let (_, _, hits, _) = cache(&app, "levels").await;
    assert_eq!(levels(c, &shop, &cup_variant).await, vec![row(&home, 0, 0)]);
    assert_eq!(cache(&app, "levels").await.2, hits + 1, "answered from the kept levels");
    c.delete(&shop.path(&format!("/products/{}", cup["id"].as_str().unwrap())), t).await.expect(204);
    let gone = level_page(c, &shop, &format!("variantId={cup_variant}")).await;
    assert_eq!((gone["total"].as_u64(), gone["data"].as_array().map(Vec::len)), (Some(0), Some(0)));
    // A variant the store does not have is never kept.
    let (entries, ..) = cache(&app, "levels").await;
    level_page(c, &shop, &format!("variantId={cup_variant}")).await;
    assert_eq!(cache(&app, "levels").await.0, entries);

    // A page is compressed on the way out as any answer: gzip unpacks to the plain body.
    for bay in 1..=4 {
        create_location(c, &shop, &format!("Bay {bay}"), 10 + bay).await;
    }
    adjust(c, &shop, &mug, &home, 1).await.expect(200);
    let path = shop.path(&format!("/inventory-levels?variantId={mug}"));
    let packed = c.send(hyper::Method::GET, &path, t, &[("accept-encoding", "gzip")], None).await.expect(200);
    assert_eq!(packed.headers["content-encoding"], "gzip");
    let mut unpacked = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&packed.raw[..]), &mut unpacked).unwrap();
    let plain = c.get(&path, t).await.expect(200);
    assert!(plain.headers.get("content-encoding").is_none());
    assert_eq!(unpacked, plain.raw.to_vec());
    assert_eq!(plain.body["data"][0]["available"], 5);

    // Kept levels are records, not answers: with kept answers off (`--answer-cache false`) a
    // page is still composed from them.
    app.server.as_ref().unwrap().node.cells.values().next().unwrap().pages.set_enabled(false);
    adjust(c, &shop, &mug, &home, 1).await.expect(200);
    let (_, _, hits, misses) = cache(&app, "levels").await;
    assert_eq!(levels(c, &shop, &mug).await[0], row(&home, 6, 3));
    assert_eq!(levels(c, &shop, &mug).await[0], row(&home, 6, 3));
    let after = cache(&app, "levels").await;
    assert_eq!((after.2, after.3), (hits + 1, misses + 1), "read once after the adjustment, then kept");
}

#[tokio::test]
async fn a_location_s_writes_leave_their_events_and_a_store_holds_at_most_a_thousand() {
    let app = spawn_app().await;
    let c = &app.client;
    let shop = Shop::new(c).await;
    let t = Some(shop.owner.token.as_str());

    // Each write leaves its event, the location as `GET S/locations/{id}` answers it.
    let shed = create_location(c, &shop, "Shed", 5).await;
    let moved = c.patch(&shop.path(&format!("/locations/{shed}")), t, json!({"priority": 7})).await.expect(200).body;
    let events = c.get(&shop.path("/events?limit=2"), t).await.expect(200).body;
    let types: Vec<&str> = events["data"].as_array().unwrap().iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["location.updated", "location.created"]);
    assert_eq!(events["data"][0]["data"], moved);
    assert_eq!(
        (events["data"][1]["data"]["id"].as_str(), events["data"][1]["data"]["priority"].as_i64()),
        (Some(shed.as_str()), Some(5))
    );

    // Up to 1,000 (the default and the shed among them), made side by side; the next is refused
    // and makes nothing.
    let mut made = tokio::task::JoinSet::new();
    for n in 0..998 {
        let (c, path, token) = (c.clone(), shop.path("/locations"), shop.owner.token.clone());
        made.spawn(async move { c.post(&path, Some(&token), json!({"name": format!("Bay {n}")})).await.status });
    }
    while let Some(status) = made.join_next().await {
        assert_eq!(status.unwrap(), hyper::StatusCode::CREATED);
    }
    let full = c.post(&shop.path("/locations"), t, json!({"name": "One too many"})).await.expect(422);
    assert!(full.body["error"]["message"].as_str().unwrap().contains("at most 1000 locations"), "{}", full.body);
    let listed = c.get(&shop.path("/locations?limit=1"), t).await.expect(200).body;
    assert_eq!(listed["total"], 1000);
}
