//! The indexer of one cell: a thread that drains the outbox into tantivy.
//!
//! One pass reads a batch of outbox entries and, in the same read snapshot, the current row of
//! each product named (the snapshot includes the write that appended the entry, so the row is
//! at least as new). It replaces or deletes each product's document, commits tantivy, and then
//! deletes exactly the drained keys through the cell writer. Entries appended meanwhile have
//! other keys and wait for the next pass.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use redb::{Database, ReadableDatabase, ReadableTable};
use uuid::Uuid;

use crate::domain::product::Product;
use crate::error::BoxError;
use crate::search::{Search, StoreWalk, TICK, active_stores, delete, fill_from, outbox_store, schema};
use crate::storage::codec::decode;
use crate::storage::keys::{Key, bounds_after, prefix_range, trailing_id};
use crate::storage::tables::{OUTBOX, PRODUCTS};
use crate::storage::writer::Writer;

/// Most outbox entries one pass takes.
const BATCH: usize = 5_000;
/// Pause after a failed pass before trying again.
const BACKOFF: Duration = Duration::from_secs(1);
/// An idle index with more segments than this is merged into one: every query pays per
/// segment (each typo automaton walks each segment's term dictionary).
const IDLE_SEGMENTS_MAX: usize = 4;
/// Least time between two passes that index something, unless the outbox holds a backlog (a
/// full batch): under a stream of writes, tantivy commits (each a new segment, a few fsyncs,
/// and later merges) stay few and large, while a write still becomes searchable well within a
/// second (this pause plus one pass). A backlog is drained pass after pass without pausing.
const MIN_PASS_INTERVAL: Duration = Duration::from_millis(300);

/// The thread's body: fills a new index, drops documents of stores the cell no longer serves,
/// then drains the outbox until the cell closes (with a last pass, so a clean stop leaves the
/// index current).
pub fn run(search: &Arc<Search>, db: &Arc<Database>, writer: &Writer, fresh: bool) {
    let rt = match tokio::runtime::Builder::new_current_thread().enable_time().build() {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!(error = %e, "indexer cannot start; search stays as it is until restart");
            return;
        }
    };
    if fresh {
        match fill_from(search, db) {
            Ok(n) => tracing::info!(documents = n, "search index built from the cell's products"),
            Err(e) => tracing::error!(error = %e, "building the search index failed"),
        }
    }
    if let Err(e) = purge_unserved(search, db) {
        tracing::warn!(error = %e, "could not drop search documents of stores this cell no longer serves");
    }
    rt.block_on(async {
        let mut last_indexed: Option<Instant> = None;
        let mut backlog = false;
        loop {
            let stopping = search.is_stopping();
            if let Some(at) = last_indexed
                && !stopping
                && !backlog
                && at.elapsed() < MIN_PASS_INTERVAL
            {
                tokio::time::sleep(MIN_PASS_INTERVAL.saturating_sub(at.elapsed())).await;
            }
            backlog = false;
            match drain(search, db, writer).await {
                Ok(0) => {}
                Ok(n) => {
                    last_indexed = Some(Instant::now());
                    if n >= BATCH && !stopping {
                        backlog = true;
                        continue;
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "indexer pass failed; retrying");
                    if !stopping {
                        tokio::time::sleep(BACKOFF).await;
                    }
                }
            }
            if stopping {
                break;
            }
            let idle = tokio::select! {
                _ = search.wake.notified() => false,
                _ = tokio::time::sleep(TICK) => true,
            };
            if idle {
                // Quiet after a burst of writes: merge the small segments it left behind.
                if last_indexed.take().is_some()
                    && let Err(e) = compact(search)
                {
                    tracing::warn!(error = %e, "merging search segments failed");
                }
                // Publishes merges finished in the background to searches.
                if let Err(e) = search.reader.reload() {
                    tracing::warn!(error = %e, "reloading the search index failed");
                }
            }
        }
    });
}

