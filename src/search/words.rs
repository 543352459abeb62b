//! Word document lists: the documents of a segment that match one word of a query — its exact
//! term, its typo variants and, for the last word of a query, its completions — read once per
//! segment and word and kept. Segments never change, and shoppers repeat words far more than
//! whole queries, so a word is looked up in the term dictionary (the typo automaton walking it)
//! and its posting lists are read only the first time a segment meets it. The words of a query
//! are then intersected as sets, bit by bit where they are common, instead of walking their
//! posting lists document by document.
//!
//! A list is a bitset when the word is in more than one document in [`DENSE`] (where a bitset is
//! the smaller form), else the sorted document ids. Deleted documents stay in the lists; the
//! collector skips them, as it does for every query.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::mem::size_of;
use std::sync::{Arc, Mutex};

use tantivy::index::SegmentId;
use tantivy::postings::TermInfo;
use tantivy::query::{EnableScoring, Explanation, FuzzyTermQuery, Query, Scorer, Weight};
use tantivy::schema::{Field, IndexRecordOption, Term};
use tantivy::{COLLECT_BLOCK_BUFFER_LEN, DocId, DocSet, Score, Searcher, SegmentReader, TERMINATED, TantivyError};

use crate::memory::{CacheStats, Meter};

/// A word is kept as a bitset when more than one document in this many has it.
const DENSE: u64 = 32;

/// One word of a query as it matches one field.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct WordSpec {
    pub field: Field,
    pub word: String,
    /// Edits a matching term may be away from the word (0: the word itself).
    pub distance: u8,
    /// Whether terms that start with the word match too.
    pub prefix: bool,
}

/// The documents of one segment that match a word, ascending.
enum DocList {
    Bits { words: Box<[u64]>, len: usize },
    Sorted(Box<[DocId]>),
}

impl DocList {
    fn len(&self) -> usize {
        match self {
            DocList::Bits { len, .. } => *len,
            DocList::Sorted(docs) => docs.len(),
        }
    }

    fn bytes(&self) -> usize {
        match self {
            DocList::Bits { words, .. } => words.len() * 8,
            DocList::Sorted(docs) => docs.len() * 4,
        }
    }

    fn contains(&self, doc: DocId) -> bool {
        match self {
            DocList::Bits { words, .. } => words.get(doc as usize / 64).is_some_and(|w| w & (1 << (doc % 64)) != 0),
            DocList::Sorted(docs) => docs.binary_search(&doc).is_ok(),
        }
    }

    /// Reads the list of `spec` from `segment`'s term dictionary and postings.
    fn read(segment: &SegmentReader, spec: &WordSpec) -> tantivy::Result<DocList> {
        let index = segment.inverted_index(spec.field)?;
        let term = Term::from_field_text(spec.field, &spec.word);
        let mut infos: Vec<TermInfo> = Vec::new();
        if spec.distance > 0 {
            // The Levenshtein automaton accepts the word itself too.
            let dfa = FuzzyTermQuery::new(term.clone(), spec.distance, true).automaton()?;
            let mut stream = index.terms().search(&dfa).into_stream()?;
            while stream.advance() {
                infos.push(stream.value().clone());
            }
        } else if let Some(info) = index.get_term_info(&term)? {
            infos.push(info);
        }
        if spec.prefix {
            let range = index.terms().range().ge(spec.word.as_bytes());
            let range = match prefix_successor(spec.word.as_bytes()) {
                Some(end) => range.lt(end),
                None => range,
            };
            let mut stream = range.into_stream()?;
            while stream.advance() {
                infos.push(stream.value().clone());
            }
        }
        let max_doc = segment.max_doc();
        let postings: u64 = infos.iter().map(|i| u64::from(i.doc_freq)).sum();
        let each_doc = |f: &mut dyn FnMut(DocId)| -> tantivy::Result<()> {
            for info in &infos {
                let mut block = index.read_block_postings_from_terminfo(info, IndexRecordOption::Basic)?;
                while !block.docs().is_empty() {
                    block.docs().iter().for_each(|&d| f(d));
                    block.advance();
                }
            }
            Ok(())
        };
        if postings * DENSE > u64::from(max_doc) {
            let mut words = vec![0u64; (max_doc as usize).div_ceil(64)].into_boxed_slice();
            each_doc(&mut |d| {
                if let Some(w) = words.get_mut(d as usize / 64) {
                    *w |= 1 << (d % 64);
                }
            })?;
            let len = words.iter().map(|w| w.count_ones() as usize).sum();
            Ok(DocList::Bits { words, len })
        } else {
            let mut docs = Vec::with_capacity(postings as usize);
            each_doc(&mut |d| docs.push(d))?;
            if infos.len() > 1 {
                docs.sort_unstable();
                docs.dedup();
            }
            Ok(DocList::Sorted(docs.into_boxed_slice()))
        }
    }
}

