//! Products and variants: the stored records, the request bodies, validation and the JSON views.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::domain::fields::{self, check_line, check_text, double_option};
use crate::domain::money::{Currency, Money};
use crate::domain::time::rfc3339;
use crate::error::{ApiResult, Check};

/// Most options a product has (each with its values), as in the major platforms.
pub const MAX_OPTIONS: usize = 3;
/// Most variants of one product.
pub const MAX_VARIANTS: usize = 100;
/// Largest price accepted, in minor units: far above any real price, far below i64 overflow.
pub const MAX_AMOUNT: i64 = 1_000_000_000_000_000;
/// A variant's stock lies within ± this many units.
pub const MAX_STOCK: i64 = 1_000_000_000;

/// Within `0..=MAX_STOCK`: a level is never below zero.
fn in_stock_range(q: i64) -> bool {
    (0..=MAX_STOCK).contains(&q)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Status {
    Draft,
    Active,
    Archived,
}

impl Status {
    pub const NAMES: &'static [&'static str] = &["DRAFT", "ACTIVE", "ARCHIVED"];

    /// Parses a status in any case (`active`, `ACTIVE`).
    pub fn parse(s: &str) -> Option<Status> {
        match s.to_ascii_uppercase().as_str() {
            "DRAFT" => Some(Status::Draft),
            "ACTIVE" => Some(Status::Active),
            "ARCHIVED" => Some(Status::Archived),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        Status::NAMES[self as usize]
    }
}

impl crate::domain::Enumerated for Status {
    const NAMES: &'static [&'static str] = Status::NAMES;
    fn name(self) -> &'static str {
        Status::name(self)
    }
}

/// A product option such as Size with its values.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ProductOption {
    #[schemars(length(min = 1, max = 255), pattern(fields::LINE))]
    pub name: String,
    #[schemars(length(min = 1))]
    pub values: Vec<String>,
}

/// A stored product, variants inline.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Product {
    pub id: Uuid,
    pub title: String,
    pub description: String,
    pub vendor: String,
    pub product_type: String,
    pub tags: Vec<String>,
    pub handle: String,
    pub status: Status,
    pub category_id: Option<String>,
    pub options: Vec<ProductOption>,
    pub variants: Vec<Variant>,
    pub currency: Currency,
    pub created_at: i64,
    pub updated_at: i64,
}

/// A stored variant. Prices are minor units of the product's currency.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Variant {
    pub id: Uuid,
    pub title: String,
    pub sku: Option<String>,
    pub barcode: Option<String>,
    pub price: i64,
    pub compare_at_price: Option<i64>,
    pub weight_grams: Option<u32>,
    pub option_values: Vec<String>,
    pub inventory_tracked: bool,
    /// Units at the store's default location.
    pub inventory_quantity: i64,
    pub created_at: i64,
    pub updated_at: i64,
}

impl Product {
    /// The product's price: the lowest variant price (what "from" prices show).
    pub fn price(&self) -> i64 {
        self.variants.iter().map(|v| v.price).min().unwrap_or(0)
    }

    /// Units across variants, for the `inventory` sort; saturating, so no stored value wraps it.
    pub fn inventory(&self) -> i64 {
        self.variants.iter().fold(0i64, |sum, v| sum.saturating_add(v.inventory_quantity))
    }
}

/// `POST S/products`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateProduct {
    #[schemars(length(min = 1, max = 255), pattern(fields::LINE))]
    pub title: String,
    /// The price of the default variant (when `variants` is empty).
    pub price: Option<Money>,
    /// DRAFT (default), ACTIVE or ARCHIVED, any case.
    #[serde(default)]
    #[schemars(schema_with = "status_schema")]
    pub status: Option<String>,
    #[serde(default)]
    #[schemars(length(max = 65535), pattern(fields::TEXT_OR_EMPTY))]
    pub description: String,
    #[serde(default)]
    #[schemars(length(max = 255), pattern(fields::LINE_OR_EMPTY))]
    pub vendor: String,
    #[serde(default)]
    #[schemars(length(max = 255), pattern(fields::LINE_OR_EMPTY))]
    pub product_type: String,
    #[serde(default)]
    #[schemars(length(max = 250), inner(length(min = 1, max = 255), pattern(fields::LINE)))]
    pub tags: Vec<String>,
    #[schemars(length(max = 255), pattern(HANDLE))]
    pub handle: Option<String>,
    pub category_id: Option<String>,
    #[serde(default)]
    #[schemars(length(max = MAX_OPTIONS))]
    pub options: Vec<ProductOption>,
    #[serde(default)]
    pub variants: Vec<VariantInput>,
}

