//! Shared machinery for the load benchmarks: an HTTP/1.1 load generator, the two baselines every
//! target is measured against (a bare hyper server and a one-fsync-per-transaction redb loop),
//! seeding through the public API; (in `server`) a launcher for the real `shopcell serve` binary;
//! and (in [`inspect`]) reading the server's `/metrics` and the size of its data.
//!
//! Machines are noisy, so a benchmark only ever reports ratios between figures taken in the same
//! run; nothing in here asserts on a timing.

// Each bench target compiles its own copy of this module and uses a subset of it.
#![allow(dead_code)]

pub mod inspect;
mod server;
pub mod shop;

// Like the rest of this module, each bench target uses some of these.
#[allow(unused_imports)]
pub use server::{InProcess, ServerProcess, Usage, served_binary};

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::header::{AUTHORIZATION, CONTENT_TYPE, HOST, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use redb::{Database, Durability, TableDefinition};
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio::runtime::Runtime;

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// What the load generator sends: the body is already in memory, so sending costs no I/O of its own.
pub type BenchRequest = Request<Full<Bytes>>;

// ---------------------------------------------------------------------------------------------
// Settings
// ---------------------------------------------------------------------------------------------

/// Run-wide knobs, read from the environment so a quick smoke run needs no code change.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Measured time per load scenario (`BENCH_SECONDS`, default 5, fractions allowed).
    pub duration: Duration,
    /// Unmeasured time before each scenario, so connections, caches and the allocator settle.
    pub warmup: Duration,
    /// Products seeded before the read scenarios (`BENCH_PRODUCTS`, default 10,000).
    pub products: usize,
    /// Open connections, one task each (the `wrk -c64` of LIMITS.md).
    pub connections: usize,
    /// `BENCH_ONLY_BASELINES=1` skips everything that needs the real server.
    pub only_baselines: bool,
}

impl Settings {
    pub fn from_env() -> Result<Self, BoxError> {
        let seconds: f64 = env_or("BENCH_SECONDS", 5.0)?;
        if !(seconds.is_finite() && seconds > 0.0) {
            return Err(format!("BENCH_SECONDS must be a positive number, got {seconds}").into());
        }
        let products: usize = env_or("BENCH_PRODUCTS", 10_000)?;
        if products == 0 {
            return Err("BENCH_PRODUCTS must be at least 1".into());
        }
        let duration = Duration::from_secs_f64(seconds);
        Ok(Self {
            duration,
            warmup: (duration / 5).min(Duration::from_secs(1)),
            products,
            connections: 64,
            only_baselines: std::env::var("BENCH_ONLY_BASELINES").is_ok_and(|v| v == "1"),
        })
    }
}

pub fn env_or<T>(name: &str, default: T) -> Result<T, BoxError>
where
    T: std::str::FromStr,
    T::Err: std::fmt::Display,
{
    match std::env::var(name) {
        Ok(raw) => raw.trim().parse().map_err(|e| format!("{name}={raw:?}: {e}").into()),
        Err(_) => Ok(default),
    }
}

/// The runtime shape used for both the load generator and the in-process baseline server: two
/// workers, matching the 2-vCPU build machine the targets in LIMITS.md were set on.
pub fn runtime(name: &str) -> std::io::Result<Runtime> {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).thread_name(name).enable_all().build()
}

// ---------------------------------------------------------------------------------------------
// Requests
// ---------------------------------------------------------------------------------------------

/// Where requests go and with which credentials; builds the requests the scenarios send.
#[derive(Clone, Debug)]
pub struct Endpoint {
    pub addr: SocketAddr,
    // hyper's connection-level client does not add `Host`; HTTP/1.1 requires it.
    host: HeaderValue,
    authorization: Option<HeaderValue>,
    accept_encoding: Option<HeaderValue>,
}

impl Endpoint {
    pub fn new(addr: SocketAddr) -> Self {
        let host = HeaderValue::from_str(&addr.to_string()).expect("a socket address is ASCII");
        Self { addr, host, authorization: None, accept_encoding: None }
    }

    /// The same credentials at another address (a server restarted on the same data).
    pub fn at(&self, addr: SocketAddr) -> Self {
        Self { authorization: self.authorization.clone(), accept_encoding: self.accept_encoding.clone(), ..Self::new(addr) }
    }

