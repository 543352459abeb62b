//! Checkouts in a cell: the one writer [`write_checkout`], guest access by session token,
//! pricing (the calculation plus tip and gift cards), shipping rates, and discount codes.
//! Completion — the step that makes an order — lives in [`crate::cells::completion`].

use serde::Serialize;
use uuid::Uuid;

use crate::cells::Cell;
use crate::cells::abandoned;
use crate::cells::calculate::{self, CalcLineInput, CalcRequest, Priced};
use crate::cells::carts::{self, LineInfo, UnavailableLine, line_infos, unavailable};
use crate::cells::discounts;
use crate::cells::events;
use crate::cells::gift_cards::find_gift_card;
use crate::cells::shipping::all_zones;
use crate::cells::storefront::{self, new_token, token_hash};
use crate::cells::stores;
use crate::domain::cart::Attributes;
use crate::domain::checkout::{
    AppliedGiftCard, Checkout, CheckoutLine, CheckoutStatus, CreateCheckout, MAX_CODES, UpdateCheckout, check_create, check_lines,
};
use crate::domain::gift_card::{GiftCard, GiftCardStatus};
use crate::domain::money::{Currency, Money};
use crate::domain::pricing::Warning;
use crate::domain::pricing::calc::{Calculation, LineResult};
use crate::domain::pricing::shipping::{Address, ShippingRate, rates_for};
use crate::domain::pricing::tax::TaxLine;
use crate::domain::time::rfc3339;
use crate::error::{ApiError, ApiResult, Check, Code};
use crate::storage::record::{self, List, Record};
use crate::storage::tables::{CHECKOUTS, StoreTable};

/// The sales channel of storefront checkouts (channel-limited discounts look at it).
pub const CHANNEL: &str = "online_store";

impl Record for Checkout {
    const TABLE: StoreTable = CHECKOUTS;
    const NAME: &'static str = "checkouts";
    const LIST: List<Self> = List::none();

    fn id(&self) -> Uuid {
        self.id
    }
}

/// Who is acting on a checkout: a store member (any checkout of the store) or an anonymous
/// shopper, who must show the checkout's session token.
#[derive(Debug, Clone, Default)]
pub struct Caller {
    pub shopper: bool,
    pub session_token: Option<String>,
}

impl Caller {
    /// Members pass; a shopper passes with the token the checkout was bound to.
    pub fn authorize(&self, co: &Checkout) -> ApiResult<()> {
        if !self.shopper {
            return Ok(());
        }
        let given = self.session_token.as_deref().map(token_hash);
        match (&co.session_hash, given) {
            // Comparing digests: timing reveals nothing about the token itself.
            (Some(expected), Some(given)) if *expected == given => Ok(()),
            (_, None) => Err(ApiError::msg(Code::INVALID_SESSION_TOKEN, "this guest checkout needs its sessionToken")),
            _ => Err(ApiError::new(Code::INVALID_SESSION_TOKEN)),
        }
    }
}

/// A gift card applied to a checkout, with what it covers now.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GiftCardUse {
    pub id: Uuid,
    pub last_characters: String,
    pub status: GiftCardStatus,
    /// Spendable now.
    pub balance: Money,
    /// What the checkout takes from it.
    pub amount_used: Money,
}

/// A checkout priced now: the calculation, the lines apart, tip, gift cards and what is left to pay.
pub struct PricedCheckout {
    pub priced: Priced,
    /// The checkout's lines that were priced, in the calculation's order.
    pub lines: Vec<CheckoutLine>,
    pub infos: std::collections::HashMap<Uuid, LineInfo>,
    pub unavailable: Vec<UnavailableLine>,
    /// The stored shipping method was not offered any more and was left out.
    pub stale_method: bool,
    pub gift_cards: Vec<GiftCardUse>,
    /// calculation total + tip.
    pub total: Money,
    pub gift_card_total: Money,
    /// total − gift cards: what the payment must cover.
    pub due: Money,
}

