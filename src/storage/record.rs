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

use redb::ReadTransaction;
use serde::Serialize;
use serde::de::DeserializeOwned;
use uuid::Uuid;

use crate::error::{ApiError, ApiResult};
use crate::storage::codec::{decode, encode};
use crate::storage::keys::Key;
use crate::storage::read;
use crate::storage::tables::{COUNTERS, StoreTable};
use crate::storage::writer::{Rows, Tx};

/// A stored entity of a store. Implemented once per entity, by declaration.
pub trait Record: Serialize + DeserializeOwned + Send + Sync + 'static {
    /// `store ‖ id → record`.
    const TABLE: StoreTable;
    /// Names the entity's counters (`store ‖ NAME` is how many there are).
    const NAME: &'static str;
    /// The entity's list: order table, sortable fields, filters, search.
    const LIST: List<Self>;

    fn id(&self) -> Uuid;

    /// Secondary rows besides the list orders (uniqueness claims such as a market's countries,
    /// lookups by handle): `(table, key, value)`, kept in step by [`write`]. Checking that a claim
    /// is free is the area's rule (its 409 names the field); keeping the rows is not.
    fn claims(&self, _store: Uuid) -> Vec<(StoreTable, Vec<u8>, Vec<u8>)> {
        Vec::new()
    }
}

/// A sortable field: the name `sortBy` takes, its tag in the order table's keys (a stored
/// number: never reused for another field), and how the record's sort value is appended to a key.
pub struct Sort<R> {
    pub name: &'static str,
    pub tag: u8,
    pub key: fn(&R, Key) -> Key,
}

/// A list filter: equality on an enumerated field or a reference to another record, asked for
/// with one value or many, comma-separated. Each value has a counter, so the `total` of a list
/// filtered on one field is read, not counted.
pub struct Filter<R> {
    /// The query parameter.
    pub name: &'static str,
    pub kind: FilterKind,
    /// The record's value; `None` when it has none (an order without a customer).
    pub value: fn(&R) -> Option<FilterValue>,
    /// What the parameter means, for the reference.
    pub doc: &'static str,
}

/// A fieldless enum filtered on: its names as the API writes them. A test of each area checks
/// them against serde's.
pub trait Enumerated: Copy + 'static {
    const NAMES: &'static [&'static str];
    fn name(self) -> &'static str;
}

/// A filter on an enumerated field of `R`.
pub const fn enum_filter<R, E: Enumerated>(
    name: &'static str,
    any: Option<&'static str>,
    value: fn(&R) -> Option<FilterValue>,
    doc: &'static str,
) -> Filter<R> {
    Filter { name, kind: FilterKind::Enum { values: E::NAMES, any }, value, doc }
}

/// What a filter compares.
#[derive(Debug, Clone, Copy)]
pub enum FilterKind {
    /// One of fixed names, matched without regard to case; `any` (when set) means no filter.
    Enum { values: &'static [&'static str], any: Option<&'static str> },
    /// The id of another record.
    Reference,
    /// A short code (a country), put in its one written form by `normalise`; a value it refuses
    /// is a 400 with `invalid` as the message.
    Code { normalise: fn(&str) -> Option<String>, invalid: &'static str },
}

/// A record's value of one filter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FilterValue {
    Enum(&'static str),
    Reference(Uuid),
    Code(String),
}

impl FilterValue {
    /// The value as it is kept in order rows and counter keys.
    pub fn bytes(&self) -> Vec<u8> {
        match self {
            FilterValue::Enum(name) => name.as_bytes().to_vec(),
            FilterValue::Reference(id) => id.as_bytes().to_vec(),
            FilterValue::Code(code) => code.as_bytes().to_vec(),
        }
    }
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
    /// `store ‖ sort tag ‖ sort value ‖ id → summary`: the order rows. The summary holds the
    /// record's filter values, range values and search text, so a filtered walk reads no record.
    pub order: StoreTable,
    pub sorts: &'static [Sort<R>],
    pub default_sort: &'static str,
    pub filters: &'static [Filter<R>],
    pub ranges: &'static [Range<R>],
    /// Lower-cased text the `search` parameter looks in, and how a query matches it.
    pub search: Option<Search<R>>,
}

/// Text search of a list: the record's text (kept lower-cased in its order rows) and the test a
/// query (trimmed, lower-cased) must pass.
pub struct Search<R> {
    pub text: fn(&R) -> String,
    pub matches: fn(text: &str, query: &str) -> bool,
    pub doc: &'static str,
}

impl<R> List<R> {
    /// A list with sortable fields only.
    pub const fn sorted(order: StoreTable, sorts: &'static [Sort<R>], default_sort: &'static str) -> Self {
        List { order, sorts, default_sort, filters: &[], ranges: &[], search: None }
    }

