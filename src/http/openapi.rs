//! The OpenAPI 3.1 document, produced from the route table: every served public route, its path
//! and query parameters, its body schema (from the type serde reads) and its security.

use std::borrow::Cow;

use schemars::generate::SchemaSettings;
use schemars::transform::RecursiveTransform;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::error::Code;
use crate::http::route::{Access, Param, Route};

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

/// The schema generator of the document: JSON Schema 2020-12 (OpenAPI 3.1's dialect), with
/// named types under `#/components/schemas`.
pub fn generator() -> SchemaGenerator {
    SchemaGenerator::new(SchemaSettings::draft2020_12().with(|s| {
        s.definitions_path = "/components/schemas".into();
        s.meta_schema = None;
        s.transforms.push(Box::new(RecursiveTransform(bound_integer_formats)));
    }))
}

/// States the bounds of a Rust integer type where no attribute gave tighter ones: schemars
/// names the type in `format` (`uint32`), which validators ignore, so a larger number looked
/// valid and serde refused it with a 400.
fn bound_integer_formats(schema: &mut Schema) {
    let (min, max): (Value, Value) = match schema.get("format").and_then(Value::as_str) {
        Some("uint8") => (0.into(), u8::MAX.into()),
        Some("uint16") => (0.into(), u16::MAX.into()),
        Some("uint32") => (0.into(), u32::MAX.into()),
        Some("uint64" | "uint") => (0.into(), u64::MAX.into()),
        Some("int8") => (i8::MIN.into(), i8::MAX.into()),
        Some("int16") => (i16::MIN.into(), i16::MAX.into()),
        Some("int32") => (i32::MIN.into(), i32::MAX.into()),
        Some("int64" | "int") => (i64::MIN.into(), i64::MAX.into()),
        _ => return,
    };
    if schema.get("minimum").is_none() && schema.get("exclusiveMinimum").is_none() {
        schema.insert("minimum".into(), min);
    }
    if schema.get("maximum").is_none() && schema.get("exclusiveMaximum").is_none() {
        schema.insert("maximum".into(), max);
    }
}

/// The JSON Schema dialect every schema of the document is written in.
const DIALECT: &str = "https://json-schema.org/draft/2020-12/schema";

