//! `S/discounts`: CRUD and code uniqueness, validation against a cart, combination rules over
//! several codes, code search, eligible automatic discounts, comments, the deprecated export,
//! and usage consumed only by the order-creating write.

use serde_json::{Value, json};
use shopcell::cells::discounts::{self, consume_usage};
use uuid::Uuid;

use crate::calculate::{Shop, amount};
use crate::support::*;

fn fields(a: &Answer) -> Vec<String> {
    a.body["error"]["fields"].as_array().unwrap().iter().map(|f| f["field"].as_str().unwrap().to_string()).collect()
}

fn codes(list: &Value) -> Vec<String> {
    list["data"].as_array().unwrap().iter().map(|d| d["code"].as_str().unwrap_or("").to_string()).collect()
}

#[tokio::test]
async fn discounts_are_created_read_replaced_and_deleted_with_unique_codes() {
    let app = spawn_app().await;
    let c = &app.client;
    let shop = Shop::new(c).await;
    let t = Some(shop.owner.token.as_str());
    let base = shop.path("/discounts");

    let d = shop
        .discount(
            c,
            json!({"title": "Summer", "code": "Summer10", "valueType": "percentage", "value": 1000, "usageLimit": 100,
                   "channels": ["online_store"]}),
        )
        .await;
    assert_eq!(
        (d["code"].as_str(), d["method"].as_str(), d["status"].as_str()),
        (Some("Summer10"), Some("code"), Some("ACTIVE"))
    );
    assert_eq!((d["target"].as_str(), d["class"].as_str(), d["value"].as_i64()), (Some("order"), Some("order"), Some(1000)));
    assert_eq!(d["channels"], json!(["online_store"]));
    let id = d["id"].as_str().unwrap().to_string();
    // The same code in another case is taken: 409, and nothing is written.
    let taken = c.post(&base, t, json!({"title": "Dup", "code": "SUMMER10", "valueType": "freeShipping"})).await.expect(409);
    assert_eq!((taken.code(), fields(&taken)), ("DISCOUNT_CODE_TAKEN", vec!["code".to_string()]));
    let bad = c.post(&base, t, json!({"title": "", "valueType": "percentage", "value": 0})).await.expect(400);
    assert_eq!(fields(&bad), ["title", "value"]);
    assert_eq!(c.get(&base, t).await.expect(200).body["total"], 1);

    let auto = shop.discount(c, json!({"title": "Free shipping", "valueType": "freeShipping", "disabled": true})).await;
    assert_eq!(
        (auto["method"].as_str(), auto["code"].clone(), auto["status"].as_str()),
        (Some("automatic"), Value::Null, Some("DISABLED"))
    );
    let later = shop
        .discount(c, json!({"title": "Winter", "code": "WINTER", "valueType": "fixedAmount", "value": 500, "startsAt": "2099-01-01T00:00:00Z"}))
        .await;
    assert_eq!(later["status"], "SCHEDULED");

    assert_eq!(c.get(&format!("{base}/{id}"), t).await.expect(200).body, d);
    // PATCH replaces the whole discount and keeps id and creation time; the old code is freed.
    let replaced = c
        .patch(
            &format!("{base}/{id}"),
            t,
            json!({"title": "Summer 15", "code": "SUMMER15", "valueType": "percentage", "value": 1500}),
        )
        .await
        .expect(200)
        .body;
    assert_eq!((replaced["id"].as_str(), replaced["createdAt"].clone()), (Some(id.as_str()), d["createdAt"].clone()));
    assert_eq!(
        (replaced["code"].as_str(), replaced["value"].as_i64(), replaced["usageLimit"].clone()),
        (Some("SUMMER15"), Some(1500), Value::Null)
    );
    assert_eq!(replaced["startsAt"], d["startsAt"]);
    shop.discount(c, json!({"title": "Old code again", "code": "summer10", "valueType": "percentage", "value": 500})).await;
    // Taking another discount's code on replace is a 409 that changes nothing.
    let clash =
        c.patch(&format!("{base}/{id}"), t, json!({"title": "X", "code": "winter", "valueType": "percentage", "value": 5})).await;
    assert_eq!(clash.expect(409).code(), "DISCOUNT_CODE_TAKEN");
    assert_eq!(c.get(&format!("{base}/{id}"), t).await.expect(200).body["code"], "SUMMER15");

    // Lists: sort by code, filter by status, type, method and search; paginated envelope.
    let list = c.get(&format!("{base}?sortBy=code&sortOrder=asc"), t).await.expect(200).body;
    assert_eq!((list["total"].as_u64(), list["totalPages"].as_u64()), (Some(4), Some(1)));
    assert_eq!(codes(&list), ["", "summer10", "SUMMER15", "WINTER"]);
    let page2 = c.get(&format!("{base}?sortBy=title&sortOrder=asc&limit=1&page=2"), t).await.expect(200).body;
    assert_eq!(
        (page2["data"][0]["title"].as_str(), page2["total"].as_u64(), page2["totalPages"].as_u64()),
        (Some("Old code again"), Some(4), Some(4))
    );
    let q = |query: &'static str| {
        let path = format!("{base}?{query}");
        async move { c.get(&path, t).await }
    };
    assert_eq!(codes(&q("status=scheduled").await.expect(200).body), ["WINTER"]);
    assert_eq!(q("status=disabled").await.body["data"][0]["title"], "Free shipping");
    assert_eq!(q("type=fixedAmount").await.body["total"], 1);
    assert_eq!(q("valueType=freeShipping").await.body["total"], 1);
    assert_eq!(q("method=automatic").await.body["total"], 1);
    let found = q("search=summer&sortBy=code&sortOrder=asc").await.expect(200).body;
    assert_eq!((codes(&found), found["total"].as_u64()), (vec!["summer10".to_string(), "SUMMER15".into()], Some(2)));
    assert_eq!(q("search=code%20again").await.body["total"], 1);
    for bad in ["status=gone", "type=half", "sortBy=value", "limit=251"] {
        assert_eq!(fields(&c.get(&format!("{base}?{bad}"), t).await.expect(400)).len(), 1, "{bad}");
    }

    c.delete(&format!("{base}/{id}"), t).await.expect(204);
    assert_eq!(c.get(&format!("{base}/{id}"), t).await.expect(404).code(), "NOT_FOUND");
    assert_eq!(c.get(&base, t).await.body["total"], 3);
    // Its code is free again.
    shop.discount(c, json!({"title": "Back", "code": "SUMMER15", "valueType": "percentage", "value": 100})).await;
    // Another store's discount is not found here.
    let other = Shop::new(c).await;
    let theirs = other.discount(c, json!({"title": "Theirs", "code": "SUMMER15", "valueType": "percentage", "value": 100})).await;
    c.get(&format!("{base}/{}", theirs["id"].as_str().unwrap()), t).await.expect(404);
}

