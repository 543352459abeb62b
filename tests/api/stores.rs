use serde_json::json;

use crate::support::*;

#[tokio::test]
async fn stores_are_created_listed_and_configured_by_their_members() {
    let app = spawn_app().await;
    let c = &app.client;
    let u = create_user(c).await;
    let other = create_user(c).await;
    let s = create_store(c, &u).await;

    let mine = c.get("/api/v1/stores", Some(&u.token)).await.expect(200).body;
    assert_eq!(mine.as_array().unwrap().len(), 1);
    assert_eq!(mine[0]["id"], s.as_str());
    assert_eq!(mine[0]["role"], "owner");
    assert_eq!(c.get("/api/v1/stores", Some(&other.token)).await.expect(200).body, json!([]));

    let settings = c.get(&format!("/api/v1/stores/{s}"), Some(&u.token)).await.expect(200).body;
    assert_eq!((settings["currency"].as_str(), settings["ownerId"].as_str()), (Some("USD"), Some(u.id.as_str())));

    let changed = c
        .patch(
            &format!("/api/v1/stores/{s}"),
            Some(&u.token),
            json!({"name": "Renamed", "taxesIncluded": true, "timezone": "Europe/Paris"}),
        )
        .await
        .expect(200)
        .body;
    assert_eq!((changed["name"].as_str(), changed["taxesIncluded"].as_bool()), (Some("Renamed"), Some(true)));
    // The directory follows the rename.
    assert_eq!(c.get("/api/v1/stores", Some(&u.token)).await.body[0]["name"], "Renamed");

    // An address is an object: an array (serde's other reading of a struct) is refused and the
    // address kept; one-line fields take no control characters.
    let path = format!("/api/v1/stores/{s}");
    let address = json!({"address1": "1 Main St", "city": "Springfield", "country": "US"});
    c.patch(&path, Some(&u.token), json!({"address": address})).await.expect(200);
    for bad in [json!({"address": []}), json!({"address": ["9 Elm St"]}), json!({"address": "9 Elm St"})] {
        let a = c.patch(&path, Some(&u.token), bad.clone()).await.expect(400);
        assert_eq!(a.body["error"]["fields"][0]["field"], "address", "{bad}: {}", a.body);
    }
    let a = c.patch(&path, Some(&u.token), json!({"name": "Line\nbreak", "address": {"city": "Tab\tCity"}})).await.expect(400);
    let fields: Vec<&str> = a.body["error"]["fields"].as_array().unwrap().iter().map(|f| f["field"].as_str().unwrap()).collect();
    assert_eq!(fields, ["name", "address.city"]);
    let kept = c.get(&path, Some(&u.token)).await.expect(200).body;
    assert_eq!((kept["name"].as_str(), kept["address"]["address1"].as_str()), (Some("Renamed"), Some("1 Main St")));
}

#[tokio::test]
async fn store_creation_is_validated() {
    let app = spawn_app().await;
    let c = &app.client;
    let u = create_user(c).await;
    let a = c
        .post("/api/v1/stores", Some(&u.token), json!({"name": "", "currency": "XXQ", "country": "usa", "timezone": "Mars"}))
        .await
        .expect(400);
    let fields: Vec<&str> = a.body["error"]["fields"].as_array().unwrap().iter().map(|f| f["field"].as_str().unwrap()).collect();
    assert_eq!(fields, ["name", "currency", "country", "timezone"]);
    assert_eq!(c.get("/api/v1/stores", Some(&u.token)).await.body, json!([]));
    c.post("/api/v1/stores", None, json!({"name": "x", "currency": "USD", "country": "US"})).await.expect(401);
}

#[tokio::test]
async fn stores_are_spread_over_cells() {
    let app = spawn_app_with_cells(&["a", "b"]).await;
    let c = &app.client;
    let u = create_user(c).await;
    let s1 = create_store(c, &u).await;
    let s2 = create_store(c, &u).await;
    let node = &app.server.as_ref().unwrap().node;
    let held: Vec<usize> = node.cells.values().map(|cell| cell.store_count()).collect();
    assert_eq!(held, [1, 1], "placement picks the emptiest cell");
    for s in [s1, s2] {
        create_product(c, &u, &s, "Hat", 100).await;
        assert_eq!(c.get(&format!("/api/v1/stores/{s}/products"), Some(&u.token)).await.body["total"], 1);
    }
}
