//! Order-preserving key encoding for the byte-keyed store tables.
//!
//! Every store-scoped key starts with the store id (16 bytes, big-endian), so all rows of a store
//! are one contiguous range in every table: that is what makes exporting and moving a store a
//! range scan. Components are encoded so that byte order equals logical order.

use std::ops::Bound;

use uuid::Uuid;

/// A key under construction.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Key(Vec<u8>);

impl Key {
    /// A key scoped to one store.
    pub fn store(store: Uuid) -> Self {
        let mut v = Vec::with_capacity(48);
        v.extend_from_slice(store.as_bytes());
        Key(v)
    }

    /// An empty key written into `buffer` (cleared): a loop building many keys reuses one.
    pub fn reuse(mut buffer: Vec<u8>) -> Self {
        buffer.clear();
        Key(buffer)
    }

    pub fn id(mut self, id: Uuid) -> Self {
        self.0.extend_from_slice(id.as_bytes());
        self
    }

    pub fn u8(mut self, v: u8) -> Self {
        self.0.push(v);
        self
    }

    pub fn u64(mut self, v: u64) -> Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }

    /// Signed integers sort correctly once the sign bit is flipped.
    pub fn i64(mut self, v: i64) -> Self {
        self.0.extend_from_slice(&((v as u64) ^ (1 << 63)).to_be_bytes());
        self
    }

    /// A string that may be followed by more components: `0x00` is escaped as `0x00 0xFF` and the
    /// string ends with `0x00 0x01`, so no string is a prefix of another and order is kept.
    pub fn str(self, s: &str) -> Self {
        self.raw(s.as_bytes())
    }

    /// Bytes that may be followed by more components, escaped and ended as [`Key::str`] does.
    pub fn raw(mut self, bytes: &[u8]) -> Self {
        for &b in bytes {
            self.0.push(b);
            if b == 0 {
                self.0.push(0xFF);
            }
        }
        self.0.extend_from_slice(&[0x00, 0x01]);
        self
    }

    pub fn bytes(&self) -> &[u8] {
        &self.0
    }

    pub fn into_vec(self) -> Vec<u8> {
        self.0
    }
}

/// The half-open range of every key starting with `prefix`.
pub fn prefix_range(prefix: &[u8]) -> (Vec<u8>, Option<Vec<u8>>) {
    let start = prefix.to_vec();
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xFF {
            end.push(last + 1);
            return (start, Some(end));
        }
    }
    (start, None)
}

/// The bounds of the keys in `range` (a [`prefix_range`]) that come after `after`, or all of
/// them.
pub fn bounds_after<'a>(range: &'a (Vec<u8>, Option<Vec<u8>>), after: Option<&'a [u8]>) -> (Bound<&'a [u8]>, Bound<&'a [u8]>) {
    let lower = match after {
        Some(a) => Bound::Excluded(a),
        None => Bound::Included(range.0.as_slice()),
    };
    let upper = match &range.1 {
        Some(e) => Bound::Excluded(e.as_slice()),
        None => Bound::Unbounded,
    };
    (lower, upper)
}

/// Reads the trailing 16-byte id of a key (index rows end with the record id).
pub fn trailing_id(key: &[u8]) -> Option<Uuid> {
    let tail = key.len().checked_sub(16).map(|at| &key[at..])?;
    Uuid::from_slice(tail).ok()
}

/// Reads the store id a store-scoped key starts with.
pub fn leading_store(key: &[u8]) -> Option<Uuid> {
    key.get(..16).and_then(|b| Uuid::from_slice(b).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_keep_their_order() {
        let values = [i64::MIN, -5, -1, 0, 1, 7, i64::MAX];
        let keys: Vec<_> = values.iter().map(|v| Key::default().i64(*v).into_vec()).collect();
        assert!(keys.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn strings_keep_their_order_and_are_prefix_free() {
        let values = ["", "\0", "a", "a\0b", "ab", "b"];
        let keys: Vec<_> = values.iter().map(|v| Key::default().str(v).u8(0).into_vec()).collect();
        assert!(keys.windows(2).all(|w| w[0] < w[1]), "{keys:?}");
    }

    #[test]
    fn prefix_range_covers_exactly_the_prefix() {
        let (start, end) = prefix_range(&[1, 0xFF]);
        assert_eq!(start, vec![1, 0xFF]);
        assert_eq!(end, Some(vec![2]));
        assert_eq!(prefix_range(&[0xFF]).1, None);
    }

    #[test]
    fn ids_are_read_back() {
        let store = Uuid::now_v7();
        let id = Uuid::now_v7();
        let key = Key::store(store).u8(3).str("x").id(id).into_vec();
        assert_eq!(trailing_id(&key), Some(id));
        assert_eq!(leading_store(&key), Some(store));
    }
}
