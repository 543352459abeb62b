//! List orders kept in memory rather than in redb.
//!
//! A list sorted by title or price needs an index row whose key is placed at random among the
//! store's others; in redb every such row costs the copy-on-write of a whole leaf page, and a
//! product carried ten of them, which made random index rows most of a durable create's cost.
//! These orders are derived data: each list of a store (one sort, over every product or one
//! status) is built the first time it is read, from rows that carry the sort values alone
//! (`product_sorts`: no record is decoded), and kept in step afterwards by the changes write
//! jobs record in their transaction ([`crate::storage::tx::Tx::order_insert`] for product
//! lists, [`crate::storage::tx::Tx::record_change`] for every record list), applied once it
//! has committed and before its writers are answered; a read waits in the moment between a
//! batch's commit and its application ([`Applied`]), so nobody reads an order older than a
//! state they have seen.
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

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use tokio::sync::{Semaphore, watch};
use uuid::Uuid;

use crate::error::{ApiError, ApiResult};
use crate::memory::Meter;
use crate::storage::applied::Applied;
use crate::storage::list_names::{Keeps, ListParts, RecordChange};
use crate::storage::ranked::{Keys, Ranked};

mod slots;

use slots::Slots;

/// Views held per store and record kind: a write of a record tests each, so their number is
/// bounded; a new view beyond it drops the one read longest ago.
const MAX_VIEWS: usize = 32;

/// What a held list costs besides its keys: its slot, name and member (so many small lists,
/// views of a few records, still fill the share).
const SLOT_BYTES: usize = 160;

/// Builds running at once, each on a blocking thread: a build reads a whole store, and the
/// async workers (two on a small machine) must stay free for every other request.
const BUILDERS: usize = 2;

/// Which list of a store: a product list by the number `cells::products` gives it, or a
/// record's list by its name (`storage::list_names`: the record's order table, its scope, the
/// sort and what the list keeps).
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

/// What a build read: the list's keys in parts, and for a timed view the first moment after
/// the build's at which a record it read may change state (see `storage::list_names`).
pub struct Built {
    pub parts: Vec<Keys>,
    pub until: Option<i64>,
}

impl From<Vec<Keys>> for Built {
    fn from(parts: Vec<Keys>) -> Built {
        Built { parts, until: None }
    }
}

/// The moments a timed view's keys are right for: its records' states at `from`, until
/// `until`, the first moment after it at which one of them may change (writes bring it
/// forward). A read at a moment outside builds the view again.
struct Valid {
    from: i64,
    until: AtomicI64,
}

impl Valid {
    fn new(from: i64, until: Option<i64>) -> Valid {
        Valid { from, until: AtomicI64::new(until.unwrap_or(i64::MAX)) }
    }

    fn holds(&self, now: i64) -> bool {
        now >= self.from && now < self.until.load(Ordering::Acquire)
    }

    fn bring_forward(&self, to: Option<i64>) {
        if let Some(to) = to {
            self.until.fetch_min(to, Ordering::AcqRel);
        }
    }
}

/// Whether list `id` is a timed view (it holds the states of one moment).
fn is_timed(id: &ListId) -> bool {
    matches!(&id.1, ListName::Record(name) if ListParts::of(name).is_some_and(|p| p.keeps.is_timed()))
}

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
        HeldList { bytes: keys.heap_bytes() + SLOT_BYTES, keys }
    }

    /// Inserts or removes `key`; answers how the list's cost changed.
    fn apply(&mut self, key: &[u8], insert: bool) -> i64 {
        if insert {
            self.keys.insert(key);
        } else {
            self.keys.remove(key);
        }
        let before = std::mem::replace(&mut self.bytes, self.keys.heap_bytes() + SLOT_BYTES);
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
    /// For a timed view, the moments it is right for.
    valid: Option<Valid>,
}

impl Loaded {
    fn bytes(&self) -> usize {
        self.list.read().map(|x| x.bytes).unwrap_or(0)
    }
}

/// A build under way: the changes committed meanwhile, and a signal for readers waiting on it.
/// A list restored from the snapshot is one whose build has not begun while `saved` is there:
/// whoever takes it loads the list.
struct Loading {
    queue: Mutex<Vec<Change>>,
    done: watch::Sender<bool>,
    saved: Mutex<Option<SavedList>>,
    /// For a timed view, the moment it is built for, and how far the writes meanwhile brought
    /// its end forward.
    valid: Option<Valid>,
}

