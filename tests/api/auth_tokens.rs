//! Token hardening: only RS256 tokens signed by the account key, for this issuer and audience,
//! unexpired, are accepted; forged variants are 401.

use serde_json::{Value, json};

use crate::auth_support::*;
use crate::support::*;

#[tokio::test]
async fn issued_tokens_carry_the_claims_and_a_kid_from_the_jwks() {
    let app = spawn_app().await;
    let c = &app.client;
    let u = create_user(c).await;
    let jwks = c.get("/.well-known/jwks.json", None).await.expect(200).body;
    let kid = jwks["keys"][0]["kid"].as_str().expect("kid in JWKS");
    for token in [&u.token, &u.refresh] {
        let header = jwt_part(token, 0);
        assert_eq!(header["alg"], "RS256");
        assert_eq!(header["kid"], kid);
        let claims = jwt_part(token, 1);
        for claim in ["iss", "aud", "sub", "sid", "iat", "exp", "jti"] {
            assert!(!claims[claim].is_null(), "{claim} missing in {claims}");
        }
        assert_eq!(claims["iss"], "shopcell");
        assert_eq!(claims["aud"], "shopcell");
        assert_eq!(claims["sub"], u.id.as_str());
    }
    let access = jwt_part(&u.token, 1);
    assert_eq!(access["exp"].as_i64().unwrap() - access["iat"].as_i64().unwrap(), 3600);
    assert_ne!(access["jti"], jwt_part(&u.refresh, 1)["jti"]);
}

#[tokio::test]
async fn forged_tokens_are_refused() {
    let app = spawn_app().await;
    let c = &app.client;
    let u = create_user(c).await;
    let jwks = c.get("/.well-known/jwks.json", None).await.expect(200).body;
    let kid = jwks["keys"][0]["kid"].as_str().unwrap().to_string();
    let genuine = jwt_part(&u.token, 1);
    let real_key = RsaKey::from_pem_file(&app.dir.path().join("account").join("jwt-rs256.pem"), &kid);
    let now = unix_now() as i64;
    let with = |changes: Value| {
        let mut claims = genuine.clone();
        for (k, v) in changes.as_object().unwrap() {
            claims[k] = v.clone();
        }
        claims
    };

    // Control: a token built here with the real key and genuine claims is accepted, also one
    // dated a little ahead (another process's clock) and one valid from now.
    let control = real_key.sign(&with(json!({"jti": uuid::Uuid::now_v7().to_string()})));
    c.get("/api/v1/auth/me", Some(&control)).await.expect(200);
    let skewed = real_key.sign(&with(json!({"jti": uuid::Uuid::now_v7().to_string(), "iat": now + 30, "nbf": now})));
    c.get("/api/v1/auth/me", Some(&skewed)).await.expect(200);

    let public_jwk = serde_json::to_vec(&jwks["keys"][0]).unwrap();
    let modulus =
        base64::Engine::decode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, jwks["keys"][0]["n"].as_str().unwrap())
            .unwrap();
    let other_key = RsaKey::generate(&kid);
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "HS256 keyed with the public JWK",
            forge(&json!({"alg": "HS256", "typ": "JWT", "kid": kid}), &genuine, Some(&public_jwk)),
            "INVALID_TOKEN",
        ),
        (
            "HS256 keyed with the modulus",
            forge(&json!({"alg": "HS256", "typ": "JWT", "kid": kid}), &genuine, Some(&modulus)),
            "INVALID_TOKEN",
        ),
        ("alg none", forge(&json!({"alg": "none", "typ": "JWT", "kid": kid}), &genuine, None), "INVALID_TOKEN"),
        ("alg none without kid", forge(&json!({"alg": "none"}), &genuine, None), "INVALID_TOKEN"),
        ("another RSA key under the same kid", other_key.sign(&genuine), "INVALID_TOKEN"),
        ("wrong audience", real_key.sign(&with(json!({"aud": "another-service"}))), "INVALID_TOKEN"),
        ("other issuer", real_key.sign(&with(json!({"iss": "https://evil.example"}))), "INVALID_TOKEN"),
        ("expired", real_key.sign(&with(json!({"iat": now - 7200, "exp": now - 3600}))), "TOKEN_EXPIRED"),
        // Dated ahead of the clock beyond the skew allowed (60 s): not issued by it.
        ("issued in the future", real_key.sign(&with(json!({"iat": now + 3600, "exp": now + 7200}))), "INVALID_TOKEN"),
        ("not valid yet", real_key.sign(&with(json!({"nbf": now + 3600}))), "INVALID_TOKEN"),
        ("a refresh token as access", u.refresh.clone(), "INVALID_TOKEN"),
        ("an mfa-type token as access", real_key.sign(&with(json!({"typ": "mfa"}))), "INVALID_TOKEN"),
        ("signature stripped", u.token.rsplit_once('.').map(|(head, _)| format!("{head}.")).unwrap(), "INVALID_TOKEN"),
        ("garbage", "not.a.token".to_string(), "INVALID_TOKEN"),
    ];
    for (name, token, code) in cases {
        let a = c.get("/api/v1/auth/me", Some(&token)).await;
        assert_eq!(a.status, 401, "{name}: {}", String::from_utf8_lossy(&a.raw));
        assert_eq!(a.code(), code, "{name}");
        // Store routes verify the same way.
        let s = c.get("/api/v1/stores", Some(&token)).await;
        assert_eq!(s.status, 401, "{name} on /stores");
    }
    // Refresh tokens are checked the same way.
    let forged_refresh = forge(&json!({"alg": "HS256", "kid": kid}), &jwt_part(&u.refresh, 1), Some(&public_jwk));
    c.post("/api/v1/auth/refresh", None, json!({"refreshToken": forged_refresh})).await.expect(401);
    let expired_refresh = real_key.sign(&{
        let mut r = jwt_part(&u.refresh, 1);
        r["exp"] = json!(now - 1);
        r
    });
    let a = c.post("/api/v1/auth/refresh", None, json!({"refreshToken": expired_refresh})).await.expect(401);
    assert_eq!(a.code(), "TOKEN_EXPIRED");
    // The genuine tokens still work: none of the above touched the session.
    c.get("/api/v1/auth/me", Some(&u.token)).await.expect(200);
}

