//! Checkout completion: the one step that turns a checkout into an order.
//!
//! The checkout is priced from a read transaction first (the figures the shopper saw and paid);
//! then a single write job, run by the cell's writer one job at a time, re-validates everything
//! against the rows as they are inside the transaction — the checkout still open and unchanged,
//! every price as priced, the store's discounts, taxes and shipping as they were when it was
//! priced (its pricing version), stock for every tracked variant — and only then reserves stock,
//! consumes discount usage, redeems gift cards, claims the payment intent and writes the order.
//! Any failure aborts the whole job: nothing is consumed, nothing is half-created. Two shoppers
//! racing for the last unit are serialized by the writer: the first takes it, the second gets
//! 409 OUT_OF_STOCK. The same checkout completed twice yields one order (409 CHECKOUT_COMPLETED).

use std::collections::{BTreeMap, HashMap};

use schemars::JsonSchema;
use serde::Deserialize;
use uuid::Uuid;

use crate::cells::Cell;
use crate::cells::checkouts::{self, Caller, PricedCheckout, ensure_open};
use crate::cells::discounts::{consume_usage, customer_key};
use crate::cells::events;
use crate::cells::fulfillment;
use crate::cells::gift_cards::redeem_gift_card;
use crate::cells::order_mail;
use crate::cells::orders::number_key;
use crate::cells::payments::{self, Confirmation, NewIntent, PaymentIntent, claim_intent};
use crate::cells::pricing_version::{self, pricing_version_in};
use crate::cells::shipping::all_zones;
use crate::cells::stores;
use crate::clock::Clock;
use crate::domain::checkout::{Checkout, CheckoutStatus, check_email};
use crate::domain::fields;
use crate::domain::money::{Currency, Money};
use crate::domain::order::{
    FIRST_NUMBER, FulfillmentStatus, Order, OrderDiscount, OrderGiftCard, OrderLine, OrderPayment, OrderStatus, ShippingLine,
};
use crate::domain::pricing::shipping::rates_for;
use crate::domain::product::Product;
use crate::error::{ApiError, ApiResult, Check, Code};
use crate::payments::{FinancialStatus, IntentStatus, PaymentMethodKind, check_token};
use crate::storage::codec::decode;
use crate::storage::keys::Key;
use crate::storage::record;
use crate::storage::tables::{COUNTERS, PRODUCTS};
use crate::storage::tx::{Tx, read_u64};

/// `POST S/checkouts/{checkoutId}/complete`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CompleteCheckout {
    /// The payment method used: a provider token (`pm_card_visa`), or `gift_card` when gift
    /// cards cover the whole total. Never card data.
    #[schemars(length(min = 1), pattern(fields::NOT_BLANK))]
    pub payment_method_id: String,
    /// The checkout's payment intent (from the payment session); required unless gift cards
    /// cover the total.
    pub payment_intent_id: Option<Uuid>,
    /// Required for a guest's checkout.
    pub session_token: Option<String>,
}

/// `POST S/checkouts/{checkoutId}/payment-session`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PaymentSession {
    /// Minor units; must equal the checkout's `paymentDue`.
    #[schemars(range(min = 0))]
    pub amount: i64,
    /// ISO 4217; must be the checkout's currency.
    #[schemars(with = "Currency")]
    pub currency: String,
    /// credit_card (default), promptpay or bank_transfer.
    pub payment_method: Option<PaymentMethodKind>,
    #[schemars(length(max = 254), pattern(fields::EMAIL))]
    pub customer_email: Option<String>,
    /// An object of scalar values, passed to the provider.
    #[serde(default)]
    #[schemars(schema_with = "payments::metadata_schema")]
    pub metadata: Option<serde_json::Value>,
    /// Required for a guest's checkout.
    pub session_token: Option<String>,
}

/// What the order write re-checks for one product: the units of each variant it takes at the
/// price the checkout was priced with.
struct ProductTake {
    product: Uuid,
    variants: Vec<(Uuid, u32, i64)>,
}

fn business(msg: impl Into<String>) -> ApiError {
    ApiError::msg(Code::BUSINESS_RULE, msg)
}

