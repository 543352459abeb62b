//! Catalog benchmark: a store of 100,000 products created through the API, then product search
//! measured in-process and over HTTP, and the price-sorted list page, against the bare-hyper
//! baseline of the same run.
//!
//! What the HTTP scenarios ask: sku searches spread over every sku of the store (practically
//! every request a different query); typo-tolerant searches drawn from a set of
//! [`POPULAR_QUERIES`] different misspelt queries (each word one edit from a title word), the
//! way many shoppers repeat the same popular searches; list pages 1–50 sorted by price. The
//! cell keeps recent answers (`search::cache`), so the typo and list scenarios are measured
//! twice: with the cache (repeats are hits, as in production) and with it turned off (every
//! request computed afresh). The sku scenario runs with the cache on; its queries barely repeat.
//!
//! `cargo bench --bench catalog`. Environment: `BENCH_PRODUCTS` (products created, default
//! 100000), `BENCH_SECONDS` (measured seconds per scenario, default 5).
//!
//! The server under test is the shipped binary in its own process (restarted on the same data
//! with `--answer-cache false` for the cache-off figures); the load generator and the bare
//! baseline run in this one. Search is then also timed without HTTP: the same data is opened in
//! this process and the in-process figures call the cell directly, the way the route handler
//! does; the latency targets are about those. The HTTP figures at concurrency 1 add the request,
//! JSON rendering and loopback round trip. Timings are reported, never asserted; a missed target
//! prints FAIL.

mod common;

use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{
    BenchRequest, BoxError, Client, Endpoint, InProcess, LoadReport, ServerProcess, Settings, expect_json, run_batch, run_load,
    runtime, start_bare_hyper,
};
use hyper::StatusCode;
use serde_json::{Value, json};
use shopcell::cells::Cell;
use shopcell::cells::product_search;
use shopcell::search::query::{SearchBy, SearchRequest, Sort, fingerprint};
use uuid::Uuid;

/// Requests in flight while creating products.
const SEED_CONCURRENCY: usize = 64;
const DEFAULT_PRODUCTS: usize = 100_000;
const ADJECTIVES: [&str; 8] = ["Red", "Blue", "Vintage", "Organic", "Classic", "Wireless", "Compact", "Linen"];
const NOUNS: [&str; 8] = ["Mug", "Lamp", "Chair", "Shirt", "Headphones", "Backpack", "Notebook", "Bottle"];
/// Different typo-tolerant queries of the popular set.
const POPULAR_QUERIES: usize = 256;

/// Word `w` with one edit, the `k`th of a few kinds and places: a dropped, doubled or swapped
/// letter (never the first). Words of three letters stay as they are (no typo tolerance there),
/// and four-letter words never lose a letter (three letters would be matched exactly).
fn misspell(w: &str, k: usize) -> String {
    let mut c: Vec<char> = w.to_lowercase().chars().collect();
    let n = c.len();
    if n < 4 {
        return c.into_iter().collect();
    }
    let at = 1 + (k / 3) % (n - 2);
    match (k % 3, n) {
        (0, 5..) => {
            c.remove(at);
        }
        (1, _) | (0, _) => c.insert(at, c[at]),
        _ => c.swap(at, at + 1),
    }
    c.into_iter().collect()
}

/// The popular set: `POPULAR_QUERIES` different two-word queries, each word misspelt.
fn popular_queries() -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(POPULAR_QUERIES);
    let mut k = 0;
    while out.len() < POPULAR_QUERIES {
        let (a, n) = (ADJECTIVES[k % 8], NOUNS[(k / 8) % 8]);
        let q = format!("{} {}", misspell(a, k / 64), misspell(n, k / 64 + 1));
        if !out.contains(&q) {
            out.push(q);
        }
        k += 1;
    }
    out
}

