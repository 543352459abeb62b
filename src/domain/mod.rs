//! Types, validation and business rules. Nothing here knows HTTP or redb.

pub mod catalog;
pub mod collection;
pub mod fields;
pub mod market;
pub mod money;
pub mod pricing;
pub mod product;
pub mod store;
pub mod taxonomy;
pub mod time;
