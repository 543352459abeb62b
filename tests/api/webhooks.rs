//! Webhook subscriptions end to end: a real receiver on loopback (allow-listed), deliveries
//! verified with the test's own HMAC, retries by moving the clock, disabling and re-enabling,
//! pings, resends and the delivery log.

use std::time::Duration;

use serde_json::{Value, json};

use crate::calculate::Shop;
use crate::receiver::Receiver;
use crate::support::*;

async fn subscribe(c: &HttpClient, shop: &Shop, topics: Value, url: &str) -> Value {
    c.post(&shop.path("/webhooks"), Some(&shop.owner.token), json!({"topics": topics, "url": url})).await.expect(201).body
}

/// The delivery log of a subscription, oldest first.
async fn log(c: &HttpClient, shop: &Shop, hook: &str) -> Vec<Value> {
    let page =
        c.get(&shop.path(&format!("/webhooks/{hook}/deliveries?sortOrder=asc")), Some(&shop.owner.token)).await.expect(200).body;
    page["data"].as_array().unwrap().clone()
}

/// The delivery log once `ready` holds of it (bounded wait: the runner records an attempt just
/// after the receiver has answered it).
async fn log_until(c: &HttpClient, shop: &Shop, hook: &str, ready: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    match eventually(|| async { Some(log(c, shop, hook).await).filter(|entries| ready(entries)) }).await {
        Some(entries) => entries,
        None => panic!("the log never got there: {:?}", log(c, shop, hook).await),
    }
}

