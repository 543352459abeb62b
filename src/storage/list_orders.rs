//! List orders kept in memory rather than in redb.
//!
//! A list sorted by title or price needs an index row whose key is placed at random among the
//! store's others; in redb every such row costs the copy-on-write of a whole leaf page, and a
//! product carried ten of them, which made random index rows most of a durable create's cost.
//! These orders are derived data: each list of a store (one sort, over every product or one
//! status) is built the first time it is read, from rows that carry the sort values alone
//! (`product_sorts`: no record is decoded), and kept in step afterwards by the changes write
//! jobs record in their transaction ([`crate::storage::writer::Tx::order_insert`]), applied once
//! it has committed and before its writers are answered, so nobody reads an order older than
//! their own write.
//!
//! Building a list and committing writes to it may overlap: the list is marked as loading
//! before the build's snapshot is taken, and changes committed from then on are queued and
//! replayed over the built list. Replaying a change the snapshot already holds is harmless: the
//! changes of one row are replayed in commit order, each removing the previous one's key.
//!
//! After a clean restart the lists held at the stop are read back from the cell's snapshot
//! (`storage::list_snapshot`) the same way: each is marked as loading, with its saved form,
//! before the writer takes a job, so every change committed since is queued for it; whoever
//! reads it first (a reader, or the snapshot's loader) loads it from the file instead of
//! building it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use tokio::sync::{Semaphore, watch};
use uuid::Uuid;

use crate::error::{ApiError, ApiResult};
use crate::memory::Meter;
use crate::storage::ranked::{Keys, Ranked};

/// Builds running at once, each on a blocking thread: a build reads a whole store, and the
/// async workers (two on a small machine) must stay free for every other request.
const BUILDERS: usize = 2;

/// Which list of a store: a product list by the number `cells::products` gives it, or a
/// record's list by where its rows are (`storage::list`: the record's order table, its scope,
/// the sort and, for a filtered list, the filter's value).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ListName {
    Product(u16),
    Record(Arc<[u8]>),
}

/// One list of one store.
pub type ListId = (Uuid, ListName);

/// Appends `id` as files name a list (the restart hint, the list snapshot): the store id (16
/// bytes), a kind (0 a product list, 1 a record list), the name's length (u16 big-endian) and
/// the name (a product list's number, u16 big-endian; a record list's name). False, and nothing
/// written, for a name too long to say.
pub fn write_id(out: &mut Vec<u8>, (store, list): &ListId) -> bool {
    let (kind, name): (u8, Vec<u8>) = match list {
        ListName::Product(n) => (0, n.to_be_bytes().to_vec()),
        ListName::Record(name) => (1, name.to_vec()),
    };
    let Ok(len) = u16::try_from(name.len()) else { return false };
    out.extend_from_slice(store.as_bytes());
    out.push(kind);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(&name);
    true
}

/// The list [`write_id`] wrote at the start of `bytes`, and what follows it; `None` when cut
/// short or of an unknown kind.
pub fn read_id(bytes: &[u8]) -> Option<(ListId, &[u8])> {
    let store = Uuid::from_slice(bytes.get(..16)?).ok()?;
    let len = u16::from_be_bytes([*bytes.get(17)?, *bytes.get(18)?]) as usize;
    let name = bytes.get(19..19 + len)?;
    let list = match (bytes[16], name) {
        (0, &[hi, lo]) => ListName::Product(u16::from_be_bytes([hi, lo])),
        (1, name) => ListName::Record(name.into()),
        _ => return None,
    };
    Some(((store, list), &bytes[19 + len..]))
}

/// A held list saved at the last clean stop and not yet read back: loads it (`None` when its
/// bytes are damaged, after saying so).
pub type SavedList = Box<dyn FnOnce() -> Option<Ranked> + Send>;

/// One list change recorded by a write job.
pub struct Change {
    pub store: Uuid,
    pub list: ListName,
    pub key: Box<[u8]>,
    pub insert: bool,
}

