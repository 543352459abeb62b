//! Property tests of the calculation invariants over random carts, discounts, shipping and taxes.

use proptest::prelude::*;
use proptest::sample::Index;

use super::allocation::allocate;
use super::calc::*;
use super::discount::*;
use super::shipping::Destination;
use super::tax::{TaxRate, TaxSettings};
use super::tests::{NOW, coded, cur, discount, id, rate};
use crate::domain::money::{Currency, Money};

fn currency() -> impl Strategy<Value = Currency> {
    prop_oneof![Just(cur("USD")), Just(cur("JPY")), Just(cur("BHD"))]
}

fn manual() -> impl Strategy<Value = ManualDiscount> {
    prop_oneof![
        (0i64..=10_000).prop_map(|value| ManualDiscount { kind: ManualKind::Percentage, value, title: None }),
        (0i64..=200_000).prop_map(|value| ManualDiscount { kind: ManualKind::Fixed, value, title: None }),
    ]
}

/// A line with a small id space, so lines share variants, products and collections.
fn line() -> impl Strategy<Value = CalcLine> {
    (1u128..6, 1u128..4, any::<[bool; 2]>(), 0i64..100_000, 1u32..=100, 0u32..5000, any::<bool>(), proptest::option::of(manual()))
        .prop_map(|(v, p, [c1, c2], price, quantity, weight_grams, taxable, discount)| CalcLine {
            variant_id: id(1000 + v),
            product_id: id(p),
            collection_ids: [(c1, id(100)), (c2, id(101))].into_iter().filter(|(on, _)| *on).map(|(_, c)| c).collect(),
            unit_price: Money { amount: price, currency: cur("USD") },
            quantity,
            weight_grams,
            taxable,
            discount,
        })
}

/// Any kind of discount, with random targets, requirements and combination flags.
fn any_discount() -> impl Strategy<Value = Discount> {
    (
        0u8..6,
        1i64..=10_000,
        1i64..50_000,
        any::<[bool; 3]>(),
        0u8..3,
        0i64..3000,
        (1u32..4, 1u32..3, proptest::option::of(1u32..3)),
    )
        .prop_map(|(kind, bp, fixed, [o, p, s], min_kind, min_value, (buy, get, max_uses))| {
            let (value_type, value, target) = match kind {
                0 => (ValueType::Percentage, bp, TargetType::Order),
                1 => (ValueType::FixedAmount, fixed, TargetType::Order),
                2 => (ValueType::Percentage, bp, TargetType::Products),
                3 => (ValueType::FixedAmount, fixed, TargetType::Collections),
                4 => (ValueType::FreeShipping, 0, TargetType::Shipping),
                _ => (ValueType::BuyXGetY, bp, TargetType::Products),
            };
            let mut d = discount(u128::from(kind) + 10 * u128::from(buy), value_type, value, target);
            d.product_ids = vec![id(1), id(2)];
            d.collection_ids = vec![id(100)];
            if value_type == ValueType::BuyXGetY {
                d.buy_x_get_y = Some(BuyXGetY {
                    buy_quantity: buy,
                    buy_product_ids: vec![id(1), id(3)],
                    buy_collection_ids: vec![id(101)],
                    get_quantity: get,
                    max_uses_per_order: max_uses,
                });
            }
            d.combines_with = CombinesWith { order_discounts: o, product_discounts: p, shipping_discounts: s };
            d.minimum = match min_kind {
                0 => MinimumRequirement::default(),
                1 => MinimumRequirement { kind: MinimumKind::Subtotal, value: min_value.max(1) * 10 },
                _ => MinimumRequirement { kind: MinimumKind::Quantity, value: min_value % 5 + 1 },
            };
            d
        })
}

