//! Publishable keys: created once in full, stored hashed, listed masked, validated, revoked; and
//! the storefront access they give anonymous shoppers.

use bytes::Bytes;
use hyper::Method;
use redb::{ReadableDatabase, ReadableTable};
use serde_json::{Value, json};
use shopcell::account::publishable::key_digest;
use shopcell::storage::tables::PUBLISHABLE_KEYS;

use crate::support::*;

fn keys(store: &str) -> String {
    format!("/api/v1/stores/{store}/publishable-keys")
}

async fn create_key(c: &HttpClient, user: &User, store: &str, env: &str) -> Value {
    c.post(&keys(store), Some(&user.token), json!({"environment": env})).await.expect(201).body
}

async fn validate(c: &HttpClient, key: &str) -> Value {
    c.post("/api/v1/auth/publishable-keys/validate", None, json!({"key": key})).await.expect(200).body
}

/// A GET as an anonymous shopper presenting `key`.
async fn shop(c: &HttpClient, path: &str, key: &str) -> Answer {
    c.send(Method::GET, path, None, &[("x-publishable-key", key)], None).await
}

fn is_key(key: &str, prefix: &str) -> bool {
    key.strip_prefix(prefix).is_some_and(|rest| rest.len() == 32 && rest.bytes().all(|b| b.is_ascii_alphanumeric()))
}

#[tokio::test]
async fn keys_are_shown_once_stored_hashed_listed_masked_and_revoked() {
    let app = spawn_app().await;
    let c = &app.client;
    let owner = create_user(c).await;
    let s = create_store(c, &owner).await;

    let live = create_key(c, &owner, &s, "live").await;
    let key = live["key"].as_str().unwrap().to_string();
    assert!(is_key(&key, "pk_live_"), "{key}");
    assert_eq!(live["maskedKey"], format!("pk_live_…{}", &key[key.len() - 4..]));
    assert_eq!(live["environment"], "live");
    assert!(live["createdAt"].as_str().is_some_and(|t| t.ends_with('Z')));
    let test = create_key(c, &owner, &s, "test").await;
    let test_key = test["key"].as_str().unwrap().to_string();
    assert!(is_key(&test_key, "pk_test_"), "{test_key}");
    let other = create_key(c, &owner, &s, "live").await;
    assert_ne!(other["key"], live["key"]);

    // Listed masked, never in full.
    let list = c.get(&keys(&s), Some(&owner.token)).await.expect(200);
    assert!(!String::from_utf8_lossy(&list.raw).contains(&key));
    assert_eq!(list.body["total"], 3);
    let newest = &list.body["data"][0];
    assert_eq!(newest["id"], other["id"]);
    assert!(newest.get("key").is_none());
    assert_eq!(newest["revokedAt"], Value::Null);
    let ids: Vec<&Value> = list.body["data"].as_array().unwrap().iter().map(|k| &k["id"]).collect();
    assert_eq!(ids, [&other["id"], &test["id"], &live["id"]]);

    // Stored as a SHA-256 digest: the row is keyed by it and nothing stored holds the key.
    let node = &app.server.as_ref().unwrap().node;
    let db = &node.account.as_ref().unwrap().db;
    {
        let txn = db.begin_read().unwrap();
        let t = txn.open_table(PUBLISHABLE_KEYS).unwrap();
        assert!(t.get(key_digest(&key).as_slice()).unwrap().is_some());
        for row in t.iter().unwrap() {
            let (k, v) = row.unwrap();
            for secret in [&key, &test_key] {
                let s = secret.as_bytes();
                assert!(!k.value().windows(s.len()).any(|w| w == s) && !v.value().windows(s.len()).any(|w| w == s));
            }
        }
    }

    assert_eq!(validate(c, &key).await, json!({"valid": true, "storeId": s, "type": "PUBLISHABLE", "environment": "LIVE"}));
    assert_eq!(validate(c, &test_key).await["environment"], "TEST");
    let unknown = format!("pk_live_{}", "A".repeat(32));
    for bad in [unknown.as_str(), "hello", "", "pk_live_short", &key.to_uppercase()] {
        assert_eq!(validate(c, bad).await, json!({"valid": false}), "{bad}");
    }
    let missing = c.post("/api/v1/auth/publishable-keys/validate", None, json!({})).await.expect(400);
    assert_eq!(missing.code(), "VALIDATION_FAILED");
    assert_eq!(missing.body["error"]["fields"], json!([{"field": "key", "message": "is required"}]));

    // Revoked: invalid at once, still listed with its revocation time.
    let id = live["id"].as_str().unwrap();
    c.delete(&format!("{}/{id}", keys(&s)), Some(&owner.token)).await.expect(204);
    assert_eq!(validate(c, &key).await, json!({"valid": false}));
    let list = c.get(&keys(&s), Some(&owner.token)).await.expect(200).body;
    let row = list["data"].as_array().unwrap().iter().find(|k| k["id"] == id).unwrap().clone();
    let revoked_at = row["revokedAt"].as_str().unwrap().to_string();
    c.delete(&format!("{}/{id}", keys(&s)), Some(&owner.token)).await.expect(204);
    let list = c.get(&keys(&s), Some(&owner.token)).await.expect(200).body;
    let row = list["data"].as_array().unwrap().iter().find(|k| k["id"] == id).unwrap().clone();
    assert_eq!(row["revokedAt"], revoked_at.as_str(), "revoking twice keeps the first time");
    assert_eq!(validate(c, &test_key).await["valid"], true, "other keys are untouched");
    c.delete(&format!("{}/00000000-0000-7000-8000-000000000000", keys(&s)), Some(&owner.token)).await.expect(404);

    let bad = c.post(&keys(&s), Some(&owner.token), json!({"environment": "prod"})).await.expect(400);
    assert_eq!(bad.body["error"]["fields"][0]["field"], "environment");
    c.post(&keys(&s), Some(&owner.token), json!({"environment": "live", "name": "x"})).await.expect(400);
    assert_eq!(c.get(&keys(&s), Some(&owner.token)).await.body["total"], 3, "failed requests wrote nothing");

    // A key of another store is not listed or revocable here (a second store: `create_store`
    // moves the owner to a plan that allows it).
    let s2 = create_store(c, &owner).await;
    c.delete(&format!("{}/{}", keys(&s2), test["id"].as_str().unwrap()), Some(&owner.token)).await.expect(404);
    assert_eq!(c.get(&keys(&s2), Some(&owner.token)).await.expect(200).body["total"], 0);
}

