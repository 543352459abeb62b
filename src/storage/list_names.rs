//! What a record list held in memory is, by its name, and which records belong in it.
//!
//! A record list's name says how to build it and what it keeps: `table u16 ‖ 0 | 1 ‖ parent id ‖
//! sort tag ‖ source [‖ what it keeps]` (see [`Keeps`]). Every write of a record reports its
//! summary and its key in each sort before and after ([`RecordChange`]); once the write has
//! committed, each held list of that store and record kind tests both summaries against what it
//! keeps and moves the key in or out (`storage::list_orders`). So one mechanism keeps every
//! list in step: all records, one filter value, and views (a conjunction of filter values,
//! ranges and a text query), whatever the list asked for.
//!
//! A view on a timed filter (a state the clock changes, not a write: a gift card expiring)
//! holds the records' states at one moment, its `from`, and is right until the first moment
//! after it at which any record of its kind may change state, its `until`: the build finds that
//! moment among every row it reads, each write tests its record at `from` and brings `until`
//! forward to the record's own next change, and a read at a moment outside `[from, until)`
//! builds the view again.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::storage::tables::{STORE_TABLES, StoreTable};

/// What a record's order rows carry for a filtered walk and for the lists' tests: its filter
/// values, range values and search text.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct Summary {
    pub filters: Vec<Option<Vec<u8>>>,
    pub ranges: Vec<i64>,
    pub text: String,
}

/// How a record's search text is tested against a query: `(text, query, store)`.
pub type Matches = fn(&str, &str, Uuid) -> bool;

/// Timed filter `i`'s state for the stored times `value` at moment `at`, and the first moment
/// after `at` at which it may differ (`None`: never): `(i, value, at)`. `None` for a filter
/// that is not timed.
pub type TimedState = fn(usize, &[u8], i64) -> Option<(&'static str, Option<i64>)>;

/// How a record kind's order rows are laid out (`record::row_shape`): the rows of one sort,
/// tag `summary_tag`, carry the summaries (the other sorts' rows are keys alone), and the last
/// `tail` bytes of every row's key name its record. A list tested on summaries in another sort
/// is built from both: the records whose carrying rows pass, then the sort's rows of those
/// records. For a kind listed by default in its records' own order (`own`), that sort's rows
/// are the records' rows themselves, whose summaries are worked out from the records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RowShape {
    pub summary_tag: u8,
    pub tail: usize,
    pub own: Option<OwnRows>,
}

/// The rows of a sort in the records' own order: their table, and a record's summary from its
/// stored value.
#[derive(Clone, Copy)]
pub struct OwnRows {
    pub table: StoreTable,
    pub summary: fn(&[u8]) -> crate::error::ApiResult<Summary>,
}

impl PartialEq for OwnRows {
    fn eq(&self, other: &Self) -> bool {
        self.table.index == other.table.index
    }
}

impl Eq for OwnRows {}

impl std::fmt::Debug for OwnRows {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "OwnRows({})", self.table.index)
    }
}

impl RowShape {
    /// The record an order row's key names: its last `tail` bytes.
    pub fn record_of<'k>(&self, key: &'k [u8]) -> &'k [u8] {
        key.get(key.len().saturating_sub(self.tail)..).unwrap_or_default()
    }

    /// The summary a row of sort `summary_tag` carries (`value`): kept in it, or worked out from
    /// the record it is.
    pub fn summary_of(&self, value: &[u8]) -> crate::error::ApiResult<Summary> {
        match self.own {
            Some(own) => (own.summary)(value),
            None => crate::storage::codec::decode(value),
        }
    }
}

/// What a record kind's lists test that their names do not say (`record::kind_tests`).
#[derive(Debug, Clone, Copy)]
pub struct KindTests {
    /// How its search text matches a query (views with a query keep nothing without it).
    pub search: Option<Matches>,
    /// Its timed filters' states (timed views keep nothing without it).
    pub timed: TimedState,
}

