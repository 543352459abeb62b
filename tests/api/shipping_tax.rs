//! `S/shipping-zones` and `S/tax-rates`: CRUD, validation naming the fields, rate ids kept across
//! a zone edit, and nothing written by a refused request.

use serde_json::{Value, json};

use crate::calculate::Shop;
use crate::support::*;

fn fields(a: &Answer) -> Vec<String> {
    a.body["error"]["fields"].as_array().unwrap().iter().map(|f| f["field"].as_str().unwrap().to_string()).collect()
}

fn days(min: u32, max: u32) -> Value {
    json!({"minDays": min, "maxDays": max})
}

#[tokio::test]
async fn shipping_zones_with_rates_are_created_listed_replaced_and_deleted() {
    let app = spawn_app().await;
    let c = &app.client;
    let shop = Shop::new(c).await;
    let t = Some(shop.owner.token.as_str());
    let base = shop.path("/shipping-zones");

    let z = c
        .post(
            &base,
            t,
            json!({"name": "North America", "countries": [{"code": "US"}, {"code": "CA", "provinces": ["bc", "ON"]}], "rates": [
                {"name": "Standard Shipping", "description": "Tracked", "price": 1000, "freeAbove": 10000, "estimatedDelivery": days(3, 5)},
                {"name": "Heavy", "code": "HEAVY-1", "condition": "weight", "min": 5000, "price": 2500, "estimatedDelivery": days(2, 2)}
            ]}),
        )
        .await
        .expect(201)
        .body;
    assert_eq!(z["name"], "North America");
    assert_eq!(z["countries"][1], json!({"code": "CA", "provinces": ["BC", "ON"]}));
    let standard = &z["rates"][0];
    assert_eq!((standard["code"].as_str(), standard["condition"].as_str()), (Some("standard-shipping"), Some("flat")));
    assert_eq!(standard["price"], json!({"amount": 1000, "currency": "USD", "formatted": "10.00 USD"}));
    assert_eq!(standard["freeAbove"]["amount"], 10000);
    assert_eq!(standard["estimatedDelivery"], json!({"minDays": 3, "maxDays": 5, "formatted": "3-5 days"}));
    assert_eq!(z["rates"][1]["estimatedDelivery"]["formatted"], "2 days");
    let id = z["id"].as_str().unwrap().to_string();
    let standard_id = standard["id"].as_str().unwrap().to_string();
    assert_eq!(c.get(&format!("{base}/{id}"), t).await.expect(200).body, z);

    // Invalid bodies name every field and write nothing.
    let bad = c
        .post(
            &base,
            t,
            json!({"name": " ", "countries": [{"code": "usa"}, {"code": "CA", "provinces": ["B C"]}], "rates": [
                {"name": "Flat with bounds", "min": 5, "price": -1, "estimatedDelivery": days(5, 3)}
            ]}),
        )
        .await
        .expect(400);
    assert_eq!(
        fields(&bad),
        [
            "name",
            "countries[0].code",
            "countries[1].provinces[0]",
            "rates[0].price",
            "rates[0].condition",
            "rates[0].estimatedDelivery"
        ]
    );
    let no_countries = c.post(&base, t, json!({"name": "Nowhere", "countries": []})).await.expect(400);
    assert_eq!(fields(&no_countries), ["countries"]);
    let unknown_field = c.post(&base, t, json!({"name": "X", "countries": [{"code": "US"}], "extra": 1})).await.expect(400);
    assert_eq!(unknown_field.code(), "VALIDATION_FAILED");
    assert_eq!(c.get(&base, t).await.expect(200).body["total"], 1);

    let europe = c
        .post(
            &base,
            t,
            json!({"name": "Europe", "countries": [{"code": "FR"}, {"code": "DE"}], "rates": [
            {"name": "EU", "price": 1800, "estimatedDelivery": days(5, 9)}]}),
        )
        .await
        .expect(201)
        .body;
    let list = c.get(&format!("{base}?sortBy=name&sortOrder=asc"), t).await.expect(200).body;
    assert_eq!(
        (list["total"].as_u64(), list["data"][0]["name"].as_str(), list["data"][1]["name"].as_str()),
        (Some(2), Some("Europe"), Some("North America"))
    );
    let newest = c.get(&format!("{base}?limit=1"), t).await.expect(200).body;
    assert_eq!((newest["data"][0]["id"].clone(), newest["totalPages"].as_u64()), (europe["id"].clone(), Some(2)));
    c.get(&format!("{base}?sortBy=price"), t).await.expect(400);

    // PATCH replaces the zone: a rate sent with its id keeps it; a new rate gets a new id.
    let replaced = c
        .patch(
            &format!("{base}/{id}"),
            t,
            json!({"name": "USA", "countries": [{"code": "US"}], "rates": [
                {"id": standard_id, "name": "Standard", "price": 1200, "estimatedDelivery": days(3, 5)},
                {"name": "Express", "price": 3000, "estimatedDelivery": days(1, 1)}
            ]}),
        )
        .await
        .expect(200)
        .body;
    assert_eq!((replaced["id"].as_str(), replaced["createdAt"].clone()), (Some(id.as_str()), z["createdAt"].clone()));
    assert_eq!(replaced["rates"][0]["id"].as_str(), Some(standard_id.as_str()));
    assert_eq!(replaced["rates"][0]["price"]["amount"], 1200);
    assert_ne!(replaced["rates"][1]["id"].as_str(), z["rates"][1]["id"].as_str());
    assert_eq!(replaced["rates"][1]["estimatedDelivery"]["formatted"], "1 day");
    let bad = c
        .patch(&format!("{base}/{id}"), t, json!({"name": "USA", "countries": [{"code": "US"}, {"code": "US"}]}))
        .await
        .expect(400);
    assert_eq!(fields(&bad), ["countries[1].code"]);
    assert_eq!(c.get(&format!("{base}/{id}"), t).await.expect(200).body, replaced);

    c.delete(&format!("{base}/{id}"), t).await.expect(204);
    c.get(&format!("{base}/{id}"), t).await.expect(404);
    c.delete(&format!("{base}/{id}"), t).await.expect(404);
    assert_eq!(c.get(&base, t).await.expect(200).body["total"], 1);
    // Another store sees none of it.
    let other = Shop::new(c).await;
    c.get(&format!("{}/{}", other.path("/shipping-zones"), europe["id"].as_str().unwrap()), Some(&other.owner.token))
        .await
        .expect(404);
    c.get(&base, None).await.expect(401);
}

