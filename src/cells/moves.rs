//! Moving a store between cells, with reads served throughout and writes paused only for the
//! final hand-over.
//!
//! 1. `begin` (source): writes to the store are recorded in the move log from now on.
//! 2. `export` (source) → `import` (target): a snapshot of every store row, copied while the
//!    store keeps taking writes. The target holds the copy as `Incoming` (not served).
//! 3. `freeze` (source): writes answer 503 `STORE_MOVING` with `Retry-After`; once the writer has
//!    drained, the current value of every logged key is the delta.
//! 4. `apply` (target): the delta is written and the store becomes `Active` there.
//! 5. The directory points the store at the target; `finish` (source) deletes its copy.
//!
//! Any failure before the directory flips aborts: the source unfreezes and keeps serving, the
//! target discards its copy. No acknowledged write is lost: every write either committed before
//! the snapshot, or is in the log and replayed in the delta, or was refused with a 503.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::cells::Cell;
use crate::error::{ApiError, ApiResult, Code};
use crate::storage::codec::{decode, encode};
use crate::storage::keys::{Key, prefix_range};
use crate::storage::tables::StoreState;
use crate::storage::tables::{MOVE_LOG, STORE_STATE, STORE_TABLES};

/// One store row in transit; `value: None` deletes the key.
#[derive(Debug, Serialize, Deserialize)]
pub struct Row {
    pub table: u16,
    pub key: Vec<u8>,
    pub value: Option<Vec<u8>>,
}

impl Cell {
    /// Step 1 (source): record writes to the store from now on.
    pub async fn move_begin(&self, store: Uuid) -> ApiResult<()> {
        if !self.holds(store) {
            return Err(ApiError::not_found());
        }
        self.writer.gate.set_tracked(store, true);
        // A barrier: once it commits, every earlier write of the store is in the snapshot taken
        // next, and every later one is in the log.
        self.writer.write(None, |_| Ok(())).await
    }

    /// Step 2 (source): every row of the store.
    pub fn move_export(&self, store: Uuid) -> ApiResult<Vec<u8>> {
        let txn = self.read()?;
        let prefix = Key::store(store).into_vec();
        let (start, end) = prefix_range(&prefix);
        let mut rows = Vec::new();
        for t in STORE_TABLES {
            let table = txn.open_table(t.def)?;
            let range = match &end {
                Some(end) => table.range(start.as_slice()..end.as_slice())?,
                None => table.range(start.as_slice()..)?,
            };
            for item in range {
                let (k, v) = item?;
                rows.push(Row { table: t.index, key: k.value().to_vec(), value: Some(v.value().to_vec()) });
            }
        }
        encode(&rows)
    }

    /// Step 2 (target): hold a copy of the store, not served yet. A leftover copy is replaced.
    pub async fn move_import(&self, store: Uuid, rows: Vec<u8>) -> ApiResult<()> {
        if self.holds(store) {
            return Err(ApiError::msg(Code::CONFLICT, "the target cell already holds this store"));
        }
        let rows: Vec<Row> = decode(&rows)?;
        check_rows(store, &rows)?;
        let rows = std::sync::Arc::new(rows);
        self.writer
            .write(Some(store), move |tx| {
                for t in STORE_TABLES {
                    tx.delete_prefix(*t, Key::store(store).bytes())?;
                }
                apply_rows(tx, &rows)?;
                tx.raw().open_table(STORE_STATE)?.insert(store.as_u128(), StoreState::Incoming as u8)?;
                Ok(())
            })
            .await?;
        // Rows copied wholesale: list orders are built afresh from them when first read.
        self.writer.orders.forget(store);
        self.writer.rows.drop_store(store);
        self.set_state(store, Some(StoreState::Incoming));
        Ok(())
    }

    /// Step 3 (source): refuse writes, drain the writer, and answer the delta.
    pub async fn move_freeze(&self, store: Uuid) -> ApiResult<Vec<u8>> {
        self.writer.gate.set_frozen(store, true);
        self.writer.write(None, |_| Ok(())).await?;
        let txn = self.read()?;
        let log = txn.open_table(MOVE_LOG)?;
        let prefix = Key::store(store).into_vec();
        let (start, end) = prefix_range(&prefix);
        let range = match &end {
            Some(end) => log.range(start.as_slice()..end.as_slice())?,
            None => log.range(start.as_slice()..)?,
        };
        let mut keys: Vec<(u16, Vec<u8>)> = Vec::new();
        for item in range {
            let (_, v) = item?;
            let v = v.value();
            if v.len() < 2 {
                continue;
            }
            keys.push((u16::from_be_bytes([v[0], v[1]]), v[2..].to_vec()));
        }
        keys.sort();
        keys.dedup();
        let mut rows = Vec::with_capacity(keys.len());
        for (table, key) in keys {
            let t = STORE_TABLES.get(table as usize).ok_or_else(|| ApiError::internal("move log names an unknown table"))?;
            let value = txn.open_table(t.def)?.get(key.as_slice())?.map(|v| v.value().to_vec());
            rows.push(Row { table, key, value });
        }
        encode(&rows)
    }