/// The smallest byte string greater than every string starting with `prefix`.
pub fn prefix_successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xFF {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

/// The documents in every one of `lists`, ascending.
fn intersect(lists: &mut [Arc<DocList>]) -> Vec<DocId> {
    lists.sort_by_key(|l| l.len());
    let Some((first, rest)) = lists.split_first() else { return Vec::new() };
    match &**first {
        DocList::Sorted(docs) => docs.iter().copied().filter(|&d| rest.iter().all(|l| l.contains(d))).collect(),
        DocList::Bits { words, len } => {
            let mut out = Vec::with_capacity(*len);
            for (i, &word) in words.iter().enumerate() {
                let mut w = word;
                for l in rest {
                    if let DocList::Bits { words: other, .. } = &**l {
                        w &= other.get(i).copied().unwrap_or(0);
                    }
                }
                while w != 0 {
                    let d = i as DocId * 64 + w.trailing_zeros();
                    if rest.iter().all(|l| matches!(**l, DocList::Bits { .. }) || l.contains(d)) {
                        out.push(d);
                    }
                    w &= w - 1;
                }
            }
            out
        }
    }
}

type CacheKey = (SegmentId, WordSpec);

/// The bytes a kept list holds, as the allocator sizes them: its documents, its word and its
/// shared allocation (counts and the list's header). Its slot is the map's.
fn cost(spec: &WordSpec, list: &DocList) -> usize {
    use crate::memory::allocated;
    allocated(list.bytes()) + allocated(spec.word.len()) + allocated(2 * size_of::<usize>() + size_of::<DocList>())
}

#[derive(Default)]
struct Lists {
    map: HashMap<CacheKey, Arc<DocList>>,
    /// The [`cost`] of every kept list.
    bytes: usize,
    /// The segments some list is of.
    segments: HashSet<SegmentId>,
}

impl Lists {
    /// The lists' bytes and the maps', by capacity (kept when entries go).
    fn held(&self) -> usize {
        use crate::memory::map_bytes;
        self.bytes
            + map_bytes::<CacheKey, Arc<DocList>>(self.map.capacity())
            + map_bytes::<SegmentId, ()>(self.segments.capacity())
    }
}

/// The word lists of an index's segments, within a budget of bytes: past it the cache starts
/// afresh (a list is one read away, and the words shoppers repeat are soon read again).
pub struct WordCache {
    lists: Mutex<Lists>,
    budget: usize,
    /// Lists found (hits) and read (misses), and what is kept.
    meter: Meter,
}

impl WordCache {
    pub fn new(budget_bytes: u64) -> WordCache {
        WordCache {
            lists: Mutex::default(),
            budget: usize::try_from(budget_bytes).unwrap_or(usize::MAX),
            meter: Meter::new(budget_bytes),
        }
    }

    /// Lists found (hits) and read (misses), and the bytes and lists kept.
    pub fn stats(&self) -> CacheStats {
        self.meter.stats()
    }

    fn list(&self, segment: &SegmentReader, spec: &WordSpec) -> tantivy::Result<Arc<DocList>> {
        let key = (segment.segment_id(), spec.clone());
        if let Some(list) = self.lists.lock().ok().and_then(|m| m.map.get(&key).cloned()) {
            self.meter.hit();
            return Ok(list);
        }
        self.meter.miss();
        // Read outside the lock: another query may read the same list meanwhile, which is harmless.
        let list = Arc::new(DocList::read(segment, spec)?);
        let size = cost(spec, &list);
        // A list larger than the whole budget serves this query only.
        if size <= self.budget
            && let Ok(mut m) = self.lists.lock()
        {
            if let Some(old) = m.map.remove(&key) {
                m.bytes -= cost(&key.1, &old);
            }
            if m.held() + size > self.budget {
                *m = Lists::default();
            }
            m.bytes += size;
            m.segments.insert(key.0);
            m.map.insert(key, list.clone());
            self.meter.holds(m.held() as u64, m.map.len() as u64);
        }
        Ok(list)
    }

    /// Forgets the lists of segments `searcher` no longer has (merged away).
    pub fn retain_segments_of(&self, searcher: &Searcher) {
        let readers = searcher.segment_readers();
        let live = |segment: &SegmentId| readers.iter().any(|r| r.segment_id() == *segment);
        let Ok(mut m) = self.lists.lock() else { return };
        if m.segments.iter().all(live) {
            return;
        }
        let Lists { map, bytes, segments } = &mut *m;
        segments.retain(live);
        map.retain(|key, list| {
            let keep = segments.contains(&key.0);
            if !keep {
                *bytes -= cost(&key.1, list);
            }
            keep
        });
        self.meter.holds(m.held() as u64, m.map.len() as u64);
    }
}

/// The documents that match every one of `words`, each scored `score` (0: the query adds no
/// score of its own, and a search made only of such queries is collected without scoring).
#[derive(Clone)]
pub struct WordsQuery {
    pub words: Vec<WordSpec>,
    pub score: Score,
    pub cache: Arc<WordCache>,
}

impl fmt::Debug for WordsQuery {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WordsQuery").field("words", &self.words).field("score", &self.score).finish()
    }
}

