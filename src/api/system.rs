//! Liveness, readiness, metrics, the OpenAPI document and the JWKS.

use std::sync::OnceLock;

use bytes::Bytes;

use schemars::JsonSchema;
use serde::Serialize;

use crate::account::keys::Jwks;
use crate::error::{ApiError, ApiResult};
use crate::handler;
use crate::http::openapi::OpenApi;
use crate::http::reply::{Css, HtmlPage, Json, PrometheusText, Raw};
use crate::http::route::{Access, Service};
use crate::node::context::{Ctx, Route};
use crate::node::readiness::{self, Dependency};

pub fn routes() -> Vec<Route> {
    use Access::{Operator, Public};
    use Service::Global;
    vec![
        Route::get("/healthz", Global, Public, handler!(healthz), "Liveness: the process answers").id("getHealth"),
        Route::get("/readyz", Global, Public, handler!(readyz), "Readiness: the process takes traffic")
            .errors(&[503])
            .id("getReadiness"),
        Route::get("/metrics", Global, Operator, handler!(metrics), "Prometheus metrics (with the service key)").id("getMetrics"),
        Route::get("/openapi.json", Global, Public, handler!(openapi), "This API, machine-readable").id("getOpenApi"),
        Route::get("/docs", Global, Public, handler!(docs), "This API's reference, as a page").id("getDocs"),
        Route::get("/docs/style.css", Global, Public, handler!(docs_style), "The reference page's stylesheet")
            .id("getDocsStylesheet"),
        Route::get("/.well-known/jwks.json", Service::Account, Public, handler!(jwks), "Public keys of the token issuer")
            .id("getJwks"),
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
    /// What the process serves through, each with its state (a router's other processes too).
    pub dependencies: Vec<Dependency>,
    /// How this process runs: `serve`, `account`, `cell` or `router`.
    pub mode: String,
    /// Always `ready`: a process shutting down, or a router whose account service or every cell
    /// is unreachable, answers 503 naming each dependency not ready in `error.fields`.
    pub status: &'static str,
}

async fn healthz(_: Ctx) -> ApiResult<Json<Health>> {
    Ok(Json(Health { status: "ok" }))
}

async fn readyz(cx: Ctx) -> ApiResult<Json<Readiness>> {
    let dependencies = readiness::dependencies(&cx.node).await;
    readiness::verdict(&cx.node, &dependencies)?;
    Ok(Json(Readiness { dependencies, mode: format!("{:?}", cx.node.mode).to_lowercase(), status: "ready" }))
}

/// Every family of the process's registry (`crate::metrics`). Also served without a key on
/// `--metrics-listen` (`metrics::listener`).
async fn metrics(cx: Ctx) -> ApiResult<Raw<PrometheusText>> {
    Ok(Raw::new(cx.node.metrics.render()))
}

async fn openapi(cx: Ctx) -> ApiResult<Json<OpenApi>> {
    Ok(Json(OpenApi(crate::http::openapi::document(cx.node.routes.routes()))))
}

/// The page is the same for the life of the process (the route table is fixed at start).
async fn docs(cx: Ctx) -> ApiResult<HtmlPage> {
    static PAGE: OnceLock<Bytes> = OnceLock::new();
    let page = PAGE
        .get_or_init(|| Bytes::from(crate::http::docs_page::render(&crate::http::openapi::document(cx.node.routes.routes()))));
    Ok(HtmlPage(page.clone()))
}

async fn docs_style(_: Ctx) -> ApiResult<Raw<Css>> {
    Ok(Raw::new(crate::http::docs_page::CSS))
}

async fn jwks(cx: Ctx) -> ApiResult<Json<Jwks>> {
    let account = cx.node.account.as_ref().ok_or_else(ApiError::not_found)?;
    Ok(Json(account.key.jwks()))
}