/// Whether a priced checkout can become an order now (422 saying what is missing).
fn ensure_ready(cell: &Cell, store: Uuid, co: &Checkout, p: &PricedCheckout) -> ApiResult<()> {
    ensure_open(co)?;
    if let Some(u) = p.unavailable.first() {
        return Err(business(format!("variant {} cannot be bought: {}", u.variant_id, u.reason)));
    }
    if p.lines.is_empty() {
        return Err(business("the checkout has no items"));
    }
    if co.email.is_none() && co.customer_id.is_none() {
        return Err(business("an email is needed to complete the checkout"));
    }
    if p.stale_method {
        return Err(business("the chosen shipping method is not offered any more: choose another"));
    }
    let zones = all_zones(&cell.read()?, store)?;
    if !zones.is_empty() && p.priced.input.shipping_rate.is_none() {
        let Some(dest) = &p.priced.input.destination else {
            return Err(business("a shipping address is needed to complete the checkout"));
        };
        let (weight, subtotal) = p.priced.input.shipping_basis();
        return Err(if rates_for(&zones, dest, weight, subtotal, co.currency).is_empty() {
            business(format!("the store does not ship to {}", dest.country))
        } else {
            business("choose a shipping method: the shipping-rates operation lists them")
        });
    }
    Ok(())
}

/// Opens a payment session for what the checkout still owes (after gift cards): the amount and
/// currency must match it exactly.
pub async fn checkout_payment_session(
    cell: &Cell,
    store: Uuid,
    id: Uuid,
    caller: &Caller,
    body: PaymentSession,
) -> ApiResult<(PaymentIntent, String)> {
    let co = checkouts::checkout(cell, store, id, caller)?;
    let mut c = Check::new();
    let currency = Currency::parse(body.currency.trim().to_ascii_uppercase().as_str());
    c.ensure(currency.is_some(), "currency", "must be an ISO 4217 currency code");
    c.ensure(body.amount >= 0, "amount", "must not be negative");
    let email = body.customer_email.as_deref().map(|e| check_email(&mut c, "customerEmail", e));
    let metadata = body.metadata.unwrap_or(serde_json::Value::Null);
    c.ensure(metadata.is_null() || metadata.is_object(), "metadata", "must be an object");
    c.finish()?;
    let p = checkouts::price_checkout(cell, store, &co, caller.shopper)?;
    ensure_ready(cell, store, &co, &p)?;
    if currency != Some(co.currency) {
        return Err(business(format!("the checkout is in {}, not {}", co.currency.code(), body.currency.trim())));
    }
    if p.due.amount == 0 {
        return Err(business("nothing is due: gift cards cover the total; complete with paymentMethodId gift_card"));
    }
    if body.amount != p.due.amount {
        return Err(business(format!(
            "the payment amount {} differs from the checkout's payment due {}",
            body.amount, p.due.amount
        )));
    }
    let new = NewIntent {
        checkout_id: id,
        amount: p.due,
        method: body.payment_method.unwrap_or(PaymentMethodKind::CreditCard),
        customer_email: email.or(co.email.clone()),
        metadata,
    };
    payments::create_payment_intent(cell, store, new).await
}

