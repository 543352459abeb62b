//! Product queries: the tantivy query of a request, a collector that sorts, pages and counts in
//! one pass, and the opaque cursor of deep paging.
//!
//! Every sort is a total order: the sort key, then the product id (ascending; descending for
//! `created_desc`, where ids are time-ordered like the key). A cursor is the
//! (sort key, id) of the last hit of a page (search-after): the next page holds the hits strictly
//! after it, so paging never repeats or skips a product that stays put, however deep it goes.
//! Relevance cursors carry the score; scores shift a little as the index grows, which is the
//! usual price of relevance paging.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashSet};
use std::ops::Bound;
use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use tantivy::collector::{Collector, SegmentCollector};
use tantivy::columnar::{Column, StrColumn};
use tantivy::query::{
    AllQuery, BooleanQuery, BoostQuery, ConstScoreQuery, EmptyQuery, InvertedIndexRangeQuery, Occur, Query, TermQuery,
};
use tantivy::schema::{Field, IndexRecordOption, Term};
use tantivy::tokenizer::TextAnalyzer;
use tantivy::{DocId, Score, Searcher, SegmentOrdinal, SegmentReader};
use uuid::Uuid;

use crate::domain::product::Status;
use crate::error::{ApiError, ApiResult};
use crate::search::columns::{ColumnCache, Ids};
use crate::search::schema::{Fields, code_text, store_term};
use crate::search::words::{WordCache, WordSpec, WordsQuery, prefix_successor};

/// Which fields `q` is matched against (`searchBy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SearchBy {
    /// Title and variant titles (typo-tolerant), sku and barcode (exact and prefix).
    All,
    Title,
    Sku,
    VariantTitle,
    Barcode,
}

impl SearchBy {
    /// The accepted values, as the API spells them.
    pub const NAMES: &'static [&'static str] = &["all", "title", "sku", "variantTitle", "barcode"];

    pub fn parse(s: &str) -> Option<SearchBy> {
        Some(match s {
            "all" => SearchBy::All,
            "title" => SearchBy::Title,
            "sku" => SearchBy::Sku,
            "variantTitle" => SearchBy::VariantTitle,
            "barcode" => SearchBy::Barcode,
            _ => return None,
        })
    }
}

/// The order of the hits (`sort`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Sort {
    Relevance = 0,
    PriceAsc = 1,
    PriceDesc = 2,
    TitleAsc = 3,
    TitleDesc = 4,
    CreatedDesc = 5,
}

impl Sort {
    /// The accepted values, as the API spells them.
    pub const NAMES: &'static [&'static str] =
        &["relevance", "price_asc", "price_desc", "title_asc", "title_desc", "created_desc"];

    pub fn parse(s: &str) -> Option<Sort> {
        let i = Sort::NAMES.iter().position(|n| *n == s)?;
        Sort::from_u8(i as u8)
    }

    fn from_u8(v: u8) -> Option<Sort> {
        Some(match v {
            0 => Sort::Relevance,
            1 => Sort::PriceAsc,
            2 => Sort::PriceDesc,
            3 => Sort::TitleAsc,
            4 => Sort::TitleDesc,
            5 => Sort::CreatedDesc,
            _ => return None,
        })
    }

    fn by_title(self) -> bool {
        matches!(self, Sort::TitleAsc | Sort::TitleDesc)
    }

    /// The id as it breaks ties: ascending, except newest-first where time-ordered (v7) ids
    /// descend too, so products created in the same millisecond still come newest first. The
    /// mapping is its own inverse.
    fn tie_id(self, id: u128) -> u128 {
        if self == Sort::CreatedDesc { !id } else { id }
    }
}

/// One search: what to match, how to order, which slice to answer.
#[derive(Debug, Clone)]
pub struct SearchRequest {
    pub store: Uuid,
    /// Terms that must all match, each against its fields (`q`, then `search`). None: every
    /// product of the store.
    pub terms: Vec<(String, SearchBy)>,
    pub status: Option<Status>,
    /// Exact product type, any case.
    pub product_type: Option<String>,
    /// Only these product ids (a collection's members), when given.
    pub allowed: Option<Arc<HashSet<u128>>>,
    pub sort: Sort,
    /// Hits skipped before the page (ignored with a cursor).
    pub offset: usize,
    pub limit: usize,
    /// Continue after this cursor instead of skipping `offset` hits.
    pub after: Option<Cursor>,
}

