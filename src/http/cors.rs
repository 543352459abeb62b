//! CORS for browser clients on other origins. Only the configured origins get CORS headers, and
//! only they may send credentials (the `refresh_token` cookie of `POST /auth/exchange`); any
//! other origin gets none, so the browser keeps the answer from its script.

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{
    ACCESS_CONTROL_ALLOW_CREDENTIALS, ACCESS_CONTROL_ALLOW_HEADERS, ACCESS_CONTROL_ALLOW_METHODS, ACCESS_CONTROL_ALLOW_ORIGIN,
    ACCESS_CONTROL_EXPOSE_HEADERS, ACCESS_CONTROL_MAX_AGE, ACCESS_CONTROL_REQUEST_METHOD, HeaderMap, HeaderValue, ORIGIN, VARY,
};
use hyper::{Method, Response, StatusCode};

use crate::http::Resp;

const METHODS: &str = "GET, POST, PUT, PATCH, DELETE, OPTIONS";
const HEADERS: &str = "authorization, content-type, idempotency-key, x-publishable-key, x-request-id";
const EXPOSED: &str = "retry-after, x-request-id, location, etag, deprecation, sunset, link, idempotent-replayed";

/// The allowed origins, compared exactly (scheme, host and port, no trailing slash).
#[derive(Debug, Clone, Default)]
pub struct Cors {
    origins: Vec<String>,
}

impl Cors {
    pub fn new(origins: &[String]) -> Self {
        Cors { origins: origins.iter().map(|o| o.trim().trim_end_matches('/').to_string()).filter(|o| !o.is_empty()).collect() }
    }

    /// The request's `Origin` when it is an allowed one.
    fn allowed<'a>(&self, headers: &'a HeaderMap) -> Option<&'a HeaderValue> {
        let origin = headers.get(ORIGIN)?;
        let s = origin.to_str().ok()?;
        self.origins.iter().any(|o| o == s).then_some(origin)
    }

    /// Answers a preflight (`OPTIONS` with `Access-Control-Request-Method`) by itself; `None` for
    /// every other request. A disallowed origin's preflight gets a bare 204 the browser refuses.
    pub fn preflight(&self, method: &Method, headers: &HeaderMap) -> Option<Resp> {
        if method != Method::OPTIONS || !headers.contains_key(ACCESS_CONTROL_REQUEST_METHOD) || !headers.contains_key(ORIGIN) {
            return None;
        }
        let mut r = Response::new(Full::new(Bytes::new()));
        *r.status_mut() = StatusCode::NO_CONTENT;
        let h = r.headers_mut();
        h.insert(VARY, HeaderValue::from_static("origin"));
        if let Some(origin) = self.allowed(headers) {
            h.insert(ACCESS_CONTROL_ALLOW_ORIGIN, origin.clone());
            h.insert(ACCESS_CONTROL_ALLOW_CREDENTIALS, HeaderValue::from_static("true"));
            h.insert(ACCESS_CONTROL_ALLOW_METHODS, HeaderValue::from_static(METHODS));
            h.insert(ACCESS_CONTROL_ALLOW_HEADERS, HeaderValue::from_static(HEADERS));
            h.insert(ACCESS_CONTROL_MAX_AGE, HeaderValue::from_static("600"));
        }
        Some(r)
    }

    /// Adds the CORS headers of an allowed origin to an answer. Headers a forwarding hop already
    /// set are replaced, so a router's own configuration decides what its clients see.
    pub fn decorate(&self, request: &HeaderMap, resp: &mut Resp) {
        let h = resp.headers_mut();
        h.remove(ACCESS_CONTROL_ALLOW_ORIGIN);
        h.remove(ACCESS_CONTROL_ALLOW_CREDENTIALS);
        let Some(origin) = self.allowed(request) else { return };
        h.insert(ACCESS_CONTROL_ALLOW_ORIGIN, origin.clone());
        h.insert(ACCESS_CONTROL_ALLOW_CREDENTIALS, HeaderValue::from_static("true"));
        h.insert(ACCESS_CONTROL_EXPOSE_HEADERS, HeaderValue::from_static(EXPOSED));
        h.append(VARY, HeaderValue::from_static("origin"));
    }
}
