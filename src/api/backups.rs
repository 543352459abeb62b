//! Online backup (`shopcell admin backup`): the account service's routes the caller pages
//! through, and each cell's part, which the account service calls. All internal: the service
//! key is required and a router never forwards them.

use crate::api::internal::CellQuery;
use crate::backup::{Begun, coordinate};
use crate::cells::link::run_backup_step;
use crate::error::{ApiError, ApiResult};
use crate::handler;
use crate::http::query::Query;
use crate::http::reply::{Json, NoContent, OctetStream, Raw};
use crate::http::route::{Access, Param, QueryParams, Service, required};
use crate::node::context::{Ctx, Route};
use crate::storage::codec::encode;

pub fn routes() -> Vec<Route> {
    use Access::Internal;
    use Service::*;
    vec![
        Route::post(
            "/internal/v1/backups",
            Account,
            Internal,
            handler!(begin),
            "Begin a backup: take the cut across every database",
        ),
        Route::post("/internal/v1/backups/{backupId}/next", Account, Internal, handler!(next), "The next chunk of a backup"),
        Route::delete("/internal/v1/backups/{backupId}", Account, Internal, handler!(abort), "Abandon a backup"),
        Route::post(
            "/internal/v1/cell-backups/{backupId}/{step}",
            Cell,
            Internal,
            handler!(cell_step),
            "One step of a cell's part in a backup (hold, release, read, end)",
        ),
    ]
}

async fn begin(cx: Ctx) -> ApiResult<Json<Begun>> {
    Ok(Json(coordinate::begin(&cx.node).await?))
}

/// `?seq=N`: the chunk the caller expects, so a repeated or lost request is noticed.
pub struct SeqQuery(pub u64);

impl QueryParams for SeqQuery {
    fn params() -> Vec<Param> {
        vec![required("seq", "integer", "the number of the chunk asked for, from 0")]
    }
    fn parse(q: &Query) -> ApiResult<Self> {
        if q.str("seq").is_none() {
            return Err(ApiError::field("seq", "is required"));
        }
        Ok(SeqQuery(q.int("seq", 0, 0, i64::MAX)? as u64))
    }
}

async fn next(cx: Ctx, q: SeqQuery) -> ApiResult<Raw<OctetStream>> {
    let chunk = coordinate::next(&cx.node, cx.path_id("backupId")?, q.0).await?;
    Ok(Raw::new(encode(&chunk)?))
}

async fn abort(cx: Ctx) -> ApiResult<NoContent> {
    coordinate::abort(&cx.node, cx.path_id("backupId")?).await?;
    Ok(NoContent)
}

async fn cell_step(cx: Ctx, q: CellQuery) -> ApiResult<Raw<OctetStream>> {
    let cell = q.cell(&cx)?;
    Ok(Raw::new(run_backup_step(&cell, cx.path_id("backupId")?, cx.param("step")).await?))
}