/// One page of hits.
#[derive(Debug, Clone)]
pub struct Hits {
    pub ids: Vec<Uuid>,
    /// Every product that matches (ignoring the page and the cursor).
    pub total: u64,
    /// Where the next page starts, when there is one.
    pub next: Option<Cursor>,
}

/// A position in a sorted result: the last hit of a page, with the page number and a
/// fingerprint of the query it belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursor {
    /// The page this cursor opens (1-based), echoed in the answer's `page`.
    pub page: u32,
    fingerprint: u32,
    sort: Sort,
    hit: Hit,
}

const CURSOR_VERSION: u8 = 1;

impl Cursor {
    /// The wire form: URL-safe base64 of `version ‖ sort ‖ fingerprint ‖ page ‖ id ‖ num ‖ text`.
    pub fn encode(&self) -> String {
        let mut b = Vec::with_capacity(34 + self.hit.text.len());
        b.push(CURSOR_VERSION);
        b.push(self.sort as u8);
        b.extend_from_slice(&self.fingerprint.to_be_bytes());
        b.extend_from_slice(&self.page.to_be_bytes());
        b.extend_from_slice(&self.hit.id.to_be_bytes());
        b.extend_from_slice(&self.hit.num.to_be_bytes());
        b.extend_from_slice(&self.hit.text);
        URL_SAFE_NO_PAD.encode(b)
    }

    /// Reads a cursor given back by a client; it must come from the same query and sort.
    pub fn decode(raw: &str, sort: Sort, fingerprint: u32) -> ApiResult<Cursor> {
        let bad = || ApiError::field("cursor", "is not a cursor of this search");
        let b = URL_SAFE_NO_PAD.decode(raw).map_err(|_| bad())?;
        if b.len() < 34 || b[0] != CURSOR_VERSION || b[1] != sort as u8 {
            return Err(bad());
        }
        let u32_at = |at: usize| b.get(at..at + 4).and_then(|s| s.try_into().ok()).map(u32::from_be_bytes);
        if u32_at(2) != Some(fingerprint) {
            return Err(bad());
        }
        let page = u32_at(6).filter(|p| *p >= 2).ok_or_else(bad)?;
        let id = b[10..26].try_into().map(u128::from_be_bytes).map_err(|_| bad())?;
        let num = b[26..34].try_into().map(u64::from_be_bytes).map_err(|_| bad())?;
        let text = b[34..].to_vec();
        Ok(Cursor { page, fingerprint, sort, hit: Hit { num, text, rev_text: sort == Sort::TitleDesc, id } })
    }
}

/// A fingerprint of what a cursor's query matched (FNV-1a), so a cursor cannot be replayed
/// against another query.
pub fn fingerprint(parts: &[&str]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for p in parts {
        for b in p.bytes().chain([0xFF]) {
            h ^= u32::from(b);
            h = h.wrapping_mul(0x0100_0193);
        }
    }
    h
}

/// A hit's position in the order: smaller comes first. `num` is the numeric sort key mapped so
/// that ascending order is the requested order; title sorts compare `text` instead.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Hit {
    num: u64,
    text: Vec<u8>,
    rev_text: bool,
    /// The product id as it breaks ties ([`Sort::tie_id`]).
    id: u128,
}

impl Ord for Hit {
    fn cmp(&self, other: &Self) -> Ordering {
        // Runs once per matching document: the text is compared only on a numeric tie.
        self.num
            .cmp(&other.num)
            .then_with(|| match (self.text.is_empty() && other.text.is_empty(), self.rev_text) {
                (true, _) => Ordering::Equal,
                (false, false) => self.text.cmp(&other.text),
                (false, true) => other.text.cmp(&self.text),
            })
            .then_with(|| self.id.cmp(&other.id))
    }
}

impl PartialOrd for Hit {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Signed values in unsigned order.
fn ordered_i64(v: i64) -> u64 {
    (v as u64) ^ (1 << 63)
}

/// Higher scores first: scores are finite and non-negative, whose bit patterns sort as numbers.
fn score_key(s: Score) -> u64 {
    u64::MAX - u64::from(s.max(0.0).to_bits())
}

// ---- building the query --------------------------------------------------------------------

/// Builds tantivy queries over the product schema.
pub struct QueryBuilder<'a> {
    pub fields: &'a Fields,
    pub words: TextAnalyzer,
    /// The index the query will run on: exact words are scored with its statistics, and code
    /// clauses no term can match are left out.
    pub searcher: &'a Searcher,
    /// Whether a multi-word term matches products with any of its words (ranked by how many)
    /// rather than all of them: the fallback when the strict query finds nothing.
    pub relaxed: bool,
    /// Whether the last built query scores at all: one made only of typo and completion terms
    /// and filters scores every product 0, and the collector then needs no scores.
    pub scored: bool,
    /// The word lists of the index's segments.
    pub lists: &'a Arc<WordCache>,
}

