//! Scale benchmark: how a cell's costs grow with what it holds, for one store of N products and
//! for S stores of P products each.
//!
//! Each size is one row, measured on a fresh server (the shipped binary in its own process):
//! - seeding: the stores, then the products, created through the API (durable, 64 requests in
//!   flight); the create rate counts the products alone, over all of them and per batch of
//!   50,000 (the last batch's against the first's: how creates slow as the cell fills);
//! - memory, from `/metrics`: anonymous memory right after start (idle) and after the load, its
//!   peak, and the sum of what the caches say they hold (`shopcell_cache_bytes`), to set against
//!   the growth above idle;
//! - the data directory's size on disk after a graceful stop;
//! - a restart on the same data, then the first list page of a store (of 20 different stores in
//!   the many-stores rows): what the first shoppers after a deploy wait for;
//! - list page, product by id and search throughput at 64 connections, each as a ratio to the bare
//!   hyper baseline, measured right before and right after them (the higher of the two counts);
//!   list pages three times: spread over every store, over the hot stores alone (one in twenty,
//!   [`HOT_SHARE`]), and over the hottest (one in a hundred, [`HOTTEST_SHARE`]), as a cell whose
//!   lists and views do not all fit its budget serves its busy shops.
//!
//! `cargo bench --bench scale`. Environment:
//! - `SCALE_PRODUCTS`: comma list of one-store sizes (default `10000`; empty for none),
//! - `SCALE_STORES`: comma list of store counts (default `100`; empty for none),
//! - `SCALE_STORE_PRODUCTS`: products per store in those rows (default 100),
//! - `SCALE_MEMORY`: passed as `--memory` (default: the binary's own, half the machine's memory),
//! - `BENCH_SECONDS`: measured seconds per throughput scenario (default 5),
//! - `BENCH_SHOPCELL`: the binary to serve (an earlier build's, or one under a profiler).
//!
//! Timings are printed, never asserted.

mod common;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::inspect::{MetricSample, disk_usage, metric_sum, millis, scrape_metrics, thousands};
use common::{
    BenchRequest, BoxError, Client, Endpoint, LoadReport, NOUNS, ServerProcess, Settings, expect_json, product_body, run_batch,
    run_load, runtime, start_bare_hyper,
};
use hyper::StatusCode;
use serde_json::json;
use shopcell::memory::human;
use tokio::runtime::Runtime;

/// Requests in flight while seeding, as in the load scenarios.
const SEED_CONCURRENCY: usize = 64;
/// Products created per batch: the load generator keeps every answer of a batch, and a million
/// answers at once would weigh on the machine the server is measured on.
const SEED_CHUNK: usize = 50_000;
/// Product ids kept for the by-id scenario, spread evenly over the whole catalogue.
const ID_SAMPLE: usize = 65_536;
/// Stores whose first list is timed after the restart (many-stores rows).
const FIRST_LIST_STORES: usize = 20;
/// Stores checked for a complete search index before the search scenario.
const INDEX_CHECK_STORES: usize = 100;
const INDEX_TIMEOUT: Duration = Duration::from_secs(900);
/// The server's peak anonymous memory is the highest figure a `/metrics` read saw, so it is read
/// this often while the row runs.
const METRICS_EVERY: Duration = Duration::from_millis(100);
/// The pause before memory is read after the load and its reads: the allocator returns pages
/// free for a second (the binary's `dirty_decay_ms`), so memory freed by the last requests is
/// still resident right after them.
const SETTLE: Duration = Duration::from_secs(2);
const LIST_LIMIT: usize = 20;
/// The cache name of tantivy's indexing writer in `/metrics`.
const SEARCH_WRITER: &str = "search_writer";
/// List pages walked per store, as in the foundation benchmark.
const LIST_MAX_PAGE: usize = 50;
/// A plan without a store limit: the built-in free plan allows one store per owner.
const PLANS: &str = r#"{"defaultPlan":"unlimited","plans":[{"id":"unlimited","name":"Unlimited","storeLimit":null,"price":{"amount":0,"currency":"USD"}}]}"#;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("scale benchmark aborted: {e}");
            ExitCode::FAILURE
        }
    }
}

/// What one row holds: `stores` stores of `each` products.
#[derive(Clone, Copy)]
struct Shape {
    stores: usize,
    each: usize,
}

