//! Unit tests of the pricing rules, each with figures worked out by hand in the comments.

use uuid::Uuid;

use super::WarningCode;
use super::calc::*;
use super::discount::*;
use super::shipping::*;
use super::tax::*;
use crate::domain::money::{Currency, Money};

pub(super) const NOW: i64 = 1_800_000_000_000;

pub(super) fn cur(code: &str) -> Currency {
    Currency::parse(code).unwrap()
}

pub(super) fn id(n: u128) -> Uuid {
    Uuid::from_u128(n)
}

/// A line of variant `v` of product `p`; variant ids ascend with `v`, so processing order = given order.
pub(super) fn line(v: u128, p: u128, price: i64, quantity: u32) -> CalcLine {
    CalcLine {
        variant_id: id(1000 + v),
        product_id: id(p),
        collection_ids: Vec::new(),
        unit_price: Money { amount: price, currency: cur("USD") },
        quantity,
        weight_grams: 0,
        taxable: true,
        discount: None,
    }
}

pub(super) fn input(lines: Vec<CalcLine>) -> CalcInput {
    CalcInput {
        currency: cur("USD"),
        lines,
        order_discounts: Vec::new(),
        codes: Vec::new(),
        automatic: Vec::new(),
        customer_id: None,
        channel: None,
        destination: None,
        shipping_rate: None,
        taxes: TaxSettings::default(),
        now: NOW,
    }
}

/// An automatic discount with everything permissive but combinations.
pub(super) fn discount(n: u128, value_type: ValueType, value: i64, target: TargetType) -> Discount {
    Discount {
        id: id(n),
        title: format!("Discount {n}"),
        code: None,
        value_type,
        value,
        target,
        product_ids: Vec::new(),
        collection_ids: Vec::new(),
        buy_x_get_y: None,
        minimum: MinimumRequirement::default(),
        customers: CustomerEligibility::default(),
        usage_limit: None,
        once_per_customer: false,
        starts_at: 0,
        ends_at: None,
        disabled: false,
        combines_with: CombinesWith::default(),
        channels: Vec::new(),
        created_at: 0,
        updated_at: 0,
    }
}

pub(super) fn coded(code: &str, mut d: Discount) -> CodeInput {
    d.code = Some(code.to_string());
    CodeInput { code: code.to_string(), found: Some(ResolvedDiscount { discount: d.into(), usage: DiscountUsage::default() }) }
}

fn auto(d: Discount) -> ResolvedDiscount {
    ResolvedDiscount { discount: d.into(), usage: DiscountUsage::default() }
}

pub(super) fn rate(price: i64, currency: Currency) -> ShippingRate {
    ShippingRate {
        id: id(77).to_string(),
        name: "Standard".into(),
        description: String::new(),
        code: "standard".into(),
        price: Price::new(price, currency),
        estimated_delivery: EstimatedDelivery { min_days: 3, max_days: 5, formatted: "3-5 days".into() },
        provider: PROVIDER.into(),
    }
}

fn tax_rate(n: u128, country: &str, province: Option<&str>, rate: u32, name: &str, shipping: bool) -> TaxRate {
    TaxRate {
        id: id(n),
        country: country.into(),
        province: province.map(str::to_string),
        rate,
        name: name.into(),
        shipping,
        created_at: 0,
        updated_at: 0,
    }
}

pub(super) fn dest(country: &str, province: Option<&str>) -> Option<Destination> {
    Some(Destination { country: country.into(), province: province.map(str::to_string) })
}

fn warning_codes(c: &Calculation) -> Vec<WarningCode> {
    c.warnings.iter().map(|w| w.code).collect()
}

fn amounts(c: &Calculation) -> [i64; 5] {
    [c.subtotal.amount, c.discount.amount, c.shipping.amount, c.tax.amount, c.total.amount]
}

