use std::time::Duration;

use serde_json::{Value, json};
use shopcell::domain::time::rfc3339;

use crate::support::*;

fn base(s: &str) -> String {
    format!("/api/v1/stores/{s}/collections")
}

/// Creates a product from a full body (title, price in USD cents, tags, vendor…); returns its id.
async fn product(c: &HttpClient, u: &User, s: &str, title: &str, amount: i64, extra: Value) -> String {
    let mut body = json!({"title": title, "price": {"amount": amount, "currency": "USD"}, "status": "ACTIVE"});
    if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
        b.extend(e.clone());
    }
    let p = c.post(&format!("/api/v1/stores/{s}/products"), Some(&u.token), body).await.expect(201).body;
    p["id"].as_str().unwrap().to_string()
}

async fn collection(c: &HttpClient, u: &User, s: &str, body: Value) -> Value {
    c.post(&base(s), Some(&u.token), body).await.expect(201).body
}

/// The product ids of a collection, in its order.
async fn members(c: &HttpClient, u: &User, s: &str, id: &str) -> Vec<String> {
    let page = c.get(&format!("{}/{id}/products?limit=250", base(s)), Some(&u.token)).await.expect(200).body;
    page["data"].as_array().unwrap().iter().map(|p| p["id"].as_str().unwrap().to_string()).collect()
}

