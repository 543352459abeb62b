//! Storefront reads of the catalog: anonymous shoppers with a store's publishable key search and
//! read ACTIVE products and published collections only; members keep seeing everything.

use hyper::Method;
use serde_json::{Value, json};

use crate::support::*;

/// A GET as an anonymous shopper presenting `key`.
async fn shop(c: &HttpClient, path: &str, key: &str) -> Answer {
    c.send(Method::GET, path, None, &[("x-publishable-key", key)], None).await
}

async fn new_key(c: &HttpClient, owner: &User, store: &str) -> (String, String) {
    let k = c
        .post(&format!("/api/v1/stores/{store}/publishable-keys"), Some(&owner.token), json!({"environment": "live"}))
        .await
        .expect(201)
        .body;
    (k["id"].as_str().unwrap().to_string(), k["key"].as_str().unwrap().to_string())
}

async fn product(c: &HttpClient, u: &User, store: &str, title: &str, status: &str) -> String {
    let body = json!({"title": title, "price": {"amount": 1000, "currency": "USD"}, "status": status});
    let p = c.post(&format!("/api/v1/stores/{store}/products"), Some(&u.token), body).await.expect(201).body;
    assert_eq!(p["status"], status);
    p["id"].as_str().unwrap().to_string()
}

fn ids(body: &Value) -> Vec<&str> {
    body["data"].as_array().expect("data").iter().map(|p| p["id"].as_str().expect("id")).collect()
}

#[tokio::test]
async fn shoppers_search_active_products_only() {
    let app = spawn_app().await;
    let c = &app.client;
    let owner = create_user(c).await;
    let s = create_store(c, &owner).await;
    let shirt = product(c, &owner, &s, "Linen shirt", "ACTIVE").await;
    let trousers = product(c, &owner, &s, "Linen trousers", "DRAFT").await;
    let hat = product(c, &owner, &s, "Linen hat", "ARCHIVED").await;
    let (key_id, key) = new_key(c, &owner, &s).await;
    let search = format!("/api/v1/stores/{s}/products/search?q=linen");
    get_until(c, &search, Some(&owner.token), &[], |b| b["total"] == 3).await;

    let found = shop(c, &search, &key).await.expect(200).body;
    assert_eq!((found["total"].as_u64(), ids(&found)), (Some(1), vec![shirt.as_str()]));
    assert_eq!(found["data"][0]["title"], "Linen shirt");
    for q in ["q=trousers", "q=linen%20hat", "q=linen&searchBy=title&sort=title_asc", "q=linen&search=trousers"] {
        let b = shop(c, &format!("/api/v1/stores/{s}/products/search?{q}"), &key).await.expect(200).body;
        assert!(ids(&b).iter().all(|id| *id == shirt), "{q}: {b}");
        assert!(!ids(&b).contains(&trousers.as_str()) && !ids(&b).contains(&hat.as_str()));
    }
    // The member's answer to the same query is their own, not the shopper's (nor a cached copy of it).
    let member = c.get(&search, Some(&owner.token)).await.expect(200).body;
    assert_eq!(member["total"], 3);
    // A shopper's draft product is a 404, like a missing one.
    let missing = shop(c, &format!("/api/v1/stores/{s}/products/{trousers}"), &key).await.expect(404);
    assert_eq!(missing.code(), "NOT_FOUND");

    // A product taken off sale leaves the shopper's answers at once, before its document follows.
    c.patch(&format!("/api/v1/stores/{s}/products/{shirt}"), Some(&owner.token), json!({"status": "DRAFT"})).await.expect(200);
    let after = shop(c, &search, &key).await.expect(200).body;
    assert_eq!(after["data"], json!([]), "{after}");
    get_until(c, &search, None, &[("x-publishable-key", &key)], |b| b["total"] == 0).await;
    c.patch(&format!("/api/v1/stores/{s}/products/{hat}"), Some(&owner.token), json!({"status": "ACTIVE"})).await.expect(200);
    let b = get_until(c, &search, None, &[("x-publishable-key", &key)], |b| ids(b) == [hat.as_str()]).await;
    assert_eq!(b["total"], 1);

    // Without credentials, with a bogus key, with a revoked key.
    assert_eq!(c.get(&search, None).await.expect(401).code(), "UNAUTHORIZED");
    let bogus = format!("pk_live_{}", "c".repeat(32));
    assert_eq!(shop(c, &search, &bogus).await.expect(401).code(), "INVALID_PUBLISHABLE_KEY");
    c.delete(&format!("/api/v1/stores/{s}/publishable-keys/{key_id}"), Some(&owner.token)).await.expect(204);
    assert_eq!(shop(c, &search, &key).await.expect(401).code(), "INVALID_PUBLISHABLE_KEY");
    // Writes stay closed to keys.
    let (_, key2) = new_key(c, &owner, &s).await;
    let write = c
        .send(Method::PATCH, &format!("/api/v1/stores/{s}/products/{hat}"), None, &[("x-publishable-key", key2.as_str())], None)
        .await;
    assert_eq!(write.status.as_u16(), 401);
}

