//! Input the OpenAPI document refuses is refused, found by the conformance run
//! (tests/conformance): a struct given as an array (serde reads one positionally), enum values
//! spelled in another case; and comma-list filters documented as the lists they are.

use serde_json::json;

use crate::support::*;

#[tokio::test]
async fn an_array_where_an_object_is_expected_is_refused_at_any_depth_and_nothing_is_written() {
    let app = spawn_app().await;
    let c = &app.client;
    let u = create_user(c).await;
    let s = create_store(c, &u).await;
    let t = Some(u.token.as_str());
    let product = create_product(c, &u, &s, "Mug", 1500).await;
    let path = format!("/api/v1/stores/{s}/products/{}", product["id"].as_str().unwrap());

    // The whole body as an array: was a valid empty update (200).
    let a = c.patch(&path, t, json!(["Renamed", null])).await.expect(400);
    assert_eq!(a.code(), "VALIDATION_FAILED");
    assert_eq!(a.body["error"]["fields"][0]["field"], "body", "{}", a.body);
    assert_eq!(a.body["error"]["fields"][0]["message"], "invalid type: array, expected an object", "{}", a.body);

    // A nested struct as an array: named by its path.
    let a = c.patch(&path, t, json!({"price": [999, "USD"]})).await.expect(400);
    assert_eq!(a.body["error"]["fields"][0]["field"], "price", "{}", a.body);
    assert!(a.body["error"]["message"].as_str().unwrap().contains("expected an object"), "{}", a.body);
    let created = c
        .post(
            &format!("/api/v1/stores/{s}/products"),
            t,
            json!({"title": "Lamp", "price": {"amount": 100, "currency": "USD"}, "variants": [["Default"]]}),
        )
        .await
        .expect(400);
    assert_eq!(created.body["error"]["fields"][0]["field"], "variants[0]", "{}", created.body);

    // Nothing was written: the product is as created, and the refused create made nothing.
    let read = c.get(&path, t).await.expect(200).body;
    assert_eq!((read["title"].as_str(), read["price"]["amount"].as_i64()), (Some("Mug"), Some(1500)));
    let list = c.get(&format!("/api/v1/stores/{s}/products"), t).await.expect(200).body;
    assert_eq!(list["total"], 1, "{list}");

    // A location's address (the field `optional_object` once guarded alone) goes the same way.
    let a = c.post(&format!("/api/v1/stores/{s}/locations"), t, json!({"name": "Shed", "address": ["1 Main St"]})).await;
    let a = a.expect(400);
    assert_eq!(a.body["error"]["fields"][0]["field"], "address", "{}", a.body);
    let locations = c.get(&format!("/api/v1/stores/{s}/locations"), t).await.expect(200).body;
    assert!(locations["data"].as_array().unwrap().iter().all(|l| l["name"] != "Shed"), "{locations}");
}

/// JSON Schema counts `1999.0` as the integer 1999, so the document's integers allow it: a price
/// and a quantity written so are read as those integers; `19.99` is still refused.
#[tokio::test]
async fn an_integer_written_with_a_zero_fraction_is_read_as_that_integer() {
    let app = spawn_app().await;
    let c = &app.client;
    let u = create_user(c).await;
    let s = create_store(c, &u).await;
    let t = Some(u.token.as_str());
    let products = format!("/api/v1/stores/{s}/products");
    let made = c.post(&products, t, json!({"title": "Lamp", "price": {"amount": 1999.0, "currency": "USD"}})).await;
    let made = made.expect(201).body;
    assert_eq!(made["price"]["amount"], json!(1999), "{made}");
    let path = format!("{products}/{}", made["id"].as_str().unwrap());
    assert_eq!(c.get(&path, t).await.expect(200).body["price"]["amount"], json!(1999));
    let a = c.patch(&path, t, json!({"price": {"amount": 19.99, "currency": "USD"}})).await.expect(400);
    assert_eq!(a.body["error"]["fields"][0]["field"], "price.amount", "{}", a.body);
    assert_eq!(c.get(&path, t).await.expect(200).body["price"]["amount"], json!(1999), "nothing written");
}

