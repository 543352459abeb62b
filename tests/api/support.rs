#![allow(dead_code)] // helpers used by some test modules only
//! The test harness: starts the real server on 127.0.0.1:0 in a temp dir and talks HTTP to it.

use std::net::SocketAddr;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{HeaderMap, Method, Request, StatusCode};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};
use shopcell::cli::ServeArgs;
use shopcell::clock::Clock;
use shopcell::run::{self, Running};

/// How long a test waits for background work (the indexer, the publisher, the job runner, a
/// sweep, a warm-up, a process starting) before it gives up. When things work it takes
/// milliseconds; how fast is a figure of the benches, never a timed assertion here: the whole
/// suite shares two cores in CI, and a slow pass of a right answer must not fail a test.
pub const PATIENCE: std::time::Duration = std::time::Duration::from_secs(60);
/// How often a waiting test asks again.
const POLL: std::time::Duration = std::time::Duration::from_millis(20);

/// Answers `probe`'s first `Some`, asking every few milliseconds for at most [`PATIENCE`] of
/// real time; `None` when it never came (the caller says what did not happen).
pub async fn eventually<T, Fut>(mut probe: impl FnMut() -> Fut) -> Option<T>
where
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = std::time::Instant::now() + PATIENCE;
    loop {
        if let Some(found) = probe().await {
            return Some(found);
        }
        if std::time::Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Waits until `holds` (background work acting on a moved clock, say); panics naming `what`.
pub async fn wait_until(what: &str, mut holds: impl FnMut() -> bool) {
    let held = eventually(|| std::future::ready(holds().then_some(()))).await;
    assert!(held.is_some(), "{what}: not within {PATIENCE:?}");
}

/// Polls `GET path` (with `token` and `headers`) until `done` holds for its 200 body; answers
/// that body, or panics with what it answers once the patience is spent.
pub async fn get_until(
    c: &HttpClient,
    path: &str,
    token: Option<&str>,
    headers: &[(&str, &str)],
    done: impl Fn(&Value) -> bool,
) -> Value {
    let get = || async { c.send(Method::GET, path, token, headers, None).await.expect(200).body };
    match eventually(|| async { Some(get().await).filter(|body| done(body)) }).await {
        Some(body) => body,
        None => panic!("GET {path} still answers {} after {PATIENCE:?}", get().await),
    }
}

pub struct TestApp {
    pub server: Option<Running>,
    pub base: String,
    pub client: HttpClient,
    pub dir: tempfile::TempDir,
    /// The server's clock: a test moves time forward with `clock.advance` instead of sleeping.
    pub clock: Clock,
}

/// Starts `shopcell serve` in this process with a fresh data directory.
pub async fn spawn_app() -> TestApp {
    spawn_app_with_cells(&["cell-1"]).await
}

/// Starts `shopcell serve` again on an existing data directory (a restart). The returned app
/// does not own the directory: the caller's app keeps it alive.
pub async fn spawn_app_in(data: &std::path::Path) -> TestApp {
    spawn_app_in_on(data, Clock::system()).await
}

/// Like [`spawn_app_in`], on `clock` (the stopped app's, say, moved on while nothing ran).
pub async fn spawn_app_in_on(data: &std::path::Path, clock: Clock) -> TestApp {
    spawn_with(data, &["cell-1"], tempfile::tempdir().expect("temp dir"), clock).await
}

pub async fn spawn_app_with_cells(cells: &[&str]) -> TestApp {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().to_path_buf();
    spawn_with(&data, cells, dir, Clock::system()).await
}

/// Serves `data`; `dir` is kept alive by the app (the data directory itself, or a spare).
async fn spawn_with(data: &std::path::Path, cells: &[&str], dir: tempfile::TempDir, clock: Clock) -> TestApp {
    let mut args = default_args(data);
    args.cells = cells.iter().map(|c| c.to_string()).collect();
    serve(&args, dir, clock).await
}

/// The flags of a test's `serve`: one cell, data in `data`, every default.
pub fn default_args(data: &std::path::Path) -> ServeArgs {
    ServeArgs {
        data: data.to_path_buf(),
        listen: "127.0.0.1:0".parse().expect("address"),
        cells: vec!["cell-1".to_string()],
        demo: false,
        account: Default::default(),
        connections: Default::default(),
        cell: Default::default(),
        jobs_paused: false,
        memory: Default::default(),
    }
}

/// Starts `shopcell serve` whose outbound calls may reach `hosts` (loopback receivers).
pub async fn spawn_app_allowing(hosts: &[&str]) -> TestApp {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut args = default_args(dir.path());
    args.cell.outbound.outbound_allow = hosts.iter().map(|h| h.to_string()).collect();
    serve(&args, dir, Clock::system()).await
}

/// Builds and starts `shopcell serve` with `args` on `clock`, which the test gets with the app.
pub async fn serve(args: &ServeArgs, dir: tempfile::TempDir, clock: Clock) -> TestApp {
    let node = run::build_serve_with_clock(args, clock.clone()).expect("build serve");
    let server = run::spawn(node, args.listen).await.expect("spawn");
    let base = server.url();
    TestApp { server: Some(server), base: base.clone(), client: HttpClient::new(&base), dir, clock }
}

impl TestApp {
    pub async fn stop(&mut self) {
        if let Some(s) = self.server.take() {
            s.stop().await;
        }
    }

    /// The running server's first cell, for checks below the HTTP surface.
    pub fn cell(&self) -> std::sync::Arc<shopcell::cells::Cell> {
        self.server.as_ref().expect("running").node.cells["cell-1"].clone()
    }

    pub fn addr(&self) -> SocketAddr {
        self.server.as_ref().expect("running").addr
    }

    /// The process's service key, as operators' tools send it.
    pub fn service_key(&self) -> String {
        self.server.as_ref().expect("running").node.service_key.clone()
    }

    /// `GET /metrics` on the API port with the service key: the text of every family.
    pub async fn metrics(&self) -> String {
        let key = self.service_key();
        let a = self.client.send(Method::GET, "/metrics", None, &[("x-shopcell-service", key.as_str())], None).await;
        assert_eq!(a.status, StatusCode::OK, "{}", String::from_utf8_lossy(&a.raw));
        assert_eq!(a.headers.get("content-type").and_then(|v| v.to_str().ok()), Some("text/plain; version=0.0.4"));
        String::from_utf8(a.raw.to_vec()).expect("UTF-8")
    }
}

/// A minimal JSON client over hyper.
#[derive(Clone)]
pub struct HttpClient {
    pub base: String,
    pub inner: Client<HttpConnector, Full<Bytes>>,
}

/// An answer: status, headers and the body parsed as JSON (`Value::Null` when empty or not JSON).
pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Value,
    pub raw: Bytes,
}