    /// Every request asks for a compressed answer (`gzip, br`).
    pub fn compressed(&self) -> Self {
        Self { accept_encoding: Some(HeaderValue::from_static("gzip, br")), ..self.clone() }
    }

    pub fn with_bearer(&self, token: &str) -> Result<Self, BoxError> {
        let value = HeaderValue::from_str(&format!("Bearer {token}"))?;
        Ok(Self { authorization: Some(value), ..self.clone() })
    }

    pub fn get(&self, path: &str) -> BenchRequest {
        self.request(Method::GET, path, None)
    }

    pub fn post_json(&self, path: &str, body: &Value) -> BenchRequest {
        let bytes = serde_json::to_vec(body).expect("a serde_json::Value always serializes");
        self.request(Method::POST, path, Some(Bytes::from(bytes)))
    }

    pub fn delete(&self, path: &str) -> BenchRequest {
        self.request(Method::DELETE, path, None)
    }

    pub fn patch_json(&self, path: &str, body: &Value) -> BenchRequest {
        let bytes = serde_json::to_vec(body).expect("a serde_json::Value always serializes");
        self.request(Method::PATCH, path, Some(Bytes::from(bytes)))
    }

    fn request(&self, method: Method, path: &str, json: Option<Bytes>) -> BenchRequest {
        let mut builder = Request::builder().method(method).uri(path).header(HOST, self.host.clone());
        if let Some(auth) = &self.authorization {
            builder = builder.header(AUTHORIZATION, auth.clone());
        }
        if let Some(coding) = &self.accept_encoding {
            builder = builder.header(hyper::header::ACCEPT_ENCODING, coding.clone());
        }
        if json.is_some() {
            builder = builder.header(CONTENT_TYPE, "application/json");
        }
        builder.body(Full::new(json.unwrap_or_default())).expect("benchmark paths are valid URIs")
    }
}

/// One keep-alive HTTP/1.1 connection that reconnects when the server closes it.
pub struct Client {
    addr: SocketAddr,
    sender: Option<SendRequest<Full<Bytes>>>,
    /// Connections opened after the first: a server that closes keep-alive connections pays a
    /// TCP handshake per request, which the report should make visible.
    pub reconnects: u64,
}

impl Client {
    pub fn new(addr: SocketAddr) -> Self {
        Self { addr, sender: None, reconnects: 0 }
    }

    /// Sends one request and reads the whole body (an unread body would stall keep-alive).
    pub async fn send(&mut self, request: BenchRequest) -> Result<(StatusCode, Bytes), BoxError> {
        let sender = self.ready_sender().await?;
        let response = match sender.send_request(request).await {
            Ok(response) => response,
            Err(e) => {
                self.sender = None;
                return Err(e.into());
            }
        };
        let status = response.status();
        match response.into_body().collect().await {
            Ok(body) => Ok((status, body.to_bytes())),
            Err(e) => {
                self.sender = None;
                Err(e.into())
            }
        }
    }

    async fn ready_sender(&mut self) -> Result<&mut SendRequest<Full<Bytes>>, BoxError> {
        let alive = match &mut self.sender {
            Some(sender) => sender.ready().await.is_ok(),
            None => false,
        };
        if !alive {
            if self.sender.is_some() {
                self.reconnects += 1;
            }
            // Drop the dead connection first, so a failed connect leaves no stale sender behind.
            self.sender = None;
            self.sender = Some(connect(self.addr).await?);
        }
        Ok(self.sender.as_mut().expect("connected above"))
    }
}

async fn connect(addr: SocketAddr) -> Result<SendRequest<Full<Bytes>>, BoxError> {
    let stream = TcpStream::connect(addr).await?;
    // Small requests back-to-back: Nagle would add delayed-ACK stalls to every latency.
    stream.set_nodelay(true)?;
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    // The connection future does the actual I/O; its error surfaces through `sender`.
    tokio::spawn(connection);
    Ok(sender)
}

// ---------------------------------------------------------------------------------------------
// Load generator
// ---------------------------------------------------------------------------------------------

/// Latencies of successful requests, kept whole: a few hundred thousand samples are a few MB and
/// give exact percentiles without bucket error.
#[derive(Default)]
pub struct Latencies(Vec<u64>);

impl Latencies {
    fn record(&mut self, latency: Duration) {
        self.0.push(latency.as_nanos().try_into().unwrap_or(u64::MAX));
    }

