//! Internal routes between the services of the platform and for operators. They require the
//! service key, are never forwarded by a router, and answer 404 to anyone else.

use std::sync::Arc;

use hyper::StatusCode;
use schemars::JsonSchema;
use serde::Deserialize;

use crate::api::auth::account;
use crate::cells::Cell;
use crate::cells::link::run_move_step;
use crate::domain::store::StoreSettings;
use crate::error::{ApiError, ApiResult};
use crate::handler;
use crate::http::context::{Ctx, parse_json};
use crate::http::route::{Access, Route, Service};
use crate::http::{Resp, json, no_content, ok};
use crate::storage::codec::decode;

/// Store exports are as large as the store; allow a generous body for move steps.
const MOVE_BODY_LIMIT: usize = 1 << 30;

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
    ]
}

/// The cell an internal cell route addresses: `?cell=NAME`, or the only one of this process.
fn cell(cx: &Ctx) -> ApiResult<Arc<Cell>> {
    match cx.query.str("cell") {
        Some(name) => cx.node.cells.get(name).cloned().ok_or_else(ApiError::not_found),
        None if cx.node.cells.len() == 1 => cx.node.cells.values().next().cloned().ok_or_else(ApiError::not_found),
        None => Err(ApiError::field("cell", "name the cell: this process has several")),
    }
}

async fn create_store(cx: Ctx) -> ApiResult<Resp> {
    let settings: StoreSettings = decode(&cx.body)?;
    cell(&cx)?.create_store(settings).await?;
    Ok(no_content())
}

async fn move_step(cx: Ctx) -> ApiResult<Resp> {
    let store = cx.path_id("storeId")?;
    let rows = (!cx.body.is_empty()).then(|| cx.body.to_vec());
    let cell = cell(&cx)?;
    let out = run_move_step(&cell, store, cx.param("step"), rows).await?;
    let mut r = hyper::Response::new(http_body_util::Full::new(bytes::Bytes::from(out)));
    r.headers_mut().insert(hyper::header::CONTENT_TYPE, hyper::header::HeaderValue::from_static("application/octet-stream"));
    Ok(r)
}

async fn locate(cx: Ctx) -> ApiResult<Resp> {
    let cell = account(&cx)?.locate(cx.path_id("storeId")?)?.ok_or_else(ApiError::not_found)?;
    Ok(ok(&serde_json::json!({ "cell": cell })))
}

#[derive(Deserialize, JsonSchema)]
struct Rename {
    name: String,
}

async fn rename(cx: Ctx) -> ApiResult<Resp> {
    let body: Rename = parse_json(&cx.body)?;
    account(&cx)?.rename_store(cx.path_id("storeId")?, body.name).await?;
    Ok(no_content())
}

async fn access(cx: Ctx) -> ApiResult<Resp> {
    let a = account(&cx)?;
    let user = cx.query.uuid("user")?.ok_or_else(|| ApiError::field("user", "is required"))?;
    let session = cx.query.uuid("session")?.ok_or_else(|| ApiError::field("session", "is required"))?;
    let active = a.session_active(session)?;
    if active {
        // A cell asking on the caller's behalf is a use of the session.
        a.touch(session);
    }
    let role = match cx.query.uuid("store")? {
        Some(store) if active => a.role(store, user)?,
        _ => None,
    };
    Ok(ok(&serde_json::json!({ "role": role.map(|r| r.name()), "sessionActive": active })))
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct MoveStore {
    store_id: uuid::Uuid,
    to: String,
}

async fn move_store(cx: Ctx) -> ApiResult<Resp> {
    let body: MoveStore = cx.json()?;
    crate::cells::moves::move_store(&cx.node, body.store_id, &body.to).await?;
    Ok(json(StatusCode::OK, &serde_json::json!({ "storeId": body.store_id, "cell": body.to })))
}