/// A list held, and what it costs: the bytes its keys hold on the heap.
pub struct HeldList {
    keys: Ranked,
    bytes: usize,
}

impl HeldList {
    /// The list of the keys of `parts` (a store's rows read in parts at once).
    fn build(parts: Vec<Keys>) -> HeldList {
        HeldList::of(Ranked::from_parts(parts))
    }

    fn of(keys: Ranked) -> HeldList {
        HeldList { bytes: keys.heap_bytes(), keys }
    }

    /// Inserts or removes `key`; answers how the list's cost changed.
    fn apply(&mut self, key: &[u8], insert: bool) -> i64 {
        if insert {
            self.keys.insert(key);
        } else {
            self.keys.remove(key);
        }
        let before = std::mem::replace(&mut self.bytes, self.keys.heap_bytes());
        self.bytes as i64 - before as i64
    }

    /// Up to `limit` keys from rank `offset` (see [`Ranked::page`]) and the list's length.
    pub fn page(&self, desc: bool, offset: usize, limit: usize) -> (Vec<&[u8]>, usize) {
        (self.keys.page(desc, offset, limit), self.keys.len())
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

struct Loaded {
    list: RwLock<HeldList>,
    /// When the list was last read, on [`ListOrders::clock`].
    used: AtomicU64,
}

/// A build under way: the changes committed meanwhile, and a signal for readers waiting on it.
/// A list restored from the snapshot is one whose build has not begun while `saved` is there:
/// whoever takes it loads the list.
struct Loading {
    queue: Mutex<Vec<Change>>,
    done: watch::Sender<bool>,
    saved: Mutex<Option<SavedList>>,
}

impl Loading {
    fn new(saved: Option<SavedList>) -> Arc<Loading> {
        Arc::new(Loading { queue: Mutex::default(), done: watch::channel(false).0, saved: Mutex::new(saved) })
    }

    /// The saved form, to the one caller that takes it.
    fn claim(&self) -> Option<SavedList> {
        self.saved.lock().ok()?.take()
    }
}

/// What a reader found when it looked for its list.
enum Look {
    Absent,
    Wait(watch::Receiver<bool>),
    Saved(Arc<Loading>, SavedList),
}

enum Slot {
    Loading(Arc<Loading>),
    Loaded(Arc<Loaded>),
}

/// Ends a build, however it ends: a slot still loading (the build failed or was abandoned) is
/// removed, and readers waiting on it look again.
struct BuildGuard {
    orders: Arc<ListOrders>,
    id: ListId,
    loading: Arc<Loading>,
}

impl Drop for BuildGuard {
    fn drop(&mut self) {
        if let Ok(mut lists) = self.orders.lists.write()
            && matches!(lists.get(&self.id), Some(Slot::Loading(l)) if Arc::ptr_eq(l, &self.loading))
        {
            lists.remove(&self.id);
        }
        self.loading.done.send_replace(true);
    }
}

/// The in-memory list orders of every store of one database, within a byte budget (the cell's
/// share of the memory budget): the least recently read lists are dropped to make room and
/// built again when next read; a list larger than the whole budget answers its read from a
/// build and is not kept (slower, never wrong).
pub struct ListOrders {
    lists: RwLock<HashMap<ListId, Slot>>,
    builders: Arc<Semaphore>,
    clock: AtomicU64,
    pub meter: Meter,
}

fn poisoned() -> ApiError {
    ApiError::internal("list orders lock poisoned")
}

impl ListOrders {
    pub fn new(budget: u64) -> ListOrders {
        ListOrders {
            lists: RwLock::default(),
            builders: Arc::new(Semaphore::new(BUILDERS)),
            clock: AtomicU64::new(0),
            meter: Meter::new(budget),
        }
    }

    /// Applies the changes of a committed transaction, in the order they were recorded, then
    /// keeps the lists within the budget.
    /// Applies a committed batch's changes, leaving `changes` empty (its capacity kept).
    pub fn apply(&self, changes: &mut Vec<Change>) {
        if changes.is_empty() {
            return;
        }
        {
            let Ok(lists) = self.lists.read() else { return };
            for c in changes.drain(..) {
                let id = (c.store, c.list);
                match lists.get(&id) {
                    Some(Slot::Loaded(l)) => {
                        if let Ok(mut list) = l.list.write() {
                            self.meter.change(list.apply(&c.key, c.insert), 0);
                        }
                    }
                    Some(Slot::Loading(b)) => {
                        if let Ok(mut q) = b.queue.lock() {
                            q.push(Change { store: id.0, list: id.1, key: c.key, insert: c.insert });
                        }
                    }
                    // Not in memory: the next build reads the committed rows.
                    None => {}
                }
            }
        }
        if self.meter.bytes() > self.meter.budget()
            && let Ok(mut lists) = self.lists.write()
        {
            self.evict_for(&mut lists, 0, None);
        }
    }

    /// Runs `read` on list `id`, building it first with `build` (which must read the store's
    /// committed rows in a snapshot it takes when called) if it is not held. Builds run on the
    /// blocking pool, at most [`BUILDERS`] at once; a second reader of a list being built waits
    /// for that build instead of starting its own.
    pub async fn read<T>(
        self: &Arc<Self>,
        id: ListId,
        build: impl FnOnce() -> ApiResult<Vec<Keys>> + Send + 'static,
        read: impl FnOnce(&HeldList) -> T + Send + 'static,
    ) -> ApiResult<T>
    where
        T: Send + 'static,
    {
        let tick = self.clock.fetch_add(1, Ordering::Relaxed);
        let saved = loop {
            let look = match self.lists.read().map_err(|_| poisoned())?.get(&id) {
                Some(Slot::Loaded(l)) => {
                    self.meter.hit();
                    l.used.store(tick, Ordering::Relaxed);
                    return Ok(read(&*l.list.read().map_err(|_| poisoned())?));
                }
                Some(Slot::Loading(b)) => match b.claim() {
                    Some(saved) => Look::Saved(b.clone(), saved),
                    None => Look::Wait(b.done.subscribe()),
                },
                None => Look::Absent,
            };
            match look {
                Look::Wait(mut done) => {
                    // The build publishes or gives up; either way, look again.
                    let _ = done.wait_for(|d| *d).await;
                }
                Look::Saved(loading, saved) => break Some((loading, saved)),
                Look::Absent => break None,
            }
        };
        self.meter.miss();
        let (loading, saved) = match saved {
            Some((loading, saved)) => (loading, Some(saved)),
            None => {
                let loading = Loading::new(None);
                let taken = {
                    let mut lists = self.lists.write().map_err(|_| poisoned())?;
                    let taken = lists.contains_key(&id);
                    if !taken {
                        lists.insert(id.clone(), Slot::Loading(loading.clone()));
                    }
                    taken
                };
                if taken {
                    // Another reader started a build between the look and the lock: wait for it.
                    return Box::pin(self.read(id, build, read)).await;
                }
                (loading, None)
            }
        };
        // From here the slot is released however this ends: built, failed or abandoned.
        let guard = BuildGuard { orders: self.clone(), id: id.clone(), loading };
        // Reading a saved list back costs its bytes, not a build: it waits behind no build.
        let permit = match saved {
            None => Some(self.builders.clone().acquire_owned().await.map_err(ApiError::internal)?),
            Some(_) => None,
        };
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            // A saved form that proves damaged is built from the rows as if it were absent.
            let make = move || match saved.and_then(|load| load()) {
                Some(keys) => Ok(HeldList::of(keys)),
                None => Ok(HeldList::build(build()?)),
            };
            guard.orders.build(id, &guard.loading, tick, make, read)
        })
        .await
        .map_err(ApiError::internal)?
    }