fn tax_rates() -> Vec<TaxRate> {
    let r = |n, country: &str, province: Option<&str>, rate, shipping| TaxRate {
        id: id(n),
        country: country.into(),
        province: province.map(str::to_string),
        rate,
        name: format!("Tax {n}"),
        shipping,
        created_at: 0,
        updated_at: 0,
    };
    vec![
        r(1, "CA", None, 500, true),
        r(2, "CA", Some("BC"), 700, false),
        r(3, "DE", None, 1900, true),
        r(4, "US", Some("NY"), 888, true),
    ]
}

fn destination() -> impl Strategy<Value = Option<Destination>> {
    let d = |c: &str, p: Option<&str>| Some(Destination { country: c.into(), province: p.map(str::to_string) });
    prop_oneof![Just(None), Just(d("CA", Some("BC"))), Just(d("DE", None)), Just(d("US", Some("NY"))), Just(d("FR", None))]
}

prop_compose! {
    fn calc_input()(
        currency in currency(),
        lines in prop::collection::vec(line(), 0..8),
        order_discounts in prop::collection::vec(manual(), 0..3),
        codes in prop::collection::vec(any_discount(), 0..4),
        automatic in prop::collection::vec(any_discount(), 0..3),
        destination in destination(),
        shipping in proptest::option::of(0i64..5000),
        taxes_included in any::<bool>(),
        customer in any::<bool>(),
    ) -> CalcInput {
        let lines = lines
            .into_iter()
            .map(|mut l| {
                l.unit_price.currency = currency;
                l
            })
            .collect();
        CalcInput {
            currency,
            lines,
            order_discounts,
            codes: codes.into_iter().enumerate().map(|(i, d)| coded(&format!("CODE{i}"), d)).collect(),
            automatic: automatic
                .into_iter()
                .enumerate()
                .map(|(i, mut d)| {
                    d.id = id(500 + i as u128);
                    ResolvedDiscount { discount: d.into(), usage: DiscountUsage::default() }
                })
                .collect(),
            customer_id: customer.then(|| id(42)),
            channel: None,
            destination,
            shipping_rate: shipping.map(|p| rate(p, currency)),
            taxes: TaxSettings { taxes_included, rates: tax_rates().into() },
            now: NOW,
        }
    }
}

fn all_money(c: &Calculation) -> Vec<Money> {
    let mut out = vec![c.subtotal, c.discount, c.shipping, c.tax, c.total];
    out.extend(c.tax_lines.iter().map(|t| t.amount));
    out.extend(c.discount_applications.iter().map(|a| a.amount));
    for l in &c.line_items {
        out.extend([l.unit_price, l.line_discount, l.subtotal, l.product_discount, l.order_discount, l.discount, l.tax, l.total]);
    }
    out
}

/// The lines as a sorted multiset, to compare results whose lines come in another order.
fn line_multiset(c: &Calculation) -> Vec<String> {
    let mut v: Vec<String> = c.line_items.iter().map(|l| serde_json::to_string(l).unwrap_or_default()).collect();
    v.sort();
    v
}

