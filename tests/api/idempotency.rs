//! `Idempotency-Key` on POST: replays, reuse with another body, per-caller scope, concurrent
//! duplicates, invalid keys, account-service routes and records that survive a restart.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::header::HeaderValue;
use hyper::{Method, Request};
use serde_json::{Value, json};

use crate::support::*;

const KEY: &str = "idempotency-key";

fn products(store: &str) -> String {
    format!("/api/v1/stores/{store}/products")
}

fn product(title: &str) -> Value {
    json!({"title": title, "price": {"amount": 1250, "currency": "USD"}, "status": "ACTIVE"})
}

async fn post_keyed(c: &HttpClient, path: &str, token: Option<&str>, key: &str, body: &Value) -> Answer {
    c.send(Method::POST, path, token, &[(KEY, key)], Some(Bytes::from(body.to_string()))).await
}

async fn total(c: &HttpClient, user: &User, store: &str) -> u64 {
    c.get(&products(store), Some(&user.token)).await.expect(200).body["total"].as_u64().expect("total")
}

fn replayed(a: &Answer) -> bool {
    a.headers.get("idempotent-replayed").is_some_and(|v| v == "true")
}

#[tokio::test]
async fn the_same_key_and_body_answers_the_first_response_again() {
    let app = spawn_app().await;
    let c = &app.client;
    let u = create_user(c).await;
    let s = create_store(c, &u).await;

    let first = post_keyed(c, &products(&s), Some(&u.token), "create-lamp-1", &product("Lamp")).await.expect(201);
    assert!(!replayed(&first));
    let again = post_keyed(c, &products(&s), Some(&u.token), "create-lamp-1", &product("Lamp")).await.expect(201);
    assert!(replayed(&again));
    assert_eq!(again.raw, first.raw, "the replay is the first body, byte for byte");
    assert_eq!(again.headers.get("content-type"), first.headers.get("content-type"));
    assert_eq!(again.body["title"], "Lamp");
    assert_eq!(total(c, &u, &s).await, 1);

    // The same key with another body is refused, and creates nothing.
    let other = post_keyed(c, &products(&s), Some(&u.token), "create-lamp-1", &product("Vase")).await.expect(422);
    assert_eq!(other.code(), "IDEMPOTENCY_KEY_REUSED");
    assert!(other.body["error"]["message"].as_str().unwrap().contains("Idempotency-Key"));
    assert_eq!(total(c, &u, &s).await, 1);

    // Another key is another operation; a request without a key is never a replay.
    let second = post_keyed(c, &products(&s), Some(&u.token), "create-lamp-2", &product("Lamp")).await.expect(201);
    assert_ne!(second.body["id"], first.body["id"]);
    let plain = c.post(&products(&s), Some(&u.token), product("Lamp")).await.expect(201);
    assert!(!replayed(&plain));
    assert_eq!(total(c, &u, &s).await, 3);

    // A GET with the header is untouched by it.
    let listed = c.send(Method::GET, &products(&s), Some(&u.token), &[(KEY, "create-lamp-1")], None).await.expect(200);
    assert_eq!(listed.body["total"], 3);
    assert!(!replayed(&listed));
}

#[tokio::test]
async fn keys_belong_to_their_caller() {
    let app = spawn_app().await;
    let c = &app.client;
    let owner = create_user(c).await;
    let staff = create_user(c).await;
    let s = create_store(c, &owner).await;
    c.post(&format!("/api/v1/stores/{s}/members"), Some(&owner.token), json!({"email": staff.email, "role": "staff"}))
        .await
        .expect(201);

    let mine = post_keyed(c, &products(&s), Some(&owner.token), "shared-key", &product("Lamp")).await.expect(201);
    let theirs = post_keyed(c, &products(&s), Some(&staff.token), "shared-key", &product("Lamp")).await.expect(201);
    assert!(!replayed(&theirs), "another member never sees the owner's answer");
    assert_ne!(theirs.body["id"], mine.body["id"]);
    assert_eq!(total(c, &owner, &s).await, 2);

    // Each caller's own retry still replays their own answer.
    let theirs_again = post_keyed(c, &products(&s), Some(&staff.token), "shared-key", &product("Lamp")).await.expect(201);
    assert_eq!(theirs_again.body["id"], theirs.body["id"]);
    assert_eq!(total(c, &owner, &s).await, 2);

    // The same key on another path is another operation.
    let disc = json!({"title": "Summer", "code": "SUMMER10", "valueType": "percentage", "value": 1000});
    let d = post_keyed(c, &format!("/api/v1/stores/{s}/discounts"), Some(&owner.token), "shared-key", &disc).await.expect(201);
    assert!(!replayed(&d));
}

