//! The OpenAPI 3.1 document, produced from the route table: every served public route, its path
//! and query parameters, its body schema (from the type serde reads) and its security.

use std::borrow::Cow;

use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::error::Code;
use crate::http::route::{Access, Route};

/// The document as an answer: its shape is the OpenAPI specification's, not described again here.
#[derive(Serialize)]
#[serde(transparent)]
pub struct OpenApi(pub Value);

impl JsonSchema for OpenApi {
    fn schema_name() -> Cow<'static, str> {
        "OpenApiDocument".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({"type": "object", "description": "an OpenAPI 3.1 document"})
    }
}

pub fn document<C>(routes: &[Route<C>]) -> Value {
    let mut generator = SchemaGenerator::new(SchemaSettings::openapi3());
    let mut paths = Map::new();
    for r in routes.iter().filter(|r| r.access != Access::Internal) {
        let mut op = Map::new();
        op.insert("summary".into(), r.summary.into());
        op.insert("operationId".into(), operation_id(r).into());
        let mut params: Vec<Value> = path_params(&r.path)
            .into_iter()
            .map(|p| json!({"name": p, "in": "path", "required": true, "schema": {"type": "string"}}))
            .collect();
        params.extend(r.query.iter().map(
            |q| json!({"name": q.name, "in": "query", "required": q.required, "description": q.doc, "schema": {"type": q.kind}}),
        ));
        if !params.is_empty() {
            op.insert("parameters".into(), params.into());
        }
        if let Some(schema) = r.body {
            let s = schema(&mut generator);
            op.insert("requestBody".into(), json!({"required": true, "content": {"application/json": {"schema": s}}}));
        }
        if matches!(r.access, Access::Member | Access::Admin) {
            op.insert("security".into(), json!([{"bearer": []}]));
        }
        if r.access == Access::Storefront {
            // Either scheme admits: a member's token, or the store's publishable key.
            op.insert("security".into(), json!([{"bearer": []}, {"publishableKey": []}]));
        }
        let access = match r.access {
            Access::Public => "public",
            Access::Member => "member",
            Access::Admin => "owner or admin",
            Access::Storefront => "storefront: a member, or a shopper with the store's publishable key",
            Access::Internal => "internal",
        };
        op.insert("x-access".into(), access.into());
        let error = json!({"description": "an error", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}});
        let mut responses = Map::new();
        if let Some(doc) = r.reply_doc(&mut generator) {
            let mut success = Map::new();
            success.insert("description".into(), doc.type_name.clone().into());
            if let Some(ct) = doc.content_type {
                let schema = doc.schema.map(Value::from).unwrap_or_else(|| json!({"type": "string"}));
                success.insert("content".into(), json!({ ct: {"schema": schema} }));
            }
            responses.insert(doc.status.to_string(), Value::Object(success));
        }
        responses.insert("default".into(), error);
        op.insert("responses".into(), Value::Object(responses));
        let entry = paths.entry(r.path.clone()).or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(m) = entry {
            m.insert(r.method.as_str().to_lowercase(), Value::Object(op));
        }
    }
    let mut schemas: Map<String, Value> = generator.take_definitions(true).into_iter().collect();
    let codes: Vec<&str> = Code::ALL.iter().map(|c| c.as_str()).collect();
    schemas.insert(
        "Error".into(),
        json!({
            "type": "object",
            "properties": {
                "success": {"type": "boolean"},
                "message": {"type": "string"},
                "error": {"type": "object", "properties": {
                    "code": {"type": "string", "enum": codes},
                    "message": {"type": "string"},
                    "fields": {"type": "array", "items": {"type": "object", "properties": {"field": {"type": "string"}, "message": {"type": "string"}}}}
                }}
            }
        }),
    );
    json!({
        "openapi": "3.1.0",
        "info": {"title": "shopcell", "version": env!("CARGO_PKG_VERSION")},
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"},
                "publishableKey": {
                    "type": "apiKey",
                    "in": "header",
                    "name": "X-Publishable-Key",
                    "description": "a store's pk_live_… or pk_test_… key: identifies the store for anonymous shoppers"
                }
            }
        }
    })
}

fn path_params(path: &str) -> Vec<&str> {
    path.split('/').filter_map(|seg| seg.strip_prefix('{').and_then(|s| s.strip_suffix('}'))).collect()
}

fn operation_id<C>(r: &Route<C>) -> String {
    let mut id = r.method.as_str().to_lowercase();
    for seg in r.path.split('/').filter(|s| !s.is_empty() && *s != "api" && *s != "v1") {
        let seg = seg.trim_start_matches('{').trim_end_matches('}');
        let mut chars = seg.chars().filter(|c| c.is_alphanumeric());
        if let Some(first) = chars.next() {
            id.push(first.to_ascii_uppercase());
            id.extend(chars);
        }
    }
    id
}