impl Shape {
    fn products(self) -> usize {
        self.stores * self.each
    }

    fn label(self) -> String {
        format!("{} × {}", thousands(self.stores as f64), thousands(self.each as f64))
    }
}

fn run() -> Result<(), BoxError> {
    let settings = Settings::from_env()?;
    let each = sizes("SCALE_STORE_PRODUCTS", "100")?;
    let [each] = each[..] else { return Err("SCALE_STORE_PRODUCTS takes one number".into()) };
    let shapes: Vec<Shape> = sizes("SCALE_PRODUCTS", "10000")?
        .into_iter()
        .map(|n| Shape { stores: 1, each: n })
        .chain(sizes("SCALE_STORES", "100")?.into_iter().map(|stores| Shape { stores, each }))
        .collect();
    let memory = std::env::var("SCALE_MEMORY").ok().filter(|m| !m.trim().is_empty());
    println!(
        "scale: rows {}; {} connections, {:.1} s warm-up + {:.1} s per scenario; --memory {}",
        shapes.iter().map(|s| s.label()).collect::<Vec<_>>().join(", "),
        settings.connections,
        settings.warmup.as_secs_f64(),
        settings.duration.as_secs_f64(),
        memory.as_deref().unwrap_or("(the binary's default)"),
    );

    let plans_dir = tempfile::tempdir()?;
    let plans = plans_dir.path().join("plans.json");
    std::fs::write(&plans, PLANS)?;
    let plans = plans.to_str().ok_or("temp dir is not UTF-8")?;
    let mut flags = vec!["--plans", plans];
    if let Some(memory) = &memory {
        flags.extend(["--memory", memory.as_str()]);
    }

    let load = runtime("load-gen")?;
    let mut rows = Vec::new();
    for shape in shapes {
        println!("\n== {} ({} products)", shape.label(), thousands(shape.products() as f64));
        match run_row(shape, &settings, &load, &flags) {
            Ok(row) => rows.push(row),
            Err(e) => {
                // A long run keeps what its earlier rows measured.
                print_tables(&rows);
                return Err(format!("row {}: {e}", shape.label()).into());
            }
        }
    }
    print_tables(&rows);
    Ok(())
}

/// A comma list of positive sizes from `name` (`_` allowed as a separator of thousands).
fn sizes(name: &str, default: &str) -> Result<Vec<usize>, BoxError> {
    let raw = std::env::var(name).unwrap_or_else(|_| default.to_string());
    raw.split(',')
        .map(|part| part.trim().replace('_', ""))
        .filter(|part| !part.is_empty())
        .map(|part| match part.parse::<usize>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(format!("{name}={raw:?}: {part:?} is not a positive number").into()),
        })
        .collect()
}

/// Memory figures of one `/metrics` read.
struct Memory {
    budget: u64,
    anon: u64,
    peak: u64,
    /// The allocator's bytes in live allocations and what it keeps resident (0 when the server
    /// reports neither).
    heap_allocated: u64,
    heap_resident: u64,
    /// What each cache holds, summed over owners (the cell and the account service).
    caches: BTreeMap<String, u64>,
}

impl Memory {
    fn of(samples: &[MetricSample]) -> Result<Self, BoxError> {
        let figure = |family: &str| metric_sum(samples, family).map(|v| v as u64).ok_or(format!("/metrics has no {family}"));
        let mut caches = BTreeMap::new();
        for sample in samples.iter().filter(|s| s.name == "shopcell_cache_bytes") {
            *caches.entry(sample.label("cache").unwrap_or("?").to_string()).or_default() += sample.value as u64;
        }
        Ok(Memory {
            budget: figure("shopcell_memory_budget_bytes")?,
            anon: figure("shopcell_process_anonymous_bytes")?,
            peak: figure("shopcell_process_anonymous_peak_bytes")?,
            heap_allocated: metric_sum(samples, "shopcell_heap_allocated_bytes").unwrap_or(0.0) as u64,
            heap_resident: metric_sum(samples, "shopcell_heap_resident_bytes").unwrap_or(0.0) as u64,
            caches,
        })
    }

    fn cache_sum(&self) -> u64 {
        self.caches.values().sum()
    }