    /// The `p`-quantile (0.0..=1.0) by the nearest-rank method; zero when nothing was recorded.
    pub fn percentile(&self, p: f64) -> Duration {
        if self.0.is_empty() {
            return Duration::ZERO;
        }
        let rank = ((p * self.0.len() as f64).ceil() as usize).clamp(1, self.0.len());
        Duration::from_nanos(self.0[rank - 1])
    }
}

/// What one scenario measured.
pub struct LoadReport {
    /// 2xx responses completed inside the measured window.
    pub ok: u64,
    /// Non-2xx responses and transport failures, warm-up included: any error is a defect.
    pub errors: u64,
    pub reconnects: u64,
    /// The first error seen (status and start of the body, or the transport error).
    pub first_error: Option<String>,
    pub window: Duration,
    pub latencies: Latencies,
}

impl LoadReport {
    fn empty(window: Duration) -> Self {
        Self { ok: 0, errors: 0, reconnects: 0, first_error: None, window, latencies: Latencies::default() }
    }

    pub fn requests_per_second(&self) -> f64 {
        self.ok as f64 / self.window.as_secs_f64()
    }
}

/// Drives `addr` from `settings.connections` connections, each a task sending requests
/// back-to-back, for the warm-up plus the measured window. `make_request` receives a counter that
/// is unique across all connections, so scenarios can rotate over ids or pages.
pub async fn run_load<F>(addr: SocketAddr, settings: &Settings, make_request: F) -> LoadReport
where
    F: Fn(u64) -> BenchRequest + Send + Sync + 'static,
{
    let make_request = Arc::new(make_request);
    let counter = Arc::new(AtomicU64::new(0));
    let measure_from = Instant::now() + settings.warmup;
    let end = measure_from + settings.duration;

    let tasks: Vec<_> = (0..settings.connections)
        .map(|_| {
            let make_request = Arc::clone(&make_request);
            let counter = Arc::clone(&counter);
            tokio::spawn(async move {
                let mut client = Client::new(addr);
                let mut report = LoadReport::empty(end - measure_from);
                while Instant::now() < end {
                    let request = make_request(counter.fetch_add(1, Ordering::Relaxed));
                    let started = Instant::now();
                    let outcome = client.send(request).await;
                    let finished = Instant::now();
                    match outcome {
                        Ok((status, _)) if status.is_success() => {
                            // Only requests wholly inside the window count, so the warm-up and
                            // the requests cut off at the end do not skew the rate.
                            if started >= measure_from && finished <= end {
                                report.ok += 1;
                                report.latencies.record(finished - started);
                            }
                        }
                        Ok((status, body)) => {
                            report.errors += 1;
                            report.first_error.get_or_insert_with(|| describe_status(status, &body));
                        }
                        Err(e) => {
                            report.errors += 1;
                            report.first_error.get_or_insert_with(|| e.to_string());
                            // A refused connection would otherwise spin this task at full speed.
                            tokio::time::sleep(Duration::from_millis(10)).await;
                        }
                    }
                }
                report.reconnects = client.reconnects;
                report
            })
        })
        .collect();

    let mut total = LoadReport::empty(end - measure_from);
    for task in tasks {
        let part = task.await.expect("a load task never panics");
        total.ok += part.ok;
        total.errors += part.errors;
        total.reconnects += part.reconnects;
        total.first_error = total.first_error.or(part.first_error);
        total.latencies.0.extend(part.latencies.0);
    }
    total.latencies.0.sort_unstable();
    total
}

/// Sends `count` requests with at most `concurrency` in flight and returns every outcome in
/// request order, with the wall time; used to seed data and to time the seeding.
pub async fn run_batch<F>(
    addr: SocketAddr,
    concurrency: usize,
    count: usize,
    make_request: F,
) -> (Vec<Result<(StatusCode, Bytes), String>>, Duration)
where
    F: Fn(u64) -> BenchRequest + Send + Sync + 'static,
{
    let make_request = Arc::new(make_request);
    let counter = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let tasks: Vec<_> = (0..concurrency.min(count))
        .map(|_| {
            let make_request = Arc::clone(&make_request);
            let counter = Arc::clone(&counter);
            tokio::spawn(async move {
                let mut client = Client::new(addr);
                let mut outcomes = Vec::new();
                loop {
                    let index = counter.fetch_add(1, Ordering::Relaxed);
                    if index >= count as u64 {
                        break outcomes;
                    }
                    let outcome = client.send(make_request(index)).await;
                    outcomes.push((index, outcome.map_err(|e| e.to_string())));
                }
            })
        })
        .collect();

    let mut all = Vec::with_capacity(count);
    for task in tasks {
        all.extend(task.await.expect("a batch task never panics"));
    }
    let elapsed = started.elapsed();
    all.sort_unstable_by_key(|(index, _)| *index);
    (all.into_iter().map(|(_, outcome)| outcome).collect(), elapsed)
}

