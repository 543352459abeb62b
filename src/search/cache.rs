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
//! The cache keeps within a budget of bytes, counting every entry's key, body and slot; when a
//! new answer would pass it, it drops an arbitrary quarter of its entries (the map's own order),
//! as often as needed, which keeps most of the often-repeated answers in place.

use std::collections::HashMap;
use std::mem::size_of;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;

use crate::memory::{CacheStats, Meter};

/// Bodies larger than this are never kept (a 250-hit page of big products), whatever the budget.
const MAX_BODY: usize = 512 << 10;
/// A body larger than this part of the budget is not kept either: one answer must not push out
/// the many small ones that make a cache worth having.
const BODY_PART: usize = 64;

/// The versions an answer was computed from: (store write generation, index generation or 0).
pub type Tag = (u64, u64);

struct Entry {
    tag: Tag,
    body: Bytes,
}

/// What an entry holds besides its key and body: the map's slot (the key's and the body's
/// handles, the tag, a control byte).
const ENTRY_OVERHEAD: usize = size_of::<(String, Entry)>() + 1;

fn cost(key: &str, body: &Bytes) -> usize {
    key.len() + body.len() + ENTRY_OVERHEAD
}

#[derive(Default)]
struct Map {
    entries: HashMap<String, Entry>,
    /// The [`cost`] of every entry.
    bytes: usize,
}

impl Map {
    fn remove(&mut self, key: &str) {
        if let Some((k, e)) = self.entries.remove_entry(key) {
            self.bytes -= cost(&k, &e.body);
        }
    }
}

/// Answers by request key, each with its [`Tag`].
pub struct AnswerCache {
    map: Mutex<Map>,
    enabled: AtomicBool,
    budget: usize,
    max_body: usize,
    meter: Meter,
}

impl AnswerCache {
    pub fn new(budget_bytes: u64) -> AnswerCache {
        let budget = usize::try_from(budget_bytes).unwrap_or(usize::MAX);
        AnswerCache {
            map: Mutex::default(),
            enabled: AtomicBool::new(true),
            budget,
            max_body: (budget / BODY_PART).min(MAX_BODY),
            meter: Meter::new(budget_bytes),
        }
    }

    /// Answers served (hits) and not found at their tag (misses), and the bytes and answers kept.
    pub fn stats(&self) -> CacheStats {
        self.meter.stats()
    }

    /// Turns the cache off (every answer computed afresh, nothing kept) or back on; the catalog
    /// benchmark measures both.
    pub fn set_enabled(&self, on: bool) {
        self.enabled.store(on, Ordering::Relaxed);
        if !on && let Ok(mut map) = self.map.lock() {
            *map = Map::default();
            self.meter.holds(0, 0);
        }
    }

    /// The kept answer of `key`, when it was computed at `tag`.
    pub fn get(&self, key: &str, tag: Tag) -> Option<Bytes> {
        if !self.enabled.load(Ordering::Relaxed) {
            return None;
        }
        let map = self.map.lock().ok()?;
        let found = map.entries.get(key).filter(|e| e.tag == tag).map(|e| e.body.clone());
        match found {
            Some(_) => self.meter.hit(),
            None => self.meter.miss(),
        }
        found
    }

