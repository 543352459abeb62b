//! The one seam every list goes through: a list is asked for as a [`ListQuery`] (sort field by
//! name, order, filters, ranges, text, window) over a record's declaration, and answers the
//! page's records with the number matching.
//!
//! A record's order rows in redb are the durable form of its lists; what a page reads is held
//! in memory. Every list in any of its sorts is a list held in memory (`storage::list_orders`,
//! as products' are): over every record, filtered on one counted field, or a view (several
//! filtered fields, ranges, a text query: `storage::list_names`). It is built from the order
//! rows on its first read (keys alone: the rows of a sort, or for one filter value in the
//! default order its partition; otherwise the sort's rows of the records whose summaries, kept
//! in one sort's rows, pass), kept in step by every write of the record
//! ([`crate::storage::record::write`] reports the record's summary and keys before and after;
//! each held list of its kind tests them), within the lists' share of the memory budget. A page
//! of it costs its size whatever its offset, and its `total` is the list's length. A filter
//! asked with several values alone merges the heads of their lists up to the page's end. A
//! list with a timed filter (a state that changes with the clock, not with writes) is a view of
//! the states at one moment, built again when read at a moment some record's state may have
//! changed since (`storage::list_names`). Only a view too large to name is walked in redb: from
//! the smallest partition among its one-valued counted filters in the default order, else along
//! the sort's rows, reading summaries (from the rows that carry them), never records. A kind
//! whose default sort is its records' own order (`List::own_order`) has the record table's rows
//! for that sort's, and its summaries are worked out from those records (`record::sort_rows`).

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use redb::{Database, ReadTransaction, ReadableDatabase};
use uuid::Uuid;

use crate::error::{ApiError, ApiResult};
use crate::storage::list_names::{self, Keeps, KindTests, ListParts, RowShape, Summary, View};
use crate::storage::list_orders::{Built, ListName, ListOrders};
use crate::storage::ranked::Keys;
use crate::storage::read;
use crate::storage::record::{
    self, Listable, Record, kind_tests, list_name, one_value, partition_prefix, row_shape, sort_rows, total_key, value_key,
};
use crate::storage::tables::{COUNTERS, StoreTable};

/// A list asked for.
#[derive(Debug, Clone, Default)]
pub struct ListQuery {
    /// The parent whose records are listed, for a scoped record (see [`Record::scope`]).
    pub scope: Option<Uuid>,
    /// A sortable field of the record, by name.
    pub sort: &'static str,
    pub desc: bool,
    /// How many matching records precede the page.
    pub offset: usize,
    pub limit: usize,
    /// Filter (by position in the declaration) → the values it accepts (any of them).
    pub filters: Vec<(usize, Vec<Vec<u8>>)>,
    /// Range (by position in the declaration) → inclusive bounds in Unix milliseconds.
    pub ranges: Vec<(usize, Option<i64>, Option<i64>)>,
    /// As the record's search normalises it.
    pub search: Option<String>,
}

/// A page of records and how many match the list's filters.
#[derive(Debug)]
pub struct Listed<R> {
    pub items: Vec<R>,
    pub total: u64,
}

impl<R> Listed<R> {
    /// The same page with each record turned into what the API shows.
    pub fn map<V>(self, f: impl FnMut(R) -> V) -> Listed<V> {
        Listed { items: self.items.into_iter().map(f).collect(), total: self.total }
    }
}

impl ListQuery {
    /// Keeps the list to the records whose enumerated (or hidden) filter `filter` of `R` is
    /// `value`, whatever was asked: what a caller may see (shoppers: published collections).
    pub fn restrict<R: Listable>(&mut self, filter: &str, value: &str) {
        if let Some(i) = R::LIST.filters.iter().position(|f| f.name == filter) {
            self.filters.retain(|(j, _)| *j != i);
            self.filters.push((i, vec![value.as_bytes().to_vec()]));
            self.filters.sort_by_key(|(j, _)| *j);
        }
    }

    fn is_plain(&self) -> bool {
        self.filters.is_empty() && self.ranges.is_empty() && self.search.is_none()
    }

    /// Whether a record of this summary is on `store`'s list at `now` (timed filters read the
    /// clock).
    fn accepts<R: Record>(&self, summary: &Summary, store: Uuid, now: i64) -> bool {
        let tests = kind_tests::<R>();
        list_names::accepts(
            summary,
            &self.filters,
            &self.ranges,
            self.search.as_deref(),
            |i, v, values| list_names::value_in(Some(&tests), i, v, values, now),
            |text, q| tests.search.is_some_and(|m| m(text, q, store)),
        )
    }

