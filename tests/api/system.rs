use serde_json::{Value, json};

use crate::support::*;

#[tokio::test]
async fn health_openapi_and_jwks() {
    let app = spawn_app().await;
    let c = &app.client;
    assert_eq!(c.get("/healthz", None).await.expect(200).body["status"], "ok");
    assert_eq!(c.get("/readyz", None).await.expect(200).body["status"], "ready");
    let jwks = c.get("/.well-known/jwks.json", None).await.expect(200).body;
    assert_eq!(jwks["keys"][0]["alg"], "RS256");
    assert!(jwks["keys"][0]["kid"].as_str().is_some_and(|k| !k.is_empty()));

    let doc = c.get("/api/v1/openapi.json", None).await.expect(200).body;
    let node = &app.server.as_ref().unwrap().node;
    // Every public route of the table is in the document, with its method.
    for r in node.routes.routes().iter().filter(|r| !r.path.starts_with("/internal")) {
        let op = &doc["paths"][&r.path][r.method.as_str().to_lowercase()];
        assert!(op.is_object(), "{} {} missing from openapi.json", r.method, r.path);
    }
    let create = &doc["paths"]["/api/v1/stores/{storeId}/products"]["post"];
    assert_eq!(create["requestBody"]["content"]["application/json"]["schema"]["$ref"], "#/components/schemas/CreateProduct");
    assert!(doc["components"]["schemas"]["CreateProduct"]["properties"]["title"].is_object());
    let list_params: Vec<&str> = doc["paths"]["/api/v1/stores/{storeId}/products"]["get"]["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    assert_eq!(list_params, ["storeId", "page", "limit", "sortBy", "sortOrder", "status"]);
    assert!(doc["paths"].as_object().unwrap().keys().all(|p| !p.starts_with("/internal")));
}

#[tokio::test]
async fn the_document_is_openapi_3_1_with_readable_ids_errors_and_bounds() {
    let app = spawn_app().await;
    let doc = app.client.get("/api/v1/openapi.json", None).await.expect(200).body;
    assert_eq!(doc["openapi"], "3.1.0");
    assert_eq!(doc["jsonSchemaDialect"], "https://json-schema.org/draft/2020-12/schema");
    assert!(!doc.to_string().contains("\"nullable\""), "3.0's nullable has no place in 3.1");
    assert_eq!(doc["servers"][0]["url"], "/");
    let list = &doc["paths"]["/api/v1/stores/{storeId}/products"]["get"];
    assert_eq!(list["operationId"], "listProducts");
    assert_eq!(list["tags"], json!(["Products"]));
    assert_eq!(doc["paths"]["/.well-known/jwks.json"]["get"]["operationId"], "getJwks");
    let param = |op: &Value, name: &str| op["parameters"].as_array().unwrap().iter().find(|p| p["name"] == name).cloned();
    assert_eq!(param(list, "limit").unwrap()["schema"], json!({"type": "integer", "minimum": 1, "maximum": 250}));
    assert_eq!(param(list, "storeId").unwrap()["schema"], json!({"type": "string", "format": "uuid"}));
    assert_eq!(param(list, "sortOrder").unwrap()["schema"]["enum"], json!(["asc", "desc"]));
    // A store row: ids, a query, a token, a store mid-move.
    let statuses = |op: &Value| op["responses"].as_object().unwrap().keys().cloned().collect::<Vec<_>>();
    assert_eq!(statuses(list), ["200", "400", "401", "403", "404", "503"]);
    let create = &doc["paths"]["/api/v1/stores/{storeId}/products"]["post"];
    assert_eq!(statuses(create), ["201", "400", "401", "404", "408", "409", "413", "415", "422", "503"]);
    assert!(param(create, "Idempotency-Key").is_some_and(|p| p["in"] == "header"));
    assert!(param(list, "Idempotency-Key").is_none());
    let error = &create["responses"]["409"]["content"]["application/json"]["schema"]["$ref"];
    assert_eq!(error, "#/components/schemas/Error");
    // Every operation id is unique, and every operation has a tag.
    let mut ids = std::collections::HashSet::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            assert!(ids.insert(op["operationId"].as_str().unwrap().to_string()), "{method} {path}: id repeated");
            assert!(op["tags"][0].is_string(), "{method} {path} has no tag");
        }
    }
}