/// Completes a checkout: see the module documentation for what the one write does.
pub async fn complete_checkout(cell: &Cell, store: Uuid, id: Uuid, caller: &Caller, body: CompleteCheckout) -> ApiResult<Order> {
    let method = check_token(&body.payment_method_id).map_err(|e| rename_field(e, "paymentMethodId"))?.to_string();
    let co = checkouts::checkout(cell, store, id, caller)?;
    // Read before pricing: a configuration change after this is caught inside the write.
    let version = pricing_version::pricing_version(cell, store)?;
    let p = checkouts::price_checkout(cell, store, &co, caller.shopper)?;
    ensure_ready(cell, store, &co, &p)?;
    let intent = match (p.due.amount > 0, body.payment_intent_id) {
        (true, None) => return Err(ApiError::field("paymentIntentId", "is required: gift cards do not cover the total")),
        (false, Some(_)) => return Err(ApiError::field("paymentIntentId", "nothing is due: gift cards cover the total")),
        (false, None) => None,
        (true, Some(iid)) => {
            let found = payments::payment_intent(cell, store, iid)
                .map_err(|_| ApiError::field("paymentIntentId", "no such payment intent"))?;
            if found.checkout_id != id {
                return Err(ApiError::field("paymentIntentId", "belongs to another checkout"));
            }
            let fresh = payments::refresh_payment_intent(cell, store, iid).await?;
            // A client that did not confirm yet may let completion confirm with its token; the
            // checkout's session token already proved the caller, so no client secret is needed.
            if matches!(fresh.status, IntentStatus::RequiresPaymentMethod | IntentStatus::RequiresConfirmation) {
                let confirm = Confirmation { payment_method: Some(&method), client_secret: None, shopper: false };
                payments::confirm_payment_intent(cell, store, iid, confirm).await?;
            }
            Some(iid)
        }
    };
    let order = draft_order(&co, &p, intent, &method, &cell.clock)?;
    let takes = product_takes(&p);
    let discounts: Vec<Uuid> = {
        let mut ids: Vec<Uuid> = p.priced.calculation.discount_applications.iter().filter_map(|a| a.discount_id).collect();
        ids.dedup();
        ids
    };
    let customer = customer_key(co.customer_id, co.email.as_deref());
    let gift_cards: Vec<(Uuid, Money)> =
        p.gift_cards.iter().filter(|g| g.amount_used.amount > 0).map(|g| (g.id, g.amount_used)).collect();
    let due = p.due;
    let seen = co.updated_at;
    let now = cell.clock.now_ms();
    let (settings, mail_id) = (stores::store_settings(cell, store)?, cell.clock.new_id());
    cell.writer
        .write(Some(store), move |tx| {
            let mut stored = record::must_load::<Checkout>(tx, store, id)?;
            ensure_open(&stored)?;
            if stored.updated_at != seen {
                return Err(ApiError::msg(Code::CONFLICT, "the checkout changed while completing: review it and try again"));
            }
            if pricing_version_in(tx, store)? != version {
                return Err(ApiError::msg(
                    Code::PRICE_CHANGED,
                    "the store's discounts, taxes or shipping changed while completing: review the checkout",
                ));
            }
            let mut tracked = HashMap::new();
            for take in &takes {
                check_take(tx, store, take, &mut tracked)?;
            }
            for d in &discounts {
                consume_usage(tx, store, *d, customer.as_deref(), now)?;
            }
            for (card, amount) in &gift_cards {
                let taken = redeem_gift_card(tx, store, *card, *amount, order.id, now)?;
                if taken != *amount {
                    return Err(ApiError::msg(
                        Code::CONFLICT,
                        "a gift card's balance changed: review the checkout and try again",
                    ));
                }
            }
            let mut order = order.clone();
            order.financial_status = match intent {
                Some(iid) => claim_intent(tx, store, iid, id, due, order.id, now)?,
                None => FinancialStatus::Paid,
            };
            let last = tx.get(COUNTERS, &number_key(store))?.map(|b| read_u64(&b)).unwrap_or(FIRST_NUMBER - 1);
            order.number = last + 1;
            tx.put(COUNTERS, &number_key(store), &order.number.to_le_bytes())?;
            let fos = fulfillment::place_order(tx, store, &order, &tracked, None, now)?;
            fulfillment::order_state(&mut order, &fos);
            record::write(tx, store, None, Some(&order))?;
            events::append_json(tx, store, "order.created", &order, now)?;
            if order.financial_status == FinancialStatus::Paid {
                events::append_json(tx, store, "order.paid", &order, now)?;
            }
            if let Some(letter) = order_mail::confirmation(&settings, &order) {
                crate::mail::job::send(tx, store, mail_id, letter, now)?;
            }
            stored.status = CheckoutStatus::Completed;
            stored.order_id = Some(order.id);
            stored.completed_at = Some(now);
            stored.updated_at = now;
            record::put(tx, store, &stored)?;
            Ok(order)
        })
        .await
}

fn rename_field(mut e: ApiError, to: &str) -> ApiError {
    for f in &mut e.fields {
        f.field = to.to_string();
    }
    e
}

/// The lines grouped by product, so each product row is read and written once.
fn product_takes(p: &PricedCheckout) -> Vec<ProductTake> {
    let mut by_product: BTreeMap<Uuid, Vec<(Uuid, u32, i64)>> = BTreeMap::new();
    for l in &p.priced.calculation.line_items {
        by_product.entry(l.product_id).or_default().push((l.variant_id, l.quantity, l.unit_price.amount));
    }
    by_product.into_iter().map(|(product, variants)| ProductTake { product, variants }).collect()
}

