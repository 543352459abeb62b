//! The rules the handlers check are stated in the OpenAPI document beside the fields they
//! guard (schemars attributes on the request types, the route table's query parameters), so a
//! client generating valid input from the document is served, and what the document refuses
//! is refused with the error naming the field. The conformance run found each missing rule
//! (tests/conformance/baseline.json, docs/contract.md "Conformance run").

use serde_json::{Value, json};

use crate::support::*;

/// The schema of `name` under `#/components/schemas`.
fn schema<'a>(doc: &'a Value, name: &str) -> &'a Value {
    let s = &doc["components"]["schemas"][name];
    assert!(s.is_object(), "no schema {name}");
    s
}

/// A query parameter's schema of an operation.
fn query<'a>(doc: &'a Value, path: &str, name: &str) -> &'a Value {
    let params = doc["paths"][path]["get"]["parameters"].as_array().unwrap_or_else(|| panic!("no GET {path}"));
    &params.iter().find(|p| p["name"] == name).unwrap_or_else(|| panic!("no {name} on {path}"))["schema"]
}

/// Whether `enum` lists `value`.
fn lists(schema: &Value, value: &str) -> bool {
    schema["enum"].as_array().is_some_and(|v| v.iter().any(|x| x == value))
}

#[tokio::test]
async fn the_rules_the_handlers_check_are_stated_on_their_types() {
    let app = spawn_app().await;
    let doc = app.client.get("/api/v1/openapi.json", None).await.expect(200).body;

    // Text: not empty nor blank, bounded, no control characters (one pattern for every field).
    let name = &schema(&doc, "CreateStore")["properties"]["name"];
    assert_eq!((name["minLength"].as_u64(), name["maxLength"].as_u64()), (Some(1), Some(100)), "{name}");
    let line = name["pattern"].as_str().unwrap();
    assert_eq!(schema(&doc, "CreateProduct")["properties"]["title"]["pattern"], line);
    assert_eq!(schema(&doc, "CreateCollection")["properties"]["title"]["pattern"], line);
    assert_eq!(schema(&doc, "CreateMarket")["properties"]["name"]["pattern"], line);
    let body = &schema(&doc, "CommentInput")["properties"]["body"];
    assert_eq!((body["minLength"].as_u64(), body["maxLength"].as_u64()), (Some(1), Some(5000)), "{body}");

    // Codes: currencies the service knows, countries, provinces, time zones.
    let currency = schema(&doc, "Currency");
    assert!(lists(currency, "USD") && lists(currency, "JPY") && !lists(currency, "AAA"), "{currency}");
    assert_eq!(schema(&doc, "CreateStore")["properties"]["currency"]["$ref"], "#/components/schemas/Currency");
    assert_eq!(schema(&doc, "TaxRateInput")["properties"]["country"]["pattern"], "^[A-Z]{2}$");
    assert_eq!(schema(&doc, "TaxRateInput")["properties"]["province"]["pattern"], "^[A-Za-z0-9]{1,10}$");
    let countries = &schema(&doc, "CreateMarket")["properties"]["countries"];
    assert_eq!((countries["minItems"].as_u64(), countries["uniqueItems"].as_bool()), (Some(1), Some(true)), "{countries}");
    assert!(lists(&countries["items"], "FR") && !lists(&countries["items"], "XX"), "{countries}");
    assert!(schema(&doc, "CreateStore")["properties"]["timezone"]["pattern"].as_str().unwrap().contains("UTC"));

    // Numbers: bounds, a delta that is not 0, and every integer type's own range.
    let quantity = &schema(&doc, "AddItem")["properties"]["quantity"];
    assert_eq!((quantity["minimum"].as_i64(), quantity["maximum"].as_i64()), (Some(1), Some(100)), "{quantity}");
    assert_eq!(schema(&doc, "Adjust")["properties"]["delta"]["not"], json!({"const": 0}));
    let fulfilled = &schema(&doc, "FulfillLineInput")["properties"]["quantity"];
    assert_eq!((fulfilled["minimum"].as_i64(), fulfilled["maximum"].as_u64()), (Some(1), Some(u64::from(u32::MAX))));

    // Fixed sets read from strings, and lists that must hold something.
    assert!(lists(&schema(&doc, "CreateKey")["properties"]["environment"], "live"));
    assert!(lists(&schema(&doc, "StorefrontEvent")["properties"]["type"], "page_view"));
    assert!(lists(&schema(&doc, "HoldInput")["properties"]["reason"], "HIGH_RISK_OF_FRAUD"));
    let topics = &schema(&doc, "CreateWebhook")["properties"]["topics"];
    assert_eq!((topics["minItems"].as_u64(), topics["maxItems"].as_u64()), (Some(1), Some(50)), "{topics}");
    assert!(lists(&topics["items"], "order.*") && lists(&topics["items"], "order.created") && lists(&topics["items"], "*"));
    assert_eq!(schema(&doc, "ProductIds")["properties"]["productIds"]["minItems"], 1);
    assert_eq!(schema(&doc, "UpdateLocation")["properties"]["default"]["enum"], json!([true, null]));
    assert_eq!(schema(&doc, "UpdateOrder")["properties"]["tags"]["items"]["pattern"], line);
    assert_eq!(schema(&doc, "CalcLineInput")["properties"]["quantity"]["maximum"], 100);

    // Query parameters: a level's range, a list's sort keys, a code's shape, a list's values.
    assert_eq!(query(&doc, "/api/v1/categories", "level")["maximum"], 15);
    assert_eq!(query(&doc, "/api/v1/stores/{storeId}/publishable-keys", "sortBy")["enum"], json!(["created_at"]));
    assert!(query(&doc, "/api/v1/stores/{storeId}/gift-cards", "search")["pattern"].is_string());
    assert_eq!(query(&doc, "/api/v1/stores/{storeId}/tax-rates", "country")["items"]["pattern"], "^[A-Za-z]{2}$");
    assert!(query(&doc, "/api/v1/stores/{storeId}/collections", "parentId")["items"]["pattern"].is_string());
}

