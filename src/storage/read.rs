//! Read helpers over a read transaction: point reads, prefix scans and paged index walks.

use std::ops::Bound;

use redb::ReadTransaction;
use serde::de::DeserializeOwned;

use crate::error::ApiResult;
use crate::storage::codec;
use crate::storage::keys::prefix_range;
use crate::storage::tables::StoreTable;
use crate::storage::tx::read_u64;

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

/// The parts a large list's build reads its rows in ([`scan_split`]): the machine's cores, up to
/// four.
pub fn build_threads() -> usize {
    static THREADS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *THREADS.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get().min(4)))
}

/// Rows a [`scan_split`] reads alone before it splits the rest: a store this small is read
/// faster by one thread than threads can be started.
const SPLIT_AFTER: usize = 8192;

/// Reads every row under `prefix` (a store's rows keyed by id after it, or a record list's order
/// rows keyed by the sort's value) into one `T` per part, the parts in key order: the first
/// [`SPLIT_AFTER`] rows alone, then the rest split into `parts` ranges of the 16 bytes after
/// `prefix` between the next row's and the last's, each read by a thread of
/// its own. What a build of a large store's list waits on is redb walking and reading its
/// pages, which one thread does at one core's pace; split, a first list after a restart costs
/// a share of that on a machine with cores to spare. Ids made by the clock are time-ordered, so
/// the ranges hold about what was created in equal spans of time (random ids: equal shares);
/// sort values that are numbers or times split as evenly, text less so (never wrongly).
pub fn scan_split<T: Send>(
    txn: &ReadTransaction,
    table: StoreTable,
    prefix: &[u8],
    parts: usize,
    new: impl Fn() -> T + Sync,
    f: impl Fn(&mut T, &[u8], &[u8]) -> ApiResult<()> + Sync,
) -> ApiResult<Vec<T>> {
    let t = txn.open_table(table.def)?;
    let (start, end) = prefix_range(prefix);
    let mut first = new();
    let mut next = None;
    for (i, item) in t.range::<&[u8]>((Bound::Included(start.as_slice()), upper(&end)))?.enumerate() {
        let (k, v) = item?;
        if i == SPLIT_AFTER {
            next = Some(k.value().to_vec());
            break;
        }
        f(&mut first, k.value(), v.value())?;
    }
    let Some(next) = next else { return Ok(vec![first]) };
    let last = match t.range::<&[u8]>((Bound::Included(next.as_slice()), upper(&end)))?.next_back() {
        Some(item) => item?.0.value().to_vec(),
        None => next.clone(),
    };
    let mut bounds = vec![next];
    bounds.extend(split_between(prefix, &bounds[0], &last, parts.max(1)));
    let ranges: Vec<(Vec<u8>, Option<Vec<u8>>)> =
        bounds.iter().enumerate().map(|(i, from)| (from.clone(), bounds.get(i + 1).cloned().or_else(|| end.clone()))).collect();
    let read = |(from, to): &(Vec<u8>, Option<Vec<u8>>)| -> ApiResult<T> {
        let mut part = new();
        for item in t.range::<&[u8]>((Bound::Included(from.as_slice()), upper(to)))? {
            let (k, v) = item?;
            f(&mut part, k.value(), v.value())?;
        }
        Ok(part)
    };
    let mut out = vec![first];
    std::thread::scope(|s| {
        let (mine, theirs) = ranges.split_first().map_or((None, &[][..]), |(m, t)| (Some(m), t));
        // A part whose thread cannot be started is read here, after this thread's own.
        let handles: Vec<_> =
            theirs.iter().map(|r| std::thread::Builder::new().spawn_scoped(s, || read(r)).map_err(|_| r)).collect();
        if let Some(r) = mine {
            out.push(read(r)?);
        }
        for h in handles {
            out.push(match h {
                Ok(h) => h.join().map_err(|_| crate::error::ApiError::internal("a list read panicked"))??,
                Err(r) => read(r)?,
            });
        }
        Ok::<_, crate::error::ApiError>(())
    })?;
    Ok(out)
}