/// Typo tolerance by word length: none under 4 characters, one edit from 4, two from 8.
fn distance(word: &str) -> u8 {
    match word.chars().count() {
        n if n >= 8 => 2,
        n if n >= 4 => 1,
        _ => 0,
    }
}

fn boxed(q: impl Query + 'static) -> Box<dyn Query> {
    Box::new(q)
}

/// A scoreless required term (boost 0 keeps it a plain term scorer; see [`QueryBuilder::word`]).
fn filter(term: Term) -> Box<dyn Query> {
    boxed(BoostQuery::new(boxed(TermQuery::new(term, IndexRecordOption::Basic)), 0.0))
}

impl QueryBuilder<'_> {
    fn tokens(&mut self, text: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut stream = self.words.token_stream(text);
        while stream.advance() {
            out.push(stream.token().text.clone());
        }
        out
    }

    /// Whether some segment has a term of `field` in `[from, to)`: a code no sku or barcode
    /// starts with needs no clause. Unreadable dictionaries answer yes (the clause stays).
    fn any_term(&self, field: Field, from: &[u8], to: Option<&[u8]>) -> bool {
        self.searcher.segment_readers().iter().any(|segment| {
            let Ok(index) = segment.inverted_index(field) else { return true };
            let range = index.terms().range().ge(from);
            let range = match to {
                Some(to) => range.lt(to),
                None => range,
            };
            range.into_stream().map(|mut s| s.advance()).unwrap_or(true)
        })
    }

    /// The clause of `text` against a title-like `field`: every word must match (relaxed: any
    /// word, products matching more of them first), exactly, within its typo distance or — the
    /// last word of the text, as shoppers type — as a prefix. The words' documents come from the
    /// word lists of [`WordsQuery`]. Typo and completion matches add no score of their own, so
    /// exact matches (scored by BM25) rank first; relaxed, every matching word adds one. `None`
    /// when the text has no words.
    ///
    /// Strict, the clause also takes in `filters` (exact terms such as the store, which the
    /// whole query requires): they join the intersection of the word lists, where they cost a
    /// bitset each, rather than being intersected with it document by document.
    fn words(&mut self, field: Field, text: &str, filters: &mut Vec<WordSpec>) -> Option<Box<dyn Query>> {
        let words = self.tokens(text);
        let n = words.len();
        let mut specs: Vec<WordSpec> = words
            .iter()
            .enumerate()
            .map(|(i, w)| WordSpec { field, word: w.clone(), distance: distance(w), prefix: i + 1 == n && w.len() >= 2 })
            .collect();
        if specs.is_empty() {
            return None;
        }
        // The exact match of each word some document has, scored.
        let mut clauses: Vec<(Occur, Box<dyn Query>)> = words
            .iter()
            .map(|w| Term::from_field_text(field, w))
            .filter(|t| self.searcher.doc_freq(t).is_ok_and(|n| n > 0))
            .map(|t| (Occur::Should, boxed(BoostQuery::new(boxed(TermQuery::new(t, IndexRecordOption::WithFreqs)), 2.0))))
            .collect();
        self.scored |= self.relaxed || !clauses.is_empty();
        if self.relaxed {
            clauses.extend(specs.into_iter().map(|s| (Occur::Should, self.all_of(vec![s], 1.0))));
        } else {
            specs.append(filters);
            let all = self.all_of(specs, 0.0);
            if clauses.is_empty() {
                return Some(all);
            }
            clauses.push((Occur::Must, all));
        }
        Some(boxed(BooleanQuery::new(clauses)))
    }

    /// The documents matching every one of `words`, scored `score` each.
    fn all_of(&self, words: Vec<WordSpec>, score: Score) -> Box<dyn Query> {
        boxed(WordsQuery { words, score, cache: self.lists.clone() })
    }

    /// A code field: the exact value (scored above) or any value starting with it.
    fn code(&self, field: Field, text: &str) -> Option<Box<dyn Query>> {
        let code = code_text(text);
        if code.is_empty() {
            return None;
        }
        let end = prefix_successor(code.as_bytes());
        if !self.any_term(field, code.as_bytes(), end.as_deref()) {
            return Some(boxed(EmptyQuery));
        }
        let exact = TermQuery::new(Term::from_field_text(field, &code), IndexRecordOption::Basic);
        let upper = match end {
            Some(end) => Bound::Excluded(Term::from_field_bytes(field, &end)),
            None => Bound::Unbounded,
        };
        let prefix = InvertedIndexRangeQuery::new(Bound::Included(Term::from_field_text(field, &code)), upper);
        Some(boxed(BooleanQuery::new(vec![
            (Occur::Should, boxed(BoostQuery::new(boxed(exact), 3.0))),
            (Occur::Should, boxed(ConstScoreQuery::new(boxed(prefix), 1.0))),
        ])))
    }

    /// `text` against the fields of `by`, as clauses that must all match; `None` when it can
    /// match nothing. A words clause the whole query requires takes `filters` in (see
    /// [`QueryBuilder::words`]).
    fn term(&mut self, text: &str, by: SearchBy, filters: &mut Vec<WordSpec>) -> Option<Vec<Box<dyn Query>>> {
        let f = *self.fields;
        let code = |q: Option<Box<dyn Query>>| q.filter(|q| !q.is::<EmptyQuery>()).map(|q| vec![q]);
        match by {
            SearchBy::Title => self.words(f.title, text, filters).map(|q| vec![q]),
            SearchBy::VariantTitle => self.words(f.variant_title, text, filters).map(|q| vec![q]),
            SearchBy::Sku => {
                self.scored = true;
                code(self.code(f.sku, text))
            }
            SearchBy::Barcode => {
                self.scored = true;
                code(self.code(f.barcode, text))
            }
            SearchBy::All => {
                let codes: Vec<_> = [self.code(f.sku, text), self.code(f.barcode, text)]
                    .into_iter()
                    .flatten()
                    .filter(|q| !q.is::<EmptyQuery>())
                    .collect();
                if codes.is_empty() {
                    return self.words(f.all_words, text, filters).map(|q| vec![q]);
                }
                // Either the words or a code: the filters stay outside.
                let words = self.words(f.all_words, text, &mut Vec::new());
                self.scored = true;
                let mut any: Vec<_> = codes.into_iter().map(|q| (Occur::Should, q)).collect();
                any.extend(words.map(|q| (Occur::Should, q)));
                Some(vec![boxed(BooleanQuery::new(any))])
            }
        }
    }

    /// Whether every document of the index belongs to `store` (a cell serving one store): its
    /// filter would then only slow the intersection down.
    fn store_everywhere(&self, store: &Term) -> bool {
        self.searcher.segment_readers().iter().all(|segment| {
            segment
                .inverted_index(store.field())
                .and_then(|index| Ok(index.doc_freq(store)?))
                .is_ok_and(|n| n == segment.max_doc())
        })
    }

    /// Whether relaxing changes the query of `req`: some term has several words.
    pub fn can_relax(&mut self, req: &SearchRequest) -> bool {
        req.terms.iter().any(|(text, by)| {
            matches!(by, SearchBy::All | SearchBy::Title | SearchBy::VariantTitle) && self.tokens(text).len() > 1
        })
    }

    /// The whole query of a request: the store, every term, every filter, as one conjunction.
    pub fn build(&mut self, req: &SearchRequest) -> Box<dyn Query> {
        let f = *self.fields;
        self.scored = false;
        let mut must = Vec::new();
        let exact = |field: Field, word: String| WordSpec { field, word, distance: 0, prefix: false };
        let mut filters = Vec::new();
        let store = store_term(req.store);
        if !self.store_everywhere(&Term::from_field_text(f.store, &store)) {
            filters.push(exact(f.store, store));
        }
        if let Some(s) = req.status {
            filters.push(exact(f.status, s.name().to_string()));
        }
        if let Some(t) = &req.product_type {
            filters.push(exact(f.product_type, code_text(t)));
        }
        for (text, by) in &req.terms {
            match self.term(text, *by, &mut filters) {
                Some(clauses) if !clauses.iter().any(|q| q.is::<EmptyQuery>()) => {
                    must.extend(clauses.into_iter().map(|q| (Occur::Must, q)));
                }
                _ => return boxed(EmptyQuery),
            }
        }
        // The filters no words clause took in.
        must.extend(filters.into_iter().map(|s| (Occur::Must, filter(Term::from_field_text(s.field, &s.word)))));
        match must.len() {
            // One store, nothing else asked: every document.
            0 => boxed(AllQuery),
            1 => must.pop().map(|(_, q)| q).unwrap_or_else(|| boxed(AllQuery)),
            _ => boxed(BooleanQuery::new(must)),
        }
    }
}

