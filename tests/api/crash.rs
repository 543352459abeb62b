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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_9_mid_backlog_delivers_every_event_repeating_only_what_was_in_flight() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_string_lossy().into_owned();
    let port = free_port();
    let serve = |paused: bool| {
        let mut args = vec!["serve", "--data", &data, "--outbound-allow", "127.0.0.1"];
        if paused {
            args.push("--jobs-paused");
        }
        args.into_iter().map(str::to_string).collect::<Vec<_>>()
    };
    let start = |args: Vec<String>| async move { start_proc(&args.iter().map(String::as_str).collect::<Vec<_>>(), port).await };
    // The backlog is written with the runner paused.
    let mut server = start(serve(true)).await;
    let c = HttpClient::new(&server.url);
    let u = create_user(&c).await;
    let s = create_store(&c, &u).await;
    let rx = crate::receiver::Receiver::start().await;
    const HOOKS: usize = 4;
    const PRODUCTS: usize = 150;
    let mut secrets = Vec::new();
    for i in 0..HOOKS {
        let url = format!("http://127.0.0.1:{}/h{i}", rx.addr.port());
        let body = json!({"topics": ["product.created"], "url": url});
        let hook = c.post(&format!("/api/v1/stores/{s}/webhooks"), Some(&u.token), body).await.expect(201);
        secrets.push(hook.body["secret"].as_str().unwrap().to_string());
    }
    let mut ids = HashSet::new();
    for n in 0..PRODUCTS {
        ids.insert(create_product(&c, &u, &s, &format!("p{n}"), 100).await["id"].as_str().unwrap().to_string());
    }
    server.child.kill().unwrap();
    server.child.wait().unwrap();

    // Draining, killed part way; started again, it finishes.
    let mut server = start(serve(false)).await;
    rx.wait_for_within(HOOKS * PRODUCTS / 3, Duration::from_secs(60)).await;
    server.child.kill().unwrap();
    server.child.wait().unwrap();
    assert!(rx.received().len() < HOOKS * PRODUCTS, "the kill came before the end");
    let _server = start(serve(false)).await;
    rx.wait_for_within(HOOKS * PRODUCTS, Duration::from_secs(60)).await;
    // Late repeats, if any, have time to show.
    tokio::time::sleep(Duration::from_millis(500)).await;

    let got = rx.received();
    let mut distinct = HashSet::new();
    for r in &got {
        let i: usize = r.path.trim_start_matches("/h").parse().unwrap();
        assert!(r.signed_with(&secrets[i]), "every delivery is signed with its subscription's secret");
        assert!(ids.contains(r.json()["data"]["id"].as_str().unwrap()));
        distinct.insert((i, r.id.clone()));
    }
    assert_eq!(distinct.len(), HOOKS * PRODUCTS, "every event reached every subscription");
    let repeats = got.len() - distinct.len();
    assert!(repeats <= HOOKS, "only the deliveries in flight at the kill repeat: {repeats}");
}
