//! One store as a portable file: exported from one `serve`, imported into another, and every
//! refusal leaving the receiving installation untouched.

use std::path::{Path, PathBuf};

use serde_json::json;
use shopcell::cells::portable::count_rows;
use shopcell::cells::webhooks::Webhook;
use shopcell::portable::client;
use shopcell::portable::file::verify;
use uuid::Uuid;

use crate::calculate::{Shop, amount};
use crate::checkout::{paid_intent, ready_checkout, stocked, us_shipping};
use crate::support::*;

/// An account with `email` on the installation `c` talks to.
async fn register(c: &HttpClient, email: &str) -> User {
    let a = c
        .post("/api/v1/auth/register", None, json!({"email": email, "password": PASSWORD, "name": "Same Person"}))
        .await
        .expect(201);
    User {
        id: a.body["user"]["id"].as_str().unwrap().to_string(),
        email: email.to_string(),
        token: a.body["accessToken"].as_str().unwrap().to_string(),
        refresh: a.body["refreshToken"].as_str().unwrap().to_string(),
    }
}

fn key_file(app: &TestApp) -> PathBuf {
    app.dir.path().join("account/service.key")
}

/// Asserts the installation of `app` holds nothing of `store`: no directory entry, no row, no
/// copy being received.
fn holds_nothing_of(app: &TestApp, store: Uuid) {
    let node = &app.server.as_ref().unwrap().node;
    let account = node.account.as_ref().unwrap();
    assert!(account.store_entry(store).unwrap().is_none(), "no directory entry");
    assert!(account.closed_store(store).unwrap().is_none());
    let cell = app.cell();
    assert_eq!(cell.state_of(store), None, "no copy held or received");
    assert!(count_rows(&cell.read().unwrap(), store).unwrap().is_empty(), "no row of the store");
}

