//! The serving side of a backup in one database: a read transaction opened while its writer
//! was held, read out table by table in chunks; and the sessions a cell keeps of them between
//! the coordinator's requests. The reading itself is done on the process's backup reader
//! (`reader`), at low priority.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use redb::{Database, ReadTransaction, ReadableDatabase, TableHandle};
use uuid::Uuid;

use crate::backup::block::{Buffers, Builder};
use crate::backup::reader::Reader;
use crate::backup::{IDLE_MS, Rows};
use crate::error::{ApiError, ApiResult, Code};
use crate::storage::copy::{self, CopyTable};
use crate::storage::tables::REBUILT;
use crate::storage::writer::{Hold, Writer};

/// A database as it was at the cut, and how far it has been read. Its chunks are read on the
/// process's backup reader ([`Reader`]), which it holds while it lives.
pub struct Snapshot {
    cursor: Arc<Mutex<Cursor>>,
    reader: Arc<Reader>,
}

/// The read transaction and where its reading stands: used by one chunk's read at a time.
struct Cursor {
    txn: ReadTransaction,
    tables: Vec<&'static dyn CopyTable>,
    /// The table being read and the last key sent from it.
    table: usize,
    after: Option<Vec<u8>>,
    counts: BTreeMap<String, u64>,
    buffers: Buffers,
}

impl Snapshot {
    /// Opens the read transaction of `db` (of kind `kind`): call it while its writer is held.
    pub fn open(db: &Database, kind: &str) -> ApiResult<Snapshot> {
        let reader = Reader::shared()?;
        let txn = db.begin_read()?;
        // The tables a restore rebuilds are not read (`tables::REBUILT`).
        let mut tables = copy::present(&txn, kind).map_err(ApiError::internal)?;
        tables.retain(|t| !REBUILT.iter().any(|r| r.def.name() == t.name()));
        let cursor = Cursor { txn, tables, table: 0, after: None, counts: BTreeMap::new(), buffers: Buffers::default() };
        Ok(Snapshot { cursor: Arc::new(Mutex::new(cursor)), reader })
    }

    /// The next rows, about `max_bytes` of them, as one compressed block; with the counts of
    /// every table once the last has been read. Read on the backup reader, off the runtime's
    /// workers; what it answers owns all it needs, so it may be awaited after a lock is let go.
    pub fn read(&self, max_bytes: usize) -> impl Future<Output = ApiResult<Rows>> + Send + use<> {
        let (cursor, reader) = (self.cursor.clone(), self.reader.clone());
        async move {
            reader
                .run(move || {
                    // A read that panicked left the cursor mid-chunk: there is no going on from it.
                    let mut cursor = cursor.lock().map_err(|_| ApiError::internal("an earlier read of this backup failed"))?;
                    cursor.read_rows(max_bytes)
                })
                .await
        }
    }
}

