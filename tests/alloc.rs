//! Allocations per request on the hot paths: one product, a list page, a product search and a
//! calculation. A counting global allocator sees every allocation of this process — the server,
//! its background threads and the test's own client — so each path is held to the figure it had
//! when it was first measured, and an extra clone or buffer on any of them fails here.
//!
//! Its own test binary because a global allocator is process-wide: in the `api` binary the other
//! tests' servers would allocate into the same counter.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::header::{AUTHORIZATION, CONTENT_TYPE, HOST, HeaderValue};
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use shopcell::cells::product_search;
use shopcell::cli::{CacheArgs, CellOptions, ServeArgs};
use shopcell::run::{self, Running};

/// Counts every call that hands out memory (`alloc`, `alloc_zeroed`, `realloc`); frees are not
/// counted, since each is paired with one of those.
struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

// SAFETY: every call is forwarded unchanged to the system allocator.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's contract for `layout` is passed on as is.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator, hence from `System`, with this `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: as for `dealloc`; `new_size` is checked by the caller.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Requests sent before measuring, so that connection buffers, caches, pooled threads and lazily
/// built tables have reached their steady state.
const WARM_UP: usize = 200;
/// Requests per measured window. Windows are short so that most of them fall between two
/// wake-ups of the background threads (the indexer's tick every 250 ms, a search segment merge,
/// the publisher): those allocate too, and the count cannot tell whose an allocation is.
const WINDOW: u64 = 25;
/// Measured windows per path. Background work only ever adds to a window, and a request's own
/// allocations are the same every time (the windows of a quiet machine agree to the allocation),
/// so the smallest window is the requests' own count: no tolerance is needed.
const WINDOWS: usize = 20;

/// Products in the store: enough for a second list page of 20 and a search answer of a full page.
const PRODUCTS: usize = 50;

// Allocations per request before the record layer and typed replies (issue 22): measured by this
// test at commit fc55de7 on 2026-11-25 with `cargo test --release --test alloc`, the same in every
// run; the unoptimised build of `cargo test` counts the same. Whole-process counts, server and
// client together (see `measure`).
const BEFORE_PRODUCT_GET: u64 = 26;
const BEFORE_LIST_PAGE_CACHED: u64 = 32;
const BEFORE_LIST_PAGE_COMPUTED: u64 = 52;
const BEFORE_SEARCH_CACHED: u64 = 29;
const BEFORE_SEARCH_COMPUTED: u64 = 99;
const BEFORE_CALCULATE: u64 = 116;

/// One hot path: where it is sent and what it is held to.
struct Path {
    name: &'static str,
    method: Method,
    uri: String,
    body: Bytes,
    before: Option<u64>,
}

#[test]
fn hot_paths_allocate_no_more_per_request_than_before() {
    // One thread runs server and client alike, as in the `api` tests: the order in which their
    // tasks run is then the same in every window, and so are their allocations.
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let mut figures = runtime.block_on(async {
        // The answer caches serve repeated list pages and searches; each is measured once served
        // from its cache (the default) and once computed afresh (caches off, a second server).
        let mut figures = measure_server(true).await;
        figures.extend(measure_server(false).await);
        figures
    });
    figures.sort_by_key(|f| f.name);

    println!("{:<26} {:>8} {:>8} {:>8} {:>8}", "path", "now", "before", "quiet", "busiest");
    let mut grew = Vec::new();
    for f in &figures {
        let now = f.fewest as f64 / WINDOW as f64;
        let before = f.before.map(|b| b.to_string()).unwrap_or_else(|| "-".into());
        // The windows background work stayed out of, and the busiest one, to show the noise.
        let quiet = f.windows.iter().filter(|&&w| w == f.fewest).count();
        let busiest = f.windows.iter().copied().max().unwrap_or(0) as f64 / WINDOW as f64;
        println!("{:<26} {now:>8.2} {before:>8} {:>8} {busiest:>8.2}", f.name, format!("{quiet}/{WINDOWS}"));
        // Compared as whole-window counts: exact, no rounding of a division.
        if let Some(b) = f.before
            && f.fewest > b * WINDOW
        {
            grew.push(format!("{}: {now:.2} allocations per request, {b} before", f.name));
        }
    }
    assert!(grew.is_empty(), "more allocations per request than before:\n{}", grew.join("\n"));
}

