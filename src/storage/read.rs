//! Read helpers over a read transaction: point reads, prefix scans and paged index walks.

use redb::ReadTransaction;
use serde::de::DeserializeOwned;

use crate::error::ApiResult;
use crate::storage::codec;
use crate::storage::keys::prefix_range;
use crate::storage::tables::StoreTable;
use crate::storage::writer::read_u64;

/// Reads and decodes one record.
pub fn get<T: DeserializeOwned>(txn: &ReadTransaction, table: StoreTable, key: &[u8]) -> ApiResult<Option<T>> {
    let t = txn.open_table(table.def)?;
    match t.get(key)? {
        Some(v) => Ok(Some(codec::decode(v.value())?)),
        None => Ok(None),
    }
}

/// Reads and decodes the rows of `keys` (those that exist), in order, with one open of the table.
pub fn get_each<T: DeserializeOwned>(
    txn: &ReadTransaction,
    table: StoreTable,
    keys: impl Iterator<Item = Vec<u8>>,
) -> ApiResult<Vec<T>> {
    let t = txn.open_table(table.def)?;
    let mut out = Vec::with_capacity(keys.size_hint().0);
    for key in keys {
        if let Some(v) = t.get(key.as_slice())? {
            out.push(codec::decode(v.value())?);
        }
    }
    Ok(out)
}

/// Reads raw bytes of one row.
pub fn get_raw(txn: &ReadTransaction, table: StoreTable, key: &[u8]) -> ApiResult<Option<Vec<u8>>> {
    let t = txn.open_table(table.def)?;
    Ok(t.get(key)?.map(|v| v.value().to_vec()))
}

/// Reads a counter (0 when absent).
pub fn counter(txn: &ReadTransaction, table: StoreTable, key: &[u8]) -> ApiResult<u64> {
    Ok(get_raw(txn, table, key)?.map(|b| read_u64(&b)).unwrap_or(0))
}

/// Walks the keys under `prefix` in order (or reverse), skipping `skip` and taking `take`,
/// calling `f` with each key and value. Index pages are served from this walk: cost grows with
/// the page offset, never with the size of the store.
pub fn scan(
    txn: &ReadTransaction,
    table: StoreTable,
    prefix: &[u8],
    reverse: bool,
    skip: usize,
    take: usize,
    mut f: impl FnMut(&[u8], &[u8]) -> ApiResult<()>,
) -> ApiResult<()> {
    let mut left = take;
    let mut skipped = 0;
    walk(txn, table, prefix, reverse, |k, v| {
        if skipped < skip {
            skipped += 1;
            return Ok(true);
        }
        if left == 0 {
            return Ok(false);
        }
        left -= 1;
        f(k, v)?;
        Ok(left > 0)
    })
}

/// Walks the rows under `prefix` in order (or reverse) while `f` answers true.
pub fn walk(
    txn: &ReadTransaction,
    table: StoreTable,
    prefix: &[u8],
    reverse: bool,
    mut f: impl FnMut(&[u8], &[u8]) -> ApiResult<bool>,
) -> ApiResult<()> {
    let t = txn.open_table(table.def)?;
    let (start, end) = prefix_range(prefix);
    let range = match &end {
        Some(end) => t.range(start.as_slice()..end.as_slice())?,
        None => t.range(start.as_slice()..)?,
    };
    // Both directions run the same body; `Box<dyn Iterator>` keeps it in one loop.
    let items: Box<dyn Iterator<Item = _>> = if reverse { Box::new(range.rev()) } else { Box::new(range) };
    for item in items {
        let (k, v) = item?;
        if !f(k.value(), v.value())? {
            break;
        }
    }
    Ok(())
}