    /// Marks each of `saved` (the snapshot's lists, hottest first) as loading from its saved
    /// form, before the writer takes a job: the changes committed from then on are queued for
    /// it. Answers the lists marked, in their order, for [`ListOrders::load_restored`].
    pub fn restore(&self, saved: Vec<(ListId, SavedList)>) -> Vec<ListId> {
        let Ok(mut lists) = self.lists.write() else { return Vec::new() };
        // Ticks below every later read's, the hottest list's highest (see `load_restored`).
        self.clock.fetch_add(saved.len() as u64, Ordering::Relaxed);
        let mut marked = Vec::with_capacity(saved.len());
        for (id, load) in saved {
            if !lists.contains_key(&id) {
                lists.insert(id.clone(), Slot::Loading(Loading::new(Some(load))));
                marked.push(id);
            }
        }
        marked
    }

    /// Loads the lists [`ListOrders::restore`] marked, in their order, those no reader took
    /// first, while the lists' share is under four fifths full; the rest are unmarked (built from
    /// their rows when next read: their queues would otherwise grow with every write until then).
    /// Once `stop` is set it loads no more and answers the lists still marked, to be loaded by
    /// a second call once nothing writes: a clean stop saves them again, so a restart soon after
    /// another, before every list was read back, still keeps them all.
    pub fn load_restored(self: &Arc<Self>, marked: Vec<ListId>, stop: &AtomicBool) -> Vec<ListId> {
        let n = marked.len() as u64;
        let mut marked = marked.into_iter().enumerate();
        for (i, id) in marked.by_ref() {
            if stop.load(Ordering::Acquire) {
                return std::iter::once(id).chain(marked.map(|(_, id)| id)).collect();
            }
            let Some((loading, saved)) = self.claim_restored(&id) else { continue };
            // Dropping the guard releases the slot, with its queue.
            let guard = BuildGuard { orders: self.clone(), id: id.clone(), loading };
            let held = self.meter.stats();
            if held.bytes >= held.budget / 10 * 8 {
                continue;
            }
            self.meter.miss();
            let make = move || saved().map(HeldList::of).ok_or_else(|| ApiError::internal("the saved list is damaged"));
            if let Err(e) = self.build(id, &guard.loading, n - 1 - i as u64, make, |_| ()) {
                tracing::debug!(error = %e, "a saved list was not loaded; it is built when next read");
            }
        }
        Vec::new()
    }

