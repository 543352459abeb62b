//! Internal routes between the services of the platform and for operators. They require the
//! service key, are never forwarded by a router, and answer 404 to anyone else.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::account::directory::{Acting, Located, SessionAccess};
use crate::api::auth::account;
use crate::cells::Cell;
use crate::cells::link::run_move_step;
use crate::cells::stores;
use crate::domain::store::StoreSettings;
use crate::error::{ApiError, ApiResult};
use crate::handler;
use crate::http::parse::parse_json;
use crate::http::query::Query;
use crate::http::reply::{Json, NoContent, OctetStream, Raw};
use crate::http::route::{Access, Param, QueryParams, Service, param, required};
use crate::node::context::{Ctx, Route};
use crate::storage::codec::decode;

/// A move step's body is one chunk: a chunk holds its size in rows plus at most one more row
/// (a product row stays far below 1 MiB).
const MOVE_BODY_LIMIT: usize = 64 << 20;
/// The largest chunk a move may ask for, well inside [`MOVE_BODY_LIMIT`].
const MAX_CHUNK_BYTES: u32 = 32 << 20;

pub fn routes() -> Vec<Route> {
    use Access::Internal;
    use Service::*;
    vec![
        Route::post("/internal/v1/stores", Cell, Internal, handler!(create_store), "Create a store in this cell").raw(1 << 20),
        Route::post("/internal/v1/stores/{storeId}/move/{step}", Cell, Internal, handler!(move_step), "One step of a store move")
            .raw(MOVE_BODY_LIMIT),
        Route::get("/internal/v1/directory/stores/{storeId}", Account, Internal, handler!(locate), "The cell that holds a store"),
        Route::put(
            "/internal/v1/directory/stores/{storeId}",
            Account,
            Internal,
            handler!(rename),
            "Update a store's name in the directory",
        )
        .body::<Rename>(),
        Route::get("/internal/v1/access", Account, Internal, handler!(access), "A session's state and a member's role"),
        Route::post("/internal/v1/moves", Account, Internal, handler!(move_store), "Move a store to another cell")
            .body::<MoveStore>(),
        Route::post(
            "/internal/v1/stores/{storeId}/close",
            Account,
            Internal,
            handler!(close_store),
            "Close a store on `actor`'s word",
        ),
        Route::post(
            "/internal/v1/stores/{storeId}/reopen",
            Cell,
            Internal,
            handler!(reopen_in_cell),
            "Serve a closed store again",
        ),
        Route::post(
            "/internal/v1/closed-stores/{storeId}/reopen",
            Account,
            Internal,
            handler!(reopen_store),
            "Reopen a closed store: directory, members and keys, then its cell",
        ),
        Route::post(
            "/internal/v1/closed-stores/{storeId}/forget",
            Account,
            Internal,
            handler!(forget_store),
            "Forget a closed store whose cell has removed its rows",
        ),
    ]
}

/// `?cell=NAME`: the cell an internal cell route addresses; without it, the only one of this
/// process.
pub struct CellQuery(Option<String>);

impl QueryParams for CellQuery {
    fn params() -> Vec<Param> {
        vec![param("cell", "string", "the cell's name: required when this process has several")]
    }
    fn parse(q: &Query) -> ApiResult<Self> {
        Ok(CellQuery(q.str("cell").map(str::to_string)))
    }
}

impl CellQuery {
    pub fn cell(&self, cx: &Ctx) -> ApiResult<Arc<Cell>> {
        match &self.0 {
            Some(name) => cx.node.cells.get(name).cloned().ok_or_else(ApiError::not_found),
            None if cx.node.cells.len() == 1 => cx.node.cells.values().next().cloned().ok_or_else(ApiError::not_found),
            None => Err(ApiError::field("cell", "name the cell: this process has several")),
        }
    }
}

async fn create_store(cx: Ctx, q: CellQuery) -> ApiResult<NoContent> {
    let settings: StoreSettings = decode(&cx.body)?;
    let cell = q.cell(&cx)?;
    stores::create_store(&cell, settings).await?;
    Ok(NoContent)
}