/// What one path measured.
struct Figure {
    name: &'static str,
    /// Allocations in the quietest window (of `WINDOW` requests).
    fewest: u64,
    before: Option<u64>,
    /// Allocations in every window, in order.
    windows: Vec<u64>,
}

/// Starts a server with its answer caches on or off, seeds a store and measures its paths.
async fn measure_server(answer_cache: bool) -> Vec<Figure> {
    let dir = tempfile::tempdir().expect("temp dir");
    let args = ServeArgs {
        data: dir.path().to_path_buf(),
        listen: "127.0.0.1:0".parse().expect("address"),
        cells: vec!["cell-1".into()],
        demo: false,
        account: Default::default(),
        connections: Default::default(),
        cell: CellOptions { caches: CacheArgs { answer_cache }, ..Default::default() },
        jobs_paused: false,
        memory: Default::default(),
    };
    let server = serve(&args).await;
    let mut client = Client::connect(server.addr).await;
    let shop = seed(&mut client).await;
    // Stopped only once the indexer has caught up, so that no change is left in its outbox to be
    // replayed on the next start.
    wait_searchable(&mut client, &shop).await;
    drop(client);
    server.stop().await;
    // The index as the seeding left it has as many segments as the indexer made passes, which
    // depends on how fast the creates came (and tantivy merges them in the background): a
    // search's allocations grow with the segments. Rebuilt offline it is one segment, the same
    // in every run.
    let indexed = product_search::reindex_offline(&run::cell_dir(&args.data, "cell-1")).expect("reindex");
    assert_eq!(indexed, PRODUCTS as u64, "products indexed");
    let server = serve(&args).await;
    let mut client = Client::connect(server.addr).await;
    wait_searchable(&mut client, &shop).await;

    let list = format!("{}/products?page=2&limit=20&sortBy=price&sortOrder=asc", shop.base);
    let search = format!("{}/products/search?q=chiar&limit=20", shop.base);
    let get = |name, uri, before| Path { name, method: Method::GET, uri, body: Bytes::new(), before };
    let paths = if answer_cache {
        vec![
            // The floor under every path: routing, the connection and the client, no handler work.
            get("GET /healthz", "/healthz".into(), None),
            get("GET product", format!("{}/products/{}", shop.base, shop.product), Some(BEFORE_PRODUCT_GET)),
            get("GET list page (cached)", list, Some(BEFORE_LIST_PAGE_CACHED)),
            get("GET search (cached)", search, Some(BEFORE_SEARCH_CACHED)),
            Path {
                name: "POST calculate",
                method: Method::POST,
                uri: format!("{}/calculate", shop.base),
                body: shop.calculation.clone(),
                before: Some(BEFORE_CALCULATE),
            },
        ]
    } else {
        vec![
            get("GET list page (computed)", list, Some(BEFORE_LIST_PAGE_COMPUTED)),
            get("GET search (computed)", search, Some(BEFORE_SEARCH_COMPUTED)),
        ]
    };

    let mut figures = Vec::new();
    for path in &paths {
        check_answer(&mut client, &shop, path).await;
        figures.push(measure(&mut client, &shop.token, path).await);
    }
    drop(client);
    server.stop().await;
    figures
}

async fn serve(args: &ServeArgs) -> Running {
    run::spawn(run::build_serve(args).expect("build serve"), args.listen).await.expect("spawn")
}

