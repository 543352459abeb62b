//! Liveness, readiness, metrics, the OpenAPI document and the JWKS.

use std::sync::OnceLock;
use std::sync::atomic::Ordering;

use bytes::Bytes;

use schemars::JsonSchema;
use serde::Serialize;

use crate::account::keys::Jwks;
use crate::error::{ApiError, ApiResult};
use crate::handler;
use crate::http::openapi::OpenApi;
use crate::http::reply::{Css, HtmlPage, Json, PrometheusText, Raw};
use crate::http::route::{Access, Service};
use crate::memory::CacheStats;
use crate::node::context::{Ctx, Route};
use crate::node::readiness::{self, Dependency};

pub fn routes() -> Vec<Route> {
    use Access::Public;
    use Service::Global;
    vec![
        Route::get("/healthz", Global, Public, handler!(healthz), "Liveness: the process answers").id("getHealth"),
        Route::get("/readyz", Global, Public, handler!(readyz), "Readiness: the process takes traffic")
            .errors(&[503])
            .id("getReadiness"),
        Route::get("/metrics", Global, Public, handler!(metrics), "Prometheus metrics").id("getMetrics"),
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
    memory(&cx, &mut out);
    jobs(&cx, &mut out);
    Ok(Raw::new(out))
}

/// How background jobs ended (deliveries, mail, scheduled checks), per runner and outcome; a
/// dead job is also logged with its last error.
fn jobs(cx: &Ctx, out: &mut String) {
    use std::fmt::Write;
    let mut runners: Vec<(String, [(&'static str, u64); 3])> = Vec::new();
    if let Some(counts) = cx.node.account.as_ref().and_then(|a| a.jobs.counts()) {
        runners.push(("account".to_string(), counts));
    }
    for (name, cell) in &cx.node.cells {
        runners.extend(cell.jobs.counts().map(|c| (name.clone(), c)));
    }
    let _ = write!(
        out,
        "# HELP shopcell_jobs_total Background job runs, by runner and outcome.\n# TYPE shopcell_jobs_total counter\n"
    );
    for (owner, counts) in runners {
        for (outcome, n) in counts {
            let _ = writeln!(out, "shopcell_jobs_total{{owner=\"{owner}\",outcome=\"{outcome}\"}} {n}");
        }
    }
}

/// The memory budget, each cache's share and what it holds, and the process's anonymous memory.
fn memory(cx: &Ctx, out: &mut String) {
    use std::fmt::Write;
    let mut caches: Vec<(String, &'static str, CacheStats)> = Vec::new();
    if let Some(account) = &cx.node.account {
        caches.extend(account.caches().into_iter().map(|(cache, s)| ("account".to_string(), cache, s)));
    }
    for (name, cell) in &cx.node.cells {
        caches.extend(cell.caches().into_iter().map(|(cache, s)| (name.clone(), cache, s)));
    }
    if let Some(budget) = &cx.node.memory {
        let _ = write!(
            out,
            "# HELP shopcell_memory_budget_bytes The memory budget the caches share (--memory).\n\
             # TYPE shopcell_memory_budget_bytes gauge\nshopcell_memory_budget_bytes {}\n",
            budget.bytes
        );
    }
    /// A metric family: name, type, help, and the figure it reads.
    type Family = (&'static str, &'static str, &'static str, fn(&CacheStats) -> u64);
    let families: [Family; 5] = [
        ("shopcell_cache_budget_bytes", "gauge", "The cache's share of the memory budget.", |s| s.budget),
        ("shopcell_cache_bytes", "gauge", "Bytes the cache holds.", |s| s.bytes),
        ("shopcell_cache_entries", "gauge", "Entries the cache holds.", |s| s.entries),
        ("shopcell_cache_hits_total", "counter", "Lookups the cache answered.", |s| s.hits),
        ("shopcell_cache_misses_total", "counter", "Lookups the cache could not answer.", |s| s.misses),
    ];
    for (family, kind, help, value) in families {
        let _ = write!(out, "# HELP {family} {help}\n# TYPE {family} {kind}\n");
        for (owner, cache, stats) in &caches {
            let _ = writeln!(out, "{family}{{owner=\"{owner}\",cache=\"{cache}\"}} {}", value(stats));
        }
    }
    if let Some((now, peak)) = crate::memory::anonymous() {
        let _ = write!(
            out,
            "# HELP shopcell_process_anonymous_bytes Anonymous resident memory of the process (RssAnon); \
             mapped files are the page cache's.\n# TYPE shopcell_process_anonymous_bytes gauge\n\
             shopcell_process_anonymous_bytes {now}\n\
             # HELP shopcell_process_anonymous_peak_bytes The highest anonymous memory seen.\n\
             # TYPE shopcell_process_anonymous_peak_bytes gauge\nshopcell_process_anonymous_peak_bytes {peak}\n"
        );
    }
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
