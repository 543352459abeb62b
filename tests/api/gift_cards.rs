//! `S/gift-cards`: issue with a generated or a chosen code (shown once, stored only as a digest),
//! code uniqueness, list filters, sorts and paging, disabling for good, expiry, redemptions as the
//! card shows them, and bad input that writes nothing.

use serde_json::{Value, json};
use shopcell::cells::gift_cards::{self, redeem_gift_card};
use shopcell::domain::money::{Currency, Money};
use shopcell::domain::time::{parse_rfc3339, rfc3339};
use uuid::Uuid;

use crate::calculate::Shop;
use crate::support::*;

fn fields(a: &Answer) -> Vec<String> {
    a.body["error"]["fields"].as_array().unwrap().iter().map(|f| f["field"].as_str().unwrap().to_string()).collect()
}

fn usd(amount: i64) -> Value {
    json!({"amount": amount, "currency": "USD"})
}

fn ids(list: &Value) -> Vec<String> {
    list["data"].as_array().unwrap().iter().map(|g| g["id"].as_str().unwrap().to_string()).collect()
}

fn balances(list: &Value) -> Vec<i64> {
    list["data"].as_array().unwrap().iter().map(|g| g["balance"]["amount"].as_i64().unwrap()).collect()
}

/// Issues a card as the store's owner; the 201 body.
async fn issue(c: &HttpClient, shop: &Shop, body: Value) -> Value {
    c.post(&shop.path("/gift-cards"), Some(&shop.owner.token), body).await.expect(201).body
}

/// A page of the store's cards; the 200 body.
async fn list(c: &HttpClient, shop: &Shop, query: &str) -> Value {
    c.get(&format!("{}?{query}", shop.path("/gift-cards")), Some(&shop.owner.token)).await.expect(200).body
}

