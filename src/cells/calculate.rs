//! The cart/order calculation wired to a cell: resolves variants, discount codes with their usage,
//! automatic discounts, tax rates and the chosen shipping rate from one read transaction, then
//! hands everything to the pure engine in [`crate::domain::pricing::calc`]. Nothing here writes.

use std::cell::OnceCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use redb::{ReadOnlyTable, ReadTransaction};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::cells::Cell;
use crate::cells::discounts::{code_key, customer_key, usage_with};
use crate::cells::stores;
use crate::domain::money::{Currency, Money};
use crate::domain::pricing::WarningCode;
use crate::domain::pricing::calc::{
    CalcInput, CalcLine, Calculation, CodeInput, MAX_LINES, MAX_QUANTITY, ManualDiscount, ResolvedDiscount, Source, calculate,
};
use crate::domain::pricing::discount::{Discount, DiscountStatus, DiscountView, MAX_CODES_PER_REQUEST};
use crate::domain::pricing::shipping::{Address, ShippingZone, rate_for};
use crate::domain::pricing::tax::{TaxRate, TaxSettings};
use crate::domain::product::{Product, Status};
use crate::error::{ApiError, ApiResult, Check};
use crate::memory::Meter;
use crate::storage::codec::decode;
use crate::storage::keys::{Key, prefix_range, trailing_id};
use crate::storage::record::row_key;
use crate::storage::tables::{
    DISCOUNT_AUTOMATIC, DISCOUNT_CODES, DISCOUNT_USAGE, DISCOUNTS, PRODUCT_COLLECTIONS, PRODUCTS, SHIPPING_ZONES, StoreTable,
    TAX_RATES, VARIANTS,
};

/// One line of `POST S/calculate`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CalcLineInput {
    pub variant_id: Uuid,
    /// 1 to 100.
    #[schemars(range(min = 1, max = MAX_QUANTITY))]
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
    #[schemars(length(max = MAX_CODES_PER_REQUEST), inner(length(min = 1, max = 255), pattern(crate::domain::fields::NOT_BLANK)))]
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
    #[schemars(range(min = 1, max = MAX_QUANTITY))]
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
    /// A guest checkout's email: without a customer id, it names the customer whose uses of a
    /// once-per-customer discount count.
    pub guest_email: Option<String>,
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
            guest_email: None,
            channel: body.channel,
            shopper,
            field_prefix: "",
        }
    }
}

/// A code's verdict against a cart: the body of `S/discounts/validate` and one result of
/// `validate-many`.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CodeResult {
    /// The code as entered (trimmed).
    pub code: String,
    pub valid: bool,
    /// The discount the code names; `null` for an unknown code.
    pub discount: Option<DiscountView>,
    /// What the code took (off the goods, or off shipping for a shipping discount).
    pub amount: Money,
    /// Why it did not apply; empty when valid.
    pub reasons: Vec<String>,
    /// The machine-readable reasons (`DISCOUNT_MINIMUM_NOT_MET`, ...), in the order of `reasons`.
    pub reason_codes: Vec<WarningCode>,
}

/// One automatic discount that applies to a cart, with what it takes.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Eligible {
    pub discount: DiscountView,
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
        let discount = found.map(|d| d.view(now));
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
        let by_id: HashMap<Uuid, &Discount> = self.input.automatic.iter().map(|r| (r.discount.id, &*r.discount)).collect();
        self.calculation
            .discount_applications
            .iter()
            .filter(|a| a.source == Source::Automatic)
            .filter_map(|a| {
                let d = a.discount_id.and_then(|id| by_id.get(&id))?;
                Some(Eligible { discount: d.view(now), amount: a.amount })
            })
            .collect()
    }
}

type Table = ReadOnlyTable<&'static [u8], &'static [u8]>;

/// What a calculation needs of a variant; `None` in the cache for a variant the store does not have.
#[derive(Debug, Clone, Copy)]
struct VariantRow {
    product_id: Uuid,
    status: Status,
    currency: Currency,
    price: i64,
    weight_grams: u32,
}

/// Most stores whose pricing rows a cell keeps; the cache is emptied when full.
const PRICING_STORES_MAX: usize = 1_000;
/// Most variants (and, apart, products' collections) kept per store; emptied when full.
const PRICING_ROWS_MAX: usize = 50_000;

