//! What a connection may hold: closed when silent, a body that trickles in gets 408, caps per
//! address answer 503 with Retry-After, and an anonymous caller is refused before its body is
//! read. Raw sockets, to send what a well-behaved client never would.

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::auth_support::spawn_app_with_flags;
use crate::support::*;

/// Reads until the server closes the connection (or `within` passes): what it sent.
async fn read_to_close(s: &mut TcpStream, within: Duration) -> Option<String> {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = Instant::now() + within;
    loop {
        let left = deadline.checked_duration_since(Instant::now())?;
        match tokio::time::timeout(left, s.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return Some(String::from_utf8_lossy(&out).into_owned()),
            Ok(Ok(n)) => out.extend_from_slice(&buf[..n]),
            Err(_) => return None,
        }
    }
}

#[tokio::test]
async fn a_silent_connection_is_closed_after_the_idle_timeout() {
    let app = spawn_app_with_flags(&["--idle-timeout", "300ms"]).await;
    let started = Instant::now();
    let mut silent = TcpStream::connect(app.addr()).await.unwrap();
    let sent = read_to_close(&mut silent, Duration::from_secs(10)).await.expect("closed by the server");
    assert_eq!(sent, "", "nothing is answered to a connection that asked nothing");
    assert!(started.elapsed() >= Duration::from_millis(250), "{:?}", started.elapsed());
    // Between requests too: a kept-alive connection that goes quiet is closed.
    let mut kept = TcpStream::connect(app.addr()).await.unwrap();
    kept.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
    let answered = read_to_close(&mut kept, Duration::from_secs(10)).await.expect("closed once idle");
    assert!(answered.starts_with("HTTP/1.1 200"), "{answered}");
}

#[tokio::test]
async fn a_body_that_trickles_in_gets_408() {
    let app = spawn_app_with_flags(&["--body-timeout", "300ms", "--idle-timeout", "10s"]).await;
    let u = create_user(&app.client).await;
    let mut s = TcpStream::connect(app.addr()).await.unwrap();
    let head = format!(
        "POST /api/v1/stores HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{",
        u.token
    );
    s.write_all(head.as_bytes()).await.unwrap();
    let mut buf = vec![0u8; 4096];
    let n = tokio::time::timeout(Duration::from_secs(10), s.read(&mut buf)).await.expect("answered").unwrap();
    let answer = String::from_utf8_lossy(&buf[..n]);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("REQUEST_TIMEOUT"), "{answer}");
    assert!(app.client.get("/api/v1/stores", Some(&u.token)).await.expect(200).body.as_array().unwrap().is_empty());
}

#[tokio::test]
async fn an_anonymous_body_is_refused_before_it_is_read() {
    let app = spawn_app_with_flags(&["--body-timeout", "30s"]).await;
    let mut s = TcpStream::connect(app.addr()).await.unwrap();
    let head = "POST /api/v1/stores HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{";
    s.write_all(head.as_bytes()).await.unwrap();
    let started = Instant::now();
    let mut buf = vec![0u8; 4096];
    let n = tokio::time::timeout(Duration::from_secs(10), s.read(&mut buf)).await.expect("answered").unwrap();
    let answer = String::from_utf8_lossy(&buf[..n]);
    assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");
    assert!(started.elapsed() < Duration::from_secs(5), "answered at once, not after the body timeout");
}

#[tokio::test]
async fn connections_past_the_cap_of_an_address_get_503() {
    let app = spawn_app_with_flags(&["--max-connections-per-address", "2"]).await;
    let (_a, _b) = (TcpStream::connect(app.addr()).await.unwrap(), TcpStream::connect(app.addr()).await.unwrap());
    let mut third = TcpStream::connect(app.addr()).await.unwrap();
    let refused = read_to_close(&mut third, Duration::from_secs(10)).await.expect("closed");
    assert!(refused.starts_with("HTTP/1.1 503"), "{refused}");
    assert!(refused.contains("Retry-After: 1"), "{refused}");
    drop((_a, _b));
    // Once the others close, the address is served again.
    let mut served = None;
    for _ in 0..100 {
        if let Some(a) = app.client.try_send(hyper::Method::GET, "/healthz", None, &[], None).await
            && a.status == 200
        {
            served = Some(a);
            break;
        }
        tokio::task::yield_now().await;
    }
    assert!(served.is_some(), "served again once the other connections closed");
}
