//! `--metrics-listen ADDR`: a second, small listener that answers `GET /metrics` alone, without
//! a key, so a scraper on a private network needs no secret and the public port shows nothing.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use crate::error::{ApiError, Code};
use crate::http::reply::{PrometheusText, Raw, Reply};
use crate::http::{self, Resp};
use crate::node::Node;

/// Scrapers connected at once; past it a connection is closed unanswered.
const MAX_CONNECTIONS: usize = 16;

/// Serves `/metrics` of `node` on `listener` until the task is dropped or aborted.
pub async fn run(node: Arc<Node>, listener: TcpListener) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            // Out of file descriptors and the like: wait instead of spinning.
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else { continue };
        let node = node.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req| {
                let node = node.clone();
                async move { Ok::<_, Infallible>(answer(&node, &req)) }
            });
            let conn = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(Duration::from_secs(10))
                .serve_connection(TokioIo::new(stream), service);
            let _ = tokio::time::timeout(Duration::from_secs(60), conn).await;
            drop(slot);
        });
    }
}

fn answer(node: &Node, req: &Request<Incoming>) -> Resp {
    if req.uri().path() != "/metrics" {
        return http::error(&ApiError::not_found());
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        let mut r = http::error(&ApiError::new(Code::METHOD_NOT_ALLOWED));
        r.headers_mut().insert(hyper::header::ALLOW, hyper::header::HeaderValue::from_static("GET, HEAD"));
        return r;
    }
    Raw::<PrometheusText>::new(node.metrics.render()).into_resp()
}
