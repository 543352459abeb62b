//! Product search: one tantivy index per cell in `<cell dir>/search/`, derived from redb.
//!
//! The index is never written by request handlers. A product write appends `store ‖ seq →
//! product id` to the cell's outbox table in the same redb transaction ([`outbox_append`]); the
//! cell's indexer thread drains the outbox into tantivy (reading each product's current row),
//! commits tantivy, and only then deletes the drained entries through the cell writer. A crash
//! at any point leaves the entries in place, and the next start replays them: every
//! acknowledged write reaches the index, and no restart rebuilds it. Only a missing index (a new
//! cell, or data from before search existed) and `shopcell admin reindex` build it from redb.
//!
//! The indexer wakes on every commit of the cell writer and at least every [`TICK`], so a
//! product is searchable well within a second of its 2xx.

pub mod cache;
pub mod columns;
pub mod delete;
pub mod indexer;
pub mod query;
pub mod schema;
pub mod words;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use redb::{Database, ReadableDatabase, ReadableTable};
use tantivy::schema::Term;
use tantivy::{Index, IndexReader, IndexWriter, ReloadPolicy, TantivyDocument};
use tokio::sync::Notify;
use uuid::Uuid;

use crate::error::{ApiError, ApiResult, BoxError};
use crate::memory::{CacheStats, CellShares};
use crate::search::columns::ColumnCache;
use crate::search::query::{Hits, PageCollector, QueryBuilder, SearchRequest, page_of};
use crate::search::schema::Fields;
use crate::storage::codec::decode;
use crate::storage::keys::{Key, leading_store, prefix_range};
use crate::storage::tables::{OUTBOX, PRODUCTS, STORE_STATE};
use crate::storage::tx::Tx;
use crate::storage::writer::Writer;

/// The longest the indexer sleeps when no commit wakes it.
pub const TICK: Duration = Duration::from_millis(250);
/// Memory tantivy may buffer before it flushes a segment in an offline rebuild, which runs
/// alone in its process (a cell's writer takes its share of the budget).
const OFFLINE_WRITER_MEMORY: u64 = 64 << 20;
/// Hits collected before a page when paging by number; deeper pages need the cursor.
pub const MAX_OFFSET: usize = 10_000;

/// Sequence numbers of outbox keys: increasing within a process, started above both the clock
/// (in µs) and every key left in an opened outbox, so a restart never reuses a pending key.
static OUTBOX_SEQ: LazyLock<AtomicU64> = LazyLock::new(|| {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_micros() as u64);
    AtomicU64::new(now.unwrap_or(0))
});

/// Records, inside a product write's transaction, that the product's document must be
/// refreshed. Called by the one product writer, `cells::products::write_product`.
pub fn outbox_append(tx: &Tx, store: Uuid, product: Uuid) -> ApiResult<()> {
    let seq = OUTBOX_SEQ.fetch_add(1, Ordering::Relaxed);
    tx.raw().open_table(OUTBOX)?.insert(Key::store(store).u64(seq).bytes(), product.as_bytes().as_slice())?;
    Ok(())
}

/// Queues every product of `store` for indexing (a store arriving by a move) with one entry: the
/// indexer walks the store's products from it a batch per pass, so the write that serves the
/// store costs one row, not one per product.
pub fn outbox_enqueue_store(tx: &Tx, store: Uuid) -> ApiResult<()> {
    let seq = OUTBOX_SEQ.fetch_add(1, Ordering::Relaxed);
    let whole = StoreWalk { after: None }.bytes();
    tx.raw().open_table(OUTBOX)?.insert(Key::store(store).u64(seq).bytes(), whole.as_slice())?;
    Ok(())
}

/// An outbox entry's value that stands for every product of its store after `after` (all of them
/// when `None`): a tag byte `0x01`, then the last product id indexed (16 bytes) once one is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StoreWalk {
    pub after: Option<Uuid>,
}

impl StoreWalk {
    const TAG: u8 = 1;

    /// The walk an outbox value stands for, when it is one (a product's entry is its 16-byte id).
    pub fn parse(value: &[u8]) -> Option<StoreWalk> {
        match value {
            [Self::TAG] => Some(StoreWalk { after: None }),
            [Self::TAG, id @ ..] => Uuid::from_slice(id).ok().map(|id| StoreWalk { after: Some(id) }),
            _ => None,
        }
    }

    pub fn bytes(&self) -> Vec<u8> {
        let mut out = vec![Self::TAG];
        if let Some(id) = self.after {
            out.extend_from_slice(id.as_bytes());
        }
        out
    }
}

