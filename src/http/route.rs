//! Route rows and the matcher. Each row carries its permission, so who may call what is one
//! line per route and testable as data; the OpenAPI document is produced from the same rows.

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;

use hyper::Method;
use schemars::{JsonSchema, Schema, SchemaGenerator};

use crate::error::{ApiError, ApiResult};
use crate::http::Resp;
use crate::http::query::Query;
use crate::http::reply::{Reply, ReplyDoc};

pub type BoxFuture = Pin<Box<dyn Future<Output = ApiResult<Resp>> + Send>>;
/// A handler: takes the request context `C`, answers a response or an error.
pub type Handler<C> = fn(C) -> BoxFuture;

/// The request context handlers take. The table is generic over it so this layer knows nothing
/// of what a handler reaches (the process, its cells, the directory): it only reads the query.
pub trait Context: Send + 'static {
    fn query(&self) -> &Query;
}
type SchemaFn = fn(&mut SchemaGenerator) -> Schema;
type ReplyFn = fn(&mut SchemaGenerator) -> Option<ReplyDoc>;

/// Turns a handler, `async fn(C) -> ApiResult<R>` or `async fn(C, Q) -> ApiResult<R>` with
/// `R: Reply` and `Q: QueryParams`, into an [`Endpoint`]: the row's success status, response type
/// and query parameters come from the handler's signature.
#[macro_export]
macro_rules! handler {
    ($f:path) => {
        $crate::http::route::Endpoint::of($f, |cx| $crate::http::route::HandlerFn::call($f, cx))
    };
}

/// A query string read into a type: the parameters it documents are the ones it reads.
pub trait QueryParams: Sized + Send + 'static {
    fn params() -> Vec<Param>;
    fn parse(q: &Query) -> ApiResult<Self>;
}

/// An async handler function of one of the two shapes [`handler!`] takes.
pub trait HandlerFn<C, Args>: Copy + Send + Sync + 'static {
    type Reply: Reply;
    fn params() -> Vec<Param>;
    fn call(self, cx: C) -> BoxFuture;
}

impl<C, F, Fut, R> HandlerFn<C, ()> for F
where
    C: Context,
    F: Fn(C) -> Fut + Copy + Send + Sync + 'static,
    Fut: Future<Output = ApiResult<R>> + Send + 'static,
    R: Reply,
{
    type Reply = R;
    fn params() -> Vec<Param> {
        Vec::new()
    }
    fn call(self, cx: C) -> BoxFuture {
        Box::pin(async move { self(cx).await.map(Reply::into_resp) })
    }
}

impl<C, F, Fut, Q, R> HandlerFn<C, (Q,)> for F
where
    C: Context,
    F: Fn(C, Q) -> Fut + Copy + Send + Sync + 'static,
    Fut: Future<Output = ApiResult<R>> + Send + 'static,
    Q: QueryParams,
    R: Reply,
{
    type Reply = R;
    fn params() -> Vec<Param> {
        Q::params()
    }
    fn call(self, cx: C) -> BoxFuture {
        Box::pin(async move {
            let q = Q::parse(cx.query())?;
            self(cx, q).await.map(Reply::into_resp)
        })
    }
}

/// A handler with what its signature documents.
pub struct Endpoint<C> {
    pub handler: Handler<C>,
    pub reply: ReplyFn,
    pub params: fn() -> Vec<Param>,
}

impl<C> Endpoint<C> {
    /// `f` is the handler function itself (only its type is read), `handler` its boxed call.
    pub fn of<A, F: HandlerFn<C, A>>(_f: F, handler: Handler<C>) -> Endpoint<C> {
        Endpoint { handler, reply: <F::Reply as Reply>::doc, params: F::params }
    }
}

/// Which service answers a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    /// The account service (directory, identity).
    Account,
    /// The cell holding the store named by `{storeId}`.
    Cell,
    /// Any host answers by itself.
    Global,
}

/// Who may call a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Anyone.
    Public,
    /// A signed-in user (Bearer token); for store routes, a member of the store.
    Member,
    /// A store owner or admin.
    Admin,
    /// A member (Bearer token), or an anonymous shopper presenting the store's publishable key
    /// in `X-Publishable-Key`.
    Storefront,
    /// Services of the platform and operators (the service key).
    Internal,
    /// Operators' tools (a metrics scraper) holding the service key: unlike an internal route,
    /// documented, and refused with 401 (no key) or 403 (a wrong one) rather than hidden.
    Operator,
}

