//! The record layer: what every stored entity of a store declares once, and the generic
//! functions that load, write and delete it with every secondary row in step.
//!
//! An entity implements [`Record`]: its table (`store ‖ id → record`), its list declaration
//! (the order table, sortable fields by name, filters, text search; see [`crate::storage::list`])
//! and its claims (secondary rows such as uniqueness claims). [`write`] is then the one function
//! that writes it: the record row, one order row per sortable field, the claims, the total
//! counter and a counter per filter value — so a filtered `total` is a counter read — all through
//! [`Tx`], which records every key in the move log while the store moves. No area writes an index
//! row or a counter by hand.

use std::sync::Arc;

use redb::ReadTransaction;
use serde::Serialize;
use serde::de::DeserializeOwned;
use uuid::Uuid;

use crate::error::{ApiError, ApiResult};
use crate::storage::codec::{decode, encode};
use crate::storage::keys::Key;
use crate::storage::list_names::{self, Keeps, KindTests, OwnRows, RecordChange, RowShape, Side, Summary};
use crate::storage::read;
use crate::storage::tables::{COUNTERS, StoreTable};
use crate::storage::tx::{Rows, Tx};

/// A stored entity of a store. Implemented once per entity, by declaration.
pub trait Record: Serialize + DeserializeOwned + Send + Sync + 'static {
    /// `store ‖ id → record`.
    const TABLE: StoreTable;
    /// Names the entity's counters (`store ‖ NAME` is how many there are).
    const NAME: &'static str;
    /// The entity's list: order table, sortable fields, filters, search.
    const LIST: List<Self>;

    fn id(&self) -> Uuid;

    /// How many bytes end the record's key after `store ‖ scope`: [`Record::tail`]'s length.
    const TAIL: usize = 16;

    /// Appends what ends the record's key, and each of its order rows, to `k`: its id, unless
    /// the record is found by something else (a level by its variant and location, so a
    /// variant's levels are one range). [`Record::TAIL`] bytes; a list reads them back off the
    /// end of its order rows to find the records.
    fn tail(&self, k: Key) -> Key {
        k.id(self.id())
    }

    /// For a record that lives under another (a discount's comments), the other's id: the record's
    /// key, its list and its counters are then per parent (`store ‖ parent ‖ …`), so listing one
    /// parent's records costs that list alone and deleting the parent removes them as one range.
    fn scope(&self) -> Option<Uuid> {
        None
    }

    /// Secondary rows besides the list orders (uniqueness claims such as a market's countries,
    /// lookups by handle): `(table, key, value)`, kept in step by [`write`]. Checking that a claim
    /// is free is the area's rule (its 409 names the field); keeping the rows is not.
    fn claims(&self, _store: Uuid) -> ApiResult<Vec<Claim>> {
        Ok(Vec::new())
    }
}

/// What can be listed through the seam of [`crate::storage::list`]: a record (its declaration is
/// [`Record::LIST`]) or a form kept for lists alone (a product's sort values, whose lists are held
/// in memory: `cells::products`).
pub trait Listable: Sized + 'static {
    const LIST: List<Self>;
}

impl<R: Record> Listable for R {
    const LIST: List<Self> = <R as Record>::LIST;
}

/// A secondary row of a record: `(table, key, value)`.
pub type Claim = (StoreTable, Vec<u8>, Vec<u8>);

/// A sortable field: the name `sortBy` takes, its tag in the order table's keys (a stored
/// number: never reused for another field), and how the record's sort value is appended to a key.
pub struct Sort<R> {
    pub name: &'static str,
    pub tag: u8,
    pub key: fn(&R, Key) -> Key,
}

/// A list filter: equality on an enumerated field or a reference to another record, asked for
/// with one value or many, comma-separated. Each value has a counter, so the `total` of a list
/// filtered on one field is read, not counted. Built with [`Filter::enumerated`],
/// [`Filter::reference`], [`Filter::code`], [`Filter::timed`] or [`Filter::hidden`].
pub struct Filter<R> {
    /// The query parameter.
    pub name: &'static str,
    /// A second name the parameter is also read under.
    pub alias: Option<&'static str>,
    pub kind: FilterKind,
    /// The record's value; `None` when it has none (an order without a customer).
    pub value: fn(&R) -> Option<FilterValue>,
    /// What the parameter means, for the reference.
    pub doc: &'static str,
}

impl<R> Filter<R> {
    /// Equality on an enumerated field: one of `E`'s names, any case.
    pub const fn enumerated<E: Enumerated>(name: &'static str, value: fn(&R) -> Option<FilterValue>, doc: &'static str) -> Self {
        Filter { name, alias: None, kind: FilterKind::Enum { values: E::NAMES, any: None }, value, doc }
    }