    /// Unmarks the restored lists `ids` no reader took: each is built from its rows when next read.
    pub fn unmark(self: &Arc<Self>, ids: Vec<ListId>) {
        for id in ids {
            if let Some((loading, _)) = self.claim_restored(&id) {
                drop(BuildGuard { orders: self.clone(), id, loading });
            }
        }
    }

    /// The saved form of restored list `id`, when no reader has taken it.
    fn claim_restored(&self, id: &ListId) -> Option<(Arc<Loading>, SavedList)> {
        match self.lists.read().ok()?.get(id) {
            Some(Slot::Loading(b)) => b.claim().map(|saved| (b.clone(), saved)),
            _ => None,
        }
    }

    /// Whether list `id` is held or on its way (built or loaded).
    pub fn holds(&self, id: &ListId) -> bool {
        self.lists.read().is_ok_and(|l| l.contains_key(id))
    }

    /// Makes list `id` with `make` (a build, or a load of its saved form), replays the changes
    /// committed meanwhile, keeps it if it fits, and answers `read` from it.
    fn build<T>(
        &self,
        id: ListId,
        loading: &Arc<Loading>,
        tick: u64,
        make: impl FnOnce() -> ApiResult<HeldList>,
        read: impl FnOnce(&HeldList) -> T,
    ) -> ApiResult<T> {
        let started = std::time::Instant::now();
        let mut list = make()?;
        // The map's write lock keeps `apply` out between draining the queue and publishing.
        let mut lists = self.lists.write().map_err(|_| poisoned())?;
        for c in std::mem::take(&mut *loading.queue.lock().map_err(|_| poisoned())?) {
            list.apply(&c.key, c.insert);
        }
        tracing::info!(store = %id.0, list = ?id.1, keys = list.len(), ms = started.elapsed().as_millis() as u64, "list order built");
        let answer = read(&list);
        let ours = matches!(lists.get(&id), Some(Slot::Loading(l)) if Arc::ptr_eq(l, loading));
        if ours {
            lists.remove(&id);
        }
        // Kept when it fits the budget and was not forgotten while building (its rows were
        // replaced wholesale): otherwise this read is answered from the build alone.
        if ours && list.bytes as u64 <= self.meter.budget() {
            let bytes = list.bytes;
            self.evict_for(&mut lists, bytes, Some(&id));
            self.meter.change(bytes as i64, 1);
            lists.insert(id, Slot::Loaded(Arc::new(Loaded { list: RwLock::new(list), used: AtomicU64::new(tick) })));
        }
        Ok(answer)
    }