#[tokio::test]
async fn the_reference_page_renders_every_operation_without_scripts() {
    let app = spawn_app().await;
    let c = &app.client;
    let a = c.get("/api/v1/docs", None).await.expect(200);
    assert_eq!(a.headers["content-type"], "text/html; charset=utf-8");
    assert_eq!(a.headers["content-security-policy"], "default-src 'self'");
    let page = String::from_utf8(a.raw.to_vec()).unwrap();
    assert!(!page.to_lowercase().contains("<script"), "the page works with scripts off");
    assert!(!page.contains("http://") && !page.contains("https://"), "nothing is fetched from elsewhere");
    let doc = c.get("/api/v1/openapi.json", None).await.expect(200).body;
    let ids: std::collections::HashSet<&str> = page
        .match_indices(" id=\"")
        .map(|(i, m)| {
            let rest = &page[i + m.len()..];
            &rest[..rest.find('"').unwrap()]
        })
        .collect();
    for item in doc["paths"].as_object().unwrap().values() {
        for op in item.as_object().unwrap().values() {
            assert!(ids.contains(op["operationId"].as_str().unwrap()), "{} has no anchor", op["operationId"]);
        }
    }
    // Every in-page link lands on an anchor of the page.
    for (i, m) in page.match_indices("href=\"#") {
        let rest = &page[i + m.len()..];
        let target = &rest[..rest.find('"').unwrap()];
        assert!(ids.contains(target), "a link to #{target} lands nowhere");
    }
    // An operation shows its access, parameters, body, answers and errors.
    let start = page.find("id=\"createProduct\"").unwrap();
    let op = &page[start..start + page[start..].find("</article>").unwrap()];
    for part in ["Access", "Parameters", "Idempotency-Key", "Request body", "CreateProduct", "409", "HANDLE_TAKEN", "201"] {
        assert!(op.contains(part), "createProduct shows no {part}: {op}");
    }
    assert!(page.contains("id=\"schema-CreateProduct\""));
    // The stylesheet it links is served from here.
    assert!(page.contains("<link rel=\"stylesheet\" href=\"/api/v1/docs/style.css\">"));
    let css = c.get("/api/v1/docs/style.css", None).await.expect(200);
    assert_eq!(css.headers["content-type"], "text/css; charset=utf-8");
    assert!(String::from_utf8_lossy(&css.raw).contains("table"));
}

#[tokio::test]
async fn unknown_paths_and_internal_routes_are_plain_404s() {
    let app = spawn_app().await;
    let c = &app.client;
    let a = c.get("/api/v1/nope", None).await.expect(404);
    assert_eq!(a.code(), "NOT_FOUND");
    // Internal routes without the service key look exactly like unknown paths.
    let b = c.get("/internal/v1/access?user=x&session=y", None).await.expect(404);
    assert_eq!(a.body, b.body);
    let generated = a.headers.get("x-request-id").and_then(|v| v.to_str().ok()).unwrap_or_default();
    assert!(generated.len() == 32 && generated.bytes().all(|b| b.is_ascii_hexdigit()), "{generated:?}");
    let given = c.send(hyper::Method::GET, "/healthz", None, &[("x-request-id", "trace-42")], None).await;
    assert_eq!(given.headers.get("x-request-id").and_then(|v| v.to_str().ok()), Some("trace-42"), "a caller's id is kept");
    let metrics = app.metrics().await;
    assert!(metrics.contains("route=\"unmatched\",class=\"4xx\""), "{metrics}");
    assert!(!metrics.contains("/api/v1/nope"), "a raw path is never a label");
}