/// A shop with one 25.00 product; returns the shop and its variant id.
async fn cart_shop(c: &HttpClient) -> (Shop, String) {
    let shop = Shop::new(c).await;
    let (_, vid) = shop.product(c, "Candle", 2500, 100).await;
    (shop, vid)
}

#[tokio::test]
async fn a_code_is_validated_against_a_cart_with_reasons() {
    let app = spawn_app().await;
    let c = &app.client;
    let (shop, vid) = cart_shop(c).await;
    let t = Some(shop.owner.token.as_str());
    shop.discount(c, json!({"title": "Ten", "code": "TEN", "valueType": "percentage", "value": 1000})).await;
    shop.discount(
        c,
        json!({"title": "Big", "code": "MIN100", "valueType": "fixedAmount", "value": 1500, "minimum": {"type": "subtotal", "value": 10000}}),
    )
    .await;
    let vip = Uuid::now_v7();
    shop.discount(
        c,
        json!({"title": "VIP", "code": "VIP", "valueType": "percentage", "value": 2000, "customers": {"type": "specific", "customerIds": [vip]}}),
    )
    .await;
    let validate = |code: &str, cart: Value| {
        let (path, body) = (shop.path("/discounts/validate"), json!({"code": code, "cart": cart}));
        async move { c.post(&path, t, body).await }
    };
    let cart = json!({"lineItems": [{"variantId": vid, "quantity": 2}]});

    // 10 % of 50.00.
    let v = validate("ten", cart.clone()).await.expect(200).body;
    assert_eq!((v["valid"].as_bool(), amount(&v, "/amount"), v["reasons"].clone()), (Some(true), 500, json!([])));
    assert_eq!(v["discount"]["code"], "TEN");
    let v = validate("MIN100", cart.clone()).await.expect(200).body;
    assert_eq!((v["valid"].as_bool(), amount(&v, "/amount")), (Some(false), 0));
    assert_eq!(v["reasonCodes"], json!(["DISCOUNT_MINIMUM_NOT_MET"]));
    assert_eq!(v["reasons"][0], "MIN100 needs a subtotal of at least 100.00 USD");
    assert_eq!(v["discount"]["code"], "MIN100");
    // Four candles reach the minimum.
    let v = validate("MIN100", json!({"lineItems": [{"variantId": vid, "quantity": 4}]})).await.expect(200).body;
    assert_eq!((v["valid"].as_bool(), amount(&v, "/amount")), (Some(true), 1500));
    let v = validate("NOPE", cart.clone()).await.expect(200).body;
    assert_eq!(
        (v["valid"].as_bool(), v["discount"].clone(), v["reasonCodes"].clone()),
        (Some(false), Value::Null, json!(["DISCOUNT_NOT_FOUND"]))
    );
    // Customer eligibility follows the cart's customerId.
    let v = validate("VIP", cart.clone()).await.expect(200).body;
    assert_eq!(v["reasonCodes"], json!(["DISCOUNT_CUSTOMER_INELIGIBLE"]));
    let v = validate("VIP", json!({"lineItems": [{"variantId": vid, "quantity": 2}], "customerId": vip})).await.expect(200).body;
    assert_eq!((v["valid"].as_bool(), amount(&v, "/amount")), (Some(true), 1000));

    // Bad carts are 400s naming the field inside `cart`.
    let a = validate("TEN", json!({"cartId": Uuid::now_v7()})).await.expect(400);
    assert_eq!(fields(&a), ["cart.cartId"]);
    let a = validate(
        "TEN",
        json!({"lineItems": [{"variantId": Uuid::now_v7(), "quantity": 1}, {"variantId": vid, "quantity": 101}]}),
    )
    .await
    .expect(400);
    assert_eq!(fields(&a), ["cart.lineItems[0].variantId", "cart.lineItems[1].quantity"]);
    assert_eq!(fields(&validate("", cart.clone()).await.expect(400)), ["code"]);
    let no_cart = c.post(&shop.path("/discounts/validate"), t, json!({"code": "TEN"})).await.expect(400);
    assert!(no_cart.body["error"]["message"].as_str().unwrap().contains("cart"), "{}", no_cart.body);
}

