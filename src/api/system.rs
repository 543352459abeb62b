//! Liveness, readiness, metrics, the OpenAPI document and the JWKS.

use std::sync::atomic::Ordering;

use schemars::JsonSchema;
use serde::Serialize;

use crate::account::keys::Jwks;
use crate::error::{ApiError, ApiResult, Code};
use crate::handler;
use crate::http::context::Ctx;
use crate::http::openapi::OpenApi;
use crate::http::reply::{Json, PrometheusText, Raw};
use crate::http::route::{Access, Route, Service};

pub fn routes() -> Vec<Route> {
    use Access::Public;
    use Service::Global;
    vec![
        Route::get("/healthz", Global, Public, handler!(healthz), "Liveness: the process answers"),
        Route::get("/readyz", Global, Public, handler!(readyz), "Readiness: the process takes traffic"),
        Route::get("/metrics", Global, Public, handler!(metrics), "Prometheus metrics"),
        Route::get("/openapi.json", Global, Public, handler!(openapi), "This API, machine-readable"),
        Route::get("/.well-known/jwks.json", Service::Account, Public, handler!(jwks), "Public keys of the token issuer"),
    ]
}

/// `GET /healthz`.
#[derive(Serialize, JsonSchema)]
pub struct Health {
    /// Always `ok`.
    pub status: &'static str,
}

/// `GET /readyz`. Fields in key order, as the answer has always listed them.
#[derive(Serialize, JsonSchema)]
pub struct Readiness {
    /// How this process runs: `serve`, `account`, `cell` or `router`.
    pub mode: String,
    /// Always `ready`; a process shutting down answers 503.
    pub status: &'static str,
}

async fn healthz(_: Ctx) -> ApiResult<Json<Health>> {
    Ok(Json(Health { status: "ok" }))
}

async fn readyz(cx: Ctx) -> ApiResult<Json<Readiness>> {
    if cx.node.shutting_down.load(Ordering::Relaxed) {
        return Err(ApiError::msg(Code::UNAVAILABLE, "shutting down").retry_after(1));
    }
    Ok(Json(Readiness { mode: format!("{:?}", cx.node.mode).to_lowercase(), status: "ready" }))
}

async fn metrics(cx: Ctx) -> ApiResult<Raw<PrometheusText>> {
    let mut out = String::from(
        "# HELP shopcell_requests_total Requests answered, by status class.\n# TYPE shopcell_requests_total counter\n",
    );
    for (i, c) in cx.node.metrics.requests.iter().enumerate() {
        out.push_str(&format!("shopcell_requests_total{{class=\"{}xx\"}} {}\n", i + 1, c.load(Ordering::Relaxed)));
    }
    out.push_str("# HELP shopcell_cell_stores Stores served by each cell of this process.\n# TYPE shopcell_cell_stores gauge\n");
    for (name, cell) in &cx.node.cells {
        out.push_str(&format!("shopcell_cell_stores{{cell=\"{name}\"}} {}\n", cell.store_count()));
    }
    Ok(Raw::new(out))
}

async fn openapi(cx: Ctx) -> ApiResult<Json<OpenApi>> {
    Ok(Json(OpenApi(crate::http::openapi::document(cx.node.routes.routes()))))
}

async fn jwks(cx: Ctx) -> ApiResult<Json<Jwks>> {
    let account = cx.node.account.as_ref().ok_or_else(ApiError::not_found)?;
    Ok(Json(account.key.jwks()))
}