    /// Equality on an enumerated field given by its names.
    pub const fn names(
        name: &'static str,
        values: &'static [&'static str],
        value: fn(&R) -> Option<FilterValue>,
        doc: &'static str,
    ) -> Self {
        Filter { name, alias: None, kind: FilterKind::Enum { values, any: None }, value, doc }
    }

    /// The id of another record.
    pub const fn reference(name: &'static str, value: fn(&R) -> Option<FilterValue>, doc: &'static str) -> Self {
        Filter { name, alias: None, kind: FilterKind::Reference { none: None }, value, doc }
    }

    /// Records `hidden` (soft-deleted ones) stay off the list unless the boolean parameter
    /// `name` is `true`; `value` is [`FilterValue::shown`] of the record.
    pub const fn hidden(name: &'static str, value: fn(&R) -> Option<FilterValue>, doc: &'static str) -> Self {
        Filter { name, alias: None, kind: FilterKind::Hidden, value, doc }
    }

    /// A short code put in its one written form by `normalise` (refused with `invalid`); the
    /// values it accepts match `pattern`.
    pub const fn code(
        name: &'static str,
        normalise: fn(&str) -> Option<String>,
        invalid: &'static str,
        pattern: &'static str,
        value: fn(&R) -> Option<FilterValue>,
        doc: &'static str,
    ) -> Self {
        Filter { name, alias: None, kind: FilterKind::Code { normalise, invalid, pattern }, value, doc }
    }

    /// A state that changes with time alone: `value` gives the stored times
    /// ([`FilterValue::Times`]), `state` names the state they make at a moment of the clock and
    /// `changes` the first moment after it at which that state may differ (`None`: never).
    /// Not counted (a count would go stale as the clock moves): its lists are views that hold
    /// the states of one moment until the first such change (`storage::list_names`).
    pub const fn timed(
        name: &'static str,
        values: &'static [&'static str],
        value: fn(&R) -> Option<FilterValue>,
        state: fn(&[i64], i64) -> &'static str,
        changes: fn(&[i64], i64) -> Option<i64>,
        doc: &'static str,
    ) -> Self {
        Filter { name, alias: None, kind: FilterKind::Timed { values, any: None, state, changes }, value, doc }
    }

    /// `value` (any case) asks for every value: no filter.
    pub const fn any(mut self, value: &'static str) -> Self {
        self.kind = match self.kind {
            FilterKind::Enum { values, .. } => FilterKind::Enum { values, any: Some(value) },
            FilterKind::Timed { values, state, changes, .. } => FilterKind::Timed { values, any: Some(value), state, changes },
            kind => kind,
        };
        self
    }

    /// For a reference: `keyword` (any case) asks for the records that reference none, whose
    /// value is the nil id (root collections: `parentId=null`).
    pub const fn or_none(mut self, keyword: &'static str) -> Self {
        if let FilterKind::Reference { .. } = self.kind {
            self.kind = FilterKind::Reference { none: Some(keyword) };
        }
        self
    }

    /// The parameter is read under `alias` too (when `name` is absent).
    pub const fn alias(mut self, alias: &'static str) -> Self {
        self.alias = Some(alias);
        self
    }

    /// Whether each value has a counter.
    pub fn counted(&self) -> bool {
        !matches!(self.kind, FilterKind::Timed { .. })
    }
}

pub use crate::domain::Enumerated;

/// What a filter compares.
#[derive(Debug, Clone, Copy)]
pub enum FilterKind {
    /// One of fixed names, matched without regard to case; `any` (when set) means no filter.
    Enum { values: &'static [&'static str], any: Option<&'static str> },
    /// The id of another record; `none` (when set) is the keyword for the nil id: no record.
    Reference { none: Option<&'static str> },
    /// A short code (a country), put in its one written form by `normalise`; a value it refuses
    /// is a 400 with `invalid` as the message.
    /// `pattern` states in the document the values `normalise` accepts.
    Code { normalise: fn(&str) -> Option<String>, invalid: &'static str, pattern: &'static str },
    /// One of fixed names, each a state of the record's stored times at the list's moment;
    /// `any` as for [`FilterKind::Enum`]; see [`Filter::timed`].
    Timed {
        values: &'static [&'static str],
        any: Option<&'static str>,
        state: fn(&[i64], i64) -> &'static str,
        changes: fn(&[i64], i64) -> Option<i64>,
    },
    /// A boolean parameter, false unless given: false lists the records shown only.
    Hidden,
}

/// A record's value of one filter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FilterValue {
    Enum(&'static str),
    Reference(Uuid),
    Code(String),
    /// The stored times (and flags) a timed filter's state is read from.
    Times(Vec<i64>),
}

/// How [`FilterKind::Hidden`] keeps a record that is listed by default.
pub const SHOWN: &str = "shown";

impl FilterValue {
    /// The value of a [`Filter::hidden`] filter: whether the record is listed by default.
    pub fn shown(shown: bool) -> Option<FilterValue> {
        Some(FilterValue::Enum(if shown { SHOWN } else { "hidden" }))
    }

