use serde_json::Value;

use crate::support::*;

#[tokio::test]
async fn health_openapi_and_jwks() {
    let app = spawn_app().await;
    let c = &app.client;
    assert_eq!(c.get("/healthz", None).await.expect(200).body["status"], "ok");
    assert_eq!(c.get("/readyz", None).await.expect(200).body["status"], "ready");
    let jwks = c.get("/.well-known/jwks.json", None).await.expect(200).body;
    assert_eq!(jwks["keys"][0]["alg"], "RS256");
    assert!(jwks["keys"][0]["kid"].as_str().is_some_and(|k| !k.is_empty()));

    let doc = c.get("/api/v1/openapi.json", None).await.expect(200).body;
    let node = &app.server.as_ref().unwrap().node;
    // Every public route of the table is in the document, with its method.
    for r in node.routes.routes().iter().filter(|r| !r.path.starts_with("/internal")) {
        let op = &doc["paths"][&r.path][r.method.as_str().to_lowercase()];
        assert!(op.is_object(), "{} {} missing from openapi.json", r.method, r.path);
    }
    let create = &doc["paths"]["/api/v1/stores/{storeId}/products"]["post"];
    assert_eq!(create["requestBody"]["content"]["application/json"]["schema"]["$ref"], "#/components/schemas/CreateProduct");
    assert!(doc["components"]["schemas"]["CreateProduct"]["properties"]["title"].is_object());
    let list_params: Vec<&str> = doc["paths"]["/api/v1/stores/{storeId}/products"]["get"]["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    assert_eq!(list_params, ["storeId", "page", "limit", "status", "sortBy", "sortOrder"]);
    assert!(doc["paths"].as_object().unwrap().keys().all(|p| !p.starts_with("/internal")));
}

#[tokio::test]
async fn unknown_paths_and_internal_routes_are_plain_404s() {
    let app = spawn_app().await;
    let c = &app.client;
    let a = c.get("/api/v1/nope", None).await.expect(404);
    assert_eq!(a.code(), "NOT_FOUND");
    // Internal routes without the service key look exactly like unknown paths.
    let b = c.get("/internal/v1/access?user=x&session=y", None).await.expect(404);
    assert_eq!(a.body, b.body);
    let generated = a.headers.get("x-request-id").and_then(|v| v.to_str().ok()).unwrap_or_default();
    assert!(generated.len() == 32 && generated.bytes().all(|b| b.is_ascii_hexdigit()), "{generated:?}");
    let given = c.send(hyper::Method::GET, "/healthz", None, &[("x-request-id", "trace-42")], None).await;
    assert_eq!(given.headers.get("x-request-id").and_then(|v| v.to_str().ok()), Some("trace-42"), "a caller's id is kept");
    let metrics = c.get("/metrics", None).await.expect(200);
    assert!(String::from_utf8_lossy(&metrics.raw).contains("shopcell_requests_total{class=\"4xx\"}"));
    assert_eq!(metrics.body, Value::Null);
}

#[cfg(unix)]
#[tokio::test]
async fn secrets_are_written_readable_by_the_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let app = spawn_app().await;
    for file in ["jwt-rs256.pem", "service.key"] {
        let path = app.dir.path().join("account").join(file);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{file}");
    }
    let pem = std::fs::read_to_string(app.dir.path().join("account/jwt-rs256.pem")).unwrap();
    assert!(pem.starts_with("-----BEGIN PRIVATE KEY-----"));
}

#[tokio::test]
async fn the_signing_key_survives_a_restart() {
    let mut app = spawn_app().await;
    let u = create_user(&app.client).await;
    app.stop().await;
    let again = spawn_app_in(app.dir.path()).await;
    // A token issued before the restart still verifies.
    again.client.get("/api/v1/auth/me", Some(&u.token)).await.expect(200);
}
