//! Every answer the suite receives is held to the OpenAPI document the server publishes: an
//! operation answering a status it does not document fails the test that asked, as does a JSON
//! body off the schema documented for that status. Requests that name no documented operation
//! (internal routes, unknown paths, a method a path does not serve) are not checked here.
//!
//! And every documented operation must be answered with its success at least once: when the
//! whole suite has run (no test filter), the process lists the operations that never were and
//! exits with a failure.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, LazyLock, Mutex};

use bytes::Bytes;
use hyper::{HeaderMap, Method};
use jsonschema::{Draft, Validator};
use serde_json::Value;

/// Compiled answer schemas by (operation id, status); `None` for answers without JSON.
type Validators = Mutex<HashMap<(String, u16), Option<Arc<Validator>>>>;

/// The document, built from the route table as the server builds it.
struct Contract {
    doc: Value,
    paths: matchit::Router<String>,
    validators: Validators,
}

/// Operations answered with a success (a status below 400, or the one status of an operation
/// that never succeeds, the deprecated export).
static SUCCEEDED: LazyLock<Mutex<HashSet<String>>> = LazyLock::new(|| Mutex::new(HashSet::new()));

unsafe extern "C" {
    fn atexit(callback: extern "C" fn()) -> i32;
    fn _exit(code: i32) -> !;
}

/// Run at exit, after every test: the operations never answered with their success. Only a run
/// of the whole suite can tell, so a filtered run (any argument that is not a flag) skips it.
extern "C" fn report_unanswered() {
    if std::env::args().skip(1).any(|a| !a.starts_with('-')) {
        return;
    }
    let c = &*CONTRACT;
    let succeeded = SUCCEEDED.lock().map(|s| s.clone()).unwrap_or_default();
    let mut never = BTreeSet::new();
    for (path, item) in c.doc["paths"].as_object().into_iter().flatten() {
        for (method, op) in item.as_object().into_iter().flatten() {
            let id = op["operationId"].as_str().unwrap_or("?");
            if !succeeded.contains(id) {
                never.insert(format!("{id} ({} {path})", method.to_uppercase()));
            }
        }
    }
    if !never.is_empty() {
        eprintln!("\nthese operations were never answered with their success by the suite:");
        for n in &never {
            eprintln!("  {n}");
        }
        // SAFETY: ends the process at once with a failure; nothing runs after the tests.
        unsafe { _exit(101) };
    }
}

static CONTRACT: LazyLock<Contract> = LazyLock::new(|| {
    // SAFETY: registers a plain function to run at exit.
    unsafe { atexit(report_unanswered) };
    let doc = shopcell::http::openapi::document(&shopcell::api::routes());
    let mut paths = matchit::Router::new();
    for path in doc["paths"].as_object().expect("paths").keys() {
        paths.insert(path.clone(), path.clone()).expect("a document path is a route pattern");
    }
    Contract { doc, paths, validators: Mutex::new(HashMap::new()) }
});

/// Checks one answer to `method path_and_query`; panics with what is off.
pub fn check(method: &Method, path_and_query: &str, status: u16, headers: &HeaderMap, raw: &Bytes) {
    let c = &*CONTRACT;
    let path = path_and_query.split('?').next().unwrap_or("");
    let Ok(found) = c.paths.at(path) else { return };
    let method = if method == Method::HEAD { "get".to_string() } else { method.as_str().to_lowercase() };
    let Some(op) = c.doc["paths"][found.value.as_str()].get(&method) else { return };
    let id = op["operationId"].as_str().unwrap_or("?").to_string();
    let only_fails = op["responses"].as_object().is_some_and(|r| r.keys().all(|s| s.as_str() >= "400"));
    if (status < 400 || only_fails)
        && let Ok(mut s) = SUCCEEDED.lock()
    {
        s.insert(id.clone());
    }
    let Some(answer) = op["responses"].get(status.to_string()) else {
        let documented: Vec<&String> = op["responses"].as_object().map(|r| r.keys().collect()).unwrap_or_default();
        panic!(
            "{id} ({} {path}) answered {status}, which it does not document (it documents {documented:?}); body: {}",
            method.to_uppercase(),
            String::from_utf8_lossy(raw)
        );
    };
    let is_json = headers.get("content-type").and_then(|v| v.to_str().ok()).is_some_and(|ct| ct.starts_with("application/json"));
    if raw.is_empty() || !is_json || method == "head" {
        return;
    }
    let validator = {
        let mut cache = c.validators.lock().expect("validators");
        cache
            .entry((id.clone(), status))
            .or_insert_with(|| {
                let schema = answer.pointer("/content/application~1json/schema")?;
                let mut root = schema.clone();
                if let Value::Object(m) = &mut root {
                    m.insert("components".into(), c.doc["components"].clone());
                }
                let v = jsonschema::options()
                    .with_draft(Draft::Draft202012)
                    .should_validate_formats(true)
                    .build(&root)
                    .unwrap_or_else(|e| panic!("{id} {status}: the documented schema does not compile: {e}"));
                Some(Arc::new(v))
            })
            .clone()
    };
    let Some(validator) = validator else {
        panic!("{id} ({path}) answered {status} with JSON where the document gives no JSON body");
    };
    let raw = decoded(headers, raw);
    let body: Value = serde_json::from_slice(&raw).unwrap_or_else(|e| panic!("{id} answered {status} with invalid JSON: {e}"));
    let errors: Vec<String> = validator.iter_errors(&body).take(5).map(|e| format!("at {}: {e}", e.instance_path())).collect();
    if !errors.is_empty() {
        let shown: String = body.to_string().chars().take(2000).collect();
        panic!("{id} ({path}) answered {status} with a body off its documented schema:\n{}\nbody: {shown}", errors.join("\n"));
    }
}

/// The body as sent before its content coding.
fn decoded(headers: &HeaderMap, raw: &Bytes) -> Vec<u8> {
    use std::io::Read;
    let mut out = Vec::new();
    match headers.get("content-encoding").and_then(|v| v.to_str().ok()) {
        Some("br") => brotli::Decompressor::new(&raw[..], 4096).read_to_end(&mut out).map(|_| ()),
        Some("gzip") => flate2::read::GzDecoder::new(&raw[..]).read_to_end(&mut out).map(|_| ()),
        Some(other) => panic!("an answer in a coding never offered: {other}"),
        None => return raw.to_vec(),
    }
    .unwrap_or_else(|e| panic!("an answer that does not decode: {e}"));
    out
}
