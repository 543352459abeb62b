//! The account service, two cells and a router as separate processes on loopback.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;

use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn router_forwards_hides_wrong_cells_and_moves_stores_without_losing_writes() {
    let dir = tempfile::tempdir().unwrap();
    let data = |name: &str| dir.path().join(name).to_string_lossy().into_owned();
    let (pa, p1, p2, pr) = (free_port(), free_port(), free_port(), free_port());
    let (ua, u1, u2) = (format!("http://127.0.0.1:{pa}"), format!("http://127.0.0.1:{p1}"), format!("http://127.0.0.1:{p2}"));
    let c1 = format!("c1={u1}");
    let c2 = format!("c2={u2}");
    let account_data = data("account");
    let _account = start_proc(&["account", "--data", &account_data, "--cell", &c1, "--cell", &c2], pa).await;
    let key = format!("{account_data}/account/service.key");
    let d1 = data("cell1");
    let d2 = data("cell2");
    let _cell1 = start_proc(&["cell", "--name", "c1", "--data", &d1, "--account", &ua, "--service-key-file", &key], p1).await;
    let _cell2 = start_proc(&["cell", "--name", "c2", "--data", &d2, "--account", &ua, "--service-key-file", &key], p2).await;
    let router = start_proc(&["router", "--account", &ua, "--cell", &c1, "--cell", &c2, "--service-key-file", &key], pr).await;

    let c = HttpClient::new(&router.url);
    let u = create_user(&c).await;
    let s1 = create_store(&c, &u).await;
    let s2 = create_store(&c, &u).await;
    create_product(&c, &u, &s1, "In one", 100).await;
    create_product(&c, &u, &s2, "In two", 200).await;
    let list = c.get(&format!("/api/v1/stores/{s1}/products"), Some(&u.token)).await.expect(200).body;
    assert_eq!(list["data"][0]["title"], "In one");
    assert_eq!(c.get("/api/v1/auth/me", Some(&u.token)).await.expect(200).body["id"], u.id.as_str());

    // Straight to the wrong cell: the same 404 as a store that does not exist anywhere.
    let direct1 = HttpClient::new(&u1);
    let direct2 = HttpClient::new(&u2);
    let (holder, other) = if direct1.get(&format!("/api/v1/stores/{s1}"), Some(&u.token)).await.status == 200 {
        (&direct1, &direct2)
    } else {
        (&direct2, &direct1)
    };
    let wrong = other.get(&format!("/api/v1/stores/{s1}/products"), Some(&u.token)).await.expect(404);
    let missing = holder.get("/api/v1/stores/00000000-0000-7000-8000-000000000000/products", Some(&u.token)).await.expect(404);
    assert_eq!(wrong.body, missing.body);
    assert!(wrong.headers.get("x-shopcell-misrouted").is_none());
    // A cell validates the token itself.
    holder.get(&format!("/api/v1/stores/{s1}/products"), Some("not.a.token")).await.expect(401);

    // Stock at two locations, to move with the store.
    let tok = Some(u.token.as_str());
    let shed = c.post(&format!("/api/v1/stores/{s1}/locations"), tok, json!({"name": "Shed"})).await.expect(201).body;
    let body = json!({"title": "Stocked", "price": {"amount": 100, "currency": "USD"}, "variants": [
        {"title": "One", "price": {"amount": 100, "currency": "USD"}, "inventoryTracked": true, "inventoryQuantity": 4}]});
    let stocked = c.post(&format!("/api/v1/stores/{s1}/products"), tok, body).await.expect(201).body;
    let variant = stocked["variants"][0]["id"].as_str().unwrap().to_string();
    let adjust = json!({"variantId": variant, "locationId": shed["id"], "delta": 3, "reason": "received"});
    c.post(&format!("/api/v1/stores/{s1}/inventory-levels/adjust"), tok, adjust).await.expect(200);

    // Move s1 to the other cell while writers keep creating products in it.
    let target = if std::ptr::eq(holder, &direct1) { "c2" } else { "c1" };
    let acked = Arc::new(Mutex::new(HashSet::new()));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut writers = Vec::new();
    for w in 0..4 {
        let (c, token, s, acked, stop) = (c.clone(), u.token.clone(), s1.clone(), acked.clone(), stop.clone());
        writers.push(tokio::spawn(async move {
            let mut n = 0;
            let mut refused = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let body = json!({"title": format!("w{w}-{n}"), "price": {"amount": n, "currency": "USD"}});
                let a = c.post(&format!("/api/v1/stores/{s}/products"), Some(&token), body).await;
                match a.status.as_u16() {
                    201 => {
                        acked.lock().unwrap().insert(a.body["id"].as_str().unwrap().to_string());
                    }
                    503 => {
                        assert_eq!(a.code(), "STORE_MOVING");
                        assert!(a.headers.get("retry-after").is_some());
                        refused += 1;
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                    s => panic!("unexpected status {s}: {}", String::from_utf8_lossy(&a.raw)),
                }
                n += 1;
            }
            refused
        }));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_shopcell"))
        // Small chunks: the copy takes many reads, with writes landing between them.
        .args([
            "admin",
            "move-store",
            "--url",
            &ua,
            "--store",
            &s1,
            "--to",
            target,
            "--chunk-bytes",
            "4096",
            "--service-key-file",
            &key,
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "move failed: {}", String::from_utf8_lossy(&out.stderr));
    // Reads and writes keep working after the move.
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for w in writers {
        w.await.unwrap();
    }
    let acked = acked.lock().unwrap().clone();
    assert!(acked.len() > 20, "the writers made progress ({} writes)", acked.len());

    let mut seen = HashSet::new();
    let mut page = 1;
    loop {
        let l = c.get(&format!("/api/v1/stores/{s1}/products?limit=250&page={page}"), Some(&u.token)).await.expect(200).body;
        let data = l["data"].as_array().unwrap();
        seen.extend(data.iter().map(|p| p["id"].as_str().unwrap().to_string()));
        if data.len() < 250 {
            assert_eq!(l["total"].as_u64().unwrap() as usize, seen.len(), "the total matches the rows");
            break;
        }
        page += 1;
    }
    let lost: Vec<_> = acked.difference(&seen).collect();
    assert!(lost.is_empty(), "acknowledged writes lost in the move: {lost:?}");
    // Every product's event moved with the store, those written during the move included.
    let events = c.get(&format!("/api/v1/stores/{s1}/events?topic=product.created&limit=1"), Some(&u.token)).await.expect(200);
    assert_eq!(events.body["total"].as_u64().unwrap() as usize, seen.len(), "one product.created event per product");

    // Its locations, levels and their history moved with it.
    let levels =
        c.get(&format!("/api/v1/stores/{s1}/inventory-levels?variantId={variant}&sortOrder=asc"), tok).await.expect(200).body;
    let available: Vec<i64> = levels["data"].as_array().unwrap().iter().map(|l| l["available"].as_i64().unwrap()).collect();
    assert_eq!(available, [4, 3], "{levels}");
    let history = c.get(&format!("/api/v1/stores/{s1}/inventory-history?variantId={variant}"), tok).await.expect(200).body;
    assert_eq!(history["total"], 2);

    // The old cell no longer serves the store; the new one does; the other store was untouched.
    other.get(&format!("/api/v1/stores/{s1}"), Some(&u.token)).await.expect(200);
    holder.get(&format!("/api/v1/stores/{s1}"), Some(&u.token)).await.expect(404);
    let two = c.get(&format!("/api/v1/stores/{s2}/products"), Some(&u.token)).await.expect(200).body;
    assert_eq!(two["data"][0]["title"], "In two");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_checks_out_through_the_router_as_in_one_process() {
    let routed = Routed::start().await;

    let c = HttpClient::new(&routed.router.url);
    let owner = create_user(&c).await;
    let store = create_store(&c, &owner).await;
    let base = format!("/api/v1/stores/{store}");
    let t = Some(owner.token.as_str());
    let p = c
        .post(
            &format!("{base}/products"),
            t,
            json!({"title": "Mug", "status": "ACTIVE", "price": {"amount": 1800, "currency": "USD"},
            "variants": [{"title": "Default", "inventoryTracked": true, "inventoryQuantity": 3}]}),
        )
        .await
        .expect(201)
        .body;
    let variant = p["variants"][0]["id"].as_str().unwrap().to_string();
    let pk = c.post(&format!("{base}/publishable-keys"), t, json!({"environment": "live"})).await.expect(201).body;
    let pk = pk["key"].as_str().unwrap().to_string();
    let guest = |method: hyper::Method, path: String, body: serde_json::Value| {
        let (c, pk) = (c.clone(), pk.clone());
        async move { c.send(method, &path, None, &[("x-publishable-key", &pk)], Some(body.to_string().into())).await }
    };

    let cart = guest(hyper::Method::POST, format!("{base}/carts/items"), json!({"variantId": variant, "quantity": 2}))
        .await
        .expect(201)
        .body;
    let co = guest(hyper::Method::POST, format!("{base}/checkouts"), json!({"cartId": cart["id"], "email": "g@example.com"}))
        .await
        .expect(201)
        .body;
    let (id, token) = (co["id"].as_str().unwrap().to_string(), co["sessionToken"].as_str().unwrap().to_string());
    assert_eq!(co["paymentDue"]["amount"], 3600);
    let session = guest(
        hyper::Method::POST,
        format!("{base}/checkout/{id}/payment-session"),
        json!({"amount": 3600, "currency": "USD", "sessionToken": token}),
    )
    .await
    .expect(201)
    .body;
    let intent = session["paymentIntentId"].as_str().unwrap().to_string();
    let confirm = json!({"paymentMethod": "pm_card_visa", "clientSecret": session["clientSecret"]});
    guest(hyper::Method::POST, format!("{base}/payment-intents/{intent}/confirm"), confirm).await.expect(200);
    let complete = json!({"paymentMethodId": "pm_card_visa", "paymentIntentId": intent, "sessionToken": token});
    let order = guest(hyper::Method::POST, format!("{base}/checkouts/{id}/complete"), complete.clone()).await.expect(201).body;
    assert_eq!((order["number"].as_i64(), order["financialStatus"].as_str()), (Some(1001), Some("PAID")));
    assert_eq!(
        guest(hyper::Method::POST, format!("{base}/checkouts/{id}/complete"), complete).await.expect(409).code(),
        "CHECKOUT_COMPLETED"
    );
    let orders = c.get(&format!("{base}/orders"), t).await.expect(200).body;
    assert_eq!((orders["total"].as_i64(), orders["data"][0]["id"].clone()), (Some(1), order["id"].clone()));
    let product = c.get(&format!("{base}/products/{}", p["id"].as_str().unwrap()), t).await.expect(200).body;
    assert_eq!(product["variants"][0]["inventoryQuantity"], 1);
}
