//! Recent answers of a cell, whole response bodies, for reads that many shoppers repeat: product
//! searches (`api::search`) and product list pages (`api::products`).
//!
//! A search answer depends on two things that change: the tantivy index (which hits) and the
//! store's redb rows (the product views rendered for them). An entry is tagged with both
//! versions, read before the answer is computed — the store's write generation
//! (`storage::writer::Generations`, bumped by every committed write of the store) and the version
//! of the index (`Search::generation`, changed by every commit or merge that changes what a
//! search sees) — and is served only while both are unchanged. A computed answer
//! is never older than its tag, so a cached one is exactly what a fresh search would answer
//! against the same index and rows: a write or an index refresh makes every older entry of the
//! store unusable at once, and a product stays searchable within the indexer's delay. A list page
//! depends on the rows alone and is tagged with the store's write generation only.
//!
//! The cache is bounded by entries and bytes; when full, it drops an arbitrary quarter of its
//! entries (the map's own order), which keeps most of the often-repeated answers in place.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;

/// Most entries kept per cell.
const MAX_ENTRIES: usize = 4096;
/// Most body bytes kept per cell.
const MAX_BYTES: usize = 32 << 20;
/// Bodies larger than this are not kept (a 250-hit page of big products).
const MAX_BODY: usize = 512 << 10;

/// The versions an answer was computed from: (store write generation, index generation or 0).
pub type Tag = (u64, u64);

struct Entry {
    tag: Tag,
    body: Bytes,
}

#[derive(Default)]
struct Map {
    entries: HashMap<String, Entry>,
    bytes: usize,
}

/// Answers by request key, each with its [`Tag`].
pub struct AnswerCache {
    map: Mutex<Map>,
    enabled: AtomicBool,
}

impl Default for AnswerCache {
    fn default() -> Self {
        AnswerCache { map: Mutex::default(), enabled: AtomicBool::new(true) }
    }
}

impl AnswerCache {
    /// Turns the cache off (every answer computed afresh, nothing kept) or back on; the catalog
    /// benchmark measures both.
    pub fn set_enabled(&self, on: bool) {
        self.enabled.store(on, Ordering::Relaxed);
        if !on && let Ok(mut map) = self.map.lock() {
            *map = Map::default();
        }
    }

    /// The kept answer of `key`, when it was computed at `tag`.
    pub fn get(&self, key: &str, tag: Tag) -> Option<Bytes> {
        if !self.enabled.load(Ordering::Relaxed) {
            return None;
        }
        let map = self.map.lock().ok()?;
        map.entries.get(key).filter(|e| e.tag == tag).map(|e| e.body.clone())
    }

    /// Keeps `body` as the answer of `key` at `tag`, replacing an older one.
    pub fn put(&self, key: String, tag: Tag, body: Bytes) {
        if body.len() > MAX_BODY || !self.enabled.load(Ordering::Relaxed) {
            return;
        }
        let Ok(mut map) = self.map.lock() else { return };
        if let Some(old) = map.entries.remove(&key) {
            map.bytes -= old.body.len();
        }
        if map.entries.len() >= MAX_ENTRIES || map.bytes + body.len() > MAX_BYTES {
            let drop = map.entries.len().div_ceil(4);
            let victims: Vec<String> = map.entries.keys().take(drop).cloned().collect();
            for k in victims {
                if let Some(e) = map.entries.remove(&k) {
                    map.bytes -= e.body.len();
                }
            }
        }
        map.bytes += body.len();
        map.entries.insert(key, Entry { tag, body });
    }

    /// Entries kept (for tests and metrics).
    pub fn len(&self) -> usize {
        self.map.lock().map(|m| m.entries.len()).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_served_only_at_their_tag() {
        let c = AnswerCache::default();
        c.put("q".into(), (1, 1), Bytes::from_static(b"a"));
        assert_eq!(c.get("q", (1, 1)).as_deref(), Some(&b"a"[..]));
        assert!(c.get("q", (2, 1)).is_none(), "a write to the store");
        assert!(c.get("q", (1, 2)).is_none(), "an index refresh");
        assert!(c.get("other", (1, 1)).is_none());
        c.put("q".into(), (2, 1), Bytes::from_static(b"b"));
        assert_eq!(c.get("q", (2, 1)).as_deref(), Some(&b"b"[..]));
        assert_eq!(c.len(), 1);
        c.set_enabled(false);
        assert!(c.is_empty() && c.get("q", (2, 1)).is_none());
        c.put("q".into(), (2, 1), Bytes::from_static(b"b"));
        assert!(c.is_empty());
    }

    #[test]
    fn it_stays_within_its_bounds() {
        let c = AnswerCache::default();
        for i in 0..MAX_ENTRIES * 2 {
            c.put(format!("q{i}"), (0, 0), Bytes::from_static(b"x"));
        }
        assert!(c.len() <= MAX_ENTRIES);
        c.put("big".into(), (0, 0), Bytes::from(vec![0u8; MAX_BODY + 1]));
        assert!(c.get("big", (0, 0)).is_none());
        let body = Bytes::from(vec![0u8; MAX_BODY]);
        for i in 0..(MAX_BYTES / MAX_BODY) * 2 {
            c.put(format!("b{i}"), (0, 0), body.clone());
        }
        let map = c.map.lock().unwrap();
        assert!(map.bytes <= MAX_BYTES);
        assert_eq!(map.bytes, map.entries.values().map(|e| e.body.len()).sum::<usize>());
    }
}
