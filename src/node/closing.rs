//! Closing a store, which spans its cell and the directory (as a move does, `node::moves`):
//! closed on its owner's word, reopened by an operator, and removed once its grace period ends
//! (`--closed-store-grace`). For the removal each cell of this process names the stores closed
//! long enough ago; the directory forgets each first (its closed record and keys: no reopen
//! after this), then the cell deletes its rows in bounded writes (`cells::moves::discard`).
//! Either step failing leaves the store named again on the next sweep, so the work resumes
//! after a crash or an unreachable directory.

use std::sync::Arc;
use std::time::Duration;

use uuid::Uuid;

use crate::cells::{Cell, moves, stores};
use crate::error::{ApiError, ApiResult, Code};
use crate::node::Node;

/// Closes `store` (held by `cell` here) on its owner's word: the cell's side first (it stops
/// serving and refuses a store being moved), then the directory's; a directory that refuses
/// puts the cell's side back.
pub async fn close_store(node: &Node, cell: &Cell, store: Uuid, owner: Uuid) -> ApiResult<()> {
    stores::close_store(cell, store, node.clock.now_ms()).await?;
    if let Err(e) = node.directory.close_store(store, owner).await {
        if let Err(back) = stores::reopen_store(cell, store).await {
            tracing::error!(%store, error = %back, "a refused close left the store closed in its cell");
        }
        return Err(e);
    }
    tracing::info!(%store, "store closed");
    Ok(())
}

/// Reopens a closed store, run by the account service: the directory first (entry, members,
/// keys), then its cell. A cell that fails leaves the store in the directory answering 404 from
/// its cell until the call is repeated. Answers the cell.
pub async fn reopen_store(node: &Node, store: Uuid) -> ApiResult<String> {
    let account =
        node.account.as_ref().ok_or_else(|| ApiError::msg(Code::NOT_FOUND, "reopens are run by the account service"))?;
    let cell = account.reopen_store(store).await?;
    node.directory.forget_placement(store);
    node.cell_link(&cell)?.reopen_store(store).await?;
    tracing::info!(%store, %cell, "store reopened");
    Ok(cell)
}

/// How often the closed stores are looked at; a move of the clock wakes the sweep too.
const SWEEP_EVERY: Duration = Duration::from_secs(3600);

/// Starts the sweeps of a process with cells; they end with the node.
pub fn spawn_sweeps(node: &Arc<Node>) {
    if node.cells.is_empty() {
        return;
    }
    let weak = Arc::downgrade(node);
    tokio::spawn(async move {
        loop {
            let Some(node) = weak.upgrade() else { return };
            let now = node.clock.now_ms();
            if let Err(e) = sweep(&node, now).await {
                tracing::warn!(error = %e, "closed stores not removed; retried on the next sweep");
            }
            let clock = node.clock.clone();
            drop(node);
            let next = now.saturating_add(SWEEP_EVERY.as_millis() as i64);
            tokio::select! {
                _ = clock.sleep_until(next) => {}
                _ = tokio::time::sleep(SWEEP_EVERY) => {}
            }
        }
    });
}

/// Removes every store of this process's cells whose grace period has ended by `now`;
/// answers those removed.
pub async fn sweep(node: &Node, now: i64) -> ApiResult<Vec<Uuid>> {
    let grace = i64::try_from(node.closed_store_grace.as_millis()).unwrap_or(i64::MAX);
    let mut removed = Vec::new();
    for cell in node.cells.values() {
        for store in stores::closed_due(cell, now.saturating_sub(grace))? {
            match node.directory.forget_store(store).await {
                // Reopened meanwhile: its cell serves it again and no longer names it.
                Err(e) if e.code == Code::CONFLICT => continue,
                other => other?,
            }
            moves::discard(cell, store).await?;
            tracing::info!(%store, cell = %cell.name, "closed store removed after its grace period");
            removed.push(store);
        }
    }
    Ok(removed)
}