    /// The value as it is kept in order rows and counter keys.
    pub fn bytes(&self) -> Vec<u8> {
        match self {
            FilterValue::Enum(name) => name.as_bytes().to_vec(),
            FilterValue::Reference(id) => id.as_bytes().to_vec(),
            FilterValue::Code(code) => code.as_bytes().to_vec(),
            FilterValue::Times(times) => times.iter().flat_map(|t| t.to_be_bytes()).collect(),
        }
    }
}

/// The times a [`FilterValue::Times`] was kept as.
pub fn times_of(bytes: &[u8]) -> Vec<i64> {
    bytes.chunks_exact(8).map(|c| i64::from_be_bytes(c.try_into().unwrap_or([0; 8]))).collect()
}

/// A range of a stored time asked for with two parameters (`dateFrom`, `dateTo`: RFC 3339,
/// either may be absent, both ends included).
pub struct Range<R> {
    pub from: &'static str,
    pub to: &'static str,
    /// Unix milliseconds.
    pub value: fn(&R) -> i64,
}

/// A record's list, declared: where its orders are kept, how it sorts and what it filters on.
pub struct List<R: 'static> {
    /// `store ‖ sort tag ‖ sort value ‖ id`: the order rows, those of [`List::summaries`]
    /// carrying the summary. The summary holds the record's filter values, range values and
    /// search text, so a filtered walk reads no record.
    /// `None` for a record that is never listed (a cart): it keeps no order rows and no counters.
    pub order: Option<StoreTable>,
    pub sorts: &'static [Sort<R>],
    pub default_sort: &'static str,
    /// The sort whose order rows carry the summary (the others' are keys alone): one whose row
    /// every write moves anyway (`updated_at`), where the record has one, so a change of summary
    /// rewrites no row that would have stayed; else the default.
    pub summaries: &'static str,
    /// The default sort is the records' own order: its value is the key's tail, ids that grow
    /// in commit order (events, inventory history). Its rows are then the record table's own
    /// rows, none kept in the order table, and its summaries (`summaries` names it) are worked
    /// out from the records: an append-only kind writes one row less per record, and a list
    /// tested on its summaries decodes the records it reads.
    pub own_order: bool,
    pub filters: &'static [Filter<R>],
    pub ranges: &'static [Range<R>],
    /// Lower-cased text the `search` parameter looks in, and how a query matches it.
    pub search: Option<Search<R>>,
}

/// Text search of a list: the record's text as kept in its order rows, the test a query must
/// pass, and how a query is put in the form that test expects. Built with [`Search::new`], which
/// lower-cases both sides.
pub struct Search<R> {
    pub text: fn(&R) -> String,
    /// `store` is the list's: a search may compare a digest of the query made for that store.
    pub matches: fn(text: &str, query: &str, store: Uuid) -> bool,
    /// The query as `matches` takes it; `None` refuses it with a 400 saying `invalid`.
    pub normalise: fn(&str) -> Option<String>,
    pub invalid: &'static str,
    /// The queries `normalise` accepts, as the document states them; `None` when it takes any.
    pub pattern: Option<&'static str>,
    pub doc: &'static str,
}

impl<R> Search<R> {
    /// A search over text that is compared lower-cased: `text` is lower-cased as it is kept and
    /// the query as it is read.
    pub const fn new(text: fn(&R) -> String, matches: fn(&str, &str, Uuid) -> bool, doc: &'static str) -> Self {
        Search { text, matches, normalise: lower, invalid: "", pattern: None, doc }
    }

    /// A search whose query `normalise` puts in its form (refused with `invalid`); the record's
    /// text is kept as `text` gives it. `pattern` states the queries `normalise` accepts.
    pub const fn normalised(
        mut self,
        normalise: fn(&str) -> Option<String>,
        invalid: &'static str,
        pattern: &'static str,
    ) -> Self {
        self.normalise = normalise;
        self.invalid = invalid;
        self.pattern = Some(pattern);
        self
    }
}

fn lower(q: &str) -> Option<String> {
    Some(q.trim().to_lowercase())
}

impl<R> List<R> {
    /// A list with sortable fields only.
    pub const fn sorted(order: StoreTable, sorts: &'static [Sort<R>], default_sort: &'static str) -> Self {
        List {
            order: Some(order),
            sorts,
            default_sort,
            summaries: default_sort,
            own_order: false,
            filters: &[],
            ranges: &[],
            search: None,
        }
    }

    /// The declaration of a record that is never listed: it is loaded and written by id alone.
    pub const fn none() -> Self {
        List {
            order: None,
            sorts: &[],
            default_sort: "",
            summaries: "",
            own_order: false,
            filters: &[],
            ranges: &[],
            search: None,
        }
    }

