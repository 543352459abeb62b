//! Tests of the configuration records: shipping zones, tax rates and discount bodies, their
//! validation, views and storage round trips.

use super::calc::*;
use super::discount::*;
use super::shipping::*;
use super::tax::*;
use super::tests::{NOW, bxgy, canada_rates, cur, dest, id, input, line};

fn zone_rate(
    name: &str,
    condition: RateCondition,
    min: i64,
    max: Option<i64>,
    price: i64,
    free_above: Option<i64>,
) -> ZoneRateInput {
    ZoneRateInput {
        id: None,
        name: name.into(),
        description: String::new(),
        code: None,
        condition,
        min,
        max,
        price,
        free_above,
        estimated_delivery: DeliveryDays { min_days: 2, max_days: 4 },
    }
}

fn zone(n: u128, countries: Vec<ZoneCountry>, rates: Vec<ZoneRateInput>) -> ShippingZone {
    let input = ShippingZoneInput { name: format!("Zone {n}"), countries, rates };
    let mut next = n * 100;
    ShippingZone::create(&input, id(n), None, NOW, || {
        next += 1;
        id(next)
    })
    .unwrap()
}

fn country(code: &str, provinces: &[&str]) -> ZoneCountry {
    ZoneCountry { code: code.into(), provinces: provinces.iter().map(|p| p.to_string()).collect() }
}

#[test]
fn shipping_rates_by_weight_price_and_free_over() {
    let usd = cur("USD");
    let zones = vec![zone(
        1,
        vec![country("US", &[])],
        vec![
            zone_rate("Light", RateCondition::Weight, 0, Some(1000), 500, None),
            zone_rate("Heavy", RateCondition::Weight, 1000, None, 1500, None),
            zone_rate("Small order", RateCondition::Price, 0, Some(5000), 800, None),
            zone_rate("Standard", RateCondition::Flat, 0, None, 1000, Some(10_000)),
        ],
    )];
    let us = Destination { country: "US".into(), province: Some("NY".into()) };
    let names = |w, s| rates_for(&zones, &us, w, s, usd).into_iter().map(|r| (r.name, r.price.amount)).collect::<Vec<_>>();
    // 999 g, 49.99: light (weight < 1000), small order (< 50.00), standard; cheapest first.
    assert_eq!(names(999, 4999), [("Light".to_string(), 500), ("Small order".into(), 800), ("Standard".into(), 1000)]);
    // 1000 g, 100.00: heavy (max is exclusive), standard is free from 100.00 on.
    assert_eq!(names(1000, 10_000), [("Standard".to_string(), 0), ("Heavy".into(), 1500)]);

    let r = &rates_for(&zones, &us, 0, 0, usd)[0];
    assert_eq!(r.id, id(101).to_string());
    assert_eq!(r.code, "light");
    assert_eq!(r.price.formatted, "5.00 USD");
    assert_eq!(r.estimated_delivery.formatted, "2-4 days");
    assert_eq!(r.provider, PROVIDER);
    assert!(rates_for(&zones, &Destination { country: "FR".into(), province: None }, 0, 0, usd).is_empty());
}

#[test]
fn the_most_specific_zone_wins() {
    let usd = cur("USD");
    let zones = vec![
        zone(1, vec![country("CA", &[])], vec![zone_rate("Canada", RateCondition::Flat, 0, None, 1000, None)]),
        zone(2, vec![country("CA", &["QC"])], vec![zone_rate("Quebec", RateCondition::Flat, 0, None, 700, None)]),
    ];
    let at = |p: &str| {
        let d = Destination { country: "CA".into(), province: Some(p.into()) };
        rates_for(&zones, &d, 0, 0, usd).into_iter().map(|r| r.name).collect::<Vec<_>>()
    };
    assert_eq!(at("qc"), ["Quebec"]);
    assert_eq!(at("ON"), ["Canada"]);
}

#[test]
fn zone_updates_keep_known_rate_ids() {
    let first = zone(1, vec![country("US", &[])], vec![zone_rate("A", RateCondition::Flat, 0, None, 100, None)]);
    let mut again = zone_rate("A", RateCondition::Flat, 0, None, 200, None);
    again.id = Some(first.rates[0].id);
    let mut stranger = zone_rate("B", RateCondition::Flat, 0, None, 300, None);
    stranger.id = Some(id(999_999));
    let input = ShippingZoneInput { name: "Zone".into(), countries: vec![country("US", &[])], rates: vec![again, stranger] };
    let updated = ShippingZone::create(&input, first.id, Some(&first), NOW + 1, || id(555)).unwrap();
    assert_eq!(updated.rates[0].id, first.rates[0].id);
    assert_eq!(updated.rates[1].id, id(555));
    assert_eq!(updated.created_at, first.created_at);
}