impl Loading {
    fn new(saved: Option<SavedList>, valid: Option<Valid>) -> Arc<Loading> {
        Arc::new(Loading { queue: Mutex::default(), done: watch::channel(false).0, saved: Mutex::new(saved), valid })
    }

    /// The saved form, to the one caller that takes it.
    fn claim(&self) -> Option<SavedList> {
        self.saved.lock().ok()?.take()
    }
}

/// What a reader found when it looked for its list.
enum Look {
    Absent,
    /// A timed view held for other moments than the read's.
    Stale(Arc<Loaded>),
    Wait(watch::Receiver<bool>),
    Saved(Arc<Loading>, SavedList),
}

enum Slot {
    Loading(Arc<Loading>),
    Loaded(Arc<Loaded>),
}

impl Slot {
    fn valid(&self) -> Option<&Valid> {
        match self {
            Slot::Loading(l) => l.valid.as_ref(),
            Slot::Loaded(l) => l.valid.as_ref(),
        }
    }
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
    lists: RwLock<Slots<Slot>>,
    builders: Arc<Semaphore>,
    clock: AtomicU64,
    pub meter: Meter,
    /// The writer's batches, which a read waits for the lists to hold ([`Applied`]).
    applied: Arc<Applied>,
}

/// Bytes counted in a meter while a build runs, given back when it ends however it ends.
struct Reserved<'a> {
    meter: &'a Meter,
    bytes: i64,
}

impl<'a> Reserved<'a> {
    fn new(meter: &'a Meter, bytes: usize) -> Reserved<'a> {
        let bytes = bytes as i64;
        meter.change(bytes, 0);
        Reserved { meter, bytes }
    }
}

impl Drop for Reserved<'_> {
    fn drop(&mut self) {
        self.meter.change(-self.bytes, 0);
    }
}

fn poisoned() -> ApiError {
    ApiError::internal("list orders lock poisoned")
}

impl ListOrders {
    /// Lists whose reads never wait for a writer (see [`ListOrders::following`]).
    pub fn new(budget: u64) -> ListOrders {
        ListOrders::following(budget, Arc::default())
    }

    /// Lists kept by a writer numbering its batches in `applied`.
    pub fn following(budget: u64, applied: Arc<Applied>) -> ListOrders {
        ListOrders {
            lists: RwLock::default(),
            builders: Arc::new(Semaphore::new(BUILDERS)),
            clock: AtomicU64::new(0),
            meter: Meter::new(budget),
            applied,
        }
    }

    /// Applies a committed batch's key changes, in the order they were recorded, leaving
    /// `changes` empty (its capacity kept); then keeps the lists within the budget.
    pub fn apply(&self, changes: &mut Vec<Change>) {
        if changes.is_empty() {
            return;
        }
        {
            let Ok(lists) = self.lists.read() else { return };
            for c in changes.drain(..) {
                let id = (c.store, c.list);
                self.change(lists.get(&id), id, c.key, c.insert);
            }
        }
        self.keep_to_budget();
    }

    /// Applies a committed batch's writes of listed records, in order, leaving `records`
    /// empty: each held list of the record's store and kind takes the record in, lets it go or
    /// moves it, as its old and new summaries say (a timed view, as they are at its `from`,
    /// its end brought forward to the record's next change of state).
    pub fn apply_records(&self, records: &mut Vec<RecordChange>) {
        if records.is_empty() {
            return;
        }
        {
            let Ok(lists) = self.lists.read() else { return };
            for rc in records.drain(..) {
                for m in lists.members_of(rc.store, &rc.kind) {
                    let id = || (rc.store, ListName::Record(m.name.clone()));
                    // A timed view's slot is looked up first, for its moment; any other list's
                    // only when a key moves.
                    let timed = if m.keeps.is_timed() { lists.get(&id()) } else { None };
                    let valid = timed.and_then(Slot::valid);
                    let at = valid.map_or(0, |v| v.from);
                    if let Some(v) = valid {
                        v.bring_forward(rc.changes(&m.keeps, at));
                    }
                    let (out, into) = rc.moves(m.tag, &m.keeps, at);
                    for (key, insert) in [(out, false), (into, true)] {
                        if let Some(key) = key {
                            let id = id();
                            self.change(timed.or_else(|| lists.get(&id)), id, key.into(), insert);
                        }
                    }
                }
            }
        }
        self.keep_to_budget();
    }

