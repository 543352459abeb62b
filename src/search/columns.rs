//! The sort and id columns of the index's segments, kept within a budget of bytes for the
//! collector of every search ([`crate::search::query::PageCollector`]).

use std::collections::HashMap;
use std::mem::size_of;
use std::sync::{Arc, Mutex};

use tantivy::columnar::{Column, StrColumn};
use tantivy::index::SegmentId;
use tantivy::{DocId, Searcher, SegmentReader};

use crate::memory::{CacheStats, Meter};

/// The fast-field columns a page is sorted and settled by, of one segment. Opening a column
/// decodes its block index, which cost more than collecting a typical query's hits; segments
/// never change, so their columns are opened once ([`ColumnCache`]). The product ids, read for
/// nearly every match (they settle ties), are decoded once into plain arrays by document when
/// the cache has room for them ([`Ids`]).
#[derive(Clone)]
pub(crate) struct SegmentColumns {
    pub(crate) ids: Ids,
    pub(crate) price: Option<Column<i64>>,
    pub(crate) created: Option<Column<i64>>,
    pub(crate) title: Option<StrColumn>,
}

/// The product ids of a segment's documents, as two halves: decoded into arrays (a load each),
/// or, when the columns' share has no room for the arrays, read from the mapped columns for
/// each document asked (a few times slower per match, but a query never decodes a whole
/// segment: a share smaller than the index makes search slower, never stalled).
#[derive(Clone)]
pub(crate) enum Ids {
    Decoded { hi: Arc<[u64]>, lo: Arc<[u64]> },
    Mapped { hi: Column<u64>, lo: Column<u64> },
}

impl Ids {
    pub(crate) fn hi(&self, doc: DocId) -> u64 {
        match self {
            Ids::Decoded { hi, .. } => hi.get(doc as usize).copied().unwrap_or(0),
            Ids::Mapped { hi, .. } => hi.first(doc).unwrap_or(0),
        }
    }

    pub(crate) fn lo(&self, doc: DocId) -> u64 {
        match self {
            Ids::Decoded { lo, .. } => lo.get(doc as usize).copied().unwrap_or(0),
            Ids::Mapped { lo, .. } => lo.first(doc).unwrap_or(0),
        }
    }

    /// The bytes the arrays of a segment of `docs` documents take, with their allocations' counts.
    fn decoded_bytes(docs: usize) -> usize {
        2 * (docs * 8 + 2 * size_of::<usize>())
    }
}

/// What an opened column holds in memory besides the index file (which is mapped, not copied):
/// its handles and, for the block codecs, a few words per block of 512 documents.
const OPENED_COLUMN: usize = 256;
const OPENED_COLUMN_PER_BLOCK: usize = 48;

impl SegmentColumns {
    /// The segment's columns, its ids decoded into arrays when `decode`.
    fn open(segment: &SegmentReader, decode: bool) -> tantivy::Result<SegmentColumns> {
        let ff = segment.fast_fields();
        let (hi, lo) = (ff.u64("id_hi")?, ff.u64("id_lo")?);
        let ids = match decode {
            true => Ids::Decoded { hi: by_doc(&hi, segment.max_doc()), lo: by_doc(&lo, segment.max_doc()) },
            false => Ids::Mapped { hi, lo },
        };
        Ok(SegmentColumns {
            ids,
            price: ff.column_opt("price")?,
            created: ff.column_opt("created")?,
            title: ff.str("title_sort")?,
        })
    }

    /// The bytes these columns hold for a segment of `docs` documents.
    fn bytes(&self, docs: usize) -> usize {
        let opened = [self.price.is_some(), self.created.is_some(), self.title.is_some()].iter().filter(|o| **o).count();
        SegmentColumns::cost(docs, matches!(self.ids, Ids::Decoded { .. }), opened)
    }

    /// What the columns of a segment of `docs` documents hold with `opened` sort columns: the id
    /// arrays when decoded (8 bytes a document each), what the opened columns decoded, and the
    /// cache's entry.
    fn cost(docs: usize, decoded: bool, opened: usize) -> usize {
        let per_column = OPENED_COLUMN + docs.div_ceil(512) * OPENED_COLUMN_PER_BLOCK;
        let ids = if decoded { Ids::decoded_bytes(docs) } else { 2 * per_column };
        ids + opened * per_column + size_of::<(SegmentId, Kept)>() + 1
    }
}

/// A column's value of every document (0 where it has none).
fn by_doc(column: &Column<u64>, max_doc: DocId) -> Arc<[u64]> {
    (0..max_doc).map(|doc| column.first(doc).unwrap_or(0)).collect()
}

/// The columns of one segment as kept, with when they were last used.
struct Kept {
    columns: SegmentColumns,
    bytes: usize,
    used: u64,
}

#[derive(Default)]
struct Segments {
    map: HashMap<SegmentId, Kept>,
    /// The [`SegmentColumns::bytes`] of every kept segment.
    bytes: usize,
    /// Counts uses: the segment with the smallest `used` is the least recently used.
    clock: u64,
}