#[tokio::test]
async fn a_card_is_issued_with_its_code_shown_once_and_stored_only_as_a_digest() {
    let mut app = spawn_app().await;
    let c = &app.client;
    let shop = Shop::new(c).await;
    let t = Some(shop.owner.token.as_str());
    let base = shop.path("/gift-cards");

    // A generated code: 16 symbols without look-alikes, its last four shown from then on.
    let g = issue(c, &shop, json!({"initialValue": usd(5000), "note": "Birthday"})).await;
    let generated = g["code"].as_str().unwrap().to_string();
    assert_eq!(generated.len(), 16);
    assert!(generated.bytes().all(|b| b"ABCDEFGHJKLMNPQRSTUVWXYZ23456789".contains(&b)), "{generated}");
    assert_eq!(g["lastCharacters"], generated[12..]);
    assert_eq!(g["maskedCode"], format!("•••• •••• •••• {}", &generated[12..]));
    assert_eq!(g["initialValue"], json!({"amount": 5000, "currency": "USD", "formatted": "50.00 USD"}));
    assert_eq!(g["balance"], g["initialValue"]);
    assert_eq!(
        (g["status"].as_str(), g["note"].as_str(), g["redemptions"].clone()),
        (Some("ACTIVE"), Some("Birthday"), json!([]))
    );
    assert_eq!(
        (g["expiresOn"].clone(), g["customerId"].clone(), g["disabledAt"].clone()),
        (Value::Null, Value::Null, Value::Null)
    );
    let id = g["id"].as_str().unwrap().to_string();

    // A chosen code is normalised: spaces and dashes dropped, upper case.
    let customer = Uuid::now_v7().to_string();
    let chosen = issue(c, &shop, json!({"initialValue": usd(2500), "code": "gift card-2026 wxyz", "customerId": customer})).await;
    assert_eq!((chosen["code"].as_str(), chosen["lastCharacters"].as_str()), (Some("GIFTCARD2026WXYZ"), Some("WXYZ")));
    assert_eq!(chosen["customerId"], customer.as_str());

    // Later reads mask it: the one-card read is the issue answer without `code`.
    let read = c.get(&format!("{base}/{id}"), t).await.expect(200);
    let mut expected = g.clone();
    expected.as_object_mut().unwrap().remove("code");
    assert_eq!(read.body, expected);
    let list = c.get(&base, t).await.expect(200);
    assert_eq!((list.body["total"].as_u64(), list.body["data"][0]["id"].clone()), (Some(2), chosen["id"].clone()));
    assert!(list.body["data"][0].get("redemptions").is_none(), "lists leave redemptions out");
    for raw in [&read.raw, &list.raw] {
        let text = String::from_utf8_lossy(raw);
        assert!(!text.contains(&generated) && !text.contains("GIFTCARD2026"), "{text}");
    }

    // The same code in another case and spacing is taken; nothing is written.
    let taken = c.post(&base, t, json!({"initialValue": usd(100), "code": "GiftCard 2026-WXYZ"})).await.expect(409);
    assert_eq!((taken.code(), fields(&taken)), ("GIFT_CARD_CODE_TAKEN", vec!["code".to_string()]));
    let taken = c.post(&base, t, json!({"initialValue": usd(100), "code": generated.to_lowercase()})).await.expect(409);
    assert_eq!(taken.code(), "GIFT_CARD_CODE_TAKEN");
    assert_eq!(c.get(&base, t).await.expect(200).body["total"], 2);
    // Codes are unique per store: another store may use it.
    let other = create_store(c, &shop.owner).await;
    let path = format!("/api/v1/stores/{other}/gift-cards");
    let elsewhere = c.post(&path, t, json!({"initialValue": usd(100), "code": "GIFTCARD2026WXYZ"})).await.expect(201);
    assert_eq!(elsewhere.body["lastCharacters"], "WXYZ");

    // The lookup the checkout uses finds a card by its code in any form, in its own store only.
    let store: Uuid = shop.store.parse().unwrap();
    let found = gift_cards::find_gift_card(&app.cell().read().unwrap(), store, "giftcard-2026-wxyz").unwrap().unwrap();
    assert_eq!((found.id.to_string(), found.last_characters()), (chosen["id"].as_str().unwrap().to_string(), "WXYZ"));
    assert!(gift_cards::find_gift_card(&app.cell().read().unwrap(), store, "GIFTCARD2026WXYY").unwrap().is_none());

    // Neither code is anywhere in the cell's database file.
    app.stop().await;
    let bytes = std::fs::read(app.dir.path().join("cells/cell-1/cell.redb")).unwrap();
    for code in [generated.as_str(), "GIFTCARD2026WXYZ"] {
        for form in [code.to_string(), code.to_lowercase()] {
            assert!(!bytes.windows(form.len()).any(|w| w == form.as_bytes()), "{form} is stored in clear");
        }
    }
    // While the card rows themselves are there (the file is the one that was written).
    assert!(bytes.windows(b"Birthday".len()).any(|w| w == b"Birthday"));
}