#[test]
fn percentage_order_code_is_allocated_over_lines() {
    // 2 × 10.00 + 1 × 5.00 = 25.00; 10 % = 2.50, split 20.00 : 5.00 → 2.00 and 0.50.
    let mut i = input(vec![line(1, 1, 1000, 2), line(2, 2, 500, 1)]);
    i.codes.push(coded("SAVE10", discount(9, ValueType::Percentage, 1000, TargetType::Order)));
    let c = calculate(&i).unwrap();
    assert_eq!(amounts(&c), [2500, 250, 0, 0, 2250]);
    assert_eq!(c.applied_discount_codes, ["SAVE10"]);
    assert_eq!(c.line_items[0].order_discount.amount, 200);
    assert_eq!(c.line_items[1].order_discount.amount, 50);
    assert_eq!(c.line_items[0].total.amount, 1800);
    assert!(c.warnings.is_empty());
}

#[test]
fn fixed_product_discount_is_spread_over_eligible_lines_only() {
    // 1.00 off products P1: weights 10.00 and 5.00 → 0.6667 and 0.3333 → 67 and 33; P2 untouched.
    let mut d = discount(9, ValueType::FixedAmount, 100, TargetType::Products);
    d.product_ids = vec![id(1)];
    let mut i = input(vec![line(1, 1, 1000, 1), line(2, 1, 500, 1), line(3, 2, 700, 1)]);
    i.codes.push(coded("P1OFF", d));
    let c = calculate(&i).unwrap();
    let per_line: Vec<i64> = c.line_items.iter().map(|l| l.product_discount.amount).collect();
    assert_eq!(per_line, [67, 33, 0]);
    assert_eq!(amounts(&c), [2200, 100, 0, 0, 2100]);
}

#[test]
fn percentage_collection_discount_rounds_half_away_from_zero() {
    // 20 % of 19.99 = 3.998 → 4.00; the line outside the collection keeps its price.
    let mut d = discount(9, ValueType::Percentage, 2000, TargetType::Collections);
    d.collection_ids = vec![id(500)];
    let mut l1 = line(1, 1, 1999, 1);
    l1.collection_ids = vec![id(400), id(500)];
    let mut i = input(vec![l1, line(2, 2, 1000, 1)]);
    i.codes.push(coded("COLL20", d));
    let c = calculate(&i).unwrap();
    assert_eq!(c.line_items[0].product_discount.amount, 400);
    assert_eq!(c.line_items[1].product_discount.amount, 0);
    assert_eq!(amounts(&c), [2999, 400, 0, 0, 2599]);
}

#[test]
fn discounts_are_capped_at_what_they_apply_to() {
    // 50.00 off a 30.00 order takes 30.00; a 100 % order discount takes everything; never below 0.
    let mut i = input(vec![line(1, 1, 1000, 3)]);
    i.codes.push(coded("BIG", discount(9, ValueType::FixedAmount, 5000, TargetType::Order)));
    i.shipping_rate = Some(rate(500, cur("USD")));
    let c = calculate(&i).unwrap();
    assert_eq!(amounts(&c), [3000, 3000, 500, 0, 500]);
    assert_eq!(c.line_items[0].total.amount, 0);

    let mut i = input(vec![line(1, 1, 333, 3), line(2, 2, 1, 1)]);
    i.order_discounts.push(ManualDiscount { kind: ManualKind::Percentage, value: 10_000, title: None });
    let c = calculate(&i).unwrap();
    assert_eq!(amounts(&c), [1000, 1000, 0, 0, 0]);
    assert!(c.line_items.iter().all(|l| l.total.amount == 0));
}