/// One priced checkout line.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CheckoutLineView {
    #[serde(flatten)]
    pub priced: LineResult,
    #[serde(flatten)]
    pub info: LineInfo,
    pub properties: Attributes,
}

/// The checkout as the API shows it.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CheckoutView {
    pub id: Uuid,
    pub status: CheckoutStatus,
    pub cart_id: Option<Uuid>,
    pub email: Option<String>,
    pub phone: Option<String>,
    pub accepts_email_marketing: bool,
    pub accepts_sms_marketing: bool,
    pub shipping_address: Option<Address>,
    pub billing_address: Option<Address>,
    pub shipping_method_id: Option<String>,
    pub shipping_line: Option<ShippingRate>,
    pub note: Option<String>,
    pub customer_id: Option<Uuid>,
    pub currency: Currency,
    pub presentment_currency: Currency,
    pub line_items: Vec<CheckoutLineView>,
    pub unavailable_line_items: Vec<UnavailableLine>,
    pub discount_codes: Vec<String>,
    pub applied_discount_codes: Vec<String>,
    pub gift_cards: Vec<GiftCardUse>,
    pub subtotal: Money,
    pub discount: Money,
    pub shipping: Money,
    pub tax: Money,
    pub tip_amount: Money,
    pub total: Money,
    pub gift_card_total: Money,
    pub payment_due: Money,
    pub taxes_included: bool,
    pub tax_lines: Vec<TaxLine>,
    pub warnings: Vec<Warning>,
    pub payment_method: Attributes,
    pub order_id: Option<Uuid>,
    pub completed_at: Option<String>,
    pub created_at: String,
    pub updated_at: String,
    /// Shown once, when a guest checkout is created.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_token: Option<String>,
}

fn stale_method_warning() -> Warning {
    Warning {
        code: crate::domain::pricing::WarningCode::ShippingMethodUnavailable,
        message: "the chosen shipping method is not offered for this address and cart any more: choose another".into(),
        discount_code: None,
        field: Some("shippingMethodId".into()),
    }
}

/// Creates a checkout from a cart or from line items. A shopper's checkout is bound to a
/// session token: the storefront session's when one is given, else a new one (returned).
pub async fn create_checkout(
    cell: &Cell,
    store: Uuid,
    body: CreateCheckout,
    shopper: bool,
) -> ApiResult<(Checkout, Option<String>)> {
    let settings = stores::store_settings(cell, store)?;
    let mut c = Check::new();
    let (email, note) = check_create(&mut c, &body, settings.currency);
    if shopper && body.customer_id.is_some() {
        return Err(ApiError::msg(Code::FORBIDDEN, "customerId needs a signed-in store member"));
    }
    c.finish()?;
    let lines = match (body.cart_id, body.line_items) {
        (Some(_), Some(_)) => return Err(ApiError::field("cartId", "give cartId or lineItems, not both")),
        (None, None) => return Err(ApiError::field("lineItems", "give cartId or lineItems")),
        (None, Some(items)) => check_lines(items)?,
        (Some(cart), None) => {
            let cart = carts::cart(cell, store, cart).map_err(|_| ApiError::field("cartId", "no such cart in this store"))?;
            if cart.lines.is_empty() {
                return Err(ApiError::field("cartId", "the cart is empty"));
            }
            cart.lines
                .into_iter()
                .map(|l| CheckoutLine { variant_id: l.variant_id, quantity: l.quantity, properties: l.custom_attributes })
                .collect()
        }
    };
    // Every line must be purchasable now: a checkout is a promise to sell.
    let ids: Vec<Uuid> = lines.iter().map(|l| l.variant_id).collect();
    let infos = line_infos(&cell.read()?, store, &ids)?;
    let mut c = Check::new();
    for (i, l) in lines.iter().enumerate() {
        if let Some(reason) = unavailable(infos.get(&l.variant_id), shopper) {
            c.fail(&format!("lineItems[{i}].variantId"), reason);
        }
    }
    c.finish()?;
    let token = match (shopper, body.session_token) {
        (false, _) => None,
        (true, Some(t)) => {
            if storefront::storefront_session(cell, store, &t)?.is_none() {
                return Err(ApiError::msg(Code::INVALID_SESSION_TOKEN, "the storefront session is unknown or expired"));
            }
            Some(t.trim().to_string())
        }
        (true, None) => Some(new_token()?),
    };
    let now = cell.clock.now_ms();
    let co = Checkout {
        id: cell.clock.new_id(),
        status: CheckoutStatus::Open,
        cart_id: body.cart_id,
        lines,
        email,
        phone: None,
        accepts_email_marketing: false,
        accepts_sms_marketing: false,
        shipping_address: None,
        billing_address: None,
        shipping_method_id: None,
        note,
        tip: 0,
        currency: settings.currency,
        customer_id: body.customer_id,
        session_hash: token.as_deref().map(token_hash),
        discount_codes: Vec::new(),
        gift_cards: Vec::new(),
        payment_method: Attributes::new(),
        order_id: None,
        completed_at: None,
        created_at: now,
        updated_at: now,
    };
    // The event shows the checkout as a member reads it, priced when it was made.
    let data = shown(cell, store, &co)?;
    let (row, after) = (co.clone(), cell.abandoned_after_ms);
    cell.writer
        .write(Some(store), move |tx| {
            record::put(tx, store, &row)?;
            abandoned::watch(tx, store, &row, after, now)?;
            events::append(tx, store, "checkout.created", data.clone(), now)
        })
        .await?;
    Ok((co, token))
}