#[tokio::test]
async fn the_list_filters_sorts_and_pages_with_totals() {
    let app = spawn_app().await;
    let c = &app.client;
    let shop = Shop::new(c).await;
    let t = Some(shop.owner.token.as_str());
    let customer = Uuid::now_v7().to_string();
    let mut cards = Vec::new();
    for (i, amount) in [1000, 3000, 2000, 5000, 4000].into_iter().enumerate() {
        let mut body = json!({"initialValue": usd(amount), "code": format!("LIST-CARD-000{i}")});
        if i % 2 == 0 {
            body["customerId"] = json!(customer);
        }
        cards.push(issue(c, &shop, body).await["id"].as_str().unwrap().to_string());
    }
    let one = |i: usize| format!("{}/{}", shop.path("/gift-cards"), cards[i]);

    let page = list(c, &shop, "").await;
    assert_eq!(ids(&page), cards.iter().rev().cloned().collect::<Vec<_>>(), "newest first by default");
    assert_eq!((page["total"].as_u64(), page["page"].as_u64(), page["limit"].as_u64()), (Some(5), Some(1), Some(20)));
    let page = list(c, &shop, "sortBy=balance&sortOrder=asc&limit=2&page=2").await;
    assert_eq!((balances(&page), page["total"].as_u64(), page["totalPages"].as_u64()), (vec![3000, 4000], Some(5), Some(3)));
    let page = list(c, &shop, "sortBy=initial_value").await;
    assert_eq!(balances(&page), [5000, 4000, 3000, 2000, 1000]);
    assert_eq!(list(c, &shop, "page=4&limit=2").await["data"], json!([]));

    // A note on the oldest card makes it the most recently updated.
    c.patch(&one(0), t, json!({"note": "VIP"})).await.expect(200);
    assert_eq!(ids(&list(c, &shop, "sortBy=updated_at").await)[0], cards[0]);
    assert_eq!(ids(&list(c, &shop, "sortBy=updated_at&sortOrder=asc").await)[4], cards[0]);

    // Status filters, one or several, any case; the total counts the matches.
    c.patch(&one(1), t, json!({"disabled": true})).await.expect(200);
    let disabled = list(c, &shop, "status=DISABLED").await;
    assert_eq!((ids(&disabled), disabled["total"].as_u64()), (vec![cards[1].clone()], Some(1)));
    let active = list(c, &shop, "status=active&sortBy=balance&sortOrder=asc&limit=3").await;
    assert_eq!((balances(&active), active["total"].as_u64()), (vec![1000, 2000, 4000], Some(4)));
    assert_eq!(list(c, &shop, "status=active,disabled").await["total"], 5);
    assert_eq!(list(c, &shop, "status=EXPIRED").await["total"], 0);

    // Search by last characters, or by a whole code in any form; customer filter.
    let found = list(c, &shop, "search=0003").await;
    assert_eq!((ids(&found), found["total"].as_u64()), (vec![cards[3].clone()], Some(1)));
    assert_eq!(list(c, &shop, "search=000").await["total"], 5);
    assert_eq!(ids(&list(c, &shop, "search=list%20card-0002").await), [cards[2].clone()]);
    assert_eq!(list(c, &shop, "search=LISTCARD0009").await["total"], 0);
    let mine = list(c, &shop, &format!("customerId={customer}&sortOrder=asc")).await;
    assert_eq!(ids(&mine), [cards[0].clone(), cards[2].clone(), cards[4].clone()]);
    assert_eq!(list(c, &shop, &format!("customerId={customer}&status=active&limit=1&page=2")).await["total"], 3);
}

#[tokio::test]
async fn disabling_is_for_good_and_patch_changes_only_note_expiry_and_customer() {
    let app = spawn_app().await;
    let c = &app.client;
    let shop = Shop::new(c).await;
    let t = Some(shop.owner.token.as_str());
    let g = issue(c, &shop, json!({"initialValue": usd(1500), "note": "gift"})).await;
    let one = format!("{}/{}", shop.path("/gift-cards"), g["id"].as_str().unwrap());
    let customer = Uuid::now_v7().to_string();

    let edited = c
        .patch(&one, t, json!({"note": "  thank you  ", "expiresOn": "2099-12-31", "customerId": customer}))
        .await
        .expect(200)
        .body;
    assert_eq!((edited["note"].as_str(), edited["customerId"].as_str()), (Some("thank you"), Some(customer.as_str())));
    assert_eq!(
        (edited["expiresOn"].as_str(), edited["expiresAt"].as_str()),
        (Some("2099-12-31"), Some("2100-01-01T00:00:00.000Z"))
    );
    assert_eq!((edited["status"].as_str(), edited["balance"]["amount"].as_i64()), (Some("ACTIVE"), Some(1500)));
    let ms = |v: &Value| parse_rfc3339(v.as_str().unwrap()).unwrap();
    assert!(ms(&edited["updatedAt"]) >= ms(&g["updatedAt"]) && edited["createdAt"] == g["createdAt"]);
    // null clears; an absent field is left alone.
    let cleared = c.patch(&one, t, json!({"expiresOn": null, "customerId": null})).await.expect(200).body;
    assert_eq!((cleared["expiresOn"].clone(), cleared["customerId"].clone()), (Value::Null, Value::Null));
    assert_eq!(cleared["note"], "thank you");

    // The balance is not editable here, and a past expiry is refused; nothing changes.
    let bad = c.patch(&one, t, json!({"balance": {"amount": 0, "currency": "USD"}})).await.expect(400);
    assert_eq!(bad.code(), "VALIDATION_FAILED");
    let bad = c.patch(&one, t, json!({"expiresOn": "2001-01-01", "note": "x"})).await.expect(400);
    assert_eq!(fields(&bad), ["expiresOn"]);
    assert_eq!(c.get(&one, t).await.expect(200).body, cleared);

    let off = c.patch(&one, t, json!({"disabled": true})).await.expect(200).body;
    assert_eq!(off["status"], "DISABLED");
    assert!(off["disabledAt"].as_str().is_some_and(|d| d.ends_with('Z')));
    // Disabling again changes nothing; enabling is refused.
    assert_eq!(c.patch(&one, t, json!({"disabled": true})).await.expect(200).body, off);
    let again = c.patch(&one, t, json!({"disabled": false, "note": "back"})).await.expect(422);
    assert_eq!(again.code(), "BUSINESS_RULE");
    assert_eq!(c.get(&one, t).await.expect(200).body, off);
    // Its note can still be kept up to date.
    assert_eq!(c.patch(&one, t, json!({"note": "void: code leaked"})).await.expect(200).body["status"], "DISABLED");

    let missing = format!("{}/{}", shop.path("/gift-cards"), Uuid::now_v7());
    assert_eq!(c.patch(&missing, t, json!({"disabled": true})).await.expect(404).code(), "NOT_FOUND");
    assert_eq!(c.get(&missing, t).await.expect(404).code(), "NOT_FOUND");
}

