//! Record lists at depth: what a page of a record list costs by its offset and filter, and what
//! the first read of a list costs after a restart.
//!
//! One store of `LISTS_RECORDS` gift cards (default 20,000; any record list of the record layer
//! is kept the same way), each of one of ten customers, created through the API. Then the server
//! restarts on the same data and the first read of three lists is timed (each is built on it:
//! sorted by balance; one customer's cards sorted by balance; the same in the default order).
//! Then, at 64 connections against the bare-hyper baseline of the same run, with the answer
//! cache off: page 1 sorted by balance, the last page in that order, the last page of one
//! customer's cards in that order, the last page of a view (two customers' cards whose code
//! ends with a digit 7 among its last characters, by balance: two filters and a query), and the
//! last page of the active cards by balance (a status the clock changes: a third of the cards
//! expire, years from now).
//!
//! `cargo bench --bench lists`; `BENCH_SECONDS`, and `BENCH_SHOPCELL` to serve another binary
//! (an earlier build's, for a before and after in one session). Figures are printed, never
//! asserted.

mod common;

use std::process::ExitCode;
use std::time::{Duration, Instant};

use common::{
    BoxError, Client, Endpoint, LoadReport, ServerProcess, Settings, env_or, expect_json, run_batch, run_load, start_bare_hyper,
};
use hyper::StatusCode;
use serde_json::json;

const CUSTOMERS: usize = 10;
const LIMIT: usize = 20;
const CONCURRENCY: usize = 64;

fn main() -> ExitCode {
    match bench() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("lists benchmark failed: {e}");
            ExitCode::FAILURE
        }
    }
}

fn bench() -> Result<(), BoxError> {
    let records: usize = env_or("LISTS_RECORDS", 20_000)?;
    let settings = Settings::from_env()?;
    let load = common::runtime("load-gen")?;
    let binary = common::served_binary();
    let flags = ["--answer-cache", "false"];
    let server = ServerProcess::spawn_with(&binary, &flags)?;
    let endpoint = Endpoint::new(server.addr);
    let seeded = load.block_on(common::seed(&endpoint, 1, 1))?;
    let customers: Vec<String> = (0..CUSTOMERS).map(|_| uuid::Uuid::now_v7().to_string()).collect();
    let path = format!("/api/v1/stores/{}/gift-cards", seeded.store_id);

    let authed = endpoint.with_bearer(&seeded.token)?;
    let (creator, create_path, owners) = (authed.clone(), path.clone(), customers.clone());
    let (outcomes, elapsed) = load.block_on(run_batch(endpoint.addr, CONCURRENCY, records, move |n| {
        let amount = 100 + (n * 7919) % 99_900;
        let customer = &owners[n as usize % CUSTOMERS];
        let mut card = json!({"initialValue": {"amount": amount, "currency": "USD"}, "customerId": customer});
        if n % 3 == 0 {
            card["expiresOn"] = json!(format!("{}-06-30", 2030 + n % 7));
        }
        creator.post_json(&create_path, &card)
    }));
    for outcome in outcomes {
        expect_json(outcome.map_err(BoxError::from)?, StatusCode::CREATED, "issue a gift card")?;
    }
    println!("created {records} gift cards in {:.1} s ({:.0}/s)", elapsed.as_secs_f64(), records as f64 / elapsed.as_secs_f64());

    let server = server.restart_with(&binary, &flags)?;
    let endpoint = Endpoint::new(server.addr);
    let authed = endpoint.with_bearer(&seeded.token)?;
    let customer = &customers[0];
    let last = records.div_ceil(LIMIT);
    let last_of_one = (records / CUSTOMERS).div_ceil(LIMIT);
    let page_one = format!("{path}?sortBy=balance&limit={LIMIT}");
    let deep = format!("{path}?sortBy=balance&limit={LIMIT}&page={last}");
    let filtered_deep = format!("{path}?customerId={customer}&sortBy=balance&limit={LIMIT}&page={last_of_one}");
    let filtered_default = format!("{path}?customerId={customer}&limit={LIMIT}");
    let view = format!("{path}?customerId={customer},{}&search=7&sortBy=balance&limit={LIMIT}", customers[1]);
    let mut view_total = 0;
    for (name, p) in [
        ("sorted by balance", &page_one),
        ("one customer's, by balance", &filtered_deep),
        ("one customer's, default order", &filtered_default),
        ("a view, by balance", &view),
    ] {
        let (took, total) = load.block_on(timed_get(&authed, p))?;
        println!("first read after the restart, {name}: {:.1} ms (total {total})", took.as_secs_f64() * 1000.0);
        // The view is read last: its total says where its last page is.
        view_total = total;
    }
    let view_deep = format!("{view}&page={}", (view_total as usize).div_ceil(LIMIT).max(1));
    let active_deep = format!("{path}?status=ACTIVE&sortBy=balance&limit={LIMIT}&page={last}");

    let bare = start_bare_hyper()?;
    let bare_endpoint = Endpoint::new(bare.addr);
    let bare = measure(&load, "bare hyper", bare.addr, &settings, move |_| bare_endpoint.get("/"));
    let mut rows = Vec::new();
    for (name, p) in [
        ("page 1 by balance", page_one),
        ("last page by balance", deep),
        ("last page of one customer's by balance", filtered_deep),
        ("last page of a view (two customers, a query) by balance", view_deep),
        ("last page of the active cards by balance", active_deep),
    ] {
        let authed = authed.clone();
        let report = measure(&load, name, server.addr, &settings, move |_| authed.get(&p));
        rows.push((name, report.requests_per_second() / bare.requests_per_second()));
    }
    println!("\n| {records} gift cards, {LIMIT} a page | / bare hyper |\n|---|---|");
    for (name, ratio) in rows {
        println!("| {name} | {ratio:.2}× |");
    }
    server.stop()?;
    Ok(())
}

/// One GET's wall time and the `total` its page reports.
async fn timed_get(endpoint: &Endpoint, path: &str) -> Result<(Duration, u64), BoxError> {
    let mut client = Client::new(endpoint.addr);
    let started = Instant::now();
    let page = expect_json(client.send(endpoint.get(path)).await?, StatusCode::OK, path)?;
    let took = started.elapsed();
    let total = page["total"].as_u64().or_else(|| page["pagination"]["total"].as_u64()).unwrap_or(0);
    Ok((took, total))
}

fn measure<F>(load: &tokio::runtime::Runtime, name: &str, addr: std::net::SocketAddr, settings: &Settings, make: F) -> LoadReport
where
    F: Fn(u64) -> common::BenchRequest + Send + Sync + 'static,
{
    let report = load.block_on(run_load(addr, settings, make));
    println!(
        "measured {name}: {:.0} req/s, p99 {:.2} ms",
        report.requests_per_second(),
        report.latencies.percentile(0.99).as_secs_f64() * 1000.0
    );
    if let Some(first) = &report.first_error {
        println!("  ERRORS in {name}: {} failed requests; first: {first}", report.errors);
    }
    report
}
