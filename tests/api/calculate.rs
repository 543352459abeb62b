//! `POST S/calculate` wired to storage: variants, codes, automatic discounts, collections,
//! shipping zones and tax rates, with figures worked out by hand.

use hyper::Method;
use serde_json::{Value, json};

use crate::support::*;

/// A store with an owner, and the paths of the selling routes.
pub struct Shop {
    pub owner: User,
    pub store: String,
}

impl Shop {
    pub async fn new(c: &HttpClient) -> Shop {
        let owner = create_user(c).await;
        let store = create_store(c, &owner).await;
        Shop { owner, store }
    }

    pub fn path(&self, rest: &str) -> String {
        format!("/api/v1/stores/{}{rest}", self.store)
    }

    /// An ACTIVE product with one variant of `price` cents weighing `grams`; returns (product id, variant id).
    pub async fn product(&self, c: &HttpClient, title: &str, price: i64, grams: u32) -> (String, String) {
        let p = c
            .post(
                &self.path("/products"),
                Some(&self.owner.token),
                json!({"title": title, "status": "ACTIVE", "price": {"amount": price, "currency": "USD"},
                       "variants": [{"title": "Default", "weightGrams": grams}]}),
            )
            .await
            .expect(201)
            .body;
        (p["id"].as_str().unwrap().to_string(), p["variants"][0]["id"].as_str().unwrap().to_string())
    }

    /// Creates a discount from `body`; returns its JSON.
    pub async fn discount(&self, c: &HttpClient, body: Value) -> Value {
        c.post(&self.path("/discounts"), Some(&self.owner.token), body).await.expect(201).body
    }

    pub async fn calculate(&self, c: &HttpClient, body: Value) -> Answer {
        c.post(&self.path("/calculate"), Some(&self.owner.token), body).await
    }
}

/// The amount at `pointer` (a Money object's `amount`).
pub fn amount(v: &Value, pointer: &str) -> i64 {
    v.pointer(&format!("{pointer}/amount")).and_then(Value::as_i64).unwrap_or_else(|| panic!("no amount at {pointer} in {v}"))
}

/// Canada: GST 5 % nationwide (shipping taxed too), PST 7 % in British Columbia (goods only); a zone
/// with a flat 15.00 rate, a 9.00 rate under 2 kg and a 25.00 rate from 2 kg on. Returns the rate
/// ids (standard, light, heavy).
async fn canada(c: &HttpClient, shop: &Shop) -> (String, String, String) {
    let t = Some(shop.owner.token.as_str());
    c.post(&shop.path("/tax-rates"), t, json!({"country": "CA", "rate": 500, "name": "GST", "shipping": true})).await.expect(201);
    c.post(&shop.path("/tax-rates"), t, json!({"country": "CA", "province": "BC", "rate": 700, "name": "PST"})).await.expect(201);
    let zone = c
        .post(
            &shop.path("/shipping-zones"),
            t,
            json!({"name": "Canada", "countries": [{"code": "CA"}], "rates": [
                {"name": "Standard", "price": 1500, "estimatedDelivery": {"minDays": 3, "maxDays": 5}},
                {"name": "Light", "condition": "weight", "min": 0, "max": 2000, "price": 900,
                 "estimatedDelivery": {"minDays": 3, "maxDays": 5}},
                {"name": "Heavy", "condition": "weight", "min": 2000, "price": 2500,
                 "estimatedDelivery": {"minDays": 1, "maxDays": 2}}
            ]}),
        )
        .await
        .expect(201)
        .body;
    let id = |i: usize| zone["rates"][i]["id"].as_str().unwrap().to_string();
    (id(0), id(1), id(2))
}

const BC: &str = r#"{"firstName": "Ada", "address1": "1 Main St", "city": "Vancouver", "province": "BC", "country": "CA", "postalCode": "V5K 0A1"}"#;

