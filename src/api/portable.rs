//! One store as a portable file (`shopcell admin export-store`, `import-store`): the account
//! service's routes the caller pages through, and each cell's part, which the account service
//! calls. All internal: the service key is required and a router never forwards them.

use crate::api::backups::SeqQuery;
use crate::api::internal::CellQuery;
use crate::cells::link::run_portable_step;
use crate::cells::moves::Cursor;
use crate::error::{ApiError, ApiResult};
use crate::handler;
use crate::http::reply::{Json, NoContent, OctetStream, Raw};
use crate::http::route::{Access, Service};
use crate::node::context::{Ctx, Route};
use crate::portable::{BeginExport, BeginImport, ExportBegun, ImportBegun, ImportReport, serve};
use crate::storage::codec::decode;

/// A chunk of rows travels as one request: its size plus one row, well inside this.
const CHUNK_BODY_LIMIT: usize = 64 << 20;
/// The largest chunk an export may ask for (the move's limit).
const MAX_CHUNK_BYTES: u32 = 32 << 20;

pub fn routes() -> Vec<Route> {
    use Access::Internal;
    use Service::*;
    vec![
        Route::post(
            "/internal/v1/store-exports",
            Account,
            Internal,
            handler!(begin_export),
            "Begin exporting a store as a portable file",
        )
        .body::<BeginExport>(),
        Route::post(
            "/internal/v1/store-exports/{storeId}/{exportId}/rows",
            Account,
            Internal,
            handler!(export_rows),
            "The next chunk of a store's rows, from a cursor",
        )
        .raw(1 << 20),
        Route::delete(
            "/internal/v1/store-exports/{storeId}/{exportId}",
            Account,
            Internal,
            handler!(end_export),
            "End an export",
        ),
        Route::post(
            "/internal/v1/store-imports",
            Account,
            Internal,
            handler!(begin_import),
            "Begin importing a portable store file",
        )
        .body::<BeginImport>(),
        Route::post(
            "/internal/v1/store-imports/{storeId}/rows",
            Account,
            Internal,
            handler!(import_rows),
            "The next chunk of an imported store's rows",
        )
        .raw(CHUNK_BODY_LIMIT),
        Route::post(
            "/internal/v1/store-imports/{storeId}/finish",
            Account,
            Internal,
            handler!(finish_import),
            "Serve an imported store and record it in the directory",
        ),
        Route::delete("/internal/v1/store-imports/{storeId}", Account, Internal, handler!(abort_import), "Abandon an import"),
        Route::post(
            "/internal/v1/stores/{storeId}/portable/{exportId}/{step}",
            Cell,
            Internal,
            handler!(cell_step),
            "One step of a cell's part in a portable export or import (open, read, close, finish, abandon)",
        )
        .raw(1 << 20),
    ]
}

async fn begin_export(cx: Ctx) -> ApiResult<Json<ExportBegun>> {
    let body: BeginExport = cx.json()?;
    Ok(Json(serve::begin_export(&cx.node, body.store_id).await?))
}

async fn export_rows(cx: Ctx) -> ApiResult<Raw<OctetStream>> {
    let from: Cursor = decode(&cx.body).map_err(|_| ApiError::field("body", "not a cursor"))?;
    if !(1..=MAX_CHUNK_BYTES).contains(&from.bytes) {
        return Err(ApiError::field("bytes", "must be between 1 and 33554432 (32 MiB)"));
    }
    let rows = serve::export_rows(&cx.node, cx.path_id("storeId")?, cx.path_id("exportId")?, &from).await?;
    Ok(Raw::new(rows))
}

async fn end_export(cx: Ctx) -> ApiResult<NoContent> {
    serve::end_export(&cx.node, cx.path_id("storeId")?, cx.path_id("exportId")?).await?;
    Ok(NoContent)
}

async fn begin_import(cx: Ctx) -> ApiResult<Json<ImportBegun>> {
    let body: BeginImport = cx.json()?;
    Ok(Json(serve::begin_import(&cx.node, body).await?))
}

async fn import_rows(cx: Ctx, q: SeqQuery) -> ApiResult<NoContent> {
    serve::import_rows(&cx.node, cx.path_id("storeId")?, q.0, &cx.body).await?;
    Ok(NoContent)
}

async fn finish_import(cx: Ctx) -> ApiResult<Json<ImportReport>> {
    Ok(Json(serve::finish_import(&cx.node, cx.path_id("storeId")?).await?))
}

async fn abort_import(cx: Ctx) -> ApiResult<NoContent> {
    serve::abort_import(&cx.node, cx.path_id("storeId")?).await?;
    Ok(NoContent)
}

async fn cell_step(cx: Ctx, q: CellQuery) -> ApiResult<Raw<OctetStream>> {
    let cell = q.cell(&cx)?;
    let body = (!cx.body.is_empty()).then(|| cx.body.to_vec());
    let out = run_portable_step(&cell, cx.path_id("storeId")?, cx.path_id("exportId")?, cx.param("step"), body).await?;
    Ok(Raw::new(out))
}