/// `PATCH S/products/{id}`: every field optional.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UpdateProduct {
    #[schemars(length(min = 1, max = 255), pattern(fields::LINE))]
    pub title: Option<String>,
    /// Sets the price of a single-variant product.
    pub price: Option<Money>,
    #[serde(default)]
    #[schemars(schema_with = "status_schema")]
    pub status: Option<String>,
    #[schemars(length(max = 65535), pattern(fields::TEXT_OR_EMPTY))]
    pub description: Option<String>,
    #[schemars(length(max = 255), pattern(fields::LINE_OR_EMPTY))]
    pub vendor: Option<String>,
    #[schemars(length(max = 255), pattern(fields::LINE_OR_EMPTY))]
    pub product_type: Option<String>,
    #[schemars(length(max = 250), inner(length(min = 1, max = 255), pattern(fields::LINE)))]
    pub tags: Option<Vec<String>>,
    #[schemars(length(max = 255), pattern(HANDLE))]
    pub handle: Option<String>,
    /// `null` clears the category.
    #[serde(default, deserialize_with = "double_option")]
    #[schemars(with = "Option<String>")]
    pub category_id: Option<Option<String>>,
}

/// A variant in `POST S/products` or `POST S/products/{id}/variants`.
#[derive(Debug, Default, Clone, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct VariantInput {
    #[schemars(length(max = 255), pattern(fields::LINE_OR_EMPTY))]
    pub title: Option<String>,
    #[schemars(length(max = 255), pattern(fields::LINE_OR_EMPTY))]
    pub sku: Option<String>,
    #[schemars(length(max = 255), pattern(fields::LINE_OR_EMPTY))]
    pub barcode: Option<String>,
    pub price: Option<Money>,
    pub compare_at_price: Option<Money>,
    pub weight_grams: Option<u32>,
    #[serde(default)]
    pub option_values: Vec<String>,
    #[serde(default)]
    pub inventory_tracked: bool,
    #[serde(default)]
    #[schemars(range(min = 0, max = MAX_STOCK))]
    pub inventory_quantity: i64,
}

/// `PATCH S/products/{id}/variants/{variantId}`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UpdateVariant {
    #[schemars(length(min = 1, max = 255), pattern(fields::LINE))]
    pub title: Option<String>,
    #[schemars(length(max = 255), pattern(fields::LINE_OR_EMPTY))]
    pub sku: Option<String>,
    #[schemars(length(max = 255), pattern(fields::LINE_OR_EMPTY))]
    pub barcode: Option<String>,
    pub price: Option<Money>,
    #[serde(default, deserialize_with = "double_option")]
    #[schemars(with = "Option<Money>")]
    pub compare_at_price: Option<Option<Money>>,
    pub weight_grams: Option<u32>,
    pub option_values: Option<Vec<String>>,
    pub inventory_tracked: Option<bool>,
    #[schemars(range(min = 0, max = MAX_STOCK))]
    pub inventory_quantity: Option<i64>,
}

/// The document's schema of a product `status` field ([`Status::parse`], any case).
fn status_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    fields::or_null(fields::one_of(Status::NAMES, "read in any case"))
}

fn check_money(c: &mut Check, field: &str, m: &Money, currency: Currency) {
    if m.amount < 0 || m.amount > MAX_AMOUNT {
        c.fail(&format!("{field}.amount"), format!("must be between 0 and {MAX_AMOUNT} minor units"));
    }
    if m.currency != currency {
        c.fail(&format!("{field}.currency"), format!("must be the store currency {}", currency.code()));
    }
}

