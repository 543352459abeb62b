//! SIGKILL during concurrent writes: every acknowledged write is there after restart.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;

use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_writes_survive_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_string_lossy().into_owned();
    let port = free_port();
    let mut server = start_proc(&["serve", "--data", &data], port).await;
    let c = HttpClient::new(&server.url);
    let u = create_user(&c).await;
    let s = create_store(&c, &u).await;

    let acked = Arc::new(Mutex::new(HashSet::new()));
    let mut writers = Vec::new();
    for w in 0..16 {
        let (c, token, s, acked) = (c.clone(), u.token.clone(), s.clone(), acked.clone());
        writers.push(tokio::spawn(async move {
            for n in 0.. {
                let body = json!({"title": format!("w{w}-{n}"), "price": {"amount": n, "currency": "USD"}});
                let path = format!("/api/v1/stores/{s}/products");
                let req = c.try_send(hyper::Method::POST, &path, Some(&token), &[], Some(body.to_string().into()));
                // Once the server is killed, requests fail or hang: stop there.
                let Ok(Some(a)) = tokio::time::timeout(Duration::from_secs(2), req).await else { break };
                if a.status.as_u16() != 201 {
                    break;
                }
                acked.lock().unwrap().insert(a.body["id"].as_str().unwrap().to_string());
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(800)).await;
    server.child.kill().unwrap(); // SIGKILL
    server.child.wait().unwrap();
    for w in writers {
        w.await.unwrap();
    }
    let acked = acked.lock().unwrap().clone();
    assert!(acked.len() > 10, "writes were acknowledged before the kill ({})", acked.len());

    let server = start_proc(&["serve", "--data", &data], port).await;
    let c = HttpClient::new(&server.url);
    let mut seen = HashSet::new();
    for page in 1.. {
        let l = c.get(&format!("/api/v1/stores/{s}/products?limit=250&page={page}"), Some(&u.token)).await.expect(200).body;
        let rows = l["data"].as_array().unwrap();
        seen.extend(rows.iter().map(|p| p["id"].as_str().unwrap().to_string()));
        if rows.len() < 250 {
            assert_eq!(l["total"].as_u64().unwrap() as usize, seen.len());
            break;
        }
    }
    let lost: Vec<_> = acked.difference(&seen).collect();
    assert!(lost.is_empty(), "{} acknowledged writes lost: {lost:?}", lost.len());
}
