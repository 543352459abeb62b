//! The API reference as one HTML page, rendered from the OpenAPI document: operations by tag,
//! each with its anchor (its operation id), access, parameters, request body, answers and
//! errors, then every named schema with its fields. Plain HTML and one stylesheet of our own:
//! no script, so it reads the same with scripts off, offline, under `default-src 'self'`.

use std::fmt::Write;

use serde_json::{Map, Value};

/// Where the page's stylesheet is served (a route of its own: the policy forbids inline styles).
pub const STYLESHEET: &str = "/api/v1/docs/style.css";

/// The stylesheet.
pub const CSS: &str = include_str!("docs_page.css");

/// The page for `doc`.
pub fn render(doc: &Value) -> String {
    let empty = Map::new();
    let paths = doc["paths"].as_object().unwrap_or(&empty);
    let tags: Vec<&str> = doc["tags"].as_array().into_iter().flatten().filter_map(|t| t["name"].as_str()).collect();
    let title = doc["info"]["title"].as_str().unwrap_or("API");
    let version = doc["info"]["version"].as_str().unwrap_or("");
    let mut out = String::with_capacity(256 * 1024);
    let _ = write!(
        out,
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{t} API reference</title><link rel=\"stylesheet\" href=\"{STYLESHEET}\"></head><body>\n\
         <header><h1>{t} API reference <small>{v}</small></h1>\
         <p>{d} The machine-readable document: <a href=\"/api/v1/openapi.json\">openapi.json</a>.</p></header>\n",
        t = esc(title),
        v = esc(version),
        d = esc(doc["info"]["description"].as_str().unwrap_or("")),
    );
    let operations = |tag: &str| -> Vec<(&str, &str, &Value)> {
        let mut ops = Vec::new();
        for (path, item) in paths {
            for (method, op) in item.as_object().into_iter().flatten() {
                if op["tags"][0].as_str() == Some(tag) {
                    ops.push((method.as_str(), path.as_str(), op));
                }
            }
        }
        ops
    };
    out.push_str("<nav aria-label=\"Operations\"><h2>Contents</h2><ul>\n");
    for tag in &tags {
        let _ = write!(out, "<li><a href=\"#tag-{}\">{}</a><ul>", slug(tag), esc(tag));
        for (method, path, op) in operations(tag) {
            let id = op["operationId"].as_str().unwrap_or("");
            let _ = write!(
                out,
                "<li><a href=\"#{}\"><code>{}</code> {}</a></li>",
                esc(id),
                method.to_uppercase(),
                esc(short_path(path))
            );
        }
        out.push_str("</ul></li>\n");
    }
    out.push_str("<li><a href=\"#schemas\">Schemas</a></li></ul></nav>\n<main>\n");
    for tag in &tags {
        let _ = writeln!(out, "<section class=\"tag\" id=\"tag-{}\"><h2>{}</h2>", slug(tag), esc(tag));
        for (method, path, op) in operations(tag) {
            operation(&mut out, method, path, op);
        }
        out.push_str("</section>\n");
    }
    schemas(&mut out, doc["components"]["schemas"].as_object().unwrap_or(&empty));
    out.push_str("</main></body></html>\n");
    out
}

fn operation(out: &mut String, method: &str, path: &str, op: &Value) {
    let id = op["operationId"].as_str().unwrap_or("");
    let _ = write!(
        out,
        "<article class=\"op\" id=\"{id}\"><h3><a class=\"anchor\" href=\"#{id}\">#</a> <span class=\"method {m}\">{M}</span> \
         <code>{p}</code></h3><p class=\"summary\">{s}</p><dl class=\"facts\"><dt>Operation</dt><dd><code>{id}</code></dd>\
         <dt>Access</dt><dd>{a}</dd>",
        id = esc(id),
        m = esc(method),
        M = esc(&method.to_uppercase()),
        p = esc(path),
        s = esc(op["summary"].as_str().unwrap_or("")),
        a = esc(op["x-access"].as_str().unwrap_or("public")),
    );
    if op["deprecated"] == true {
        out.push_str("<dt>Deprecated</dt><dd>yes: served for old clients; see its successor</dd>");
    }
    out.push_str("</dl>\n");
    if let Some(params) = op["parameters"].as_array().filter(|p| !p.is_empty()) {
        out.push_str("<h4>Parameters</h4><table><thead><tr><th>Name</th><th>In</th><th>Type</th><th>Required</th><th>Description</th></tr></thead><tbody>");
        for p in params {
            let _ = write!(
                out,
                "<tr><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(p["name"].as_str().unwrap_or("")),
                esc(p["in"].as_str().unwrap_or("")),
                type_of(&p["schema"]),
                if p["required"] == true { "yes" } else { "no" },
                esc(p["description"].as_str().unwrap_or(""))
            );
        }
        out.push_str("</tbody></table>\n");
    }
    let body = &op["requestBody"]["content"]["application/json"]["schema"];
    if body.is_object() {
        let _ = writeln!(out, "<h4>Request body</h4><p>JSON: {}</p>", type_of(body));
    }
    out.push_str("<h4>Answers</h4><table><thead><tr><th>Status</th><th>Body</th><th>Meaning</th></tr></thead><tbody>");
    for (status, answer) in op["responses"].as_object().into_iter().flatten() {
        let content = answer["content"].as_object();
        let body = content
            .and_then(|c| c.iter().next())
            .map(|(ct, media)| match media.get("schema") {
                Some(s) if ct == "application/json" => type_of(s),
                _ => esc(ct),
            })
            .unwrap_or_else(|| "none".into());
        let class = if status.starts_with('2') || status.starts_with('3') { "ok" } else { "err" };
        let _ = write!(
            out,
            "<tr class=\"{class}\"><td>{}</td><td>{body}</td><td>{}</td></tr>",
            esc(status),
            esc(answer["description"].as_str().unwrap_or(""))
        );
    }
    out.push_str("</tbody></table></article>\n");
}

