use serde_json::{Value, json};

use crate::support::*;

#[tokio::test]
async fn create_read_update_delete_a_product_with_variants() {
    let app = spawn_app().await;
    let c = &app.client;
    let u = create_user(c).await;
    let s = create_store(c, &u).await;
    let base = format!("/api/v1/stores/{s}/products");

    // A product without variants gets one default variant at its price; status defaults to DRAFT.
    let p = c
        .post(&base, Some(&u.token), json!({"title": "Linen Shirt", "price": {"amount": 4500, "currency": "usd"}}))
        .await
        .expect(201)
        .body;
    assert_eq!(p["status"], "DRAFT");
    assert_eq!(p["handle"], "linen-shirt");
    assert_eq!(p["price"], json!({"amount": 4500, "currency": "USD"}));
    assert_eq!(p["variants"].as_array().unwrap().len(), 1);
    assert_eq!(p["variants"][0]["title"], "Default");
    let id = p["id"].as_str().unwrap();

    // The same title again gets the next free handle.
    let p2 = c
        .post(&base, Some(&u.token), json!({"title": "Linen Shirt", "price": {"amount": 100, "currency": "USD"}}))
        .await
        .expect(201)
        .body;
    assert_eq!(p2["handle"], "linen-shirt-2");
    // A requested handle that is taken is a 409.
    let taken = c
        .post(&base, Some(&u.token), json!({"title": "X", "handle": "linen-shirt", "price": {"amount": 1, "currency": "USD"}}))
        .await;
    assert_eq!((taken.status.as_u16(), taken.code()), (409, "HANDLE_TAKEN"));

    let got = c.get(&format!("{base}/{id}"), Some(&u.token)).await.expect(200).body;
    assert_eq!(got, p);

    let upd = c
        .patch(
            &format!("{base}/{id}"),
            Some(&u.token),
            json!({"status": "active", "price": {"amount": 3900, "currency": "USD"}, "tags": ["summer"]}),
        )
        .await
        .expect(200)
        .body;
    assert_eq!(upd["status"], "ACTIVE");
    assert_eq!(upd["price"]["amount"], 3900);
    assert_eq!(upd["tags"], json!(["summer"]));

    // Variants: add one, change it, remove it; the last one cannot be removed.
    let v = c
        .post(
            &format!("{base}/{id}/variants"),
            Some(&u.token),
            json!({"title": "XL", "sku": "LS-XL", "price": {"amount": 4200, "currency": "USD"}}),
        )
        .await
        .expect(201)
        .body;
    assert_eq!(v["position"], 2);
    let vid = v["id"].as_str().unwrap();
    // The variants answer the list envelope, in position order, paged.
    let listed = c.get(&format!("{base}/{id}/variants"), Some(&u.token)).await.expect(200).body;
    assert_eq!((listed["total"].as_u64(), listed["page"].as_u64(), listed["limit"].as_u64()), (Some(2), Some(1), Some(20)));
    assert_eq!(listed["data"].as_array().unwrap().len(), 2);
    assert_eq!(listed["data"][1]["id"], vid);
    let second = c.get(&format!("{base}/{id}/variants?limit=1&page=2"), Some(&u.token)).await.expect(200).body;
    assert_eq!((second["data"][0]["id"].as_str(), second["totalPages"].as_u64()), (Some(vid), Some(2)));
    let wrong = c.get(&format!("{base}/{id}/variants?limit=0"), Some(&u.token)).await.expect(400);
    assert_eq!(wrong.body["error"]["fields"][0]["field"], "limit");
    let v2 =
        c.patch(&format!("{base}/{id}/variants/{vid}"), Some(&u.token), json!({"inventoryQuantity": 7})).await.expect(200).body;
    assert_eq!(v2["inventoryQuantity"], 7);
    assert_eq!(c.get(&format!("{base}/{id}"), Some(&u.token)).await.body["totalInventory"], 7);
    c.delete(&format!("{base}/{id}/variants/{vid}"), Some(&u.token)).await.expect(204);
    let only = c.get(&format!("{base}/{id}"), Some(&u.token)).await.body["variants"][0]["id"].as_str().unwrap().to_string();
    let last = c.delete(&format!("{base}/{id}/variants/{only}"), Some(&u.token)).await;
    assert_eq!((last.status.as_u16(), last.code()), (422, "BUSINESS_RULE"));

    c.delete(&format!("{base}/{id}"), Some(&u.token)).await.expect(204);
    assert_eq!(c.get(&format!("{base}/{id}"), Some(&u.token)).await.expect(404).code(), "NOT_FOUND");
    let list = c.get(&base, Some(&u.token)).await.expect(200).body;
    assert_eq!(list["total"], 1);
}