fn ids(list: &[&String]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

async fn count(c: &HttpClient, u: &User, s: &str, id: &str) -> u64 {
    c.get(&format!("{}/{id}", base(s)), Some(&u.token)).await.expect(200).body["productCount"].as_u64().unwrap()
}

fn titles(list: &Value) -> Vec<&str> {
    list["data"].as_array().unwrap().iter().map(|c| c["title"].as_str().unwrap()).collect()
}

#[tokio::test]
async fn manual_collections_add_remove_and_reorder_products() {
    let app = spawn_app().await;
    let c = &app.client;
    let u = create_user(c).await;
    let s = create_store(c, &u).await;
    let (a, b, d) = (
        product(c, &u, &s, "A", 100, json!({})).await,
        product(c, &u, &s, "B", 200, json!({})).await,
        product(c, &u, &s, "D", 300, json!({})).await,
    );

    let col = collection(c, &u, &s, json!({"title": "Summer Sale", "description": "Hot"})).await;
    assert_eq!(col["handle"], "summer-sale");
    assert_eq!(col["collectionType"], "MANUAL");
    assert_eq!(col["status"], "draft");
    assert_eq!(col["sortOrder"], "manual");
    assert_eq!(col["rules"], json!([]));
    assert_eq!(col["productCount"], 0);
    assert_eq!(col["deletedAt"], Value::Null);
    let id = col["id"].as_str().unwrap();
    // Handles are generated like products' and unique per store.
    assert_eq!(collection(c, &u, &s, json!({"title": "Summer Sale"})).await["handle"], "summer-sale-2");
    let taken = c.post(&base(&s), Some(&u.token), json!({"title": "X", "handle": "summer-sale"})).await;
    assert_eq!((taken.status.as_u16(), taken.code()), (409, "HANDLE_TAKEN"));

    let added =
        c.post(&format!("{}/{id}/products", base(&s)), Some(&u.token), json!({"productIds": [a, b]})).await.expect(200).body;
    assert_eq!(added["productCount"], 2);
    // Adding a member again skips it; new ones go to the end.
    let added =
        c.post(&format!("{}/{id}/products", base(&s)), Some(&u.token), json!({"productIds": [d, a]})).await.expect(200).body;
    assert_eq!(added["productCount"], 3);
    assert_eq!(members(c, &u, &s, id).await, ids(&[&a, &b, &d]));

    // Pages of products follow the collection order.
    let page = c.get(&format!("{}/{id}/products?limit=2&page=2", base(&s)), Some(&u.token)).await.expect(200).body;
    assert_eq!((page["total"].as_u64(), page["totalPages"].as_u64(), page["page"].as_u64()), (Some(3), Some(2), Some(2)));
    assert_eq!(page["data"][0]["id"], d.as_str());
    assert_eq!(page["data"][0]["price"]["amount"], 300);

    let order = format!("{}/{id}/products/order", base(&s));
    let moved = c.put(&order, Some(&u.token), json!({"productIds": [d, a, b]})).await.expect(200).body;
    assert_eq!(moved["productCount"], 3);
    assert_eq!(members(c, &u, &s, id).await, ids(&[&d, &a, &b]));
    // The order must list exactly the members.
    let short = c.put(&order, Some(&u.token), json!({"productIds": [d, a]})).await.expect(400);
    assert_eq!(short.body["error"]["fields"][0]["field"], "productIds");
    let stranger = product(c, &u, &s, "E", 1, json!({})).await;
    let wrong = c.put(&order, Some(&u.token), json!({"productIds": [d, a, stranger]})).await.expect(400);
    assert_eq!(wrong.body["error"]["fields"][0]["field"], "productIds[2]");
    let twice = c.put(&order, Some(&u.token), json!({"productIds": [d, a, a]})).await.expect(400);
    assert_eq!(twice.body["error"]["fields"][0]["field"], "productIds[2]");
    assert_eq!(members(c, &u, &s, id).await, ids(&[&d, &a, &b]), "failed reorders change nothing");

    let removed = c
        .post(&format!("{}/{id}/products/remove", base(&s)), Some(&u.token), json!({"productIds": [a, stranger]}))
        .await
        .expect(200)
        .body;
    assert_eq!(removed["productCount"], 2);
    assert_eq!(members(c, &u, &s, id).await, ids(&[&d, &b]));

    // A deleted product leaves every collection.
    c.delete(&format!("/api/v1/stores/{s}/products/{d}"), Some(&u.token)).await.expect(204);
    assert_eq!(members(c, &u, &s, id).await, ids(&[&b]));
    assert_eq!(count(c, &u, &s, id).await, 1);
}

#[tokio::test]
async fn a_product_of_another_store_is_refused_and_nothing_is_written() {
    let app = spawn_app().await;
    let c = &app.client;
    let u = create_user(c).await;
    let s = create_store(c, &u).await;
    // The other store has its own owner (so no plan's store limit is in play).
    let v = create_user(c).await;
    let other = create_store(c, &v).await;
    let own = product(c, &u, &s, "Own", 100, json!({})).await;
    let foreign = product(c, &v, &other, "Foreign", 100, json!({})).await;
    let col = collection(c, &u, &s, json!({"title": "Picks"})).await;
    let id = col["id"].as_str().unwrap();
    let add = format!("{}/{id}/products", base(&s));

    let a = c.post(&add, Some(&u.token), json!({"productIds": [own, foreign]})).await.expect(400);
    assert_eq!(a.code(), "VALIDATION_FAILED");
    assert_eq!(a.body["error"]["fields"], json!([{"field": "productIds[1]", "message": "no such product in this store"}]));
    let unknown = uuid::Uuid::now_v7().to_string();
    let a = c.post(&add, Some(&u.token), json!({"productIds": [unknown]})).await.expect(400);
    assert_eq!(a.body["error"]["fields"][0]["field"], "productIds[0]");
    let a = c.post(&add, Some(&u.token), json!({"productIds": ["not-a-uuid"]})).await.expect(400);
    assert_eq!(a.body["error"]["fields"][0]["field"], "productIds[0]");
    let a = c.post(&add, Some(&u.token), json!({"productIds": []})).await.expect(400);
    assert_eq!(a.body["error"]["fields"][0]["field"], "productIds");

    assert_eq!(count(c, &u, &s, id).await, 0);
    assert!(members(c, &u, &s, id).await.is_empty());
    // The other store's collection routes do not see this collection either.
    c.get(&format!("{}/{id}", base(&other)), Some(&v.token)).await.expect(404);
}

#[tokio::test]
async fn smart_collections_follow_product_changes() {
    let app = spawn_app().await;
    let c = &app.client;
    let u = create_user(c).await;
    let s = create_store(c, &u).await;
    let red_shirt = product(c, &u, &s, "Red Shirt", 2500, json!({"vendor": "Acme", "tags": ["summer"]})).await;
    let blue_shirt = product(c, &u, &s, "Blue Shirt", 6000, json!({"vendor": "Other"})).await;
    let red_hat = product(c, &u, &s, "Red Hat", 1500, json!({"vendor": "ACME", "tags": ["Winter"], "productType": "Hats"})).await;

    // All rules: title contains "shirt" and vendor equals "acme" (text compares ignore case).
    let all = collection(
        c,
        &u,
        &s,
        json!({"title": "Acme shirts", "collectionType": "smart", "rules": [
            {"field": "title", "relation": "contains", "value": "shirt"},
            {"field": "vendor", "relation": "equals", "value": "acme"}
        ]}),
    )
    .await;
    assert_eq!(all["collectionType"], "SMART");
    assert_eq!(all["disjunctive"], false);
    assert_eq!(all["rules"][1], json!({"field": "vendor", "relation": "equals", "value": "acme"}));
    assert_eq!(all["productCount"], 1, "filled from the existing products at creation");
    let all_id = all["id"].as_str().unwrap().to_string();
    assert_eq!(members(c, &u, &s, &all_id).await, ids(&[&red_shirt]));

    // Any rule: tagged summer, or some variant over 50.00.
    let any = collection(
        c,
        &u,
        &s,
        json!({"title": "Highlights", "collectionType": "SMART", "disjunctive": true, "rules": [
            {"field": "tag", "relation": "equals", "value": "summer"},
            {"field": "price", "relation": "greater_than", "value": 5000}
        ]}),
    )
    .await;
    let any_id = any["id"].as_str().unwrap().to_string();
    assert_eq!(any["productCount"], 2);
    assert_eq!(any["rules"][1]["value"], 5000);
    let mut got = members(c, &u, &s, &any_id).await;
    got.sort();
    let mut want = vec![red_shirt.clone(), blue_shirt.clone()];
    want.sort();
    assert_eq!(got, want);

    let products = format!("/api/v1/stores/{s}/products");
    // A title change brings the hat in.
    c.patch(&format!("{products}/{red_hat}"), Some(&u.token), json!({"title": "Red Shirt Hat"})).await.expect(200);
    assert_eq!(members(c, &u, &s, &all_id).await, ids(&[&red_shirt, &red_hat]));
    // A tag change takes the red shirt out of the "any" collection (its price is below 50.00).
    c.patch(&format!("{products}/{red_shirt}"), Some(&u.token), json!({"tags": []})).await.expect(200);
    assert_eq!(members(c, &u, &s, &any_id).await, ids(&[&blue_shirt]));
    // A price change takes the blue shirt out.
    c.patch(&format!("{products}/{blue_shirt}"), Some(&u.token), json!({"price": {"amount": 4000, "currency": "USD"}}))
        .await
        .expect(200);
    assert!(members(c, &u, &s, &any_id).await.is_empty());
    assert_eq!(count(c, &u, &s, &any_id).await, 0);
    // A new product joins when it matches.
    let beach = product(c, &u, &s, "Beach Towel", 900, json!({"tags": ["SUMMER"]})).await;
    assert_eq!(members(c, &u, &s, &any_id).await, ids(&[&beach]));
    // A deleted product leaves.
    c.delete(&format!("{products}/{red_hat}"), Some(&u.token)).await.expect(204);
    assert_eq!(members(c, &u, &s, &all_id).await, ids(&[&red_shirt]));
    assert_eq!(count(c, &u, &s, &all_id).await, 1);

    // New rules re-evaluate every product at once.
    let changed = c
        .patch(
            &format!("{}/{all_id}", base(&s)),
            Some(&u.token),
            json!({"rules": [{"field": "price", "relation": "less_than", "value": "1000"}]}),
        )
        .await
        .expect(200)
        .body;
    assert_eq!(changed["productCount"], 1);
    assert_eq!(members(c, &u, &s, &all_id).await, ids(&[&beach]));

    // The products of a smart collection are not picked by hand.
    let add = c.post(&format!("{}/{all_id}/products", base(&s)), Some(&u.token), json!({"productIds": [red_shirt]})).await;
    assert_eq!((add.status.as_u16(), add.code()), (422, "BUSINESS_RULE"));
    assert_eq!(members(c, &u, &s, &all_id).await, ids(&[&beach]));
}

#[tokio::test]
async fn bad_rules_are_refused_by_name_and_nothing_is_written() {
    let app = spawn_app().await;
    let c = &app.client;
    let u = create_user(c).await;
    let s = create_store(c, &u).await;
    let bad = c
        .post(
            &base(&s),
            Some(&u.token),
            json!({"title": "Bad", "collectionType": "SMART", "rules": [
                {"field": "color", "relation": "equals", "value": "red"},
                {"field": "price", "relation": "contains", "value": 100},
                {"field": "title", "relation": "near", "value": "x"},
                {"field": "price", "relation": "less_than", "value": "cheap"}
            ]}),
        )
        .await
        .expect(400);
    assert_eq!(bad.code(), "VALIDATION_FAILED");
    let fields: Vec<&str> =
        bad.body["error"]["fields"].as_array().unwrap().iter().map(|f| f["field"].as_str().unwrap()).collect();
    assert_eq!(fields, ["rules[0].field", "rules[1].relation", "rules[2].relation", "rules[3].value"]);
    assert!(bad.body["error"]["fields"][0]["message"].as_str().unwrap().contains("color"));
    let none = c.post(&base(&s), Some(&u.token), json!({"title": "Empty", "collectionType": "SMART"})).await.expect(400);
    assert_eq!(none.body["error"]["fields"][0]["field"], "rules");
    let manual_rules = c
        .post(&base(&s), Some(&u.token), json!({"title": "M", "rules": [{"field": "title", "relation": "equals", "value": "x"}]}))
        .await
        .expect(400);
    assert_eq!(manual_rules.body["error"]["fields"][0]["field"], "rules");
    assert_eq!(c.get(&base(&s), Some(&u.token)).await.expect(200).body["total"], 0);

    // A bad rule in an update leaves the stored rules as they were.
    let ok = collection(
        c,
        &u,
        &s,
        json!({"title": "Ok", "collectionType": "SMART", "rules": [{"field": "tag", "relation": "equals", "value": "x"}]}),
    )
    .await;
    let id = ok["id"].as_str().unwrap();
    let upd = c
        .patch(
            &format!("{}/{id}", base(&s)),
            Some(&u.token),
            json!({"title": "Renamed", "rules": [{"field": "weight", "relation": "equals", "value": "1"}]}),
        )
        .await
        .expect(400);
    assert_eq!(upd.body["error"]["fields"][0]["field"], "rules[0].field");
    let stored = c.get(&format!("{}/{id}", base(&s)), Some(&u.token)).await.expect(200).body;
    assert_eq!((stored["title"].as_str(), &stored["rules"]), (Some("Ok"), &ok["rules"]));
    let typed = c.patch(&format!("{}/{id}", base(&s)), Some(&u.token), json!({"collectionType": "MANUAL"})).await.expect(400);
    assert_eq!(typed.body["error"]["fields"][0]["field"], "collectionType");
}

#[tokio::test]
async fn lists_filter_sort_embed_and_soft_delete() {
    let app = spawn_app().await;
    let c = &app.client;
    let u = create_user(c).await;
    let s = create_store(c, &u).await;
    let p1 = product(c, &u, &s, "P1", 100, json!({"tags": ["t"]})).await;
    let p2 = product(c, &u, &s, "P2", 200, json!({"tags": ["t"]})).await;
    let alpha = collection(c, &u, &s, json!({"title": "Alpha", "status": "published"})).await;
    let alpha_id = alpha["id"].as_str().unwrap().to_string();
    assert!(alpha["publishedAt"].is_string());
    let beta = collection(
        c,
        &u,
        &s,
        json!({"title": "Beta", "collectionType": "SMART", "rules": [{"field": "tag", "relation": "equals", "value": "t"}]}),
    )
    .await;
    let beta_id = beta["id"].as_str().unwrap().to_string();
    let gamma = collection(c, &u, &s, json!({"title": "Gamma", "parentId": alpha_id, "position": 0})).await;
    let gamma_id = gamma["id"].as_str().unwrap().to_string();
    c.post(&format!("{}/{alpha_id}/products", base(&s)), Some(&u.token), json!({"productIds": [p2]})).await.expect(200);
    assert_eq!((alpha["position"].as_i64(), beta["position"].as_i64()), (Some(0), Some(1)), "new collections go last");

    let list = |q: &str| format!("{}?{q}", base(&s));
    let token = u.token.as_str();
    let get = |q: String| async move { c.get(&q, Some(token)).await.expect(200).body };
    let all = get(list("")).await;
    assert_eq!(titles(&all), ["Gamma", "Beta", "Alpha"], "newest first by default");
    assert_eq!((all["total"].as_u64(), all["page"].as_u64(), all["limit"].as_u64()), (Some(3), Some(1), Some(20)));
    assert_eq!(titles(&get(list("collectionType=smart")).await), ["Beta"]);
    assert_eq!(titles(&get(list("status=published")).await), ["Alpha"]);
    assert_eq!(titles(&get(list("status=draft&sortBy=title&sortOrder=asc")).await), ["Beta", "Gamma"]);
    assert_eq!(titles(&get(list("parentId=null&sortBy=title&sortOrder=asc")).await), ["Alpha", "Beta"]);
    assert_eq!(titles(&get(list(&format!("parentId={alpha_id}"))).await), ["Gamma"]);
    let searched = get(list("search=AMM")).await;
    assert_eq!((titles(&searched), searched["total"].as_u64()), (vec!["Gamma"], Some(1)));
    assert_eq!(titles(&get(list("sortBy=productCount&sortOrder=desc")).await), ["Beta", "Alpha", "Gamma"]);
    assert_eq!(titles(&get(list("sortBy=position&sortOrder=asc")).await), ["Alpha", "Gamma", "Beta"]);
    let paged = get(list("sortBy=title&sortOrder=asc&limit=2&page=2")).await;
    assert_eq!((titles(&paged), paged["totalPages"].as_u64()), (vec!["Gamma"], Some(2)));
    for bad in ["sortBy=name", "status=live", "collectionType=auto", "parentId=x", "includeDeleted=yes", "limit=251"] {
        c.get(&list(bad), Some(&u.token)).await.expect(400);
    }

    // includeProducts embeds the first products as small views.
    let embedded = get(list("includeProducts=true&sortBy=title&sortOrder=asc")).await;
    assert_eq!(
        embedded["data"][0]["products"],
        json!([{"id": p2, "title": "P2", "handle": "p2", "status": "ACTIVE", "price": {"amount": 200, "currency": "USD"}}])
    );
    assert_eq!(embedded["data"][1]["products"].as_array().unwrap().len(), 2);
    assert!(all["data"][0].get("products").is_none(), "not embedded unless asked");
    let _ = p1;

    // A parent cannot move under its own child.
    let cycle = c.patch(&format!("{}/{alpha_id}", base(&s)), Some(&u.token), json!({"parentId": gamma_id})).await.expect(400);
    assert_eq!(cycle.body["error"]["fields"][0]["field"], "parentId");

    // Soft delete: gone from lists and reads, listed with includeDeleted, children move up.
    c.delete(&format!("{}/{beta_id}", base(&s)), Some(&u.token)).await.expect(204);
    c.delete(&format!("{}/{alpha_id}", base(&s)), Some(&u.token)).await.expect(204);
    c.delete(&format!("{}/{alpha_id}", base(&s)), Some(&u.token)).await.expect(404);
    assert_eq!(titles(&get(list("")).await), ["Gamma"]);
    assert_eq!(get(list("")).await["total"], 1);
    c.get(&format!("{}/{beta_id}", base(&s)), Some(&u.token)).await.expect(404);
    let deleted = get(format!("{}/{beta_id}?includeDeleted=true", base(&s))).await;
    assert!(deleted["deletedAt"].is_string());
    assert_eq!(deleted["productCount"], 0, "a deleted collection lets go of its products");
    let with_deleted = get(list("includeDeleted=true&sortBy=title&sortOrder=asc")).await;
    assert_eq!((titles(&with_deleted), with_deleted["total"].as_u64()), (vec!["Alpha", "Beta", "Gamma"], Some(3)));
    assert_eq!(get(format!("{}/{gamma_id}", base(&s))).await["parentId"], Value::Null);
    assert_eq!(titles(&get(list("parentId=null")).await), ["Gamma"]);
    // The deleted collection's handle is free again; a smart collection no longer follows products.
    assert_eq!(collection(c, &u, &s, json!({"title": "Alpha"})).await["handle"], "alpha");
    product(c, &u, &s, "P3", 300, json!({"tags": ["t"]})).await;
    assert_eq!(get(format!("{}/{beta_id}?includeDeleted=true", base(&s))).await["productCount"], 0);
}

#[tokio::test]
async fn product_sort_orders_follow_product_changes() {
    let app = spawn_app().await;
    let c = &app.client;
    let u = create_user(c).await;
    let s = create_store(c, &u).await;
    let mid = product(c, &u, &s, "Mid", 500, json!({})).await;
    let cheap = product(c, &u, &s, "Cheap", 100, json!({})).await;
    let dear = product(c, &u, &s, "Dear", 900, json!({})).await;
    let col = collection(c, &u, &s, json!({"title": "By price", "sortOrder": "price-asc"})).await;
    let id = col["id"].as_str().unwrap();
    c.post(&format!("{}/{id}/products", base(&s)), Some(&u.token), json!({"productIds": [mid, cheap, dear]})).await.expect(200);
    assert_eq!(members(c, &u, &s, id).await, ids(&[&cheap, &mid, &dear]));
    c.patch(
        &format!("/api/v1/stores/{s}/products/{cheap}"),
        Some(&u.token),
        json!({"price": {"amount": 1000, "currency": "USD"}}),
    )
    .await
    .expect(200);
    assert_eq!(members(c, &u, &s, id).await, ids(&[&mid, &dear, &cheap]));
    let desc = c.patch(&format!("{}/{id}", base(&s)), Some(&u.token), json!({"sortOrder": "alpha-desc"})).await.expect(200);
    assert_eq!(desc.body["sortOrder"], "alpha-desc");
    assert_eq!(members(c, &u, &s, id).await, ids(&[&mid, &dear, &cheap]));
    // Reordering by hand needs the manual order; switching keeps the order on screen.
    let refused =
        c.put(&format!("{}/{id}/products/order", base(&s)), Some(&u.token), json!({"productIds": [cheap, mid, dear]})).await;
    assert_eq!((refused.status.as_u16(), refused.code()), (422, "BUSINESS_RULE"));
    c.patch(&format!("{}/{id}", base(&s)), Some(&u.token), json!({"sortOrder": "manual"})).await.expect(200);
    assert_eq!(members(c, &u, &s, id).await, ids(&[&mid, &dear, &cheap]));
    c.put(&format!("{}/{id}/products/order", base(&s)), Some(&u.token), json!({"productIds": [cheap, mid, dear]}))
        .await
        .expect(200);
    assert_eq!(members(c, &u, &s, id).await, ids(&[&cheap, &mid, &dear]));
    let bad = c.patch(&format!("{}/{id}", base(&s)), Some(&u.token), json!({"sortOrder": "best-selling"})).await.expect(400);
    assert_eq!(bad.body["error"]["fields"][0]["field"], "sortOrder");
}

/// The RFC 3339 time `ms` after now by the app's clock.
fn in_ms(app: &TestApp, ms: i64) -> String {
    rfc3339(app.clock.now_ms() + ms)
}

/// Waits for the publisher to act on a collection that is due (it is woken by the clock, so
/// this takes milliseconds); answers the collection's body.
async fn published(c: &HttpClient, u: &User, s: &str, id: &str) -> Value {
    get_until(c, &format!("{}/{id}", base(s)), Some(&u.token), &[], |b| b["status"] == "published").await
}

/// A minute: how far ahead the tests schedule, and how far they move the clock to get there.
const MINUTE_MS: i64 = 60_000;
const PAST_A_MINUTE: Duration = Duration::from_millis(MINUTE_MS as u64 + 1_000);

#[tokio::test]
async fn scheduled_collections_are_published_when_due() {
    let app = spawn_app().await;
    let c = &app.client;
    let u = create_user(c).await;
    let s = create_store(c, &u).await;
    let col = collection(c, &u, &s, json!({"title": "Launch"})).await;
    let id = col["id"].as_str().unwrap();
    let schedule = format!("{}/{id}/schedule", base(&s));

    let past = c.post(&schedule, Some(&u.token), json!({"publishAt": in_ms(&app, -MINUTE_MS)})).await.expect(400);
    assert_eq!(past.body["error"]["fields"][0]["field"], "publishAt");
    let garbage = c.post(&schedule, Some(&u.token), json!({"publishAt": "tomorrow"})).await.expect(400);
    assert_eq!(garbage.body["error"]["fields"][0]["field"], "publishAt");

    let at = in_ms(&app, MINUTE_MS);
    let scheduled = c.post(&schedule, Some(&u.token), json!({"publishAt": at})).await.expect(200).body;
    assert_eq!((scheduled["status"].as_str(), scheduled["publishAt"].as_str()), (Some("scheduled"), Some(at.as_str())));
    assert_eq!(c.get(&format!("{}?status=scheduled", base(&s)), Some(&u.token)).await.body["total"], 1);

    // Published once the clock passes the time, not before.
    app.clock.advance(Duration::from_millis(MINUTE_MS as u64 / 2));
    assert_eq!(c.get(&format!("{}/{id}", base(&s)), Some(&u.token)).await.body["status"], "scheduled");
    app.clock.advance(PAST_A_MINUTE);
    let body = published(c, &u, &s, id).await;
    assert_eq!(body["publishedAt"].as_str(), Some(at.as_str()));
    assert_eq!(body["publishAt"], Value::Null);
    assert_eq!(c.get(&format!("{}?status=scheduled", base(&s)), Some(&u.token)).await.body["total"], 0);
    assert_eq!(c.get(&format!("{}?status=published", base(&s)), Some(&u.token)).await.body["total"], 1);

    // Creating with publishAt schedules; a draft cannot carry one.
    let later = collection(c, &u, &s, json!({"title": "Later", "publishAt": in_ms(&app, 60 * MINUTE_MS)})).await;
    assert_eq!(later["status"], "scheduled");
    let mixed = c
        .post(&base(&s), Some(&u.token), json!({"title": "Mixed", "status": "draft", "publishAt": in_ms(&app, MINUTE_MS)}))
        .await
        .expect(400);
    assert_eq!(mixed.body["error"]["fields"][0]["field"], "publishAt");
    // Publishing by hand drops the schedule.
    let now =
        c.patch(&format!("{}/{}", base(&s), later["id"].as_str().unwrap()), Some(&u.token), json!({"status": "published"})).await;
    assert_eq!((now.body["status"].as_str(), &now.body["publishAt"]), (Some("published"), &Value::Null));
}

#[tokio::test]
async fn a_schedule_survives_a_restart() {
    let mut app = spawn_app().await;
    let u = create_user(&app.client).await;
    let s = create_store(&app.client, &u).await;
    let col = collection(&app.client, &u, &s, json!({"title": "Overnight"})).await;
    let id = col["id"].as_str().unwrap().to_string();
    let at = in_ms(&app, MINUTE_MS);
    app.client.post(&format!("{}/{id}/schedule", base(&s)), Some(&u.token), json!({"publishAt": at})).await.expect(200);
    app.stop().await;
    // Due while nothing runs: the publisher catches up when the cell opens again.
    app.clock.advance(PAST_A_MINUTE);
    let again = spawn_app_in_on(app.dir.path(), app.clock.clone()).await;
    let body = published(&again.client, &u, &s, &id).await;
    assert_eq!(body["publishedAt"].as_str(), Some(at.as_str()));
}

#[tokio::test]
async fn collections_markets_and_catalogs_move_with_their_store() {
    let app = spawn_app_with_cells(&["cell-1", "cell-2"]).await;
    let c = &app.client;
    let u = create_user(c).await;
    let s = create_store(c, &u).await;
    let shirt = product(c, &u, &s, "Shirt", 2500, json!({"tags": ["summer"]})).await;
    let hat = product(c, &u, &s, "Hat", 1500, json!({})).await;
    let smart = collection(
        c,
        &u,
        &s,
        json!({"title": "Summer", "collectionType": "SMART", "rules": [{"field": "tag", "relation": "equals", "value": "summer"}]}),
    )
    .await;
    let smart_id = smart["id"].as_str().unwrap().to_string();
    let manual = collection(c, &u, &s, json!({"title": "Picks"})).await;
    let manual_id = manual["id"].as_str().unwrap().to_string();
    c.post(&format!("{}/{manual_id}/products", base(&s)), Some(&u.token), json!({"productIds": [hat, shirt]})).await.expect(200);
    let market = c
        .post(&format!("/api/v1/stores/{s}/markets"), Some(&u.token), json!({"name": "US", "countries": ["US"]}))
        .await
        .expect(201)
        .body;
    let catalog = c
        .post(
            &format!("/api/v1/stores/{s}/catalogs"),
            Some(&u.token),
            json!({"name": "All", "marketId": market["id"], "selection": "ALL"}),
        )
        .await
        .expect(201)
        .body;
    let catalog_id = catalog["id"].as_str().unwrap();
    c.post(&format!("/api/v1/stores/{s}/catalogs/{catalog_id}/products/remove"), Some(&u.token), json!({"productIds": [hat]}))
        .await
        .expect(200);
    let launch = collection(c, &u, &s, json!({"title": "Launch", "publishAt": in_ms(&app, MINUTE_MS)})).await;
    let launch_id = launch["id"].as_str().unwrap().to_string();

    let node = app.server.as_ref().unwrap().node.clone();
    let account = node.account.clone().unwrap();
    let store = uuid::Uuid::parse_str(&s).unwrap();
    let from = account.locate(store).unwrap().unwrap();
    let to = if from == "cell-1" { "cell-2" } else { "cell-1" };
    let key = account.service_key.clone();
    let refused = c
        .send(
            hyper::Method::POST,
            "/internal/v1/moves",
            None,
            &[("x-shopcell-service", key.as_str())],
            Some(bytes::Bytes::from(json!({"storeId": s, "to": to, "chunkBytes": 0}).to_string())),
        )
        .await;
    assert_eq!(refused.status, 400, "{}", refused.body);
    assert_eq!(refused.body["error"]["fields"][0]["field"], "chunkBytes");
    assert_eq!(account.locate(store).unwrap().as_deref(), Some(from.as_str()), "a refused move moves nothing");
    let moved = c
        .send(
            hyper::Method::POST,
            "/internal/v1/moves",
            None,
            &[("x-shopcell-service", key.as_str())],
            // Chunks of a row or two: every table crosses in many chunks.
            Some(bytes::Bytes::from(json!({"storeId": s, "to": to, "chunkBytes": 64}).to_string())),
        )
        .await;
    assert!(moved.status.is_success(), "move: {} {}", moved.status, moved.body);
    assert_eq!(account.locate(store).unwrap().as_deref(), Some(to));

    // Everything is served from the new cell as it was.
    assert_eq!(members(c, &u, &s, &manual_id).await, ids(&[&hat, &shirt]));
    assert_eq!(members(c, &u, &s, &smart_id).await, ids(&[&shirt]));
    let cat = c.get(&format!("/api/v1/stores/{s}/catalogs/{catalog_id}"), Some(&u.token)).await.expect(200).body;
    assert_eq!(cat["products"], 1);
    let taken = c.post(&format!("/api/v1/stores/{s}/markets"), Some(&u.token), json!({"name": "X", "countries": ["US"]})).await;
    assert_eq!(taken.code(), "COUNTRY_TAKEN");
    // Smart membership keeps following product writes there, and the schedule is kept.
    c.patch(&format!("/api/v1/stores/{s}/products/{hat}"), Some(&u.token), json!({"tags": ["summer"]})).await.expect(200);
    assert_eq!(members(c, &u, &s, &smart_id).await, ids(&[&shirt, &hat]));
    app.clock.advance(PAST_A_MINUTE);
    published(c, &u, &s, &launch_id).await;
}
