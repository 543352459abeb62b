//! `--signup closed`: strangers cannot register or sign in socially for the first time; the
//! operator creates accounts with `shopcell admin create-user` (online or offline), and
//! invitations keep working.

use serde_json::json;

use crate::auth_support::*;
use crate::support::*;

async fn login(c: &HttpClient, email: &str, password: &str) -> Answer {
    c.post("/api/v1/auth/login", None, json!({"email": email, "password": password})).await
}

/// The password line `admin create-user` prints when it generated one.
fn printed_password(stdout: &str) -> String {
    let line = stdout.lines().find_map(|l| l.strip_prefix("password (shown once): ")).unwrap_or_else(|| panic!("{stdout}"));
    line.trim().to_string()
}

// Several threads: the operator commands block this one while the server answers them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closed_sign_up_refuses_strangers_and_the_operator_creates_accounts() {
    let p = OidcProvider::start().await;
    let config = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(config.path(), p.config(None).to_string()).unwrap();
    let mut app = spawn_app_with_flags(&["--signup", "closed", "--oidc-config", &config.path().to_string_lossy()]).await;
    let c = app.client.clone();

    let refused = c
        .post("/api/v1/auth/register", None, json!({"email": "walk-in@example.com", "password": PASSWORD, "name": "Walk In"}))
        .await
        .expect(403);
    assert_eq!(refused.code(), "SIGNUP_CLOSED");
    assert_eq!(refused.body["success"], false);
    assert!(refused.body["error"]["message"].as_str().unwrap().contains("operator"), "{}", refused.body);
    assert!(account_of(&app).user_by_email("walk-in@example.com").unwrap().is_none(), "nothing was written");
    // A first social sign-in would create an account: refused too, and no link is made.
    p.set_user("stranger-sub", "stranger@example.com");
    let social = c
        .post("/api/v1/auth/native", None, json!({"provider": "google", "idToken": p.id_token(&p.client_id, None)}))
        .await
        .expect(403);
    assert_eq!(social.code(), "SIGNUP_CLOSED");
    assert!(account_of(&app).social_link("google", "stranger-sub").unwrap().is_none());
    assert!(account_of(&app).user_by_email("stranger@example.com").unwrap().is_none());

    // The operator creates an account through the running service: a generated password, once.
    let key = app.dir.path().join("account/service.key").to_string_lossy().into_owned();
    let online = ["admin", "create-user", "--url", &app.base, "--service-key-file", &key];
    let made = run_shopcell(&[&online[..], &["--email", "Owner@Example.com", "--name", "Shop Owner"]].concat(), None, &[]);
    assert_eq!(made.code, 0, "{}", made.stderr);
    assert!(made.stdout.contains("created: owner@example.com"), "{}", made.stdout);
    let password = printed_password(&made.stdout);
    assert!(password.len() >= 20);
    let owner = login(&c, "owner@example.com", &password).await.expect(200).body;
    assert_eq!(owner["user"]["name"], "Shop Owner");
    let token = owner["accessToken"].as_str().unwrap().to_string();

    // Closed sign-up keeps existing accounts: a first social sign-in with their verified email
    // links the provider account and signs in.
    p.set_user("owner-sub", "owner@example.com");
    let linked = c
        .post("/api/v1/auth/native", None, json!({"provider": "google", "idToken": p.id_token(&p.client_id, None)}))
        .await
        .expect(200)
        .body;
    assert_eq!(linked["user"]["id"], owner["user"]["id"]);
    assert!(account_of(&app).social_link("google", "owner-sub").unwrap().is_some());

    // The same email again is refused, naming why; the account keeps its password.
    let again = run_shopcell(&[&online[..], &["--email", "owner@example.com", "--name", "Other"]].concat(), None, &[]);
    assert_eq!(again.code, 1);
    assert!(again.stderr.contains("an account with this email already exists"), "{}", again.stderr);
    login(&c, "owner@example.com", &password).await.expect(200);

    // The owner's store invites a new email: accepting creates the account though sign-up is closed.
    let store = c
        .post("/api/v1/stores", Some(&token), json!({"name": "Closed Shop", "currency": "USD", "country": "US"}))
        .await
        .expect(201)
        .body["id"]
        .as_str()
        .unwrap()
        .to_string();
    c.post(&format!("/api/v1/stores/{store}/members"), Some(&token), json!({"email": "staff@example.com", "role": "staff"}))
        .await
        .expect(201);
    let sent = crate::mail::mails(app.dir.path(), 1).await;
    let (_, _, text) = crate::passwords::read_mail(&sent[0]);
    let invite = crate::passwords::link_token(&text, "/admin/accept-invite");
    let staff = c
        .post("/api/v1/auth/invites/accept", None, json!({"token": invite, "name": "Staff", "password": PASSWORD}))
        .await
        .expect(201)
        .body;
    assert_eq!(staff["user"]["email"], "staff@example.com");
    c.get(&format!("/api/v1/stores/{store}"), staff["accessToken"].as_str()).await.expect(200);

    // Offline, on the stopped directory: the password from stdin.
    app.stop().await;
    let data = app.dir.path().to_string_lossy().into_owned();
    let offline = ["admin", "create-user", "--data", &data, "--password-stdin"];
    let made = run_shopcell(
        &[&offline[..], &["--email", "clerk@example.com", "--name", "Clerk"]].concat(),
        Some("a clerk's long password\n"),
        &[],
    );
    assert_eq!(made.code, 0, "{}", made.stderr);
    assert!(!made.stdout.contains("shown once"), "no password is printed when one was given: {}", made.stdout);
    let taken = run_shopcell(
        &[&offline[..], &["--email", "staff@example.com", "--name", "X"]].concat(),
        Some("another password!\n"),
        &[],
    );
    assert_eq!(taken.code, 1);
    assert!(taken.stderr.contains("already exists"), "{}", taken.stderr);
    let weak = run_shopcell(&[&offline[..], &["--email", "weak@example.com", "--name", "W"]].concat(), Some("short\n"), &[]);
    assert_eq!(weak.code, 1);
    assert!(weak.stderr.contains("password: must be at least"), "{}", weak.stderr);

    let app = spawn_app_in(app.dir.path()).await;
    login(&app.client, "clerk@example.com", "a clerk's long password").await.expect(200);
    login(&app.client, "weak@example.com", "short").await.expect(401);
    // The same directory served with sign-up open (the default): registration works again.
    app.client
        .post("/api/v1/auth/register", None, json!({"email": "walk-in@example.com", "password": PASSWORD, "name": "Walk In"}))
        .await
        .expect(201);
}
