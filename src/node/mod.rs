//! A running shopcell process: whichever of the account service, cells and router it hosts, and
//! the dispatcher every request goes through.

pub mod closing;
pub mod context;
pub mod idempotency;
pub mod moves;
pub mod owners;
pub mod readiness;

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, RwLock};
use std::time::Instant;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{CONTENT_TYPE, HeaderValue};
use hyper::{Method, Request};
use uuid::Uuid;

use crate::account::AccountService;
use crate::account::directory::DirectoryLink;
use crate::account::publishable::{KEY_HEADER, KeyGrant, Shopper};
use crate::cells::Cell;
use crate::cells::link::CellLink;
use crate::clock::Clock;
use crate::domain::role::Role;
use crate::error::{ApiError, ApiResult, Code};
use crate::http::auth::{Principal, TokenVerifier, bearer};
use crate::http::connections::{ConnectionLimits, OpenConnections};
use crate::http::cors::Cors;
use crate::http::forwarded::TrustedProxies;
use crate::http::parse::parse_path_id;
use crate::http::query::Query;
use crate::http::ratelimit::RateLimits;
use crate::http::route::{Access, Matched, RouteTable, Service};
use crate::http::upstream::{SERVICE_HEADER, Upstream};
use crate::http::{self, Resp};
use crate::node::context::{Ctx, Route, StoreScope};
use crate::node::idempotency::Idempotency;

/// What this process hosts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Account service, router and cells in one process (the embedded default).
    Serve,
    Account,
    Cell,
    Router,
}

/// A cell answers misrouted requests from a router with this header, so the router re-reads the
/// placement (a store moved) instead of answering 404. Clients never see it.
const MISROUTED: &str = "x-shopcell-misrouted";

pub struct Node {
    pub mode: Mode,
    pub routes: RouteTable<Ctx>,
    pub verifier: TokenVerifier,
    /// The account service this process hosts, for its own routes (sign-in, the internal
    /// directory routes, moves); everything else asks [`Node::directory`].
    pub account: Option<Arc<AccountService>>,
    /// The store directory: sessions, roles, publishable keys and placement, wherever it runs.
    pub directory: DirectoryLink,
    pub cells: BTreeMap<String, Arc<Cell>>,
    pub remote_cells: BTreeMap<String, Upstream>,
    pub service_key: String,
    /// Every figure `/metrics` shows: its sources are registered when the process starts
    /// serving (`metrics::sources::register`).
    pub metrics: crate::metrics::Registry,
    /// Each request's duration by route row and status class, and the requests under way.
    pub requests: Arc<crate::metrics::requests::RequestMetrics>,
    /// Where `/metrics` is also served without a key (`--metrics-listen`).
    pub metrics_listen: Option<std::net::SocketAddr>,
    pub shutting_down: AtomicBool,
    /// The global category taxonomy (`GET /categories…`): the starter until `run` loads the
    /// data directory's `taxonomy.json`; replaced whole, never edited in place.
    pub taxonomy: RwLock<Arc<crate::domain::taxonomy::Taxonomy>>,
    /// Browser origins allowed to call with credentials (set after construction from flags).
    pub cors: Cors,
    /// Sign-in rate limits (set after construction from flags).
    pub limits: RateLimits,
    /// Whose `X-Forwarded-For` is believed (set after construction from flags).
    pub proxies: TrustedProxies,
    /// `Idempotency-Key` requests under way in this process, and the sweeps of their records.
    pub idempotency: Idempotency,
    /// The process's one clock, shared with its account service and cells.
    pub clock: Clock,
    /// The memory budget the process's caches were given (`None` for a router, which keeps none).
    pub memory: Option<crate::memory::Budget>,
    /// How long a closed store's rows are kept (set after construction from flags).
    pub closed_store_grace: std::time::Duration,
    /// What one connection may hold (set after construction from flags).
    pub connections: ConnectionLimits,
    /// The connections open now, in all and per address.
    pub open_connections: Arc<OpenConnections>,
    /// The online backup under way, run by the account service.
    pub backups: crate::backup::state::Backups,
    /// The portable store imports under way (`portable::serve`).
    pub imports: crate::portable::state::Imports,
}