/// What a list keeps of a record kind's records, in one sort.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Keeps {
    /// Every record: built from the sort's order rows.
    All,
    /// The records with one value of a counted filter, in the default order: built from that
    /// value's partition rows.
    Partition(usize, Vec<u8>),
    /// The same, in another order: built from the sort's rows, their summaries read.
    Summaries(usize, Vec<u8>),
    /// The records of a view, built from the sort's rows, their summaries read.
    View(View),
}

/// A list kept to several filters, ranges or a text query: the records whose summary has, for
/// each filter, one of its values (for a timed filter, whose state at the view's moment is one
/// of them), whose range values lie within each range (bounds included) and whose text the
/// query matches.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct View {
    /// Filter (by position) → the values it accepts, each list sorted, by position.
    pub filters: Vec<(usize, Vec<Vec<u8>>)>,
    /// Whether one of `filters` is timed: the view holds the states of one moment (see the
    /// module).
    pub timed: bool,
    /// Range (by position) → inclusive bounds, Unix milliseconds, by position.
    pub ranges: Vec<(usize, Option<i64>, Option<i64>)>,
    /// The query as the record's search normalises it.
    pub search: Option<String>,
}

impl Keeps {
    /// Whether a record of summary `s` of `store` belongs in the list at moment `at` (only a
    /// timed view reads it). `tests` are the record kind's (a view with a query or a timed
    /// filter keeps nothing without them).
    pub fn accepts(&self, s: &Summary, store: Uuid, tests: Option<&KindTests>, at: i64) -> bool {
        match self {
            Keeps::All => true,
            Keeps::Partition(i, value) | Keeps::Summaries(i, value) => {
                s.filters.get(*i).and_then(Option::as_deref) == Some(value.as_slice())
            }
            Keeps::View(v) => accepts(
                s,
                &v.filters,
                &v.ranges,
                v.search.as_deref(),
                |i, value, values| value_in(tests.filter(|_| v.timed), i, value, values, at),
                |text, q| tests.and_then(|t| t.search).is_some_and(|m| m(text, q, store)),
            ),
        }
    }

    /// The first moment after `at` at which a record of summary `s` may enter or leave the
    /// list with no write: the next change of its timed filters' states (`None` for a list that
    /// keeps no timed filter, or a record whose states never change again).
    pub fn changes(&self, s: &Summary, tests: &KindTests, at: i64) -> Option<i64> {
        let Keeps::View(v) = self else { return None };
        if !v.timed {
            return None;
        }
        v.filters.iter().filter_map(|(i, _)| (tests.timed)(*i, s.filters.get(*i)?.as_deref()?, at)?.1).min()
    }

    /// Whether the list holds the states of one moment (a view on a timed filter).
    pub fn is_timed(&self) -> bool {
        matches!(self, Keeps::View(View { timed: true, .. }))
    }
}

/// Whether a record of summary `s` has, for every filter, one of its values (as `filter`
/// compares: position, the record's value, the values asked), lies within every range and
/// matches the query (as `search` compares its text): the one test of walks and views.
pub(crate) fn accepts(
    s: &Summary,
    filters: &[(usize, Vec<Vec<u8>>)],
    ranges: &[(usize, Option<i64>, Option<i64>)],
    query: Option<&str>,
    filter: impl Fn(usize, &[u8], &[Vec<u8>]) -> bool,
    search: impl Fn(&str, &str) -> bool,
) -> bool {
    filters.iter().all(|(i, values)| s.filters.get(*i).and_then(Option::as_deref).is_some_and(|v| filter(*i, v, values)))
        && ranges
            .iter()
            .all(|(i, from, to)| s.ranges.get(*i).is_some_and(|v| from.is_none_or(|f| *v >= f) && to.is_none_or(|t| *v <= t)))
        && query.is_none_or(|q| search(&s.text, q))
}

