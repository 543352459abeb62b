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

/// `#[serde(with = "crate::storage::codec::lz4_text")]` on a `String`: kept LZ4-compressed, as
/// one byte string of a 0 byte, the text's length (u32 little-endian) and its LZ4 block. For
/// JSON documents kept whole in a row (an event's resource): a selling store's shrink to about
/// half, so a leaf page holds several rows where it held one or two, and a table of them costs
/// fewer pages to write, read, cache and back up. Compressing a few KB takes a few
/// microseconds; reading it back less. A byte string that does not start with 0 is the text
/// itself, as a plain `String` field wrote it (JSON never starts with a 0 byte): the format step
/// that compresses such a field reads rows of either form, and a text shorter than
/// [`lz4_text::PLAIN_BELOW`] is kept so (a block's compression costs a fixed table setup that a
/// short text, a level's few hundred bytes, does not pay back).
pub mod lz4_text {
    use serde::{Deserializer, Serializer, de};

    /// The first byte of the compressed form.
    const COMPRESSED: u8 = 0;
    /// The longest text a row may claim to hold: a corrupt length is refused before anything
    /// is allocated for it.
    const MAX_TEXT: usize = 256 << 20;

    /// Texts shorter than this (and not starting with a 0 byte) are kept as they are.
    pub const PLAIN_BELOW: usize = 512;

    pub fn serialize<S: Serializer>(text: &str, s: S) -> Result<S::Ok, S::Error> {
        let raw = text.as_bytes();
        if raw.len() < PLAIN_BELOW && raw.first() != Some(&COMPRESSED) {
            return s.serialize_bytes(raw);
        }
        let len = u32::try_from(raw.len()).map_err(|_| serde::ser::Error::custom("a text past 4 GiB"))?;
        let mut out = vec![0; 5 + lz4_flex::block::get_maximum_output_size(raw.len())];
        out[0] = COMPRESSED;
        out[1..5].copy_from_slice(&len.to_le_bytes());
        let n = lz4_flex::block::compress_into(raw, &mut out[5..]).map_err(serde::ser::Error::custom)?;
        out.truncate(5 + n);
        s.serialize_bytes(&out)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
        struct Text;
        impl<'de> de::Visitor<'de> for Text {
            type Value = String;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a text, LZ4-compressed or plain")
            }
            fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<String, E> {
                let Some((&COMPRESSED, rest)) = v.split_first() else {
                    return String::from_utf8(v.to_vec()).map_err(E::custom);
                };
                let (len, block) = rest.split_at_checked(4).ok_or_else(|| E::custom("a compressed text without its length"))?;
                let len = u32::from_le_bytes(len.try_into().map_err(E::custom)?) as usize;
                if len > MAX_TEXT {
                    return Err(E::custom(format!("a compressed text claims {len} bytes")));
                }
                let mut raw = vec![0; len];
                let n = lz4_flex::block::decompress_into(block, &mut raw).map_err(E::custom)?;
                if n != len {
                    return Err(E::custom(format!("a compressed text of {n} bytes claims {len}")));
                }
                String::from_utf8(raw).map_err(E::custom)
            }
        }
        d.deserialize_bytes(Text)
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

#[cfg(test)]
mod tests {
    use serde::{Deserialize, Serialize};

    use super::*;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Doc {
        before: u32,
        #[serde(with = "lz4_text")]
        text: String,
        after: u32,
    }

    #[test]
    fn compressed_text_reads_back_whole_and_shrinks() {
        let json =
            format!("[{}]", (0..100).map(|i| format!("{{\"id\":{i},\"title\":\"Linen shirt\"}}")).collect::<Vec<_>>().join(","));
        for text in ["", "é", json.as_str()] {
            let doc = Doc { before: 7, text: text.to_string(), after: 9 };
            let bytes = encode(&doc).unwrap();
            assert_eq!(decode::<Doc>(&bytes).unwrap(), doc);
        }
        let bytes = encode(&Doc { before: 7, text: json.clone(), after: 9 }).unwrap();
        assert!(bytes.len() * 3 < json.len(), "{} bytes for {}", bytes.len(), json.len());
    }

    #[test]
    fn a_damaged_compressed_text_is_an_error_not_a_panic() {
        let long = format!("{{\"title\":\"{}\"}}", "Linen shirt, ".repeat(50));
        let bytes = encode(&Doc { before: 7, text: long, after: 9 }).unwrap();
        assert_eq!(bytes[2], 0, "compressed");
        // Each byte changed: an error or some text, never a panic; the row cut short: an error.
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0xFF;
            let _ = decode::<Doc>(&bad);
            assert!(decode::<Doc>(&bytes[..i]).is_err());
        }
        // A length past the bound is refused before it is allocated.
        let mut huge = vec![7u8, 7, 0];
        huge.extend_from_slice(&u32::MAX.to_le_bytes());
        huge.extend_from_slice(&[0, 0, 9]);
        assert!(decode::<Doc>(&huge).is_err());
    }

    #[test]
    fn a_short_text_is_kept_as_it_is() {
        let short = "{\"available\":3}".repeat(lz4_text::PLAIN_BELOW / 16 - 1);
        let bytes = encode(&Doc { before: 7, text: short.clone(), after: 9 }).unwrap();
        assert!(bytes.windows(short.len()).any(|w| w == short.as_bytes()), "kept plain");
        assert_eq!(decode::<Doc>(&bytes).unwrap().text, short);
        // One starting with a 0 byte would read as compressed: it is compressed.
        let nul = "\0{}";
        let bytes = encode(&Doc { before: 7, text: nul.into(), after: 9 }).unwrap();
        assert_eq!((bytes[2], decode::<Doc>(&bytes).unwrap().text.as_str()), (0, nul));
    }

    #[test]
    fn a_plain_string_field_reads_as_its_text() {
        #[derive(Serialize)]
        struct Plain {
            before: u32,
            text: String,
            after: u32,
        }
        for text in ["", "{\"id\":1}", "[1,2]"] {
            let bytes = encode(&Plain { before: 7, text: text.into(), after: 9 }).unwrap();
            assert_eq!(decode::<Doc>(&bytes).unwrap(), Doc { before: 7, text: text.into(), after: 9 });
        }
    }
}
