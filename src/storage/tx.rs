//! A job's view of its batch's write transaction ([`Tx`]): every store-table write goes through
//! it, so a store being moved has each written key recorded, counters are written once per
//! batch, and what the batch changes in memory (held lists, cached rows) is applied only once it
//! commits (`writer`). Also the ids given in commit order ([`CommitIds`]).

use std::cell::RefCell;
use std::collections::HashMap;
use std::ops::Bound;

use redb::{ReadableTable, WriteTransaction};
use uuid::Uuid;

use crate::error::{ApiError, ApiResult};
use crate::storage::keys::{bounds_after, prefix_range};
use crate::storage::list_names::RecordChange;
use crate::storage::list_orders::{Change, ListName};
use crate::storage::tables::{COUNTERS, StoreTable};

/// What a batch changes in the lists held in memory, kept with its capacity from batch to
/// batch: keys of product lists, and writes of listed records.
#[derive(Default)]
pub(super) struct ListChanges {
    pub(super) keys: Vec<Change>,
    pub(super) records: Vec<RecordChange>,
}

/// Rows of a table: keys and values.
pub type Rows = Vec<(Vec<u8>, Vec<u8>)>;

type StoreTableHandle<'a> = redb::Table<'a, &'static [u8], &'static [u8]>;

/// A job's view of the write transaction. Store-table writes go through it so that a store
/// being moved has every written key recorded. Store tables stay open for the whole batch
/// (redb allows one open handle per table, so store tables are reached only through `Tx`).
pub struct Tx<'a> {
    pub(super) txn: &'a WriteTransaction,
    /// Whether the running job's store is being moved: only then are its keys recorded.
    pub(super) tracking: bool,
    pub(super) changes: Vec<(u16, Vec<u8>)>,
    open: RefCell<Vec<Option<StoreTableHandle<'a>>>>,
    /// List-order changes, applied to the in-memory orders once the transaction commits.
    pub(super) orders: ListChanges,
    /// In-memory record lists to drop once the transaction commits (after `orders`): by store
    /// and what their names start with.
    pub(super) forgotten_lists: Vec<(Uuid, Box<[u8]>)>,
    /// Cached rows to drop once the transaction commits.
    pub(super) changed_rows: Vec<(Uuid, Uuid)>,
    /// Stores whose cached locations to drop once the transaction commits.
    pub(super) changed_locations: Vec<Uuid>,
    /// Variants whose kept levels to drop once the transaction commits: by store and variant.
    pub(super) changed_levels: Vec<(Uuid, Uuid)>,
    /// Ids in commit order, for rows read back in the order they were written (events).
    ids: &'a mut CommitIds,
    /// Stores this batch appended events to.
    pub(super) evented: Vec<Uuid>,
    /// The `counters` rows this batch wrote, by key: every order of a batch bumps the same few
    /// counters of its store, so each is written once, before the batch commits
    /// ([`Tx::flush_counters`]), and read back from here meanwhile.
    counters: HashMap<Vec<u8>, u64>,
}

impl<'a> Tx<'a> {
    pub(super) fn new(txn: &'a WriteTransaction, ids: &'a mut CommitIds, orders: ListChanges) -> Self {
        Tx {
            ids,
            evented: Vec::new(),
            txn,
            tracking: false,
            changes: Vec::new(),
            // Sized once for every store table: grown on demand, its handles (a few hundred
            // bytes each) were copied through several reallocations per batch.
            open: RefCell::new(Vec::with_capacity(crate::storage::tables::STORE_TABLES.len())),
            orders,
            forgotten_lists: Vec::new(),
            changed_rows: Vec::new(),
            changed_locations: Vec::new(),
            changed_levels: Vec::new(),
            counters: HashMap::new(),
        }
    }

    /// Writes the batch's counters into their table.
    pub(super) fn flush_counters(&mut self) -> ApiResult<()> {
        let counters = std::mem::take(&mut self.counters);
        self.with_table(COUNTERS, |t| {
            for (key, value) in &counters {
                t.insert(key.as_slice(), value.to_le_bytes().as_slice())?;
            }
            Ok(())
        })
    }

