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

    /// `key`, then the id as a quoted hyphenated string.
    pub fn uuid(&mut self, key: &[u8], id: &Uuid) {
        self.raw(key);
        self.buf.push(b'"');
        self.raw(id.hyphenated().encode_lower(&mut Uuid::encode_buffer()).as_bytes());
        self.buf.push(b'"');
    }
}