#[test]
fn free_shipping_and_shipping_percentage() {
    // Free shipping: 15.00 shipping becomes 0 and is not counted in `discount`.
    let mut i = input(vec![line(1, 1, 1000, 1)]);
    i.shipping_rate = Some(rate(1500, cur("USD")));
    i.codes.push(coded("FREESHIP", discount(9, ValueType::FreeShipping, 0, TargetType::Shipping)));
    let c = calculate(&i).unwrap();
    assert_eq!(amounts(&c), [1000, 0, 0, 0, 1000]);
    assert_eq!(c.discount_applications[0].amount.amount, 1500);
    assert_eq!(c.discount_applications[0].class, DiscountClass::Shipping);

    // 50 % off 9.99 shipping = 4.995 → 5.00 off → 4.99 left.
    let mut i = input(vec![line(1, 1, 1000, 1)]);
    i.shipping_rate = Some(rate(999, cur("USD")));
    i.codes.push(coded("HALFSHIP", discount(9, ValueType::Percentage, 5000, TargetType::Shipping)));
    assert_eq!(amounts(&calculate(&i).unwrap()), [1000, 0, 499, 0, 1499]);

    // Without a chosen rate a shipping code is accepted and takes nothing.
    let mut i = input(vec![line(1, 1, 1000, 1)]);
    i.codes.push(coded("FREESHIP", discount(9, ValueType::FreeShipping, 0, TargetType::Shipping)));
    let c = calculate(&i).unwrap();
    assert_eq!(c.applied_discount_codes, ["FREESHIP"]);
    assert_eq!(c.shipping.amount, 0);
}

pub(super) fn bxgy(
    buy: u32,
    get: u32,
    value: i64,
    max_uses: Option<u32>,
    buy_products: Vec<Uuid>,
    get_products: Vec<Uuid>,
) -> Discount {
    let mut d = discount(9, ValueType::BuyXGetY, value, TargetType::Products);
    d.product_ids = get_products;
    d.buy_x_get_y = Some(BuyXGetY {
        buy_quantity: buy,
        buy_product_ids: buy_products,
        buy_collection_ids: Vec::new(),
        get_quantity: get,
        max_uses_per_order: max_uses,
    });
    d
}

#[test]
fn buy_x_get_y_discounts_the_cheapest_target_units() {
    // Buy 2 get 1 free among 30.00, 20.00, 10.00: the two dearest are bought, 10.00 is free.
    let mut i = input(vec![line(1, 1, 3000, 1), line(2, 1, 2000, 1), line(3, 1, 1000, 1)]);
    i.codes.push(coded("B2G1", bxgy(2, 1, 10_000, None, vec![id(1)], vec![id(1)])));
    let c = calculate(&i).unwrap();
    assert_eq!(amounts(&c), [6000, 1000, 0, 0, 5000]);
    assert_eq!(c.line_items[2].product_discount.amount, 1000);

    // Buy 1 get 1 at 50 % over 4 units of 10.00: two uses → 2 × 5.00; capped at one use → 5.00.
    let mut i = input(vec![line(1, 1, 1000, 4)]);
    i.codes.push(coded("B1G1", bxgy(1, 1, 5000, None, vec![id(1)], vec![id(1)])));
    assert_eq!(calculate(&i).unwrap().discount.amount, 1000);
    i.codes[0] = coded("B1G1", bxgy(1, 1, 5000, Some(1), vec![id(1)], vec![id(1)]));
    assert_eq!(calculate(&i).unwrap().discount.amount, 500);

    // Bought items that are not also "get" items are used first: P1 pays for P2.
    let mut i = input(vec![line(1, 1, 1000, 1), line(2, 2, 3000, 1)]);
    i.codes.push(coded("MIX", bxgy(1, 1, 10_000, None, vec![id(1), id(2)], vec![id(2)])));
    let c = calculate(&i).unwrap();
    assert_eq!(c.line_items[1].product_discount.amount, 3000);
    assert_eq!(c.discount.amount, 3000);
}

#[test]
fn buy_x_get_y_not_fulfilled_is_a_warning() {
    // Two units for "buy 2 get 1": nothing left to get.
    let mut i = input(vec![line(1, 1, 1000, 2)]);
    i.codes.push(coded("B2G1", bxgy(2, 1, 10_000, None, vec![id(1)], vec![id(1)])));
    let c = calculate(&i).unwrap();
    assert_eq!(warning_codes(&c), [WarningCode::DiscountNotApplicable]);
    assert!(c.applied_discount_codes.is_empty());
    assert_eq!(c.discount.amount, 0);
}