/// The opened columns of the index's segments, within a budget of bytes. A segment's ids are
/// decoded only into the room left: every query reads every segment, so decoding one segment's
/// ids at the price of another's would decode again on every query (least recently used is
/// the worst order for a cycle). A segment without room reads its ids from the mapped columns
/// and is kept all the same, at the small cost of its opened columns. When even those would
/// pass the budget, the least recently used segments are dropped (opened again when next
/// needed); columns larger than the whole budget serve their query and are not kept.
pub struct ColumnCache {
    segments: Mutex<Segments>,
    budget: usize,
    meter: Meter,
}

impl ColumnCache {
    pub fn new(budget_bytes: u64) -> ColumnCache {
        ColumnCache {
            segments: Mutex::default(),
            budget: usize::try_from(budget_bytes).unwrap_or(usize::MAX),
            meter: Meter::new(budget_bytes),
        }
    }

    /// Segments found (hits) and opened (misses), and the bytes and segments kept.
    pub fn stats(&self) -> CacheStats {
        self.meter.stats()
    }

    /// The columns of `segment`, kept or opened now.
    pub(crate) fn of(&self, segment: &SegmentReader) -> tantivy::Result<SegmentColumns> {
        let id = segment.segment_id();
        if let Ok(mut m) = self.segments.lock() {
            m.clock += 1;
            let now = m.clock;
            if let Some(kept) = m.map.get_mut(&id) {
                kept.used = now;
                self.meter.hit();
                return Ok(kept.columns.clone());
            }
        }
        self.meter.miss();
        let docs = segment.max_doc() as usize;
        let room = self.segments.lock().map_or(0, |m| self.budget.saturating_sub(m.bytes));
        // Decoded when the whole entry fits the room with every sort column opened, so that no
        // other segment is evicted for it. Opened outside the lock: another query may open the
        // same segment meanwhile, which is harmless (the loop below keeps the budget).
        let columns = SegmentColumns::open(segment, SegmentColumns::cost(docs, true, 3) <= room)?;
        let bytes = columns.bytes(docs);
        if bytes <= self.budget
            && let Ok(mut m) = self.segments.lock()
        {
            if let Some(old) = m.map.remove(&id) {
                m.bytes -= old.bytes;
            }
            while m.bytes + bytes > self.budget {
                let Some(oldest) = m.map.iter().min_by_key(|(_, k)| k.used).map(|(id, _)| *id) else { break };
                if let Some(old) = m.map.remove(&oldest) {
                    m.bytes -= old.bytes;
                }
            }
            m.clock += 1;
            let used = m.clock;
            m.bytes += bytes;
            m.map.insert(id, Kept { columns: columns.clone(), bytes, used });
            self.meter.holds(m.bytes as u64, m.map.len() as u64);
        }
        Ok(columns)
    }

    /// Forgets the segments `searcher` no longer has (merged away).
    pub fn retain_segments_of(&self, searcher: &Searcher) {
        let readers = searcher.segment_readers();
        let live = |segment: &SegmentId| readers.iter().any(|r| r.segment_id() == *segment);
        let Ok(mut m) = self.segments.lock() else { return };
        if m.map.keys().all(live) {
            return;
        }
        let Segments { map, bytes, .. } = &mut *m;
        map.retain(|id, kept| {
            let keep = live(id);
            if !keep {
                *bytes -= kept.bytes;
            }
            keep
        });
        self.meter.holds(*bytes as u64, map.len() as u64);
    }
}

#[cfg(test)]
mod tests {
    use tantivy::indexer::NoMergePolicy;
    use tantivy::{Index, IndexReader, IndexWriter};

    use super::*;
    use crate::search::schema;

    /// An index with one segment of each of `sizes` documents, every sort column filled.
    fn index(sizes: &[u64]) -> IndexReader {
        let (s, f) = schema::build();
        let index = Index::create_in_ram(s);
        schema::register_analyzers(&index);
        let mut writer: IndexWriter = index.writer_with_num_threads(1, 15 << 20).unwrap();
        writer.set_merge_policy(Box::new(NoMergePolicy));
        for &n in sizes {
            for i in 0..n {
                writer
                    .add_document(tantivy::doc!(
                        f.store => "s", f.id_hi => n, f.id_lo => i, f.title => "mug",
                        f.price => i as i64, f.created => i as i64, f.title_sort => "mug"
                    ))
                    .unwrap();
            }
            writer.commit().unwrap();
        }
        index.reader().unwrap()
    }

    /// The bytes of each segment kept, in order.
    fn held(cache: &ColumnCache) -> Vec<usize> {
        let m = cache.segments.lock().unwrap();
        let mut bytes: Vec<usize> = m.map.values().map(|k| k.bytes).collect();
        bytes.sort();
        bytes
    }

    fn ids_of(ids: &Ids, docs: u32) -> Vec<(u64, u64)> {
        (0..docs).map(|d| (ids.hi(d), ids.lo(d))).collect()
    }

    /// What `segment`'s columns cost held, with its ids decoded or not.
    fn cost(segment: &SegmentReader, decode: bool) -> usize {
        SegmentColumns::open(segment, decode).unwrap().bytes(segment.max_doc() as usize)
    }

