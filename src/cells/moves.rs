//! A cell's side of moving a store between cells, with reads served throughout and writes
//! paused only for the final hand-over (the steps are run by `node::moves`).
//!
//! 1. `begin` (source): writes to the store are recorded in the move log from now on.
//! 2. `export` (source) → `import` (target), chunk by chunk: every store row, copied while the
//!    store keeps taking writes. The target holds the copy as `Incoming` (not served).
//! 3. `freeze` (source): writes answer 503 `STORE_MOVING` with `Retry-After`, and the writer
//!    drains.
//! 4. `delta` (source) → `apply` (target), chunk by chunk: the current value of every logged
//!    key; with the last chunk the store becomes `Active` there.
//! 5. The directory points the store at the target; `finish` (source) deletes its copy.
//!
//! Any failure before the directory flips aborts: the source unfreezes and keeps serving, the
//! target discards its copy. No acknowledged write is lost: every write either committed before
//! the chunk that copied its key, or is in the log and replayed in the delta, or was refused
//! with a 503. Chunks are read in separate transactions for that reason alone: a key written
//! between two chunks is logged, and the delta carries its last value.
//!
//! A chunk holds about [`Cursor::bytes`] of rows, so neither cell nor the orchestrator ever holds
//! a store whole, and each import is a write of bounded size.

use redb::{ReadableTable, WriteTransaction};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::cells::Cell;
use crate::error::{ApiError, ApiResult, Code};
use crate::storage::keys::{Key, bounds_after, prefix_range};
use crate::storage::tables::{MOVE_LOG, STORE_CLOSED, STORE_STATE, STORE_TABLES, StoreState};

/// Row bytes a chunk holds unless the move asks otherwise.
pub const CHUNK_BYTES: u32 = 4 << 20;

/// One store row in transit; `value: None` deletes the key.
#[derive(Debug, Serialize, Deserialize)]
pub struct Row {
    pub table: u16,
    pub key: Vec<u8>,
    pub value: Option<Vec<u8>>,
}

/// Where the next chunk of an export or a delta starts, and how large chunks are.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Cursor {
    /// The store table (export) the chunk starts in; unused by a delta.
    pub table: u16,
    /// The last key read (of that table, or of the move log), `None` at its start.
    pub after: Option<Vec<u8>>,
    /// Row bytes per chunk (at least one row is always sent).
    pub bytes: u32,
}

impl Cursor {
    pub fn start(bytes: u32) -> Cursor {
        Cursor { table: 0, after: None, bytes: bytes.max(1) }
    }
}

/// Rows of a store in transit, and where the next chunk starts (`None`: this is the last).
#[derive(Debug, Serialize, Deserialize)]
pub struct Chunk {
    /// The first chunk of an export: the target replaces any leftover copy with it.
    pub first: bool,
    pub rows: Vec<Row>,
    pub next: Option<Cursor>,
}

/// The keys of `table` under `prefix` after `after`.
fn after_range<'t, T: ReadableTable<&'static [u8], &'static [u8]>>(
    table: &'t T,
    prefix: &[u8],
    after: Option<&[u8]>,
) -> ApiResult<redb::Range<'t, &'static [u8], &'static [u8]>> {
    let range = prefix_range(prefix);
    Ok(table.range::<&[u8]>(bounds_after(&range, after))?)
}

/// Step 1 (source): record writes to the store from now on.
pub async fn move_begin(cell: &Cell, store: Uuid) -> ApiResult<()> {
    if !cell.holds(store) {
        return Err(ApiError::not_found());
    }
    cell.writer.gate.set_tracked(store, true);
    // A barrier: once it commits, every earlier write of the store is in the chunks read
    // next, and every later one is in the log.
    cell.writer.write(None, |_| Ok(())).await
}

/// Step 2 (source): the store's rows from `from` on, about `from.bytes` of them.
pub fn move_export(cell: &Cell, store: Uuid, from: &Cursor) -> ApiResult<Chunk> {
    export_rows(&cell.read()?, store, from)
}