#[tokio::test]
async fn a_card_expires_at_its_expiry() {
    let app = spawn_app().await;
    let c = &app.client;
    let shop = Shop::new(c).await;
    let t = Some(shop.owner.token.as_str());
    let soon = app.clock.now_ms() + 60_000;
    let g = issue(c, &shop, json!({"initialValue": usd(700), "expiresOn": rfc3339(soon)})).await;
    assert_eq!((g["status"].as_str(), g["expiresAt"].as_str()), (Some("ACTIVE"), Some(rfc3339(soon).as_str())));
    let one = format!("{}/{}", shop.path("/gift-cards"), g["id"].as_str().unwrap());
    app.clock.advance(std::time::Duration::from_secs(30));
    assert_eq!(c.get(&one, t).await.expect(200).body["status"], "ACTIVE", "half a minute to go");
    app.clock.advance(std::time::Duration::from_secs(30));
    let expired = c.get(&one, t).await.expect(200).body;
    assert_eq!((expired["status"].as_str(), expired["balance"]["amount"].as_i64()), (Some("EXPIRED"), Some(700)));
    assert_eq!(ids(&list(c, &shop, "status=expired").await), [g["id"].as_str().unwrap().to_string()]);
    let store: Uuid = shop.store.parse().unwrap();
    let card =
        app.cell().get::<shopcell::domain::gift_card::GiftCard>(store, g["id"].as_str().unwrap().parse().unwrap()).unwrap();
    assert_eq!(card.spendable(app.clock.now_ms()), 0);
    // A new expiry in the future brings it back.
    let back = c.patch(&one, t, json!({"expiresOn": "2099-01-31"})).await.expect(200).body;
    assert_eq!((back["status"].as_str(), back["expiresAt"].as_str()), (Some("ACTIVE"), Some("2099-02-01T00:00:00.000Z")));
}

#[tokio::test]
async fn redemptions_lower_the_balance_and_show_on_the_card() {
    let app = spawn_app().await;
    let c = &app.client;
    let shop = Shop::new(c).await;
    let t = Some(shop.owner.token.as_str());
    let g = issue(c, &shop, json!({"initialValue": usd(500), "code": "REDEEM-ME-2026"})).await;
    let id: Uuid = g["id"].as_str().unwrap().parse().unwrap();
    let store: Uuid = shop.store.parse().unwrap();
    let cell = app.cell();
    let dollars = Currency::parse("USD").unwrap();
    let redeem = |amount: i64, order: Uuid| {
        let cell = cell.clone();
        let wanted = Money { amount, currency: dollars };
        let now = cell.clock.now_ms();
        async move { cell.writer.write(Some(store), move |tx| redeem_gift_card(tx, store, id, wanted, order, now)).await }
    };
    let (first, second) = (Uuid::now_v7(), Uuid::now_v7());
    assert_eq!(redeem(200, first).await.unwrap().amount, 200);
    assert_eq!(redeem(800, second).await.unwrap().amount, 300, "partial: what is left");
    let e = redeem(100, Uuid::now_v7()).await.unwrap_err();
    assert_eq!(e.code.as_str(), "BUSINESS_RULE");

    let card = c.get(&format!("{}/{id}", shop.path("/gift-cards")), t).await.expect(200).body;
    assert_eq!((card["status"].as_str(), card["balance"]["amount"].as_i64()), (Some("DEPLETED"), Some(0)));
    let r = card["redemptions"].as_array().unwrap();
    assert_eq!(r.len(), 2);
    assert_eq!(
        (r[0]["orderId"].as_str(), r[0]["amount"].clone()),
        (Some(first.to_string().as_str()), json!({"amount": 200, "currency": "USD", "formatted": "2.00 USD"}))
    );
    assert_eq!((r[1]["orderId"].as_str(), r[1]["amount"]["amount"].as_i64()), (Some(second.to_string().as_str()), Some(300)));
    assert_eq!(list(c, &shop, "status=DEPLETED").await["total"], 1);
    assert_eq!(balances(&list(c, &shop, "sortBy=balance").await), [0]);
}

