//! Passwords: a signed-in change, a forgotten password's mailed link, the reset it allows, and the
//! operator's offline reset.

use std::time::Duration;

use mail_parser::MessageParser;
use serde_json::{Value, json};

use crate::auth_support::*;
use crate::mail::mails;
use crate::support::*;

const NEW: &str = "a brand new passphrase";

/// The mail's recipient, subject and plain-text body.
pub fn read_mail(raw: &[u8]) -> (String, String, String) {
    let m = MessageParser::default().parse(raw).expect("a mail");
    let to = m.to().and_then(|a| a.first()).and_then(|a| a.address()).unwrap_or_default().to_string();
    (to, m.subject().unwrap_or_default().to_string(), m.body_text(0).unwrap_or_default().to_string())
}

/// The first `n` mails under `data` (recipient, subject, text), oldest first: by Message-ID, a v7
/// id from the server's clock.
pub async fn mails_in_order(data: &std::path::Path, n: usize) -> Vec<(String, String, String)> {
    let mut all: Vec<(String, (String, String, String))> = mails(data, n)
        .await
        .iter()
        .map(|raw| {
            let id = MessageParser::default().parse(raw).and_then(|m| m.message_id().map(str::to_string));
            (id.expect("a Message-ID"), read_mail(raw))
        })
        .collect();
    all.sort();
    all.into_iter().map(|(_, m)| m).collect()
}

/// The token of the link to `page` in a mail's text.
pub fn link_token(text: &str, page: &str) -> String {
    let at = text.find(&format!("{page}#token=")).unwrap_or_else(|| panic!("no {page} link in {text}"));
    let rest = &text[at + page.len() + "#token=".len()..];
    rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_').collect()
}

async fn login(c: &HttpClient, email: &str, password: &str) -> Answer {
    c.post("/api/v1/auth/login", None, json!({"email": email, "password": password})).await
}

async fn refresh(c: &HttpClient, token: &str) -> Answer {
    c.post("/api/v1/auth/refresh", None, json!({"refreshToken": token})).await
}

fn field(a: &Answer) -> &Value {
    &a.body["error"]["fields"][0]["field"]
}

/// Asks for a reset link for `email` and answers its token, from the `n`th mail written.
async fn reset_token(app: &TestApp, email: &str, n: usize) -> String {
    app.client.post("/api/v1/auth/password/forgot", None, json!({"email": email})).await.expect(202);
    let all = mails_in_order(app.dir.path(), n).await;
    let texts: Vec<_> = all.into_iter().filter(|(to, s, _)| to == email && s == "Reset your password").collect();
    let (_, _, newest) = texts.last().unwrap_or_else(|| panic!("a reset mail to {email}"));
    link_token(newest, "/admin/reset-password")
}

#[tokio::test]
async fn a_change_needs_the_current_password_and_ends_the_other_sessions() {
    let app = spawn_app().await;
    let c = &app.client;
    let u = create_user(c).await;
    let other = login(c, &u.email, PASSWORD).await.expect(200).body;

    let wrong = json!({"currentPassword": "not the password", "newPassword": NEW});
    let a = c.post("/api/v1/auth/password", Some(&u.token), wrong).await.expect(400);
    assert_eq!(field(&a), "currentPassword");
    let weak = json!({"currentPassword": PASSWORD, "newPassword": "short"});
    assert_eq!(field(&c.post("/api/v1/auth/password", Some(&u.token), weak).await.expect(400)), "newPassword");
    c.post("/api/v1/auth/password", None, json!({"currentPassword": PASSWORD, "newPassword": NEW})).await.expect(401);

    c.post("/api/v1/auth/password", Some(&u.token), json!({"currentPassword": PASSWORD, "newPassword": NEW})).await.expect(204);
    // The other session is over; the one that changed it goes on.
    refresh(c, other["refreshToken"].as_str().unwrap()).await.expect(401);
    c.get("/api/v1/auth/me", Some(other["accessToken"].as_str().unwrap())).await.expect(401);
    refresh(c, &u.refresh).await.expect(200);
    c.get("/api/v1/auth/me", Some(&u.token)).await.expect(200);
    login(c, &u.email, PASSWORD).await.expect(401);
    login(c, &u.email, NEW).await.expect(200);

    let (to, subject, text) = read_mail(&mails(app.dir.path(), 1).await[0]);
    assert_eq!((to.as_str(), subject.as_str()), (u.email.as_str(), "Your password was changed"));
    assert!(text.contains(&format!("{}/admin/forgot-password", app.base)), "{text}");
}

