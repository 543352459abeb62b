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
/// nearly every match (they settle ties), are decoded once into plain arrays by document.
#[derive(Clone)]
pub(crate) struct SegmentColumns {
    pub(crate) id_hi: Arc<[u64]>,
    pub(crate) id_lo: Arc<[u64]>,
    pub(crate) price: Option<Column<i64>>,
    pub(crate) created: Option<Column<i64>>,
    pub(crate) title: Option<StrColumn>,
}

/// What an opened column holds in memory besides the index file (which is mapped, not copied):
/// its handles and, for the block codecs, a few words per block of 512 documents.
const OPENED_COLUMN: usize = 256;
const OPENED_COLUMN_PER_BLOCK: usize = 48;

impl SegmentColumns {
    fn open(segment: &SegmentReader) -> tantivy::Result<SegmentColumns> {
        let ff = segment.fast_fields();
        Ok(SegmentColumns {
            id_hi: by_doc(&ff.u64("id_hi")?, segment.max_doc()),
            id_lo: by_doc(&ff.u64("id_lo")?, segment.max_doc()),
            price: ff.column_opt("price")?,
            created: ff.column_opt("created")?,
            title: ff.str("title_sort")?,
        })
    }

    /// The bytes these columns hold: the id arrays (8 bytes a document each, and their shared
    /// allocation's counts), what the opened columns decoded, and the cache's entry.
    fn bytes(&self) -> usize {
        let array = |a: &Arc<[u64]>| a.len() * 8 + 2 * size_of::<usize>();
        let opened = [self.price.is_some(), self.created.is_some(), self.title.is_some()].iter().filter(|o| **o).count();
        let per_column = OPENED_COLUMN + self.id_hi.len().div_ceil(512) * OPENED_COLUMN_PER_BLOCK;
        array(&self.id_hi) + array(&self.id_lo) + opened * per_column + size_of::<(SegmentId, Kept)>() + 1
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

/// The opened columns of the index's segments, within a budget of bytes. When a segment's
/// columns would pass it, the least recently used segments are dropped (their columns are
/// opened again when next needed); a segment larger than the whole budget serves its query and
/// is not kept.
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
        // Opened outside the lock: another query may open the same segment meanwhile, which is
        // harmless.
        let columns = SegmentColumns::open(segment)?;
        let bytes = columns.bytes();
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

    fn held(cache: &ColumnCache) -> Vec<u32> {
        let m = cache.segments.lock().unwrap();
        let mut docs: Vec<u32> = m.map.values().map(|k| k.columns.id_hi.len() as u32).collect();
        docs.sort();
        docs
    }

    #[test]
    fn columns_are_counted_by_their_arrays_and_opened_columns() {
        let reader = index(&[10]);
        let searcher = reader.searcher();
        let columns = SegmentColumns::open(&searcher.segment_readers()[0]).unwrap();
        assert_eq!(&columns.id_lo[..], (0..10).collect::<Vec<u64>>());
        assert_eq!(&columns.id_hi[..], [10; 10]);
        let arrays = 2 * (10 * 8 + 16);
        let opened = 3 * (OPENED_COLUMN + OPENED_COLUMN_PER_BLOCK);
        assert_eq!(columns.bytes(), arrays + opened + size_of::<(SegmentId, Kept)>() + 1);
    }

    #[test]
    fn the_least_recently_used_segments_go_when_the_budget_is_reached() {
        let reader = index(&[10, 100, 700]);
        let searcher = reader.searcher();
        let by_docs = |n: u32| searcher.segment_readers().iter().find(|s| s.max_doc() == n).unwrap();
        let (a, b, c) = (by_docs(10), by_docs(100), by_docs(700));
        let cost = |s: &SegmentReader| SegmentColumns::open(s).unwrap().bytes();
        let (ca, cb, cc) = (cost(a), cost(b), cost(c));
        assert!(ca < cb && cb < cc);
        // Any two segments fit, never all three.
        let budget = cb + cc;
        let cache = ColumnCache::new(budget as u64);

        cache.of(a).unwrap();
        cache.of(b).unwrap();
        assert_eq!(&cache.of(a).unwrap().id_lo[..], (0..10).collect::<Vec<u64>>());
        cache.of(c).unwrap();
        assert_eq!(held(&cache), [10, 700], "b was the least recently used");
        let stats = CacheStats { budget: budget as u64, bytes: (ca + cc) as u64, entries: 2, hits: 1, misses: 3 };
        assert_eq!(cache.stats(), stats);

        assert_eq!(cache.of(b).unwrap().id_lo.len(), 100);
        assert_eq!(held(&cache), [100, 700], "then a was");
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
        let budget = SegmentColumns::open(segment).unwrap().bytes() as u64 - 1;
        let cache = ColumnCache::new(budget);
        for _ in 0..2 {
            assert_eq!(&cache.of(segment).unwrap().id_lo[..], (0..10).collect::<Vec<u64>>());
        }
        assert_eq!(cache.stats(), CacheStats { budget, bytes: 0, entries: 0, hits: 0, misses: 2 });
    }
}
