//! The one client for calls to parties a merchant names (webhook deliveries, downloads of a
//! `sourceUrl`, …): a merchant's URL must not become a way into the service's own network.
//!
//! Every host is resolved once through [`Resolve`], every address is checked
//! ([`address::refused_reason`]) and the connection goes to a checked address, so a name that
//! changes its answer between check and connect (DNS rebinding) reaches nothing new; TLS still
//! verifies the certificate against the host name. Only https, no credentials in the URL, at most
//! 2,048 characters; the operator's `--outbound-allow` list lifts the address and scheme rules for
//! exact hosts. Each redirect followed is checked again. A fresh HTTP/1.1 connection per request:
//! calls are rare and to many hosts, a pool would mostly hold idle sockets. `docs/outbound.md`
//! is the operator's view.

pub mod address;
mod exchange;
mod resolve;
mod target;
mod tls;

#[cfg(test)]
mod tests;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use hyper::header::LOCATION;
use hyper::{HeaderMap, Method};

pub use resolve::{Resolve, SystemResolver};
pub use target::MAX_URL_LEN;

use address::AllowEntry;
use target::Target;

/// The most redirects one request follows, whatever the caller asks.
pub const MAX_REDIRECTS: u8 = 5;

/// The operator's settings of the outbound client (`--outbound-*` flags).
#[derive(Debug, Clone)]
pub struct OutboundConfig {
    /// `HOST` or `HOST:PORT` entries reachable whatever their addresses, over http too.
    pub allow: Vec<String>,
    /// PEM files of extra trusted root certificates.
    pub ca_files: Vec<PathBuf>,
    /// Resolving, connecting and the TLS handshake, each.
    pub connect_timeout: Duration,
    /// The whole request: every hop, to the last byte of the answer.
    pub total_timeout: Duration,
    /// The largest answer body read; a larger one is [`OutboundError::TooLarge`].
    pub max_response_bytes: usize,
}

impl Default for OutboundConfig {
    fn default() -> Self {
        OutboundConfig {
            allow: Vec::new(),
            ca_files: Vec::new(),
            connect_timeout: Duration::from_secs(5),
            total_timeout: Duration::from_secs(15),
            max_response_bytes: 1024 * 1024,
        }
    }
}

/// Whether a request follows redirects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Redirects {
    /// A 3xx is the answer (webhooks: the caller treats anything but 2xx as a failure).
    None,
    /// Follows up to this many redirects (at most [`MAX_REDIRECTS`]), each target checked anew.
    Follow(u8),
}

/// One outbound request.
#[derive(Debug, Clone)]
pub struct OutboundRequest {
    pub method: Method,
    /// An absolute http(s) URL, checked like [`Outbound::check_url`] before anything is sent.
    pub url: String,
    /// Sent as given, but for `Host`, `Content-Length` and connection headers, which the client
    /// writes; `User-Agent` is `shopcell` unless given.
    pub headers: Vec<(String, String)>,
    /// Sent with its `Content-Length` (also 0 for POST, PUT and PATCH).
    pub body: Bytes,
    pub redirects: Redirects,
}

/// The answer of the last hop, its body read in full (up to the cap).
#[derive(Debug, Clone)]
pub struct OutboundResponse {
    pub status: u16,
    pub headers: HeaderMap,
    /// At most the configured `max_response_bytes`.
    pub body: Bytes,
    /// From the start of [`Outbound::send`] to the last byte read.
    pub elapsed: Duration,
}

/// Why an outbound request was not made or did not complete. `Display` is a short message safe
/// to show the merchant (it completes "url: …" in a 400, or a delivery's log).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OutboundError {
    /// Too long, not a URL, not http(s), credentials in it.
    InvalidUrl(String),
    /// The rules refuse it: an address that is not public, http to a host not allowed.
    Refused(String),
    /// The host did not resolve.
    Resolve(String),
    /// No TCP connection.
    Connect(String),
    /// The TLS handshake failed (an untrusted certificate, one for another name).
    Tls(String),
    /// The total timeout passed.
    Timeout,
    /// The answer's body is over the cap.
    TooLarge,
    /// A redirect that cannot be followed (https to http, too many, no valid target).
    Redirect(String),
    /// The exchange failed after connecting (the server closed, answered garbage).
    Http(String),
}

impl std::fmt::Display for OutboundError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OutboundError::InvalidUrl(m)
            | OutboundError::Refused(m)
            | OutboundError::Resolve(m)
            | OutboundError::Connect(m)
            | OutboundError::Tls(m)
            | OutboundError::Redirect(m)
            | OutboundError::Http(m) => f.write_str(m),
            OutboundError::Timeout => f.write_str("the server did not answer in time"),
            OutboundError::TooLarge => f.write_str("the server's answer is too large"),
        }
    }
}