#[tokio::test]
async fn enum_values_are_taken_as_the_document_spells_them() {
    let app = spawn_app().await;
    let c = &app.client;
    let u = create_user(c).await;
    let s = create_store(c, &u).await;
    let t = Some(u.token.as_str());
    create_product(c, &u, &s, "Mug", 1500).await;

    for (query, field) in [("sortOrder=ASC", "sortOrder"), ("sortOrder=Desc", "sortOrder"), ("sortBy=TITLE", "sortBy")] {
        let a = c.get(&format!("/api/v1/stores/{s}/products?{query}"), t).await.expect(400);
        assert_eq!(a.body["error"]["fields"][0]["field"], field, "{query}: {}", a.body);
        assert!(a.body["error"]["fields"][0]["message"].as_str().unwrap().starts_with("must be one of: "), "{}", a.body);
    }
    let page = c.get(&format!("/api/v1/stores/{s}/products?sortOrder=asc&sortBy=title"), t).await.expect(200).body;
    assert_eq!(page["data"][0]["title"], "Mug");
}

#[tokio::test]
async fn comma_list_filters_are_documented_as_lists_of_their_values() {
    let app = spawn_app().await;
    let doc = app.client.get("/api/v1/openapi.json", None).await.expect(200).body;
    let params = doc["paths"]["/api/v1/stores/{storeId}/products"]["get"]["parameters"].as_array().unwrap().clone();
    let status = params.iter().find(|p| p["name"] == "status").unwrap();
    assert_eq!((status["style"].as_str(), status["explode"].as_bool()), (Some("form"), Some(false)), "{status}");
    assert_eq!(status["schema"]["type"], "array");
    assert_eq!(status["schema"]["items"]["enum"], json!(["DRAFT", "ACTIVE", "ARCHIVED"]), "{status}");
    // Every query parameter says an empty value is taken as absent.
    assert!(params.iter().filter(|p| p["in"] == "query").all(|p| p["allowEmptyValue"] == true), "{params:?}");
    // A reference filter is a list of ids.
    let orders = doc["paths"]["/api/v1/stores/{storeId}/orders"]["get"]["parameters"].as_array().unwrap();
    let customer = orders.iter().find(|p| p["name"] == "customerId").unwrap();
    assert_eq!(customer["schema"]["items"]["format"], "uuid", "{customer}");

    // The list is read as documented: two values, comma-separated.
    let c = &app.client;
    let u = create_user(c).await;
    let s = create_store(c, &u).await;
    create_product(c, &u, &s, "Active mug", 1500).await;
    let t = Some(u.token.as_str());
    let page = c.get(&format!("/api/v1/stores/{s}/products?status=DRAFT,ACTIVE"), t).await.expect(200).body;
    assert_eq!(page["total"], 1, "{page}");
    let a = c.get(&format!("/api/v1/stores/{s}/products?status=ACTIVE,SOLD"), t).await.expect(400);
    assert_eq!(a.body["error"]["fields"][0]["field"], "status", "{}", a.body);
}

#[tokio::test]
async fn applying_codes_past_the_limit_is_a_documented_429_and_applies_nothing() {
    let app = spawn_app().await;
    let c = &app.client;
    let u = create_user(c).await;
    let s = create_store(c, &u).await;
    let t = Some(u.token.as_str());
    let product = create_product(c, &u, &s, "Mug", 1500).await;
    let lines = json!([{"variantId": product["variants"][0]["id"], "quantity": 1}]);
    let co = c.post(&format!("/api/v1/stores/{s}/checkouts"), t, json!({"lineItems": lines})).await.expect(201).body;
    let path = format!("/api/v1/stores/{s}/checkouts/{}/discount-codes", co["id"].as_str().unwrap());

    // Ten tries a minute per checkout; the client checks every answer against the document, so
    // the 429 passes only because the operation now lists it.
    for _ in 0..10 {
        c.post(&path, t, json!({"code": "NOPE"})).await.expect(422);
    }
    let limited = c.post(&path, t, json!({"code": "NOPE"})).await.expect(429);
    assert_eq!(limited.code(), "RATE_LIMITED");
    assert!(limited.headers.contains_key("retry-after"), "{:?}", limited.headers);
    let read = c.get(&format!("/api/v1/stores/{s}/checkouts/{}", co["id"].as_str().unwrap()), t).await.expect(200).body;
    assert_eq!(read["discountCodes"], json!([]), "{read}");
}
