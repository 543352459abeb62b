//! Reading what a request carries: path ids and JSON bodies, with errors that name the field.

use serde::de::DeserializeOwned;
use uuid::Uuid;

use crate::error::{ApiError, ApiResult, Code};

pub fn parse_path_id(name: &str, raw: &str) -> ApiResult<Uuid> {
    Uuid::parse_str(raw).map_err(|_| ApiError::field(name, "must be a UUID"))
}

/// Parses JSON; a syntax error is `INVALID_JSON`, a wrong shape is `VALIDATION_FAILED` naming the
/// field path (e.g. `price.amount`).
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> ApiResult<T> {
    // Tracking the path costs on every value; it is needed only to name the field of an error,
    // so a body that parses is read without it and only a failed one is read again with it.
    if let Ok(value) = serde_json::from_slice(bytes) {
        return Ok(value);
    }
    let de = &mut serde_json::Deserializer::from_slice(bytes);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if inner.is_syntax() || inner.is_eof() {
            ApiError::msg(Code::INVALID_JSON, format!("the request body is not valid JSON: {inner}"))
        } else {
            let field = if path == "." { "body".to_string() } else { path };
            // serde's message carries line/column noise; keep only its first sentence.
            let msg = inner.to_string();
            let msg = msg.split(" at line ").next().unwrap_or(&msg).to_string();
            ApiError::field(field, msg)
        }
    })
}
