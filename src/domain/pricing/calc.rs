//! The cart/order calculation: lines, discounts, shipping and tax → the spec's calculation result.
//!
//! Stages, each working on what the previous one left:
//!
//! 1. **Line-level discounts** (manual, per line: `percentage` in basis points of the line, or
//!    `fixed` minor units off the whole line, capped at the line). `subtotal` = Σ(unit price × quantity
//!    − line discount).
//! 2. **Choosing discounts**: automatic discounts first (by id, i.e. creation order), then codes in the
//!    order given. Each must pass its checks — status and dates, usage limits, customer eligibility,
//!    minimum requirement, something in the cart it applies to — and must combine with every discount
//!    already chosen: `a` and `b` combine when `a.combinesWith` allows `b`'s class and `b.combinesWith`
//!    allows `a`'s. A code that fails is dropped with a warning saying why; an automatic discount that
//!    fails is silently not applied (the shopper never asked for it). Manual order-level discounts are
//!    the merchant's own and are not subject to combination rules.
//! 3. **Product discounts** (product and collection targets, buy-X-get-Y), in the order chosen. A
//!    percentage is taken of each eligible line's subtotal; a fixed amount is taken once per order and
//!    spread over the eligible lines by largest remainder; buy-X-get-Y discounts the cheapest target
//!    units. Each is capped at what is left of the line.
//! 4. **Order discounts**: manual order-level discounts first, then chosen order discounts. The base is
//!    subtotal − product discounts; a percentage is taken of the base, each discount capped at what is
//!    left. Their sum is allocated over the lines by largest remainder in proportion to each line's
//!    amount after product discounts, so per-line shares sum exactly to it.
//! 5. **Shipping discounts** on the chosen rate's price: free shipping takes all of it, a percentage or
//!    fixed amount part of it, each capped at what is left. `shipping` is the price after them; shipping
//!    discounts are therefore not in `discount` (they would otherwise count twice in the total).
//! 6. **Tax**, only with a shipping address: per line and per applicable rate on the line's amount after
//!    all its discounts, and on the shipping amount for rates with `shipping: true` (see [`super::tax`]).
//!
//! Result: `discount` = product discounts + order discounts (manual and codes/automatic), and
//! `total = subtotal − discount + shipping + tax` when prices exclude tax. When the store's
//! `taxesIncluded` is set, every amount (prices, `subtotal`, `discount`, `shipping`) includes tax, `tax`
//! reports the tax they contain and is not added again: `total = subtotal − discount + shipping`.
//! `taxesIncluded` is in the result so the identity can always be checked:
//! `total = subtotal − discount + shipping + (taxesIncluded ? 0 : tax)`. Per line,
//! `total = subtotal − discount + (taxesIncluded ? 0 : tax)`; the lines' totals plus shipping and its tax
//! make the order total.
#![allow(
    clippy::arithmetic_side_effects,
    reason = "`validate` bounds the lines' total to MAX_AMOUNT (1e15 minor units) before any step runs; every \
              amount derived from it (discounts, shipping, tax at most 100 %) stays within a few times that, far \
              below i64::MAX (9.2e18), and products of two such amounts are taken in i128"
)]

use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::allocation::{BASIS, allocate, percent_of};
use super::discount::{Discount, DiscountClass, DiscountUsage, MAX_CODES_PER_REQUEST, MinimumKind, ValueType};
use super::shipping::{Destination, ShippingRate, valid_country};
use super::tax::{self, TaxLine, TaxSettings};
use super::{Warning, WarningCode};
use crate::domain::money::{Currency, Money, round_div};
use crate::domain::product::MAX_AMOUNT;
use crate::error::{ApiResult, Check};

/// Most lines in one calculation.
pub const MAX_LINES: usize = 250;
/// Quantity of one line: 1 to this.
pub const MAX_QUANTITY: u32 = 100;
/// Most manual order-level discounts.
pub const MAX_ORDER_DISCOUNTS: usize = 10;

/// How a manual discount is expressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum ManualKind {
    /// `value` basis points (1000 = 10 %).
    Percentage,
    /// `value` minor units.
    Fixed,
}

