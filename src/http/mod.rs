//! The HTTP layer: responses, request parsing, the route table (generic over the request context
//! its user defines), token verification, the OpenAPI document and calls to other services.

pub mod auth;
pub mod compress;
pub mod connections;
pub mod cors;
pub mod docs_page;
pub mod forwarded;
pub mod gzip;
pub mod list;
pub mod objects_only;
pub mod openapi;
pub mod parse;
pub mod query;
pub mod ratelimit;
pub mod reply;
pub mod route;
pub mod upstream;

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{CONTENT_TYPE, HeaderValue, RETRY_AFTER, WWW_AUTHENTICATE};
use hyper::{Response, StatusCode};
use serde::Serialize;

use crate::domain::json_out::JsonOut;

use crate::error::{ApiError, Code};

/// Every response body is buffered: handlers build whole JSON documents.
pub type Resp = Response<Full<Bytes>>;

const JSON: HeaderValue = HeaderValue::from_static("application/json");

/// A JSON response.
pub fn json<T: Serialize + ?Sized>(status: StatusCode, body: &T) -> Resp {
    match serde_json::to_vec(body) {
        Ok(bytes) => {
            let mut r = Response::new(Full::new(Bytes::from(bytes)));
            *r.status_mut() = status;
            r.headers_mut().insert(CONTENT_TYPE, JSON);
            r
        }
        Err(e) => error(&ApiError::internal(e)),
    }
}

/// A 200 with JSON that is already rendered.
pub fn ok_raw(body: impl Into<Bytes>) -> Resp {
    let mut r = Response::new(Full::new(body.into()));
    r.headers_mut().insert(CONTENT_TYPE, JSON);
    r
}

/// `{"data": [items…], fields…}` around JSON items that are already rendered, without parsing
/// them again (answers that are also kept: search answers and list pages are cached).
pub fn envelope_body<T: AsRef<[u8]>>(items: &[T], fields: &[(&str, serde_json::Value)]) -> Vec<u8> {
    let mut out = Vec::with_capacity(items.iter().map(|i| i.as_ref().len() + 1).sum::<usize>() + 128);
    out.extend_from_slice(b"{\"data\":[");
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(item.as_ref());
    }
    out.push(b']');
    for (name, value) in fields {
        out.extend_from_slice(format!(",\"{name}\":{value}").as_bytes());
    }
    out.push(b'}');
    out
}

/// The paginated list envelope around rendered JSON items.
pub fn page_body<T: AsRef<[u8]>>(items: &[T], total: u64, page: u32, limit: u32) -> Vec<u8> {
    let total_pages = total.div_ceil(u64::from(limit.max(1)));
    envelope_body(
        items,
        &[("total", total.into()), ("page", page.into()), ("limit", limit.into()), ("totalPages", total_pages.into())],
    )
}

pub fn ok<T: Serialize + ?Sized>(body: &T) -> Resp {
    json(StatusCode::OK, body)
}

pub fn created<T: Serialize + ?Sized>(body: &T) -> Resp {
    json(StatusCode::CREATED, body)
}

/// A 201 with JSON that is already rendered.
pub fn created_raw(body: Vec<u8>) -> Resp {
    let mut r = ok_raw(body);
    *r.status_mut() = StatusCode::CREATED;
    r
}

pub fn no_content() -> Resp {
    let mut r = Response::new(Full::new(Bytes::new()));
    *r.status_mut() = StatusCode::NO_CONTENT;
    r
}

/// The error response of `API.md`, from the one error table.
pub fn error(e: &ApiError) -> Resp {
    let status = StatusCode::from_u16(e.code.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let body = serde_json::to_vec(&e.body()).unwrap_or_default();
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    r.headers_mut().insert(CONTENT_TYPE, JSON);
    if let Some(s) = e.retry_after {
        r.headers_mut().insert(RETRY_AFTER, HeaderValue::from(s));
    }
    // HTTP asks a 401 to name the scheme that would admit (RFC 9110 §15.5.2); RFC 6750 adds
    // `invalid_token` when a token was sent and refused.
    if status == StatusCode::UNAUTHORIZED {
        let challenge = match e.code {
            Code::INVALID_TOKEN | Code::TOKEN_EXPIRED => "Bearer error=\"invalid_token\"",
            _ => "Bearer",
        };
        r.headers_mut().insert(WWW_AUTHENTICATE, HeaderValue::from_static(challenge));
    }
    r
}

/// The paginated list envelope: `{data, total, page, limit, totalPages}`.
#[derive(Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "Page_of_{T}")]
pub struct Page<T: Serialize> {
    pub data: Vec<T>,
    pub total: u64,
    pub page: u32,
    pub limit: u32,
    pub total_pages: u64,
}

impl<T: Serialize> Page<T> {
    pub fn new(data: Vec<T>, total: u64, page: u32, limit: u32) -> Self {
        Page { data, total, page, limit, total_pages: total.div_ceil(limit.max(1) as u64) }
    }

    /// The page as JSON with each item written by `item` (see `domain::json_out`): byte for
    /// byte what `serde_json::to_vec` writes when `item` writes what `T`'s `Serialize` does.
    pub fn to_json_with(&self, per_item: usize, item: impl FnMut(&mut JsonOut, &T)) -> Vec<u8> {
        page_json(&self.data, self.total, self.page, self.limit, per_item, item)
    }
}

/// [`Page::to_json_with`] of items that are not the page's type: rows written by `item` as the
/// type the route answers would be (a variant's levels, composed from kept views).
pub fn page_json<T>(
    data: &[T],
    total: u64,
    page: u32,
    limit: u32,
    per_item: usize,
    mut item: impl FnMut(&mut JsonOut, &T),
) -> Vec<u8> {
    let mut out = JsonOut::with_capacity(data.len().saturating_mul(per_item).saturating_add(96));
    let _ = out.list(b"{\"data\":[", data, |o, t| {
        item(o, t);
        Ok(())
    });
    out.raw(b",\"total\":");
    out.int(total);
    out.raw(b",\"page\":");
    out.int(page);
    out.raw(b",\"limit\":");
    out.int(limit);
    out.raw(b",\"totalPages\":");
    out.int(total.div_ceil(limit.max(1) as u64));
    out.raw(b"}");
    out.buf
}

/// The offset-style envelope of `API.md`: `page = floor(offset / limit) + 1`, `offset` echoed.
#[derive(Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "OffsetPage_of_{T}")]
pub struct OffsetPage<T: Serialize> {
    pub data: Vec<T>,
    pub total: u64,
    pub page: u64,
    pub limit: u64,
    pub total_pages: u64,
    pub offset: u64,
}

impl<T: Serialize> OffsetPage<T> {
    pub fn new(data: Vec<T>, total: u64, offset: u64, limit: u64) -> Self {
        let limit = limit.max(1);
        OffsetPage { data, total, page: offset / limit + 1, limit, total_pages: total.div_ceil(limit), offset }
    }
}