    pub fn sort(&self, name: &str) -> Option<&Sort<R>> {
        self.sorts.iter().find(|s| s.name == name)
    }

    pub fn has_summary(&self) -> bool {
        !self.filters.is_empty() || !self.ranges.is_empty() || self.search.is_some()
    }
}

/// What `r`'s order rows carry for a filtered walk, and what the lists held test.
fn summary<R: Record>(r: &R) -> Summary {
    let list = &R::LIST;
    if !list.has_summary() {
        return Summary::default();
    }
    Summary {
        filters: list.filters.iter().map(|f| (f.value)(r).map(|v| v.bytes())).collect(),
        ranges: list.ranges.iter().map(|g| (g.value)(r)).collect(),
        text: list.search.as_ref().map(|s| (s.text)(r)).unwrap_or_default(),
    }
}

/// The summary as the order rows keep it: nothing for a record kind without filters, ranges
/// or search.
fn summary_bytes<R: Record>(s: &Summary) -> ApiResult<Vec<u8>> {
    if R::LIST.has_summary() { encode(s) } else { Ok(Vec::new()) }
}

/// Where a record's rows start: the store, then the parent of a scoped record.
fn base(store: Uuid, scope: Option<Uuid>) -> Key {
    match scope {
        Some(parent) => Key::store(store).id(parent),
        None => Key::store(store),
    }
}

/// The key of record `id` of `store` (under `scope` for a scoped record).
pub fn key_in(store: Uuid, scope: Option<Uuid>, id: Uuid) -> Vec<u8> {
    base(store, scope).id(id).into_vec()
}

/// The key of record `r` of `store`: its base and its [`Record::tail`].
pub fn key_of<R: Record>(store: Uuid, r: &R) -> Vec<u8> {
    r.tail(base(store, r.scope())).into_vec()
}

/// The key of record `id` of `store`.
pub fn row_key(store: Uuid, id: Uuid) -> Vec<u8> {
    key_in(store, None, id)
}

/// Where the order rows of one sortable field start.
pub(crate) fn order_prefix(store: Uuid, scope: Option<Uuid>, tag: u8) -> Vec<u8> {
    base(store, scope).u8(tag).into_vec()
}

/// The counter of how many records of `R` the store (or the parent `scope`) has.
pub fn total_key<R: Record>(store: Uuid, scope: Option<Uuid>) -> Vec<u8> {
    let k = Key::store(store).str(R::NAME);
    match scope {
        Some(parent) => k.id(parent).into_vec(),
        None => k.into_vec(),
    }
}

/// The counter of the records of `R` whose filter `filter` has `value`.
pub(crate) fn value_key<R: Record>(store: Uuid, scope: Option<Uuid>, filter: &str, value: &[u8]) -> Vec<u8> {
    let mut k = total_key::<R>(store, scope);
    k.extend_from_slice(Key::default().str(filter).bytes());
    k.extend_from_slice(value);
    k
}

/// The tag of partition rows: sort tags stay below it.
pub(crate) const PARTITION: u8 = 0xF0;

/// Where the partition of filter `filter` (by position) with `value` starts: its records in the
/// default order.
pub(crate) fn partition_prefix(store: Uuid, scope: Option<Uuid>, filter: usize, value: &[u8]) -> Vec<u8> {
    partition(store, scope, filter, value).into_vec()
}

fn partition(store: Uuid, scope: Option<Uuid>, filter: usize, value: &[u8]) -> Key {
    base(store, scope).u8(PARTITION).u8(filter as u8).raw(value)
}

/// A record's order rows: one per sortable field, those of [`List::summaries`] carrying `value`
/// (its summary), and one in the partition of each counted filter value it has, in the default
/// order — so a list filtered on one value in its default order is read from its partition,
/// whatever the size of the whole list. The other sorts' rows and the partition rows are their
/// keys alone: a change of the summary (an order's fulfillment status, say) rewrites the row
/// its `updated_at` moves anyway, not one per sort, and leaves the partitions the record stays
/// in untouched. What tests summaries in another sort reads them from those rows ([`RowShape`]).
/// A default sort in the records' own order ([`List::own_order`]) has no rows: the record's
/// own row stands for it.
fn order_rows<R: Record>(store: Uuid, r: &R, value: &[u8]) -> Rows {
    let list = &R::LIST;
    let mut rows: Rows = list
        .sorts
        .iter()
        .filter(|s| {
            let own = list.own_order && s.name == list.default_sort;
            debug_assert!(!own || (s.key)(r, Key::default()).bytes().is_empty(), "{}: own order adds no sort value", R::NAME);
            !own
        })
        .map(|s| {
            let carried = if s.name == list.summaries { value.to_vec() } else { Vec::new() };
            (r.tail((s.key)(r, base(store, r.scope()).u8(s.tag))).into_vec(), carried)
        })
        .collect();
    if let Some(sort) = list.sort(list.default_sort) {
        for (i, f) in list.filters.iter().enumerate().filter(|(_, f)| f.counted()) {
            if let Some(v) = (f.value)(r) {
                let at = partition(store, r.scope(), i, &v.bytes());
                rows.push((r.tail((sort.key)(r, at)).into_vec(), Vec::new()));
            }
        }
    }
    rows
}