/// A discount the merchant sets by hand on a line or on the order: `{type, value, title?}`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ManualDiscount {
    #[serde(rename = "type")]
    pub kind: ManualKind,
    pub value: i64,
    pub title: Option<String>,
}

/// One line, with what the rules need to know about its variant and product.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CalcLine {
    pub variant_id: Uuid,
    pub product_id: Uuid,
    /// The collections the product is in (for collection-targeted discounts).
    pub collection_ids: Vec<Uuid>,
    pub unit_price: Money,
    pub quantity: u32,
    /// Per unit, for weight-based shipping rates.
    pub weight_grams: u32,
    /// Whether tax applies to the line.
    pub taxable: bool,
    pub discount: Option<ManualDiscount>,
}

/// A discount record with its usage counts, as the caller loaded them. The record is shared:
/// callers keep resolved discounts per store and hand every calculation its own copies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedDiscount {
    pub discount: Arc<Discount>,
    pub usage: DiscountUsage,
}

/// A code as the shopper entered it, with the discount it names (`None`: no such code).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeInput {
    pub code: String,
    pub found: Option<ResolvedDiscount>,
}

/// Everything a calculation depends on. The caller resolves ids to records; nothing here is read
/// from storage or the clock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CalcInput {
    /// The store currency: every amount is in it.
    pub currency: Currency,
    pub lines: Vec<CalcLine>,
    pub order_discounts: Vec<ManualDiscount>,
    pub codes: Vec<CodeInput>,
    /// The store's automatic discounts (code discounts here are ignored).
    pub automatic: Vec<ResolvedDiscount>,
    pub customer_id: Option<Uuid>,
    /// The sales channel the cart is on; discounts limited to other channels do not apply.
    pub channel: Option<String>,
    /// The shipping address; no tax without it.
    pub destination: Option<Destination>,
    /// The chosen rate, as [`super::shipping::rates_for`] offered it.
    pub shipping_rate: Option<ShippingRate>,
    pub taxes: TaxSettings,
    /// Unix milliseconds, for discount dates.
    pub now: i64,
}

/// Where an applied discount came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum Source {
    Manual,
    Automatic,
    Code,
}

/// One discount that applied, and how much it took.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DiscountApplication {
    pub source: Source,
    pub discount_id: Option<Uuid>,
    pub code: Option<String>,
    pub title: String,
    pub class: DiscountClass,
    pub amount: Money,
}

/// One processed line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LineResult {
    pub variant_id: Uuid,
    pub product_id: Uuid,
    pub unit_price: Money,
    pub quantity: u32,
    /// The manual line-level discount.
    pub line_discount: Money,
    /// unit price × quantity − line discount.
    pub subtotal: Money,
    /// Product-class discounts taken on this line.
    pub product_discount: Money,
    /// This line's share of the order-level discounts.
    pub order_discount: Money,
    /// product discount + order discount: the lines' discounts sum to the calculation's `discount`.
    pub discount: Money,
    pub tax: Money,
    /// subtotal − discount (+ tax when prices exclude it).
    pub total: Money,
}

/// The spec's cart/order calculation result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Calculation {
    pub subtotal: Money,
    pub discount: Money,
    pub shipping: Money,
    pub tax: Money,
    pub total: Money,
    /// Whether amounts include tax (then `tax` is contained in them, not added).
    pub taxes_included: bool,
    pub tax_lines: Vec<TaxLine>,
    pub applied_discount_codes: Vec<String>,
    pub discount_applications: Vec<DiscountApplication>,
    pub warnings: Vec<Warning>,
    /// In the order of the request's lines.
    pub line_items: Vec<LineResult>,
}

fn check_manual(c: &mut Check, at: &str, d: &ManualDiscount) {
    match d.kind {
        ManualKind::Percentage => {
            c.ensure((0..=BASIS).contains(&d.value), &format!("{at}.value"), "must be 0 to 10000 basis points")
        }
        ManualKind::Fixed => c.ensure(
            (0..=MAX_AMOUNT).contains(&d.value),
            &format!("{at}.value"),
            format!("must be 0 to {MAX_AMOUNT} minor units"),
        ),
    };
    if let Some(t) = &d.title {
        c.ensure(t.chars().count() <= 255, &format!("{at}.title"), "must be at most 255 characters");
    }
}

