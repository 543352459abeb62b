//! Reaching another shopcell service (a cell, the account service) over HTTP: a pooled hyper
//! client for one base URL, carrying the service key.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::header::{CONTENT_TYPE, HeaderName, HeaderValue};
use hyper::{Method, Request, Response, StatusCode, Uri};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::{ApiError, ApiResult, Code};
use crate::http::Resp;

/// The header that carries the platform's service key on internal calls.
pub const SERVICE_HEADER: HeaderName = HeaderName::from_static("x-shopcell-service");

/// Another shopcell service at `base` (e.g. `http://10.0.0.5:8081`).
#[derive(Clone)]
pub struct Upstream {
    pub base: String,
    client: Client<HttpConnector, Full<Bytes>>,
    service_key: String,
}

impl Upstream {
    pub fn new(base: &str, service_key: &str) -> Upstream {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        let client = Client::builder(TokioExecutor::new()).pool_max_idle_per_host(256).build(connector);
        Upstream { base: base.trim_end_matches('/').to_string(), client, service_key: service_key.to_string() }
    }

    fn uri(&self, path_and_query: &str) -> ApiResult<Uri> {
        format!("{}{}", self.base, path_and_query).parse().map_err(ApiError::internal)
    }

    /// Sends a request and buffers the answer. A service that does not answer is a 502.
    pub async fn send(&self, mut req: Request<Full<Bytes>>) -> ApiResult<Response<Bytes>> {
        if let Ok(v) = HeaderValue::from_str(&self.service_key) {
            req.headers_mut().insert(SERVICE_HEADER, v);
        }
        let res = self.client.request(req).await.map_err(|e| {
            tracing::warn!(upstream = %self.base, error = %e, "upstream unreachable");
            ApiError::new(Code::BAD_GATEWAY)
        })?;
        let (parts, body) = res.into_parts();
        let bytes = body.collect().await.map_err(|_| ApiError::new(Code::BAD_GATEWAY))?.to_bytes();
        Ok(Response::from_parts(parts, bytes))
    }

    /// Forwards a client request unchanged but for the target and `X-Forwarded-For`.
    pub async fn forward(&self, mut req: Request<Full<Bytes>>, client_addr: Option<std::net::IpAddr>) -> ApiResult<Resp> {
        let pq = req.uri().path_and_query().map(|p| p.as_str().to_string()).unwrap_or_default();
        *req.uri_mut() = self.uri(&pq)?;
        req.headers_mut().remove(hyper::header::HOST);
        if let Some(ip) = client_addr {
            let xff = match req.headers().get("x-forwarded-for").and_then(|v| v.to_str().ok()) {
                Some(prev) => format!("{prev}, {ip}"),
                None => ip.to_string(),
            };
            if let Ok(v) = HeaderValue::from_str(&xff) {
                req.headers_mut().insert("x-forwarded-for", v);
            }
        }
        let res = self.send(req).await?;
        let (parts, body) = res.into_parts();
        Ok(Response::from_parts(parts, Full::new(body)))
    }

    /// An internal call: `body` as JSON (or raw bytes), the answer's JSON decoded as `T`.
    pub async fn call<T: DeserializeOwned>(&self, method: Method, path: &str, body: Body) -> ApiResult<T> {
        let bytes = self.call_raw(method, path, body).await?;
        if bytes.is_empty() {
            return serde_json::from_slice(b"null").map_err(ApiError::internal);
        }
        serde_json::from_slice(&bytes).map_err(ApiError::internal)
    }

    /// An internal call answering raw bytes; an error status becomes the same [`ApiError`].
    pub async fn call_raw(&self, method: Method, path: &str, body: Body) -> ApiResult<Bytes> {
        let (content_type, bytes) = match body {
            Body::Empty => (None, Bytes::new()),
            Body::Json(v) => (Some("application/json"), Bytes::from(v)),
            Body::Raw(b) => (Some("application/octet-stream"), Bytes::from(b)),
        };
        let mut req = Request::builder().method(method).uri(self.uri(path)?);
        if let Some(ct) = content_type {
            req = req.header(CONTENT_TYPE, ct);
        }
        let req = req.body(Full::new(bytes)).map_err(ApiError::internal)?;
        let res = self.send(req).await?;
        if res.status().is_success() {
            return Ok(res.into_body());
        }
        Err(error_from(res.status(), res.body()))
    }
}

/// A request body for [`Upstream::call`].
pub enum Body {
    Empty,
    Json(Vec<u8>),
    Raw(Vec<u8>),
}

impl Body {
    pub fn json<T: Serialize>(v: &T) -> ApiResult<Body> {
        serde_json::to_vec(v).map(Body::Json).map_err(ApiError::internal)
    }
}

/// Rebuilds the error another service answered, so it passes through with its code.
fn error_from(status: StatusCode, body: &[u8]) -> ApiError {
    let v: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
    let code_str = v.pointer("/error/code").and_then(|c| c.as_str()).unwrap_or("");
    let code = Code::ALL.iter().copied().find(|c| c.as_str() == code_str).unwrap_or(match status.as_u16() {
        404 => Code::NOT_FOUND,
        503 => Code::UNAVAILABLE,
        _ => Code::BAD_GATEWAY,
    });
    let message =
        v.pointer("/error/message").and_then(|m| m.as_str()).map(str::to_string).unwrap_or_else(|| code.default_message().into());
    let mut e = ApiError::msg(code, message);
    if matches!(code, Code::STORE_MOVING | Code::UNAVAILABLE | Code::RATE_LIMITED) {
        e = e.retry_after(1);
    }
    e
}
