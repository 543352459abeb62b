//! Liveness, readiness, metrics, the OpenAPI document and the JWKS.

use std::sync::atomic::Ordering;

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{CONTENT_TYPE, HeaderValue};

use crate::error::{ApiError, ApiResult, Code};
use crate::handler;
use crate::http::context::Ctx;
use crate::http::route::{Access, Route, Service};
use crate::http::{Resp, ok};

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

async fn healthz(_: Ctx) -> ApiResult<Resp> {
    Ok(ok(&serde_json::json!({"status": "ok"})))
}

async fn readyz(cx: Ctx) -> ApiResult<Resp> {
    if cx.node.shutting_down.load(Ordering::Relaxed) {
        return Err(ApiError::msg(Code::UNAVAILABLE, "shutting down").retry_after(1));
    }
    Ok(ok(&serde_json::json!({"status": "ready", "mode": format!("{:?}", cx.node.mode).to_lowercase()})))
}

async fn metrics(cx: Ctx) -> ApiResult<Resp> {
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
    let mut r = hyper::Response::new(Full::new(Bytes::from(out)));
    r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/plain; version=0.0.4"));
    Ok(r)
}

async fn openapi(cx: Ctx) -> ApiResult<Resp> {
    Ok(ok(&crate::http::openapi::document(cx.node.routes.routes())))
}

async fn jwks(cx: Ctx) -> ApiResult<Resp> {
    let account = cx.node.account.as_ref().ok_or_else(ApiError::not_found)?;
    Ok(ok(&account.key.jwks()))
}
