use serde_json::json;

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
    let pair = c.post("/api/v1/auth/refresh", None, json!({"refreshToken": u.refresh})).await.expect(200).body;
    let reuse = c.post("/api/v1/auth/refresh", None, json!({"refreshToken": u.refresh})).await.expect(401);
    assert_eq!(reuse.code(), "INVALID_TOKEN");
    // The session is gone: the rotated token and the access tokens stop working too.
    c.post("/api/v1/auth/refresh", None, json!({"refreshToken": pair["refreshToken"]})).await.expect(401);
    c.get("/api/v1/auth/me", Some(&u.token)).await.expect(401);
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
