//! `shopcell serve --demo`: a merchant whose password is printed once, and a store to try
//! everything with; refused on a directory that holds anything.

use std::io::BufRead;

use serde_json::json;

use crate::calculate::amount;
use crate::support::*;

/// Starts `serve --demo` on `data` and reads its stdout up to the demo lines: (process, URL,
/// email, password).
async fn start_demo(data: &std::path::Path) -> (Proc, String, String, String) {
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_shopcell"))
        .args(["serve", "--demo", "--data", &data.to_string_lossy(), "--listen", "127.0.0.1:0"])
        .env("SHOPCELL_LOG", "warn")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("start shopcell");
    let stdout = child.stdout.take().unwrap();
    let lines = tokio::task::spawn_blocking(move || {
        let mut seen = Vec::new();
        for line in std::io::BufReader::new(stdout).lines() {
            let line = line.unwrap();
            let done = line.starts_with("demo store ");
            seen.push(line);
            if done {
                break;
            }
        }
        seen
    });
    let lines = tokio::time::timeout(std::time::Duration::from_secs(120), lines).await.expect("the demo is ready").unwrap();
    let find = |prefix: &str| lines.iter().find_map(|l| l.strip_prefix(prefix)).unwrap_or_else(|| panic!("{lines:?}"));
    let url = find("shopcell serve listening on ").to_string();
    let merchant = find("demo merchant: ");
    let (email, rest) = merchant.split_once(" password: ").unwrap();
    let password = rest.split_whitespace().next().unwrap().to_string();
    assert!(find("demo store ").ends_with(&format!("sign in at {url}/api/v1/auth/login")), "{lines:?}");
    (Proc { child, url: url.clone() }, url, email.to_string(), password)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_demo_store_has_products_with_variants_in_collections_a_discount_shipping_and_tax() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("absent");
    let (_proc, url, email, password) = start_demo(&data).await;
    let c = HttpClient::new(&url);
    assert_eq!(email, "demo@example.com");
    let login = c.post("/api/v1/auth/login", None, json!({"email": email, "password": password})).await.expect(200).body;
    let t = login["accessToken"].as_str().unwrap().to_string();
    let t = Some(t.as_str());
    let stores = c.get("/api/v1/stores", t).await.expect(200).body;
    assert_eq!((stores[0]["name"].as_str(), stores[0]["role"].as_str()), (Some("Demo Outfitters"), Some("owner")), "{stores}");
    let store = stores[0]["id"].as_str().unwrap().to_string();
    let path = |rest: &str| format!("/api/v1/stores/{store}{rest}");

    let first = c.get(&path("/products?limit=250"), t).await.expect(200).body;
    assert_eq!(first["total"], 300);
    let products = first["data"].as_array().unwrap();
    assert!(products.iter().all(|p| p["status"] == "ACTIVE" && p["variants"].as_array().unwrap().len() >= 3));
    let collections = c.get(&path("/collections?limit=50"), t).await.expect(200).body;
    assert_eq!(collections["total"], 6);
    let counted: i64 = collections["data"].as_array().unwrap().iter().map(|col| col["productCount"].as_i64().unwrap()).sum();
    assert_eq!(counted, 300, "every product is in a collection: {collections}");
    let discounts = c.get(&path("/discounts"), t).await.expect(200).body;
    assert_eq!(discounts["data"][0]["code"], "WELCOME10");
    let zones = c.get(&path("/shipping-zones"), t).await.expect(200).body;
    assert_eq!(zones["total"], 2);
    let us = zones["data"].as_array().unwrap().iter().find(|z| z["name"] == "United States").unwrap();
    let standard = us["rates"].as_array().unwrap().iter().find(|r| r["name"] == "Standard").unwrap()["id"].clone();
    assert_eq!(c.get(&path("/tax-rates"), t).await.expect(200).body["total"], 2);

    // A cart of two demo variants, priced with the code, shipping and tax as a checkout would be.
    let (a, b) = (&products[0]["variants"][0], &products[1]["variants"][1]);
    let body = json!({
        "lineItems": [{"variantId": a["id"], "quantity": 2}, {"variantId": b["id"], "quantity": 1}],
        "discountCodes": ["WELCOME10"],
        "shippingAddress": {"firstName": "Ada", "address1": "1 Main St", "city": "Austin", "province": "TX",
                            "country": "US", "postalCode": "78701"},
        "shippingMethodId": standard,
    });
    let calc = c.post(&path("/calculate"), t, body).await.expect(200).body;
    let subtotal = 2 * a["price"]["amount"].as_i64().unwrap() + b["price"]["amount"].as_i64().unwrap();
    assert_eq!(amount(&calc, "/subtotal"), subtotal);
    let discount = amount(&calc, "/discount");
    // Ten per cent off, give or take the rounding of its split among the lines.
    assert!((discount - subtotal / 10).abs() <= 1, "{calc}");
    assert_eq!(amount(&calc, "/shipping"), 599);
    let tax = amount(&calc, "/tax");
    assert!(tax > 0, "{calc}");
    assert_eq!(amount(&calc, "/total"), subtotal - discount + 599 + tax);
}

#[test]
fn demo_on_an_address_in_use_leaves_the_directory_empty() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let dir = tempfile::tempdir().unwrap();
    let ran = run_shopcell(&["serve", "--demo", "--data", &dir.path().to_string_lossy(), "--listen", &addr], None, &[]);
    assert_eq!(ran.code, 1);
    assert!(ran.stderr.contains(&format!("cannot listen on {addr}")), "{}", ran.stderr);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "a second try with --demo is not refused");
}

#[test]
fn demo_refuses_a_directory_that_holds_anything() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), b"mine").unwrap();
    let ran = run_shopcell(&["serve", "--demo", "--data", &dir.path().to_string_lossy(), "--listen", "127.0.0.1:0"], None, &[]);
    assert_eq!(ran.code, 1);
    assert!(
        ran.stderr
            .contains(&format!("--demo needs an empty or absent data directory, and {} is not empty", dir.path().display())),
        "{}",
        ran.stderr
    );
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "nothing was written");
}
