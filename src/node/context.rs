//! The request context handed to handlers (what they reach: this process, the store's cell, the
//! caller), with its extractors: path ids, typed query, JSON body. The route table of this process
//! is the HTTP layer's, over this context.

use std::sync::Arc;

use bytes::Bytes;
use hyper::{HeaderMap, Method, Uri};
use serde::de::DeserializeOwned;
use uuid::Uuid;

use crate::account::publishable::Shopper;
use crate::cells::Cell;
use crate::domain::role::Role;
use crate::error::{ApiError, ApiResult, Code};
use crate::http::auth::Principal;
use crate::http::parse::{parse_json, parse_path_id};
use crate::http::query::Query;
use crate::http::route;
use crate::node::Node;

/// A route of this process.
pub type Route = route::Route<Ctx>;

/// The store a cell route works on, resolved and authorized before the handler runs.
#[derive(Clone)]
pub struct StoreScope {
    pub id: Uuid,
    pub cell: Arc<Cell>,
    /// The caller's role; `None` for internal calls and for shoppers.
    pub role: Option<Role>,
}

pub struct Ctx {
    pub node: Arc<Node>,
    pub method: Method,
    pub uri: Uri,
    pub headers: HeaderMap,
    pub params: Vec<(String, String)>,
    pub query: Query,
    pub body: Bytes,
    pub principal: Option<Principal>,
    pub store: Option<StoreScope>,
    /// An anonymous shopper admitted to a storefront route by the store's publishable key
    /// (then `store.role` is `None` and there is no principal).
    pub shopper: Option<Shopper>,
    /// The client's address: the peer, or the address a router appended to `X-Forwarded-For`.
    pub client: Option<std::net::IpAddr>,
}

impl route::Context for Ctx {
    fn query(&self) -> &Query {
        &self.query
    }
}

impl Ctx {
    /// A path parameter (always present: the route template names it).
    pub fn param(&self, name: &str) -> &str {
        self.params.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str()).unwrap_or("")
    }

    /// A path parameter that must be a UUID; anything else is a 400 naming it.
    pub fn path_id(&self, name: &str) -> ApiResult<Uuid> {
        parse_path_id(name, self.param(name))
    }

    /// The signed-in caller.
    pub fn user(&self) -> ApiResult<&Principal> {
        self.principal.as_ref().ok_or_else(|| ApiError::new(Code::UNAUTHORIZED))
    }

    /// Who a change is recorded as made by: the signed-in member, else the service.
    pub fn actor(&self) -> crate::domain::stock::Actor {
        match &self.principal {
            Some(p) => crate::domain::stock::Actor::Member(p.user_id),
            None => crate::domain::stock::Actor::System,
        }
    }

    /// The store of a cell route.
    pub fn scope(&self) -> ApiResult<&StoreScope> {
        self.store.as_ref().ok_or_else(|| ApiError::internal("cell route without a store scope"))
    }

    /// Whether the caller is an anonymous shopper (storefront routes only): shoppers see only
    /// what a store publishes.
    pub fn is_shopper(&self) -> bool {
        self.shopper.is_some()
    }

    /// The JSON body as `T`; errors name the offending field.
    pub fn json<T: DeserializeOwned>(&self) -> ApiResult<T> {
        if self.body.is_empty() {
            return Err(ApiError::msg(Code::INVALID_JSON, "a JSON body is required"));
        }
        parse_json(&self.body)
    }

    /// The JSON body, or `T::default()` when the request has none.
    pub fn json_or_default<T: DeserializeOwned + Default>(&self) -> ApiResult<T> {
        if self.body.is_empty() { Ok(T::default()) } else { parse_json(&self.body) }
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The coding the answer may be compressed in (`Accept-Encoding`), for answers kept
    /// compressed (`search::cache`).
    pub fn accepted_coding(&self) -> Option<crate::http::compress::Coding> {
        crate::http::compress::negotiate(self.header("accept-encoding"))
    }
}
