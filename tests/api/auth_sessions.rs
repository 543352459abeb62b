//! Sessions: listing with the current one marked, revoking one, all others, logout; a revoked
//! session's tokens stop working at once in `serve` and within 5 s in a separate cell process.

use std::time::{Duration, Instant};

use hyper::Method;
use serde_json::{Value, json};

use crate::auth_support::*;
use crate::support::*;

async fn login_as(c: &HttpClient, email: &str, agent: &str) -> Value {
    let body = json!({"email": email, "password": PASSWORD}).to_string();
    c.send(Method::POST, "/api/v1/auth/login", None, &[("user-agent", agent)], Some(body.into())).await.expect(200).body
}

fn token(v: &Value, field: &str) -> String {
    v[field].as_str().unwrap_or_else(|| panic!("{field} in {v}")).to_string()
}

#[tokio::test]
async fn sessions_are_listed_revoked_one_by_one_and_all_but_current() {
    let app = spawn_app().await;
    let c = &app.client;
    let u = create_user(c).await;
    let a = login_as(c, &u.email, "agent-A/1.0").await;
    let b = login_as(c, &u.email, "agent-B/2.0").await;
    let (a_token, b_token) = (token(&a, "accessToken"), token(&b, "accessToken"));

    let list = c.get("/api/v1/auth/sessions", Some(&a_token)).await.expect(200).body;
    let list = list.as_array().expect("a plain array");
    assert_eq!(list.len(), 3, "registration and two logins: {list:?}");
    let current: Vec<&Value> = list.iter().filter(|s| s["current"] == true).collect();
    assert_eq!(current.len(), 1);
    assert_eq!(current[0]["device"], "agent-A/1.0");
    let b_session = list.iter().find(|s| s["device"] == "agent-B/2.0").expect("B listed").clone();
    assert_eq!(b_session["current"], false);
    for s in list {
        for field in ["lastActive", "createdAt"] {
            let t = s[field].as_str().expect(field);
            assert!(time::OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339).is_ok(), "{t}");
        }
        assert!(s["id"].as_str().is_some_and(|id| uuid::Uuid::parse_str(id).is_ok()));
    }
    // The access token's sid is the listed session id.
    assert_eq!(jwt_part(&b_token, 1)["sid"], b_session["id"]);

    // A refresh moves lastActive forward.
    tokio::time::sleep(Duration::from_millis(20)).await;
    let b_pair = c.post("/api/v1/auth/refresh", None, json!({"refreshToken": b["refreshToken"]})).await.expect(200).body;
    let list = c.get("/api/v1/auth/sessions", Some(&a_token)).await.expect(200).body;
    let b_after = list.as_array().unwrap().iter().find(|s| s["id"] == b_session["id"]).unwrap().clone();
    assert!(b_after["lastActive"].as_str().unwrap() > b_session["lastActive"].as_str().unwrap(), "{b_after} vs {b_session}");
    assert_eq!(b_after["createdAt"], b_session["createdAt"]);

    // Another user cannot see or end these sessions.
    let other = create_user(c).await;
    let theirs = c.get("/api/v1/auth/sessions", Some(&other.token)).await.expect(200).body;
    assert_eq!(theirs.as_array().unwrap().len(), 1);
    let b_id = b_session["id"].as_str().unwrap();
    let refused = c.delete(&format!("/api/v1/auth/sessions/{b_id}"), Some(&other.token)).await.expect(404);
    assert_eq!(refused.code(), "NOT_FOUND");
    c.get("/api/v1/auth/me", Some(&b_token)).await.expect(200);
    c.delete("/api/v1/auth/sessions/00000000-0000-7000-8000-000000000000", Some(&a_token)).await.expect(404);
    c.delete("/api/v1/auth/sessions/not-a-uuid", Some(&a_token)).await.expect(400);
    c.get("/api/v1/auth/sessions", None).await.expect(401);

    // Revoking B: its access and refresh tokens stop working at once.
    let gone = c.delete(&format!("/api/v1/auth/sessions/{b_id}"), Some(&a_token)).await.expect(204);
    assert!(gone.raw.is_empty());
    let refused = c.get("/api/v1/auth/me", b_pair["accessToken"].as_str()).await.expect(401);
    assert_eq!(refused.code(), "INVALID_TOKEN");
    c.get("/api/v1/auth/me", Some(&b_token)).await.expect(401);
    let ended = c.post("/api/v1/auth/refresh", None, json!({"refreshToken": b_pair["refreshToken"]})).await.expect(401);
    assert_eq!(ended.body["message"], "the refresh token's session has ended; sign in again");
    c.delete(&format!("/api/v1/auth/sessions/{b_id}"), Some(&a_token)).await.expect(404);
    let list = c.get("/api/v1/auth/sessions", Some(&a_token)).await.expect(200).body;
    assert_eq!(list.as_array().unwrap().len(), 2);
    assert!(list.as_array().unwrap().iter().all(|s| s["id"] != b_session["id"]));

    // All but the current one.
    let d = login_as(c, &u.email, "agent-D").await;
    c.delete("/api/v1/auth/sessions", Some(&a_token)).await.expect(204);
    let list = c.get("/api/v1/auth/sessions", Some(&a_token)).await.expect(200).body;
    let list = list.as_array().unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0]["current"], true);
    assert_eq!(list[0]["device"], "agent-A/1.0");
    c.get("/api/v1/auth/me", Some(&token(&d, "accessToken"))).await.expect(401);
    c.get("/api/v1/auth/me", Some(&u.token)).await.expect(401);
    c.post("/api/v1/auth/refresh", None, json!({"refreshToken": d["refreshToken"]})).await.expect(401);
    // The other user's session was untouched.
    c.get("/api/v1/auth/me", Some(&other.token)).await.expect(200);

    // Logout ends the current session, and only it.
    let e = login_as(c, &u.email, "agent-E").await;
    c.send(Method::POST, "/api/v1/auth/logout", Some(&a_token), &[], None).await.expect(204);
    c.get("/api/v1/auth/me", Some(&a_token)).await.expect(401);
    c.post("/api/v1/auth/refresh", None, json!({"refreshToken": a["refreshToken"]})).await.expect(401);
    let left = c.get("/api/v1/auth/sessions", Some(&token(&e, "accessToken"))).await.expect(200).body;
    assert_eq!(left.as_array().unwrap().len(), 1);
    assert_eq!(left[0]["device"], "agent-E");

    // Stored state: exactly the live session remains.
    let user_id = uuid::Uuid::parse_str(&u.id).unwrap();
    let stored = account_of(&app).sessions_of(user_id).unwrap();
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].device, "agent-E");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_separate_cell_process_refuses_a_revoked_session_within_five_seconds() {
    let dir = tempfile::tempdir().unwrap();
    let (pa, p1, pr) = (free_port(), free_port(), free_port());
    let ua = format!("http://127.0.0.1:{pa}");
    let c1 = format!("c1=http://127.0.0.1:{p1}");
    let account_data = dir.path().join("account").to_string_lossy().into_owned();
    let cell_data = dir.path().join("cell").to_string_lossy().into_owned();
    let _account = start_proc(&["account", "--data", &account_data, "--cell", &c1], pa).await;
    let key = format!("{account_data}/account/service.key");
    let cell =
        start_proc(&["cell", "--name", "c1", "--data", &cell_data, "--account", &ua, "--service-key-file", &key], p1).await;
    let router = start_proc(
        &["router", "--account", &ua, "--cell", &c1, "--service-key-file", &key, "--cors-origin", "https://app.example.com"],
        pr,
    )
    .await;

    let c = HttpClient::new(&router.url);
    let u = create_user(&c).await;
    let store = create_store(&c, &u).await;
    let second = login_as(&c, &u.email, "second-device").await;
    let doomed = token(&second, "accessToken");
    let direct = HttpClient::new(&cell.url);
    let path = format!("/api/v1/stores/{store}/products");
    // The cell knows the session as live (and caches that).
    direct.get(&path, Some(&doomed)).await.expect(200);
    c.get(&path, Some(&doomed)).await.expect(200);

    let sid = jwt_part(&doomed, 1)["sid"].as_str().unwrap().to_string();
    c.delete(&format!("/api/v1/auth/sessions/{sid}"), Some(&u.token)).await.expect(204);
    let revoked_at = Instant::now();
    // The account service refuses at once.
    c.get("/api/v1/auth/me", Some(&doomed)).await.expect(401);
    loop {
        let a = direct.get(&path, Some(&doomed)).await;
        if a.status == 401 {
            assert_eq!(a.code(), "INVALID_TOKEN");
            break;
        }
        assert_eq!(a.status, 200, "{}", String::from_utf8_lossy(&a.raw));
        assert!(revoked_at.elapsed() < Duration::from_secs(5), "the cell still accepts a revoked session after 5 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(revoked_at.elapsed() < Duration::from_secs(5));
    // Through the router too, and the other session still works everywhere.
    c.get(&path, Some(&doomed)).await.expect(401);
    direct.get(&path, Some(&u.token)).await.expect(200);

    // The router answers CORS for its configured origin and passes the exchange cookie through.
    let origin = ("origin", "https://app.example.com");
    let pre = c
        .send(Method::OPTIONS, "/api/v1/auth/exchange", None, &[origin, ("access-control-request-method", "POST")], None)
        .await
        .expect(204);
    assert_eq!(pre.headers["access-control-allow-origin"], "https://app.example.com");
    let ex = c.send(Method::POST, "/api/v1/auth/exchange", Some(&u.token), &[origin], None).await.expect(204);
    assert_eq!(ex.headers["access-control-allow-credentials"], "true");
    let cookie = ex.headers["set-cookie"].to_str().unwrap().split(';').next().unwrap().to_string();
    assert!(cookie.starts_with("refresh_token=ey"), "{cookie}");
    let r = c.send(Method::POST, "/api/v1/auth/refresh", None, &[origin, ("cookie", &cookie)], None).await.expect(200);
    assert!(r.headers["set-cookie"].to_str().unwrap().starts_with("refresh_token=ey"));
    assert_eq!(r.headers["access-control-allow-origin"], "https://app.example.com");
    c.get("/api/v1/auth/me", r.body["accessToken"].as_str()).await.expect(200);
}