/// Waits until a search finds the last product created.
async fn wait_searchable(client: &mut Client, shop: &Shop) {
    let last = format!("{}/products/search?q=SKU-{:03}-L&searchBy=sku", shop.base, PRODUCTS - 1);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (status, body) = client.send(Method::GET, &last, Some(&shop.token), Bytes::new()).await;
        assert_eq!(status, StatusCode::OK, "search: {body}");
        if body["total"] == 1 {
            return;
        }
        assert!(Instant::now() < deadline, "the last product is not searchable after a minute: {body}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Sends `path` `WARM_UP` times, then `WINDOWS` windows of `WINDOW` requests one after another,
/// each answered in full before the next is sent. A window counts every allocation of the process
/// between its first request and its last answer: the server's work, and the client's (building
/// the request, reading the response head, draining the body without keeping it). The client's
/// part is not subtracted — it depends on the answer's size and headers, so a baseline from a
/// trivial route would not match it — but it is the same before and after as long as the answers
/// are; `GET /healthz` is measured alongside as the floor of client, connection and routing.
async fn measure(client: &mut Client, token: &HeaderValue, path: &Path) -> Figure {
    for _ in 0..WARM_UP {
        client.hit(path, token).await;
    }
    let mut windows = Vec::with_capacity(WINDOWS);
    for _ in 0..WINDOWS {
        let start = ALLOCATIONS.load(Ordering::SeqCst);
        for _ in 0..WINDOW {
            client.hit(path, token).await;
        }
        windows.push(ALLOCATIONS.load(Ordering::SeqCst) - start);
    }
    let fewest = windows.iter().copied().min().unwrap_or(0);
    Figure { name: path.name, fewest, before: path.before, windows }
}

/// Checks once, outside the measured windows, that `path` answers what it should: a measurement
/// of an error answer would hold nothing.
async fn check_answer(client: &mut Client, shop: &Shop, path: &Path) {
    let (status, body) = client.send(path.method.clone(), &path.uri, Some(&shop.token), path.body.clone()).await;
    assert_eq!(status, StatusCode::OK, "{} {}: {body}", path.method, path.uri);
    let fine = match path.name {
        "GET /healthz" => true,
        "GET product" => body["variants"].as_array().map(Vec::len) == Some(2),
        n if n.starts_with("GET list page") => {
            body["data"].as_array().map(Vec::len) == Some(20) && body["total"] == PRODUCTS && body["page"] == 2
        }
        n if n.starts_with("GET search") => body["data"].as_array().map(Vec::len) == Some(shop.chairs),
        "POST calculate" => {
            body["taxLines"].as_array().map(Vec::len) == Some(2)
                && body["discountApplications"].as_array().map(Vec::len) == Some(3)
                && body["shipping"]["amount"] == 2500
        }
        other => panic!("no check for {other}"),
    };
    assert!(fine, "{} {} answered an unexpected body: {body}", path.method, path.uri);
}

/// A store with `PRODUCTS` products of two variants each, two discount codes and an automatic
/// discount, Canadian tax rates and a shipping zone, as the `selling` benchmark seeds it.
struct Shop {
    token: HeaderValue,
    base: String,
    product: String,
    /// Products whose title has the word "Chair", which the search (`q=chiar`, a typo) finds.
    chairs: usize,
    calculation: Bytes,
}

const ADJECTIVES: [&str; 4] = ["Blue", "Oak", "Soft", "Tall"];
const NOUNS: [&str; 3] = ["Chair", "Lamp", "Table"];

async fn seed(client: &mut Client) -> Shop {
    let register = json!({"email": "owner@example.com", "password": "correct horse battery", "name": "Owner"});
    let (status, body) = client.post("/api/v1/auth/register", None, &register).await;
    assert_eq!(status, StatusCode::CREATED, "register: {body}");
    let token = HeaderValue::from_str(&format!("Bearer {}", body["accessToken"].as_str().expect("access token"))).expect("token");
    let t = Some(&token);
    let store = json!({"name": "Allocations", "currency": "USD", "country": "US", "timezone": "UTC"});
    let (status, body) = client.post("/api/v1/stores", t, &store).await;
    assert_eq!(status, StatusCode::CREATED, "create store: {body}");
    let base = format!("/api/v1/stores/{}", body["id"].as_str().expect("store id"));

    let mut products = Vec::new();
    let mut lines = Vec::new();
    let mut chairs = 0;
    for n in 0..PRODUCTS {
        let noun = NOUNS[n % NOUNS.len()];
        chairs += usize::from(noun == "Chair");
        let price = 1000 + (n as i64 * 7919) % 9000;
        let product = json!({
            "title": format!("Product {n} {} {noun}", ADJECTIVES[n / NOUNS.len() % ADJECTIVES.len()]),
            "status": "ACTIVE",
            "variants": [
                {"title": "Small", "sku": format!("SKU-{n:03}-S"), "price": {"amount": price, "currency": "USD"}, "weightGrams": 400},
                {"title": "Large", "sku": format!("SKU-{n:03}-L"), "price": {"amount": price + 500, "currency": "USD"}, "weightGrams": 900},
            ],
        });
        let (status, body) = client.post(&format!("{base}/products"), t, &product).await;
        assert_eq!(status, StatusCode::CREATED, "create product: {body}");
        if n < 10 {
            lines.push(json!({"variantId": body["variants"][n % 2]["id"], "quantity": 1 + n % 3}));
        }
        products.push(body["id"].as_str().expect("product id").to_string());
    }

    let discounts = [
        json!({"title": "Chairs 15", "code": "CHAIRS15", "valueType": "percentage", "value": 1500, "target": "products",
               "productIds": [products[0], products[3]], "combinesWith": {"orderDiscounts": true}}),
        json!({"title": "Five off", "code": "ORDER5", "valueType": "fixedAmount", "value": 500,
               "combinesWith": {"productDiscounts": true, "orderDiscounts": true}}),
        json!({"title": "Loyalty", "valueType": "percentage", "value": 200,
               "combinesWith": {"productDiscounts": true, "orderDiscounts": true}}),
    ];
    for d in &discounts {
        let (status, body) = client.post(&format!("{base}/discounts"), t, d).await;
        assert_eq!(status, StatusCode::CREATED, "create discount: {body}");
    }
    for rate in [
        json!({"country": "CA", "rate": 500, "name": "GST", "shipping": true}),
        json!({"country": "CA", "province": "BC", "rate": 700, "name": "PST"}),
    ] {
        let (status, body) = client.post(&format!("{base}/tax-rates"), t, &rate).await;
        assert_eq!(status, StatusCode::CREATED, "create tax rate: {body}");
    }
    let zone = json!({"name": "Canada", "countries": [{"code": "CA"}], "rates": [
        {"name": "Standard", "price": 1500, "estimatedDelivery": {"minDays": 3, "maxDays": 5}},
        {"name": "Heavy", "condition": "weight", "min": 2000, "price": 2500, "estimatedDelivery": {"minDays": 1, "maxDays": 2}}
    ]});
    let (status, zone) = client.post(&format!("{base}/shipping-zones"), t, &zone).await;
    assert_eq!(status, StatusCode::CREATED, "create zone: {zone}");
    let calculation = json!({
        "lineItems": lines,
        "discountCodes": ["CHAIRS15", "ORDER5"],
        "shippingAddress": {"address1": "1 Main St", "city": "Vancouver", "province": "BC", "country": "CA", "postalCode": "V5K 0A1"},
        "shippingMethodId": zone["rates"][1]["id"],
    });

    Shop { token, base, product: products[PRODUCTS / 2].clone(), chairs, calculation: Bytes::from(calculation.to_string()) }
}

/// One HTTP/1.1 keep-alive connection to the server, reused for every request: no connection
/// pool, no per-request connection setup in the figures.
struct Client {
    sender: SendRequest<Full<Bytes>>,
    host: HeaderValue,
}

impl Client {
    async fn connect(addr: std::net::SocketAddr) -> Client {
        let stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
        stream.set_nodelay(true).expect("nodelay");
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.expect("handshake");
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Client { sender, host: HeaderValue::from_str(&addr.to_string()).expect("host") }
    }

    fn request(&self, method: Method, uri: &str, token: Option<&HeaderValue>, body: Bytes) -> Request<Full<Bytes>> {
        let mut request = Request::builder().method(method).uri(uri).header(HOST, self.host.clone());
        if let Some(t) = token {
            request = request.header(AUTHORIZATION, t.clone());
        }
        if !body.is_empty() {
            request = request.header(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        }
        request.body(Full::new(body)).expect("request")
    }

    /// A request whose answer is read whole and parsed (seeding and checks).
    async fn send(&mut self, method: Method, uri: &str, token: Option<&HeaderValue>, body: Bytes) -> (StatusCode, Value) {
        self.sender.ready().await.expect("connection ready");
        let response = self.sender.send_request(self.request(method, uri, token, body)).await.expect("answer");
        let status = response.status();
        let raw = response.into_body().collect().await.expect("body").to_bytes();
        (status, serde_json::from_slice(&raw).unwrap_or(Value::Null))
    }

    async fn post(&mut self, uri: &str, token: Option<&HeaderValue>, body: &Value) -> (StatusCode, Value) {
        self.send(Method::POST, uri, token, Bytes::from(body.to_string())).await
    }

    /// A measured request: its body is drained frame by frame and dropped, so that the client
    /// adds as little as it can to the count; only the status is checked.
    async fn hit(&mut self, path: &Path, token: &HeaderValue) {
        self.sender.ready().await.expect("connection ready");
        let request = self.request(path.method.clone(), &path.uri, Some(token), path.body.clone());
        let response = self.sender.send_request(request).await.expect("answer");
        assert_eq!(response.status(), StatusCode::OK, "{} {}", path.method, path.uri);
        let mut body = response.into_body();
        while let Some(frame) = body.frame().await {
            frame.expect("body frame");
        }
    }
}