async fn import_cli(file: &Path, app: &TestApp, owner: Option<&str>) -> Ran {
    let mut args: Vec<String> = ["admin", "import-store", file.to_str().unwrap(), "--url", &app.base, "--service-key-file"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    args.push(key_file(app).to_str().unwrap().to_string());
    if let Some(o) = owner {
        args.extend(["--owner".to_string(), o.to_string()]);
    }
    tokio::task::spawn_blocking(move || run_shopcell(&args.iter().map(String::as_str).collect::<Vec<_>>(), None, &[]))
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_exported_from_one_installation_runs_in_another_without_its_secrets() {
    let src = spawn_app_allowing(&["127.0.0.1"]).await;
    let dst = spawn_app().await;
    let (c, d) = (&src.client, &dst.client);
    let shop = Shop::new(c).await;
    let t = Some(shop.owner.token.as_str());

    // Members: an admin who has an account at the destination too, staff who has none there.
    let admin = create_user(c).await;
    let ghost = create_user(c).await;
    for (who, role) in [(&admin, "admin"), (&ghost, "staff")] {
        c.post(&shop.path("/members"), t, json!({"email": who.email, "role": role})).await.expect(201);
    }
    // Records of every kind: stocked products, shipping, a paid order, a key, a webhook.
    let rate = us_shipping(c, &shop).await;
    let lamp = stocked(c, &shop, "Brass lamp", 4000, 5).await;
    stocked(c, &shop, "Linen shade", 1500, 2).await;
    let co = ready_checkout(c, &shop, json!([{"variantId": lamp, "quantity": 2}]), &rate).await;
    let intent = paid_intent(c, &shop, &co).await;
    let complete = shop.path(&format!("/checkouts/{}/complete", co["id"].as_str().unwrap()));
    let order =
        c.post(&complete, t, json!({"paymentMethodId": "pm_card_visa", "paymentIntentId": intent})).await.expect(201).body;
    let key = c.post(&shop.path("/publishable-keys"), t, json!({"environment": "live"})).await.expect(201).body["key"]
        .as_str()
        .unwrap()
        .to_string();
    let hook = c
        .post(&shop.path("/webhooks"), t, json!({"topics": ["product.*"], "url": "http://127.0.0.1:9/hook"}))
        .await
        .expect(201)
        .body;
    let hook_id: Uuid = hook["id"].as_str().unwrap().parse().unwrap();
    let products = c.get(&shop.path("/products?limit=250&sortOrder=asc"), t).await.expect(200).body;
    let orders = c.get(&shop.path("/orders"), t).await.expect(200).body;
    let store: Uuid = shop.store.parse().unwrap();

    // The export: a file of the store alone, no credential or secret in it.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("store.shopcell");
    let done = client::export(&src.base, &src.service_key(), store, &file).await.expect("export");
    assert_eq!(done.header.counts["products"], 2);
    assert_eq!(done.header.counts["orders"], 1);
    assert_eq!(done.rows, done.header.rows());
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&file).unwrap().permissions().mode() & 0o777, 0o600);
    let header = verify(&file).expect("the file verifies");
    assert_eq!(header.store_id, store);
    assert_eq!(header.owner_email, shop.owner.email);
    let mut members: Vec<(String, String)> = header.members.iter().map(|m| (m.email.clone(), m.role.clone())).collect();
    members.sort();
    let mut expected = vec![
        (shop.owner.email.clone(), "owner".to_string()),
        (admin.email.clone(), "admin".to_string()),
        (ghost.email.clone(), "staff".to_string()),
    ];
    expected.sort();
    assert_eq!(members, expected);
    assert_eq!(header.to_reenter.iter().map(|r| r.feature.as_str()).collect::<Vec<_>>(), ["payments", "webhooks"]);
    let bytes = std::fs::read(&file).unwrap();
    let secret = src_secret(&src, store, hook_id);
    for needle in ["$argon2", secret.as_str(), key.as_str()] {
        assert!(!bytes.windows(needle.len()).any(|w| w == needle.as_bytes()), "{needle} must not travel");
    }

    // The destination: the owner and the admin have accounts with the same emails, the staff
    // member none. The import prints its report.
    let owner_there = register(d, &shop.owner.email).await;
    let admin_there = register(d, &admin.email).await;
    let ran = import_cli(&file, &dst, None).await;
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    assert!(ran.stdout.contains(&format!("store {store} imported into cell cell-1")), "{}", ran.stdout);
    assert!(ran.stdout.contains(&format!("member joined: {} (admin)", admin.email)), "{}", ran.stdout);
    assert!(
        ran.stdout
            .contains(&format!("member not found (no account with this email here; invite them again): {} (staff)", ghost.email))
    );
    assert!(ran.stdout.contains("webhooks disabled with new secrets: 1"), "{}", ran.stdout);
    assert!(ran.stdout.contains("to re-enter (payments)"), "{}", ran.stdout);

    // Every record as it was, owned here.
    let to = Some(owner_there.token.as_str());
    let path = |rest: &str| format!("/api/v1/stores/{store}{rest}");
    assert_eq!(d.get(&path("/products?limit=250&sortOrder=asc"), to).await.expect(200).body, products);
    assert_eq!(d.get(&path("/orders"), to).await.expect(200).body, orders);
    let oid = order["id"].as_str().unwrap();
    assert_eq!(d.get(&path(&format!("/orders/{oid}")), to).await.expect(200).body, order);
    assert_eq!(d.get(&path(""), to).await.expect(200).body["ownerId"], owner_there.id);
    let stores = d.get("/api/v1/stores", to).await.expect(200).body;
    assert_eq!(stores.to_string().matches(&shop.store).count(), 1, "{stores}");
    let mut listed: Vec<(String, String)> = d.get(&path("/members"), to).await.expect(200).body["data"]
        .as_array()
        .map(|a| a.iter().map(|m| (m["email"].as_str().unwrap().to_string(), m["role"].as_str().unwrap().to_string())).collect())
        .unwrap_or_else(|| panic!("members"));
    listed.sort();
    let mut joined = vec![(shop.owner.email.clone(), "owner".to_string()), (admin.email.clone(), "admin".to_string())];
    joined.sort();
    assert_eq!(listed, joined);
    d.get(&path("/orders"), Some(&admin_there.token)).await.expect(200);

    // The storefront's key works unchanged.
    let pid = products["data"][0]["id"].as_str().unwrap();
    let shopper =
        d.send(hyper::Method::GET, &path(&format!("/products/{pid}")), None, &[("x-publishable-key", &key)], None).await;
    assert_eq!(shopper.status, 200);
    assert_eq!(shopper.body["title"], products["data"][0]["title"]);

    // The webhook arrives disabled, with a secret of its own.
    let w = d.get(&path(&format!("/webhooks/{hook_id}")), to).await.expect(200).body;
    assert_eq!(w["enabled"], false);
    assert!(w["disabledReason"].as_str().unwrap().contains("imported"), "{w}");
    let record: Webhook = shopcell::storage::record::get(&dst.cell().read().unwrap(), store, hook_id).unwrap().unwrap();
    assert!(record.secret.starts_with("whsec_") && record.secret != secret);

    // Payments are refused until the payment settings are entered, never sent to this
    // installation's provider meanwhile; another provider than this installation's is refused.
    let there = Shop { owner: register_copy(&owner_there), store: shop.store.clone() };
    let co2 = ready_checkout(d, &there, json!([{"variantId": lamp, "quantity": 1}]), &rate).await;
    let session = path(&format!("/checkouts/{}/payment-session", co2["id"].as_str().unwrap()));
    let due = json!({"amount": amount(&co2, "/paymentDue"), "currency": "USD"});
    let refused = d.post(&session, to, due.clone()).await.expect(422);
    assert!(refused.body["error"]["message"].as_str().unwrap().contains("payments are off"), "{}", refused.body);
    assert_eq!(d.get(&path("/orders"), to).await.expect(200).body["total"], 1);
    let settings = d.get(&path("/payment-settings"), to).await.expect(200).body;
    assert_eq!((settings["provider"].as_str(), settings["paymentsEnabled"].as_bool()), (Some("test"), Some(false)));
    // Another provider than the installation's is a conflict with its configuration; no
    // provider at all is a bad request. Neither lifts the hold.
    let wrong = d.put(&path("/payment-settings"), to, json!({"provider": "stripe"})).await.expect(409);
    assert_eq!(wrong.body["error"]["fields"][0]["field"], "provider");
    let empty = d.put(&path("/payment-settings"), to, json!({"provider": ""})).await.expect(400);
    assert_eq!(empty.body["error"]["fields"][0]["field"], "provider");
    assert_eq!(d.get(&path("/payment-settings"), to).await.expect(200).body["paymentsEnabled"], false);
    d.put(&path("/payment-settings"), Some(&admin_there.token), json!({"provider": "test"})).await.expect(200);
    assert_eq!(d.get(&path("/payment-settings"), to).await.expect(200).body["paymentsEnabled"], true);
    d.post(&session, to, due).await.expect(201);

    // Search is built from the imported records.
    let found = get_until(d, &path("/products/search?q=brass"), to, &[], |b| b["total"] == 1).await;
    assert_eq!(found["data"][0]["id"], products["data"][0]["id"]);
    // The source is untouched: still served, its webhook still enabled.
    assert_eq!(c.get(&shop.path(&format!("/webhooks/{hook_id}")), t).await.expect(200).body["enabled"], true);
}