#[tokio::test]
async fn deliveries_are_signed_in_order_retried_on_schedule_and_logged() {
    let app = spawn_app_allowing(&["127.0.0.1"]).await;
    let c = &app.client;
    let shop = Shop::new(c).await;
    let t = Some(shop.owner.token.as_str());
    let rx = Receiver::start().await;

    let hook = subscribe(c, &shop, json!(["product.*"]), &rx.url()).await;
    let secret = hook["secret"].as_str().unwrap().to_string();
    assert!(secret.starts_with("whsec_"));
    let id = hook["id"].as_str().unwrap().to_string();
    let read = c.get(&shop.path(&format!("/webhooks/{id}")), t).await.expect(200).body;
    assert!(read.get("secret").is_none(), "the secret is shown once: {read}");
    assert_eq!(read["topics"], json!(["product.*"]));

    // Product events reach the receiver, signed, the body the event as GET S/events shows it;
    // a gift card issued meanwhile is not among the subscription's topics.
    let p = create_product(c, &shop.owner, &shop.store, "Kettle", 3000).await;
    let pid = p["id"].as_str().unwrap();
    c.patch(&shop.path(&format!("/products/{pid}")), t, json!({"title": "Red kettle"})).await.expect(200);
    let got = rx.wait_for(2).await;
    let events = c.get(&shop.path("/events?sortOrder=asc"), t).await.expect(200).body;
    for (r, e) in got.iter().zip(events["data"].as_array().unwrap()) {
        assert!(r.signed_with(&secret), "signature {} of {}", r.signature, r.id);
        assert_eq!(r.id, e["id"].as_str().unwrap(), "webhook-id is the event id");
        assert_eq!(&r.json(), e);
        let ts: i64 = r.timestamp.parse().unwrap();
        assert!((ts - app.clock.now_ms() / 1000).abs() < 60);
    }
    assert_eq!(
        got.iter().map(|r| r.json()["type"].as_str().unwrap().to_string()).collect::<Vec<_>>(),
        ["product.created", "product.updated"]
    );
    assert!(!got[1].signed_with("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"), "another secret does not verify");

    // A failure leaves a retry 5 s later without holding the next event back.
    rx.answer(500);
    c.patch(&shop.path(&format!("/products/{pid}")), t, json!({"title": "Blue kettle"})).await.expect(200);
    let failed = rx.wait_for(3).await[2].clone();
    rx.answer(200);
    c.patch(&shop.path(&format!("/products/{pid}")), t, json!({"title": "Green kettle"})).await.expect(200);
    let next = rx.wait_for(4).await[3].clone();
    assert_eq!(next.json()["data"]["title"], "Green kettle", "the next event went out while the failed one waits");
    let entries = log(c, &shop, &id).await;
    let pending = entries.iter().find(|d| d["id"] == failed.id.as_str()).unwrap();
    assert_eq!(pending["status"], "PENDING");
    assert_eq!(pending["attempts"][0]["status"], 500);
    assert_eq!(pending["attempts"][0]["response"], "thanks");
    assert!(pending["attempts"][0]["error"].as_str().unwrap().contains("500"));
    assert!(pending["nextRetry"].is_string());

    // The retry comes when the clock reaches it, with the same webhook-id, freshly signed.
    app.clock.advance(Duration::from_secs(5));
    let retried = rx.wait_for(5).await[4].clone();
    assert_eq!(retried.id, failed.id);
    assert_eq!(retried.body, failed.body);
    assert!(retried.signed_with(&secret));
    // Recorded once the runner completes the attempt the receiver already saw.
    let entries =
        log_until(c, &shop, &id, |l| l.iter().any(|d| d["id"] == failed.id.as_str() && d["status"] == "SUCCEEDED")).await;
    let done = entries.iter().find(|d| d["id"] == failed.id.as_str()).unwrap();
    assert_eq!((done["status"].as_str(), done["attempts"].as_array().unwrap().len()), (Some("SUCCEEDED"), 2));
    assert!(done["nextRetry"].is_null());
    assert_eq!(entries.len(), 4, "one delivery per event");

    // Resend: 202, the same webhook-id again.
    let first = entries[0]["id"].as_str().unwrap();
    let resent = c.post(&shop.path(&format!("/webhooks/{id}/deliveries/{first}/resend")), t, json!({})).await.expect(202).body;
    assert_eq!(resent["id"], first);
    let again = rx.wait_for(6).await[5].clone();
    assert_eq!(again.id, first);

    // Ping: a signed webhook.ping now, answered with its outcome.
    let ping = c.post(&shop.path(&format!("/webhooks/{id}/ping")), t, json!({})).await.expect(200).body;
    assert_eq!((ping["topic"].as_str(), ping["status"].as_str()), (Some("webhook.ping"), Some("SUCCEEDED")));
    let pinged = rx.wait_for(7).await[6].clone();
    assert_eq!(pinged.json()["type"], "webhook.ping");
    assert_eq!(pinged.json()["data"]["webhookId"], id.as_str());
    assert!(pinged.signed_with(&secret));

    // The runner's work shows in /metrics: every run completed (a receiver's 500 is a failed
    // delivery in the log, not a failed job).
    let metrics = app.metrics().await;
    let count = |outcome: &str| -> u64 {
        let prefix = format!("shopcell_jobs_total{{owner=\"cell-1\",outcome=\"{outcome}\"}} ");
        metrics.lines().find_map(|l| l.strip_prefix(prefix.as_str())).and_then(|n| n.parse().ok()).expect("a jobs line")
    };
    assert!(count("completed") >= 6, "{metrics}");
    assert_eq!(count("dead"), 0);

    // Deleting the subscription takes its log with it.
    c.delete(&shop.path(&format!("/webhooks/{id}")), t).await.expect(204);
    c.get(&shop.path(&format!("/webhooks/{id}/deliveries")), t).await.expect(404);
    create_product(c, &shop.owner, &shop.store, "After", 100).await;
    assert_eq!(c.get(&shop.path("/webhooks"), t).await.expect(200).body["total"], 0);
}

