//! Rows read on every page, kept in memory: the rendered product views that lists, searches and
//! product reads answer with, and (in a second cache) each store's active locations, which every
//! page of a variant's levels lists (`cells::stock::locations::active_cached`).
//!
//! redb's own page cache is shared by every thread through locks and reference counts, and one
//! row costs a descent of several pages, so a page of 20 products spent more time finding its
//! rows than writing them out. Rows are cached whole, by `(store, id)`, filled on a read miss and
//! dropped by the writer after any commit that changes them (before the writer is answered),
//! so nothing stale is ever served: a reader notes its shard's epoch before its snapshot and
//! fills only if no row of the shard was dropped meanwhile.

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{Arc, Mutex};

use uuid::Uuid;

use crate::memory::Meter;
use crate::storage::applied::Applied;

/// Independent locks: readers of different rows rarely meet.
const SHARDS: usize = 64;
type RowKey = (Uuid, Uuid);

/// Hashes ids by folding their words (FxHash's mix). Keys are ids the cell generated itself
/// (a lookup of any other id only misses, it never inserts), so no keyed hash is needed to
/// resist chosen collisions, and SipHash cost more than the lookup.
#[derive(Default)]
struct IdHasher(u64);

/// `state` with `bytes` folded in, eight at a time (FxHash's mix): for keys no client chooses.
pub(crate) fn fold_words(mut state: u64, bytes: &[u8]) -> u64 {
    for chunk in bytes.chunks(8) {
        let mut word = [0u8; 8];
        word[..chunk.len()].copy_from_slice(chunk);
        state = (state.rotate_left(5) ^ u64::from_le_bytes(word)).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    state
}

impl Hasher for IdHasher {
    fn write(&mut self, bytes: &[u8]) {
        self.0 = fold_words(self.0, bytes);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

type IdMap<V> = HashMap<RowKey, V, BuildHasherDefault<IdHasher>>;

#[derive(Default)]
struct Shard {
    /// Bumped whenever a row is dropped: a fill read before the drop must not land after it.
    epoch: u64,
    rows: IdMap<Arc<[u8]>>,
    /// Keys in the order they were filled, the oldest first; a key dropped since is skipped.
    order: VecDeque<RowKey>,
    /// The rows' [`cost`] and the map's and order's [`Shard::tables`], as last counted.
    bytes: usize,
    tables: usize,
    /// The map's and the order's capacities when [`Shard::tables`] was counted.
    capacities: (usize, usize),
}

impl Shard {
    fn remove(&mut self, key: &RowKey, meter: &Meter) {
        if let Some(old) = self.rows.remove(key) {
            self.bytes -= cost(&old);
            meter.change(-(cost(&old) as i64), -1);
        }
    }

    /// Counts the map and the fill order again at their capacities (which grow in steps and
    /// stay when rows go, so they are counted as held, not by the rows in them).
    fn count_tables(&mut self, meter: &Meter) {
        // Most fills change neither: the allocator is asked only when one grew.
        let capacities = (self.rows.capacity(), self.order.capacity());
        if capacities == self.capacities {
            return;
        }
        self.capacities = capacities;
        let now = crate::memory::map_bytes::<RowKey, Arc<[u8]>>(capacities.0)
            + crate::memory::allocated(capacities.1 * size_of::<RowKey>());
        self.bytes = self.bytes + now - self.tables;
        meter.change(now as i64 - self.tables as i64, 0);
        self.tables = now;
    }
}

/// The cached rows of one table of one database, within a byte budget (the cell's share of the
/// memory budget): past it a shard drops its oldest rows to make room.
pub struct RowCache {
    shards: Vec<Mutex<Shard>>,
    /// Bytes each shard may hold.
    shard_budget: usize,
    pub meter: Meter,
    /// The writer's batches, whose drops a lookup waits for.
    applied: Arc<Applied>,
}

impl RowCache {
    /// A cache whose lookups never wait for a writer (see [`RowCache::following`]).
    pub fn new(budget: u64) -> RowCache {
        RowCache::following(budget, Arc::default())
    }

    /// A cache kept by a writer numbering its batches in `applied`.
    pub fn following(budget: u64, applied: Arc<Applied>) -> RowCache {
        RowCache {
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            shard_budget: budget as usize / SHARDS,
            meter: Meter::new(budget),
            applied,
        }
    }
}

/// What a row costs the budget: its allocation as the allocator sizes it (a size class up to a
/// quarter above the bytes). Its key and slot are the shard's tables'.
fn cost(row: &[u8]) -> usize {
    crate::memory::shared_bytes(row.len())
}

/// What a lookup found: the row, or the epoch to fill it at after reading it.
pub enum Cached {
    Hit(Arc<[u8]>),
    Miss(u64),
}

impl RowCache {
    fn shard(&self, key: &RowKey) -> &Mutex<Shard> {
        let mut h = IdHasher::default();
        std::hash::Hash::hash(key, &mut h);
        // The high bits: the map itself uses the low ones.
        &self.shards[(h.finish() >> 58) as usize % SHARDS]
    }

    /// The row of `(store, id)`, or the epoch to fill it at.
    pub fn get(&self, store: Uuid, id: Uuid) -> Cached {
        self.applied.caught_up();
        self.get_applied(store, id)
    }

    /// The rows of `ids` of `store`, each as [`RowCache::get`] finds it, waiting once.
    pub fn get_all<'a>(&'a self, store: Uuid, ids: &'a [Uuid]) -> impl Iterator<Item = Cached> + 'a {
        self.applied.caught_up();
        ids.iter().map(move |id| self.get_applied(store, *id))
    }

    fn get_applied(&self, store: Uuid, id: Uuid) -> Cached {
        let key = (store, id);
        match self.shard(&key).lock() {
            Ok(s) => match s.rows.get(&key) {
                Some(row) => {
                    self.meter.hit();
                    Cached::Hit(row.clone())
                }
                None => {
                    self.meter.miss();
                    Cached::Miss(s.epoch)
                }
            },
            // A poisoned shard only caches nothing: the epoch never matches.
            Err(_) => Cached::Miss(u64::MAX),
        }
    }

    /// Keeps `row`, read from a snapshot begun after the lookup that answered `epoch`, unless a
    /// row of the shard was dropped since.
    pub fn fill(&self, store: Uuid, id: Uuid, epoch: u64, row: Arc<[u8]>) {
        let key = (store, id);
        // Asks the allocator for the row's size class: once, before the shard's lock.
        let size = cost(&row);
        let Ok(mut s) = self.shard(&key).lock() else { return };
        if s.epoch != epoch || size > self.shard_budget {
            return;
        }
        s.remove(&key, &self.meter);
        while s.bytes + size > self.shard_budget {
            let Some(oldest) = s.order.pop_front() else { break };
            s.remove(&oldest, &self.meter);
        }
        s.bytes += size;
        self.meter.change(size as i64, 1);
        s.rows.insert(key, row);
        s.order.push_back(key);
        // Keys of dropped rows linger in the order until they come up; keep them few.
        if s.order.len() > 2 * s.rows.len() + 64 {
            let Shard { rows, order, .. } = &mut *s;
            order.retain(|k| rows.contains_key(k));
        }
        s.count_tables(&self.meter);
    }

    /// Drops the row of `(store, id)`: a commit changed or deleted it.
    pub fn drop_row(&self, store: Uuid, id: Uuid) {
        let key = (store, id);
        if let Ok(mut s) = self.shard(&key).lock() {
            s.epoch += 1;
            s.remove(&key, &self.meter);
        }
    }

    /// Drops every row of `store` (its rows were replaced wholesale by a move).
    pub fn drop_store(&self, store: Uuid) {
        for shard in &self.shards {
            if let Ok(mut s) = shard.lock() {
                s.epoch += 1;
                let Shard { rows, order, bytes, .. } = &mut *s;
                rows.retain(|(st, _), row| {
                    let keep = *st != store;
                    if !keep {
                        *bytes -= cost(row);
                        self.meter.change(-(cost(row) as i64), -1);
                    }
                    keep
                });
                order.retain(|k| rows.contains_key(k));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BUDGET: u64 = 64 << 20;

    fn row(s: &str) -> Arc<[u8]> {
        Arc::from(s.as_bytes())
    }

    fn hit(c: &RowCache, store: Uuid, id: Uuid) -> Option<Vec<u8>> {
        match c.get(store, id) {
            Cached::Hit(r) => Some(r.to_vec()),
            Cached::Miss(_) => None,
        }
    }

    #[test]
    fn a_fill_read_before_a_drop_is_refused() {
        let c = RowCache::new(BUDGET);
        let (s, id) = (Uuid::from_u128(1), Uuid::from_u128(2));
        let Cached::Miss(epoch) = c.get(s, id) else { panic!("empty cache hit") };
        // The writer commits a new version and drops the row while the old one is being read.
        c.drop_row(s, id);
        c.fill(s, id, epoch, row("old"));
        assert_eq!(hit(&c, s, id), None, "the stale read is not kept");
        let Cached::Miss(epoch) = c.get(s, id) else { panic!() };
        c.fill(s, id, epoch, row("new"));
        assert_eq!(hit(&c, s, id), Some(b"new".to_vec()));
        c.drop_row(s, id);
        assert_eq!(hit(&c, s, id), None);
    }

    #[test]
    fn a_store_is_dropped_whole_and_others_stay() {
        let c = RowCache::new(BUDGET);
        let (a, b) = (Uuid::from_u128(1), Uuid::from_u128(2));
        for (store, id) in [(a, 10), (a, 11), (b, 12)] {
            let id = Uuid::from_u128(id);
            let Cached::Miss(e) = c.get(store, id) else { panic!() };
            c.fill(store, id, e, row("v"));
        }
        c.drop_store(a);
        assert_eq!(hit(&c, a, Uuid::from_u128(10)), None);
        assert_eq!(hit(&c, a, Uuid::from_u128(11)), None);
        assert_eq!(hit(&c, b, Uuid::from_u128(12)), Some(b"v".to_vec()));
    }

    #[test]
    fn a_full_shard_makes_room() {
        let c = RowCache::new(BUDGET);
        let store = Uuid::from_u128(1);
        let big: Arc<[u8]> = Arc::from(vec![0u8; c.shard_budget / 2 + 1 - 256]);
        let (mut held, mut tables) = (0, 0);
        for n in 0..(SHARDS * 8) as u128 {
            let id = Uuid::from_u128(n);
            let Cached::Miss(e) = c.get(store, id) else { panic!() };
            c.fill(store, id, e, big.clone());
        }
        for s in &c.shards {
            let s = s.lock().unwrap();
            assert!(s.bytes <= c.shard_budget && s.rows.len() <= 1);
            assert!(s.tables > 0 && s.tables < 1024, "tables {}", s.tables);
            assert_eq!(s.bytes, s.rows.values().map(|r| cost(r)).sum::<usize>() + s.tables);
            held += s.rows.len();
            tables += s.tables;
        }
        assert!(held > 0);
        let stats = c.meter.stats();
        let expected = (held as u64, held as u64 * cost(&big) as u64 + tables as u64);
        assert_eq!((stats.entries, stats.bytes), expected, "the meter counts what is held");
        assert_eq!(stats.misses, (SHARDS * 8) as u64);
        assert!(stats.bytes <= stats.budget);
        // The newest fill of a shard is the one it keeps.
        let last = Uuid::from_u128((SHARDS * 8 - 1) as u128);
        assert_eq!(hit(&c, store, last).map(|r| r.len()), Some(big.len()));
    }
}