/// How `R`'s order rows are laid out, for what builds its lists by name: which sort's rows
/// carry the summaries, and how many bytes of a row's key name its record. `None` for a record
/// never listed (or whose `summaries` names no sort of its own, which `cells::kinds` tests).
pub fn row_shape<R: Record>() -> Option<RowShape> {
    let list = &R::LIST;
    list.order?;
    // Rows in the records' own order are the default sort's, and carry the summaries.
    if list.own_order && list.summaries != list.default_sort {
        return None;
    }
    let own = list.own_order.then_some(OwnRows { table: R::TABLE, summary: summary_of_record::<R> });
    Some(RowShape { summary_tag: list.sort(list.summaries)?.tag, tail: R::TAIL, own })
}

/// The summary of the record stored as `value`: what a sort in the records' own order carries.
fn summary_of_record<R: Record>(value: &[u8]) -> ApiResult<Summary> {
    Ok(summary(&decode::<R>(value)?))
}

/// Where the rows of `R`'s sort `tag` are, for `store` and `scope`: their table and the prefix
/// they start with (the record table's rows for a sort in the records' own order).
pub(crate) fn sort_rows(shape: &RowShape, order: StoreTable, store: Uuid, scope: Option<Uuid>, tag: u8) -> (StoreTable, Vec<u8>) {
    match shape.own {
        Some(own) if tag == shape.summary_tag => (own.table, base(store, scope).into_vec()),
        _ => (order, order_prefix(store, scope, tag)),
    }
}

/// The name of a record list held in memory (`storage::list`): the record's order table, its
/// scope and sort, and what it keeps ([`list_names::name`]). The name alone says how to build
/// the list ([`crate::storage::list::build_list`]), so a list named in the restart hint is
/// warmed without knowing its record. `None` for a view too large to name (it is walked).
pub(crate) fn list_name<R: Record>(scope: Option<Uuid>, tag: u8, keeps: &Keeps) -> Option<Arc<[u8]>> {
    list_names::name(&lists_of::<R>(scope), tag, keeps)
}

/// What a list of `R` in sort `tag` kept to one value of counted filter `i` is: the value's
/// partition in the default order, else the sort's rows with that value.
pub(crate) fn one_value<R: Record>(tag: u8, i: usize, value: Vec<u8>) -> Keeps {
    let list = &R::LIST;
    if list.sort(list.default_sort).is_some_and(|s| s.tag == tag) {
        Keeps::Partition(i, value)
    } else {
        Keeps::Summaries(i, value)
    }
}

/// What `R`'s lists test that their names do not say: its text search and its timed filters.
pub(crate) fn kind_tests<R: Listable>() -> KindTests {
    KindTests { search: R::LIST.search.as_ref().map(|s| s.matches), timed: timed_state::<R> }
}

/// Timed filter `i` of `R` for its stored times `value` at moment `at`: the state they make and
/// the first moment after `at` it may differ. `None` when filter `i` is not timed.
fn timed_state<R: Listable>(i: usize, value: &[u8], at: i64) -> Option<(&'static str, Option<i64>)> {
    match R::LIST.filters.get(i)?.kind {
        FilterKind::Timed { state, changes, .. } => {
            let times = times_of(value);
            Some((state(&times, at), changes(&times, at)))
        }
        _ => None,
    }
}

/// What the names of `R`'s lists under `scope` start with.
fn lists_of<R: Record>(scope: Option<Uuid>) -> Vec<u8> {
    let mut name = R::LIST.order.map(|t| t.index).unwrap_or(u16::MAX).to_be_bytes().to_vec();
    match scope {
        Some(parent) => {
            name.push(1);
            name.extend_from_slice(parent.as_bytes());
        }
        None => name.push(0),
    }
    name
}

/// `r` as the lists held in memory see it: its summary and its key in each sort.
fn side<R: Record>(r: &R, summary: Summary) -> Side {
    let keys = R::LIST.sorts.iter().map(|s| (s.tag, r.tail((s.key)(r, Key::default())).into_vec().into())).collect();
    Side { summary, keys }
}

/// The counters a record adds to: the filter values it has.
fn value_counters<R: Record>(store: Uuid, r: &R) -> Vec<Vec<u8>> {
    R::LIST
        .filters
        .iter()
        .filter(|f| f.counted())
        .filter_map(|f| (f.value)(r).map(|v| value_key::<R>(store, r.scope(), f.name, &v.bytes())))
        .collect()
}