fn main() -> ExitCode {
    match bench() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("catalog benchmark aborted: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Product number `n`: a searchable title, one variant with a unique sku and barcode, a spread of
/// prices.
fn product_body(n: u64) -> Value {
    json!({
        "title": format!("Product {n} {} {}", ADJECTIVES[(n % 8) as usize], NOUNS[(n / 8 % 8) as usize]),
        "status": "ACTIVE",
        "variants": [{
            "title": "Default",
            "sku": sku(n),
            "barcode": format!("{:013}", 4_000_000_000_000u64 + n),
            "price": {"amount": 100 + (n * 7919) % 99_900, "currency": "USD"},
        }],
    })
}

fn sku(n: u64) -> String {
    format!("SKU-{n:06}")
}

/// A spread of numbers over `0..count` without a random generator: a multiplicative walk.
fn spread(i: u64, count: u64) -> u64 {
    i.wrapping_mul(2_654_435_761) % count.max(1)
}

fn bench() -> Result<(), BoxError> {
    let settings = Settings::from_env()?;
    let products = match std::env::var("BENCH_PRODUCTS") {
        Ok(_) => settings.products,
        Err(_) => DEFAULT_PRODUCTS,
    };
    println!(
        "catalog: {products} products, {} connections, {:.1} s warm-up + {:.1} s per scenario",
        settings.connections,
        settings.warmup.as_secs_f64(),
        settings.duration.as_secs_f64(),
    );
    let bare = start_bare_hyper()?;
    let load = runtime("load-gen")?;
    let binary = env!("CARGO_BIN_EXE_shopcell");
    let server = ServerProcess::spawn(binary)?;
    let endpoint = Endpoint::new(server.addr);
    let (token, store) = load.block_on(owner_and_store(&endpoint))?;
    let authed = endpoint.with_bearer(&token)?;
    let store_path = format!("/api/v1/stores/{store}");
    let store_id = Uuid::parse_str(&store)?;

    // Creating the catalog through the API.
    let create_path = format!("{store_path}/products");
    let creator = authed.clone();
    let (outcomes, seed) = load
        .block_on(run_batch(server.addr, SEED_CONCURRENCY, products, move |n| creator.post_json(&create_path, &product_body(n))));
    let failed = outcomes.iter().filter(|o| !matches!(o, Ok((s, _)) if *s == StatusCode::CREATED)).count();
    if failed > 0 {
        return Err(format!("{failed} of {products} creates failed\n{}", server.log_tail()).into());
    }
    println!(
        "created {products} products in {:.2} s ({:.0}/s, {SEED_CONCURRENCY} in flight)",
        seed.as_secs_f64(),
        products as f64 / seed.as_secs_f64()
    );

    // The index catching up after the last acknowledged create.
    let catch_up = load.block_on(wait_indexed(&authed, &store_path, products))?;
    println!("search index complete {:.0} ms after the last create", catch_up.as_secs_f64() * 1e3);

    let queries = Arc::new(popular_queries());
    let sku_path = {
        let store_path = store_path.clone();
        Arc::new(move |i: u64| format!("{store_path}/products/search?searchBy=sku&q={}", sku(spread(i, products as u64))))
    };
    let typo_path = {
        let (store_path, queries) = (store_path.clone(), queries.clone());
        Arc::new(move |i: u64| {
            let q = queries[spread(i, queries.len() as u64) as usize].replace(' ', "%20");
            format!("{store_path}/products/search?q={q}")
        })
    };
    let pages = products.div_ceil(20).min(50) as u64;
    let list_path =
        Arc::new(move |i: u64| format!("{store_path}/products?limit=20&sortBy=price&sortOrder=asc&page={}", i % pages + 1));

    // With the answer cache, as the server runs by default.
    let bare_endpoint = Endpoint::new(bare.addr).with_bearer(&token)?;
    let bare_report = measure(&load, "bare hyper GET /", bare.addr, &settings, move |_| bare_endpoint.get("/"));
    let (a, p) = (authed.clone(), sku_path.clone());
    let search_sku = measure(&load, "search sku", server.addr, &settings, move |i| a.get(&p(i)));
    let (a, p) = (authed.clone(), typo_path.clone());
    let search_typo = measure(&load, "search typo (all), popular set", server.addr, &settings, move |i| a.get(&p(i)));
    let (a, p) = (authed.clone(), list_path.clone());
    let list = measure(&load, "list by price", server.addr, &settings, move |i| a.get(&p(i)));
    let (a, p) = (authed.compressed(), list_path.clone());
    let list_compressed = measure(&load, "list by price, compressed", server.addr, &settings, move |i| a.get(&p(i)));
    let page_bytes = load.block_on(answer_sizes(server.addr, &authed, &list_path(0)))?;
    println!("list page: {} bytes, {} bytes compressed", page_bytes.0, page_bytes.1);

    // The same data, every answer computed afresh.
    let server = server.restart_with(binary, &["--answer-cache", "false"])?;
    let authed = Endpoint::new(server.addr).with_bearer(&token)?;
    // At one connection the cost of one request is what counts.
    let sku_http = load.block_on(sequential_http(&authed, settings.duration, &*sku_path))?;
    println!("HTTP sku search, 1 connection: {sku_http}");
    let typo_http = load.block_on(sequential_http(&authed, settings.duration, &*typo_path))?;
    println!("HTTP typo search, 1 connection: {typo_http}");
    let (a, p) = (authed.clone(), typo_path);
    let search_typo_uncached =
        measure(&load, "search typo (all), popular set, cache off", server.addr, &settings, move |i| a.get(&p(i)));
    // What the search caches did meanwhile: a rate to read beside their hits and misses.
    let samples =
        load.block_on(common::inspect::scrape_metrics(&mut Client::new(server.addr), &authed, &server.service_key()?))?;
    for cache in ["search_words", "search_columns"] {
        let of = |family: &str| -> f64 {
            samples.iter().filter(|m| m.name == family && m.label("cache") == Some(cache)).map(|m| m.value).sum()
        };
        println!(
            "{cache} after the cache-off typo search: {:.0} hits, {:.0} misses, {:.0} bytes held",
            of("shopcell_cache_hits_total"),
            of("shopcell_cache_misses_total"),
            of("shopcell_cache_bytes")
        );
    }
    let (a, p) = (authed.clone(), list_path.clone());
    let list_uncached = measure(&load, "list by price, cache off", server.addr, &settings, move |i| a.get(&p(i)));
    let (a, p) = (authed.compressed(), list_path);
    let list_uncached_compressed =
        measure(&load, "list by price, cache off, compressed", server.addr, &settings, move |i| a.get(&p(i)));

    // The same data in this process: search without HTTP, as the route handler calls it.
    let server = InProcess::open(server.stop()?)?;
    let timed = (|| -> Result<(Percentiles, Percentiles), BoxError> {
        let cell = server.cell()?;
        check_answers(&cell, store_id, products, &queries)?;
        let sku_request = |i: u64| request(store_id, &sku(spread(i, products as u64)), SearchBy::Sku);
        let sku_in_process = in_process(&cell, settings.duration, sku_request);
        println!("in-process sku search: {sku_in_process}");
        let typo_request = |i: u64| request(store_id, &queries[spread(i, queries.len() as u64) as usize], SearchBy::All);
        let typo_in_process = in_process(&cell, settings.duration, typo_request);
        println!("in-process typo search: {typo_in_process}");
        Ok((sku_in_process, typo_in_process))
    })();
    server.stop();
    let (sku_in_process, typo_in_process) = timed?;

    summary(&Figures {
        seed,
        catch_up,
        sku_in_process,
        typo_in_process,
        sku_http,
        typo_http,
        bare: bare_report,
        search_sku,
        search_typo,
        search_typo_uncached,
        list,
        list_uncached,
        list_compressed,
        list_uncached_compressed,
        page_bytes,
    });
    Ok(())
}

/// Everything measured, for the summary.
struct Figures {
    seed: Duration,
    catch_up: Duration,
    sku_in_process: Percentiles,
    typo_in_process: Percentiles,
    sku_http: Percentiles,
    typo_http: Percentiles,
    bare: LoadReport,
    search_sku: LoadReport,
    search_typo: LoadReport,
    search_typo_uncached: LoadReport,
    list: LoadReport,
    list_uncached: LoadReport,
    list_compressed: LoadReport,
    list_uncached_compressed: LoadReport,
    /// One list page's bytes, as sent plain and compressed.
    page_bytes: (usize, usize),
}

/// The bytes of one answer to `path`, plain and with `gzip, br` accepted.
async fn answer_sizes(addr: std::net::SocketAddr, authed: &Endpoint, path: &str) -> Result<(usize, usize), BoxError> {
    let mut client = Client::new(addr);
    let (_, plain) = client.send(authed.get(path)).await?;
    let (_, packed) = client.send(authed.compressed().get(path)).await?;
    Ok((plain.len(), packed.len()))
}

fn request(store: Uuid, q: &str, by: SearchBy) -> SearchRequest {
    SearchRequest {
        store,
        terms: vec![(q.to_string(), by)],
        status: None,
        product_type: None,
        allowed: None,
        sort: Sort::Relevance,
        offset: 0,
        limit: 20,
        after: None,
    }
}

async fn owner_and_store(endpoint: &Endpoint) -> Result<(String, String), BoxError> {
    let mut client = Client::new(endpoint.addr);
    let email = format!("catalog-{}@example.com", Uuid::now_v7().simple());
    let register = endpoint
        .post_json("/api/v1/auth/register", &json!({"email": email, "password": "bench-password-1234", "name": "Bench Owner"}));
    let login = expect_json(client.send(register).await?, StatusCode::CREATED, "register")?;
    let token = login["accessToken"].as_str().ok_or("register: no accessToken")?.to_string();
    let create = endpoint
        .with_bearer(&token)?
        .post_json("/api/v1/stores", &json!({"name": "Catalog", "currency": "USD", "country": "US", "timezone": "UTC"}));
    let store = expect_json(client.send(create).await?, StatusCode::CREATED, "create store")?;
    let id = store["id"].as_str().ok_or("create store: no id")?.to_string();
    Ok((token, id))
}

/// Polls until every product is searchable; answers how long that took.
async fn wait_indexed(endpoint: &Endpoint, store_path: &str, products: usize) -> Result<Duration, BoxError> {
    let started = Instant::now();
    let mut client = Client::new(endpoint.addr);
    let last = format!("{store_path}/products/search?searchBy=sku&q={}", sku(products as u64 - 1));
    let every = format!("{store_path}/products/search?searchBy=title&q=product&limit=1");
    loop {
        let found = expect_json(client.send(endpoint.get(&last)).await?, StatusCode::OK, "search")?;
        if found["total"] == 1 {
            let all = expect_json(client.send(endpoint.get(&every)).await?, StatusCode::OK, "search")?;
            if all["total"].as_u64() == Some(products as u64) {
                return Ok(started.elapsed());
            }
        }
        if started.elapsed() > Duration::from_secs(120) {
            return Err("the index did not catch up within 120 s".into());
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// One-off checks that the timed queries answer what they should.
fn check_answers(cell: &Cell, store: Uuid, products: usize, queries: &[String]) -> Result<(), BoxError> {
    let n = spread(7, products as u64);
    let (found, hits) = product_search::search_products(cell, &request(store, &sku(n), SearchBy::Sku), fingerprint(&[]))?;
    if hits.total != 1 || found.first().and_then(|p| p.variants.first()).and_then(|v| v.sku.clone()) != Some(sku(n)) {
        println!("WARNING sku search for {} found {} products", sku(n), hits.total);
    }
    for q in queries {
        let (found, hits) = product_search::search_products(cell, &request(store, q, SearchBy::All), fingerprint(&[]))?;
        if hits.total == 0 || found.is_empty() {
            println!("WARNING typo search {q:?} found nothing");
        }
    }
    println!("check  search answers: ok");
    Ok(())
}

/// Latency percentiles of one scenario.
struct Percentiles {
    samples: usize,
    p50: Duration,
    p99: Duration,
}

impl Percentiles {
    fn of(mut samples: Vec<Duration>) -> Self {
        samples.sort_unstable();
        let at = |p: f64| {
            let rank = ((p * samples.len() as f64).ceil() as usize).clamp(1, samples.len().max(1));
            samples.get(rank - 1).copied().unwrap_or_default()
        };
        Percentiles { samples: samples.len(), p50: at(0.50), p99: at(0.99) }
    }
}

impl std::fmt::Display for Percentiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "p50 {} p99 {} ({} queries)", micros(self.p50), micros(self.p99), self.samples)
    }
}

/// Runs queries back to back on this thread for `duration`: search, then the stored product
/// views of the page, as the route handler does before rendering (no answer cache).
fn in_process(cell: &Arc<Cell>, duration: Duration, make: impl Fn(u64) -> SearchRequest) -> Percentiles {
    let mut samples = Vec::new();
    let end = Instant::now() + duration;
    let mut i = 0u64;
    while Instant::now() < end {
        let req = make(i);
        let started = Instant::now();
        let ok = product_search::search_product_views(cell, &req, 0).is_ok();
        let took = started.elapsed();
        if ok {
            samples.push(took);
        }
        i += 1;
    }
    Percentiles::of(samples)
}

/// The same queries over HTTP from one connection, one at a time.
async fn sequential_http(endpoint: &Endpoint, duration: Duration, path: &dyn Fn(u64) -> String) -> Result<Percentiles, BoxError> {
    let mut client = Client::new(endpoint.addr);
    let mut samples = Vec::new();
    let end = Instant::now() + duration;
    let mut i = 0u64;
    while Instant::now() < end {
        let request: BenchRequest = endpoint.get(&path(i));
        let started = Instant::now();
        let (status, _) = client.send(request).await?;
        let took = started.elapsed();
        if status != StatusCode::OK {
            return Err(format!("search answered {status}").into());
        }
        samples.push(took);
        i += 1;
    }
    Ok(Percentiles::of(samples))
}

fn measure<F>(load: &tokio::runtime::Runtime, name: &str, addr: std::net::SocketAddr, settings: &Settings, make: F) -> LoadReport
where
    F: Fn(u64) -> BenchRequest + Send + Sync + 'static,
{
    let report = load.block_on(run_load(addr, settings, make));
    println!("measured {name}: {:.0} req/s, p99 {}", report.requests_per_second(), micros(report.latencies.percentile(0.99)));
    if let Some(first) = &report.first_error {
        println!("  ERRORS in {name}: {} failed requests; first: {first}", report.errors);
    }
    report
}

fn verdict(ok: bool, errors: u64) -> &'static str {
    match (errors, ok) {
        (0, true) => "PASS",
        _ => "FAIL",
    }
}

fn summary(f: &Figures) {
    println!();
    println!("{:<44} {:>12} {:>12}  result", "target", "measured", "required");
    let seed_ok = f.seed < Duration::from_secs(30);
    println!(
        "{:<44} {:>12} {:>12}  {}",
        "create 100,000 products through the API",
        format!("{:.1} s", f.seed.as_secs_f64()),
        "< 30 s",
        verdict(seed_ok, 0)
    );
    println!(
        "{:<44} {:>12} {:>12}  (for reference)",
        "index complete after the last create",
        format!("{:.0} ms", f.catch_up.as_secs_f64() * 1e3),
        "—"
    );
    for (name, p, limit) in [
        ("in-process search p99, searchBy=sku", &f.sku_in_process, Duration::from_millis(1)),
        ("in-process search p99, typo searchBy=all", &f.typo_in_process, Duration::from_millis(5)),
    ] {
        println!("{name:<44} {:>12} {:>12}  {}", micros(p.p99), format!("< {}", micros(limit)), verdict(p.p99 < limit, 0));
    }
    for (name, p) in [("HTTP search p99, sku, 1 connection", &f.sku_http), ("HTTP search p99, typo, 1 connection", &f.typo_http)]
    {
        println!("{name:<44} {:>12} {:>12}  (in-process + HTTP and JSON)", micros(p.p99), "—");
    }
    let bare = f.bare.requests_per_second();
    for (name, report, required) in [
        ("search sku / bare hyper (64 conns)", &f.search_sku, 0.25),
        ("search typo, popular set / bare hyper", &f.search_typo, 0.25),
        ("list sorted by price / bare hyper", &f.list, 0.30),
    ] {
        let ratio = report.requests_per_second() / bare;
        println!(
            "{name:<44} {:>12} {:>12}  {}",
            format!("{:.1} %", ratio * 100.0),
            format!("≥ {:.0} %", required * 100.0),
            verdict(ratio >= required, report.errors)
        );
    }
    for (name, report) in [
        ("  the same, cache off: search typo", &f.search_typo_uncached),
        ("  the same, cache off: list by price", &f.list_uncached),
    ] {
        let ratio = report.requests_per_second() / bare;
        println!("{name:<44} {:>12} {:>12}  (for reference)", format!("{:.1} %", ratio * 100.0), "—");
    }
    // Compression: the rate of compressed pages against the same pages plain, and the bytes.
    let (plain, packed) = f.page_bytes;
    let bytes = packed as f64 / plain.max(1) as f64;
    println!(
        "{:<44} {:>12} {:>12}  {}",
        "list page, compressed bytes / plain",
        format!("{:.1} %", bytes * 100.0),
        "≤ 25 %",
        verdict(bytes <= 0.25, 0)
    );
    for (name, compressed, plain, required) in [
        ("list compressed / plain, cache off", &f.list_uncached_compressed, &f.list_uncached, 0.50),
        ("list compressed / plain, cache on", &f.list_compressed, &f.list, 0.85),
    ] {
        let ratio = compressed.requests_per_second() / plain.requests_per_second();
        println!(
            "{name:<44} {:>12} {:>12}  {}",
            format!("{:.1} %", ratio * 100.0),
            format!("≥ {:.0} %", required * 100.0),
            verdict(ratio >= required, compressed.errors)
        );
    }
    println!(
        "(bare hyper {:.0} req/s; search sku {:.0}, search typo {:.0} ({:.0} cache off), list {:.0} ({:.0} cache off) req/s)",
        bare,
        f.search_sku.requests_per_second(),
        f.search_typo.requests_per_second(),
        f.search_typo_uncached.requests_per_second(),
        f.list.requests_per_second(),
        f.list_uncached.requests_per_second(),
    );
}

fn micros(d: Duration) -> String {
    if d >= Duration::from_millis(1) {
        format!("{:.2} ms", d.as_secs_f64() * 1e3)
    } else {
        format!("{:.0} µs", d.as_secs_f64() * 1e6)
    }
}