/// A short, printable description of an unexpected response.
pub fn describe_status(status: StatusCode, body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let mut snippet: String = text.chars().take(200).collect();
    if text.chars().count() > 200 {
        snippet.push('…');
    }
    format!("HTTP {status}: {snippet}")
}

// ---------------------------------------------------------------------------------------------
// Baseline A: bare hyper
// ---------------------------------------------------------------------------------------------

/// Size of the fixed answer, the one the LIMITS.md ceiling was measured with.
pub const BARE_BODY_LEN: usize = 364;

/// A hyper HTTP/1.1 server with no routing, auth or storage: the ceiling any route can approach.
/// It owns its runtime, so it must be dropped outside any async context.
pub struct BareServer {
    pub addr: SocketAddr,
    _runtime: Runtime,
}

pub fn start_bare_hyper() -> Result<BareServer, BoxError> {
    start_bare_hyper_sized(BARE_BODY_LEN)
}

/// [`start_bare_hyper`] answering `len` bytes (at least [`BARE_BODY_LEN`]): what the transport
/// alone allows for an answer of a route's size.
pub fn start_bare_hyper_sized(len: usize) -> Result<BareServer, BoxError> {
    let runtime = runtime("bare-hyper")?;
    let listener = runtime.block_on(TcpListener::bind("127.0.0.1:0"))?;
    let addr = listener.local_addr()?;
    let body = Bytes::from(fixed_json_body(len));
    runtime.spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let body = body.clone();
            tokio::spawn(async move {
                // Same socket option as the client side, so neither end adds Nagle delays.
                let _ = stream.set_nodelay(true);
                let service = hyper::service::service_fn(move |_request| {
                    let response = Response::builder()
                        .header(CONTENT_TYPE, "application/json")
                        .body(Full::new(body.clone()))
                        .expect("static headers are valid");
                    async move { Ok::<_, Infallible>(response) }
                });
                // A client hanging up mid-request is normal at the end of a scenario.
                let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
            });
        }
    });
    Ok(BareServer { addr, _runtime: runtime })
}

/// A product-shaped JSON document padded to exactly `len` bytes ([`BARE_BODY_LEN`] or more).
fn fixed_json_body(len: usize) -> Vec<u8> {
    let mut product = json!({
        "id": "01936c1e-7a4b-7cde-8f01-23456789abcd",
        "storeId": "01936c1e-0000-7000-8000-000000000001",
        "title": "Product 1 Red Mug",
        "status": "ACTIVE",
        "price": {"amount": 1999, "currency": "USD", "formatted": "$19.99"},
        "createdAt": "2025-01-01T00:00:00Z",
        "description": "",
    });
    let unpadded = serde_json::to_vec(&product).expect("serializes").len();
    let padding = len.checked_sub(unpadded).expect("the template is smaller than the target size");
    product["description"] = Value::String("x".repeat(padding));
    let body = serde_json::to_vec(&product).expect("serializes");
    debug_assert_eq!(body.len(), len);
    body
}

// ---------------------------------------------------------------------------------------------
// Baseline B: one fsync per redb transaction
// ---------------------------------------------------------------------------------------------

const BASELINE_TABLE: TableDefinition<u64, &[u8]> = TableDefinition::new("baseline");

/// Committed one-row durable transactions and the time they took.
pub struct FsyncBaseline {
    pub transactions: u64,
    pub elapsed: Duration,
}

impl FsyncBaseline {
    pub fn per_second(&self) -> f64 {
        self.transactions as f64 / self.elapsed.as_secs_f64()
    }
}