#[tokio::test]
async fn concurrent_duplicates_run_once_and_all_answer_the_same() {
    let app = spawn_app().await;
    let c = &app.client;
    let u = create_user(c).await;
    let s = create_store(c, &u).await;

    let mut tasks = Vec::new();
    for _ in 0..8 {
        let (c, token, path) = (c.clone(), u.token.clone(), products(&s));
        tasks.push(tokio::spawn(async move { post_keyed(&c, &path, Some(&token), "burst", &product("Lamp")).await }));
    }
    let mut answers = Vec::new();
    for t in tasks {
        answers.push(t.await.expect("task").expect(201));
    }
    let id = answers[0].body["id"].clone();
    assert!(id.is_string());
    assert!(answers.iter().all(|a| a.body["id"] == id && a.raw == answers[0].raw));
    assert_eq!(answers.iter().filter(|a| !replayed(a)).count(), 1, "exactly one request ran the operation");
    assert_eq!(total(c, &u, &s).await, 1);
}

#[tokio::test]
async fn a_failed_request_is_not_recorded_so_a_corrected_retry_runs() {
    let app = spawn_app().await;
    let c = &app.client;
    let u = create_user(c).await;
    let s = create_store(c, &u).await;

    let bad = json!({"title": "", "price": {"amount": -5, "currency": "USD"}});
    let first = post_keyed(c, &products(&s), Some(&u.token), "fix-me", &bad).await.expect(400);
    assert_eq!(first.code(), "VALIDATION_FAILED");
    assert_eq!(total(c, &u, &s).await, 0);
    // Not recorded: the same bad request runs (and fails) again rather than replaying.
    let twice = post_keyed(c, &products(&s), Some(&u.token), "fix-me", &bad).await.expect(400);
    assert!(!replayed(&twice));

    // The corrected request under the same key runs, and from then on the key is taken.
    let fixed = post_keyed(c, &products(&s), Some(&u.token), "fix-me", &product("Lamp")).await.expect(201);
    assert!(!replayed(&fixed));
    let again = post_keyed(c, &products(&s), Some(&u.token), "fix-me", &product("Lamp")).await.expect(201);
    assert_eq!(again.body["id"], fixed.body["id"]);
    assert_eq!(post_keyed(c, &products(&s), Some(&u.token), "fix-me", &bad).await.expect(422).code(), "IDEMPOTENCY_KEY_REUSED");
    assert_eq!(total(c, &u, &s).await, 1);
}

/// Sends a POST whose key header carries raw bytes (a client may send any).
async fn post_raw_key(c: &HttpClient, path: &str, token: &str, key: &[u8], body: &Value) -> (u16, Value) {
    let req = Request::builder()
        .method(Method::POST)
        .uri(format!("{}{}", c.base, path))
        .header("authorization", format!("Bearer {token}"))
        .header("content-type", "application/json")
        .header(KEY, HeaderValue::from_bytes(key).expect("header bytes"))
        .body(Full::new(Bytes::from(body.to_string())))
        .expect("request");
    let res = c.inner.request(req).await.expect("the server answers");
    let status = res.status().as_u16();
    let raw = res.into_body().collect().await.expect("body").to_bytes();
    (status, serde_json::from_slice(&raw).unwrap_or(Value::Null))
}

#[tokio::test]
async fn invalid_keys_are_400_naming_the_header() {
    let app = spawn_app().await;
    let c = &app.client;
    let u = create_user(c).await;
    let s = create_store(c, &u).await;

    let long = "k".repeat(256);
    for key in [&b""[..], long.as_bytes(), "caf\u{e9}".as_bytes(), b"two words"] {
        let (status, body) = post_raw_key(c, &products(&s), &u.token, key, &product("Lamp")).await;
        assert_eq!(status, 400, "key {:?}: {body}", String::from_utf8_lossy(key));
        assert_eq!(body["error"]["code"], "VALIDATION_FAILED");
        assert_eq!(body["error"]["fields"][0]["field"], "Idempotency-Key");
    }
    assert_eq!(total(c, &u, &s).await, 0);
    // 255 visible characters are accepted.
    let longest = "k".repeat(255);
    let (status, _) = post_raw_key(c, &products(&s), &u.token, longest.as_bytes(), &product("Lamp")).await;
    assert_eq!(status, 201);
    assert_eq!(total(c, &u, &s).await, 1);
}