/// A cell's index: the reader queries use, the writer only the indexer (and purges) touch.
pub struct Search {
    index: Index,
    pub fields: Fields,
    reader: IndexReader,
    /// Recent answers of `GET S/products/search` (see [`cache`]).
    pub answers: cache::AnswerCache,
    /// The sort and id columns of the index's segments, opened once each.
    columns: Arc<ColumnCache>,
    /// The documents of each word searched for, per segment.
    lists: Arc<words::WordCache>,
    writer: Mutex<Option<IndexWriter<TantivyDocument>>>,
    /// The memory tantivy's writer may buffer before it flushes a segment.
    writer_memory: u64,
    /// Whether a pass of [`Search::write`] is adding documents and committing: only then does
    /// tantivy's writer hold its buffer (it makes a segment's buffer on the pass's first
    /// document and frees it when the commit has written the segment).
    writing: AtomicBool,
    /// Poked by the cell writer after every commit.
    wake: Arc<Notify>,
    stopping: AtomicBool,
    thread: Mutex<Option<JoinHandle<()>>>,
}

/// Opens the index in `dir`, or creates an empty one. `true` with it when it was created (or
/// unreadable and replaced): the caller must then fill it from redb.
fn open_index(dir: &Path) -> Result<(Index, bool), BoxError> {
    let (schema, _) = schema::build();
    if dir.join("meta.json").exists() {
        match Index::open_in_dir(dir) {
            Ok(index) if index.schema() == schema => return Ok((index, false)),
            Ok(_) => tracing::warn!(dir = %dir.display(), "search index has another schema; rebuilding it"),
            Err(e) => tracing::warn!(dir = %dir.display(), error = %e, "search index unreadable; rebuilding it"),
        }
        let aside = dir.with_extension(format!("broken-{}", Uuid::now_v7().simple()));
        std::fs::rename(dir, &aside)?;
    }
    std::fs::create_dir_all(dir)?;
    Ok((Index::create_in_dir(dir, schema)?, true))
}

/// What tantivy's writer holds from its creation on, besides its indexing buffer: the queue of
/// documents handed to its thread, allocated whole (10,000 batches of up to four documents,
/// each a `SmallVec` with its length and tag, behind the channel slot's stamp): 2.5 MiB.
pub fn writer_queue() -> u64 {
    const SLOT: usize = size_of::<[tantivy::indexer::AddOperation<TantivyDocument>; 4]>() + 3 * size_of::<usize>();
    crate::memory::allocated(10_000 * SLOT) as u64
}

impl Search {
    /// The index with its caches and writer, each within its share of `memory`.
    fn new(index: Index, wake: Arc<Notify>, memory: &CellShares) -> Result<Search, BoxError> {
        schema::register_analyzers(&index);
        let (_, fields) = schema::build();
        let reader = index.reader_builder().reload_policy(ReloadPolicy::Manual).try_into()?;
        // One indexing thread: tantivy refuses less than its minimum, so a smaller share (which
        // `Budget::divide` never gives) is raised to it rather than failing the cell. Its queue
        // comes out of the share.
        let writer_memory = memory.search_writer.max(crate::memory::SEARCH_WRITER_MIN);
        let writer = index.writer_with_num_threads(1, usize::try_from(writer_memory.saturating_sub(writer_queue()))?)?;
        Ok(Search {
            index,
            fields,
            reader,
            answers: cache::AnswerCache::new(memory.answers),
            columns: Arc::new(ColumnCache::new(memory.columns)),
            lists: Arc::new(words::WordCache::new(memory.words)),
            writer: Mutex::new(Some(writer)),
            writer_memory,
            writing: AtomicBool::new(false),
            wake,
            stopping: AtomicBool::new(false),
            thread: Mutex::new(None),
        })
    }

    /// Opens the index of a cell and starts its indexer, which first fills a new index from redb
    /// and replays what is left in the outbox. `writer`'s commit signal wakes the indexer. The
    /// word lists, columns, answers and tantivy's writer take their shares of `memory`.
    pub fn start(
        dir: &Path,
        db: Arc<Database>,
        writer: Writer,
        cell: &str,
        memory: &CellShares,
    ) -> Result<Arc<Search>, BoxError> {
        let (index, fresh) = open_index(dir)?;
        let search = Arc::new(Search::new(index, writer.committed.clone(), memory)?);
        seed_outbox_seq(&db)?;
        let handle = {
            let search = search.clone();
            std::thread::Builder::new()
                .name(format!("indexer-{cell}"))
                .spawn(move || indexer::run(&search, &db, &writer, fresh))?
        };
        if let Ok(mut t) = search.thread.lock() {
            *t = Some(handle);
        }
        Ok(search)
    }

