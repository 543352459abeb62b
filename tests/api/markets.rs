use serde_json::{Value, json};

use crate::support::*;

fn base(s: &str) -> String {
    format!("/api/v1/stores/{s}/markets")
}

fn names(list: &Value) -> Vec<&str> {
    list["data"].as_array().unwrap().iter().map(|m| m["name"].as_str().unwrap()).collect()
}

#[tokio::test]
async fn markets_keep_each_country_in_one_market() {
    let app = spawn_app().await;
    let c = &app.client;
    let u = create_user(c).await;
    let s = create_store(c, &u).await;

    let eu = c
        .post(&base(&s), Some(&u.token), json!({"name": "Europe", "countries": ["de", "FR"], "currency": "eur"}))
        .await
        .expect(201)
        .body;
    assert_eq!((&eu["countries"], eu["currency"].as_str()), (&json!(["DE", "FR"]), Some("EUR")));
    assert!(eu["createdAt"].is_string() && eu["updatedAt"].is_string());
    let eu_id = eu["id"].as_str().unwrap().to_string();

    // A country of another market is a 409 naming it; nothing is written.
    let taken = c.post(&base(&s), Some(&u.token), json!({"name": "Mixed", "countries": ["US", "DE"]})).await.expect(409);
    assert_eq!(taken.code(), "COUNTRY_TAKEN");
    assert_eq!(taken.body["error"]["fields"][0]["field"], "countries[1]");
    assert!(taken.body["error"]["fields"][0]["message"].as_str().unwrap().contains("Europe"));
    assert_eq!(c.get(&base(&s), Some(&u.token)).await.expect(200).body["total"], 1);

    // Bad input in one request is a 400 naming each field.
    let bad = c
        .post(&base(&s), Some(&u.token), json!({"name": "", "countries": ["US", "us", "XX"], "currency": "USD"}))
        .await
        .expect(400);
    let fields: Vec<&str> =
        bad.body["error"]["fields"].as_array().unwrap().iter().map(|f| f["field"].as_str().unwrap()).collect();
    assert_eq!(fields, ["name", "countries[1]", "countries[2]"]);
    let currency =
        c.post(&base(&s), Some(&u.token), json!({"name": "X", "countries": ["US"], "currency": "XYZ"})).await.expect(400);
    assert_eq!(currency.body["error"]["fields"][0]["field"], "currency");
    let empty = c.post(&base(&s), Some(&u.token), json!({"name": "X", "countries": []})).await.expect(400);
    assert_eq!(empty.body["error"]["fields"][0]["field"], "countries");

    // Without a currency the market sells in the store's.
    let na =
        c.post(&base(&s), Some(&u.token), json!({"name": "North America", "countries": ["US", "CA"]})).await.expect(201).body;
    assert_eq!(na["currency"], "USD");
    let na_id = na["id"].as_str().unwrap().to_string();

    // Moving a country out of a market frees it.
    let one = format!("{}/{eu_id}", base(&s));
    let moved = c.patch(&one, Some(&u.token), json!({"countries": ["DE", "AT"]})).await.expect(200).body;
    assert_eq!(moved["countries"], json!(["DE", "AT"]));
    let clash = c.patch(&one, Some(&u.token), json!({"countries": ["DE", "CA"]})).await.expect(409);
    assert_eq!(clash.body["error"]["fields"][0]["field"], "countries[1]");
    let fr = c.post(&base(&s), Some(&u.token), json!({"name": "France", "countries": ["FR"]})).await.expect(201).body;
    assert_eq!(c.get(&one, Some(&u.token)).await.expect(200).body, moved);

    let by_name = c.get(&format!("{}?sortBy=name&sortOrder=asc", base(&s)), Some(&u.token)).await.expect(200).body;
    assert_eq!(names(&by_name), ["Europe", "France", "North America"]);
    assert_eq!((by_name["total"].as_u64(), by_name["totalPages"].as_u64()), (Some(3), Some(1)));
    let newest = c.get(&format!("{}?limit=1", base(&s)), Some(&u.token)).await.expect(200).body;
    assert_eq!((names(&newest), newest["totalPages"].as_u64()), (vec!["France"], Some(3)));
    c.get(&format!("{}?sortBy=countries", base(&s)), Some(&u.token)).await.expect(400);

    // A market a catalog uses cannot be deleted; an unused one can, and frees its countries.
    c.post(&format!("/api/v1/stores/{s}/catalogs"), Some(&u.token), json!({"name": "NA retail", "marketId": na_id}))
        .await
        .expect(201);
    let used = c.delete(&format!("{}/{na_id}", base(&s)), Some(&u.token)).await.expect(409);
    assert_eq!(used.code(), "CONFLICT");
    c.delete(&format!("{}/{}", base(&s), fr["id"].as_str().unwrap()), Some(&u.token)).await.expect(204);
    c.get(&format!("{}/{}", base(&s), fr["id"].as_str().unwrap()), Some(&u.token)).await.expect(404);
    c.post(&base(&s), Some(&u.token), json!({"name": "France again", "countries": ["FR"]})).await.expect(201);
    assert_eq!(c.get(&base(&s), Some(&u.token)).await.body["total"], 3);
}

#[tokio::test]
async fn markets_of_different_stores_are_independent() {
    let app = spawn_app().await;
    let c = &app.client;
    let u = create_user(c).await;
    let v = create_user(c).await;
    let s1 = create_store(c, &u).await;
    let s2 = create_store(c, &v).await;
    let m = c.post(&base(&s1), Some(&u.token), json!({"name": "DE", "countries": ["DE"]})).await.expect(201).body;
    c.post(&base(&s2), Some(&v.token), json!({"name": "DE", "countries": ["DE"]})).await.expect(201);
    c.get(&format!("{}/{}", base(&s2), m["id"].as_str().unwrap()), Some(&v.token)).await.expect(404);
    // Another store's owner is a stranger here.
    c.get(&base(&s1), Some(&v.token)).await.expect(404);
    c.get(&base(&s1), None).await.expect(401);
}