#[tokio::test]
async fn a_410_disables_and_re_enabling_sends_what_was_missed_in_order() {
    let app = spawn_app_allowing(&["127.0.0.1"]).await;
    let c = &app.client;
    let shop = Shop::new(c).await;
    let t = Some(shop.owner.token.as_str());
    let rx = Receiver::start().await;
    let hook = subscribe(c, &shop, json!(["*"]), &rx.url()).await;
    let id = hook["id"].as_str().unwrap().to_string();

    rx.answer(410);
    create_product(c, &shop.owner, &shop.store, "One", 100).await;
    rx.wait_for(1).await;
    log_until(c, &shop, &id, |l| l.len() == 1).await;
    let off = c.get(&shop.path(&format!("/webhooks/{id}")), t).await.expect(200).body;
    assert_eq!(off["enabled"], false);
    assert!(off["disabledReason"].as_str().unwrap().contains("410"));

    // While disabled nothing is sent; resend is refused.
    create_product(c, &shop.owner, &shop.store, "Two", 100).await;
    create_product(c, &shop.owner, &shop.store, "Three", 100).await;
    let first = log(c, &shop, &id).await[0]["id"].as_str().unwrap().to_string();
    c.post(&shop.path(&format!("/webhooks/{id}/deliveries/{first}/resend")), t, json!({})).await.expect(409);
    assert_eq!(rx.received().len(), 1);

    // Re-enabled, every kept event not yet delivered goes out, in order.
    rx.answer(200);
    let on = c.patch(&shop.path(&format!("/webhooks/{id}")), t, json!({"enabled": true})).await.expect(200).body;
    assert_eq!((on["enabled"].as_bool(), on["disabledReason"].is_null()), (Some(true), true));
    let got = rx.wait_for(4).await;
    let titles: Vec<String> = got[1..].iter().map(|r| r.json()["data"]["title"].as_str().unwrap().to_string()).collect();
    assert_eq!(titles, ["One", "Two", "Three"]);
    let entries = log_until(c, &shop, &id, |l| l.len() == 3 && l.iter().all(|d| d["status"] == "SUCCEEDED")).await;
    assert_eq!(entries[0]["attempts"].as_array().unwrap().len(), 2, "the 410 and the delivery after re-enabling");
}

#[tokio::test]
async fn subscriptions_refuse_what_they_cannot_deliver() {
    let app = spawn_app_allowing(&["127.0.0.1"]).await;
    let c = &app.client;
    let shop = Shop::new(c).await;
    let t = Some(shop.owner.token.as_str());
    let path = shop.path("/webhooks");
    let url = "http://127.0.0.1:9/hooks";
    for (body, field) in [
        (json!({"topics": ["order.shipped"], "url": url}), "topics[0]"),
        (json!({"topics": [], "url": url}), "topics"),
        (json!({"topics": ["*"], "url": "http://example.com/hooks"}), "url"),
        (json!({"topics": ["*"], "url": "https://user:pw@127.0.0.1/hooks"}), "url"),
        (json!({"topics": ["*"], "url": format!("https://example.com/{}", "a".repeat(2048))}), "url"),
        (json!({"topics": ["*"], "url": "https://169.254.169.254/latest"}), "url"),
    ] {
        let a = c.post(&path, t, body.clone()).await.expect(400);
        let fields: Vec<&str> =
            a.body["error"]["fields"].as_array().unwrap().iter().map(|f| f["field"].as_str().unwrap()).collect();
        assert_eq!(fields, [field], "{body}");
    }
    assert_eq!(c.get(&path, t).await.expect(200).body["total"], 0, "nothing was written");
    for _ in 0..50 {
        subscribe(c, &shop, json!(["order.*"]), url).await;
    }
    c.post(&path, t, json!({"topics": ["*"], "url": url})).await.expect(422);

    // A staff member reads subscriptions but does not change them.
    let staff = create_user(c).await;
    c.post(&shop.path("/members"), t, json!({"email": staff.email, "role": "staff"})).await.expect(201);
    assert_eq!(c.get(&path, Some(&staff.token)).await.expect(200).body["total"], 50);
    c.post(&path, Some(&staff.token), json!({"topics": ["*"], "url": url})).await.expect(403);
}