#[tokio::test]
async fn options_and_variants_are_checked_together() {
    let app = spawn_app().await;
    let c = &app.client;
    let u = create_user(c).await;
    let s = create_store(c, &u).await;
    let body = json!({
        "title": "Tee",
        "options": [{"name": "Size", "values": ["S", "M"]}, {"name": "Color", "values": ["Red"]}],
        "variants": [
            {"optionValues": ["S", "Red"], "price": {"amount": 1000, "currency": "USD"}, "sku": "TEE-S"},
            {"optionValues": ["M", "Red"], "price": {"amount": 1100, "currency": "USD"}, "inventoryQuantity": 3}
        ]
    });
    let p = c.post(&format!("/api/v1/stores/{s}/products"), Some(&u.token), body).await.expect(201).body;
    assert_eq!(p["variants"][0]["title"], "S / Red");
    assert_eq!(p["price"]["amount"], 1000, "the product price is the lowest variant price");
    assert_eq!(p["totalInventory"], 3);
    let bad = json!({"title": "Tee", "options": [{"name": "Size", "values": ["S"]}], "variants": [{"optionValues": ["L"], "price": {"amount": 1, "currency": "USD"}}]});
    let a = c.post(&format!("/api/v1/stores/{s}/products"), Some(&u.token), bad).await.expect(400);
    assert_eq!(a.body["error"]["fields"][0]["field"], "variants[0].optionValues");
}

fn titles(list: &Value) -> Vec<String> {
    list["data"].as_array().unwrap().iter().map(|p| p["title"].as_str().unwrap().to_string()).collect()
}