    #[test]
    fn columns_are_counted_by_their_arrays_and_opened_columns_and_read_alike_either_way() {
        let reader = index(&[10]);
        let searcher = reader.searcher();
        let segment = &searcher.segment_readers()[0];
        let expected: Vec<(u64, u64)> = (0..10).map(|i| (10, i)).collect();
        let (decoded, mapped) = (SegmentColumns::open(segment, true).unwrap(), SegmentColumns::open(segment, false).unwrap());
        assert!(matches!(decoded.ids, Ids::Decoded { .. }) && matches!(mapped.ids, Ids::Mapped { .. }));
        assert_eq!((ids_of(&decoded.ids, 10), ids_of(&mapped.ids, 10)), (expected.clone(), expected));
        let column = OPENED_COLUMN + OPENED_COLUMN_PER_BLOCK;
        let entry = size_of::<(SegmentId, Kept)>() + 1;
        assert_eq!(decoded.bytes(10), 2 * (10 * 8 + 16) + 3 * column + entry);
        assert_eq!(mapped.bytes(10), 2 * column + 3 * column + entry);
    }

    #[test]
    fn ids_are_decoded_into_the_room_left_and_read_from_their_columns_beyond_it() {
        let reader = index(&[10, 100, 700]);
        let searcher = reader.searcher();
        let by_docs = |n: u32| searcher.segment_readers().iter().find(|s| s.max_doc() == n).unwrap();
        let (a, b, c) = (by_docs(10), by_docs(100), by_docs(700));
        // Room for a's and b's arrays and c's columns, not for c's arrays.
        let budget = cost(a, true) + cost(b, true) + cost(c, false) + 1;
        assert!(budget < cost(a, true) + cost(b, true) + cost(c, true));
        let cache = ColumnCache::new(budget as u64);
        for round in 0..3 {
            for s in [a, b, c] {
                let columns = cache.of(s).unwrap();
                assert_eq!(
                    ids_of(&columns.ids, s.max_doc()),
                    (0..s.max_doc() as u64).map(|i| (s.max_doc() as u64, i)).collect::<Vec<_>>()
                );
                assert_eq!(matches!(columns.ids, Ids::Decoded { .. }), s.max_doc() < 700, "round {round}");
            }
        }
        let mut kept = vec![cost(a, true), cost(b, true), cost(c, false)];
        kept.sort();
        assert_eq!(held(&cache), kept);
        let stats =
            CacheStats { budget: budget as u64, bytes: kept.iter().sum::<usize>() as u64, entries: 3, hits: 6, misses: 3 };
        assert_eq!(cache.stats(), stats, "no segment opened again after the first round");
    }

    #[test]
    fn the_least_recently_used_segments_go_when_even_their_columns_pass_the_budget() {
        let reader = index(&[2000, 3000, 4000]);
        let searcher = reader.searcher();
        let by_docs = |n: u32| searcher.segment_readers().iter().find(|s| s.max_doc() == n).unwrap();
        let (a, b, c) = (by_docs(2000), by_docs(3000), by_docs(4000));
        let (ca, cb, cc) = (cost(a, false), cost(b, false), cost(c, false));
        assert!(ca < cb && cb < cc);
        // Any two segments' columns fit, never all three, and no segment's arrays.
        let budget = cb + cc;
        assert!(budget < Ids::decoded_bytes(2000));
        let cache = ColumnCache::new(budget as u64);

        cache.of(a).unwrap();
        cache.of(b).unwrap();
        assert_eq!(cache.of(a).unwrap().ids.lo(1999), 1999);
        cache.of(c).unwrap();
        assert_eq!(held(&cache), [ca, cc], "b was the least recently used");
        let stats = CacheStats { budget: budget as u64, bytes: (ca + cc) as u64, entries: 2, hits: 1, misses: 3 };
        assert_eq!(cache.stats(), stats);

        assert_eq!(cache.of(b).unwrap().ids.lo(2999), 2999);
        assert_eq!(held(&cache), [cb, cc], "then a was");
        let stats = CacheStats { budget: budget as u64, bytes: (cb + cc) as u64, entries: 2, hits: 1, misses: 4 };
        assert_eq!(cache.stats(), stats);

        // Segments merged away are forgotten.
        let other = index(&[1]);
        cache.retain_segments_of(&other.searcher());
        assert_eq!((cache.stats().bytes, cache.stats().entries), (0, 0));
    }

    #[test]
    fn a_segment_larger_than_the_budget_is_used_but_not_kept() {
        let reader = index(&[10]);
        let searcher = reader.searcher();
        let segment = &searcher.segment_readers()[0];
        // Smaller than its columns either way (a small segment's arrays cost less than columns).
        let budget = cost(segment, true).min(cost(segment, false)) as u64 - 1;
        let cache = ColumnCache::new(budget);
        for _ in 0..2 {
            assert_eq!(ids_of(&cache.of(segment).unwrap().ids, 10), (0..10).map(|i| (10, i)).collect::<Vec<_>>());
        }
        assert_eq!(cache.stats(), CacheStats { budget, bytes: 0, entries: 0, hits: 0, misses: 2 });
    }
}