fn register_copy(u: &User) -> User {
    User { id: u.id.clone(), email: u.email.clone(), token: u.token.clone(), refresh: u.refresh.clone() }
}

fn src_secret(app: &TestApp, store: Uuid, hook: Uuid) -> String {
    let w: Webhook = shopcell::storage::record::get(&app.cell().read().unwrap(), store, hook).unwrap().unwrap();
    w.secret
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_refused_import_leaves_nothing_behind() {
    let src = spawn_app().await;
    let dst = spawn_app().await;
    let (c, d) = (&src.client, &dst.client);
    let shop = Shop::new(c).await;
    create_product(c, &shop.owner, &shop.store, "Kettle", 3000).await;
    let store: Uuid = shop.store.parse().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("store.shopcell");
    client::export(&src.base, &src.service_key(), store, &file).await.expect("export");
    let good = std::fs::read(&file).unwrap();
    let key = dst.service_key();

    // Damaged files are refused before the service is asked anything.
    let damaged = dir.path().join("damaged");
    let mut newer = good.clone();
    newer[16..20].copy_from_slice(&(shopcell::portable::PORTABLE_FORMAT + 1).to_le_bytes());
    let mut altered = good.clone();
    let at = good.len() / 2;
    altered[at] ^= 0x40;
    for (bytes, says) in [(&good[..good.len() - 5], "truncated"), (&altered[..], "damaged"), (&newer[..], "newer shopcell")] {
        std::fs::write(&damaged, bytes).unwrap();
        let e = client::import(&dst.base, &key, &damaged, None).await.unwrap_err().to_string();
        assert!(e.contains(says) || (says == "damaged" && e.contains("altered")), "{e} should say {says}");
        holds_nothing_of(&dst, store);
    }

    // No account here with the owner's email.
    let e = client::import(&dst.base, &key, &file, None).await.unwrap_err().to_string();
    assert!(e.contains(&format!("no account here has the email {}", shop.owner.email)), "{e}");
    holds_nothing_of(&dst, store);
    // An owner whose plan has no room: the default plan's one store is taken.
    let busy = create_user(d).await;
    create_store(d, &busy).await;
    let ran = import_cli(&file, &dst, Some(&busy.email)).await;
    assert_ne!(ran.code, 0);
    assert!(ran.stderr.contains("BUSINESS_RULE") && ran.stderr.contains("plan allows 1 store"), "{}", ran.stderr);
    holds_nothing_of(&dst, store);

    // The store id is taken: importing into the installation it came from.
    let e = client::import(&src.base, &src.service_key(), &file, None).await.unwrap_err().to_string();
    assert!(e.contains(&format!("CONFLICT: store {store} already exists here")), "{e}");
    assert_eq!(c.get(&shop.path("/products"), Some(&shop.owner.token)).await.expect(200).body["total"], 1);

    // With an owner who has room, the same file imports.
    let free = create_user(d).await;
    let report = client::import(&dst.base, &key, &file, Some(free.email.clone())).await.expect("import");
    assert_eq!(report.owner, free.email);
    assert_eq!(report.members_not_found.len(), 1, "the exported owner has no account here");
    assert_eq!(d.get(&format!("/api/v1/stores/{store}/products"), Some(&free.token)).await.expect(200).body["total"], 1);
    // Twice is refused: the id is taken now.
    let e = client::import(&dst.base, &key, &file, Some(free.email.clone())).await.unwrap_err().to_string();
    assert!(e.contains("already exists here"), "{e}");

    // A closed store cannot be exported, and no file is left.
    c.delete(&format!("/api/v1/stores/{store}"), Some(&shop.owner.token)).await.expect(204);
    let again = dir.path().join("closed.shopcell");
    let e = client::export(&src.base, &src.service_key(), store, &again).await.unwrap_err().to_string();
    assert!(e.contains("NOT_FOUND"), "{e}");
    assert!(!again.exists() && !dir.path().join("closed.shopcell.partial").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_import_cut_short_leaves_nothing_after_a_restart() {
    use shopcell::http::upstream::{Body, Upstream};
    use shopcell::portable::file::FileReader;
    let src = spawn_app().await;
    let shop = Shop::new(&src.client).await;
    create_product(&src.client, &shop.owner, &shop.store, "Kettle", 3000).await;
    let store: Uuid = shop.store.parse().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("store.shopcell");
    client::export(&src.base, &src.service_key(), store, &file).await.expect("export");

    // The caller dies after the first chunk: the copy is held, not served.
    let mut dst = spawn_app().await;
    register(&dst.client, &shop.owner.email).await;
    let up = Upstream::new(&dst.base, &dst.service_key());
    let mut reader = FileReader::open(&file).unwrap();
    let begin = json!({"header": reader.header, "owner": null});
    let _: serde_json::Value =
        up.call(hyper::Method::POST, "/internal/v1/store-imports", Body::json(&begin).unwrap()).await.unwrap();
    let rows = reader.next_rows().unwrap().unwrap();
    let chunk = shopcell::cells::moves::Chunk { first: true, rows, next: None };
    let path = format!("/internal/v1/store-imports/{store}/rows?seq=0");
    up.call_raw(hyper::Method::POST, &path, Body::Raw(shopcell::storage::codec::encode(&chunk).unwrap())).await.unwrap();
    assert_eq!(dst.cell().state_of(store), Some(shopcell::storage::tables::StoreState::Incoming));
    let owner = dst.client.post("/api/v1/auth/login", None, json!({"email": shop.owner.email, "password": PASSWORD})).await;
    let token = owner.expect(200).body["accessToken"].as_str().unwrap().to_string();
    dst.client.get(&format!("/api/v1/stores/{store}/products"), Some(&token)).await.expect(404);
    // A chunk out of order is refused.
    let again = up.call_raw(hyper::Method::POST, &path, Body::Raw(shopcell::storage::codec::encode(&chunk).unwrap())).await;
    assert_eq!(again.unwrap_err().code, shopcell::error::Code::CONFLICT);

    // The next start drops the copy; the same file then imports whole.
    dst.stop().await;
    let data = dst.dir.path().to_path_buf();
    let restarted = spawn_app_in(&data).await;
    holds_nothing_of(&restarted, store);
    let report = client::import(&restarted.base, &restarted.service_key(), &file, None).await.expect("import");
    assert_eq!(report.counts["products"], 1);
    restarted.client.get(&format!("/api/v1/stores/{store}/products"), Some(&token)).await.expect(200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn split_roles_export_and_import_through_the_account_service() {
    let (from, to) = (Routed::start().await, Routed::start().await);
    let (c, d) = (HttpClient::new(&from.router.url), HttpClient::new(&to.router.url));
    let owner = create_user(&c).await;
    let store = create_store(&c, &owner).await;
    let product = create_product(&c, &owner, &store, "Teapot", 2500).await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("store.shopcell");
    let key = |r: &Routed| std::fs::read_to_string(&r.service_key).unwrap().trim().to_string();
    let id: Uuid = store.parse().unwrap();
    client::export(&from.account.url, &key(&from), id, &file).await.expect("export relayed from the cell");
    let there = register(&d, &owner.email).await;
    let report = client::import(&to.account.url, &key(&to), &file, None).await.expect("import relayed to the cell");
    assert_eq!(report.cell, "c1");
    let pid = product["id"].as_str().unwrap();
    let got = d.get(&format!("/api/v1/stores/{store}/products/{pid}"), Some(&there.token)).await.expect(200).body;
    assert_eq!(got, product);
}