#[tokio::test]
async fn ten_lines_two_codes_tax_and_shipping_match_the_hand_computation() {
    let app = spawn_app().await;
    let c = &app.client;
    let shop = Shop::new(c).await;
    let t = Some(shop.owner.token.as_str());
    let (_, _, heavy) = canada(c, &shop).await;

    // (price, quantity, grams per unit)
    let spec: [(i64, u32, u32); 10] = [
        (1000, 1, 100),
        (2000, 2, 200),
        (1500, 3, 50),
        (999, 1, 0),
        (4500, 1, 500),
        (250, 4, 10),
        (12000, 1, 1000),
        (333, 3, 30),
        (5000, 2, 250),
        (799, 5, 20),
    ];
    let mut products = Vec::new();
    let mut lines = Vec::new();
    for (i, (price, qty, grams)) in spec.iter().enumerate() {
        let (pid, vid) = shop.product(c, &format!("Item {i}"), *price, *grams).await;
        products.push(pid);
        lines.push(json!({"variantId": vid, "quantity": qty}));
    }
    // Lines 1 and 4 are shirts: a collection the product discount targets.
    let col = c.post(&shop.path("/collections"), t, json!({"title": "Shirts"})).await.expect(201).body;
    let col_id = col["id"].as_str().unwrap();
    c.post(&shop.path(&format!("/collections/{col_id}/products")), t, json!({"productIds": [products[1], products[4]]}))
        .await
        .expect(200);
    shop.discount(
        c,
        json!({"title": "Shirts 15", "code": "SHIRTS15", "valueType": "percentage", "value": 1500,
               "target": "collections", "collectionIds": [col_id], "combinesWith": {"orderDiscounts": true}}),
    )
    .await;
    shop.discount(
        c,
        json!({"title": "Five off", "code": "ORDER5", "valueType": "fixedAmount", "value": 500,
               "combinesWith": {"productDiscounts": true}}),
    )
    .await;

    let body = json!({
        "lineItems": lines,
        "discountCodes": ["shirts15", "ORDER5"],
        "shippingAddress": serde_json::from_str::<Value>(BC).unwrap(),
        "shippingMethodId": heavy,
    });
    let calc = shop.calculate(c, body.clone()).await.expect(200).body;

    // Gross lines: 1000, 4000, 4500, 999, 4500, 1000, 12000, 999, 10000, 3995 → subtotal 429.93.
    assert_eq!(amount(&calc, "/subtotal"), 42_993);
    // SHIRTS15 takes 15 % of lines 1 and 4: 600 + 675 = 1275. ORDER5 takes 500, spread over the
    // lines left (41 718) by largest remainder: 12, 40, 54, 12, 46, 12, 144, 12, 120, 48.
    assert_eq!(amount(&calc, "/discount"), 1775);
    let order_shares: Vec<i64> = (0..10).map(|i| amount(&calc, &format!("/lineItems/{i}/orderDiscount"))).collect();
    assert_eq!(order_shares, [12, 40, 54, 12, 46, 12, 144, 12, 120, 48]);
    assert_eq!(amount(&calc, "/lineItems/1/productDiscount"), 600);
    assert_eq!(amount(&calc, "/lineItems/4/productDiscount"), 675);
    // 2 880 g: the heavy rate, 25.00.
    assert_eq!(amount(&calc, "/shipping"), 2500);
    // Net lines 988, 3360, 4446, 987, 3779, 988, 11856, 987, 9880, 3947. GST 5 % per line, rounded
    // half away from zero: 49+168+222+49+189+49+593+49+494+197 = 2059, plus 5 % of shipping 125 =
    // 2184. PST 7 %: 69+235+311+69+265+69+830+69+692+276 = 2885. Tax 5069.
    assert_eq!(amount(&calc, "/tax"), 5069);
    assert_eq!(calc["taxLines"][0]["name"], "GST");
    assert_eq!(amount(&calc, "/taxLines/0/amount"), 2184);
    assert_eq!((calc["taxLines"][1]["name"].as_str(), calc["taxLines"][1]["province"].as_str()), (Some("PST"), Some("BC")));
    assert_eq!(amount(&calc, "/taxLines/1/amount"), 2885);
    // 42 993 − 1 775 + 2 500 + 5 069.
    assert_eq!(amount(&calc, "/total"), 48_787);
    assert_eq!(calc["appliedDiscountCodes"], json!(["SHIRTS15", "ORDER5"]));
    assert_eq!(calc["warnings"], json!([]));
    let line_totals: Vec<i64> = (0..10).map(|i| amount(&calc, &format!("/lineItems/{i}/total"))).collect();
    assert_eq!(line_totals, [1106, 3763, 4979, 1105, 4233, 1106, 13279, 1105, 11066, 4420]);
    assert_eq!(calc["lineItems"][2]["quantity"], 3);
    assert_eq!(calc["total"]["currency"], "USD");

    // Without an address: no tax, and no shipping method can be chosen.
    let mut no_address = body.clone();
    no_address.as_object_mut().unwrap().remove("shippingAddress");
    no_address.as_object_mut().unwrap().remove("shippingMethodId");
    let plain = shop.calculate(c, no_address.clone()).await.expect(200).body;
    assert_eq!((amount(&plain, "/tax"), amount(&plain, "/shipping")), (0, 0));
    assert_eq!(plain["taxLines"], json!([]));
    assert_eq!(amount(&plain, "/total"), 42_993 - 1775);
    let mut method_only = no_address;
    method_only["shippingMethodId"] = json!(heavy);
    let e = shop.calculate(c, method_only).await.expect(400);
    assert_eq!(e.body["error"]["fields"][0]["field"], "shippingMethodId");

    // Calculating consumed nothing: both codes still show no usage and apply again.
    let again = shop.calculate(c, body).await.expect(200).body;
    assert_eq!(again, calc);
}