#[tokio::test]
async fn five_days_of_failures_disable_a_subscription_and_tell_the_owner() {
    let app = spawn_app_allowing(&["127.0.0.1"]).await;
    let c = &app.client;
    let shop = Shop::new(c).await;
    let rx = Receiver::start().await;
    rx.answer(503);
    let hook = subscribe(c, &shop, json!(["product.*"]), &rx.url()).await;
    let id = hook["id"].as_str().unwrap().to_string();
    create_product(c, &shop.owner, &shop.store, "Doomed", 100).await;
    rx.wait_for(1).await;
    log_until(c, &shop, &id, |l| l.len() == 1).await;

    // Four days on the subscription still tries; five days after the first failure it stops.
    app.clock.advance(Duration::from_secs(4 * 86_400));
    app.cell().jobs.wake();
    rx.wait_for(2).await;
    let login = json!({"email": shop.owner.email, "password": PASSWORD});
    let t = c.post("/api/v1/auth/login", None, login.clone()).await.expect(200).body["accessToken"].as_str().unwrap().to_string();
    assert_eq!(c.get(&shop.path(&format!("/webhooks/{id}")), Some(&t)).await.expect(200).body["enabled"], true);
    app.clock.advance(Duration::from_secs(86_400));
    app.cell().jobs.wake();
    rx.wait_for(3).await;
    let t = c.post("/api/v1/auth/login", None, login).await.expect(200).body["accessToken"].as_str().unwrap().to_string();
    let hooks_path = shop.path(&format!("/webhooks/{id}"));
    let off = get_until(c, &hooks_path, Some(&t), &[], |w| w["enabled"] == false).await;
    assert_eq!(off["enabled"], false, "{off}");
    assert!(off["disabledReason"].as_str().unwrap().contains("five days"));

    // The owner is told, with the way back.
    let sent = crate::mail::mails(app.dir.path(), 1).await;
    let m = mail_parser::MessageParser::default().parse(&sent[0]).unwrap();
    assert_eq!(m.to().and_then(|a| a.first()).and_then(|a| a.address()), Some(shop.owner.email.as_str()));
    let text = m.body_text(0).unwrap();
    assert!(text.contains(&rx.url()) && text.contains(&id) && text.contains("five days"), "{text}");
}

#[tokio::test]
async fn a_misbehaving_receiver_fails_with_its_reason_and_leaves_the_others_alone() {
    let dir = tempfile::tempdir().unwrap();
    let mut args = default_args(dir.path());
    args.cell.outbound.outbound_allow = vec!["127.0.0.1".into()];
    args.cell.outbound.outbound_timeout = Some(Duration::from_millis(800));
    let app = serve(&args, dir, shopcell::clock::Clock::system()).await;
    let c = &app.client;
    let shop = Shop::new(c).await;
    let rx = Receiver::start().await;
    let bad = crate::receiver::misbehaving().await;
    let mut hooks = Vec::new();
    for path in ["redirect", "big", "hang"] {
        let url = format!("http://127.0.0.1:{}/{path}", bad.port());
        hooks.push((path, subscribe(c, &shop, json!(["product.created"]), &url).await["id"].as_str().unwrap().to_string()));
    }
    subscribe(c, &shop, json!(["product.created"]), &rx.url()).await;
    for n in 0..3 {
        create_product(c, &shop.owner, &shop.store, &format!("p{n}"), 100).await;
    }
    // The good receiver gets every event, in order, whatever the others do.
    let got = rx.wait_for(3).await;
    assert_eq!(
        got.iter().map(|r| r.json()["data"]["title"].as_str().unwrap().to_string()).collect::<Vec<_>>(),
        ["p0", "p1", "p2"]
    );
    for (path, id) in hooks {
        let entries = log_until(c, &shop, &id, |l| l.len() == 3).await;
        let error = entries[0]["attempts"][0]["error"].as_str().unwrap().to_string();
        let expected = match path {
            "redirect" => "302",
            "big" => "large",
            _ => "time",
        };
        assert!(error.contains(expected), "{path}: {error}");
        assert!(entries.iter().all(|d| d["status"] == "PENDING" && d["nextRetry"].is_string()), "{path}: {entries:?}");
    }
}