/// Commits one-row `Durability::Immediate` transactions back-to-back for `duration`: the rate a
/// server reaches if every write request pays its own fsync. `dir` should be on the same disk as
/// the server's data.
pub fn redb_fsync_baseline(dir: &Path, duration: Duration) -> Result<FsyncBaseline, BoxError> {
    let db = Database::create(dir.join("fsync-baseline.redb"))?;
    // Roughly the size of an encoded product record.
    let row = [7u8; 300];
    let started = Instant::now();
    let mut transactions = 0u64;
    while started.elapsed() < duration {
        let mut tx = db.begin_write()?;
        tx.set_durability(Durability::Immediate)?;
        {
            let mut table = tx.open_table(BASELINE_TABLE)?;
            table.insert(transactions, row.as_slice())?;
        }
        tx.commit()?;
        transactions += 1;
    }
    Ok(FsyncBaseline { transactions, elapsed: started.elapsed() })
}

// ---------------------------------------------------------------------------------------------
// Seeding through the API
// ---------------------------------------------------------------------------------------------

/// A registered owner, their store, and the products created in it.
pub struct Seeded {
    pub token: String,
    pub store_id: String,
    pub product_ids: Vec<String>,
    /// Wall time of the product creates alone.
    pub products_elapsed: Duration,
}

/// The words product titles are made of (see [`product_body`]).
pub const ADJECTIVES: [&str; 8] = ["Red", "Blue", "Vintage", "Organic", "Classic", "Wireless", "Compact", "Linen"];
pub const NOUNS: [&str; 8] = ["Mug", "Lamp", "Chair", "Shirt", "Headphones", "Backpack", "Notebook", "Bottle"];

/// The create-product body for product number `n`: varied titles for search benchmarks and a
/// spread of prices so sorting by price does real work.
pub fn product_body(n: u64) -> Value {
    let adjective = ADJECTIVES[(n % 8) as usize];
    let noun = NOUNS[(n / 8 % 8) as usize];
    json!({
        "title": format!("Product {n} {adjective} {noun}"),
        "price": {"amount": 100 + (n * 7919) % 99_900, "currency": "USD"},
        "status": "ACTIVE",
    })
}

/// Registers a fresh user, creates a store, and creates `products` products with `concurrency`
/// requests in flight. Any failed request is an error: later scenarios would measure nothing.
pub async fn seed(endpoint: &Endpoint, products: usize, concurrency: usize) -> Result<Seeded, BoxError> {
    let mut client = Client::new(endpoint.addr);
    let email = format!("bench-{}@example.com", uuid::Uuid::now_v7().simple());
    let register = endpoint
        .post_json("/api/v1/auth/register", &json!({"email": email, "password": "bench-password-1234", "name": "Bench Owner"}));
    let login = expect_json(client.send(register).await?, StatusCode::CREATED, "register")?;
    let token = string_field(&login, "accessToken", "register")?;
    let authed = endpoint.with_bearer(&token)?;

    let create_store =
        authed.post_json("/api/v1/stores", &json!({"name": "Bench", "currency": "USD", "country": "US", "timezone": "UTC"}));
    let store = expect_json(client.send(create_store).await?, StatusCode::CREATED, "create store")?;
    let store_id = string_field(&store, "id", "create store")?;

    let path = format!("/api/v1/stores/{store_id}/products");
    let creator = authed.clone();
    let (outcomes, products_elapsed) =
        run_batch(endpoint.addr, concurrency, products, move |n| creator.post_json(&path, &product_body(n))).await;
    let mut product_ids = Vec::with_capacity(products);
    let mut failures = Vec::new();
    for outcome in outcomes {
        match outcome
            .map_err(BoxError::from)
            .and_then(|response| expect_json(response, StatusCode::CREATED, "create product"))
            .and_then(|product| string_field(&product, "id", "create product"))
        {
            Ok(id) => product_ids.push(id),
            Err(e) => failures.push(e.to_string()),
        }
    }
    if let Some(first) = failures.first() {
        return Err(format!("{} of {products} product creates failed; first: {first}", failures.len()).into());
    }
    Ok(Seeded { token, store_id, product_ids, products_elapsed })
}

/// Checks the status and parses the body, naming the step in the error.
pub fn expect_json((status, body): (StatusCode, Bytes), expected: StatusCode, step: &str) -> Result<Value, BoxError> {
    if status != expected {
        return Err(format!("{step}: expected {expected}, got {}", describe_status(status, &body)).into());
    }
    serde_json::from_slice(&body)
        .map_err(|e| format!("{step}: body is not JSON ({e}): {}", describe_status(status, &body)).into())
}

fn string_field(value: &Value, field: &str, step: &str) -> Result<String, BoxError> {
    value[field].as_str().map(str::to_owned).ok_or_else(|| format!("{step}: response has no string `{field}`: {value}").into())
}