// ---- collecting ----------------------------------------------------------------------------

/// Sorts, pages and counts in one pass over the matching documents.
pub struct PageCollector {
    pub columns: Arc<ColumnCache>,
    pub fields: Fields,
    pub sort: Sort,
    /// Hits kept: the page and everything before it.
    pub want: usize,
    pub after: Option<Cursor>,
    pub allowed: Option<Arc<HashSet<u128>>>,
    /// Whether the query scores at all ([`QueryBuilder::scored`]): without, relevance is a tie
    /// everywhere, settled by the ids, and tantivy skips scoring.
    pub scored: bool,
}

/// What one segment (or the whole index, once merged) found.
pub struct Found {
    hits: Vec<Hit>,
    total: u64,
    /// Matches after the cursor (all matches without one).
    after: u64,
}

impl Found {
    /// Every product that matched.
    pub fn total(&self) -> u64 {
        self.total
    }
}

pub struct SegmentPage {
    sort: Sort,
    want: usize,
    after: Option<Hit>,
    allowed: Option<Arc<HashSet<u128>>>,
    ids: Ids,
    num: Option<Column<i64>>,
    title: Option<StrColumn>,
    heap: BinaryHeap<Hit>,
    total: u64,
    after_count: u64,
    scratch: Vec<u8>,
}