impl Node {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        mode: Mode,
        routes: Vec<Route>,
        verifier: TokenVerifier,
        directory: DirectoryLink,
        cells: BTreeMap<String, Arc<Cell>>,
        remote_cells: BTreeMap<String, Upstream>,
        service_key: String,
        clock: Clock,
    ) -> Result<Node, String> {
        let routes = RouteTable::new(routes)?;
        Ok(Node {
            mode,
            requests: Arc::new(crate::metrics::requests::RequestMetrics::new(routes.routes())),
            metrics: crate::metrics::Registry::default(),
            metrics_listen: None,
            routes,
            verifier,
            account: directory.hosted().cloned(),
            directory,
            cells,
            remote_cells,
            service_key,
            shutting_down: AtomicBool::new(false),
            taxonomy: RwLock::new(crate::domain::taxonomy::files::starter()),
            cors: Cors::default(),
            limits: RateLimits::default(),
            proxies: TrustedProxies::default(),
            idempotency: Idempotency::default(),
            clock,
            memory: None,
            closed_store_grace: crate::cli::RetentionArgs::default().closed_store_grace,
            connections: ConnectionLimits::default(),
            open_connections: Arc::default(),
            backups: Default::default(),
            imports: Default::default(),
        })
    }

    /// Every cell this process can place stores in.
    pub fn cell_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.cells.keys().chain(self.remote_cells.keys()).cloned().collect();
        names.sort();
        names.dedup();
        names
    }

    pub fn cell_link(&self, name: &str) -> ApiResult<CellLink> {
        if let Some(c) = self.cells.get(name) {
            return Ok(CellLink::Local(c.clone()));
        }
        self.remote_cells.get(name).cloned().map(|u| CellLink::Remote(Box::new(u))).ok_or_else(ApiError::not_found)
    }

    /// Answers one request and writes its access line. Never panics and never answers anything
    /// but the JSON of `API.md`.
    pub async fn handle(self: Arc<Self>, req: Request<Incoming>, peer: Option<IpAddr>) -> Resp {
        let started = Instant::now();
        let _in_flight = self.requests.start();
        let method = req.method().clone();
        let request_id = match req.headers().get("x-request-id").filter(|v| v.len() <= 128 && v.to_str().is_ok()) {
            Some(given) => given.clone(),
            None => {
                let mut id = Uuid::encode_buffer();
                let id = self.clock.new_id().simple().encode_lower(&mut id);
                HeaderValue::from_str(id).unwrap_or_else(|_| HeaderValue::from_static("-"))
            }
        };
        let service_call = req
            .headers()
            .get(SERVICE_HEADER)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|k| crate::util::secret_eq(k, &self.service_key));
        let client = self.proxies.client(req.headers(), peer, service_call);
        let matched = self.routes.find(&method, req.uri().path());
        let route = match &matched {
            Matched::Found(r, _) => Some(*r),
            _ => None,
        };
        let resp = match self.cors.preflight(req.method(), req.headers()) {
            Some(preflight) => preflight,
            None => {
                let origin = req.headers().get(hyper::header::ORIGIN).cloned();
                let mut resp = match self.dispatch(req, matched, peer, client, service_call).await {
                    Ok(r) => r,
                    Err(e) => http::error(&e),
                };
                resp.headers_mut().insert("x-request-id", request_id.clone());
                let mut origin_only = hyper::HeaderMap::new();
                if let Some(o) = origin {
                    origin_only.insert(hyper::header::ORIGIN, o);
                }
                self.cors.decorate(&origin_only, &mut resp);
                resp
            }
        };
        let status = resp.status().as_u16();
        let elapsed = started.elapsed();
        self.requests.record(route.map(|r| r.index), status, elapsed.as_micros() as u64);
        // The route's pattern, never the raw path (ids, and whatever a client put in it); no
        // query string, header or body: tokens, passwords and codes stay out of the log.
        crate::logs::access::write(&crate::logs::access::Access {
            method: method.as_str(),
            route: route.map_or(crate::metrics::requests::UNMATCHED, |r| r.path.as_str()),
            status,
            duration_us: elapsed.as_micros() as u64,
            bytes: hyper::body::Body::size_hint(resp.body()).exact().unwrap_or(0),
            request_id: request_id.to_str().unwrap_or("-"),
            client,
        });
        resp
    }

    async fn dispatch(
        self: &Arc<Self>,
        req: Request<Incoming>,
        matched: Matched<'_, Ctx>,
        peer: Option<IpAddr>,
        client: Option<IpAddr>,
        service_call: bool,
    ) -> ApiResult<Resp> {
        let (parts, body) = req.into_parts();
        let (route, params) = match matched {
            Matched::Found(r, p) => (r, p),
            Matched::MethodNotAllowed(allow) => {
                let mut r = http::error(&ApiError::new(Code::METHOD_NOT_ALLOWED));
                if let Ok(v) = HeaderValue::from_str(&allow) {
                    r.headers_mut().insert(hyper::header::ALLOW, v);
                }
                return Ok(r);
            }
            Matched::NotFound => return Err(ApiError::not_found()),
        };
        route.check_query(parts.uri.query())?;

        // Who may call is settled before the body is read: an anonymous caller cannot hold a
        // connection open by trickling a body to a route that would refuse it.
        if self.mode == Mode::Router && route.service != Service::Global {
            if route.access == Access::Internal {
                return Err(ApiError::not_found());
            }
            // The router holds no signing keys: it refuses only a missing credential, and the
            // service behind it checks the one given.
            let has_token = bearer(&parts.headers).is_some();
            let missing = match route.access {
                Access::Member | Access::Admin => !has_token,
                Access::Storefront => !has_token && !parts.headers.contains_key(KEY_HEADER),
                Access::Public | Access::Internal | Access::Operator => false,
            };
            if missing {
                return Err(ApiError::new(Code::UNAUTHORIZED));
            }
            let body = self.read_body(body, route.body_limit).await?;
            let req = Request::from_parts(parts, Full::new(body));
            return self.forward(route, &params, req, peer).await;
        }

        let mut principal = match (route.access, bearer(&parts.headers)) {
            (Access::Public | Access::Internal | Access::Operator, _) | (_, None) => None,
            (_, Some(token)) => Some(self.verifier.verify_access(token)?),
        };
        let store_id = match params.iter().find(|(k, _)| k == "storeId") {
            Some((_, v)) => Some(parse_path_id("storeId", v)?),
            None => None,
        };
        let mut store = None;
        let mut shopper = None;
        match route.access {
            Access::Public => {}
            Access::Internal => {
                if !service_call {
                    return Err(ApiError::not_found());
                }
            }
            // A wrong key is told apart from none: the caller is an operator's tool, not a
            // client probing for hidden routes.
            Access::Operator => {
                if !parts.headers.contains_key(SERVICE_HEADER) {
                    return Err(ApiError::msg(Code::UNAUTHORIZED, "the service key is required"));
                }
                if !service_call {
                    return Err(ApiError::msg(Code::FORBIDDEN, "that is not this service's key"));
                }
            }
            Access::Storefront => {
                let s = store_id.ok_or_else(|| ApiError::internal("a storefront route without {storeId}"))?;
                let (role, grant, located) = self.storefront_access(principal.as_ref(), s, &parts.headers).await?;
                let Some(cell) = self.local_cell_for(s, located).await? else { return Ok(not_here(service_call)) };
                if let Some(g) = grant {
                    // A shopper is anonymous, whatever token came along with the key.
                    principal = None;
                    shopper = Some(Shopper { key_id: g.id, environment: g.environment });
                }
                store = Some(StoreScope { id: s, cell, role });
            }
            Access::Member | Access::Admin => {
                let p = principal.as_ref().ok_or_else(|| ApiError::new(Code::UNAUTHORIZED))?;
                let scoped = if route.service == Service::Cell { store_id } else { None };
                let (active, role, located) = self.directory.admission(p.session_id, p.user_id, scoped).await?;
                if !active {
                    return Err(ApiError::msg(Code::INVALID_TOKEN, "the session has ended"));
                }
                if let Some(s) = scoped {
                    let role = role.ok_or_else(ApiError::not_found)?;
                    let Some(cell) = self.local_cell_for(s, located).await? else { return Ok(not_here(service_call)) };
                    if route.access == Access::Admin && !role.is_admin() {
                        return Err(ApiError::new(Code::FORBIDDEN));
                    }
                    store = Some(StoreScope { id: s, cell, role: Some(role) });
                }
            }
        }
        let body = self.read_body(body, route.body_limit).await?;
        if !route.raw_body && !body.is_empty() && !is_json(&parts.headers) {
            return Err(ApiError::new(Code::UNSUPPORTED_MEDIA_TYPE));
        }
        let cx = Ctx {
            client,
            node: self.clone(),
            query: Query::parse(parts.uri.query()),
            method: parts.method,
            uri: parts.uri,
            headers: parts.headers,
            params,
            body,
            principal,
            store,
            shopper,
        };
        let accept_encoding = cx.headers.get(hyper::header::ACCEPT_ENCODING).cloned();
        // Here, where the handler runs (a router forwarded above), so a keyed POST runs once.
        let mut resp =
            if cx.method == Method::POST && route.access != Access::Internal && cx.headers.contains_key(idempotency::HEADER) {
                idempotency::run(cx, route.handler).await?
            } else {
                (route.handler)(cx).await?
            };
        if route.secret {
            resp.headers_mut().insert(hyper::header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            // Never compressed: a secret beside injectable text leaks through sizes (BREACH).
            return Ok(resp);
        }
        Ok(http::compress::apply(accept_encoding.as_ref(), resp).await)
    }

    /// The request body, up to `limit` bytes, within the body timeout.
    async fn read_body(&self, body: Incoming, limit: usize) -> ApiResult<Bytes> {
        // Most requests (every GET) declare no body: nothing to wait for, so no timer is armed.
        if hyper::body::Body::is_end_stream(&body) {
            return Ok(Bytes::new());
        }
        match tokio::time::timeout(self.connections.body_timeout, collect(body, limit)).await {
            Ok(read) => read,
            Err(_) => Err(ApiError::new(Code::REQUEST_TIMEOUT)),
        }
    }

    /// Who may use a storefront route of `store`: a member by their token (with their role), or
    /// else an anonymous shopper by the store's publishable key. Another store's key is a 404,
    /// exactly like a store that does not exist; an unknown, revoked or malformed key is a 401.
    /// The third value is the store's cell when the member check read it (see
    /// [`DirectoryLink::admission`]).
    async fn storefront_access(
        &self,
        p: Option<&Principal>,
        store: Uuid,
        headers: &hyper::HeaderMap,
    ) -> ApiResult<(Option<Role>, Option<KeyGrant>, Option<String>)> {
        if let Some(p) = p {
            let (active, role, located) = self.directory.admission(p.session_id, p.user_id, Some(store)).await?;
            if !active {
                return Err(ApiError::msg(Code::INVALID_TOKEN, "the session has ended"));
            }
            if role.is_some() {
                return Ok((role, None, located));
            }
        }
        let Some(raw) = headers.get(KEY_HEADER) else {
            return Err(if p.is_some() { ApiError::not_found() } else { ApiError::new(Code::UNAUTHORIZED) });
        };
        let grant = self.directory.publishable_key(raw.to_str().unwrap_or("")).await?;
        let grant = grant.ok_or_else(|| ApiError::new(Code::INVALID_PUBLISHABLE_KEY))?;
        if grant.store_id != store {
            return Err(ApiError::not_found());
        }
        Ok((None, Some(grant), None))
    }

    /// The cell of this process that serves `store`, if any; `located` is the directory's
    /// answer when the caller already has it.
    async fn local_cell_for(&self, store: Uuid, located: Option<String>) -> ApiResult<Option<Arc<Cell>>> {
        let cell = match self.mode {
            Mode::Serve => {
                let name = match located {
                    Some(name) => Some(name),
                    None => self.directory.locate(store).await?,
                };
                name.and_then(|name| self.cells.get(&name).cloned())
            }
            _ => self.cells.values().find(|c| c.holds(store)).cloned(),
        };
        Ok(cell.filter(|c| c.holds(store)))
    }

    async fn forward(
        &self,
        route: &Route,
        params: &[(String, String)],
        req: Request<Full<Bytes>>,
        client: Option<IpAddr>,
    ) -> ApiResult<Resp> {
        match route.service {
            Service::Account => self.directory.forward(req, client).await,
            _ => {
                let raw = params.iter().find(|(k, _)| k == "storeId").map(|(_, v)| v.as_str()).unwrap_or("");
                let store = parse_path_id("storeId", raw)?;
                for attempt in 0..2 {
                    let Some(cell) = self.directory.locate(store).await? else { return Err(ApiError::not_found()) };
                    let up = self.remote_cells.get(&cell).ok_or_else(|| ApiError::internal(format!("unknown cell {cell}")))?;
                    // A cell down leaves the others serving: its stores are unavailable for now,
                    // not broken (`/readyz` lists it unreachable).
                    let mut resp = up.forward(clone_request(&req), client).await.map_err(|e| match e.code {
                        Code::BAD_GATEWAY => {
                            ApiError::msg(Code::UNAVAILABLE, "the store is unavailable for now; retry later").retry_after(5)
                        }
                        _ => e,
                    })?;
                    if resp.headers_mut().remove(MISROUTED).is_some() && attempt == 0 {
                        self.directory.forget_placement(store);
                        continue;
                    }
                    return Ok(resp);
                }
                Err(ApiError::not_found())
            }
        }
    }
}

