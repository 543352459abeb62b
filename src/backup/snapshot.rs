//! The serving side of a backup in one database: a read transaction opened while its writer
//! was held, read out table by table in chunks; and the sessions a cell keeps of them between
//! the coordinator's requests.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use redb::{Database, ReadTransaction, ReadableDatabase};
use uuid::Uuid;

use crate::backup::block::Builder;
use crate::backup::{IDLE_MS, Rows};
use crate::error::{ApiError, ApiResult, Code};
use crate::storage::copy::{self, CopyTable};
use crate::storage::writer::{Hold, Writer};

/// A database as it was at the cut, and how far it has been read.
pub struct Snapshot {
    txn: ReadTransaction,
    tables: Vec<&'static dyn CopyTable>,
    /// The table being read and the last key sent from it.
    table: usize,
    after: Option<Vec<u8>>,
    counts: BTreeMap<String, u64>,
}

impl Snapshot {
    /// Opens the read transaction of `db` (of kind `kind`): call it while its writer is held.
    pub fn open(db: &Database, kind: &str) -> ApiResult<Snapshot> {
        let txn = db.begin_read()?;
        let tables = copy::present(&txn, kind).map_err(ApiError::internal)?;
        Ok(Snapshot { txn, tables, table: 0, after: None, counts: BTreeMap::new() })
    }

    /// The next rows, about `max_bytes` of them, as one compressed block; with the counts of
    /// every table once the last has been read.
    pub fn read(&mut self, max_bytes: usize) -> ApiResult<Rows> {
        off_the_workers(|| self.read_rows(max_bytes))
    }

    fn read_rows(&mut self, max_bytes: usize) -> ApiResult<Rows> {
        // Each row is copied once, from redb's page into the block.
        let mut block = Builder::with_capacity(max_bytes + (max_bytes >> 4));
        while self.table < self.tables.len() {
            let budget = max_bytes.saturating_sub(block.len());
            if budget == 0 {
                break;
            }
            let table = self.tables[self.table];
            block.table(table.name());
            let more = table.read(&self.txn, self.after.as_deref(), budget, &mut block).map_err(ApiError::internal)?;
            match more {
                Some(last) => {
                    self.after = Some(last);
                    break;
                }
                None => {
                    self.table += 1;
                    self.after = None;
                }
            }
        }
        let block = block.finish().map_err(ApiError::internal)?;
        for (name, rows) in &block.tables {
            *self.counts.entry(name.clone()).or_insert(0) += rows;
        }
        let done = (self.table == self.tables.len()).then(|| {
            // Every table the database holds is counted, its empty ones too.
            for t in &self.tables {
                self.counts.entry(t.name().to_string()).or_insert(0);
            }
            std::mem::take(&mut self.counts)
        });
        Ok(Rows { block: block.bytes, tables: block.tables, done })
    }
}

/// Runs `read` (a chunk's rows, 4 MiB copied out of redb: milliseconds of one core) without
/// stalling the requests queued on the same worker thread: on a multi-thread runtime the
/// worker first hands its other tasks to another thread.
fn off_the_workers<T>(read: impl FnOnce() -> T) -> T {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current() {
        Ok(h) if h.runtime_flavor() == RuntimeFlavor::MultiThread => tokio::task::block_in_place(read),
        _ => read(),
    }
}

/// A cell's part of a backup between the coordinator's requests.
struct Session {
    snapshot: Snapshot,
    /// The writer's hold, from `hold` to `release`.
    hold: Option<Hold>,
    last_used_ms: i64,
}

/// The backups a cell is part of, by backup id.
#[derive(Default)]
pub struct Sessions(Mutex<HashMap<Uuid, Session>>);

impl Sessions {
    /// Holds `writer` (every earlier write committed), opens the read transaction of `db`
    /// and keeps both under `id` until [`Sessions::release`].
    pub async fn hold(&self, id: Uuid, db: &Database, writer: &Writer, now_ms: i64) -> ApiResult<()> {
        self.sweep(now_ms);
        let hold = writer.hold().await?;
        let snapshot = Snapshot::open(db, "cell")?;
        let mut sessions = self.0.lock().map_err(|_| ApiError::internal("backup sessions poisoned"))?;
        if sessions.contains_key(&id) {
            return Err(ApiError::msg(Code::CONFLICT, "this backup already holds the cell"));
        }
        sessions.insert(id, Session { snapshot, hold: Some(hold), last_used_ms: now_ms });
        Ok(())
    }

    /// Lets the writer go on. A hold that lapsed before this ([`crate::storage::writer::MAX_HOLD`])
    /// breaks the cut: the backup is dropped and refused.
    pub fn release(&self, id: Uuid, now_ms: i64) -> ApiResult<()> {
        let mut sessions = self.0.lock().map_err(|_| ApiError::internal("backup sessions poisoned"))?;
        let s = sessions.get_mut(&id).ok_or_else(gone)?;
        s.last_used_ms = now_ms;
        let in_time = s.hold.take().map(Hold::release).unwrap_or(true);
        if !in_time {
            sessions.remove(&id);
            return Err(ApiError::msg(Code::UNAVAILABLE, "the cell's writer was held too long; start the backup again"));
        }
        Ok(())
    }

    /// The next rows of the backup's snapshot.
    pub fn read(&self, id: Uuid, now_ms: i64, max_bytes: usize) -> ApiResult<Rows> {
        let mut sessions = self.0.lock().map_err(|_| ApiError::internal("backup sessions poisoned"))?;
        let s = sessions.get_mut(&id).ok_or_else(gone)?;
        s.last_used_ms = now_ms;
        s.snapshot.read(max_bytes)
    }

    /// Ends the backup here: its read transaction (and a hold still taken) end.
    pub fn end(&self, id: Uuid) {
        if let Ok(mut sessions) = self.0.lock() {
            sessions.remove(&id);
        }
    }

    /// Drops sessions no request has touched for [`IDLE_MS`] (a coordinator that died).
    pub fn sweep(&self, now_ms: i64) {
        if let Ok(mut sessions) = self.0.lock() {
            sessions.retain(|_, s| now_ms - s.last_used_ms < IDLE_MS);
        }
    }
}

fn gone() -> ApiError {
    ApiError::msg(Code::NOT_FOUND, "no such backup here (it ended, or lapsed after a minute unused)")
}
