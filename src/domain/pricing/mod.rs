//! Pricing: discounts, shipping zones, tax rates and the cart/order calculation built on them.
//!
//! Pure rules: nothing here reads storage, the clock or HTTP. The caller resolves discount codes to
//! records with their usage counts, picks the shipping rate and passes the current time in.
//!
//! The rules every figure follows:
//!
//! - **Money** is an integer in minor units of the store currency (JPY 0 decimals, USD 2, BHD 3);
//!   no float ever touches an amount.
//! - **Rounding** happens only where a computation yields a fraction of a minor unit — a percentage
//!   (basis points, 10 000 = 100 %) or a tax extracted from a tax-inclusive price — and always by
//!   [`round_div`](crate::domain::money::round_div): half away from zero.
//! - **Allocation** of a whole amount over parts (an order-level discount over lines, a fixed product
//!   discount over eligible lines, an included tax over jurisdictions) never rounds: it is the
//!   largest-remainder method of [`allocation::allocate`], so the parts always sum exactly to the whole.
//! - **Caps**: a discount never exceeds what it applies to, so no amount is ever negative.
//! - **Determinism**: lines are processed in a stable order of their content, never in the order given,
//!   so reordering the lines changes nothing but the order of `lineItems` in the answer (which follows
//!   the request) and the line indices that warnings name.
//!
//! See [`calc`] for the stages of a calculation, the combination rules and how tax-inclusive prices are
//! reported.

pub mod allocation;
pub mod calc;
pub mod discount;
mod json;
pub mod shipping;
pub mod tax;

#[cfg(test)]
mod config_tests;
#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;

use serde::{Deserialize, Serialize};

/// Why a discount, or part of the request, was not applied as asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum WarningCode {
    /// No discount has this code.
    DiscountNotFound,
    /// The discount is disabled, not started yet or over.
    DiscountNotActive,
    /// The total usage limit is reached, or this customer already used a once-per-customer discount.
    DiscountUsageLimitReached,
    /// The discount is reserved to other customers (or needs a known customer).
    DiscountCustomerIneligible,
    /// The minimum subtotal or quantity is not met.
    DiscountMinimumNotMet,
    /// Nothing in the cart is eligible (no matching product, a buy-X-get-Y not fulfilled).
    DiscountNotApplicable,
    /// The discount does not combine with one already applied.
    DiscountNotCombinable,
    /// The same code was given twice; it applies once.
    DiscountDuplicate,
    /// A manual discount was larger than what it applies to and was capped.
    DiscountCapped,
    /// A checkout's chosen shipping method is not offered for its address and lines any more.
    ShippingMethodUnavailable,
}

/// A non-fatal remark on a calculation: the figures are valid, but something was dropped or capped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Warning {
    pub code: WarningCode,
    pub message: String,
    /// The discount code concerned, when there is one.
    pub discount_code: Option<String>,
    /// The request field concerned, e.g. `lineItems[2].discount`.
    pub field: Option<String>,
}

impl Warning {
    /// A warning about a discount code (or an automatic discount when `code` is `None`).
    pub fn discount(code: WarningCode, discount_code: Option<&str>, message: impl Into<String>) -> Warning {
        Warning { code, message: message.into(), discount_code: discount_code.map(str::to_string), field: None }
    }

    /// A warning about a request field.
    pub fn field(code: WarningCode, field: impl Into<String>, message: impl Into<String>) -> Warning {
        Warning { code, message: message.into(), discount_code: None, field: Some(field.into()) }
    }
}