/// Changes committed and not yet indexed (the outbox's entries), for `/metrics`; `None` when
/// the database cannot be read.
pub fn backlog(db: &Database) -> Option<u64> {
    use redb::ReadableTableMetadata;
    db.begin_read().ok()?.open_table(OUTBOX).ok()?.len().ok()
}

/// One pass; answers how many outbox entries it drained, or [`BATCH`] while a store's walk has
/// products left (a backlog either way).
pub async fn drain(search: &Search, db: &Database, writer: &Writer) -> Result<usize, BoxError> {
    let txn = db.begin_read()?;
    let outbox = txn.open_table(OUTBOX)?;
    let table = txn.open_table(PRODUCTS.def)?;
    let mut done = Vec::new();
    let mut products = Vec::new();
    // A whole store's entry met this pass, with where its walk goes on (`None`: finished).
    let mut walked: Option<(Vec<u8>, Option<StoreWalk>)> = None;
    for item in outbox.iter()?.take(BATCH) {
        let (k, v) = item?;
        let key = k.value().to_vec();
        let Some(store) = outbox_store(&key) else {
            // A malformed entry cannot name a document; it is dropped with the batch.
            done.push(key);
            continue;
        };
        if let Some(walk) = StoreWalk::parse(v.value()) {
            // The rest of the batch goes to the store's products; the pass ends with them.
            let room = BATCH.saturating_sub(products.len()).max(1);
            let ids = products_after(&table, store, walk.after, room)?;
            let next = (ids.len() == room).then(|| StoreWalk { after: ids.last().copied() });
            products.extend(ids.into_iter().map(|id| (store, id)));
            walked = Some((key, next));
            break;
        }
        if let Ok(id) = Uuid::from_slice(v.value()) {
            products.push((store, id));
        }
        done.push(key);
    }
    if done.is_empty() && walked.is_none() {
        return Ok(0);
    }
    search.write(|w, f| {
        let mut seen = HashSet::with_capacity(products.len());
        for (store, id) in &products {
            if !seen.insert((*store, *id)) {
                continue;
            }
            delete::delete(w, schema::key(f, *store, *id))?;
            if let Some(row) = table.get(Key::store(*store).id(*id).bytes())? {
                // A row that does not decode is logged (by the codec) and left unsearchable
                // rather than holding up every entry queued behind it.
                if let Ok(p) = decode::<Product>(row.value()) {
                    w.add_document(schema::document(f, *store, &p))?;
                }
            }
        }
        Ok(())
    })?;
    drop(table);
    drop(outbox);
    drop(txn);
    let more = walked.as_ref().is_some_and(|(_, next)| next.is_some());
    let n = if more { BATCH } else { done.len() + usize::from(walked.is_some()) };
    // Not synced: entries drained again after a crash are indexed again, which changes nothing.
    writer
        .write_unsynced(None, move |tx| {
            let mut t = tx.raw().open_table(OUTBOX)?;
            for k in &done {
                t.remove(k.as_slice())?;
            }
            match &walked {
                Some((k, Some(next))) => {
                    t.insert(k.as_slice(), next.bytes().as_slice())?;
                }
                Some((k, None)) => {
                    t.remove(k.as_slice())?;
                }
                None => {}
            }
            Ok(())
        })
        .await?;
    Ok(n)
}

/// Up to `limit` product ids of `store` after `after` (from the first when `None`), in key order.
fn products_after(
    table: &redb::ReadOnlyTable<&'static [u8], &'static [u8]>,
    store: Uuid,
    after: Option<Uuid>,
    limit: usize,
) -> Result<Vec<Uuid>, BoxError> {
    let range = prefix_range(Key::store(store).bytes());
    let after = after.map(|id| Key::store(store).id(id).bytes().to_vec());
    let rows = table.range::<&[u8]>(bounds_after(&range, after.as_deref()))?;
    let mut ids = Vec::with_capacity(limit.min(1024));
    for item in rows.take(limit) {
        let (k, _) = item?;
        ids.extend(trailing_id(k.value()));
    }
    Ok(ids)
}