#[tokio::test]
async fn several_codes_are_validated_in_order_respecting_combination_rules() {
    let app = spawn_app().await;
    let c = &app.client;
    let (shop, vid) = cart_shop(c).await;
    let t = Some(shop.owner.token.as_str());
    let order = json!({"orderDiscounts": true});
    shop.discount(c, json!({"title": "Ten", "code": "TEN", "valueType": "percentage", "value": 1000, "combinesWith": order}))
        .await;
    shop.discount(c, json!({"title": "Five", "code": "FIVE", "valueType": "fixedAmount", "value": 500, "combinesWith": order}))
        .await;
    shop.discount(c, json!({"title": "Solo", "code": "SOLO", "valueType": "percentage", "value": 2000})).await;
    let many = |codes: Value| {
        let path = shop.path("/discounts/validate-many");
        let body = json!({"codes": codes, "cart": {"lineItems": [{"variantId": vid, "quantity": 2}]}});
        async move { c.post(&path, t, body).await }
    };
    let r = many(json!(["TEN", "SOLO", "five", "ten", "GONE"])).await.expect(200).body;
    assert_eq!(r["appliedCodes"], json!(["TEN", "FIVE"]));
    let results = r["results"].as_array().unwrap();
    let row =
        |i: usize| (results[i]["code"].as_str().unwrap(), results[i]["valid"].as_bool().unwrap(), amount(&results[i], "/amount"));
    // TEN: 10 % of 50.00; SOLO combines with nothing; FIVE stacks with TEN; a repeat is refused.
    assert_eq!(
        [row(0), row(1), row(2), row(3), row(4)],
        [("TEN", true, 500), ("SOLO", false, 0), ("five", true, 500), ("ten", false, 0), ("GONE", false, 0)]
    );
    assert_eq!(results[1]["reasonCodes"], json!(["DISCOUNT_NOT_COMBINABLE"]));
    assert_eq!(results[1]["reasons"][0], "SOLO cannot be combined with TEN");
    assert_eq!(results[3]["reasonCodes"], json!(["DISCOUNT_DUPLICATE"]));
    assert_eq!(results[0]["reasons"], json!([]));
    assert_eq!(results[4]["discount"], Value::Null);
    // In the other order SOLO wins and the others are refused.
    let r = many(json!(["SOLO", "TEN"])).await.expect(200).body;
    assert_eq!((r["appliedCodes"].clone(), amount(&r["results"][0], "/amount")), (json!(["SOLO"]), 1000));

    let eleven: Vec<String> = (0..11).map(|i| format!("C{i}")).collect();
    assert_eq!(fields(&many(json!(eleven)).await.expect(400)), ["codes"]);
    assert_eq!(fields(&many(json!([])).await.expect(400)), ["codes"]);
    let ten: Vec<String> = (0..10).map(|i| format!("C{i}")).collect();
    assert_eq!(many(json!(ten)).await.expect(200).body["results"].as_array().unwrap().len(), 10);
}