#[test]
fn zone_and_tax_rate_validation() {
    let bad = ShippingZoneInput {
        name: " ".into(),
        countries: vec![country("usa", &[])],
        rates: vec![
            zone_rate("W", RateCondition::Weight, 500, Some(100), -1, None),
            ZoneRateInput {
                estimated_delivery: DeliveryDays { min_days: 5, max_days: 2 },
                ..zone_rate("F", RateCondition::Flat, 1, None, 0, None)
            },
        ],
    };
    let e = bad.validate().unwrap_err();
    let fields: Vec<&str> = e.fields.iter().map(|f| f.field.as_str()).collect();
    assert_eq!(
        fields,
        ["name", "countries[0].code", "rates[0].price", "rates[0].max", "rates[1].condition", "rates[1].estimatedDelivery"]
    );

    let t = TaxRateInput { country: "ca".into(), province: Some("".into()), rate: 10_001, name: "".into(), shipping: false };
    let fields: Vec<String> = t.validate().unwrap_err().fields.into_iter().map(|f| f.field).collect();
    assert_eq!(fields, ["country", "province", "rate", "name"]);
    let ok = TaxRateInput { country: "CA".into(), province: Some("bc".into()), rate: 700, name: "PST".into(), shipping: false };
    let r = TaxRate::create(&ok, id(1), NOW, NOW).unwrap();
    assert_eq!(r.province.as_deref(), Some("BC"));
}

#[test]
fn discount_bodies_parse_and_validate() {
    let json = serde_json::json!({
        "title": "Buy two socks, get a hat half off",
        "code": "SOCKS-HAT",
        "valueType": "buyXGetY",
        "value": 5000,
        "target": "products",
        "productIds": [id(2)],
        "buyXGetY": {"buyQuantity": 2, "buyProductIds": [id(1)], "getQuantity": 1, "maxUsesPerOrder": 1},
        "minimum": {"type": "quantity", "value": 2},
        "customers": {"type": "all"},
        "usageLimit": 100,
        "oncePerCustomer": true,
        "startsAt": "2030-01-01T00:00:00Z",
        "combinesWith": {"orderDiscounts": true}
    });
    let input: DiscountInput = serde_json::from_value(json).unwrap();
    let d = Discount::create(&input, id(5), NOW).unwrap();
    assert_eq!(d.class(), DiscountClass::Product);
    assert_eq!(d.status(NOW), DiscountStatus::Scheduled);
    let view = serde_json::to_value(d.view(NOW)).unwrap();
    assert_eq!(view["status"], "SCHEDULED");
    assert_eq!(view["method"], "code");
    assert_eq!(view["buyXGetY"]["getQuantity"], 1);

    // Free shipping defaults its target to shipping.
    let fs: DiscountInput = serde_json::from_value(serde_json::json!({"title": "Ship", "valueType": "freeShipping"})).unwrap();
    let d = Discount::create(&fs, id(6), NOW).unwrap();
    assert_eq!((d.target, d.class(), d.code.is_none()), (TargetType::Shipping, DiscountClass::Shipping, true));

    let bad = serde_json::json!({
        "title": "", "code": "no spaces", "valueType": "percentage", "value": 0, "target": "products",
        "buyXGetY": {"buyQuantity": 1, "getQuantity": 1},
        "customers": {"type": "specific"}, "usageLimit": 0,
        "startsAt": "2027-01-02T00:00:00Z", "endsAt": "2027-01-01T00:00:00Z"
    });
    let input: DiscountInput = serde_json::from_value(bad).unwrap();
    let fields: Vec<String> = Discount::create(&input, id(7), NOW).unwrap_err().fields.into_iter().map(|f| f.field).collect();
    assert_eq!(fields, ["title", "code", "value", "buyXGetY", "productIds", "customers.customerIds", "usageLimit", "endsAt"]);
    let bxgy_without_rules: DiscountInput =
        serde_json::from_value(serde_json::json!({"title": "X", "valueType": "buyXGetY", "value": 10000})).unwrap();
    let fields: Vec<String> = bxgy_without_rules.validate(NOW).unwrap_err().fields.into_iter().map(|f| f.field).collect();
    assert_eq!(fields, ["target", "buyXGetY"]);
}

#[test]
fn records_survive_the_storage_codec() {
    // Stored records must round-trip through bincode (not self-describing: no tagged enums).
    let mut d = bxgy(2, 1, 5000, Some(3), vec![id(1)], vec![id(2)]);
    d.customers = CustomerEligibility { kind: EligibilityKind::Specific, customer_ids: vec![id(3)] };
    let cfg = bincode::config::standard();
    let bytes = bincode::serde::encode_to_vec(&d, cfg).unwrap();
    let (back, _): (Discount, usize) = bincode::serde::decode_from_slice(&bytes, cfg).unwrap();
    assert_eq!(back, d);
    let z = zone(1, vec![country("US", &["NY"])], vec![zone_rate("A", RateCondition::Weight, 0, Some(10), 100, Some(5))]);
    let bytes = bincode::serde::encode_to_vec(&z, cfg).unwrap();
    let (back, _): (ShippingZone, usize) = bincode::serde::decode_from_slice(&bytes, cfg).unwrap();
    assert_eq!(back, z);
}