#[tokio::test]
async fn wrong_current_passwords_spend_the_sign_in_allowance() {
    let app = spawn_app_with_flags(&["--rate-per-account", "3", "--rate-per-address", "1000"]).await;
    let c = &app.client;
    let u = create_user(c).await;
    let wrong = json!({"currentPassword": "not the password", "newPassword": NEW});
    for _ in 0..2 {
        c.post("/api/v1/auth/password", Some(&u.token), wrong.clone()).await.expect(400);
    }
    login(c, &u.email, "not the password either").await.expect(401);
    // Two wrong current passwords and one wrong login: the account's allowance is spent.
    let limited = login(c, &u.email, PASSWORD).await.expect(429);
    assert!(limited.headers.contains_key("retry-after"));
    c.post("/api/v1/auth/password", Some(&u.token), json!({"currentPassword": PASSWORD, "newPassword": NEW})).await.expect(429);
}

#[tokio::test]
async fn forgot_answers_the_same_for_unknown_emails_and_mails_only_known_ones() {
    let app = spawn_app().await;
    let c = &app.client;
    let u = create_user(c).await;
    let unknown = c.post("/api/v1/auth/password/forgot", None, json!({"email": "nobody@example.com"})).await.expect(202);
    let known = c.post("/api/v1/auth/password/forgot", None, json!({"email": u.email.to_uppercase()})).await.expect(202);
    assert_eq!(unknown.body, known.body);
    let sent = mails(app.dir.path(), 1).await;
    // Give a second mail time to appear, were one written.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(mails(app.dir.path(), 1).await.len(), 1);
    let (to, subject, text) = read_mail(&sent[0]);
    assert_eq!((to.as_str(), subject.as_str()), (u.email.as_str(), "Reset your password"));
    assert!(text.contains(&format!("{}/admin/reset-password#token=", app.base)), "{text}");
    assert_eq!(link_token(&text, "/admin/reset-password").len(), 43);
}

#[tokio::test]
async fn a_reset_sets_the_password_ends_every_session_and_keeps_mfa() {
    let app = spawn_app().await;
    let c = &app.client;
    let u = create_user(c).await;
    // MFA on, to see it still asked after the reset.
    let setup = c.post("/api/v1/auth/mfa/setup", Some(&u.token), json!({})).await.expect(200).body;
    let key = base32_decode(setup["secret"].as_str().unwrap());
    c.post("/api/v1/auth/mfa/enable", Some(&u.token), json!({"code": totp_at(&key, unix_now())})).await.expect(200);

    let token = reset_token(&app, &u.email, 1).await;
    let weak = c.post("/api/v1/auth/password/reset", None, json!({"token": token, "password": "short"})).await.expect(400);
    assert_eq!(field(&weak), "password");
    c.post("/api/v1/auth/password/reset", None, json!({"token": token, "password": NEW})).await.expect(204);

    refresh(c, &u.refresh).await.expect(401);
    c.get("/api/v1/auth/me", Some(&u.token)).await.expect(401);
    login(c, &u.email, PASSWORD).await.expect(401);
    let again = login(c, &u.email, NEW).await.expect(200).body;
    assert_eq!(again["requiresMfa"], true, "{again}");

    // Spent: the same token again is refused, naming it.
    let reused = c.post("/api/v1/auth/password/reset", None, json!({"token": token, "password": NEW})).await.expect(400);
    assert_eq!(field(&reused), "token");
    // And the change is announced.
    let notices: Vec<_> = mails(app.dir.path(), 2)
        .await
        .iter()
        .map(|m| read_mail(m))
        .filter(|(_, s, _)| s == "Your password was changed")
        .collect();
    assert_eq!(notices.len(), 1);
    assert_eq!(notices[0].0, u.email);
}

#[tokio::test]
async fn expired_altered_unknown_and_voided_tokens_are_refused() {
    let app = spawn_app().await;
    let c = &app.client;
    let u = create_user(c).await;
    let reset = |token: String| async move {
        let a = c.post("/api/v1/auth/password/reset", None, json!({"token": token, "password": NEW})).await.expect(400);
        assert_eq!(field(&a), "token", "{}", a.body);
    };

    let first = reset_token(&app, &u.email, 1).await;
    let second = reset_token(&app, &u.email, 2).await;
    assert_ne!(first, second);
    // A newer link voids the older one.
    reset(first).await;
    // An altered one is unknown.
    let mut altered = second.clone().into_bytes();
    altered[0] = if altered[0] == b'A' { b'B' } else { b'A' };
    reset(String::from_utf8(altered).unwrap()).await;
    reset("not a token".into()).await;
    // An hour later the link is over.
    app.clock.advance(Duration::from_secs(3600));
    reset(second).await;
    login(c, &u.email, PASSWORD).await.expect(200);

    // A fresh one still works after that.
    let third = reset_token(&app, &u.email, 3).await;
    app.clock.advance(Duration::from_secs(3500));
    c.post("/api/v1/auth/password/reset", None, json!({"token": third, "password": NEW})).await.expect(204);
    login(c, &u.email, NEW).await.expect(200);
}

