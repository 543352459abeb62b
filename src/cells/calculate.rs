//! The cart/order calculation wired to a cell: resolves variants, discount codes with their usage,
//! automatic discounts, tax rates and the chosen shipping rate from one read transaction, then
//! hands everything to the pure engine in [`crate::domain::pricing::calc`]. Nothing here writes.

use std::collections::HashMap;

use redb::ReadTransaction;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::cells::Cell;
use crate::cells::discounts::{active_automatic, customer_key, find_code, usage};
use crate::cells::shipping::all_zones;
use crate::cells::taxes::all_rates;
use crate::domain::money::Money;
use crate::domain::pricing::WarningCode;
use crate::domain::pricing::calc::{
    CalcInput, CalcLine, Calculation, CodeInput, MAX_LINES, MAX_QUANTITY, ManualDiscount, ResolvedDiscount, Source, calculate,
};
use crate::domain::pricing::discount::{Discount, MAX_CODES_PER_REQUEST};
use crate::domain::pricing::shipping::{Address, rates_for};
use crate::domain::pricing::tax::TaxSettings;
use crate::domain::product::{Product, Status};
use crate::domain::store::StoreSettings;
use crate::error::{ApiError, ApiResult, Check};
use crate::storage::codec::decode;
use crate::storage::keys::{Key, trailing_id};
use crate::storage::read;
use crate::storage::tables::{PRODUCT_COLLECTIONS, PRODUCTS, STORES, VARIANTS};

/// One line of `POST S/calculate`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CalcLineInput {
    pub variant_id: Uuid,
    /// 1 to 100.
    pub quantity: u32,
    /// A manual line-level discount (store members only).
    pub discount: Option<ManualDiscount>,
}

/// `POST S/calculate`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CalculateBody {
    pub line_items: Vec<CalcLineInput>,
    /// Manual order-level discounts (store members only).
    #[serde(default)]
    pub order_discounts: Vec<ManualDiscount>,
    /// At most 10, applied in this order after the automatic discounts.
    #[serde(default)]
    pub discount_codes: Vec<String>,
    /// No tax without it.
    pub shipping_address: Option<Address>,
    /// A rate id as offered for this address and cart (a zone-rate UUID); needs `shippingAddress`.
    pub shipping_method_id: Option<String>,
    pub customer_id: Option<Uuid>,
    /// The sales channel (e.g. `online_store`); discounts limited to other channels do not apply.
    pub channel: Option<String>,
}

/// One line of a discount `cart` context.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CartLineInput {
    pub variant_id: Uuid,
    /// 1 to 100.
    pub quantity: u32,
}

/// The discount `cart` context: `{cartId}` or `{lineItems, customerId?, channel?}`. Carts are not
/// stored yet, so `cartId` is refused until they are; send the lines instead.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CartContext {
    pub cart_id: Option<Uuid>,
    #[serde(default)]
    pub line_items: Vec<CartLineInput>,
    pub customer_id: Option<Uuid>,
    pub channel: Option<String>,
}

/// What a calculation is asked for, once the body (calculate or a cart context) is read.
#[derive(Debug, Clone, Default)]
pub struct CalcRequest {
    pub lines: Vec<CalcLineInput>,
    pub order_discounts: Vec<ManualDiscount>,
    pub codes: Vec<String>,
    pub address: Option<Address>,
    pub shipping_method_id: Option<String>,
    pub customer_id: Option<Uuid>,
    pub channel: Option<String>,
    /// An anonymous shopper: only ACTIVE products may be priced.
    pub shopper: bool,
    /// Prefix of field names in errors: `cart.` for a cart context, empty for calculate.
    pub field_prefix: &'static str,
}

impl CalcRequest {
    /// A calculation request from a discount `cart` context, with `codes` to try.
    pub fn from_cart(cart: CartContext, codes: Vec<String>) -> ApiResult<CalcRequest> {
        if cart.cart_id.is_some() {
            return Err(ApiError::field("cart.cartId", "carts are not available yet: send cart.lineItems instead"));
        }
        Ok(CalcRequest {
            lines: cart
                .line_items
                .into_iter()
                .map(|l| CalcLineInput { variant_id: l.variant_id, quantity: l.quantity, discount: None })
                .collect(),
            codes,
            customer_id: cart.customer_id,
            channel: cart.channel,
            field_prefix: "cart.",
            ..CalcRequest::default()
        })
    }

    /// A calculation request from a `POST S/calculate` body.
    pub fn from_body(body: CalculateBody, shopper: bool) -> CalcRequest {
        CalcRequest {
            lines: body.line_items,
            order_discounts: body.order_discounts,
            codes: body.discount_codes,
            address: body.shipping_address,
            shipping_method_id: body.shipping_method_id,
            customer_id: body.customer_id,
            channel: body.channel,
            shopper,
            field_prefix: "",
        }
    }
}