fn check_tags(c: &mut Check, tags: &[String]) {
    c.ensure(tags.len() <= 250, "tags", "at most 250 tags");
    for (i, t) in tags.iter().enumerate() {
        check_line(c, &format!("tags[{i}]"), t, 255, true);
    }
}

/// [`valid_handle`] in the document (with at most 255 characters).
pub const HANDLE: &str = "^[a-z0-9]+(-[a-z0-9]+)*$";

/// A handle is a URL slug: lower-case letters, digits and single dashes.
pub fn valid_handle(h: &str) -> bool {
    !h.is_empty()
        && h.len() <= 255
        && h.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !h.starts_with('-')
        && !h.ends_with('-')
        && !h.contains("--")
}

/// Sort keys longer than this are cut: order among such titles falls back to the id.
const TITLE_KEY_BYTES: usize = 64;

/// The leading bytes of a lower-cased title that sort it in a list key (products, collections).
pub fn title_key(title: &str) -> String {
    let lower = title.to_lowercase();
    let mut end = lower.len().min(TITLE_KEY_BYTES);
    while !lower.is_char_boundary(end) {
        end = end.saturating_sub(1);
    }
    lower[..end].to_string()
}

/// What a product's lists sort it by, kept apart from the record (the cell's `product_sorts` rows) so that
/// building a list reads these few fields, not every product whole.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProductSorts {
    pub created_at: i64,
    pub updated_at: i64,
    /// [`title_key`] of the title.
    pub title: String,
    pub price: i64,
    pub inventory: i64,
    pub status: Status,
}

impl ProductSorts {
    pub fn of(p: &Product) -> ProductSorts {
        ProductSorts {
            created_at: p.created_at,
            updated_at: p.updated_at,
            title: title_key(&p.title),
            price: p.price(),
            inventory: p.inventory(),
            status: p.status,
        }
    }
}