#[tokio::test]
async fn shoppers_with_the_stores_key_see_only_active_products() {
    let app = spawn_app().await;
    let c = &app.client;
    let owner = create_user(c).await;
    let stranger = create_user(c).await;
    let s = create_store(c, &owner).await;
    let s2 = create_store(c, &owner).await;
    let active = create_product(c, &owner, &s, "Hat", 1500).await;
    let draft = c
        .post(
            &format!("/api/v1/stores/{s}/products"),
            Some(&owner.token),
            json!({"title": "Secret", "price": {"amount": 100, "currency": "USD"}}),
        )
        .await
        .expect(201)
        .body;
    assert_eq!(draft["status"], "DRAFT");
    let key = create_key(c, &owner, &s, "live").await["key"].as_str().unwrap().to_string();
    let test_key = create_key(c, &owner, &s, "test").await["key"].as_str().unwrap().to_string();
    let other_key = create_key(c, &owner, &s2, "live").await["key"].as_str().unwrap().to_string();
    let products = format!("/api/v1/stores/{s}/products");
    let one = |p: &Value| format!("{products}/{}", p["id"].as_str().unwrap());

    for k in [&key, &test_key] {
        let list = shop(c, &products, k).await.expect(200).body;
        assert_eq!(list["total"], 1);
        assert_eq!(list["data"][0]["id"], active["id"]);
        // Asking for drafts changes nothing.
        let list = shop(c, &format!("{products}?status=draft"), k).await.expect(200).body;
        assert_eq!((list["total"].as_u64(), list["data"][0]["id"].as_str()), (Some(1), active["id"].as_str()));
        assert_eq!(shop(c, &one(&active), k).await.expect(200).body["title"], "Hat");
        assert_eq!(shop(c, &one(&draft), k).await.expect(404).code(), "NOT_FOUND");
    }
    // Members still see every status.
    assert_eq!(c.get(&products, Some(&owner.token)).await.expect(200).body["total"], 2);
    c.get(&one(&draft), Some(&owner.token)).await.expect(200);

    // Another store's key: the 404 of a store that does not exist.
    let wrong = shop(c, &products, &other_key).await.expect(404);
    let missing = shop(c, "/api/v1/stores/00000000-0000-7000-8000-000000000000/products", &key).await.expect(404);
    assert_eq!(wrong.body, missing.body);
    // No credentials, or a key that is not one.
    assert_eq!(c.get(&products, None).await.expect(401).code(), "UNAUTHORIZED");
    let bogus = format!("pk_live_{}", "b".repeat(32));
    for k in [bogus.as_str(), "nonsense"] {
        assert_eq!(shop(c, &products, k).await.expect(401).code(), "INVALID_PUBLISHABLE_KEY");
    }
    // A key opens storefront routes only.
    let create = c
        .send(
            Method::POST,
            &products,
            None,
            &[("x-publishable-key", &key)],
            Some(Bytes::from(r#"{"title":"x","price":{"amount":1,"currency":"USD"}}"#)),
        )
        .await;
    assert_eq!((create.status.as_u16(), create.code()), (401, "UNAUTHORIZED"));
    shop(c, &format!("/api/v1/stores/{s}"), &key).await.expect(401);
    shop(c, &format!("{}/variants", one(&active)), &key).await.expect(401);
    // A signed-in non-member is a shopper with the key, and a stranger without it.
    let as_shopper =
        c.send(Method::GET, &products, Some(&stranger.token), &[("x-publishable-key", &key)], None).await.expect(200).body;
    assert_eq!(as_shopper["total"], 1);
    c.get(&products, Some(&stranger.token)).await.expect(404);
    // A member's token wins over a key: the member view.
    let member = c.send(Method::GET, &products, Some(&owner.token), &[("x-publishable-key", &key)], None).await.expect(200);
    assert_eq!(member.body["total"], 2);

    // Revocation applies at once in `serve`.
    let keys_list = c.get(&keys(&s), Some(&owner.token)).await.expect(200).body;
    let live_id = keys_list["data"].as_array().unwrap().iter().find(|k| k["environment"] == "live").unwrap()["id"].clone();
    c.delete(&format!("{}/{}", keys(&s), live_id.as_str().unwrap()), Some(&owner.token)).await.expect(204);
    assert_eq!(shop(c, &products, &key).await.expect(401).code(), "INVALID_PUBLISHABLE_KEY");
    shop(c, &products, &test_key).await.expect(200);
}

#[tokio::test]
async fn the_openapi_document_describes_storefront_security() {
    let app = spawn_app().await;
    let doc = app.client.get("/api/v1/openapi.json", None).await.expect(200).body;
    assert_eq!(
        doc["components"]["securitySchemes"]["publishableKey"],
        json!({
            "type": "apiKey",
            "in": "header",
            "name": "X-Publishable-Key",
            "description": "a store's pk_live_… or pk_test_… key: identifies the store for anonymous shoppers"
        })
    );
    let list = &doc["paths"]["/api/v1/stores/{storeId}/products"]["get"];
    assert_eq!(list["security"], json!([{"bearer": []}, {"publishableKey": []}]));
    assert!(list["x-access"].as_str().unwrap().starts_with("storefront"));
    let create = &doc["paths"]["/api/v1/stores/{storeId}/products"]["post"];
    assert_eq!(create["security"], json!([{"bearer": []}]));
    let keys = &doc["paths"]["/api/v1/stores/{storeId}/publishable-keys"]["post"];
    assert_eq!(keys["x-access"], "owner or admin");
    assert_eq!(keys["requestBody"]["content"]["application/json"]["schema"]["$ref"], "#/components/schemas/CreateKey");
    assert!(doc["paths"]["/api/v1/auth/publishable-keys/validate"]["post"].get("security").is_none());
}
