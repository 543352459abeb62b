//! Closing a store (`DELETE S`): gone at once for everyone, the owner's plan has a place free, a
//! store being moved is refused; reopened by an operator within the grace period as it was,
//! removed for good after it.

use std::time::Duration;

use hyper::Method;
use serde_json::{Value, json};
use shopcell::admin;
use shopcell::cli::{AdminCommand, ServiceCall};

use crate::support::*;

struct Closed {
    owner: User,
    admin: User,
    store: String,
    product: String,
    key: String,
}

/// A store with an admin, a product and a publishable key.
async fn a_store(c: &HttpClient) -> Closed {
    let (owner, admin) = (create_user(c).await, create_user(c).await);
    let store = create_store(c, &owner).await;
    let members = format!("/api/v1/stores/{store}/members");
    c.post(&members, Some(&owner.token), json!({"email": admin.email, "role": "admin"})).await.expect(201);
    let product = create_product(c, &owner, &store, "Mug", 1200).await["id"].as_str().unwrap().to_string();
    let keys = format!("/api/v1/stores/{store}/publishable-keys");
    let key = c.post(&keys, Some(&owner.token), json!({"environment": "live"})).await.expect(201).body["key"]
        .as_str()
        .unwrap()
        .to_string();
    Closed { owner, admin, store, product, key }
}

async fn as_shopper(c: &HttpClient, path: &str, key: &str) -> Answer {
    c.send(Method::GET, path, None, &[("x-publishable-key", key)], None).await
}

fn store_ids(list: &Value) -> Vec<&str> {
    list.as_array().unwrap().iter().map(|s| s["id"].as_str().unwrap()).collect()
}

#[tokio::test]
async fn a_closed_store_is_gone_for_everyone_at_once_and_reopens_as_it_was() {
    let app = spawn_app().await;
    let c = &app.client;
    let s = a_store(c).await;
    let one = format!("/api/v1/stores/{}", s.store);
    let product = format!("{one}/products/{}", s.product);
    as_shopper(c, &product, &s.key).await.expect(200);
    // Only the owner closes: an admin is refused, a stranger does not see the store.
    assert_eq!(c.delete(&one, Some(&s.admin.token)).await.expect(403).code(), "FORBIDDEN");
    let stranger = create_user(c).await;
    c.delete(&one, Some(&stranger.token)).await.expect(404);
    c.get(&product, Some(&s.owner.token)).await.expect(200);
    // The free plan's one store is taken.
    let another = json!({"name": "Second", "currency": "USD", "country": "US"});
    let full = c.post("/api/v1/stores", Some(&s.owner.token), another.clone()).await.expect(422);
    assert!(full.body["message"].as_str().unwrap().contains("close a store"), "{}", full.body);

    let closed = c.delete(&one, Some(&s.owner.token)).await.expect(204);
    assert!(closed.raw.is_empty());
    for token in [&s.owner.token, &s.admin.token] {
        assert_eq!(c.get(&one, Some(token)).await.expect(404).code(), "NOT_FOUND");
        c.get(&product, Some(token)).await.expect(404);
        assert!(!store_ids(&c.get("/api/v1/stores", Some(token)).await.expect(200).body).contains(&s.store.as_str()));
    }
    assert_eq!(as_shopper(c, &product, &s.key).await.expect(401).code(), "INVALID_PUBLISHABLE_KEY");
    let validated = c.post("/api/v1/auth/publishable-keys/validate", None, json!({"key": s.key})).await.expect(200);
    assert_eq!(validated.body["valid"], false);
    c.delete(&one, Some(&s.owner.token)).await.expect(404);
    // The place it took on the plan is free.
    let second = c.post("/api/v1/stores", Some(&s.owner.token), another).await.expect(201).body;

    // An operator reopens it within the grace period: members, data and key as they were.
    let reopen = AdminCommand::ReopenStore {
        service: ServiceCall { url: app.base.clone(), service_key_file: None, data: app.dir.path().to_path_buf() },
        store: s.store.parse().unwrap(),
    };
    admin::run(reopen).await.expect("reopened");
    assert_eq!(c.get(&product, Some(&s.owner.token)).await.expect(200).body["title"], "Mug");
    c.get(&product, Some(&s.admin.token)).await.expect(200);
    as_shopper(c, &product, &s.key).await.expect(200);
    let mine = c.get("/api/v1/stores", Some(&s.owner.token)).await.expect(200).body;
    assert_eq!(store_ids(&mine).len(), 2, "{mine}");
    assert!(store_ids(&mine).contains(&second["id"].as_str().unwrap()));
    // Reopening an open store is refused.
    let again = AdminCommand::ReopenStore {
        service: ServiceCall { url: app.base.clone(), service_key_file: None, data: app.dir.path().to_path_buf() },
        store: s.store.parse().unwrap(),
    };
    assert!(admin::run(again).await.is_err());
}

#[tokio::test]
async fn a_store_being_moved_is_not_closed() {
    let app = spawn_app().await;
    let c = &app.client;
    let s = a_store(c).await;
    let store: uuid::Uuid = s.store.parse().unwrap();
    app.cell().writer.gate.set_tracked(store, true);
    let a = c.delete(&format!("/api/v1/stores/{store}"), Some(&s.owner.token)).await.expect(409);
    assert!(a.body["message"].as_str().unwrap().contains("being moved"), "{}", a.body);
    app.cell().writer.gate.set_tracked(store, false);
    c.get(&format!("/api/v1/stores/{store}"), Some(&s.owner.token)).await.expect(200);
}

