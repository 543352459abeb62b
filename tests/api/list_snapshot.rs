//! Lists held at a clean stop are read back at the next start (`storage::list_snapshot`): they
//! answer as lists built from the rows do, follow the writes made after the start, and are never
//! paired with rows they were not taken from.

use serde_json::{Value, json};

use crate::support::*;

const SORTS: [&str; 5] = ["created_at", "updated_at", "title", "price", "inventory"];
const STATUSES: [&str; 4] = ["", "draft", "active", "archived,draft"];

fn snapshot(app: &TestApp) -> std::path::PathBuf {
    app.dir.path().join("cells/cell-1/lists.snapshot")
}

/// Every product list of `store` (every sort, both ways, each status set, at several
/// offsets) and the gift cards by balance: ids in order and totals.
async fn answers(c: &HttpClient, u: &User, store: &str) -> Vec<(String, Value)> {
    let mut all = Vec::new();
    for sort in SORTS {
        for order in ["asc", "desc"] {
            for status in STATUSES {
                for page in [1, 2, 5] {
                    let path = format!(
                        "/api/v1/stores/{store}/products?sortBy={sort}&sortOrder={order}&status={status}&limit=4&page={page}"
                    );
                    let path = path.replace("&status=&", "&");
                    let body = c.get(&path, Some(&u.token)).await.expect(200).body;
                    let ids: Vec<Value> = body["data"].as_array().unwrap().iter().map(|p| p["id"].clone()).collect();
                    all.push((path, json!({"ids": ids, "total": body["total"]})));
                }
            }
        }
    }
    for order in ["asc", "desc"] {
        let path = format!("/api/v1/stores/{store}/gift-cards?sortBy=balance&sortOrder={order}");
        let body = c.get(&path, Some(&u.token)).await.expect(200).body;
        let ids: Vec<Value> = body["data"].as_array().unwrap().iter().map(|p| p["id"].clone()).collect();
        all.push((path, json!({"ids": ids, "total": body["total"]})));
    }
    all
}

/// Products of every status, titles and prices out of creation order, and three gift cards.
async fn seed(c: &HttpClient, u: &User, store: &str) {
    for i in 0..23u32 {
        let status = ["ACTIVE", "DRAFT", "ARCHIVED"][(i % 3) as usize];
        let body = json!({"title": format!("P{:02}", (i * 7) % 23), "price": {"amount": 100 + (i * 37) % 50, "currency": "USD"}, "status": status});
        c.post(&format!("/api/v1/stores/{store}/products"), Some(&u.token), body).await.expect(201);
    }
    for amount in [2500, 700, 1200] {
        let card = json!({"initialValue": {"amount": amount, "currency": "USD"}});
        c.post(&format!("/api/v1/stores/{store}/gift-cards"), Some(&u.token), card).await.expect(201);
    }
}

/// Writes that move products within and between lists, and add and remove some.
async fn write_some(c: &HttpClient, u: &User, store: &str) {
    let base = format!("/api/v1/stores/{store}/products");
    let list = c.get(&format!("{base}?limit=250&sortBy=created_at&sortOrder=asc"), Some(&u.token)).await.expect(200).body;
    let ids: Vec<String> = list["data"].as_array().unwrap().iter().map(|p| p["id"].as_str().unwrap().to_string()).collect();
    c.patch(&format!("{base}/{}", ids[0]), Some(&u.token), json!({"title": "AAA first now", "status": "DRAFT"}))
        .await
        .expect(200);
    c.patch(&format!("{base}/{}", ids[4]), Some(&u.token), json!({"price": {"amount": 1, "currency": "USD"}})).await.expect(200);
    c.delete(&format!("{base}/{}", ids[7]), Some(&u.token)).await.expect(204);
    create_product(c, u, store, "ZZZ last", 99_999).await;
}

#[tokio::test]
async fn lists_read_back_after_a_clean_restart_answer_as_built_ones_and_follow_later_writes() {
    let mut app = spawn_app().await;
    let u = create_user(&app.client).await;
    let store = create_store(&app.client, &u).await;
    seed(&app.client, &u, &store).await;
    let built = answers(&app.client, &u, &store).await;
    app.stop().await;
    assert!(snapshot(&app).exists(), "the clean stop saved the held lists");

    let mut again = spawn_app_in(app.dir.path()).await;
    assert!(!snapshot(&app).exists(), "the start took the snapshot");
    let restored = answers(&again.client, &u, &store).await;
    assert_eq!(restored, built, "read back, every list answers as built");
    write_some(&again.client, &u, &store).await;
    let after_writes = answers(&again.client, &u, &store).await;
    assert_ne!(after_writes, built, "the writes moved the lists");
    again.stop().await;

    // The same lists built from the rows: the file is damaged in the middle (a list fails its
    // check and is built; the others are read back) and, the second time, gone.
    let mut bytes = std::fs::read(snapshot(&app)).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x5a;
    std::fs::write(snapshot(&app), bytes).unwrap();
    let mut damaged = spawn_app_in(app.dir.path()).await;
    assert_eq!(answers(&damaged.client, &u, &store).await, after_writes);
    damaged.stop().await;
    std::fs::remove_file(snapshot(&app)).unwrap();
    let rebuilt = spawn_app_in(app.dir.path()).await;
    assert_eq!(answers(&rebuilt.client, &u, &store).await, after_writes, "built from the rows, the same answers");
}

#[tokio::test]
async fn a_snapshot_is_never_paired_with_writes_made_after_it_by_a_process_killed_later() {
    let mut app = spawn_app().await;
    let u = create_user(&app.client).await;
    let store = create_store(&app.client, &u).await;
    seed(&app.client, &u, &store).await;
    let before = answers(&app.client, &u, &store).await;
    app.stop().await;
    let saved = std::fs::read(snapshot(&app)).unwrap();

    // A process serves the data, writes, and is killed (SIGKILL: no clean stop).
    let data = app.dir.path().to_string_lossy().into_owned();
    let port = free_port();
    let server = start_proc(&["serve", "--data", &data], port).await;
    let c = HttpClient::new(&server.url);
    assert_eq!(answers(&c, &u, &store).await, before);
    write_some(&c, &u, &store).await;
    let written = answers(&c, &u, &store).await;
    drop(server);

    // Even with the old snapshot put back in place, the next start builds from the rows.
    std::fs::write(snapshot(&app), saved).unwrap();
    let again = spawn_app_in(app.dir.path()).await;
    assert_eq!(answers(&again.client, &u, &store).await, written, "the writes before the kill are in every list");
    assert!(!snapshot(&app).exists(), "the stale snapshot is removed");
}
