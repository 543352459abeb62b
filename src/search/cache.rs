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
//! An entry also keeps its body compressed, once per content coding (`http::compress`),
//! computed on the first request that accepts the coding: repeats are served without compressing
//! again. The compressed bytes live and die with the plain ones, under the same key and tag, so a
//! write that retires an answer retires every coding of it.
//!
//! The cache keeps within a budget of bytes, counting every entry's key, bodies and slot; when a
//! new answer (or a new coding of one) would pass it, it drops an arbitrary quarter of its
//! entries (the map's own order), as often as needed, which keeps most of the often-repeated
//! answers in place.

use std::collections::HashMap;
use std::mem::size_of;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;

use crate::http::compress::{self, Answer, Coding};
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
    /// The body in each coding (by [`slot`]): `None` until a request first accepts it, then what
    /// [`compress::pack`] made of it (`None` inside when compressing does not pay).
    coded: [Option<Option<Bytes>>; 2],
}

impl Entry {
    /// Its body and every coding of it kept.
    fn bytes(&self) -> usize {
        self.body.len() + self.coded.iter().flatten().flatten().map(Bytes::len).sum::<usize>()
    }
}

fn slot(coding: Coding) -> usize {
    match coding {
        Coding::Gzip => 0,
        Coding::Brotli => 1,
    }
}

/// What an entry holds besides its key and bodies: the map's slot (the key's and the bodies'
/// handles, the tag, a control byte).
const ENTRY_OVERHEAD: usize = size_of::<(String, Entry)>() + 1;

