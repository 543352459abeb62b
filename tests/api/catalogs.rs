use serde_json::{Value, json};

use crate::support::*;

fn base(s: &str) -> String {
    format!("/api/v1/stores/{s}/catalogs")
}

async fn market(c: &HttpClient, u: &User, s: &str, name: &str, country: &str) -> String {
    let m = c
        .post(&format!("/api/v1/stores/{s}/markets"), Some(&u.token), json!({"name": name, "countries": [country]}))
        .await
        .expect(201)
        .body;
    m["id"].as_str().unwrap().to_string()
}

async fn catalog(c: &HttpClient, u: &User, s: &str, body: Value) -> Value {
    c.post(&base(s), Some(&u.token), body).await.expect(201).body
}

async fn pid(c: &HttpClient, u: &User, s: &str, title: &str, amount: i64) -> String {
    create_product(c, u, s, title, amount).await["id"].as_str().unwrap().to_string()
}

/// The effective product ids of a catalog (newest first) and the `products` count.
async fn effective(c: &HttpClient, u: &User, s: &str, id: &str) -> (Vec<String>, u64) {
    let page = c.get(&format!("{}/{id}/products?limit=250", base(s)), Some(&u.token)).await.expect(200).body;
    let ids = page["data"].as_array().unwrap().iter().map(|p| p["id"].as_str().unwrap().to_string()).collect();
    let count = c.get(&format!("{}/{id}", base(s)), Some(&u.token)).await.expect(200).body["products"].as_u64().unwrap();
    assert_eq!(page["total"].as_u64(), Some(count), "the envelope total is the effective count");
    (ids, count)
}

fn names(list: &Value) -> Vec<&str> {
    list["data"].as_array().unwrap().iter().map(|m| m["name"].as_str().unwrap()).collect()
}

