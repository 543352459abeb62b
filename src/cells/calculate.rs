//! The cart/order calculation wired to a cell: resolves variants, discount codes with their usage,
//! automatic discounts, tax rates and the chosen shipping rate from one read transaction, then
//! hands everything to the pure engine in [`crate::domain::pricing::calc`]. Nothing here writes.

use std::collections::HashMap;
use std::collections::hash_map::Entry;

use redb::{ReadOnlyTable, ReadTransaction};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::cells::Cell;
use crate::cells::discounts::{code_key, customer_key, row_key, usage_with};
use crate::domain::money::Money;
use crate::domain::pricing::WarningCode;
use crate::domain::pricing::calc::{
    CalcInput, CalcLine, Calculation, CodeInput, MAX_LINES, MAX_QUANTITY, ManualDiscount, ResolvedDiscount, Source, calculate,
};
use crate::domain::pricing::discount::{Discount, DiscountStatus, MAX_CODES_PER_REQUEST};
use crate::domain::pricing::shipping::{Address, ShippingZone, rates_for};
use crate::domain::pricing::tax::{TaxRate, TaxSettings};
use crate::domain::product::{Product, Status};
use crate::domain::store::StoreSettings;
use crate::error::{ApiError, ApiResult, Check};
use crate::storage::codec::decode;
use crate::storage::keys::{Key, prefix_range, trailing_id};
use crate::storage::tables::{
    DISCOUNT_AUTOMATIC, DISCOUNT_CODES, DISCOUNT_USAGE, DISCOUNTS, PRODUCT_COLLECTIONS, PRODUCTS, SHIPPING_ZONES, STORES,
    StoreTable, TAX_RATES, VARIANTS,
};

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