#[tokio::test]
async fn what_the_document_refuses_is_refused_naming_the_field_and_nothing_is_written() {
    let app = spawn_app().await;
    let c = &app.client;
    let u = create_user(c).await;
    let s = create_store(c, &u).await;
    let t = Some(u.token.as_str());
    let at = |p: &str| format!("/api/v1/stores/{s}{p}");

    let refused = [
        (at("/tax-rates"), json!({"country": "ca", "name": "GST", "rate": 500}), "country"),
        (at("/tax-rates"), json!({"country": "CA", "name": " ", "rate": 500}), "name"),
        (at("/markets"), json!({"name": "Europe", "countries": []}), "countries"),
        (at("/markets"), json!({"name": "Europe", "countries": ["FR"], "currency": "AAA"}), "currency"),
        (at("/webhooks"), json!({"topics": ["order.shipped"], "url": "https://example.com/hook"}), "topics[0]"),
        (at("/publishable-keys"), json!({"environment": "staging"}), "environment"),
    ];
    for (path, body, field) in refused {
        let a = c.post(&path, t, body.clone()).await.expect(400);
        let named = a.body["error"]["fields"].as_array().unwrap().iter().any(|f| f["field"] == field);
        assert!(named, "{path} {body}: {}", a.body);
    }
    // Nothing of them was written.
    for list in ["/tax-rates", "/markets", "/webhooks"] {
        let page = c.get(&at(list), t).await.expect(200).body;
        assert_eq!(page["data"], json!([]), "{list}: {page}");
    }
}

#[tokio::test]
async fn a_calculation_holds_its_address_to_the_address_rules() {
    let app = spawn_app().await;
    let c = &app.client;
    let u = create_user(c).await;
    let s = create_store(c, &u).await;
    let t = Some(u.token.as_str());
    let product = create_product(c, &u, &s, "Mug", 1500).await;
    let line = json!([{"variantId": product["variants"][0]["id"], "quantity": 2}]);
    let path = format!("/api/v1/stores/{s}/calculate");

    // The document states the checkout address's rules; the calculation took any text.
    let bad = json!({"lineItems": line, "shippingAddress": {"country": "US", "province": "N\u{1}Y"}});
    let a = c.post(&path, t, bad).await.expect(400);
    assert_eq!(a.body["error"]["fields"][0]["field"], "shippingAddress.province", "{}", a.body);
    let long = json!({"lineItems": line, "shippingAddress": {"country": "US", "city": "x".repeat(256)}});
    let a = c.post(&path, t, long).await.expect(400);
    assert_eq!(a.body["error"]["fields"][0]["field"], "shippingAddress.city", "{}", a.body);

    let good = json!({"lineItems": line, "shippingAddress": {"country": "us", "province": "NY", "city": "New York"}});
    let priced = c.post(&path, t, good).await.expect(200).body;
    assert_eq!(priced["subtotal"]["amount"], 3000, "{priced}");
}

#[tokio::test]
async fn a_code_to_validate_is_counted_in_characters_as_its_rule_says() {
    let app = spawn_app().await;
    let c = &app.client;
    let u = create_user(c).await;
    let s = create_store(c, &u).await;
    let t = Some(u.token.as_str());
    let product = create_product(c, &u, &s, "Mug", 1500).await;
    let cart = json!({"lineItems": [{"variantId": product["variants"][0]["id"], "quantity": 1}]});
    let path = format!("/api/v1/stores/{s}/discounts/validate");

    // 200 characters of two bytes each: within "1 to 255 characters" (maxLength), once refused
    // for its 400 bytes. It names no discount.
    let code = "é".repeat(200);
    let verdict = c.post(&path, t, json!({"code": code, "cart": cart})).await.expect(200).body;
    assert_eq!(verdict["valid"], false, "{verdict}");
    let a = c.post(&path, t, json!({"code": "é".repeat(256), "cart": cart})).await.expect(400);
    assert_eq!(a.body["error"]["fields"][0]["field"], "code", "{}", a.body);
}
