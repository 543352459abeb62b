//! List orders kept in memory rather than in redb.
//!
//! A list sorted by title or price needs an index row whose key is placed at random among the
//! store's others; in redb every such row costs the copy-on-write of a whole leaf page, and a
//! product carried ten of them, which made random index rows most of a durable create's cost.
//! These orders are derived data: each store's lists are built from its records the first time
//! they are read, and kept in step afterwards by the changes write jobs record in their
//! transaction ([`crate::storage::writer::Tx::order_insert`]), applied once it has committed and
//! before its writers are answered, so nobody reads an order older than their own write.
//!
//! Building a store's lists and committing writes to it may overlap: the store is marked as
//! loading before the build's snapshot is taken, and changes committed from then on are queued
//! and replayed over the built lists. Replaying a change the snapshot already holds is harmless:
//! the changes of one row are replayed in commit order, each removing the previous one's key.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use uuid::Uuid;

use crate::error::{ApiError, ApiResult};
use crate::storage::ranked::Ranked;

/// Most keys held over all stores (about 50 bytes each); the least recently read stores are
/// dropped to make room and built again when next read.
const KEY_BUDGET: usize = 4_000_000;

/// One list change recorded by a write job.
pub struct Change {
    pub store: Uuid,
    /// Which list of the store (the owner's numbering).
    pub list: u16,
    pub key: Box<[u8]>,
    pub insert: bool,
}

/// The lists of one store, by list number.
#[derive(Default)]
pub struct StoreLists {
    lists: HashMap<u16, Ranked>,
}

impl StoreLists {
    /// Lists built from `(list, key)` pairs.
    fn build(rows: Vec<(u16, Box<[u8]>)>) -> StoreLists {
        let mut by_list: HashMap<u16, Vec<Box<[u8]>>> = HashMap::new();
        for (list, key) in rows {
            by_list.entry(list).or_default().push(key);
        }
        StoreLists { lists: by_list.into_iter().map(|(list, keys)| (list, Ranked::from_keys(keys))).collect() }
    }

    fn apply(&mut self, c: Change) {
        if c.insert {
            self.lists.entry(c.list).or_default().insert(c.key);
        } else if let Some(l) = self.lists.get_mut(&c.list) {
            l.remove(&c.key);
        }
    }

    /// Up to `limit` keys of `list` from rank `offset` (see [`Ranked::page`]) and the list's length.
    pub fn page(&self, list: u16, desc: bool, offset: usize, limit: usize) -> (Vec<&[u8]>, usize) {
        match self.lists.get(&list) {
            Some(l) => (l.page(desc, offset, limit), l.len()),
            None => (Vec::new(), 0),
        }
    }

    fn keys(&self) -> usize {
        self.lists.values().map(Ranked::len).sum()
    }
}

struct Loaded {
    lists: RwLock<StoreLists>,
    /// When the store was last read, on [`ListOrders::clock`].
    used: AtomicU64,
}

enum Slot {
    /// Being built; changes committed meanwhile wait here.
    Loading(Arc<Mutex<Vec<Change>>>),
    Loaded(Arc<Loaded>),
}

/// The in-memory list orders of every store of one database.
#[derive(Default)]
pub struct ListOrders {
    stores: RwLock<HashMap<Uuid, Slot>>,
    /// One build at a time: builds are rare, and two of the same store would do the work twice.
    building: Mutex<()>,
    clock: AtomicU64,
}

fn poisoned() -> ApiError {
    ApiError::internal("list orders lock poisoned")
}

impl ListOrders {
    /// Applies the changes of a committed transaction, in the order they were recorded.
    pub fn apply(&self, changes: Vec<Change>) {
        if changes.is_empty() {
            return;
        }
        let Ok(stores) = self.stores.read() else { return };
        for c in changes {
            match stores.get(&c.store) {
                Some(Slot::Loaded(l)) => {
                    if let Ok(mut lists) = l.lists.write() {
                        lists.apply(c);
                    }
                }
                Some(Slot::Loading(queue)) => {
                    if let Ok(mut q) = queue.lock() {
                        q.push(c);
                    }
                }
                // Not in memory: the next build reads the committed records.
                None => {}
            }
        }
    }