#[tokio::test]
async fn errors_name_the_methods_allowed_the_scheme_and_the_field() {
    let app = spawn_app().await;
    let c = &app.client;
    let u = create_user(c).await;
    let store = create_store(c, &u).await;
    let a = c.put(&format!("/api/v1/stores/{store}/products"), Some(&u.token), json!({})).await.expect(405);
    assert_eq!(a.code(), "METHOD_NOT_ALLOWED");
    assert_eq!(a.headers["allow"], "GET, POST, HEAD");
    let a = c.delete("/api/v1/auth/login", None).await.expect(405);
    assert_eq!(a.headers["allow"], "POST");
    // No token: the scheme that would admit. A refused token: RFC 6750's invalid_token.
    let a = c.get("/api/v1/auth/me", None).await.expect(401);
    assert_eq!(a.headers["www-authenticate"], "Bearer");
    let a = c.get("/api/v1/auth/me", Some("not-a-token")).await.expect(401);
    assert_eq!(a.headers["www-authenticate"], "Bearer error=\"invalid_token\"");
    assert_eq!(a.body["message"], "the access token is invalid");
    // A parameter the operation does not take is refused by name: `sortby` does not sort.
    let a = c.get(&format!("/api/v1/stores/{store}/products?sortby=price"), Some(&u.token)).await.expect(400);
    assert_eq!(a.body["error"]["fields"][0]["field"], "sortby");
    let a = c.get("/healthz?verbose=1", None).await.expect(400);
    assert_eq!(a.body["message"], "verbose: unknown parameter: this operation takes none");
    // A missing field is named itself, not the body around it.
    let a = c.post("/api/v1/auth/login", None, json!({"email": u.email})).await.expect(400);
    assert_eq!(a.body["error"]["fields"], json!([{"field": "password", "message": "is required"}]));
    assert_eq!(a.body["message"], "password: is required");
}

#[cfg(unix)]
#[tokio::test]
async fn secrets_are_written_readable_by_the_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let app = spawn_app().await;
    for file in ["jwt-rs256.pem", "service.key"] {
        let path = app.dir.path().join("account").join(file);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{file}");
    }
    let pem = std::fs::read_to_string(app.dir.path().join("account/jwt-rs256.pem")).unwrap();
    assert!(pem.starts_with("-----BEGIN PRIVATE KEY-----"));
}

#[tokio::test]
async fn the_signing_key_survives_a_restart() {
    let mut app = spawn_app().await;
    let u = create_user(&app.client).await;
    app.stop().await;
    let again = spawn_app_in(app.dir.path()).await;
    // A token issued before the restart still verifies.
    again.client.get("/api/v1/auth/me", Some(&u.token)).await.expect(200);
}

/// `name{owner="…",cache="…"} value` lines of one family, as `(owner, cache) → value`.
pub fn family(text: &str, name: &str) -> std::collections::BTreeMap<(String, String), u64> {
    let mut out = std::collections::BTreeMap::new();
    for line in text.lines().filter(|l| l.starts_with(&format!("{name}{{"))) {
        let (labels, value) = line[name.len() + 1..].split_once("} ").expect("labels and a value");
        let label =
            |key: &str| labels.split(',').find_map(|l| l.strip_prefix(&format!("{key}=\""))).unwrap().trim_end_matches('"');
        out.insert((label("owner").to_string(), label("cache").to_string()), value.parse().expect("an integer"));
    }
    out
}

#[tokio::test]
async fn metrics_show_every_cache_within_its_share_of_the_budget() {
    let app = spawn_app().await;
    let c = &app.client;
    let u = create_user(c).await;
    let store = create_store(c, &u).await;
    for i in 0..3 {
        create_product(c, &u, &store, &format!("Lamp {i}"), 1000 + i).await;
    }
    let page = c.get(&format!("/api/v1/stores/{store}/products?sortBy=title&sortOrder=asc"), Some(&u.token)).await.expect(200);
    assert_eq!(page.body["total"], 3);
    let text = app.metrics().await;
    let budget: u64 =
        text.lines().find_map(|l| l.strip_prefix("shopcell_memory_budget_bytes ")).expect("the budget is shown").parse().unwrap();
    let shares = family(&text, "shopcell_cache_budget_bytes");
    let held = family(&text, "shopcell_cache_bytes");
    let entries = family(&text, "shopcell_cache_entries");
    let misses = family(&text, "shopcell_cache_misses_total");
    let cell = app.server.as_ref().unwrap().node.cells.keys().next().unwrap().clone();
    for cache in [
        "redb",
        "rows",
        "lists",
        "pricing",
        "settings",
        "locations",
        "pages",
        "search_words",
        "search_columns",
        "search_answers",
        "search_writer",
    ] {
        assert!(shares.contains_key(&(cell.clone(), cache.into())), "the cell's {cache} cache is shown: {text}");
    }
    assert!(shares.contains_key(&("account".into(), "admissions".into())));
    assert!(shares.values().sum::<u64>() <= budget, "the shares fit the budget");
    for (key, bytes) in &held {
        assert!(*bytes <= shares[key], "{key:?} holds {bytes} of its {}", shares[key]);
    }
    let lists = (cell.clone(), "lists".to_string());
    assert_eq!(entries[&lists], 1, "the one list read is held (title order, every product)");
    assert_eq!(misses[&lists], 1, "built once");
    // 3 keys, each a sort value and an id.
    assert!(held[&lists] >= 3 * 16, "{}", held[&lists]);
    let rows = (cell.clone(), "rows".to_string());
    assert_eq!(entries[&rows], 3, "the page's three views are cached");
    let redb = (cell.clone(), "redb".to_string());
    assert!(held[&redb] > 0 && held[&redb] <= shares[&redb], "redb's bound is its file, within its share: {}", held[&redb]);
    assert!(text.contains("shopcell_process_anonymous_bytes "), "{text}");
}