/// Whether a record's `value` of filter `i` is one of `values` at moment `at`: for a timed
/// filter (`tests` tell which), the state it makes then; for any other, its bytes.
pub(crate) fn value_in(tests: Option<&KindTests>, i: usize, value: &[u8], values: &[Vec<u8>], at: i64) -> bool {
    match tests.and_then(|t| (t.timed)(i, value, at)) {
        Some((state, _)) => values.iter().any(|x| x == state.as_bytes()),
        None => values.iter().any(|x| x == value),
    }
}

/// The source byte of each kind of list in its name.
const ALL: u8 = 0;
const PARTITION: u8 = 1;
const SUMMARIES: u8 = 2;
const VIEW: u8 = 3;
const TIMED_VIEW: u8 = 4;

/// The name of a record list: `kind` (what the names of a record kind's lists under one scope
/// start with), the sort's tag, and what it keeps. `None` when a view cannot be named (more
/// than 255 filters or values, a value or query over 65,535 bytes): it is walked instead.
pub(crate) fn name(kind: &[u8], tag: u8, keeps: &Keeps) -> Option<Arc<[u8]>> {
    let mut name = kind.to_vec();
    name.push(tag);
    match keeps {
        Keeps::All => name.push(ALL),
        Keeps::Partition(i, value) | Keeps::Summaries(i, value) => {
            let source = if matches!(keeps, Keeps::Partition(..)) { PARTITION } else { SUMMARIES };
            name.extend_from_slice(&[source, u8::try_from(*i).ok()?]);
            // Last: the value's bytes as they are.
            name.extend_from_slice(value);
        }
        Keeps::View(v) => {
            name.push(if v.timed { TIMED_VIEW } else { VIEW });
            v.encode(&mut name)?;
        }
    }
    Some(name.into())
}

impl View {
    fn encode(&self, out: &mut Vec<u8>) -> Option<()> {
        let short = |out: &mut Vec<u8>, bytes: &[u8]| -> Option<()> {
            out.extend_from_slice(&u16::try_from(bytes.len()).ok()?.to_be_bytes());
            out.extend_from_slice(bytes);
            Some(())
        };
        out.push(u8::try_from(self.filters.len()).ok()?);
        for (i, values) in &self.filters {
            out.extend_from_slice(&[u8::try_from(*i).ok()?, u8::try_from(values.len()).ok()?]);
            for v in values {
                short(out, v)?;
            }
        }
        out.push(u8::try_from(self.ranges.len()).ok()?);
        for (i, from, to) in &self.ranges {
            out.extend_from_slice(&[u8::try_from(*i).ok()?, u8::from(from.is_some()) | u8::from(to.is_some()) << 1]);
            out.extend_from_slice(&from.unwrap_or(0).to_be_bytes());
            out.extend_from_slice(&to.unwrap_or(0).to_be_bytes());
        }
        match &self.search {
            None => out.push(0),
            Some(q) => {
                out.push(1);
                short(out, q.as_bytes())?;
            }
        }
        Some(())
    }

    fn decode(mut bytes: &[u8]) -> Option<View> {
        fn take<'a>(bytes: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
            let (head, rest) = bytes.split_at_checked(n)?;
            *bytes = rest;
            Some(head)
        }
        fn byte(bytes: &mut &[u8]) -> Option<u8> {
            take(bytes, 1).map(|b| b[0])
        }
        fn short<'a>(bytes: &mut &'a [u8]) -> Option<&'a [u8]> {
            let len = take(bytes, 2)?;
            take(bytes, u16::from_be_bytes([len[0], len[1]]) as usize)
        }
        fn i64_of(bytes: &mut &[u8]) -> Option<i64> {
            Some(i64::from_be_bytes(take(bytes, 8)?.try_into().ok()?))
        }
        let b = &mut bytes;
        let mut view = View::default();
        for _ in 0..byte(b)? {
            let (i, n) = (byte(b)? as usize, byte(b)?);
            let values = (0..n).map(|_| short(b).map(<[u8]>::to_vec)).collect::<Option<Vec<_>>>()?;
            view.filters.push((i, values));
        }
        for _ in 0..byte(b)? {
            let (i, flags) = (byte(b)? as usize, byte(b)?);
            let (from, to) = (i64_of(b)?, i64_of(b)?);
            view.ranges.push((i, Some(from).filter(|_| flags & 1 != 0), Some(to).filter(|_| flags & 2 != 0)));
        }
        if byte(b)? == 1 {
            view.search = Some(String::from_utf8(short(b)?.to_vec()).ok()?);
        }
        b.is_empty().then_some(view)
    }
}