/// Reads record `id` of `store` inside a write job.
pub fn load<R: Record>(tx: &Tx, store: Uuid, id: Uuid) -> ApiResult<Option<R>> {
    load_in(tx, store, None, id)
}

/// Reads record `id` under `scope` inside a write job.
pub fn load_in<R: Record>(tx: &Tx, store: Uuid, scope: Option<Uuid>, id: Uuid) -> ApiResult<Option<R>> {
    debug_assert_eq!(R::TAIL, 16, "{} is found by its key, not its id", R::NAME);
    tx.get(R::TABLE, &key_in(store, scope, id))?.map(|b| decode(&b)).transpose()
}

/// Reads the record of the order row `row` (a key under `scope` ending with the record's
/// [`Record::tail`]) inside a write job.
pub fn load_listed<R: Record>(tx: &Tx, store: Uuid, scope: Option<Uuid>, row: &[u8]) -> ApiResult<Option<R>> {
    let Some(key) = listed_key::<R>(store, scope, row) else { return Ok(None) };
    tx.get(R::TABLE, &key)?.map(|b| decode(&b)).transpose()
}

/// The key of the record of the order row `row`: the base, then the row's last
/// [`Record::TAIL`] bytes.
fn listed_key<R: Record>(store: Uuid, scope: Option<Uuid>, row: &[u8]) -> Option<Vec<u8>> {
    let tail = row.len().checked_sub(R::TAIL).and_then(|i| row.get(i..))?;
    let mut key = base(store, scope).into_vec();
    key.extend_from_slice(tail);
    Some(key)
}

/// Like [`load`], a 404 when the record does not exist.
pub fn must_load<R: Record>(tx: &Tx, store: Uuid, id: Uuid) -> ApiResult<R> {
    load(tx, store, id)?.ok_or_else(ApiError::not_found)
}

/// Reads record `id` of `store` in a read transaction.
pub fn get<R: Record>(txn: &ReadTransaction, store: Uuid, id: Uuid) -> ApiResult<Option<R>> {
    get_in(txn, store, None, id)
}

/// Reads record `id` under `scope` in a read transaction.
pub fn get_in<R: Record>(txn: &ReadTransaction, store: Uuid, scope: Option<Uuid>, id: Uuid) -> ApiResult<Option<R>> {
    debug_assert_eq!(R::TAIL, 16, "{} is found by its key, not its id", R::NAME);
    read::get(txn, R::TABLE, &key_in(store, scope, id))
}

/// Reads the records `ids` under `scope` in a read transaction, in the order given (missing ones
/// left out), opening their table once: a page's rows, not a table open per row.
pub fn get_each_in<R: Record>(
    txn: &ReadTransaction,
    store: Uuid,
    scope: Option<Uuid>,
    ids: impl IntoIterator<Item = Uuid>,
) -> ApiResult<Vec<R>> {
    debug_assert_eq!(R::TAIL, 16, "{} is found by its key, not its id", R::NAME);
    read::get_each(txn, R::TABLE, ids.into_iter().map(|id| key_in(store, scope, id)))
}

/// Reads the records whose order rows are `rows` (keys under `scope`, each ending with its
/// record's [`Record::tail`]), in that order, opening their table once: a list page's records.
pub fn get_listed<'k, R: Record>(
    txn: &ReadTransaction,
    store: Uuid,
    scope: Option<Uuid>,
    rows: impl IntoIterator<Item = &'k [u8]>,
) -> ApiResult<Vec<R>> {
    read::get_each(txn, R::TABLE, rows.into_iter().filter_map(|row| listed_key::<R>(store, scope, row)))
}

/// Whether record `id` of `store` exists, inside a write job.
pub fn exists<R: Record>(tx: &Tx, store: Uuid, id: Uuid) -> ApiResult<bool> {
    debug_assert_eq!(R::TAIL, 16, "{} is found by its key, not its id", R::NAME);
    Ok(tx.get(R::TABLE, &row_key(store, id))?.is_some())
}

/// How many records of `R` the store (or the parent `scope`) has, inside a write job.
pub fn count<R: Record>(tx: &Tx, store: Uuid, scope: Option<Uuid>) -> ApiResult<u64> {
    tx.counter(COUNTERS, &total_key::<R>(store, scope))
}

/// How many records of `R` the store has with `value` for the counted filter `filter`, inside a
/// write job (a market still named by catalogs).
pub fn count_value<R: Record>(tx: &Tx, store: Uuid, filter: &str, value: &FilterValue) -> ApiResult<u64> {
    tx.counter(COUNTERS, &value_key::<R>(store, None, filter, &value.bytes()))
}