#[tokio::test]
async fn bad_lines_and_methods_are_400_naming_the_field_and_write_nothing() {
    let app = spawn_app().await;
    let c = &app.client;
    let shop = Shop::new(c).await;
    let t = Some(shop.owner.token.as_str());
    let (_, light, heavy) = canada(c, &shop).await;
    let (_, vid) = shop.product(c, "Mug", 1200, 300).await;
    let (archived_pid, archived) = shop.product(c, "Old", 500, 0).await;
    c.patch(&shop.path(&format!("/products/{archived_pid}")), t, json!({"status": "ARCHIVED"})).await.expect(200);
    // A variant of another store is unknown here.
    let other = Shop::new(c).await;
    let (_, foreign) = other.product(c, "Theirs", 100, 0).await;

    let field = |a: &Answer| -> Vec<String> {
        a.body["error"]["fields"].as_array().unwrap().iter().map(|f| f["field"].as_str().unwrap().to_string()).collect()
    };
    let unknown = uuid::Uuid::now_v7().to_string();
    let a = shop
        .calculate(
            c,
            json!({"lineItems": [
                {"variantId": vid, "quantity": 1},
                {"variantId": unknown, "quantity": 1},
                {"variantId": foreign, "quantity": 1},
                {"variantId": archived, "quantity": 1},
                {"variantId": vid, "quantity": 0},
                {"variantId": vid, "quantity": 101}
            ]}),
        )
        .await
        .expect(400);
    assert_eq!(a.code(), "VALIDATION_FAILED");
    assert_eq!(
        field(&a),
        [
            "lineItems[1].variantId",
            "lineItems[2].variantId",
            "lineItems[3].variantId",
            "lineItems[4].quantity",
            "lineItems[5].quantity"
        ]
    );
    let a = shop.calculate(c, json!({"lineItems": [{"variantId": "not-a-uuid", "quantity": 1}]})).await.expect(400);
    assert_eq!(field(&a), ["lineItems[0].variantId"]);

    // 300 g is under 2 kg: the heavy rate is not offered; the light one is.
    let body = |method: &str| {
        json!({"lineItems": [{"variantId": vid, "quantity": 1}], "shippingAddress": {"country": "CA", "province": "ON"},
               "shippingMethodId": method})
    };
    let a = shop.calculate(c, body(&heavy)).await.expect(400);
    assert_eq!(field(&a), ["shippingMethodId"]);
    let ok = shop.calculate(c, body(&light)).await.expect(200).body;
    // Ontario: GST only, on 12.00 and on 9.00 shipping: 60 + 45.
    assert_eq!((amount(&ok, "/shipping"), amount(&ok, "/tax"), amount(&ok, "/total")), (900, 105, 2205));
    // A country no zone covers offers nothing.
    let mut fr = body(&light);
    fr["shippingAddress"] = json!({"country": "FR"});
    assert_eq!(field(&shop.calculate(c, fr).await.expect(400)), ["shippingMethodId"]);
    let codes: Vec<String> = (0..11).map(|i| format!("C{i}")).collect();
    let a = shop.calculate(c, json!({"lineItems": [], "discountCodes": codes})).await.expect(400);
    assert_eq!(field(&a), ["discountCodes"]);

    // Nothing was written by any of it: no discount, the same zones and rates.
    let list = c.get(&shop.path("/discounts"), t).await.expect(200).body;
    assert_eq!(list["total"], 0);
    assert_eq!(c.get(&shop.path("/shipping-zones"), t).await.expect(200).body["total"], 1);
    assert_eq!(c.get(&shop.path("/tax-rates"), t).await.expect(200).body["total"], 2);
}