#[tokio::test]
async fn bad_input_is_a_400_naming_the_field_and_writes_nothing() {
    let app = spawn_app().await;
    let c = &app.client;
    let shop = Shop::new(c).await;
    let t = Some(shop.owner.token.as_str());
    let base = shop.path("/gift-cards");
    issue(c, &shop, json!({"initialValue": usd(100), "code": "EXISTING-0001"})).await;

    let cases = [
        (json!({"initialValue": usd(-5)}), "initialValue.amount"),
        (json!({"initialValue": usd(0)}), "initialValue.amount"),
        (json!({"initialValue": usd(1_000_000_001)}), "initialValue.amount"),
        (json!({"initialValue": {"amount": 10.5, "currency": "USD"}}), "initialValue.amount"),
        (json!({"initialValue": {"amount": 100, "currency": "EUR"}}), "initialValue.currency"),
        (json!({"initialValue": {"amount": 100, "currency": "XYZ"}}), "initialValue.currency"),
        (json!({"initialValue": usd(100), "code": "abcd_efgh"}), "code"),
        (json!({"initialValue": usd(100), "code": "abc-123"}), "code"),
        (json!({"initialValue": usd(100), "code": "A".repeat(21)}), "code"),
        (json!({"initialValue": usd(100), "expiresOn": "next week"}), "expiresOn"),
        (json!({"initialValue": usd(100), "expiresOn": "2020-01-01"}), "expiresOn"),
        (json!({"initialValue": usd(100), "note": "n".repeat(5001)}), "note"),
        (json!({"initialValue": usd(100), "customerId": "nobody"}), "customerId"),
    ];
    for (body, field) in cases {
        let a = c.post(&base, t, body.clone()).await.expect(400);
        assert_eq!((a.code(), fields(&a)), ("VALIDATION_FAILED", vec![field.to_string()]), "{body}");
    }
    let several = c.post(&base, t, json!({"initialValue": {"amount": 0, "currency": "EUR"}, "code": "x"})).await.expect(400);
    assert_eq!(fields(&several), ["initialValue.amount", "initialValue.currency", "code"]);
    assert_eq!(c.post(&base, t, json!({"code": "ABCDEFGH"})).await.expect(400).code(), "VALIDATION_FAILED");
    assert_eq!(c.post(&base, t, json!({"initialValue": usd(1), "balance": 5})).await.expect(400).code(), "VALIDATION_FAILED");

    for (query, field) in [
        ("sortBy=name", "sortBy"),
        ("limit=251", "limit"),
        ("limit=0", "limit"),
        ("page=0", "page"),
        ("sortOrder=up", "sortOrder"),
        ("status=LOST", "status"),
        ("status=ACTIVE,", "status"),
        ("search=ab_c", "search"),
        ("customerId=x", "customerId"),
    ] {
        let a = c.get(&format!("{base}?{query}"), t).await.expect(400);
        assert_eq!(fields(&a), [field], "{query}");
    }
    let page = list(c, &shop, "").await;
    assert_eq!((page["total"].as_u64(), page["data"].as_array().unwrap().len()), (Some(1), 1), "nothing was written");

    // Members only: no token is 401, a stranger's token 404 (the store is not theirs).
    assert_eq!(c.get(&base, None).await.expect(401).code(), "UNAUTHORIZED");
    let stranger = create_user(c).await;
    c.post(&base, Some(&stranger.token), json!({"initialValue": usd(100)})).await.expect(404);
    assert_eq!(list(c, &shop, "").await["total"], 1);
}