    /// What the search caches hold and how they fare, by the name `/metrics` shows. tantivy's
    /// writer is counted at its whole share while a pass writes (its buffer grows toward the
    /// share until the commit), and as its queue between passes, when it holds no buffer.
    pub fn caches(&self) -> Vec<(&'static str, CacheStats)> {
        let held = if self.writing.load(Ordering::Relaxed) { self.writer_memory } else { writer_queue() };
        let writer = CacheStats { budget: self.writer_memory, bytes: held, ..CacheStats::default() };
        vec![
            ("search_words", self.lists.stats()),
            ("search_columns", self.columns.stats()),
            ("search_answers", self.answers.stats()),
            ("search_writer", writer),
        ]
    }

    /// Asks the indexer to run now (it also wakes on every commit and every [`TICK`]).
    pub fn poke(&self) {
        self.wake.notify_one();
    }

    /// Stops the indexer after its current pass and releases the index writer (and its lock).
    /// Entries still in the outbox are replayed on the next start.
    pub fn stop(&self) {
        self.stopping.store(true, Ordering::SeqCst);
        self.wake.notify_one();
        if let Some(t) = self.thread.lock().ok().and_then(|mut t| t.take()) {
            let _ = t.join();
        }
        if let Ok(mut w) = self.writer.lock() {
            w.take();
        }
    }

    fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::SeqCst)
    }

    /// Runs `f` with the index writer, then commits and makes the result visible to searches.
    fn write<T>(&self, f: impl FnOnce(&IndexWriter<TantivyDocument>, &Fields) -> Result<T, BoxError>) -> Result<T, BoxError> {
        let mut guard = self.writer.lock().map_err(|_| "index writer lock poisoned")?;
        let writer = guard.as_mut().ok_or("the index is closed")?;
        self.writing.store(true, Ordering::Relaxed);
        let out = f(writer, &self.fields);
        let committed = match out {
            // Pending operations of a failed pass must not ride along with the next commit.
            Err(_) => writer.rollback().map(drop),
            Ok(_) => writer.commit().map(drop),
        };
        self.writing.store(false, Ordering::Relaxed);
        let out = out?;
        committed?;
        drop(guard);
        self.reader.reload()?;
        Ok(out)
    }

    /// Deletes every document of `store` (the store moved away or its copy was discarded).
    pub fn purge_store(&self, store: Uuid) -> Result<(), BoxError> {
        self.write(|w, f| {
            delete::delete(w, Term::from_field_text(f.store, &schema::store_term(store)))?;
            Ok(())
        })
    }

    /// The version of the index as searches see it now: a digest of its segments and their
    /// deletes, so it changes with every commit and merge that changes what a search can find,
    /// and not with the indexer's idle reloads (tantivy numbers every reload anew).
    pub fn generation(&self) -> u64 {
        let mut h = std::hash::DefaultHasher::new();
        std::hash::Hash::hash(self.reader.searcher().generation().segments(), &mut h);
        std::hash::Hasher::finish(&h)
    }

    /// One page of products matching `req`.
    pub fn search(&self, req: &SearchRequest, fingerprint: u32) -> ApiResult<Hits> {
        let searcher = self.reader.searcher();
        self.columns.retain_segments_of(&searcher);
        self.lists.retain_segments_of(&searcher);
        let words = self.index.tokenizer_for_field(self.fields.title).map_err(ApiError::internal)?;
        let mut builder =
            QueryBuilder { fields: &self.fields, words, searcher: &searcher, relaxed: false, scored: false, lists: &self.lists };
        let want = if req.after.is_some() { req.limit } else { req.offset + req.limit };
        let run = |builder: &mut QueryBuilder| {
            let query = builder.build(req);
            let collector = PageCollector {
                columns: self.columns.clone(),
                fields: self.fields,
                sort: req.sort,
                want,
                after: req.after.clone(),
                allowed: req.allowed.clone(),
                scored: builder.scored,
            };
            searcher.search(query.as_ref(), &collector).map_err(ApiError::internal)
        };
        let mut found = run(&mut builder)?;
        // Every word of a query must match; when no product has them all, the products with
        // any of them are the answer, those matching more words first.
        if found.total() == 0 && builder.can_relax(req) {
            builder.relaxed = true;
            found = run(&mut builder)?;
        }
        Ok(page_of(found, req, fingerprint))
    }
}

