//! Moving a store between cells, run by the account service (which owns placement): each step
//! is a call to the source or target cell (see `cells::moves` for what each does there); any
//! failure before the directory points at the target aborts at both.

use uuid::Uuid;

use crate::cells::link::CellLink;
use crate::cells::moves::Cursor;
use crate::error::{ApiError, ApiResult, Code};
use crate::node::Node;

/// Moves `store` to cell `to`, orchestrated by the account service (which owns placement), in
/// chunks of about `chunk_bytes` of rows.
pub async fn move_store(node: &Node, store: Uuid, to: &str, chunk_bytes: u32) -> ApiResult<()> {
    let account = node.account.as_ref().ok_or_else(|| ApiError::msg(Code::NOT_FOUND, "moves are run by the account service"))?;
    let entry = account.store_entry(store)?.ok_or_else(ApiError::not_found)?;
    if entry.cell == to {
        return Err(ApiError::msg(Code::CONFLICT, format!("the store is already in cell {to}")));
    }
    let source = node.cell_link(&entry.cell)?;
    let target = node.cell_link(to).map_err(|_| ApiError::field("to", format!("unknown cell {to:?}")))?;
    source.call_move(store, "begin", None).await?;
    let result = async {
        relay(&source, "export", &target, "import", store, chunk_bytes).await?;
        source.call_move(store, "freeze", None).await?;
        relay(&source, "delta", &target, "apply", store, chunk_bytes).await?;
        account.place_store(store, to.to_string()).await
    }
    .await;
    match result {
        Ok(()) => {
            node.directory.forget_placement(store);
            // The directory already points at the target; a failure here leaves only a stale
            // copy on the source, which no longer serves the store once restarted or retried.
            if let Err(e) = source.call_move(store, "finish", None).await {
                tracing::warn!(%store, error = %e, "source copy not deleted after move");
            }
            tracing::info!(%store, from = %entry.cell, to, "store moved");
            Ok(())
        }
        Err(e) => {
            let _ = source.call_move(store, "abort", None).await;
            let _ = target.call_move(store, "discard", None).await;
            Err(e)
        }
    }
}

/// Reads chunks of `store` from `source` with step `read` and hands each to `target` with step
/// `write`, until the last: one chunk in flight at a time.
async fn relay(source: &CellLink, read: &str, target: &CellLink, write: &str, store: Uuid, bytes: u32) -> ApiResult<()> {
    let mut from = Cursor::start(bytes);
    loop {
        let chunk = source.move_read(store, read, &from).await?;
        let next = chunk.next.clone();
        target.move_write(store, write, &chunk).await?;
        match next {
            Some(cursor) => from = cursor,
            None => return Ok(()),
        }
    }
}
