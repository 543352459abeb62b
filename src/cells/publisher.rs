//! The per-cell background task: publishes scheduled collections when they fall due, and every
//! ten minutes sweeps abandoned carts, expired storefront sessions, and events and deliveries
//! past their 30 days. "Due" is by the process's clock, and the task waits on it: moving the
//! clock past a schedule publishes at once.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redb::{Database, ReadableDatabase, ReadableTable};
use tokio::sync::Notify;
use uuid::Uuid;

use crate::cells::collections::schedule_key;
use crate::cells::storefront;
use crate::cells::{events, webhooks};
use crate::clock::Clock;
use crate::domain::collection::{Collection, CollectionStatus};
use crate::error::ApiResult;
use crate::storage::keys::{leading_store, trailing_id};
use crate::storage::record;
use crate::storage::tables::StoreState;
use crate::storage::tables::{COLLECTION_SCHEDULE, STORE_STATE};
use crate::storage::tx::Tx;
use crate::storage::writer::Writer;

/// Longest sleep between passes (real time): also how soon a store moved in from another cell
/// gets its due collections published.
const MAX_WAIT: Duration = Duration::from_secs(5);
/// Pause before retrying a publish that failed (a store frozen by a move, say).
const RETRY: i64 = 1000;
/// How often stale carts and storefront sessions are swept.
const SWEEP_EVERY_MS: i64 = 10 * 60 * 1000;

/// The per-cell task that publishes scheduled collections when they are due. It reads the
/// `collection_schedule` table, so schedules survive restarts: the first pass after a start
/// publishes everything that fell due while the cell was down.
pub struct Publisher {
    wake: Arc<Notify>,
    stopping: Arc<AtomicBool>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Publisher {
    /// Starts the task on its own thread (with a small runtime for its timer), like the writer.
    pub fn start(db: Arc<Database>, writer: Writer, cell: &str, clock: Clock) -> std::io::Result<Publisher> {
        let wake = Arc::new(Notify::new());
        let stopping = Arc::new(AtomicBool::new(false));
        let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build()?;
        let (w, s) = (wake.clone(), stopping.clone());
        let handle = std::thread::Builder::new()
            .name(format!("publisher-{cell}"))
            .spawn(move || runtime.block_on(publish_loop(&db, &writer, &w, &s, &clock)))?;
        Ok(Publisher { wake, stopping, thread: Mutex::new(Some(handle)) })
    }

    /// Makes the task look at the schedule now (a collection was scheduled).
    pub fn wake(&self) {
        self.wake.notify_one();
    }

    /// Stops the task and waits for it; a publish under way finishes first.
    pub fn stop(&self) {
        self.stopping.store(true, Ordering::SeqCst);
        self.wake.notify_one();
        if let Some(t) = self.thread.lock().ok().and_then(|mut t| t.take()) {
            let _ = t.join();
        }
    }
}

impl Drop for Publisher {
    fn drop(&mut self) {
        self.stop();
    }
}

async fn publish_loop(db: &Database, writer: &Writer, wake: &Notify, stopping: &AtomicBool, clock: &Clock) {
    let mut swept = clock.now_ms();
    while !stopping.load(Ordering::SeqCst) {
        let now = clock.now_ms();
        if now - swept >= SWEEP_EVERY_MS {
            swept = now;
            if let Err(e) = storefront::sweep_stale(db, writer, swept).await {
                tracing::warn!(error = %e, "sweeping stale carts and sessions failed; next pass retries");
            }
            // Events and deliveries are kept 30 days.
            if let Err(e) = events::purge(db, writer, swept).await {
                tracing::warn!(error = %e, "purging old events failed; next pass retries");
            }
            if let Err(e) = webhooks::purge(db, writer, swept).await {
                tracing::warn!(error = %e, "purging old deliveries failed; next pass retries");
            }
        }
        let next = match publish_due(db, writer, stopping, clock).await {
            Ok(next) => next,
            Err(e) => {
                tracing::warn!(error = %e, "publishing scheduled collections failed; retrying");
                Some(clock.now_ms() + RETRY)
            }
        };
        // With nothing scheduled, a move of the clock past the sweep interval still wakes the task.
        let due = next.unwrap_or_else(|| clock.now_ms() + MAX_WAIT.as_millis() as i64);
        tokio::select! {
            _ = clock.sleep_until(due) => {}
            _ = tokio::time::sleep(MAX_WAIT) => {}
            _ = wake.notified() => {}
        }
    }
}

/// Publishes every due collection of the stores this cell serves; answers when the next one
/// falls due.
async fn publish_due(db: &Database, writer: &Writer, stopping: &AtomicBool, clock: &Clock) -> ApiResult<Option<i64>> {
    let now = clock.now_ms();
    let mut due = Vec::new();
    let mut next: Option<i64> = None;
    {
        let txn = db.begin_read()?;
        let schedule = txn.open_table(COLLECTION_SCHEDULE.def)?;
        let states = txn.open_table(STORE_STATE)?;
        for item in schedule.iter()? {
            let (k, _) = item?;
            let k = k.value();
            let (Some(store), Some(id), Some(at)) = (leading_store(k), trailing_id(k), k.get(16..24)) else { continue };
            let at = (u64::from_be_bytes(at.try_into().unwrap_or_default()) ^ (1 << 63)) as i64;
            // Incoming copies of a store being moved here are not ours to publish yet.
            if states.get(store.as_u128())?.map(|s| s.value()) != Some(StoreState::Active as u8) {
                continue;
            }
            if at <= now {
                due.push((store, id, at));
            } else {
                next = Some(next.map_or(at, |n| n.min(at)));
            }
        }
    }
    for (store, id, at) in due {
        if stopping.load(Ordering::SeqCst) {
            break;
        }
        let now = clock.now_ms();
        if let Err(e) = writer.write(Some(store), move |tx| publish(tx, store, id, at, now)).await {
            tracing::warn!(%store, collection = %id, error = %e, "scheduled collection not published yet");
            next = Some(clock.now_ms() + RETRY);
        }
    }
    Ok(next)
}

/// Publishes one due collection; a schedule row that no longer matches its collection (deleted,
/// rescheduled, published by hand) is dropped. `now` is the collection's new `updatedAt`.
fn publish(tx: &mut Tx, store: Uuid, id: Uuid, at: i64, now: i64) -> ApiResult<()> {
    let Some(old) = record::load::<Collection>(tx, store, id)? else {
        return tx.delete(COLLECTION_SCHEDULE, &schedule_key(store, at, id));
    };
    if old.deleted_at.is_some() || old.status != CollectionStatus::Scheduled || old.publish_at != Some(at) {
        return tx.delete(COLLECTION_SCHEDULE, &schedule_key(store, at, id));
    }
    let mut c = old.clone();
    c.status = CollectionStatus::Published;
    c.published_at = Some(at);
    c.publish_at = None;
    c.updated_at = now;
    record::write(tx, store, Some(&old), Some(&c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedule_keys_decode() {
        let (store, id, at) = (Uuid::now_v7(), Uuid::now_v7(), 1_795_000_000_123);
        let k = schedule_key(store, at, id);
        assert_eq!(leading_store(&k), Some(store));
        assert_eq!(trailing_id(&k), Some(id));
        let raw = u64::from_be_bytes(k[16..24].try_into().unwrap());
        assert_eq!((raw ^ (1 << 63)) as i64, at);
    }
}