/// A documented query parameter.
#[derive(Debug, Clone)]
pub struct Param {
    pub name: &'static str,
    /// Its JSON Schema type: `string`, `integer` or `boolean`.
    pub kind: &'static str,
    pub required: bool,
    pub doc: Cow<'static, str>,
    /// The values it takes, when they are a fixed set.
    pub values: Cow<'static, [&'static str]>,
    /// Inclusive bounds of an integer.
    pub range: Option<(i64, i64)>,
    /// A string's format (`uuid`, `date-time`).
    pub format: Option<&'static str>,
    /// A pattern a string (or each value of a list) matches: the rule its check holds it to.
    pub pattern: Option<&'static str>,
}

/// Shorthand for [`Param`] rows: `param("limit", "integer", "page size, 1..250")`.
pub const fn param(name: &'static str, kind: &'static str, doc: &'static str) -> Param {
    Param {
        name,
        kind,
        required: false,
        doc: Cow::Borrowed(doc),
        values: Cow::Borrowed(&[]),
        range: None,
        format: None,
        pattern: None,
    }
}

pub const fn required(name: &'static str, kind: &'static str, doc: &'static str) -> Param {
    let mut p = param(name, kind, doc);
    p.required = true;
    p
}

impl Param {
    /// An integer between `min` and `max`, both included.
    pub const fn range(mut self, min: i64, max: i64) -> Param {
        self.range = Some((min, max));
        self
    }

    /// One of `values`.
    pub fn one_of(mut self, values: &'static [&'static str]) -> Param {
        self.values = Cow::Borrowed(values);
        self
    }

    /// A string matching `pattern`.
    pub const fn pattern(mut self, pattern: &'static str) -> Param {
        self.pattern = Some(pattern);
        self
    }

    /// A string of `format`.
    pub const fn format(mut self, format: &'static str) -> Param {
        self.format = Some(format);
        self
    }
}

/// JSON request bodies are limited to 1 MiB unless a route says otherwise.
pub const JSON_BODY_LIMIT: usize = 1 << 20;

/// One served route, answered by a handler taking the context `C`.
pub struct Route<C> {
    pub method: Method,
    /// The full path template, e.g. `/api/v1/stores/{storeId}/products`.
    pub path: String,
    pub service: Service,
    pub access: Access,
    pub handler: Handler<C>,
    pub summary: &'static str,
    /// The query parameters its handler reads.
    pub query: Vec<Param>,
    /// The success answer its handler's type documents.
    pub reply: ReplyFn,
    /// What an untyped handler (answering a built [`Resp`]) answers, declared on the row: one
    /// success answer or several (a cart created or changed: 201 or 200).
    pub answers: Vec<ReplyFn>,
    pub body: Option<SchemaFn>,
    /// The body may be left out (the handler reads none as the type's default).
    pub body_optional: bool,
    pub body_limit: usize,
    /// The body is not JSON (uploads, internal transfers): no content-type check.
    pub raw_body: bool,
    /// The area it belongs to: its tag in the document.
    pub tag: &'static str,
    /// Its operation id when the one derived from method and path would not read well.
    pub operation_id: Option<&'static str>,
    /// Error statuses its rules give besides those its shape implies (see [`Route::errors`]).
    pub errors: &'static [u16],
    /// Kept for old clients; a successor exists.
    pub deprecated: bool,
    /// The same operation as another row, served at a second path (the spec's spelling).
    pub alias: bool,
    /// Its success answer carries a secret (tokens, a key, a code shown once): never stored by
    /// a cache on the way (`Cache-Control: no-store`).
    pub secret: bool,
    /// Its position in the route table (set by [`RouteTable::new`]): what per-route figures
    /// are kept by.
    pub index: usize,
}

fn schema_of<T: JsonSchema>(g: &mut SchemaGenerator) -> Schema {
    g.subschema_for::<T>()
}