/// A code's verdict against a cart: the body of `S/discounts/validate` and one result of
/// `validate-many`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CodeResult {
    /// The code as entered (trimmed).
    pub code: String,
    pub valid: bool,
    /// The discount the code names; `null` for an unknown code.
    pub discount: Option<serde_json::Value>,
    /// What the code took (off the goods, or off shipping for a shipping discount).
    pub amount: Money,
    /// Why it did not apply; empty when valid.
    pub reasons: Vec<String>,
    /// The machine-readable reasons (`DISCOUNT_MINIMUM_NOT_MET`, ...), in the order of `reasons`.
    pub reason_codes: Vec<WarningCode>,
}

/// One automatic discount that applies to a cart, with what it takes.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Eligible {
    pub discount: serde_json::Value,
    pub amount: Money,
}

/// A calculation together with the records it was made from.
pub struct Priced {
    pub input: CalcInput,
    pub calculation: Calculation,
}

impl Priced {
    /// The verdict on the code entered at `index` of the request's codes. A repeat of an earlier
    /// code is invalid ("given twice"); the first occurrence carries the other reasons.
    pub fn code_result(&self, index: usize, now: i64) -> CodeResult {
        let codes = &self.input.codes;
        let entered = codes.get(index).map(|c| c.code.trim().to_string()).unwrap_or_default();
        let same = |c: &str| c.eq_ignore_ascii_case(&entered);
        let repeat = codes[..index.min(codes.len())].iter().any(|c| same(c.code.trim()));
        let calc = &self.calculation;
        let currency = calc.subtotal.currency;
        let found = codes.get(index).and_then(|c| c.found.as_ref()).map(|r| &r.discount);
        let discount = found.and_then(|d| serde_json::to_value(d.view(now)).ok());
        let warnings = calc.warnings.iter().filter(|w| w.discount_code.as_deref().is_some_and(same));
        let (reasons, reason_codes): (Vec<String>, Vec<WarningCode>) = if repeat {
            (vec![format!("{entered} was given twice")], vec![WarningCode::DiscountDuplicate])
        } else {
            warnings.filter(|w| w.code != WarningCode::DiscountDuplicate).map(|w| (w.message.clone(), w.code)).unzip()
        };
        let valid = !repeat && calc.applied_discount_codes.iter().any(|c| same(c));
        let amount = if valid {
            calc.discount_applications
                .iter()
                .filter(|a| a.source == Source::Code && a.code.as_deref().is_some_and(same))
                .map(|a| a.amount.amount)
                .sum()
        } else {
            0
        };
        CodeResult { code: entered, valid, discount, amount: Money { amount, currency }, reasons, reason_codes }
    }

    /// The automatic discounts that applied, in the order they were applied.
    pub fn eligible_automatic(&self, now: i64) -> Vec<Eligible> {
        let by_id: HashMap<Uuid, &Discount> = self.input.automatic.iter().map(|r| (r.discount.id, &r.discount)).collect();
        self.calculation
            .discount_applications
            .iter()
            .filter(|a| a.source == Source::Automatic)
            .filter_map(|a| {
                let d = a.discount_id.and_then(|id| by_id.get(&id))?;
                Some(Eligible { discount: serde_json::to_value(d.view(now)).ok()?, amount: a.amount })
            })
            .collect()
    }
}

/// The collections a product is in, from the product → collection index.
fn product_collections(txn: &ReadTransaction, store: Uuid, product: Uuid) -> ApiResult<Vec<Uuid>> {
    let mut ids = Vec::new();
    read::scan(txn, PRODUCT_COLLECTIONS, Key::store(store).id(product).bytes(), false, 0, usize::MAX, |k, _| {
        ids.extend(trailing_id(k));
        Ok(())
    })?;
    Ok(ids)
}