/// A record list's name read back: what [`name`] wrote.
pub(crate) struct ListParts {
    pub order: StoreTable,
    pub scope: Option<Uuid>,
    /// How many bytes of the name say the record kind and scope (see [`name`]'s `kind`).
    pub kind_len: usize,
    pub tag: u8,
    pub keeps: Keeps,
}

impl ListParts {
    /// `None` when `name` was not written by [`name`] (a damaged hint).
    pub fn of(name: &[u8]) -> Option<ListParts> {
        let table = u16::from_be_bytes([*name.first()?, *name.get(1)?]);
        let order = *STORE_TABLES.get(table as usize)?;
        let (scope, kind_len) = match name.get(2)? {
            0 => (None, 3),
            1 => (Some(Uuid::from_slice(name.get(3..19)?).ok()?), 19),
            _ => return None,
        };
        let rest = name.get(kind_len..)?;
        let (&tag, rest) = rest.split_first()?;
        let (&source, rest) = rest.split_first()?;
        let keeps = match (source, rest.split_first()) {
            (ALL, None) => Keeps::All,
            (PARTITION, Some((&i, value))) => Keeps::Partition(i as usize, value.to_vec()),
            (SUMMARIES, Some((&i, value))) => Keeps::Summaries(i as usize, value.to_vec()),
            (VIEW | TIMED_VIEW, _) => Keeps::View(View { timed: source == TIMED_VIEW, ..View::decode(rest)? }),
            _ => return None,
        };
        Some(ListParts { order, scope, kind_len, tag, keeps })
    }
}

/// A record as one side of a write saw it: its summary and its key in each sort (by tag).
#[derive(Debug)]
pub struct Side {
    pub(crate) summary: Summary,
    pub keys: Vec<(u8, Box<[u8]>)>,
}

impl Side {
    fn key(&self, tag: u8) -> Option<&[u8]> {
        self.keys.iter().find(|(t, _)| *t == tag).map(|(_, k)| &k[..])
    }
}

/// One write of a listed record, for the lists held in memory: applied once it commits.
#[derive(Debug)]
pub struct RecordChange {
    pub store: Uuid,
    /// What the names of the record kind's lists (under its scope) start with.
    pub kind: Box<[u8]>,
    pub old: Option<Side>,
    pub new: Option<Side>,
    pub tests: KindTests,
}

impl RecordChange {
    /// What the change does to a list that keeps `keeps` in sort `tag`, holding the states of
    /// moment `at` (a timed view's `from`; any moment for another list): the key it removes
    /// and the key it inserts (neither when the record stays where it was, or out).
    pub(crate) fn moves(&self, tag: u8, keeps: &Keeps, at: i64) -> (Option<&[u8]>, Option<&[u8]>) {
        let (old, new) = (self.side(&self.old, tag, keeps, at), self.side(&self.new, tag, keeps, at));
        if old == new { (None, None) } else { (old, new) }
    }

    /// The first moment after `at` at which the written record may enter or leave a list
    /// keeping `keeps` with no write (see [`Keeps::changes`]).
    pub(crate) fn changes(&self, keeps: &Keeps, at: i64) -> Option<i64> {
        self.new.as_ref().and_then(|s| keeps.changes(&s.summary, &self.tests, at))
    }