#[test]
fn minimum_requirements() {
    let with_min = |kind, value| {
        let mut d = discount(9, ValueType::Percentage, 1000, TargetType::Order);
        d.minimum = MinimumRequirement { kind, value };
        d
    };
    // Subtotal 49.99 < 50.00: not met; 50.00: met.
    let mut i = input(vec![line(1, 1, 4999, 1)]);
    i.codes.push(coded("MIN50", with_min(MinimumKind::Subtotal, 5000)));
    assert_eq!(warning_codes(&calculate(&i).unwrap()), [WarningCode::DiscountMinimumNotMet]);
    i.lines[0].unit_price.amount = 5000;
    assert_eq!(calculate(&i).unwrap().discount.amount, 500);

    // Two items < three.
    let mut i = input(vec![line(1, 1, 1000, 2)]);
    i.codes.push(coded("MIN3", with_min(MinimumKind::Quantity, 3)));
    assert_eq!(warning_codes(&calculate(&i).unwrap()), [WarningCode::DiscountMinimumNotMet]);
    i.lines[0].quantity = 3;
    assert!(calculate(&i).unwrap().warnings.is_empty());

    // For a product discount the minimum counts only eligible lines: 10.00 of P1 < 20.00.
    let mut d = with_min(MinimumKind::Subtotal, 2000);
    d.target = TargetType::Products;
    d.product_ids = vec![id(1)];
    let mut i = input(vec![line(1, 1, 1000, 1), line(2, 2, 9000, 1)]);
    i.codes.push(coded("P1MIN", d));
    assert_eq!(warning_codes(&calculate(&i).unwrap()), [WarningCode::DiscountMinimumNotMet]);
}

#[test]
fn customer_eligibility() {
    let mut d = discount(9, ValueType::Percentage, 1000, TargetType::Order);
    d.customers = CustomerEligibility { kind: EligibilityKind::Specific, customer_ids: vec![id(42)] };
    let mut i = input(vec![line(1, 1, 1000, 1)]);
    i.codes.push(coded("VIP", d));
    assert_eq!(warning_codes(&calculate(&i).unwrap()), [WarningCode::DiscountCustomerIneligible]);
    i.customer_id = Some(id(43));
    assert_eq!(warning_codes(&calculate(&i).unwrap()), [WarningCode::DiscountCustomerIneligible]);
    i.customer_id = Some(id(42));
    assert_eq!(calculate(&i).unwrap().discount.amount, 100);
}

#[test]
fn usage_limits() {
    let mut d = discount(9, ValueType::Percentage, 1000, TargetType::Order);
    d.usage_limit = Some(5);
    let mut i = input(vec![line(1, 1, 1000, 1)]);
    i.codes.push(coded("FIVE", d));
    let usage = |i: &mut CalcInput, total, by_customer| {
        if let Some(r) = i.codes[0].found.as_mut() {
            r.usage = DiscountUsage { total, by_customer };
        }
    };
    usage(&mut i, 5, 0);
    assert_eq!(warning_codes(&calculate(&i).unwrap()), [WarningCode::DiscountUsageLimitReached]);
    usage(&mut i, 4, 0);
    assert_eq!(calculate(&i).unwrap().discount.amount, 100);

    if let Some(r) = i.codes[0].found.as_mut() {
        let d = std::sync::Arc::make_mut(&mut r.discount);
        d.usage_limit = None;
        d.once_per_customer = true;
    }
    usage(&mut i, 100, 1);
    assert_eq!(warning_codes(&calculate(&i).unwrap()), [WarningCode::DiscountUsageLimitReached]);
    usage(&mut i, 100, 0);
    assert!(calculate(&i).unwrap().warnings.is_empty());
}

#[test]
fn dates_and_status() {
    let mut d = discount(9, ValueType::Percentage, 1000, TargetType::Order);
    d.starts_at = 2000;
    d.ends_at = Some(3000);
    assert_eq!(d.status(1999), DiscountStatus::Scheduled);
    assert_eq!(d.status(2000), DiscountStatus::Active);
    assert_eq!(d.status(2999), DiscountStatus::Active);
    assert_eq!(d.status(3000), DiscountStatus::Expired);
    d.disabled = true;
    assert_eq!(d.status(2500), DiscountStatus::Disabled);
    d.disabled = false;

    let mut i = input(vec![line(1, 1, 1000, 1)]);
    i.codes.push(coded("TIMED", d));
    for (now, applied) in [(1999, false), (2500, true), (3000, false)] {
        i.now = now;
        let c = calculate(&i).unwrap();
        assert_eq!(c.applied_discount_codes.len(), usize::from(applied), "at {now}");
        if !applied {
            assert_eq!(warning_codes(&c), [WarningCode::DiscountNotActive]);
        }
    }
}