impl Cursor {
    fn read_rows(&mut self, max_bytes: usize) -> ApiResult<Rows> {
        // Each row is copied once, from redb's page into the block.
        let mut block = Builder::in_buffers(&mut self.buffers, max_bytes + (max_bytes >> 4));
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
        let block = block.finish_in(&mut self.buffers).map_err(ApiError::internal)?;
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

    /// The next rows of the backup's snapshot. The sessions are not locked while it is read: a
    /// backup that ends meanwhile lets its read transaction go once the read is done.
    pub async fn read(&self, id: Uuid, now_ms: i64, max_bytes: usize) -> ApiResult<Rows> {
        let reading = {
            let mut sessions = self.0.lock().map_err(|_| ApiError::internal("backup sessions poisoned"))?;
            let s = sessions.get_mut(&id).ok_or_else(gone)?;
            s.last_used_ms = now_ms;
            s.snapshot.read(max_bytes)
        };
        reading.await
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backup::reader::{die, ends};
    use crate::backup::{IDLE_MS, block};
    use crate::storage::{self, ONE_OFF_CACHE};

    /// The rows a block holds, counted from the block itself.
    fn rows_in(rows: &Rows) -> u64 {
        if rows.tables.is_empty() {
            return 0;
        }
        let raw = block::decompress(&rows.block).unwrap();
        block::sections(&raw).unwrap().iter().map(|(_, rows)| rows.len() as u64).sum()
    }

    #[tokio::test]
    async fn a_backup_reads_on_one_reader_thread_that_ends_when_the_backup_ends_or_lapses() {
        let dir = tempfile::tempdir().unwrap();
        let cell = Arc::new(storage::open(&dir.path().join("cell.redb"), crate::cells::DATABASE, ONE_OFF_CACHE).unwrap());
        let account = storage::open(&dir.path().join("account.redb"), crate::account::DATABASE, ONE_OFF_CACHE).unwrap();
        let txn = cell.begin_write().unwrap();
        {
            let mut meta = txn.open_table(crate::storage::tables::META).unwrap();
            for i in 0..200 {
                meta.insert(format!("row {i:03}").as_str(), format!("a value of row {i}").as_bytes()).unwrap();
            }
        }
        txn.commit().unwrap();
        let (writer, writer_thread) = Writer::start(cell.clone(), "test", 1 << 20, 1 << 20).unwrap();
        let sessions = Sessions::default();
        let reader_of = |id: Uuid| sessions.0.lock().unwrap()[&id].snapshot.reader.clone();

        let id = Uuid::new_v4();
        sessions.hold(id, &cell, &writer, 0).await.unwrap();
        sessions.release(id, 0).unwrap();
        // The directory's snapshot in the same process reads on the same thread.
        let directory = Snapshot::open(&account, "account").unwrap();
        assert!(Arc::ptr_eq(&directory.reader, &reader_of(id)));
        let thread = directory.reader.take_thread().unwrap();

        // Read out in small chunks: every row sent is in its block and counted at the end.
        let (mut sent, mut chunks) = (0, 0);
        let counts = loop {
            let rows = sessions.read(id, 1, 256).await.unwrap();
            assert_eq!(rows_in(&rows), rows.tables.iter().map(|(_, n)| n).sum::<u64>());
            sent += rows_in(&rows);
            chunks += 1;
            if let Some(counts) = rows.done {
                break counts;
            }
        };
        assert!(chunks > 10 && sent > 200, "{chunks} chunks of {sent} rows");
        assert_eq!(counts.values().sum::<u64>(), sent);
        assert!(counts.contains_key("meta"), "{counts:?}");

        drop(directory);
        assert!(!thread.is_finished(), "the cell's part still holds the reader");
        sessions.end(id);
        assert!(ends(thread), "the reader ends with the backup");
        assert_eq!(sessions.read(id, 2, 256).await.unwrap_err().code, Code::NOT_FOUND);

        // A backup whose caller went away: its part lapses, and its reader (a new one) ends.
        let lapsed = Uuid::new_v4();
        sessions.hold(lapsed, &cell, &writer, 10).await.unwrap();
        sessions.release(lapsed, 10).unwrap();
        let thread = reader_of(lapsed).take_thread().expect("a new reader for a new backup");
        sessions.sweep(10 + IDLE_MS - 1);
        assert!(!thread.is_finished());
        sessions.sweep(10 + IDLE_MS);
        assert!(ends(thread), "the reader ends when the backup lapses");

        writer.stop();
        writer_thread.join();
    }

    #[tokio::test]
    async fn a_read_that_fails_on_the_reader_answers_an_error_and_so_does_every_read_after_it() {
        let dir = tempfile::tempdir().unwrap();
        let db = storage::open(&dir.path().join("cell.redb"), crate::cells::DATABASE, ONE_OFF_CACHE).unwrap();
        let snapshot = Snapshot::open(&db, "cell").unwrap();
        let cursor = snapshot.cursor.clone();
        // A read dying mid-chunk (as a damaged page would make redb's iterator do).
        let failed = snapshot
            .reader
            .run(move || -> ApiResult<()> {
                let _reading = cursor.lock().unwrap();
                die("page 42 unreadable")
            })
            .await
            .unwrap_err();
        assert_eq!(failed.code, Code::INTERNAL);
        // The cursor stopped mid-chunk: the next read is refused, not continued from there.
        assert_eq!(snapshot.read(256).await.unwrap_err().code, Code::INTERNAL);
        // The reader itself goes on for other snapshots.
        let other = storage::open(&dir.path().join("other.redb"), crate::cells::DATABASE, ONE_OFF_CACHE).unwrap();
        assert!(Snapshot::open(&other, "cell").unwrap().read(256).await.unwrap().done.is_some());
    }
}
