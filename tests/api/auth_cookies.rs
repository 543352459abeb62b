//! Cross-origin exchange (refresh-token cookie), refresh from the cookie, and CORS.

use hyper::Method;
use serde_json::json;

use crate::auth_support::*;
use crate::support::*;

const APP_ORIGIN: &str = "https://app.example.com";

/// The `refresh_token` value and attributes of a `Set-Cookie` header.
fn set_cookie(a: &Answer) -> (String, String) {
    let v = a.headers.get("set-cookie").expect("Set-Cookie").to_str().unwrap().to_string();
    let (pair, attrs) = v.split_once(';').unwrap();
    let value = pair.strip_prefix("refresh_token=").expect("refresh_token cookie").to_string();
    (value, attrs.trim().to_string())
}

#[tokio::test]
async fn exchange_sets_an_http_only_cookie_for_a_new_session_and_refresh_reads_and_rotates_it() {
    let app = spawn_app_with_flags(&["--cors-origin", APP_ORIGIN]).await;
    let c = &app.client;
    let u = create_user(c).await;
    c.send(Method::POST, "/api/v1/auth/exchange", None, &[], None).await.expect(401);

    let origin = [("origin", APP_ORIGIN), ("user-agent", "consumer-site")];
    let ex = c.send(Method::POST, "/api/v1/auth/exchange", Some(&u.token), &origin, None).await.expect(204);
    assert!(ex.raw.is_empty());
    let (cookie, attrs) = set_cookie(&ex);
    assert_eq!(attrs, "HttpOnly; Secure; SameSite=Lax; Path=/api/v1/auth; Max-Age=2592000");
    assert_eq!(ex.headers["access-control-allow-origin"], APP_ORIGIN);
    assert_eq!(ex.headers["access-control-allow-credentials"], "true");
    // The cookie belongs to a new session, not the caller's.
    let claims = jwt_part(&cookie, 1);
    assert_eq!(claims["typ"], "refresh");
    assert_eq!(claims["sub"], u.id.as_str());
    assert_ne!(claims["sid"], jwt_part(&u.token, 1)["sid"]);
    let sessions = c.get("/api/v1/auth/sessions", Some(&u.token)).await.expect(200).body;
    let sessions = sessions.as_array().unwrap();
    assert_eq!(sessions.len(), 2);
    let new = sessions.iter().find(|s| s["id"] == claims["sid"]).expect("the new session is listed");
    assert_eq!(new["device"], "consumer-site");
    assert_eq!(new["current"], false);

    // Silent refresh: no body, the cookie only; the cookie rotates too.
    let jar = format!("theme=dark; refresh_token={cookie}");
    let r =
        c.send(Method::POST, "/api/v1/auth/refresh", None, &[("cookie", &jar), ("origin", APP_ORIGIN)], None).await.expect(200);
    assert_eq!(r.body["expiresIn"], 3600);
    let (rotated, attrs) = set_cookie(&r);
    assert_eq!(attrs, "HttpOnly; Secure; SameSite=Lax; Path=/api/v1/auth; Max-Age=2592000");
    assert_ne!(rotated, cookie);
    assert_eq!(r.body["refreshToken"], rotated.as_str());
    let access = r.body["accessToken"].as_str().unwrap();
    assert_eq!(jwt_part(access, 1)["sid"], claims["sid"]);
    c.get("/api/v1/auth/me", Some(access)).await.expect(200);
    // A body token wins over the cookie and sets no cookie.
    let body_first = c
        .send(
            Method::POST,
            "/api/v1/auth/refresh",
            None,
            &[("cookie", &format!("refresh_token={rotated}"))],
            Some(json!({"refreshToken": u.refresh}).to_string().into()),
        )
        .await
        .expect(200);
    assert!(body_first.headers.get("set-cookie").is_none());
    assert_ne!(jwt_part(body_first.body["accessToken"].as_str().unwrap(), 1)["sid"], claims["sid"]);
    // The old cookie was rotated away: presenting it again, past the grace of tabs refreshing
    // together, ends that session.
    app.clock.advance(std::time::Duration::from_secs(10));
    c.send(Method::POST, "/api/v1/auth/refresh", None, &[("cookie", &format!("refresh_token={cookie}"))], None).await.expect(401);
    c.send(Method::POST, "/api/v1/auth/refresh", None, &[("cookie", &format!("refresh_token={rotated}"))], None)
        .await
        .expect(401);
    // Neither body nor cookie.
    let none = c.send(Method::POST, "/api/v1/auth/refresh", None, &[], None).await.expect(400);
    assert_eq!(none.body["error"]["fields"][0]["field"], "refreshToken");

    // Logout with the cookie clears it.
    let fresh = c.send(Method::POST, "/api/v1/auth/exchange", Some(&u.token), &[], None).await.expect(204);
    let (c2, _) = set_cookie(&fresh);
    let out = c
        .send(Method::POST, "/api/v1/auth/logout", Some(&u.token), &[("cookie", &format!("refresh_token={c2}"))], None)
        .await
        .expect(204);
    let (cleared, attrs) = set_cookie(&out);
    assert_eq!(cleared, "");
    assert!(attrs.ends_with("Max-Age=0"), "{attrs}");
}