#[test]
fn combine_rules_follow_the_classes() {
    let order10 = |cw| {
        let mut d = discount(9, ValueType::Percentage, 1000, TargetType::Order);
        d.combines_with = cw;
        d
    };
    let product20 = |cw| {
        let mut d = discount(8, ValueType::Percentage, 2000, TargetType::Products);
        d.product_ids = vec![id(1)];
        d.combines_with = cw;
        d
    };
    let none = CombinesWith::default();
    let with_order = CombinesWith { order_discounts: true, ..none };
    let with_product = CombinesWith { product_discounts: true, ..none };

    // The second code does not combine: dropped with a warning, the first stays.
    let mut i = input(vec![line(1, 1, 1000, 1)]);
    i.codes = vec![coded("ORDER10", order10(none)), coded("PROD20", product20(with_order))];
    let c = calculate(&i).unwrap();
    assert_eq!(c.applied_discount_codes, ["ORDER10"]);
    assert_eq!(warning_codes(&c), [WarningCode::DiscountNotCombinable]);

    // Both accept each other: product 20 % first (2.00), then order 10 % of the 8.00 left (0.80).
    i.codes = vec![coded("ORDER10", order10(with_product)), coded("PROD20", product20(with_order))];
    let c = calculate(&i).unwrap();
    assert_eq!(c.applied_discount_codes, ["ORDER10", "PROD20"]);
    assert_eq!(amounts(&c), [1000, 280, 0, 0, 720]);

    // Two order discounts combine only if both allow order discounts.
    let mut other = order10(with_order);
    other.id = id(10);
    i.codes = vec![coded("A", order10(with_order)), coded("B", other.clone())];
    assert_eq!(calculate(&i).unwrap().discount.amount, 200);
    i.codes = vec![coded("A", order10(none)), coded("B", other)];
    assert_eq!(calculate(&i).unwrap().applied_discount_codes, ["A"]);

    // Automatic discounts are chosen first; a code that does not combine with one is dropped.
    let mut i = input(vec![line(1, 1, 1000, 1)]);
    i.automatic.push(auto(order10(none)));
    i.codes.push(coded("PROD20", product20(with_order)));
    let c = calculate(&i).unwrap();
    assert!(c.applied_discount_codes.is_empty());
    assert_eq!(c.discount.amount, 100);
    assert_eq!(c.discount_applications[0].source, Source::Automatic);
    assert!(c.warnings[0].message.contains("Discount 9"));

    // An automatic discount that does not apply says nothing.
    let mut d = order10(none);
    d.minimum = MinimumRequirement { kind: MinimumKind::Subtotal, value: 100_000 };
    let mut i = input(vec![line(1, 1, 1000, 1)]);
    i.automatic.push(auto(d));
    let c = calculate(&i).unwrap();
    assert!(c.warnings.is_empty() && c.discount.amount == 0);
}

#[test]
fn duplicate_unknown_and_mismatched_codes() {
    let mut i = input(vec![line(1, 1, 1000, 1)]);
    let mut mismatched = coded("OTHER", discount(7, ValueType::Percentage, 1000, TargetType::Order));
    mismatched.code = "TYPO".into();
    i.codes = vec![
        coded("SAVE10", discount(9, ValueType::Percentage, 1000, TargetType::Order)),
        CodeInput { code: "save10".into(), found: None },
        CodeInput { code: "NOPE".into(), found: None },
        mismatched,
    ];
    let c = calculate(&i).unwrap();
    assert_eq!(c.applied_discount_codes, ["SAVE10"]);
    assert_eq!(warning_codes(&c), [WarningCode::DiscountDuplicate, WarningCode::DiscountNotFound, WarningCode::DiscountNotFound]);
    assert_eq!(c.warnings[1].discount_code.as_deref(), Some("NOPE"));
}