    /// The key one side has in the list, when the list keeps it.
    fn side<'a>(&self, side: &'a Option<Side>, tag: u8, keeps: &Keeps, at: i64) -> Option<&'a [u8]> {
        side.as_ref().filter(|s| keeps.accepts(&s.summary, self.store, Some(&self.tests), at)).and_then(|s| s.key(tag))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn summary(filters: &[Option<&str>], ranges: &[i64], text: &str) -> Summary {
        Summary {
            filters: filters.iter().map(|f| f.map(|v| v.as_bytes().to_vec())).collect(),
            ranges: ranges.to_vec(),
            text: text.into(),
        }
    }

    fn view() -> View {
        View {
            filters: vec![(0, vec![b"OPEN".to_vec(), b"PAID".to_vec()]), (2, vec![vec![0u8; 16]])],
            timed: false,
            ranges: vec![(0, Some(-5), None), (1, None, Some(1_700_000_000_000))],
            search: Some("anna@".into()),
        }
    }

    #[test]
    fn every_kind_of_name_reads_back_as_written() {
        let scoped = [&[0u8, 7, 1][..], Uuid::from_u128(9).as_bytes()].concat();
        for kind in [vec![0u8, 7, 0], scoped] {
            for keeps in [
                Keeps::All,
                Keeps::Partition(3, b"PAID".to_vec()),
                Keeps::Summaries(1, vec![]),
                Keeps::View(view()),
                Keeps::View(View { timed: true, ..view() }),
                Keeps::View(View::default()),
            ] {
                let name = name(&kind, 4, &keeps).unwrap();
                let parts = ListParts::of(&name).unwrap();
                assert_eq!((parts.kind_len, parts.tag, &parts.keeps), (kind.len(), 4, &keeps));
                assert_eq!(parts.order.index, 7);
                assert!(name.starts_with(&kind));
            }
        }
        // Damage is refused, not misread.
        let good = name(&[0, 7, 0], 4, &Keeps::View(view())).unwrap();
        assert!(ListParts::of(&good[..good.len() - 1]).is_none());
        assert!(ListParts::of(&[&good[..], &[0]].concat()).is_none());
        assert!(ListParts::of(&[0, 7, 0, 4, 9]).is_none());
        // A view that cannot be named is walked.
        let long = View { search: Some("x".repeat(70_000)), ..View::default() };
        assert!(name(&[0, 7, 0], 0, &Keeps::View(long)).is_none());
    }

    #[test]
    fn a_view_keeps_a_record_with_one_value_of_each_filter_within_each_range_matching_the_query() {
        let contains = KindTests { search: Some(|text, q, _| text.contains(q)), timed: |_, _, _| None };
        let contains = Some(&contains);
        let keeps = Keeps::View(view());
        let store = Uuid::nil();
        let id = std::str::from_utf8(&[0u8; 16]).unwrap().to_string();
        let yes = summary(&[Some("PAID"), None, Some(&id)], &[0, 1_600_000_000_000], "1001 anna@example.com");
        assert!(keeps.accepts(&yes, store, contains, 0));
        assert!(!keeps.accepts(&yes, store, None, 0), "a query needs the kind's text test");
        let cases = [
            summary(&[Some("CLOSED"), None, Some(&id)], &[0, 1_600_000_000_000], "anna@"),
            summary(&[Some("PAID"), None, None], &[0, 1_600_000_000_000], "anna@"),
            summary(&[Some("PAID"), None, Some(&id)], &[-6, 1_600_000_000_000], "anna@"),
            summary(&[Some("PAID"), None, Some(&id)], &[0, 1_700_000_000_001], "anna@"),
            summary(&[Some("PAID"), None, Some(&id)], &[0, 1_600_000_000_000], "bob@"),
        ];
        for (n, s) in cases.iter().enumerate() {
            assert!(!keeps.accepts(s, store, contains, 0), "case {n}");
        }
        // The bounds themselves are inside.
        let edge = summary(&[Some("OPEN"), None, Some(&id)], &[-5, 1_700_000_000_000], "anna@");
        assert!(keeps.accepts(&edge, store, contains, 0));
    }

    /// Timed filter 0's stored value is a moment, big-endian: "ACTIVE" before it, "EXPIRED"
    /// from it on.
    pub(crate) fn expiring() -> KindTests {
        KindTests {
            search: None,
            timed: |i, value, at| {
                let ends = i64::from_be_bytes(value.try_into().ok()?);
                (i == 0).then_some(if at < ends { ("ACTIVE", Some(ends)) } else { ("EXPIRED", None) })
            },
        }
    }

    #[test]
    fn a_timed_view_keeps_the_states_of_its_moment_and_says_when_the_next_may_change() {
        let tests = expiring();
        let keeps = Keeps::View(View { filters: vec![(0, vec![b"ACTIVE".to_vec()])], timed: true, ..View::default() });
        let ends = |at: i64| Summary { filters: vec![Some(at.to_be_bytes().to_vec())], ..Summary::default() };
        let (store, card) = (Uuid::nil(), ends(1_000));
        assert!(keeps.accepts(&card, store, Some(&tests), 999));
        assert!(!keeps.accepts(&card, store, Some(&tests), 1_000), "expired at its moment");
        assert!(!keeps.accepts(&card, store, None, 999), "a timed view needs the kind's tests");
        assert_eq!(keeps.changes(&card, &tests, 999), Some(1_000));
        assert_eq!(keeps.changes(&card, &tests, 1_000), None, "expired for good");
        // The same value in a view not marked timed is compared as bytes; a list of every
        // record never changes with the clock.
        let untimed = Keeps::View(View { filters: vec![(0, vec![b"ACTIVE".to_vec()])], ..View::default() });
        assert!(!untimed.accepts(&card, store, Some(&tests), 999));
        assert_eq!((untimed.changes(&card, &tests, 999), Keeps::All.changes(&card, &tests, 999)), (None, None));
        // A write is tested at the view's moment, and says its own next change.
        let side = |at: i64| Side { summary: ends(at), keys: vec![(0, vec![at as u8].into())] };
        let renewed = RecordChange { store, kind: vec![0, 7, 0].into(), old: Some(side(1_000)), new: Some(side(2_000)), tests };
        assert_eq!(renewed.moves(0, &keeps, 999), (Some(&[232u8][..]), Some(&[208u8][..])));
        assert_eq!(renewed.moves(0, &keeps, 1_500), (None, Some(&[208u8][..])), "it was expired at 1,500");
        assert_eq!(renewed.changes(&keeps, 1_500), Some(2_000));
    }

    #[test]
    fn a_change_moves_a_key_only_when_the_record_enters_leaves_or_moves_within_the_list() {
        let side = |status: &str, key: u8| Side { summary: summary(&[Some(status)], &[], ""), keys: vec![(0, vec![key].into())] };
        let change = |old: Option<Side>, new: Option<Side>| RecordChange {
            store: Uuid::nil(),
            kind: vec![0, 7, 0].into(),
            old,
            new,
            tests: expiring(),
        };
        let paid = Keeps::Summaries(0, b"PAID".to_vec());
        let entered = change(Some(side("OPEN", 1)), Some(side("PAID", 1)));
        assert_eq!(entered.moves(0, &paid, 0), (None, Some(&[1u8][..])));
        assert_eq!(entered.moves(0, &Keeps::All, 0), (None, None), "the same key in a list of every record");
        let moved = change(Some(side("PAID", 1)), Some(side("PAID", 2)));
        assert_eq!(moved.moves(0, &paid, 0), (Some(&[1u8][..]), Some(&[2u8][..])));
        let deleted = change(Some(side("PAID", 1)), None);
        assert_eq!(deleted.moves(0, &paid, 0), (Some(&[1u8][..]), None));
        assert_eq!(deleted.moves(5, &paid, 0), (None, None), "no key in a sort it has none in");
    }
}