/// Checks the request figures: at most 10 codes, quantities 1 to 100, no negative amount, one currency.
/// Field names are the request's (`lineItems[0].quantity`, `discountCodes`, ...).
pub fn validate(input: &CalcInput) -> ApiResult<()> {
    let mut c = Check::new();
    let cur = input.currency;
    let other_currency = |m: &Money| format!("must be the store currency {}, not {}", cur.code(), m.currency.code());
    ensure(&mut c, input.lines.len() <= MAX_LINES, || "lineItems".into(), || format!("at most {MAX_LINES} lines"));
    let mut sum: i128 = 0;
    for (i, l) in input.lines.iter().enumerate() {
        let at = || format!("lineItems[{i}]");
        ensure(
            &mut c,
            (1..=MAX_QUANTITY).contains(&l.quantity),
            || format!("{}.quantity", at()),
            || format!("must be 1 to {MAX_QUANTITY}"),
        );
        ensure(
            &mut c,
            (0..=MAX_AMOUNT).contains(&l.unit_price.amount),
            || format!("{}.unitPrice.amount", at()),
            || "must not be negative".into(),
        );
        ensure(&mut c, l.unit_price.currency == cur, || format!("{}.unitPrice.currency", at()), || other_currency(&l.unit_price));
        if let Some(d) = &l.discount {
            check_manual(&mut c, &format!("{}.discount", at()), d);
        }
        sum += i128::from(l.unit_price.amount) * i128::from(l.quantity);
    }
    ensure(
        &mut c,
        sum <= i128::from(MAX_AMOUNT),
        || "lineItems".into(),
        || format!("the lines total more than {MAX_AMOUNT} minor units"),
    );
    ensure(
        &mut c,
        input.order_discounts.len() <= MAX_ORDER_DISCOUNTS,
        || "orderDiscounts".into(),
        || format!("at most {MAX_ORDER_DISCOUNTS} order discounts"),
    );
    for (i, d) in input.order_discounts.iter().enumerate() {
        check_manual(&mut c, &format!("orderDiscounts[{i}]"), d);
    }
    ensure(
        &mut c,
        input.codes.len() <= MAX_CODES_PER_REQUEST,
        || "discountCodes".into(),
        || format!("at most {MAX_CODES_PER_REQUEST} codes per request"),
    );
    for (i, code) in input.codes.iter().enumerate() {
        let len = code.code.trim().chars().count();
        ensure(&mut c, (1..=255).contains(&len), || format!("discountCodes[{i}]"), || "must be 1 to 255 characters".into());
    }
    if let Some(rate) = &input.shipping_rate {
        c.ensure((0..=MAX_AMOUNT).contains(&rate.price.amount), "shippingMethodId", "the rate's price must not be negative");
        ensure(
            &mut c,
            rate.price.currency == cur,
            || "shippingMethodId".into(),
            || other_currency(&Money { amount: 0, currency: rate.price.currency }),
        );
    }
    if let Some(d) = &input.destination {
        c.ensure(
            valid_country(&d.country.trim().to_ascii_uppercase()),
            "shippingAddress.country",
            "must be a two-letter country code",
        );
    }
    c.finish()
}

/// [`Check::ensure`] that builds the field name and message only when the check fails: every
/// calculation validates every line, and formatting them up front cost more than the pricing.
fn ensure(c: &mut Check, ok: bool, field: impl FnOnce() -> String, message: impl FnOnce() -> String) {
    if !ok {
        c.fail(&field(), message());
    }
}

/// The manual discount on `amount`, capped at it; `true` when the cap cut it.
fn manual_amount(d: &ManualDiscount, amount: i64) -> (i64, bool) {
    let wanted = match d.kind {
        ManualKind::Percentage => percent_of(amount, d.value),
        ManualKind::Fixed => d.value,
    };
    (wanted.clamp(0, amount.max(0)), wanted > amount)
}