    /// Runs `read` on the lists of `store`, building them first with `build` (which must read
    /// the store's committed records in a snapshot it takes when called) if they are not held.
    pub fn read<T>(
        &self,
        store: Uuid,
        build: impl FnOnce() -> ApiResult<Vec<(u16, Box<[u8]>)>>,
        read: impl FnOnce(&StoreLists) -> T,
    ) -> ApiResult<T> {
        let tick = self.clock.fetch_add(1, Ordering::Relaxed);
        if let Some(l) = self.loaded(store)? {
            l.used.store(tick, Ordering::Relaxed);
            return Ok(read(&*l.lists.read().map_err(|_| poisoned())?));
        }
        let _building = self.building.lock().map_err(|_| poisoned())?;
        if let Some(l) = self.loaded(store)? {
            return Ok(read(&*l.lists.read().map_err(|_| poisoned())?));
        }
        let queue = Arc::new(Mutex::new(Vec::new()));
        self.stores.write().map_err(|_| poisoned())?.insert(store, Slot::Loading(queue.clone()));
        let started = std::time::Instant::now();
        let rows = match build() {
            Ok(rows) => rows,
            Err(e) => {
                self.stores.write().map_err(|_| poisoned())?.remove(&store);
                return Err(e);
            }
        };
        let mut lists = StoreLists::build(rows);
        // The map's write lock keeps `apply` out between draining the queue and publishing.
        let mut stores = self.stores.write().map_err(|_| poisoned())?;
        for c in std::mem::take(&mut *queue.lock().map_err(|_| poisoned())?) {
            lists.apply(c);
        }
        tracing::info!(%store, keys = lists.keys(), ms = started.elapsed().as_millis() as u64, "list orders built");
        let answer = read(&lists);
        // Forgotten while building (its rows were replaced wholesale): answer this read from
        // the snapshot, keep nothing.
        if matches!(stores.get(&store), Some(Slot::Loading(q)) if Arc::ptr_eq(q, &queue)) {
            evict_for(&mut stores, lists.keys());
            stores.insert(store, Slot::Loaded(Arc::new(Loaded { lists: RwLock::new(lists), used: AtomicU64::new(tick) })));
        }
        Ok(answer)
    }

    fn loaded(&self, store: Uuid) -> ApiResult<Option<Arc<Loaded>>> {
        Ok(match self.stores.read().map_err(|_| poisoned())?.get(&store) {
            Some(Slot::Loaded(l)) => Some(l.clone()),
            _ => None,
        })
    }

    /// Drops the lists of `store`: its rows were written other than through recorded changes
    /// (a store copied in or deleted by a move). They are built again when next read.
    pub fn forget(&self, store: Uuid) {
        if let Ok(mut stores) = self.stores.write() {
            stores.remove(&store);
        }
    }
}

/// Drops the least recently read stores until `incoming` more keys fit the budget.
fn evict_for(stores: &mut HashMap<Uuid, Slot>, incoming: usize) {
    let mut loaded: Vec<(u64, Uuid, usize)> = stores
        .iter()
        .filter_map(|(id, slot)| match slot {
            Slot::Loaded(l) => Some((l.used.load(Ordering::Relaxed), *id, l.lists.read().map(|x| x.keys()).unwrap_or(0))),
            Slot::Loading(_) => None,
        })
        .collect();
    let mut held: usize = loaded.iter().map(|(_, _, n)| n).sum();
    loaded.sort_unstable();
    for (_, id, n) in loaded {
        if held + incoming <= KEY_BUDGET {
            break;
        }
        stores.remove(&id);
        held -= n;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: u8) -> Box<[u8]> {
        vec![n].into_boxed_slice()
    }

    fn change(store: Uuid, n: u8, insert: bool) -> Change {
        Change { store, list: 1, key: key(n), insert }
    }

    fn keys(orders: &ListOrders, store: Uuid, build: Vec<u8>) -> Vec<u8> {
        orders
            .read(store, || Ok(build.into_iter().map(|n| (1, key(n))).collect()), |l| l.page(1, false, 0, 100).0.concat())
            .unwrap()
    }

    #[test]
    fn changes_reach_loaded_stores_and_skip_others() {
        let orders = ListOrders::default();
        let (a, b) = (Uuid::from_u128(1), Uuid::from_u128(2));
        assert_eq!(keys(&orders, a, vec![3, 1]), vec![1, 3]);
        orders.apply(vec![change(a, 2, true), change(a, 3, false), change(b, 9, true)]);
        assert_eq!(keys(&orders, a, vec![]), vec![1, 2], "held lists are not built again");
        assert_eq!(keys(&orders, b, vec![5]), vec![5], "a store not held is built from its records");
    }

    #[test]
    fn changes_committed_during_a_build_are_replayed_over_it() {
        let orders = ListOrders::default();
        let a = Uuid::from_u128(1);
        let got = orders
            .read(
                a,
                || {
                    // Committed while the snapshot is read: one change it holds, one it misses.
                    orders.apply(vec![change(a, 1, false), change(a, 2, true), change(a, 4, true)]);
                    Ok(vec![(1, key(2)), (1, key(3))])
                },
                |l| l.page(1, false, 0, 100).0.concat(),
            )
            .unwrap();
        assert_eq!(got, vec![2, 3, 4]);
    }

    #[test]
    fn a_store_forgotten_during_its_build_is_not_kept() {
        let orders = ListOrders::default();
        let a = Uuid::from_u128(1);
        let got = orders
            .read(
                a,
                || {
                    orders.forget(a);
                    Ok(vec![(1, key(7))])
                },
                |l| l.page(1, false, 0, 100).0.concat(),
            )
            .unwrap();
        assert_eq!(got, vec![7]);
        assert_eq!(keys(&orders, a, vec![8]), vec![8]);
    }
}