/// The store's rows from `from` on as `txn` sees them, about `from.bytes` of them: a move reads
/// each chunk in a fresh transaction, a portable export every chunk in one
/// (`cells::portable`).
pub fn export_rows(txn: &redb::ReadTransaction, store: Uuid, from: &Cursor) -> ApiResult<Chunk> {
    let prefix = Key::store(store).into_vec();
    let mut rows = Vec::new();
    let mut size = 0usize;
    let mut after = from.after.clone();
    for t in STORE_TABLES.iter().skip(from.table as usize) {
        let table = txn.open_table(t.def)?;
        for item in after_range(&table, &prefix, after.as_deref())? {
            let (k, v) = item?;
            size += k.value().len() + v.value().len();
            rows.push(Row { table: t.index, key: k.value().to_vec(), value: Some(v.value().to_vec()) });
            if size >= from.bytes as usize {
                let next = Cursor { table: t.index, after: Some(k.value().to_vec()), bytes: from.bytes };
                return Ok(Chunk { first: from.table == 0 && from.after.is_none(), rows, next: Some(next) });
            }
        }
        after = None;
    }
    Ok(Chunk { first: from.table == 0 && from.after.is_none(), rows, next: None })
}

/// Step 2 (target): hold a copy of the store, not served yet, one chunk at a time. The first
/// chunk replaces a leftover copy.
pub async fn move_import(cell: &Cell, store: Uuid, chunk: Chunk) -> ApiResult<()> {
    if cell.holds(store) {
        return Err(ApiError::msg(Code::CONFLICT, "the target cell already holds this store"));
    }
    if !chunk.first && cell.state_of(store) != Some(StoreState::Incoming) {
        return Err(ApiError::msg(Code::CONFLICT, "no copy of this store is being received"));
    }
    check_rows(store, &chunk.rows)?;
    let first = chunk.first;
    if first {
        // A leftover copy of an earlier attempt goes first.
        discard(cell, store).await?;
    }
    let rows = std::sync::Arc::new(chunk.rows);
    cell.writer
        .write(Some(store), move |tx| {
            if first {
                tx.raw().open_table(STORE_STATE)?.insert(store.as_u128(), StoreState::Incoming as u8)?;
            }
            apply_rows(tx, &rows)
        })
        .await?;
    // Rows copied wholesale: list orders are built afresh from them when first read.
    cell.writer.forget_store(store);
    cell.set_state(store, Some(StoreState::Incoming));
    Ok(())
}

/// Step 3 (source): refuse writes and drain the writer.
pub async fn move_freeze(cell: &Cell, store: Uuid) -> ApiResult<()> {
    cell.writer.gate.set_frozen(store, true);
    cell.writer.write(None, |_| Ok(())).await
}

/// Step 4 (source, frozen): the current value of each key the log names from `from` on. A
/// key logged twice is sent twice with the same value: the store no longer changes.
pub fn move_delta(cell: &Cell, store: Uuid, from: &Cursor) -> ApiResult<Chunk> {
    let txn = cell.read()?;
    let log = txn.open_table(MOVE_LOG)?;
    let prefix = Key::store(store).into_vec();
    let mut rows = Vec::new();
    let mut size = 0usize;
    for item in after_range(&log, &prefix, from.after.as_deref())? {
        let (k, v) = item?;
        let v = v.value();
        let Some((table, key)) = v.split_first_chunk::<2>() else { continue };
        let table = u16::from_be_bytes(*table);
        let t = STORE_TABLES.get(table as usize).ok_or_else(|| ApiError::internal("move log names an unknown table"))?;
        let value = txn.open_table(t.def)?.get(key)?.map(|v| v.value().to_vec());
        size += key.len() + value.as_ref().map_or(0, Vec::len);
        rows.push(Row { table, key: key.to_vec(), value });
        if size >= from.bytes as usize {
            let next = Cursor { table: 0, after: Some(k.value().to_vec()), bytes: from.bytes };
            return Ok(Chunk { first: false, rows, next: Some(next) });
        }
    }
    Ok(Chunk { first: false, rows, next: None })
}

/// Step 4 (target): apply a chunk of the delta; with the last, serve the store.
pub async fn move_apply(cell: &Cell, store: Uuid, chunk: Chunk) -> ApiResult<()> {
    if cell.state_of(store) != Some(StoreState::Incoming) {
        return Err(ApiError::msg(Code::CONFLICT, "no copy of this store is being received"));
    }
    check_rows(store, &chunk.rows)?;
    let last = chunk.next.is_none();
    let rows = std::sync::Arc::new(chunk.rows);
    let now = cell.clock.now_ms();
    cell.writer
        .write(Some(store), move |tx| {
            apply_rows(tx, &rows)?;
            if last {
                serve_arrived(tx, store, now)?;
            }
            Ok(())
        })
        .await?;
    cell.writer.forget_store(store);
    if last {
        cell.set_state(store, Some(StoreState::Active));
        cell.jobs.wake();
    }
    Ok(())
}