#[tokio::test]
async fn code_search_finds_active_codes_only() {
    let app = spawn_app().await;
    let c = &app.client;
    let shop = Shop::new(c).await;
    let t = Some(shop.owner.token.as_str());
    for i in 1..=12 {
        shop.discount(
            c,
            json!({"title": format!("Spring {i}"), "code": format!("SPRING{i:02}"), "valueType": "percentage", "value": 100}),
        )
        .await;
    }
    shop.discount(
        c,
        json!({"title": "Spring off", "code": "SPRINGX", "valueType": "percentage", "value": 100, "disabled": true}),
    )
    .await;
    shop.discount(
        c,
        json!({"title": "Spring later", "code": "SPRINGY", "valueType": "percentage", "value": 100, "startsAt": "2099-01-01T00:00:00Z"}),
    )
    .await;
    shop.discount(
        c,
        json!({"title": "Spring ended", "code": "SPRINGZ", "valueType": "percentage", "value": 100,
               "startsAt": "2020-01-01T00:00:00Z", "endsAt": "2020-02-01T00:00:00Z"}),
    )
    .await;
    shop.discount(
        c,
        json!({"title": "Till spring", "code": "POSONLY", "valueType": "percentage", "value": 100, "channels": ["pos"]}),
    )
    .await;
    shop.discount(c, json!({"title": "Automatic spring", "valueType": "percentage", "value": 100})).await;
    let search = |q: &str| {
        let path = shop.path(&format!("/discounts/codes/search?{q}"));
        async move { c.get(&path, t).await }
    };

    // Default limit 10, codes starting with the text first, in code order.
    let r = search("search=spring").await.expect(200).body;
    let expected: Vec<String> = (1..=10).map(|i| format!("SPRING{i:02}")).collect();
    assert_eq!(codes(&r), expected);
    assert_eq!(
        (r["total"].as_u64(), r["page"].as_u64(), r["limit"].as_u64(), r["totalPages"].as_u64()),
        (Some(13), Some(1), Some(10), Some(2))
    );
    let r = search("search=SPRING&limit=50").await.expect(200).body;
    let mut expected: Vec<String> = (1..=12).map(|i| format!("SPRING{i:02}")).collect();
    // Then codes whose title matches (never the automatic one, nor the inactive codes).
    expected.push("POSONLY".into());
    assert_eq!(codes(&r), expected);
    // Pages continue where the previous one stopped, across both groups.
    let r = search("search=spring&page=2").await.expect(200).body;
    assert_eq!(codes(&r), ["SPRING11", "SPRING12", "POSONLY"]);
    assert_eq!(r["total"], 13);
    // A misspelt parameter is refused by name, not ignored.
    let typo = search("serch=spring").await.expect(400);
    assert_eq!(fields(&typo), ["serch"]);
    assert!(typo.body["message"].as_str().unwrap().contains("search, channel, page, limit"), "{}", typo.body);
    // A channel keeps the codes usable there.
    let r = search("search=till&channel=pos").await.expect(200).body;
    assert_eq!(codes(&r), ["POSONLY"]);
    assert_eq!(search("search=till&channel=online_store").await.expect(200).body["data"], json!([]));
    assert_eq!(search("limit=3").await.expect(200).body["data"].as_array().unwrap().len(), 3);
    assert_eq!(fields(&search("limit=251").await.expect(400)), ["limit"]);
    assert_eq!(fields(&search("limit=0").await.expect(400)), ["limit"]);
}