impl CalcInput {
    /// The cart weight (grams) and subtotal that shipping rates are offered for: the arguments of
    /// [`super::shipping::rates_for`] besides the zones, destination and currency.
    pub fn shipping_basis(&self) -> (u64, i64) {
        let weight = self.lines.iter().map(|l| u64::from(l.weight_grams) * u64::from(l.quantity)).sum();
        let subtotal: i128 = self
            .lines
            .iter()
            .map(|l| {
                let gross = l.unit_price.amount.saturating_mul(i64::from(l.quantity));
                i128::from(gross - l.discount.as_ref().map_or(0, |d| manual_amount(d, gross).0))
            })
            .sum();
        (weight, i64::try_from(subtotal).unwrap_or(i64::MAX))
    }
}

/// The stable processing order: the line's whole content, never its position.
type LineKey<'a> = (Uuid, Uuid, i64, u32, u32, bool, &'a Option<ManualDiscount>, &'a [Uuid]);

fn line_key(l: &CalcLine) -> LineKey<'_> {
    (l.variant_id, l.product_id, l.unit_price.amount, l.quantity, l.weight_grams, l.taxable, &l.discount, &l.collection_ids)
}

/// The lines (in processing order) a discount applies to, with their subtotals.
struct Cart<'a> {
    currency: Currency,
    lines: Vec<&'a CalcLine>,
    sub: Vec<i64>,
}

impl Cart<'_> {
    fn eligible(&self, d: &Discount) -> Vec<bool> {
        self.lines.iter().map(|l| d.targets(l.product_id, &l.collection_ids)).collect()
    }

    /// Units discounted per line by a buy-X-get-Y discount. Each use takes `buyQuantity` bought units —
    /// lines that are not also "get" items first, then the dearest — and up to `getQuantity` of the
    /// cheapest remaining target units (at least one); a unit serves once, as bought or as got.
    fn bxgy_units(&self, d: &Discount) -> Vec<u32> {
        let n = self.lines.len();
        let mut got = vec![0u32; n];
        let Some(b) = &d.buy_x_get_y else { return got };
        let gettable = self.eligible(d);
        let price = |i: usize| self.lines[i].unit_price.amount;
        let mut buy_order: Vec<usize> =
            (0..n).filter(|&i| d.counts_as_bought(self.lines[i].product_id, &self.lines[i].collection_ids)).collect();
        buy_order.sort_by(|&x, &y| gettable[x].cmp(&gettable[y]).then(price(y).cmp(&price(x))).then(x.cmp(&y)));
        let mut get_order: Vec<usize> = (0..n).filter(|&i| gettable[i]).collect();
        get_order.sort_by(|&x, &y| price(x).cmp(&price(y)).then(x.cmp(&y)));
        let mut used: Vec<u32> = self.lines.iter().map(|_| 0).collect();
        let mut uses = 0u32;
        while b.max_uses_per_order.is_none_or(|max| uses < max) {
            let mut trial = used.clone();
            let mut need = b.buy_quantity;
            for &i in &buy_order {
                let take = (self.lines[i].quantity - trial[i]).min(need);
                trial[i] += take;
                need -= take;
            }
            if need > 0 {
                break;
            }
            let mut give = b.get_quantity;
            let mut gave = vec![0u32; n];
            for &i in &get_order {
                let take = (self.lines[i].quantity - trial[i]).min(give);
                trial[i] += take;
                gave[i] += take;
                give -= take;
            }
            if give == b.get_quantity {
                break;
            }
            used = trial;
            got.iter_mut().zip(&gave).for_each(|(g, x)| *g += x);
            uses += 1;
        }
        got
    }

    /// The checks that need the cart: something to apply to, then the minimum requirement.
    fn check(&self, d: &Discount) -> Result<(), Warning> {
        let reject = |code, msg: String| Err(Warning::discount(code, d.code.as_deref(), msg));
        let measured: Vec<bool> = match (d.class(), d.value_type) {
            (DiscountClass::Product, ValueType::BuyXGetY) => {
                if self.bxgy_units(d).iter().all(|&u| u == 0) {
                    let b = d.buy_x_get_y.as_ref().map_or((0, 0), |b| (b.buy_quantity, b.get_quantity));
                    return reject(
                        WarningCode::DiscountNotApplicable,
                        format!("{}: buy {} eligible items to get {} more", d.label(), b.0, b.1),
                    );
                }
                vec![true; self.lines.len()]
            }
            (DiscountClass::Product, _) => {
                let e = self.eligible(d);
                if !e.contains(&true) {
                    return reject(
                        WarningCode::DiscountNotApplicable,
                        format!("no item in the cart is eligible for {}", d.label()),
                    );
                }
                e
            }
            _ => vec![true; self.lines.len()],
        };
        let pick = |f: &dyn Fn(usize) -> i64| (0..self.lines.len()).filter(|&i| measured[i]).map(f).sum::<i64>();
        match d.minimum.kind {
            MinimumKind::None => Ok(()),
            MinimumKind::Subtotal if pick(&|i| self.sub[i]) < d.minimum.value => reject(
                WarningCode::DiscountMinimumNotMet,
                format!("{} needs a subtotal of at least {}", d.label(), self.currency.format(d.minimum.value)),
            ),
            MinimumKind::Quantity if pick(&|i| i64::from(self.lines[i].quantity)) < d.minimum.value => {
                reject(WarningCode::DiscountMinimumNotMet, format!("{} needs at least {} items", d.label(), d.minimum.value))
            }
            MinimumKind::Subtotal | MinimumKind::Quantity => Ok(()),
        }
    }
}