#[tokio::test]
async fn a_forgot_flood_is_limited_per_email_and_per_address() {
    let app = spawn_app_with_flags(&["--rate-per-account", "3", "--rate-per-address", "5"]).await;
    let c = &app.client;
    let u = create_user(c).await;
    for _ in 0..3 {
        c.post("/api/v1/auth/password/forgot", None, json!({"email": u.email})).await.expect(202);
    }
    let limited = c.post("/api/v1/auth/password/forgot", None, json!({"email": u.email})).await.expect(429);
    assert_eq!(limited.code(), "RATE_LIMITED");
    let retry: u64 = limited.headers["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=60).contains(&retry), "Retry-After {retry}");
    // Another email from the same address has the address's allowance left (5 calls), then not.
    c.post("/api/v1/auth/password/forgot", None, json!({"email": "other@example.com"})).await.expect(202);
    let by_address = c.post("/api/v1/auth/password/forgot", None, json!({"email": "third@example.com"})).await.expect(429);
    assert!(by_address.headers.contains_key("retry-after"));
}

#[tokio::test]
async fn the_operator_resets_a_password_offline() {
    let mut app = spawn_app().await;
    let c = app.client.clone();
    let u = create_user(&c).await;
    let data = app.dir.path().to_path_buf();
    app.stop().await;

    let done = shopcell::admin::reset_password_offline(&data, &u.email.to_uppercase(), None, Some("https://shop.example"))
        .await
        .expect("offline reset");
    assert_eq!(done.user_id.to_string(), u.id);
    assert_eq!(done.sessions_ended, 1);
    let url = done.reset_url.expect("a link");
    assert!(url.starts_with("https://shop.example/admin/reset-password#token="), "{url}");
    let token = link_token(&url, "/admin/reset-password");
    let unknown = shopcell::admin::reset_password_offline(&data, "nobody@example.com", None, None).await;
    assert!(unknown.is_err());

    let app = spawn_app_in(&data).await;
    let c = &app.client;
    refresh(c, &u.refresh).await.expect(401);
    c.post("/api/v1/auth/password/reset", None, json!({"token": token, "password": NEW})).await.expect(204);
    login(c, &u.email, NEW).await.expect(200);

    // With a password instead: set at once.
    let mut app = app;
    app.stop().await;
    let done = shopcell::admin::reset_password_offline(&data, &u.email, Some("an operator's choice".into()), None)
        .await
        .expect("offline reset");
    assert!(done.reset_url.is_none());
    let app = spawn_app_in(&data).await;
    login(&app.client, &u.email, NEW).await.expect(401);
    login(&app.client, &u.email, "an operator's choice").await.expect(200);
}

#[tokio::test]
async fn links_start_with_the_public_url() {
    let app = spawn_app_with_flags(&["--public-url", "https://shop.example/"]).await;
    let u = create_user(&app.client).await;
    app.client.post("/api/v1/auth/password/forgot", None, json!({"email": u.email})).await.expect(202);
    let (_, _, text) = read_mail(&mails(app.dir.path(), 1).await[0]);
    assert!(text.contains("https://shop.example/admin/reset-password#token="), "{text}");
}

/// Runs `shopcell admin reset-password ARGS` with `stdin`, answering its stdout.
fn admin_reset(args: &[&str], stdin: &str) -> String {
    use std::io::Write;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_shopcell"))
        .args(["admin", "reset-password"])
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .expect("start shopcell admin");
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "admin reset-password {args:?} failed");
    String::from_utf8(out.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_resets_a_password_through_the_running_service() {
    let r = Routed::start().await;
    let c = HttpClient::new(&r.router.url);
    let u = create_user(&c).await;
    let key = r.service_key.to_string_lossy().into_owned();
    let (url, email) = (r.account.url.clone(), u.email.clone());

    let printed = {
        let (url, email, key) = (url.clone(), email.clone(), key.clone());
        tokio::task::spawn_blocking(move || admin_reset(&["--url", &url, "--email", &email, "--service-key-file", &key], ""))
            .await
            .unwrap()
    };
    assert!(printed.contains(&format!("user {}: sessions ended: 1", u.id)), "{printed}");
    let token = link_token(&printed, "/admin/reset-password");
    refresh(&c, &u.refresh).await.expect(401);
    c.post("/api/v1/auth/password/reset", None, json!({"token": token, "password": NEW})).await.expect(204);
    login(&c, &u.email, NEW).await.expect(200);

    // With --password-stdin the password is set at once.
    let printed = tokio::task::spawn_blocking(move || {
        admin_reset(&["--url", &url, "--email", &email, "--service-key-file", &key, "--password-stdin"], "set by the operator\n")
    })
    .await
    .unwrap();
    assert!(printed.contains("password set"), "{printed}");
    login(&c, &u.email, NEW).await.expect(401);
    login(&c, &u.email, "set by the operator").await.expect(200);
}
