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
use std::sync::{Arc, Mutex};

use tantivy::index::SegmentId;
use tantivy::postings::TermInfo;
use tantivy::query::{EnableScoring, Explanation, FuzzyTermQuery, Query, Scorer, Weight};
use tantivy::schema::{Field, IndexRecordOption, Term};
use tantivy::{COLLECT_BLOCK_BUFFER_LEN, DocId, DocSet, Score, Searcher, SegmentReader, TERMINATED, TantivyError};

/// A word is kept as a bitset when more than one document in this many has it.
const DENSE: u64 = 32;
/// Bytes of lists kept per index; past it the cache starts afresh (a list is one read away).
const BUDGET: usize = 64 << 20;

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

#[derive(Default)]
struct Lists {
    map: HashMap<CacheKey, Arc<DocList>>,
    bytes: usize,
    /// The segments some list is of.
    segments: HashSet<SegmentId>,
}

/// The word lists of an index's segments.
#[derive(Default)]
pub struct WordCache(Mutex<Lists>);

impl WordCache {
    fn list(&self, segment: &SegmentReader, spec: &WordSpec) -> tantivy::Result<Arc<DocList>> {
        let key = (segment.segment_id(), spec.clone());
        if let Some(list) = self.0.lock().ok().and_then(|m| m.map.get(&key).cloned()) {
            return Ok(list);
        }
        // Read outside the lock: another query may read the same list meanwhile, which is harmless.
        let list = Arc::new(DocList::read(segment, spec)?);
        if let Ok(mut m) = self.0.lock() {
            if m.bytes + list.bytes() > BUDGET {
                *m = Lists::default();
            }
            m.bytes += list.bytes();
            m.segments.insert(key.0);
            if let Some(old) = m.map.insert(key, list.clone()) {
                m.bytes -= old.bytes();
            }
        }
        Ok(list)
    }

    /// Forgets the lists of segments `searcher` no longer has (merged away).
    pub fn retain_segments_of(&self, searcher: &Searcher) {
        let readers = searcher.segment_readers();
        let live = |segment: &SegmentId| readers.iter().any(|r| r.segment_id() == *segment);
        let Ok(mut m) = self.0.lock() else { return };
        if m.segments.iter().all(live) {
            return;
        }
        let Lists { map, bytes, segments } = &mut *m;
        segments.retain(live);
        map.retain(|(segment, _), list| {
            let keep = segments.contains(segment);
            if !keep {
                *bytes -= list.bytes();
            }
            keep
        });
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

    #[test]
    fn prefix_successor_bounds_the_prefix() {
        assert_eq!(prefix_successor(b"ab"), Some(b"ac".to_vec()));
        assert_eq!(prefix_successor(&[b'a', 0xFF]), Some(b"b".to_vec()));
        assert_eq!(prefix_successor(&[0xFF]), None);
    }
}