#[test]
fn line_level_discounts_make_the_subtotal() {
    // 15 % of 2 × 10.00 = 3.00; 50.00 off a 10.00 line is capped at 10.00 with a warning.
    let mut l1 = line(1, 1, 1000, 2);
    l1.discount = Some(ManualDiscount { kind: ManualKind::Percentage, value: 1500, title: None });
    let mut l2 = line(2, 2, 1000, 1);
    l2.discount = Some(ManualDiscount { kind: ManualKind::Fixed, value: 5000, title: None });
    let c = calculate(&input(vec![l1, l2])).unwrap();
    assert_eq!(c.line_items[0].line_discount.amount, 300);
    assert_eq!(c.line_items[1].line_discount.amount, 1000);
    assert_eq!(amounts(&c), [1700, 0, 0, 0, 1700]);
    assert_eq!(c.warnings[0].field.as_deref(), Some("lineItems[1].discount"));
}

#[test]
fn manual_order_discounts_come_before_codes_on_the_same_base() {
    // Base 30.00: manual 5.00 off, then 10 % of the base = 3.00 → 8.00.
    let mut i = input(vec![line(1, 1, 1000, 3)]);
    i.order_discounts.push(ManualDiscount { kind: ManualKind::Fixed, value: 500, title: Some("Loyalty".into()) });
    let mut d = discount(9, ValueType::Percentage, 1000, TargetType::Order);
    d.combines_with.order_discounts = true;
    i.codes.push(coded("SAVE10", d));
    let c = calculate(&i).unwrap();
    assert_eq!(amounts(&c), [3000, 800, 0, 0, 2200]);
    assert_eq!(c.discount_applications[0].title, "Loyalty");
    assert_eq!(c.discount_applications[0].source, Source::Manual);
}

pub(super) fn canada_rates() -> Vec<TaxRate> {
    vec![
        tax_rate(1, "CA", Some("BC"), 700, "PST", false),
        tax_rate(2, "CA", None, 500, "GST", true),
        tax_rate(3, "US", None, 800, "US", true),
    ]
}

#[test]
fn tax_exclusive_per_jurisdiction() {
    // BC: GST 5 % (also on shipping) and PST 7 %. Lines 10.00 and 20.00, shipping 10.00:
    // GST 0.50 + 1.00 + 0.50 = 2.00; PST 0.70 + 1.40 = 2.10; total 30.00 + 10.00 + 4.10 = 44.10.
    let mut i = input(vec![line(1, 1, 1000, 1), line(2, 2, 2000, 1)]);
    i.shipping_rate = Some(rate(1000, cur("USD")));
    i.destination = dest("CA", Some("BC"));
    i.taxes.rates = canada_rates().into();
    let c = calculate(&i).unwrap();
    assert_eq!(amounts(&c), [3000, 0, 1000, 410, 4410]);
    let lines: Vec<(&str, Option<&str>, u32, i64)> =
        c.tax_lines.iter().map(|t| (t.name.as_str(), t.province.as_deref(), t.rate, t.amount.amount)).collect();
    assert_eq!(lines, [("GST", None, 500, 200), ("PST", Some("BC"), 700, 210)]);
    assert_eq!(c.line_items[1].tax.amount, 240);
    assert_eq!(c.line_items[1].total.amount, 2240);

    // Ontario: only GST applies. An untaxable line pays none.
    i.destination = dest("CA", Some("ON"));
    i.lines[1].taxable = false;
    let c = calculate(&i).unwrap();
    assert_eq!(c.tax_lines.len(), 1);
    assert_eq!(c.tax.amount, 100); // 0.50 on the first line + 0.50 on shipping.

    // 8.25 % of 9.99 after a 10 % order discount (8.99): 0.741675 → 0.74.
    let mut i = input(vec![line(1, 1, 999, 1)]);
    i.order_discounts.push(ManualDiscount { kind: ManualKind::Percentage, value: 1000, title: None });
    i.destination = dest("US", Some("TX"));
    i.taxes.rates = vec![tax_rate(1, "US", Some("TX"), 825, "Texas", false)].into();
    assert_eq!(amounts(&calculate(&i).unwrap()), [999, 100, 0, 74, 973]);
}

