use std::time::Duration;

use serde_json::{Value, json};

use crate::support::*;

#[tokio::test]
async fn register_login_refresh_and_me() {
    let app = spawn_app().await;
    let c = &app.client;
    let u = create_user(c).await;
    let me = c.get("/api/v1/auth/me", Some(&u.token)).await.expect(200).body;
    assert_eq!(me, json!({"id": u.id, "email": u.email, "name": "Test User"}));

    let login =
        c.post("/api/v1/auth/login", None, json!({"email": u.email.to_uppercase(), "password": PASSWORD})).await.expect(200).body;
    assert_eq!(login["expiresIn"], 3600);
    assert_eq!(login["user"]["id"], u.id.as_str());
    assert!(login["accessToken"].as_str().is_some_and(|t| t.split('.').count() == 3));

    let wrong = c.post("/api/v1/auth/login", None, json!({"email": u.email, "password": "not the password"})).await.expect(401);
    assert_eq!(wrong.code(), "INVALID_CREDENTIALS");
    let nobody = c
        .post("/api/v1/auth/login", None, json!({"email": "nobody@example.com", "password": "not the password"}))
        .await
        .expect(401);
    assert_eq!(nobody.body, wrong.body, "an unknown email is indistinguishable from a wrong password");

    let pair = c.post("/api/v1/auth/refresh", None, json!({"refreshToken": u.refresh})).await.expect(200).body;
    assert_eq!(pair["expiresIn"], 3600);
    let new_access = pair["accessToken"].as_str().unwrap();
    c.get("/api/v1/auth/me", Some(new_access)).await.expect(200);
    // An access token is not a refresh token, and the message says which was expected.
    let wrong = c.post("/api/v1/auth/refresh", None, json!({"refreshToken": u.token})).await.expect(401);
    assert_eq!(wrong.body["message"], "the refresh token is invalid");
    let garbage = c.post("/api/v1/auth/refresh", None, json!({"refreshToken": "x.y.z"})).await.expect(401);
    assert_eq!(garbage.body["message"], "the refresh token is invalid");
}

#[tokio::test]
async fn reusing_a_rotated_refresh_token_revokes_the_session() {
    let app = spawn_app().await;
    let c = &app.client;
    let u = create_user(c).await;
    let w = watcher(c, &u).await;
    let pair = c.post("/api/v1/auth/refresh", None, json!({"refreshToken": u.refresh})).await.expect(200).body;
    // Past the grace window of tabs refreshing together (10 s by default).
    app.clock.advance(Duration::from_secs(10));
    let reuse = c.post("/api/v1/auth/refresh", None, json!({"refreshToken": u.refresh})).await.expect(401);
    assert_eq!(reuse.code(), "INVALID_TOKEN");
    assert_eq!(reuse.body["message"], "this refresh token was already used; the session is revoked");
    // The session is gone: the rotated token and the access tokens stop working too.
    let rotated = c.post("/api/v1/auth/refresh", None, json!({"refreshToken": pair["refreshToken"]})).await.expect(401);
    assert_eq!(rotated.body["message"], "the refresh token's session has ended; sign in again");
    c.get("/api/v1/auth/me", Some(&u.token)).await.expect(401);
    c.get("/api/v1/auth/me", pair["accessToken"].as_str()).await.expect(401);
    assert_eq!(live_sessions(c, &w).await, 0);
}

/// A second sign-in of `u`, to look at the user's sessions from outside the one under test.
async fn watcher(c: &HttpClient, u: &User) -> String {
    let login = c.post("/api/v1/auth/login", None, json!({"email": u.email, "password": PASSWORD})).await.expect(200).body;
    login["accessToken"].as_str().expect("an access token").to_string()
}

/// How many live sessions the user of `watcher` has besides the watcher's own.
async fn live_sessions(c: &HttpClient, watcher: &str) -> usize {
    let list = c.get("/api/v1/auth/sessions", Some(watcher)).await.expect(200).body;
    list.as_array().expect("a list of sessions").iter().filter(|s| s["current"] == false).count()
}