#[tokio::test]
async fn shoppers_see_published_collections_with_their_active_products() {
    let app = spawn_app().await;
    let c = &app.client;
    let owner = create_user(c).await;
    let s = create_store(c, &owner).await;
    let base = format!("/api/v1/stores/{s}/collections");
    let a1 = product(c, &owner, &s, "Oak table", "ACTIVE").await;
    let d1 = product(c, &owner, &s, "Oak bench", "DRAFT").await;
    let a2 = product(c, &owner, &s, "Oak stool", "ACTIVE").await;
    let x1 = product(c, &owner, &s, "Oak shelf", "ARCHIVED").await;
    let a3 = product(c, &owner, &s, "Oak chair", "ACTIVE").await;
    let make = |title: &str, status: &str| json!({"title": title, "status": status});
    let published = c.post(&base, Some(&owner.token), make("Oak", "published")).await.expect(201).body;
    let pid = published["id"].as_str().unwrap().to_string();
    let members = json!({"productIds": [a1, d1, a2, x1, a3]});
    c.post(&format!("{base}/{pid}/products"), Some(&owner.token), members.clone()).await.expect(200);
    let draft = c.post(&base, Some(&owner.token), make("Upcoming", "draft")).await.expect(201).body;
    let did = draft["id"].as_str().unwrap().to_string();
    c.post(&format!("{base}/{did}/products"), Some(&owner.token), members).await.expect(200);
    let future = rfc3339_in(&app, 3600);
    let scheduled = c.post(&base, Some(&owner.token), json!({"title": "Later", "publishAt": future})).await.expect(201).body;
    assert_eq!(scheduled["status"], "scheduled");
    let sid = scheduled["id"].as_str().unwrap().to_string();
    let gone = c.post(&base, Some(&owner.token), make("Gone", "published")).await.expect(201).body;
    let gid = gone["id"].as_str().unwrap().to_string();
    c.delete(&format!("{base}/{gid}"), Some(&owner.token)).await.expect(204);
    let (key_id, key) = new_key(c, &owner, &s).await;

    // The list: published, live collections only, whatever the shopper asks for.
    for q in ["", "?status=draft", "?includeDeleted=true", "?status=scheduled&includeDeleted=true"] {
        let list = shop(c, &format!("{base}{q}"), &key).await.expect(200).body;
        assert_eq!((list["total"].as_u64(), ids(&list)), (Some(1), vec![pid.as_str()]), "{q}: {list}");
        assert_eq!(list["data"][0]["productCount"], 3, "ACTIVE products only");
    }
    let embedded = shop(c, &format!("{base}?includeProducts=true"), &key).await.expect(200).body;
    let shown: Vec<&str> =
        embedded["data"][0]["products"].as_array().unwrap().iter().map(|p| p["id"].as_str().unwrap()).collect();
    assert_eq!(shown, [a1.as_str(), a2.as_str(), a3.as_str()]);
    // Members still see every live collection, and every product in them.
    let all = c.get(&base, Some(&owner.token)).await.expect(200).body;
    assert_eq!(all["total"], 3);
    let mine = c.get(&format!("{base}/{pid}"), Some(&owner.token)).await.expect(200).body;
    assert_eq!(mine["productCount"], 5);

    // One collection.
    let one = shop(c, &format!("{base}/{pid}"), &key).await.expect(200).body;
    assert_eq!((one["title"].as_str(), one["productCount"].as_u64()), (Some("Oak"), Some(3)));
    for hidden in [&did, &sid, &gid] {
        for q in ["", "?includeDeleted=true"] {
            let a = shop(c, &format!("{base}/{hidden}{q}"), &key).await.expect(404);
            assert_eq!(a.code(), "NOT_FOUND");
        }
    }
    c.get(&format!("{base}/{gid}?includeDeleted=true"), Some(&owner.token)).await.expect(200);

    // Its products: the ACTIVE ones in the collection's order, paged among themselves.
    let products = format!("{base}/{pid}/products");
    let page1 = shop(c, &format!("{products}?limit=2"), &key).await.expect(200).body;
    assert_eq!(ids(&page1), [a1.as_str(), a2.as_str()]);
    assert_eq!((page1["total"].as_u64(), page1["totalPages"].as_u64()), (Some(3), Some(2)));
    let page2 = shop(c, &format!("{products}?limit=2&page=2"), &key).await.expect(200).body;
    assert_eq!(ids(&page2), [a3.as_str()]);
    assert_eq!(page2["data"][0]["status"], "ACTIVE");
    let full = c.get(&products, Some(&owner.token)).await.expect(200).body;
    assert_eq!((full["total"].as_u64(), ids(&full).len()), (Some(5), 5));
    for hidden in [&did, &sid, &gid] {
        shop(c, &format!("{base}/{hidden}/products"), &key).await.expect(404);
    }
    // A product taken off sale leaves the shopper's view of the collection.
    c.patch(&format!("/api/v1/stores/{s}/products/{a2}"), Some(&owner.token), json!({"status": "ARCHIVED"})).await.expect(200);
    let now = shop(c, &products, &key).await.expect(200).body;
    assert_eq!((ids(&now), now["total"].as_u64()), (vec![a1.as_str(), a3.as_str()], Some(2)));
    assert_eq!(shop(c, &format!("{base}/{pid}"), &key).await.expect(200).body["productCount"], 2);
    shop(c, &format!("/api/v1/stores/{s}/products/{d1}"), &key).await.expect(404);

    // Another store's key, no key, a revoked key; writes stay closed.
    let s2 = create_store(c, &owner).await;
    let (_, other) = new_key(c, &owner, &s2).await;
    assert_eq!(shop(c, &base, &other).await.expect(404).code(), "NOT_FOUND");
    assert_eq!(c.get(&base, None).await.expect(401).code(), "UNAUTHORIZED");
    assert_eq!(c.get(&products, None).await.expect(401).code(), "UNAUTHORIZED");
    let create = c
        .send(Method::POST, &base, None, &[("x-publishable-key", key.as_str())], Some(bytes::Bytes::from(r#"{"title":"x"}"#)))
        .await;
    assert_eq!(create.status.as_u16(), 401);
    c.delete(&format!("/api/v1/stores/{s}/publishable-keys/{key_id}"), Some(&owner.token)).await.expect(204);
    for path in [&base, &format!("{base}/{pid}"), &products] {
        assert_eq!(shop(c, path, &key).await.expect(401).code(), "INVALID_PUBLISHABLE_KEY");
    }
    assert_eq!(c.get(&base, Some(&owner.token)).await.expect(200).body["total"], 3, "nothing was written");
}

/// An RFC 3339 time `seconds` from now by `app`'s clock.
fn rfc3339_in(app: &TestApp, seconds: i64) -> String {
    shopcell::domain::time::rfc3339(app.clock.now_ms() + seconds * 1000)
}

#[tokio::test]
async fn repeated_reads_follow_every_write() {
    // Pages and search answers are kept between requests: each must still show a write at once
    // (a list page) or as soon as the index has it (a search).
    let app = spawn_app().await;
    let c = &app.client;
    let owner = create_user(c).await;
    let s = create_store(c, &owner).await;
    let cup = product(c, &owner, &s, "Tea cup", "ACTIVE").await;
    let (_, key) = new_key(c, &owner, &s).await;
    let list = format!("/api/v1/stores/{s}/products?sortBy=price&sortOrder=asc");
    let search = format!("/api/v1/stores/{s}/products/search?q=tea");
    for _ in 0..2 {
        assert_eq!(shop(c, &list, &key).await.expect(200).body["data"][0]["title"], "Tea cup");
    }
    get_until(c, &search, Some(&owner.token), &[], |b| b["total"] == 1).await;
    shop(c, &search, &key).await.expect(200);

    c.patch(&format!("/api/v1/stores/{s}/products/{cup}"), Some(&owner.token), json!({"title": "Tea mug"})).await.expect(200);
    let page = shop(c, &list, &key).await.expect(200).body;
    assert_eq!((page["total"].as_u64(), page["data"][0]["title"].as_str()), (Some(1), Some("Tea mug")));
    let found = shop(c, &search, &key).await.expect(200).body;
    assert_eq!(found["data"][0]["title"], "Tea mug", "the stored view is read afresh after a write");

    let pot = product(c, &owner, &s, "Tea pot", "ACTIVE").await;
    assert_eq!(shop(c, &list, &key).await.expect(200).body["total"], 2);
    let b = get_until(c, &search, None, &[("x-publishable-key", &key)], |b| b["total"] == 2).await;
    assert!(ids(&b).contains(&pot.as_str()));
    c.delete(&format!("/api/v1/stores/{s}/products/{pot}"), Some(&owner.token)).await.expect(204);
    assert_eq!(shop(c, &list, &key).await.expect(200).body["total"], 1);
}
