//! Types, validation and business rules. Nothing here knows HTTP or redb.
//!
//! Arithmetic here never wraps: stored integers (stock, money, counts) are added, multiplied and
//! negated checked or saturating, and where plain operators stay, an `allow` says why they
//! cannot overflow (the calculation, whose inputs `validate` bounds first). Tests are exempt.
#![cfg_attr(not(test), deny(clippy::arithmetic_side_effects))]

pub mod cart;
pub mod catalog;
pub mod checkout;
pub mod collection;
pub mod fields;
pub mod fulfillment;
pub mod gift_card;
pub mod json_out;
pub mod market;
pub mod money;
pub mod order;
pub mod pricing;
pub mod product;
pub mod role;
pub mod stock;
pub mod store;
pub mod taxonomy;
pub mod time;
pub mod webhook;

/// A fieldless enum with fixed names on the wire (statuses, types): lists filter on it by name.
pub trait Enumerated: Copy + 'static {
    /// The names on the wire, every variant's once.
    const NAMES: &'static [&'static str];
    /// This variant's wire name.
    fn name(self) -> &'static str;
}