fn cost(key: &str, entry: &Entry) -> usize {
    key.len() + entry.bytes() + ENTRY_OVERHEAD
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
            self.bytes -= cost(&k, &e);
        }
    }

    /// Drops a quarter of the entries, as often as needed, until `more` bytes fit in `budget`.
    fn shed(&mut self, budget: usize, more: usize) {
        while self.bytes + more > budget && !self.entries.is_empty() {
            let drop = self.entries.len().div_ceil(4);
            let victims: Vec<String> = self.entries.keys().take(drop).cloned().collect();
            for k in victims {
                self.remove(&k);
            }
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

    /// Whether answers are kept (`--answer-cache`).
    pub fn is_enabled(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
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

    /// The kept answer of `key`, when it was computed at `tag`, in `coding` when one is asked
    /// for: the first request of a coding compresses the body (outside the lock) and keeps it.
    pub fn get(&self, key: &str, tag: Tag, coding: Option<Coding>) -> Option<Answer> {
        if !self.enabled.load(Ordering::Relaxed) {
            return None;
        }
        let plain = {
            let map = self.map.lock().ok()?;
            let Some(e) = map.entries.get(key).filter(|e| e.tag == tag) else {
                self.meter.miss();
                return None;
            };
            self.meter.hit();
            let Some(c) = coding else { return Some(Answer { body: e.body.clone(), coding: None }) };
            if let Some(packed) = &e.coded[slot(c)] {
                return Some(Answer::of(&e.body, c, packed));
            }
            e.body.clone()
        };
        let c = coding?;
        let packed = compress::pack(&plain, c);
        let answer = Answer::of(&plain, c, &packed);
        self.keep_coded(key, tag, c, packed);
        Some(answer)
    }

    /// Keeps `body` as the answer of `key` at `tag`, replacing an older one, and answers it in
    /// `coding` when one is asked for (compressed now, and kept beside it).
    pub fn put(&self, key: String, tag: Tag, body: Bytes, coding: Option<Coding>) -> Answer {
        let mut entry = Entry { tag, body: body.clone(), coded: [None, None] };
        let answer = match coding {
            Some(c) => {
                let packed = compress::pack(&body, c);
                let answer = Answer::of(&body, c, &packed);
                entry.coded[slot(c)] = Some(packed);
                answer
            }
            None => Answer { body, coding: None },
        };
        let size = cost(&key, &entry);
        if entry.body.len() > self.max_body || size > self.budget || !self.enabled.load(Ordering::Relaxed) {
            return answer;
        }
        let Ok(mut map) = self.map.lock() else { return answer };
        map.remove(&key);
        map.shed(self.budget, size);
        map.bytes += size;
        map.entries.insert(key, entry);
        self.meter.holds(map.bytes as u64, map.entries.len() as u64);
        answer
    }

    /// Keeps `packed`, the body of `key` at `tag` in `coding`, beside it: unless the entry was
    /// replaced meanwhile (another tag) or another request kept the coding first.
    fn keep_coded(&self, key: &str, tag: Tag, coding: Coding, packed: Option<Bytes>) {
        let Ok(mut map) = self.map.lock() else { return };
        let Some(e) = map.entries.get_mut(key).filter(|e| e.tag == tag && e.coded[slot(coding)].is_none()) else { return };
        let more = packed.as_ref().map_or(0, Bytes::len);
        e.coded[slot(coding)] = Some(packed);
        map.bytes += more;
        map.shed(self.budget, 0);
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
        c.put("q".into(), (1, 1), Bytes::from_static(b"a"), None);
        assert_eq!(c.get("q", (1, 1), None).map(|a| a.body).as_deref(), Some(&b"a"[..]));
        assert!(c.get("q", (2, 1), None).is_none(), "a write to the store");
        assert!(c.get("q", (1, 2), None).is_none(), "an index refresh");
        assert!(c.get("other", (1, 1), None).is_none());
        c.put("q".into(), (2, 1), Bytes::from_static(b"b"), None);
        assert_eq!(c.get("q", (2, 1), None).map(|a| a.body).as_deref(), Some(&b"b"[..]));
        assert_eq!(c.len(), 1);
        let one = (1 + 1 + ENTRY_OVERHEAD) as u64;
        assert_eq!(c.stats(), CacheStats { budget: 1 << 20, bytes: one, entries: 1, hits: 2, misses: 3 });
        c.set_enabled(false);
        assert!(c.is_empty() && c.get("q", (2, 1), None).is_none());
        c.put("q".into(), (2, 1), Bytes::from_static(b"b"), None);
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
            c.put(format!("q{i:03}"), (0, 0), Bytes::from(vec![0u8; 100]), None);
        }
        assert_eq!(c.stats().entries, fit as u64, "nothing dropped before the budget is reached");
        assert_eq!(c.stats().bytes, (fit * each) as u64);
        // One more passes the budget: a quarter goes.
        c.put("q999".into(), (0, 0), Bytes::from(vec![0u8; 100]), None);
        let left = fit - fit.div_ceil(4) + 1;
        assert_eq!(c.stats().entries, left as u64);
        assert_eq!(c.stats().bytes, (left * each) as u64);
        assert!(c.get("q999", (0, 0), None).is_some());
        for i in 0..fit * 3 {
            c.put(format!("r{i:03}"), (0, 0), Bytes::from(vec![0u8; 100 + i % 50]), None);
            assert!(c.stats().bytes <= budget as u64);
        }
        let map = c.map.lock().unwrap();
        let held: usize = map.entries.iter().map(|(k, e)| cost(k, e)).sum();
        assert_eq!((map.bytes, map.entries.len() as u64), (held, c.stats().entries));
        assert_eq!(c.stats().bytes, held as u64);
    }

    #[test]
    fn bodies_past_a_64th_of_the_budget_are_not_kept() {
        let c = AnswerCache::new(64 << 10);
        c.put("big".into(), (0, 0), Bytes::from(vec![0u8; (1 << 10) + 1]), None);
        assert!(c.get("big", (0, 0), None).is_none());
        c.put("fits".into(), (0, 0), Bytes::from(vec![0u8; 1 << 10]), None);
        assert!(c.get("fits", (0, 0), None).is_some());
        assert_eq!(c.stats().entries, 1);
        // However large the budget, a body past 512 KiB is not kept.
        let large = AnswerCache::new(1 << 30);
        large.put("big".into(), (0, 0), Bytes::from(vec![0u8; MAX_BODY + 1]), None);
        large.put("fits".into(), (0, 0), Bytes::from(vec![0u8; MAX_BODY]), None);
        assert_eq!((large.len(), large.stats().bytes), (1, (4 + MAX_BODY + ENTRY_OVERHEAD) as u64));
    }

    /// A JSON page of about 16 KB, as a list page is.
    fn page(word: &str) -> Bytes {
        Bytes::from(serde_json::json!({"data": vec![format!("{word}: a product title, repeated"); 400]}).to_string())
    }

    #[test]
    fn a_coding_is_compressed_once_counted_and_retired_with_its_answer() {
        use std::io::Read;
        let c = AnswerCache::new(1 << 20);
        let plain = page("first");
        // Kept plain by a request that accepts no coding.
        assert_eq!(c.put("p".into(), (1, 0), plain.clone(), None), Answer { body: plain.clone(), coding: None });
        let alone = c.stats().bytes;
        // The first gzip request compresses it and keeps it; the next gets the very same bytes.
        let gz = c.get("p", (1, 0), Some(Coding::Gzip)).unwrap();
        assert_eq!(gz.coding, Some(Coding::Gzip));
        assert!(gz.body.len() * 4 < plain.len());
        let mut back = Vec::new();
        flate2::read::GzDecoder::new(&gz.body[..]).read_to_end(&mut back).unwrap();
        assert_eq!(back, plain);
        assert_eq!(c.stats().bytes, alone + gz.body.len() as u64, "the compressed bytes count");
        let again = c.get("p", (1, 0), Some(Coding::Gzip)).unwrap();
        assert_eq!(again, gz);
        assert_eq!(again.body.as_ptr(), gz.body.as_ptr(), "served as kept, not compressed again");
        // Brotli is kept beside it; the plain body is still served plain.
        let br = c.get("p", (1, 0), Some(Coding::Brotli)).unwrap();
        assert_eq!(br.coding, Some(Coding::Brotli));
        assert_eq!(c.stats().bytes, alone + (gz.body.len() + br.body.len()) as u64);
        assert_eq!(c.get("p", (1, 0), None).unwrap(), Answer { body: plain.clone(), coding: None });

        // A write moves the tag: no coding of the old answer is served, and the new one's replaces
        // it whole.
        assert!(c.get("p", (2, 0), Some(Coding::Gzip)).is_none());
        let newer = page("second");
        let fresh = c.put("p".into(), (2, 0), newer.clone(), Some(Coding::Gzip));
        let mut back = Vec::new();
        flate2::read::GzDecoder::new(&fresh.body[..]).read_to_end(&mut back).unwrap();
        assert_eq!(back, newer);
        assert_eq!(c.get("p", (2, 0), Some(Coding::Gzip)).unwrap(), fresh);
        let one = ("p".len() + newer.len() + fresh.body.len() + ENTRY_OVERHEAD) as u64;
        assert_eq!((c.stats().entries, c.stats().bytes), (1, one));

        // A small answer is not worth compressing: served plain in every case, nothing more kept.
        c.put("s".into(), (2, 0), Bytes::from_static(b"{}"), Some(Coding::Gzip));
        assert_eq!(c.get("s", (2, 0), Some(Coding::Gzip)).unwrap(), Answer { body: Bytes::from_static(b"{}"), coding: None });
        assert_eq!(c.stats().bytes, one + (1 + 2 + ENTRY_OVERHEAD) as u64);
    }

    #[test]
    fn kept_codings_stay_within_the_budget() {
        let plain = page("budget");
        let budget = 64 * plain.len();
        let c = AnswerCache::new(budget as u64);
        for i in 0..200 {
            let key = format!("p{i}");
            c.put(key.clone(), (0, 0), plain.clone(), None);
            c.get(&key, (0, 0), Some(Coding::Gzip)).unwrap();
            c.get(&key, (0, 0), Some(Coding::Brotli)).unwrap();
            assert!(c.stats().bytes <= budget as u64);
        }
        let map = c.map.lock().unwrap();
        let held: usize = map.entries.iter().map(|(k, e)| cost(k, e)).sum();
        assert_eq!((map.bytes as u64, map.entries.len() as u64), (held as u64, c.stats().entries));
        assert!(map.entries.values().any(|e| e.coded.iter().all(Option::is_some)));
    }
}
