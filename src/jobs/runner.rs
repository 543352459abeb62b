//! The job runner of a cell: one thread with its own small runtime, so deliveries and mail never
//! take time from the request workers. Each pass reads the due jobs of every store the cell
//! serves (a few per store, so one busy store cannot starve the others), claims them in one
//! write per store, runs them with bounded concurrency and records each outcome in a write of
//! its own; the writer batches those writes into few transactions.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redb::{Database, ReadableDatabase, ReadableTable};
use tokio::sync::{Notify, Semaphore};
use uuid::Uuid;

use crate::clock::Clock;
use crate::error::ApiResult;
use crate::jobs::{self, Job, Kind, Lease};
use crate::storage::codec::decode;
use crate::storage::keys::{Key, leading_store, trailing_id};
use crate::storage::tables::{JOB_DUE, JOBS, STORE_STATE, StoreState};
use crate::storage::tx::Tx;
use crate::storage::writer::Writer;

/// How long a claim lasts: longer than any one run takes (outbound calls time out well before).
const LEASE_MS: i64 = 120_000;
/// Jobs claimed of one store per pass.
const PER_STORE: usize = 32;
/// Jobs running at once.
const CONCURRENCY: usize = 64;
/// Longest sleep between passes (real time), whatever is due.
const MAX_WAIT: Duration = Duration::from_secs(5);

/// What a job changes in the database, committed with its completion. Repeatable: the writer
/// may run it again when another job of its batch fails.
pub type Effect = Box<dyn FnMut(&mut Tx) -> ApiResult<()> + Send>;

/// How a run ended.
pub enum Outcome {
    /// Finished: the job is removed (or runs again at once, when it was poked meanwhile).
    Done(Option<Effect>),
    /// A step done, more to do: runs again at the given time (Unix ms), attempts cleared.
    Again(i64, Option<Effect>),
    /// Failed: runs again on its kind's schedule, or is dead past it.
    Failed(String, Option<Effect>),
    /// Failed for good (a mail server refused the message): dead at once.
    Dead(String, Option<Effect>),
}

/// Runs the jobs of the kinds it declares.
pub trait Handler: Send + Sync + 'static {
    /// The kind named `name`, when this handler runs it.
    fn kind(&self, name: &str) -> Option<&'static Kind>;
    fn run(&self, store: Uuid, job: Job) -> Pin<Box<dyn Future<Output = Outcome> + Send + 'static>>;
    /// The stores whose jobs run: by default those the cell serves. The directory, which has
    /// no stores, answers the nil id its jobs are kept under.
    fn stores(&self, txn: &redb::ReadTransaction) -> ApiResult<Vec<Uuid>> {
        let mut stores = Vec::new();
        for item in txn.open_table(STORE_STATE)?.iter()? {
            let (k, v) = item?;
            if v.value() == StoreState::Active as u8 {
                stores.push(Uuid::from_u128(k.value()));
            }
        }
        Ok(stores)
    }

    /// Called before each pass (after commits that appended events, among others): writes
    /// the jobs that follow from what happened, such as waking a subscription's sender.
    fn tick(&self) -> Pin<Box<dyn Future<Output = ()> + Send + 'static>> {
        Box::pin(async {})
    }
}

/// Counts of the runner, for `/metrics`.
#[derive(Default)]
pub struct RunnerStats {
    pub completed: AtomicU64,
    pub failed: AtomicU64,
    pub dead: AtomicU64,
}

pub struct Runner {
    wake: Arc<Notify>,
    stopping: Arc<AtomicBool>,
    pub stats: Arc<RunnerStats>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

struct Inner {
    db: Arc<Database>,
    writer: Writer,
    clock: Clock,
    handler: Arc<dyn Handler>,
    /// This start: leases name it.
    start: Uuid,
    wake: Arc<Notify>,
    stopping: Arc<AtomicBool>,
    stats: Arc<RunnerStats>,
}

impl Runner {
    /// Starts the runner of the database `db` on its own thread.
    pub fn start(
        db: Arc<Database>,
        writer: Writer,
        clock: Clock,
        handler: Arc<dyn Handler>,
        name: &str,
    ) -> std::io::Result<Runner> {
        let wake = Arc::new(Notify::new());
        let stopping = Arc::new(AtomicBool::new(false));
        let stats = Arc::new(RunnerStats::default());
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        let inner = Arc::new(Inner {
            db,
            writer,
            start: clock.new_id(),
            clock,
            handler,
            wake: wake.clone(),
            stopping: stopping.clone(),
            stats: stats.clone(),
        });
        let handle = std::thread::Builder::new().name(format!("jobs-{name}")).spawn(move || runtime.block_on(run(inner)))?;
        Ok(Runner { wake, stopping, stats, thread: Mutex::new(Some(handle)) })
    }