/// In the write that completes a copy (a move's last delta, a portable import): the jobs the
/// source had claimed are released, the store is served, and every product is queued for the
/// indexer, which builds its search documents here from the rows.
pub(crate) fn serve_arrived(tx: &mut crate::storage::tx::Tx, store: Uuid, now: i64) -> ApiResult<()> {
    crate::jobs::release_leases(tx, store, now)?;
    tx.raw().open_table(STORE_STATE)?.insert(store.as_u128(), StoreState::Active as u8)?;
    crate::search::outbox_enqueue_store(tx, store)
}

/// Step 5 (source): the store now lives elsewhere; delete this copy.
pub async fn move_finish(cell: &Cell, store: Uuid) -> ApiResult<()> {
    cell.set_state(store, None);
    discard(cell, store).await?;
    cell.writer.gate.set_frozen(store, false);
    cell.writer.gate.set_tracked(store, false);
    Ok(())
}

/// Undo on the source: serve writes again and drop the log.
pub async fn move_abort(cell: &Cell, store: Uuid) -> ApiResult<()> {
    cell.writer.gate.set_tracked(store, false);
    cell.writer.gate.set_frozen(store, false);
    cell.writer.write(None, move |tx| clear_log(tx.raw(), store)).await
}

/// Drops the store's move log.
fn clear_log(txn: &WriteTransaction, store: Uuid) -> ApiResult<()> {
    let range = prefix_range(Key::store(store).bytes());
    txn.open_table(MOVE_LOG)?.retain_in::<&[u8], _>(bounds_after(&range, None), |_, _| false)?;
    Ok(())
}

/// Rows of a store one write of a discard deletes: each transaction stays small however large
/// the store is.
const DISCARD_BATCH: usize = 10_000;

/// Deletes every row of a store this cell does not serve (a finished or abandoned copy), in
/// writes of [`DISCARD_BATCH`] rows. The store is marked `Incoming` on disk first, so a start
/// after a crash midway discards the rest.
pub async fn discard(cell: &Cell, store: Uuid) -> ApiResult<()> {
    if cell.holds(store) {
        return Err(ApiError::msg(Code::CONFLICT, "this cell serves the store"));
    }
    // Written without the store's id: the store may be frozen here.
    cell.writer
        .write(None, move |tx| {
            tx.raw().open_table(STORE_STATE)?.insert(store.as_u128(), StoreState::Incoming as u8)?;
            Ok(())
        })
        .await?;
    loop {
        let gone = cell.writer.write(None, move |tx| delete_store_rows(tx.raw(), store, DISCARD_BATCH)).await?;
        if gone < DISCARD_BATCH {
            break;
        }
    }
    cell.writer
        .write(None, move |tx| {
            clear_log(tx.raw(), store)?;
            tx.raw().open_table(STORE_STATE)?.remove(store.as_u128())?;
            tx.raw().open_table(STORE_CLOSED)?.remove(store.as_u128())?;
            Ok(())
        })
        .await?;
    cell.writer.forget_store(store);
    cell.set_state(store, None);
    // The copy's search documents go too. A failure is only logged: the indexer drops the
    // documents of stores the cell does not serve on its next start.
    let search = cell.search.clone();
    match tokio::task::spawn_blocking(move || search.purge_store(store).map_err(|e| e.to_string())).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::warn!(%store, error = %e, "search documents of a discarded store not deleted"),
        Err(e) => tracing::warn!(%store, error = %e, "search purge task failed"),
    }
    Ok(())
}

/// Deletes up to `limit` rows of `store`, table after table; answers how many went (fewer than
/// `limit`: none is left).
pub(crate) fn delete_store_rows(txn: &WriteTransaction, store: Uuid, limit: usize) -> ApiResult<usize> {
    let prefix = Key::store(store).into_vec();
    let mut gone = 0;
    for t in STORE_TABLES {
        let mut table = txn.open_table(t.def)?;
        let keys = after_range(&table, &prefix, None)?
            .take(limit - gone)
            .map(|item| item.map(|(k, _)| k.value().to_vec()))
            .collect::<Result<Vec<_>, _>>()?;
        for k in &keys {
            table.remove(k.as_slice())?;
        }
        gone += keys.len();
        if gone == limit {
            break;
        }
    }
    Ok(gone)
}