#[tokio::test]
async fn account_service_posts_are_idempotent_too() {
    let app = spawn_app().await;
    let c = &app.client;
    let u = create_user(c).await;

    let body = json!({"name": "Keyed Store", "currency": "USD", "country": "US", "timezone": "UTC"});
    let first = post_keyed(c, "/api/v1/stores", Some(&u.token), "new-store", &body).await.expect(201);
    let again = post_keyed(c, "/api/v1/stores", Some(&u.token), "new-store", &body).await.expect(201);
    assert!(replayed(&again));
    assert_eq!(again.body["id"], first.body["id"]);
    let stores = c.get("/api/v1/stores", Some(&u.token)).await.expect(200).body;
    assert_eq!(stores.as_array().map(Vec::len), Some(1), "{stores}");

    // A public route is scoped by the client: a retried registration answers the same account
    // and tokens instead of 409 EMAIL_TAKEN.
    let reg = json!({"email": format!("keyed-{}@example.com", uuid::Uuid::now_v7().simple()), "password": PASSWORD, "name": "K"});
    let r1 = post_keyed(c, "/api/v1/auth/register", None, "sign-up", &reg).await.expect(201);
    let r2 = post_keyed(c, "/api/v1/auth/register", None, "sign-up", &reg).await.expect(201);
    assert!(replayed(&r2));
    assert_eq!(r2.raw, r1.raw);
    // The replayed token works.
    c.get("/api/v1/stores", r2.body["accessToken"].as_str()).await.expect(200);
}

#[tokio::test]
async fn records_survive_a_restart() {
    let mut app = spawn_app().await;
    let u = create_user(&app.client).await;
    let s = create_store(&app.client, &u).await;
    let first = post_keyed(&app.client, &products(&s), Some(&u.token), "durable", &product("Lamp")).await.expect(201);
    let store_body = json!({"name": "Second", "currency": "USD", "country": "US", "timezone": "UTC"});
    subscribe(&app.client, &u, "pro").await;
    let store = post_keyed(&app.client, "/api/v1/stores", Some(&u.token), "durable", &store_body).await.expect(201);
    app.stop().await;

    let again = spawn_app_in(app.dir.path()).await;
    let c = &again.client;
    let replay = post_keyed(c, &products(&s), Some(&u.token), "durable", &product("Lamp")).await.expect(201);
    assert!(replayed(&replay));
    assert_eq!(replay.raw, first.raw);
    assert_eq!(total(c, &u, &s).await, 1);
    let store_again = post_keyed(c, "/api/v1/stores", Some(&u.token), "durable", &store_body).await.expect(201);
    assert_eq!(store_again.body["id"], store.body["id"]);
    assert_eq!(c.get("/api/v1/stores", Some(&u.token)).await.expect(200).body.as_array().map(Vec::len), Some(2));
}

#[tokio::test]
async fn records_move_with_their_store() {
    let app = spawn_app_with_cells(&["cell-1", "cell-2"]).await;
    let c = &app.client;
    let u = create_user(c).await;
    let s = create_store(c, &u).await;
    let first = post_keyed(c, &products(&s), Some(&u.token), "before-move", &product("Lamp")).await.expect(201);

    let node = app.server.as_ref().unwrap().node.clone();
    let account = node.account.clone().unwrap();
    let store = uuid::Uuid::parse_str(&s).unwrap();
    let from = account.locate(store).unwrap().unwrap();
    let to = if from == "cell-1" { "cell-2" } else { "cell-1" };
    let key = account.service_key.clone();
    let moved = c
        .send(
            Method::POST,
            "/internal/v1/moves",
            None,
            &[("x-shopcell-service", key.as_str())],
            Some(Bytes::from(json!({"storeId": s, "to": to}).to_string())),
        )
        .await;
    assert!(moved.status.is_success(), "move: {} {}", moved.status, moved.body);
    assert_eq!(account.locate(store).unwrap().as_deref(), Some(to));

    let replay = post_keyed(c, &products(&s), Some(&u.token), "before-move", &product("Lamp")).await.expect(201);
    assert!(replayed(&replay));
    assert_eq!(replay.raw, first.raw);
    assert_eq!(total(c, &u, &s).await, 1);
}

#[tokio::test]
async fn expired_records_are_swept() {
    use shopcell::storage::tables::IDEMPOTENCY;

    let app = spawn_app().await;
    let c = &app.client;
    let u = create_user(c).await;
    let s = create_store(c, &u).await;
    let store = uuid::Uuid::parse_str(&s).unwrap();
    let node = app.server.as_ref().unwrap().node.clone();
    let cell = node.cells.values().next().unwrap().clone();

    // A row written 25 h ago (its content does not matter to the sweep).
    let mut stale_key = store.as_bytes().to_vec();
    stale_key.extend_from_slice(&[0xAB; 32]);
    let day_ago = app.clock.now_ms() - 25 * 3600 * 1000;
    let mut stale = day_ago.to_be_bytes().to_vec();
    stale.extend_from_slice(b"old");
    let (k, v) = (stale_key.clone(), stale.clone());
    cell.writer.write(Some(store), move |tx| tx.put(IDEMPOTENCY, &k, &v)).await.unwrap();

    let rows = |cell: &std::sync::Arc<shopcell::cells::Cell>| {
        use redb::ReadableTable;
        let txn = cell.read().unwrap();
        let t = txn.open_table(IDEMPOTENCY.def).unwrap();
        t.iter().unwrap().map(|r| r.unwrap().0.value().to_vec()).collect::<Vec<_>>()
    };
    assert_eq!(rows(&cell), vec![stale_key.clone()]);

    // The first recording of the process starts a sweep: the stale row goes, the new one stays.
    post_keyed(c, &products(&s), Some(&u.token), "fresh", &product("Lamp")).await.expect(201);
    wait_until("the sweep removes the stale record", || !rows(&cell).contains(&stale_key)).await;
    let left = rows(&cell);
    assert_eq!(left.len(), 1, "only the fresh record is left");
    assert_ne!(left[0], stale_key);
    assert!(left[0].starts_with(store.as_bytes()));
    assert!(replayed(&post_keyed(c, &products(&s), Some(&u.token), "fresh", &product("Lamp")).await.expect(201)));
}