/// A discount limited to sales channels applies only on one of them.
fn channel_check(d: &Discount, channel: Option<&str>) -> Result<(), Warning> {
    if d.available_on(channel) {
        return Ok(());
    }
    let msg = match channel {
        Some(c) => format!("{} is not available on the {} channel", d.label(), c.trim()),
        None => format!("{} is only available on the channels {}", d.label(), d.channels.join(", ")),
    };
    Err(Warning::discount(WarningCode::DiscountNotApplicable, d.code.as_deref(), msg))
}

/// Calculates a cart or order. Validates first (see [`validate`]); everything after is infallible
/// and reads as its steps: line discounts, the discounts chosen, product, order and shipping
/// discounts, tax, then the answer.
pub fn calculate(input: &CalcInput) -> ApiResult<Calculation> {
    validate(input)?;
    let mut warnings = Vec::new();
    // Lines are processed in content order so their order in the request cannot change a figure;
    // `order[k]` is where processed line `k` stood in the request.
    let mut order: Vec<usize> = (0..input.lines.len()).collect();
    order.sort_by(|&a, &b| line_key(&input.lines[a]).cmp(&line_key(&input.lines[b])));
    let (cart, line_disc) = step1_line_discounts(input, &order, &mut warnings);
    let chosen = step2_choose_discounts(input, &cart, &mut warnings);
    let mut applications = Vec::new();
    let (remaining, product_disc) = step3_product_discounts(&cart, &chosen, &mut applications);
    let (order_total, order_alloc) = step4_order_discounts(input, &chosen, &remaining, &mut applications, &mut warnings);
    let shipping = step5_shipping_discounts(input, &chosen, &mut applications);
    let net: Vec<i64> = remaining.iter().zip(&order_alloc).map(|(r, o)| r - o).collect();
    let (line_tax, tax_lines) = step6_tax(input, &cart, &net, shipping);

    // Step 7: the answer: lines back in request order, totals.
    let money = |amount: i64| Money { amount, currency: input.currency };
    let included = input.taxes.taxes_included;
    let added = |t: i64| if included { 0 } else { t };
    let subtotal: i64 = cart.sub.iter().sum();
    let tax: i64 = tax_lines.iter().map(|t| t.amount.amount).sum();
    let discount = product_disc.iter().sum::<i64>() + order_total;
    let mut line_items: Vec<Option<LineResult>> = vec![None; cart.lines.len()];
    for (k, l) in cart.lines.iter().enumerate() {
        line_items[order[k]] = Some(LineResult {
            variant_id: l.variant_id,
            product_id: l.product_id,
            unit_price: l.unit_price,
            quantity: l.quantity,
            line_discount: money(line_disc[k]),
            subtotal: money(cart.sub[k]),
            product_discount: money(product_disc[k]),
            order_discount: money(order_alloc[k]),
            discount: money(product_disc[k] + order_alloc[k]),
            tax: money(line_tax[k]),
            total: money(net[k] + added(line_tax[k])),
        });
    }
    Ok(Calculation {
        subtotal: money(subtotal),
        discount: money(discount),
        shipping: money(shipping),
        tax: money(tax),
        total: money(subtotal - discount + shipping + added(tax)),
        taxes_included: included,
        tax_lines,
        applied_discount_codes: chosen.iter().filter(|(_, s)| *s == Source::Code).filter_map(|(d, _)| d.code.clone()).collect(),
        discount_applications: applications,
        warnings,
        line_items: line_items.into_iter().flatten().collect(),
    })
}

