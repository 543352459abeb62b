//! Removing closed stores once their grace period ends (`--closed-store-grace`): each cell of
//! this process names the stores closed long enough ago; the directory forgets each first (its
//! closed record and keys: no reopen after this), then the cell deletes its rows in bounded
//! writes (`cells::moves::discard`). Either step failing leaves the store named again on the
//! next sweep, so the work resumes after a crash or an unreachable directory.

use std::sync::Arc;
use std::time::Duration;

use uuid::Uuid;

use crate::cells::{moves, stores};
use crate::error::{ApiResult, Code};
use crate::node::Node;

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