/// A checkout the caller may see.
pub fn checkout(cell: &Cell, store: Uuid, id: Uuid, caller: &Caller) -> ApiResult<Checkout> {
    let co = cell.get::<Checkout>(store, id)?;
    caller.authorize(&co)?;
    Ok(co)
}

/// Changes an open checkout. A new shipping method must be one the shipping-rates operation
/// offers for the checkout's address and lines.
pub async fn update_checkout(cell: &Cell, store: Uuid, id: Uuid, caller: &Caller, update: UpdateCheckout) -> ApiResult<Checkout> {
    let mut co = checkout(cell, store, id, caller)?;
    ensure_open(&co)?;
    let method_given = matches!(update.shipping_method_id, Some(Some(_)));
    update.apply(&mut co)?;
    if method_given {
        let priced = price_checkout(cell, store, &co, caller.shopper)?;
        if priced.stale_method {
            return Err(ApiError::field("shippingMethodId", "is not offered for this address and cart"));
        }
    }
    save_open(cell, store, co, |stored, next| {
        // Only the fields of this update change; lines, codes and cards stay as stored now.
        let mut merged = next.clone();
        merged.lines = stored.lines.clone();
        merged.discount_codes = stored.discount_codes.clone();
        merged.gift_cards = stored.gift_cards.clone();
        merged
    })
    .await
}

/// Writes `co` over the stored checkout if that is still open, merging with `merge`.
async fn save_open(
    cell: &Cell,
    store: Uuid,
    co: Checkout,
    merge: impl Fn(&Checkout, &Checkout) -> Checkout + Send + 'static,
) -> ApiResult<Checkout> {
    let (now, after) = (cell.clock.now_ms(), cell.abandoned_after_ms);
    cell.writer
        .write(Some(store), move |tx| {
            let stored = record::must_load::<Checkout>(tx, store, co.id)?;
            ensure_open(&stored)?;
            let mut next = merge(&stored, &co);
            next.updated_at = now;
            record::put(tx, store, &next)?;
            abandoned::watch(tx, store, &next, after, now)?;
            Ok(next)
        })
        .await
}

