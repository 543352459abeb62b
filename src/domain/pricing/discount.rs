//! Discounts: code and automatic discounts, their value, target, requirements, limits, dates and
//! combination rules; validation of the create body and the checks that need no cart.
//!
//! One flat record serves the body, storage and the engine: enums are plain names and the variant
//! data lives in ordinary fields, because the record codec (bincode) cannot read tagged enums.

use crate::domain::Enumerated;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::allocation::BASIS;
use super::{Warning, WarningCode};
use crate::domain::product::MAX_AMOUNT;
use crate::domain::time::{parse_rfc3339, rfc3339};
use crate::error::{ApiResult, Check};

/// Most codes in one calculation or validate-many request.
pub const MAX_CODES_PER_REQUEST: usize = 10;
/// Most product or collection ids in one discount.
pub const MAX_TARGET_IDS: usize = 250;
/// Most customer ids in one discount.
pub const MAX_CUSTOMER_IDS: usize = 1000;
/// Most sales channels one discount is limited to.
pub const MAX_CHANNELS: usize = 20;

/// What the discount gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum ValueType {
    /// `value` basis points off (1..=10 000; 10 000 = 100 %).
    Percentage,
    /// `value` minor units off, once per order (spread over the eligible lines).
    FixedAmount,
    /// Shipping costs nothing.
    FreeShipping,
    /// Buy `buyQuantity` eligible items, get `getQuantity` target items `value` basis points off.
    BuyXGetY,
}

/// What the discount applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum TargetType {
    /// The order subtotal after product discounts.
    Order,
    /// Lines of the products in `productIds`.
    Products,
    /// Lines of products in any collection of `collectionIds`.
    Collections,
    /// The shipping cost.
    Shipping,
}

/// The Shopify-like class that decides the stage a discount applies in and what it combines with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum DiscountClass {
    Product,
    Order,
    Shipping,
}

/// Status derived from the disabled flag and the dates: it is never stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum DiscountStatus {
    Active,
    Scheduled,
    Expired,
    Disabled,
}

/// Which classes of discounts this one may be applied together with.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CombinesWith {
    #[serde(default)]
    pub order_discounts: bool,
    #[serde(default)]
    pub product_discounts: bool,
    #[serde(default)]
    pub shipping_discounts: bool,
}

impl CombinesWith {
    /// Whether a discount of `class` may apply alongside.
    pub fn allows(&self, class: DiscountClass) -> bool {
        match class {
            DiscountClass::Order => self.order_discounts,
            DiscountClass::Product => self.product_discounts,
            DiscountClass::Shipping => self.shipping_discounts,
        }
    }
}

/// The kind of minimum a cart must reach.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum MinimumKind {
    #[default]
    None,
    /// `value` minor units of subtotal.
    Subtotal,
    /// `value` items.
    Quantity,
}

/// `{type: none | subtotal | quantity, value}`. Measured on the eligible lines for product discounts
/// and on the whole cart otherwise, after line-level discounts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MinimumRequirement {
    #[serde(rename = "type", default)]
    pub kind: MinimumKind,
    #[serde(default)]
    pub value: i64,
}

/// Who may use the discount.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum EligibilityKind {
    #[default]
    All,
    /// Only the customers in `customerIds`.
    Specific,
}

/// `{type: all | specific, customerIds}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CustomerEligibility {
    #[serde(rename = "type", default)]
    pub kind: EligibilityKind,
    #[serde(default)]
    pub customer_ids: Vec<Uuid>,
}

/// The buy side and limits of a buy-X-get-Y discount; the "get" items are the discount's target
/// (products or collections) and `value` is the basis points off each of them (10 000 = free).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BuyXGetY {
    /// Items to buy for one use.
    pub buy_quantity: u32,
    /// Items bought count when their product is one of these...
    #[serde(default)]
    pub buy_product_ids: Vec<Uuid>,
    /// ...or is in one of these collections.
    #[serde(default)]
    pub buy_collection_ids: Vec<Uuid>,
    /// Target items discounted per use.
    pub get_quantity: u32,
    /// Most uses in one order; unlimited when absent.
    pub max_uses_per_order: Option<u32>,
}