#[tokio::test]
async fn cors_answers_allowed_origins_only() {
    let app = spawn_app_with_flags(&["--cors-origin", APP_ORIGIN, "--cors-origin", "http://localhost:3000"]).await;
    let c = &app.client;
    let preflight = |origin: &'static str| {
        let c = c.clone();
        async move {
            c.send(
                Method::OPTIONS,
                "/api/v1/auth/refresh",
                None,
                &[
                    ("origin", origin),
                    ("access-control-request-method", "POST"),
                    ("access-control-request-headers", "content-type"),
                ],
                None,
            )
            .await
        }
    };
    let ok = preflight(APP_ORIGIN).await.expect(204);
    assert_eq!(ok.headers["access-control-allow-origin"], APP_ORIGIN);
    assert_eq!(ok.headers["access-control-allow-credentials"], "true");
    assert!(ok.headers["access-control-allow-methods"].to_str().unwrap().contains("POST"));
    assert!(ok.headers["access-control-allow-headers"].to_str().unwrap().contains("content-type"));
    let local = preflight("http://localhost:3000").await.expect(204);
    assert_eq!(local.headers["access-control-allow-origin"], "http://localhost:3000");

    let evil = preflight("https://evil.example").await;
    assert!(evil.headers.get("access-control-allow-origin").is_none());
    assert!(evil.headers.get("access-control-allow-credentials").is_none());

    // Simple requests: headers for allowed origins, none for others, none without Origin.
    let u = create_user(c).await;
    let allowed = c.send(Method::GET, "/api/v1/auth/me", Some(&u.token), &[("origin", APP_ORIGIN)], None).await.expect(200);
    assert_eq!(allowed.headers["access-control-allow-origin"], APP_ORIGIN);
    assert_eq!(allowed.headers["access-control-allow-credentials"], "true");
    assert_eq!(allowed.body["id"], u.id.as_str());
    let denied =
        c.send(Method::GET, "/api/v1/auth/me", Some(&u.token), &[("origin", "https://evil.example")], None).await.expect(200);
    assert!(denied.headers.get("access-control-allow-origin").is_none());
    assert!(denied.headers.get("access-control-allow-credentials").is_none());
    let plain = c.get("/api/v1/auth/me", Some(&u.token)).await.expect(200);
    assert!(plain.headers.get("access-control-allow-origin").is_none());
    // Errors carry the headers too, so the browser's script can read them.
    let err = c.send(Method::GET, "/api/v1/auth/me", None, &[("origin", APP_ORIGIN)], None).await.expect(401);
    assert_eq!(err.headers["access-control-allow-origin"], APP_ORIGIN);

    // Without configured origins nobody gets CORS headers.
    let closed = spawn_app().await;
    let p = closed
        .client
        .send(
            Method::OPTIONS,
            "/api/v1/auth/login",
            None,
            &[("origin", APP_ORIGIN), ("access-control-request-method", "POST")],
            None,
        )
        .await;
    assert!(p.headers.get("access-control-allow-origin").is_none());
}
