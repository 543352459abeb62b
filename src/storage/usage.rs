//! How much of a database file is in use. redb files never shrink: deleted rows leave free pages
//! that later writes reuse, so after a large delete (a store closed or moved away) the file keeps
//! its size. `/metrics` shows the file's size beside the pages its tables use, and the operator
//! runs `shopcell admin compact` when the difference is worth a stop (docs/memory.md "Disk").
//!
//! The file's size is read at every scrape. The pages in use are counted by walking every
//! table's tree in a read transaction: that reads the whole file once (through redb's cache), so
//! it is done in the background, a minute after start and then every [`MEASURE_EVERY`], never
//! on a request and never holding the writer.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use redb::{Database, ReadableDatabase, ReadableTableMetadata};

use crate::clock::Clock;
use crate::metrics::{Exposition, Source};

/// How often the pages in use are counted again.
pub const MEASURE_EVERY: Duration = Duration::from_secs(3600);
/// The first count waits this long, so a start is not slowed by reading the whole file.
pub const FIRST_AFTER: Duration = Duration::from_secs(60);

/// What the tables of a database use, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Used {
    /// Keys and values as stored.
    pub data: u64,
    /// Whole pages the tables' trees use: the data, the branch pages' keys and the unused
    /// space inside those pages.
    pub pages: u64,
}

/// Walks every table of `db` in one read transaction.
pub fn measure(db: &Database) -> Result<Used, redb::Error> {
    let txn = db.begin_read()?;
    let mut used = Used::default();
    let mut add = |s: redb::TableStats| {
        used.data += s.stored_bytes();
        used.pages += s.stored_bytes() + s.metadata_bytes() + s.fragmented_bytes();
    };
    for handle in txn.list_tables()? {
        add(txn.open_untyped_table(handle)?.stats()?);
    }
    for handle in txn.list_multimap_tables()? {
        add(txn.open_untyped_multimap_table(handle)?.stats()?);
    }
    Ok(used)
}

/// One database's figures for `/metrics`: its file, and the last count of what its tables use.
pub struct DatabaseUsage {
    owner: String,
    file: PathBuf,
    /// [`Used::data`] and [`Used::pages`] of the last count; `u64::MAX` until the first.
    data: AtomicU64,
    pages: AtomicU64,
}

impl DatabaseUsage {
    /// Starts counting `db` (the file at `file`, labelled `owner`) in the background; the answer
    /// is the metric source. The task ends when the database is dropped.
    pub fn start(owner: &str, file: PathBuf, db: Weak<Database>, clock: Clock) -> Arc<DatabaseUsage> {
        let usage = Arc::new(DatabaseUsage {
            owner: owner.to_string(),
            file,
            data: AtomicU64::new(u64::MAX),
            pages: AtomicU64::new(u64::MAX),
        });
        let weak = Arc::downgrade(&usage);
        tokio::spawn(async move {
            let mut next = clock.now_ms().saturating_add(FIRST_AFTER.as_millis() as i64);
            loop {
                clock.sleep_until(next).await;
                let (Some(db), Some(usage)) = (db.upgrade(), weak.upgrade()) else { return };
                match tokio::task::spawn_blocking(move || measure(&db)).await {
                    Ok(Ok(used)) => {
                        usage.data.store(used.data, Ordering::Relaxed);
                        usage.pages.store(used.pages, Ordering::Relaxed);
                    }
                    Ok(Err(e)) => tracing::warn!(file = %usage.file.display(), error = %e, "database usage not counted"),
                    Err(_) => return, // the runtime is shutting down
                }
                next = clock.now_ms().saturating_add(MEASURE_EVERY.as_millis() as i64);
            }
        });
        usage
    }
}

impl Source for DatabaseUsage {
    fn collect(&self, out: &mut Exposition) {
        let labels = [("owner", self.owner.as_str())];
        if let Ok(meta) = std::fs::metadata(&self.file) {
            out.gauge("shopcell_database_file_bytes", "Size of the database file (it never shrinks).", &labels, meta.len());
        }
        let (data, pages) = (self.data.load(Ordering::Relaxed), self.pages.load(Ordering::Relaxed));
        if pages != u64::MAX {
            out.gauge(
                "shopcell_database_used_bytes",
                "Bytes of the pages the database's tables use, at the last hourly count; the rest of the file is free pages `admin compact` gives back.",
                &labels,
                pages,
            );
            out.gauge(
                "shopcell_database_data_bytes",
                "Bytes of keys and values stored, at the last hourly count.",
                &labels,
                data,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use redb::{ReadableDatabase, TableDefinition};

    use super::*;

    const T: TableDefinition<u64, &[u8]> = TableDefinition::new("t");

    /// What a test does to the table in one write transaction.
    type Change<'a> = &'a dyn Fn(&mut redb::Table<u64, &[u8]>);

    #[test]
    fn deleted_rows_leave_the_file_its_size_and_the_count_shows_what_is_used() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.redb");
        let db = Database::create(&path).unwrap();
        let write = |f: Change| {
            let txn = db.begin_write().unwrap();
            f(&mut txn.open_table(T).unwrap());
            txn.commit().unwrap();
        };
        let value = vec![7u8; 1000];
        write(&|t| {
            for i in 0..5_000u64 {
                t.insert(i, value.as_slice()).unwrap();
            }
        });
        let full = measure(&db).unwrap();
        assert!(full.data >= 5_000 * 1_008, "{full:?}");
        assert!(full.pages >= full.data);
        write(&|t| {
            for i in 0..4_900u64 {
                t.remove(i).unwrap();
            }
        });
        let after = measure(&db).unwrap();
        assert_eq!(after.data, 100 * 1_008, "{after:?}");
        assert!(after.pages < full.pages / 10, "{after:?}");
        let file = std::fs::metadata(&path).unwrap().len();
        assert!(file > 4 * after.pages, "the file keeps its size: {file} against {after:?}");
        // Read while a reader is open elsewhere: counting never needs the writer.
        let _reader = db.begin_read().unwrap();
        assert_eq!(measure(&db).unwrap(), after);
    }
}