#[tokio::test]
async fn tabs_refreshing_one_token_within_the_grace_window_share_one_new_pair() {
    let app = spawn_app().await;
    let c = &app.client;
    let u = create_user(c).await;
    let w = watcher(c, &u).await;
    let refresh = |token: Value| c.post("/api/v1/auth/refresh", None, json!({"refreshToken": token}));
    let first = refresh(json!(u.refresh)).await.expect(200).body;
    // The second tab asks with the same token a moment later: the very same pair, not a new one.
    app.clock.advance(Duration::from_secs(9));
    let second = refresh(json!(u.refresh)).await.expect(200).body;
    assert_eq!(second, first);
    assert_ne!(first["refreshToken"], json!(u.refresh));
    // Both tabs hold a working pair of the one session: its access token works, and its refresh
    // token rotates as any current one does.
    let me = c.get("/api/v1/auth/me", first["accessToken"].as_str()).await.expect(200).body;
    assert_eq!(me["id"], u.id.as_str());
    assert_eq!(live_sessions(c, &w).await, 1, "no second branch of the session");
    let next = refresh(first["refreshToken"].clone()).await.expect(200).body;
    assert_ne!(next["refreshToken"], first["refreshToken"]);
    c.get("/api/v1/auth/me", next["accessToken"].as_str()).await.expect(200);

    // The first token again, past the window of the rotation that spent it: the session ends,
    // every pair it gave refused.
    app.clock.advance(Duration::from_secs(10));
    let late = refresh(json!(u.refresh)).await.expect(401);
    assert_eq!(late.body["message"], "this refresh token was already used; the session is revoked");
    for pair in [&first, &next] {
        c.get("/api/v1/auth/me", pair["accessToken"].as_str()).await.expect(401);
    }
    refresh(next["refreshToken"].clone()).await.expect(401);
    assert_eq!(live_sessions(c, &w).await, 0);
}

#[tokio::test]
async fn a_token_spent_two_rotations_ago_revokes_the_session_even_within_the_window() {
    let app = spawn_app().await;
    let c = &app.client;
    let u = create_user(c).await;
    let w = watcher(c, &u).await;
    let refresh = |token: Value| c.post("/api/v1/auth/refresh", None, json!({"refreshToken": token}));
    let first = refresh(json!(u.refresh)).await.expect(200).body;
    let second = refresh(first["refreshToken"].clone()).await.expect(200).body;
    // Only the last rotation's spent token has the grace: the one before is plain reuse.
    refresh(json!(u.refresh)).await.expect(401);
    c.get("/api/v1/auth/me", second["accessToken"].as_str()).await.expect(401);
    assert_eq!(live_sessions(c, &w).await, 0);
}

#[tokio::test]
async fn registration_rules() {
    let app = spawn_app().await;
    let c = &app.client;
    let cases = [
        (json!({"email": "not-an-email", "password": PASSWORD, "name": "A"}), "email"),
        (json!({"email": "a@example.com", "password": "short", "name": "A"}), "password"),
        (json!({"email": "a@example.com", "password": "x".repeat(257), "name": "A"}), "password"),
        (json!({"email": "longemail@example.com", "password": "longemail@example.com", "name": "A"}), "password"),
        (json!({"email": "a@example.com", "password": PASSWORD, "name": " "}), "name"),
        (json!({"email": "a@example.com", "password": PASSWORD, "name": "Ada\nLovelace"}), "name"),
    ];
    for (body, field) in cases {
        let a = c.post("/api/v1/auth/register", None, body.clone()).await.expect(400);
        assert_eq!(a.body["error"]["fields"][0]["field"], field, "{body}");
    }
    let u = create_user(c).await;
    let dup =
        c.post("/api/v1/auth/register", None, json!({"email": u.email, "password": PASSWORD, "name": "B"})).await.expect(409);
    assert_eq!(dup.code(), "EMAIL_TAKEN");
}