    /// The view this list is: its filters (each value once), ranges and text search.
    fn view<R: Record>(&self) -> View {
        let list = &R::LIST;
        let mut filters: Vec<(usize, Vec<Vec<u8>>)> = self.filters.iter().map(|(i, values)| (*i, distinct(values))).collect();
        filters.sort_unstable();
        let mut ranges = self.ranges.clone();
        ranges.sort_unstable();
        let timed = filters.iter().any(|(i, _)| list.filters.get(*i).is_some_and(|f| !f.counted()));
        View { filters, timed, ranges, search: self.search.clone() }
    }
}

/// A page of `R` of `store` as `q` asks, timed filters read at `now` (Unix ms, from the clock):
/// from the lists held in `orders` (every list but a view too large to name), else walked in
/// `db`.
pub async fn page<R: Record>(
    db: &Arc<Database>,
    orders: &Arc<ListOrders>,
    store: Uuid,
    q: &ListQuery,
    now: i64,
) -> ApiResult<Listed<R>> {
    let Some(held) = held_lists::<R>(q) else { return page_from_rows(&db.begin_read()?, store, q, now) };
    let tests = kind_tests::<R>();
    let shape = row_shape::<R>().ok_or_else(|| ApiError::internal("a record never listed has no lists"))?;
    let (desc, offset, limit) = (q.desc, q.offset, q.limit);
    // One list answers the page itself; several (a filter's values) each give their head up to
    // the page's end, merged in the list's order.
    let merged = held.len() > 1;
    let (from, take) = if merged { (0, offset.saturating_add(limit)) } else { (offset, limit) };
    let (mut keys, mut total) = (Vec::new(), 0);
    for name in held {
        let (db, built) = (db.clone(), name.clone());
        let (id, build) = ((store, ListName::Record(name)), move || build_list(&db, store, &built, shape, Some(tests), now));
        let (mut head, len) = orders
            .read(id, now, build, move |l| {
                let (keys, len) = l.page(desc, from, take);
                (keys.into_iter().map(Box::from).collect::<Vec<Box<[u8]>>>(), len)
            })
            .await?;
        keys.append(&mut head);
        total += len;
    }
    if merged {
        keys.sort_unstable();
        if desc {
            keys.reverse();
        }
        keys = keys.into_iter().skip(offset).take(limit).collect();
    }
    // Read after the page: the lists hold only committed writes, so every key of the page has
    // its record unless it was deleted meanwhile.
    let items = record::get_listed::<R>(&db.begin_read()?, store, q.scope, keys.iter().map(|k| &k[..]))?;
    Ok(Listed { items, total: total as u64 })
}

/// The names of the held lists that answer `q` (one, or one per value of its one filtered
/// field): `None` when `q` must be walked (a view too large to name, or a record never
/// listed).
fn held_lists<R: Record>(q: &ListQuery) -> Option<Vec<Arc<[u8]>>> {
    let list = &R::LIST;
    list.order?;
    let tag = list.sort(q.sort).or_else(|| list.sort(list.default_sort))?.tag;
    let keeps = match q.filters.as_slice() {
        _ if !q.ranges.is_empty() || q.search.is_some() => vec![Keeps::View(q.view::<R>())],
        [] => vec![Keeps::All],
        [(i, values)] if list.filters.get(*i).is_some_and(|f| f.counted()) && !values.is_empty() => {
            distinct(values).into_iter().map(|v| one_value::<R>(tag, *i, v)).collect()
        }
        _ => vec![Keeps::View(q.view::<R>())],
    };
    keeps.iter().map(|keeps| list_name::<R>(q.scope, tag, keeps)).collect()
}

/// A filter's values asked for, each once, in order: one list or view however they were written.
fn distinct(values: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let mut values = values.to_vec();
    values.sort_unstable();
    values.dedup();
    values
}

/// Whether list `name` can be built by name alone (warmed from the restart hint): all but a
/// view with a text query or a timed filter, whose tests are its record kind's.
pub fn builds_by_name(name: &[u8]) -> bool {
    ListParts::of(name).is_some_and(|p| !matches!(p.keeps, Keeps::View(View { search: Some(_), .. } | View { timed: true, .. })))
}

