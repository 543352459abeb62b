//! Orders: what a completed checkout became. Every amount is fixed at creation from the
//! calculation made inside the order write; later areas (transactions, fulfillment, returns)
//! add to an order, they never re-price it.

use crate::domain::Enumerated;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::domain::cart::Attributes;
use crate::domain::money::Money;
use crate::domain::pricing::shipping::Address;
use crate::domain::pricing::tax::TaxLine;

/// The first order number of a store (the numbers customers quote are 1001, 1002, …).
pub const FIRST_NUMBER: u64 = 1001;
/// Most tags on an order, and the longest tag.
pub const MAX_TAGS: usize = 250;
pub const MAX_TAG_CHARS: usize = 255;

/// An order's financial status, as its payment leaves it at creation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum FinancialStatus {
    /// The payer has not paid yet (PromptPay, bank transfer, or a payment still processing).
    Pending,
    /// The funds are held and await capture.
    Authorized,
    Paid,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum OrderStatus {
    Open,
    Cancelled,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum FulfillmentStatus {
    Unfulfilled,
    PartiallyFulfilled,
    Fulfilled,
    /// Nothing shipped; every unfinished fulfillment order is held.
    OnHold,
    /// Nothing shipped; every unfinished fulfillment order waits for its time.
    Scheduled,
}

/// `store ‖ order id → Order`; serialized as-is for the API (camelCase).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Order {
    pub id: Uuid,
    /// Per store, from 1001 up, without gaps.
    pub number: u64,
    pub checkout_id: Option<Uuid>,
    pub customer_id: Option<Uuid>,
    pub email: Option<String>,
    pub phone: Option<String>,
    pub status: OrderStatus,
    pub financial_status: FinancialStatus,
    pub fulfillment_status: FulfillmentStatus,
    pub line_items: Vec<OrderLine>,
    /// Lines after line-level discounts.
    pub subtotal: Money,
    /// Order-level, code and automatic discounts on goods.
    pub discount: Money,
    /// After shipping discounts.
    pub shipping: Money,
    pub tax: Money,
    pub taxes_included: bool,
    pub tip: Money,
    /// subtotal − discount + shipping (+ tax when prices exclude it) + tip.
    pub total: Money,
    /// Paid by gift cards.
    pub gift_card_total: Money,
    /// What the payment covered: total − gift cards.
    pub payment_total: Money,
    pub tax_lines: Vec<TaxLine>,
    pub discount_codes: Vec<String>,
    pub discount_applications: Vec<OrderDiscount>,
    pub shipping_line: Option<ShippingLine>,
    pub shipping_address: Option<Address>,
    pub billing_address: Option<Address>,
    pub gift_cards: Vec<OrderGiftCard>,
    pub payment: Option<OrderPayment>,
    pub accepts_email_marketing: bool,
    pub accepts_sms_marketing: bool,
    pub note: Option<String>,
    pub tags: Vec<String>,
    #[serde(with = "crate::domain::time::stamp_opt")]
    #[schemars(with = "Option<String>")]
    pub cancelled_at: Option<i64>,
    #[serde(with = "crate::domain::time::stamp")]
    #[schemars(with = "String")]
    pub created_at: i64,
    #[serde(with = "crate::domain::time::stamp")]
    #[schemars(with = "String")]
    pub updated_at: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OrderLine {
    pub id: Uuid,
    pub variant_id: Uuid,
    pub product_id: Uuid,
    pub title: String,
    pub variant_title: String,
    pub sku: Option<String>,
    pub quantity: u32,
    pub unit_price: Money,
    /// The line's share of every discount.
    pub discount: Money,
    pub tax: Money,
    pub total: Money,
    pub properties: Attributes,
    /// Units shipped.
    pub fulfilled_quantity: u32,
    /// Units that can still be shipped (neither shipped nor released).
    pub fulfillable_quantity: u32,
}

/// A discount as it applied to the order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OrderDiscount {
    pub discount_id: Option<Uuid>,
    pub code: Option<String>,
    pub title: String,
    pub amount: Money,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ShippingLine {
    /// The rate id the checkout chose.
    pub id: String,
    pub title: String,
    pub code: String,
    /// Before shipping discounts.
    pub price: Money,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OrderGiftCard {
    pub id: Uuid,
    pub last_characters: String,
    pub amount: Money,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OrderPayment {
    pub payment_intent_id: Option<Uuid>,
    /// What the caller named at completion (`pm_card_visa`, `gift_card`, …).
    pub payment_method_id: String,
    pub amount: Money,
}

impl OrderStatus {
    pub fn as_u8(self) -> u8 {
        match self {
            OrderStatus::Open => 0,
            OrderStatus::Cancelled => 1,
        }
    }
}

impl FulfillmentStatus {
    pub fn as_u8(self) -> u8 {
        match self {
            FulfillmentStatus::Unfulfilled => 0,
            FulfillmentStatus::PartiallyFulfilled => 1,
            FulfillmentStatus::Fulfilled => 2,
            FulfillmentStatus::OnHold => 3,
            FulfillmentStatus::Scheduled => 4,
        }
    }
}

impl Enumerated for OrderStatus {
    const NAMES: &'static [&'static str] = &["OPEN", "CANCELLED"];
    fn name(self) -> &'static str {
        match self {
            OrderStatus::Open => "OPEN",
            OrderStatus::Cancelled => "CANCELLED",
        }
    }
}

impl Enumerated for FinancialStatus {
    const NAMES: &'static [&'static str] = &["PENDING", "AUTHORIZED", "PAID"];
    fn name(self) -> &'static str {
        match self {
            FinancialStatus::Pending => "PENDING",
            FinancialStatus::Authorized => "AUTHORIZED",
            FinancialStatus::Paid => "PAID",
        }
    }
}

impl Enumerated for FulfillmentStatus {
    const NAMES: &'static [&'static str] = &["UNFULFILLED", "PARTIALLY_FULFILLED", "FULFILLED", "ON_HOLD", "SCHEDULED"];
    fn name(self) -> &'static str {
        match self {
            FulfillmentStatus::Unfulfilled => "UNFULFILLED",
            FulfillmentStatus::PartiallyFulfilled => "PARTIALLY_FULFILLED",
            FulfillmentStatus::Fulfilled => "FULFILLED",
            FulfillmentStatus::OnHold => "ON_HOLD",
            FulfillmentStatus::Scheduled => "SCHEDULED",
        }
    }
}