#[tokio::test]
async fn specific_and_all_catalogs_add_and_remove_entries() {
    let app = spawn_app().await;
    let c = &app.client;
    let u = create_user(c).await;
    let s = create_store(c, &u).await;
    let m = market(c, &u, &s, "US", "US").await;
    let a = pid(c, &u, &s, "A", 1000).await;
    let b = pid(c, &u, &s, "B", 2000).await;
    let d = pid(c, &u, &s, "D", 3000).await;

    let specific = catalog(
        c,
        &u,
        &s,
        json!({"name": "Picked", "marketId": m, "selection": "specific", "status": "active",
               "priceAdjustment": {"type": "percentage", "value": -1000}}),
    )
    .await;
    assert_eq!(specific["selection"], "SPECIFIC");
    assert_eq!(specific["status"], "active");
    assert_eq!(specific["priceAdjustment"], json!({"type": "percentage", "value": -1000}));
    assert_eq!(specific["products"], 0);
    let sp = specific["id"].as_str().unwrap().to_string();
    let all = catalog(c, &u, &s, json!({"name": "Everything", "marketId": m, "selection": "ALL"})).await;
    assert_eq!((all["products"].as_u64(), all["status"].as_str()), (Some(3), Some("draft")));
    let al = all["id"].as_str().unwrap().to_string();

    // SPECIFIC: add inserts inclusion entries, remove deletes them.
    let added = c.post(&format!("{}/{sp}/products", base(&s)), Some(&u.token), json!({"productIds": [a, b]})).await.expect(200);
    assert_eq!(added.body["products"], 2);
    assert_eq!(effective(c, &u, &s, &sp).await, (vec![b.clone(), a.clone()], 2));
    let again = c.post(&format!("{}/{sp}/products", base(&s)), Some(&u.token), json!({"productIds": [a]})).await.expect(200);
    assert_eq!(again.body["products"], 2, "adding an included product changes nothing");
    c.post(&format!("{}/{sp}/products/remove", base(&s)), Some(&u.token), json!({"productIds": [a]})).await.expect(200);
    assert_eq!(effective(c, &u, &s, &sp).await, (vec![b.clone()], 1));
    // The catalog price applies the adjustment: 20.00 less 10 % is 18.00.
    let page = c.get(&format!("{}/{sp}/products", base(&s)), Some(&u.token)).await.expect(200).body;
    assert_eq!(page["data"][0]["catalogPrice"], json!({"amount": 1800, "currency": "USD"}));
    assert_eq!(page["data"][0]["price"]["amount"], 2000);

    // ALL: remove inserts exclusion entries, add deletes them.
    let out = c.post(&format!("{}/{al}/products/remove", base(&s)), Some(&u.token), json!({"productIds": [b]})).await.expect(200);
    assert_eq!(out.body["products"], 2);
    assert_eq!(effective(c, &u, &s, &al).await, (vec![d.clone(), a.clone()], 2));
    let window =
        c.get(&format!("{}/{al}/products?offset=1&limit=1&sortOrder=asc", base(&s)), Some(&u.token)).await.expect(200).body;
    assert_eq!(
        (window["data"][0]["id"].as_str(), window["page"].as_u64(), window["offset"].as_u64()),
        (Some(d.as_str()), Some(2), Some(1))
    );
    c.post(&format!("{}/{al}/products", base(&s)), Some(&u.token), json!({"productIds": [b]})).await.expect(200);
    assert_eq!(effective(c, &u, &s, &al).await, (vec![d.clone(), b.clone(), a.clone()], 3));
    c.post(&format!("{}/{al}/products/remove", base(&s)), Some(&u.token), json!({"productIds": [a]})).await.expect(200);

    // An id that is not a product of this store is a 400 naming it, and nothing is written.
    let v = create_user(c).await;
    let other = create_store(c, &v).await;
    let foreign = pid(c, &v, &other, "Foreign", 1).await;
    let refused =
        c.post(&format!("{}/{sp}/products", base(&s)), Some(&u.token), json!({"productIds": [d, foreign]})).await.expect(400);
    assert_eq!(refused.body["error"]["fields"][0]["field"], "productIds[1]");
    assert_eq!(effective(c, &u, &s, &sp).await, (vec![b.clone()], 1));

    // Product writes keep the counts: a new product joins ALL catalogs only.
    let e = pid(c, &u, &s, "E", 500).await;
    assert_eq!(effective(c, &u, &s, &al).await, (vec![e.clone(), d.clone(), b.clone()], 3));
    assert_eq!(effective(c, &u, &s, &sp).await.1, 1);
    // A deleted product leaves every catalog: excluded (a), included (b), plain (d).
    for p in [&a, &b, &d] {
        c.delete(&format!("/api/v1/stores/{s}/products/{p}"), Some(&u.token)).await.expect(204);
    }
    assert_eq!(effective(c, &u, &s, &al).await, (vec![e.clone()], 1));
    assert_eq!(effective(c, &u, &s, &sp).await, (vec![], 0));

    // Switching the selection starts the entries afresh.
    c.post(&format!("{}/{al}/products/remove", base(&s)), Some(&u.token), json!({"productIds": [e]})).await.expect(200);
    let switched = c.patch(&format!("{}/{al}", base(&s)), Some(&u.token), json!({"selection": "SPECIFIC"})).await.expect(200);
    assert_eq!(switched.body["products"], 0);
    let back = c.patch(&format!("{}/{al}", base(&s)), Some(&u.token), json!({"selection": "ALL"})).await.expect(200);
    assert_eq!(back.body["products"], 1);
    assert_eq!(effective(c, &u, &s, &al).await, (vec![e.clone()], 1));

    c.delete(&format!("{}/{sp}", base(&s)), Some(&u.token)).await.expect(204);
    c.get(&format!("{}/{sp}", base(&s)), Some(&u.token)).await.expect(404);
}