impl HttpClient {
    pub fn new(base: &str) -> Self {
        HttpClient { base: base.to_string(), inner: Client::builder(TokioExecutor::new()).build(HttpConnector::new()) }
    }

    pub async fn send(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        headers: &[(&str, &str)],
        body: Option<Bytes>,
    ) -> Answer {
        self.try_send(method, path, token, headers, body).await.expect("the server answers")
    }

    /// Like [`send`](Self::send), but `None` when the server does not answer.
    pub async fn try_send(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        headers: &[(&str, &str)],
        body: Option<Bytes>,
    ) -> Option<Answer> {
        let mut b = Request::builder().method(method.clone()).uri(format!("{}{}", self.base, path));
        if let Some(t) = token {
            b = b.header("authorization", format!("Bearer {t}"));
        }
        let has_content_type = headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("content-type"));
        if body.is_some() && !has_content_type {
            b = b.header("content-type", "application/json");
        }
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        let req = b.body(Full::new(body.unwrap_or_default())).expect("request");
        let res = self.inner.request(req).await.ok()?;
        let status = res.status();
        let headers = res.headers().clone();
        let raw = res.into_body().collect().await.ok()?.to_bytes();
        crate::contract::check(&method, path, status.as_u16(), &headers, &raw);
        let body = serde_json::from_slice(&raw).unwrap_or(Value::Null);
        Some(Answer { status, headers, body, raw })
    }

    pub async fn get(&self, path: &str, token: Option<&str>) -> Answer {
        self.send(Method::GET, path, token, &[], None).await
    }

    pub async fn post(&self, path: &str, token: Option<&str>, body: Value) -> Answer {
        self.send(Method::POST, path, token, &[], Some(Bytes::from(body.to_string()))).await
    }

    pub async fn patch(&self, path: &str, token: Option<&str>, body: Value) -> Answer {
        self.send(Method::PATCH, path, token, &[], Some(Bytes::from(body.to_string()))).await
    }

    pub async fn put(&self, path: &str, token: Option<&str>, body: Value) -> Answer {
        self.send(Method::PUT, path, token, &[], Some(Bytes::from(body.to_string()))).await
    }

    pub async fn delete(&self, path: &str, token: Option<&str>) -> Answer {
        self.send(Method::DELETE, path, token, &[], None).await
    }
}