impl<C> Route<C> {
    fn new(method: Method, path: &str, service: Service, access: Access, endpoint: Endpoint<C>, summary: &'static str) -> Self {
        // Paths outside the versioned API are written in full; the rest get the `/api/v1` prefix.
        let unversioned = ["/api/", "/.well-known", "/internal", "/healthz", "/readyz", "/metrics"];
        let path = if unversioned.iter().any(|p| path.starts_with(p)) { path.to_string() } else { format!("/api/v1{path}") };
        Route {
            method,
            path,
            service,
            access,
            handler: endpoint.handler,
            summary,
            query: (endpoint.params)(),
            reply: endpoint.reply,
            answers: Vec::new(),
            body: None,
            body_optional: false,
            body_limit: JSON_BODY_LIMIT,
            raw_body: false,
            tag: "",
            operation_id: None,
            errors: &[],
            deprecated: false,
            alias: false,
            secret: false,
            index: 0,
        }
    }

    pub fn get(path: &str, service: Service, access: Access, endpoint: Endpoint<C>, summary: &'static str) -> Self {
        Route::new(Method::GET, path, service, access, endpoint, summary)
    }
    pub fn post(path: &str, service: Service, access: Access, endpoint: Endpoint<C>, summary: &'static str) -> Self {
        Route::new(Method::POST, path, service, access, endpoint, summary)
    }
    pub fn put(path: &str, service: Service, access: Access, endpoint: Endpoint<C>, summary: &'static str) -> Self {
        Route::new(Method::PUT, path, service, access, endpoint, summary)
    }
    pub fn patch(path: &str, service: Service, access: Access, endpoint: Endpoint<C>, summary: &'static str) -> Self {
        Route::new(Method::PATCH, path, service, access, endpoint, summary)
    }
    pub fn delete(path: &str, service: Service, access: Access, endpoint: Endpoint<C>, summary: &'static str) -> Self {
        Route::new(Method::DELETE, path, service, access, endpoint, summary)
    }

    /// Declares a success answer of a handler that builds its [`Resp`] itself (headers of its
    /// own, bodies that are not JSON, one of several statuses): the reply type `R` documents it.
    pub fn answers<R: Reply>(mut self) -> Self {
        self.answers.push(R::doc);
        self
    }

    /// The first documented success answer: the handler's type, or what the row declares first.
    pub fn reply_doc(&self, g: &mut SchemaGenerator) -> Option<ReplyDoc> {
        self.reply_docs(g).into_iter().next()
    }

    /// Every documented success answer: the handler's type, then what the row declares.
    pub fn reply_docs(&self, g: &mut SchemaGenerator) -> Vec<ReplyDoc> {
        std::iter::once(self.reply).chain(self.answers.iter().copied()).filter_map(|f| f(g)).collect()
    }

    /// Declares the JSON body type (documented in OpenAPI from the same type serde reads).
    pub fn body<T: JsonSchema>(mut self) -> Self {
        self.body = Some(schema_of::<T>);
        self
    }

    /// Declares a JSON body that may be left out: its handler reads it with
    /// `json_or_default`, so a request without one means the type's default.
    pub fn optional_body<T: JsonSchema>(mut self) -> Self {
        self.body_optional = true;
        self.body::<T>()
    }

    /// Names the operation (`getJwks`) where the derived id would not read well.
    pub fn id(mut self, operation_id: &'static str) -> Self {
        self.operation_id = Some(operation_id);
        self
    }

    /// Declares the error statuses the route's rules give (409 on a taken code, 412 where it
    /// honours `If-Match`, 422 on a business rule, 429 where it is rate-limited). The statuses
    /// its shape implies are not repeated: 400 always (ids, query, body), 401 unless public,
    /// 403 on owner/admin and storefront rows, 404 on path ids, 408, 413 and 415 with a body, 422 on a
    /// POST (a reused idempotency key), 503 on store rows.
    pub fn errors(mut self, statuses: &'static [u16]) -> Self {
        assert!(self.errors.is_empty(), "{} {}: declare its errors once", self.method, self.path);
        self.errors = statuses;
        self
    }

    /// Marks the route deprecated: served for old clients, its successor documented.
    pub fn deprecated(mut self) -> Self {
        self.deprecated = true;
        self
    }

    /// Marks its answers as carrying a secret: sent with `Cache-Control: no-store`.
    pub fn secret(mut self) -> Self {
        self.secret = true;
        self
    }

    /// Marks the row as another path of an operation documented under its first path.
    pub fn alias(mut self) -> Self {
        self.alias = true;
        self
    }