#[tokio::test]
async fn shoppers_calculate_with_a_publishable_key_but_set_no_manual_discounts() {
    let app = spawn_app().await;
    let c = &app.client;
    let shop = Shop::new(c).await;
    let t = Some(shop.owner.token.as_str());
    let (_, vid) = shop.product(c, "Tea", 800, 0).await;
    let draft = c
        .post(&shop.path("/products"), t, json!({"title": "Secret", "price": {"amount": 100, "currency": "USD"}}))
        .await
        .expect(201)
        .body;
    let draft_vid = draft["variants"][0]["id"].as_str().unwrap();
    let key = c.post(&shop.path("/publishable-keys"), t, json!({"environment": "live"})).await.expect(201).body;
    let key = key["key"].as_str().unwrap();
    let shopper = |body: Value| {
        let path = shop.path("/calculate");
        async move { c.send(Method::POST, &path, None, &[("x-publishable-key", key)], Some(body.to_string().into())).await }
    };

    let calc = shopper(json!({"lineItems": [{"variantId": vid, "quantity": 2}]})).await.expect(200).body;
    assert_eq!((amount(&calc, "/subtotal"), amount(&calc, "/total")), (1600, 1600));
    // A draft is not for sale to shoppers, though members may price it (draft orders).
    let a = shopper(json!({"lineItems": [{"variantId": draft_vid, "quantity": 1}]})).await.expect(400);
    assert_eq!(a.body["error"]["fields"][0]["field"], "lineItems[0].variantId");
    shop.calculate(c, json!({"lineItems": [{"variantId": draft_vid, "quantity": 1}]})).await.expect(200);
    // Manual discounts are the merchant's.
    let a =
        shopper(json!({"lineItems": [{"variantId": vid, "quantity": 1}], "orderDiscounts": [{"type": "fixed", "value": 100}]}))
            .await
            .expect(403);
    assert_eq!(a.code(), "FORBIDDEN");
    let line_discount =
        json!({"lineItems": [{"variantId": vid, "quantity": 1, "discount": {"type": "percentage", "value": 5000}}]});
    shopper(line_discount.clone()).await.expect(403);
    // Members set them: 50 % off the line, then 1.00 off the order.
    let mut member = line_discount;
    member["orderDiscounts"] = json!([{"type": "fixed", "value": 100, "title": "Goodwill"}]);
    let calc = shop.calculate(c, member).await.expect(200).body;
    assert_eq!((amount(&calc, "/subtotal"), amount(&calc, "/discount"), amount(&calc, "/total")), (400, 100, 300));
    // Without a key or a token: 401.
    c.post(&shop.path("/calculate"), None, json!({"lineItems": []})).await.expect(401);
}

#[tokio::test]
async fn automatic_discounts_and_tax_inclusive_stores() {
    let app = spawn_app().await;
    let c = &app.client;
    let shop = Shop::new(c).await;
    let t = Some(shop.owner.token.as_str());
    let (_, vid) = shop.product(c, "Lamp", 11_000, 0).await;
    c.post(&shop.path("/tax-rates"), t, json!({"country": "US", "province": "NY", "rate": 1000, "name": "NY tax"}))
        .await
        .expect(201);
    // An automatic 10 % off every order; a disabled one never applies.
    shop.discount(c, json!({"title": "Autumn", "valueType": "percentage", "value": 1000})).await;
    shop.discount(c, json!({"title": "Off", "valueType": "fixedAmount", "value": 5000, "disabled": true})).await;
    c.patch(&shop.path(""), t, json!({"taxesIncluded": true})).await.expect(200);
    let calc = shop
        .calculate(
            c,
            json!({"lineItems": [{"variantId": vid, "quantity": 1}], "shippingAddress": {"country": "US", "province": "ny"}}),
        )
        .await
        .expect(200)
        .body;
    // 110.00 − 10 % = 99.00, tax included: 9900 − round(9900 / 1.1) = 900; not added again.
    assert_eq!((amount(&calc, "/discount"), amount(&calc, "/tax"), amount(&calc, "/total")), (1100, 900, 9900));
    assert_eq!(calc["taxesIncluded"], true);
    assert_eq!(calc["appliedDiscountCodes"], json!([]));
    assert_eq!(calc["discountApplications"][0]["source"], "automatic");
}
