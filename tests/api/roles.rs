//! Who may do what in a store, as a table by role — owner, admin, staff, non-member, anonymous
//! and anonymous shopper (publishable key) — and role changes reaching a separate cell process.

use std::time::{Duration, Instant};

use bytes::Bytes;
use hyper::Method;
use serde_json::{Value, json};

use crate::support::*;

#[derive(Clone, Copy, Debug)]
enum Who {
    Owner,
    Admin,
    Staff,
    Stranger,
    Anonymous,
    Shopper,
}

struct Case {
    method: Method,
    /// Under `/api/v1/stores/{store}`; `{name}` is replaced by the fixture of that name.
    path: &'static str,
    who: Who,
    body: Option<&'static str>,
    status: u16,
    code: &'static str,
    /// A JSON pointer into a successful answer and the string expected there.
    check: Option<(&'static str, &'static str)>,
}

fn case(method: Method, path: &'static str, who: Who, body: Option<&'static str>, status: u16, code: &'static str) -> Case {
    Case { method, path, who, body, status, code, check: None }
}

fn ok_case(
    method: Method,
    path: &'static str,
    who: Who,
    body: Option<&'static str>,
    status: u16,
    check: (&'static str, &'static str),
) -> Case {
    Case { method, path, who, body, status, code: "", check: Some(check) }
}

