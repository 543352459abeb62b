//! Which committed batches the writer's in-memory state has taken in (the held lists, the
//! cached product views, the cached active locations), so that none of it is read older than a
//! state some reader could already see.
//!
//! redb makes a commit visible to new read transactions inside `commit()`, and the writer
//! applies the batch to its in-memory state just after it returns. Without this, a reader
//! arriving in that moment could see a record in its new state and then a list that still had
//! the old one (a collection read as published, yet still counted among the scheduled), or a
//! product's old cached view after a list showing its new one. So each batch commits a
//! sequence number in the database's `meta` table (row [`ROW`]); the writer notes it as
//! pending before the commit and as applied once lists, caches and generations hold it. A read
//! finding a batch pending reads the number its own fresh snapshot sees and waits until the
//! writer has applied that one: it waits only between a commit's visibility and its
//! application (microseconds), never through a commit and its fsync, which would stall reads
//! under write load. So short a wait yields the thread rather than parking it, the same for
//! async readers (lists) and synchronous ones (cached rows, generations). With nothing pending
//! a read costs two atomic loads.
//!
//! Every state a client observed before its read began was visible to any snapshot taken
//! after that, so the number read is at least its batch's: the lists and caches hold it.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use redb::{Database, ReadableDatabase, TableError, WriteTransaction};

use crate::error::{ApiError, ApiResult};
use crate::storage::tables::META;

/// The `meta` row holding the number of the writer's last committed batch (u64 LE; absent:
/// none yet).
pub const ROW: &str = "applied_seq";

/// How long a read waits for the writer to apply a visible batch before reading anyway: the
/// writer applies at once, so only a writer thread that died would be waited for this long.
const PATIENCE: Duration = Duration::from_secs(2);

/// The batch numbers of one database's writer. One without a database (lists or caches kept
/// apart from a writer, as in unit tests) never waits.
#[derive(Default)]
pub struct Applied {
    db: Option<Arc<Database>>,
    /// The last number written by the writer, set before its commit.
    pending: AtomicU64,
    /// The last number whose changes lists and caches hold (or whose commit failed).
    applied: AtomicU64,
}

impl Applied {
    /// The numbers of `db`'s writer, starting from the last one it committed (lists and caches
    /// are filled from committed rows, so every batch before the start is held).
    pub fn of(db: Arc<Database>) -> ApiResult<Applied> {
        let last = visible(&db)?;
        Ok(Applied { db: Some(db), pending: AtomicU64::new(last), applied: AtomicU64::new(last) })
    }

    /// Writer, before committing a batch's `txn`: its number, written in `txn` and noted as
    /// pending. Pass it to [`Applied::done`] once the commit has ended, whatever its result.
    pub fn stamp(&self, txn: &WriteTransaction) -> ApiResult<u64> {
        let n = self.pending.load(Ordering::Relaxed).saturating_add(1);
        txn.open_table(META)?.insert(ROW, n.to_le_bytes().as_slice())?;
        // Before the commit: a reader that could see batch `n` finds it pending.
        self.pending.store(n, Ordering::SeqCst);
        Ok(n)
    }

    /// Writer: lists and caches hold batch `n` (or its commit failed and nobody can see it).
    pub fn done(&self, n: u64) {
        self.applied.store(n, Ordering::SeqCst);
    }

    /// Waits until lists and caches hold every batch a snapshot taken now sees: `false` when it
    /// gave up after [`PATIENCE`] (logged) and the read goes on with them as they are. A
    /// failure to read the number is left to the read that follows, which meets the same
    /// database.
    pub fn caught_up(&self) -> bool {
        if self.applied.load(Ordering::SeqCst) >= self.pending.load(Ordering::SeqCst) {
            return true;
        }
        let Some(seen) = self.db.as_deref().and_then(|db| visible(db).ok()) else { return true };
        let started = Instant::now();
        while self.applied.load(Ordering::SeqCst) < seen {
            if started.elapsed() > PATIENCE {
                tracing::warn!(
                    batch = seen,
                    "the writer did not apply a committed batch to its lists and caches in time; read as they are"
                );
                return false;
            }
            std::thread::yield_now();
        }
        true
    }
}

/// The number of the last batch a snapshot of `db` taken now sees.
fn visible(db: &Database) -> ApiResult<u64> {
    let txn = db.begin_read()?;
    let meta = match txn.open_table(META) {
        Ok(t) => t,
        Err(TableError::TableDoesNotExist(_)) => return Ok(0),
        Err(e) => return Err(e.into()),
    };
    let Some(v) = meta.get(ROW)? else { return Ok(0) };
    let bytes: [u8; 8] = v.value().try_into().map_err(|_| ApiError::internal("meta row applied_seq is not 8 bytes"))?;
    Ok(u64::from_le_bytes(bytes))
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicBool;

    use super::*;
    use crate::storage::open;

    fn database() -> (tempfile::TempDir, Arc<Database>) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cell.redb");
        (dir, Arc::new(open(&path, crate::storage::tests::CELL, crate::storage::ONE_OFF_CACHE).unwrap()))
    }

    #[test]
    fn a_read_waits_for_a_visible_batch_until_applied_never_for_one_committing() {
        let (_dir, db) = database();
        let applied = Applied::of(db.clone()).unwrap();
        assert!(applied.caught_up(), "nothing pending");

        // Stamped, not yet committed: no snapshot sees it, so a read does not wait for it (one
        // that did would give up: nothing applies it).
        let txn = db.begin_write().unwrap();
        let n = applied.stamp(&txn).unwrap();
        assert_eq!(n, 1);
        assert!(applied.caught_up(), "a commit is not waited through");

        // Committed, not yet applied: a read waits, and goes on once the lists hold it.
        txn.commit().unwrap();
        let (started, released) = (std::sync::Barrier::new(2), AtomicBool::new(false));
        std::thread::scope(|s| {
            let reader = s.spawn(|| {
                started.wait();
                applied.caught_up() && released.load(Ordering::SeqCst)
            });
            started.wait();
            released.store(true, Ordering::SeqCst);
            applied.done(n);
            assert!(reader.join().unwrap(), "the read went on only once the batch was applied");
        });

        // A failed commit is marked done too: nothing waits on it.
        let txn = db.begin_write().unwrap();
        let failed = applied.stamp(&txn).unwrap();
        txn.abort().unwrap();
        applied.done(failed);
        assert!(applied.caught_up());
    }

    #[test]
    fn numbering_goes_on_from_the_last_committed_batch_after_a_reopen() {
        let (_dir, db) = database();
        let first = Applied::of(db.clone()).unwrap();
        for _ in 0..3 {
            let txn = db.begin_write().unwrap();
            let n = first.stamp(&txn).unwrap();
            txn.commit().unwrap();
            first.done(n);
        }
        let again = Applied::of(db.clone()).unwrap();
        assert_eq!(visible(&db).unwrap(), 3);
        assert!(again.caught_up(), "the lists built after a start hold what was committed");
        let txn = db.begin_write().unwrap();
        assert_eq!(again.stamp(&txn).unwrap(), 4);
    }
}
