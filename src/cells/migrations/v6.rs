//! Format 6: `product_sorts` (store table 41), a row per product with what its lists sort it by,
//! filled here from every product; product lists are built from these rows from now on, one
//! list at a time, without decoding products.

use redb::{ReadableTable, WriteTransaction};

use crate::domain::product::{Product, ProductSorts};
use crate::storage::codec::{decode, encode};
use crate::storage::tables::{PRODUCT_SORTS, PRODUCTS};

pub(super) fn product_sorts_apart(txn: &WriteTransaction) -> Result<(), redb::Error> {
    let products = txn.open_table(PRODUCTS.def)?;
    let mut sorts = txn.open_table(PRODUCT_SORTS.def)?;
    for item in products.iter()? {
        let (k, v) = item?;
        // A row that does not decode is corruption: the step fails rather than leave it unlisted.
        let p: Product = decode(v.value()).map_err(|e| redb::Error::Corrupted(format!("products: {e}")))?;
        let row = encode(&ProductSorts::of(&p)).map_err(|e| redb::Error::Corrupted(e.to_string()))?;
        sorts.insert(k.value(), row.as_slice())?;
    }
    Ok(())
}