/// `POST S/discounts`: a code discount when `code` is given, an automatic discount otherwise.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DiscountInput {
    pub title: String,
    /// Letters, digits, `-` and `_`; matched without regard to case.
    pub code: Option<String>,
    pub value_type: ValueType,
    /// Basis points (percentage, buy-X-get-Y) or minor units (fixed amount); 0 for free shipping.
    #[serde(default)]
    pub value: i64,
    /// Defaults to `shipping` for free shipping and `order` otherwise; buy-X-get-Y needs `products`
    /// or `collections` (the items to get).
    pub target: Option<TargetType>,
    #[serde(default)]
    pub product_ids: Vec<Uuid>,
    #[serde(default)]
    pub collection_ids: Vec<Uuid>,
    pub buy_x_get_y: Option<BuyXGetY>,
    #[serde(default)]
    pub minimum: MinimumRequirement,
    #[serde(default)]
    pub customers: CustomerEligibility,
    /// Total uses across all orders.
    pub usage_limit: Option<u32>,
    #[serde(default)]
    pub once_per_customer: bool,
    /// RFC 3339; now when absent.
    pub starts_at: Option<String>,
    /// RFC 3339; never ends when absent.
    pub ends_at: Option<String>,
    #[serde(default)]
    pub disabled: bool,
    #[serde(default)]
    pub combines_with: CombinesWith,
    /// Sales channels (e.g. `online_store`, `pos`) the discount is limited to; every channel when
    /// empty. Names are 1 to 64 letters, digits, `-` or `_`, matched without regard to case.
    #[serde(default)]
    pub channels: Vec<String>,
}

/// The status a discount disabled or not, running from `starts_at` to `ends_at` (exclusive), has
/// at `now`.
pub fn status_at(disabled: bool, starts_at: i64, ends_at: Option<i64>, now: i64) -> DiscountStatus {
    if disabled {
        DiscountStatus::Disabled
    } else if now < starts_at {
        DiscountStatus::Scheduled
    } else if ends_at.is_some_and(|end| now >= end) {
        DiscountStatus::Expired
    } else {
        DiscountStatus::Active
    }
}

/// A stored discount. Amounts are minor units of the store currency; dates are Unix milliseconds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Discount {
    pub id: Uuid,
    pub title: String,
    pub code: Option<String>,
    pub value_type: ValueType,
    pub value: i64,
    pub target: TargetType,
    pub product_ids: Vec<Uuid>,
    pub collection_ids: Vec<Uuid>,
    pub buy_x_get_y: Option<BuyXGetY>,
    pub minimum: MinimumRequirement,
    pub customers: CustomerEligibility,
    pub usage_limit: Option<u32>,
    pub once_per_customer: bool,
    pub starts_at: i64,
    pub ends_at: Option<i64>,
    pub disabled: bool,
    pub combines_with: CombinesWith,
    /// Lower-cased sales channels; every channel when empty.
    pub channels: Vec<String>,
    pub created_at: i64,
    pub updated_at: i64,
}

/// How often a discount has been used, as the caller counts it from orders (usage is consumed only
/// when an order is created, never by a calculation).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DiscountUsage {
    /// Uses across all orders.
    pub total: u32,
    /// Uses by the customer of this calculation (by id or checkout email, as the caller identifies them).
    pub by_customer: u32,
}