/// A code as entered (trimmed) and the customer key its usage is counted for.
type CodeKey = (String, Option<String>);

/// The rows of one store that calculations read over and over, as of one write generation of
/// the store: variants with their product's status and currency, product collections, tax rates,
/// shipping zones and discounts with their usage. Filled as calculations read them; a write to the
/// store makes a new one.
#[derive(Default)]
struct StorePricing {
    generation: u64,
    /// What its rows are estimated to cost (see [`PricingCache`]).
    bytes: AtomicU64,
    variants: RwLock<HashMap<Uuid, Option<VariantRow>>>,
    collections: RwLock<HashMap<Uuid, Arc<Vec<Uuid>>>>,
    tax_rates: OnceLock<Arc<Vec<TaxRate>>>,
    zones: OnceLock<Arc<Vec<ShippingZone>>>,
    /// (code as entered, trimmed; customer key) → the discount it names with its usage.
    codes: RwLock<HashMap<CodeKey, Option<ResolvedDiscount>>>,
    /// Customer key → every automatic discount with its usage, active or not, in key order.
    automatic: RwLock<HashMap<Option<String>, Arc<Vec<ResolvedDiscount>>>>,
}

/// A cell's [`StorePricing`] per store, within a byte budget (the cell's share of the memory
/// budget). Entries are read from a transaction begun after the generation they are tagged with
/// was read, so an entry is never older than its tag, and one whose tag is not the store's
/// current generation is never used. Row sizes are estimated from their types (a map slot, the
/// row, the heap parts of its kind), so the meter's bytes are close to, not exactly, what is held.
pub struct PricingCache {
    stores: Mutex<HashMap<Uuid, Arc<StorePricing>>>,
    pub meter: Meter,
}

impl PricingCache {
    pub fn new(budget: u64) -> PricingCache {
        PricingCache { stores: Mutex::default(), meter: Meter::new(budget) }
    }

    /// The store's entry for `generation`, a new empty one when the kept one is of another.
    fn at(&self, store: Uuid, generation: u64) -> Arc<StorePricing> {
        let Ok(mut stores) = self.stores.lock() else { return Arc::new(StorePricing { generation, ..StorePricing::default() }) };
        if let Some(p) = stores.get(&store)
            && p.generation == generation
        {
            self.meter.hit();
            return p.clone();
        }
        self.meter.miss();
        if let Some(old) = stores.remove(&store) {
            self.meter.change(-(old.bytes.load(Ordering::Relaxed) as i64), -1);
        }
        if stores.len() >= PRICING_STORES_MAX {
            stores.clear();
            self.meter.holds(0, 0);
        }
        let fresh = Arc::new(StorePricing { generation, ..StorePricing::default() });
        stores.insert(store, fresh.clone());
        self.meter.change(0, 1);
        fresh
    }

    /// Whether a row of `cost` bytes may join `p`: it must still be its store's entry and the
    /// row must fit the budget; counted when it does.
    fn admit(&self, store: Uuid, p: &Arc<StorePricing>, cost: usize) -> bool {
        let Ok(stores) = self.stores.lock() else { return false };
        let current = stores.get(&store).is_some_and(|q| Arc::ptr_eq(q, p));
        if !current || self.meter.bytes() + cost as u64 > self.meter.budget() {
            return false;
        }
        p.bytes.fetch_add(cost as u64, Ordering::Relaxed);
        self.meter.change(cost as i64, 0);
        true
    }
}

/// What a cached row of `K → V` costs, with `heap` bytes it owns besides.
fn row_cost<K, V>(heap: usize) -> usize {
    std::mem::size_of::<(K, V)>() + 16 + heap
}

/// A discount's heap parts (codes, conditions, entitled ids), estimated.
const DISCOUNT_HEAP: usize = 256;

fn remember<K: std::hash::Hash + Eq, V>(map: &RwLock<HashMap<K, V>>, key: K, value: V) {
    if let Ok(mut m) = map.write() {
        if m.len() >= PRICING_ROWS_MAX {
            return;
        }
        m.insert(key, value);
    }
}