/// Indexes every product of every store the cell serves into `search`, replacing what it held.
pub fn fill_from(search: &Search, db: &Database) -> Result<u64, BoxError> {
    let txn = db.begin_read()?;
    let stores = active_stores(db)?;
    let products = txn.open_table(PRODUCTS.def)?;
    search.write(|w, f| {
        w.delete_all_documents()?;
        let mut n = 0;
        for store in &stores {
            let prefix = Key::store(*store).into_vec();
            let (start, end) = prefix_range(&prefix);
            let range = match &end {
                Some(end) => products.range(start.as_slice()..end.as_slice())?,
                None => products.range(start.as_slice()..)?,
            };
            for item in range {
                let (_, v) = item?;
                let p = decode(v.value())?;
                w.add_document(schema::document(f, *store, &p))?;
                n += 1;
            }
        }
        Ok(n)
    })
}

/// The stores a cell serves, from its state table.
fn active_stores(db: &Database) -> Result<HashSet<Uuid>, BoxError> {
    let txn = db.begin_read()?;
    let mut out = HashSet::new();
    for item in txn.open_table(STORE_STATE)?.iter()? {
        let (k, v) = item?;
        if v.value() == crate::storage::tables::StoreState::Active as u8 {
            out.insert(Uuid::from_u128(k.value()));
        }
    }
    Ok(out)
}

/// Starts the outbox sequence above every key already pending in `db`.
fn seed_outbox_seq(db: &Database) -> Result<(), BoxError> {
    let txn = db.begin_read()?;
    let outbox = txn.open_table(OUTBOX)?;
    let mut highest = 0;
    for item in outbox.iter()? {
        let (k, _) = item?;
        if let Some(seq) = k.value().get(16..24).and_then(|b| b.try_into().ok()).map(u64::from_be_bytes) {
            highest = highest.max(seq);
        }
    }
    OUTBOX_SEQ.fetch_max(highest.saturating_add(1), Ordering::Relaxed);
    Ok(())
}

/// Rebuilds the index of the cell in `cell_dir` from its database `db`, opened by the caller while
/// nothing serves it. The new index is built beside the old one and swapped in by renames.
pub fn reindex_offline(db: &Database, cell_dir: &Path) -> Result<u64, BoxError> {
    let target = cell_dir.join("search");
    let fresh: PathBuf = cell_dir.join("search.new");
    if fresh.exists() {
        std::fs::remove_dir_all(&fresh)?;
    }
    std::fs::create_dir_all(&fresh)?;
    let (schema, _) = schema::build();
    // A rebuild never searches: its caches get nothing.
    let memory = CellShares {
        redb: 0,
        rows: 0,
        locations: 0,
        levels: 0,
        lists: 0,
        words: 0,
        columns: 0,
        answers: 0,
        pricing: 0,
        search_writer: OFFLINE_WRITER_MEMORY,
    };
    let search = Search::new(Index::create_in_dir(&fresh, schema)?, Arc::new(Notify::new()), &memory)?;
    let n = fill_from(&search, db)?;
    search.stop();
    drop(search);
    if target.exists() {
        std::fs::remove_dir_all(&target)?;
    }
    std::fs::rename(&fresh, &target)?;
    Ok(n)
}