#[tokio::test]
async fn eligible_automatic_discounts_for_a_cart() {
    let app = spawn_app().await;
    let c = &app.client;
    let (shop, vid) = cart_shop(c).await;
    let t = Some(shop.owner.token.as_str());
    let all = shop
        .discount(
            c,
            json!({"title": "Everything 10", "valueType": "percentage", "value": 1000, "combinesWith": {"orderDiscounts": true}}),
        )
        .await;
    shop.discount(
        c,
        json!({"title": "Bulk", "valueType": "fixedAmount", "value": 700, "minimum": {"type": "quantity", "value": 5},
               "combinesWith": {"orderDiscounts": true}}),
    )
    .await;
    shop.discount(c, json!({"title": "Code only", "code": "CODE", "valueType": "percentage", "value": 5000})).await;
    let eligible = |qty: u32| {
        let path = shop.path("/discounts/automatic/eligible");
        let body = json!({"cart": {"lineItems": [{"variantId": vid, "quantity": qty}]}});
        async move { c.post(&path, t, body).await }
    };
    let r = eligible(2).await.expect(200).body;
    let list = r["discounts"].as_array().unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!((list[0]["discount"]["id"].clone(), amount(&list[0], "/amount")), (all["id"].clone(), 500));
    // Five candles (125.00) reach the bulk minimum: 12.50 + 7.00.
    let r = eligible(5).await.expect(200).body;
    let amounts: Vec<i64> = r["discounts"].as_array().unwrap().iter().map(|d| amount(d, "/amount")).collect();
    assert_eq!(amounts, [1250, 700]);
}

#[tokio::test]
async fn the_export_is_deprecated_and_always_503() {
    let app = spawn_app().await;
    let c = &app.client;
    let shop = Shop::new(c).await;
    let a = c.get(&shop.path("/discounts/export"), Some(&shop.owner.token)).await.expect(503);
    assert_eq!(a.code(), "UNAVAILABLE");
    let h = |name: &str| a.headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
    assert_eq!(h("deprecation"), "@1767225600");
    assert_eq!(h("sunset"), "Wed, 30 Jun 2027 00:00:00 GMT");
    assert_eq!(h("link"), format!("</api/v1/stores/{}/bulk-jobs>; rel=\"successor-version\"", shop.store));
    // The same 503 to anyone, with or without a token, for any store id: it never serves.
    let anonymous = c.get(&shop.path("/discounts/export"), None).await.expect(503);
    assert_eq!((anonymous.code(), anonymous.headers["deprecation"].to_str().unwrap()), ("UNAVAILABLE", "@1767225600"));
    let stranger = create_user(c).await;
    c.get(&shop.path("/discounts/export"), Some(&stranger.token)).await.expect(503);
    c.get("/api/v1/stores/01a2d0c0-0000-7000-8000-000000000000/discounts/export", None).await.expect(503);
    let doc = c.get("/api/v1/openapi.json", None).await.expect(200).body;
    assert_eq!(doc["paths"]["/api/v1/stores/{storeId}/discounts/export"]["get"]["deprecated"], true);
}

