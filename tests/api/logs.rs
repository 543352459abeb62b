//! The log of a real `shopcell serve` process written to a file: JSON access lines by default
//! when stderr is not a terminal, one per request with the route's pattern, status, duration,
//! bytes, request id and the client by the `--trusted-proxy` rule, and never a query string, a
//! token or a password; `--log-format text` has no colour codes in a file either.

use std::path::Path;
use std::process::{Child, Command, Stdio};

use hyper::Method;
use serde_json::{Value, json};

use crate::support::*;

/// `shopcell serve` on `port` with its stderr in `log`, ready once `/healthz` answers.
async fn serve_logging_to(data: &Path, log: &Path, port: u16, extra: &[&str]) -> (Child, HttpClient) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_shopcell"))
        .args(["serve", "--data", &data.to_string_lossy(), "--listen", &format!("127.0.0.1:{port}"), "--memory", "256MB"])
        .args(extra)
        .env_remove("SHOPCELL_LOG")
        .env_remove("SHOPCELL_LOG_FORMAT")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .expect("start shopcell");
    let client = HttpClient::new(&format!("http://127.0.0.1:{port}"));
    let ready =
        eventually(|| async { client.try_send(Method::GET, "/readyz", None, &[], None).await.filter(|a| a.status == 200) }).await;
    if ready.is_some() {
        return (child, client);
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("shopcell did not come up: {}", std::fs::read_to_string(log).unwrap_or_default());
}

/// Stops the process as systemd does (SIGTERM): the log writer empties its queue on the way out.
fn stop(mut child: Child) {
    let status = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(status.success());
    assert!(child.wait().unwrap().success(), "a clean stop");
}

const TOKEN: &str = "eyJhbGciOiJSUzI1NiJ9.sekrit-token-4711.sig";
const PASSWORD: &str = "pw-never-logged-8832";
const QUERY: &str = "querysecret9921";

#[tokio::test]
async fn access_lines_are_json_with_the_route_pattern_and_never_a_secret() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("stderr.log");
    let (child, c) = serve_logging_to(&dir.path().join("data"), &log, free_port(), &["--trusted-proxy", "127.0.0.1"]).await;
    let store = uuid::Uuid::now_v7().to_string();
    // A token and a query string on a store route; a password in a sign-in body; a client
    // address vouched for by the trusted proxy (loopback here).
    let path = format!("/api/v1/stores/{store}/products");
    let refused = c.send(Method::GET, &path, Some(TOKEN), &[("x-request-id", "req-products-1")], None).await;
    assert_eq!(refused.status, 401);
    let queried = c.send(Method::GET, &format!("{path}?code={QUERY}"), None, &[("x-request-id", "req-query")], None).await;
    assert_eq!(queried.status, 400);
    let login = json!({"email": "nobody@example.com", "password": PASSWORD}).to_string();
    let signin =
        c.send(Method::POST, "/api/v1/auth/login", None, &[("x-forwarded-for", "203.0.113.9")], Some(login.into())).await;
    assert_eq!(signin.status, 401);
    c.get("/healthz", None).await.expect(200);
    stop(child);

    let text = std::fs::read_to_string(&log).unwrap();
    assert!(!text.contains('\u{1b}'), "no colour codes in a file: {text}");
    for secret in [TOKEN, "sekrit-token-4711", PASSWORD, QUERY, store.as_str()] {
        assert!(!text.contains(secret), "{secret:?} is never logged: {text}");
    }
    let lines: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).expect("every line is JSON")).collect();
    let access: Vec<&Value> = lines.iter().filter(|l| l["target"] == "access").collect();
    assert_eq!(access.len(), 5, "one line per request (the readiness poll included): {text}");
    let products = access.iter().find(|l| l["request_id"] == "req-products-1").expect("the products line");
    assert_eq!(products["level"], "INFO");
    assert_eq!(products["method"], "GET");
    assert_eq!(products["route"], "/api/v1/stores/{storeId}/products");
    assert_eq!(products["status"], 401);
    assert_eq!(products["client"], "127.0.0.1", "no forwarded header: the peer");
    assert_eq!(products["bytes"].as_u64(), Some(refused.raw.len() as u64));
    assert!(products["duration_ms"].as_f64().is_some_and(|d| (0.0..10_000.0).contains(&d)), "{products}");
    let queried = access.iter().find(|l| l["request_id"] == "req-query").expect("the query's line");
    assert_eq!((queried["route"].as_str(), queried["status"].as_u64()), (Some("/api/v1/stores/{storeId}/products"), Some(400)));
    let login = access.iter().find(|l| l["route"] == "/api/v1/auth/login").expect("the sign-in line");
    assert_eq!((login["method"].as_str(), login["status"].as_u64()), (Some("POST"), Some(401)));
    assert_eq!(login["client"], "203.0.113.9", "the trusted proxy's client");
    let generated = login["request_id"].as_str().unwrap();
    assert_eq!(Some(generated), signin.headers.get("x-request-id").and_then(|v| v.to_str().ok()), "the id the caller got");
    assert!(access.iter().any(|l| l["route"] == "/healthz" && l["status"] == 200 && l["bytes"] == 15), "{text}");
}

#[tokio::test]
async fn text_logs_in_a_file_have_no_colour_codes_and_an_untrusted_forward_is_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("stderr.log");
    let (child, c) = serve_logging_to(&dir.path().join("data"), &log, free_port(), &["--log-format", "text"]).await;
    let headers = [("x-forwarded-for", "203.0.113.9"), ("x-request-id", "req-text-healthz")];
    let a = c.send(Method::GET, "/healthz", None, &headers, None).await;
    assert_eq!(a.status, 200);
    stop(child);
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(!text.contains('\u{1b}'), "no colour codes: {text}");
    assert!(serde_json::from_str::<Value>(text.lines().next().unwrap_or("")).is_err(), "text, not JSON: {text}");
    let line = text.lines().find(|l| l.contains("req-text-healthz")).unwrap_or_else(|| panic!("the access line: {text}"));
    assert!(line.contains("route=\"/healthz\"") || line.contains("route=/healthz"), "{line}");
    assert!(line.contains(" INFO ") && line.contains("access") && line.contains("status=200"), "{line}");
    assert!(line.contains("client=127.0.0.1") && !text.contains("203.0.113.9"), "{text}");
}
