//! Route rows and the matcher. Each row carries its permission, so who may call what is one
//! line per route and testable as data; the OpenAPI document is produced from the same rows.

use std::future::Future;
use std::pin::Pin;

use hyper::Method;
use schemars::{JsonSchema, Schema, SchemaGenerator};

use crate::error::ApiResult;
use crate::http::Resp;
use crate::http::context::Ctx;

pub type BoxFuture = Pin<Box<dyn Future<Output = ApiResult<Resp>> + Send>>;
/// A handler: takes the request context, answers a response or an error.
pub type Handler = fn(Ctx) -> BoxFuture;
type SchemaFn = fn(&mut SchemaGenerator) -> Schema;

/// Wraps an `async fn(Ctx) -> ApiResult<Resp>` into a [`Handler`].
#[macro_export]
macro_rules! handler {
    ($f:path) => {
        |cx| Box::pin($f(cx))
    };
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
}

/// A documented query parameter.
#[derive(Debug, Clone, Copy)]
pub struct Param {
    pub name: &'static str,
    pub kind: &'static str,
    pub required: bool,
    pub doc: &'static str,
}

/// Shorthand for [`Param`] rows: `q!("limit", "integer", "page size, 1..250")`.
pub const fn param(name: &'static str, kind: &'static str, doc: &'static str) -> Param {
    Param { name, kind, required: false, doc }
}

pub const fn required(name: &'static str, kind: &'static str, doc: &'static str) -> Param {
    Param { name, kind, required: true, doc }
}

/// JSON request bodies are limited to 1 MiB unless a route says otherwise.
pub const JSON_BODY_LIMIT: usize = 1 << 20;

/// One served route.
#[derive(Clone)]
pub struct Route {
    pub method: Method,
    /// The full path template, e.g. `/api/v1/stores/{storeId}/products`.
    pub path: String,
    pub service: Service,
    pub access: Access,
    pub handler: Handler,
    pub summary: &'static str,
    pub query: &'static [Param],
    pub body: Option<SchemaFn>,
    pub body_limit: usize,
    /// The body is not JSON (uploads, internal transfers): no content-type check.
    pub raw_body: bool,
}

fn schema_of<T: JsonSchema>(g: &mut SchemaGenerator) -> Schema {
    g.subschema_for::<T>()
}

impl Route {
    fn new(method: Method, path: &str, service: Service, access: Access, handler: Handler, summary: &'static str) -> Self {
        // Paths outside the versioned API are written in full; the rest get the `/api/v1` prefix.
        let unversioned = ["/api/", "/.well-known", "/internal", "/healthz", "/readyz", "/metrics"];
        let path = if unversioned.iter().any(|p| path.starts_with(p)) { path.to_string() } else { format!("/api/v1{path}") };
        Route {
            method,
            path,
            service,
            access,
            handler,
            summary,
            query: &[],
            body: None,
            body_limit: JSON_BODY_LIMIT,
            raw_body: false,
        }
    }

    pub fn get(path: &str, service: Service, access: Access, handler: Handler, summary: &'static str) -> Self {
        Route::new(Method::GET, path, service, access, handler, summary)
    }
    pub fn post(path: &str, service: Service, access: Access, handler: Handler, summary: &'static str) -> Self {
        Route::new(Method::POST, path, service, access, handler, summary)
    }
    pub fn put(path: &str, service: Service, access: Access, handler: Handler, summary: &'static str) -> Self {
        Route::new(Method::PUT, path, service, access, handler, summary)
    }
    pub fn patch(path: &str, service: Service, access: Access, handler: Handler, summary: &'static str) -> Self {
        Route::new(Method::PATCH, path, service, access, handler, summary)
    }
    pub fn delete(path: &str, service: Service, access: Access, handler: Handler, summary: &'static str) -> Self {
        Route::new(Method::DELETE, path, service, access, handler, summary)
    }

    pub fn query(mut self, params: &'static [Param]) -> Self {
        self.query = params;
        self
    }

    /// Declares the JSON body type (documented in OpenAPI from the same type serde reads).
    pub fn body<T: JsonSchema>(mut self) -> Self {
        self.body = Some(schema_of::<T>);
        self
    }

    /// A body that is not JSON, up to `limit` bytes.
    pub fn raw(mut self, limit: usize) -> Self {
        self.raw_body = true;
        self.body_limit = limit;
        self
    }
}

/// The matcher, built once at start from every area's rows.
pub struct RouteTable {
    routes: Vec<Route>,
    paths: matchit::Router<Vec<usize>>,
}

/// What a request path resolved to.
pub enum Matched<'a> {
    Found(&'a Route, Vec<(String, String)>),
    MethodNotAllowed,
    NotFound,
}

impl RouteTable {
    /// Builds the matcher; a malformed or duplicate row is a programming error reported at start.
    pub fn new(routes: Vec<Route>) -> Result<Self, String> {
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

    pub fn routes(&self) -> &[Route] {
        &self.routes
    }

    pub fn find(&self, method: &Method, path: &str) -> Matched<'_> {
        let Ok(m) = self.paths.at(path) else { return Matched::NotFound };
        let method = if method == Method::HEAD { &Method::GET } else { method };
        match m.value.iter().map(|&i| &self.routes[i]).find(|r| r.method == method) {
            Some(r) => Matched::Found(r, m.params.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
            None => Matched::MethodNotAllowed,
        }
    }
}
