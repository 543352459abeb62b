//! Moving a store between cells, run by the account service (which owns placement): each step
//! is a call to the source or target cell (see `cells::moves` for what each does there); any
//! failure before the directory points at the target aborts at both.

use uuid::Uuid;

use crate::error::{ApiError, ApiResult, Code};
use crate::node::Node;

/// Moves `store` to cell `to`, orchestrated by the account service (which owns placement).
pub async fn move_store(node: &Node, store: Uuid, to: &str) -> ApiResult<()> {
    let account = node.account.as_ref().ok_or_else(|| ApiError::msg(Code::NOT_FOUND, "moves are run by the account service"))?;
    let entry = account.store_entry(store)?.ok_or_else(ApiError::not_found)?;
    if entry.cell == to {
        return Err(ApiError::msg(Code::CONFLICT, format!("the store is already in cell {to}")));
    }
    let source = node.cell_link(&entry.cell)?;
    let target = node.cell_link(to).map_err(|_| ApiError::field("to", format!("unknown cell {to:?}")))?;
    source.call_move(store, "begin", None).await?;
    let result = async {
        let snapshot = source.call_move(store, "export", None).await?;
        target.call_move(store, "import", Some(snapshot)).await?;
        let delta = source.call_move(store, "freeze", None).await?;
        target.call_move(store, "apply", Some(delta)).await?;
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