/// `parts - 1` keys splitting the ids after `prefix` between those of `from` and `to` into
/// equal spans (strictly increasing, each above `from` and at most `to`).
fn split_between(prefix: &[u8], from: &[u8], to: &[u8], parts: usize) -> Vec<Vec<u8>> {
    let id = |key: &[u8]| {
        let mut b = [0u8; 16];
        let tail = key.get(prefix.len()..).unwrap_or_default();
        let n = tail.len().min(16);
        b[..n].copy_from_slice(&tail[..n]);
        u128::from_be_bytes(b)
    };
    let (lo, hi) = (id(from), id(to));
    let step = hi.saturating_sub(lo) / parts as u128;
    if step == 0 {
        return Vec::new();
    }
    (1..parts as u128)
        .map(|j| {
            let mut key = prefix.to_vec();
            key.extend_from_slice(&(lo + step * j).to_be_bytes());
            key
        })
        .collect()
}

/// The upper bound of a range ending before `end`, or of all keys.
fn upper(end: &Option<Vec<u8>>) -> Bound<&[u8]> {
    end.as_deref().map_or(Bound::Unbounded, Bound::Excluded)
}

#[cfg(test)]
mod tests {
    use uuid::Uuid;

    use super::*;
    use crate::storage::keys::Key;
    use crate::storage::tables::PRODUCT_SORTS;

    /// A store's rows, read split, come back whole and in key order, however the ids spread,
    /// and a neighbouring store's rows stay out.
    #[test]
    fn a_split_scan_reads_every_row_of_the_store_once_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let db =
            crate::storage::open(&dir.path().join("cell.redb"), crate::cells::DATABASE, crate::storage::ONE_OFF_CACHE).unwrap();
        let (store, before, after) = (Uuid::from_u128(5), Uuid::from_u128(4), Uuid::from_u128(6));
        // Ids bunched at both ends of the id space, and a few alone: spans of equal width hold
        // very unequal shares.
        let mut ids: Vec<u128> = (0..12_000u128).map(|n| n * 7).collect();
        ids.extend((0..9_000u128).map(|n| u128::MAX - n * 3));
        ids.extend([1 << 64, 1 << 100, 1 << 127]);
        let txn = db.begin_write().unwrap();
        {
            let mut t = txn.open_table(PRODUCT_SORTS.def).unwrap();
            for (s, n) in [(before, 1u128), (after, 2)] {
                t.insert(Key::store(s).id(Uuid::from_u128(n)).bytes(), &[0u8][..]).unwrap();
            }
            for id in &ids {
                t.insert(Key::store(store).id(Uuid::from_u128(*id)).bytes(), &id.to_be_bytes()[..]).unwrap();
            }
        }
        txn.commit().unwrap();
        ids.sort_unstable();
        let txn = redb::ReadableDatabase::begin_read(&db).unwrap();
        let prefix = Key::store(store).bytes().to_vec();
        for parts in [1, 2, 3, 8] {
            let read = scan_split(&txn, PRODUCT_SORTS, &prefix, parts, Vec::new, |rows: &mut Vec<u128>, k, v| {
                assert!(k.starts_with(&prefix));
                rows.push(u128::from_be_bytes(v.try_into().unwrap()));
                Ok(())
            })
            .unwrap();
            assert_eq!(read.len(), parts + 1, "the first rows alone, then {parts} parts");
            assert_eq!(read[0].len(), SPLIT_AFTER);
            assert_eq!(read.concat(), ids, "{parts} parts");
        }
        // A store of fewer rows is read alone, in one part.
        let small = scan_split(&txn, PRODUCT_SORTS, Key::store(after).bytes(), 4, Vec::new, |n: &mut Vec<()>, _, _| {
            n.push(());
            Ok(())
        })
        .unwrap();
        assert_eq!(small.iter().map(Vec::len).collect::<Vec<_>>(), [1]);
    }

    #[test]
    fn split_keys_rise_between_their_ends() {
        let prefix = [9u8; 16];
        let key = |n: u128| [&prefix[..], &n.to_be_bytes()].concat();
        let splits = split_between(&prefix, &key(100), &key(400), 3);
        assert_eq!(splits, [key(200), key(300)]);
        assert!(split_between(&prefix, &key(5), &key(6), 4).is_empty(), "too close to split");
        assert!(split_between(&prefix, &key(6), &key(5), 4).is_empty(), "ends reversed");
    }
}
