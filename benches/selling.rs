//! Selling benchmark: `POST S/calculate` with 10 lines, 2 discount codes, an automatic discount,
//! tax from a shipping address and a chosen shipping rate, against the bare-hyper baseline of the
//! same run (target: at least 40 % of its requests per second).
//!
//! `cargo bench --bench selling`. Environment: `BENCH_SECONDS` (measured seconds per scenario,
//! default 5).
//!
//! The server under test is the shipped binary in its own process; the load generator and the
//! bare baseline run in this one. The in-process timings reopen the same data in this process
//! afterwards. Timings are reported, never asserted; a missed target prints FAIL.

mod common;

use std::process::ExitCode;
use std::time::{Duration, Instant};

use common::inspect::millis;
use common::{
    BenchRequest, BoxError, Client, Endpoint, InProcess, LoadReport, ServerProcess, Settings, expect_json, run_load, runtime,
    start_bare_hyper,
};
use hyper::StatusCode;
use serde_json::{Value, json};
use shopcell::cells::calculate::{self, CalcRequest, CalculateBody};
use uuid::Uuid;

/// (price in cents, quantity, grams per unit) of the ten lines.
const LINES: [(i64, u32, u32); 10] = [
    (1000, 1, 100),
    (2000, 2, 200),
    (1500, 3, 50),
    (999, 1, 0),
    (4500, 1, 500),
    (250, 4, 10),
    (12000, 1, 1000),
    (333, 3, 30),
    (5000, 2, 250),
    (799, 5, 20),
];

fn main() -> ExitCode {
    match bench() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("selling benchmark aborted: {e}");
            ExitCode::FAILURE
        }
    }
}

fn bench() -> Result<(), BoxError> {
    let settings = Settings::from_env()?;
    println!(
        "selling: {} connections, {:.1} s warm-up + {:.1} s per scenario",
        settings.connections,
        settings.warmup.as_secs_f64(),
        settings.duration.as_secs_f64(),
    );
    let bare = start_bare_hyper()?;
    let load = runtime("load-gen")?;
    let server = ServerProcess::spawn(env!("CARGO_BIN_EXE_shopcell"))?;
    let endpoint = Endpoint::new(server.addr);
    let (token, body, path) = load.block_on(seed(&endpoint))?;
    let authed = endpoint.with_bearer(&token)?;
    load.block_on(check(&authed, &path, &body))?;

    let bare_endpoint = Endpoint::new(bare.addr).with_bearer(&token)?;
    let bare_report = measure(&load, "bare hyper GET /", bare.addr, &settings, move |_| bare_endpoint.get("/"));
    let (calc_path, calc_body) = (path.clone(), body.clone());
    let calc = measure(&load, "POST calculate (10 lines, 2 codes, tax)", server.addr, &settings, move |_| {
        authed.post_json(&calc_path, &calc_body)
    });

    // The same store, now in this process: the request's own work, without HTTP.
    let server = InProcess::open(server.stop()?)?;
    let timed = in_process(&server, &path, &body, settings.duration);
    server.stop();
    timed?;
    summary(&bare_report, &calc);
    Ok(())
}

/// Sends one request and expects `status`; answers the JSON body.
async fn call(client: &mut Client, request: BenchRequest, status: StatusCode, step: &str) -> Result<Value, BoxError> {
    expect_json(client.send(request).await?, status, step)
}

/// A store with ten products, two codes, an automatic discount, Canadian tax rates and a
/// shipping zone; answers the owner's token, the calculate body and its path.
async fn seed(endpoint: &Endpoint) -> Result<(String, Value, String), BoxError> {
    let mut client = Client::new(endpoint.addr);
    let email = format!("selling-{}@example.com", Uuid::now_v7().simple());
    let register = endpoint
        .post_json("/api/v1/auth/register", &json!({"email": email, "password": "bench-password-1234", "name": "Bench Owner"}));
    let login = call(&mut client, register, StatusCode::CREATED, "register").await?;
    let token = login["accessToken"].as_str().ok_or("register: no accessToken")?.to_string();
    let authed = endpoint.with_bearer(&token)?;
    let store =
        authed.post_json("/api/v1/stores", &json!({"name": "Selling", "currency": "USD", "country": "US", "timezone": "UTC"}));
    let store = call(&mut client, store, StatusCode::CREATED, "create store").await?;
    let base = format!("/api/v1/stores/{}", store["id"].as_str().ok_or("create store: no id")?);

    let mut lines = Vec::new();
    let mut products = Vec::new();
    for (i, (price, quantity, grams)) in LINES.iter().enumerate() {
        let body = json!({"title": format!("Item {i}"), "status": "ACTIVE", "price": {"amount": price, "currency": "USD"},
                          "variants": [{"title": "Default", "weightGrams": grams}]});
        let p = call(&mut client, authed.post_json(&format!("{base}/products"), &body), StatusCode::CREATED, "create product")
            .await?;
        products.push(p["id"].clone());
        lines.push(json!({"variantId": p["variants"][0]["id"], "quantity": quantity}));
    }
    let discounts = [
        json!({"title": "Shirts 15", "code": "SHIRTS15", "valueType": "percentage", "value": 1500, "target": "products",
               "productIds": [products[1], products[4]], "combinesWith": {"orderDiscounts": true}}),
        json!({"title": "Five off", "code": "ORDER5", "valueType": "fixedAmount", "value": 500,
               "combinesWith": {"productDiscounts": true, "orderDiscounts": true}}),
        json!({"title": "Loyalty", "valueType": "percentage", "value": 200,
               "combinesWith": {"productDiscounts": true, "orderDiscounts": true}}),
    ];
    for d in &discounts {
        call(&mut client, authed.post_json(&format!("{base}/discounts"), d), StatusCode::CREATED, "create discount").await?;
    }
    for rate in [
        json!({"country": "CA", "rate": 500, "name": "GST", "shipping": true}),
        json!({"country": "CA", "province": "BC", "rate": 700, "name": "PST"}),
    ] {
        call(&mut client, authed.post_json(&format!("{base}/tax-rates"), &rate), StatusCode::CREATED, "create tax rate").await?;
    }
    let zone = json!({"name": "Canada", "countries": [{"code": "CA"}], "rates": [
        {"name": "Standard", "price": 1500, "estimatedDelivery": {"minDays": 3, "maxDays": 5}},
        {"name": "Heavy", "condition": "weight", "min": 2000, "price": 2500, "estimatedDelivery": {"minDays": 1, "maxDays": 2}}
    ]});
    let zone =
        call(&mut client, authed.post_json(&format!("{base}/shipping-zones"), &zone), StatusCode::CREATED, "create zone").await?;
    let body = json!({
        "lineItems": lines,
        "discountCodes": ["SHIRTS15", "ORDER5"],
        "shippingAddress": {"address1": "1 Main St", "city": "Vancouver", "province": "BC", "country": "CA", "postalCode": "V5K 0A1"},
        "shippingMethodId": zone["rates"][1]["id"],
    });
    Ok((token, body, format!("{base}/calculate")))
}

