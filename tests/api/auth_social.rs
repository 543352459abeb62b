//! Social sign-in against a real OpenID Connect provider on loopback: the redirect flow with
//! state, PKCE and nonce; the one-time code exchange; native ID tokens; the bad cases.

use serde_json::json;

use crate::auth_support::*;
use crate::support::*;

async fn app_with_provider(p: &OidcProvider, client_url: Option<&str>) -> TestApp {
    app_with_config(p.config(client_url)).await
}

async fn app_with_config(config: serde_json::Value) -> TestApp {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), config.to_string()).unwrap();
    let path = file.path().to_string_lossy().into_owned();
    let app = spawn_app_with_flags(&["--oidc-config", &path]).await;
    drop(file);
    app
}

/// Runs connect → the provider's consent → answers the callback's Answer (the app's own reply).
async fn sign_in(app: &TestApp, provider: &str) -> (Answer, std::collections::HashMap<String, String>) {
    let c = &app.client;
    let connect = c.get(&format!("/api/v1/auth/social-accounts/connect/{provider}"), None).await.expect(302);
    let authorize = connect.headers["location"].to_str().unwrap().to_string();
    let q = query_of(&authorize);
    // The provider's consent page redirects back with code and state.
    let consent = HttpClient::new("").get(&authorize, None).await.expect(302);
    let back = consent.headers["location"].to_str().unwrap().to_string();
    assert!(back.starts_with(&app.base), "{back}");
    (c.get(&path_and_query(&back), None).await, q)
}

#[tokio::test]
async fn connect_callback_links_or_creates_the_user_and_answers_tokens() {
    let p = OidcProvider::start().await;
    let app = app_with_provider(&p, None).await;
    let c = &app.client;

    // The authorize URL carries state, nonce and an S256 PKCE challenge, never the verifier.
    let connect = c.get("/api/v1/auth/social-accounts/connect/google", None).await.expect(302);
    let authorize = connect.headers["location"].to_str().unwrap().to_string();
    assert!(authorize.starts_with(&format!("{}/authorize?", p.base)), "{authorize}");
    let q = query_of(&authorize);
    assert_eq!(q["client_id"], p.client_id);
    assert_eq!(q["response_type"], "code");
    assert_eq!(q["code_challenge_method"], "S256");
    assert_eq!(q["code_challenge"].len(), 43);
    assert!(q["state"].len() >= 43 && q["nonce"].len() >= 43);
    assert_eq!(q["redirect_uri"], format!("{}/api/v1/auth/social-accounts/callback/google", app.base));
    assert!(q["scope"].split(' ').any(|s| s == "openid"));
    assert!(!authorize.contains("code_verifier"));

    p.set_user("google-sub-1", "Social@Example.com");
    let (done, _) = sign_in(&app, "google").await;
    let body = done.expect(200).body;
    assert_eq!(body["user"]["email"], "social@example.com");
    assert_eq!(body["user"]["name"], "Social User");
    assert_eq!(body["expiresIn"], 3600);
    let access = body["accessToken"].as_str().unwrap();
    let me = c.get("/api/v1/auth/me", Some(access)).await.expect(200).body;
    assert_eq!(me["email"], "social@example.com");
    let linked = account_of(&app).social_link("google", "google-sub-1").unwrap().expect("linked");
    assert_eq!(linked.to_string(), body["user"]["id"].as_str().unwrap());
    // No password was set: password login stays closed for this user.
    c.post("/api/v1/auth/login", None, json!({"email": "social@example.com", "password": ""})).await.expect(401);
    let equalizer = json!({"email": "social@example.com", "password": "shopcell-timing-equalizer"});
    c.post("/api/v1/auth/login", None, equalizer).await.expect(401);

    // Signing in again reuses the link; a callback's state works once.
    let (again, _) = sign_in(&app, "google").await;
    assert_eq!(again.expect(200).body["user"]["id"], body["user"]["id"]);
    let connect = c.get("/api/v1/auth/social-accounts/connect/google", None).await.expect(302);
    let consent = HttpClient::new("").get(connect.headers["location"].to_str().unwrap(), None).await.expect(302);
    let back = path_and_query(consent.headers["location"].to_str().unwrap());
    c.get(&back, None).await.expect(200);
    let replay = c.get(&back, None).await.expect(400);
    assert_eq!(replay.body["error"]["fields"][0]["field"], "state");
    // A state issued for one provider does not finish another's flow.
    let connect = c.get("/api/v1/auth/social-accounts/connect/google", None).await.expect(302);
    let consent = HttpClient::new("").get(connect.headers["location"].to_str().unwrap(), None).await.expect(302);
    let back = path_and_query(consent.headers["location"].to_str().unwrap()).replace("/callback/google", "/callback/apple");
    c.get(&back, None).await.expect(400);

    // An existing password account with the same verified email is linked, not duplicated.
    let u = create_user(c).await;
    p.set_user("google-sub-2", &u.email);
    let (linked_existing, _) = sign_in(&app, "google").await;
    assert_eq!(linked_existing.expect(200).body["user"]["id"], u.id.as_str());
    assert_eq!(account_of(&app).social_link("google", "google-sub-2").unwrap().unwrap().to_string(), u.id);

    // Unknown providers are 404; a callback without code or state is 400; a provider error is 401.
    c.get("/api/v1/auth/social-accounts/connect/myspace", None).await.expect(404);
    c.get("/api/v1/auth/social-accounts/callback/google?state=x", None).await.expect(400);
    c.get("/api/v1/auth/social-accounts/callback/google?error=access_denied&state=x", None).await.expect(401);
}

