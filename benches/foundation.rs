//! Foundation load benchmark: how close the real server's basic product routes come to a bare
//! hyper server, and how far durable writes get past one fsync per transaction.
//!
//! `cargo bench --bench foundation`. Environment: `BENCH_SECONDS` (measured seconds per scenario,
//! default 5), `BENCH_PRODUCTS` (products seeded, default 10000), `BENCH_ONLY_BASELINES=1`
//! (measure the two baselines only, without the server), `BENCH_SHOPCELL` (the binary to serve,
//! e.g. an earlier build's, for a before and after in one session).
//!
//! Targets are ratios to baselines measured in the same run, since absolute figures drift with the
//! machine. A missed target prints FAIL but never fails the run: timings are not assertions.

mod common;

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use common::inspect::{millis, thousands};
use common::{
    BARE_BODY_LEN, BareServer, BenchRequest, BoxError, Client, Endpoint, FsyncBaseline, LoadReport, ServerProcess, Settings,
    expect_json, product_body, redb_fsync_baseline, run_load, runtime, seed, start_bare_hyper,
};
use hyper::StatusCode;

/// Requests in flight while seeding, matching the load scenarios' connection count.
const SEED_CONCURRENCY: usize = 64;
/// Page size of the list scenario.
const LIST_LIMIT: usize = 20;
/// The list scenario walks pages 1..=50 (fewer when fewer products exist).
const LIST_MAX_PAGE: usize = 50;

/// Scenario names, shared by the progress lines and the tables.
const BARE: &str = "bare hyper GET /";
const GET_ONE: &str = "GET one product";
const GET_LIST: &str = "GET list page";
const CREATE: &str = "POST create product";

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("foundation benchmark aborted: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), BoxError> {
    let settings = Settings::from_env()?;
    println!(
        "foundation: {} connections, {:.1} s warm-up + {:.1} s per scenario, {} products, temp dir {}",
        settings.connections,
        settings.warmup.as_secs_f64(),
        settings.duration.as_secs_f64(),
        settings.products,
        std::env::temp_dir().display(),
    );

    let bare = start_bare_hyper()?;
    let load = runtime("load-gen")?;

    if settings.only_baselines {
        println!("BENCH_ONLY_BASELINES=1: skipping the server under test");
        // Stands in for a real RS256 access token so the baseline parses a header of similar size.
        let placeholder = "x".repeat(700);
        let endpoint = Endpoint::new(bare.addr).with_bearer(&placeholder)?;
        let bare_report = measure(&load, BARE, bare.addr, &settings, move |_| endpoint.get("/"));
        measure_fsync(&settings)?;
        print_scenarios(&[(BARE, &bare_report)]);
        println!("\nno targets checked: the server under test was skipped");
    } else {
        let run = run_server_scenarios(&settings, &load, &bare)?;
        print_scenarios(&[(BARE, &run.bare), (GET_ONE, &run.get_one), (GET_LIST, &run.list), (CREATE, &run.create)]);
        print_targets(&run);
    }
    Ok(())
}

/// Everything measured while the server under test was up.
struct ServerRun {
    /// Product creates per second while seeding.
    seed_rate: f64,
    fsync: FsyncBaseline,
    bare: LoadReport,
    get_one: LoadReport,
    list: LoadReport,
    create: LoadReport,
}

/// Starts and seeds the real server, then measures the bare baseline and the product routes with
/// the same token. The server is killed on return.
fn run_server_scenarios(settings: &Settings, load: &tokio::runtime::Runtime, bare: &BareServer) -> Result<ServerRun, BoxError> {
    let server = ServerProcess::spawn(&common::served_binary())?;
    println!("server under test at {}", server.url);

    let endpoint = Endpoint::new(server.addr);
    let seeded = load
        .block_on(seed(&endpoint, settings.products, SEED_CONCURRENCY))
        .map_err(|e| format!("seeding failed: {e}\n{}", server.log_tail()))?;
    let seed_rate = seeded.product_ids.len() as f64 / seeded.products_elapsed.as_secs_f64();
    println!(
        "seeded {} products in {:.2} s: {} creates/s ({SEED_CONCURRENCY} in flight)",
        seeded.product_ids.len(),
        seeded.products_elapsed.as_secs_f64(),
        thousands(seed_rate),
    );

    let authed = endpoint.with_bearer(&seeded.token)?;
    let store = format!("/api/v1/stores/{}", seeded.store_id);
    let product_paths: Arc<Vec<String>> =
        Arc::new(seeded.product_ids.iter().map(|id| format!("{store}/products/{id}")).collect());
    let pages = seeded.product_ids.len().div_ceil(LIST_LIMIT).min(LIST_MAX_PAGE);
    let list_path = |page: usize| format!("{store}/products?limit={LIST_LIMIT}&sortBy=price&sortOrder=asc&page={page}");
    load.block_on(check_responses(&authed, &product_paths[0], &seeded.product_ids[0], &list_path(1), seeded.product_ids.len()));

    // The baseline carries the same Authorization header as the scenarios it is compared with.
    let bare_endpoint = Endpoint::new(bare.addr).with_bearer(&seeded.token)?;
    let bare = measure(load, BARE, bare.addr, settings, move |_| bare_endpoint.get("/"));

    let get_one = authed.clone();
    let get_one =
        measure(load, GET_ONE, server.addr, settings, move |n| get_one.get(&product_paths[n as usize % product_paths.len()]));

    let get_list = authed.clone();
    let list_paths: Vec<String> = (1..=pages).map(list_path).collect();
    let list = measure(load, GET_LIST, server.addr, settings, move |n| get_list.get(&list_paths[n as usize % list_paths.len()]));

    // Right before the writes it is compared with, so both see the same disk conditions.
    let fsync = measure_fsync(settings)?;

    // Last, so the products it adds do not change what the read scenarios see.
    let create_path = format!("{store}/products");
    let first_new = seeded.product_ids.len() as u64;
    let create =
        measure(load, CREATE, server.addr, settings, move |n| authed.post_json(&create_path, &product_body(first_new + n)));

    Ok(ServerRun { seed_rate, fsync, bare, get_one, list, create })
}