/// Writes `new` in place of `old` (either may be absent: a create, a delete) with every order
/// row, claim and counter in step. The one writer of every record.
pub fn write<R: Record>(tx: &mut Tx, store: Uuid, old: Option<&R>, new: Option<&R>) -> ApiResult<()> {
    if let Some(order) = R::LIST.order {
        let (old_summary, new_summary) = (old.map(summary), new.map(summary));
        let rows = |r: Option<&R>, s: &Option<Summary>| -> ApiResult<Rows> {
            match (r, s) {
                (Some(r), Some(s)) => Ok(order_rows(store, r, &summary_bytes::<R>(s)?)),
                _ => Ok(Vec::new()),
            }
        };
        tx.sync_rows(order, &rows(old, &old_summary)?, &rows(new, &new_summary)?)?;
        // The lists held in memory test these once the write commits.
        let scope = new.or(old).and_then(Record::scope);
        tx.record_change(RecordChange {
            store,
            kind: lists_of::<R>(scope).into(),
            old: old.zip(old_summary).map(|(r, s)| side(r, s)),
            new: new.zip(new_summary).map(|(r, s)| side(r, s)),
            tests: kind_tests::<R>(),
        });
    }
    let claims = |r: Option<&R>| r.map(|r| r.claims(store)).transpose().map(Option::unwrap_or_default);
    let (old_claims, new_claims) = (claims(old)?, claims(new)?);
    for (table, key, _) in &old_claims {
        if !new_claims.iter().any(|(t, k, _)| t.index == table.index && k == key) {
            tx.delete(*table, key)?;
        }
    }
    for (table, key, value) in &new_claims {
        if !old_claims.iter().any(|(t, k, v)| t.index == table.index && k == key && v == value) {
            tx.put(*table, key, value)?;
        }
    }
    // A counter per filter value: keys are made only for the values that change.
    for f in R::LIST.filters.iter().filter(|f| f.counted()) {
        let value = |r: Option<&R>| r.and_then(|r| (f.value)(r)).map(|v| v.bytes());
        let (was, is) = (value(old), value(new));
        if was == is {
            continue;
        }
        if let (Some(v), Some(r)) = (was, old) {
            tx.bump(COUNTERS, &value_key::<R>(store, r.scope(), f.name, &v), -1)?;
        }
        if let (Some(v), Some(r)) = (is, new) {
            tx.bump(COUNTERS, &value_key::<R>(store, r.scope(), f.name, &v), 1)?;
        }
    }
    match (old, new) {
        _ if R::LIST.order.is_none() => {}
        (None, Some(n)) => tx.bump(COUNTERS, &total_key::<R>(store, n.scope()), 1)?,
        (Some(o), None) => tx.bump(COUNTERS, &total_key::<R>(store, o.scope()), -1)?,
        _ => {}
    }
    match (old, new) {
        (_, Some(n)) => tx.put(R::TABLE, &key_of(store, n), &encode(n)?),
        (Some(o), None) => tx.delete(R::TABLE, &key_of(store, o)),
        (None, None) => Ok(()),
    }
}

/// Writes `r` of a record never listed ([`List::none`]: no order rows, no counters), with its
/// claims, in place of whatever was there.
pub fn put<R: Record>(tx: &mut Tx, store: Uuid, r: &R) -> ApiResult<()> {
    debug_assert!(R::LIST.order.is_none(), "a listed record is written with its old version");
    write(tx, store, None, Some(r))
}

/// Deletes every record of `R` under the parent `scope` with its order rows and counters: the
/// parent is going. Scoped records keep no claims.
pub fn delete_scope<R: Record>(tx: &mut Tx, store: Uuid, scope: Uuid) -> ApiResult<()> {
    let at = Key::store(store).id(scope).into_vec();
    tx.delete_prefix(R::TABLE, &at)?;
    if let Some(order) = R::LIST.order {
        tx.delete_prefix(order, &at)?;
    }
    tx.delete_prefix(COUNTERS, &total_key::<R>(store, Some(scope)))?;
    // Its lists held in memory go too, rather than a change per row deleted.
    tx.forget_lists(store, lists_of::<R>(Some(scope)).into());
    Ok(())
}

/// The rows of `R` by store and parent against their total counters, each disagreement
/// described (`admin check`); a store of `stores` with no rows must count none. A record never
/// listed keeps no counters ([`write`]), so there is nothing to recount.
pub fn recount<R: Record>(txn: &ReadTransaction, stores: &[Uuid]) -> ApiResult<Vec<String>> {
    use redb::ReadableTable;
    if R::LIST.order.is_none() {
        return Ok(Vec::new());
    }
    let mut counted: std::collections::BTreeMap<Vec<u8>, (Uuid, u64)> = Default::default();
    for s in stores {
        counted.insert(total_key::<R>(*s, None), (*s, 0));
    }
    for row in txn.open_table(R::TABLE.def)?.iter()? {
        let (k, v) = row?;
        let store = crate::storage::keys::leading_store(k.value()).ok_or_else(|| ApiError::internal("a row's key is short"))?;
        let r: R = decode(v.value())?;
        counted.entry(total_key::<R>(store, r.scope())).or_insert((store, 0)).1 += 1;
    }
    let counters = txn.open_table(COUNTERS.def)?;
    let mut wrong = Vec::new();
    for (key, (store, rows)) in counted {
        let stored = counters.get(key.as_slice())?.map(|v| crate::storage::tx::read_u64(v.value())).unwrap_or(0);
        if stored != rows {
            wrong.push(format!("store {store}: the {} counter says {stored}, there are {rows} rows", R::NAME));
        }
    }
    Ok(wrong)
}