#[tokio::test]
async fn id_tokens_with_a_wrong_nonce_audience_expiry_or_signature_are_refused() {
    let p = OidcProvider::start().await;
    let app = app_with_provider(&p, None).await;
    for tweak in [Tweak::WrongNonce, Tweak::WrongAudience, Tweak::Expired, Tweak::BadSignature] {
        p.set_user(&format!("sub-{tweak:?}"), &format!("{tweak:?}@example.com").to_lowercase());
        p.set_tweak(tweak);
        let calls = p.token_calls();
        let (a, _) = sign_in(&app, "google").await;
        assert_eq!(a.status, 401, "{tweak:?}: {}", String::from_utf8_lossy(&a.raw));
        assert_eq!(a.code(), "INVALID_TOKEN", "{tweak:?}");
        assert_eq!(p.token_calls(), calls + 1, "the code was redeemed at the token endpoint");
        assert!(account_of(&app).social_link("google", &format!("sub-{tweak:?}")).unwrap().is_none(), "{tweak:?} linked nothing");
    }
    p.set_tweak(Tweak::None);
    p.set_user("sub-fine", "fine@example.com");
    sign_in(&app, "google").await.0.expect(200);
}

#[tokio::test]
async fn a_configured_client_url_gets_a_one_time_code_to_exchange() {
    let p = OidcProvider::start().await;
    let app = app_with_provider(&p, Some("https://app.example.com/signed-in?from=shopcell")).await;
    let c = &app.client;
    p.set_user("apple-sub-1", "apple-user@example.com");
    let (callback, _) = sign_in(&app, "apple").await;
    let to = callback.expect(302).headers["location"].to_str().unwrap().to_string();
    assert!(to.starts_with("https://app.example.com/signed-in?from=shopcell&code="), "{to}");
    let code = query_of(&to)["code"].clone();
    assert!(!code.contains('.'), "an opaque code, not a token");

    let done = c.post("/api/v1/auth/social-accounts/exchange", None, json!({"code": code})).await.expect(200).body;
    assert_eq!(done["user"]["email"], "apple-user@example.com");
    c.get("/api/v1/auth/me", Some(done["accessToken"].as_str().unwrap())).await.expect(200);
    let again = c.post("/api/v1/auth/social-accounts/exchange", None, json!({"code": code})).await.expect(401);
    assert_eq!(again.code(), "INVALID_TOKEN");
    c.post("/api/v1/auth/social-accounts/exchange", None, json!({"code": "made-up"})).await.expect(401);
    assert!(account_of(&app).social_link("apple", "apple-sub-1").unwrap().is_some());
}