    /// The transaction, for tables outside the store tables (account directory, cell state).
    pub fn raw(&self) -> &WriteTransaction {
        self.txn
    }

    /// Runs `f` on the open handle of `table`, opening it on first use in the batch.
    pub fn with_table<T>(&self, table: StoreTable, f: impl FnOnce(&mut StoreTableHandle<'a>) -> ApiResult<T>) -> ApiResult<T> {
        let mut open = self.open.try_borrow_mut().map_err(|_| ApiError::internal("store tables used re-entrantly"))?;
        let i = table.index as usize;
        if open.len() <= i {
            open.resize_with(i + 1, || None);
        }
        if open[i].is_none() {
            open[i] = Some(self.txn.open_table(table.def)?);
        }
        match open[i].as_mut() {
            Some(t) => f(t),
            None => Err(ApiError::internal("store table not open")),
        }
    }

    pub fn get(&self, table: StoreTable, key: &[u8]) -> ApiResult<Option<Vec<u8>>> {
        if table.index == COUNTERS.index
            && let Some(v) = self.counters.get(key)
        {
            return Ok(Some(v.to_le_bytes().to_vec()));
        }
        self.with_table(table, |t| Ok(t.get(key)?.map(|v| v.value().to_vec())))
    }

    pub fn put(&mut self, table: StoreTable, key: &[u8], value: &[u8]) -> ApiResult<()> {
        if table.index == COUNTERS.index {
            self.counters.insert(key.to_vec(), read_u64(value));
        } else {
            self.with_table(table, |t| Ok(t.insert(key, value).map(|_| ())?))?;
        }
        if self.tracking {
            self.changes.push((table.index, key.to_vec()));
        }
        Ok(())
    }

    pub fn delete(&mut self, table: StoreTable, key: &[u8]) -> ApiResult<()> {
        if table.index == COUNTERS.index {
            self.counters.remove(key);
        }
        self.with_table(table, |t| Ok(t.remove(key).map(|_| ())?))?;
        if self.tracking {
            self.changes.push((table.index, key.to_vec()));
        }
        Ok(())
    }

    /// Adds `key` to list `list` of `store`'s in-memory orders when the transaction commits.
    pub fn order_insert(&mut self, store: Uuid, list: ListName, key: Box<[u8]>) {
        self.orders.keys.push(Change { store, list, key, insert: true });
    }

    /// Removes `key` from list `list` of `store`'s in-memory orders when the transaction commits.
    pub fn order_remove(&mut self, store: Uuid, list: ListName, key: Box<[u8]>) {
        self.orders.keys.push(Change { store, list, key, insert: false });
    }

    /// Records a write of a listed record for the in-memory lists, applied when the
    /// transaction commits (`record::write`, its one writer).
    pub fn record_change(&mut self, change: RecordChange) {
        self.orders.records.push(change);
    }

    /// Drops `store`'s in-memory record lists whose names start with `prefix` when the
    /// transaction commits: their rows went as one range (a parent's scoped records).
    pub fn forget_lists(&mut self, store: Uuid, prefix: Box<[u8]>) {
        self.forgotten_lists.push((store, prefix));
    }

    /// A v7 id stamped `now_ms` (or the last such id's time, when that is later) that sorts
    /// after every id this writer gave before: ids given in a transaction sort after those of
    /// every transaction committed before it, so a reader that has seen an id has seen every
    /// row keyed by an earlier one (a webhook's cursor over the events).
    pub fn commit_id(&mut self, now_ms: i64) -> Uuid {
        self.ids.next(now_ms)
    }

    /// Makes every later [`Tx::commit_id`] sort after `id`: rows keyed by ids given elsewhere
    /// (a store moved in from another cell, whose clock may run ahead) are not passed over by a
    /// reader that walks from an id it has seen.
    pub fn commit_ids_after(&mut self, id: Uuid) {
        self.ids.after(id);
    }

    /// Records that this job appended an event to `store`: the fan-out hears of it after commit.
    pub fn event_appended(&mut self, store: Uuid) {
        if !self.evented.contains(&store) {
            self.evented.push(store);
        }
    }

    /// Drops the cached row `(store, id)` when the transaction commits (see [`RowCache`]).
    pub fn row_changed(&mut self, store: Uuid, id: Uuid) {
        self.changed_rows.push((store, id));
    }

    /// Drops the cached locations of `store` when the transaction commits (a location of it
    /// was written).
    pub fn locations_changed(&mut self, store: Uuid) {
        if !self.changed_locations.contains(&store) {
            self.changed_locations.push(store);
        }
    }

    /// Drops the kept levels of `variant` of `store` when the transaction commits (a level of
    /// it was written).
    pub fn levels_changed(&mut self, store: Uuid, variant: Uuid) {
        // Not deduplicated (a batch may write many variants' levels): an entry dropped twice
        // is dropped once.
        self.changed_levels.push((store, variant));
    }

    /// Reads a counter (0 when absent).
    pub fn counter(&self, table: StoreTable, key: &[u8]) -> ApiResult<u64> {
        Ok(self.get(table, key)?.map(|b| read_u64(&b)).unwrap_or(0))
    }

    /// Adds `delta` to a counter, never below zero. A `counters` row is read from its table once
    /// per batch, then moved in the batch's map (a fulfill bumps about fifteen).
    pub fn bump(&mut self, table: StoreTable, key: &[u8], delta: i64) -> ApiResult<()> {
        let moved = |current: u64| (current as i64).saturating_add(delta).max(0) as u64;
        if table.index != COUNTERS.index {
            let current = self.counter(table, key)?;
            return self.put(table, key, &moved(current).to_le_bytes());
        }
        match self.counters.get_mut(key) {
            Some(current) => *current = moved(*current),
            None => {
                let stored = self.with_table(table, |t| Ok(t.get(key)?.map(|v| read_u64(v.value())).unwrap_or(0)))?;
                self.counters.insert(key.to_vec(), moved(stored));
            }
        }
        if self.tracking {
            self.changes.push((table.index, key.to_vec()));
        }
        Ok(())
    }

    /// Brings `table` from the `old` rows to the `new` ones, touching only rows that differ (a
    /// product count change rewrites two rows, not twenty).
    pub fn sync_rows(&mut self, table: StoreTable, old: &[(Vec<u8>, Vec<u8>)], new: &[(Vec<u8>, Vec<u8>)]) -> ApiResult<()> {
        for (k, _) in old {
            if !new.iter().any(|(nk, _)| nk == k) {
                self.delete(table, k)?;
            }
        }
        for (k, v) in new {
            if !old.iter().any(|(ok, ov)| ok == k && ov == v) {
                self.put(table, k, v)?;
            }
        }
        Ok(())
    }

    /// The rows of `table` under `prefix` (after `after`, at most `take`), in key order.
    pub fn scan_prefix(&self, table: StoreTable, prefix: &[u8], after: Option<&[u8]>, take: usize) -> ApiResult<Rows> {
        let range = prefix_range(prefix);
        self.scan(table, bounds_after(&range, after), take)
    }

    /// The rows of `table` in `range` (at most `take`), in key order.
    pub fn scan(
        &self,
        table: StoreTable,
        range: (Bound<&[u8]>, Bound<&[u8]>),
        take: usize,
    ) -> ApiResult<Vec<(Vec<u8>, Vec<u8>)>> {
        self.with_table(table, |t| {
            let mut out = Vec::new();
            for item in t.range::<&[u8]>(range)?.take(take) {
                let (k, v) = item?;
                out.push((k.value().to_vec(), v.value().to_vec()));
            }
            Ok(out)
        })
    }

    /// The keys of `table` under `prefix`.
    pub fn keys_with_prefix(&self, table: StoreTable, prefix: &[u8]) -> ApiResult<Vec<Vec<u8>>> {
        Ok(self.scan_prefix(table, prefix, None, usize::MAX)?.into_iter().map(|(k, _)| k).collect())
    }

    /// Deletes every row of `table` whose key starts with `prefix`; returns how many.
    pub fn delete_prefix(&mut self, table: StoreTable, prefix: &[u8]) -> ApiResult<u64> {
        if table.index == COUNTERS.index {
            self.counters.retain(|k, _| !k.starts_with(prefix));
        }
        let keys = self.keys_with_prefix(table, prefix)?;
        self.with_table(table, |t| {
            for k in &keys {
                t.remove(k.as_slice())?;
            }
            Ok(())
        })?;
        let n = keys.len() as u64;
        if self.tracking {
            self.changes.extend(keys.into_iter().map(|k| (table.index, k)));
        }
        Ok(n)
    }
}

/// The source of [`Tx::commit_id`]: the last millisecond given and a counter within it.
pub struct CommitIds {
    last_ms: i64,
    counter: u64,
}

impl CommitIds {
    /// Ids from `ms` on: the writer starts at the system time, which the process's clock never
    /// runs behind, so ids after a restart sort after those before it.
    pub(super) fn starting_at(ms: i64) -> Self {
        CommitIds { last_ms: ms, counter: 0 }
    }