#[tokio::test]
async fn identity_routes_that_need_a_session_answer_401_without_one() {
    let app = spawn_app().await;
    let c = &app.client;
    let u = create_user(c).await;
    let (garbage, expired) = ("not.a.token", {
        let mut claims = jwt_part(&u.token, 1);
        claims["exp"] = json!(unix_now() as i64 - 10);
        let kid = jwt_part(&u.token, 0)["kid"].as_str().unwrap().to_string();
        RsaKey::from_pem_file(&app.dir.path().join("account").join("jwt-rs256.pem"), &kid).sign(&claims)
    });
    let routes: [(hyper::Method, &str); 9] = [
        (hyper::Method::GET, "/api/v1/auth/me"),
        (hyper::Method::GET, "/api/v1/auth/sessions"),
        (hyper::Method::DELETE, "/api/v1/auth/sessions"),
        (hyper::Method::DELETE, "/api/v1/auth/sessions/00000000-0000-7000-8000-000000000000"),
        (hyper::Method::POST, "/api/v1/auth/logout"),
        (hyper::Method::POST, "/api/v1/auth/exchange"),
        (hyper::Method::POST, "/api/v1/auth/mfa/setup"),
        (hyper::Method::POST, "/api/v1/auth/mfa/enable"),
        (hyper::Method::POST, "/api/v1/auth/mfa/disable"),
    ];
    for (method, path) in routes {
        for (who, token, code) in [
            ("nobody", None, "UNAUTHORIZED"),
            ("garbage", Some(garbage), "INVALID_TOKEN"),
            ("expired", Some(expired.as_str()), "TOKEN_EXPIRED"),
        ] {
            let a = c.send(method.clone(), path, token, &[], None).await;
            assert_eq!(a.status, 401, "{method} {path} as {who}");
            assert_eq!(a.code(), code, "{method} {path} as {who}");
        }
    }
    // None of that ended the real session.
    let list = c.get("/api/v1/auth/sessions", Some(&u.token)).await.expect(200).body;
    assert_eq!(list.as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn access_tokens_expire_by_the_server_clock() {
    let app = spawn_app().await;
    let c = &app.client;
    let u = create_user(c).await;
    let s = create_store(c, &u).await;
    let store = format!("/api/v1/stores/{s}");
    // What a token past its `exp` is answered, for comparison.
    let expired = {
        let mut claims = jwt_part(&u.token, 1);
        claims["exp"] = json!(unix_now() as i64 - 10);
        let kid = jwt_part(&u.token, 0)["kid"].as_str().unwrap().to_string();
        RsaKey::from_pem_file(&app.dir.path().join("account").join("jwt-rs256.pem"), &kid).sign(&claims)
    };
    let reference = c.get("/api/v1/auth/me", Some(&expired)).await.expect(401);
    assert_eq!(reference.code(), "TOKEN_EXPIRED");

    // Used (and so verified and remembered) while fresh…
    c.get("/api/v1/auth/me", Some(&u.token)).await.expect(200);
    c.get(&store, Some(&u.token)).await.expect(200);
    let lifetime = jwt_part(&u.token, 1)["exp"].as_i64().unwrap() - jwt_part(&u.token, 1)["iat"].as_i64().unwrap();
    app.clock.advance(std::time::Duration::from_secs(lifetime as u64 - 60));
    c.get("/api/v1/auth/me", Some(&u.token)).await.expect(200);

    // …and refused once the server's clock passes its lifetime, exactly like any expired token.
    app.clock.advance(std::time::Duration::from_secs(61));
    for path in ["/api/v1/auth/me", store.as_str()] {
        let a = c.get(path, Some(&u.token)).await.expect(401);
        assert_eq!((a.headers.get("content-type"), &a.raw), (reference.headers.get("content-type"), &reference.raw), "{path}");
    }

    // The refresh token lives on (30 days): it gets a fresh access token, dated by the same clock.
    let renewed = c.post("/api/v1/auth/refresh", None, json!({"refreshToken": u.refresh})).await.expect(200).body;
    let access = renewed["accessToken"].as_str().unwrap();
    assert!(jwt_part(access, 1)["iat"].as_i64().unwrap() >= unix_now() as i64 + lifetime);
    c.get(&store, Some(access)).await.expect(200);
}
