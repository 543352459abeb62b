//! SIGKILL during concurrent writes: every acknowledged write is there after restart.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;

use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_writes_survive_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_string_lossy().into_owned();
    let port = free_port();
    let mut server = start_proc(&["serve", "--data", &data], port).await;
    let c = HttpClient::new(&server.url);
    let u = create_user(&c).await;
    let s = create_store(&c, &u).await;

    let acked = Arc::new(Mutex::new(HashSet::new()));
    let mut writers = Vec::new();
    for w in 0..16 {
        let (c, token, s, acked) = (c.clone(), u.token.clone(), s.clone(), acked.clone());
        writers.push(tokio::spawn(async move {
            for n in 0.. {
                let body = json!({"title": format!("w{w}-{n}"), "price": {"amount": n, "currency": "USD"}});
                let path = format!("/api/v1/stores/{s}/products");
                let req = c.try_send(hyper::Method::POST, &path, Some(&token), &[], Some(body.to_string().into()));
                // Once the server is killed, requests fail or hang: stop there.
                let Ok(Some(a)) = tokio::time::timeout(Duration::from_secs(2), req).await else { break };
                if a.status.as_u16() != 201 {
                    break;
                }
                acked.lock().unwrap().insert(a.body["id"].as_str().unwrap().to_string());
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(800)).await;
    server.child.kill().unwrap(); // SIGKILL
    server.child.wait().unwrap();
    for w in writers {
        w.await.unwrap();
    }
    let acked = acked.lock().unwrap().clone();
    assert!(acked.len() > 10, "writes were acknowledged before the kill ({})", acked.len());

    let server = start_proc(&["serve", "--data", &data], port).await;
    let c = HttpClient::new(&server.url);
    let mut seen = HashSet::new();
    for page in 1.. {
        let l = c.get(&format!("/api/v1/stores/{s}/products?limit=250&page={page}"), Some(&u.token)).await.expect(200).body;
        let rows = l["data"].as_array().unwrap();
        seen.extend(rows.iter().map(|p| p["id"].as_str().unwrap().to_string()));
        if rows.len() < 250 {
            assert_eq!(l["total"].as_u64().unwrap() as usize, seen.len());
            break;
        }
    }
    let lost: Vec<_> = acked.difference(&seen).collect();
    assert!(lost.is_empty(), "{} acknowledged writes lost: {lost:?}", lost.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_9_mid_backlog_delivers_every_event_repeating_only_what_was_in_flight() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_string_lossy().into_owned();
    let port = free_port();
    let serve = |paused: bool| {
        let mut args = vec!["serve", "--data", &data, "--outbound-allow", "127.0.0.1"];
        if paused {
            args.push("--jobs-paused");
        }
        args.into_iter().map(str::to_string).collect::<Vec<_>>()
    };
    let start = |args: Vec<String>| async move { start_proc(&args.iter().map(String::as_str).collect::<Vec<_>>(), port).await };
    // The backlog is written with the runner paused.
    let mut server = start(serve(true)).await;
    let c = HttpClient::new(&server.url);
    let u = create_user(&c).await;
    let s = create_store(&c, &u).await;
    let rx = crate::receiver::Receiver::start().await;
    const HOOKS: usize = 4;
    const PRODUCTS: usize = 150;
    let mut secrets = Vec::new();
    for i in 0..HOOKS {
        let url = format!("http://127.0.0.1:{}/h{i}", rx.addr.port());
        let body = json!({"topics": ["product.created"], "url": url});
        let hook = c.post(&format!("/api/v1/stores/{s}/webhooks"), Some(&u.token), body).await.expect(201);
        secrets.push(hook.body["secret"].as_str().unwrap().to_string());
    }
    let mut ids = HashSet::new();
    for n in 0..PRODUCTS {
        ids.insert(create_product(&c, &u, &s, &format!("p{n}"), 100).await["id"].as_str().unwrap().to_string());
    }
    server.child.kill().unwrap();
    server.child.wait().unwrap();

    // Draining, killed part way; started again, it finishes.
    let mut server = start(serve(false)).await;
    rx.wait_for_within(HOOKS * PRODUCTS / 3, Duration::from_secs(60)).await;
    server.child.kill().unwrap();
    server.child.wait().unwrap();
    assert!(rx.received().len() < HOOKS * PRODUCTS, "the kill came before the end");
    let _server = start(serve(false)).await;
    rx.wait_for_within(HOOKS * PRODUCTS, Duration::from_secs(60)).await;
    // Late repeats, if any, have time to show.
    tokio::time::sleep(Duration::from_millis(500)).await;

    let got = rx.received();
    let mut distinct = HashSet::new();
    for r in &got {
        let i: usize = r.path.trim_start_matches("/h").parse().unwrap();
        assert!(r.signed_with(&secrets[i]), "every delivery is signed with its subscription's secret");
        assert!(ids.contains(r.json()["data"]["id"].as_str().unwrap()));
        distinct.insert((i, r.id.clone()));
    }
    assert_eq!(distinct.len(), HOOKS * PRODUCTS, "every event reached every subscription");
    let repeats = got.len() - distinct.len();
    assert!(repeats <= HOOKS, "only the deliveries in flight at the kill repeat: {repeats}");
}

/// Every level of `variants` at every location, with the product's sellable sum: what the
/// store holds, read back after the restart.
async fn stock_holds_together(c: &HttpClient, shop: &crate::calculate::Shop, variants: &[String], sellable_at: &[String]) {
    let t = Some(shop.owner.token.as_str());
    // Units committed per (variant, location), from the fulfillment orders of every order.
    let mut committed: std::collections::HashMap<(String, String), i64> = Default::default();
    let orders = c.get(&shop.path("/orders?limit=250"), t).await.expect(200).body;
    for o in orders["data"].as_array().unwrap() {
        let fos =
            c.get(&shop.path(&format!("/orders/{}/fulfillment-orders", o["id"].as_str().unwrap())), t).await.expect(200).body;
        let mut placed = 0;
        for fo in fos["data"].as_array().unwrap() {
            for l in fo["lineItems"].as_array().unwrap() {
                let key = (l["variantId"].as_str().unwrap().to_string(), fo["locationId"].as_str().unwrap().to_string());
                *committed.entry(key).or_default() += l["remainingQuantity"].as_i64().unwrap();
                placed += l["quantity"].as_i64().unwrap();
            }
        }
        let ordered: i64 = o["lineItems"].as_array().unwrap().iter().map(|l| l["quantity"].as_i64().unwrap()).sum();
        assert_eq!(placed, ordered, "every unit of order {} is placed at a location", o["number"]);
    }
    for v in variants {
        let levels = c.get(&shop.path(&format!("/inventory-levels?variantId={v}")), t).await.expect(200).body;
        let mut sellable = 0;
        for l in levels["data"].as_array().unwrap() {
            let (a, cm, r) =
                (l["available"].as_i64().unwrap(), l["committed"].as_i64().unwrap(), l["reserved"].as_i64().unwrap());
            assert!(a >= 0 && cm >= 0 && r >= 0);
            assert_eq!(l["onHand"].as_i64().unwrap(), a + cm + r);
            let at = l["locationId"].as_str().unwrap().to_string();
            assert_eq!(cm, committed.get(&(v.clone(), at.clone())).copied().unwrap_or(0), "committed units of {v} at {at}");
            if sellable_at.contains(&at) {
                sellable += a;
            }
        }
        let products = c.get(&shop.path("/products?limit=250"), t).await.expect(200).body;
        let variant = products["data"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|p| p["variants"].as_array().unwrap().iter())
            .find(|x| x["id"] == v.as_str())
            .unwrap()
            .clone();
        assert_eq!(variant["inventoryQuantity"].as_i64().unwrap(), sellable, "the sellable sum of {v}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_9_during_completions_fulfills_and_adjustments_leaves_stock_whole() {
    use crate::checkout::{paid_intent, ready_checkout, stocked, us_shipping};
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_string_lossy().into_owned();
    let port = free_port();
    let mut server = start_proc(&["serve", "--data", &data], port).await;
    let c = HttpClient::new(&server.url);
    let owner = create_user(&c).await;
    let store = create_store(&c, &owner).await;
    let shop = crate::calculate::Shop { owner, store };
    let t = Some(shop.owner.token.as_str());
    let rate = us_shipping(&c, &shop).await;
    let variants = vec![stocked(&c, &shop, "Cup", 900, 30).await, stocked(&c, &shop, "Jar", 700, 30).await];
    let home = c.get(&shop.path("/locations"), t).await.expect(200).body["data"][0]["id"].as_str().unwrap().to_string();
    let shed = c.post(&shop.path("/locations"), t, json!({"name": "Shed", "priority": 1})).await.expect(201).body;
    let shed = shed["id"].as_str().unwrap().to_string();
    for v in &variants {
        let body = json!({"variantId": v, "locationId": shed, "delta": 40, "reason": "received"});
        c.post(&shop.path("/inventory-levels/adjust"), t, body).await.expect(200);
    }
    // Orders of 3 and 2 units: the home location runs out and later ones split or move on. The
    // first eight are placed now, to be shipped while the others are placed.
    let mut placed = Vec::new();
    for _ in 0..8 {
        let lines = json!([{"variantId": variants[0], "quantity": 3}, {"variantId": variants[1], "quantity": 2}]);
        let co = ready_checkout(&c, &shop, lines, &rate).await;
        let intent = paid_intent(&c, &shop, &co).await;
        let body = json!({"paymentMethodId": "pm_card_visa", "paymentIntentId": intent});
        let order =
            c.post(&shop.path(&format!("/checkouts/{}/complete", co["id"].as_str().unwrap())), t, body).await.expect(201).body;
        let order = order["id"].as_str().unwrap().to_string();
        let fos = c.get(&shop.path(&format!("/orders/{order}/fulfillment-orders")), t).await.expect(200).body;
        for fo in fos["data"].as_array().unwrap() {
            placed.push((order.clone(), fo["id"].as_str().unwrap().to_string()));
        }
    }
    let mut ready = Vec::new();
    for _ in 0..24 {
        let lines = json!([{"variantId": variants[0], "quantity": 3}, {"variantId": variants[1], "quantity": 2}]);
        let co = ready_checkout(&c, &shop, lines, &rate).await;
        let intent = paid_intent(&c, &shop, &co).await;
        ready.push((co["id"].as_str().unwrap().to_string(), intent));
    }

    let acked = Arc::new(Mutex::new((HashSet::new(), 0usize)));
    let shipped = Arc::new(Mutex::new(Vec::new()));
    let mut writers = Vec::new();
    for chunk in placed.chunks(4) {
        let (c, shop_path, token, shipped, chunk) =
            (c.clone(), shop.path(""), shop.owner.token.clone(), shipped.clone(), chunk.to_vec());
        writers.push(tokio::spawn(async move {
            for (order, fo) in chunk {
                let body = json!({"tracking": {"number": "1Z999", "company": "UPS"}}).to_string();
                let path = format!("{shop_path}/orders/{order}/fulfillment-orders/{fo}/fulfill");
                let req = c.try_send(hyper::Method::POST, &path, Some(&token), &[], Some(body.into()));
                let Ok(Some(a)) = tokio::time::timeout(Duration::from_secs(2), req).await else { break };
                if a.status.as_u16() == 201 {
                    shipped.lock().unwrap().push((order, a.body["fulfillment"]["id"].as_str().unwrap().to_string()));
                }
            }
        }));
    }
    for chunk in ready.chunks(6) {
        let (c, shop_path, token, acked, chunk) =
            (c.clone(), shop.path(""), shop.owner.token.clone(), acked.clone(), chunk.to_vec());
        writers.push(tokio::spawn(async move {
            for (co, intent) in chunk {
                let body = json!({"paymentMethodId": "pm_card_visa", "paymentIntentId": intent}).to_string();
                let path = format!("{shop_path}/checkouts/{co}/complete");
                let req = c.try_send(hyper::Method::POST, &path, Some(&token), &[], Some(body.into()));
                let Ok(Some(a)) = tokio::time::timeout(Duration::from_secs(2), req).await else { break };
                if a.status.as_u16() == 201 {
                    acked.lock().unwrap().0.insert(a.body["id"].as_str().unwrap().to_string());
                }
            }
        }));
    }
    for v in variants.clone() {
        let (c, shop_path, token, acked, shed) =
            (c.clone(), shop.path(""), shop.owner.token.clone(), acked.clone(), shed.clone());
        writers.push(tokio::spawn(async move {
            for _ in 0..200 {
                let body = json!({"variantId": v, "locationId": shed, "delta": 1, "reason": "received"}).to_string();
                let path = format!("{shop_path}/inventory-levels/adjust");
                let req = c.try_send(hyper::Method::POST, &path, Some(&token), &[], Some(body.into()));
                let Ok(Some(a)) = tokio::time::timeout(Duration::from_secs(2), req).await else { break };
                if a.status.as_u16() != 200 {
                    break;
                }
                acked.lock().unwrap().1 += 1;
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    server.child.kill().unwrap(); // SIGKILL
    server.child.wait().unwrap();
    for w in writers {
        w.await.unwrap();
    }
    let (orders, adjusted) = acked.lock().unwrap().clone();
    assert!(
        !orders.is_empty() && adjusted > 0,
        "writes were acknowledged before the kill ({} orders, {adjusted} adjustments)",
        orders.len()
    );

    let server = start_proc(&["serve", "--data", &data], port).await;
    let c = HttpClient::new(&server.url);
    let listed = c.get(&shop.path("/orders?limit=250"), t).await.expect(200).body;
    let seen: HashSet<String> =
        listed["data"].as_array().unwrap().iter().map(|o| o["id"].as_str().unwrap().to_string()).collect();
    assert!(orders.is_subset(&seen), "acknowledged orders lost: {:?}", orders.difference(&seen).collect::<Vec<_>>());
    let history = c.get(&shop.path(&format!("/inventory-history?reason=received&locationId={shed}")), t).await.expect(200).body;
    assert!(history["total"].as_u64().unwrap() as usize >= adjusted + 2, "acknowledged adjustments are in the history");
    // Every acknowledged fulfillment is there, and the order's lines count its units shipped.
    let shipped = shipped.lock().unwrap().clone();
    assert!(!shipped.is_empty(), "fulfills were acknowledged before the kill");
    for (order, fulfillment) in &shipped {
        let listed = c.get(&shop.path(&format!("/orders/{order}/fulfillments")), t).await.expect(200).body;
        let ids: Vec<&str> = listed["data"].as_array().unwrap().iter().map(|f| f["id"].as_str().unwrap()).collect();
        assert!(ids.contains(&fulfillment.as_str()), "acknowledged fulfillment {fulfillment} lost");
        let units: i64 = listed["data"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|f| f["lineItems"].as_array().unwrap().iter())
            .map(|l| l["quantity"].as_i64().unwrap())
            .sum();
        let o = c.get(&shop.path(&format!("/orders/{order}")), t).await.expect(200).body;
        let fulfilled: i64 = o["lineItems"].as_array().unwrap().iter().map(|l| l["fulfilledQuantity"].as_i64().unwrap()).sum();
        assert_eq!(fulfilled, units, "the order counts what its fulfillments shipped");
    }
    stock_holds_together(&c, &shop, &variants, &[home, shed]).await;
}