/// Step 1: Line-level (manual) discounts: the cart of processed lines with their subtotals, and each
/// line's manual discount.
fn step1_line_discounts<'a>(input: &'a CalcInput, order: &[usize], warnings: &mut Vec<Warning>) -> (Cart<'a>, Vec<i64>) {
    let lines: Vec<&CalcLine> = order.iter().map(|&i| &input.lines[i]).collect();
    let gross: Vec<i64> = lines.iter().map(|l| l.unit_price.amount * i64::from(l.quantity)).collect();
    let mut line_disc = vec![0i64; lines.len()];
    let mut line_warnings = Vec::new();
    for k in 0..lines.len() {
        if let Some(d) = &lines[k].discount {
            let (amount, capped) = manual_amount(d, gross[k]);
            line_disc[k] = amount;
            if capped {
                line_warnings.push((order[k], "the line discount is larger than the line and was capped"));
            }
        }
    }
    line_warnings.sort();
    for (i, msg) in line_warnings {
        warnings.push(Warning::field(WarningCode::DiscountCapped, format!("lineItems[{i}].discount"), msg));
    }
    let sub: Vec<i64> = gross.iter().zip(&line_disc).map(|(g, d)| g - d).collect();
    (Cart { currency: input.currency, lines, sub }, line_disc)
}

/// Step 2: The discounts that apply: automatic ones by id, then codes in the order given, each
/// checked against the cart and against those chosen before it.
fn step2_choose_discounts<'a>(input: &'a CalcInput, cart: &Cart<'_>, warnings: &mut Vec<Warning>) -> Vec<(&'a Discount, Source)> {
    let mut automatic: Vec<&ResolvedDiscount> = input.automatic.iter().filter(|r| r.discount.code.is_none()).collect();
    automatic.sort_by_key(|r| r.discount.id);
    let mut candidates: Vec<(&ResolvedDiscount, Source)> = automatic.into_iter().map(|r| (r, Source::Automatic)).collect();
    let mut seen: Vec<String> = Vec::new();
    for ci in &input.codes {
        let entered = ci.code.trim();
        if seen.iter().any(|s| s.eq_ignore_ascii_case(entered)) {
            warnings.push(Warning::discount(WarningCode::DiscountDuplicate, Some(entered), format!("{entered} was given twice")));
            continue;
        }
        seen.push(entered.to_string());
        match &ci.found {
            Some(r) if r.discount.code.as_deref().is_some_and(|c| c.eq_ignore_ascii_case(entered)) => {
                candidates.push((r, Source::Code))
            }
            _ => warnings.push(Warning::discount(
                WarningCode::DiscountNotFound,
                Some(entered),
                format!("no discount has the code {entered}"),
            )),
        }
    }
    let mut chosen: Vec<(&Discount, Source)> = Vec::new();
    for (r, source) in candidates {
        let d = &r.discount;
        let verdict = d
            .precheck(r.usage, input.customer_id, input.now)
            .and_then(|()| channel_check(d, input.channel.as_deref()))
            .and_then(|()| cart.check(d))
            .and_then(|()| match chosen.iter().find(|(c, _)| !c.combines(d)) {
                Some((c, _)) => Err(Warning::discount(
                    WarningCode::DiscountNotCombinable,
                    d.code.as_deref(),
                    format!("{} cannot be combined with {}", d.label(), c.label()),
                )),
                None => Ok(()),
            });
        match verdict {
            Ok(()) => chosen.push((d, source)),
            // Automatic discounts that do not apply are not the shopper's concern.
            Err(w) if source == Source::Code => warnings.push(w),
            Err(_) => {}
        }
    }
    chosen
}

