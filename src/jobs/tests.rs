//! The runner against a real database and writer: runs, retries on the clock, dead jobs, pokes
//! during a run, effects committed with completions, and the take-over after a start.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redb::{Database, ReadableDatabase};
use uuid::Uuid;

use super::runner::{Effect, Handler, Outcome, Runner};
use super::*;
use crate::clock::Clock;
use crate::storage::tables::{COUNTERS, STORE_STATE, StoreState};
use crate::storage::writer::Writer;

const FLAKY: Kind = Kind { name: "test.flaky", retries: &[Duration::from_secs(60), Duration::from_secs(600)] };

/// Fails while `failures` is above zero; a success bumps a counter in the same write.
struct Flaky {
    runs: AtomicU32,
    failures: AtomicU32,
    /// Runs block until the test lets them go, when set.
    gate: Mutex<Option<Arc<tokio::sync::Semaphore>>>,
}

impl Handler for Flaky {
    fn kind(&self, name: &str) -> Option<&'static Kind> {
        (name == FLAKY.name).then_some(&FLAKY)
    }

    fn run(&self, store: Uuid, _job: Job) -> Pin<Box<dyn Future<Output = Outcome> + Send + 'static>> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        let fail = self.failures.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |f| f.checked_sub(1)).is_ok();
        let gate = self.gate.lock().unwrap().clone();
        Box::pin(async move {
            if let Some(g) = gate {
                let _ = g.acquire().await.map(|p| p.forget());
            }
            if fail {
                return Outcome::Failed("the far side said no".into(), None);
            }
            let effect: Effect = Box::new(move |tx: &mut Tx| tx.bump(COUNTERS, &done_key(store), 1));
            Outcome::Done(Some(effect))
        })
    }
}

fn done_key(store: Uuid) -> Vec<u8> {
    Key::store(store).str("done").into_vec()
}

struct Setup {
    db: Arc<Database>,
    writer: Writer,
    clock: Clock,
    store: Uuid,
    _dir: tempfile::TempDir,
}

fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(
        crate::storage::open(&dir.path().join("cell.redb"), crate::storage::tests::CELL, crate::storage::ONE_OFF_CACHE).unwrap(),
    );
    let (writer, thread) = Writer::start(db.clone(), "test", 1 << 20, 1 << 20).unwrap();
    std::mem::forget(thread);
    let clock = Clock::system();
    let store = clock.new_id();
    let txn = db.begin_write().unwrap();
    txn.open_table(STORE_STATE).unwrap().insert(store.as_u128(), StoreState::Active as u8).unwrap();
    txn.commit().unwrap();
    Setup { db, writer, clock, store, _dir: dir }
}

fn flaky(failures: u32) -> Arc<Flaky> {
    Arc::new(Flaky { runs: AtomicU32::new(0), failures: AtomicU32::new(failures), gate: Mutex::new(None) })
}

async fn put_job(s: &Setup, id: Uuid) {
    let (store, now) = (s.store, s.clock.now_ms());
    s.writer.write(Some(store), move |tx| put(tx, store, &FLAKY, id, vec![1], now, now)).await.unwrap();
}

fn job(s: &Setup, id: Uuid) -> Option<Job> {
    let txn = s.db.begin_read().unwrap();
    crate::storage::read::get::<Job>(&txn, JOBS, &job_key(s.store, id)).unwrap()
}

fn done(s: &Setup) -> u64 {
    crate::storage::read::counter(&s.db.begin_read().unwrap(), COUNTERS, &done_key(s.store)).unwrap()
}