#[test]
fn replacing_a_discount_keeps_identity_and_start() {
    let body = |extra: serde_json::Value| {
        let mut j = serde_json::json!({"title": "Ten", "code": "TEN", "valueType": "percentage", "value": 1000});
        if let (Some(o), Some(e)) = (j.as_object_mut(), extra.as_object()) {
            o.extend(e.clone());
        }
        serde_json::from_value::<DiscountInput>(j).unwrap()
    };
    let first = Discount::create(&body(serde_json::json!({})), id(1), NOW).unwrap();
    let later = first.replace(&body(serde_json::json!({"value": 1500})), NOW + 60_000).unwrap();
    assert_eq!((later.id, later.created_at, later.starts_at, later.value), (first.id, NOW, NOW, 1500));
    assert_eq!(later.updated_at, NOW + 60_000);
}

#[test]
fn calculations_and_zone_views_serialize() {
    let mut i = input(vec![line(1, 1, 1000, 1)]);
    i.destination = dest("CA", Some("BC"));
    i.taxes.rates = canada_rates().into();
    i.codes.push(CodeInput { code: "NOPE".into(), found: None });
    let c = calculate(&i).unwrap();
    // Orders will keep their calculation: it must survive the storage codec.
    let cfg = bincode::config::standard();
    let bytes = bincode::serde::encode_to_vec(&c, cfg).unwrap();
    let (back, _): (Calculation, usize) = bincode::serde::decode_from_slice(&bytes, cfg).unwrap();
    assert_eq!(back, c);
    let json = serde_json::to_value(&c).unwrap();
    assert_eq!(json["total"], serde_json::json!({"amount": 1120, "currency": "USD"}));
    assert_eq!(json["taxLines"][1]["province"], "BC");
    assert_eq!(json["warnings"][0]["code"], "DISCOUNT_NOT_FOUND");
    assert_eq!(json["lineItems"][0]["orderDiscount"]["amount"], 0);

    let z = zone(1, vec![country("US", &[])], vec![zone_rate("A", RateCondition::Price, 0, None, 100, Some(5000))]);
    let v = serde_json::to_value(z.view(cur("USD"))).unwrap();
    assert_eq!(v["rates"][0]["freeAbove"]["formatted"], "50.00 USD");
    assert_eq!(v["rates"][0]["estimatedDelivery"]["formatted"], "2-4 days");
    assert_eq!(v["rates"][0]["condition"], "price");
}

#[test]
fn discount_channels_are_normalized_and_checked() {
    let body = |channels: serde_json::Value| {
        serde_json::from_value::<DiscountInput>(serde_json::json!({
            "title": "Ten", "code": "TEN", "valueType": "percentage", "value": 1000, "channels": channels
        }))
        .unwrap()
    };
    let d = Discount::create(&body(serde_json::json!(["POS", "online_store", "pos "])), id(1), NOW).unwrap();
    assert_eq!(d.channels, ["online_store", "pos"]);
    assert!(d.available_on(Some("Pos")) && !d.available_on(Some("wholesale")) && !d.available_on(None));
    assert_eq!(serde_json::to_value(d.view(NOW)).unwrap()["channels"], serde_json::json!(["online_store", "pos"]));
    let everywhere = Discount::create(&body(serde_json::json!([])), id(2), NOW).unwrap();
    assert!(everywhere.available_on(None) && everywhere.available_on(Some("pos")));
    let fields: Vec<String> = Discount::create(&body(serde_json::json!(["ok", "not ok"])), id(3), NOW)
        .unwrap_err()
        .fields
        .into_iter()
        .map(|f| f.field)
        .collect();
    assert_eq!(fields, ["channels[1]"]);
}

#[test]
fn an_address_gives_its_destination() {
    let a: Address = serde_json::from_value(serde_json::json!({
        "firstName": "Ada", "address1": "1 Main St", "city": "Vancouver", "province": " bc ", "country": "ca",
        "postalCode": "V5K 0A1", "latitude": 49.28, "longitude": -123.12
    }))
    .unwrap();
    assert_eq!(a.destination(), Destination { country: "CA".into(), province: Some("BC".into()) });
    let no_province: Address = serde_json::from_value(serde_json::json!({"country": "US", "province": ""})).unwrap();
    assert_eq!(no_province.destination().province, None);
}