    /// The sum without tantivy's writer, which reports its whole share while a pass writes (its
    /// buffer grows toward the share until the commit), however little the pass gives it to hold.
    fn cache_sum_without_writer(&self) -> u64 {
        self.cache_sum() - self.caches.get(SEARCH_WRITER).copied().unwrap_or(0)
    }
}

/// Everything one row measured.
struct Row {
    shape: Shape,
    idle: Memory,
    after_load: Memory,
    /// After the restart and the first lists.
    restarted: Memory,
    disk: u64,
    /// The part of `disk` that is the search index.
    disk_search: u64,
    seed_rate: Seeding,
    start: Duration,
    first_lists: Vec<Duration>,
    throughput: Throughput,
}

fn run_row(shape: Shape, settings: &Settings, load: &Runtime, flags: &[&str]) -> Result<Row, BoxError> {
    let server = ServerProcess::spawn_with(&common::served_binary(), flags)?;
    let endpoint = Endpoint::new(server.addr);
    let key = server.service_key()?;
    let idle = Memory::of(&load.block_on(scrape(&endpoint, &key))?)?;
    println!("idle: anonymous {}, budget {}, caches hold {}", human(idle.anon), human(idle.budget), human(idle.cache_sum()));
    let sampler = load.spawn(keep_reading_metrics(endpoint.clone(), key.clone()));

    let measured = (|| {
        let (token, stores) = load.block_on(owner_with_stores(&endpoint, shape.stores))?;
        let authed = endpoint.with_bearer(&token)?;
        let (sample, seed_rate) = seed_products(load, &authed, &stores, shape)?;
        let lag = load.block_on(wait_indexed(&authed, &stores, shape.each))?;
        println!("search index complete {:.2} s after the last create", lag.as_secs_f64());
        let reports = measure_scenarios(load, settings, &token, &authed, &stores, shape, sample)?;
        Ok::<_, BoxError>((token, stores, seed_rate, reports))
    })();
    sampler.abort();
    let (token, stores, seed_rate, throughput) = measured.map_err(|e| format!("{e}\n{}", server.log_tail()))?;
    let at_once = Memory::of(&load.block_on(scrape(&endpoint, &key))?)?;
    std::thread::sleep(SETTLE);
    let after_load = Memory::of(&load.block_on(scrape(&endpoint, &key))?)?;
    println!(
        "memory at the end of the reads: anonymous {}, held {}; {SETTLE:?} later {}, held {}",
        human(at_once.anon),
        human(at_once.heap_resident),
        human(after_load.anon),
        human(after_load.heap_resident)
    );

    let stopping = Instant::now();
    let dir = server.stop()?;
    println!("graceful stop: {:.2} s; {}", stopping.elapsed().as_secs_f64(), log_line(dir.path(), "held lists saved"));
    let data = dir.path().join("data");
    let disk = disk_usage(&data)?;
    let disk_search = search_dirs_usage(&data)?;
    println!("on disk after stop: {} ({} of it the search index)", human(disk), human(disk_search));

    let started = Instant::now();
    let server = ServerProcess::start(&common::served_binary(), dir, flags)?;
    let start = started.elapsed();
    let authed = Endpoint::new(server.addr).with_bearer(&token)?;
    let picks = spread_evenly(stores.len(), FIRST_LIST_STORES);
    let (held_lists, first_lists, again) =
        load.block_on(first_lists(&authed, &stores, &picks, shape.each)).map_err(|e| format!("{e}\n{}", server.log_tail()))?;
    let restarted = Memory::of(&load.block_on(scrape(&authed, &key))?)?;
    println!(
        "restart: serving {:.2} s after launch; first page of the list held before the stop {} (median), max {}; \
         first list {} (median of {}), max {}; the same list again {}; anonymous {}",
        start.as_secs_f64(),
        millis(median(&held_lists)),
        millis(held_lists.iter().copied().max().unwrap_or_default()),
        millis(median(&first_lists)),
        first_lists.len(),
        millis(first_lists.iter().copied().max().unwrap_or_default()),
        millis(again),
        human(restarted.anon),
    );
    let dir = server.stop()?;
    println!("the restart's snapshot: {}", log_line(dir.path(), "saved lists loaded"));

    Ok(Row { shape, idle, after_load, restarted, disk, disk_search, seed_rate, start, first_lists, throughput })
}

