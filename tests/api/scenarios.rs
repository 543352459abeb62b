//! Validation and authorization as tables of scenarios: who calls what with which body, and the
//! status and error code that must come back — and that nothing was written.

use bytes::Bytes;
use hyper::Method;
use serde_json::json;

use crate::support::*;

enum Who {
    Anonymous,
    Owner,
    Stranger,
    Forged,
}

struct Case {
    name: &'static str,
    method: Method,
    path: &'static str,
    who: Who,
    body: Option<&'static str>,
    content_type: &'static str,
    status: u16,
    code: &'static str,
}

fn case(
    name: &'static str,
    method: Method,
    path: &'static str,
    who: Who,
    body: Option<&'static str>,
    status: u16,
    code: &'static str,
) -> Case {
    Case { name, method, path, who, body, content_type: "application/json", status, code }
}

#[tokio::test]
async fn bad_input_and_bad_callers_get_clear_errors_and_write_nothing() {
    let app = spawn_app().await;
    let c = &app.client;
    let owner = create_user(c).await;
    let stranger = create_user(c).await;
    let s = create_store(c, &owner).await;
    let p = create_product(c, &owner, &s, "Existing", 100).await;
    let pid = p["id"].as_str().unwrap().to_string();
    let forged = {
        // A token with the right shape signed by nobody we know.
        let mut parts: Vec<String> = owner.token.split('.').map(str::to_string).collect();
        parts[2] = "AAAA".repeat(86);
        parts.join(".")
    };
    use Method as M;
    use Who::*;
    let product = r#"{"title":"New","price":{"amount":100,"currency":"USD"}}"#;
    let cases = vec![
        case("malformed JSON", M::POST, "/products", Owner, Some("{\"title\": "), 400, "INVALID_JSON"),
        case(
            "wrong type",
            M::POST,
            "/products",
            Owner,
            Some(r#"{"title":"x","price":{"amount":"ten","currency":"USD"}}"#),
            400,
            "VALIDATION_FAILED",
        ),
        case(
            "float amount",
            M::POST,
            "/products",
            Owner,
            Some(r#"{"title":"x","price":{"amount":10.5,"currency":"USD"}}"#),
            400,
            "VALIDATION_FAILED",
        ),
        case(
            "negative price",
            M::POST,
            "/products",
            Owner,
            Some(r#"{"title":"x","price":{"amount":-1,"currency":"USD"}}"#),
            400,
            "VALIDATION_FAILED",
        ),
        case(
            "currency mismatch",
            M::POST,
            "/products",
            Owner,
            Some(r#"{"title":"x","price":{"amount":1,"currency":"EUR"}}"#),
            400,
            "VALIDATION_FAILED",
        ),
        case(
            "unknown currency",
            M::POST,
            "/products",
            Owner,
            Some(r#"{"title":"x","price":{"amount":1,"currency":"ZZZ"}}"#),
            400,
            "VALIDATION_FAILED",
        ),
        case(
            "unknown field",
            M::POST,
            "/products",
            Owner,
            Some(r#"{"title":"x","price":{"amount":1,"currency":"USD"},"colour":1}"#),
            400,
            "VALIDATION_FAILED",
        ),
        case(
            "empty title",
            M::POST,
            "/products",
            Owner,
            Some(r#"{"title":"","price":{"amount":1,"currency":"USD"}}"#),
            400,
            "VALIDATION_FAILED",
        ),
        case(
            "bad status",
            M::POST,
            "/products",
            Owner,
            Some(r#"{"title":"x","status":"LIVE","price":{"amount":1,"currency":"USD"}}"#),
            400,
            "VALIDATION_FAILED",
        ),
        case("no body", M::POST, "/products", Owner, None, 400, "INVALID_JSON"),
        case("limit 0", M::GET, "/products?limit=0", Owner, None, 400, "VALIDATION_FAILED"),
        case("limit 10000", M::GET, "/products?limit=10000", Owner, None, 400, "VALIDATION_FAILED"),
        case("page -1", M::GET, "/products?page=-1", Owner, None, 400, "VALIDATION_FAILED"),
        case("unknown sort", M::GET, "/products?sortBy=colour", Owner, None, 400, "VALIDATION_FAILED"),
        case("bad sort order", M::GET, "/products?sortOrder=sideways", Owner, None, 400, "VALIDATION_FAILED"),
        case("bad status filter", M::GET, "/products?status=sold", Owner, None, 400, "VALIDATION_FAILED"),
        case("non-UUID product", M::GET, "/products/abc", Owner, None, 400, "VALIDATION_FAILED"),
        case("missing product", M::GET, "/products/00000000-0000-7000-8000-000000000000", Owner, None, 404, "NOT_FOUND"),
        case("no token", M::GET, "/products", Anonymous, None, 401, "UNAUTHORIZED"),
        case("forged token", M::GET, "/products", Forged, None, 401, "INVALID_TOKEN"),
        case("stranger reads", M::GET, "/products", Stranger, None, 404, "NOT_FOUND"),
        case("stranger writes", M::POST, "/products", Stranger, Some(product), 404, "NOT_FOUND"),
        case("stranger reads store", M::GET, "", Stranger, None, 404, "NOT_FOUND"),
        case("method not allowed", M::PUT, "/products", Owner, Some(product), 405, "METHOD_NOT_ALLOWED"),
        Case {
            content_type: "text/plain",
            ..case("wrong content type", M::POST, "/products", Owner, Some(product), 415, "UNSUPPORTED_MEDIA_TYPE")
        },
        case("bad store patch", M::PATCH, "", Owner, Some(r#"{"weightUnit":"stone"}"#), 400, "VALIDATION_FAILED"),
    ];
    for k in cases {
        let token = match k.who {
            Anonymous => None,
            Owner => Some(owner.token.as_str()),
            Stranger => Some(stranger.token.as_str()),
            Forged => Some(forged.as_str()),
        };
        let path = format!("/api/v1/stores/{s}{}", k.path);
        let headers = [("content-type", k.content_type)];
        let a = c.send(k.method.clone(), &path, token, &headers, k.body.map(|b| Bytes::from(b.to_string()))).await;
        assert_eq!(a.status.as_u16(), k.status, "{}: {}", k.name, String::from_utf8_lossy(&a.raw));
        assert_eq!(a.code(), k.code, "{}", k.name);
        assert_eq!(a.body["success"], false, "{}: error envelope", k.name);
        assert!(a.body["error"]["message"].as_str().is_some_and(|m| !m.is_empty()), "{}: a message", k.name);
    }
    // Nothing was written by any of them.
    let list = c.get(&format!("/api/v1/stores/{s}/products"), Some(&owner.token)).await.expect(200).body;
    assert_eq!(list["total"], 1);
    assert_eq!(list["data"][0]["id"], pid.as_str());
    let store = c.get(&format!("/api/v1/stores/{s}"), Some(&owner.token)).await.expect(200).body;
    assert_eq!(store["weightUnit"], "kg");
}

#[tokio::test]
async fn validation_errors_name_the_field() {
    let app = spawn_app().await;
    let c = &app.client;
    let u = create_user(c).await;
    let s = create_store(c, &u).await;
    let a = c
        .post(
            &format!("/api/v1/stores/{s}/products"),
            Some(&u.token),
            json!({"title": "x", "price": {"amount": "1", "currency": "USD"}}),
        )
        .await
        .expect(400);
    assert_eq!(a.body["error"]["fields"][0]["field"], "price.amount");
    let a = c.get(&format!("/api/v1/stores/{s}/products?limit=251"), Some(&u.token)).await.expect(400);
    assert_eq!(a.body["error"]["fields"], json!([{"field": "limit", "message": "must be between 1 and 250"}]));
}

#[tokio::test]
async fn bodies_over_the_limit_are_refused() {
    let app = spawn_app().await;
    let c = &app.client;
    let u = create_user(c).await;
    let s = create_store(c, &u).await;
    let big = format!(r#"{{"title":"x","description":"{}","price":{{"amount":1,"currency":"USD"}}}}"#, "a".repeat(2 << 20));
    let a = c.send(Method::POST, &format!("/api/v1/stores/{s}/products"), Some(&u.token), &[], Some(Bytes::from(big))).await;
    assert_eq!((a.status.as_u16(), a.code()), (413, "PAYLOAD_TOO_LARGE"));
    assert_eq!(c.get(&format!("/api/v1/stores/{s}/products"), Some(&u.token)).await.body["total"], 0);
    // The server keeps serving.
    c.get("/healthz", None).await.expect(200);
}