    /// Inserts or removes `key` in list `id` (held in `slot`): at once when held, queued while
    /// it is built.
    fn change(&self, slot: Option<&Slot>, id: ListId, key: Box<[u8]>, insert: bool) {
        match slot {
            Some(Slot::Loaded(l)) => {
                if let Ok(mut list) = l.list.write() {
                    self.meter.change(list.apply(&key, insert), 0);
                }
            }
            Some(Slot::Loading(b)) => {
                if let Ok(mut q) = b.queue.lock() {
                    q.push(Change { store: id.0, list: id.1, key, insert });
                }
            }
            // Not in memory: the next build reads the committed rows.
            None => {}
        }
    }

    fn keep_to_budget(&self) {
        if self.meter.bytes() > self.meter.budget()
            && let Ok(mut lists) = self.lists.write()
        {
            self.evict_for(&mut lists, 0, None);
        }
    }

    /// Runs `read` on list `id` as it is at moment `now` (only a timed view tells moments
    /// apart), building it first with `build` (which must read the store's committed rows in a
    /// snapshot it takes when called, a timed view's states at `now`) if it is not held, or
    /// held for other moments. Builds run on the blocking pool, at most [`BUILDERS`] at once;
    /// a second reader of a list being built waits for that build instead of starting its own.
    pub async fn read<T, B>(
        self: &Arc<Self>,
        id: ListId,
        now: i64,
        build: impl FnOnce() -> ApiResult<B> + Send + 'static,
        read: impl FnOnce(&HeldList) -> T + Send + 'static,
    ) -> ApiResult<T>
    where
        T: Send + 'static,
        B: Into<Built>,
    {
        self.applied.caught_up();
        let tick = self.clock.fetch_add(1, Ordering::Relaxed);
        let saved = loop {
            let look = match self.lists.read().map_err(|_| poisoned())?.get(&id) {
                Some(Slot::Loaded(l)) if l.valid.as_ref().is_none_or(|v| v.holds(now)) => {
                    self.meter.hit();
                    l.used.store(tick, Ordering::Relaxed);
                    return Ok(read(&*l.list.read().map_err(|_| poisoned())?));
                }
                Some(Slot::Loaded(l)) => Look::Stale(l.clone()),
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
                Look::Stale(stale) => {
                    let mut lists = self.lists.write().map_err(|_| poisoned())?;
                    if matches!(lists.get(&id), Some(Slot::Loaded(l)) if Arc::ptr_eq(l, &stale)) {
                        lists.remove(&id);
                        self.meter.change(-(stale.bytes() as i64), -1);
                    }
                }
                Look::Saved(loading, saved) => break Some((loading, saved)),
                Look::Absent => break None,
            }
        };
        self.meter.miss();
        let (loading, saved) = match saved {
            Some((loading, saved)) => (loading, Some(saved)),
            None => {
                let loading = Loading::new(None, is_timed(&id).then(|| Valid::new(now, None)));
                let taken = {
                    let mut lists = self.lists.write().map_err(|_| poisoned())?;
                    let taken = lists.contains_key(&id);
                    if !taken {
                        self.make_room_for_view(&mut lists, &id);
                        lists.insert(id.clone(), Slot::Loading(loading.clone()));
                    }
                    taken
                };
                if taken {
                    // Another reader started a build between the look and the lock: wait for it.
                    return Box::pin(self.read(id, now, build, read)).await;
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
            let (orders, merged) = (guard.orders.clone(), id.clone());
            let make = move || match saved.and_then(|load| load()) {
                Some(keys) => Ok((HeldList::of(keys), None)),
                None => {
                    let built = build()?.into();
                    Ok((orders.merge(&merged, built.parts), built.until))
                }
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
            // A timed view is never saved (its moment is gone): one named is damage.
            if !lists.contains_key(&id) && !is_timed(&id) {
                lists.insert(id.clone(), Slot::Loading(Loading::new(Some(load), None)));
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
            let make = move || {
                let list = saved().map(HeldList::of).ok_or_else(|| ApiError::internal("the saved list is damaged"))?;
                Ok((list, None))
            };
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

    /// Merges the parts a build of list `id` read into the list. Room is made for the merge
    /// first: the parts, their sort runs and the list being made count in the lists' share
    /// while it runs (lists read longest ago give way), so building a large list does not take
    /// the process past its budget beside the lists held.
    fn merge(&self, id: &ListId, parts: Vec<Keys>) -> HeldList {
        let cost = Ranked::merge_cost(&parts);
        let _reserved = match self.lists.write() {
            Ok(mut lists) => {
                self.evict_for(&mut lists, cost, Some(id));
                Some(Reserved::new(&self.meter, cost))
            }
            Err(_) => None,
        };
        HeldList::build(parts)
    }

    /// Makes list `id` with `make` (a build, or a load of its saved form; with a timed view's
    /// end as the build found it), replays the changes committed meanwhile, keeps it if it
    /// fits, and answers `read` from it.
    fn build<T>(
        &self,
        id: ListId,
        loading: &Arc<Loading>,
        tick: u64,
        make: impl FnOnce() -> ApiResult<(HeldList, Option<i64>)>,
        read: impl FnOnce(&HeldList) -> T,
    ) -> ApiResult<T> {
        let started = std::time::Instant::now();
        let (mut list, until) = make()?;
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
            // Writes since the build's snapshot brought the end forward as far as theirs.
            let valid = loading.valid.as_ref().map(|v| {
                let valid = Valid::new(v.from, until);
                valid.bring_forward(Some(v.until.load(Ordering::Acquire)));
                valid
            });
            let loaded = Loaded { list: RwLock::new(list), used: AtomicU64::new(tick), valid };
            lists.insert(id, Slot::Loaded(Arc::new(loaded)));
        }
        Ok(answer)
    }

    /// The lists held, the most recently read first, at most `n`: what to warm after a restart.
    pub fn hottest(&self, n: usize) -> Vec<ListId> {
        self.by_recency().into_iter().take(n).map(|(id, _)| id).collect()
    }

    /// Runs `f` on every list held but timed views (whose moment would be gone), the most
    /// recently read first (what a clean stop saves); answers how many.
    pub fn each_held<E>(&self, mut f: impl FnMut(&ListId, &Ranked) -> Result<(), E>) -> Result<usize, E> {
        let mut n = 0;
        for (id, loaded) in self.by_recency().iter().filter(|(_, l)| l.valid.is_none()) {
            if let Ok(list) = loaded.list.read() {
                f(id, &list.keys)?;
                n += 1;
            }
        }
        Ok(n)
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
    /// [`crate::storage::tx::Tx::forget_lists`]).
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
                self.meter.change(-(l.bytes() as i64), -1);
            }
            false
        });
    }

    /// When `id` is a view and its store and record kind hold [`MAX_VIEWS`] already, drops the
    /// one read longest ago (a view being built stays).
    fn make_room_for_view(&self, lists: &mut Slots<Slot>, id: &ListId) {
        let ListName::Record(name) = &id.1 else { return };
        let Some(parts) = ListParts::of(name) else { return };
        if !matches!(parts.keeps, Keeps::View(_)) {
            return;
        }
        let views = lists.members_of(id.0, &name[..parts.kind_len]).iter().filter(|m| m.is_view());
        if views.clone().count() < MAX_VIEWS {
            return;
        }
        let oldest = views
            .map(|m| (id.0, ListName::Record(m.name.clone())))
            .filter_map(|v| match lists.get(&v) {
                Some(Slot::Loaded(l)) => Some((l.used.load(Ordering::Relaxed), v)),
                _ => None,
            })
            .min_by_key(|(used, _)| *used);
        if let Some((_, v)) = oldest
            && let Some(Slot::Loaded(l)) = lists.remove(&v)
        {
            self.meter.change(-(l.bytes() as i64), -1);
        }
    }

    /// Drops the least recently read lists (but `keep`) until `incoming` more bytes fit.
    fn evict_for(&self, lists: &mut Slots<Slot>, incoming: usize, keep: Option<&ListId>) {
        let budget = self.meter.budget() as usize;
        let mut held = self.meter.bytes() as usize;
        if held + incoming <= budget {
            return;
        }
        let mut loaded: Vec<(u64, ListId, usize)> = lists
            .iter()
            .filter(|(id, _)| Some(*id) != keep)
            .filter_map(|(id, slot)| match slot {
                Slot::Loaded(l) => Some((l.used.load(Ordering::Relaxed), id.clone(), l.bytes())),
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
mod tests;