/// The discount `cart` context: `{cartId}` (a stored cart) or `{lineItems, customerId?, channel?}`.
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
    /// A stored cart (`cartId`) is read into `lineItems` first, by [`Cell::resolve_cart_context`].
    pub fn from_cart(cart: CartContext, codes: Vec<String>) -> ApiResult<CalcRequest> {
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

type Table = ReadOnlyTable<&'static [u8], &'static [u8]>;

/// The tables a calculation reads, each opened once: a calculation is a hot read path, and
/// opening a table costs a lookup of its root in the transaction.
struct Snapshot {
    store: Uuid,
    variants: Table,
    products: Table,
    /// Opened only when a discount of the calculation looks at collections.
    product_collections: Option<Table>,
    codes: Table,
    discounts: Table,
    usage: Table,
}

fn open(txn: &ReadTransaction, t: StoreTable) -> ApiResult<Table> {
    Ok(txn.open_table(t.def)?)
}

impl Snapshot {
    fn new(txn: &ReadTransaction, store: Uuid) -> ApiResult<Snapshot> {
        Ok(Snapshot {
            store,
            variants: open(txn, VARIANTS)?,
            products: open(txn, PRODUCTS)?,
            product_collections: None,
            codes: open(txn, DISCOUNT_CODES)?,
            discounts: open(txn, DISCOUNTS)?,
            usage: open(txn, DISCOUNT_USAGE)?,
        })
    }

    /// The rows of `table` under `prefix`, in key order.
    fn each(table: &Table, prefix: &[u8], mut f: impl FnMut(&[u8], &[u8]) -> ApiResult<()>) -> ApiResult<()> {
        let (start, end) = prefix_range(prefix);
        let range = match &end {
            Some(end) => table.range(start.as_slice()..end.as_slice())?,
            None => table.range(start.as_slice()..)?,
        };
        for item in range {
            let (k, v) = item?;
            f(k.value(), v.value())?;
        }
        Ok(())
    }

    /// The collections a product is in, from the product → collection index.
    fn product_collections(&self, product: Uuid) -> ApiResult<Vec<Uuid>> {
        let mut ids = Vec::new();
        let Some(table) = &self.product_collections else { return Ok(ids) };
        Snapshot::each(table, Key::store(self.store).id(product).bytes(), |k, _| {
            ids.extend(trailing_id(k));
            Ok(())
        })?;
        Ok(ids)
    }

    fn discount(&self, id: Uuid) -> ApiResult<Option<Discount>> {
        self.discounts.get(row_key(self.store, id).as_slice())?.map(|v| decode(v.value())).transpose()
    }

    /// The discount a code names, without regard to case.
    fn find_code(&self, code: &str) -> ApiResult<Option<Discount>> {
        let Some(id) = self.codes.get(code_key(self.store, code).as_slice())? else { return Ok(None) };
        let id = Uuid::from_slice(id.value()).map_err(ApiError::internal)?;
        self.discount(id)
    }

    /// A discount with its usage counts (total, and by `customer`).
    fn resolve(&self, d: Discount, customer: Option<&str>) -> ApiResult<ResolvedDiscount> {
        let get = |k: &[u8]| -> ApiResult<Option<Vec<u8>>> { Ok(self.usage.get(k)?.map(|v| v.value().to_vec())) };
        let usage = usage_with(get, self.store, d.id, customer)?;
        Ok(ResolvedDiscount { discount: d, usage })
    }
}

/// Every row of a store in `table`, decoded (tax rates, zones: small, read whole).
fn all<T: serde::de::DeserializeOwned>(txn: &ReadTransaction, t: StoreTable, store: Uuid) -> ApiResult<Vec<T>> {
    let mut out = Vec::new();
    Snapshot::each(&open(txn, t)?, Key::store(store).bytes(), |_, v| {
        out.push(decode(v)?);
        Ok(())
    })?;
    Ok(out)
}

/// Resolves every line to its variant and product; each line that cannot be priced is named
/// (`lineItems[i].variantId`, `lineItems[i].quantity`) and all are reported at once.
fn resolve_lines(snap: &Snapshot, req: &CalcRequest) -> ApiResult<Vec<CalcLine>> {
    let pre = req.field_prefix;
    if req.lines.len() > MAX_LINES {
        return Err(ApiError::field(format!("{pre}lineItems"), format!("at most {MAX_LINES} lines")));
    }
    let mut c = Check::new();
    let at = |i: usize, field: &str| format!("{pre}lineItems[{i}].{field}");
    let unknown = "no such variant in this store";
    // A cart often holds several variants of one product: decode each product once.
    let mut cache: HashMap<Uuid, (Product, Vec<Uuid>)> = HashMap::new();
    let mut lines = Vec::with_capacity(req.lines.len());
    for (i, l) in req.lines.iter().enumerate() {
        if !(1..=MAX_QUANTITY).contains(&l.quantity) {
            c.fail(&at(i, "quantity"), format!("must be 1 to {MAX_QUANTITY}"));
        }
        let product_id = match snap.variants.get(Key::store(snap.store).id(l.variant_id).bytes())? {
            Some(v) => Uuid::from_slice(v.value()).map_err(ApiError::internal)?,
            None => {
                c.fail(&at(i, "variantId"), unknown);
                continue;
            }
        };
        let (p, collections) = match cache.entry(product_id) {
            Entry::Occupied(e) => &*e.into_mut(),
            Entry::Vacant(e) => {
                let Some(row) = snap.products.get(Key::store(snap.store).id(product_id).bytes())? else {
                    c.fail(&at(i, "variantId"), unknown);
                    continue;
                };
                let p: Product = decode(row.value())?;
                let collections = snap.product_collections(product_id)?;
                &*e.insert((p, collections))
            }
        };
        let Some(v) = p.variants.iter().find(|v| v.id == l.variant_id) else {
            c.fail(&at(i, "variantId"), unknown);
            continue;
        };
        match p.status {
            Status::Archived => {
                c.fail(&at(i, "variantId"), "the product is archived");
                continue;
            }
            // Shoppers buy what the store sells; members may price drafts (draft orders).
            Status::Draft if req.shopper => {
                c.fail(&at(i, "variantId"), unknown);
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
        let settings: StoreSettings = match open(&txn, STORES)?.get(Key::store(store).bytes())? {
            Some(v) => decode(v.value())?,
            None => return Err(ApiError::not_found()),
        };
        let mut snap = Snapshot::new(&txn, store)?;
        // Discounts first: whether any looks at collections decides if lines need theirs.
        let customer = customer_key(req.customer_id, None);
        let mut codes = Vec::with_capacity(req.codes.len());
        for code in &req.codes {
            let trimmed = code.trim();
            // A code that cannot exist is simply not found; the engine names over-long ones.
            let found = if trimmed.is_empty() || trimmed.len() > 255 { None } else { snap.find_code(trimmed)? };
            codes.push(CodeInput { code: code.clone(), found: found.map(|d| snap.resolve(d, customer.as_deref())).transpose()? });
        }
        let mut automatic = Vec::new();
        let mut ids = Vec::new();
        Snapshot::each(&open(&txn, DISCOUNT_AUTOMATIC)?, Key::store(store).bytes(), |k, _| {
            ids.extend(trailing_id(k));
            Ok(())
        })?;
        for id in ids {
            // Inactive ones would only be dropped by the engine: skip their usage reads.
            if let Some(d) = snap.discount(id)?.filter(|d| d.status(now) == DiscountStatus::Active) {
                automatic.push(snap.resolve(d, customer.as_deref())?);
            }
        }
        let by_collection = |d: &Discount| {
            !d.collection_ids.is_empty() || d.buy_x_get_y.as_ref().is_some_and(|b| !b.buy_collection_ids.is_empty())
        };
        let found = codes.iter().filter_map(|c| c.found.as_ref()).chain(&automatic);
        if found.map(|r| &r.discount).any(by_collection) {
            snap.product_collections = Some(open(&txn, PRODUCT_COLLECTIONS)?);
        }
        let lines = resolve_lines(&snap, req)?;
        let destination = req.address.as_ref().map(Address::destination);
        let rates: Vec<TaxRate> = match &destination {
            Some(_) => all(&txn, TAX_RATES, store)?,
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
            let zones: Vec<ShippingZone> = all(&txn, SHIPPING_ZONES, store)?;
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
