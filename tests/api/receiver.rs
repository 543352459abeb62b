//! A webhook receiver for tests: a real HTTP server on loopback that keeps every request it is
//! sent and answers with the status the test sets, and the test's own check of Standard
//! Webhooks signatures (HMAC-SHA256 over `id.timestamp.body`).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::sync::Notify;

/// A request the receiver got.
#[derive(Debug, Clone)]
pub struct Received {
    /// The path it was sent to (`/hooks`, or a test's own per subscription).
    pub path: String,
    pub id: String,
    pub timestamp: String,
    pub signature: String,
    pub body: Bytes,
}

impl Received {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("a JSON body")
    }

    /// Whether the signature is the HMAC of this delivery under `secret` (`whsec_…`).
    pub fn signed_with(&self, secret: &str) -> bool {
        let key = STANDARD.decode(secret.strip_prefix("whsec_").expect("whsec_ prefix")).expect("base64 secret");
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &key);
        let mut signed = format!("{}.{}.", self.id, self.timestamp).into_bytes();
        signed.extend_from_slice(&self.body);
        let expected = format!("v1,{}", STANDARD.encode(ring::hmac::sign(&key, &signed).as_ref()));
        self.signature.split(' ').any(|s| s == expected)
    }
}

pub struct Receiver {
    pub addr: SocketAddr,
    got: Arc<Mutex<Vec<Received>>>,
    status: Arc<AtomicU16>,
    arrived: Arc<Notify>,
}

impl Receiver {
    pub async fn start() -> Receiver {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("address");
        let (got, status, arrived) = (Arc::new(Mutex::new(Vec::new())), Arc::new(AtomicU16::new(200)), Arc::new(Notify::new()));
        let (g, s, a) = (got.clone(), status.clone(), arrived.clone());
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else { return };
                let (g, s, a) = (g.clone(), s.clone(), a.clone());
                tokio::spawn(async move {
                    let service = service_fn(move |req: Request<hyper::body::Incoming>| {
                        let (g, s, a) = (g.clone(), s.clone(), a.clone());
                        async move {
                            let header = |n: &str| req.headers().get(n).and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
                            let (id, timestamp, signature) =
                                (header("webhook-id"), header("webhook-timestamp"), header("webhook-signature"));
                            let path = req.uri().path().to_string();
                            let body = req.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
                            g.lock().unwrap().push(Received { path, id, timestamp, signature, body });
                            a.notify_waiters();
                            let status = s.load(Ordering::SeqCst);
                            Ok::<_, hyper::Error>(
                                Response::builder().status(status).body(Full::new(Bytes::from("thanks"))).unwrap(),
                            )
                        }
                    });
                    let _ = http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
                });
            }
        });
        Receiver { addr, got, status, arrived }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/hooks", self.addr.port())
    }

    /// Answers every later request with `status`.
    pub fn answer(&self, status: u16) {
        self.status.store(status, Ordering::SeqCst);
    }

    pub fn received(&self) -> Vec<Received> {
        self.got.lock().unwrap().clone()
    }

    /// Waits until `n` requests have arrived in all (10 s at most, then fails).
    pub async fn wait_for(&self, n: usize) -> Vec<Received> {
        self.wait_for_within(n, Duration::from_secs(10)).await
    }

    /// [`Receiver::wait_for`] with its own limit.
    pub async fn wait_for_within(&self, n: usize, limit: Duration) -> Vec<Received> {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let arrived = self.arrived.notified();
            let got = self.received();
            if got.len() >= n {
                return got;
            }
            if tokio::time::timeout_at(deadline, arrived).await.is_err() {
                panic!(
                    "{} of {n} deliveries arrived: {:?}",
                    got.len(),
                    got.iter().map(|r| r.json()["type"].clone()).collect::<Vec<_>>()
                );
            }
        }
    }
}

/// A receiver that never accepts a delivery: `/redirect` answers 302 to a private address,
/// `/big` 5 MB, `/hang` nothing at all.
pub async fn misbehaving() -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else { return };
            tokio::spawn(async move {
                let service = service_fn(|req: Request<hyper::body::Incoming>| async move {
                    let response = match req.uri().path() {
                        "/redirect" => Response::builder()
                            .status(302)
                            .header("location", "http://10.0.0.1/hooks")
                            .body(Full::new(Bytes::new())),
                        "/big" => Response::builder().status(200).body(Full::new(Bytes::from(vec![b'x'; 5 << 20]))),
                        _ => {
                            tokio::time::sleep(Duration::from_secs(3600)).await;
                            Response::builder().status(200).body(Full::new(Bytes::new()))
                        }
                    };
                    Ok::<_, hyper::Error>(response.unwrap())
                });
                let _ = http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
            });
        }
    });
    addr
}
