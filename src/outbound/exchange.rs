//! One HTTP/1.1 exchange on a fresh connection to an address already checked: TCP, TLS that
//! verifies the certificate against the host name, the request, and the answer read up to the cap.

use std::net::{IpAddr, SocketAddr};

use bytes::{Bytes, BytesMut};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{CONTENT_LENGTH, HOST, HeaderName, HeaderValue, USER_AGENT};
use hyper::{HeaderMap, Method, Request};
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::task::AbortHandle;

use super::target::Target;
use super::{Inner, OutboundError};

/// Headers the client writes itself or that describe one connection: a caller's are dropped.
const OWN_HEADERS: &[&str] =
    &["host", "content-length", "transfer-encoding", "connection", "keep-alive", "upgrade", "te", "trailer", "proxy-connection"];

/// The answer's head, and its body still to read.
pub struct Answer {
    pub status: u16,
    pub headers: HeaderMap,
    body: Incoming,
    /// Ends the task driving the connection when the answer is dropped, read or not.
    _driver: AbortOnDrop,
}

struct AbortOnDrop(AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Connects to one of `ips` (in order), sends the request and reads the answer's head.
pub async fn exchange(
    inner: &Inner,
    target: &Target,
    ips: &[IpAddr],
    method: &Method,
    headers: &[(String, String)],
    body: &Bytes,
) -> Result<Answer, OutboundError> {
    let req = request(target, method, headers, body)?;
    let tcp = connect(inner, target, ips).await?;
    if !target.https {
        return http1(TokioIo::new(tcp), req).await;
    }
    let name = match target.ip {
        Some(ip) => ServerName::IpAddress(ip.into()),
        None => ServerName::try_from(target.host.clone())
            .map_err(|_| OutboundError::InvalidUrl(format!("the host {} is not a valid TLS server name", target.host)))?,
    };
    let tls = tokio_rustls::TlsConnector::from(inner.tls.clone());
    let stream = match tokio::time::timeout(inner.connect_timeout, tls.connect(name, tcp)).await {
        Ok(Ok(stream)) => stream,
        Ok(Err(e)) => return Err(OutboundError::Tls(format!("TLS with {} failed: {e}", target.host))),
        Err(_) => return Err(OutboundError::Tls(format!("TLS with {} did not complete in time", target.host))),
    };
    http1(TokioIo::new(stream), req).await
}

fn request(
    target: &Target,
    method: &Method,
    headers: &[(String, String)],
    body: &Bytes,
) -> Result<Request<Full<Bytes>>, OutboundError> {
    let path = &target.url[url::Position::BeforePath..url::Position::AfterQuery];
    let host = match target.url.port() {
        Some(port) => format!("{}:{port}", target.host),
        None => target.host.clone(),
    };
    let mut req = Request::builder().method(method.clone()).uri(path).body(Full::new(body.clone())).map_err(|e| {
        // The URL parser already percent-encoded the path, so this is not expected.
        OutboundError::InvalidUrl(format!("the URL's path cannot be sent: {e}"))
    })?;
    let h = req.headers_mut();
    let invalid = |name: &str| OutboundError::Http(format!("the request header {name} is not valid"));
    for (name, value) in headers {
        let header_name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| invalid(name))?;
        if OWN_HEADERS.contains(&header_name.as_str()) {
            continue;
        }
        h.append(header_name, HeaderValue::from_str(value).map_err(|_| invalid(name))?);
    }
    h.insert(HOST, HeaderValue::from_str(&host).map_err(|_| invalid("Host"))?);
    if !h.contains_key(USER_AGENT) {
        h.insert(USER_AGENT, HeaderValue::from_static("shopcell"));
    }
    // A body-carrying method says its length even when it is 0; a GET without a body says nothing.
    if !body.is_empty() || matches!(*method, Method::POST | Method::PUT | Method::PATCH) {
        h.insert(CONTENT_LENGTH, HeaderValue::from(body.len()));
    }
    Ok(req)
}

/// A TCP connection to the first of `ips` that answers, all within the connect timeout.
async fn connect(inner: &Inner, target: &Target, ips: &[IpAddr]) -> Result<TcpStream, OutboundError> {
    let attempt = async {
        let mut last = None;
        for ip in ips {
            match TcpStream::connect(SocketAddr::new(*ip, target.port)).await {
                Ok(tcp) => return Ok(tcp),
                Err(e) => last = Some(e),
            }
        }
        Err(last)
    };
    match tokio::time::timeout(inner.connect_timeout, attempt).await {
        Ok(Ok(tcp)) => {
            // Small requests written at once: no reason to wait for acknowledgements.
            let _ = tcp.set_nodelay(true);
            Ok(tcp)
        }
        Ok(Err(e)) => {
            let why = e.map(|e| e.kind().to_string()).unwrap_or_else(|| "no address".into());
            Err(OutboundError::Connect(format!("could not connect to {}:{}: {why}", target.host, target.port)))
        }
        Err(_) => Err(OutboundError::Connect(format!("connecting to {}:{} timed out", target.host, target.port))),
    }
}

async fn http1<S>(io: TokioIo<S>, req: Request<Full<Bytes>>) -> Result<Answer, OutboundError>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake(io).await.map_err(http_error)?;
    let driver = AbortOnDrop(tokio::spawn(conn).abort_handle());
    let res = sender.send_request(req).await.map_err(http_error)?;
    let (parts, body) = res.into_parts();
    Ok(Answer { status: parts.status.as_u16(), headers: parts.headers, body, _driver: driver })
}

fn http_error(e: hyper::Error) -> OutboundError {
    OutboundError::Http(format!("the exchange with the server failed: {e}"))
}

impl Answer {
    /// Reads the body, at most `max` bytes: a longer body is [`OutboundError::TooLarge`], read
    /// no further than the first byte past the cap. An announced length over the cap fails at
    /// once, but for a HEAD, whose answer announces the length of a body it does not carry.
    pub async fn read_body(mut self, method: &Method, max: usize) -> Result<Bytes, OutboundError> {
        let declared = self.headers.get(CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
        if *method != Method::HEAD && declared.is_some_and(|n| n > max as u64) {
            return Err(OutboundError::TooLarge);
        }
        let mut buf = BytesMut::new();
        while let Some(frame) = self.body.frame().await {
            let frame = frame.map_err(http_error)?;
            if let Ok(data) = frame.into_data() {
                if buf.len() + data.len() > max {
                    return Err(OutboundError::TooLarge);
                }
                buf.extend_from_slice(&data);
            }
        }
        Ok(buf.freeze())
    }
}