impl Answer {
    /// The error code of an error answer.
    pub fn code(&self) -> &str {
        self.body.pointer("/error/code").and_then(Value::as_str).unwrap_or("")
    }

    #[track_caller]
    pub fn expect(self, status: u16) -> Self {
        assert_eq!(self.status.as_u16(), status, "unexpected status; body: {}", String::from_utf8_lossy(&self.raw));
        self
    }
}

/// A registered user and their access token.
pub struct User {
    pub id: String,
    pub email: String,
    pub token: String,
    pub refresh: String,
}

pub const PASSWORD: &str = "correct horse battery";

pub async fn create_user(c: &HttpClient) -> User {
    let email = format!("user-{}@example.com", uuid::Uuid::now_v7().simple());
    let a = c
        .post("/api/v1/auth/register", None, json!({"email": email, "password": PASSWORD, "name": "Test User"}))
        .await
        .expect(201);
    User {
        id: a.body["user"]["id"].as_str().expect("user id").to_string(),
        email,
        token: a.body["accessToken"].as_str().expect("access token").to_string(),
        refresh: a.body["refreshToken"].as_str().expect("refresh token").to_string(),
    }
}

/// Creates a USD store owned by `user`; returns its id. A user at their plan's store limit is
/// moved to the pro plan first, so tests of any area can create several stores; the limits
/// themselves are tested in `subscriptions.rs`, without this helper.
pub async fn create_store(c: &HttpClient, user: &User) -> String {
    let body = json!({"name": "Test Store", "currency": "USD", "country": "US", "timezone": "UTC"});
    let mut a = c.post("/api/v1/stores", Some(&user.token), body.clone()).await;
    if a.status == StatusCode::UNPROCESSABLE_ENTITY && a.code() == "BUSINESS_RULE" {
        subscribe(c, user, "pro").await;
        a = c.post("/api/v1/stores", Some(&user.token), body).await;
    }
    a.expect(201).body["id"].as_str().expect("store id").to_string()
}

/// Subscribes `user` to a platform plan (the default plan allows one store per owner).
pub async fn subscribe(c: &HttpClient, user: &User, plan: &str) {
    c.post("/api/v1/subscriptions", Some(&user.token), json!({"planId": plan})).await.expect(200);
}

/// Creates a product priced `amount` cents; returns the product JSON.
pub async fn create_product(c: &HttpClient, user: &User, store: &str, title: &str, amount: i64) -> Value {
    c.post(
        &format!("/api/v1/stores/{store}/products"),
        Some(&user.token),
        json!({"title": title, "price": {"amount": amount, "currency": "USD"}, "status": "ACTIVE"}),
    )
    .await
    .expect(201)
    .body
}