/// A handle from a title: `Blue T-Shirt (XL)` → `blue-t-shirt-xl`.
pub fn slugify(title: &str) -> String {
    let mut out = String::new();
    for ch in title.chars().flat_map(char::to_lowercase) {
        if ch.is_ascii_alphanumeric() {
            out.push(ch);
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
        if out.len() >= 200 {
            break;
        }
    }
    let out = out.trim_end_matches('-').to_string();
    if out.is_empty() { "product".to_string() } else { out }
}

fn check_variant(c: &mut Check, at: &str, v: &VariantInput, options: &[ProductOption], currency: Currency) {
    if let Some(t) = &v.title {
        check_line(c, &format!("{at}.title"), t, 255, false);
    }
    for (name, val) in [("sku", &v.sku), ("barcode", &v.barcode)] {
        if let Some(s) = val {
            check_line(c, &format!("{at}.{name}"), s, 255, false);
        }
    }
    match &v.price {
        Some(p) => check_money(c, &format!("{at}.price"), p, currency),
        None => c.fail(&format!("{at}.price"), "is required"),
    }
    if let Some(p) = &v.compare_at_price {
        check_money(c, &format!("{at}.compareAtPrice"), p, currency);
    }
    c.ensure(in_stock_range(v.inventory_quantity), &format!("{at}.inventoryQuantity"), "must be 0 to 1000000000");
    check_option_values(c, &format!("{at}.optionValues"), &v.option_values, options);
}

fn check_option_values(c: &mut Check, field: &str, values: &[String], options: &[ProductOption]) {
    if options.is_empty() {
        c.ensure(values.is_empty(), field, "the product has no options");
        return;
    }
    if values.len() != options.len() {
        c.fail(field, format!("must give one value for each of the {} options", options.len()));
        return;
    }
    for (o, v) in options.iter().zip(values) {
        if !o.values.iter().any(|x| x == v) {
            c.fail(field, format!("{v:?} is not a value of option {:?}", o.name));
        }
    }
}

/// Validates a create request against the store currency.
pub fn validate_create(p: &CreateProduct, currency: Currency) -> ApiResult<()> {
    let mut c = Check::new();
    check_line(&mut c, "title", &p.title, 255, true);
    check_text(&mut c, "description", &p.description, 65_535, false);
    check_line(&mut c, "vendor", &p.vendor, 255, false);
    check_line(&mut c, "productType", &p.product_type, 255, false);
    check_tags(&mut c, &p.tags);
    if let Some(s) = &p.status {
        c.ensure(Status::parse(s).is_some(), "status", "must be DRAFT, ACTIVE or ARCHIVED");
    }
    if let Some(h) = &p.handle {
        c.ensure(valid_handle(h), "handle", "must be lower-case letters, digits and single dashes");
    }
    c.ensure(p.options.len() <= MAX_OPTIONS, "options", format!("at most {MAX_OPTIONS} options"));
    for (i, o) in p.options.iter().enumerate() {
        check_line(&mut c, &format!("options[{i}].name"), &o.name, 255, true);
        c.ensure(!o.values.is_empty(), &format!("options[{i}].values"), "must not be empty");
        if p.options[..i].iter().any(|x| x.name.eq_ignore_ascii_case(&o.name)) {
            c.fail(&format!("options[{i}].name"), "is used twice");
        }
    }
    if p.variants.is_empty() {
        match &p.price {
            Some(m) => check_money(&mut c, "price", m, currency),
            None => c.fail("price", "is required when no variants are given"),
        }
        c.ensure(p.options.is_empty(), "variants", "are required when options are given");
    } else {
        c.ensure(p.variants.len() <= MAX_VARIANTS, "variants", format!("at most {MAX_VARIANTS} variants"));
        for (i, v) in p.variants.iter().enumerate() {
            let mut v = v.clone();
            if v.price.is_none() {
                v.price = p.price;
            }
            check_variant(&mut c, &format!("variants[{i}]"), &v, &p.options, currency);
            if !v.option_values.is_empty() && p.variants[..i].iter().any(|x| x.option_values == v.option_values) {
                c.fail(&format!("variants[{i}].optionValues"), "another variant has the same option values");
            }
        }
    }
    c.finish()
}

/// Validates an update against the product as stored.
pub fn validate_update(u: &UpdateProduct, current: &Product) -> ApiResult<()> {
    let mut c = Check::new();
    if let Some(t) = &u.title {
        check_line(&mut c, "title", t, 255, true);
    }
    if let Some(d) = &u.description {
        check_text(&mut c, "description", d, 65_535, false);
    }
    if let Some(v) = &u.vendor {
        check_line(&mut c, "vendor", v, 255, false);
    }
    if let Some(t) = &u.product_type {
        check_line(&mut c, "productType", t, 255, false);
    }
    if let Some(tags) = &u.tags {
        check_tags(&mut c, tags);
    }
    if let Some(s) = &u.status {
        c.ensure(Status::parse(s).is_some(), "status", "must be DRAFT, ACTIVE or ARCHIVED");
    }
    if let Some(h) = &u.handle {
        c.ensure(valid_handle(h), "handle", "must be lower-case letters, digits and single dashes");
    }
    if let Some(p) = &u.price {
        check_money(&mut c, "price", p, current.currency);
        c.ensure(current.variants.len() == 1, "price", "set the price on each variant of a product with several");
    }
    c.finish()
}

/// The title of a variant given none when its product has no options.
pub const DEFAULT_VARIANT_TITLE: &str = "Default";

/// Builds the new variant `id`, made at `now`, from validated input.
pub fn new_variant(v: &VariantInput, fallback_price: Option<Money>, options: &[ProductOption], id: Uuid, now: i64) -> Variant {
    let title = v
        .title
        .clone()
        .filter(|t| !t.trim().is_empty())
        .unwrap_or_else(|| if options.is_empty() { DEFAULT_VARIANT_TITLE.to_string() } else { v.option_values.join(" / ") });
    Variant {
        id,
        title: title.trim().to_string(),
        sku: v.sku.clone().map(|s| s.trim().to_string()).filter(|s| !s.is_empty()),
        barcode: v.barcode.clone().map(|s| s.trim().to_string()).filter(|s| !s.is_empty()),
        price: v.price.or(fallback_price).map(|m| m.amount).unwrap_or(0),
        compare_at_price: v.compare_at_price.map(|m| m.amount),
        weight_grams: v.weight_grams,
        option_values: v.option_values.clone(),
        inventory_tracked: v.inventory_tracked,
        inventory_quantity: v.inventory_quantity,
        created_at: now,
        updated_at: now,
    }
}

/// Validates a variant added to an existing product.
pub fn validate_new_variant(v: &VariantInput, product: &Product) -> ApiResult<()> {
    let mut c = Check::new();
    check_variant(&mut c, "body", v, &product.options, product.currency);
    c.ensure(product.variants.len() < MAX_VARIANTS, "variants", format!("a product has at most {MAX_VARIANTS} variants"));
    if !v.option_values.is_empty() && product.variants.iter().any(|x| x.option_values == v.option_values) {
        c.fail("optionValues", "another variant has the same option values");
    }
    c.finish()
}

/// Validates a variant update and applies it to a copy.
pub fn apply_variant_update(u: &UpdateVariant, product: &Product, variant: &Variant, now: i64) -> ApiResult<Variant> {
    let mut c = Check::new();
    let mut v = variant.clone();
    if let Some(t) = &u.title {
        check_line(&mut c, "title", t, 255, true);
        v.title = t.trim().to_string();
    }
    if let Some(s) = &u.sku {
        check_line(&mut c, "sku", s, 255, false);
        v.sku = Some(s.trim().to_string()).filter(|s| !s.is_empty());
    }
    if let Some(s) = &u.barcode {
        check_line(&mut c, "barcode", s, 255, false);
        v.barcode = Some(s.trim().to_string()).filter(|s| !s.is_empty());
    }
    if let Some(p) = &u.price {
        check_money(&mut c, "price", p, product.currency);
        v.price = p.amount;
    }
    if let Some(cap) = &u.compare_at_price {
        if let Some(p) = cap {
            check_money(&mut c, "compareAtPrice", p, product.currency);
        }
        v.compare_at_price = cap.map(|m| m.amount);
    }
    if let Some(w) = u.weight_grams {
        v.weight_grams = Some(w);
    }
    if let Some(values) = &u.option_values {
        check_option_values(&mut c, "optionValues", values, &product.options);
        if product.variants.iter().any(|x| x.id != v.id && &x.option_values == values) {
            c.fail("optionValues", "another variant has the same option values");
        }
        v.option_values = values.clone();
    }
    if let Some(t) = u.inventory_tracked {
        v.inventory_tracked = t;
    }
    if let Some(q) = u.inventory_quantity {
        c.ensure(in_stock_range(q), "inventoryQuantity", "must be 0 to 1000000000");
        v.inventory_quantity = q;
    }
    c.finish()?;
    v.updated_at = now;
    Ok(v)
}

/// A product as the API shows it.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProductView<'a> {
    pub id: Uuid,
    pub title: &'a str,
    pub description: &'a str,
    pub vendor: &'a str,
    pub product_type: &'a str,
    pub tags: &'a [String],
    pub handle: &'a str,
    /// `DRAFT`, `ACTIVE` or `ARCHIVED`.
    pub status: &'static str,
    pub category_id: Option<&'a str>,
    pub price: Money,
    pub options: &'a [ProductOption],
    pub variants: Vec<VariantView<'a>>,
    pub total_inventory: i64,
    pub created_at: String,
    pub updated_at: String,
}