#[tokio::test]
async fn lists_page_sort_and_filter_from_the_indexes() {
    let app = spawn_app().await;
    let c = &app.client;
    let u = create_user(c).await;
    let s = create_store(c, &u).await;
    let base = format!("/api/v1/stores/{s}/products");
    let prices = [500, 100, 900, 300, 700];
    for (i, price) in prices.iter().enumerate() {
        create_product(c, &u, &s, &format!("P{i}"), *price).await;
    }
    c.post(&base, Some(&u.token), json!({"title": "Draft one", "price": {"amount": 50, "currency": "USD"}})).await.expect(201);

    let by_price =
        c.get(&format!("{base}?sortBy=price&sortOrder=asc&status=active&limit=2"), Some(&u.token)).await.expect(200).body;
    assert_eq!(titles(&by_price), ["P1", "P3"]);
    assert_eq!(
        (by_price["total"].as_u64(), by_price["totalPages"].as_u64(), by_price["limit"].as_u64()),
        (Some(5), Some(3), Some(2))
    );
    let page3 = c.get(&format!("{base}?sortBy=price&sortOrder=asc&status=ACTIVE&limit=2&page=3"), Some(&u.token)).await.body;
    assert_eq!(titles(&page3), ["P2"]);

    // Default: newest first, every status.
    let all = c.get(&base, Some(&u.token)).await.expect(200).body;
    assert_eq!(all["total"], 6);
    assert_eq!(titles(&all)[0], "Draft one");
    let by_title = c.get(&format!("{base}?sortBy=title&sortOrder=asc"), Some(&u.token)).await.body;
    assert_eq!(titles(&by_title), ["Draft one", "P0", "P1", "P2", "P3", "P4"]);
    let drafts = c.get(&format!("{base}?status=draft"), Some(&u.token)).await.body;
    assert_eq!(titles(&drafts), ["Draft one"]);

    // A product changing status moves between the filtered lists and keeps the totals right.
    let id = all["data"][0]["id"].as_str().unwrap();
    c.patch(&format!("{base}/{id}"), Some(&u.token), json!({"status": "ARCHIVED"})).await.expect(200);
    assert_eq!(c.get(&format!("{base}?status=draft"), Some(&u.token)).await.body["total"], 0);
    assert_eq!(c.get(&format!("{base}?status=archived"), Some(&u.token)).await.body["total"], 1);
    assert_eq!(c.get(&base, Some(&u.token)).await.body["total"], 6);

    // Several statuses merge their lists in order, paged; all three are the list of every product.
    c.post(&base, Some(&u.token), json!({"title": "Draft two", "price": {"amount": 400, "currency": "USD"}})).await.expect(201);
    let some = format!("{base}?status=archived,draft&sortBy=price&sortOrder=asc&limit=1");
    let first = c.get(&some, Some(&u.token)).await.expect(200).body;
    assert_eq!(
        (titles(&first), first["total"].as_u64(), first["totalPages"].as_u64()),
        (vec!["Draft one".to_string()], Some(2), Some(2))
    );
    assert_eq!(titles(&c.get(&format!("{some}&page=2"), Some(&u.token)).await.body), ["Draft two"]);
    let desc = c.get(&format!("{base}?status=ARCHIVED,draft,active&sortBy=price"), Some(&u.token)).await.body;
    assert_eq!(desc["total"], 7);
    assert_eq!(titles(&desc)[..3], ["P2", "P4", "P0"]);
    let mixed =
        c.get(&format!("{base}?status=active,archived&sortBy=price&sortOrder=desc&limit=2&page=3"), Some(&u.token)).await.body;
    assert_eq!((titles(&mixed), mixed["total"].as_u64()), (vec!["P1".to_string(), "Draft one".to_string()], Some(6)));
    // An unknown status names the parameter and the values it takes; nothing is listed.
    let bad = c.get(&format!("{base}?status=active,sold"), Some(&u.token)).await.expect(400).body;
    assert_eq!(bad["error"]["fields"][0]["field"], "status");
    assert!(bad["error"]["fields"][0]["message"].as_str().unwrap().contains("DRAFT, ACTIVE, ARCHIVED"), "{bad}");
}

#[tokio::test]
async fn concurrent_creates_are_all_stored() {
    let app = spawn_app().await;
    let c = app.client.clone();
    let u = create_user(&c).await;
    let s = create_store(&c, &u).await;
    let mut tasks = Vec::new();
    for i in 0..64 {
        let (c, token, s) = (c.clone(), u.token.clone(), s.clone());
        tasks.push(tokio::spawn(async move {
            c.post(
                &format!("/api/v1/stores/{s}/products"),
                Some(&token),
                json!({"title": format!("Item {i}"), "price": {"amount": i, "currency": "USD"}}),
            )
            .await
            .status
            .as_u16()
        }));
    }
    for t in tasks {
        assert_eq!(t.await.unwrap(), 201);
    }
    let list = c.get(&format!("/api/v1/stores/{s}/products?limit=250"), Some(&u.token)).await.body;
    assert_eq!(list["total"], 64);
    assert_eq!(list["data"].as_array().unwrap().len(), 64);
}

