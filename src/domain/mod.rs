//! Types, validation and business rules. Nothing here knows HTTP or redb.

pub mod cart;
pub mod catalog;
pub mod checkout;
pub mod collection;
pub mod fields;
pub mod gift_card;
pub mod market;
pub mod money;
pub mod order;
pub mod pricing;
pub mod product;
pub mod store;
pub mod taxonomy;
pub mod time;