#[tokio::test]
async fn native_id_tokens_sign_in_when_valid() {
    let p = OidcProvider::start().await;
    let app = app_with_provider(&p, None).await;
    let c = &app.client;
    p.set_user("native-sub", "native@example.com");
    // The web client id and the configured native client ids are accepted audiences.
    for aud in [p.client_id.as_str(), "com.example.ios"] {
        let token = p.id_token(aud, None);
        let done = c.post("/api/v1/auth/native", None, json!({"provider": "google", "idToken": token})).await.expect(200).body;
        assert_eq!(done["user"]["email"], "native@example.com");
        assert!(done["refreshToken"].is_string());
    }
    let user = account_of(&app).social_link("google", "native-sub").unwrap().expect("linked");
    // The same subject under another provider is another account link.
    assert!(account_of(&app).social_link("apple", "native-sub").unwrap().is_none());
    let apple = c
        .post("/api/v1/auth/native", None, json!({"provider": "apple", "idToken": p.id_token(&p.client_id, None)}))
        .await
        .expect(200)
        .body;
    assert_eq!(apple["user"]["id"], user.to_string().as_str(), "linked by the same verified email");

    let bad = |tweak| {
        p.set_tweak(tweak);
        p.id_token(&p.client_id, None)
    };
    for (name, token) in [
        ("another audience", bad(Tweak::WrongAudience)),
        ("expired", bad(Tweak::Expired)),
        ("bad signature", bad(Tweak::BadSignature)),
        ("not a JWT", "garbage".to_string()),
    ] {
        let a = c.post("/api/v1/auth/native", None, json!({"provider": "google", "idToken": token})).await;
        assert_eq!(a.status, 401, "{name}: {}", String::from_utf8_lossy(&a.raw));
        assert_eq!(a.code(), "INVALID_TOKEN", "{name}");
    }
    p.set_tweak(Tweak::None);
    let unknown = c.post("/api/v1/auth/native", None, json!({"provider": "myspace", "idToken": "x"})).await.expect(400);
    assert_eq!(unknown.body["error"]["fields"][0]["field"], "provider", "{}", unknown.body);
    assert!(unknown.body["message"].as_str().unwrap().contains("google"), "{}", unknown.body);
}

#[tokio::test]
async fn social_sign_in_honours_mfa() {
    let p = OidcProvider::start().await;
    let app = app_with_provider(&p, None).await;
    let c = &app.client;
    let u = create_user(c).await;
    let setup = c.post("/api/v1/auth/mfa/setup", Some(&u.token), json!({})).await.expect(200).body;
    let key = base32_decode(setup["secret"].as_str().unwrap());
    let now = unix_now();
    c.post("/api/v1/auth/mfa/enable", Some(&u.token), json!({"code": totp_at(&key, now)})).await.expect(200);
    p.set_user("mfa-sub", &u.email);
    let a = c.post("/api/v1/auth/native", None, json!({"provider": "google", "idToken": p.id_token(&p.client_id, None)})).await;
    let body = a.expect(200).body;
    assert_eq!(body["requiresMfa"], true);
    assert!(body.get("accessToken").is_none());
    let done = c
        .post("/api/v1/auth/mfa/verify", None, json!({"mfaToken": body["mfaToken"], "code": totp_at(&key, now + 30)}))
        .await
        .expect(200)
        .body;
    assert_eq!(done["user"]["id"], u.id.as_str());
}

#[tokio::test]
async fn unconfigured_providers_answer_503() {
    // Without a client id (no config, no environment) the real providers are not usable.
    let app = spawn_app().await;
    if std::env::var("SHOPCELL_GOOGLE_CLIENT_ID").is_err() {
        let a = app.client.get("/api/v1/auth/social-accounts/connect/google", None).await.expect(503);
        assert_eq!(a.code(), "UNAVAILABLE");
    }
}