    /// Refuses a query parameter the row does not read, naming it: a misspelt `sortby=price`
    /// must not quietly sort by the default.
    pub fn check_query(&self, raw: Option<&str>) -> ApiResult<()> {
        let Some(raw) = raw.filter(|q| !q.is_empty()) else { return Ok(()) };
        for (name, _) in form_urlencoded::parse(raw.as_bytes()) {
            if !self.query.iter().any(|p| p.name == name) {
                let known: Vec<&str> = self.query.iter().map(|p| p.name).collect();
                let message = if known.is_empty() {
                    "unknown parameter: this operation takes none".to_string()
                } else {
                    format!("unknown parameter; this operation takes: {}", known.join(", "))
                };
                return Err(ApiError::field(name.into_owned(), message));
            }
        }
        Ok(())
    }

    /// The statuses of its error answers, in order.
    pub fn error_statuses(&self) -> Vec<u16> {
        let has_ids = self.path.contains('{');
        let has_body = self.body.is_some() || self.raw_body;
        // Every operation refuses a query parameter it does not take.
        let mut out = vec![400];
        if self.access != Access::Public {
            out.push(401);
        }
        // Roles refuse on owner/admin rows; a shopper is refused a guest checkout without its
        // session token, and what only members may do.
        if matches!(self.access, Access::Admin | Access::Storefront | Access::Operator) {
            out.push(403);
        }
        if has_ids {
            out.push(404);
        }
        if has_body {
            out.push(408);
            out.push(413);
        }
        if self.body.is_some() {
            out.push(415);
        }
        // Any POST may carry an `Idempotency-Key`, refused when reused with another request.
        if self.method == Method::POST {
            out.push(422);
        }
        if self.service == Service::Cell {
            out.push(503);
        }
        out.extend_from_slice(self.errors);
        out.sort_unstable();
        out.dedup();
        out
    }

    /// A body that is not JSON, up to `limit` bytes.
    pub fn raw(mut self, limit: usize) -> Self {
        self.raw_body = true;
        self.body_limit = limit;
        self
    }
}

/// The matcher, built once at start from every area's rows.
pub struct RouteTable<C> {
    routes: Vec<Route<C>>,
    paths: matchit::Router<Vec<usize>>,
}

/// What a request path resolved to.
pub enum Matched<'a, C> {
    Found(&'a Route<C>, Vec<(String, String)>),
    /// The path is served, not with this method: the methods it takes, for `Allow`.
    MethodNotAllowed(String),
    NotFound,
}

impl<C> RouteTable<C> {
    /// Builds the matcher; a malformed or duplicate row is a programming error reported at start.
    pub fn new(mut routes: Vec<Route<C>>) -> Result<Self, String> {
        for (i, r) in routes.iter_mut().enumerate() {
            r.index = i;
        }
        let mut by_path: Vec<(String, Vec<usize>)> = Vec::new();
        for (i, r) in routes.iter().enumerate() {
            match by_path.iter_mut().find(|(p, _)| *p == r.path) {
                Some((_, ids)) => {
                    if ids.iter().any(|&j| routes[j].method == r.method) {
                        return Err(format!("duplicate route {} {}", r.method, r.path));
                    }
                    ids.push(i);
                }
                None => by_path.push((r.path.clone(), vec![i])),
            }
        }
        let mut paths = matchit::Router::new();
        for (p, ids) in by_path {
            paths.insert(p.clone(), ids).map_err(|e| format!("route {p}: {e}"))?;
        }
        Ok(RouteTable { routes, paths })
    }

    pub fn routes(&self) -> &[Route<C>] {
        &self.routes
    }

    pub fn find(&self, method: &Method, path: &str) -> Matched<'_, C> {
        let Ok(m) = self.paths.at(path) else { return Matched::NotFound };
        let method = if method == Method::HEAD { &Method::GET } else { method };
        match m.value.iter().map(|&i| &self.routes[i]).find(|r| r.method == method) {
            Some(r) => Matched::Found(r, m.params.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
            None => {
                let mut allow: Vec<&str> = m.value.iter().map(|&i| self.routes[i].method.as_str()).collect();
                if allow.contains(&"GET") {
                    allow.push("HEAD");
                }
                Matched::MethodNotAllowed(allow.join(", "))
            }
        }
    }
}