impl Collector for PageCollector {
    type Fruit = Found;
    type Child = SegmentPage;

    fn for_segment(&self, _: SegmentOrdinal, segment: &SegmentReader) -> tantivy::Result<SegmentPage> {
        let c = self.columns.of(segment)?;
        let num = match self.sort {
            Sort::PriceAsc | Sort::PriceDesc => c.price,
            Sort::CreatedDesc => c.created,
            _ => None,
        };
        let title = if self.sort.by_title() { c.title } else { None };
        Ok(SegmentPage {
            sort: self.sort,
            want: self.want,
            after: self.after.as_ref().map(|c| c.hit.clone()),
            allowed: self.allowed.clone(),
            ids: c.ids,
            num,
            title,
            heap: BinaryHeap::with_capacity(self.want.min(1024) + 1),
            total: 0,
            after_count: 0,
            scratch: Vec::new(),
        })
    }

    fn requires_scoring(&self) -> bool {
        self.sort == Sort::Relevance && self.scored
    }

    fn merge_fruits(&self, fruits: Vec<Found>) -> tantivy::Result<Found> {
        let mut all = Found { hits: Vec::new(), total: 0, after: 0 };
        for f in fruits {
            all.hits.extend(f.hits);
            all.total += f.total;
            all.after += f.after;
        }
        all.hits.sort();
        all.hits.truncate(self.want);
        Ok(all)
    }
}

impl SegmentPage {
    /// The numeric sort key of a document (0 for title sorts, which compare text).
    fn num(&self, doc: DocId, score: Score) -> u64 {
        let value = || self.num.as_ref().and_then(|c| c.first(doc));
        match self.sort {
            Sort::Relevance => score_key(score),
            Sort::PriceAsc => value().map(ordered_i64).unwrap_or(u64::MAX),
            Sort::PriceDesc | Sort::CreatedDesc => value().map(|v| !ordered_i64(v)).unwrap_or(u64::MAX),
            Sort::TitleAsc | Sort::TitleDesc => 0,
        }
    }

    /// The title key of a document, read only for title sorts.
    fn text(&mut self, doc: DocId) -> Vec<u8> {
        if let Some(col) = &self.title
            && let Some(ord) = col.ords().first(doc)
        {
            self.scratch.clear();
            if col.ord_to_bytes(ord, &mut self.scratch).unwrap_or(false) {
                return self.scratch.clone();
            }
        }
        Vec::new()
    }

    /// Whether a document with this numeric key is certainly after the cursor (no cursor: yes).
    fn surely_after(&self, num: u64) -> bool {
        self.after.as_ref().is_none_or(|a| num > a.num)
    }

    /// Whether a document with this numeric key certainly cannot enter the full heap.
    fn surely_out(&self, num: u64) -> bool {
        self.heap.len() >= self.want && self.heap.peek().is_some_and(|worst| num > worst.num)
    }