#[tokio::test]
async fn apple_form_post_callback_with_a_signed_client_secret() {
    use aws_lc_rs::signature::{
        ECDSA_P256_SHA256_FIXED, ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair, UnparsedPublicKey,
    };
    use base64::Engine;
    use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};

    let p = OidcProvider::start().await;
    let team_key = EcdsaKeyPair::generate(&ECDSA_P256_SHA256_FIXED_SIGNING).unwrap();
    let pkcs8 = team_key.to_pkcs8v1().unwrap();
    let key_file = tempfile::NamedTempFile::new().unwrap();
    let pem = format!("-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n", STANDARD.encode(pkcs8.as_ref()));
    std::fs::write(key_file.path(), pem).unwrap();
    let mut config = p.config(None);
    config["providers"]["apple"]["responseMode"] = json!("form_post");
    config["providers"]["apple"]["teamId"] = json!("TEAM123456");
    config["providers"]["apple"]["keyId"] = json!("KEY1234567");
    config["providers"]["apple"]["privateKeyFile"] = json!(key_file.path());
    let app = app_with_config(config).await;
    let c = &app.client;

    p.set_user("apple-form-sub", "form@example.com");
    let connect = c.get("/api/v1/auth/social-accounts/connect/apple", None).await.expect(302);
    let authorize = connect.headers["location"].to_str().unwrap().to_string();
    assert_eq!(query_of(&authorize)["response_mode"], "form_post");
    let consent = HttpClient::new("").get(&authorize, None).await.expect(302);
    let back = query_of(consent.headers["location"].to_str().unwrap());
    // The provider posts code and state as a form, as Apple does.
    let form = form_urlencoded::Serializer::new(String::new())
        .append_pair("code", &back["code"])
        .append_pair("state", &back["state"])
        .finish();
    let done = c
        .send(
            hyper::Method::POST,
            "/api/v1/auth/social-accounts/callback/apple",
            None,
            &[("content-type", "application/x-www-form-urlencoded")],
            Some(form.into()),
        )
        .await
        .expect(200)
        .body;
    assert_eq!(done["user"]["email"], "form@example.com");
    assert!(account_of(&app).social_link("apple", "apple-form-sub").unwrap().is_some());

    // The client secret was an ES256 JWT signed with the team key, checked here independently.
    let secret = p.last_client_secret().expect("a client secret");
    let header = jwt_part(&secret, 0);
    assert_eq!(header["alg"], "ES256");
    assert_eq!(header["kid"], "KEY1234567");
    let claims = jwt_part(&secret, 1);
    assert_eq!(claims["iss"], "TEAM123456");
    assert_eq!(claims["sub"], p.client_id.as_str());
    assert_eq!(claims["aud"], p.base.as_str());
    assert!(claims["exp"].as_i64().unwrap() > claims["iat"].as_i64().unwrap());
    let (input, sig) = secret.rsplit_once('.').unwrap();
    let public = UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, team_key.public_key().as_ref().to_vec());
    public.verify(input.as_bytes(), &URL_SAFE_NO_PAD.decode(sig).unwrap()).expect("signed by the team key");
}

#[tokio::test]
async fn a_bad_oidc_config_file_stops_start_up() {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), r#"{"providers": {"myspace": {"clientId": "x"}}}"#).unwrap();
    let err = shopcell::account::oidc::Social::load(Some(file.path())).err().expect("refused");
    assert!(err.contains("myspace"), "{err}");
    std::fs::write(file.path(), r#"{"providers": {"apple": {"teamId": "T"}}}"#).unwrap();
    let err = shopcell::account::oidc::Social::load(Some(file.path())).err().expect("refused");
    assert!(err.contains("teamId, keyId and privateKeyFile"), "{err}");
}
