//! Reaching a cell: in this process, or over HTTP through its internal routes. Both paths end in
//! the same `Cell` methods.

use std::sync::Arc;

use hyper::Method;
use uuid::Uuid;

use crate::cells::Cell;
use crate::domain::store::StoreSettings;
use crate::error::{ApiError, ApiResult};
use crate::http::upstream::{Body, Upstream};

#[derive(Clone)]
pub enum CellLink {
    Local(Arc<Cell>),
    Remote(Box<Upstream>),
}

/// The steps of a store move, as named on the internal routes.
pub const MOVE_STEPS: &[&str] = &["begin", "export", "import", "freeze", "apply", "finish", "abort", "discard"];

impl CellLink {
    pub async fn create_store(&self, settings: StoreSettings) -> ApiResult<()> {
        match self {
            CellLink::Local(c) => c.create_store(settings).await,
            CellLink::Remote(u) => {
                let body = crate::storage::codec::encode(&settings)?;
                u.call_raw(Method::POST, "/internal/v1/stores", Body::Raw(body)).await.map(|_| ())
            }
        }
    }

    /// Runs one move step; `export` and `freeze` answer rows, `import` and `apply` take them.
    pub async fn call_move(&self, store: Uuid, step: &str, rows: Option<Vec<u8>>) -> ApiResult<Vec<u8>> {
        match self {
            CellLink::Local(c) => run_move_step(c, store, step, rows).await,
            CellLink::Remote(u) => {
                let body = rows.map(Body::Raw).unwrap_or(Body::Empty);
                let path = format!("/internal/v1/stores/{store}/move/{step}");
                Ok(u.call_raw(Method::POST, &path, body).await?.to_vec())
            }
        }
    }
}

/// Runs a move step on a cell of this process (also what the internal route calls).
pub async fn run_move_step(cell: &Cell, store: Uuid, step: &str, rows: Option<Vec<u8>>) -> ApiResult<Vec<u8>> {
    let rows = || rows.clone().ok_or_else(|| ApiError::field("body", "the rows are required"));
    match step {
        "begin" => cell.move_begin(store).await.map(|_| Vec::new()),
        "export" => cell.move_export(store),
        "import" => cell.move_import(store, rows()?).await.map(|_| Vec::new()),
        "freeze" => cell.move_freeze(store).await,
        "apply" => cell.move_apply(store, rows()?).await.map(|_| Vec::new()),
        "finish" => cell.move_finish(store).await.map(|_| Vec::new()),
        "abort" => cell.move_abort(store).await.map(|_| Vec::new()),
        "discard" => cell.discard(store).await.map(|_| Vec::new()),
        _ => Err(ApiError::not_found()),
    }
}