/// Baseline B: the durable-write rate of one fsync per transaction, on the same disk as the
/// server's data (both live under the system temp dir).
fn measure_fsync(settings: &Settings) -> Result<FsyncBaseline, BoxError> {
    let dir = tempfile::tempdir()?;
    let fsync = redb_fsync_baseline(dir.path(), settings.duration.min(Duration::from_secs(3)))?;
    println!(
        "measured redb 1-row Durability::Immediate txn: {} txn/s ({:.0} µs each)",
        thousands(fsync.per_second()),
        fsync.elapsed.as_secs_f64() * 1e6 / fsync.transactions.max(1) as f64,
    );
    Ok(fsync)
}

/// One-off functional checks of the responses the scenarios will hammer; the load loop only
/// looks at status codes, so a wrong body would otherwise go unnoticed.
async fn check_responses(endpoint: &Endpoint, product_path: &str, product_id: &str, list_path: &str, seeded: usize) {
    let mut client = Client::new(endpoint.addr);
    let one = match client.send(endpoint.get(product_path)).await {
        Ok(response) => expect_json(response, StatusCode::OK, "GET one product"),
        Err(e) => Err(e),
    };
    match one {
        Ok(product) if product["id"] == product_id => println!("check  GET one product: ok"),
        Ok(product) => println!("WARNING GET one product: `id` is {}, expected {product_id}", product["id"]),
        Err(e) => println!("WARNING {e}"),
    }

    let list = match client.send(endpoint.get(list_path)).await {
        Ok(response) => expect_json(response, StatusCode::OK, "GET list page"),
        Err(e) => Err(e),
    };
    match list {
        Ok(page) => {
            let total = page["total"].as_u64();
            let rows = page["data"].as_array().map(Vec::len);
            let expected_rows = seeded.min(LIST_LIMIT);
            if total == Some(seeded as u64) && rows == Some(expected_rows) {
                println!("check  GET list page: ok (total {seeded})");
            } else {
                println!(
                    "WARNING GET list page: total {total:?} (expected {seeded}), {rows:?} rows \
                     (expected {expected_rows})"
                );
            }
        }
        Err(e) => println!("WARNING {e}"),
    }
}

fn measure<F>(load: &tokio::runtime::Runtime, name: &str, addr: SocketAddr, settings: &Settings, make_request: F) -> LoadReport
where
    F: Fn(u64) -> BenchRequest + Send + Sync + 'static,
{
    let report = load.block_on(run_load(addr, settings, make_request));
    println!(
        "measured {name}: {} req/s, p99 {}",
        thousands(report.requests_per_second()),
        millis(report.latencies.percentile(0.99)),
    );
    if let Some(first) = &report.first_error {
        println!("  ERRORS in {name}: {} failed requests; first: {first}", report.errors);
    }
    report
}

fn print_scenarios(rows: &[(&str, &LoadReport)]) {
    println!();
    println!("{:<22} {:>10} {:>10} {:>10} {:>8} {:>10}", "scenario", "req/s", "p50", "p99", "errors", "reconnects");
    for (name, report) in rows {
        println!(
            "{:<22} {:>10} {:>10} {:>10} {:>8} {:>10}",
            name,
            thousands(report.requests_per_second()),
            millis(report.latencies.percentile(0.50)),
            millis(report.latencies.percentile(0.99)),
            report.errors,
            report.reconnects,
        );
    }
    println!("(bare hyper answers a fixed {BARE_BODY_LEN}-byte JSON body)");
}

/// The verdict table: each target is a ratio to a baseline from this run.
fn print_targets(run: &ServerRun) {
    let fsync = &run.fsync;
    let bare = run.bare.requests_per_second();
    let targets = [
        ("GET one product / bare hyper", &run.get_one, bare, 0.5),
        ("GET list page / bare hyper", &run.list, bare, 0.3),
        ("POST create / fsync-per-txn redb", &run.create, fsync.per_second(), 4.0),
    ];

    println!();
    println!("{:<34} {:>9} {:>10}  result", "target", "measured", "required");
    for (name, report, baseline, required) in targets {
        let ratio = report.requests_per_second() / baseline;
        let result = if report.errors > 0 {
            format!("FAIL ({} errors)", report.errors)
        } else if ratio >= required {
            "PASS".to_string()
        } else {
            "FAIL".to_string()
        };
        let measured = format!("{ratio:.2}×");
        let required = format!("≥ {required:.2}×");
        println!("{name:<34} {measured:>9} {required:>10}  {result}");
    }
    let seed_ratio = format!("{:.2}×", run.seed_rate / fsync.per_second());
    println!("{:<34} {seed_ratio:>9} {:>10}  (for reference)", "seeding creates / fsync-per-txn", "—");
}
