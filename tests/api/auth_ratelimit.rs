//! Rate limits on the sign-in endpoints: per account and per client address, 429 with Retry-After.

use std::time::Instant;

use hyper::Method;
use serde_json::json;

use crate::auth_support::*;
use crate::support::*;

#[tokio::test]
async fn failed_logins_are_limited_per_account() {
    let app = spawn_app_with_flags(&["--rate-per-account", "3", "--rate-per-address", "1000"]).await;
    let c = &app.client;
    let u = create_user(c).await;
    let other = create_user(c).await;
    let wrong = json!({"email": u.email, "password": "not the password"});
    for _ in 0..3 {
        let a = c.post("/api/v1/auth/login", None, wrong.clone()).await.expect(401);
        assert_eq!(a.code(), "INVALID_CREDENTIALS");
    }
    let limited = c.post("/api/v1/auth/login", None, wrong.clone()).await.expect(429);
    assert_eq!(limited.code(), "RATE_LIMITED");
    let retry: u64 = limited.headers["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=60).contains(&retry), "Retry-After {retry}");
    // Even the right password waits from that address: its guesses are used up.
    let right = c.post("/api/v1/auth/login", None, json!({"email": u.email.to_uppercase(), "password": PASSWORD})).await;
    assert_eq!(right.status, 429);
    // Other accounts are not affected.
    c.post("/api/v1/auth/login", None, json!({"email": other.email, "password": PASSWORD})).await.expect(200);

    // Unknown emails are limited the same way and fail in about the same time as known ones.
    // (The faster of two tries each, to keep scheduling noise out.)
    let ghost = json!({"email": "ghost@example.com", "password": "not the password"});
    let known_wrong = json!({"email": other.email, "password": "not the password"});
    let (mut unknown, mut known) = (std::time::Duration::MAX, std::time::Duration::MAX);
    for _ in 0..2 {
        let t = Instant::now();
        c.post("/api/v1/auth/login", None, ghost.clone()).await.expect(401);
        unknown = unknown.min(t.elapsed());
        let t = Instant::now();
        c.post("/api/v1/auth/login", None, known_wrong.clone()).await.expect(401);
        known = known.min(t.elapsed());
    }
    assert!(unknown * 4 > known && known * 4 > unknown, "unknown {unknown:?} vs known {known:?}");
    c.post("/api/v1/auth/login", None, ghost.clone()).await.expect(401);
    c.post("/api/v1/auth/login", None, ghost).await.expect(429);
}

#[tokio::test]
async fn sign_in_calls_are_limited_per_client_address() {
    let app = spawn_app_with_flags(&["--rate-per-address", "4"]).await;
    let c = &app.client;
    let u = create_user(c).await;
    for _ in 0..4 {
        let a = c.post("/api/v1/auth/refresh", None, json!({"refreshToken": "not.a.token"})).await.expect(401);
        assert_eq!(a.code(), "INVALID_TOKEN");
    }
    let limited = c.post("/api/v1/auth/refresh", None, json!({"refreshToken": u.refresh})).await.expect(429);
    assert_eq!(limited.code(), "RATE_LIMITED");
    assert!(limited.headers.get("retry-after").is_some());
    // The refused refresh did not rotate the token: the session is intact.
    c.get("/api/v1/auth/me", Some(&u.token)).await.expect(200);
    // Each endpoint group has its own allowance: login still answers.
    c.post("/api/v1/auth/login", None, json!({"email": u.email, "password": PASSWORD})).await.expect(200);
    let mfa = c.post("/api/v1/auth/mfa/verify", None, json!({"mfaToken": "x", "code": "123456"})).await.expect(401);
    assert_eq!(mfa.code(), "INVALID_TOKEN");
    for _ in 0..3 {
        c.post("/api/v1/auth/mfa/verify", None, json!({"mfaToken": "x", "code": "123456"})).await.expect(401);
    }
    c.post("/api/v1/auth/mfa/verify", None, json!({"mfaToken": "x", "code": "123456"})).await.expect(429);
}

#[tokio::test]
async fn publishable_key_validation_is_limited_per_client_address() {
    let app = spawn_app_with_flags(&["--rate-per-address", "3"]).await;
    let c = &app.client;
    let guess = json!({"key": "pk_live_0000000000000000000000000000"});
    for _ in 0..3 {
        let a = c.post("/api/v1/auth/publishable-keys/validate", None, guess.clone()).await.expect(200);
        assert_eq!(a.body["valid"], false);
    }
    let limited = c.post("/api/v1/auth/publishable-keys/validate", None, guess).await.expect(429);
    assert_eq!(limited.code(), "RATE_LIMITED");
    assert!(limited.headers.get("retry-after").is_some());
}

#[tokio::test]
async fn forwarded_addresses_count_only_from_a_trusted_proxy() {
    let validate = |c: &HttpClient, from: &'static str| {
        let c = c.clone();
        async move {
            let body = json!({"key": "pk_live_0000000000000000000000000000"}).to_string();
            let headers = [("x-forwarded-for", from)];
            c.send(Method::POST, "/api/v1/auth/publishable-keys/validate", None, &headers, Some(body.into())).await.status
        }
    };
    // No proxy trusted: a client writing another address into the header still spends its own.
    let app = spawn_app_with_flags(&["--rate-per-address", "2"]).await;
    for from in ["198.51.100.1", "198.51.100.2"] {
        assert_eq!(validate(&app.client, from).await, 200);
    }
    assert_eq!(validate(&app.client, "198.51.100.3").await, 429);
    // Behind a trusted proxy (here the test's own address), each forwarded client has its own.
    let app = spawn_app_with_flags(&["--rate-per-address", "2", "--trusted-proxy", "127.0.0.0/8"]).await;
    for _ in 0..2 {
        assert_eq!(validate(&app.client, "198.51.100.1").await, 200);
    }
    assert_eq!(validate(&app.client, "198.51.100.1").await, 429);
    assert_eq!(validate(&app.client, "198.51.100.2").await, 200, "another client behind the proxy");
    // A malformed entry falls back to the peer: the proxy's own allowance.
    assert_eq!(validate(&app.client, "not-an-address").await, 200);
}