async fn move_step(cx: Ctx, q: CellQuery) -> ApiResult<Raw<OctetStream>> {
    let store = cx.path_id("storeId")?;
    let rows = (!cx.body.is_empty()).then(|| cx.body.to_vec());
    let cell = q.cell(&cx)?;
    let out = run_move_step(&cell, store, cx.param("step"), rows).await?;
    Ok(Raw::new(out))
}

async fn close_store(cx: Ctx) -> ApiResult<NoContent> {
    let a: Acting<()> = parse_json(&cx.body)?;
    account(&cx)?.close_store(cx.path_id("storeId")?, a.actor).await?;
    Ok(NoContent)
}

async fn reopen_in_cell(cx: Ctx, q: CellQuery) -> ApiResult<NoContent> {
    let cell = q.cell(&cx)?;
    stores::reopen_store(&cell, cx.path_id("storeId")?).await?;
    Ok(NoContent)
}

async fn reopen_store(cx: Ctx) -> ApiResult<Json<Located>> {
    let cell = crate::node::closing::reopen_store(&cx.node, cx.path_id("storeId")?).await?;
    Ok(Json(Located { cell }))
}

async fn forget_store(cx: Ctx) -> ApiResult<NoContent> {
    account(&cx)?.forget_store(cx.path_id("storeId")?).await?;
    Ok(NoContent)
}

async fn locate(cx: Ctx) -> ApiResult<Json<Located>> {
    let cell = account(&cx)?.locate(cx.path_id("storeId")?)?.ok_or_else(ApiError::not_found)?;
    Ok(Json(Located { cell }))
}

#[derive(Deserialize, JsonSchema)]
struct Rename {
    name: String,
}

async fn rename(cx: Ctx) -> ApiResult<NoContent> {
    let body: Rename = parse_json(&cx.body)?;
    account(&cx)?.rename_store(cx.path_id("storeId")?, body.name).await?;
    Ok(NoContent)
}

/// `GET /internal/v1/access`'s query: whose session, and the store to read their role in.
pub struct AccessQuery {
    user: Uuid,
    session: Uuid,
    store: Option<Uuid>,
}

impl QueryParams for AccessQuery {
    fn params() -> Vec<Param> {
        vec![
            required("user", "string", "the user's id"),
            required("session", "string", "the session's id"),
            param("store", "string", "a store id: the user's role in it is answered"),
        ]
    }
    fn parse(q: &Query) -> ApiResult<Self> {
        let user = q.uuid("user")?.ok_or_else(|| ApiError::field("user", "is required"))?;
        let session = q.uuid("session")?.ok_or_else(|| ApiError::field("session", "is required"))?;
        Ok(AccessQuery { user, session, store: q.uuid("store")? })
    }
}

async fn access(cx: Ctx, q: AccessQuery) -> ApiResult<Json<SessionAccess>> {
    let a = account(&cx)?;
    let active = a.session_active(q.session)?;
    if active {
        // A cell asking on the caller's behalf is a use of the session.
        a.touch(q.session);
    }
    let role = match q.store {
        Some(store) if active => a.role(store, q.user)?,
        _ => None,
    };
    Ok(Json(SessionAccess { role: role.map(|r| r.name().to_string()), session_active: active }))
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct MoveStore {
    store_id: Uuid,
    to: String,
    /// Row bytes per chunk copied (default 4 MiB, at most 32 MiB): about what either cell
    /// holds of the store at once.
    #[schemars(range(min = 1, max = 33554432))]
    chunk_bytes: Option<u32>,
}

/// A finished move: the store and the cell that holds it now. Fields in key order, as the answer
/// has always listed them.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Moved {
    pub cell: String,
    pub store_id: Uuid,
}

async fn move_store(cx: Ctx) -> ApiResult<Json<Moved>> {
    let body: MoveStore = cx.json()?;
    let chunk = body.chunk_bytes.unwrap_or(crate::cells::moves::CHUNK_BYTES);
    if !(1..=MAX_CHUNK_BYTES).contains(&chunk) {
        return Err(ApiError::field("chunkBytes", "must be between 1 and 33554432 (32 MiB)"));
    }
    crate::node::moves::move_store(&cx.node, body.store_id, &body.to, chunk).await?;
    Ok(Json(Moved { cell: body.to, store_id: body.store_id }))
}