/// Builds the keys of record list `name` of `store` from the order rows committed when it is
/// called: the sort's rows, or a filter value's partition (the default order), or the records
/// whose summaries pass what the list keeps (`tests`: the record kind's, for a view with a query
/// or a timed filter, whose states are read at `now`, and the first moment after it one of them
/// may change found among every row), in the rows that carry the summaries (`shape`), and for
/// another sort then its rows of those records; a large list is read in parts, one per core
/// ([`read::scan_split`]). A name not made by `record::list_name` (a damaged hint)
/// builds an empty list.
pub fn build_list(
    db: &Database,
    store: Uuid,
    name: &[u8],
    shape: RowShape,
    tests: Option<KindTests>,
    now: i64,
) -> ApiResult<Built> {
    let Some(parts) = ListParts::of(name) else { return Ok(Vec::new().into()) };
    if tests.is_none() && !builds_by_name(name) {
        return Err(ApiError::internal("a view with a text query or a timed filter is built by its record's list"));
    }
    let txn = db.begin_read()?;
    let rows = sort_rows(&shape, parts.order, store, parts.scope, parts.tag);
    let (keeps, tests) = (&parts.keeps, tests.as_ref());
    // A timed view's end: the first moment after `now` at which any row read may change state.
    let until = AtomicI64::new(i64::MAX);
    let timed = tests.filter(|_| keeps.is_timed());
    let passes = |carried: &[u8]| -> ApiResult<bool> {
        let summary = shape.summary_of(carried)?;
        if let Some(next) = timed.and_then(|t| keeps.changes(&summary, t, now)) {
            until.fetch_min(next, Ordering::Relaxed);
        }
        Ok(keeps.accepts(&summary, store, tests, now))
    };
    let threads = read::build_threads();
    let keys_under = |(table, prefix): &(StoreTable, Vec<u8>), keep: &KeepRow| {
        read::scan_split(&txn, *table, prefix, threads, Keys::default, |keys, k, v| {
            if keep(k, v)? {
                keys.push(k.get(prefix.len()..).unwrap_or_default());
            }
            Ok(())
        })
    };
    let built = match keeps {
        Keeps::All => keys_under(&rows, &|_, _| Ok(true))?,
        Keeps::Partition(i, value) => {
            keys_under(&(parts.order, partition_prefix(store, parts.scope, *i, value)), &|_, _| Ok(true))?
        }
        Keeps::Summaries(..) | Keeps::View(_) if parts.tag == shape.summary_tag => keys_under(&rows, &|_, v| passes(v))?,
        Keeps::Summaries(..) | Keeps::View(_) => {
            let carriers = sort_rows(&shape, parts.order, store, parts.scope, shape.summary_tag);
            let passed = passing(&txn, &carriers, shape, &passes)?;
            keys_under(&rows, &|k, _| Ok(passed.contains(shape.record_of(k))))?
        }
    };
    let until = until.into_inner();
    Ok(Built { parts: built, until: (until != i64::MAX).then_some(until) })
}

/// Whether a list keeps an order row, by its key and value.
type KeepRow<'a> = dyn Fn(&[u8], &[u8]) -> ApiResult<bool> + Sync + 'a;

/// The records (their key tails) whose rows `carriers` (table and prefix), those of the sort
/// that carries the summaries, carry one that `passes`: what a list tested in another order
/// keeps.
fn passing(
    txn: &ReadTransaction,
    (table, carriers): &(StoreTable, Vec<u8>),
    shape: RowShape,
    passes: &(dyn Fn(&[u8]) -> ApiResult<bool> + Sync),
) -> ApiResult<HashSet<Vec<u8>>> {
    let parts = read::scan_split(txn, *table, carriers, read::build_threads(), Vec::new, |kept, k, v| {
        if passes(v)? {
            kept.push(shape.record_of(k).to_vec());
        }
        Ok(())
    })?;
    Ok(parts.into_iter().flatten().collect())
}

