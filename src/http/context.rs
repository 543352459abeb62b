//! The request context handed to handlers, with its extractors: path ids, typed query, JSON body.

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
use crate::http::query::Query;
use crate::node::Node;

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
}

pub fn parse_path_id(name: &str, raw: &str) -> ApiResult<Uuid> {
    Uuid::parse_str(raw).map_err(|_| ApiError::field(name, "must be a UUID"))
}

/// Parses JSON; a syntax error is `INVALID_JSON`, a wrong shape is `VALIDATION_FAILED` naming the
/// field path (e.g. `price.amount`).
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> ApiResult<T> {
    // Tracking the path costs on every value; it is needed only to name the field of an error,
    // so a body that parses is read without it and only a failed one is read again with it.
    if let Ok(value) = serde_json::from_slice(bytes) {
        return Ok(value);
    }
    let de = &mut serde_json::Deserializer::from_slice(bytes);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if inner.is_syntax() || inner.is_eof() {
            ApiError::msg(Code::INVALID_JSON, format!("the request body is not valid JSON: {inner}"))
        } else {
            let field = if path == "." { "body".to_string() } else { path };
            // serde's message carries line/column noise; keep only its first sentence.
            let msg = inner.to_string();
            let msg = msg.split(" at line ").next().unwrap_or(&msg).to_string();
            ApiError::field(field, msg)
        }
    })
}