/// How a chosen discount shows in the answer.
fn applied(d: &Discount, source: Source, amount: i64, currency: Currency) -> DiscountApplication {
    DiscountApplication {
        source,
        discount_id: Some(d.id),
        code: d.code.clone(),
        title: d.title.clone(),
        class: d.class(),
        amount: Money { amount, currency },
    }
}

/// Step 3: Product discounts, line by line: what is left of each line, and each line's product
/// discount.
fn step3_product_discounts(
    cart: &Cart<'_>,
    chosen: &[(&Discount, Source)],
    applications: &mut Vec<DiscountApplication>,
) -> (Vec<i64>, Vec<i64>) {
    let n = cart.lines.len();
    let mut remaining = cart.sub.clone();
    let mut product_disc = vec![0i64; n];
    for &(d, source) in chosen.iter().filter(|(d, _)| d.class() == DiscountClass::Product) {
        let eligible = cart.eligible(d);
        let amounts: Vec<i64> = match d.value_type {
            ValueType::Percentage => (0..n).map(|k| if eligible[k] { percent_of(cart.sub[k], d.value) } else { 0 }).collect(),
            ValueType::FixedAmount => {
                let weights: Vec<i64> = (0..n).map(|k| if eligible[k] { remaining[k] } else { 0 }).collect();
                allocate(d.value.min(weights.iter().sum()), &weights)
            }
            ValueType::BuyXGetY => {
                let units = cart.bxgy_units(d);
                (0..n)
                    .map(|k| {
                        let per_units = i128::from(cart.sub[k]) * i128::from(units[k]) * i128::from(d.value);
                        round_div(per_units, i128::from(cart.lines[k].quantity) * i128::from(BASIS))
                    })
                    .collect()
            }
            ValueType::FreeShipping => vec![0; n],
        };
        let mut taken = 0;
        for k in 0..n {
            let a = amounts[k].clamp(0, remaining[k]);
            remaining[k] -= a;
            product_disc[k] += a;
            taken += a;
        }
        applications.push(applied(d, source, taken, cart.currency));
    }
    (remaining, product_disc)
}

/// Step 4: Order discounts: manual ones first, then the chosen, allocated over what is left of the
/// lines. Answers the order discount and each line's share.
fn step4_order_discounts(
    input: &CalcInput,
    chosen: &[(&Discount, Source)],
    remaining: &[i64],
    applications: &mut Vec<DiscountApplication>,
    warnings: &mut Vec<Warning>,
) -> (i64, Vec<i64>) {
    let base: i64 = remaining.iter().sum();
    let mut left = base;
    for (i, m) in input.order_discounts.iter().enumerate() {
        let (wanted, capped) = manual_amount(m, base);
        let amount = wanted.min(left);
        if capped || amount < wanted {
            let msg = "the order discount is larger than the order and was capped";
            warnings.push(Warning::field(WarningCode::DiscountCapped, format!("orderDiscounts[{i}]"), msg));
        }
        left -= amount;
        applications.push(DiscountApplication {
            source: Source::Manual,
            discount_id: None,
            code: None,
            title: m.title.clone().unwrap_or_else(|| "Order discount".to_string()),
            class: DiscountClass::Order,
            amount: Money { amount, currency: input.currency },
        });
    }
    for &(d, source) in chosen.iter().filter(|(d, _)| d.class() == DiscountClass::Order) {
        let wanted = if d.value_type == ValueType::Percentage { percent_of(base, d.value) } else { d.value };
        let amount = wanted.clamp(0, left);
        left -= amount;
        applications.push(applied(d, source, amount, input.currency));
    }
    let order_total = base - left;
    (order_total, allocate(order_total, remaining))
}