impl Query for WordsQuery {
    fn weight(&self, _: EnableScoring<'_>) -> tantivy::Result<Box<dyn Weight>> {
        Ok(Box::new(self.clone()))
    }
}

impl Weight for WordsQuery {
    fn scorer(&self, reader: &SegmentReader, boost: Score) -> tantivy::Result<Box<dyn Scorer>> {
        let mut lists = self.words.iter().map(|w| self.cache.list(reader, w)).collect::<tantivy::Result<Vec<_>>>()?;
        Ok(Box::new(Docs { docs: intersect(&mut lists), at: 0, score: self.score * boost }))
    }

    fn explain(&self, reader: &SegmentReader, doc: DocId) -> tantivy::Result<Explanation> {
        let mut scorer = self.scorer(reader, 1.0)?;
        if scorer.seek(doc) == doc {
            Ok(Explanation::new("WordsQuery", scorer.score()))
        } else {
            Err(TantivyError::InvalidArgument(format!("document {doc} does not match")))
        }
    }
}

/// A sorted list of documents with one score, as a tantivy scorer.
struct Docs {
    docs: Vec<DocId>,
    at: usize,
    score: Score,
}

impl DocSet for Docs {
    fn advance(&mut self) -> DocId {
        self.at = (self.at + 1).min(self.docs.len());
        self.doc()
    }

    fn seek(&mut self, target: DocId) -> DocId {
        let rest = self.docs.get(self.at..).unwrap_or_default();
        self.at += rest.partition_point(|&d| d < target);
        self.doc()
    }

    fn doc(&self) -> DocId {
        self.docs.get(self.at).copied().unwrap_or(TERMINATED)
    }

    /// A block copied at once (the default advances document by document through dynamic calls).
    fn fill_buffer(&mut self, buffer: &mut [DocId; COLLECT_BLOCK_BUFFER_LEN]) -> usize {
        let rest = self.docs.get(self.at..).unwrap_or_default();
        let n = rest.len().min(buffer.len());
        buffer[..n].copy_from_slice(&rest[..n]);
        self.at += n;
        n
    }