#[tokio::test]
async fn comments_belong_to_their_author_and_owners_and_admins() {
    let app = spawn_app().await;
    let c = &app.client;
    let shop = Shop::new(c).await;
    let (admin, staff) = (create_user(c).await, create_user(c).await);
    for (u, role) in [(&admin, "admin"), (&staff, "staff")] {
        c.post(&shop.path("/members"), Some(&shop.owner.token), json!({"email": u.email, "role": role})).await.expect(201);
    }
    let d = shop.discount(c, json!({"title": "Ten", "code": "TEN", "valueType": "percentage", "value": 1000})).await;
    let path = shop.path(&format!("/discounts/{}/comments", d["id"].as_str().unwrap()));
    let one = |c_id: &Value| format!("{path}/{}", c_id.as_str().unwrap());

    let by_owner = c.post(&path, Some(&shop.owner.token), json!({"body": " Launch on Monday "})).await.expect(201).body;
    assert_eq!(
        (by_owner["body"].as_str(), by_owner["authorId"].as_str()),
        (Some("Launch on Monday"), Some(shop.owner.id.as_str()))
    );
    let by_staff = c.post(&path, Some(&staff.token), json!({"body": "Printed flyers"})).await.expect(201).body;
    assert_eq!(fields(&c.post(&path, Some(&staff.token), json!({"body": "  "})).await.expect(400)), ["body"]);

    // Staff change their own comment, not the owner's.
    let edited = c.patch(&one(&by_staff["id"]), Some(&staff.token), json!({"body": "Flyers printed"})).await.expect(200).body;
    assert_eq!(edited["body"], "Flyers printed");
    assert_eq!(
        c.patch(&one(&by_owner["id"]), Some(&staff.token), json!({"body": "Mine now"})).await.expect(403).code(),
        "FORBIDDEN"
    );
    assert_eq!(c.delete(&one(&by_owner["id"]), Some(&staff.token)).await.expect(403).code(), "FORBIDDEN");
    // Admins and owners change anyone's.
    c.patch(&one(&by_staff["id"]), Some(&admin.token), json!({"body": "Checked"})).await.expect(200);
    let list = c.get(&path, Some(&staff.token)).await.expect(200).body;
    assert_eq!(list["total"], 2);
    assert_eq!(list["data"][0]["body"], "Launch on Monday");
    assert_eq!(list["data"][1]["body"], "Checked");
    c.delete(&one(&by_staff["id"]), Some(&admin.token)).await.expect(204);
    c.delete(&one(&by_owner["id"]), Some(&shop.owner.token)).await.expect(204);
    assert_eq!(c.get(&path, Some(&staff.token)).await.expect(200).body["total"], 0);
    c.delete(&one(&by_owner["id"]), Some(&shop.owner.token)).await.expect(404);
    let unknown = shop.path(&format!("/discounts/{}/comments", Uuid::now_v7()));
    c.post(&unknown, Some(&shop.owner.token), json!({"body": "Hello"})).await.expect(404);
    c.get(&unknown, Some(&shop.owner.token)).await.expect(404);
}

