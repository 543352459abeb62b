//! Stock benchmark (issue "Stock at locations and fulfillment"), the real binary with the answer
//! cache off and the job runner paused (mail waits in the database), 64 clients, no order reused:
//!
//! 1. Durable completions in a store with five active online locations, 40 % of its orders split
//!    across two of them, against the same completions in a store with its default location alone
//!    (same lines, same run): at least 50 %.
//! 2. Durable fulfills with tracking, each of another order: at least twice the
//!    one-fsync-per-transaction rate of the same run.
//! 3. `GET S/inventory-levels?variantId=` of random variants over 50 locations while completions
//!    run in that store at a fixed rate: at least 40 % of bare hyper.
//!
//! `cargo bench --bench stock`. Environment: `BENCH_CHECKOUTS` (default 4,000 per store),
//! `BENCH_BACKGROUND_RATE` (completions per second during the reads, default 200),
//! `BENCH_SECONDS` (the read scenario), `BENCH_SCENARIOS=reads` (scenario 3 alone) or
//! `BENCH_SCENARIOS=fulfills` (scenario 2 alone, its orders completed in one store first),
//! `BENCH_SHOPCELL` (the binary to serve, e.g. an earlier build's, for a before/after in one
//! session; default this build's).
//!
//! Scenario 3 also prints the server's CPU time per level read (from `/proc/PID/stat`, the
//! background completions' own CPU, measured alone just before, taken off), and scenario 2 the
//! server's and its writer thread's CPU time per fulfill: what to compare between builds on a
//! machine shared with other work, where throughput moves by several times. The server's pid is
//! printed first, for `perf record -p`.

mod common;

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use common::inspect::{millis, scrape_metrics};
use common::shop::Shop;
use common::{
    BoxError, Client, Endpoint, InProcess, LoadReport, ServerProcess, Settings, env_or, redb_fsync_baseline, run_load,
    start_bare_hyper, start_bare_hyper_sized,
};
use hyper::StatusCode;
use serde_json::{Value, json};

/// Products of the completion stores: each holds its stock at one location of the split store.
const PRODUCTS: usize = 5;
/// Locations of the read scenario's store, and the variants read there.
const READ_LOCATIONS: usize = 50;
const READ_VARIANTS: usize = 200;
/// About the size of a variant's levels page over 50 locations.
const LEVELS_PAGE_BYTES: usize = 12_000;

