//! One writer per database: a thread that batches concurrent write requests into one redb
//! transaction and one fsync (group commit), then answers each request.
//!
//! A job is a closure over the transaction. Jobs check state before they write; when one fails,
//! the batch's transaction is aborted, that job alone is answered with its error, and the others
//! run again in a fresh transaction — a failed request never loses the others. Jobs must
//! therefore be repeatable (`FnMut` over the database state and their own inputs).

use std::any::Any;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, RwLock};
use std::thread::JoinHandle;

use redb::{Database, Durability};
use tokio::sync::oneshot;
use uuid::Uuid;

use crate::error::{ApiError, ApiResult, Code};
use crate::metrics::Histogram;
use crate::storage::applied::Applied;
use crate::storage::keys::Key;
use crate::storage::list_orders::ListOrders;
use crate::storage::row_cache::RowCache;
use crate::storage::syncs::Syncs;
use crate::storage::tables::MOVE_LOG;
use crate::storage::tx::{CommitIds, ListChanges, Tx};

/// Most jobs one transaction takes; bounds the latency a large batch adds to its first job.
const MAX_BATCH: usize = 512;
/// Capacity of the list-change buffer kept between batches.
const KEPT_LIST_CHANGES: usize = 1 << 14;

type Output = Box<dyn Any + Send>;
type JobFn = Box<dyn FnMut(&mut Tx) -> ApiResult<Output> + Send>;

enum Msg {
    Job(Job),
    /// Holds the thread once every job queued before it has committed (see [`Writer::hold`]).
    Hold(HoldJob),
    /// Ends the thread once every job queued before it is answered.
    Stop,
}

/// The longest a writer stays held if its [`Hold`] is neither released nor dropped (a
/// coordinator in another process that died): writes queue meanwhile, so the hold must end.
pub const MAX_HOLD: std::time::Duration = std::time::Duration::from_secs(10);

struct HoldJob {
    /// Answered once every earlier job has committed and the thread waits.
    held: oneshot::Sender<()>,
    /// Dropped (or sent on) to let the thread go on.
    release: mpsc::Receiver<()>,
    /// Set when [`MAX_HOLD`] ended the hold before its release.
    lapsed: Arc<std::sync::atomic::AtomicBool>,
    /// How long the hold may last: [`MAX_HOLD`] outside tests.
    limit: std::time::Duration,
}

/// A writer held at a barrier: nothing commits until this is released or dropped. Writes sent
/// meanwhile queue and run after.
pub struct Hold {
    release: Option<mpsc::Sender<()>>,
    lapsed: Arc<std::sync::atomic::AtomicBool>,
}

impl Hold {
    /// Lets the writer go on; false when [`MAX_HOLD`] had already ended the hold (something
    /// may have committed since it was taken).
    pub fn release(mut self) -> bool {
        if let Some(r) = self.release.take() {
            let _ = r.send(());
        }
        !self.lapsed.load(Ordering::Acquire)
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        if let Some(r) = self.release.take() {
            let _ = r.send(());
        }
    }
}

struct Job {
    store: Option<Uuid>,
    /// Its transaction must be on disk before it is answered ([`Writer::write`]); a batch of
    /// jobs that need not be ([`Writer::write_unsynced`]) commits without an fsync.
    synced: bool,
    run: JobFn,
    reply: oneshot::Sender<ApiResult<Output>>,
}

/// Stores whose writes are held or tracked while they move between cells.
#[derive(Default)]
pub struct MoveGate {
    /// Writes answer 503 `STORE_MOVING` (the final step of a move).
    frozen: RwLock<HashSet<Uuid>>,
    /// Writes are recorded in the move log (the bulk copy is under way).
    tracked: RwLock<HashSet<Uuid>>,
}

impl MoveGate {
    pub fn is_frozen(&self, store: Uuid) -> bool {
        self.frozen.read().map(|s| s.contains(&store)).unwrap_or(false)
    }

    /// Whether the store is being moved (its writes are logged for the target).
    pub fn is_tracked(&self, store: Uuid) -> bool {
        self.tracked.read().map(|s| s.contains(&store)).unwrap_or(false)
    }