#[tokio::test]
async fn usage_is_consumed_only_by_the_order_write_and_enforced_there() {
    let app = spawn_app().await;
    let c = &app.client;
    let (shop, vid) = cart_shop(c).await;
    let t = Some(shop.owner.token.as_str());
    let limited = shop
        .discount(c, json!({"title": "Two uses", "code": "TWICE", "valueType": "percentage", "value": 1000, "usageLimit": 2}))
        .await;
    let once = shop
        .discount(
            c,
            json!({"title": "Once each", "code": "ONCE", "valueType": "fixedAmount", "value": 100, "oncePerCustomer": true}),
        )
        .await;
    let store: Uuid = shop.store.parse().unwrap();
    let id = |d: &Value| -> Uuid { d["id"].as_str().unwrap().parse().unwrap() };
    let cell = app.cell();
    let consume = |discount: Uuid, customer: Option<&str>| {
        let (cell, customer) = (cell.clone(), customer.map(str::to_string));
        let now = cell.clock.now_ms();
        async move { cell.writer.write(Some(store), move |tx| consume_usage(tx, store, discount, customer.as_deref(), now)).await }
    };
    let validate = |code: &str, cart: Value| {
        let (path, body) = (shop.path("/discounts/validate"), json!({"code": code, "cart": cart}));
        async move { c.post(&path, t, body).await }
    };
    let cart = json!({"lineItems": [{"variantId": vid, "quantity": 1}]});

    // Validating and calculating never consume.
    for _ in 0..3 {
        assert_eq!(validate("TWICE", cart.clone()).await.expect(200).body["valid"], true);
    }
    consume(id(&limited), None).await.unwrap();
    consume(id(&limited), Some("a@example.com")).await.unwrap();
    let e = consume(id(&limited), None).await.unwrap_err();
    assert_eq!(e.code.as_str(), "DISCOUNT_USAGE_LIMIT_REACHED");
    let v = validate("TWICE", cart.clone()).await.expect(200).body;
    assert_eq!((v["valid"].as_bool(), v["reasonCodes"].clone()), (Some(false), json!(["DISCOUNT_USAGE_LIMIT_REACHED"])));
    let u = discounts::usage(&cell.read().unwrap(), store, id(&limited), None).unwrap();
    assert_eq!(u.total, 2);

    // Once per customer: a second use by the same customer is refused, another customer's is not.
    let customer = Uuid::now_v7();
    let key = customer.to_string();
    consume(id(&once), Some(&key)).await.unwrap();
    assert_eq!(consume(id(&once), Some(&key)).await.unwrap_err().code.as_str(), "DISCOUNT_USAGE_LIMIT_REACHED");
    consume(id(&once), Some("b@example.com")).await.unwrap();
    assert_eq!(consume(id(&once), None).await.unwrap_err().code.as_str(), "BUSINESS_RULE");
    let mine = json!({"lineItems": [{"variantId": vid, "quantity": 1}], "customerId": customer});
    assert_eq!(validate("ONCE", mine).await.expect(200).body["valid"], false);
    assert_eq!(
        validate("ONCE", json!({"lineItems": [{"variantId": vid, "quantity": 1}], "customerId": Uuid::now_v7()})).await.body["valid"],
        true
    );
    assert_eq!(discounts::usage(&cell.read().unwrap(), store, id(&once), Some(&key)).unwrap().by_customer, 1);
    // A deleted discount cannot be consumed.
    c.delete(&shop.path(&format!("/discounts/{}", id(&once))), t).await.expect(204);
    assert_eq!(consume(id(&once), Some("c@example.com")).await.unwrap_err().code.as_str(), "BUSINESS_RULE");
    assert_eq!(discounts::usage(&cell.read().unwrap(), store, id(&once), None).unwrap().total, 0);
}

#[tokio::test]
async fn the_status_filter_follows_the_clock() {
    let app = spawn_app().await;
    let c = &app.client;
    let shop = Shop::new(c).await;
    let hour = 3_600_000;
    let at = |ms: i64| shopcell::domain::time::rfc3339(app.clock.now_ms() + ms);
    shop.discount(
        c,
        json!({"title": "Flash", "code": "FLASH", "valueType": "percentage", "value": 1000,
               "startsAt": at(hour), "endsAt": at(2 * hour)}),
    )
    .await;
    shop.discount(c, json!({"title": "Always", "code": "ALWAYS", "valueType": "fixedAmount", "value": 100})).await;
    // Moving the clock past the access token's lifetime needs a fresh sign-in.
    let login = json!({"email": shop.owner.email, "password": PASSWORD});
    let listed = |query: &'static str| {
        let path = shop.path(&format!("/discounts?{query}&sortBy=code&sortOrder=asc"));
        let login = login.clone();
        async move {
            let signed_in = c.post("/api/v1/auth/login", None, login).await.expect(200).body;
            let body = c.get(&path, signed_in["accessToken"].as_str()).await.expect(200).body;
            (codes(&body), body["total"].as_u64().unwrap())
        }
    };
    assert_eq!(listed("status=SCHEDULED").await, (vec!["FLASH".to_string()], 1));
    assert_eq!(listed("status=active").await, (vec!["ALWAYS".to_string()], 1));

    app.clock.advance(std::time::Duration::from_millis(90 * 60_000));
    assert_eq!(listed("status=ACTIVE").await, (vec!["ALWAYS".to_string(), "FLASH".into()], 2));
    assert_eq!(listed("status=scheduled").await.1, 0);
    // Combined with a counted filter, the walk still reads the status at the moment of the list.
    assert_eq!(listed("status=ACTIVE&type=percentage").await, (vec!["FLASH".to_string()], 1));

    app.clock.advance(std::time::Duration::from_millis(hour as u64));
    assert_eq!(listed("status=EXPIRED").await, (vec!["FLASH".to_string()], 1));
    assert_eq!(listed("status=active,expired").await.1, 2);
    // The one-field filter reads its total from the counters.
    assert_eq!(listed("method=code").await.1, 2);
}