    /// Step 4 (target): apply the delta and serve the store.
    pub async fn move_apply(&self, store: Uuid, rows: Vec<u8>) -> ApiResult<()> {
        let rows: Vec<Row> = decode(&rows)?;
        check_rows(store, &rows)?;
        let rows = std::sync::Arc::new(rows);
        self.writer
            .write(Some(store), move |tx| {
                apply_rows(tx, &rows)?;
                tx.raw().open_table(STORE_STATE)?.insert(store.as_u128(), StoreState::Active as u8)?;
                // Searchable here from now on: the indexer picks every product up from the outbox.
                crate::search::outbox_enqueue_store(tx, store)?;
                Ok(())
            })
            .await?;
        self.writer.orders.forget(store);
        self.writer.rows.drop_store(store);
        self.set_state(store, Some(StoreState::Active));
        Ok(())
    }

    /// Step 5 (source): the store now lives elsewhere; delete this copy.
    pub async fn move_finish(&self, store: Uuid) -> ApiResult<()> {
        self.set_state(store, None);
        self.discard(store).await?;
        self.writer.gate.set_frozen(store, false);
        self.writer.gate.set_tracked(store, false);
        Ok(())
    }

    /// Undo on the source: serve writes again and drop the log.
    pub async fn move_abort(&self, store: Uuid) -> ApiResult<()> {
        self.writer.gate.set_tracked(store, false);
        self.writer.gate.set_frozen(store, false);
        self.writer
            .write(None, move |tx| {
                let prefix = Key::store(store).into_vec();
                let (start, end) = prefix_range(&prefix);
                let mut log = tx.raw().open_table(MOVE_LOG)?;
                match end {
                    Some(end) => log.retain_in(start.as_slice()..end.as_slice(), |_, _| false)?,
                    None => log.retain_in(start.as_slice().., |_, _| false)?,
                }
                Ok(())
            })
            .await
    }

    /// Deletes every row of a store this cell does not serve (a finished or abandoned copy).
    pub async fn discard(&self, store: Uuid) -> ApiResult<()> {
        if self.holds(store) {
            return Err(ApiError::msg(Code::CONFLICT, "this cell serves the store"));
        }
        // Written without the store's id: the store may be frozen here.
        self.writer
            .write(None, move |tx| {
                for t in STORE_TABLES {
                    tx.delete_prefix(*t, Key::store(store).bytes())?;
                }
                let prefix = Key::store(store).into_vec();
                let (start, end) = prefix_range(&prefix);
                let mut log = tx.raw().open_table(MOVE_LOG)?;
                match end {
                    Some(end) => log.retain_in(start.as_slice()..end.as_slice(), |_, _| false)?,
                    None => log.retain_in(start.as_slice().., |_, _| false)?,
                }
                drop(log);
                tx.raw().open_table(STORE_STATE)?.remove(store.as_u128())?;
                Ok(())
            })
            .await?;
        self.writer.orders.forget(store);
        self.writer.rows.drop_store(store);
        self.set_state(store, None);
        // The copy's search documents go too. A failure is only logged: the indexer drops the
        // documents of stores the cell does not serve on its next start.
        let search = self.search.clone();
        match tokio::task::spawn_blocking(move || search.purge_store(store).map_err(|e| e.to_string())).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(%store, error = %e, "search documents of a discarded store not deleted"),
            Err(e) => tracing::warn!(%store, error = %e, "search purge task failed"),
        }
        Ok(())
    }
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

fn apply_rows(tx: &mut crate::storage::writer::Tx, rows: &[Row]) -> ApiResult<()> {
    for r in rows {
        let t = STORE_TABLES[r.table as usize];
        match &r.value {
            Some(v) => tx.put(t, &r.key, v)?,
            None => tx.delete(t, &r.key)?,
        }
    }
    Ok(())
}