/// Writes the order rows of every record of `R` in every store, streamed from its table: a
/// restore's step for the order tables a backup leaves out (`tables::REBUILT`). Counters and
/// claims are not touched: they travel in the backup, and `admin check` recounts them.
pub fn refill_order<R: Record>(txn: &redb::WriteTransaction) -> Result<(), redb::Error> {
    let Some(order_table) = R::LIST.order else { return Ok(()) };
    let mut order = txn.open_table(order_table.def)?;
    each_record::<R>(txn, decode, |store, r| insert_order_rows(&mut order, store, &r))
}

/// Rebuilds every order row and counter of `R` in every store from the records, and writes its
/// claims again: the migration step of a format version that changes what a record's list keeps
/// (new sortable fields, new filters and their counters) or adds a claim.
pub fn rebuild<R: Record>(txn: &redb::WriteTransaction) -> Result<(), redb::Error> {
    rebuild_with::<R>(txn, decode)
}

/// [`rebuild`] of records stored in an earlier layout: `read` decodes a row as its format wrote
/// it and answers the record as it is today (an earlier step, run on a database of that format,
/// cannot read its rows as today's type). The rows themselves are left as they are.
pub fn rebuild_with<R: Record>(txn: &redb::WriteTransaction, read: fn(&[u8]) -> ApiResult<R>) -> Result<(), redb::Error> {
    // A record never listed keeps neither order rows nor counters.
    let Some(order_table) = R::LIST.order else { return Ok(()) };
    txn.open_table(order_table.def)?.retain(|_, _| false)?;
    let name = Key::default().str(R::NAME).into_vec();
    // `store ‖ NAME …`: every counter of `R`, whatever the store.
    txn.open_table(COUNTERS.def)?.retain(|k, _| !(k.len() >= 16 + name.len() && k[16..16 + name.len()] == name[..]))?;
    let mut order = txn.open_table(order_table.def)?;
    let mut counters: std::collections::BTreeMap<Vec<u8>, u64> = Default::default();
    each_record::<R>(txn, read, |store, r| {
        insert_order_rows(&mut order, store, &r)?;
        // Claims are written again as they are: a step that adds a claim table fills it.
        for (table, k, v) in r.claims(store).map_err(corrupt::<R>)? {
            txn.open_table(table.def)?.insert(k.as_slice(), v.as_slice())?;
        }
        *counters.entry(total_key::<R>(store, r.scope())).or_default() += 1;
        for k in value_counters(store, &r) {
            *counters.entry(k).or_default() += 1;
        }
        Ok(())
    })?;
    let mut table = txn.open_table(COUNTERS.def)?;
    for (k, n) in counters {
        table.insert(k.as_slice(), n.to_le_bytes().as_slice())?;
    }
    Ok(())
}

/// Hands every record of `R`, in every store, decoded by `read`, to `each`, streamed from its
/// table (a cell's records are never all in memory at once); `each` may write any other table.
fn each_record<R: Record>(
    txn: &redb::WriteTransaction,
    read: fn(&[u8]) -> ApiResult<R>,
    mut each: impl FnMut(Uuid, R) -> Result<(), redb::Error>,
) -> Result<(), redb::Error> {
    use redb::ReadableTable;
    let records = txn.open_table(R::TABLE.def)?;
    for item in records.iter()? {
        let (k, v) = item?;
        let Some(store) = crate::storage::keys::leading_store(k.value()) else { continue };
        // A row that does not decode is corruption: the step fails (and the start or restore
        // with it) rather than leave the record out of its lists.
        each(store, read(v.value()).map_err(corrupt::<R>)?)?;
    }
    Ok(())
}

/// Inserts the order rows of `r` into its order table `order`, opened in a write.
fn insert_order_rows<R: Record>(order: &mut redb::Table<&[u8], &[u8]>, store: Uuid, r: &R) -> Result<(), redb::Error> {
    for (k, v) in order_rows(store, r, &summary_bytes::<R>(&summary(r)).map_err(corrupt::<R>)?) {
        order.insert(k.as_slice(), v.as_slice())?;
    }
    Ok(())
}

fn corrupt<R: Record>(e: ApiError) -> redb::Error {
    redb::Error::Corrupted(format!("{}: {e}", R::NAME))
}