#[tokio::test]
async fn stores_listed_before_a_restart_are_warmed_after_it_without_being_asked() {
    let mut app = spawn_app().await;
    let u = create_user(&app.client).await;
    let store = create_store(&app.client, &u).await;
    create_product(&app.client, &u, &store, "Lamp", 1000).await;
    let list = format!("/api/v1/stores/{store}/products");
    app.client.get(&list, Some(&u.token)).await.expect(200);
    // A record list too: gift cards by balance.
    let cards = format!("/api/v1/stores/{store}/gift-cards");
    let card = json!({"initialValue": {"amount": 2500, "currency": "USD"}});
    app.client.post(&cards, Some(&u.token), card).await.expect(201);
    let by_balance = format!("{cards}?sortBy=balance");
    app.client.get(&by_balance, Some(&u.token)).await.expect(200);
    app.stop().await;

    let again = spawn_app_in(app.dir.path()).await;
    let cell = again.server.as_ref().unwrap().node.cells.keys().next().unwrap().clone();
    let lists = (cell, "lists".to_string());
    // The warm-up runs in the background: wait for it (it is one small store).
    let held = eventually(|| async {
        let text = again.metrics().await;
        family(&text, "shopcell_cache_entries").get(&lists).copied().filter(|&held| held == 2)
    })
    .await;
    assert_eq!(held, Some(2), "the lists were built again without a list request");
    let page = again.client.get(&list, Some(&u.token)).await.expect(200);
    assert_eq!(page.body["data"][0]["title"], "Lamp");
    let page = again.client.get(&by_balance, Some(&u.token)).await.expect(200);
    assert_eq!(page.body["data"][0]["balance"]["amount"], 2500);
    let text = again.metrics().await;
    assert_eq!(family(&text, "shopcell_cache_hits_total")[&lists], 2, "the first lists after the restart are hits");
    assert_eq!(family(&text, "shopcell_cache_misses_total")[&lists], 2, "the warm-up's builds, and no other");
}