/// What a calculation reads: the store's cached rows, and for what is not cached one read
/// transaction, begun and each table opened only when first needed (a calculation is a hot read
/// path, and opening a table costs a lookup of its root in the transaction).
struct Snapshot<'c> {
    cell: &'c Cell,
    store: Uuid,
    cache: Arc<StorePricing>,
    txn: OnceCell<ReadTransaction>,
    variants: OnceCell<Table>,
    products: OnceCell<Table>,
    /// Used only when a discount of the calculation looks at collections.
    product_collections: Option<OnceCell<Table>>,
    codes: OnceCell<Table>,
    discounts: OnceCell<Table>,
    usage: OnceCell<Table>,
}

fn open(txn: &ReadTransaction, t: StoreTable) -> ApiResult<Table> {
    Ok(txn.open_table(t.def)?)
}

impl<'c> Snapshot<'c> {
    /// Whether a row of `cost` bytes may be kept in the store's cached rows.
    fn keep(&self, cost: usize) -> bool {
        self.cell.pricing.admit(self.store, &self.cache, cost)
    }

    /// `cache` must be taken before this snapshot's transaction begins (see [`PricingCache`]).
    fn new(cell: &'c Cell, store: Uuid, cache: Arc<StorePricing>) -> Snapshot<'c> {
        Snapshot {
            cell,
            store,
            cache,
            txn: OnceCell::new(),
            variants: OnceCell::new(),
            products: OnceCell::new(),
            product_collections: None,
            codes: OnceCell::new(),
            discounts: OnceCell::new(),
            usage: OnceCell::new(),
        }
    }

    fn txn(&self) -> ApiResult<&ReadTransaction> {
        if let Some(txn) = self.txn.get() {
            return Ok(txn);
        }
        let txn = self.cell.read()?;
        Ok(self.txn.get_or_init(|| txn))
    }

    /// The table in `slot`, opened on first use.
    fn table<'s>(&'s self, slot: &'s OnceCell<Table>, t: StoreTable) -> ApiResult<&'s Table> {
        if let Some(table) = slot.get() {
            return Ok(table);
        }
        let table = open(self.txn()?, t)?;
        Ok(slot.get_or_init(|| table))
    }

    /// A variant with its product's status and currency; `None` for one the store does not have.
    fn variant(&self, id: Uuid) -> ApiResult<Option<VariantRow>> {
        if let Some(row) = self.cache.variants.read().ok().and_then(|m| m.get(&id).copied()) {
            return Ok(row);
        }
        let row = self.read_variant(id)?;
        if self.keep(row_cost::<Uuid, Option<VariantRow>>(0)) {
            remember(&self.cache.variants, id, row);
        }
        Ok(row)
    }

    fn read_variant(&self, id: Uuid) -> ApiResult<Option<VariantRow>> {
        let variants = self.table(&self.variants, VARIANTS)?;
        let Some(v) = variants.get(Key::store(self.store).id(id).bytes())? else { return Ok(None) };
        let product_id = Uuid::from_slice(v.value()).map_err(ApiError::internal)?;
        let products = self.table(&self.products, PRODUCTS)?;
        let Some(row) = products.get(Key::store(self.store).id(product_id).bytes())? else { return Ok(None) };
        let p: Product = decode(row.value())?;
        Ok(p.variants.iter().find(|v| v.id == id).map(|v| VariantRow {
            product_id: p.id,
            status: p.status,
            currency: p.currency,
            price: v.price,
            weight_grams: v.weight_grams.unwrap_or(0),
        }))
    }

    /// The store's tax rates (small, read whole).
    fn tax_rates(&self) -> ApiResult<Arc<Vec<TaxRate>>> {
        if let Some(rates) = self.cache.tax_rates.get() {
            return Ok(rates.clone());
        }
        let rates = Arc::new(all(self.txn()?, TAX_RATES, self.store)?);
        if !self.keep(rates.len() * (std::mem::size_of::<TaxRate>() + 64)) {
            return Ok(rates);
        }
        Ok(self.cache.tax_rates.get_or_init(|| rates).clone())
    }

    /// The store's shipping zones (small, read whole).
    fn zones(&self) -> ApiResult<Arc<Vec<ShippingZone>>> {
        if let Some(zones) = self.cache.zones.get() {
            return Ok(zones.clone());
        }
        let zones = Arc::new(all(self.txn()?, SHIPPING_ZONES, self.store)?);
        if !self.keep(zones.len() * (std::mem::size_of::<ShippingZone>() + 512)) {
            return Ok(zones);
        }
        Ok(self.cache.zones.get_or_init(|| zones).clone())
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

    /// The collections a product is in, from the product → collection index; none when no
    /// discount of the calculation looks at collections.
    fn product_collections(&self, product: Uuid) -> ApiResult<Vec<Uuid>> {
        let Some(cell) = &self.product_collections else { return Ok(Vec::new()) };
        if let Some(ids) = self.cache.collections.read().ok().and_then(|m| m.get(&product).cloned()) {
            return Ok(ids.to_vec());
        }
        let mut ids = Vec::new();
        Snapshot::each(self.table(cell, PRODUCT_COLLECTIONS)?, Key::store(self.store).id(product).bytes(), |k, _| {
            ids.extend(trailing_id(k));
            Ok(())
        })?;
        if self.keep(row_cost::<Uuid, Arc<Vec<Uuid>>>(32 + 16 * ids.len())) {
            remember(&self.cache.collections, product, Arc::new(ids.clone()));
        }
        Ok(ids)
    }

    fn discount(&self, id: Uuid) -> ApiResult<Option<Discount>> {
        let discounts = self.table(&self.discounts, DISCOUNTS)?;
        discounts.get(row_key(self.store, id).as_slice())?.map(|v| decode(v.value())).transpose()
    }

    /// The discount a code names, without regard to case.
    fn find_code(&self, code: &str) -> ApiResult<Option<Discount>> {
        let codes = self.table(&self.codes, DISCOUNT_CODES)?;
        let Some(id) = codes.get(code_key(self.store, code).as_slice())? else { return Ok(None) };
        let id = Uuid::from_slice(id.value()).map_err(ApiError::internal)?;
        self.discount(id)
    }

    /// A discount with its usage counts (total, and by `customer`).
    fn resolve(&self, d: Discount, customer: Option<&str>) -> ApiResult<ResolvedDiscount> {
        let usage_table = self.table(&self.usage, DISCOUNT_USAGE)?;
        let get = |k: &[u8]| -> ApiResult<Option<Vec<u8>>> { Ok(usage_table.get(k)?.map(|v| v.value().to_vec())) };
        let usage = usage_with(get, self.store, d.id, customer)?;
        Ok(ResolvedDiscount { discount: Arc::new(d), usage })
    }

    /// The discount a code (trimmed, 1 to 255 bytes) names, with its usage by `customer`.
    fn code(&self, code: &str, customer: Option<&str>) -> ApiResult<Option<ResolvedDiscount>> {
        let key = (code.to_string(), customer.map(str::to_string));
        if let Some(found) = self.cache.codes.read().ok().and_then(|m| m.get(&key).cloned()) {
            return Ok(found);
        }
        let found = self.find_code(code)?.map(|d| self.resolve(d, customer)).transpose()?;
        if self.keep(row_cost::<CodeKey, Option<ResolvedDiscount>>(key.0.len() + DISCOUNT_HEAP)) {
            remember(&self.cache.codes, key, found.clone());
        }
        Ok(found)
    }

    /// Every automatic discount of the store with its usage by `customer`, in key order, active
    /// or not (the caller filters by the time of the calculation).
    fn automatic(&self, customer: Option<&str>) -> ApiResult<Arc<Vec<ResolvedDiscount>>> {
        let key = customer.map(str::to_string);
        if let Some(all) = self.cache.automatic.read().ok().and_then(|m| m.get(&key).cloned()) {
            return Ok(all);
        }
        let mut ids = Vec::new();
        Snapshot::each(&open(self.txn()?, DISCOUNT_AUTOMATIC)?, Key::store(self.store).bytes(), |k, _| {
            ids.extend(trailing_id(k));
            Ok(())
        })?;
        let mut all = Vec::with_capacity(ids.len());
        for id in ids {
            if let Some(d) = self.discount(id)? {
                all.push(self.resolve(d, customer)?);
            }
        }
        let all = Arc::new(all);
        let heap = all.len() * (std::mem::size_of::<ResolvedDiscount>() + DISCOUNT_HEAP);
        if self.keep(row_cost::<Option<String>, Arc<Vec<ResolvedDiscount>>>(heap)) {
            remember(&self.cache.automatic, key, all.clone());
        }
        Ok(all)
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
    let mut lines = Vec::with_capacity(req.lines.len());
    for (i, l) in req.lines.iter().enumerate() {
        if !(1..=MAX_QUANTITY).contains(&l.quantity) {
            c.fail(&at(i, "quantity"), format!("must be 1 to {MAX_QUANTITY}"));
        }
        let Some(v) = snap.variant(l.variant_id)? else {
            c.fail(&at(i, "variantId"), unknown);
            continue;
        };
        match v.status {
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
        let collection_ids = snap.product_collections(v.product_id)?;
        lines.push(CalcLine {
            variant_id: l.variant_id,
            product_id: v.product_id,
            collection_ids,
            unit_price: Money { amount: v.price, currency: v.currency },
            quantity: l.quantity,
            weight_grams: v.weight_grams,
            // Variants carry no tax exemption yet: every line is taxable.
            taxable: true,
            discount: l.discount.clone(),
        });
    }
    c.finish()?;
    Ok(lines)
}

/// Prices a request from one read transaction; writes nothing. Errors name the request field:
/// an unknown, foreign or archived variant `lineItems[i].variantId`, a quantity outside 1..100
/// `lineItems[i].quantity`, more than 10 codes `discountCodes`, a shipping method not offered
/// for the address and cart `shippingMethodId`.
pub fn price(cell: &Cell, store: Uuid, req: &CalcRequest, now: i64) -> ApiResult<Priced> {
    let pre = req.field_prefix;
    let mut c = Check::new();
    if req.codes.len() > MAX_CODES_PER_REQUEST {
        c.fail(&format!("{pre}discountCodes"), format!("at most {MAX_CODES_PER_REQUEST} codes per request"));
    }
    if req.shipping_method_id.is_some() && req.address.is_none() {
        c.fail("shippingMethodId", "needs a shippingAddress to be offered");
    }
    c.finish()?;
    // Read before the transaction begins: cached rows are never older than their tag.
    let cache = cell.pricing.at(store, cell.writer.generations.get(store));
    let settings = stores::store_settings_cached(cell, store)?;
    let mut snap = Snapshot::new(cell, store, cache);
    // Discounts first: whether any looks at collections decides if lines need theirs.
    let customer = customer_key(req.customer_id, req.guest_email.as_deref());
    let mut codes = Vec::with_capacity(req.codes.len());
    for code in &req.codes {
        let trimmed = code.trim();
        // A code that cannot exist is simply not found; the engine names over-long ones.
        let found = if trimmed.is_empty() || trimmed.len() > 255 { None } else { snap.code(trimmed, customer.as_deref())? };
        codes.push(CodeInput { code: code.clone(), found });
    }
    // Inactive ones would only be dropped by the engine.
    let automatic: Vec<ResolvedDiscount> = snap
        .automatic(customer.as_deref())?
        .iter()
        .filter(|r| r.discount.status(now) == DiscountStatus::Active)
        .cloned()
        .collect();
    let by_collection =
        |d: &Discount| !d.collection_ids.is_empty() || d.buy_x_get_y.as_ref().is_some_and(|b| !b.buy_collection_ids.is_empty());
    let found = codes.iter().filter_map(|c| c.found.as_ref()).chain(&automatic);
    if found.map(|r| &*r.discount).any(by_collection) {
        snap.product_collections = Some(OnceCell::new());
    }
    let lines = resolve_lines(&snap, req)?;
    let destination = req.address.as_ref().map(Address::destination);
    let rates = match &destination {
        Some(_) => snap.tax_rates()?,
        None => Arc::default(),
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
        let zones = snap.zones()?;
        let (weight, subtotal) = input.shipping_basis();
        let chosen = rate_for(&zones, dest, weight, subtotal, settings.currency, method.trim());
        input.shipping_rate =
            Some(chosen.ok_or_else(|| ApiError::field("shippingMethodId", "is not offered for this address and cart"))?);
    }
    let calculation = calculate(&input)?;
    Ok(Priced { input, calculation })
}
