//! Reaching a cell: in this process, or over HTTP through its internal routes. Both paths end in
//! the same `Cell` methods.

use std::sync::Arc;

use hyper::Method;
use uuid::Uuid;

use crate::cells::Cell;
use crate::cells::moves::{self, Chunk, Cursor};
use crate::cells::{portable, stores};
use crate::domain::store::StoreSettings;
use crate::error::{ApiError, ApiResult};
use crate::http::upstream::{Body, Upstream};
use crate::storage::codec::{decode, encode};

#[derive(Clone)]
pub enum CellLink {
    Local(Arc<Cell>),
    Remote(Box<Upstream>),
}

/// The steps of a store move, as named on the internal routes.
pub const MOVE_STEPS: &[&str] = &["begin", "export", "import", "freeze", "delta", "apply", "finish", "abort", "discard"];

impl CellLink {
    pub async fn create_store(&self, settings: StoreSettings) -> ApiResult<()> {
        match self {
            CellLink::Local(c) => stores::create_store(c, settings).await,
            CellLink::Remote(u) => {
                let body = crate::storage::codec::encode(&settings)?;
                u.call_raw(Method::POST, "/internal/v1/stores", Body::Raw(body)).await.map(|_| ())
            }
        }
    }

    /// Serves a closed store again.
    pub async fn reopen_store(&self, store: Uuid) -> ApiResult<()> {
        match self {
            CellLink::Local(c) => stores::reopen_store(c, store).await,
            CellLink::Remote(u) => {
                u.call_raw(Method::POST, &format!("/internal/v1/stores/{store}/reopen"), Body::Empty).await.map(|_| ())
            }
        }
    }

    /// Runs one move step: `export` and `delta` take a [`Cursor`] and answer a [`Chunk`],
    /// `import` and `apply` take a chunk, the others nothing.
    pub async fn call_move(&self, store: Uuid, step: &str, body: Option<Vec<u8>>) -> ApiResult<Vec<u8>> {
        match self {
            CellLink::Local(c) => run_move_step(c, store, step, body).await,
            CellLink::Remote(u) => {
                let body = body.map(Body::Raw).unwrap_or(Body::Empty);
                let path = format!("/internal/v1/stores/{store}/move/{step}");
                Ok(u.call_raw(Method::POST, &path, body).await?.to_vec())
            }
        }
    }

    /// The chunk of an export (`export`) or a delta (`delta`) from `from`.
    pub async fn move_read(&self, store: Uuid, step: &str, from: &Cursor) -> ApiResult<Chunk> {
        decode(&self.call_move(store, step, Some(encode(from)?)).await?)
    }

    /// Hands a chunk to the target (`import` or `apply`).
    pub async fn move_write(&self, store: Uuid, step: &str, chunk: &Chunk) -> ApiResult<()> {
        self.call_move(store, step, Some(encode(chunk)?)).await.map(|_| ())
    }
}

/// The steps of a cell's part in a backup, as named on the internal routes.
pub const BACKUP_STEPS: &[&str] = &["hold", "release", "read", "end"];

impl CellLink {
    /// One step of the cell's part in backup `id` (see `backup::snapshot::Sessions`): `read`
    /// answers encoded [`crate::backup::Rows`], the others nothing.
    pub async fn backup_step(&self, id: Uuid, step: &str) -> ApiResult<Vec<u8>> {
        match self {
            CellLink::Local(c) => run_backup_step(c, id, step).await,
            CellLink::Remote(u) => {
                let path = format!("/internal/v1/cell-backups/{id}/{step}");
                Ok(u.call_raw(Method::POST, &path, Body::Empty).await?.to_vec())
            }
        }
    }

    /// The next rows of the cell's part in backup `id`. A cell in this process hands over its
    /// compressed block as it is: nothing is encoded to be decoded again.
    pub async fn backup_read(&self, id: Uuid) -> ApiResult<crate::backup::Rows> {
        match self {
            CellLink::Local(c) => c.backups.read(id, c.clock.now_ms(), crate::backup::CHUNK_BYTES).await,
            CellLink::Remote(_) => decode(&self.backup_step(id, "read").await?),
        }
    }
}