    pub fn sort(&self, name: &str) -> Option<&Sort<R>> {
        self.sorts.iter().find(|s| s.name == name)
    }

    pub fn has_summary(&self) -> bool {
        !self.filters.is_empty() || !self.ranges.is_empty() || self.search.is_some()
    }
}

/// What a record's order rows carry for a filtered walk.
#[derive(Debug, Default, Serialize, serde::Deserialize)]
pub(crate) struct Summary {
    pub filters: Vec<Option<Vec<u8>>>,
    pub ranges: Vec<i64>,
    pub text: String,
}

fn summary<R: Record>(r: &R) -> ApiResult<Vec<u8>> {
    let list = &R::LIST;
    if !list.has_summary() {
        return Ok(Vec::new());
    }
    encode(&Summary {
        filters: list.filters.iter().map(|f| (f.value)(r).map(|v| v.bytes())).collect(),
        ranges: list.ranges.iter().map(|g| (g.value)(r)).collect(),
        text: list.search.as_ref().map(|s| (s.text)(r).to_lowercase()).unwrap_or_default(),
    })
}

/// The key of record `id` of `store`.
pub fn row_key(store: Uuid, id: Uuid) -> Vec<u8> {
    Key::store(store).id(id).into_vec()
}

/// The counter of how many records of `R` the store has.
pub fn total_key<R: Record>(store: Uuid) -> Vec<u8> {
    Key::store(store).str(R::NAME).into_vec()
}

/// The counter of the records of `R` whose filter `filter` has `value`.
pub(crate) fn value_key<R: Record>(store: Uuid, filter: &str, value: &[u8]) -> Vec<u8> {
    let mut k = Key::store(store).str(R::NAME).str(filter).into_vec();
    k.extend_from_slice(value);
    k
}

fn order_rows<R: Record>(store: Uuid, r: &R) -> ApiResult<Rows> {
    let value = summary(r)?;
    Ok(R::LIST.sorts.iter().map(|s| ((s.key)(r, Key::store(store).u8(s.tag)).id(r.id()).into_vec(), value.clone())).collect())
}

/// The counters a record adds to: the filter values it has.
fn value_counters<R: Record>(store: Uuid, r: &R) -> Vec<Vec<u8>> {
    R::LIST.filters.iter().filter_map(|f| (f.value)(r).map(|v| value_key::<R>(store, f.name, &v.bytes()))).collect()
}

/// Reads record `id` of `store` inside a write job.
pub fn load<R: Record>(tx: &Tx, store: Uuid, id: Uuid) -> ApiResult<Option<R>> {
    tx.get(R::TABLE, &row_key(store, id))?.map(|b| decode(&b)).transpose()
}

/// Like [`load`], a 404 when the record does not exist.
pub fn must_load<R: Record>(tx: &Tx, store: Uuid, id: Uuid) -> ApiResult<R> {
    load(tx, store, id)?.ok_or_else(ApiError::not_found)
}

/// Reads record `id` of `store` in a read transaction.
pub fn get<R: Record>(txn: &ReadTransaction, store: Uuid, id: Uuid) -> ApiResult<Option<R>> {
    read::get(txn, R::TABLE, &row_key(store, id))
}

/// Whether record `id` of `store` exists, inside a write job.
pub fn exists<R: Record>(tx: &Tx, store: Uuid, id: Uuid) -> ApiResult<bool> {
    Ok(tx.get(R::TABLE, &row_key(store, id))?.is_some())
}

/// Writes `new` in place of `old` (either may be absent: a create, a delete) with every order
/// row, claim and counter in step. The one writer of every record.
pub fn write<R: Record>(tx: &mut Tx, store: Uuid, old: Option<&R>, new: Option<&R>) -> ApiResult<()> {
    let rows = |r: Option<&R>| r.map(|r| order_rows(store, r)).transpose().map(Option::unwrap_or_default);
    tx.sync_rows(R::LIST.order, &rows(old)?, &rows(new)?)?;
    let claims = |r: Option<&R>| r.map(|r| r.claims(store)).unwrap_or_default();
    let (old_claims, new_claims) = (claims(old), claims(new));
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
    let counters = |r: Option<&R>| r.map(|r| value_counters(store, r)).unwrap_or_default();
    let (old_values, new_values) = (counters(old), counters(new));
    for k in old_values.iter().filter(|k| !new_values.contains(k)) {
        tx.bump(COUNTERS, k, -1)?;
    }
    for k in new_values.iter().filter(|k| !old_values.contains(k)) {
        tx.bump(COUNTERS, k, 1)?;
    }
    match (old, new) {
        (None, Some(_)) => tx.bump(COUNTERS, &total_key::<R>(store), 1)?,
        (Some(_), None) => tx.bump(COUNTERS, &total_key::<R>(store), -1)?,
        _ => {}
    }
    match (old, new) {
        (_, Some(n)) => tx.put(R::TABLE, &row_key(store, n.id()), &encode(n)?),
        (Some(o), None) => tx.delete(R::TABLE, &row_key(store, o.id())),
        (None, None) => Ok(()),
    }
}

/// Rebuilds every order row and counter of `R` in every store from the records: the migration
/// step of a format version that changes what a record's list keeps (new sortable fields, new
/// filters and their counters).
pub fn rebuild<R: Record>(txn: &redb::WriteTransaction) -> Result<(), redb::Error> {
    use redb::ReadableTable;
    let mut records = Vec::new();
    {
        let table = txn.open_table(R::TABLE.def)?;
        for item in table.iter()? {
            let (k, v) = item?;
            let store = crate::storage::keys::leading_store(k.value());
            let record: Option<R> = decode(v.value()).ok();
            if let (Some(store), Some(record)) = (store, record) {
                records.push((store, record));
            }
        }
    }
    txn.open_table(R::LIST.order.def)?.retain(|_, _| false)?;
    let name = Key::default().str(R::NAME).into_vec();
    // `store ‖ NAME …`: every counter of `R`, whatever the store.
    txn.open_table(COUNTERS.def)?.retain(|k, _| !(k.len() >= 16 + name.len() && k[16..16 + name.len()] == name[..]))?;
    let mut order = txn.open_table(R::LIST.order.def)?;
    let mut counters: std::collections::BTreeMap<Vec<u8>, u64> = Default::default();
    let failed = |e: ApiError| redb::Error::Corrupted(e.to_string());
    for (store, r) in &records {
        for (k, v) in order_rows(*store, r).map_err(failed)? {
            order.insert(k.as_slice(), v.as_slice())?;
        }
        *counters.entry(total_key::<R>(*store)).or_default() += 1;
        for k in value_counters(*store, r) {
            *counters.entry(k).or_default() += 1;
        }
    }
    let mut table = txn.open_table(COUNTERS.def)?;
    for (k, n) in counters {
        table.insert(k.as_slice(), n.to_le_bytes().as_slice())?;
    }
    Ok(())
}