fn check_invariants(i: &CalcInput, c: &Calculation) {
    let added_tax = if c.taxes_included { 0 } else { c.tax.amount };
    assert_eq!(c.total.amount, c.subtotal.amount - c.discount.amount + c.shipping.amount + added_tax);
    if !i.taxes.taxes_included {
        assert_eq!(c.total.amount, c.subtotal.amount - c.discount.amount + c.shipping.amount + c.tax.amount);
    }
    for m in all_money(c) {
        assert!(m.amount >= 0, "negative amount in {c:?}");
        assert_eq!(m.currency, i.currency);
    }
    // The parts sum exactly to the wholes.
    let sum = |f: &dyn Fn(&LineResult) -> i64| c.line_items.iter().map(f).sum::<i64>();
    assert_eq!(sum(&|l| l.subtotal.amount), c.subtotal.amount);
    assert_eq!(sum(&|l| l.discount.amount), c.discount.amount);
    assert_eq!(sum(&|l| l.product_discount.amount + l.order_discount.amount), c.discount.amount);
    assert_eq!(c.tax_lines.iter().map(|t| t.amount.amount).sum::<i64>(), c.tax.amount);
    let shipping_tax = c.tax.amount - sum(&|l| l.tax.amount);
    assert!(shipping_tax >= 0);
    let added_shipping_tax = if c.taxes_included { 0 } else { shipping_tax };
    assert_eq!(sum(&|l| l.total.amount) + c.shipping.amount + added_shipping_tax, c.total.amount);
    let order_level: i64 =
        c.discount_applications.iter().filter(|a| a.class == DiscountClass::Order).map(|a| a.amount.amount).sum();
    assert_eq!(sum(&|l| l.order_discount.amount), order_level);
    for l in &c.line_items {
        assert_eq!(l.subtotal.amount, l.unit_price.amount * i64::from(l.quantity) - l.line_discount.amount);
        assert!(l.discount.amount <= l.subtotal.amount);
    }
    if i.destination.is_none() {
        assert_eq!(c.tax.amount, 0);
    }
    assert_eq!(c.line_items.len(), i.lines.len());
}

proptest! {
    #[test]
    fn calculation_invariants_hold(i in calc_input()) {
        let c = calculate(&i).unwrap();
        check_invariants(&i, &c);
        prop_assert_eq!(c.to_json().unwrap(), serde_json::to_vec(&c).unwrap(), "the hand-written JSON is serde's");
    }

    #[test]
    fn shuffling_lines_changes_nothing(i in calc_input(), swaps in prop::collection::vec((any::<Index>(), any::<Index>()), 0..16)) {
        let a = calculate(&i).unwrap();
        let mut shuffled = i.clone();
        let n = shuffled.lines.len();
        if n > 0 {
            for (x, y) in &swaps {
                shuffled.lines.swap(x.index(n), y.index(n));
            }
        }
        let b = calculate(&shuffled).unwrap();
        prop_assert_eq!(
            [a.subtotal, a.discount, a.shipping, a.tax, a.total],
            [b.subtotal, b.discount, b.shipping, b.tax, b.total]
        );
        prop_assert_eq!(&a.tax_lines, &b.tax_lines);
        prop_assert_eq!(&a.applied_discount_codes, &b.applied_discount_codes);
        prop_assert_eq!(&a.discount_applications, &b.discount_applications);
        prop_assert_eq!(line_multiset(&a), line_multiset(&b));
        let codes = |c: &Calculation| c.warnings.iter().map(|w| w.code).collect::<Vec<_>>();
        prop_assert_eq!(codes(&a).len(), codes(&b).len());
    }

    #[test]
    fn a_full_discount_never_goes_below_zero(mut i in calc_input()) {
        i.order_discounts = vec![ManualDiscount { kind: ManualKind::Percentage, value: 10_000, title: None }];
        i.order_discounts.push(ManualDiscount { kind: ManualKind::Fixed, value: 1_000, title: None });
        let c = calculate(&i).unwrap();
        check_invariants(&i, &c);
        // Nothing is left of the goods: every line is free, only shipping (and its tax) remains.
        prop_assert_eq!(c.discount.amount, c.subtotal.amount);
        prop_assert!(c.line_items.iter().all(|l| l.total.amount == 0 && l.tax.amount == 0));
    }

    #[test]
    fn allocation_sums_exactly_and_stays_within_weights(
        weights in prop::collection::vec(0i64..1_000_000, 0..20),
        share in 0u32..=1000,
    ) {
        let total_weight: i64 = weights.iter().sum();
        let total = total_weight * i64::from(share) / 1000;
        let parts = allocate(total, &weights);
        prop_assert_eq!(parts.len(), weights.len());
        if total_weight > 0 {
            prop_assert_eq!(parts.iter().sum::<i64>(), total);
        }
        for (p, w) in parts.iter().zip(&weights) {
            prop_assert!(*p >= 0 && p <= w);
        }
    }
}