#[test]
fn no_shipping_address_means_no_tax() {
    let mut i = input(vec![line(1, 1, 1000, 1)]);
    i.taxes.rates = canada_rates().into();
    let c = calculate(&i).unwrap();
    assert_eq!(c.tax.amount, 0);
    assert!(c.tax_lines.is_empty());
    // An address no rate covers: no tax either.
    i.destination = dest("FR", None);
    assert_eq!(calculate(&i).unwrap().tax.amount, 0);
}

#[test]
fn tax_inclusive_is_extracted_not_added() {
    // DE 19 % included: 11.90 holds 1.90; shipping 5.95 holds 0.95. Total stays 17.85.
    let mut i = input(vec![line(1, 1, 1190, 1)]);
    i.shipping_rate = Some(rate(595, cur("USD")));
    i.destination = dest("DE", None);
    i.taxes = TaxSettings { taxes_included: true, rates: vec![tax_rate(1, "DE", None, 1900, "MwSt", true)].into() };
    let c = calculate(&i).unwrap();
    assert!(c.taxes_included);
    assert_eq!(amounts(&c), [1190, 0, 595, 285, 1785]);
    assert_eq!(c.line_items[0].tax.amount, 190);
    assert_eq!(c.line_items[0].total.amount, 1190);

    // Two rates, 5 % + 7 %, in 10.00: net round(1000 / 1.12) = 893, tax 107, split 500 : 700 →
    // 44.58 and 62.42 → 44 and 62, the unit left over to the larger remainder → 45 and 62.
    let mut i = input(vec![line(1, 1, 1000, 1)]);
    i.destination = dest("CA", Some("BC"));
    i.taxes = TaxSettings { taxes_included: true, rates: canada_rates().into() };
    let c = calculate(&i).unwrap();
    let parts: Vec<i64> = c.tax_lines.iter().map(|t| t.amount.amount).collect();
    assert_eq!(parts, [45, 62]);
    assert_eq!(amounts(&c), [1000, 0, 0, 107, 1000]);
}

#[test]
fn currency_exponents() {
    // JPY has no minor unit: 10 % of 3 × ¥333 = 99.9 → ¥100.
    let jpy = cur("JPY");
    let mut l = line(1, 1, 333, 3);
    l.unit_price.currency = jpy;
    let mut i = input(vec![l]);
    i.currency = jpy;
    i.shipping_rate = Some(rate(500, jpy));
    i.codes.push(coded("TEN", discount(9, ValueType::Percentage, 1000, TargetType::Order)));
    let c = calculate(&i).unwrap();
    assert_eq!(amounts(&c), [999, 100, 500, 0, 1399]);
    assert_eq!(c.total.currency, jpy);
    assert_eq!(rate(500, jpy).price.formatted, "500 JPY");

    // BHD has three: 15 % of 1.005 BHD = 0.15075 → 0.151.
    let bhd = cur("BHD");
    let mut l = line(1, 1, 1005, 1);
    l.unit_price.currency = bhd;
    let mut i = input(vec![l]);
    i.currency = bhd;
    i.codes.push(coded("FIFTEEN", discount(9, ValueType::Percentage, 1500, TargetType::Order)));
    let c = calculate(&i).unwrap();
    assert_eq!(amounts(&c), [1005, 151, 0, 0, 854]);
    assert_eq!(Price::new(854, bhd).formatted, "0.854 BHD");
}