#[tokio::test]
async fn catalog_lists_are_offset_style_with_filters_and_sorts() {
    let app = spawn_app().await;
    let c = &app.client;
    let u = create_user(c).await;
    let s = create_store(c, &u).await;
    let eu = market(c, &u, &s, "EU", "DE").await;
    let us = market(c, &u, &s, "US", "US").await;
    let p = pid(c, &u, &s, "P", 100).await;
    pid(c, &u, &s, "Q", 100).await;
    let retail_eu =
        catalog(c, &u, &s, json!({"name": "Retail EU", "marketId": eu, "status": "active", "selection": "ALL"})).await;
    let wholesale = catalog(c, &u, &s, json!({"name": "Wholesale EU", "marketId": eu})).await;
    catalog(c, &u, &s, json!({"name": "Retail US", "marketId": us, "status": "inactive"})).await;
    c.post(&format!("{}/{}/products", base(&s), wholesale["id"].as_str().unwrap()), Some(&u.token), json!({"productIds": [p]}))
        .await
        .expect(200);

    let get = |q: &str| {
        let url = format!("{}?{q}", base(&s));
        let token = u.token.clone();
        async move { c.get(&url, Some(&token)).await.expect(200).body }
    };
    let all = get("").await;
    let mut keys: Vec<&str> = all.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["data", "limit", "offset", "page", "total", "totalPages"]);
    assert_eq!(
        (all["total"].as_u64(), all["page"].as_u64(), all["limit"].as_u64(), all["offset"].as_u64()),
        (Some(3), Some(1), Some(20), Some(0))
    );
    assert_eq!(names(&all), ["Wholesale EU", "Retail US", "Retail EU"], "recently updated first by default");
    let window = get("offset=1&limit=1").await;
    assert_eq!((names(&window), window["page"].as_u64(), window["totalPages"].as_u64()), (vec!["Retail US"], Some(2), Some(3)));
    assert_eq!(get("offset=5&limit=2").await["page"], 3);
    assert_eq!(get("status=all").await["total"], 3);
    assert_eq!(names(&get("status=active").await), ["Retail EU"]);
    assert_eq!(names(&get("status=INACTIVE").await), ["Retail US"]);
    let in_eu = get(&format!("marketId={eu}&sortBy=name&sortOrder=asc")).await;
    assert_eq!((names(&in_eu), in_eu["total"].as_u64()), (vec!["Retail EU", "Wholesale EU"], Some(2)));
    assert_eq!(names(&get("search=retail&sortBy=name&sortOrder=asc").await), ["Retail EU", "Retail US"]);
    assert_eq!(names(&get("sortBy=products&sortOrder=desc").await), ["Retail EU", "Wholesale EU", "Retail US"]);
    assert_eq!(names(&get("sortBy=products&sortOrder=asc&limit=1").await), ["Retail US"]);
    assert_eq!(retail_eu["products"], 2);
    for bad in ["status=published", "sortBy=created", "offset=-1", "limit=0", "marketId=nope", "sortOrder=up"] {
        let a = c.get(&format!("{}?{bad}", base(&s)), Some(&u.token)).await.expect(400);
        assert_eq!(a.code(), "VALIDATION_FAILED", "{bad}");
    }
}

#[tokio::test]
async fn bad_catalogs_are_refused_by_field() {
    let app = spawn_app().await;
    let c = &app.client;
    let u = create_user(c).await;
    let s = create_store(c, &u).await;
    let m = market(c, &u, &s, "US", "US").await;
    let unknown = uuid::Uuid::now_v7().to_string();
    let a = c.post(&base(&s), Some(&u.token), json!({"name": "X", "marketId": unknown})).await.expect(400);
    assert_eq!(a.body["error"]["fields"][0]["field"], "marketId");
    let a = c
        .post(
            &base(&s),
            Some(&u.token),
            json!({"name": "X", "marketId": m, "selection": "SOME", "priceAdjustment": {"type": "ratio", "value": 1}}),
        )
        .await
        .expect(400);
    let fields: Vec<&str> = a.body["error"]["fields"].as_array().unwrap().iter().map(|f| f["field"].as_str().unwrap()).collect();
    assert_eq!(fields, ["selection", "priceAdjustment.type"]);
    let a = c
        .post(&base(&s), Some(&u.token), json!({"name": "X", "marketId": m, "priceAdjustment": {"type": "fixed", "value": 1.5}}))
        .await
        .expect(400);
    assert_eq!(a.body["error"]["fields"][0]["field"], "priceAdjustment.value");
    // A fixed amount at the integer limits is out of range, not wrapped into range.
    for value in [i64::MIN, i64::MAX] {
        let adjustment = json!({"name": "X", "marketId": m, "priceAdjustment": {"type": "fixed", "value": value}});
        let a = c.post(&base(&s), Some(&u.token), adjustment).await.expect(400);
        assert_eq!(a.body["error"]["fields"][0]["field"], "priceAdjustment.value", "{value}");
    }
    assert_eq!(c.get(&base(&s), Some(&u.token)).await.expect(200).body["total"], 0);
    let fixed =
        catalog(c, &u, &s, json!({"name": "Y", "marketId": m, "priceAdjustment": {"type": "fixed", "value": -250}})).await;
    let id = fixed["id"].as_str().unwrap();
    let cleared = c.patch(&format!("{}/{id}", base(&s)), Some(&u.token), json!({"priceAdjustment": null})).await.expect(200);
    assert_eq!(cleared.body["priceAdjustment"], Value::Null);
    let moved = c.patch(&format!("{}/{id}", base(&s)), Some(&u.token), json!({"marketId": unknown})).await.expect(400);
    assert_eq!(moved.body["error"]["fields"][0]["field"], "marketId");
}