/// A page of `R` read from its order rows in redb alone (walked, as the module says, when no
/// held list answers; a migration's tests read their rebuilt rows so).
pub fn page_from_rows<R: Record>(txn: &ReadTransaction, store: Uuid, q: &ListQuery, now: i64) -> ApiResult<Listed<R>> {
    let list = &R::LIST;
    let Some(order) = list.order else { return Ok(Listed { items: Vec::new(), total: 0 }) };
    let shape = row_shape::<R>().ok_or_else(|| ApiError::internal("a listed record names no sort that carries its summaries"))?;
    let sort = list.sort(q.sort).or_else(|| list.sort(list.default_sort));
    let carriers = sort_rows(&shape, order, store, q.scope, shape.summary_tag);
    // One value of one counted filter, in the default order, and nothing else to test: exactly
    // the value's partition (its rows are keys alone, so a query with more to test reads the
    // rows that carry the summary).
    if sort.is_some_and(|s| s.name == list.default_sort)
        && q.ranges.is_empty()
        && q.search.is_none()
        && let [(i, values)] = q.filters.as_slice()
        && let [value] = values.as_slice()
        && let Some(f) = list.filters.get(*i).filter(|f| f.counted())
    {
        let count = read::counter(txn, COUNTERS, &value_key::<R>(store, q.scope, f.name, value))?;
        let plain = ListQuery { filters: Vec::new(), ..q.clone() };
        let rows = (order, partition_prefix(store, q.scope, *i, value));
        return walk::<R>(txn, store, &Walked { rows, carriers, shape }, &plain, Some(count), now);
    }
    let rows = sort_rows(&shape, order, store, q.scope, sort.map(|s| s.tag).unwrap_or(0));
    // The total, when counters hold it: no filter, or one filter field with any of its values.
    let counted = match q.filters.as_slice() {
        _ if !q.ranges.is_empty() || q.search.is_some() => None,
        [] => Some(read::counter(txn, COUNTERS, &total_key::<R>(store, q.scope))?),
        [(i, values)] if list.filters.get(*i).is_some_and(|f| f.counted()) => {
            let name = list.filters.get(*i).map(|f| f.name).unwrap_or_default();
            let mut n = 0u64;
            for v in values {
                n = n.saturating_add(read::counter(txn, COUNTERS, &value_key::<R>(store, q.scope, name, v))?);
            }
            Some(n)
        }
        _ => None,
    };
    walk::<R>(txn, store, &Walked { rows, carriers, shape }, q, counted, now)
}

/// What a walk reads: its page's rows and the rows that carry the summaries (each a table and
/// a prefix), laid out as `shape` says.
struct Walked {
    rows: (StoreTable, Vec<u8>),
    carriers: (StoreTable, Vec<u8>),
    shape: RowShape,
}

/// The page of `q` among the rows `walked.rows`: read from its offset when `q` has no filter
/// left, else walked, each record's summary checked (in a sort whose rows do not carry them,
/// the records whose carrying rows pass are found first). `counted` is the total when known (a
/// plain walk needs it; a filtered one then stops at the page's end).
fn walk<R: Record>(
    txn: &ReadTransaction,
    store: Uuid,
    walked: &Walked,
    q: &ListQuery,
    counted: Option<u64>,
    now: i64,
) -> ApiResult<Listed<R>> {
    let ((table, prefix), shape) = (&walked.rows, walked.shape);
    // The page's order rows: each ends with its record's key tail.
    let mut rows: Vec<Vec<u8>> = Vec::with_capacity(q.limit);
    let total = if q.is_plain() {
        read::scan(txn, *table, prefix, q.desc, q.offset, q.limit, |k, _| {
            rows.push(k.to_vec());
            Ok(())
        })?;
        counted.unwrap_or(0)
    } else {
        let window = q.offset as u64..q.offset.saturating_add(q.limit) as u64;
        let mut kept = 0u64;
        // With the total known, the walk stops once the page is full.
        let stop_at = if counted.is_some() { window.end } else { u64::MAX };
        let passes = |carried: &[u8]| Ok(q.accepts::<R>(&shape.summary_of(carried)?, store, now));
        let carriers = &walked.carriers;
        let in_carriers = (carriers.0.index, carriers.1.as_slice()) == (table.index, prefix.as_slice());
        let passed = if in_carriers { None } else { Some(passing(txn, carriers, shape, &passes)?) };
        read::walk(txn, *table, prefix, q.desc, |k, v| {
            let accepted = match &passed {
                Some(passed) => passed.contains(shape.record_of(k)),
                None => passes(v)?,
            };
            if accepted {
                if window.contains(&kept) {
                    rows.push(k.to_vec());
                }
                kept += 1;
            }
            Ok(kept < stop_at)
        })?;
        counted.unwrap_or(kept)
    };
    let items = record::get_listed::<R>(txn, store, q.scope, rows.iter().map(Vec::as_slice))?;
    Ok(Listed { items, total })
}