#[test]
fn validation_names_the_fields() {
    let mut eur_line = line(3, 3, 100, 1);
    eur_line.unit_price.currency = cur("EUR");
    let mut i = input(vec![line(1, 1, 1000, 0), line(2, 2, -5, 101), eur_line]);
    i.codes = (0..11).map(|n| CodeInput { code: format!("C{n}"), found: None }).collect();
    i.order_discounts.push(ManualDiscount { kind: ManualKind::Fixed, value: -1, title: None });
    i.shipping_rate = Some(rate(100, cur("EUR")));
    let e = calculate(&i).unwrap_err();
    let fields: Vec<&str> = e.fields.iter().map(|f| f.field.as_str()).collect();
    assert_eq!(
        fields,
        [
            "lineItems[0].quantity",
            "lineItems[1].quantity",
            "lineItems[1].unitPrice.amount",
            "lineItems[2].unitPrice.currency",
            "orderDiscounts[0].value",
            "discountCodes",
            "shippingMethodId",
        ]
    );
    assert_eq!(e.code.status(), 400);

    // Ten codes are fine.
    let mut i = input(vec![line(1, 1, 1000, 100)]);
    i.codes = (0..10).map(|n| CodeInput { code: format!("C{n}"), found: None }).collect();
    assert_eq!(calculate(&i).unwrap().warnings.len(), 10);
}

#[test]
fn line_order_does_not_change_figures() {
    let mut d = discount(9, ValueType::Percentage, 3333, TargetType::Order);
    d.combines_with.order_discounts = true;
    let lines = vec![line(3, 1, 333, 1), line(1, 2, 777, 3), line(2, 3, 1001, 2)];
    let mut i = input(lines.clone());
    i.codes.push(coded("ODD", d));
    i.destination = dest("CA", Some("BC"));
    i.taxes.rates = canada_rates().into();
    let a = calculate(&i).unwrap();
    i.lines.reverse();
    let b = calculate(&i).unwrap();
    assert_eq!(amounts(&a), amounts(&b));
    assert_eq!(a.tax_lines, b.tax_lines);
    let mut la = a.line_items.clone();
    la.reverse();
    assert_eq!(la, b.line_items);
}

#[test]
fn shipping_basis_is_weight_and_subtotal() {
    let mut l1 = line(1, 1, 1000, 2);
    l1.weight_grams = 250;
    l1.discount = Some(ManualDiscount { kind: ManualKind::Fixed, value: 300, title: None });
    let i = input(vec![l1, line(2, 2, 500, 1)]);
    assert_eq!(i.shipping_basis(), (500, 2200));
}

#[test]
fn verdicts_for_validate_routes() {
    let mut d = discount(9, ValueType::Percentage, 1000, TargetType::Order);
    d.minimum = MinimumRequirement { kind: MinimumKind::Subtotal, value: 5000 };
    let mut i = input(vec![line(1, 1, 1000, 1)]);
    i.codes = vec![coded("MIN50", d), coded("FREESHIP", discount(8, ValueType::FreeShipping, 0, TargetType::Shipping))];
    i.shipping_rate = Some(rate(700, cur("USD")));
    let c = calculate(&i).unwrap();
    let v = c.verdict("min50");
    assert!(!v.valid);
    assert_eq!(v.reasons, ["MIN50 needs a subtotal of at least 50.00 USD"]);
    assert_eq!(v.amount.amount, 0);
    let v = c.verdict("FREESHIP");
    assert!(v.valid && v.reasons.is_empty());
    assert_eq!(v.amount.amount, 700);
}

#[test]
fn a_discount_limited_to_channels_applies_only_on_them() {
    // 10 % off a 50.00 cart, limited to the POS channel.
    let mut d = discount(7, ValueType::Percentage, 1000, TargetType::Order);
    d.channels = vec!["pos".into()];
    let mut i = input(vec![line(1, 1, 5000, 1)]);
    i.codes.push(coded("POS10", d));
    let off = |i: &CalcInput| calculate(i).unwrap();
    // No channel named: refused, with the channels it needs.
    let c = off(&i);
    assert_eq!((c.discount.amount, c.warnings[0].code), (0, WarningCode::DiscountNotApplicable));
    assert!(c.warnings[0].message.contains("pos"), "{}", c.warnings[0].message);
    i.channel = Some("online_store".into());
    assert_eq!(off(&i).discount.amount, 0);
    // The channel matches without regard to case: 10 % of 50.00 = 5.00.
    i.channel = Some("POS".into());
    let c = off(&i);
    assert_eq!((c.discount.amount, c.applied_discount_codes.clone()), (500, vec!["POS10".to_string()]));
}