#[tokio::test]
async fn tax_rates_are_created_listed_replaced_and_deleted() {
    let app = spawn_app().await;
    let c = &app.client;
    let shop = Shop::new(c).await;
    let t = Some(shop.owner.token.as_str());
    let base = shop.path("/tax-rates");

    let gst = c.post(&base, t, json!({"country": "CA", "rate": 500, "name": "GST", "shipping": true})).await.expect(201).body;
    assert_eq!(
        (gst["country"].as_str(), gst["province"].clone(), gst["rate"].as_u64(), gst["shipping"].as_bool()),
        (Some("CA"), Value::Null, Some(500), Some(true))
    );
    let pst = c.post(&base, t, json!({"country": "CA", "province": "bc", "rate": 700, "name": "PST"})).await.expect(201).body;
    assert_eq!((pst["province"].as_str(), pst["shipping"].as_bool()), (Some("BC"), Some(false)));
    c.post(&base, t, json!({"country": "US", "province": "NY", "rate": 400, "name": "NY State"})).await.expect(201);

    let bad = c.post(&base, t, json!({"country": "ca", "province": "B-C", "rate": 10001, "name": ""})).await.expect(400);
    assert_eq!(fields(&bad), ["country", "province", "rate", "name"]);
    let dup = c.post(&base, t, json!({"country": "CA", "province": "BC", "rate": 100, "name": "pst"})).await.expect(409);
    assert_eq!((dup.code(), fields(&dup)), ("CONFLICT", vec!["name".to_string()]));
    c.post(&base, t, json!({"country": "CA", "rate": -1, "name": "Negative"})).await.expect(400);

    let list = c.get(&format!("{base}?sortBy=country&sortOrder=asc"), t).await.expect(200).body;
    assert_eq!(list["total"], 3);
    let names: Vec<&str> = list["data"].as_array().unwrap().iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["GST", "PST", "NY State"]);
    let ca = c.get(&format!("{base}?country=ca"), t).await.expect(200).body;
    assert_eq!(ca["total"], 2);
    c.get(&format!("{base}?country=Canada"), t).await.expect(400);

    let id = pst["id"].as_str().unwrap();
    let changed = c
        .patch(
            &format!("{base}/{id}"),
            t,
            json!({"country": "CA", "province": "BC", "rate": 750, "name": "PST", "shipping": true}),
        )
        .await
        .expect(200)
        .body;
    assert_eq!(
        (changed["id"].as_str(), changed["rate"].as_u64(), changed["createdAt"].clone()),
        (Some(id), Some(750), pst["createdAt"].clone())
    );
    // Renaming onto GST's jurisdiction and name collides; nothing changes.
    c.patch(&format!("{base}/{id}"), t, json!({"country": "CA", "rate": 1, "name": "GST"})).await.expect(409);
    let still = c.get(&format!("{base}?country=CA&sortBy=name&sortOrder=asc"), t).await.expect(200).body;
    assert_eq!(still["data"][1]["rate"], 750);
    c.delete(&format!("{base}/{id}"), t).await.expect(204);
    c.delete(&format!("{base}/{id}"), t).await.expect(404);
    c.patch(&format!("{base}/{id}"), t, json!({"country": "CA", "rate": 1, "name": "X"})).await.expect(404);
    assert_eq!(c.get(&base, t).await.expect(200).body["total"], 2);
}