    pub fn set_frozen(&self, store: Uuid, on: bool) {
        mark(&self.frozen, store, on);
    }

    pub fn set_tracked(&self, store: Uuid, on: bool) {
        mark(&self.tracked, store, on);
    }
}

/// Puts `store` in `stores` or takes it out.
fn mark(stores: &RwLock<HashSet<Uuid>>, store: Uuid, on: bool) {
    if let Ok(mut s) = stores.write() {
        if on {
            s.insert(store);
        } else {
            s.remove(&store);
        }
    }
}

/// Per-store write generations, bumped after each commit that wrote the store and before its
/// writers are answered: a cache tagged with the generation it was built at is current exactly
/// while the generation still matches, and a client never reads a write it has seen, its own
/// or another's, from a stale one (a read waits out the moment between a commit's visibility
/// and its bump: [`Applied`]).
#[derive(Default)]
pub struct Generations {
    /// Jobs that name no store may touch any store: they move every store on.
    global: AtomicU64,
    stores: RwLock<HashMap<Uuid, u64>>,
    applied: Arc<Applied>,
}

impl Generations {
    fn following(applied: Arc<Applied>) -> Generations {
        Generations { applied, ..Generations::default() }
    }

    /// The current generation of `store` (only ever grows).
    pub fn get(&self, store: Uuid) -> u64 {
        self.applied.caught_up();
        let own = self.stores.read().map(|m| m.get(&store).copied().unwrap_or(0)).unwrap_or(0);
        own + self.global.load(Ordering::Acquire)
    }

    /// The generation moved on by every commit of a job that names no store (all of the
    /// account directory's).
    pub fn global(&self) -> u64 {
        self.applied.caught_up();
        self.global.load(Ordering::Acquire)
    }

    fn bump(&self, stores: &[Option<Uuid>]) {
        if stores.iter().any(Option::is_none) {
            self.global.fetch_add(1, Ordering::AcqRel);
        }
        if let Ok(mut m) = self.stores.write() {
            for s in stores.iter().flatten() {
                *m.entry(*s).or_insert(0) += 1;
            }
        }
    }
}

/// The byte budgets of what a writer keeps in step with its commits.
#[derive(Debug, Clone, Copy, Default)]
pub struct Budgets {
    /// Cached rows ([`Writer::rows`]).
    pub rows: u64,
    /// List orders ([`Writer::orders`]).
    pub lists: u64,
    /// Cached active locations ([`Writer::locations`]).
    pub locations: u64,
    /// Kept levels of variants ([`Writer::levels`]).
    pub levels: u64,
}

/// The handle request handlers write through. Cloning shares the one writer thread.
#[derive(Clone)]
pub struct Writer {
    sender: mpsc::Sender<Msg>,
    pub gate: Arc<MoveGate>,
    /// Signalled after every committed transaction: derived data (the search indexer) wakes on
    /// it instead of polling.
    pub committed: Arc<tokio::sync::Notify>,
    pub generations: Arc<Generations>,
    /// The in-memory list orders kept in step with commits.
    pub orders: Arc<ListOrders>,
    /// Cached rows, dropped after every commit that changes them.
    pub rows: Arc<RowCache>,
    /// Each store's active locations in priority order (location ids end to end), under
    /// `(store, nil)`: dropped after every commit that writes a location of the store.
    pub locations: Arc<RowCache>,
    /// Each variant's levels as their views' JSON, under `(store, variant)`: dropped after every
    /// commit that writes a level of the variant (`cells::stock::variant_page`).
    pub levels: Arc<RowCache>,
    /// Stores that committed events since the event fan-out last looked.
    pub appended: Arc<Appended>,
    /// How the thread batches and how long its commits take.
    pub stats: Arc<WriterStats>,
    /// The numbers of its batches: a reader of what it keeps in memory waits until the batch
    /// its snapshot sees has been applied.
    pub applied: Arc<Applied>,
}

