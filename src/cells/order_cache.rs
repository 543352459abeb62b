//! Deep pages without deep walks. A page at offset N of an order index costs N key visits
//! (~80 ns each); for big lists the cell keeps the index's ids in memory, tagged with the store's
//! write generation, so any page is a slice. A stale copy is rebuilt from the index at most a few
//! times a second; in between, the index is walked as usual, so heavy writing never makes reads
//! slower than without the cache.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use uuid::Uuid;

/// Offsets below this are walked: the walk is cheaper than any bookkeeping.
pub const MIN_OFFSET: usize = 200;
/// Most orders kept; the cache is emptied when full (it refills from use).
const MAX_ENTRIES: usize = 128;
/// A stale order is rebuilt at most this often.
const REBUILD_EVERY: Duration = Duration::from_millis(250);

/// Which order: (store, sort field, status bucket).
pub type OrderKey = (Uuid, u8, u8);

struct Entry {
    generation: u64,
    built: Instant,
    /// Every id of the order, ascending.
    ids: Arc<Vec<Uuid>>,
}

#[derive(Default)]
pub struct OrderCache {
    entries: Mutex<HashMap<OrderKey, Entry>>,
}

/// What the cache says about an order.
pub enum Lookup {
    /// Current: serve from these ids.
    Hit(Arc<Vec<Uuid>>),
    /// Missing or stale and due for a rebuild.
    Rebuild,
    /// Stale, rebuilt too recently: walk the index.
    Walk,
}

impl OrderCache {
    pub fn lookup(&self, key: OrderKey, generation: u64) -> Lookup {
        let Ok(entries) = self.entries.lock() else { return Lookup::Walk };
        match entries.get(&key) {
            Some(e) if e.generation == generation => Lookup::Hit(e.ids.clone()),
            Some(e) if e.built.elapsed() < REBUILD_EVERY => Lookup::Walk,
            _ => Lookup::Rebuild,
        }
    }

    /// Keeps `ids`, read at `generation` (taken before the read transaction began, so the
    /// copy is never older than its tag).
    pub fn store(&self, key: OrderKey, generation: u64, ids: Arc<Vec<Uuid>>) {
        if let Ok(mut entries) = self.entries.lock() {
            if entries.len() >= MAX_ENTRIES && !entries.contains_key(&key) {
                entries.clear();
            }
            entries.insert(key, Entry { generation, built: Instant::now(), ids });
        }
    }
}

/// The ids of one page from an ascending id list.
pub fn page(ids: &[Uuid], desc: bool, offset: usize, limit: usize) -> Vec<Uuid> {
    if desc {
        ids.iter().rev().skip(offset).take(limit).copied().collect()
    } else {
        ids.iter().skip(offset).take(limit).copied().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_generation_is_stale_and_rebuilt_at_most_so_often() {
        let cache = OrderCache::default();
        let key = (Uuid::nil(), 3, 0);
        assert!(matches!(cache.lookup(key, 1), Lookup::Rebuild));
        let ids: Arc<Vec<Uuid>> = Arc::new((0..5).map(Uuid::from_u128).collect());
        cache.store(key, 1, ids);
        assert!(matches!(cache.lookup(key, 1), Lookup::Hit(_)));
        assert!(matches!(cache.lookup(key, 2), Lookup::Walk), "just built: walk instead of rebuilding");
    }

    #[test]
    fn pages_in_both_directions() {
        let ids: Vec<Uuid> = (0..5).map(Uuid::from_u128).collect();
        assert_eq!(page(&ids, false, 1, 2), vec![Uuid::from_u128(1), Uuid::from_u128(2)]);
        assert_eq!(page(&ids, true, 0, 2), vec![Uuid::from_u128(4), Uuid::from_u128(3)]);
        assert!(page(&ids, true, 9, 2).is_empty());
    }
}