impl std::error::Error for OutboundError {}

/// The outbound client; cheap to clone (one shared state).
#[derive(Clone)]
pub struct Outbound(Arc<Inner>);

impl std::fmt::Debug for Outbound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Outbound")
            .field("allow", &self.0.allow)
            .field("connect_timeout", &self.0.connect_timeout)
            .field("total_timeout", &self.0.total_timeout)
            .field("max_response_bytes", &self.0.max_response_bytes)
            .finish_non_exhaustive()
    }
}

/// What every request of one client shares.
struct Inner {
    allow: Vec<AllowEntry>,
    tls: Arc<rustls::ClientConfig>,
    resolver: Arc<dyn Resolve>,
    connect_timeout: Duration,
    total_timeout: Duration,
    max_response_bytes: usize,
}

impl Outbound {
    /// A client with these settings; a bad allow-list entry or CA file is an error naming it.
    pub fn new(config: OutboundConfig, resolver: Arc<dyn Resolve>) -> Result<Outbound, String> {
        let allow = address::parse_allow_list(&config.allow)?;
        let tls = tls::client_config(&config.ca_files)?;
        Ok(Outbound(Arc::new(Inner {
            allow,
            tls,
            resolver,
            connect_timeout: config.connect_timeout,
            total_timeout: config.total_timeout,
            max_response_bytes: config.max_response_bytes,
        })))
    }

    /// Checks a URL a merchant gives before it is stored (a webhook's url): length, syntax,
    /// scheme, credentials, that the host resolves and that every address is allowed. Nothing is
    /// sent to the host.
    pub async fn check_url(&self, url: &str) -> Result<(), OutboundError> {
        let target = target::parse(&self.0.allow, url)?;
        target::addresses(&self.0, &target).await.map(|_| ())
    }

    /// Sends a request, following redirects as asked, within the total timeout.
    pub async fn send(&self, req: OutboundRequest) -> Result<OutboundResponse, OutboundError> {
        let start = Instant::now();
        match tokio::time::timeout(self.0.total_timeout, self.send_hops(req, start)).await {
            Ok(result) => result,
            Err(_) => Err(OutboundError::Timeout),
        }
    }

    async fn send_hops(&self, req: OutboundRequest, start: Instant) -> Result<OutboundResponse, OutboundError> {
        let inner = &*self.0;
        let max_hops = match req.redirects {
            Redirects::None => None,
            Redirects::Follow(n) => Some(n.min(MAX_REDIRECTS)),
        };
        let OutboundRequest { mut method, url, mut headers, mut body, .. } = req;
        let mut target = target::parse(&inner.allow, &url)?;
        let mut hops = 0u8;
        loop {
            let ips = target::addresses(inner, &target).await?;
            let answer = exchange::exchange(inner, &target, &ips, &method, &headers, &body).await?;
            let location = answer.headers.get(LOCATION).cloned();
            let (Some(max_hops), true, Some(location)) = (max_hops, is_redirect(answer.status), location) else {
                let status = answer.status;
                let headers = answer.headers.clone();
                let body = answer.read_body(&method, inner.max_response_bytes).await?;
                return Ok(OutboundResponse { status, headers, body, elapsed: start.elapsed() });
            };
            if hops >= max_hops {
                return Err(OutboundError::Redirect(format!("more than {max_hops} redirects")));
            }
            hops += 1;
            let next = location
                .to_str()
                .ok()
                .and_then(|l| target.url.join(l).ok())
                .ok_or_else(|| OutboundError::Redirect("a redirect's location is not a valid URL".into()))?;
            if target.https && next.scheme() != "https" {
                return Err(OutboundError::Redirect("a redirect from https to another scheme is refused".into()));
            }
            let next = target::check(&inner.allow, next)?;
            // 303, and 301/302 after a POST as every browser does, become a GET without a body.
            if answer.status == 303 && method != Method::HEAD || matches!(answer.status, 301 | 302) && method == Method::POST {
                method = Method::GET;
                body = Bytes::new();
                headers.retain(|(n, _)| !n.eq_ignore_ascii_case("content-type"));
            }
            if !same_origin(&target, &next) {
                // Credentials meant for one server are not handed to the next.
                headers.retain(|(n, _)| {
                    !["authorization", "cookie", "proxy-authorization"].iter().any(|c| n.eq_ignore_ascii_case(c))
                });
            }
            target = next;
        }
    }
}

fn is_redirect(status: u16) -> bool {
    matches!(status, 301 | 302 | 303 | 307 | 308)
}

fn same_origin(a: &Target, b: &Target) -> bool {
    a.https == b.https && a.host == b.host && a.port == b.port
}