    /// Whether a document whose key ties with the worst hit of the full heap certainly cannot
    /// enter it, judged by the upper half of its id (not for title sorts, where the text comes
    /// between the key and the id).
    fn surely_out_by_id_hi(&self, doc: DocId, num: u64) -> bool {
        if self.sort.by_title() || self.heap.len() < self.want {
            return false;
        }
        let Some(worst) = self.heap.peek().filter(|worst| worst.num == num) else { return false };
        let hi = u128::from(self.ids.hi(doc)) << 64;
        // The upper half of the tie id is the tie id of the upper half (see `Sort::tie_id`).
        (self.sort.tie_id(hi) >> 64) > (worst.id >> 64)
    }
}

impl SegmentCollector for SegmentPage {
    type Fruit = Found;

    fn collect(&mut self, doc: DocId, score: Score) {
        let id = || (u128::from(self.ids.hi(doc)) << 64) | u128::from(self.ids.lo(doc));
        if let Some(allowed) = &self.allowed
            && !allowed.contains(&id())
        {
            return;
        }
        self.total += 1;
        // Most documents are decided on the numeric key alone, without reading the id or
        // building a hit.
        let num = self.num(doc, score);
        if self.after.as_ref().is_some_and(|a| num < a.num) {
            return;
        }
        if self.surely_after(num) && self.surely_out(num) {
            self.after_count += 1;
            return;
        }
        // A tie on the key is settled by the id; its upper half alone mostly settles it (ids are
        // time-ordered, and whole pages tie when scores are equal).
        if self.surely_after(num) && self.surely_out_by_id_hi(doc, num) {
            self.after_count += 1;
            return;
        }
        let id = id();
        let text = if self.sort.by_title() { self.text(doc) } else { Vec::new() };
        let hit = Hit { num, text, rev_text: self.sort == Sort::TitleDesc, id: self.sort.tie_id(id) };
        if let Some(after) = &self.after
            && hit <= *after
        {
            return;
        }
        self.after_count += 1;
        if self.heap.len() < self.want {
            self.heap.push(hit);
        } else if self.heap.peek().is_some_and(|worst| hit < *worst) {
            self.heap.pop();
            self.heap.push(hit);
        }
    }

    fn harvest(self) -> Found {
        Found { hits: self.heap.into_vec(), total: self.total, after: self.after_count }
    }
}

/// Turns the merged hits into the answered page and the next cursor.
pub fn page_of(found: Found, req: &SearchRequest, fingerprint: u32) -> Hits {
    let skip = if req.after.is_some() { 0 } else { req.offset };
    let page: Vec<Hit> = found.hits.into_iter().skip(skip).take(req.limit).collect();
    let shown = (skip + page.len()) as u64;
    let next = match page.last() {
        Some(last) if found.after > shown && page.len() == req.limit => {
            let current = match &req.after {
                Some(c) => c.page,
                None => (req.offset / req.limit.max(1)) as u32 + 1,
            };
            Some(Cursor { page: current.saturating_add(1), fingerprint, sort: req.sort, hit: last.clone() })
        }
        _ => None,
    };
    Hits { ids: page.iter().map(|h| Uuid::from_u128(req.sort.tie_id(h.id))).collect(), total: found.total, next }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typo_distance_grows_with_word_length() {
        assert_eq!(distance("mug"), 0);
        assert_eq!(distance("lamp"), 1);
        assert_eq!(distance("headphone"), 2);
    }

    #[test]
    fn cursors_round_trip_and_refuse_other_queries() {
        let c = Cursor {
            page: 3,
            fingerprint: fingerprint(&["q"]),
            sort: Sort::TitleDesc,
            hit: Hit { num: 0, text: b"mug".to_vec(), rev_text: true, id: 42 },
        };
        let raw = c.encode();
        assert_eq!(Cursor::decode(&raw, Sort::TitleDesc, fingerprint(&["q"])).unwrap(), c);
        assert!(Cursor::decode(&raw, Sort::TitleAsc, fingerprint(&["q"])).is_err());
        assert!(Cursor::decode(&raw, Sort::TitleDesc, fingerprint(&["other"])).is_err());
        assert!(Cursor::decode("!!", Sort::TitleDesc, 0).is_err());
    }

    #[test]
    fn hits_order_by_key_then_id() {
        let h = |num, id| Hit { num, text: Vec::new(), rev_text: false, id };
        let mut v = [h(2, 1), h(1, 9), h(1, 3)];
        v.sort();
        assert_eq!(v.iter().map(|x| x.id).collect::<Vec<_>>(), [3, 9, 1]);
        assert!(score_key(2.0) < score_key(1.0));
        assert!(ordered_i64(-1) < ordered_i64(0));
    }
}
