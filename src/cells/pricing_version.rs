//! A store's pricing version: a counter moved on by every write that changes what a calculation
//! reads besides the products, so an order write can tell whether its checkout was priced
//! against the configuration in force.

use uuid::Uuid;

use crate::cells::Cell;
use crate::error::ApiResult;
use crate::storage::keys::Key;
use crate::storage::read;
use crate::storage::tables::COUNTERS;
use crate::storage::tx::{Tx, read_u64};

/// The key of a store's pricing version (in `counters`).
fn pricing_version_key(store: Uuid) -> Vec<u8> {
    Key::store(store).str("pricing_version").into_vec()
}

/// Moves the store's pricing version on: called by the writers of what a calculation reads
/// besides the products — discounts, tax rates, shipping zones and the store settings — so an
/// order write can tell whether its checkout was priced against the configuration in force.
/// (Prices and stock are checked product by product inside the order write itself.)
pub fn pricing_changed(tx: &mut Tx, store: Uuid) -> ApiResult<()> {
    tx.bump(COUNTERS, &pricing_version_key(store), 1)
}

/// The store's pricing version inside a write.
pub fn pricing_version_in(tx: &Tx, store: Uuid) -> ApiResult<u64> {
    Ok(tx.get(COUNTERS, &pricing_version_key(store))?.map(|b| read_u64(&b)).unwrap_or(0))
}

/// The store's pricing version now (see [`pricing_changed`]).
pub fn pricing_version(cell: &Cell, store: Uuid) -> ApiResult<u64> {
    read::counter(&cell.read()?, COUNTERS, &pricing_version_key(store))
}