async fn scrape(endpoint: &Endpoint, key: &str) -> Result<Vec<MetricSample>, BoxError> {
    scrape_metrics(&mut Client::new(endpoint.addr), endpoint, key).await
}

/// Reads `/metrics` every [`METRICS_EVERY`] until aborted, so the server's peak sees the highs.
async fn keep_reading_metrics(endpoint: Endpoint, key: String) {
    let mut client = Client::new(endpoint.addr);
    loop {
        // A failed read only loses one sample of the peak.
        let _ = scrape_metrics(&mut client, &endpoint, &key).await;
        tokio::time::sleep(METRICS_EVERY).await;
    }
}

/// Registers an owner and creates `wanted` stores (64 at a time); answers the token and the
/// store ids in creation order.
async fn owner_with_stores(endpoint: &Endpoint, wanted: usize) -> Result<(String, Vec<String>), BoxError> {
    let mut client = Client::new(endpoint.addr);
    let email = format!("scale-{}@example.com", uuid::Uuid::now_v7().simple());
    let register = endpoint
        .post_json("/api/v1/auth/register", &json!({"email": email, "password": "bench-password-1234", "name": "Bench Owner"}));
    let login = expect_json(client.send(register).await?, StatusCode::CREATED, "register")?;
    let token = login["accessToken"].as_str().ok_or("register: no accessToken")?.to_string();
    let authed = endpoint.with_bearer(&token)?;
    let (outcomes, took) = run_batch(endpoint.addr, SEED_CONCURRENCY, wanted, move |i| {
        authed.post_json(
            "/api/v1/stores",
            &json!({"name": format!("Store {i}"), "currency": "USD", "country": "US", "timezone": "UTC"}),
        )
    })
    .await;
    let mut stores = Vec::with_capacity(wanted);
    for outcome in outcomes {
        let store = expect_json(outcome?, StatusCode::CREATED, "create store")?;
        stores.push(store["id"].as_str().ok_or("create store: no id")?.to_string());
    }
    if wanted > 1 {
        println!("created {} in {:.2} s ({}/s)", count(wanted, "store"), took.as_secs_f64(), rate(wanted, took));
    }
    Ok((token, stores))
}

/// Create rates while seeding, per second: over every product, and over the first and the last
/// batch (how creates slow as the cell fills; equal when there is one batch).
#[derive(Clone, Copy)]
struct Seeding {
    all: f64,
    first: f64,
    last: f64,
}

/// Creates product `n` of the row in store `n % stores`; answers the by-id paths of a sample of
/// the products and the create rates.
fn seed_products(load: &Runtime, authed: &Endpoint, stores: &[String], shape: Shape) -> Result<(Vec<String>, Seeding), BoxError> {
    let total = shape.products();
    let stride = total.div_ceil(ID_SAMPLE);
    let paths: Arc<Vec<String>> = Arc::new(stores.iter().map(|s| format!("/api/v1/stores/{s}/products")).collect());
    let mut sample = Vec::with_capacity(total.min(ID_SAMPLE));
    let mut elapsed = Duration::ZERO;
    let mut batches = Vec::new();
    for first in (0..total).step_by(SEED_CHUNK) {
        let count = SEED_CHUNK.min(total - first);
        let (creator, chunk_paths) = (authed.clone(), Arc::clone(&paths));
        let (outcomes, took) = load.block_on(run_batch(authed.addr, SEED_CONCURRENCY, count, move |i| {
            let n = first as u64 + i;
            creator.post_json(&chunk_paths[(n % chunk_paths.len() as u64) as usize], &product_body(n))
        }));
        elapsed += took;
        batches.push(count as f64 / took.as_secs_f64());
        for (n, outcome) in (first..).zip(outcomes) {
            let (status, body) = outcome.map_err(|e| format!("create product {n}: {e}"))?;
            if status != StatusCode::CREATED {
                return Err(format!("create product {n}: {}", common::describe_status(status, &body)).into());
            }
            // Only the sampled answers are parsed: parsing a million would add minutes to the run.
            if n % stride == 0 {
                let product = expect_json((status, body), StatusCode::CREATED, "create product")?;
                let id = product["id"].as_str().ok_or("create product: no id")?;
                sample.push(format!("{}/{id}", paths[n % paths.len()]));
            }
        }
        if total > SEED_CHUNK {
            let done = first + count;
            println!(
                "  created {} of {} products ({}/s; this batch {}/s)",
                thousands(done as f64),
                thousands(total as f64),
                rate(done, elapsed),
                rate(count, took)
            );
        }
    }
    println!("created {} products in {:.2} s: {}/s", thousands(total as f64), elapsed.as_secs_f64(), rate(total, elapsed));
    let all = total as f64 / elapsed.as_secs_f64();
    let (first, last) = (batches.first().copied().unwrap_or(all), batches.last().copied().unwrap_or(all));
    Ok((sample, Seeding { all, first, last }))
}