/// How a writer batches and how long its commits (with their fsync) take, for `/metrics`.
pub struct WriterStats {
    /// Jobs per committed transaction.
    pub batch: Histogram,
    /// Time of `commit`, in microseconds.
    pub commit: Histogram,
    /// Commits made without an fsync: batches of [`Writer::write_unsynced`] jobs alone.
    pub unsynced: AtomicU64,
    /// The file's syncs, made beside the next batch (see [`crate::storage::syncs`]); without
    /// them each commit makes its own fsync before the next batch runs.
    pub syncs: Option<Arc<Syncs>>,
}

impl WriterStats {
    fn new(syncs: Option<Arc<Syncs>>) -> Self {
        WriterStats { batch: Histogram::sizes(), commit: Histogram::seconds(), unsynced: AtomicU64::new(0), syncs }
    }
}

/// The stores whose transactions appended events, filled after each commit and taken by the
/// fan-out of the cell's job runner, which it wakes: the write pays for its event row alone.
#[derive(Default)]
pub struct Appended {
    stores: std::sync::Mutex<HashSet<Uuid>>,
    pub notify: tokio::sync::Notify,
}

impl Appended {
    /// The stores with new events since the last call.
    pub fn take(&self) -> HashSet<Uuid> {
        self.stores.lock().map(|mut s| std::mem::take(&mut *s)).unwrap_or_default()
    }

    fn add(&self, stores: Vec<Uuid>) {
        if stores.is_empty() {
            return;
        }
        if let Ok(mut s) = self.stores.lock() {
            s.extend(stores);
        }
        self.notify.notify_one();
    }
}

/// The writer thread; joining it waits until every queued job has been answered.
pub struct WriterThread(JoinHandle<()>);

impl WriterThread {
    pub fn join(self) {
        let _ = self.0.join();
    }
}

impl Writer {
    /// Starts the writer thread of `db`.
    /// `rows` and `lists` are the byte budgets of its row cache and list orders; it caches no
    /// locations (a cell's writer is started with [`Writer::start_after`]).
    pub fn start(db: Arc<Database>, name: &str, rows: u64, lists: u64) -> std::io::Result<(Writer, WriterThread)> {
        Writer::start_after(db, None, name, Budgets { rows, lists, ..Budgets::default() }, None)
    }

    /// [`Writer::start`] whose [`Tx::commit_id`]s sort after `floor` (the latest such id the
    /// database holds, which a clock running behind would not pass), deferring its commits'
    /// fsyncs to `syncs` (the database's, from [`crate::storage::open_with`]) when given.
    pub fn start_after(
        db: Arc<Database>,
        syncs: Option<Arc<Syncs>>,
        name: &str,
        budgets: Budgets,
        floor: Option<Uuid>,
    ) -> std::io::Result<(Writer, WriterThread)> {
        let (sender, receiver) = mpsc::channel::<Msg>();
        let gate = Arc::new(MoveGate::default());
        let thread_gate = gate.clone();
        let committed = Arc::new(tokio::sync::Notify::new());
        let thread_committed = committed.clone();
        let applied = Arc::new(Applied::of(db.clone()).map_err(|e| std::io::Error::other(e.to_string()))?);
        let generations = Arc::new(Generations::following(applied.clone()));
        let thread_generations = generations.clone();
        let orders = Arc::new(ListOrders::following(budgets.lists, applied.clone()));
        let rows = Arc::new(RowCache::following(budgets.rows, applied.clone()));
        let locations = Arc::new(RowCache::following(budgets.locations, applied.clone()));
        let levels = Arc::new(RowCache::following(budgets.levels, applied.clone()));
        let (thread_orders, thread_rows, thread_locations) = (orders.clone(), rows.clone(), locations.clone());
        let thread_levels = levels.clone();
        let appended = Arc::new(Appended::default());
        let thread_appended = appended.clone();
        let stats = Arc::new(WriterStats::new(syncs));
        let (thread_stats, thread_applied) = (stats.clone(), applied.clone());
        let handle = std::thread::Builder::new().name(format!("writer-{name}")).spawn(move || {
            let derived = Derived {
                committed: &thread_committed,
                generations: &thread_generations,
                orders: &thread_orders,
                rows: &thread_rows,
                locations: &thread_locations,
                levels: &thread_levels,
                appended: &thread_appended,
                stats: &thread_stats,
                applied: &thread_applied,
            };
            run(&db, &receiver, &thread_gate, &derived, floor)
        })?;
        let writer = Writer { sender, gate, committed, generations, orders, rows, locations, levels, appended, stats, applied };
        Ok((writer, WriterThread(handle)))
    }

