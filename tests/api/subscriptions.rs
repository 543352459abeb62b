//! Platform plans: the catalogue, subscribing, cancelling at period end, and the store limit.

use serde_json::{Value, json};
use shopcell::account::plans::{PERIOD_MS, Subscription};
use shopcell::domain::time::parse_rfc3339;
use shopcell::storage::codec::encode;
use shopcell::storage::tables::SUBSCRIPTIONS;

use crate::support::*;

async fn subscription(c: &HttpClient, u: &User) -> Value {
    c.get("/api/v1/subscriptions", Some(&u.token)).await.expect(200).body
}

fn period(sub: &Value) -> (i64, i64) {
    let at = |f: &str| parse_rfc3339(sub[f].as_str().unwrap_or_else(|| panic!("{f} in {sub}"))).unwrap();
    (at("currentPeriodStart"), at("currentPeriodEnd"))
}

async fn try_store(c: &HttpClient, u: &User) -> Answer {
    c.post("/api/v1/stores", Some(&u.token), json!({"name": "Shop", "currency": "USD", "country": "US", "timezone": "UTC"})).await
}

#[tokio::test]
async fn plans_are_public_and_everyone_starts_on_free() {
    let app = spawn_app().await;
    let c = &app.client;
    let plans = c.get("/api/v1/subscriptions/plans", None).await.expect(200).body;
    let ids: Vec<&str> = plans.as_array().unwrap().iter().map(|p| p["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["free", "basic", "pro"]);
    assert_eq!(
        plans[1],
        json!({
            "id": "basic", "name": "Basic", "storeLimit": 3,
            "price": {"amount": 2900, "currency": "USD", "formatted": "29.00 USD"},
            "interval": "month", "periodDays": 30
        })
    );
    assert_eq!(plans[0]["price"]["amount"], 0);

    let u = create_user(c).await;
    let sub = subscription(c, &u).await;
    assert_eq!(
        (sub["planId"].as_str(), sub["storeLimit"].as_u64(), sub["storesOwned"].as_u64()),
        (Some("free"), Some(1), Some(0))
    );
    assert_eq!((&sub["currentPeriodEnd"], &sub["cancelAtPeriodEnd"]), (&Value::Null, &json!(false)));
    assert_eq!(c.get("/api/v1/subscriptions", None).await.expect(401).code(), "UNAUTHORIZED");
    let bad = c.post("/api/v1/subscriptions", Some(&u.token), json!({"planId": "gold"})).await.expect(400);
    assert_eq!(bad.body["error"]["fields"][0]["field"], "planId");
    c.post("/api/v1/subscriptions", Some(&u.token), json!({})).await.expect(400);
    assert_eq!(subscription(c, &u).await["planId"], "free");
}

#[tokio::test]
async fn store_creation_respects_the_plan_limit() {
    let app = spawn_app().await;
    let c = &app.client;
    let u = create_user(c).await;
    let friend = create_user(c).await;
    let first = create_store(c, &u).await;
    let refused = try_store(c, &u).await.expect(422);
    assert_eq!(refused.code(), "BUSINESS_RULE");
    let msg = refused.body["error"]["message"].as_str().unwrap();
    assert!(msg.contains("Free plan allows 1 store") && msg.contains("you own 1"), "{msg}");
    assert_eq!(c.get("/api/v1/stores", Some(&u.token)).await.body.as_array().unwrap().len(), 1, "nothing was created");
    let node = &app.server.as_ref().unwrap().node;
    assert_eq!(node.cells.values().map(|c| c.store_count()).sum::<usize>(), 1, "not even in the cell");

    let before = app.clock.now_ms();
    let sub = c.post("/api/v1/subscriptions", Some(&u.token), json!({"planId": "basic"})).await.expect(200).body;
    assert_eq!((sub["planId"].as_str(), sub["storeLimit"].as_u64()), (Some("basic"), Some(3)));
    let (start, end) = period(&sub);
    assert!(start >= before - 1000 && start <= app.clock.now_ms());
    assert_eq!(end - start, PERIOD_MS);
    assert_eq!(subscription(c, &u).await, sub, "read back as written");
    create_store(c, &u).await;
    create_store(c, &u).await;
    try_store(c, &u).await.expect(422);
    assert_eq!(subscription(c, &u).await["storesOwned"], 3);

    // Down to a plan below what one owns: refused, nothing changes.
    let down = c.post("/api/v1/subscriptions", Some(&u.token), json!({"planId": "free"})).await.expect(422);
    assert!(down.body["error"]["message"].as_str().unwrap().contains("you own 3 stores"));
    assert_eq!(subscription(c, &u).await["planId"], "basic");

    // Stores one is only a member of do not count; a store given away stops counting.
    let theirs = create_store(c, &friend).await;
    c.post(&format!("/api/v1/stores/{theirs}/members"), Some(&friend.token), json!({"email": u.email, "role": "admin"}))
        .await
        .expect(201);
    assert_eq!(subscription(c, &u).await["storesOwned"], 3);
    c.post(&format!("/api/v1/stores/{first}/members"), Some(&u.token), json!({"email": friend.email, "role": "admin"}))
        .await
        .expect(201);
    // The friend's free plan has no room for a second store, given or created.
    let transfer = format!("/api/v1/stores/{first}/members/{}/transfer-ownership", friend.id);
    let full = c.post(&transfer, Some(&u.token), json!({})).await.expect(422);
    assert!(full.body["error"]["message"].as_str().unwrap().contains("Free plan allows 1 store"));
    assert_eq!(c.get(&format!("/api/v1/stores/{first}"), Some(&u.token)).await.expect(200).body["ownerId"], u.id.as_str());
    c.post("/api/v1/subscriptions", Some(&friend.token), json!({"planId": "basic"})).await.expect(200);
    c.post(&transfer, Some(&u.token), json!({})).await.expect(200);
    assert_eq!(subscription(c, &u).await["storesOwned"], 2);
    assert_eq!(subscription(c, &friend).await["storesOwned"], 2);
    create_store(c, &u).await;

    // Concurrent creations cannot overshoot the limit.
    let v = create_user(c).await;
    let tries: Vec<_> = (0..6)
        .map(|_| {
            let (c, token) = (c.clone(), v.token.clone());
            tokio::spawn(async move {
                let body = json!({"name": "Race", "currency": "USD", "country": "US", "timezone": "UTC"});
                c.post("/api/v1/stores", Some(&token), body).await.status.as_u16()
            })
        })
        .collect();
    let mut statuses = Vec::new();
    for t in tries {
        statuses.push(t.await.unwrap());
    }
    assert_eq!(statuses.iter().filter(|s| **s == 201).count(), 1, "{statuses:?}");
    assert!(statuses.iter().all(|s| *s == 201 || *s == 422), "{statuses:?}");
    assert_eq!(subscription(c, &v).await["storesOwned"], 1);
}

#[tokio::test]
async fn cancelling_keeps_the_plan_until_the_period_ends() {
    let app = spawn_app().await;
    let c = &app.client;
    let u = create_user(c).await;
    let nothing = c.post("/api/v1/subscriptions/cancel", Some(&u.token), json!({})).await.expect(409);
    assert_eq!(nothing.code(), "CONFLICT");

    let sub = c.post("/api/v1/subscriptions", Some(&u.token), json!({"planId": "pro"})).await.expect(200).body;
    let cancelled = c.send(hyper::Method::POST, "/api/v1/subscriptions/cancel", Some(&u.token), &[], None).await.expect(200).body;
    assert_eq!((cancelled["planId"].as_str(), cancelled["cancelAtPeriodEnd"].as_bool()), (Some("pro"), Some(true)));
    assert_eq!(period(&cancelled), period(&sub), "the plan runs to the end of the paid period");
    let again = c.post("/api/v1/subscriptions/cancel", Some(&u.token), json!({})).await.expect(200).body;
    assert_eq!(again, cancelled);
    assert_eq!(subscription(c, &u).await, cancelled);
    create_store(c, &u).await;
    create_store(c, &u).await;

    // Subscribing again resumes, with a new period.
    let resumed = c.post("/api/v1/subscriptions", Some(&u.token), json!({"planId": "basic"})).await.expect(200).body;
    assert_eq!((resumed["planId"].as_str(), resumed["cancelAtPeriodEnd"].as_bool()), (Some("basic"), Some(false)));

    // Time passes (the stored period is moved back): an uncancelled plan renews...
    let node = &app.server.as_ref().unwrap().node;
    let account = node.account.as_ref().unwrap();
    let user = uuid::Uuid::parse_str(&u.id).unwrap();
    let backdate = |cancel: bool| {
        let start = app.clock.now_ms() - PERIOD_MS - 60_000;
        let s = Subscription {
            plan_id: "basic".into(),
            started_at: start,
            period_start: start,
            cancel_at_period_end: cancel,
            canceled_at: cancel.then_some(start),
            updated_at: start,
        };
        let txn = account.db.begin_write().unwrap();
        txn.open_table(SUBSCRIPTIONS).unwrap().insert(user.as_u128(), encode(&s).unwrap().as_slice()).unwrap();
        txn.commit().unwrap();
        start
    };
    let start = backdate(false);
    let renewed = subscription(c, &u).await;
    assert_eq!(renewed["planId"], "basic");
    assert_eq!(period(&renewed), (start + PERIOD_MS, start + 2 * PERIOD_MS));
    // ...a cancelled one falls back to the free plan once its period is over.
    backdate(true);
    let fallen = subscription(c, &u).await;
    assert_eq!((fallen["planId"].as_str(), fallen["currentPeriodEnd"].as_str()), (Some("free"), None));
    assert_eq!(fallen["storesOwned"], 2);
    assert!(try_store(c, &u).await.expect(422).body["error"]["message"].as_str().unwrap().contains("Free plan"));
}

#[tokio::test]
async fn the_catalogue_comes_from_a_plans_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("plans.json");
    let catalogue = json!({
        "defaultPlan": "starter",
        "plans": [
            {"id": "starter", "name": "Starter", "storeLimit": 2, "price": {"amount": 0, "currency": "EUR"}},
            {"id": "unlimited", "name": "Unlimited", "storeLimit": null, "price": {"amount": 4900, "currency": "EUR"}}
        ]
    });
    std::fs::write(&file, catalogue.to_string()).unwrap();
    let data = dir.path().join("data");
    let port = free_port();
    let proc = start_proc(&["serve", "--data", data.to_str().unwrap(), "--plans", file.to_str().unwrap()], port).await;
    let c = HttpClient::new(&proc.url);
    let plans = c.get("/api/v1/subscriptions/plans", None).await.expect(200).body;
    assert_eq!(plans[1]["storeLimit"], Value::Null);
    assert_eq!(plans[1]["price"], json!({"amount": 4900, "currency": "EUR", "formatted": "49.00 EUR"}));
    let u = create_user(&c).await;
    assert_eq!(subscription(&c, &u).await["planId"], "starter");
    create_store(&c, &u).await;
    create_store(&c, &u).await;
    try_store(&c, &u).await.expect(422);
    c.post("/api/v1/subscriptions", Some(&u.token), json!({"planId": "unlimited"})).await.expect(200);
    create_store(&c, &u).await;
    assert_eq!(subscription(&c, &u).await["storeLimit"], Value::Null);

    // A broken catalogue stops the process at start with a clear message.
    std::fs::write(&file, r#"{"defaultPlan": "none", "plans": []}"#).unwrap();
    let other = dir.path().join("other");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_shopcell"))
        .args(["serve", "--data", other.to_str().unwrap(), "--listen", "127.0.0.1:0", "--plans", file.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("plans file"), "{}", String::from_utf8_lossy(&out.stderr));
}
