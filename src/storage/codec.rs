//! The record codec: bincode 2 (standard configuration) over serde, in this one place.
//!
//! bincode is not self-describing, so a record's layout is fixed by its struct: changing a stored
//! struct means a format version bump and a migration step (see `data-format/README.md`).

use serde::{Serialize, de::DeserializeOwned};

use crate::error::ApiError;

fn config() -> bincode::config::Configuration {
    bincode::config::standard()
}

/// Encodes a record.
pub fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, ApiError> {
    bincode::serde::encode_to_vec(value, config()).map_err(ApiError::internal)
}

/// Decodes a record; a record that does not decode is corruption, answered as a 500 and logged.
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    bincode::serde::decode_from_slice(bytes, config()).map(|(v, _)| v).map_err(ApiError::internal)
}