    /// Forgets what is kept of `store` beside its rows (list orders, cached rows, locations and
    /// levels): its rows were replaced wholesale (a move, an import), not through commits
    /// that drop them.
    pub fn forget_store(&self, store: Uuid) {
        self.orders.forget(store);
        self.rows.drop_store(store);
        self.locations.drop_store(store);
        self.levels.drop_store(store);
    }

    /// Runs `job` in the next batch and waits until its transaction is durable.
    /// `store` names the store the job writes, so moves can hold or track it.
    pub async fn write<T, F>(&self, store: Option<Uuid>, job: F) -> ApiResult<T>
    where
        T: Send + 'static,
        F: FnMut(&mut Tx) -> ApiResult<T> + Send + 'static,
    {
        self.send(store, true, job).await
    }

    /// [`Writer::write`] for a change a crash may undo because it is made again after the restart
    /// (the search outbox's drained entries: indexing a product twice is harmless). Alone in a
    /// batch, its transaction commits without an fsync; the next synced commit carries it to
    /// disk. Answered once committed, visible to every read after.
    pub async fn write_unsynced<T, F>(&self, store: Option<Uuid>, job: F) -> ApiResult<T>
    where
        T: Send + 'static,
        F: FnMut(&mut Tx) -> ApiResult<T> + Send + 'static,
    {
        self.send(store, false, job).await
    }

    async fn send<T, F>(&self, store: Option<Uuid>, synced: bool, mut job: F) -> ApiResult<T>
    where
        T: Send + 'static,
        F: FnMut(&mut Tx) -> ApiResult<T> + Send + 'static,
    {
        if let Some(s) = store
            && self.gate.is_frozen(s)
        {
            return Err(moving());
        }
        let (reply, answer) = oneshot::channel();
        let run: JobFn = Box::new(move |tx| job(tx).map(|v| Box::new(v) as Output));
        self.sender
            .send(Msg::Job(Job { store, synced, run, reply }))
            .map_err(|_| ApiError::msg(Code::UNAVAILABLE, "the service is shutting down"))?;
        let out = answer.await.map_err(|_| ApiError::internal("writer dropped a job"))??;
        out.downcast::<T>().map(|b| *b).map_err(|_| ApiError::internal("writer returned a foreign type"))
    }

    /// Holds the writer once every job queued before this call has committed: from then until
    /// the [`Hold`] is released nothing commits (a consistent cut across databases is read
    /// while each of their writers is held). Jobs queue meanwhile; none is refused.
    pub async fn hold(&self) -> ApiResult<Hold> {
        self.hold_at_most(MAX_HOLD).await
    }

    /// [`Writer::hold`] ending by itself after `limit` (a timeout, measured on the monotonic
    /// clock as every timeout is, so its test waits the short limit it sets).
    async fn hold_at_most(&self, limit: std::time::Duration) -> ApiResult<Hold> {
        let (held, answer) = oneshot::channel();
        let (release, wait) = mpsc::channel();
        let lapsed = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let job = HoldJob { held, release: wait, lapsed: lapsed.clone(), limit };
        self.sender.send(Msg::Hold(job)).map_err(|_| ApiError::msg(Code::UNAVAILABLE, "the service is shutting down"))?;
        answer.await.map_err(|_| ApiError::msg(Code::UNAVAILABLE, "the service is shutting down"))?;
        Ok(Hold { release: Some(release), lapsed })
    }

    /// Asks the thread to stop after the jobs already queued; later writes answer 503.
    pub fn stop(&self) {
        let _ = self.sender.send(Msg::Stop);
    }
}

fn moving() -> ApiError {
    ApiError::new(Code::STORE_MOVING).retry_after(1)
}

/// What the writer thread keeps in step with its commits.
struct Derived<'a> {
    committed: &'a tokio::sync::Notify,
    generations: &'a Generations,
    orders: &'a ListOrders,
    rows: &'a RowCache,
    locations: &'a RowCache,
    levels: &'a RowCache,
    appended: &'a Appended,
    stats: &'a WriterStats,
    applied: &'a Applied,
}