/// The 404 of a store this cell does not hold. Only routers (which carry the service key) are
/// told, by a header, that the store is elsewhere; anyone else sees a plain missing record.
fn not_here(service_call: bool) -> Resp {
    let mut resp = http::error(&ApiError::not_found());
    if service_call {
        resp.headers_mut().insert(MISROUTED, HeaderValue::from_static("1"));
    }
    resp
}

fn clone_request(req: &Request<Full<Bytes>>) -> Request<Full<Bytes>> {
    let mut b = Request::builder().method(req.method().clone()).uri(req.uri().clone()).version(req.version());
    if let Some(h) = b.headers_mut() {
        *h = req.headers().clone();
    }
    b.body(req.body().clone()).unwrap_or_default()
}

fn is_json(headers: &hyper::HeaderMap) -> bool {
    headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("application/json"))
}

async fn collect(body: Incoming, limit: usize) -> ApiResult<Bytes> {
    match Limited::new(body, limit).collect().await {
        Ok(c) => Ok(c.to_bytes()),
        Err(e) if e.downcast_ref::<http_body_util::LengthLimitError>().is_some() => Err(ApiError::new(Code::PAYLOAD_TOO_LARGE)),
        Err(_) => Err(ApiError::msg(Code::VALIDATION_FAILED, "the request body could not be read")),
    }
}
