//! The hyper accept loop: HTTP/1.1 and h2c on one port, header and time limits, connection caps
//! and idle timeouts (`http::connections`), and graceful shutdown — on Ctrl-C or SIGTERM the
//! listener closes, in-flight requests finish, and the writers commit what they were given
//! before the process exits.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;

use crate::http::connections::{IdleTimeout, InFlight, OVER_CAPACITY};
use crate::node::Node;

/// How long in-flight requests get to finish once shutdown starts.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

/// Serves `node` on `listener` until `shutdown` resolves, then drains and closes the node.
pub async fn run(node: Arc<Node>, listener: TcpListener, shutdown: impl std::future::Future<Output = ()>) {
    let limits = node.connections;
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder.http1().timer(TokioTimer::new()).header_read_timeout(Duration::from_secs(10)).max_buf_size(64 * 1024);
    builder.http2().timer(TokioTimer::new()).max_header_list_size(64 * 1024).max_concurrent_streams(limits.h2_streams);
    let graceful = GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        // Out of file descriptors and the like: wait instead of spinning.
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let _ = stream.set_nodelay(true);
                let Some(admitted) = node.open_connections.admit(peer.ip(), &limits) else {
                    tokio::spawn(refuse(stream));
                    continue;
                };
                let in_flight = InFlight::default();
                let node = node.clone();
                let requests = in_flight.clone();
                let service = service_fn(move |req| {
                    let node = node.clone();
                    let request = requests.start();
                    async move {
                        let resp = node.handle(req, Some(peer.ip())).await;
                        drop(request);
                        Ok::<_, std::convert::Infallible>(resp)
                    }
                });
                let io = TokioIo::new(IdleTimeout::new(stream, limits.idle, in_flight));
                let conn = builder.serve_connection_with_upgrades(io, service).into_owned();
                let conn = graceful.watch(conn);
                tokio::spawn(async move {
                    if let Err(e) = conn.await {
                        tracing::debug!(error = %e, "connection closed with an error");
                    }
                    drop(admitted);
                });
            }
            _ = &mut shutdown => break,
        }
    }
    node.shutting_down.store(true, Ordering::Relaxed);
    drop(listener);
    tracing::info!("shutting down: finishing in-flight requests");
    if tokio::time::timeout(DRAIN_TIMEOUT, graceful.shutdown()).await.is_err() {
        tracing::warn!("some connections did not finish in time");
    }
    close(&node);
}

/// Past a connection cap: a plain 503 with `Retry-After`, then the connection is closed.
async fn refuse(mut stream: tokio::net::TcpStream) {
    use tokio::io::AsyncWriteExt;
    let write = async {
        stream.write_all(OVER_CAPACITY).await?;
        stream.shutdown().await
    };
    let _ = tokio::time::timeout(Duration::from_secs(2), write).await;
}

/// Stops every writer after its queued jobs: everything acknowledged is already durable.
pub fn close(node: &Node) {
    for cell in node.cells.values() {
        cell.close();
    }
    if let Some(a) = &node.account {
        a.close();
    }
}

/// Resolves on Ctrl-C or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
}

/// The address a listener is bound to, for the printed URL.
pub fn url(addr: SocketAddr) -> String {
    format!("http://{addr}")
}