fn run(db: &Database, receiver: &mpsc::Receiver<Msg>, gate: &MoveGate, derived: &Derived, floor: Option<Uuid>) {
    let seq = AtomicU64::new(now_micros());
    let mut ids = CommitIds::starting_at((now_micros() / 1000) as i64);
    if let Some(f) = floor {
        ids.after(f);
    }
    let mut stopping = false;
    // The batch's list-order changes, kept with their capacity from batch to batch: a vector
    // grown afresh each batch reached the allocator's fresh pages, which the kernel zeroes (a
    // tenth of the writer's time in fulfills).
    let mut list_changes = ListChanges::default();
    // A hold met while gathering a batch waits until that batch has committed.
    let mut hold = None;
    while !stopping {
        if let Some(h) = hold.take() {
            wait_held(h);
        }
        let first = match receiver.recv() {
            Ok(Msg::Job(job)) => job,
            Ok(Msg::Hold(h)) => {
                hold = Some(h);
                continue;
            }
            Ok(Msg::Stop) | Err(_) => break,
        };
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match receiver.try_recv() {
                Ok(Msg::Job(job)) => batch.push(job),
                Ok(Msg::Hold(h)) => {
                    hold = Some(h);
                    break;
                }
                Ok(Msg::Stop) => {
                    stopping = true;
                    break;
                }
                Err(_) => break,
            }
        }
        commit_batch(db, batch, gate, &seq, &mut ids, &mut list_changes, derived);
        derived.committed.notify_one();
    }
}

/// Tells the holder every earlier job has committed and waits for its release (or
/// [`MAX_HOLD`]).
fn wait_held(h: HoldJob) {
    if h.held.send(()).is_err() {
        return; // the holder gave up before the hold began
    }
    if let Err(mpsc::RecvTimeoutError::Timeout) = h.release.recv_timeout(h.limit) {
        h.lapsed.store(true, Ordering::Release);
        tracing::warn!(after_ms = h.limit.as_millis() as u64, "a writer hold was not released in time; writes go on");
    }
}