    /// Runs ended by outcome since the start, for `/metrics`: completed, failed (to be retried),
    /// dead.
    pub fn counts(&self) -> [(&'static str, u64); 3] {
        let s = &self.stats;
        [
            ("completed", s.completed.load(Ordering::Relaxed)),
            ("failed", s.failed.load(Ordering::Relaxed)),
            ("dead", s.dead.load(Ordering::Relaxed)),
        ]
    }

    /// Looks for due jobs now (one was written, or the clock moved).
    pub fn wake(&self) {
        self.wake.notify_one();
    }

    /// Stops claiming, lets the runs under way finish (a few seconds at most) and waits.
    pub fn stop(&self) {
        self.stopping.store(true, Ordering::SeqCst);
        self.wake.notify_one();
        if let Some(t) = self.thread.lock().ok().and_then(|mut t| t.take()) {
            let _ = t.join();
        }
    }
}

/// Where a database's runner is kept once started: cells and the directory hold one.
#[derive(Default)]
pub struct RunnerSlot(Mutex<Option<Runner>>);

impl RunnerSlot {
    pub fn set(&self, runner: Runner) {
        if let Ok(mut slot) = self.0.lock() {
            *slot = Some(runner);
        }
    }

    /// Makes the runner look for due jobs now (one was written); nothing before it starts.
    pub fn wake(&self) {
        if let Ok(slot) = self.0.lock()
            && let Some(r) = slot.as_ref()
        {
            r.wake();
        }
    }

