//! `/metrics`: refused on the API port without the service key, served with it and on
//! `--metrics-listen`; request durations by route pattern and status class (the export's
//! deliberate 503 is `unavailable`, not a server error), writers, connections, payments and
//! the process's own figures.

use hyper::Method;
use serde_json::json;
use shopcell::cells::payments::{self, PaymentMethodKind};
use shopcell::clock::Clock;

use crate::payments::{Shop, money, new_intent};
use crate::support::*;

/// The value of the series `series` (name and labels exactly as written), if shown.
fn value(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

/// Requests counted under `route` and `class` (0 before the first).
fn requests(text: &str, method: &str, route: &str, class: &str) -> f64 {
    let series =
        format!("shopcell_http_request_duration_seconds_count{{method=\"{method}\",route=\"{route}\",class=\"{class}\"}}");
    value(text, &series).unwrap_or(0.0)
}

/// Every count of a status class, whatever the route.
fn class_total(text: &str, class: &str) -> f64 {
    let needle = format!("class=\"{class}\"}} ");
    text.lines()
        .filter(|l| l.starts_with("shopcell_http_request_duration_seconds_count{") && l.contains(&needle))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[tokio::test]
async fn the_api_port_refuses_metrics_without_the_service_key() {
    let app = spawn_app().await;
    let c = &app.client;
    let none = c.get("/metrics", None).await.expect(401);
    assert_eq!((none.code(), none.body["error"]["message"].as_str()), ("UNAUTHORIZED", Some("the service key is required")));
    let wrong = c.send(Method::GET, "/metrics", None, &[("x-shopcell-service", "not-the-key")], None).await;
    assert_eq!(wrong.status, 403);
    assert_eq!(wrong.code(), "FORBIDDEN");
    // A member's token is not the key either.
    let u = create_user(c).await;
    assert_eq!(c.get("/metrics", Some(&u.token)).await.expect(401).code(), "UNAUTHORIZED");
    // The document says so.
    let doc = c.get("/api/v1/openapi.json", None).await.expect(200).body;
    let op = &doc["paths"]["/metrics"]["get"];
    assert_eq!(op["security"], json!([{"serviceKey": []}]));
    assert_eq!(op["x-access"], "operator: the service key");
    assert!(op["responses"]["401"].is_object() && op["responses"]["403"].is_object(), "{op}");
    assert_eq!(doc["components"]["securitySchemes"]["serviceKey"]["name"], "X-Shopcell-Service");
}

#[tokio::test]
async fn requests_are_counted_by_route_pattern_and_class_and_the_figures_are_sane() {
    let app = spawn_app().await;
    let c = &app.client;
    let u = create_user(c).await;
    let store = create_store(c, &u).await;
    let product = create_product(c, &u, &store, "Lamp", 1000).await;
    let id = product["id"].as_str().unwrap();
    let before = app.metrics().await;
    let one = "/api/v1/stores/{storeId}/products/{productId}";
    for _ in 0..3 {
        c.get(&format!("/api/v1/stores/{store}/products/{id}"), Some(&u.token)).await.expect(200);
    }
    c.get(&format!("/api/v1/stores/{store}/products/{}", uuid::Uuid::now_v7()), Some(&u.token)).await.expect(404);
    app.clock.advance(std::time::Duration::from_secs(90));
    let after = app.metrics().await;
    assert_eq!(requests(&after, "GET", one, "2xx") - requests(&before, "GET", one, "2xx"), 3.0, "{after}");
    assert_eq!(requests(&after, "GET", one, "4xx") - requests(&before, "GET", one, "4xx"), 1.0);
    // Buckets are cumulative up to the count.
    let inf =
        format!("shopcell_http_request_duration_seconds_bucket{{method=\"GET\",route=\"{one}\",class=\"2xx\",le=\"+Inf\"}}");
    assert_eq!(value(&after, &inf), Some(3.0));
    // Labels are patterns: no store or product id anywhere.
    assert!(!after.contains(&store) && !after.contains(id), "no id is a label");
    // The scrape itself is under way while the figures are read.
    assert_eq!(value(&after, "shopcell_http_requests_in_flight"), Some(1.0));
    assert!(value(&after, "shopcell_connections_open").unwrap() >= 1.0);
    assert_eq!(value(&after, "shopcell_connections_refused_total"), Some(0.0));
    assert_eq!(value(&after, "shopcell_log_lines_dropped_total"), Some(0.0));
    // The cell's writer committed the store and the product: batches and commit times.
    let batches = value(&after, "shopcell_writer_batch_size_count{owner=\"cell-1\"}").unwrap();
    assert!(batches >= 2.0, "{after}");
    assert_eq!(value(&after, "shopcell_writer_commit_seconds_count{owner=\"cell-1\"}"), Some(batches));
    assert!(value(&after, "shopcell_writer_batch_size_count{owner=\"account\"}").unwrap() >= 1.0, "sign-up wrote the directory");
    assert!(value(&after, "shopcell_search_outbox_entries{cell=\"cell-1\"}").is_some(), "{after}");
    assert_eq!(value(&after, "shopcell_cell_stores{cell=\"cell-1\"}"), Some(1.0));
    // The process: memory, descriptors, and uptime by the one clock (moved 90 s).
    assert!(value(&after, "process_resident_memory_bytes").unwrap() > 1e6);
    assert!(value(&after, "process_open_fds").unwrap() >= 3.0);
    assert!(value(&after, "shopcell_uptime_seconds").unwrap() >= 90.0);
    let started = value(&after, "process_start_time_seconds").unwrap();
    assert!(started > 1.7e9 && started <= (app.clock.now_secs() - 90) as f64, "{started}");
    // One HELP and TYPE per family.
    let types: Vec<&str> = after.lines().filter(|l| l.starts_with("# TYPE ")).collect();
    let mut unique = types.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(types.len(), unique.len(), "each family once");
}

#[tokio::test]
async fn the_exports_deliberate_503_is_unavailable_not_a_server_error() {
    let app = spawn_app().await;
    let c = &app.client;
    let store = uuid::Uuid::now_v7();
    let before = app.metrics().await;
    for _ in 0..2 {
        c.get(&format!("/api/v1/stores/{store}/discounts/export"), None).await.expect(503);
    }
    let after = app.metrics().await;
    let route = "/api/v1/stores/{storeId}/discounts/export";
    assert_eq!(requests(&after, "GET", route, "unavailable") - requests(&before, "GET", route, "unavailable"), 2.0);
    assert_eq!(requests(&after, "GET", route, "5xx"), 0.0);
    assert_eq!(class_total(&after, "5xx"), class_total(&before, "5xx"), "no server error counted");
}

#[tokio::test]
async fn payment_confirmations_are_counted_by_provider_and_outcome() {
    let app = spawn_app().await;
    let c = &app.client;
    let shop = Shop::new(c).await;
    let cell = app.cell();
    for token in ["pm_card_chargeDeclined", "pm_card_visa"] {
        let (intent, _) =
            payments::create_payment_intent(&cell, shop.store, new_intent(PaymentMethodKind::CreditCard, money(900, "USD")))
                .await
                .unwrap();
        shop.member_confirm(c, intent.id, json!({"paymentMethod": token})).await.expect(200);
    }
    let text = app.metrics().await;
    let series = |outcome: &str| {
        format!("shopcell_payment_confirmations_total{{cell=\"cell-1\",provider=\"test\",outcome=\"{outcome}\"}}")
    };
    assert_eq!(value(&text, &series("declined")), Some(1.0), "{text}");
    assert_eq!(value(&text, &series("succeeded")), Some(1.0), "{text}");
}

#[tokio::test]
async fn metrics_listen_serves_metrics_alone_without_a_key() {
    let dir = tempfile::tempdir().unwrap();
    let mut args = default_args(dir.path());
    args.connections.metrics_listen = Some("127.0.0.1:0".parse().unwrap());
    let app = serve(&args, dir, Clock::system()).await;
    let addr = app.server.as_ref().unwrap().metrics_addr.expect("the metrics listener is bound");
    assert_ne!(addr, app.addr());
    app.client.get("/healthz", None).await.expect(200);
    let scraper = HttpClient::new(&format!("http://{addr}"));
    let m = scraper.get("/metrics", None).await.expect(200);
    assert_eq!(m.headers.get("content-type").and_then(|v| v.to_str().ok()), Some("text/plain; version=0.0.4"));
    let text = String::from_utf8(m.raw.to_vec()).unwrap();
    assert_eq!(requests(&text, "GET", "/healthz", "2xx"), 1.0, "{text}");
    assert!(text.contains("# TYPE shopcell_cache_bytes gauge"));
    // Nothing else is served there, and the scrape is not counted as an API request.
    assert_eq!(scraper.get("/nothing-else", None).await.expect(404).code(), "NOT_FOUND");
    assert_eq!(scraper.post("/metrics", None, json!({})).await.expect(405).code(), "METHOD_NOT_ALLOWED");
    let again = String::from_utf8(scraper.get("/metrics", None).await.expect(200).raw.to_vec()).unwrap();
    assert!(!again.contains("route=\"/metrics\""), "{again}");
    // The API port still wants the key.
    app.client.get("/metrics", None).await.expect(401);
}

/// `/metrics` of a process of the split roles, read with the service key.
async fn scrape(url: &str, key: &str) -> String {
    let a = HttpClient::new(url).send(Method::GET, "/metrics", None, &[("x-shopcell-service", key)], None).await;
    assert_eq!(a.status, 200, "{}", String::from_utf8_lossy(&a.raw));
    String::from_utf8(a.raw.to_vec()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_role_keeps_its_own_figures_behind_the_service_key() {
    let r = Routed::start().await;
    let key = std::fs::read_to_string(&r.service_key).unwrap().trim().to_string();
    let c = HttpClient::new(&r.router.url);
    let u = create_user(&c).await;
    let store = create_store(&c, &u).await;
    create_product(&c, &u, &store, "Lamp", 100).await;
    let list = "/api/v1/stores/{storeId}/products";
    for _ in 0..2 {
        c.get(&format!("/api/v1/stores/{store}/products"), Some(&u.token)).await.expect(200);
    }
    for proc in [&r.router, &r.cell, &r.account] {
        let p = HttpClient::new(&proc.url);
        assert_eq!(p.get("/metrics", None).await.expect(401).code(), "UNAUTHORIZED");
        let wrong = p.send(Method::GET, "/metrics", None, &[("x-shopcell-service", "nope")], None).await;
        assert_eq!((wrong.status.as_u16(), wrong.code()), (403, "FORBIDDEN"));
    }
    // The router counts what it forwarded, by pattern; the cell what it answered; the account
    // service its own routes and writer.
    let router = scrape(&r.router.url, &key).await;
    assert_eq!(requests(&router, "GET", list, "2xx"), 2.0, "{router}");
    assert!(!router.contains("shopcell_writer_batch_size"), "a router keeps no database");
    let cell = scrape(&r.cell.url, &key).await;
    assert_eq!(requests(&cell, "GET", list, "2xx"), 2.0, "{cell}");
    assert!(value(&cell, "shopcell_writer_batch_size_count{owner=\"c1\"}").unwrap() >= 2.0, "{cell}");
    assert_eq!(value(&cell, "shopcell_cell_stores{cell=\"c1\"}"), Some(1.0));
    let account = scrape(&r.account.url, &key).await;
    assert_eq!(requests(&account, "POST", "/api/v1/auth/register", "2xx"), 1.0, "{account}");
    assert!(value(&account, "shopcell_writer_batch_size_count{owner=\"account\"}").unwrap() >= 2.0);
    assert!(!account.contains(&store) && !cell.contains(&store) && !router.contains(&store), "no store id is a label");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_database_shows_its_file_size_beside_what_its_tables_use() {
    let app = spawn_app().await;
    let c = &app.client;
    let u = create_user(c).await;
    let store = create_store(c, &u).await;
    for i in 0..20 {
        create_product(c, &u, &store, &format!("Lamp {i}"), 1000).await;
    }
    let before = app.metrics().await;
    let file = |text: &str, owner: &str| value(text, &format!("shopcell_database_file_bytes{{owner=\"{owner}\"}}"));
    let used = |text: &str, owner: &str| value(text, &format!("shopcell_database_used_bytes{{owner=\"{owner}\"}}"));
    let data = |text: &str, owner: &str| value(text, &format!("shopcell_database_data_bytes{{owner=\"{owner}\"}}"));
    assert!(file(&before, "cell-1").unwrap() > 0.0, "{before}");
    // The tables are counted in the background a minute after start, never on a scrape.
    assert_eq!(used(&before, "cell-1"), None, "{before}");
    app.clock.advance(std::time::Duration::from_secs(61));
    let after = eventually(|| async {
        let text = app.metrics().await;
        (used(&text, "cell-1").is_some() && used(&text, "account").is_some()).then_some(text)
    })
    .await
    .expect("the tables are counted a minute after start");
    for owner in ["cell-1", "account"] {
        let (f, u, d) = (file(&after, owner).unwrap(), used(&after, owner).unwrap(), data(&after, owner).unwrap());
        assert!(d > 0.0 && d <= u && u <= f, "{owner}: data {d}, used {u}, file {f}");
    }
    // Twenty products with their lists and history are more than a few kilobytes of rows.
    assert!(data(&after, "cell-1").unwrap() > 20_000.0, "{after}");
}