#[tokio::test]
async fn a_strangers_failed_guesses_do_not_lock_the_owner_out() {
    // Addresses told apart through a trusted proxy (the test's own loopback).
    let flags = ["--rate-per-account", "3", "--rate-per-address", "1000", "--trusted-proxy", "127.0.0.0/8"];
    let app = spawn_app_with_flags(&flags).await;
    let c = &app.client;
    let u = create_user(c).await;
    let login = |from: &'static str, password: &'static str| {
        let (c, email) = (c.clone(), u.email.clone());
        async move {
            let body = json!({"email": email, "password": password}).to_string();
            c.send(Method::POST, "/api/v1/auth/login", None, &[("x-forwarded-for", from)], Some(body.into())).await.status
        }
    };
    for _ in 0..3 {
        assert_eq!(login("203.0.113.66", "guess").await, 401);
    }
    assert_eq!(login("203.0.113.66", "guess").await, 429, "the stranger is stopped");
    assert_eq!(login("198.51.100.10", PASSWORD).await, 200, "the owner, from home, is not");
}

#[tokio::test]
async fn sign_ups_are_limited_per_client_address() {
    let app = spawn_app_with_flags(&["--rate-register", "3"]).await;
    let c = &app.client;
    let register = |n: u32| {
        let c = c.clone();
        async move {
            let body = json!({"email": format!("signup-{n}@example.com"), "password": PASSWORD, "name": "N"});
            c.post("/api/v1/auth/register", None, body).await
        }
    };
    for n in 0..3 {
        register(n).await.expect(201);
    }
    let limited = register(3).await.expect(429);
    assert!(limited.headers.get("retry-after").is_some());
    // Refused before anything was written: the address is free once the minute has refilled it.
    app.clock.advance(std::time::Duration::from_secs(60));
    register(3).await.expect(201);
}