    /// How its runs ended, by outcome (`None` before it starts).
    pub fn counts(&self) -> Option<[(&'static str, u64); 3]> {
        self.0.lock().ok()?.as_ref().map(Runner::counts)
    }

    /// Stops the runner, letting the runs under way record their outcomes.
    pub fn stop(&self) {
        if let Some(r) = self.0.lock().ok().and_then(|mut slot| slot.take()) {
            r.stop();
        }
    }
}

impl Drop for Runner {
    fn drop(&mut self) {
        self.stop();
    }
}

async fn run(inner: Arc<Inner>) {
    if let Err(e) = take_over(&inner).await {
        tracing::warn!(error = %e, "taking over the jobs of an earlier start failed; they run when their leases end");
    }
    let slots = Arc::new(Semaphore::new(CONCURRENCY));
    while !inner.stopping.load(Ordering::SeqCst) {
        // With every slot taken a pass could claim nothing: wait for a run to end (or a stop).
        if slots.available_permits() == 0 {
            tokio::select! {
                permit = slots.acquire() => drop(permit),
                _ = inner.wake.notified() => {}
            }
            continue;
        }
        inner.handler.tick().await;
        let now = inner.clock.now_ms();
        let free = slots.available_permits();
        let next = match pass(&inner, &slots, now, free).await {
            Ok(next) => next,
            Err(e) => {
                tracing::warn!(error = %e, "a pass of the job runner failed; retrying");
                Some(now + 1000)
            }
        };
        let due = next.unwrap_or_else(|| now + MAX_WAIT.as_millis() as i64);
        tokio::select! {
            _ = inner.clock.sleep_until(due) => {}
            _ = tokio::time::sleep(MAX_WAIT) => {}
            _ = inner.wake.notified() => {}
            _ = inner.writer.appended.notify.notified() => {}
        }
    }
    // Runs under way finish (their outcomes recorded) unless they take too long: a run cut off
    // here is taken over by the next start.
    let _ = tokio::time::timeout(Duration::from_secs(5), slots.acquire_many(CONCURRENCY as u32)).await;
}

/// Claims and starts what is due (at most `free` jobs); answers when the next job falls due.
async fn pass(inner: &Arc<Inner>, slots: &Arc<Semaphore>, now: i64, free: usize) -> ApiResult<Option<i64>> {
    let (due, next) = due_jobs(&inner.db, inner.handler.as_ref(), now, free)?;
    for (store, ids) in due {
        let start = inner.start;
        // Not synced: a claim a crash undoes leaves the job due, and the next start runs it,
        // as it would a job leased by the start that died. The completion's write is synced.
        let claimed = inner.writer.write_unsynced(Some(store), move |tx| claim(tx, store, &ids, start, now)).await;
        let claimed = match claimed {
            Ok(c) => c,
            // A store in the last step of a move: its jobs run at the target.
            Err(e) => {
                tracing::debug!(%store, error = %e, "jobs not claimed");
                continue;
            }
        };
        for job in claimed {
            let Ok(permit) = slots.clone().acquire_owned().await else { break };
            let inner = inner.clone();
            tokio::spawn(async move {
                run_one(&inner, store, job).await;
                drop(permit);
                inner.wake.notify_one();
            });
        }
    }
    Ok(next)
}

/// Due jobs of the stores served, a few per store, at most `limit` in all; and the earliest
/// due time after `now` seen.
type DueJobs = (Vec<(Uuid, Vec<Uuid>)>, Option<i64>);

fn due_jobs(db: &Database, handler: &dyn Handler, now: i64, limit: usize) -> ApiResult<DueJobs> {
    let txn = db.begin_read()?;
    let due_rows = txn.open_table(JOB_DUE.def)?;
    let (mut due, mut next, mut taken) = (Vec::new(), None::<i64>, 0usize);
    for store in handler.stores(&txn)? {
        let start = Key::store(store).into_vec();
        let end = Key::store(store).i64(i64::MAX).into_vec();
        let mut ids = Vec::new();
        for row in due_rows.range(start.as_slice()..end.as_slice())? {
            let (k, _) = row?;
            let k = k.value();
            let at = k.get(16..24).and_then(|b| b.try_into().ok()).map(|b| (u64::from_be_bytes(b) ^ (1 << 63)) as i64);
            let Some(at) = at else { continue };
            if at > now {
                next = Some(next.map_or(at, |n| n.min(at)));
                break;
            }
            if ids.len() >= PER_STORE || taken >= limit {
                // More is due than this pass takes: the next pass comes at once.
                next = Some(now);
                break;
            }
            ids.extend(trailing_id(k));
            taken += 1;
        }
        if !ids.is_empty() {
            due.push((store, ids));
        }
    }
    Ok((due, next))
}

/// Leases the jobs `ids` of `store` still due at `now` to this start.
fn claim(tx: &mut Tx, store: Uuid, ids: &[Uuid], start: Uuid, now: i64) -> ApiResult<Vec<Job>> {
    let mut claimed = Vec::with_capacity(ids.len());
    for id in ids {
        let Some(old) = jobs::load(tx, store, *id)? else { continue };
        if old.dead || old.due_at > now {
            continue;
        }
        let until = now.saturating_add(LEASE_MS);
        let new = Job { lease: Some(Lease { start, until }), due_at: until, ..old.clone() };
        jobs::write(tx, store, Some(&old), Some(&new))?;
        claimed.push(new);
    }
    Ok(claimed)
}

async fn run_one(inner: &Inner, store: Uuid, job: Job) {
    let Some(kind) = inner.handler.kind(&job.kind) else {
        tracing::warn!(kind = %job.kind, "a job of an unknown kind is left as it is");
        return;
    };
    let outcome = inner.handler.run(store, job.clone()).await;
    let (now, start) = (inner.clock.now_ms(), inner.start);
    let stats = inner.stats.clone();
    let mut outcome = Some(outcome);
    let done = inner.writer.write(Some(store), move |tx| complete(tx, store, &job, kind, outcome.as_mut(), start, now)).await;
    match done {
        Ok(Completed::Done) => stats.completed.fetch_add(1, Ordering::Relaxed),
        Ok(Completed::Failed) => stats.failed.fetch_add(1, Ordering::Relaxed),
        Ok(Completed::Dead(error)) => {
            tracing::warn!(%store, kind = kind.name, %error, "a job failed for good");
            stats.dead.fetch_add(1, Ordering::Relaxed)
        }
        Ok(Completed::Lost) => 0,
        Err(e) => {
            tracing::warn!(%store, kind = kind.name, error = %e, "a job's outcome was not recorded; it runs again when its lease ends");
            0
        }
    };
}

/// What recording an outcome did.
enum Completed {
    Done,
    Failed,
    Dead(String),
    /// The job was removed or taken over meanwhile: nothing recorded.
    Lost,
}

fn complete(
    tx: &mut Tx,
    store: Uuid,
    claimed: &Job,
    kind: &Kind,
    outcome: Option<&mut Outcome>,
    start: Uuid,
    now: i64,
) -> ApiResult<Completed> {
    let Some(outcome) = outcome else { return Ok(Completed::Lost) };
    let Some(current) = jobs::load(tx, store, claimed.id)? else { return Ok(Completed::Lost) };
    if current.lease.map(|l| l.start) != Some(start) || current.lease != claimed.lease {
        return Ok(Completed::Lost);
    }
    let poked = current.version != claimed.version;
    let effect = match outcome {
        Outcome::Done(e) | Outcome::Again(_, e) | Outcome::Failed(_, e) | Outcome::Dead(_, e) => e,
    };
    if let Some(effect) = effect.as_mut() {
        effect(tx)?;
    }
    let free = Job { lease: None, ..current.clone() };
    let (next, result) = match outcome {
        Outcome::Done(_) if !poked => (None, Completed::Done),
        Outcome::Done(_) => (Some(Job { due_at: now, attempts: 0, last_error: None, ..free }), Completed::Done),
        Outcome::Again(at, _) => {
            let due_at = if poked { now } else { *at };
            (Some(Job { due_at, attempts: 0, last_error: None, ..free }), Completed::Done)
        }
        Outcome::Dead(error, _) => (
            Some(Job { attempts: current.attempts.saturating_add(1), last_error: Some(error.clone()), dead: true, ..free }),
            Completed::Dead(error.clone()),
        ),
        Outcome::Failed(error, _) => {
            let attempts = current.attempts.saturating_add(1);
            match kind.next_after(attempts, now) {
                Some(at) => (Some(Job { due_at: at, attempts, last_error: Some(error.clone()), ..free }), Completed::Failed),
                None => {
                    (Some(Job { attempts, last_error: Some(error.clone()), dead: true, ..free }), Completed::Dead(error.clone()))
                }
            }
        }
    };
    jobs::write(tx, store, Some(&current), next.as_ref())?;
    Ok(result)
}

/// At start: every job leased by an earlier start (cut off by a stop or a `kill -9`) is due now.
async fn take_over(inner: &Inner) -> ApiResult<()> {
    let mut foreign: HashMap<Uuid, Vec<Uuid>> = HashMap::new();
    {
        let txn = inner.db.begin_read()?;
        for item in txn.open_table(JOBS.def)?.iter()? {
            let (k, v) = item?;
            let job: Job = decode(v.value())?;
            if let (Some(store), Some(lease)) = (leading_store(k.value()), job.lease)
                && lease.start != inner.start
                && !job.dead
            {
                foreign.entry(store).or_default().push(job.id);
            }
        }
    }
    let now = inner.clock.now_ms();
    for (store, ids) in foreign {
        let start = inner.start;
        let taken = inner
            .writer
            .write(Some(store), move |tx| {
                for id in &ids {
                    let Some(old) = jobs::load(tx, store, *id)? else { continue };
                    if old.lease.is_some_and(|l| l.start != start) {
                        jobs::write(tx, store, Some(&old), Some(&Job { lease: None, due_at: now, ..old.clone() }))?;
                    }
                }
                Ok(())
            })
            .await;
        if let Err(e) = taken {
            tracing::debug!(%store, error = %e, "jobs of an earlier start not taken over yet");
        }
    }
    Ok(())
}