#[tokio::test]
async fn compact_gives_back_the_space_of_deleted_rows_and_keeps_the_rest() {
    let mut app = spawn_app().await;
    let (c, u) = (&app.client, create_user(&app.client).await);
    let store = create_store(c, &u).await;
    let products = format!("/api/v1/stores/{store}/products");
    let text = "x".repeat(60_000);
    let mut ids = Vec::new();
    for i in 0..150 {
        let body = json!({"title": format!("Poster {i}"), "description": text, "price": {"amount": 100, "currency": "USD"}});
        ids.push(c.post(&products, Some(&u.token), body).await.expect(201).body["id"].as_str().unwrap().to_string());
    }
    let kept = ids.pop().unwrap();
    for id in &ids {
        c.delete(&format!("{products}/{id}"), Some(&u.token)).await.expect(204);
    }
    app.stop().await;

    let cell_db = std::fs::read_dir(app.dir.path().join("cells")).unwrap().next().unwrap().unwrap().path().join("cell.redb");
    let before = std::fs::metadata(&cell_db).unwrap().len();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_shopcell"))
        .args(["admin", "compact", "--data", app.dir.path().to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("cell.redb"), "{}", String::from_utf8_lossy(&out.stdout));
    let after = std::fs::metadata(&cell_db).unwrap().len();
    assert!(after < before / 2, "{before} bytes before, {after} after");

    let again = spawn_app_in(app.dir.path()).await;
    let page = again.client.get(&products, Some(&u.token)).await.expect(200).body;
    assert_eq!(page["total"], 1);
    assert_eq!(page["data"][0]["id"], kept.as_str());
    assert_eq!(page["data"][0]["description"].as_str().map(str::len), Some(60_000));
}

#[test]
fn a_budget_too_small_to_run_is_refused_naming_the_smallest() {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_shopcell"))
        .args(["serve", "--data", dir.path().to_str().unwrap(), "--listen", "127.0.0.1:0", "--memory", "1MB"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("too small") && err.contains("the smallest that works is"), "{err}");
    assert!(!dir.path().join("cells").exists(), "nothing was opened");
}

#[tokio::test]
async fn answers_carrying_a_secret_are_never_stored() {
    let app = spawn_app().await;
    let c = &app.client;
    let u = create_user(c).await;
    let login = c.post("/api/v1/auth/login", None, json!({"email": u.email, "password": PASSWORD})).await.expect(200);
    assert_eq!(login.headers["cache-control"], "no-store");
    let key = c
        .post(
            &format!("/api/v1/stores/{}/publishable-keys", create_store(c, &u).await),
            Some(&u.token),
            json!({"environment": "test"}),
        )
        .await
        .expect(201);
    assert_eq!(key.headers["cache-control"], "no-store");
    // An answer with nothing secret says nothing about caching.
    assert!(c.get("/api/v1/auth/me", Some(&u.token)).await.expect(200).headers.get("cache-control").is_none());
    let doc = c.get("/api/v1/openapi.json", None).await.expect(200).body;
    assert_eq!(
        doc["paths"]["/api/v1/auth/login"]["post"]["responses"]["200"]["headers"]["Cache-Control"]["schema"]["const"],
        "no-store"
    );
}

#[tokio::test]
async fn large_answers_are_compressed_as_accepted_and_secrets_never() {
    use std::io::Read;
    let app = spawn_app().await;
    let c = &app.client;
    let u = create_user(c).await;
    let store = create_store(c, &u).await;
    for i in 0..20 {
        create_product(c, &u, &store, &format!("Product number {i}"), 1000 + i).await;
    }
    let page = format!("/api/v1/stores/{store}/products?limit=20");
    let plain = c.get(&page, Some(&u.token)).await.expect(200);
    assert!(plain.headers.get("content-encoding").is_none(), "nothing accepted, nothing compressed");
    assert_eq!(plain.headers["vary"], "accept-encoding");
    let get = |accept: &'static str| {
        let (c, page, token) = (c.clone(), page.clone(), u.token.clone());
        async move { c.send(hyper::Method::GET, &page, Some(&token), &[("accept-encoding", accept)], None).await }
    };
    let br = get("br, gzip;q=0.5").await.expect(200);
    assert_eq!(br.headers["content-encoding"], "br");
    let mut body = Vec::new();
    brotli::Decompressor::new(&br.raw[..], 4096).read_to_end(&mut body).unwrap();
    assert_eq!(body, plain.raw.to_vec());
    assert!(br.raw.len() * 4 <= plain.raw.len(), "{} of {} bytes", br.raw.len(), plain.raw.len());
    let gz = get("gzip, br").await.expect(200);
    assert_eq!(gz.headers["content-encoding"], "gzip", "gzip when both are accepted alike");
    let gz = get("br;q=0, gzip").await.expect(200);
    assert_eq!(gz.headers["content-encoding"], "gzip");
    let mut body = Vec::new();
    flate2::read::GzDecoder::new(&gz.raw[..]).read_to_end(&mut body).unwrap();
    assert_eq!(body, plain.raw.to_vec());
    assert!(get("br;q=0").await.expect(200).headers.get("content-encoding").is_none());
    // Small answers are sent as they are.
    let small = c.send(hyper::Method::GET, "/healthz", None, &[("accept-encoding", "br")], None).await.expect(200);
    assert!(small.headers.get("content-encoding").is_none());
    // An answer carrying a secret is never compressed, however large (BREACH).
    let variant = c.get(&page, Some(&u.token)).await.body["data"][0]["variants"][0]["id"].as_str().unwrap().to_string();
    let items: Vec<Value> = (0..1).map(|_| json!({"variantId": variant, "quantity": 1})).collect();
    let co = c
        .send(
            hyper::Method::POST,
            &format!("/api/v1/stores/{store}/checkouts"),
            Some(&u.token),
            &[("accept-encoding", "gzip, br")],
            Some(json!({"lineItems": items, "note": "x".repeat(2000)}).to_string().into()),
        )
        .await
        .expect(201);
    assert!(co.raw.len() > 2000 && co.headers.get("content-encoding").is_none());
    assert_eq!(co.headers["cache-control"], "no-store");
}

#[tokio::test]
async fn a_kept_page_is_served_compressed_as_kept_until_a_write_retires_it() {
    use std::io::Read;
    let app = spawn_app().await;
    let c = &app.client;
    let u = create_user(c).await;
    let store = create_store(c, &u).await;
    let mut first = Value::Null;
    for i in 0..20 {
        let p = create_product(c, &u, &store, &format!("Product number {i}"), 1000 + i).await;
        if i == 0 {
            first = p;
        }
    }
    let page = format!("/api/v1/stores/{store}/products?limit=20&sortBy=price&sortOrder=asc");
    let gzip =
        || async { c.send(hyper::Method::GET, &page, Some(&u.token), &[("accept-encoding", "gzip")], None).await.expect(200) };
    let gunzip = |raw: &[u8]| {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(raw).read_to_end(&mut out).unwrap();
        serde_json::from_slice::<Value>(&out).unwrap()
    };
    // The first compressed request computes the page and keeps it with its gzip bytes; the
    // second is served those bytes.
    let one = gzip().await;
    let two = gzip().await;
    for a in [&one, &two] {
        assert_eq!(
            (a.headers["content-encoding"].to_str().unwrap(), a.headers["vary"].to_str().unwrap()),
            ("gzip", "accept-encoding")
        );
    }
    assert_eq!(one.raw, two.raw, "byte-equal: the kept bytes");
    let plain = c.get(&page, Some(&u.token)).await.expect(200);
    assert!(plain.headers.get("content-encoding").is_none());
    assert_eq!(gunzip(&one.raw), plain.body);
    assert_eq!(plain.body["data"][0]["title"], "Product number 0");
    // Brotli is kept beside it and says the same.
    let br = c.send(hyper::Method::GET, &page, Some(&u.token), &[("accept-encoding", "br")], None).await.expect(200);
    assert_eq!(br.headers["content-encoding"], "br");
    let mut out = Vec::new();
    brotli::Decompressor::new(&br.raw[..], 4096).read_to_end(&mut out).unwrap();
    assert_eq!(serde_json::from_slice::<Value>(&out).unwrap(), plain.body);

    // A write to the store retires the page in every coding: the next gzip answer is the new page.
    let id = first["id"].as_str().unwrap();
    c.patch(&format!("/api/v1/stores/{store}/products/{id}"), Some(&u.token), json!({"title": "Renamed first product"}))
        .await
        .expect(200);
    let after = gzip().await;
    assert_ne!(after.raw, one.raw);
    let fresh = gunzip(&after.raw);
    assert_eq!(fresh["data"][0]["title"], "Renamed first product");
    assert_eq!(fresh, c.get(&page, Some(&u.token)).await.expect(200).body);
    assert_eq!(gzip().await.raw, after.raw);
}

#[tokio::test]
async fn the_healthcheck_command_exits_by_readiness() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let server = start_proc(&["serve", "--data", &dir.path().to_string_lossy()], port).await;
    let check = |url: String| {
        std::process::Command::new(env!("CARGO_BIN_EXE_shopcell"))
            .args(["healthcheck", "--url", &url, "--timeout", "2"])
            .output()
            .unwrap()
    };
    let ready = check(server.url.clone());
    assert!(ready.status.success(), "{}", String::from_utf8_lossy(&ready.stderr));
    let nobody = format!("http://127.0.0.1:{}", free_port());
    let down = check(nobody.clone());
    assert!(!down.status.success());
    let said = String::from_utf8_lossy(&down.stderr);
    assert!(said.contains(&nobody) && said.contains("not ready"), "{said}");
}