/// Runs a backup step on a cell of this process (also what the internal route calls).
pub async fn run_backup_step(cell: &Cell, id: Uuid, step: &str) -> ApiResult<Vec<u8>> {
    let now = cell.clock.now_ms();
    let sessions = &cell.backups;
    match step {
        "hold" => sessions.hold(id, &cell.db, &cell.writer, now).await.map(|_| Vec::new()),
        "release" => sessions.release(id, now).map(|_| Vec::new()),
        "read" => encode(&sessions.read(id, now, crate::backup::CHUNK_BYTES).await?),
        "end" => {
            sessions.end(id);
            Ok(Vec::new())
        }
        _ => Err(ApiError::not_found()),
    }
}

/// Runs a move step on a cell of this process (also what the internal route calls).
pub async fn run_move_step(cell: &Cell, store: Uuid, step: &str, body: Option<Vec<u8>>) -> ApiResult<Vec<u8>> {
    let body = || body.clone().ok_or_else(|| ApiError::field("body", "this step takes a body"));
    let none = |_| Vec::new();
    match step {
        "begin" => moves::move_begin(cell, store).await.map(none),
        "export" => encode(&moves::move_export(cell, store, &decode(&body()?)?)?),
        "import" => moves::move_import(cell, store, decode(&body()?)?).await.map(none),
        "freeze" => moves::move_freeze(cell, store).await.map(none),
        "delta" => encode(&moves::move_delta(cell, store, &decode(&body()?)?)?),
        "apply" => moves::move_apply(cell, store, decode(&body()?)?).await.map(none),
        "finish" => moves::move_finish(cell, store).await.map(none),
        "abort" => moves::move_abort(cell, store).await.map(none),
        "discard" => moves::discard(cell, store).await.map(none),
        _ => Err(ApiError::not_found()),
    }
}

/// The steps of a cell's part in a portable export (`open`, `read`, `close`) or import
/// (`finish`, `abandon`; the rows arrive as a move's `import` steps), as named on the
/// internal routes.
pub const PORTABLE_STEPS: &[&str] = &["open", "read", "close", "finish", "abandon"];

impl CellLink {
    /// One step of export `id` of `store` (an import's steps take the nil id): `open` answers
    /// encoded [`portable::Opened`], `read` takes a [`Cursor`] and answers a [`Chunk`],
    /// `finish` takes the owner's id and answers [`portable::Finished`].
    pub async fn portable_step(&self, store: Uuid, id: Uuid, step: &str, body: Option<Vec<u8>>) -> ApiResult<Vec<u8>> {
        match self {
            CellLink::Local(c) => run_portable_step(c, store, id, step, body).await,
            CellLink::Remote(u) => {
                let body = body.map(Body::Raw).unwrap_or(Body::Empty);
                let path = format!("/internal/v1/stores/{store}/portable/{id}/{step}");
                Ok(u.call_raw(Method::POST, &path, body).await?.to_vec())
            }
        }
    }
}

/// Runs a portable step on a cell of this process (also what the internal route calls).
pub async fn run_portable_step(cell: &Cell, store: Uuid, id: Uuid, step: &str, body: Option<Vec<u8>>) -> ApiResult<Vec<u8>> {
    let body = || body.clone().ok_or_else(|| ApiError::field("body", "this step takes a body"));
    match step {
        "open" => encode(&cell.exports.open(cell, id, store)?),
        "read" => encode(&cell.exports.read(id, store, &decode(&body()?)?, cell.clock.now_ms())?),
        "close" => {
            cell.exports.close(id);
            Ok(Vec::new())
        }
        "finish" => encode(&portable::finish_import(cell, store, decode(&body()?)?).await?),
        "abandon" => portable::abandon_import(cell, store).await.map(|_| Vec::new()),
        _ => Err(ApiError::not_found()),
    }
}