fn commit_batch(
    db: &Database,
    mut batch: Vec<Job>,
    gate: &MoveGate,
    seq: &AtomicU64,
    ids: &mut CommitIds,
    list_changes: &mut ListChanges,
    derived: &Derived,
) {
    while !batch.is_empty() {
        let mut txn = match db.begin_write() {
            Ok(t) => t,
            Err(e) => return fail_all(batch, ApiError::internal(e)),
        };
        let synced = batch.iter().any(|j| j.synced);
        if let Err(e) = txn.set_durability(if synced { Durability::Immediate } else { Durability::None }) {
            return fail_all(batch, ApiError::internal(e));
        }
        let mut outputs = Vec::with_capacity(batch.len());
        let mut failed = None;
        // One Tx for the batch: a table is opened once per transaction, not once per row.
        list_changes.keys.clear();
        list_changes.records.clear();
        let mut tx = Tx::new(&txn, ids, std::mem::take(list_changes));
        for (i, job) in batch.iter_mut().enumerate() {
            match run_job(&mut tx, job, gate, seq) {
                Ok(out) => outputs.push(out),
                Err(e) => {
                    failed = Some((i, e));
                    break;
                }
            }
        }
        if failed.is_none()
            && let Err(e) = tx.flush_counters()
        {
            drop(tx);
            let _ = txn.abort();
            return fail_all(batch, e);
        }
        *list_changes = std::mem::take(&mut tx.orders);
        let forgotten_lists = std::mem::take(&mut tx.forgotten_lists);
        let changed_rows = std::mem::take(&mut tx.changed_rows);
        let changed_locations = std::mem::take(&mut tx.changed_locations);
        let changed_levels = std::mem::take(&mut tx.changed_levels);
        let evented = std::mem::take(&mut tx.evented);
        drop(tx);
        if let Some((i, e)) = failed {
            // Abort drops every change of the batch; the failed job is answered, the rest rerun.
            let _ = txn.abort();
            let job = batch.remove(i);
            let _ = job.reply.send(Err(e));
            continue;
        }
        // Each batch is numbered in its own commit: a reader seeing the commit before it is
        // applied below (lists, caches, generations) waits for that ([`Applied`]).
        let stamp = match derived.applied.stamp(&txn) {
            Ok(n) => n,
            Err(e) => {
                let _ = txn.abort();
                return fail_all(batch, e);
            }
        };
        let started = std::time::Instant::now();
        // A synced batch's fsync is made beside the next batch when the file allows it; its
        // answers wait for it below.
        let (committed, ticket) = match (&derived.stats.syncs, synced) {
            (Some(syncs), true) => {
                let (committed, ticket) = syncs.deferring(|| txn.commit());
                (committed, Some((syncs, ticket)))
            }
            _ => (txn.commit(), None),
        };
        match committed {
            Ok(()) => {
                derived.stats.commit.observe(started.elapsed().as_micros() as u64);
                derived.stats.batch.observe(batch.len() as u64);
                if !synced {
                    derived.stats.unsynced.fetch_add(1, Ordering::Relaxed);
                }
                derived.orders.apply(&mut list_changes.keys);
                derived.orders.apply_records(&mut list_changes.records);
                // A batch that changed many lists (an import) gives back what is seldom needed.
                list_changes.keys.shrink_to(KEPT_LIST_CHANGES);
                list_changes.records.shrink_to(KEPT_LIST_CHANGES);
                for (store, prefix) in forgotten_lists {
                    derived.orders.forget_lists(store, &prefix);
                }
                derived.appended.add(evented);
                for (store, id) in changed_rows {
                    derived.rows.drop_row(store, id);
                }
                for (store, variant) in changed_levels {
                    derived.levels.drop_row(store, variant);
                }
                // A location's change may change the active list (a level's view names no
                // location's data: the kept levels stay).
                for store in changed_locations {
                    derived.locations.drop_row(store, Uuid::nil());
                }
                derived.generations.bump(&batch.iter().map(|j| j.store).collect::<Vec<_>>());
                derived.applied.done(stamp);
                let answers: Vec<_> = batch.into_iter().zip(outputs).map(|(job, out)| (job.reply, out)).collect();
                match ticket {
                    Some((syncs, ticket)) => syncs.after(ticket, Box::new(move |synced| answer(answers, synced))),
                    None => answer(answers, Ok(())),
                }
            }
            Err(e) => {
                derived.applied.done(stamp);
                fail_all(batch, ApiError::internal(e))
            }
        }
        return;
    }
}

fn run_job(tx: &mut Tx, job: &mut Job, gate: &MoveGate, seq: &AtomicU64) -> ApiResult<Output> {
    // Checked again here, under the writer: a job queued before a freeze must not slip through.
    if let Some(s) = job.store
        && gate.is_frozen(s)
    {
        return Err(moving());
    }
    tx.changes.clear();
    tx.tracking = job.store.is_some_and(|s| gate.is_tracked(s));
    let out = (job.run)(tx)?;
    if let Some(store) = job.store
        && tx.tracking
        && !tx.changes.is_empty()
    {
        let mut log = tx.txn.open_table(MOVE_LOG)?;
        for (table, key) in tx.changes.drain(..) {
            let n = seq.fetch_add(1, Ordering::Relaxed);
            let mut value = table.to_be_bytes().to_vec();
            value.extend_from_slice(&key);
            log.insert(Key::store(store).u64(n).bytes(), value.as_slice())?;
        }
    }
    Ok(out)
}

/// Answers a committed batch's jobs once it is durable, or each with the failure of its fsync.
fn answer(answers: Vec<(oneshot::Sender<ApiResult<Output>>, Output)>, synced: Result<(), String>) {
    for (reply, out) in answers {
        let _ = reply.send(match &synced {
            Ok(()) => Ok(out),
            Err(e) => Err(ApiError::internal(format!("the write committed but its fsync failed: {e}"))),
        });
    }
}

fn fail_all(batch: Vec<Job>, e: ApiError) {
    for job in batch {
        let _ = job.reply.send(Err(e.clone()));
    }
}

fn now_micros() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_micros() as u64).unwrap_or(0)
}

#[cfg(test)]
mod tests;
