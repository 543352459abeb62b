//! Webhooks benchmark: what an event costs the write that appends it, and how fast a backlog of
//! deliveries drains to a local receiver.
//!
//! `cargo bench --bench webhooks`. Environment: `BENCH_SECONDS` (per create scenario, default 5),
//! `BENCH_DELIVERY_PRODUCTS` (products whose creation each of the 64 subscriptions receives in the
//! drain, default 500).
//!
//! 1. With the job runner paused (`--jobs-paused`), durable product creates at 64 clients with no
//!    subscription, then with 10 subscriptions to `product.*`: the write pays one event row either
//!    way, so the second rate should be ≥ 90 % of the first.
//! 2. 64 subscriptions to `product.created` and a backlog of their deliveries, written while paused;
//!    the server restarted with its runner: deliveries per second until every one has arrived,
//!    each signature verified by the receiver, exactly the expected count; meanwhile 64 clients
//!    PATCH products (durable writes no subscription hears of), whose p99 should stay under 50 ms.
//!
//! Timings are printed, never asserted.

mod common;

use std::collections::HashSet;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;
use common::inspect::{millis, thousands};
use common::{
    BoxError, Client, Endpoint, LoadReport, ServerProcess, Settings, expect_json, product_body, run_load, runtime, seed,
};
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::json;

const SUBSCRIPTIONS_ON_WRITES: usize = 10;
const SUBSCRIPTIONS_DRAINED: usize = 64;
/// Rounds of the create comparison.
const ROUNDS: usize = 2;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("webhooks benchmark aborted: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The receiver: one path per subscription (`/h/{i}`), each delivery's signature checked with
/// that subscription's secret, repeats of a `webhook-id` counted apart.
#[derive(Default)]
struct Receiver {
    secrets: Mutex<Vec<Vec<u8>>>,
    verified: AtomicU64,
    bad: AtomicU64,
    seen: Mutex<HashSet<(usize, String)>>,
    repeats: AtomicU64,
}

impl Receiver {
    fn receive(&self, path: &str, id: &str, timestamp: &str, signature: &str, body: &[u8]) -> StatusCode {
        let Some(i) = path.strip_prefix("/h/").and_then(|i| i.parse::<usize>().ok()) else { return StatusCode::NOT_FOUND };
        let Some(key) = self.secrets.lock().unwrap().get(i).cloned() else { return StatusCode::NOT_FOUND };
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &key);
        let mut signed = format!("{id}.{timestamp}.").into_bytes();
        signed.extend_from_slice(body);
        let expected = format!("v1,{}", STANDARD.encode(ring::hmac::sign(&key, &signed).as_ref()));
        if signature.split(' ').all(|s| s != expected) {
            self.bad.fetch_add(1, Ordering::Relaxed);
            return StatusCode::BAD_REQUEST;
        }
        if self.seen.lock().unwrap().insert((i, id.to_string())) {
            self.verified.fetch_add(1, Ordering::Relaxed);
        } else {
            self.repeats.fetch_add(1, Ordering::Relaxed);
        }
        StatusCode::NO_CONTENT
    }
}

fn start_receiver(rt: &tokio::runtime::Runtime, receiver: Arc<Receiver>) -> Result<SocketAddr, BoxError> {
    let listener = rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))?;
    let addr = listener.local_addr()?;
    rt.spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else { return };
            let receiver = receiver.clone();
            tokio::spawn(async move {
                let service = service_fn(move |req: Request<hyper::body::Incoming>| {
                    let receiver = receiver.clone();
                    async move {
                        let header = |n: &str| req.headers().get(n).and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
                        let (id, ts, sig) = (header("webhook-id"), header("webhook-timestamp"), header("webhook-signature"));
                        let path = req.uri().path().to_string();
                        let body = req.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
                        let status = receiver.receive(&path, &id, &ts, &sig, &body);
                        Ok::<_, hyper::Error>(Response::builder().status(status).body(Full::new(Bytes::new())).unwrap())
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
            });
        }
    });
    Ok(addr)
}

