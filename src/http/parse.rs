//! Reading what a request carries: path ids and JSON bodies, with errors that name the field.

use serde::de::DeserializeOwned;
use uuid::Uuid;

use crate::error::{ApiError, ApiResult, Code};
use crate::http::objects_only::Objects;

pub fn parse_path_id(name: &str, raw: &str) -> ApiResult<Uuid> {
    Uuid::parse_str(raw).map_err(|_| ApiError::field(name, "must be a UUID"))
}

/// Parses JSON; a syntax error is `INVALID_JSON`, a wrong shape is `VALIDATION_FAILED` naming the
/// field path (e.g. `price.amount`).
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> ApiResult<T> {
    // Tracking the path costs on every value; it is needed only to name the field of an error,
    // so a body that parses is read without it and only a failed one is read again with it.
    if let Ok(value) = read_json(bytes) {
        return Ok(value);
    }
    let de = &mut serde_json::Deserializer::from_slice(bytes);
    serde_path_to_error::deserialize(Objects(de)).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if inner.is_syntax() || inner.is_eof() {
            return ApiError::msg(Code::INVALID_JSON, format!("the request body is not valid JSON: {inner}"));
        }
        // serde's message carries line/column noise; keep only its first sentence.
        let msg = inner.to_string();
        let msg = msg.split(" at line ").next().unwrap_or(&msg);
        // A missing field is reported at its parent: name the field itself.
        if let Some(name) = msg.strip_prefix("missing field `").and_then(|m| m.strip_suffix('`')) {
            let field = if path == "." { name.to_string() } else { format!("{path}.{name}") };
            return ApiError::field(field, "is required");
        }
        let field = if path == "." { "body".to_string() } else { path };
        ApiError::field(field, plain_words(msg))
    })
}

/// The whole body as one `T`, its structs from objects only ([`Objects`]), nothing after it.
fn read_json<T: DeserializeOwned>(bytes: &[u8]) -> serde_json::Result<T> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = T::deserialize(Objects(&mut de))?;
    de.end()?;
    Ok(value)
}

/// serde's message with the Rust names of what was expected put in JSON's words: `expected
/// struct Money` reads "expected an object {amount, currency}", `expected u32` "expected a whole
/// number from 0 to 4294967295".
fn plain_words(msg: &str) -> String {
    let Some((head, expected)) = msg.split_once("expected ") else { return msg.to_string() };
    let plain = match expected {
        "struct Money" => "an object {amount, currency}".to_string(),
        "struct Address" => "an address object".to_string(),
        "a sequence" => "an array".to_string(),
        "a map" => "an object".to_string(),
        "a borrowed string" | "a string" => "a string".to_string(),
        "unit" => "null".to_string(),
        "f32" | "f64" => "a number".to_string(),
        "u8" => "a whole number from 0 to 255".to_string(),
        "u16" => "a whole number from 0 to 65535".to_string(),
        "u32" => "a whole number from 0 to 4294967295".to_string(),
        "u64" | "usize" => "a whole number of at least 0".to_string(),
        "i8" | "i16" | "i32" | "i64" | "isize" => "a whole number".to_string(),
        e if e.starts_with("struct ") || e.starts_with("tuple struct ") => "an object".to_string(),
        e if e.starts_with("enum ") || e.starts_with("variant identifier") => "one of the documented values".to_string(),
        e => e.replace("a borrowed string", "a string"),
    };
    format!("{head}expected {plain}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize, Debug)]
    #[allow(dead_code)]
    struct Inner {
        amount: i64,
        currency: String,
    }

    #[derive(serde::Deserialize, Debug)]
    #[serde(rename_all = "camelCase")]
    #[allow(dead_code)]
    struct Body {
        email: String,
        password: String,
        price: Option<Inner>,
        count: Option<u32>,
        tags: Option<Vec<String>>,
    }

    fn refusal(json: &str) -> (String, String) {
        let e = parse_json::<Body>(json.as_bytes()).unwrap_err();
        (e.fields[0].field.clone(), e.fields[0].message.clone())
    }

    #[test]
    fn a_missing_field_is_named_itself() {
        assert_eq!(refusal(r#"{"email": "a@b.c"}"#), ("password".into(), "is required".into()));
        let nested = refusal(r#"{"email": "a", "password": "p", "price": {"amount": 1}}"#);
        assert_eq!(nested, ("price.currency".into(), "is required".into()));
    }

    #[test]
    fn messages_speak_json_not_rust() {
        let (field, msg) = refusal(r#"{"email": "a", "password": "p", "price": "12"}"#);
        assert_eq!(field, "price");
        assert_eq!(msg, r#"invalid type: string "12", expected an object"#);
        let (_, msg) = refusal(r#"{"email": "a", "password": "p", "count": -1}"#);
        assert_eq!(msg, "invalid value: integer `-1`, expected a whole number from 0 to 4294967295");
        let (field, msg) = refusal(r#"{"email": "a", "password": "p", "tags": "x"}"#);
        assert_eq!((field.as_str(), msg.as_str()), ("tags", r#"invalid type: string "x", expected an array"#));
        assert_eq!(
            plain_words("invalid type: integer `1`, expected struct Money"),
            "invalid type: integer `1`, expected an object {amount, currency}"
        );
        assert_eq!(
            plain_words("invalid type: null, expected enum Status"),
            "invalid type: null, expected one of the documented values"
        );
        assert_eq!(plain_words("unknown variant `x`, expected `A` or `B`"), "unknown variant `x`, expected `A` or `B`");
    }
}