pub fn document<C>(routes: &[Route<C>]) -> Value {
    let mut generator = generator();
    let mut paths = Map::new();
    let mut tags: Vec<&str> = Vec::new();
    for r in routes.iter().filter(|r| r.access != Access::Internal) {
        if !r.tag.is_empty() && !tags.contains(&r.tag) {
            tags.push(r.tag);
        }
        let entry = paths.entry(r.path.clone()).or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(m) = entry {
            m.insert(r.method.as_str().to_lowercase(), operation(r, &mut generator));
        }
    }
    let mut schemas: Map<String, Value> = generator.take_definitions(true).into_iter().collect();
    schemas.insert("Error".into(), error_schema());
    json!({
        "openapi": "3.1.0",
        "jsonSchemaDialect": DIALECT,
        "info": {
            "title": "shopcell",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "A multi-store commerce service. Every error answers the one `Error` shape."
        },
        "servers": [{"url": "/", "description": "this host"}],
        "tags": tags.iter().map(|t| json!({"name": t})).collect::<Vec<_>>(),
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"},
                "serviceKey": {
                    "type": "apiKey",
                    "in": "header",
                    "name": "X-Shopcell-Service",
                    "description": "the service key (`account/service.key` in the data directory): operators' tools"
                },
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

/// One operation: its id, tag, access, parameters, body and every answer it can give.
fn operation<C>(r: &Route<C>, generator: &mut SchemaGenerator) -> Value {
    let mut op = Map::new();
    op.insert("operationId".into(), operation_id(r).into());
    op.insert("summary".into(), r.summary.into());
    if !r.tag.is_empty() {
        op.insert("tags".into(), json!([r.tag]));
    }
    if r.deprecated {
        op.insert("deprecated".into(), true.into());
    }
    let mut params: Vec<Value> = path_params(&r.path)
        .into_iter()
        .map(|p| json!({"name": p, "in": "path", "required": true, "schema": path_param_schema(p)}))
        .collect();
    params.extend(r.query.iter().map(|q| {
        // An empty value (`?search=`, as forms send it) counts as absent everywhere.
        let mut p = json!({"name": q.name, "in": "query", "required": q.required, "allowEmptyValue": true,
                           "schema": query_param_schema(q)});
        if q.kind == "array" {
            p["style"] = "form".into();
            p["explode"] = false.into();
        }
        if !q.doc.is_empty() {
            p["description"] = q.doc.as_ref().into();
        }
        p
    }));
    if r.method == hyper::Method::POST {
        params.push(json!({
            "name": "Idempotency-Key",
            "in": "header",
            "required": false,
            "description": "a client-chosen key: a retry with the same key and body answers the first answer again",
            // Visible ASCII only, as `node::idempotency` checks it.
            "schema": {"type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[!-~]+$"}
        }));
    }
    if !params.is_empty() {
        op.insert("parameters".into(), params.into());
    }
    if let Some(schema) = r.body {
        let s = schema(generator);
        op.insert("requestBody".into(), json!({"required": !r.body_optional, "content": {"application/json": {"schema": s}}}));
    }
    match r.access {
        Access::Member | Access::Admin => {
            op.insert("security".into(), json!([{"bearer": []}]));
        }
        // Either scheme admits: a member's token, or the store's publishable key.
        Access::Storefront => {
            op.insert("security".into(), json!([{"bearer": []}, {"publishableKey": []}]));
        }
        Access::Operator => {
            op.insert("security".into(), json!([{"serviceKey": []}]));
        }
        Access::Public | Access::Internal => {}
    }
    op.insert("x-access".into(), access_doc(r.access).into());
    let mut responses = Map::new();
    for doc in r.reply_docs(generator) {
        let mut success = Map::new();
        success.insert("description".into(), doc.type_name.clone().into());
        if let Some(ct) = doc.content_type {
            let schema = doc.schema.map(Value::from).unwrap_or_else(|| json!({"type": "string"}));
            success.insert("content".into(), json!({ ct: {"schema": schema} }));
        }
        if r.secret {
            let never_stored = json!({"description": "the answer carries a secret", "schema": {"const": "no-store"}});
            success.insert("headers".into(), json!({"Cache-Control": never_stored}));
        }
        responses.insert(doc.status.to_string(), Value::Object(success));
    }
    for status in r.error_statuses() {
        let description = Code::ALL.iter().filter(|c| c.status() == status).map(|c| c.as_str()).collect::<Vec<_>>().join(", ");
        responses.insert(
            status.to_string(),
            json!({"description": description, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}),
        );
    }
    op.insert("responses".into(), Value::Object(responses));
    Value::Object(op)
}

fn access_doc(access: Access) -> &'static str {
    match access {
        Access::Public => "public",
        Access::Member => "member",
        Access::Admin => "owner or admin",
        Access::Storefront => "storefront: a member, or a shopper with the store's publishable key",
        Access::Internal => "internal",
        Access::Operator => "operator: the service key",
    }
}

/// Ids in paths are UUIDs (`storeId`, `productId`); other path parameters are plain strings.
fn path_param_schema(name: &str) -> Value {
    if name.ends_with("Id") { json!({"type": "string", "format": "uuid"}) } else { json!({"type": "string"}) }
}

fn query_param_schema(q: &Param) -> Value {
    if q.kind == "array" {
        // A comma-separated list: its items carry the values and format.
        let mut item = Param { kind: "string", ..q.clone() };
        if item.values.is_empty() && item.format.is_none() && item.pattern.is_none() {
            // The list is split at commas and each value trimmed; an empty one is refused.
            item.pattern = Some(LIST_VALUE);
        }
        return json!({"type": "array", "minItems": 1, "items": query_param_schema(&item)});
    }
    let mut s = json!({"type": q.kind});
    if !q.values.is_empty() {
        s["enum"] = q.values.iter().copied().collect::<Vec<_>>().into();
    }
    if let Some((min, max)) = q.range {
        s["minimum"] = min.into();
        s["maximum"] = max.into();
    }
    if let Some(f) = q.format {
        s["format"] = f.into();
    }
    if let Some(p) = q.pattern {
        s["pattern"] = p.into();
    }
    s
}

/// A value of a comma-separated list: no comma, something besides white space.
const LIST_VALUE: &str = r"^[^,]*[^,\s][^,]*$";

/// The one error shape of every error answer.
fn error_schema() -> Value {
    let codes: Vec<&str> = Code::ALL.iter().map(|c| c.as_str()).collect();
    json!({
        "type": "object",
        "required": ["success", "error", "message"],
        "properties": {
            "success": {"const": false},
            "message": {"type": "string"},
            "error": {
                "type": "object",
                "required": ["code", "message", "fields"],
                "properties": {
                    "code": {"type": "string", "enum": codes},
                    "message": {"type": "string"},
                    "fields": {"type": "array", "items": {
                        "type": "object",
                        "required": ["field", "message"],
                        "properties": {"field": {"type": "string"}, "message": {"type": "string"}}
                    }}
                }
            }
        }
    })
}

fn path_params(path: &str) -> Vec<&str> {
    path.split('/').filter_map(|seg| seg.strip_prefix('{').and_then(|s| s.strip_suffix('}'))).collect()
}

/// The row's id, or one read from method and path: `GET …/products` is `listProducts`,
/// `GET …/products/{productId}/variants/{variantId}` is `getProductVariant`, `POST …/products`
/// is `createProduct`. Store-scoped paths drop their `stores/{storeId}` prefix.
pub fn operation_id<C>(r: &Route<C>) -> String {
    let id = r.operation_id.map(str::to_string).unwrap_or_else(|| derived_id(r));
    if r.alias { id + "Alias" } else { id }
}

fn derived_id<C>(r: &Route<C>) -> String {
    let mut segs: Vec<&str> = r.path.split('/').filter(|s| !s.is_empty() && *s != "api" && *s != "v1").collect();
    if segs.len() > 2 && segs[0] == "stores" && segs[1] == "{storeId}" {
        segs.drain(..2);
    }
    let ends_with_id = segs.last().is_some_and(|s| s.starts_with('{'));
    let words: Vec<&str> = segs.iter().copied().filter(|s| !s.starts_with('{')).collect();
    let verb = match (r.method.as_str(), ends_with_id) {
        ("GET", true) => "get",
        ("GET", false) => "list",
        ("POST", _) => "create",
        ("PUT", _) => "set",
        ("PATCH", _) => "update",
        ("DELETE", _) => "delete",
        (other, _) => return other.to_lowercase(),
    };
    let mut id = verb.to_string();
    for (i, w) in words.iter().enumerate() {
        let last = i + 1 == words.len();
        // Only a listed (or bulk-deleted) collection keeps its plural.
        let plural = last && !ends_with_id && matches!(verb, "list" | "delete" | "set");
        let word = if plural { Cow::Borrowed(*w) } else { singular(w) };
        id.push_str(&pascal(&word));
    }
    id
}

/// `gift-cards` → `GiftCards`.
fn pascal(word: &str) -> String {
    word.split(['-', '_', '.'])
        .filter(|p| !p.is_empty())
        .map(|p| {
            let mut c = p.chars();
            c.next().map(|f| f.to_ascii_uppercase().to_string() + c.as_str()).unwrap_or_default()
        })
        .collect()
}

/// The singular of a path's plural noun: `categories` → `category`, `products` → `product`.
fn singular(word: &str) -> Cow<'_, str> {
    if let Some(stem) = word.strip_suffix("ies") {
        Cow::Owned(format!("{stem}y"))
    } else if let Some(stem) = word.strip_suffix("sses").or_else(|| word.strip_suffix("ches")) {
        Cow::Owned(format!("{stem}{}", &word[stem.len()..word.len() - 2]))
    } else if let Some(stem) = word.strip_suffix('s').filter(|_| !word.ends_with("ss") && !word.ends_with("us")) {
        Cow::Borrowed(stem)
    } else {
        Cow::Borrowed(word)
    }
}