fn run() -> Result<(), BoxError> {
    let settings = Settings::from_env()?;
    let products: usize = std::env::var("BENCH_DELIVERY_PRODUCTS").ok().map(|v| v.parse()).transpose()?.unwrap_or(500).max(1);
    println!(
        "webhooks: {} connections, {:.1} s per create scenario, drain of {SUBSCRIPTIONS_DRAINED} × {products} deliveries",
        settings.connections,
        settings.duration.as_secs_f64()
    );
    let load = runtime("load-gen")?;
    let receiving = runtime("receiver")?;
    let receiver = Arc::new(Receiver::default());
    let rx_addr = start_receiver(&receiving, receiver.clone())?;
    let bin = env!("CARGO_BIN_EXE_shopcell");
    let paused = ["--outbound-allow", "127.0.0.1", "--jobs-paused"];
    let server = ServerProcess::spawn_with(bin, &paused)?;
    let endpoint = Endpoint::new(server.addr);
    let seeded = load.block_on(seed(&endpoint, 100, 16))?;
    let authed = endpoint.with_bearer(&seeded.token)?;
    let store = format!("/api/v1/stores/{}", seeded.store_id);

    // 1. What an event costs the write: rounds of creates without and with ten subscriptions,
    //    alternated so the growing tables weigh on both alike.
    let creates = |authed: &Endpoint, store: &str, from: u64| {
        let (authed, path) = (authed.clone(), format!("{store}/products"));
        move |n: u64| authed.post_json(&path, &product_body(from + n))
    };
    let subscribe = |authed: &Endpoint, store: &str, i: usize, topics: serde_json::Value| -> Result<(), BoxError> {
        let url = format!("http://127.0.0.1:{}/h/{i}", rx_addr.port());
        let req = authed.post_json(&format!("{store}/webhooks"), &json!({"topics": topics, "url": url}));
        let hook =
            expect_json(load.block_on(async { Client::new(server.addr).send(req).await })?, StatusCode::CREATED, "subscribe")?;
        let secret = hook["secret"].as_str().ok_or("no secret")?.trim_start_matches("whsec_").to_string();
        let mut secrets = receiver.secrets.lock().unwrap();
        let len = secrets.len().max(i + 1);
        secrets.resize(len, Vec::new());
        secrets[i] = STANDARD.decode(secret)?;
        Ok(())
    };
    let (mut none, mut ten) = (0.0, 0.0);
    for round in 0..ROUNDS {
        let from = 1_000_000 * (2 * round as u64 + 1);
        none += measure(&load, "creates, no subscription", server.addr, &settings, creates(&authed, &store, from))
            .requests_per_second();
        for i in 0..SUBSCRIPTIONS_ON_WRITES {
            subscribe(&authed, &store, i, json!(["product.*"]))?;
        }
        let from = from + 1_000_000;
        ten += measure(&load, "creates, 10 subscriptions", server.addr, &settings, creates(&authed, &store, from))
            .requests_per_second();
        // Their backlog goes with them.
        remove_all(&load, &authed, &server, &store)?;
    }
    let ratio = ten / none.max(1.0);

    // 2. The drain: 64 subscriptions over two stores of the cell (a store keeps at most 50),
    //    each with a backlog of `products` creates.
    receiver.secrets.lock().unwrap().clear();
    let other = load.block_on(seed(&endpoint, 1, 1))?;
    let stores =
        [(authed.clone(), store.clone()), (endpoint.with_bearer(&other.token)?, format!("/api/v1/stores/{}", other.store_id))];
    for i in 0..SUBSCRIPTIONS_DRAINED {
        let (authed, store) = &stores[i % 2];
        subscribe(authed, store, i, json!(["product.created"]))?;
    }
    for (k, (authed, store)) in stores.iter().enumerate() {
        let batch = creates(authed, store, 10_000_000 * (k as u64 + 1));
        let (outcomes, _) = load.block_on(common::run_batch(server.addr, 64, products, batch));
        if outcomes.iter().any(|o| !o.as_ref().is_ok_and(|(s, _)| *s == StatusCode::CREATED)) {
            return Err("a create of the backlog failed".into());
        }
    }
    let expected = (SUBSCRIPTIONS_DRAINED * products) as u64;
    let server = server.restart_with(bin, &["--outbound-allow", "127.0.0.1"])?;
    let started = Instant::now();
    let authed = Endpoint::new(server.addr).with_bearer(&seeded.token)?;
    let patch_paths: Arc<Vec<String>> = Arc::new(seeded.product_ids.iter().map(|id| format!("{store}/products/{id}")).collect());
    let patcher = authed.clone();
    let writes = load.spawn({
        let settings = settings.clone();
        let addr = server.addr;
        async move {
            run_load(addr, &settings, move |n| {
                patcher.patch_json(&patch_paths[n as usize % patch_paths.len()], &json!({"title": format!("Renamed {n}")}))
            })
            .await
        }
    });
    let deadline = started + Duration::from_secs(300);
    while receiver.verified.load(Ordering::Relaxed) < expected && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    let drained = started.elapsed();
    let writes = load.block_on(writes)?;
    std::thread::sleep(Duration::from_secs(1));
    let (got, bad, repeats) = (
        receiver.verified.load(Ordering::Relaxed),
        receiver.bad.load(Ordering::Relaxed),
        receiver.repeats.load(Ordering::Relaxed),
    );
    let rate = got as f64 / drained.as_secs_f64();
    println!(
        "drained {got} of {expected} deliveries in {:.2} s: {} deliveries/s; {bad} bad signatures, {repeats} repeats",
        drained.as_secs_f64(),
        thousands(rate)
    );
    println!(
        "writes meanwhile: {} PATCH/s, p99 {}{}",
        thousands(writes.requests_per_second()),
        millis(writes.latencies.percentile(0.99)),
        writes.first_error.map(|e| format!(" (errors: {e})")).unwrap_or_default()
    );

    println!("\n{:<58} {:>10} {:>10}", "target", "measured", "required");
    let verdict = |ok: bool| if ok { "pass" } else { "FAIL" };
    println!(
        "{:<58} {:>9.1}% {:>10}  {}",
        "creates with 10 subscriptions / with none (runner paused)",
        ratio * 100.0,
        "≥ 90 %",
        verdict(ratio >= 0.9)
    );
    println!("{:<58} {:>10} {:>10}  {}", "deliveries/s, 64 subscriptions", thousands(rate), "≥ 2,000", verdict(rate >= 2000.0));
    println!(
        "{:<58} {:>10} {:>10}  {}",
        "every delivery verified, none missing or extra",
        format!("{got}/{expected}"),
        "exact",
        verdict(got == expected && bad == 0)
    );
    let p99 = writes.latencies.percentile(0.99);
    println!(
        "{:<58} {:>10} {:>10}  {}",
        "p99 of other writes during the drain",
        millis(p99),
        "< 50 ms",
        verdict(p99 < Duration::from_millis(50))
    );
    Ok(())
}