/// A variant as the API shows it.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VariantView<'a> {
    pub id: Uuid,
    pub product_id: Uuid,
    pub title: &'a str,
    pub sku: Option<&'a str>,
    pub barcode: Option<&'a str>,
    pub price: Money,
    pub compare_at_price: Option<Money>,
    pub weight_grams: Option<u32>,
    pub option_values: &'a [String],
    pub inventory_tracked: bool,
    pub inventory_quantity: i64,
    pub position: usize,
    pub created_at: String,
    pub updated_at: String,
}

impl Product {
    pub fn view(&self) -> ProductView<'_> {
        ProductView {
            id: self.id,
            title: &self.title,
            description: &self.description,
            vendor: &self.vendor,
            product_type: &self.product_type,
            tags: &self.tags,
            handle: &self.handle,
            status: self.status.name(),
            category_id: self.category_id.as_deref(),
            price: Money { amount: self.price(), currency: self.currency },
            options: &self.options,
            variants: self.variants.iter().enumerate().map(|(i, v)| self.variant_view(v, i)).collect(),
            total_inventory: self.inventory(),
            created_at: rfc3339(self.created_at),
            updated_at: rfc3339(self.updated_at),
        }
    }

    pub fn variant_view<'a>(&'a self, v: &'a Variant, position: usize) -> VariantView<'a> {
        let money = |amount| Money { amount, currency: self.currency };
        VariantView {
            id: v.id,
            product_id: self.id,
            title: &v.title,
            sku: v.sku.as_deref(),
            barcode: v.barcode.as_deref(),
            price: money(v.price),
            compare_at_price: v.compare_at_price.map(money),
            weight_grams: v.weight_grams,
            option_values: &v.option_values,
            inventory_tracked: v.inventory_tracked,
            inventory_quantity: v.inventory_quantity,
            position: position.saturating_add(1),
            created_at: rfc3339(v.created_at),
            updated_at: rfc3339(v.updated_at),
        }
    }
}

