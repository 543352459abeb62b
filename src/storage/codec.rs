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

/// `#[serde(with = "crate::storage::codec::byte_string")]` on a `Vec<u8>`: written as one byte
/// string (its length, then the bytes copied whole) rather than serde's default of a sequence
/// handed over a byte at a time, which costs a call per byte on megabyte payloads.
pub mod byte_string {
    use serde::{Deserializer, Serializer, de};

    pub fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(bytes)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        struct Bytes;
        impl<'de> de::Visitor<'de> for Bytes {
            type Value = Vec<u8>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a byte string")
            }
            fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<Vec<u8>, E> {
                Ok(v.to_vec())
            }
            fn visit_byte_buf<E: de::Error>(self, v: Vec<u8>) -> Result<Vec<u8>, E> {
                Ok(v)
            }
        }
        d.deserialize_byte_buf(Bytes)
    }
}

/// A record's fields read where they lie, in the codec's encoding (bincode's standard
/// configuration: integers as varints, signed ones zigzagged; a string as its length then its
/// bytes; an enum's variant as a u32 varint), without decoding the record whole: for a loop over
/// many rows that needs a few fields (a list's build). Each read answers `None` past the end or
/// on a malformed value.
pub struct Fields<'a> {
    bytes: &'a [u8],
}

impl<'a> Fields<'a> {
    pub fn new(bytes: &'a [u8]) -> Fields<'a> {
        Fields { bytes }
    }

    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, rest) = self.bytes.split_at_checked(n)?;
        self.bytes = rest;
        Some(head)
    }

    pub fn u64(&mut self) -> Option<u64> {
        let first = *self.take(1)?.first()?;
        Some(match first {
            0..=250 => u64::from(first),
            251 => u64::from(u16::from_le_bytes(self.take(2)?.try_into().ok()?)),
            252 => u64::from(u32::from_le_bytes(self.take(4)?.try_into().ok()?)),
            253 => u64::from_le_bytes(self.take(8)?.try_into().ok()?),
            _ => return None,
        })
    }

    pub fn i64(&mut self) -> Option<i64> {
        let z = self.u64()?;
        Some(((z >> 1) as i64) ^ -((z & 1) as i64))
    }

    pub fn str(&mut self) -> Option<&'a str> {
        let n = usize::try_from(self.u64()?).ok()?;
        std::str::from_utf8(self.take(n)?).ok()
    }

    pub fn variant(&mut self) -> Option<u32> {
        u32::try_from(self.u64()?).ok()
    }

    /// Whether every byte has been read.
    pub fn is_done(&self) -> bool {
        self.bytes.is_empty()
    }
}