/// Deletes the documents of stores this cell does not serve: a purge lost to a crash after a
/// store moved away, or a discarded incoming copy.
fn purge_unserved(search: &Search, db: &Database) -> Result<(), BoxError> {
    let served = active_stores(db)?;
    let searcher = search.reader.searcher();
    let mut stale = HashSet::new();
    for segment in searcher.segment_readers() {
        let inverted = segment.inverted_index(search.fields.store)?;
        let mut terms = inverted.terms().stream()?;
        while terms.advance() {
            let Ok(hex) = std::str::from_utf8(terms.key()) else { continue };
            if let Ok(store) = Uuid::parse_str(hex)
                && !served.contains(&store)
            {
                stale.insert(store);
            }
        }
    }
    for store in stale {
        tracing::info!(%store, "dropping search documents of a store this cell does not serve");
        search.purge_store(store)?;
    }
    Ok(())
}

/// Starts merging every segment into one when there are more than [`IDLE_SEGMENTS_MAX`]. The
/// merge runs on tantivy's merge thread, not waited for: writes keep being indexed meanwhile,
/// and the next idle tick's reload shows the merged segment to searches. A segment that
/// tantivy's own merge policy is already merging makes the request fail harmlessly.
fn compact(search: &Search) -> Result<(), BoxError> {
    let ids = search.index.searchable_segment_ids()?;
    if ids.len() <= IDLE_SEGMENTS_MAX {
        return Ok(());
    }
    let mut guard = search.writer.lock().map_err(|_| "index writer lock poisoned")?;
    let writer = guard.as_mut().ok_or("the index is closed")?;
    drop(writer.merge(&ids));
    tracing::debug!(segments = ids.len(), "merging search segments");
    Ok(())
}

#[cfg(test)]
mod tests {
    use redb::ReadableDatabase;
    use uuid::Uuid;

    use super::products_after;
    use crate::search::StoreWalk;
    use crate::storage::keys::Key;
    use crate::storage::tables::PRODUCTS;

    #[test]
    fn a_store_walk_reads_its_values_back() {
        for after in [None, Some(Uuid::from_u128(7))] {
            let walk = StoreWalk { after };
            assert_eq!(StoreWalk::parse(&walk.bytes()), Some(walk));
        }
        assert_eq!(StoreWalk::parse(Uuid::from_u128(1).as_bytes()), None, "a product's entry is not a walk");
        assert_eq!(StoreWalk::parse(&[1, 2, 3]), None);
    }

    #[test]
    fn a_store_walk_pages_through_its_store_alone() {
        let dir = tempfile::tempdir().unwrap();
        let db = redb::Database::create(dir.path().join("walk.redb")).unwrap();
        let (store, other) = (Uuid::from_u128(2), Uuid::from_u128(3));
        let txn = db.begin_write().unwrap();
        {
            let mut t = txn.open_table(PRODUCTS.def).unwrap();
            for owner in [Uuid::from_u128(1), store, other] {
                for n in 1..=5u128 {
                    t.insert(Key::store(owner).id(Uuid::from_u128(n)).bytes(), [0u8].as_slice()).unwrap();
                }
            }
        }
        txn.commit().unwrap();
        let read = db.begin_read().unwrap();
        let table = read.open_table(PRODUCTS.def).unwrap();
        let (mut after, mut seen) = (None, Vec::new());
        loop {
            let ids = products_after(&table, store, after, 2).unwrap();
            seen.extend(ids.iter().map(|id| id.as_u128()));
            if ids.len() < 2 {
                break;
            }
            after = ids.last().copied();
        }
        assert_eq!(seen, [1, 2, 3, 4, 5], "every product of the store once, none of the others");
    }
}