/// The store a pending outbox key belongs to.
fn outbox_store(key: &[u8]) -> Option<Uuid> {
    leading_store(key)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn shares() -> CellShares {
        crate::memory::Budget { bytes: 1 << 30, origin: "test".into() }.divide(1).unwrap().cell
    }

    #[test]
    fn the_index_version_follows_content_not_reloads() {
        let (schema, _) = schema::build();
        let search = Search::new(Index::create_in_ram(schema), Arc::new(Notify::new()), &shares()).unwrap();
        let empty = search.generation();
        search.reader.reload().unwrap();
        assert_eq!(search.generation(), empty, "an idle reload changes nothing searches see");
        search
            .write(|w, f| {
                w.add_document(tantivy::doc!(f.store => "s", f.title => "mug"))?;
                Ok(())
            })
            .unwrap();
        let one = search.generation();
        assert_ne!(one, empty);
        search.reader.reload().unwrap();
        assert_eq!(search.generation(), one);
        search
            .write(|w, f| {
                delete::delete(w, Term::from_field_text(f.store, "s"))?;
                Ok(())
            })
            .unwrap();
        assert_ne!(search.generation(), one, "a delete changes it too");
    }

    fn found(search: &Search, store: Uuid, q: &str) -> Vec<u128> {
        let req = SearchRequest {
            store,
            terms: vec![(q.to_string(), query::SearchBy::Title)],
            status: None,
            product_type: None,
            allowed: None,
            sort: query::Sort::Relevance,
            offset: 0,
            limit: 20,
            after: None,
        };
        search.search(&req, 0).unwrap().ids.iter().map(|id| id.as_u128()).collect()
    }

    #[test]
    fn every_word_must_match_and_any_word_when_none_has_all() {
        let (schema, _) = schema::build();
        let search = Search::new(Index::create_in_ram(schema), Arc::new(Notify::new()), &shares()).unwrap();
        let (store, other) = (Uuid::from_u128(1), Uuid::from_u128(2));
        let add = |products: &[(Uuid, u64, &str)]| {
            search
                .write(|w, f| {
                    for (s, id, title) in products {
                        w.add_document(tantivy::doc!(
                            f.store => schema::store_term(*s), f.id_hi => 0u64, f.id_lo => *id, f.title => *title
                        ))?;
                    }
                    Ok(())
                })
                .unwrap()
        };
        let sorted = |mut v: Vec<u128>| {
            v.sort();
            v
        };
        // One store in the index: its filter is left out, the answers are the same.
        add(&[(store, 1, "Blue Garden Chair"), (store, 2, "Red Garden Chair"), (store, 3, "Blue Mug")]);
        assert_eq!(found(&search, store, "blue chair"), [1]);
        assert_eq!(found(&search, store, "bleu chiar"), [1], "each word keeps its typo tolerance");
        assert_eq!(sorted(found(&search, store, "red mug")), [2, 3], "no product has both: either word will do");
        assert_eq!(found(&search, store, "blue garden zebra")[0], 1, "more matching words rank first");
        assert_eq!(found(&search, store, "zebra okapi"), Vec::<u128>::new());
        assert_eq!(found(&search, other, "blue"), Vec::<u128>::new());
        add(&[(other, 4, "Red Mug")]);
        assert_eq!(sorted(found(&search, store, "red mug")), [2, 3], "never another store's products");
        assert_eq!(found(&search, other, "red mug"), [4]);
    }

    #[test]
    fn the_caches_report_their_shares_and_what_searches_left_in_them() {
        let (schema, _) = schema::build();
        let memory = shares();
        let search = Search::new(Index::create_in_ram(schema), Arc::new(Notify::new()), &memory).unwrap();
        let store = Uuid::from_u128(1);
        let writer_while_writing = search
            .write(|w, f| {
                w.add_document(tantivy::doc!(
                    f.store => schema::store_term(store), f.id_hi => 0u64, f.id_lo => 7u64, f.title => "Blue Mug"
                ))?;
                Ok(search.caches().into_iter().find(|(name, _)| *name == "search_writer").map(|(_, c)| c.bytes))
            })
            .unwrap();
        assert_eq!(writer_while_writing, Some(memory.search_writer), "a pass counts the writer's whole share");
        assert_eq!(found(&search, store, "mug"), [7]);
        assert_eq!(found(&search, store, "mug"), [7]);
        let caches: HashMap<&str, CacheStats> = search.caches().into_iter().collect();
        let names: HashSet<&str> = caches.keys().copied().collect();
        assert_eq!(names, HashSet::from(["search_words", "search_columns", "search_answers", "search_writer"]));
        let words = caches["search_words"];
        // One word (its typo and completion variants in one list), read once, then found.
        assert_eq!((words.budget, words.entries, words.hits, words.misses), (memory.words, 1, 1, 1));
        assert!(words.bytes > 0 && words.bytes <= words.budget);
        let columns = caches["search_columns"];
        assert_eq!((columns.budget, columns.entries, columns.hits, columns.misses), (memory.columns, 1, 1, 1));
        assert!(columns.bytes >= 2 * 8, "one document's two id halves at least");
        // The answers are kept by the API, not by `search`.
        assert_eq!(caches["search_answers"], CacheStats { budget: memory.answers, ..CacheStats::default() });
        let writer = memory.search_writer;
        assert_eq!(
            caches["search_writer"],
            CacheStats { budget: writer, bytes: writer_queue(), ..CacheStats::default() },
            "its queue alone between passes"
        );
        // The queue tantivy allocates when the writer is made, as a heap profile showed it.
        assert_eq!(writer_queue(), 2_621_440);
        assert_eq!(crate::memory::SEARCH_WRITER_MIN, 15_000_000 + writer_queue(), "tantivy's floor and the queue");
    }
}