/// Account service, a cell and a router as separate processes: the key is honoured where the
/// handler runs, behind the router, exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_a_router_the_operation_runs_once() {
    let routed = Routed::start().await;
    let c = HttpClient::new(&routed.router.url);

    let reg =
        json!({"email": format!("routed-{}@example.com", uuid::Uuid::now_v7().simple()), "password": PASSWORD, "name": "R"});
    let r1 = post_keyed(&c, "/api/v1/auth/register", None, "routed-sign-up", &reg).await.expect(201);
    let r2 = post_keyed(&c, "/api/v1/auth/register", None, "routed-sign-up", &reg).await.expect(201);
    assert!(replayed(&r2));
    assert_eq!(r2.raw, r1.raw);
    let u = User {
        id: r1.body["user"]["id"].as_str().unwrap().to_string(),
        email: reg["email"].as_str().unwrap().to_string(),
        token: r1.body["accessToken"].as_str().unwrap().to_string(),
        refresh: r1.body["refreshToken"].as_str().unwrap().to_string(),
    };

    let store_body = json!({"name": "Routed", "currency": "USD", "country": "US", "timezone": "UTC"});
    let s1 = post_keyed(&c, "/api/v1/stores", Some(&u.token), "routed-store", &store_body).await.expect(201);
    let s2 = post_keyed(&c, "/api/v1/stores", Some(&u.token), "routed-store", &store_body).await.expect(201);
    assert_eq!(s2.body["id"], s1.body["id"]);
    let s = s1.body["id"].as_str().unwrap().to_string();

    let mut tasks = Vec::new();
    for _ in 0..4 {
        let (c, token, path) = (c.clone(), u.token.clone(), products(&s));
        tasks.push(tokio::spawn(async move { post_keyed(&c, &path, Some(&token), "routed", &product("Lamp")).await }));
    }
    let mut answers = Vec::new();
    for t in tasks {
        answers.push(t.await.unwrap().expect(201));
    }
    assert!(answers.iter().all(|a| a.raw == answers[0].raw));
    assert_eq!(answers.iter().filter(|a| !replayed(a)).count(), 1);
    assert_eq!(total(&c, &u, &s).await, 1);
    let other = post_keyed(&c, &products(&s), Some(&u.token), "routed", &product("Vase")).await.expect(422);
    assert_eq!(other.code(), "IDEMPOTENCY_KEY_REUSED");
}

#[tokio::test]
async fn a_secret_shown_once_is_replayed_but_never_stored_in_clear() {
    let mut app = spawn_app().await;
    let c = &app.client;
    let owner = create_user(c).await;
    let store = create_store(c, &owner).await;
    let path = format!("/api/v1/stores/{store}/gift-cards");
    let body = json!({"initialValue": {"amount": 5000, "currency": "USD"}, "code": "SEALEDCODE2026"});
    let first = post_keyed(c, &path, Some(&owner.token), "gift-1", &body).await.expect(201);
    let again = post_keyed(c, &path, Some(&owner.token), "gift-1", &body).await.expect(201);
    assert!(replayed(&again));
    assert_eq!((first.body["code"].as_str(), again.body), (Some("SEALEDCODE2026"), first.body.clone()));
    // A publishable key's secret too.
    let keys = format!("/api/v1/stores/{store}/publishable-keys");
    let key = post_keyed(c, &keys, Some(&owner.token), "pk-1", &json!({"environment": "live"})).await.expect(201).body;
    let secret = key["key"].as_str().unwrap().to_string();
    app.stop().await;
    for file in ["cells/cell-1/cell.redb", "account/account.redb"] {
        let bytes = std::fs::read(app.dir.path().join(file)).unwrap();
        for s in ["SEALEDCODE2026", secret.as_str()] {
            assert!(!bytes.windows(s.len()).any(|w| w == s.as_bytes()), "{s} is stored in clear in {file}");
        }
    }
}
