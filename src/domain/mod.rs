//! Types, validation and business rules. Nothing here knows HTTP or redb.

pub mod money;
pub mod product;
pub mod store;
pub mod taxonomy;
pub mod time;