/// Inside the order write: the product is still sold, each variant at the price the checkout was
/// priced with (409 PRICE_CHANGED otherwise), and a tracked variant has the units across the
/// store's sellable locations (409 OUT_OF_STOCK); `tracked` learns which variants keep stock.
/// The units are committed by [`fulfillment::place_order`].
fn check_take(tx: &Tx, store: Uuid, take: &ProductTake, tracked: &mut HashMap<Uuid, bool>) -> ApiResult<()> {
    let gone = || ApiError::msg(Code::CONFLICT, "an item of the checkout is no longer sold: review the checkout");
    let bytes = tx.get(PRODUCTS, Key::store(store).id(take.product).bytes())?.ok_or_else(gone)?;
    let product: Product = decode(&bytes)?;
    for &(variant, quantity, price) in &take.variants {
        let v = product.variants.iter().find(|v| v.id == variant).ok_or_else(gone)?;
        if v.price != price {
            return Err(ApiError::new(Code::PRICE_CHANGED));
        }
        if v.inventory_tracked && v.inventory_quantity < i64::from(quantity) {
            let left = v.inventory_quantity.max(0);
            return Err(ApiError::msg(Code::OUT_OF_STOCK, format!("only {left} of {} ({}) left", product.title, v.title)));
        }
        tracked.insert(variant, v.inventory_tracked);
    }
    Ok(())
}

/// The order as the priced checkout describes it; number and financial status are set inside
/// the write. Its ids and times come from `clock`.
fn draft_order(co: &Checkout, p: &PricedCheckout, intent: Option<Uuid>, method: &str, clock: &Clock) -> ApiResult<Order> {
    let calc = &p.priced.calculation;
    let currency = co.currency;
    let money = |amount| Money { amount, currency };
    let line_items = calc
        .line_items
        .iter()
        .zip(&p.lines)
        .map(|(l, cl)| {
            let info = p.infos.get(&l.variant_id).ok_or_else(|| ApiError::internal("priced line without its product"))?;
            Ok(OrderLine {
                id: clock.new_id(),
                variant_id: l.variant_id,
                product_id: l.product_id,
                title: info.title.clone(),
                variant_title: info.variant_title.clone(),
                sku: info.sku.clone(),
                quantity: l.quantity,
                unit_price: l.unit_price,
                discount: money(l.line_discount.amount + l.discount.amount),
                tax: l.tax,
                total: l.total,
                properties: cl.properties.clone(),
                fulfilled_quantity: 0,
                fulfillable_quantity: l.quantity,
            })
        })
        .collect::<ApiResult<Vec<_>>>()?;
    let now = clock.now_ms();
    Ok(Order {
        id: clock.new_id(),
        number: 0,
        checkout_id: Some(co.id),
        customer_id: co.customer_id,
        email: co.email.clone(),
        phone: co.phone.clone(),
        status: OrderStatus::Open,
        financial_status: FinancialStatus::Pending,
        fulfillment_status: FulfillmentStatus::Unfulfilled,
        line_items,
        subtotal: calc.subtotal,
        discount: calc.discount,
        shipping: calc.shipping,
        tax: calc.tax,
        taxes_included: calc.taxes_included,
        tip: money(co.tip),
        total: p.total,
        gift_card_total: p.gift_card_total,
        payment_total: p.due,
        tax_lines: calc.tax_lines.clone(),
        discount_codes: calc.applied_discount_codes.clone(),
        discount_applications: calc
            .discount_applications
            .iter()
            .map(|a| OrderDiscount { discount_id: a.discount_id, code: a.code.clone(), title: a.title.clone(), amount: a.amount })
            .collect(),
        shipping_line: p.priced.input.shipping_rate.as_ref().map(|r| ShippingLine {
            id: r.id.clone(),
            title: r.name.clone(),
            code: r.code.clone(),
            price: money(r.price.amount),
        }),
        shipping_address: co.shipping_address.clone(),
        billing_address: co.billing_address.clone().or(co.shipping_address.clone()),
        gift_cards: p
            .gift_cards
            .iter()
            .filter(|g| g.amount_used.amount > 0)
            .map(|g| OrderGiftCard { id: g.id, last_characters: g.last_characters.clone(), amount: g.amount_used })
            .collect(),
        payment: Some(OrderPayment { payment_intent_id: intent, payment_method_id: method.to_string(), amount: p.due }),
        accepts_email_marketing: co.accepts_email_marketing,
        accepts_sms_marketing: co.accepts_sms_marketing,
        note: co.note.clone(),
        tags: Vec::new(),
        cancelled_at: None,
        created_at: now,
        updated_at: now,
    })
}