fn main() -> ExitCode {
    match bench() {
        Ok(rows) => {
            println!();
            println!("{:<64} {:>12} {:>10}  result", "target", "measured", "required");
            for (name, measured, required) in rows {
                let verdict = if measured >= required { "pass" } else { "FAIL" };
                println!("{name:<64} {:>12} {:>10}  {verdict}", format!("{measured:.2}×"), format!("≥ {required:.2}×"));
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("stock benchmark aborted: {e}");
            ExitCode::FAILURE
        }
    }
}

type Row = (&'static str, f64, f64);

const FULFILLS_ROW: &str = "fulfills with tracking / one fsync per transaction";
const LEVELS_ROW: &str = "GET inventory-levels?variantId= (50 locations, completions running) / bare hyper";

/// How long the background completions run alone before the reads, to measure their own CPU.
const BACKGROUND_ALONE: Duration = Duration::from_secs(3);

fn bench() -> Result<Vec<Row>, BoxError> {
    let count: usize = env_or("BENCH_CHECKOUTS", 4000)?;
    let background: u64 = env_or("BENCH_BACKGROUND_RATE", 200)?;
    let settings = Settings::from_env()?;
    let load = common::runtime("load-gen")?;
    // The job runner paused: the scenarios time what the writes and reads cost, not the mail
    // each order and shipment sends afterwards (the offline mailer makes a file per message).
    let binary = common::served_binary();
    let scenarios = std::env::var("BENCH_SCENARIOS").unwrap_or_default();
    let (reads_alone, fulfills_alone) = (scenarios == "reads", scenarios == "fulfills");
    let server = ServerProcess::spawn_with(&binary, &["--answer-cache", "false", "--jobs-paused"])?;
    println!("server pid {}", server.pid());
    let result = (|| -> Result<(Vec<Row>, String, Vec<String>), BoxError> {
        let endpoint = Endpoint::new(server.addr);
        if reads_alone {
            let (bare, levels, store, variants) = read_levels(&load, &server, &settings, count, background)?;
            let ratio = levels.requests_per_second() / bare.requests_per_second();
            return Ok((vec![(LEVELS_ROW, ratio, 0.4)], store, variants));
        }
        // 1. Completions: one location against five, the same lines in both stores.
        let (single, single_lines) = load.block_on(completion_store(&endpoint, "Single", 1, count))?;
        if fulfills_alone {
            let prepared = load.block_on(single.prepare(count, move |n| lines(&single_lines, n)))?;
            let (orders, _) = load.block_on(single.complete(prepared))?;
            let ratio = fulfill_scenario(&load, &server, &single, &orders, count)?;
            return Ok((vec![(FULFILLS_ROW, ratio, 2.0)], String::new(), Vec::new()));
        }
        let (split, split_lines) = load.block_on(completion_store(&endpoint, "Five", PRODUCTS, count))?;
        let single_prepared = load.block_on(single.prepare(count, move |n| lines(&single_lines, n)))?;
        let split_prepared = load.block_on(split.prepare(count, move |n| lines(&split_lines, n)))?;
        println!("prepared {count} checkouts in each store; 40 % have two lines stocked at different locations");
        let (orders, alone) = load.block_on(single.complete(single_prepared))?;
        let (split_orders, five) = load.block_on(split.complete(split_prepared))?;
        let alone = rate(count, alone);
        let five = rate(count, five);
        let fos = load.block_on(fulfillment_orders(&split, &split_orders))?;
        let multi = fos.iter().filter(|f| f.len() > 1).count();
        println!("measured completions, default location alone: {alone:.0}/s");
        println!(
            "measured completions, five locations: {five:.0}/s ({:.0} % of the orders split)",
            100.0 * multi as f64 / count as f64
        );
        if multi * 10 < count * 3 {
            return Err(format!("only {multi} of {count} orders split; the scenario needs at least 30 %").into());
        }

        // 2. Fulfills with tracking, each of another order, against the fsync rate of just before.
        let fulfills = fulfill_scenario(&load, &server, &single, &orders, count)?;

        // 3. Level reads over 50 locations with completions running.
        let (bare, levels, store, variants) = read_levels(&load, &server, &settings, count, background)?;

        let rows = vec![
            ("completions: five locations, 40 % split / default location alone", five / alone, 0.5),
            (FULFILLS_ROW, fulfills, 2.0),
            (LEVELS_ROW, levels.requests_per_second() / bare.requests_per_second(), 0.4),
        ];
        Ok((rows, store, variants))
    })();
    let dir = server.stop()?;
    let (rows, store, variants) = result?;
    if variants.is_empty() {
        return Ok(rows);
    }
    // The same reads in this process: the handler's own work, without HTTP.
    let server = InProcess::open(dir)?;
    let timed = time_levels(&server, &store, &variants, settings.duration);
    server.stop();
    timed?;
    Ok(rows)
}

/// Times a variant's levels page (50 rows) as the handler answers it, in this process: from the
/// kept levels, then with them read afresh (dropped before each page, as a write would).
fn time_levels(server: &InProcess, store: &str, variants: &[String], budget: Duration) -> Result<(), BoxError> {
    let cell = server.cell()?;
    let store = uuid::Uuid::parse_str(store)?;
    let ids: Vec<uuid::Uuid> = variants.iter().map(|v| uuid::Uuid::parse_str(v)).collect::<Result<_, _>>()?;
    let query = |v: &uuid::Uuid| shopcell::storage::list::ListQuery {
        limit: 50,
        filters: vec![(0, vec![v.as_bytes().to_vec()])],
        ..Default::default()
    };
    let page = |variant: &uuid::Uuid| shopcell::cells::stock::variant_page::page(&cell, store, *variant, &query(variant), 1, 50);
    let mut bytes = 0;
    for variant in &ids {
        let body = page(variant)?;
        let rows: Value = serde_json::from_slice(&body)?;
        if rows["data"].as_array().map(Vec::len) != Some(READ_LOCATIONS) {
            return Err(format!("a variant's levels: {rows}, {READ_LOCATIONS} rows expected").into());
        }
        bytes = body.len();
    }
    let budget = budget.min(Duration::from_secs(2)) / 2;
    let mut each = [0.0; 2];
    for (afresh, each) in each.iter_mut().enumerate() {
        let (mut n, started) = (0usize, std::time::Instant::now());
        while started.elapsed() < budget {
            let variant = &ids[n % ids.len()];
            if afresh == 1 {
                cell.writer.levels.drop_row(store, *variant);
            }
            page(variant)?;
            n += 1;
        }
        *each = started.elapsed().as_secs_f64() * 1e6 / n.max(1) as f64;
    }
    println!(
        "in-process: a variant's levels page over {READ_LOCATIONS} locations ({bytes} bytes) answered in {:.1} µs \
         from its kept levels, {:.1} µs with them read afresh",
        each[0], each[1]
    );
    Ok(())
}

fn rate(count: usize, elapsed: Duration) -> f64 {
    count as f64 / elapsed.as_secs_f64()
}

/// Order `n`'s lines: one unit of product `n mod 5`, and for 4 orders in 10 one of the next product.
fn lines(variants: &[String], n: u64) -> Value {
    let first = n as usize % PRODUCTS;
    let mut lines = vec![json!({"variantId": variants[first], "quantity": 1})];
    if n % 10 < 4 {
        lines.push(json!({"variantId": variants[(first + 1) % PRODUCTS], "quantity": 1}));
    }
    Value::Array(lines)
}

/// A store with five tracked products and `locations` active online locations; product `i`'s
/// stock (enough for every order) is at location `i mod locations`, so with five locations an
/// order of two products has no location covering it whole.
async fn completion_store(
    endpoint: &Endpoint,
    name: &str,
    locations: usize,
    count: usize,
) -> Result<(Shop, Vec<String>), BoxError> {
    let shop = Shop::open(endpoint, name).await?;
    let mut client = Client::new(endpoint.addr);
    let all = add_locations(&shop, &mut client, locations).await?;
    let mut variants = Vec::new();
    for i in 0..PRODUCTS {
        let variant = shop.product(&mut client, &format!("Item {i}"), 1000 + 100 * i as u64, count).await?;
        let at = &all[i % locations];
        if at != &all[0] {
            set_level(&shop, &mut client, &variant, &all[0], 0).await?;
            set_level(&shop, &mut client, &variant, at, count as i64).await?;
        }
        variants.push(variant);
    }
    Ok((shop, variants))
}

/// Creates locations until the store has `total` (its default first); answers their ids in order.
async fn add_locations(shop: &Shop, client: &mut Client, total: usize) -> Result<Vec<String>, BoxError> {
    let list = client.send(shop.owner.get(&format!("{}/locations?sortBy=priority&sortOrder=asc", shop.base))).await?;
    let list = common::expect_json(list, StatusCode::OK, "list locations")?;
    let mut ids = vec![list["data"][0]["id"].as_str().ok_or("no default location")?.to_string()];
    for i in 1..total {
        let location = shop.post(client, "locations", &json!({"name": format!("Warehouse {i}"), "priority": i})).await?;
        ids.push(location["id"].as_str().ok_or("location: no id")?.to_string());
    }
    Ok(ids)
}

async fn set_level(shop: &Shop, client: &mut Client, variant: &str, location: &str, available: i64) -> Result<(), BoxError> {
    let body = json!({"variantId": variant, "locationId": location, "available": available, "reason": "received"});
    let answer = client.send(shop.owner.post_json(&format!("{}/inventory-levels/set", shop.base), &body)).await?;
    common::expect_json(answer, StatusCode::OK, "set level").map(drop)
}

/// Each order's fulfillment order ids, read back through the API.
async fn fulfillment_orders(shop: &Shop, orders: &[Value]) -> Result<Vec<Vec<String>>, BoxError> {
    let ids: Arc<Vec<String>> = Arc::new(orders.iter().map(|o| o["id"].as_str().unwrap_or_default().to_string()).collect());
    let (a, b) = (shop.owner.clone(), shop.base.clone());
    let lists = shop
        .batch("list fulfillment orders", ids.len(), StatusCode::OK, move |n| {
            a.get(&format!("{b}/orders/{}/fulfillment-orders", ids[n as usize]))
        })
        .await?;
    Ok(lists
        .iter()
        .map(|l| l["data"].as_array().into_iter().flatten().filter_map(|f| f["id"].as_str().map(str::to_string)).collect())
        .collect())
}

/// Scenario 2: the fsync baseline, then every order fulfilled with a tracking number; prints
/// the rate, the server's and its writer's CPU per fulfill and how the cell's writer batched
/// (the job runner is paused: no CPU of its own), answers the rate over the baseline.
fn fulfill_scenario(
    load: &tokio::runtime::Runtime,
    server: &ServerProcess,
    shop: &Shop,
    orders: &[Value],
    count: usize,
) -> Result<f64, BoxError> {
    let fos = load.block_on(fulfillment_orders(shop, orders))?;
    let fsync = redb_fsync_baseline(server.dir(), Duration::from_secs(2))?;
    println!("baseline one fsync per transaction: {:.0} txn/s", fsync.per_second());
    let batching = load.block_on(cell_writer(server))?;
    let (cpu, writer, written) = (server.cpu()?, server.threads_cpu("writer-")?, server.bytes_written()?);
    let fulfilled = load.block_on(fulfill(shop, orders, fos))?;
    let fulfills = rate(count, fulfilled);
    let (cpu, writer) = (server.cpu()? - cpu, server.threads_cpu("writer-")? - writer);
    let written = server.bytes_written()? - written;
    let after = load.block_on(cell_writer(server))?;
    let [commits, jobs, commit_seconds, fsyncs, fsync_seconds] = [0, 1, 2, 3, 4].map(|i| after[i] - batching[i]);
    let per = |d: Duration| d.as_secs_f64() * 1e6 / count as f64;
    println!(
        "measured fulfills with tracking: {fulfills:.0}/s ({:.2}× the fsync baseline); CPU per fulfill: server {:.0} µs, writer {:.0} µs",
        fulfills / fsync.per_second(),
        per(cpu),
        per(writer),
    );
    println!(
        "the cell's writer meanwhile: {commits:.0} commits of {:.1} writes on average, {:.0} µs per commit and {:.0} µs per fsync (made beside the next batch; {fsyncs:.0} of them), {:.1} KiB written per fulfill",
        jobs / commits.max(1.0),
        commit_seconds * 1e6 / commits.max(1.0),
        fsync_seconds * 1e6 / fsyncs.max(1.0),
        written as f64 / 1024.0 / count as f64
    );
    Ok(fulfills / fsync.per_second())
}

/// The cell's writer so far, from `/metrics`: commits, writes committed, seconds committing,
/// fsyncs and their seconds (none from a build whose commits made their own).
async fn cell_writer(server: &ServerProcess) -> Result<[f64; 5], BoxError> {
    let endpoint = Endpoint::new(server.addr);
    let samples = scrape_metrics(&mut Client::new(server.addr), &endpoint, &server.service_key()?).await?;
    let cell = |name: &str| -> f64 {
        samples.iter().filter(|m| m.name == name && m.label("owner") != Some("account")).map(|m| m.value).sum()
    };
    Ok([
        "shopcell_writer_batch_size_count",
        "shopcell_writer_batch_size_sum",
        "shopcell_writer_commit_seconds_sum",
        "shopcell_writer_fsync_seconds_count",
        "shopcell_writer_fsync_seconds_sum",
    ]
    .map(cell))
}

/// Fulfills every order's (single) fulfillment order with a tracking number; answers the wall time.
async fn fulfill(shop: &Shop, orders: &[Value], fos: Vec<Vec<String>>) -> Result<Duration, BoxError> {
    let targets: Arc<Vec<(String, String)>> = Arc::new(
        orders
            .iter()
            .zip(fos)
            .map(|(o, f)| {
                Ok((
                    o["id"].as_str().unwrap_or_default().to_string(),
                    f.into_iter().next().ok_or("an order without a fulfillment order")?,
                ))
            })
            .collect::<Result<_, BoxError>>()?,
    );
    let (a, b) = (shop.owner.clone(), shop.base.clone());
    let started = std::time::Instant::now();
    let done = shop
        .batch("fulfill", targets.len(), StatusCode::CREATED, move |n| {
            let (order, fo) = &targets[n as usize];
            let tracking = json!({"tracking": {"number": format!("1Z999AA1{n:010}"), "company": "UPS"}});
            a.post_json(&format!("{b}/orders/{order}/fulfillment-orders/{fo}/fulfill"), &tracking)
        })
        .await?;
    let elapsed = started.elapsed();
    if let Some(bad) = done.iter().find(|d| d["fulfillmentOrder"]["status"] != "CLOSED") {
        return Err(format!("a fulfill left its fulfillment order open: {bad}").into());
    }
    Ok(elapsed)
}

/// Bare hyper, then level reads of random variants over 50 locations with completions sent at
/// `background` per second in the same store.
fn read_levels(
    load: &tokio::runtime::Runtime,
    server: &ServerProcess,
    settings: &Settings,
    count: usize,
    background: u64,
) -> Result<(LoadReport, LoadReport, String, Vec<String>), BoxError> {
    let endpoint = &Endpoint::new(server.addr);
    let window = BACKGROUND_ALONE + settings.warmup + settings.duration + Duration::from_secs(1);
    let needed = (background as f64 * window.as_secs_f64()).ceil() as usize;
    let shop = load.block_on(Shop::open(endpoint, "Fifty"))?;
    let variants = load.block_on(async {
        let mut client = Client::new(endpoint.addr);
        let locations = add_locations(&shop, &mut client, READ_LOCATIONS).await?;
        let mut variants = Vec::new();
        for i in 0..READ_VARIANTS {
            variants.push(shop.product(&mut client, &format!("Read {i}"), 500, count.max(needed)).await?);
        }
        // A few more stocked locations per variant, so reads show real quantities among the zeros.
        for (i, variant) in variants.iter().enumerate() {
            for k in 1..4 {
                set_level(&shop, &mut client, variant, &locations[(i * 7 + k * 13) % READ_LOCATIONS], 50).await?;
            }
        }
        Ok::<_, BoxError>(variants)
    })?;
    let order_lines = variants.clone();
    let prepared = load.block_on(
        shop.prepare(needed, move |n| json!([{"variantId": order_lines[(n as usize * 31) % READ_VARIANTS], "quantity": 1}])),
    )?;
    println!(
        "read scenario: {READ_VARIANTS} variants over {READ_LOCATIONS} locations; {needed} checkouts for {background}/s in the background"
    );

    let bare = start_bare_hyper()?;
    let bare_endpoint = Endpoint::new(bare.addr);
    let bare_report = load.block_on(run_load(bare.addr, settings, move |_| bare_endpoint.get("/")));
    println!("measured bare hyper: {:.0} req/s", bare_report.requests_per_second());
    drop(bare);
    // The same server answering a body of the level page's size: what the transport alone
    // (both ends on this machine) allows for 12 KB answers. Printed for context; the target is
    // against the plain baseline above.
    let sized = start_bare_hyper_sized(LEVELS_PAGE_BYTES)?;
    let sized_endpoint = Endpoint::new(sized.addr);
    let sized_report = load.block_on(run_load(sized.addr, settings, move |_| sized_endpoint.get("/")));
    println!(
        "measured bare hyper with a {LEVELS_PAGE_BYTES}-byte body: {:.0} req/s ({:.2}× the plain one)",
        sized_report.requests_per_second(),
        sized_report.requests_per_second() / bare_report.requests_per_second()
    );
    drop(sized);

    let completed = Arc::new(AtomicU64::new(0));
    let pacer = {
        let (owner, base, completed) = (shop.owner.clone(), shop.base.clone(), completed.clone());
        load.spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / background as f64));
            for (checkout, intent) in prepared {
                tick.tick().await;
                let (owner, base, completed) = (owner.clone(), base.clone(), completed.clone());
                tokio::spawn(async move {
                    let mut client = Client::new(owner.addr);
                    let body = json!({"paymentMethodId": "pm_card_visa", "paymentIntentId": intent});
                    if let Ok((StatusCode::CREATED, _)) =
                        client.send(owner.post_json(&format!("{base}/checkouts/{checkout}/complete"), &body)).await
                    {
                        completed.fetch_add(1, Ordering::Relaxed);
                    }
                });
            }
        })
    };
    // The completions alone first: their CPU per second, taken off the reads' below.
    let alone_from = server.cpu()?;
    std::thread::sleep(BACKGROUND_ALONE);
    let background_cpu = (server.cpu()? - alone_from).as_secs_f64() / BACKGROUND_ALONE.as_secs_f64();
    let variants_read = variants.clone();
    let (reader, base, seed) = (shop.owner.clone(), shop.base.clone(), 0x9E37_79B9_7F4A_7C15u64);
    let sent = Arc::new(AtomicU64::new(0));
    let counted = sent.clone();
    let (cpu_from, from) = (server.cpu()?, std::time::Instant::now());
    let report = load.block_on(run_load(endpoint.addr, settings, move |n| {
        counted.fetch_add(1, Ordering::Relaxed);
        // A multiplicative hash of the counter: every client reads scattered variants.
        let i = (n.wrapping_mul(seed) >> 40) as usize % READ_VARIANTS;
        reader.get(&format!("{base}/inventory-levels?variantId={}&limit=50", variants[i]))
    }));
    let (cpu, elapsed) = ((server.cpu()? - cpu_from).as_secs_f64(), from.elapsed().as_secs_f64());
    pacer.abort();
    // Every request sent counts, the warm-up's too: the CPU was read across all of them.
    let reads = sent.load(Ordering::Relaxed).max(1) as f64;
    println!(
        "server CPU per level read: {:.1} µs ({:.1} µs with the completions' {:.0} % of a core left in; {reads:.0} reads in {elapsed:.1} s)",
        (cpu - background_cpu * elapsed).max(0.0) * 1e6 / reads,
        cpu * 1e6 / reads,
        background_cpu * 100.0
    );
    let during = completed.load(Ordering::Relaxed);
    println!(
        "measured GET inventory-levels?variantId=: {:.0} req/s, p99 {} ({} errors; {during} completions meanwhile)",
        report.requests_per_second(),
        millis(report.latencies.percentile(0.99)),
        report.errors
    );
    if let Some(first) = &report.first_error {
        return Err(format!("level reads failed: {first}").into());
    }
    let store = shop.base.rsplit('/').next().unwrap_or_default().to_string();
    Ok((bare_report, report, store, variants_read))
}