/// A shopcell process started from the built binary; killed when dropped.
pub struct Proc {
    pub child: std::process::Child,
    pub url: String,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A free loopback port (bound and released; the process started next binds it), never one
/// this test run handed out before: tests run in parallel, and two processes told the same port
/// would answer each other's callers.
pub fn free_port() -> u16 {
    static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        let port = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
        if !given.contains(&port) {
            given.push(port);
            return port;
        }
    }
}

/// Starts `shopcell ARGS` listening on `port` and waits until `/healthz` answers.
pub async fn start_proc(args: &[&str], port: u16) -> Proc {
    let listen = format!("127.0.0.1:{port}");
    start_proc_with(&[args, &["--listen", &listen]].concat(), &[], port).await
}

/// Starts `shopcell ARGS` with `env` set, which listens on `port` by its flags or environment,
/// and waits until `/healthz` answers.
pub async fn start_proc_with(args: &[&str], env: &[(&str, &str)], port: u16) -> Proc {
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_shopcell"))
        .args(args)
        .envs(env.iter().copied())
        .env("SHOPCELL_LOG", "warn")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .expect("start shopcell");
    let url = format!("http://127.0.0.1:{port}");
    let client = HttpClient::new(&url);
    let proc = Proc { child, url };
    let up = eventually(|| async {
        let asked = tokio::time::timeout(std::time::Duration::from_millis(500), async {
            let req = client.inner.get(format!("{}/healthz", client.base).parse().expect("uri")).await;
            req.is_ok_and(|r| r.status().is_success())
        });
        asked.await.unwrap_or(false).then_some(())
    })
    .await;
    assert!(up.is_some(), "shopcell {args:?} did not come up");
    proc
}

/// The account service, one cell (`c1`) and a router, each its own process on loopback; the
/// processes stop when this is dropped.
pub struct Routed {
    pub router: Proc,
    pub cell: Proc,
    pub account: Proc,
    /// The service key file, for operator commands against the account service.
    pub service_key: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl Routed {
    /// The account service's data directory (its mail is under `mail/`).
    pub fn account_data(&self) -> std::path::PathBuf {
        self._dir.path().join("account")
    }

    pub async fn start() -> Routed {
        let dir = tempfile::tempdir().expect("temp dir");
        let data = |name: &str| dir.path().join(name).to_string_lossy().into_owned();
        let (pa, p1, pr) = (free_port(), free_port(), free_port());
        let (ua, c1) = (format!("http://127.0.0.1:{pa}"), format!("c1=http://127.0.0.1:{p1}"));
        let account_data = data("account");
        let account = start_proc(&["account", "--data", &account_data, "--cell", &c1], pa).await;
        let key = format!("{account_data}/account/service.key");
        let d1 = data("cell1");
        let cell = start_proc(&["cell", "--name", "c1", "--data", &d1, "--account", &ua, "--service-key-file", &key], p1).await;
        let router = start_proc(&["router", "--account", &ua, "--cell", &c1, "--service-key-file", &key], pr).await;
        Routed { router, cell, account, service_key: key.into(), _dir: dir }
    }
}

/// What a finished `shopcell` command did: exit code, stdout, stderr.
pub struct Ran {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `shopcell ARGS` to completion, `stdin` fed to it (none: empty), with `env` set.
pub fn run_shopcell(args: &[&str], stdin: Option<&str>, env: &[(&str, &str)]) -> Ran {
    use std::io::Write;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_shopcell"))
        .args(args)
        .envs(env.iter().copied())
        .env("SHOPCELL_LOG", "warn")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start shopcell");
    if let Some(mut input) = child.stdin.take() {
        input.write_all(stdin.unwrap_or("").as_bytes()).expect("stdin");
    }
    let out = child.wait_with_output().expect("shopcell ran");
    Ran {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}