/// Resolves every line to its variant and product; each line that cannot be priced is named
/// (`lineItems[i].variantId`, `lineItems[i].quantity`) and all are reported at once.
fn resolve_lines(txn: &ReadTransaction, store: Uuid, req: &CalcRequest) -> ApiResult<Vec<CalcLine>> {
    let pre = req.field_prefix;
    let mut c = Check::new();
    c.ensure(req.lines.len() <= MAX_LINES, &format!("{pre}lineItems"), format!("at most {MAX_LINES} lines"));
    c.finish()?;
    let mut c = Check::new();
    let variants = txn.open_table(VARIANTS.def)?;
    let products = txn.open_table(PRODUCTS.def)?;
    // A cart often holds several variants of one product: decode each product once.
    let mut cache: HashMap<Uuid, (Product, Vec<Uuid>)> = HashMap::new();
    let mut lines = Vec::with_capacity(req.lines.len());
    for (i, l) in req.lines.iter().enumerate() {
        let at = format!("{pre}lineItems[{i}]");
        c.ensure((1..=MAX_QUANTITY).contains(&l.quantity), &format!("{at}.quantity"), format!("must be 1 to {MAX_QUANTITY}"));
        let product_id = match variants.get(Key::store(store).id(l.variant_id).bytes())? {
            Some(v) => Uuid::from_slice(v.value()).map_err(ApiError::internal)?,
            None => {
                c.fail(&format!("{at}.variantId"), "no such variant in this store");
                continue;
            }
        };
        if !cache.contains_key(&product_id) {
            let Some(row) = products.get(Key::store(store).id(product_id).bytes())? else {
                c.fail(&format!("{at}.variantId"), "no such variant in this store");
                continue;
            };
            let p: Product = decode(row.value())?;
            let collections = product_collections(txn, store, product_id)?;
            cache.insert(product_id, (p, collections));
        }
        let Some((p, collections)) = cache.get(&product_id) else { continue };
        let Some(v) = p.variants.iter().find(|v| v.id == l.variant_id) else {
            c.fail(&format!("{at}.variantId"), "no such variant in this store");
            continue;
        };
        match p.status {
            Status::Archived => {
                c.fail(&format!("{at}.variantId"), "the product is archived");
                continue;
            }
            // Shoppers buy what the store sells; members may price drafts (draft orders).
            Status::Draft if req.shopper => {
                c.fail(&format!("{at}.variantId"), "no such variant in this store");
                continue;
            }
            _ => {}
        }
        lines.push(CalcLine {
            variant_id: v.id,
            product_id: p.id,
            collection_ids: collections.clone(),
            unit_price: Money { amount: v.price, currency: p.currency },
            quantity: l.quantity,
            weight_grams: v.weight_grams.unwrap_or(0),
            // Variants carry no tax exemption yet: every line is taxable.
            taxable: true,
            discount: l.discount.clone(),
        });
    }
    c.finish()?;
    Ok(lines)
}

impl Cell {
    /// Prices a request from one read transaction; writes nothing. Errors name the request field:
    /// an unknown, foreign or archived variant `lineItems[i].variantId`, a quantity outside 1..100
    /// `lineItems[i].quantity`, more than 10 codes `discountCodes`, a shipping method not offered
    /// for the address and cart `shippingMethodId`.
    pub fn price(&self, store: Uuid, req: &CalcRequest, now: i64) -> ApiResult<Priced> {
        let pre = req.field_prefix;
        let mut c = Check::new();
        c.ensure(
            req.codes.len() <= MAX_CODES_PER_REQUEST,
            &format!("{pre}discountCodes"),
            format!("at most {MAX_CODES_PER_REQUEST} codes per request"),
        );
        if req.shipping_method_id.is_some() && req.address.is_none() {
            c.fail("shippingMethodId", "needs a shippingAddress to be offered");
        }
        c.finish()?;
        let txn = self.read()?;
        let settings: StoreSettings = read::get(&txn, STORES, Key::store(store).bytes())?.ok_or_else(ApiError::not_found)?;
        let lines = resolve_lines(&txn, store, req)?;

        let customer = customer_key(req.customer_id, None);
        let resolve = |d: Discount| -> ApiResult<ResolvedDiscount> {
            let usage = usage(&txn, store, d.id, customer.as_deref())?;
            Ok(ResolvedDiscount { discount: d, usage })
        };
        let mut codes = Vec::with_capacity(req.codes.len());
        for code in &req.codes {
            let trimmed = code.trim();
            // A code that cannot exist is simply not found; the engine names over-long ones.
            let found = if trimmed.is_empty() || trimmed.len() > 255 { None } else { find_code(&txn, store, trimmed)? };
            codes.push(CodeInput { code: code.clone(), found: found.map(&resolve).transpose()? });
        }
        let automatic = active_automatic(&txn, store, now)?.into_iter().map(&resolve).collect::<ApiResult<Vec<_>>>()?;
        let destination = req.address.as_ref().map(Address::destination);
        let rates = match &destination {
            Some(_) => all_rates(&txn, store)?,
            None => Vec::new(),
        };
        let mut input = CalcInput {
            currency: settings.currency,
            lines,
            order_discounts: req.order_discounts.clone(),
            codes,
            automatic,
            customer_id: req.customer_id,
            channel: req.channel.clone(),
            destination,
            shipping_rate: None,
            taxes: TaxSettings { taxes_included: settings.taxes_included, rates },
            now,
        };
        if let (Some(method), Some(dest)) = (&req.shipping_method_id, &input.destination) {
            let zones = all_zones(&txn, store)?;
            let (weight, subtotal) = input.shipping_basis();
            let offered = rates_for(&zones, dest, weight, subtotal, settings.currency);
            let chosen = offered.into_iter().find(|r| r.id.eq_ignore_ascii_case(method.trim()));
            input.shipping_rate =
                Some(chosen.ok_or_else(|| ApiError::field("shippingMethodId", "is not offered for this address and cart"))?);
        }
        let calculation = calculate(&input)?;
        Ok(Priced { input, calculation })
    }
}