#[tokio::test]
async fn deep_pages_follow_writes_at_once() {
    let app = spawn_app().await;
    let c = app.client.clone();
    let u = create_user(&c).await;
    let s = create_store(&c, &u).await;
    let base = format!("/api/v1/stores/{s}/products");
    let mut tasks = Vec::new();
    for i in 0..240 {
        let (c, token, base) = (c.clone(), u.token.clone(), base.clone());
        tasks.push(tokio::spawn(async move {
            let body = json!({"title": format!("P{i:03}"), "price": {"amount": 1000 + i, "currency": "USD"}, "status": "ACTIVE"});
            c.post(&base, Some(&token), body).await.expect(201);
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    // Offset 220: past the point where pages come from the in-memory copy of the order.
    let deep = format!("{base}?sortBy=price&sortOrder=asc&limit=20&page=12");
    let before = c.get(&deep, Some(&u.token)).await.expect(200).body;
    assert_eq!(titles(&before), (220..240).map(|i| format!("P{i:03}")).collect::<Vec<_>>());
    assert_eq!(before["total"], 240);
    // A new cheapest product shifts every later page by one, visible to the very next read.
    create_product(&c, &u, &s, "Cheapest", 1).await;
    let after = c.get(&deep, Some(&u.token)).await.expect(200).body;
    assert_eq!(titles(&after), (219..239).map(|i| format!("P{i:03}")).collect::<Vec<_>>());
    assert_eq!(after["total"], 241);
    let desc = c.get(&format!("{base}?sortBy=price&sortOrder=desc&limit=20&page=13"), Some(&u.token)).await.expect(200).body;
    assert_eq!(titles(&desc), ["Cheapest"], "offset 240 of 241 in descending order");
    // Deleting moves them back.
    let id = c.get(&format!("{base}?sortBy=price&sortOrder=asc&limit=1"), Some(&u.token)).await.body["data"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    c.delete(&format!("{base}/{id}"), Some(&u.token)).await.expect(204);
    assert_eq!(titles(&c.get(&deep, Some(&u.token)).await.body), titles(&before));
}

#[tokio::test]
async fn stock_at_the_integer_limits_is_refused_not_wrapped() {
    let app = spawn_app().await;
    let c = &app.client;
    let u = create_user(c).await;
    let s = create_store(c, &u).await;
    let base = format!("/api/v1/stores/{s}/products");
    let price = json!({"amount": 100, "currency": "USD"});
    for q in [i64::MIN, i64::MAX, -1, -1_000_000_001, 1_000_000_001] {
        let variant = json!({"title": "A", "sku": "EDGE-1", "price": price, "inventoryQuantity": q});
        let a = c.post(&base, Some(&u.token), json!({"title": "Edge", "variants": [variant]})).await.expect(400);
        assert_eq!(a.body["error"]["fields"][0]["field"], "variants[0].inventoryQuantity", "{q}: {}", a.body);
    }
    assert_eq!(c.get(&base, Some(&u.token)).await.expect(200).body["total"], 0, "nothing was written");
    // The bounds themselves are stock; beyond them a change is refused and the stock kept.
    let p = c.post(&base, Some(&u.token), json!({"title": "Edge", "price": price})).await.expect(201).body;
    let variant = format!("{base}/{}/variants/{}", p["id"].as_str().unwrap(), p["variants"][0]["id"].as_str().unwrap());
    c.patch(&variant, Some(&u.token), json!({"inventoryQuantity": 1_000_000_000})).await.expect(200);
    let a = c.patch(&variant, Some(&u.token), json!({"inventoryQuantity": i64::MIN})).await.expect(400);
    assert_eq!(a.body["error"]["fields"][0]["field"], "inventoryQuantity");
    let read = c.get(&format!("{base}/{}", p["id"].as_str().unwrap()), Some(&u.token)).await.expect(200).body;
    assert_eq!(read["totalInventory"], 1_000_000_000);
    let a = c.patch(&variant, Some(&u.token), json!({"inventoryQuantity": -1})).await.expect(400);
    assert_eq!(a.body["error"]["fields"][0]["field"], "inventoryQuantity", "stock is never below zero");
}

#[tokio::test]
async fn one_line_fields_refuse_control_characters_and_descriptions_keep_their_lines() {
    let app = spawn_app().await;
    let c = &app.client;
    let u = create_user(c).await;
    let s = create_store(c, &u).await;
    let base = format!("/api/v1/stores/{s}/products");
    let price = json!({"amount": 100, "currency": "USD"});
    let a = c
        .post(&base, Some(&u.token), json!({"title": "Mug\nFree", "vendor": "Acme\u{7}", "tags": ["a\rb"], "price": price}))
        .await
        .expect(400);
    let fields: Vec<&str> = a.body["error"]["fields"].as_array().unwrap().iter().map(|f| f["field"].as_str().unwrap()).collect();
    assert_eq!(fields, ["title", "vendor", "tags[0]"]);
    let p = c
        .post(&base, Some(&u.token), json!({"title": "Mug", "description": "Line one\n\tLine two", "price": price}))
        .await
        .expect(201)
        .body;
    assert_eq!(p["description"], "Line one\n\tLine two");
}