    /// The lists held, the most recently read first, at most `n`: what to warm after a restart.
    pub fn hottest(&self, n: usize) -> Vec<ListId> {
        self.by_recency().into_iter().take(n).map(|(id, _)| id).collect()
    }

    /// Runs `f` on every list held, the most recently read first (what a clean stop saves);
    /// answers how many.
    pub fn each_held<E>(&self, mut f: impl FnMut(&ListId, &Ranked) -> Result<(), E>) -> Result<usize, E> {
        let held = self.by_recency();
        for (id, loaded) in &held {
            if let Ok(list) = loaded.list.read() {
                f(id, &list.keys)?;
            }
        }
        Ok(held.len())
    }

    /// Whether any list is held (built or read back).
    pub fn holds_any(&self) -> bool {
        self.lists.read().is_ok_and(|lists| lists.values().any(|slot| matches!(slot, Slot::Loaded(_))))
    }

    fn by_recency(&self) -> Vec<(ListId, Arc<Loaded>)> {
        let Ok(lists) = self.lists.read() else { return Vec::new() };
        let mut held: Vec<(u64, ListId, Arc<Loaded>)> = lists
            .iter()
            .filter_map(|(id, slot)| match slot {
                Slot::Loaded(l) => Some((l.used.load(Ordering::Relaxed), id.clone(), l.clone())),
                Slot::Loading(_) => None,
            })
            .collect();
        held.sort_unstable_by(|a, b| (b.0, &b.1).cmp(&(a.0, &a.1)));
        held.into_iter().map(|(_, id, l)| (id, l)).collect()
    }

    /// Drops every list of `store`: its rows were written other than through recorded changes
    /// (a store copied in or deleted by a move). They are built again when next read.
    pub fn forget(&self, store: Uuid) {
        self.forget_where(store, |_| true);
    }

    /// Drops the record lists of `store` whose names start with `prefix` (see
    /// [`crate::storage::writer::Tx::forget_lists`]).
    pub fn forget_lists(&self, store: Uuid, prefix: &[u8]) {
        self.forget_where(store, |name| matches!(name, ListName::Record(n) if n.starts_with(prefix)));
    }

    fn forget_where(&self, store: Uuid, which: impl Fn(&ListName) -> bool) {
        let Ok(mut lists) = self.lists.write() else { return };
        lists.retain(|id, slot| {
            if id.0 != store || !which(&id.1) {
                return true;
            }
            if let Slot::Loaded(l) = slot {
                self.meter.change(-(l.list.read().map(|x| x.bytes).unwrap_or(0) as i64), -1);
            }
            false
        });
    }