    pub(super) fn after(&mut self, id: Uuid) {
        let v = id.as_u128();
        let ms = (v >> 80) as i64;
        let counter = (((v >> 64) & 0xfff) << 30 | ((v >> 32) & 0x3fff_ffff)) as u64;
        if ms > self.last_ms || (ms == self.last_ms && counter > self.counter) {
            self.last_ms = ms;
            self.counter = counter;
        }
    }

    fn next(&mut self, now_ms: i64) -> Uuid {
        if now_ms > self.last_ms {
            self.last_ms = now_ms;
            self.counter = 0;
        } else {
            self.counter = self.counter.wrapping_add(1);
        }
        // v7: 48 bits of milliseconds, version, then 42 bits of counter (12 in rand_a, 30 in
        // rand_b after the variant) so ids of one millisecond sort in the order given, and 32
        // random bits.
        let (ms, c) = (self.last_ms.max(0) as u128 & ((1 << 48) - 1), u128::from(self.counter) & ((1 << 42) - 1));
        let random = u128::from(uuid::Uuid::new_v4().as_u128() as u32);
        let v = (ms << 80) | (0x7 << 76) | ((c >> 30) << 64) | (0b10 << 62) | ((c & 0x3fff_ffff) << 32) | random;
        Uuid::from_u128(v)
    }
}

/// Reads a counter value (u64 little-endian; a short value reads as 0).
pub fn read_u64(bytes: &[u8]) -> u64 {
    bytes.get(..8).and_then(|b| b.try_into().ok()).map(u64::from_le_bytes).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commit_ids_grow_whatever_time_the_jobs_bring() {
        let mut ids = CommitIds::starting_at(1_000);
        let a = ids.next(500);
        let b = ids.next(500);
        let c = ids.next(2_000);
        let d = ids.next(1_500);
        assert!(a < b && b < c && c < d, "{a} {b} {c} {d}");
        assert_eq!(a.get_version_num(), 7);
        let ms = |u: Uuid| (u.as_u128() >> 80) as i64;
        assert_eq!((ms(a), ms(c), ms(d)), (1_000, 2_000, 2_000), "never earlier than an id already given");
        let many: Vec<Uuid> = (0..10_000).map(|_| ids.next(2_000)).collect();
        assert!(many.windows(2).all(|w| w[0] < w[1]));
        // Ids given elsewhere, ahead of this writer: the next one sorts after them.
        let mut elsewhere = CommitIds::starting_at(9_000);
        let (x, y) = (elsewhere.next(9_000), elsewhere.next(9_000));
        ids.after(y);
        ids.after(x);
        let z = ids.next(2_000);
        assert!(z > y, "{z} after {y}");
    }
}