/// Rows from another cell must all belong to the store being moved and name known tables.
fn check_rows(store: Uuid, rows: &[Row]) -> ApiResult<()> {
    let prefix = Key::store(store).into_vec();
    if rows.iter().all(|r| r.key.starts_with(&prefix) && (r.table as usize) < STORE_TABLES.len()) {
        Ok(())
    } else {
        Err(ApiError::field("rows", "every row must belong to the store being moved"))
    }
}

fn apply_rows(tx: &mut crate::storage::tx::Tx, rows: &[Row]) -> ApiResult<()> {
    for r in rows {
        let t = STORE_TABLES[r.table as usize];
        // Events keep the ids the source gave them: ids given here must sort after them.
        if t.index == crate::storage::tables::EVENTS.index
            && let Some(id) = crate::storage::keys::trailing_id(&r.key)
        {
            tx.commit_ids_after(id);
        }
        match &r.value {
            Some(v) => tx.put(t, &r.key, v)?,
            None => tx.delete(t, &r.key)?,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use redb::ReadableDatabase;

    use super::*;
    use crate::storage::tables::{CARTS, PRODUCTS, StoreTable};
    use crate::storage::{ONE_OFF_CACHE, open};

    #[test]
    fn a_store_s_rows_go_in_bounded_batches_and_only_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let db = open(&dir.path().join("cell.redb"), crate::cells::DATABASE, ONE_OFF_CACHE).unwrap();
        let (gone, kept) = (Uuid::from_u128(1), Uuid::from_u128(2));
        let txn = db.begin_write().unwrap();
        for (store, n) in [(gone, 3u128), (kept, 2)] {
            for t in [PRODUCTS, CARTS] {
                let mut table = txn.open_table(t.def).unwrap();
                for i in 0..n {
                    table.insert(Key::store(store).id(Uuid::from_u128(i)).bytes(), b"row".as_slice()).unwrap();
                }
            }
        }
        txn.commit().unwrap();

        let mut batches = Vec::new();
        loop {
            let txn = db.begin_write().unwrap();
            let n = delete_store_rows(&txn, gone, 4).unwrap();
            txn.commit().unwrap();
            batches.push(n);
            if n < 4 {
                break;
            }
        }
        assert_eq!(batches, [4, 2], "six rows in writes of at most four");
        let txn = db.begin_read().unwrap();
        let count = |t: StoreTable, store: Uuid| {
            let table = txn.open_table(t.def).unwrap();
            after_range(&table, Key::store(store).bytes(), None).unwrap().count()
        };
        assert_eq!((count(PRODUCTS, gone), count(CARTS, gone)), (0, 0));
        assert_eq!((count(PRODUCTS, kept), count(CARTS, kept)), (2, 2), "another store's rows stay");
    }

    #[tokio::test]
    async fn a_start_discards_the_copy_a_crash_left_incoming() {
        let dir = tempfile::tempdir().unwrap();
        let store = Uuid::from_u128(9);
        {
            let db = open(&dir.path().join("cell.redb"), crate::cells::DATABASE, ONE_OFF_CACHE).unwrap();
            let txn = db.begin_write().unwrap();
            txn.open_table(STORE_STATE).unwrap().insert(store.as_u128(), StoreState::Incoming as u8).unwrap();
            let mut products = txn.open_table(PRODUCTS.def).unwrap();
            for i in 0..7u128 {
                products.insert(Key::store(store).id(Uuid::from_u128(i)).bytes(), b"row".as_slice()).unwrap();
            }
            drop(products);
            txn.commit().unwrap();
        }
        let shares = crate::memory::Shares::of_one_cell(256 << 20).cell;
        let cell = Cell::open("c", dir.path(), crate::clock::Clock::system(), &shares).unwrap();
        assert_eq!(cell.state_of(store), None);
        let txn = cell.db.begin_read().unwrap();
        assert!(txn.open_table(STORE_STATE).unwrap().get(store.as_u128()).unwrap().is_none());
        let products = txn.open_table(PRODUCTS.def).unwrap();
        assert_eq!(after_range(&products, Key::store(store).bytes(), None).unwrap().count(), 0);
        drop((products, txn));
        cell.close();
    }
}