/// Prices a checkout now: lines that cannot be bought are left out (and listed), a shipping
/// method no longer offered is dropped with a warning, then tip and gift cards are added.
pub fn price_checkout(cell: &Cell, store: Uuid, co: &Checkout, shopper: bool) -> ApiResult<PricedCheckout> {
    let now = cell.clock.now_ms();
    let txn = cell.read()?;
    let ids: Vec<Uuid> = co.lines.iter().map(|l| l.variant_id).collect();
    let infos = line_infos(&txn, store, &ids)?;
    let mut lines = Vec::with_capacity(co.lines.len());
    let mut unavailable_lines = Vec::new();
    for l in &co.lines {
        match unavailable(infos.get(&l.variant_id), shopper) {
            Some(reason) => unavailable_lines.push(UnavailableLine { variant_id: l.variant_id, quantity: l.quantity, reason }),
            None => lines.push(l.clone()),
        }
    }
    let mut req = CalcRequest {
        lines: lines.iter().map(|l| CalcLineInput { variant_id: l.variant_id, quantity: l.quantity, discount: None }).collect(),
        codes: co.discount_codes.clone(),
        address: co.shipping_address.clone(),
        shipping_method_id: co.shipping_method_id.clone(),
        customer_id: co.customer_id,
        guest_email: co.email.clone(),
        channel: Some(CHANNEL.to_string()),
        shopper,
        ..CalcRequest::default()
    };
    let mut stale_method = false;
    let mut priced = match calculate::price(cell, store, &req, now) {
        Err(e) if req.shipping_method_id.is_some() && e.fields.iter().any(|f| f.field == "shippingMethodId") => {
            stale_method = true;
            req.shipping_method_id = None;
            calculate::price(cell, store, &req, now)?
        }
        other => other?,
    };
    if stale_method {
        priced.calculation.warnings.push(stale_method_warning());
    }
    let currency = co.currency;
    let total = priced.calculation.total.amount + co.tip;
    let mut left = total;
    let mut gift_cards = Vec::with_capacity(co.gift_cards.len());
    for applied in &co.gift_cards {
        let card = crate::storage::record::get::<crate::domain::gift_card::GiftCard>(&txn, store, applied.id)?;
        let (status, spendable) = match &card {
            Some(c) if c.currency() == currency => (c.status(now), c.spendable(now)),
            Some(c) => (c.status(now), 0),
            None => (GiftCardStatus::Disabled, 0),
        };
        let used = spendable.min(left);
        left -= used;
        gift_cards.push(GiftCardUse {
            id: applied.id,
            last_characters: applied.last_characters.clone(),
            status,
            balance: Money { amount: spendable, currency },
            amount_used: Money { amount: used, currency },
        });
    }
    Ok(PricedCheckout {
        priced,
        lines,
        infos,
        unavailable: unavailable_lines,
        stale_method,
        gift_cards,
        total: Money { amount: total, currency },
        gift_card_total: Money { amount: total - left, currency },
        due: Money { amount: left, currency },
    })
}

/// The checkout priced now, as the API shows it.
/// The checkout as a member reads it, as JSON: the data of its events.
pub fn shown(cell: &Cell, store: Uuid, co: &Checkout) -> ApiResult<Vec<u8>> {
    serde_json::to_vec(&checkout_view(cell, store, co, false, None)?).map_err(ApiError::internal)
}