/// `1 store`, `1,000 stores`.
fn count(n: usize, noun: &str) -> String {
    format!("{} {noun}{}", thousands(n as f64), if n == 1 { "" } else { "s" })
}

fn rate(count: usize, elapsed: Duration) -> String {
    thousands(count as f64 / elapsed.as_secs_f64())
}

/// Waits until a spread of the stores (the last included) finds all its products by search, so
/// that indexing does not compete with the scenarios; answers how long that took.
async fn wait_indexed(authed: &Endpoint, stores: &[String], each: usize) -> Result<Duration, BoxError> {
    let started = Instant::now();
    let mut client = Client::new(authed.addr);
    for i in spread_evenly(stores.len(), INDEX_CHECK_STORES) {
        // Every title holds the word "product".
        let path = format!("/api/v1/stores/{}/products/search?searchBy=title&q=product&limit=1", stores[i]);
        loop {
            let found = expect_json(client.send(authed.get(&path)).await?, StatusCode::OK, "search")?;
            if found["total"].as_u64() == Some(each as u64) {
                break;
            }
            if started.elapsed() > INDEX_TIMEOUT {
                return Err(format!("store {i} finds {} of {each} products after {INDEX_TIMEOUT:?}", found["total"]).into());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    Ok(started.elapsed())
}

/// `count` indexes spread evenly over `0..len`, the last one included.
fn spread_evenly(len: usize, count: usize) -> Vec<usize> {
    let count = count.min(len);
    (1..=count).map(|k| k * len / count - 1).collect()
}

/// A spread of numbers over `0..count` without a random generator: a multiplicative walk. The
/// multiplier is prime, so `i` in `0..count` visits every number once.
fn spread(i: u64, count: usize) -> usize {
    (i.wrapping_mul(2_654_435_761) % count.max(1) as u64) as usize
}

/// The search of product `n`: a title word it shares with an eighth of its store and its number,
/// which only it has (typo tolerance and the completion of the last word match some neighbours
/// too); spread over every product, so practically every query differs.
fn search_path(stores: &[String], n: usize) -> String {
    let noun = NOUNS[n / 8 % 8].to_lowercase();
    format!("/api/v1/stores/{}/products/search?q={noun}%20{n}&limit=20", stores[n % stores.len()])
}

/// One store in this many is hot in the hot-stores scenario (at least one).
const HOT_SHARE: usize = 20;
/// One store in this many is in the hottest-stores scenario: a set whose views fit the rows'
/// share of a 1 GB budget at 10,000 stores of 500 products (one in twenty does not).
const HOTTEST_SHARE: usize = 100;

/// The first of `stores`, one in `share` (at least one).
fn hot_stores(stores: &[String], share: usize) -> Arc<Vec<String>> {
    Arc::new(stores[..stores.len().div_ceil(share)].to_vec())
}

/// A list page sorted by price, spread over the stores and their first pages.
fn list_path(stores: &[String], pages: usize, i: u64) -> String {
    let store = &stores[spread(i, stores.len())];
    format!("/api/v1/stores/{store}/products?limit={LIST_LIMIT}&sortBy=price&sortOrder=asc&page={}", i as usize % pages + 1)
}

/// The scenarios of a row and the baseline they are set against.
struct Throughput {
    /// Bare hyper's rate: the higher of a run before the scenarios and one after them, since a
    /// machine shared with other work can slow either down.
    bare: f64,
    list: LoadReport,
    /// List pages of the hot stores alone, and of the hottest.
    hot: LoadReport,
    hottest: LoadReport,
    get: LoadReport,
    search: LoadReport,
}

/// Bare hyper, list pages, products by id, searches and bare hyper again, at 64 connections each.
fn measure_scenarios(
    load: &Runtime,
    settings: &Settings,
    token: &str,
    authed: &Endpoint,
    stores: &[String],
    shape: Shape,
    sample: Vec<String>,
) -> Result<Throughput, BoxError> {
    let stores: Arc<Vec<String>> = Arc::new(stores.to_vec());
    let pages = shape.each.div_ceil(LIST_LIMIT).min(LIST_MAX_PAGE);
    load.block_on(check_answers(authed, &stores, shape, &sample[0]))?;
    let sample = Arc::new(sample);
    warm(load, authed, &stores, &sample)?;

    let bare_server = start_bare_hyper()?;
    // The baseline carries the same Authorization header as the scenarios it is compared with.
    let bare_endpoint = Endpoint::new(bare_server.addr).with_bearer(token)?;
    let b = bare_endpoint.clone();
    let bare_before = measure(load, "bare hyper GET /", bare_server.addr, settings, move |_| b.get("/"));

    let (a, s) = (authed.clone(), Arc::clone(&stores));
    let list = measure(load, "GET list page by price", authed.addr, settings, move |i| a.get(&list_path(&s, pages, i)));
    let (a, hot) = (authed.clone(), hot_stores(&stores, HOT_SHARE));
    let hot =
        measure(load, "GET list page by price, hot stores", authed.addr, settings, move |i| a.get(&list_path(&hot, pages, i)));
    let (a, hottest) = (authed.clone(), hot_stores(&stores, HOTTEST_SHARE));
    let hottest = measure(load, "GET list page by price, hottest stores", authed.addr, settings, move |i| {
        a.get(&list_path(&hottest, pages, i))
    });
    let (a, sample) = (authed.clone(), Arc::clone(&sample));
    let get = measure(load, "GET product by id", authed.addr, settings, move |i| a.get(&sample[spread(i, sample.len())]));
    let (a, s, total) = (authed.clone(), stores, shape.products());
    let search = measure(load, "GET search", authed.addr, settings, move |i| a.get(&search_path(&s, spread(i, total))));

    let bare_after = measure(load, "bare hyper GET / again", bare_server.addr, settings, move |_| bare_endpoint.get("/"));
    // The bare server owns a runtime, which must not be dropped inside an async context.
    drop(bare_server);
    let bare = bare_before.requests_per_second().max(bare_after.requests_per_second());
    Ok(Throughput { bare, list, hot, hottest, get, search })
}

/// Reads every store's first list page and every sampled product once (64 at a time), so the
/// scenarios measure a cell whose stores are all hot: at 10,000 stores a few seconds of load
/// would otherwise mostly time first reads, which the restart figures cover.
fn warm(load: &Runtime, authed: &Endpoint, stores: &Arc<Vec<String>>, sample: &Arc<Vec<String>>) -> Result<(), BoxError> {
    let (a, s) = (authed.clone(), Arc::clone(stores));
    let (lists, lists_took) =
        load.block_on(run_batch(authed.addr, SEED_CONCURRENCY, stores.len(), move |i| a.get(&list_path(&s, 1, i))));
    let (a, s) = (authed.clone(), Arc::clone(sample));
    let (products, products_took) =
        load.block_on(run_batch(authed.addr, SEED_CONCURRENCY, sample.len(), move |i| a.get(&s[i as usize])));
    for outcome in lists.into_iter().chain(products) {
        let (status, body) = outcome?;
        if status != StatusCode::OK {
            return Err(format!("warming: {}", common::describe_status(status, &body)).into());
        }
    }
    println!(
        "warmed: the first list page of {} in {:.2} s ({}/s), {} products by id in {:.2} s ({}/s)",
        count(stores.len(), "store"),
        lists_took.as_secs_f64(),
        rate(stores.len(), lists_took),
        thousands(sample.len() as f64),
        products_took.as_secs_f64(),
        rate(sample.len(), products_took),
    );
    Ok(())
}

/// One-off checks of what the scenarios will ask; the load loop only looks at status codes.
async fn check_answers(authed: &Endpoint, stores: &[String], shape: Shape, product_path: &str) -> Result<(), BoxError> {
    let mut client = Client::new(authed.addr);
    let page = expect_json(client.send(authed.get(&list_path(stores, 1, 0))).await?, StatusCode::OK, "list")?;
    let rows = page["data"].as_array().map_or(0, Vec::len);
    if page["total"].as_u64() != Some(shape.each as u64) || rows != shape.each.min(LIST_LIMIT) {
        println!(
            "WARNING list page: total {} and {rows} rows, expected {} and {}",
            page["total"],
            shape.each,
            shape.each.min(LIST_LIMIT)
        );
    }
    let product = expect_json(client.send(authed.get(product_path)).await?, StatusCode::OK, "product by id")?;
    if !product_path.ends_with(product["id"].as_str().unwrap_or("(none)")) {
        println!("WARNING product by id: answered {}", product["id"]);
    }
    let n = shape.products() - 1;
    let found = expect_json(client.send(authed.get(&search_path(stores, n))).await?, StatusCode::OK, "search")?;
    let first_title = found["data"][0]["title"].as_str().unwrap_or("");
    if !first_title.starts_with(&format!("Product {n} ")) {
        println!("WARNING search for product {n}: first hit {first_title:?} of {}", found["total"]);
    }
    println!("check  list, product by id, search: ok (the search of product {n} finds {} products)", found["total"]);
    Ok(())
}

/// The server's last log line in `dir` that contains `what` (the list snapshot's own timings).
/// Call it after the server stopped: its log reaches the file through a buffer written out once
/// the process has exited, so the line is looked for for a moment.
fn log_line(dir: &std::path::Path, what: &str) -> String {
    for _ in 0..40 {
        let log = std::fs::read_to_string(dir.join("stdout.log")).unwrap_or_default();
        if let Some(line) = log.lines().rfind(|l| l.contains(what)) {
            return line.to_string();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    format!("no \"{what}\" line")
}

/// After a restart: the first page of the list each picked store had read before the stop (by
/// price: held then, so saved by the stop), then of its default list (never read before: built
/// from the database), one at a time on a connection already open, then the first store's
/// default page once more.
async fn first_lists(
    authed: &Endpoint,
    stores: &[String],
    picks: &[usize],
    each: usize,
) -> Result<(Vec<Duration>, Vec<Duration>, Duration), BoxError> {
    let mut client = Client::new(authed.addr);
    let (status, body) = client.send(authed.get("/healthz")).await?;
    if status != StatusCode::OK {
        return Err(format!("/healthz: {}", common::describe_status(status, &body)).into());
    }
    let mut held = Vec::with_capacity(picks.len());
    for &i in picks {
        held.push(timed_list(&mut client, authed, &stores[i], "&sortBy=price&sortOrder=asc", each).await?);
    }
    let mut first = Vec::with_capacity(picks.len());
    for &i in picks {
        first.push(timed_list(&mut client, authed, &stores[i], "", each).await?);
    }
    let again = timed_list(&mut client, authed, &stores[picks[0]], "", each).await?;
    Ok((held, first, again))
}

/// How long the first page of a store's list (default, or as `sort` asks) takes to arrive,
/// checked.
async fn timed_list(client: &mut Client, authed: &Endpoint, store: &str, sort: &str, each: usize) -> Result<Duration, BoxError> {
    let request = authed.get(&format!("/api/v1/stores/{store}/products?limit={LIST_LIMIT}{sort}"));
    let started = Instant::now();
    let response = client.send(request).await?;
    let took = started.elapsed();
    let page = expect_json(response, StatusCode::OK, "list after restart")?;
    if page["total"].as_u64() != Some(each as u64) {
        return Err(format!("list after restart: total {}, expected {each}", page["total"]).into());
    }
    Ok(took)
}

fn measure<F>(load: &Runtime, name: &str, addr: SocketAddr, settings: &Settings, make: F) -> LoadReport
where
    F: Fn(u64) -> BenchRequest + Send + Sync + 'static,
{
    let report = load.block_on(run_load(addr, settings, make));
    println!(
        "measured {name}: {} req/s, p99 {}",
        thousands(report.requests_per_second()),
        millis(report.latencies.percentile(0.99))
    );
    if let Some(first) = &report.first_error {
        println!("  ERRORS in {name}: {} failed requests; first: {first}", report.errors);
    }
    report
}

fn median(samples: &[Duration]) -> Duration {
    let mut sorted = samples.to_vec();
    sorted.sort_unstable();
    sorted.get(sorted.len().saturating_sub(1) / 2).copied().unwrap_or_default()
}

/// What the cell's search directories take on disk: the part of the data that is the index.
fn search_dirs_usage(data: &std::path::Path) -> std::io::Result<u64> {
    let mut total = 0;
    for entry in std::fs::read_dir(data)? {
        let path = entry?.path();
        if path.file_name().is_some_and(|name| name == "search") {
            total += disk_usage(&path)?;
        } else if path.is_dir() {
            total += search_dirs_usage(&path)?;
        }
    }
    Ok(total)
}

fn print_tables(rows: &[Row]) {
    println!(
        "\nmemory and disk (anonymous memory from /metrics, after the load {SETTLE:?} after its reads; \
         peak = highest of reads every {METRICS_EVERY:?})"
    );
    println!(
        "{:<16} {:>9} {:>9} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>11}",
        "stores × each",
        "budget",
        "idle",
        "after load",
        "peak",
        "above idle",
        "caches",
        "w/o writer",
        "live",
        "held",
        "disk",
        "index",
        "creates/s",
        "last/first"
    );
    for r in rows {
        let m = &r.after_load;
        println!(
            "{:<16} {:>9} {:>9} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10.0}%",
            r.shape.label(),
            human(m.budget),
            human(r.idle.anon),
            human(m.anon),
            human(m.peak),
            human(m.anon.saturating_sub(r.idle.anon)),
            human(m.cache_sum()),
            human(m.cache_sum_without_writer()),
            human(m.heap_allocated.saturating_sub(r.idle.heap_allocated)),
            human(m.heap_resident.saturating_sub(r.idle.heap_resident)),
            human(r.disk),
            human(r.disk_search),
            thousands(r.seed_rate.all),
            100.0 * r.seed_rate.last / r.seed_rate.first,
        );
    }
    println!(
        "(caches: the sum of shopcell_cache_bytes; w/o writer: without {SEARCH_WRITER}, its whole share while a pass writes; \
         live and held: the allocator's bytes in live allocations and what it keeps resident, above idle; index: the search index's part of the disk figure; last/first: the create rate of the last batch of \
         {SEED_CHUNK} products against the first's)"
    );

    let names: Vec<&String> = {
        let mut names: Vec<&String> = rows.iter().flat_map(|r| r.after_load.caches.keys()).collect();
        names.sort();
        names.dedup();
        names
    };
    println!("\nwhat the caches hold after the load (shopcell_cache_bytes, summed over owners)");
    print!("{:<16}", "stores × each");
    for name in &names {
        print!(" {name:>14}");
    }
    println!();
    for r in rows {
        print!("{:<16}", r.shape.label());
        for name in &names {
            print!(" {:>14}", r.after_load.caches.get(*name).map_or("—".to_string(), |b| human(*b)));
        }
        println!();
    }

    println!("\nafter a restart on the same data, and throughput at 64 connections as a share of bare hyper");
    println!(
        "{:<16} {:>8} {:>11} {:>10} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "stores × each", "start", "first list", "max", "anonymous", "list", "hot list", "hottest", "by id", "search", "bare/s"
    );
    for r in rows {
        let t = &r.throughput;
        let share = |report: &LoadReport| {
            let flag = if report.errors > 0 { "!" } else { "" };
            format!("{:.1} %{flag}", report.requests_per_second() / t.bare * 100.0)
        };
        println!(
            "{:<16} {:>8} {:>11} {:>10} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
            r.shape.label(),
            format!("{:.2} s", r.start.as_secs_f64()),
            millis(median(&r.first_lists)),
            millis(r.first_lists.iter().copied().max().unwrap_or_default()),
            human(r.restarted.anon),
            share(&t.list),
            share(&t.hot),
            share(&t.hottest),
            share(&t.get),
            share(&t.search),
            thousands(t.bare),
        );
    }
    println!(
        "(first list: median of the first `GET …/products?limit={LIST_LIMIT}` of {FIRST_LIST_STORES} stores (of the one \
         store in one-store rows) after the restart; anonymous: after those lists; hot list: pages of one store in \
         {HOT_SHARE} alone; hottest: of one in {HOTTEST_SHARE}; ! marks a scenario with errors)"
    );
}