/// Waits (real time, bounded) until `f` holds.
async fn until(mut f: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !f() {
        assert!(std::time::Instant::now() < deadline, "timed out");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn a_job_runs_once_and_its_effect_commits_with_its_completion() {
    let s = setup();
    let h = flaky(0);
    let runner = Runner::start(s.db.clone(), s.writer.clone(), s.clock.clone(), h.clone(), "t").unwrap();
    let id = s.clock.new_id();
    put_job(&s, id).await;
    runner.wake();
    // The counter moves after the commit that removes the row: wait for both.
    until(|| job(&s, id).is_none() && runner.stats.completed.load(Ordering::SeqCst) == 1).await;
    assert_eq!((h.runs.load(Ordering::SeqCst), done(&s)), (1, 1));
    runner.stop();
}

#[tokio::test]
async fn failures_wait_on_the_clock_and_a_job_past_its_schedule_is_dead() {
    let s = setup();
    let h = flaky(u32::MAX);
    let runner = Runner::start(s.db.clone(), s.writer.clone(), s.clock.clone(), h.clone(), "t").unwrap();
    let id = s.clock.new_id();
    put_job(&s, id).await;
    runner.wake();
    until(|| job(&s, id).is_some_and(|j| j.attempts == 1 && j.lease.is_none())).await;
    let j = job(&s, id).unwrap();
    assert_eq!(j.last_error.as_deref(), Some("the far side said no"));
    assert!(j.due_at >= s.clock.now_ms() + 55_000, "the next run waits a minute");
    assert_eq!(h.runs.load(Ordering::SeqCst), 1);

    s.clock.advance(Duration::from_secs(60));
    until(|| job(&s, id).is_some_and(|j| j.attempts == 2 && j.lease.is_none())).await;
    s.clock.advance(Duration::from_secs(600));
    // The counter moves after the commit that marks the row dead: wait for both.
    until(|| job(&s, id).is_some_and(|j| j.dead) && runner.stats.dead.load(Ordering::SeqCst) == 1).await;
    assert_eq!(h.runs.load(Ordering::SeqCst), 3);
    // Dead stays dead: no due row, no more runs.
    s.clock.advance(Duration::from_secs(86_400));
    runner.wake();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(h.runs.load(Ordering::SeqCst), 3);
    assert_eq!(done(&s), 0);
    runner.stop();
}

#[tokio::test]
async fn a_poke_during_a_run_runs_the_job_again() {
    let s = setup();
    let h = flaky(0);
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    *h.gate.lock().unwrap() = Some(gate.clone());
    let runner = Runner::start(s.db.clone(), s.writer.clone(), s.clock.clone(), h.clone(), "t").unwrap();
    let id = s.clock.new_id();
    put_job(&s, id).await;
    runner.wake();
    until(|| h.runs.load(Ordering::SeqCst) == 1).await;
    // Poked while it runs: the claim keeps its lease; the completion sees the new version.
    put_job(&s, id).await;
    assert!(job(&s, id).unwrap().lease.is_some());
    gate.add_permits(2);
    until(|| job(&s, id).is_none()).await;
    assert_eq!((h.runs.load(Ordering::SeqCst), done(&s)), (2, 2));
    runner.stop();
}

#[tokio::test]
async fn a_poke_of_a_waiting_job_due_no_later_writes_nothing() {
    let s = setup();
    let (store, id, now) = (s.store, s.clock.new_id(), s.clock.now_ms());
    let put_at =
        |due: i64, payload: Vec<u8>| s.writer.write(Some(store), move |tx| put(tx, store, &FLAKY, id, payload.clone(), due, now));
    let due_rows = || {
        let txn = s.db.begin_read().unwrap();
        redb::ReadableTable::range(&txn.open_table(JOB_DUE.def).unwrap(), Key::store(store).bytes()..).unwrap().count()
    };
    put_at(now + 1000, vec![1]).await.unwrap();
    let first = job(&s, id).unwrap();
    // Later, same payload: the job's run reads what is current anyway.
    put_at(now + 5000, vec![1]).await.unwrap();
    assert_eq!(job(&s, id).unwrap(), first);
    assert_eq!(due_rows(), 1);
    // Sooner, or another payload: a poke as before (due by the earlier time, version bumped),
    // its due row moved, never doubled.
    put_at(now + 500, vec![1]).await.unwrap();
    let sooner = job(&s, id).unwrap();
    assert_eq!((sooner.due_at, sooner.version), (now + 500, first.version + 1));
    put_at(now + 5000, vec![2]).await.unwrap();
    let other = job(&s, id).unwrap();
    assert_eq!((other.due_at, other.version, other.payload), (now + 500, first.version + 2, vec![2]));
    assert_eq!(due_rows(), 1);
}

#[tokio::test]
async fn a_new_start_takes_over_what_another_start_had_claimed() {
    let s = setup();
    let id = s.clock.new_id();
    put_job(&s, id).await;
    // A claim by a start that is gone (killed mid-run): its lease has long to run.
    let (store, now, other) = (s.store, s.clock.now_ms(), Uuid::from_u128(7));
    s.writer
        .write(Some(store), move |tx| {
            let old = load(tx, store, id)?.unwrap();
            let until = now + 3_600_000;
            write(tx, store, Some(&old), Some(&Job { lease: Some(Lease { start: other, until }), due_at: until, ..old.clone() }))
        })
        .await
        .unwrap();
    let h = flaky(0);
    let runner = Runner::start(s.db.clone(), s.writer.clone(), s.clock.clone(), h.clone(), "t").unwrap();
    until(|| job(&s, id).is_none()).await;
    assert_eq!((h.runs.load(Ordering::SeqCst), done(&s)), (1, 1));
    runner.stop();
}

#[test]
fn derived_ids_name_one_job_per_thing() {
    let a = Uuid::from_u128(1);
    assert_eq!(derived_id("x", a), derived_id("x", a));
    assert_ne!(derived_id("x", a), derived_id("y", a));
    assert_ne!(derived_id("x", a), derived_id("x", Uuid::from_u128(2)));
}

#[tokio::test]
async fn a_store_moved_in_has_its_source_s_claims_released_at_once() {
    let s = setup();
    let id = s.clock.new_id();
    put_job(&s, id).await;
    let (store, now) = (s.store, s.clock.now_ms());
    s.writer
        .write(Some(store), move |tx| {
            let old = load(tx, store, id)?.unwrap();
            let lease = Lease { start: Uuid::from_u128(9), until: now + 3_600_000 };
            write(tx, store, Some(&old), Some(&Job { lease: Some(lease), due_at: lease.until, ..old.clone() }))
        })
        .await
        .unwrap();
    s.writer.write(Some(store), move |tx| release_leases(tx, store, now)).await.unwrap();
    let j = job(&s, id).unwrap();
    assert_eq!((j.lease, j.due_at), (None, now));
    let txn = s.db.begin_read().unwrap();
    assert!(crate::storage::read::get_raw(&txn, JOB_DUE, &due_key(store, now, id)).unwrap().is_some(), "due now in the index");
}