pub fn checkout_view(
    cell: &Cell,
    store: Uuid,
    co: &Checkout,
    shopper: bool,
    session_token: Option<String>,
) -> ApiResult<CheckoutView> {
    let p = price_checkout(cell, store, co, shopper)?;
    let calc: &Calculation = &p.priced.calculation;
    let line_items = calc
        .line_items
        .iter()
        .zip(&p.lines)
        .filter_map(|(priced, l)| {
            Some(CheckoutLineView {
                priced: priced.clone(),
                info: p.infos.get(&l.variant_id)?.clone(),
                properties: l.properties.clone(),
            })
        })
        .collect();
    Ok(CheckoutView {
        id: co.id,
        status: co.status,
        cart_id: co.cart_id,
        email: co.email.clone(),
        phone: co.phone.clone(),
        accepts_email_marketing: co.accepts_email_marketing,
        accepts_sms_marketing: co.accepts_sms_marketing,
        shipping_address: co.shipping_address.clone(),
        billing_address: co.billing_address.clone(),
        shipping_method_id: if p.stale_method { None } else { co.shipping_method_id.clone() },
        shipping_line: p.priced.input.shipping_rate.clone(),
        note: co.note.clone(),
        customer_id: co.customer_id,
        currency: co.currency,
        presentment_currency: co.currency,
        line_items,
        unavailable_line_items: p.unavailable.clone(),
        discount_codes: co.discount_codes.clone(),
        applied_discount_codes: calc.applied_discount_codes.clone(),
        gift_cards: p.gift_cards.clone(),
        subtotal: calc.subtotal,
        discount: calc.discount,
        shipping: calc.shipping,
        tax: calc.tax,
        tip_amount: Money { amount: co.tip, currency: co.currency },
        total: p.total,
        gift_card_total: p.gift_card_total,
        payment_due: p.due,
        taxes_included: calc.taxes_included,
        tax_lines: calc.tax_lines.clone(),
        warnings: calc.warnings.clone(),
        payment_method: co.payment_method.clone(),
        order_id: co.order_id,
        completed_at: co.completed_at.map(rfc3339),
        created_at: rfc3339(co.created_at),
        updated_at: rfc3339(co.updated_at),
        session_token,
    })
}

/// The rates offered for the checkout's lines shipped to `address` (the Shipping rate shape).
pub fn checkout_shipping_rates(
    cell: &Cell,
    store: Uuid,
    co: &Checkout,
    address: &Address,
    shopper: bool,
) -> ApiResult<Vec<ShippingRate>> {
    let mut probe = co.clone();
    probe.shipping_address = Some(address.clone());
    probe.shipping_method_id = None;
    let p = price_checkout(cell, store, &probe, shopper)?;
    let Some(dest) = &p.priced.input.destination else { return Ok(Vec::new()) };
    let zones = all_zones(&cell.read()?, store)?;
    let (weight, subtotal) = p.priced.input.shipping_basis();
    Ok(rates_for(&zones, dest, weight, subtotal, co.currency))
}

/// Applies a code: a discount code that applies to the checkout now, or else a gift card's
/// code (one field for both, as shoppers expect). An inapplicable discount code is a 422 with
/// its reasons; a gift card's code is never stored, only the card's id.
pub async fn apply_checkout_code(cell: &Cell, store: Uuid, id: Uuid, caller: &Caller, code: &str) -> ApiResult<Checkout> {
    let mut co = checkout(cell, store, id, caller)?;
    ensure_open(&co)?;
    let code = code.trim();
    let mut c = Check::new();
    c.ensure(!code.is_empty() && code.chars().count() <= 255, "code", "must be 1 to 255 characters");
    c.finish()?;
    if co.discount_codes.len() + co.gift_cards.len() >= MAX_CODES {
        return Err(ApiError::msg(Code::BUSINESS_RULE, format!("a checkout takes at most {MAX_CODES} codes and gift cards")));
    }
    if co.discount_codes.iter().any(|c| c.eq_ignore_ascii_case(code)) {
        return Err(ApiError::msg(Code::BUSINESS_RULE, format!("{code} is already applied")));
    }
    let is_discount = discounts::find_code(&cell.read()?, store, code)?.is_some();
    if is_discount {
        co.discount_codes.push(code.to_string());
        let priced = price_checkout(cell, store, &co, caller.shopper)?;
        let verdict = priced.priced.code_result(co.discount_codes.len() - 1, cell.clock.now_ms());
        if !verdict.valid {
            let reasons =
                if verdict.reasons.is_empty() { "it does not apply to this checkout".into() } else { verdict.reasons.join("; ") };
            return Err(ApiError::msg(Code::BUSINESS_RULE, format!("{code} cannot be applied: {reasons}")));
        }
    } else {
        let card = find_gift_card(&cell.read()?, store, code)?
            .ok_or_else(|| ApiError::msg(Code::BUSINESS_RULE, "no discount or gift card of this store has this code"))?;
        usable_card(&card, co.currency, cell.clock.now_ms())?;
        if co.gift_cards.iter().any(|g| g.id == card.id) {
            return Err(ApiError::msg(Code::BUSINESS_RULE, "this gift card is already applied"));
        }
        co.gift_cards.push(AppliedGiftCard { id: card.id, last_characters: card.last_characters().to_string() });
    }
    save_open(cell, store, co, |stored, next| {
        let mut merged = stored.clone();
        merged.discount_codes = next.discount_codes.clone();
        merged.gift_cards = next.gift_cards.clone();
        merged
    })
    .await
}