/// Step 5: Shipping discounts: the shipping left to pay.
fn step5_shipping_discounts(
    input: &CalcInput,
    chosen: &[(&Discount, Source)],
    applications: &mut Vec<DiscountApplication>,
) -> i64 {
    let ship_price = input.shipping_rate.as_ref().map_or(0, |r| r.price.amount);
    let mut shipping = ship_price;
    for &(d, source) in chosen.iter().filter(|(d, _)| d.class() == DiscountClass::Shipping) {
        let wanted = match d.value_type {
            ValueType::FreeShipping => shipping,
            ValueType::Percentage => percent_of(ship_price, d.value),
            ValueType::FixedAmount | ValueType::BuyXGetY => d.value,
        };
        let amount = wanted.clamp(0, shipping);
        shipping -= amount;
        applications.push(applied(d, source, amount, input.currency));
    }
    shipping
}

/// Step 6: Tax of the net lines and the shipping, per jurisdiction at the destination: each line's
/// tax and the tax lines.
fn step6_tax(input: &CalcInput, cart: &Cart<'_>, net: &[i64], shipping: i64) -> (Vec<i64>, Vec<TaxLine>) {
    let n = cart.lines.len();
    let mut line_tax = vec![0i64; n];
    let Some(dest) = &input.destination else { return (line_tax, Vec::new()) };
    let included = input.taxes.taxes_included;
    let rates = tax::applicable(&input.taxes.rates, dest);
    let bps: Vec<u32> = rates.iter().map(|r| r.rate).collect();
    let mut per_rate = vec![0i64; rates.len()];
    for k in (0..n).filter(|&k| cart.lines[k].taxable) {
        for (j, part) in tax::tax_parts(net[k], &bps, included).into_iter().enumerate() {
            per_rate[j] += part;
            line_tax[k] += part;
        }
    }
    let on_shipping: Vec<usize> = (0..rates.len()).filter(|&j| rates[j].shipping).collect();
    let ship_bps: Vec<u32> = on_shipping.iter().map(|&j| bps[j]).collect();
    for (part, &j) in tax::tax_parts(shipping, &ship_bps, included).into_iter().zip(&on_shipping) {
        per_rate[j] += part;
    }
    let tax_lines = rates
        .iter()
        .zip(per_rate)
        .map(|(r, amount)| TaxLine {
            name: r.name.clone(),
            country: r.country.clone(),
            province: r.province.clone(),
            rate: r.rate,
            amount: Money { amount, currency: input.currency },
        })
        .collect();
    (line_tax, tax_lines)
}

/// One code checked against a cart: the `{valid, amount, reasons}` of `S/discounts/validate` (the route
/// adds the discount record) and one entry of `validate-many`'s `results`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CodeVerdict {
    pub code: String,
    pub valid: bool,
    /// What the code took: off the goods, or off shipping for a shipping discount.
    pub amount: Money,
    /// Why it did not apply; empty when valid.
    pub reasons: Vec<String>,
}

impl Calculation {
    /// The verdict on `code` (matched without regard to case) in this calculation.
    pub fn verdict(&self, code: &str) -> CodeVerdict {
        let code = code.trim();
        let same = |c: &Option<String>| c.as_deref().is_some_and(|c| c.eq_ignore_ascii_case(code));
        let amount = self
            .discount_applications
            .iter()
            .filter(|a| a.source == Source::Code && same(&a.code))
            .map(|a| a.amount.amount)
            .sum();
        CodeVerdict {
            code: code.to_string(),
            valid: self.applied_discount_codes.iter().any(|c| c.eq_ignore_ascii_case(code)),
            amount: Money { amount, currency: self.subtotal.currency },
            reasons: self.warnings.iter().filter(|w| same(&w.discount_code)).map(|w| w.message.clone()).collect(),
        }
    }
}
