//! MFA with TOTP, with codes computed by the independent implementation in `auth_support`.

use std::collections::HashSet;

use serde_json::{Value, json};

use crate::auth_support::*;
use crate::support::*;

#[test]
fn the_test_totp_matches_rfc_6238() {
    // RFC 6238 Appendix B, SHA1 seed, 8 digits at T=59: 94287082 → the last 6 digits.
    assert_eq!(totp_at(b"12345678901234567890", 59), "287082");
    assert_eq!(totp_at(b"12345678901234567890", 1111111109), "081804");
    assert_eq!(totp_at(b"12345678901234567890", 2000000000), "279037");
    assert_eq!(base32_decode("GEZDGNBVGY3TQOJQ"), b"1234567890");
}

async fn login(c: &HttpClient, email: &str) -> Value {
    c.post("/api/v1/auth/login", None, json!({"email": email, "password": PASSWORD})).await.expect(200).body
}

async fn verify(c: &HttpClient, mfa_token: &str, code: &str) -> Answer {
    c.post("/api/v1/auth/mfa/verify", None, json!({"mfaToken": mfa_token, "code": code})).await
}

#[tokio::test]
async fn mfa_enrolment_login_codes_once_recovery_codes_once_and_disable() {
    // This test makes more wrong guesses than the default per-account allowance.
    let app = spawn_app_with_flags(&["--rate-per-account", "100"]).await;
    let c = &app.client;
    let u = create_user(c).await;
    let user_id = uuid::Uuid::parse_str(&u.id).unwrap();
    let account = account_of(&app);

    c.post("/api/v1/auth/mfa/setup", None, json!({})).await.expect(401);
    let setup = c.post("/api/v1/auth/mfa/setup", Some(&u.token), json!({})).await.expect(200).body;
    let secret = setup["secret"].as_str().expect("secret").to_string();
    let key = base32_decode(&secret);
    assert_eq!(key.len(), 20, "160-bit secret");
    let url = setup["otpauthUrl"].as_str().unwrap();
    assert!(url.starts_with("otpauth://totp/shopcell:"), "{url}");
    let q = query_of(url);
    assert_eq!(q["secret"], secret);
    assert_eq!(q["issuer"], "shopcell");
    assert!(url.contains(&u.email.replace('@', "%40")) || url.contains(&u.email), "{url}");
    // Not on until confirmed: login still answers tokens.
    assert!(!account.mfa_enabled(user_id).unwrap());
    assert!(login(c, &u.email).await["accessToken"].is_string());

    let now = unix_now();
    let wrong = if totp_at(&key, now) == "000000" { "111111" } else { "000000" };
    let bad = c.post("/api/v1/auth/mfa/enable", Some(&u.token), json!({"code": wrong})).await.expect(400);
    assert_eq!(bad.body["error"]["fields"][0]["field"], "code");
    assert!(!account.mfa_enabled(user_id).unwrap());

    let first = totp_at(&key, now);
    let enabled = c.post("/api/v1/auth/mfa/enable", Some(&u.token), json!({"code": first})).await.expect(200).body;
    assert_eq!(enabled["enabled"], true);
    let recovery: Vec<String> =
        enabled["recoveryCodes"].as_array().unwrap().iter().map(|c| c.as_str().unwrap().to_string()).collect();
    assert_eq!(recovery.len(), 10);
    assert_eq!(recovery.iter().collect::<HashSet<_>>().len(), 10);
    assert!(account.mfa_enabled(user_id).unwrap());
    let again = c.post("/api/v1/auth/mfa/setup", Some(&u.token), json!({})).await.expect(409);
    assert_eq!(again.code(), "CONFLICT");

    // Login now asks for the second factor and hands out no tokens.
    let challenge = login(c, &u.email).await;
    assert_eq!(challenge["requiresMfa"], true);
    assert!(challenge.get("accessToken").is_none() && challenge.get("refreshToken").is_none(), "{challenge}");
    let mfa_token = challenge["mfaToken"].as_str().unwrap().to_string();
    let claims = jwt_part(&mfa_token, 1);
    assert!(claims["exp"].as_i64().unwrap() - claims["iat"].as_i64().unwrap() <= 300);
    // An mfaToken is not an access token.
    c.get("/api/v1/auth/me", Some(&mfa_token)).await.expect(401);

    // The code used to enable was used: refused.
    let reused = verify(c, &mfa_token, &first).await.expect(401);
    assert_eq!(reused.code(), "INVALID_MFA_CODE");
    // The next step's code is within the ±1 skew window.
    let next = totp_at(&key, now + 30);
    let done = verify(c, &mfa_token, &next).await.expect(200).body;
    assert_eq!(done["user"]["id"], u.id.as_str());
    assert_eq!(done["expiresIn"], 3600);
    let access = done["accessToken"].as_str().unwrap();
    assert_eq!(c.get("/api/v1/auth/me", Some(access)).await.expect(200).body["email"], u.email.as_str());
    c.post("/api/v1/auth/refresh", None, json!({"refreshToken": done["refreshToken"]})).await.expect(200);
    // The mfaToken worked once.
    let spent = verify(c, &mfa_token, &totp_at(&key, now + 30)).await.expect(401);
    assert_eq!(spent.code(), "INVALID_TOKEN");
    assert_eq!(spent.body["message"], "the mfaToken was already used or has expired; sign in again");

    // Each code is accepted once, even with a fresh mfaToken.
    let t2 = login(c, &u.email).await["mfaToken"].as_str().unwrap().to_string();
    verify(c, &t2, &next).await.expect(401);
    // Codes two steps away are outside the window.
    verify(c, &t2, &totp_at(&key, now + 90)).await.expect(401);
    // A recovery code works, once (any case, dashes optional).
    let r0 = recovery[0].to_uppercase().replace('-', "");
    verify(c, &t2, &r0).await.expect(200);
    let t3 = login(c, &u.email).await["mfaToken"].as_str().unwrap().to_string();
    verify(c, &t3, &recovery[0]).await.expect(401);
    verify(c, &t3, &recovery[1]).await.expect(200);

    // Too many wrong codes end the challenge.
    let t4 = login(c, &u.email).await["mfaToken"].as_str().unwrap().to_string();
    for _ in 0..5 {
        verify(c, &t4, "not-a-recovery-code").await.expect(401);
    }
    let ended = verify(c, &t4, &recovery[2]).await.expect(401);
    assert_eq!(ended.code(), "INVALID_TOKEN");
    // A forged or foreign token is refused.
    verify(c, &u.token, &recovery[2]).await.expect(401);

    // Disable needs a valid code; then login answers tokens again.
    c.post("/api/v1/auth/mfa/disable", Some(&u.token), json!({"code": "bad-code"})).await.expect(400);
    assert!(account.mfa_enabled(user_id).unwrap());
    let off = c.post("/api/v1/auth/mfa/disable", Some(&u.token), json!({"code": recovery[3]})).await.expect(200).body;
    assert_eq!(off, json!({"enabled": false}));
    assert!(!account.mfa_enabled(user_id).unwrap());
    let plain = login(c, &u.email).await;
    assert!(plain["accessToken"].is_string() && plain.get("requiresMfa").is_none(), "{plain}");
}