fn valid_code(code: &str) -> bool {
    !code.is_empty() && code.len() <= 255 && code.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

fn valid_channel(channel: &str) -> bool {
    !channel.is_empty() && channel.len() <= 64 && channel.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

fn check_ids(c: &mut Check, field: &str, ids: &[Uuid], max: usize, required: bool) {
    if required && ids.is_empty() {
        c.fail(field, "must not be empty");
    }
    c.ensure(ids.len() <= max, field, format!("at most {max} ids"));
}

impl DiscountInput {
    /// The target once defaults are applied.
    fn effective_target(&self) -> TargetType {
        self.target.unwrap_or(if self.value_type == ValueType::FreeShipping { TargetType::Shipping } else { TargetType::Order })
    }

    /// Validates the body, reporting every invalid field at once; returns the dates in milliseconds,
    /// the start being `default_start` when the body gives none.
    pub fn validate(&self, default_start: i64) -> ApiResult<(i64, Option<i64>)> {
        let mut c = Check::new();
        let title = self.title.trim();
        c.ensure(!title.is_empty() && title.chars().count() <= 255, "title", "must be 1 to 255 characters");
        if let Some(code) = &self.code {
            c.ensure(valid_code(code.trim()), "code", "must be 1 to 255 letters, digits, '-' or '_'");
        }
        let target = self.effective_target();
        match self.value_type {
            ValueType::Percentage => {
                c.ensure((1..=BASIS).contains(&self.value), "value", "must be 1 to 10000 basis points");
            }
            ValueType::FixedAmount => {
                c.ensure((1..=MAX_AMOUNT).contains(&self.value), "value", format!("must be 1 to {MAX_AMOUNT} minor units"));
            }
            ValueType::FreeShipping => {
                c.ensure(self.value == 0, "value", "must be 0 or absent for free shipping");
                c.ensure(target == TargetType::Shipping, "target", "free shipping applies to shipping");
            }
            ValueType::BuyXGetY => {
                c.ensure((1..=BASIS).contains(&self.value), "value", "must be 1 to 10000 basis points off the items to get");
                c.ensure(
                    matches!(target, TargetType::Products | TargetType::Collections),
                    "target",
                    "buy-X-get-Y needs products or collections: the items to get",
                );
            }
        }
        match (&self.buy_x_get_y, self.value_type) {
            (Some(b), ValueType::BuyXGetY) => {
                c.ensure((1..=1000).contains(&b.buy_quantity), "buyXGetY.buyQuantity", "must be 1 to 1000");
                c.ensure((1..=1000).contains(&b.get_quantity), "buyXGetY.getQuantity", "must be 1 to 1000");
                c.ensure(
                    !b.buy_product_ids.is_empty() || !b.buy_collection_ids.is_empty(),
                    "buyXGetY",
                    "needs buyProductIds or buyCollectionIds",
                );
                check_ids(&mut c, "buyXGetY.buyProductIds", &b.buy_product_ids, MAX_TARGET_IDS, false);
                check_ids(&mut c, "buyXGetY.buyCollectionIds", &b.buy_collection_ids, MAX_TARGET_IDS, false);
                c.ensure(b.max_uses_per_order != Some(0), "buyXGetY.maxUsesPerOrder", "must be at least 1");
            }
            (None, ValueType::BuyXGetY) => c.fail("buyXGetY", "is required for buy-X-get-Y"),
            (Some(_), _) => c.fail("buyXGetY", "is only for valueType buyXGetY"),
            (None, _) => {}
        }
        check_ids(&mut c, "productIds", &self.product_ids, MAX_TARGET_IDS, target == TargetType::Products);
        check_ids(&mut c, "collectionIds", &self.collection_ids, MAX_TARGET_IDS, target == TargetType::Collections);
        match self.minimum.kind {
            MinimumKind::None => c.ensure(self.minimum.value == 0, "minimum.value", "must be 0 without a minimum"),
            MinimumKind::Subtotal => c.ensure(
                (1..=MAX_AMOUNT).contains(&self.minimum.value),
                "minimum.value",
                format!("must be 1 to {MAX_AMOUNT} minor units"),
            ),
            MinimumKind::Quantity => {
                c.ensure((1..=1_000_000).contains(&self.minimum.value), "minimum.value", "must be 1 to 1000000 items")
            }
        };
        let specific = self.customers.kind == EligibilityKind::Specific;
        check_ids(&mut c, "customers.customerIds", &self.customers.customer_ids, MAX_CUSTOMER_IDS, specific);
        c.ensure(specific || self.customers.customer_ids.is_empty(), "customers.customerIds", "only with type specific");
        c.ensure(self.usage_limit != Some(0), "usageLimit", "must be at least 1");
        c.ensure(self.channels.len() <= MAX_CHANNELS, "channels", format!("at most {MAX_CHANNELS} channels"));
        for (i, ch) in self.channels.iter().enumerate() {
            c.ensure(valid_channel(ch.trim()), &format!("channels[{i}]"), "must be 1 to 64 letters, digits, '-' or '_'");
        }
        let starts = match &self.starts_at {
            Some(s) => parse_rfc3339(s),
            None => Some(default_start),
        };
        c.ensure(starts.is_some(), "startsAt", "must be an RFC 3339 timestamp");
        let ends = self.ends_at.as_deref().map(parse_rfc3339);
        c.ensure(ends != Some(None), "endsAt", "must be an RFC 3339 timestamp");
        if let (Some(s), Some(Some(e))) = (starts, ends) {
            c.ensure(e > s, "endsAt", "must be after startsAt");
        }
        c.finish()?;
        Ok((starts.unwrap_or(default_start), ends.flatten()))
    }
}

impl Discount {
    /// Validates `input` and builds the record; it starts now unless `startsAt` says otherwise.
    pub fn create(input: &DiscountInput, id: Uuid, now: i64) -> ApiResult<Discount> {
        Discount::build(input, id, now, now)
    }

    /// Replaces the record by `input` (an update sends the whole discount), keeping its id, its
    /// creation time and, when `startsAt` is absent, its start.
    pub fn replace(&self, input: &DiscountInput, now: i64) -> ApiResult<Discount> {
        let mut d = Discount::build(input, self.id, self.starts_at, now)?;
        d.created_at = self.created_at;
        Ok(d)
    }

    fn build(input: &DiscountInput, id: Uuid, default_start: i64, now: i64) -> ApiResult<Discount> {
        let (starts_at, ends_at) = input.validate(default_start)?;
        let target = input.effective_target();
        let keep = |ids: &Vec<Uuid>, t: TargetType| if target == t { ids.clone() } else { Vec::new() };
        Ok(Discount {
            id,
            title: input.title.trim().to_string(),
            code: input.code.as_deref().map(|c| c.trim().to_string()),
            value_type: input.value_type,
            value: input.value,
            target,
            product_ids: keep(&input.product_ids, TargetType::Products),
            collection_ids: keep(&input.collection_ids, TargetType::Collections),
            buy_x_get_y: input.buy_x_get_y.clone(),
            minimum: input.minimum,
            customers: input.customers.clone(),
            usage_limit: input.usage_limit,
            once_per_customer: input.once_per_customer,
            starts_at,
            ends_at,
            disabled: input.disabled,
            combines_with: input.combines_with,
            channels: {
                let mut ch: Vec<String> = input.channels.iter().map(|c| c.trim().to_ascii_lowercase()).collect();
                ch.sort();
                ch.dedup();
                ch
            },
            created_at: now,
            updated_at: now,
        })
    }

    /// Active, scheduled (not started), expired (ended) or disabled, at `now`.
    pub fn status(&self, now: i64) -> DiscountStatus {
        status_at(self.disabled, self.starts_at, self.ends_at, now)
    }

    /// The class: free shipping and shipping targets are shipping discounts, buy-X-get-Y and
    /// product or collection targets are product discounts, the rest order discounts.
    pub fn class(&self) -> DiscountClass {
        match (self.value_type, self.target) {
            (ValueType::FreeShipping, _) | (_, TargetType::Shipping) => DiscountClass::Shipping,
            (ValueType::BuyXGetY, _) | (_, TargetType::Products | TargetType::Collections) => DiscountClass::Product,
            (_, TargetType::Order) => DiscountClass::Order,
        }
    }

    /// Whether this discount and `other` may both apply: each must accept the other's class.
    pub fn combines(&self, other: &Discount) -> bool {
        self.combines_with.allows(other.class()) && other.combines_with.allows(self.class())
    }

    /// Whether a line of `product_id` (in `collections`) is a target of this discount.
    pub fn targets(&self, product_id: Uuid, collections: &[Uuid]) -> bool {
        match self.target {
            TargetType::Products => self.product_ids.contains(&product_id),
            TargetType::Collections => collections.iter().any(|c| self.collection_ids.contains(c)),
            TargetType::Order | TargetType::Shipping => false,
        }
    }

    /// Whether a line counts towards the "buy" side of a buy-X-get-Y discount.
    pub fn counts_as_bought(&self, product_id: Uuid, collections: &[Uuid]) -> bool {
        self.buy_x_get_y.as_ref().is_some_and(|b| {
            b.buy_product_ids.contains(&product_id) || collections.iter().any(|c| b.buy_collection_ids.contains(c))
        })
    }

    /// Whether the discount may be used on `channel`: a discount limited to channels needs the
    /// cart to name one of them; an unlimited one applies everywhere, with or without a channel.
    pub fn available_on(&self, channel: Option<&str>) -> bool {
        self.channels.is_empty() || channel.is_some_and(|c| self.channels.iter().any(|x| x.eq_ignore_ascii_case(c.trim())))
    }

    /// How the discount is named in messages: its code, or its title for an automatic discount.
    pub fn label(&self) -> &str {
        self.code.as_deref().unwrap_or(&self.title)
    }

    /// The checks that need no cart: status and dates, usage limits, customer eligibility.
    /// `Err` carries the warning to answer instead of applying the discount.
    pub fn precheck(&self, usage: DiscountUsage, customer: Option<Uuid>, now: i64) -> Result<(), Warning> {
        let reject = |code, msg: String| Err(Warning::discount(code, self.code.as_deref(), msg));
        match self.status(now) {
            DiscountStatus::Active => {}
            DiscountStatus::Disabled => return reject(WarningCode::DiscountNotActive, format!("{} is disabled", self.label())),
            DiscountStatus::Scheduled => {
                return reject(WarningCode::DiscountNotActive, format!("{} starts at {}", self.label(), rfc3339(self.starts_at)));
            }
            DiscountStatus::Expired => return reject(WarningCode::DiscountNotActive, format!("{} has expired", self.label())),
        }
        if self.usage_limit.is_some_and(|limit| usage.total >= limit) {
            return reject(WarningCode::DiscountUsageLimitReached, format!("{} has reached its usage limit", self.label()));
        }
        if self.once_per_customer && usage.by_customer > 0 {
            return reject(WarningCode::DiscountUsageLimitReached, format!("{} can be used once per customer", self.label()));
        }
        if self.customers.kind == EligibilityKind::Specific {
            match customer {
                None => {
                    return reject(
                        WarningCode::DiscountCustomerIneligible,
                        format!("{} is for specific customers: sign in to use it", self.label()),
                    );
                }
                Some(id) if !self.customers.customer_ids.contains(&id) => {
                    return reject(
                        WarningCode::DiscountCustomerIneligible,
                        format!("{} is not available to this customer", self.label()),
                    );
                }
                Some(_) => {}
            }
        }
        Ok(())
    }

    /// The discount as the API shows it.
    pub fn view(&self, now: i64) -> DiscountView {
        DiscountView {
            id: self.id,
            title: self.title.clone(),
            code: self.code.clone(),
            method: if self.code.is_some() { "code" } else { "automatic" },
            value_type: self.value_type,
            value: self.value,
            target: self.target,
            product_ids: self.product_ids.clone(),
            collection_ids: self.collection_ids.clone(),
            buy_x_get_y: self.buy_x_get_y.clone(),
            minimum: self.minimum,
            customers: self.customers.clone(),
            usage_limit: self.usage_limit,
            once_per_customer: self.once_per_customer,
            starts_at: rfc3339(self.starts_at),
            ends_at: self.ends_at.map(rfc3339),
            status: self.status(now),
            class: self.class(),
            combines_with: self.combines_with,
            channels: self.channels.clone(),
            created_at: rfc3339(self.created_at),
            updated_at: rfc3339(self.updated_at),
        }
    }
}

/// A discount as the API shows it: the record with its derived status and class.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DiscountView {
    pub id: Uuid,
    pub title: String,
    pub code: Option<String>,
    /// `code` or `automatic`.
    pub method: &'static str,
    pub value_type: ValueType,
    pub value: i64,
    pub target: TargetType,
    pub product_ids: Vec<Uuid>,
    pub collection_ids: Vec<Uuid>,
    pub buy_x_get_y: Option<BuyXGetY>,
    pub minimum: MinimumRequirement,
    pub customers: CustomerEligibility,
    pub usage_limit: Option<u32>,
    pub once_per_customer: bool,
    pub starts_at: String,
    pub ends_at: Option<String>,
    pub status: DiscountStatus,
    pub class: DiscountClass,
    pub combines_with: CombinesWith,
    pub channels: Vec<String>,
    pub created_at: String,
    pub updated_at: String,
}

impl Enumerated for DiscountStatus {
    const NAMES: &'static [&'static str] = &["ACTIVE", "SCHEDULED", "EXPIRED", "DISABLED"];
    fn name(self) -> &'static str {
        match self {
            DiscountStatus::Active => "ACTIVE",
            DiscountStatus::Scheduled => "SCHEDULED",
            DiscountStatus::Expired => "EXPIRED",
            DiscountStatus::Disabled => "DISABLED",
        }
    }
}

impl Enumerated for ValueType {
    const NAMES: &'static [&'static str] = &["percentage", "fixedAmount", "freeShipping", "buyXGetY"];
    fn name(self) -> &'static str {
        match self {
            ValueType::Percentage => "percentage",
            ValueType::FixedAmount => "fixedAmount",
            ValueType::FreeShipping => "freeShipping",
            ValueType::BuyXGetY => "buyXGetY",
        }
    }
}