    /// Keeps `body` as the answer of `key` at `tag`, replacing an older one.
    pub fn put(&self, key: String, tag: Tag, body: Bytes) {
        let size = cost(&key, &body);
        if body.len() > self.max_body || size > self.budget || !self.enabled.load(Ordering::Relaxed) {
            return;
        }
        let Ok(mut map) = self.map.lock() else { return };
        map.remove(&key);
        while map.bytes + size > self.budget && !map.entries.is_empty() {
            let drop = map.entries.len().div_ceil(4);
            let victims: Vec<String> = map.entries.keys().take(drop).cloned().collect();
            for k in victims {
                map.remove(&k);
            }
        }
        map.bytes += size;
        map.entries.insert(key, Entry { tag, body });
        self.meter.holds(map.bytes as u64, map.entries.len() as u64);
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
        let c = AnswerCache::new(1 << 20);
        c.put("q".into(), (1, 1), Bytes::from_static(b"a"));
        assert_eq!(c.get("q", (1, 1)).as_deref(), Some(&b"a"[..]));
        assert!(c.get("q", (2, 1)).is_none(), "a write to the store");
        assert!(c.get("q", (1, 2)).is_none(), "an index refresh");
        assert!(c.get("other", (1, 1)).is_none());
        c.put("q".into(), (2, 1), Bytes::from_static(b"b"));
        assert_eq!(c.get("q", (2, 1)).as_deref(), Some(&b"b"[..]));
        assert_eq!(c.len(), 1);
        let one = (1 + 1 + ENTRY_OVERHEAD) as u64;
        assert_eq!(c.stats(), CacheStats { budget: 1 << 20, bytes: one, entries: 1, hits: 2, misses: 3 });
        c.set_enabled(false);
        assert!(c.is_empty() && c.get("q", (2, 1)).is_none());
        c.put("q".into(), (2, 1), Bytes::from_static(b"b"));
        assert!(c.is_empty());
        assert_eq!(c.stats(), CacheStats { budget: 1 << 20, bytes: 0, entries: 0, hits: 2, misses: 3 });
    }

    #[test]
    fn it_stays_within_its_budget() {
        let budget = 64 << 10;
        let c = AnswerCache::new(budget as u64);
        // Key and body bytes both count.
        let each = "q000".len() + 100 + ENTRY_OVERHEAD;
        let fit = budget / each;
        for i in 0..fit {
            c.put(format!("q{i:03}"), (0, 0), Bytes::from(vec![0u8; 100]));
        }
        assert_eq!(c.stats().entries, fit as u64, "nothing dropped before the budget is reached");
        assert_eq!(c.stats().bytes, (fit * each) as u64);
        // One more passes the budget: a quarter goes.
        c.put("q999".into(), (0, 0), Bytes::from(vec![0u8; 100]));
        let left = fit - fit.div_ceil(4) + 1;
        assert_eq!(c.stats().entries, left as u64);
        assert_eq!(c.stats().bytes, (left * each) as u64);
        assert!(c.get("q999", (0, 0)).is_some());
        for i in 0..fit * 3 {
            c.put(format!("r{i:03}"), (0, 0), Bytes::from(vec![0u8; 100 + i % 50]));
            assert!(c.stats().bytes <= budget as u64);
        }
        let map = c.map.lock().unwrap();
        let held: usize = map.entries.iter().map(|(k, e)| cost(k, &e.body)).sum();
        assert_eq!((map.bytes, map.entries.len() as u64), (held, c.stats().entries));
        assert_eq!(c.stats().bytes, held as u64);
    }

    #[test]
    fn bodies_past_a_64th_of_the_budget_are_not_kept() {
        let c = AnswerCache::new(64 << 10);
        c.put("big".into(), (0, 0), Bytes::from(vec![0u8; (1 << 10) + 1]));
        assert!(c.get("big", (0, 0)).is_none());
        c.put("fits".into(), (0, 0), Bytes::from(vec![0u8; 1 << 10]));
        assert!(c.get("fits", (0, 0)).is_some());
        assert_eq!(c.stats().entries, 1);
        // However large the budget, a body past 512 KiB is not kept.
        let large = AnswerCache::new(1 << 30);
        large.put("big".into(), (0, 0), Bytes::from(vec![0u8; MAX_BODY + 1]));
        large.put("fits".into(), (0, 0), Bytes::from(vec![0u8; MAX_BODY]));
        assert_eq!((large.len(), large.stats().bytes), (1, (4 + MAX_BODY + ENTRY_OVERHEAD) as u64));
    }
}