#[tokio::test]
async fn store_routes_by_role() {
    let app = spawn_app().await;
    let c = &app.client;
    let owner = create_user(c).await;
    let admin = create_user(c).await;
    let staff = create_user(c).await;
    let stranger = create_user(c).await;
    let extra: Vec<User> = vec![create_user(c).await, create_user(c).await, create_user(c).await];
    let s = create_store(c, &owner).await;
    for (u, role) in [(&admin, "admin"), (&staff, "staff")] {
        c.post(&format!("/api/v1/stores/{s}/members"), Some(&owner.token), json!({"email": u.email, "role": role}))
            .await
            .expect(201);
    }
    let active = create_product(c, &owner, &s, "Active", 100).await;
    let doomed = create_product(c, &owner, &s, "Doomed", 100).await;
    let draft = c
        .post(
            &format!("/api/v1/stores/{s}/products"),
            Some(&owner.token),
            json!({"title": "Draft", "price": {"amount": 1, "currency": "USD"}}),
        )
        .await
        .expect(201)
        .body;
    let key = c
        .post(&format!("/api/v1/stores/{s}/publishable-keys"), Some(&owner.token), json!({"environment": "live"}))
        .await
        .expect(201)
        .body;
    let spare = c
        .post(&format!("/api/v1/stores/{s}/publishable-keys"), Some(&owner.token), json!({"environment": "test"}))
        .await
        .expect(201)
        .body;
    let shopper_key = key["key"].as_str().unwrap().to_string();
    let fixtures: Vec<(&str, String)> = vec![
        ("{active}", active["id"].as_str().unwrap().into()),
        ("{doomed}", doomed["id"].as_str().unwrap().into()),
        ("{draft}", draft["id"].as_str().unwrap().into()),
        ("{owner}", owner.id.clone()),
        ("{admin}", admin.id.clone()),
        ("{staff}", staff.id.clone()),
        ("{x0}", extra[0].id.clone()),
        ("{x1}", extra[1].id.clone()),
        ("{x0email}", extra[0].email.clone()),
        ("{x1email}", extra[1].email.clone()),
        ("{x2email}", extra[2].email.clone()),
        ("{spare}", spare["id"].as_str().unwrap().into()),
    ];
    let fill = |t: &str| fixtures.iter().fold(t.to_string(), |acc, (k, v)| acc.replace(k, v));

    use Method as M;
    use Who::*;
    let product = Some(r#"{"title":"By staff","price":{"amount":5,"currency":"USD"}}"#);
    let cases = vec![
        // Store settings: any member reads, owners and admins write.
        ok_case(M::GET, "", Owner, None, 200, ("/name", "Test Store")),
        ok_case(M::GET, "", Admin, None, 200, ("/name", "Test Store")),
        ok_case(M::GET, "", Staff, None, 200, ("/name", "Test Store")),
        case(M::GET, "", Stranger, None, 404, "NOT_FOUND"),
        case(M::GET, "", Anonymous, None, 401, "UNAUTHORIZED"),
        case(M::GET, "", Shopper, None, 401, "UNAUTHORIZED"),
        case(M::PATCH, "", Staff, Some(r#"{"name":"Staff's"}"#), 403, "FORBIDDEN"),
        case(M::PATCH, "", Stranger, Some(r#"{"name":"Stranger's"}"#), 404, "NOT_FOUND"),
        case(M::PATCH, "", Anonymous, Some(r#"{"name":"Nobody's"}"#), 401, "UNAUTHORIZED"),
        case(M::PATCH, "", Shopper, Some(r#"{"name":"Shopper's"}"#), 401, "UNAUTHORIZED"),
        ok_case(M::PATCH, "", Owner, Some(r#"{"name":"Owner's"}"#), 200, ("/name", "Owner's")),
        ok_case(M::PATCH, "", Admin, Some(r#"{"name":"Admin's"}"#), 200, ("/name", "Admin's")),
        // Products: members do everything; shoppers read what is ACTIVE.
        ok_case(M::GET, "/products?sortBy=title&sortOrder=asc", Staff, None, 200, ("/data/0/title", "Active")),
        ok_case(M::GET, "/products?sortBy=title&sortOrder=asc", Shopper, None, 200, ("/data/0/title", "Active")),
        case(M::GET, "/products", Stranger, None, 404, "NOT_FOUND"),
        case(M::GET, "/products", Anonymous, None, 401, "UNAUTHORIZED"),
        ok_case(M::GET, "/products/{draft}", Staff, None, 200, ("/status", "DRAFT")),
        case(M::GET, "/products/{draft}", Shopper, None, 404, "NOT_FOUND"),
        ok_case(M::GET, "/products/{active}", Shopper, None, 200, ("/title", "Active")),
        case(M::GET, "/products/{active}", Stranger, None, 404, "NOT_FOUND"),
        ok_case(M::POST, "/products", Staff, product, 201, ("/title", "By staff")),
        case(M::POST, "/products", Shopper, product, 401, "UNAUTHORIZED"),
        case(M::POST, "/products", Stranger, product, 404, "NOT_FOUND"),
        ok_case(M::PATCH, "/products/{active}", Admin, Some(r#"{"vendor":"Acme"}"#), 200, ("/vendor", "Acme")),
        case(M::PATCH, "/products/{active}", Shopper, Some(r#"{"title":"x"}"#), 401, "UNAUTHORIZED"),
        case(M::DELETE, "/products/{active}", Stranger, None, 404, "NOT_FOUND"),
        case(M::DELETE, "/products/{active}", Anonymous, None, 401, "UNAUTHORIZED"),
        case(M::DELETE, "/products/{doomed}", Staff, None, 204, ""),
        // Members: any member reads; owners and admins manage.
        ok_case(M::GET, "/members?sortOrder=asc", Staff, None, 200, ("/data/0/role", "owner")),
        ok_case(M::GET, "/members?sortOrder=asc", Admin, None, 200, ("/data/1/role", "admin")),
        case(M::GET, "/members", Stranger, None, 404, "NOT_FOUND"),
        case(M::GET, "/members", Anonymous, None, 401, "UNAUTHORIZED"),
        case(M::GET, "/members", Shopper, None, 401, "UNAUTHORIZED"),
        case(M::POST, "/members", Staff, Some(r#"{"email":"{x2email}","role":"staff"}"#), 403, "FORBIDDEN"),
        case(M::POST, "/members", Stranger, Some(r#"{"email":"{x2email}","role":"staff"}"#), 404, "NOT_FOUND"),
        case(M::POST, "/members", Anonymous, Some(r#"{"email":"{x2email}","role":"staff"}"#), 401, "UNAUTHORIZED"),
        ok_case(M::POST, "/members", Owner, Some(r#"{"email":"{x0email}","role":"staff"}"#), 201, ("/role", "staff")),
        ok_case(M::POST, "/members", Admin, Some(r#"{"email":"{x1email}","role":"staff"}"#), 201, ("/role", "staff")),
        case(M::PATCH, "/members/{x0}", Staff, Some(r#"{"role":"admin"}"#), 403, "FORBIDDEN"),
        case(M::PATCH, "/members/{x0}", Stranger, Some(r#"{"role":"admin"}"#), 404, "NOT_FOUND"),
        ok_case(M::PATCH, "/members/{x0}", Owner, Some(r#"{"role":"admin"}"#), 200, ("/role", "admin")),
        case(M::PATCH, "/members/{x0}", Admin, Some(r#"{"role":"staff"}"#), 403, "FORBIDDEN"),
        case(M::PATCH, "/members/{owner}", Admin, Some(r#"{"role":"staff"}"#), 422, "BUSINESS_RULE"),
        case(M::DELETE, "/members/{x1}", Staff, None, 403, "FORBIDDEN"),
        case(M::DELETE, "/members/{x1}", Stranger, None, 404, "NOT_FOUND"),
        case(M::DELETE, "/members/{x1}", Anonymous, None, 401, "UNAUTHORIZED"),
        case(M::DELETE, "/members/{owner}", Admin, None, 422, "BUSINESS_RULE"),
        case(M::DELETE, "/members/{x1}", Admin, None, 204, ""),
        case(M::POST, "/members/{staff}/transfer-ownership", Admin, None, 403, "FORBIDDEN"),
        case(M::POST, "/members/{staff}/transfer-ownership", Staff, None, 403, "FORBIDDEN"),
        case(M::POST, "/members/{staff}/transfer-ownership", Stranger, None, 404, "NOT_FOUND"),
        case(M::POST, "/members/{staff}/transfer-ownership", Anonymous, None, 401, "UNAUTHORIZED"),
        // Publishable keys: any member lists; owners and admins create and revoke.
        ok_case(M::GET, "/publishable-keys?sortOrder=asc", Staff, None, 200, ("/data/0/environment", "live")),
        case(M::GET, "/publishable-keys", Stranger, None, 404, "NOT_FOUND"),
        case(M::GET, "/publishable-keys", Anonymous, None, 401, "UNAUTHORIZED"),
        case(M::GET, "/publishable-keys", Shopper, None, 401, "UNAUTHORIZED"),
        case(M::POST, "/publishable-keys", Staff, Some(r#"{"environment":"test"}"#), 403, "FORBIDDEN"),
        case(M::POST, "/publishable-keys", Stranger, Some(r#"{"environment":"test"}"#), 404, "NOT_FOUND"),
        case(M::POST, "/publishable-keys", Anonymous, Some(r#"{"environment":"test"}"#), 401, "UNAUTHORIZED"),
        ok_case(M::POST, "/publishable-keys", Owner, Some(r#"{"environment":"test"}"#), 201, ("/environment", "test")),
        ok_case(M::POST, "/publishable-keys", Admin, Some(r#"{"environment":"live"}"#), 201, ("/environment", "live")),
        case(M::DELETE, "/publishable-keys/{spare}", Staff, None, 403, "FORBIDDEN"),
        case(M::DELETE, "/publishable-keys/{spare}", Stranger, None, 404, "NOT_FOUND"),
        case(M::DELETE, "/publishable-keys/{spare}", Shopper, None, 401, "UNAUTHORIZED"),
        case(M::DELETE, "/publishable-keys/{spare}", Admin, None, 204, ""),
    ];
    for k in &cases {
        let token = match k.who {
            Owner => Some(owner.token.as_str()),
            Admin => Some(admin.token.as_str()),
            Staff => Some(staff.token.as_str()),
            Stranger => Some(stranger.token.as_str()),
            Anonymous | Shopper => None,
        };
        let headers: Vec<(&str, &str)> = match k.who {
            Shopper => vec![("x-publishable-key", shopper_key.as_str())],
            _ => vec![],
        };
        let path = format!("/api/v1/stores/{s}{}", fill(k.path));
        let body = k.body.map(|b| Bytes::from(fill(b)));
        let a = c.send(k.method.clone(), &path, token, &headers, body).await;
        let name = format!("{:?} {} {} as {:?}", k.method, k.path, k.body.unwrap_or(""), k.who);
        assert_eq!(a.status.as_u16(), k.status, "{name}: {}", String::from_utf8_lossy(&a.raw));
        assert_eq!(a.code(), k.code, "{name}");
        if k.status >= 400 {
            assert_eq!(a.body["success"], false, "{name}: error envelope");
        }
        if let Some((pointer, want)) = k.check {
            assert_eq!(a.body.pointer(pointer).and_then(Value::as_str), Some(want), "{name}: {}", a.body);
        }
    }

    // What the allowed writes left behind, and nothing more.
    let members =
        c.get(&format!("/api/v1/stores/{s}/members?sortOrder=asc&limit=250"), Some(&owner.token)).await.expect(200).body;
    let roles: Vec<(String, String)> = members["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["userId"].as_str().unwrap().to_string(), m["role"].as_str().unwrap().to_string()))
        .collect();
    let want = |u: &User, r: &str| (u.id.clone(), r.to_string());
    assert_eq!(roles, [want(&owner, "owner"), want(&admin, "admin"), want(&staff, "staff"), want(&extra[0], "admin")]);
    let settings = c.get(&format!("/api/v1/stores/{s}"), Some(&owner.token)).await.expect(200).body;
    assert_eq!((settings["name"].as_str(), settings["ownerId"].as_str()), (Some("Admin's"), Some(owner.id.as_str())));
    let keys = c.get(&format!("/api/v1/stores/{s}/publishable-keys?sortOrder=asc"), Some(&owner.token)).await.expect(200).body;
    assert_eq!(keys["total"], 4);
    let revoked: Vec<&Value> =
        keys["data"].as_array().unwrap().iter().filter(|k| !k["revokedAt"].is_null()).map(|k| &k["id"]).collect();
    assert_eq!(revoked, [&spare["id"]]);
    let products =
        c.get(&format!("/api/v1/stores/{s}/products?sortBy=title&sortOrder=asc"), Some(&owner.token)).await.expect(200).body;
    let titles: Vec<&str> = products["data"].as_array().unwrap().iter().map(|p| p["title"].as_str().unwrap()).collect();
    assert_eq!(titles, ["Active", "By staff", "Draft"]);
}

/// Polls `probe` until it answers `status`; returns how long that took (fails after 5 s).
async fn within_5s(what: &str, mut probe: impl AsyncFnMut() -> u16, status: u16) -> Duration {
    let started = Instant::now();
    loop {
        let got = probe().await;
        if got == status {
            return started.elapsed();
        }
        assert!(started.elapsed() < Duration::from_secs(5), "{what}: still {got} after 5 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn role_changes_and_key_revocations_reach_a_separate_cell_within_5_seconds() {
    let dir = tempfile::tempdir().unwrap();
    let data = |name: &str| dir.path().join(name).to_string_lossy().into_owned();
    let (pa, p1, pr) = (free_port(), free_port(), free_port());
    let ua = format!("http://127.0.0.1:{pa}");
    let c1 = format!("c1=http://127.0.0.1:{p1}");
    let account_data = data("account");
    let _account = start_proc(&["account", "--data", &account_data, "--cell", &c1], pa).await;
    let key_file = format!("{account_data}/account/service.key");
    let d1 = data("cell1");
    let _cell = start_proc(&["cell", "--name", "c1", "--data", &d1, "--account", &ua, "--service-key-file", &key_file], p1).await;
    let router = start_proc(&["router", "--account", &ua, "--cell", &c1, "--service-key-file", &key_file], pr).await;

    let c = HttpClient::new(&router.url);
    let owner = create_user(&c).await;
    let member = create_user(&c).await;
    let s = create_store(&c, &owner).await;
    create_product(&c, &owner, &s, "On sale", 100).await;
    c.post(
        &format!("/api/v1/stores/{s}/products"),
        Some(&owner.token),
        json!({"title": "Hidden", "price": {"amount": 1, "currency": "USD"}}),
    )
    .await
    .expect(201);

    // Members are managed through the cell, which asks the account service.
    let added = c
        .post(&format!("/api/v1/stores/{s}/members"), Some(&owner.token), json!({"email": member.email, "role": "staff"}))
        .await
        .expect(201)
        .body;
    assert_eq!((added["userId"].as_str(), added["role"].as_str()), (Some(member.id.as_str()), Some("staff")));
    let list = c.get(&format!("/api/v1/stores/{s}/members"), Some(&member.token)).await.expect(200).body;
    assert_eq!(list["total"], 2);
    let dup =
        c.post(&format!("/api/v1/stores/{s}/members"), Some(&owner.token), json!({"email": member.email, "role": "staff"})).await;
    assert_eq!((dup.status.as_u16(), dup.code()), (409, "CONFLICT"), "directory errors pass through the cell");

    let settings = format!("/api/v1/stores/{s}");
    let patch = |name: &'static str| {
        let (c, settings, token) = (c.clone(), settings.clone(), member.token.clone());
        async move { c.patch(&settings, Some(&token), json!({ "name": name })).await.status.as_u16() }
    };
    assert_eq!(patch("Staff").await, 403);

    // Promote, then demote, then remove: the cell follows each within 5 s.
    let role = |r: &'static str| json!({ "role": r });
    let me = format!("/api/v1/stores/{s}/members/{}", member.id);
    c.patch(&me, Some(&owner.token), role("admin")).await.expect(200);
    within_5s("promotion", async || patch("Admin").await, 200).await;
    c.patch(&me, Some(&owner.token), role("staff")).await.expect(200);
    within_5s("demotion", async || patch("Staff again").await, 403).await;
    c.delete(&me, Some(&owner.token)).await.expect(204);
    let products = format!("/api/v1/stores/{s}/products");
    let (cc, pp, tt) = (c.clone(), products.clone(), member.token.clone());
    within_5s("removal", async || cc.get(&pp, Some(&tt)).await.status.as_u16(), 404).await;
    let gone = c.get(&products, Some(&member.token)).await.expect(404);
    assert_eq!(gone.code(), "NOT_FOUND");
    // While the demotion was on its way the cell may still have let a rename through.
    let name = c.get(&settings, Some(&owner.token)).await.expect(200).body["name"].clone();
    assert!(name == "Admin" || name == "Staff again", "{name}");

    // Ownership transfer through a cell process: the directory and the cell's settings follow.
    c.post(&format!("/api/v1/stores/{s}/members"), Some(&owner.token), json!({"email": member.email, "role": "admin"}))
        .await
        .expect(201);
    let t = c.post(&format!("{me}/transfer-ownership"), Some(&owner.token), json!({})).await.expect(200).body;
    assert_eq!(t["owner"]["userId"], member.id.as_str());
    // The member's earlier removal may still be remembered by the cell for a moment.
    let (cc, ss, tt) = (c.clone(), settings.clone(), member.token.clone());
    within_5s("re-admission", async || cc.get(&ss, Some(&tt)).await.status.as_u16(), 200).await;
    assert_eq!(c.get(&settings, Some(&member.token)).await.expect(200).body["ownerId"], member.id.as_str());
    let mine = c.get("/api/v1/stores", Some(&owner.token)).await.expect(200).body;
    assert_eq!(mine[0]["role"], "admin");

    // Publishable keys through the cell; the shopper view; revocation within 5 s.
    let key = c
        .post(&format!("/api/v1/stores/{s}/publishable-keys"), Some(&member.token), json!({"environment": "live"}))
        .await
        .expect(201)
        .body;
    let k = key["key"].as_str().unwrap().to_string();
    let valid = c.post("/api/v1/auth/publishable-keys/validate", None, json!({"key": k})).await.expect(200).body;
    assert_eq!(valid, json!({"valid": true, "storeId": s, "type": "PUBLISHABLE", "environment": "LIVE"}));
    let shop = |c: HttpClient, path: String, k: String| async move {
        c.send(Method::GET, &path, None, &[("x-publishable-key", &k)], None).await
    };
    let seen = shop(c.clone(), products.clone(), k.clone()).await.expect(200).body;
    assert_eq!((seen["total"].as_u64(), seen["data"][0]["title"].as_str()), (Some(1), Some("On sale")));
    let listed = c.get(&format!("/api/v1/stores/{s}/publishable-keys"), Some(&owner.token)).await.expect(200).body;
    assert_eq!(listed["data"][0]["maskedKey"], key["maskedKey"]);
    c.delete(&format!("/api/v1/stores/{s}/publishable-keys/{}", key["id"].as_str().unwrap()), Some(&member.token))
        .await
        .expect(204);
    let (cc, pp, kk) = (c.clone(), products.clone(), k.clone());
    within_5s("key revocation", async || shop(cc.clone(), pp.clone(), kk.clone()).await.status.as_u16(), 401).await;
    assert_eq!(shop(c.clone(), products.clone(), k.clone()).await.code(), "INVALID_PUBLISHABLE_KEY");

    // Plans are answered by the account service behind the router.
    assert_eq!(c.get("/api/v1/subscriptions/plans", None).await.expect(200).body.as_array().unwrap().len(), 3);
    assert_eq!(c.get("/api/v1/subscriptions", Some(&owner.token)).await.expect(200).body["storesOwned"], 0);
}