#[cfg(test)]
impl Product {
    /// A product of two sized variants with SKUs, for tests.
    pub fn sample() -> Product {
        let options = vec![ProductOption { name: "Size".into(), values: vec!["S".into(), "M".into()] }];
        let variant = |i: u128, size: &str| {
            let input = VariantInput { option_values: vec![size.into()], sku: Some(format!("SKU-{size}")), ..Default::default() };
            let mut v = new_variant(&input, None, &options, Uuid::from_u128(i), 1);
            v.price = 1000;
            v
        };
        Product {
            id: Uuid::from_u128(1),
            title: "Garden Chair".into(),
            description: "Folds flat".into(),
            vendor: "Acme".into(),
            product_type: "Furniture".into(),
            tags: vec!["outdoor".into()],
            handle: "garden-chair".into(),
            status: Status::Active,
            category_id: None,
            variants: vec![variant(2, "S"), variant(3, "M")],
            options,
            currency: Currency::parse("USD").unwrap(),
            created_at: 1,
            updated_at: 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usd(amount: i64) -> Money {
        Money { amount, currency: Currency::parse("USD").unwrap() }
    }

    #[test]
    fn slugs_and_handles() {
        assert_eq!(slugify("Blue T-Shirt (XL)"), "blue-t-shirt-xl");
        assert_eq!(slugify("¡¡¡"), "product");
        assert!(valid_handle("blue-t-shirt"));
        assert!(!valid_handle("Blue"));
        assert!(!valid_handle("a--b"));
    }

    #[test]
    fn create_reports_every_bad_field() {
        let usd_c = Currency::parse("USD").unwrap();
        let p = CreateProduct {
            title: " ".into(),
            price: Some(Money { amount: -1, currency: Currency::parse("EUR").unwrap() }),
            status: Some("live".into()),
            ..Default::default()
        };
        let e = validate_create(&p, usd_c).unwrap_err();
        let fields: Vec<_> = e.fields.iter().map(|f| f.field.as_str()).collect();
        assert_eq!(fields, ["title", "status", "price.amount", "price.currency"]);
    }

    #[test]
    fn variants_must_match_options() {
        let usd_c = Currency::parse("USD").unwrap();
        let p = CreateProduct {
            title: "Shirt".into(),
            options: vec![ProductOption { name: "Size".into(), values: vec!["S".into(), "M".into()] }],
            variants: vec![
                VariantInput { price: Some(usd(100)), option_values: vec!["S".into()], ..Default::default() },
                VariantInput { price: Some(usd(100)), option_values: vec!["S".into()], ..Default::default() },
                VariantInput { price: Some(usd(100)), option_values: vec!["XL".into()], ..Default::default() },
            ],
            ..Default::default()
        };
        let e = validate_create(&p, usd_c).unwrap_err();
        let fields: Vec<_> = e.fields.iter().map(|f| f.field.as_str()).collect();
        assert_eq!(fields, ["variants[1].optionValues", "variants[2].optionValues"]);
    }
}