    /// Drops the least recently read lists (but `keep`) until `incoming` more bytes fit.
    fn evict_for(&self, lists: &mut HashMap<ListId, Slot>, incoming: usize, keep: Option<&ListId>) {
        let budget = self.meter.budget() as usize;
        let mut held = self.meter.bytes() as usize;
        if held + incoming <= budget {
            return;
        }
        let mut loaded: Vec<(u64, ListId, usize)> = lists
            .iter()
            .filter(|(id, _)| Some(*id) != keep)
            .filter_map(|(id, slot)| match slot {
                Slot::Loaded(l) => {
                    Some((l.used.load(Ordering::Relaxed), id.clone(), l.list.read().map(|x| x.bytes).unwrap_or(0)))
                }
                Slot::Loading(_) => None,
            })
            .collect();
        loaded.sort_unstable();
        for (_, id, bytes) in loaded {
            if held + incoming <= budget {
                break;
            }
            lists.remove(&id);
            self.meter.change(-(bytes as i64), -1);
            held = held.saturating_sub(bytes);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ONE: ListName = ListName::Product(1);

    fn key(n: u8) -> Box<[u8]> {
        vec![n].into_boxed_slice()
    }

    fn keys_of(ns: &[u8]) -> Keys {
        let mut keys = Keys::default();
        for n in ns {
            keys.push(&[*n]);
        }
        keys
    }

    /// What a list of `ns`, freshly built, costs.
    fn cost(ns: &[u8]) -> u64 {
        HeldList::build(vec![keys_of(ns)]).bytes as u64
    }

    /// What the held list of `store` costs now.
    async fn held(orders: &Arc<ListOrders>, store: Uuid) -> u64 {
        orders.read((store, ONE), || Ok(vec![Keys::default()]), |l| l.bytes as u64).await.unwrap()
    }

    fn change(store: Uuid, n: u8, insert: bool) -> Change {
        Change { store, list: ONE, key: key(n), insert }
    }

    fn orders(budget: u64) -> Arc<ListOrders> {
        Arc::new(ListOrders::new(budget))
    }

    async fn keys(orders: &Arc<ListOrders>, store: Uuid, build: Vec<u8>) -> Vec<u8> {
        orders.read((store, ONE), move || Ok(vec![keys_of(&build)]), |l| l.page(false, 0, 100).0.concat()).await.unwrap()
    }

    #[tokio::test]
    async fn changes_reach_loaded_lists_and_skip_others() {
        let orders = orders(1 << 20);
        let (a, b) = (Uuid::from_u128(1), Uuid::from_u128(2));
        assert_eq!(keys(&orders, a, vec![3, 1]).await, vec![1, 3]);
        orders.apply(&mut vec![change(a, 2, true), change(a, 3, false), change(b, 9, true)]);
        assert_eq!(keys(&orders, a, vec![]).await, vec![1, 2], "held lists are not built again");
        assert_eq!(keys(&orders, b, vec![5]).await, vec![5], "a list not held is built from its rows");
        let stats = orders.meter.stats();
        assert_eq!((stats.hits, stats.misses), (1, 2));
        let (ca, cb) = (held(&orders, a).await, held(&orders, b).await);
        assert_eq!((stats.entries, stats.bytes), (2, ca + cb), "the meter holds what the two lists hold");
        assert_eq!(cb, cost(&[5]));
    }

    #[tokio::test]
    async fn changes_committed_during_a_build_are_replayed_over_it() {
        let orders = orders(1 << 20);
        let a = Uuid::from_u128(1);
        let during = orders.clone();
        let got = orders
            .read(
                (a, ONE),
                move || {
                    // Committed while the snapshot is read: one change it holds, one it misses.
                    during.apply(&mut vec![change(a, 1, false), change(a, 2, true), change(a, 4, true)]);
                    Ok(vec![keys_of(&[2, 3])])
                },
                |l| l.page(false, 0, 100).0.concat(),
            )
            .await
            .unwrap();
        assert_eq!(got, vec![2, 3, 4]);
    }

    #[tokio::test]
    async fn a_store_forgotten_during_its_build_is_not_kept() {
        let orders = orders(1 << 20);
        let a = Uuid::from_u128(1);
        let during = orders.clone();
        let got = orders
            .read(
                (a, ONE),
                move || {
                    during.forget(a);
                    Ok(vec![keys_of(&[7])])
                },
                |l| l.page(false, 0, 100).0.concat(),
            )
            .await
            .unwrap();
        assert_eq!(got, vec![7]);
        assert_eq!(keys(&orders, a, vec![8]).await, vec![8]);
    }

    #[tokio::test]
    async fn the_budget_drops_the_least_recently_read_lists_and_keeps_none_larger_than_itself() {
        // Room for two lists of two keys.
        let orders = orders(2 * cost(&[1, 2]));
        let (a, b, c) = (Uuid::from_u128(1), Uuid::from_u128(2), Uuid::from_u128(3));
        keys(&orders, a, vec![1, 2]).await;
        keys(&orders, b, vec![3, 4]).await;
        keys(&orders, a, vec![]).await;
        // c needs room: b, read longest ago, goes.
        keys(&orders, c, vec![5, 6]).await;
        assert_eq!(keys(&orders, a, vec![]).await, vec![1, 2], "a is still held");
        assert_eq!(keys(&orders, b, vec![9]).await, vec![9], "b was dropped and is built again");
        assert!(orders.meter.stats().bytes <= orders.meter.budget());
        // Writes that grow a held list past the budget drop another list.
        orders.apply(&mut vec![change(b, 10, true), change(b, 11, true), change(b, 12, true)]);
        let stats = orders.meter.stats();
        assert!(stats.bytes <= stats.budget, "{stats:?}");
        // A list larger than the whole budget is answered, never kept.
        let big = Uuid::from_u128(4);
        let many: Vec<u8> = (1..=60).collect();
        assert!(cost(&many) > orders.meter.budget());
        assert_eq!(keys(&orders, big, many.clone()).await, many);
        assert_eq!(keys(&orders, big, vec![7]).await, vec![7], "built again: nothing was kept");
    }

    #[tokio::test]
    async fn the_hottest_lists_are_the_most_recently_read() {
        let orders = orders(1 << 20);
        let (a, b, c) = (Uuid::from_u128(1), Uuid::from_u128(2), Uuid::from_u128(3));
        for s in [a, b, c] {
            keys(&orders, s, vec![1]).await;
        }
        keys(&orders, a, vec![]).await;
        assert_eq!(orders.hottest(2), vec![(a, ONE), (c, ONE)]);
    }

    /// A saved form that loads `ns`, and counts its loads in `loads`.
    fn saved(ns: &[u8], loads: &Arc<AtomicU64>) -> SavedList {
        let (keys, loads) = (keys_of(ns), loads.clone());
        Box::new(move || {
            loads.fetch_add(1, Ordering::Relaxed);
            Some(Ranked::from_keys(keys))
        })
    }

    #[tokio::test]
    async fn a_restored_list_is_loaded_by_its_first_reader_with_the_changes_committed_since() {
        let orders = orders(1 << 20);
        let (a, b, c) = (Uuid::from_u128(1), Uuid::from_u128(2), Uuid::from_u128(3));
        let loads = Arc::new(AtomicU64::new(0));
        let damaged: SavedList = Box::new(|| None);
        let marked =
            orders.restore(vec![((a, ONE), saved(&[1, 3], &loads)), ((b, ONE), damaged), ((c, ONE), saved(&[5], &loads))]);
        assert_eq!(marked.len(), 3);
        assert!(orders.holds(&(a, ONE)) && orders.hottest(5).is_empty(), "marked, not yet held");
        // Committed after the restore, before anyone read the lists.
        orders.apply(&mut vec![change(a, 2, true), change(a, 3, false), change(b, 8, true)]);
        assert_eq!(keys(&orders, a, vec![9]).await, vec![1, 2], "loaded, not built, and the changes replayed");
        assert_eq!(keys(&orders, b, vec![7]).await, vec![7, 8], "a damaged list is built from its rows");
        assert_eq!(keys(&orders, a, vec![9]).await, vec![1, 2], "held");
        // The loader finds a and b taken and loads c alone.
        orders.load_restored(marked, &AtomicBool::new(false));
        assert_eq!(loads.load(Ordering::Relaxed), 2);
        assert_eq!(keys(&orders, c, vec![9]).await, vec![5]);
        let stats = orders.meter.stats();
        assert_eq!((stats.entries, stats.hits, stats.misses), (3, 2, 3));
    }

    #[tokio::test]
    async fn the_loader_goes_hottest_first_and_stops_at_four_fifths_of_the_share_or_when_told() {
        let lists: Vec<Uuid> = (1..=4).map(Uuid::from_u128).collect();
        let loads = Arc::new(AtomicU64::new(0));
        let ten: Vec<u8> = (0..10).collect();
        // Room for the first three lists' four fifths: the fourth is left to its build.
        let orders = orders(cost(&ten) * 3 * 10 / 8 + 1);
        let saved_all = |loads: &Arc<AtomicU64>| lists.iter().map(|s| ((*s, ONE), saved(&ten, loads))).collect();
        let marked = orders.restore(saved_all(&loads));
        orders.load_restored(marked, &AtomicBool::new(false));
        assert_eq!(loads.load(Ordering::Relaxed), 3);
        assert_eq!(orders.hottest(5), lists[..3].iter().map(|s| (*s, ONE)).collect::<Vec<_>>(), "the hottest first");
        assert!(!orders.holds(&(lists[3], ONE)), "unmarked: built when read");
        assert_eq!(keys(&orders, lists[3], vec![42]).await, vec![42]);
        // Told to stop: nothing more is loaded, and every list stays marked, answered in order
        // for the stop to load once nothing writes.
        let fresh = Arc::new(ListOrders::new(1 << 20));
        let marked = fresh.restore(saved_all(&loads));
        let left = fresh.load_restored(marked.clone(), &AtomicBool::new(true));
        assert_eq!((loads.load(Ordering::Relaxed), fresh.meter.stats().entries), (3, 0));
        assert_eq!(left, marked);
        assert!(lists.iter().all(|s| fresh.holds(&(*s, ONE))));
        fresh.apply(&mut vec![change(lists[1], 42, true)]);
        assert_eq!(fresh.load_restored(left, &AtomicBool::new(false)), Vec::<ListId>::new());
        assert_eq!(loads.load(Ordering::Relaxed), 7);
        assert_eq!(fresh.hottest(5), lists.iter().map(|s| (*s, ONE)).collect::<Vec<_>>(), "in their order");
        assert_eq!(keys(&fresh, lists[1], vec![]).await, [ten.clone(), vec![42]].concat(), "with the change queued");
        // Unmarked instead: each is built from its rows when read.
        let unmarked = Arc::new(ListOrders::new(1 << 20));
        let marked = unmarked.restore(saved_all(&loads));
        unmarked.unmark(marked);
        assert!(lists.iter().all(|s| !unmarked.holds(&(*s, ONE))));
        assert_eq!(keys(&unmarked, lists[0], vec![7]).await, vec![7]);
        assert_eq!(loads.load(Ordering::Relaxed), 7);
    }

    #[tokio::test]
    async fn a_failed_build_leaves_nothing_behind() {
        let orders = orders(1 << 20);
        let a = Uuid::from_u128(1);
        let failed = orders.read((a, ONE), || Err(ApiError::internal("disk")), |l| l.len()).await;
        assert!(failed.is_err());
        assert_eq!(keys(&orders, a, vec![1]).await, vec![1], "the next read builds again");
    }
}
