//! What `/readyz` reports. A process is ready once what it hosts is open and migrated (it was
//! built only then), until shutdown. A router also depends on other processes: it is unready
//! only when it can serve nobody, with the account service or every cell unreachable; one cell
//! down of several leaves it ready, that cell's stores answering 503 with `Retry-After`.

use std::sync::atomic::Ordering;
use std::time::Duration;

use hyper::Method;
use schemars::JsonSchema;
use serde::Serialize;

use crate::error::{ApiError, ApiResult, Code, FieldError};
use crate::http::upstream::{Body, Upstream};
use crate::node::Node;

/// How long a probe of another process may take: a readiness answer must come quickly.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// One thing the process serves through: its own databases, or another process.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Dependency {
    /// `account` or `cell`.
    pub kind: &'static str,
    /// The cell's name; `account` for the account service.
    pub name: String,
    /// `ready`; `unreachable` when another process did not answer ready.
    pub state: &'static str,
    /// Where another process is reached; absent for what this process hosts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

impl Dependency {
    fn local(kind: &'static str, name: &str) -> Dependency {
        Dependency { kind, name: name.to_string(), state: "ready", url: None }
    }

    fn ready(&self) -> bool {
        self.state == "ready"
    }
}

/// Every dependency of `node` and its state now, remote ones probed concurrently. A router's
/// dependencies are the processes it forwards to; an account service's cells are not its
/// dependencies (it serves sign-in and the directory without them).
pub async fn dependencies(node: &Node) -> Vec<Dependency> {
    let mut deps = Vec::new();
    if node.account.is_some() {
        deps.push(Dependency::local("account", "account"));
    }
    deps.extend(node.cells.keys().map(|name| Dependency::local("cell", name)));
    if node.mode != super::Mode::Router {
        return deps;
    }
    let mut probes = Vec::new();
    if let Some(up) = node.directory.upstream() {
        probes.push(("account", "account".to_string(), up.clone()));
    }
    probes.extend(node.remote_cells.iter().map(|(name, up)| ("cell", name.clone(), up.clone())));
    let tasks: Vec<_> = probes.into_iter().map(|(kind, name, up)| tokio::spawn(probe(kind, name, up))).collect();
    for t in tasks {
        if let Ok(d) = t.await {
            deps.push(d);
        }
    }
    deps
}

async fn probe(kind: &'static str, name: String, up: Upstream) -> Dependency {
    let answered = tokio::time::timeout(PROBE_TIMEOUT, up.call_raw(Method::GET, "/readyz", Body::Empty)).await;
    let state = if matches!(answered, Ok(Ok(_))) { "ready" } else { "unreachable" };
    Dependency { kind, name, state, url: Some(up.base.clone()) }
}

/// Ready unless shutting down, the account service is unreachable, or every cell is (when
/// there are cells); else a 503 whose `fields` name each dependency not ready.
pub fn verdict(node: &Node, deps: &[Dependency]) -> ApiResult<()> {
    if node.shutting_down.load(Ordering::Relaxed) {
        return Err(ApiError::msg(Code::UNAVAILABLE, "shutting down").retry_after(1));
    }
    let account_down = deps.iter().any(|d| d.kind == "account" && !d.ready());
    let cells: Vec<&Dependency> = deps.iter().filter(|d| d.kind == "cell").collect();
    let cells_down = !cells.is_empty() && cells.iter().all(|d| !d.ready());
    if !account_down && !cells_down {
        return Ok(());
    }
    let what = if account_down { "the account service is unreachable" } else { "every cell is unreachable" };
    let mut e = ApiError::msg(Code::UNAVAILABLE, format!("not ready: {what}")).retry_after(5);
    e.fields = deps
        .iter()
        .filter(|d| !d.ready())
        .map(|d| FieldError { field: format!("{}:{}", d.kind, d.name), message: d.state.to_string() })
        .collect();
    Err(e)
}