    fn size_hint(&self) -> u32 {
        self.docs.len() as u32
    }
}

impl Scorer for Docs {
    fn score(&mut self) -> Score {
        self.score
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bits(docs: &[DocId], max_doc: usize) -> Arc<DocList> {
        let mut words = vec![0u64; max_doc.div_ceil(64)].into_boxed_slice();
        for &d in docs {
            words[d as usize / 64] |= 1 << (d % 64);
        }
        Arc::new(DocList::Bits { words, len: docs.len() })
    }

    fn sorted(docs: &[DocId]) -> Arc<DocList> {
        Arc::new(DocList::Sorted(docs.into()))
    }

    #[test]
    fn lists_intersect_in_every_form() {
        let evens: Vec<DocId> = (0..300).step_by(2).collect();
        let threes: Vec<DocId> = (0..300).step_by(3).collect();
        let sixes: Vec<DocId> = (0..300).step_by(6).collect();
        assert_eq!(intersect(&mut [bits(&evens, 300), bits(&threes, 300)]), sixes);
        assert_eq!(intersect(&mut [sorted(&evens), bits(&threes, 300)]), sixes);
        assert_eq!(intersect(&mut [bits(&evens, 300), sorted(&threes)]), sixes);
        assert_eq!(intersect(&mut [sorted(&evens), sorted(&threes), sorted(&[0, 6, 7, 299])]), [0, 6]);
        // A bitset smaller than a sorted list (its words overlapped) is still intersected with it.
        assert_eq!(intersect(&mut [bits(&[6, 7, 12], 300), sorted(&sixes)]), [6, 12]);
        assert_eq!(intersect(&mut [sorted(&[]), bits(&evens, 300)]), Vec::<DocId>::new());
    }

    #[test]
    fn docs_advance_and_seek_like_postings() {
        let mut d = Docs { docs: vec![3, 8, 9, 40], at: 0, score: 0.0 };
        assert_eq!(d.doc(), 3);
        assert_eq!(d.seek(8), 8);
        assert_eq!(d.seek(10), 40);
        assert_eq!(d.advance(), TERMINATED);
        assert_eq!(d.advance(), TERMINATED);
        assert_eq!(Docs { docs: vec![], at: 0, score: 0.0 }.doc(), TERMINATED);

        let mut many = Docs { docs: (0..150).map(|i| i * 2).collect(), at: 1, score: 0.0 };
        let mut buffer = [0; COLLECT_BLOCK_BUFFER_LEN];
        assert_eq!(many.fill_buffer(&mut buffer), 64);
        assert_eq!((buffer[0], buffer[63], many.doc()), (2, 128, 130));
        assert_eq!(many.fill_buffer(&mut buffer), 64);
        assert_eq!(many.fill_buffer(&mut buffer), 21);
        assert_eq!((buffer[20], many.doc()), (298, TERMINATED));
        assert_eq!(many.fill_buffer(&mut buffer), 0);
    }

    /// One segment of `texts`, one document each, in a field of plain words.
    fn segment(texts: &[&str]) -> (tantivy::IndexReader, Field) {
        let mut schema = tantivy::schema::Schema::builder();
        let field = schema.add_text_field("w", tantivy::schema::TEXT);
        let index = tantivy::Index::create_in_ram(schema.build());
        let mut writer: tantivy::IndexWriter = index.writer_with_num_threads(1, 15 << 20).unwrap();
        for t in texts {
            writer.add_document(tantivy::doc!(field => *t)).unwrap();
        }
        writer.commit().unwrap();
        (index.reader().unwrap(), field)
    }

    fn exact(field: Field, word: &str) -> WordSpec {
        WordSpec { field, word: word.into(), distance: 0, prefix: false }
    }

    #[test]
    fn word_lists_keep_within_their_budget_and_report_it() {
        // 100 documents, each with a word of its own and the word "common".
        let texts: Vec<String> = (0..100).map(|i| format!("w{i:02} common")).collect();
        let (reader, field) = segment(&texts.iter().map(String::as_str).collect::<Vec<_>>());
        let searcher = reader.searcher();
        let seg = &searcher.segment_readers()[0];
        // A rare word is one sorted document id (4 bytes).
        let one = cost(&exact(field, "w00"), &DocList::Sorted(Box::new([0])));
        // The maps as they are once three lists of one segment are kept, and stay.
        let maps = crate::memory::map_bytes::<CacheKey, Arc<DocList>>(3) + crate::memory::map_bytes::<SegmentId, ()>(3);
        let budget = maps + 3 * one + one / 2;
        let cache = WordCache::new(budget as u64);

        for (i, word) in ["w00", "w01", "w02"].into_iter().enumerate() {
            let list = cache.list(seg, &exact(field, word)).unwrap();
            assert_eq!(list.len(), 1);
            assert!(list.contains(i as DocId) && !list.contains(i as DocId + 1));
        }
        assert_eq!(
            cache.stats(),
            CacheStats { budget: budget as u64, bytes: (maps + 3 * one) as u64, entries: 3, hits: 0, misses: 3 }
        );
        assert_eq!(cache.list(seg, &exact(field, "w00")).unwrap().len(), 1);
        assert_eq!(cache.stats().hits, 1);

        // The fourth would pass the budget: the cache starts afresh with it.
        cache.list(seg, &exact(field, "w03")).unwrap();
        assert_eq!((cache.stats().bytes, cache.stats().entries), ((maps + one) as u64, 1));
        cache.list(seg, &exact(field, "w00")).unwrap();
        cache.list(seg, &exact(field, "w03")).unwrap();
        assert_eq!(
            cache.stats(),
            CacheStats { budget: budget as u64, bytes: (maps + 2 * one) as u64, entries: 2, hits: 2, misses: 5 }
        );

        // A word of every document is a bitset: two words of 64 documents.
        let common = cache.list(seg, &exact(field, "common")).unwrap();
        assert_eq!((common.len(), common.bytes()), (100, 16));
        let dense = cost(&exact(field, "common"), &common);
        assert!(dense > one);
        assert_eq!(cache.stats().bytes, (maps + 2 * one + dense) as u64);
        assert!(cache.stats().bytes <= budget as u64);
        {
            let m = cache.lists.lock().unwrap();
            assert_eq!(m.bytes, m.map.iter().map(|(k, l)| cost(&k.1, l)).sum::<usize>());
        }

        // Segments merged away take their lists with them; the maps keep their room.
        let (other, _) = segment(&["x"]);
        cache.retain_segments_of(&other.searcher());
        assert_eq!((cache.stats().bytes, cache.stats().entries), (maps as u64, 0));
    }

    #[test]
    fn a_list_larger_than_the_budget_is_used_but_not_kept() {
        let (reader, field) = segment(&["mug", "lamp mug"]);
        let searcher = reader.searcher();
        let seg = &searcher.segment_readers()[0];
        let budget = cost(&exact(field, "mug"), &DocList::Sorted(Box::new([0, 1]))) as u64 - 1;
        let cache = WordCache::new(budget);
        assert_eq!(cache.list(seg, &exact(field, "mug")).unwrap().len(), 2);
        assert_eq!(cache.list(seg, &exact(field, "mug")).unwrap().len(), 2);
        assert_eq!(cache.stats(), CacheStats { budget, bytes: 0, entries: 0, hits: 0, misses: 2 });
    }

    #[test]
    fn prefix_successor_bounds_the_prefix() {
        assert_eq!(prefix_successor(b"ab"), Some(b"ac".to_vec()));
        assert_eq!(prefix_successor(&[b'a', 0xFF]), Some(b"b".to_vec()));
        assert_eq!(prefix_successor(&[0xFF]), None);
    }
}