fn schemas(out: &mut String, schemas: &Map<String, Value>) {
    out.push_str("<section class=\"tag\" id=\"schemas\"><h2>Schemas</h2>\n");
    for (name, schema) in schemas {
        let _ = write!(
            out,
            "<article class=\"schema\" id=\"schema-{n}\"><h3><a class=\"anchor\" href=\"#schema-{n}\">#</a> {n}</h3>",
            n = esc(name)
        );
        if let Some(d) = schema["description"].as_str() {
            let _ = write!(out, "<p>{}</p>", esc(d));
        }
        match schema["properties"].as_object() {
            Some(props) => fields(out, props, schema["required"].as_array()),
            None => {
                let _ = write!(out, "<p>{}</p>", type_of(schema));
            }
        }
        out.push_str("</article>\n");
    }
    out.push_str("</section>\n");
}

/// An object's fields: name, type, whether required, description.
fn fields(out: &mut String, props: &Map<String, Value>, required: Option<&Vec<Value>>) {
    out.push_str("<table><thead><tr><th>Field</th><th>Type</th><th>Required</th><th>Description</th></tr></thead><tbody>");
    for (name, p) in props {
        let is_required = required.is_some_and(|r| r.iter().any(|v| v == name.as_str()));
        let _ = write!(
            out,
            "<tr><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(name),
            type_of(p),
            if is_required { "yes" } else { "no" },
            esc(p["description"].as_str().unwrap_or(""))
        );
    }
    out.push_str("</tbody></table>");
}

/// A schema as a short phrase of HTML: `string (uuid)`, `array of <a>ProductView</a>`,
/// `one of: ACTIVE, DRAFT`, with links to named schemas.
fn type_of(s: &Value) -> String {
    if let Some(r) = s["$ref"].as_str() {
        let name = r.rsplit('/').next().unwrap_or(r);
        return format!("<a href=\"#schema-{n}\">{n}</a>", n = esc(name));
    }
    if let Some(values) = s["enum"].as_array() {
        let shown: Vec<String> = values.iter().map(|v| format!("<code>{}</code>", esc(&plain(v)))).collect();
        return format!("one of: {}", shown.join(", "));
    }
    if let Some(c) = s.get("const") {
        return format!("<code>{}</code>", esc(&plain(c)));
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(parts) = s[key].as_array() {
            let joiner = if key == "allOf" { " and " } else { " or " };
            return parts.iter().map(type_of).collect::<Vec<_>>().join(joiner);
        }
    }
    let types: Vec<&str> = match &s["type"] {
        Value::String(t) => vec![t.as_str()],
        Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
        _ => return "any".into(),
    };
    let mut phrases = Vec::new();
    for t in types {
        let mut p = match t {
            "array" => format!("array of {}", type_of(&s["items"])),
            "object" if s["properties"].is_object() => {
                let names: Vec<String> =
                    s["properties"].as_object().into_iter().flatten().map(|(k, _)| format!("<code>{}</code>", esc(k))).collect();
                format!("object {{{}}}", names.join(", "))
            }
            "object" => match s.get("additionalProperties").filter(|a| a.is_object()) {
                Some(values) => format!("map of {}", type_of(values)),
                None => "object".into(),
            },
            other => esc(other),
        };
        if t != "null" {
            if let Some(f) = s["format"].as_str() {
                let _ = write!(p, " ({})", esc(f));
            }
            let bound = |lo: &str, hi: &str| match (s.get(lo), s.get(hi)) {
                (Some(a), Some(b)) => Some(format!("{a}..{b}")),
                (Some(a), None) => Some(format!("≥ {a}")),
                (None, Some(b)) => Some(format!("≤ {b}")),
                (None, None) => None,
            };
            if let Some(b) = bound("minimum", "maximum") {
                let _ = write!(p, ", {b}");
            }
            if let Some(b) = bound("minLength", "maxLength") {
                let _ = write!(p, ", length {b}");
            }
        }
        phrases.push(p);
    }
    phrases.join(" or ")
}

fn plain(v: &Value) -> String {
    v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string())
}

/// The path without the version prefix, as the contents list shows it.
fn short_path(path: &str) -> &str {
    path.strip_prefix("/api/v1").filter(|p| !p.is_empty()).unwrap_or(path)
}

fn slug(s: &str) -> String {
    s.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' }).collect()
}

/// Text made safe for HTML bodies and attribute values.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn types_read_as_phrases_with_links() {
        assert_eq!(type_of(&json!({"$ref": "#/components/schemas/Money"})), "<a href=\"#schema-Money\">Money</a>");
        assert_eq!(type_of(&json!({"type": ["string", "null"], "format": "uuid"})), "string (uuid) or null");
        assert_eq!(type_of(&json!({"type": "integer", "minimum": 1, "maximum": 250})), "integer, 1..250");
        assert_eq!(type_of(&json!({"type": "array", "items": {"type": "string"}})), "array of string");
        assert_eq!(type_of(&json!({"enum": ["asc", "desc"]})), "one of: <code>asc</code>, <code>desc</code>");
    }

    #[test]
    fn text_is_escaped() {
        assert_eq!(esc("<a href=\"x\">'&'</a>"), "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;");
        let doc = json!({"info": {"title": "<script>"}, "tags": [], "paths": {}, "components": {"schemas": {}}});
        let page = render(&doc);
        assert!(!page.contains("<script>") && page.contains("&lt;script&gt;"));
    }
}