/// Removes a discount code (any case) from an open checkout; 404 when it is not applied.
pub async fn remove_checkout_code(cell: &Cell, store: Uuid, id: Uuid, caller: &Caller, code: &str) -> ApiResult<Checkout> {
    let mut co = checkout(cell, store, id, caller)?;
    ensure_open(&co)?;
    let before = co.discount_codes.len();
    co.discount_codes.retain(|c| !c.eq_ignore_ascii_case(code.trim()));
    if co.discount_codes.len() == before {
        return Err(ApiError::msg(Code::NOT_FOUND, "this code is not applied to the checkout"));
    }
    save_open(cell, store, co, |stored, next| {
        let mut merged = stored.clone();
        merged.discount_codes = next.discount_codes.clone();
        merged
    })
    .await
}

/// Takes a gift card off an open checkout; 404 when it is not applied.
pub async fn remove_checkout_gift_card(cell: &Cell, store: Uuid, id: Uuid, caller: &Caller, card: Uuid) -> ApiResult<Checkout> {
    let mut co = checkout(cell, store, id, caller)?;
    ensure_open(&co)?;
    let before = co.gift_cards.len();
    co.gift_cards.retain(|g| g.id != card);
    if co.gift_cards.len() == before {
        return Err(ApiError::msg(Code::NOT_FOUND, "this gift card is not applied to the checkout"));
    }
    save_open(cell, store, co, |stored, next| {
        let mut merged = stored.clone();
        merged.gift_cards = next.gift_cards.clone();
        merged
    })
    .await
}

/// A card a checkout in `currency` can spend from at `now`, or a 422 saying why not.
fn usable_card(card: &GiftCard, currency: Currency, now: i64) -> ApiResult<()> {
    if card.currency() != currency {
        return Err(ApiError::msg(
            Code::BUSINESS_RULE,
            format!("this gift card is in {}, the checkout in {}", card.currency().code(), currency.code()),
        ));
    }
    match card.status(now) {
        GiftCardStatus::Active => Ok(()),
        GiftCardStatus::Disabled => Err(ApiError::msg(Code::BUSINESS_RULE, "this gift card is disabled")),
        GiftCardStatus::Expired => Err(ApiError::msg(Code::BUSINESS_RULE, "this gift card has expired")),
        GiftCardStatus::Depleted => Err(ApiError::msg(Code::BUSINESS_RULE, "this gift card has no balance left")),
    }
}

/// A completed checkout is a 409: it became an order and changes no more.
pub fn ensure_open(co: &Checkout) -> ApiResult<()> {
    match co.order_id {
        Some(order) if co.status == CheckoutStatus::Completed => {
            Err(ApiError::msg(Code::CHECKOUT_COMPLETED, format!("the checkout is already completed as order {order}")))
        }
        _ => Ok(()),
    }
}