/// Deletes every subscription of the store (their deliveries and jobs go with them).
fn remove_all(load: &tokio::runtime::Runtime, authed: &Endpoint, server: &ServerProcess, store: &str) -> Result<(), BoxError> {
    load.block_on(async {
        let mut client = Client::new(server.addr);
        let list = expect_json(client.send(authed.get(&format!("{store}/webhooks?limit=250"))).await?, StatusCode::OK, "list")?;
        for hook in list["data"].as_array().ok_or("no data")? {
            let id = hook["id"].as_str().ok_or("no id")?;
            let (status, _) = client.send(authed.delete(&format!("{store}/webhooks/{id}"))).await?;
            if status != StatusCode::NO_CONTENT {
                return Err(format!("delete webhook: {status}").into());
            }
        }
        Ok(())
    })
}

fn measure<F>(load: &tokio::runtime::Runtime, name: &str, addr: SocketAddr, settings: &Settings, make: F) -> LoadReport
where
    F: Fn(u64) -> common::BenchRequest + Send + Sync + 'static,
{
    let report = load.block_on(run_load(addr, settings, make));
    println!("measured {name}: {}/s, p99 {}", thousands(report.requests_per_second()), millis(report.latencies.percentile(0.99)));
    if let Some(first) = &report.first_error {
        println!("  ERRORS in {name}: {} failed requests; first: {first}", report.errors);
    }
    report
}
