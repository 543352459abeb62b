//! JSON written directly, for the few answers served so often that serde's generic path (every
//! key escaped, one call per field) costs more than the work behind them: the calculation, a
//! variant's levels. Each writer built on this is held byte-equal to the derived `Serialize` by
//! a property test, so the derive stays the definition of the shape.

use uuid::Uuid;

use crate::domain::money::Money;

pub struct JsonOut {
    pub buf: Vec<u8>,
}

impl JsonOut {
    pub fn with_capacity(bytes: usize) -> JsonOut {
        JsonOut { buf: Vec::with_capacity(bytes) }
    }

    pub fn raw(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// `open` (a key and `[`), the items separated by commas, `]`.
    pub fn list<T>(
        &mut self,
        open: &[u8],
        items: &[T],
        mut item: impl FnMut(&mut JsonOut, &T) -> serde_json::Result<()>,
    ) -> serde_json::Result<()> {
        self.raw(open);
        for (i, t) in items.iter().enumerate() {
            if i > 0 {
                self.buf.push(b',');
            }
            item(self, t)?;
        }
        self.buf.push(b']');
        Ok(())
    }

    pub fn int(&mut self, n: impl itoa::Integer) {
        self.raw(itoa::Buffer::new().format(n).as_bytes());
    }

    /// A quoted string; one with anything to escape is written by serde.
    pub fn string(&mut self, s: &str) -> serde_json::Result<()> {
        if s.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
            self.buf.push(b'"');
            self.raw(s.as_bytes());
            self.buf.push(b'"');
            Ok(())
        } else {
            serde_json::to_writer(&mut self.buf, s)
        }
    }

    pub fn opt_string(&mut self, s: Option<&str>) -> serde_json::Result<()> {
        match s {
            Some(s) => self.string(s),
            None => {
                self.raw(b"null");
                Ok(())
            }
        }
    }

    /// `key` (with its punctuation), then `{"amount":…,"currency":"…"}`. Currency codes are
    /// three ASCII letters: nothing to escape.
    pub fn money(&mut self, key: &[u8], m: &Money) {
        self.raw(key);
        self.raw(b"{\"amount\":");
        self.int(m.amount);
        self.raw(b",\"currency\":\"");
        self.raw(m.currency.code().as_bytes());
        self.raw(b"\"}");
    }

    /// `key`, then the id as a quoted hyphenated string. By a table, two digits a byte: a page
    /// of levels writes 150 ids, and the general formatter was a twelfth of such a read.
    pub fn uuid(&mut self, key: &[u8], id: &Uuid) {
        self.raw(key);
        let mut text = *b"\"00000000-0000-0000-0000-000000000000\"";
        for (byte, at) in id.as_bytes().iter().zip(DIGIT_PAIRS_AT) {
            text[at..][..2].copy_from_slice(&HEX_PAIRS[usize::from(*byte)]);
        }
        self.raw(&text);
    }

    /// `key`, then Unix milliseconds as a quoted RFC 3339 time, as `time::stamp` writes it.
    pub fn stamp(&mut self, key: &[u8], ms: i64) {
        self.raw(key);
        self.buf.push(b'"');
        self.raw(crate::domain::time::rfc3339_bytes(ms).as_bytes());
        self.buf.push(b'"');
    }
}

/// Where each of an id's 16 bytes is written in its quoted hyphenated text.
const DIGIT_PAIRS_AT: [usize; 16] = [1, 3, 5, 7, 10, 12, 15, 17, 20, 22, 25, 27, 29, 31, 33, 35];

/// Each byte's two lowercase hexadecimal digits.
const HEX_PAIRS: [[u8; 2]; 256] = {
    let digits = b"0123456789abcdef";
    let mut pairs = [[0u8; 2]; 256];
    let mut i = 0;
    while i < 256 {
        pairs[i] = [digits[i >> 4], digits[i & 15]];
        i = i.saturating_add(1);
    }
    pairs
};

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use uuid::Uuid;

    use super::JsonOut;

    proptest! {
        #[test]
        fn ids_and_times_are_written_as_serde_writes_them(id in any::<u128>(), ms in prop_oneof![any::<i64>(), 0i64..253_402_300_800_000]) {
            let id = Uuid::from_u128(id);
            let mut out = JsonOut::with_capacity(0);
            out.uuid(b"", &id);
            out.stamp(b",", ms);
            let time = serde_json::to_string(&crate::domain::time::rfc3339(ms)).unwrap();
            prop_assert_eq!(String::from_utf8(out.buf).unwrap(), format!("{},{time}", serde_json::to_string(&id).unwrap()));
        }
    }
}