/// The load loop only looks at status codes: check once that the answer is the full calculation.
async fn check(endpoint: &Endpoint, path: &str, body: &Value) -> Result<(), BoxError> {
    let mut client = Client::new(endpoint.addr);
    let calc = call(&mut client, endpoint.post_json(path, body), StatusCode::OK, "calculate").await?;
    let applied = calc["appliedDiscountCodes"].as_array().map_or(0, Vec::len);
    let taxed = calc["taxLines"].as_array().map_or(0, Vec::len);
    let automatic =
        calc["discountApplications"].as_array().map_or(0, |a| a.iter().filter(|d| d["source"] == "automatic").count());
    if applied != 2 || taxed != 2 || automatic != 1 || calc["shipping"]["amount"] != 2500 {
        return Err(format!("calculate answered an unexpected calculation: {calc}").into());
    }
    println!("check  calculate: total {} with {applied} codes, {taxed} tax lines", calc["total"]["amount"]);
    Ok(())
}

/// The calculation alone, called on the cell the way the route handler does (no HTTP, no JSON):
/// how much of a request's time is the pricing itself (on this process's system allocator).
fn in_process(server: &InProcess, path: &str, body: &Value, duration: Duration) -> Result<(), BoxError> {
    let cell = server.cell()?;
    let store: Uuid = path.trim_start_matches("/api/v1/stores/").trim_end_matches("/calculate").parse()?;
    let request = CalcRequest::from_body(serde_json::from_value::<CalculateBody>(body.clone())?, false);
    let started = Instant::now();
    let mut n = 0u32;
    while started.elapsed() < duration.min(Duration::from_secs(2)) {
        calculate::price(&cell, store, &request, cell.clock.now_ms())?;
        n += 1;
    }
    let per = started.elapsed() / n.max(1);
    println!("in-process calculation: {:.1} µs each ({n} in one thread)", per.as_secs_f64() * 1e6);
    // The answer's JSON, as the handler writes it: the other half of a request's own work.
    let calculation = calculate::price(&cell, store, &request, cell.clock.now_ms())?.calculation;
    let (started, mut n, mut bytes) = (Instant::now(), 0u32, 0);
    while started.elapsed() < duration.min(Duration::from_secs(2)) {
        bytes = calculation.to_json()?.len();
        n += 1;
    }
    let per = started.elapsed() / n.max(1);
    println!("in-process answer serialization: {:.1} µs each ({bytes} bytes)", per.as_secs_f64() * 1e6);
    Ok(())
}

fn measure<F>(load: &tokio::runtime::Runtime, name: &str, addr: std::net::SocketAddr, settings: &Settings, make: F) -> LoadReport
where
    F: Fn(u64) -> BenchRequest + Send + Sync + 'static,
{
    let report = load.block_on(run_load(addr, settings, make));
    println!("measured {name}: {:.0} req/s, p99 {}", report.requests_per_second(), millis(report.latencies.percentile(0.99)));
    if let Some(first) = &report.first_error {
        println!("  ERRORS in {name}: {} failed requests; first: {first}", report.errors);
    }
    report
}

fn summary(bare: &LoadReport, calc: &LoadReport) {
    let ratio = calc.requests_per_second() / bare.requests_per_second().max(f64::MIN_POSITIVE);
    let required = 0.40;
    let verdict = if calc.errors == 0 && ratio >= required { "PASS" } else { "FAIL" };
    println!();
    println!("{:<48} {:>10} {:>10}  result", "target", "measured", "required");
    println!(
        "{:<48} {:>10} {:>10}  {verdict}",
        "calculate (10 lines, 2 codes, tax) / bare hyper",
        format!("{:.1} %", ratio * 100.0),
        format!("≥ {:.0} %", required * 100.0),
    );
    println!("(bare hyper {:.0} req/s; calculate {:.0} req/s)", bare.requests_per_second(), calc.requests_per_second());
}