#[tokio::test]
async fn after_the_grace_period_a_closed_store_is_removed_for_good() {
    let app = spawn_app().await;
    let c = &app.client;
    let s = a_store(c).await;
    let store: uuid::Uuid = s.store.parse().unwrap();
    c.delete(&format!("/api/v1/stores/{store}"), Some(&s.owner.token)).await.expect(204);
    let node = app.server.as_ref().unwrap().node.clone();
    let cell = app.cell();
    // Within the grace period (30 days by default) nothing goes.
    app.clock.advance(Duration::from_secs(29 * 24 * 3600));
    assert!(shopcell::node::closing::sweep(&node, app.clock.now_ms()).await.unwrap().is_empty());
    assert!(shopcell::cells::stores::store_settings(&cell, store).is_ok(), "the rows are kept");
    // After it, the cell's rows and the directory's record and keys are removed.
    app.clock.advance(Duration::from_secs(2 * 24 * 3600));
    assert_eq!(shopcell::node::closing::sweep(&node, app.clock.now_ms()).await.unwrap(), [store]);
    assert!(shopcell::cells::stores::store_settings(&cell, store).is_err());
    assert!(shopcell::cells::products::product(&cell, store, s.product.parse().unwrap()).is_err());
    assert_eq!(cell.state_of(store), None);
    let account = node.account.as_ref().unwrap();
    assert!(account.closed_store(store).unwrap().is_none());
    assert!(account.publishable_keys(store).is_err());
    let validated = c.post("/api/v1/auth/publishable-keys/validate", None, json!({"key": s.key})).await.expect(200);
    assert_eq!(validated.body["valid"], false);
    // Nothing is left to reopen, and a second sweep finds nothing.
    let reopen = AdminCommand::ReopenStore {
        service: ServiceCall { url: app.base.clone(), service_key_file: None, data: app.dir.path().to_path_buf() },
        store,
    };
    assert!(admin::run(reopen).await.is_err());
    assert!(shopcell::node::closing::sweep(&node, app.clock.now_ms()).await.unwrap().is_empty());
}

/// Split over processes: the router passes the close to the cell, which closes its side and
/// asks the account service over HTTP to close the directory's; the operator reopens through
/// the account service, which tells the cell.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_and_reopening_work_across_processes() {
    let routed = Routed::start().await;
    let c = HttpClient::new(&routed.router.url);
    let s = a_store(&c).await;
    let one = format!("/api/v1/stores/{}", s.store);
    let product = format!("{one}/products/{}", s.product);
    c.delete(&one, Some(&s.admin.token)).await.expect(403);
    c.delete(&one, Some(&s.owner.token)).await.expect(204);
    c.get(&product, Some(&s.owner.token)).await.expect(404);
    HttpClient::new(&routed.cell.url).get(&product, Some(&s.owner.token)).await.expect(404);
    // The router finds the store nowhere before any key is looked at.
    as_shopper(&c, &product, &s.key).await.expect(404);
    assert!(c.get("/api/v1/stores", Some(&s.owner.token)).await.expect(200).body.as_array().unwrap().is_empty());

    let reopen = AdminCommand::ReopenStore {
        service: ServiceCall {
            url: routed.account.url.clone(),
            service_key_file: Some(routed.service_key.clone()),
            data: std::path::PathBuf::from("unused"),
        },
        store: s.store.parse().unwrap(),
    };
    admin::run(reopen).await.expect("reopened");
    assert_eq!(c.get(&product, Some(&s.owner.token)).await.expect(200).body["title"], "Mug");
    as_shopper(&c, &product, &s.key).await.expect(200);
}

#[tokio::test]
async fn a_closed_store_s_scheduled_work_stops() {
    let app = spawn_app_allowing(&["127.0.0.1"]).await;
    let c = &app.client;
    let s = a_store(c).await;
    let t = Some(s.owner.token.as_str());
    let one = format!("/api/v1/stores/{}", s.store);
    // A delivery failing (its retry due in 5 s) and a checkout that would be abandoned in an hour.
    let rx = crate::receiver::Receiver::start().await;
    rx.answer(500);
    c.post(&format!("{one}/webhooks"), t, json!({"topics": ["*"], "url": rx.url()})).await.expect(201);
    let variant = c.get(&format!("{one}/products/{}", s.product), t).await.expect(200).body["variants"][0]["id"].clone();
    c.post(
        &format!("{one}/checkouts"),
        t,
        json!({"lineItems": [{"variantId": variant, "quantity": 1}], "email": "a@example.com"}),
    )
    .await
    .expect(201);
    let collection = c.post(&format!("{one}/collections"), t, json!({"title": "Launch"})).await.expect(201).body;
    let cid = collection["id"].as_str().unwrap().to_string();
    let at = shopcell::domain::time::rfc3339(app.clock.now_ms() + 3_600_000);
    c.post(&format!("{one}/collections/{cid}/schedule"), t, json!({"publishAt": at})).await.expect(200);
    rx.wait_for(1).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = rx.received().len();

    c.delete(&one, t).await.expect(204);
    rx.answer(200);
    app.clock.advance(Duration::from_secs(2 * 3600));
    app.cell().jobs.wake();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(rx.received().len(), before, "no retry leaves for a closed store");
    let q = shopcell::storage::list::ListQuery { sort: "created_at", limit: 50, ..Default::default() };
    let events = app.cell().list::<shopcell::cells::events::Event>(s.store.parse().unwrap(), &q).await.unwrap();
    assert!(events.items.iter().all(|e| e.topic != "checkout.abandoned"), "nothing is reported for a closed store");
    let kept: shopcell::domain::collection::Collection = app.cell().get(s.store.parse().unwrap(), cid.parse().unwrap()).unwrap();
    assert_eq!(
        kept.status,
        shopcell::domain::collection::CollectionStatus::Scheduled,
        "its scheduled collection is not published"
    );
}
